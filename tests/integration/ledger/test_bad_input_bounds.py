"""Input at the edges of what the wire can carry is INVALID_ARGUMENT, never INTERNAL.

Found by attacking the running ledger (issue 16, defects 6 and 8): a time outside
0001-9999 or nanos out of range, page tokens holding NUL bytes or 5,000-digit numbers, and
a 10,000-character account id (whose error, quoting it whole, no longer fit the response's
trailers and came back RESOURCE_EXHAUSTED). Each must be refused with a reason, change
nothing, and quote only a bounded part of the input.
"""

from __future__ import annotations

import base64
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.grpc_errors import error_info, error_reason
from tests.integration.ledger.conftest import Ledger, deposit, journal_snapshot, transaction

pytestmark = pytest.mark.integration

# What an error may quote back (the services cap their messages at 512 characters).
MESSAGE_BOUND = 512

INVALID = grpc.StatusCode.INVALID_ARGUMENT
YEAR_1_SECONDS = -62_135_596_800
YEAR_9999_END_SECONDS = 253_402_300_799
HUGE = "a" * 10_000


def token(*fields: str) -> str:
    """A page token as the ledger encodes one: its fields joined by US, urlsafe base64."""
    return base64.urlsafe_b64encode("\x1f".join(fields).encode()).decode().rstrip("=")


def at(seconds: int, nanos: int = 0) -> pb.GetBalanceAtRequest:
    return pb.GetBalanceAtRequest(account_id="player:alice", time=Timestamp(seconds=seconds, nanos=nanos))


BAD_READS: list[tuple[str, str, Any, str]] = [
    ("year 0", "GetBalanceAt", at(YEAR_1_SECONDS - 1), "BAD_TIME"),
    ("year 10000", "GetBalanceAt", at(YEAR_9999_END_SECONDS + 1), "BAD_TIME"),
    ("the far future", "GetBalanceAt", at(2**62), "BAD_TIME"),
    ("negative nanos", "GetBalanceAt", at(0, -1), "BAD_TIME"),
    ("a billion nanos", "GetBalanceAt", at(0, 1_000_000_000), "BAD_TIME"),
    (
        "a statement token with a 5,000-digit version",
        "ListEntries",
        pb.ListEntriesRequest(account_id="player:alice", page_token=token("player:alice", "9" * 5_000)),
        "BAD_PAGE_TOKEN",
    ),
    (
        "a statement token with a version beyond int64",
        "ListEntries",
        pb.ListEntriesRequest(account_id="player:alice", page_token=token("player:alice", "9" * 30)),
        "BAD_PAGE_TOKEN",
    ),
    (
        "a statement token with non-ASCII digits",
        "ListEntries",
        pb.ListEntriesRequest(account_id="player:alice", page_token=token("player:alice", "١٢")),
        "BAD_PAGE_TOKEN",
    ),
    (
        "a statement token with a NUL",
        "ListEntries",
        pb.ListEntriesRequest(account_id="player:alice", page_token=token("player:alice", "1\x00")),
        "BAD_PAGE_TOKEN",
    ),
    (
        "an account token with a NUL",
        "ListAccounts",
        pb.ListAccountsRequest(page_token=token("player:a\x00b")),
        "BAD_PAGE_TOKEN",
    ),
    (
        "an account token of 5,000 digits",
        "ListAccounts",
        pb.ListAccountsRequest(page_token="9" * 5_000),
        "BAD_PAGE_TOKEN",
    ),
    (
        "an account token of 5,000 bytes",
        "ListAccounts",
        pb.ListAccountsRequest(page_token=token("p" * 5_000)),
        "BAD_PAGE_TOKEN",
    ),
    (
        "a 10,000-character account id",
        "GetAccount",
        pb.GetAccountRequest(account_id="player:" + HUGE),
        "BAD_ACCOUNT_ID",
    ),
    ("a 10,000-character statement", "ListEntries", pb.ListEntriesRequest(account_id=HUGE), "BAD_ACCOUNT_ID"),
    (
        "a 10,000-character transaction id",
        "GetTransaction",
        pb.GetTransactionRequest(transaction_id=HUGE),
        "BAD_TRANSACTION_ID",
    ),
    (
        "a 10,000-character transfer target",
        "Transfer",
        pb.TransferRequest(idempotency_key="k", from_account_id="player:alice", to_account_id=HUGE, amount_gold=1),
        "BAD_ACCOUNT_ID",
    ),
    (
        "a 10,000-character kind",
        "PostTransaction",
        pb.PostTransactionRequest(transaction=transaction("k", ("player:alice", -1), ("player:bob", 1), kind=HUGE)),
        "BAD_KIND",
    ),
    (
        "a 10,000-character metadata key",
        "PostTransaction",
        pb.PostTransactionRequest(
            transaction=transaction("k", ("player:alice", -1), ("player:bob", 1), **{HUGE + " x": "v"})
        ),
        "BAD_METADATA",
    ),
]


@pytest.mark.parametrize(("what", "method", "request_msg", "reason"), BAD_READS, ids=[c[0] for c in BAD_READS])
async def test_input_beyond_the_edges_is_invalid_argument_and_changes_nothing(
    ledger: Ledger, what: str, method: str, request_msg: Any, reason: str
) -> None:
    await deposit(ledger, "alice", 10)
    url = ledger.settings.database_url or ""
    before = journal_snapshot(url)
    caller = "backend" if method in ("Transfer", "PostTransaction") else "operator"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(ledger.stub(caller), method)(request_msg)
    assert caught.value.code() == INVALID, caught.value.details()
    assert error_reason(caught.value) == reason
    details = caught.value.details() or ""
    assert details and len(details) <= MESSAGE_BOUND
    info = error_info(caught.value)
    assert info is not None and all(len(v) <= 256 for v in info.metadata.values())
    assert journal_snapshot(url) == before


async def test_a_huge_account_id_in_a_batch_is_refused_alone_with_a_short_message(ledger: Ledger) -> None:
    await deposit(ledger, "alice", 10)
    items = [transaction(f"k{i}", ("player:alice", -1), ("player:" + HUGE, 1)) for i in range(50)]
    reply = await ledger.stub("backend").PostTransactions(pb.PostTransactionsRequest(transactions=items))
    assert {(r.status, r.error_reason) for r in reply.results} == {(pb.POST_STATUS_REJECTED, "BAD_ACCOUNT_ID")}
    assert all(0 < len(r.error_message) <= MESSAGE_BOUND for r in reply.results)


async def test_times_at_the_edges_of_the_range_are_answered(ledger: Ledger) -> None:
    await deposit(ledger, "alice", 10)
    stub = ledger.stub("auditor")
    first = await stub.GetBalanceAt(at(YEAR_1_SECONDS))
    assert (first.balance_gold, first.account_version) == (0, 0)
    last = await stub.GetBalanceAt(at(YEAR_9999_END_SECONDS, 999_999_999))
    assert (last.balance_gold, last.account_version) == (10, 1)


async def test_a_page_token_the_ledger_issued_still_pages(ledger: Ledger) -> None:
    for n in range(3):
        await deposit(ledger, "alice", 10 + n)
    stub = ledger.stub("auditor")
    first = await stub.ListEntries(pb.ListEntriesRequest(account_id="player:alice", page_size=2))
    rest = await stub.ListEntries(
        pb.ListEntriesRequest(account_id="player:alice", page_size=2, page_token=first.next_page_token)
    )
    assert [e.amount_gold for e in first.entries] + [e.amount_gold for e in rest.entries] == [12, 11, 10]
    await deposit(ledger, "bob", 1)
    page = await stub.ListAccounts(pb.ListAccountsRequest(kind="player", page_size=1))
    after = await stub.ListAccounts(pb.ListAccountsRequest(kind="player", page_size=1, page_token=page.next_page_token))
    assert [a.account_id for a in page.accounts] + [a.account_id for a in after.accounts] == [
        "player:alice",
        "player:bob",
    ]
