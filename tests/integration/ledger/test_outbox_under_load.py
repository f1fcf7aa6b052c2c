"""The outbox keeps up with a steady load: its lag stays bounded while postings continue and
is zero soon after they stop (issue 17, defect 5: a pause per outbox range let the relay fall
behind for good when ranges held a transaction or two)."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from nats.js import JetStreamContext

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai_ledger import outbox
from tests.integration.ledger.conftest import Ledger, deposit, transaction
from tests.integration.ledger.test_outbox import Follower, check_delivery, js  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration

# A steady load of about 400 payments a second (16 callers, each posting one and resting
# 40 ms) for about 10 seconds: far below what the relay publishes, and far more than it may
# fall behind, so a relay that does not keep up exceeds the bound long before the end.
CALLERS = 16
REST_S = 0.04
POSTINGS = 4_000
LAG_MAX = outbox.LAG_BOUND + outbox.CHUNK_MAX  # past LAG_BOUND the relay no longer yields


def outbox_lag(url: str) -> int:
    """Committed transactions the relay has not published yet (what socai_ledger_outbox_lag shows)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select (select coalesce(max(journal_seq), 0) from socai_ledger.transactions) "
            "- (select published_seq from socai_ledger.outbox_progress)"
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.serial  # the relay shares this process's CPU: the lag bound needs the machine
@pytest.mark.heavy  # ~15 s alone: make test-heavy runs it (the lag bound under load: test_outbox_backpressure)
async def test_the_relay_keeps_up_with_a_steady_load_and_catches_up_when_it_stops(
    ledger: Ledger,
    js: JetStreamContext,  # noqa: F811 (the fixture)
) -> None:
    url = ledger.settings.database_url or ""
    await deposit(ledger, "alice", 10**12)
    stub = ledger.stub("backend")
    numbers = iter(range(POSTINGS))

    async def caller() -> None:
        # One payment a call: the batcher writes many small batches, each its own outbox range.
        for n in numbers:
            request = pb.PostTransactionRequest(
                transaction=transaction(f"load-{n}", ("player:alice", -1), (f"player:p{n % 50}", 1), open_accounts=True)
            )
            reply = await stub.PostTransaction(request)
            assert reply.result.status == pb.POST_STATUS_APPLIED
            await asyncio.sleep(REST_S)

    lags: list[int] = []
    load = asyncio.gather(*(caller() for _ in range(CALLERS)))
    while not load.done():
        lags.append(await asyncio.to_thread(outbox_lag, url))
        await asyncio.wait({load}, timeout=0.1)
    await load

    relay: Any = ledger.app.relay  # type: ignore[union-attr]
    assert len(lags) >= 10, "the load lasted a while and the lag was sampled during it"
    assert max(lags) <= LAG_MAX, f"the lag stayed bounded: {lags}"
    # (A bound on the wait, not a measure: the lag must reach 0.) The relay's own cursor is
    # read too: the database shows the last chunk marked a moment before the relay, which
    # shares this event loop, has resumed to note it.
    for _ in range(300):
        if outbox_lag(url) == 0 and relay.published_seq == POSTINGS + 1:
            break
        await asyncio.sleep(0.1)
    assert outbox_lag(url) == 0
    assert relay.published_seq == POSTINGS + 1
    messages = await Follower(js, ledger).read(POSTINGS + 1, timeout_s=60)
    check_delivery(messages, url)


def test_the_pending_ranges_are_one_span_up_to_the_first_gap() -> None:
    # A round publishes the span, cut into chunks by size and time, not range by range.
    assert outbox.pending_through(10, [(11, 11), (12, 13), (14, 14)]) == 14
    assert outbox.pending_through(10, [(8, 12), (13, 13)]) == 13  # a range partly published
    assert outbox.pending_through(10, [(11, 12), (15, 16)]) == 12
    assert outbox.pending_through(10, [(12, 12)]) == 10  # nothing continues the cursor
    assert outbox.pending_through(10, []) == 10
