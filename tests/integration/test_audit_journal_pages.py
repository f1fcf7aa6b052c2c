"""``ListTransactions`` (issue 20): the journal in commit order, a page at a time, as
``socai ledger export`` reads it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from nats.aio.client import Client as NatsClient

from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.nats import StreamSpec
from tests.support.settlement import Harness, harness_for
from tests.support.simulate import fund, simulate

pytestmark = pytest.mark.integration


@pytest.fixture
async def ledger(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[Harness]:
    async with harness_for(nats_url, migrated_database_url, stream_spec, nats_client) as h:
        await h.start_ledger()
        await fund(h.ledger("cashier"), simulate(6, ("holdem", "xito"), seed=9, hands_per_table=1))
        yield h


async def pages(stub: object, size: int) -> list[list[ledger_pb2.Transaction]]:
    out, token = [], ""
    while True:
        reply = await stub.ListTransactions(ledger_pb2.ListTransactionsRequest(page_size=size, page_token=token))  # type: ignore[attr-defined]
        out.append(list(reply.transactions))
        token = reply.next_page_token
        if not token:
            return out


async def test_pages_walk_the_journal_in_commit_order_without_a_gap_or_a_repeat(ledger: Harness) -> None:
    auditor = ledger.ledger("auditor")
    whole = await pages(auditor, 1000)
    assert len(whole) == 1
    txs = whole[0]
    assert [t.journal_seq for t in txs] == list(range(1, len(txs) + 1)) and len(txs) > 7
    small = await pages(auditor, 3)
    assert [len(p) for p in small[:-1]] == [3] * (len(small) - 1) and 1 <= len(small[-1]) <= 3
    assert [t for p in small for t in p] == txs
    # Each transaction as GetTransaction gives it: entries with balances after.
    one = await auditor.GetTransaction(ledger_pb2.GetTransactionRequest(transaction_id=txs[-1].transaction_id))
    assert one.transaction == txs[-1]


async def test_a_token_of_another_list_or_a_big_page_is_refused(ledger: Harness) -> None:
    auditor = ledger.ledger("auditor")
    account = (await pages(auditor, 1000))[0][-1].entries[0].account_id
    statement = await auditor.ListEntries(ledger_pb2.ListEntriesRequest(account_id=account, page_size=1))
    assert statement.next_page_token
    for request in (
        ledger_pb2.ListTransactionsRequest(page_token=statement.next_page_token),
        ledger_pb2.ListTransactionsRequest(page_size=1001),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await auditor.ListTransactions(request)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as denied:
        await ledger.ledger("table").ListTransactions(ledger_pb2.ListTransactionsRequest())
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
