"""Accounts, statements, balances in the past, transactions by id or key."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import grpc
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.grpc_errors import error_info, error_reason
from tests.integration.ledger.conftest import Ledger, deposit, transaction

pytestmark = pytest.mark.integration


async def test_open_account_is_idempotent_and_knows_who_may_go_negative(ledger: Ledger):
    table = ledger.stub("table")
    first = await table.OpenAccount(pb.OpenAccountRequest(account_id="escrow:t1:alice"))
    again = await table.OpenAccount(pb.OpenAccountRequest(account_id="escrow:t1:alice"))
    assert first.created and not again.created
    assert first.account == again.account
    assert (first.account.kind, first.account.balance_gold, first.account.version) == ("escrow", 0, 0)
    assert not first.account.may_go_negative
    cashier = await table.OpenAccount(pb.OpenAccountRequest(account_id="external:cashier"))
    assert not cashier.created and cashier.account.may_go_negative  # made by the migration


async def test_get_account_of_an_unknown_id_is_not_found(ledger: Ledger):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ledger.stub("auditor").GetAccount(pb.GetAccountRequest(account_id="player:ghost"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(caught.value) == "ACCOUNT_NOT_FOUND"


async def test_list_accounts_by_kind_and_by_prefix_page_by_page(ledger: Ledger):
    table = ledger.stub("table")
    for account_id in ("player:a1", "player:a2", "player:a3", "player:b1", "escrow:t1:a1", "escrow:t2:a1"):
        await table.OpenAccount(pb.OpenAccountRequest(account_id=account_id))
    reader = ledger.stub("auditor")

    async def all_pages(request: pb.ListAccountsRequest) -> list[list[str]]:
        pages = []
        while True:
            reply = await reader.ListAccounts(request)
            pages.append([a.account_id for a in reply.accounts])
            if not reply.next_page_token:
                return pages
            request.page_token = reply.next_page_token

    assert await all_pages(pb.ListAccountsRequest(kind="player", page_size=2)) == [
        ["player:a1", "player:a2"],
        ["player:a3", "player:b1"],
    ]
    assert await all_pages(pb.ListAccountsRequest(id_prefix="player:a", page_size=2)) == [
        ["player:a1", "player:a2"],
        ["player:a3"],
    ]
    assert await all_pages(pb.ListAccountsRequest(id_prefix="escrow:t1:")) == [["escrow:t1:a1"]]
    everything = await all_pages(pb.ListAccountsRequest())
    assert everything[0][:3] == ["escrow:t1:a1", "escrow:t2:a1", "external:cashier"]
    assert len(everything[0]) == 9


async def test_a_statement_lists_entries_newest_first_with_a_cursor(ledger: Ledger):
    for amount in (100, 200, 300, 400, 500):
        await deposit(ledger, "alice", amount)
    reader = ledger.stub("auditor")
    first = await reader.ListEntries(pb.ListEntriesRequest(account_id="player:alice", page_size=2))
    assert [(e.amount_gold, e.balance_after_gold, e.account_version) for e in first.entries] == [
        (500, 1500, 5),
        (400, 1000, 4),
    ]
    second = await reader.ListEntries(
        pb.ListEntriesRequest(account_id="player:alice", page_size=2, page_token=first.next_page_token)
    )
    third = await reader.ListEntries(
        pb.ListEntriesRequest(account_id="player:alice", page_size=2, page_token=second.next_page_token)
    )
    assert [e.account_version for e in second.entries] == [3, 2]
    assert [e.account_version for e in third.entries] == [1] and not third.next_page_token
    # A cursor belongs to its statement.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await reader.ListEntries(pb.ListEntriesRequest(account_id="player:bob", page_token=first.next_page_token))
    assert error_reason(caught.value) == "BAD_PAGE_TOKEN"


async def test_balance_at_a_transaction_or_a_time(ledger: Ledger):
    reader = ledger.stub("auditor")
    before_anything = datetime.now(UTC)
    await asyncio.sleep(0.01)
    first = await deposit(ledger, "alice", 100)
    await asyncio.sleep(0.01)
    between = datetime.now(UTC)
    await asyncio.sleep(0.01)
    await ledger.stub("table").PostTransaction(  # a buy-in of 30
        pb.PostTransactionRequest(
            transaction=transaction("spend", ("player:alice", -30), ("escrow:t1:alice", 30), open_accounts=True)
        )
    )

    async def at_tx(tx_id: str) -> tuple[int, int]:
        reply = await reader.GetBalanceAt(pb.GetBalanceAtRequest(account_id="player:alice", transaction_id=tx_id))
        return reply.balance_gold, reply.account_version

    async def at_time(when: datetime) -> tuple[int, int]:
        request = pb.GetBalanceAtRequest(account_id="player:alice")
        request.time.FromDatetime(when)
        reply = await reader.GetBalanceAt(request)
        return reply.balance_gold, reply.account_version

    assert await at_tx(first.transaction.transaction_id) == (100, 1)
    assert await at_time(before_anything) == (0, 0)
    assert await at_time(between) == (100, 1)
    assert await at_time(datetime.now(UTC)) == (70, 2)
    # her escrow had nothing yet right after the deposit
    fees = await reader.GetBalanceAt(
        pb.GetBalanceAtRequest(account_id="escrow:t1:alice", transaction_id=first.transaction.transaction_id)
    )
    assert (fees.balance_gold, fees.account_version) == (0, 0)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await at_tx("01900000-0000-7000-8000-000000000000")
    assert error_reason(caught.value) == "TRANSACTION_NOT_FOUND"


async def test_get_transaction_by_id_or_key_and_a_refused_key_says_why(ledger: Ledger):
    posted = await deposit(ledger, "alice", 100, key="dep-1")
    reader = ledger.stub("auditor")
    by_id = await reader.GetTransaction(pb.GetTransactionRequest(transaction_id=posted.transaction.transaction_id))
    by_key = await reader.GetTransaction(pb.GetTransactionRequest(idempotency_key="dep-1"))
    assert by_id.transaction == by_key.transaction == posted.transaction

    with pytest.raises(grpc.aio.AioRpcError):
        await ledger.stub("table").PostTransaction(
            pb.PostTransactionRequest(
                transaction=transaction(
                    "too-much", ("player:alice", -101), ("escrow:t1:alice", 101), open_accounts=True
                )
            )
        )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await reader.GetTransaction(pb.GetTransactionRequest(idempotency_key="too-much"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    info = error_info(caught.value)
    assert info is not None and info.metadata["refused_reason"] == "INSUFFICIENT_FUNDS"


async def test_a_page_token_belongs_to_the_filters_of_the_call_that_issued_it(ledger: Ledger):
    """A token used with other filters would page through another list from a position in
    this one (accounts of another kind after this one's last id, the journal of another
    period): refused, BAD_PAGE_TOKEN. A token without the filters' fingerprint, as tokens
    were issued before, is still read."""
    from google.protobuf.timestamp_pb2 import Timestamp

    from socai_ledger import queries

    for player in ("alice", "bob", "carol"):
        await deposit(ledger, player, 100)
    reader = ledger.stub("auditor")
    players = await reader.ListAccounts(pb.ListAccountsRequest(kind="player", page_size=1))
    assert players.next_page_token
    nxt = await reader.ListAccounts(
        pb.ListAccountsRequest(kind="player", page_size=1, page_token=players.next_page_token)
    )
    assert [a.account_id for a in nxt.accounts] == ["player:bob"]
    period = Timestamp(seconds=1)
    journal = await reader.ListTransactions(pb.ListTransactionsRequest(page_size=1, since=period))
    assert journal.next_page_token
    for call, request in (
        ("ListAccounts", pb.ListAccountsRequest(kind="house", page_token=players.next_page_token)),
        ("ListAccounts", pb.ListAccountsRequest(page_token=players.next_page_token)),
        ("ListTransactions", pb.ListTransactionsRequest(page_token=journal.next_page_token)),
        (
            "ListTransactions",
            pb.ListTransactionsRequest(since=Timestamp(seconds=2), page_token=journal.next_page_token),
        ),
        ("ListHolds", pb.ListHoldsRequest(account_id="house:bank", page_token=players.next_page_token)),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await getattr(reader, call)(request)
        assert (refused.value.code(), error_reason(refused.value)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "BAD_PAGE_TOKEN",
        ), call
    legacy = queries.encode_token("player:alice")
    older = await reader.ListAccounts(pb.ListAccountsRequest(kind="player", page_size=1, page_token=legacy))
    assert [a.account_id for a in older.accounts] == ["player:bob"]
