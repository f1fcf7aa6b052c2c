"""Who may call what, and who may move money in from the outside world."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Limits
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_info, error_reason
from socai_ledger.server import ALLOW
from tests.integration.ledger.conftest import Ledger, balances, deposit, ledger_settings, transaction

pytestmark = pytest.mark.integration

CALLERS = ("table", "settlement", "cashier", "auditor", "backend", "operator")
# One harmless request per method; it may fail for other reasons (NOT_FOUND …) once allowed.
REQUESTS: dict[str, Any] = {
    "OpenAccount": pb.OpenAccountRequest(account_id="player:z"),
    "GetAccount": pb.GetAccountRequest(account_id="house:fees"),
    "ListAccounts": pb.ListAccountsRequest(),
    "PostTransaction": pb.PostTransactionRequest(transaction=transaction("k", ("player:x", -1), ("player:y", 1))),
    "PostTransactions": pb.PostTransactionsRequest(transactions=[transaction("k", ("player:x", -1), ("player:y", 1))]),
    "Deposit": pb.DepositRequest(idempotency_key="k", player_id="z", amount_gold=1),
    "Withdraw": pb.WithdrawRequest(idempotency_key="k2", player_id="nobody", amount_gold=1),
    "Transfer": pb.TransferRequest(
        idempotency_key="k3", from_account_id="player:x", to_account_id="player:y", amount_gold=1
    ),
    "GetTransaction": pb.GetTransactionRequest(idempotency_key="nothing"),
    "ListEntries": pb.ListEntriesRequest(account_id="house:fees"),
    "GetBalanceAt": pb.GetBalanceAtRequest(
        account_id="house:fees", transaction_id="01900000-0000-7000-8000-000000000000"
    ),
    "VerifyJournal": pb.VerifyJournalRequest(),
    "TrialBalance": pb.TrialBalanceRequest(),
    "ListTransactions": pb.ListTransactionsRequest(),
    "Hold": pb.HoldRequest(account_id="house:bank", hand_id="t1-h1", amount_gold=1),
    "FinalizeHold": pb.FinalizeHoldRequest(account_id="house:bank", hand_id="t1-h1", amount_gold=0),
    "ReleaseHold": pb.ReleaseHoldRequest(account_id="house:bank", hand_id="t1-h1", reason="void"),
    "ListHolds": pb.ListHoldsRequest(account_id="house:bank"),
}


def test_every_method_has_an_allow_list():
    methods = {m.name for m in pb.DESCRIPTOR.services_by_name["LedgerService"].methods}
    assert set(ALLOW) == methods == set(REQUESTS)


async def test_each_caller_reaches_exactly_the_methods_of_its_allow_list(ledger: Ledger):
    outcomes: dict[tuple[str, str], bool] = {}
    for caller in CALLERS:
        stub = ledger.stub(caller)
        for method, request in REQUESTS.items():
            try:
                await getattr(stub, method)(request)
                allowed = True
            except grpc.aio.AioRpcError as exc:
                # The allow-list refuses with reason PERMISSION_DENIED; a caller that may call
                # the method can still be refused this posting by its account rules
                # (ACCOUNT_NOT_ALLOWED …: test_caller_rules.py).
                allowed = not (
                    exc.code() == grpc.StatusCode.PERMISSION_DENIED and error_reason(exc) == "PERMISSION_DENIED"
                )
            outcomes[(caller, method)] = allowed
    expected = {
        (caller, method): "*" in ALLOW[method] or caller in ALLOW[method] for caller in CALLERS for method in REQUESTS
    }
    assert outcomes == expected
    # The documented policy, spelled out for the methods that move money.
    assert {c for c in CALLERS if outcomes[(c, "PostTransactions")]} == {"table", "settlement", "backend"}
    assert {c for c in CALLERS if outcomes[(c, "Deposit")]} == {"cashier", "operator"}
    assert {c for c in CALLERS if outcomes[(c, "VerifyJournal")]} == {"auditor", "operator", "settlement", "backend"}
    assert all(outcomes[(c, "GetAccount")] for c in CALLERS)
    # The table holds the house bank for its hands; only an operator releases a hold by hand.
    assert {c for c in CALLERS if outcomes[(c, "Hold")]} == {"table"}
    assert {c for c in CALLERS if outcomes[(c, "FinalizeHold")]} == {"table"}
    assert {c for c in CALLERS if outcomes[(c, "ReleaseHold")]} == {"operator"}


@pytest.mark.parametrize("token", [None, "not-a-token"])
async def test_no_token_or_a_wrong_token_is_unauthenticated(ledger: Ledger, token: str | None):
    async with channel(ledger.address, token) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await pb_grpc.LedgerServiceStub(ch).GetAccount(pb.GetAccountRequest(account_id="house:fees"))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_only_the_cashier_or_an_operator_moves_money_through_external_accounts(ledger: Ledger):
    await deposit(ledger, "alice", 100)
    mint = transaction("mint", ("external:cashier", -1_000), ("player:alice", 1_000))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ledger.stub("backend").PostTransaction(pb.PostTransactionRequest(transaction=mint))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_reason(caught.value) == "EXTERNAL_ACCOUNT_RESERVED"

    batch = await ledger.stub("settlement").PostTransactions(pb.PostTransactionsRequest(transactions=[mint]))
    assert (batch.results[0].status, batch.results[0].error_reason) == (
        pb.POST_STATUS_REJECTED,
        "EXTERNAL_ACCOUNT_RESERVED",
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ledger.stub("table").Transfer(
            pb.TransferRequest(
                idempotency_key="cash-out",
                from_account_id="player:alice",
                to_account_id="external:cashier",
                amount_gold=1,
            )
        )
    assert error_reason(caught.value) == "EXTERNAL_ACCOUNT_RESERVED"

    # An operator funds the house bankroll from the outside world.
    funded = await ledger.stub("operator").Transfer(
        pb.TransferRequest(
            idempotency_key="fund-bank",
            from_account_id="external:cashier",
            to_account_id="house:bank",
            amount_gold=50_000,
            kind="deposit",
        )
    )
    assert funded.result.status == pb.POST_STATUS_APPLIED
    assert balances(ledger.settings.database_url or "", ["player:alice", "house:bank", "external:cashier"]) == {
        "player:alice": 100,
        "house:bank": 50_000,
        "external:cashier": -50_100,
    }


async def test_a_caller_over_its_calls_per_second_is_refused_and_nothing_is_posted(
    nats_url: str, migrated_database_url: str
):
    """Issue 27: no caller may take all of the ledger. Ten calls a second with a burst of
    twenty (SOCAI_LIMIT_CALLER_CALLS_PER_S); another caller is not held back."""
    limited = Ledger(ledger_settings(nats_url, migrated_database_url, limits=Limits(caller_calls_per_s=10)))
    await limited.start()
    try:
        cashier = limited.stub("cashier")
        outcomes: list[object] = []
        for n in range(30):
            try:
                await cashier.Deposit(pb.DepositRequest(idempotency_key=f"rate-{n}", player_id="rita", amount_gold=1))
                outcomes.append("posted")
            except grpc.aio.AioRpcError as exc:
                outcomes.append(exc)
        refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
        assert 1 <= len(refused) <= 10, outcomes  # the burst of 20 (plus what refilled meanwhile) was let in
        for error in refused:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            info = error_info(error)
            assert info is not None and info.reason == "RATE_LIMITED"
            assert info.metadata["limit"] == "SOCAI_LIMIT_CALLER_CALLS_PER_S" and info.metadata["max"] == "10"
            assert int(info.metadata["retry_after_ms"]) > 0
        assert balances(migrated_database_url, ["player:rita"]) == {"player:rita": 30 - len(refused)}
        # the auditor is another caller: not held back by the cashier's calls
        reply = await limited.stub("auditor").GetAccount(pb.GetAccountRequest(account_id="player:rita"))
        assert reply.account.balance_gold == 30 - len(refused)
    finally:
        await limited.stop()
