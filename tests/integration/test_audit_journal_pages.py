"""``ListTransactions`` (issue 20): the journal in commit order, a page at a time, as
``socai ledger export`` reads it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from nats.aio.client import Client as NatsClient

from socai.audit import journal
from socai.audit.journal import JournalFile
from socai.audit.ledger_source import hand_of_key
from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.nats import StreamSpec
from tests.support.settlement import Harness, harness_for
from tests.support.synthetic import fund, simulate

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


async def sealed_pages(
    stub: object, size: int, since: datetime | None = None, until: datetime | None = None
) -> list[ledger_pb2.ListTransactionsResponse]:
    out, token = [], ""
    while True:
        request = ledger_pb2.ListTransactionsRequest(page_size=size, page_token=token)
        if since is not None:
            request.since.FromDatetime(since)
        if until is not None:
            request.until.FromDatetime(until)
        reply = await stub.ListTransactions(request)  # type: ignore[attr-defined]
        out.append(reply)
        token = reply.next_page_token
        if not token:
            return out


def export(replies: list[ledger_pb2.ListTransactionsResponse], path: Path) -> JournalFile:
    with path.open("w", encoding="utf-8") as out:
        for reply in replies:
            journal.write_jsonl(reply.transactions, out, reply.seal)
    return journal.read_journal_file(path)


async def test_every_page_carries_the_ledgers_seal_and_the_export_verifies_offline(
    ledger: Harness, tmp_path: Path
) -> None:
    replies = await sealed_pages(ledger.ledger("auditor"), 3)
    assert all(r.seal.signature for r in replies) and replies[0].seal.first and not replies[-1].seal.more
    read_back = export(replies, tmp_path / "journal.jsonl")
    # Read back from the JSON mapping, every transaction serializes to the bytes the ledger signed.
    assert read_back.transactions == [t for r in replies for t in r.transactions]
    checked = journal.check_pages(read_back, ledger.settings.journal_seal_public_keys(), hand_of_key)
    assert checked.problems == [] and checked.pages == len(replies)
    assert checked.transactions == len(read_back.transactions)


async def test_a_period_lists_the_transactions_committed_in_it_and_its_seal_names_it(
    ledger: Harness, tmp_path: Path
) -> None:
    auditor = ledger.ledger("auditor")
    whole = [t for r in await sealed_pages(auditor, 1000) for t in r.transactions]
    times = sorted({t.created_at.ToDatetime(tzinfo=UTC) for t in whole})
    assert len(times) >= 3, "the funding commits in several batches"
    since, until = times[1], times[-1]
    replies = await sealed_pages(auditor, 2, since, until)
    got = [t for r in replies for t in r.transactions]
    want = [t for t in whole if since <= t.created_at.ToDatetime(tzinfo=UTC) < until]
    assert got == want and got
    # A period is a run of consecutive journal_seq, and the seals prove where it starts and ends.
    assert [t.journal_seq for t in got] == list(range(got[0].journal_seq, got[-1].journal_seq + 1))
    assert replies[0].seal.since.ToDatetime(tzinfo=UTC) == since
    assert replies[0].seal.after_seq == got[0].journal_seq - 1 > 0
    checked = journal.check_pages(
        export(replies, tmp_path / "period.jsonl"), ledger.settings.journal_seal_public_keys(), hand_of_key
    )
    assert checked.problems == [] and checked.since.startswith(since.strftime("%Y-%m-%dT%H:%M:%S"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await sealed_pages(auditor, 2, until, since)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
