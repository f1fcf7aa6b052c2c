"""Posting money: balanced transactions, idempotent retries, remembered refusals, batches."""

from __future__ import annotations

import grpc
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.grpc_errors import error_info, error_reason
from socai_ledger.journal_write import ROWS_BY_ARRAY_MAX
from tests.integration.ledger.conftest import Ledger, balances, deposit, fund_escrow, journal_snapshot, transaction

pytestmark = pytest.mark.integration


async def post(ledger: Ledger, tx: pb.TransactionInput, caller: str = "settlement") -> pb.PostResult:
    reply = await ledger.stub(caller).PostTransaction(pb.PostTransactionRequest(transaction=tx))
    return reply.result


async def refused(ledger: Ledger, tx: pb.TransactionInput, caller: str = "settlement") -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await post(ledger, tx, caller)
    return caught.value


async def test_a_hand_settles_atomically_with_balances_after_and_versions(ledger: Ledger):
    await fund_escrow(ledger, "t1", "alice", 1_000)
    result = await post(
        ledger,
        transaction(
            "settle:t1-h1",
            ("escrow:t1:alice", -300),
            ("escrow:t1:bob", 285),
            ("house:fees", 15),
            kind="settlement",
            reference="t1-h1",
            open_accounts=True,
            game="holdem",
        ),
    )
    assert result.status == pb.POST_STATUS_APPLIED
    tx = result.transaction
    assert (tx.idempotency_key, tx.kind, tx.reference, dict(tx.metadata)) == (
        "settle:t1-h1",
        "settlement",
        "t1-h1",
        {"game": "holdem"},
    )
    assert [(e.account_id, e.amount_gold, e.balance_after_gold, e.account_version) for e in tx.entries] == [
        ("escrow:t1:alice", -300, 700, 2),
        ("escrow:t1:bob", 285, 285, 1),
        ("house:fees", 15, 15, 1),
    ]
    assert tx.journal_seq == 2 and all(e.journal_seq == 2 and e.transaction_id == tx.transaction_id for e in tx.entries)
    assert balances(
        ledger.settings.database_url or "", ["escrow:t1:alice", "escrow:t1:bob", "house:fees", "external:cashier"]
    ) == {
        "escrow:t1:alice": 700,
        "escrow:t1:bob": 285,
        "house:fees": 15,
        "external:cashier": -1_000,
    }


async def test_a_retry_with_the_same_key_returns_the_original_result_and_applies_nothing(ledger: Ledger):
    await fund_escrow(ledger, "t1", "alice", 500)
    request = transaction("settle:t1-h2", ("escrow:t1:alice", -200), ("house:fees", 200))
    first = await post(ledger, request)
    before = journal_snapshot(ledger.settings.database_url or "")
    again = await post(ledger, request)
    # A retry may list metadata or entries in another order: the request hash is canonical.
    reordered = transaction("settle:t1-h2", ("house:fees", 200), ("escrow:t1:alice", -200))
    third = await post(ledger, reordered)
    assert first.status == pb.POST_STATUS_APPLIED
    assert again.status == third.status == pb.POST_STATUS_REPLAYED
    assert again.transaction == first.transaction == third.transaction
    assert journal_snapshot(ledger.settings.database_url or "") == before


async def test_the_same_key_with_another_request_is_refused_and_changes_nothing(ledger: Ledger):
    await fund_escrow(ledger, "t1", "alice", 500)
    await post(ledger, transaction("settle:t1-h3", ("escrow:t1:alice", -200), ("house:fees", 200)))
    before = journal_snapshot(ledger.settings.database_url or "")
    for other in (
        transaction("settle:t1-h3", ("escrow:t1:alice", -201), ("house:fees", 201)),
        transaction("settle:t1-h3", ("escrow:t1:alice", -200), ("house:fees", 200), reference="another hand"),
        transaction("settle:t1-h3", ("escrow:t1:alice", -200), ("house:fees", 200), note="changed"),
    ):
        err = await refused(ledger, other)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(err) == "IDEMPOTENCY_KEY_REUSED"
    assert journal_snapshot(ledger.settings.database_url or "") == before


async def test_a_refusal_is_remembered_so_a_retry_can_never_turn_it_into_a_success(ledger: Ledger):
    await deposit(ledger, "carol", 100)
    request = transaction("join:t1:carol", ("player:carol", -500), ("escrow:t1:carol", 500), open_accounts=True)
    first = await refused(ledger, request, "table")
    assert first.code() == grpc.StatusCode.FAILED_PRECONDITION and error_reason(first) == "INSUFFICIENT_FUNDS"

    await deposit(ledger, "carol", 1_000)  # now she could pay …
    again = await refused(ledger, request, "table")  # … but the answer under this key stays the same
    assert again.code() == grpc.StatusCode.FAILED_PRECONDITION and error_reason(again) == "INSUFFICIENT_FUNDS"
    info = error_info(again)
    assert info is not None and info.metadata["remembered"] == "true"

    other = await refused(ledger, transaction("join:t1:carol", ("player:carol", -50), ("escrow:t1:carol", 50)), "table")
    assert error_reason(other) == "IDEMPOTENCY_KEY_REUSED"
    fresh = await post(
        ledger,
        transaction("join:t1:carol#2", ("player:carol", -500), ("escrow:t1:carol", 500), open_accounts=True),
        "table",
    )
    assert fresh.status == pb.POST_STATUS_APPLIED
    assert balances(ledger.settings.database_url or "", ["player:carol", "escrow:t1:carol"]) == {
        "player:carol": 600,
        "escrow:t1:carol": 500,
    }


async def test_an_unknown_account_is_not_found_unless_the_request_opens_well_known_kinds(ledger: Ledger):
    await fund_escrow(ledger, "t9", "dave", 100)
    before = journal_snapshot(ledger.settings.database_url or "")
    err = await refused(ledger, transaction("settle:t9-h1", ("escrow:t9:dave", -10), ("pot:t9", 10)))
    assert err.code() == grpc.StatusCode.NOT_FOUND and error_reason(err) == "ACCOUNT_NOT_FOUND"
    after = journal_snapshot(ledger.settings.database_url or "")
    assert (after.accounts, after.entries, after.journal_head) == (before.accounts, before.entries, before.journal_head)

    opened = await post(
        ledger, transaction("settle:t9-h2", ("escrow:t9:dave", -10), ("pot:t9", 10), open_accounts=True)
    )
    assert opened.status == pb.POST_STATUS_APPLIED
    account = (await ledger.stub().GetAccount(pb.GetAccountRequest(account_id="pot:t9"))).account
    assert (account.kind, account.balance_gold, account.version, account.may_go_negative) == ("pot", 10, 1, False)


async def test_a_refused_posting_opens_no_account(ledger: Ledger):
    await fund_escrow(ledger, "t1", "erin", 10)
    err = await refused(
        ledger, transaction("settle:t1-h1", ("escrow:t1:erin", -50), ("guild:g1", 50), open_accounts=True)
    )
    assert error_reason(err) == "INSUFFICIENT_FUNDS"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ledger.stub().GetAccount(pb.GetAccountRequest(account_id="guild:g1"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_each_item_of_a_batch_is_atomic_on_its_own_with_a_result_per_item(ledger: Ledger):
    await deposit(ledger, "alice", 1_000)
    items = [
        transaction("b1", ("player:alice", -400), ("player:bob", 400), open_accounts=True),  # applied
        transaction("b2", ("player:alice", -700), ("player:bob", 700)),  # only 600 left: refused
        transaction("b3", ("player:bob", -100), ("player:carol", 100), open_accounts=True),  # sees b1's credit
        transaction("b4", ("player:alice", 0), ("player:bob", 0)),  # malformed: refused alone
        transaction("b1", ("player:alice", -400), ("player:bob", 400), open_accounts=True),  # same key, same request
        transaction("b3", ("player:bob", -999), ("player:carol", 999)),  # same key, another request
        transaction("b5", ("player:alice", -600), ("player:bob", 600)),  # exactly what is left: applied
    ]
    reply = await ledger.stub("backend").PostTransactions(pb.PostTransactionsRequest(transactions=items))
    got = [(pb.PostStatus.Name(r.status), r.error_reason) for r in reply.results]
    assert got == [
        ("POST_STATUS_APPLIED", ""),
        ("POST_STATUS_REJECTED", "INSUFFICIENT_FUNDS"),
        ("POST_STATUS_APPLIED", ""),
        ("POST_STATUS_REJECTED", "ZERO_AMOUNT"),
        ("POST_STATUS_REPLAYED", ""),
        ("POST_STATUS_REJECTED", "IDEMPOTENCY_KEY_REUSED"),
        ("POST_STATUS_APPLIED", ""),
    ]
    assert reply.results[4].transaction == reply.results[0].transaction
    assert [r.transaction.journal_seq for r in reply.results if r.status == pb.POST_STATUS_APPLIED] == [2, 3, 4]
    assert balances(ledger.settings.database_url or "", ["player:alice", "player:bob", "player:carol"]) == {
        "player:alice": 0,
        "player:bob": 900,
        "player:carol": 100,
    }
    # The refusal of b2 is remembered; the malformed b4 left nothing behind.
    retry = await ledger.stub("backend").PostTransactions(pb.PostTransactionsRequest(transactions=items[1:2]))
    assert (retry.results[0].status, retry.results[0].error_reason) == (pb.POST_STATUS_REJECTED, "INSUFFICIENT_FUNDS")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ledger.stub().GetTransaction(pb.GetTransactionRequest(idempotency_key="b4"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_deposit_withdraw_and_transfer_move_money_through_two_legs(ledger: Ledger):
    cashier = ledger.stub("cashier")
    dep = (await cashier.Deposit(pb.DepositRequest(idempotency_key="d1", player_id="frank", amount_gold=900))).result
    assert [(e.account_id, e.amount_gold) for e in dep.transaction.entries] == [
        ("external:cashier", -900),
        ("player:frank", 900),
    ]
    assert dep.transaction.kind == "deposit"
    moved = (
        await ledger.stub("table").Transfer(
            pb.TransferRequest(
                idempotency_key="join:t1:frank",
                from_account_id="player:frank",
                to_account_id="escrow:t1:frank",
                amount_gold=600,
                kind="buy_in",
                open_accounts=True,
            )
        )
    ).result
    assert moved.status == pb.POST_STATUS_APPLIED and moved.transaction.kind == "buy_in"
    out = (await cashier.Withdraw(pb.WithdrawRequest(idempotency_key="w1", player_id="frank", amount_gold=300))).result
    assert out.transaction.kind == "withdrawal"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await cashier.Withdraw(pb.WithdrawRequest(idempotency_key="w2", player_id="frank", amount_gold=1))
    assert error_reason(caught.value) == "INSUFFICIENT_FUNDS"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await cashier.Withdraw(pb.WithdrawRequest(idempotency_key="w3", player_id="nobody", amount_gold=1))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert balances(ledger.settings.database_url or "", ["player:frank", "escrow:t1:frank", "external:cashier"]) == {
        "player:frank": 0,
        "escrow:t1:frank": 600,
        "external:cashier": -600,
    }


# Enough transactions (two entries each) that the entry rows pass ROWS_BY_ARRAY_MAX: binary COPY.
COPY_SIZE = ROWS_BY_ARRAY_MAX // 2 + 5


@pytest.mark.parametrize("size", [3, COPY_SIZE], ids=["small batch (array literals)", "large batch (binary COPY)"])
async def test_text_and_metadata_come_back_exactly_whichever_way_the_rows_were_written(ledger: Ledger, size: int):
    await deposit(ledger, "alice", 1_000_000)
    awkward = "back\\slash \"quotes\" 'apostrophe' {braces},commas; ünïcödé 金 \\x1f"
    items = [
        transaction(
            f"k\\{i}\"{{}}'",
            ("player:alice", -(i + 1)),
            ("player:bob", i + 1),
            kind="settle.v2",
            reference=f"{awkward} #{i}",
            open_accounts=True,
            note=awkward,
            empty="",
        )
        for i in range(size)
    ]
    # One refusal in the same batch: its row (status, reason, message) goes the same way.
    overdraw = transaction(f"over'{awkward}", ("player:alice", -10_000_000), ("player:bob", 10_000_000), note=awkward)
    reply = await ledger.stub("backend").PostTransactions(pb.PostTransactionsRequest(transactions=[*items, overdraw]))
    assert [r.status for r in reply.results] == [pb.POST_STATUS_APPLIED] * size + [pb.POST_STATUS_REJECTED]
    assert reply.results[-1].error_reason == "INSUFFICIENT_FUNDS"
    reader = ledger.stub("auditor")
    for sent, result in zip(items, reply.results[:size], strict=True):
        stored = (
            await reader.GetTransaction(pb.GetTransactionRequest(idempotency_key=sent.idempotency_key))
        ).transaction
        assert stored == result.transaction
        assert (stored.reference, dict(stored.metadata)) == (sent.reference, {"note": awkward, "empty": ""})
    again = await ledger.stub("backend").PostTransactions(pb.PostTransactionsRequest(transactions=[overdraw]))
    assert again.results[0].status == pb.POST_STATUS_REJECTED
    refusal = reply.results[-1]
    assert (again.results[0].error_reason, again.results[0].error_message) == (
        refusal.error_reason,
        refusal.error_message,
    )
    report = await reader.VerifyJournal(pb.VerifyJournalRequest())
    assert report.ok and report.entries_checked == 2 + 2 * size


async def test_text_with_a_nul_is_refused_and_changes_nothing(ledger: Ledger):
    await deposit(ledger, "nul", 100)
    before = journal_snapshot(ledger.settings.database_url or "")
    bad = transaction("nul-1", ("player:nul", -1), ("pot:t1", 1), open_accounts=True, reference="a\x00b")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ledger.stub("settlement").PostTransaction(pb.PostTransactionRequest(transaction=bad))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert journal_snapshot(ledger.settings.database_url or "") == before
