"""A look-up of something that does not exist is an answer, not a server fault (issue 17,
defect 7: each live audit made the ledger log ~1,600 TRANSACTION_NOT_FOUND warnings, one per
hand it looked up that had no transaction). The audit still reports the hands the ledger
lacks, and counts those it looked up in vain."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import structlog
from structlog.testing import capture_logs

from socai.audit.auditor import LEDGER_MISSING, reconcile, verify
from socai.audit.export import RawEvent
from socai.events import codec
from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra import grpc_server
from socai_settlement.convert import transaction_input
from tests.integration.ledger.conftest import Ledger
from tests.support.settlement import wait_for
from tests.support.synthetic import fund, simulate

pytestmark = pytest.mark.integration

LOUD = ("warning", "error", "critical")


@pytest.fixture
def info_logs() -> Iterator[list[dict[str, Any]]]:
    """Every log entry of this process at INFO and above, as the service writes them."""
    previous = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=previous)


async def test_looking_up_missing_transactions_logs_no_warning_and_is_sampled(
    ledger: Ledger, info_logs: list[dict[str, Any]]
) -> None:
    stub = ledger.stub("auditor")
    lookups = 3 * grpc_server.OK_LOG_EVERY
    for n in range(lookups):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetTransaction(pb.GetTransactionRequest(idempotency_key=f"settle:nowhere-h{n}"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND  # the caller still hears it
    not_found = [e for e in info_logs if e.get("event") == "rpc" and e.get("status") == "NOT_FOUND"]
    assert not [e for e in info_logs if e["log_level"] in LOUD], "a NOT_FOUND answer is not a server warning"
    # The first and one in OK_LOG_EVERY after it (a call slower than SLOW_RPC_S on a loaded
    # machine adds one): the metrics count every one.
    assert 1 <= len(not_found) < lookups // 10
    assert all(e["log_level"] == "info" and e["reason"] == "TRANSACTION_NOT_FOUND" for e in not_found)

    # A real failure is still a warning, every time.
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.GetTransaction(pb.GetTransactionRequest())  # neither an id nor a key

    # The server logs a call once it has ended, after its status went out: the caller can
    # hear the answer before the line is written (CI saw [] once).
    async def written() -> bool:
        return any(e["log_level"] in LOUD for e in info_logs)

    await wait_for(written, 5, "the failed call's log line")
    loud = [e for e in info_logs if e["log_level"] in LOUD]
    assert [(e["event"], e["status"]) for e in loud] == [("rpc", "INVALID_ARGUMENT")]


async def test_a_live_audit_reports_the_hand_missing_from_the_ledger_without_a_warning(
    ledger: Ledger, info_logs: list[dict[str, Any]]
) -> None:
    sim = simulate(8, ("holdem", "taixiu"), seed=17, hands_per_table=2)
    await fund(ledger.stub("cashier"), sim)
    moving = [hand for hand in sim.hands if hand.settlement.entries()]
    unposted = moving[0]
    posted = [transaction_input(hand.settlement) for hand in moving[1:]]
    reply = await ledger.stub("settlement").PostTransactions(pb.PostTransactionsRequest(transactions=posted))
    assert all(r.status == pb.POST_STATUS_APPLIED for r in reply.results)

    audit = verify([RawEvent(0, "", codec.to_proto(e)) for e in sim.events()], source="sim")
    info_logs.clear()
    await reconcile(audit, ledger.stub("auditor"), ledger_name="live")
    report = audit.report

    assert not [e for e in info_logs if e["log_level"] in LOUD], "the audit's look-ups make no warning"
    # The hand is named; its table's escrows and the account totals disagree accordingly.
    assert {(m.hand_id, m.reason) for m in report.mismatches if m.hand_id} == {(unposted.hand_id, LEDGER_MISSING)}
    no_gold = len(sim.hands) - len(moving)
    assert report.hands_without_transaction == no_gold + 1
    assert f"{no_gold + 1:,} hands have no transaction: {no_gold:,} move no gold, 1 missing" in report.render()
    assert report.as_json()["hands_without_transaction"] == no_gold + 1
