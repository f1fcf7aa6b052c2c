"""Every bad input gets a clear status and reason, and changes nothing.

Malformed requests (INVALID_ARGUMENT) leave no trace at all. Refusals decided against the
journal (FAILED_PRECONDITION, NOT_FOUND) move no money and open no account; they are only
remembered under their key (one ``rejected`` transactions row), so a retry gets the same answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.grpc_errors import error_reason
from socai.money import INT64_MAX
from tests.integration.ledger.conftest import Ledger, deposit, entries, journal_snapshot, transaction

pytestmark = pytest.mark.integration

INVALID = grpc.StatusCode.INVALID_ARGUMENT
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


def post(tx: pb.TransactionInput) -> tuple[str, Any]:
    return "PostTransaction", pb.PostTransactionRequest(transaction=tx)


def pay(key: str = "k", amount: int = 10) -> pb.TransactionInput:
    return transaction(key, ("player:alice", -amount), ("player:bob", amount))


def unbalanced_big() -> pb.TransactionInput:
    # Each amount fits int64 and the entries sum to 0, but the transaction moves 2 × INT64_MAX.
    tx = pay()
    del tx.entries[:]
    tx.entries.extend(
        entries(("player:alice", INT64_MAX), ("player:bob", INT64_MAX), ("pot:p1", -INT64_MAX), ("pot:p2", -INT64_MAX))
    )
    return tx


CASES: list[tuple[str, Callable[[], tuple[str, Any]], grpc.StatusCode, str]] = [
    ("zero amount", lambda: post(pay(amount=0)), INVALID, "ZERO_AMOUNT"),
    (
        "negative deposit",
        lambda: ("Deposit", pb.DepositRequest(idempotency_key="k", player_id="alice", amount_gold=-5)),
        INVALID,
        "NEGATIVE_AMOUNT",
    ),
    (
        "zero transfer",
        lambda: (
            "Transfer",
            pb.TransferRequest(idempotency_key="k", from_account_id="player:alice", to_account_id="player:bob"),
        ),
        INVALID,
        "ZERO_AMOUNT",
    ),
    (
        "amount of INT64_MIN (its negation overflows)",
        lambda: post(transaction("k", ("player:alice", -INT64_MAX - 1), ("player:bob", INT64_MAX), ("pot:p", 1))),
        INVALID,
        "AMOUNT_OUT_OF_RANGE",
    ),
    ("total above int64", lambda: post(unbalanced_big()), INVALID, "AMOUNT_OUT_OF_RANGE"),
    (
        "unbalanced",
        lambda: post(transaction("k", ("player:alice", -10), ("player:bob", 9))),
        INVALID,
        "UNBALANCED_TRANSACTION",
    ),
    ("one entry", lambda: post(transaction("k", ("player:alice", 0 + 10))), INVALID, "TOO_FEW_ENTRIES"),
    ("no entries", lambda: post(transaction("k")), INVALID, "TOO_FEW_ENTRIES"),
    (
        "too many entries",
        lambda: post(transaction("k", *[(f"player:p{i}", 1) for i in range(256)], ("player:alice", -256))),
        INVALID,
        "TOO_MANY_ENTRIES",
    ),
    (
        "the same account twice",
        lambda: post(transaction("k", ("player:alice", -10), ("player:alice", 5), ("player:bob", 5))),
        INVALID,
        "DUPLICATE_ACCOUNT",
    ),
    (
        "a transfer to itself",
        lambda: (
            "Transfer",
            pb.TransferRequest(
                idempotency_key="k", from_account_id="player:alice", to_account_id="player:alice", amount_gold=5
            ),
        ),
        INVALID,
        "SAME_ACCOUNT",
    ),
    (
        "a malformed account id",
        lambda: post(transaction("k", ("player:alice", -10), ("player:bob smith", 10))),
        INVALID,
        "BAD_ACCOUNT_ID",
    ),
    (
        "an account of no known kind",
        lambda: post(transaction("k", ("player:alice", -10), ("house:casino", 10))),
        INVALID,
        "BAD_ACCOUNT_ID",
    ),
    ("an empty key", lambda: post(pay(key="")), INVALID, "IDEMPOTENCY_KEY_REQUIRED"),
    ("an oversized key", lambda: post(pay(key="k" * 201)), INVALID, "BAD_IDEMPOTENCY_KEY"),
    ("a key with a newline", lambda: post(pay(key="settle:\nh1")), INVALID, "BAD_IDEMPOTENCY_KEY"),
    (
        "a deposit without a key",
        lambda: ("Deposit", pb.DepositRequest(player_id="alice", amount_gold=5)),
        INVALID,
        "IDEMPOTENCY_KEY_REQUIRED",
    ),
    (
        "an empty kind",
        lambda: post(transaction("k", ("player:alice", -1), ("player:bob", 1), kind="")),
        INVALID,
        "BAD_KIND",
    ),
    (
        "a metadata key with spaces",
        lambda: post(transaction("k", ("player:alice", -1), ("player:bob", 1), **{"hand id": "h1"})),
        INVALID,
        "BAD_METADATA",
    ),
    (
        "an oversized batch",
        lambda: ("PostTransactions", pb.PostTransactionsRequest(transactions=[pay(key=f"k{i}") for i in range(1001)])),
        INVALID,
        "BATCH_TOO_LARGE",
    ),
    ("an empty batch", lambda: ("PostTransactions", pb.PostTransactionsRequest()), INVALID, "EMPTY_BATCH"),
    # Refusals decided against the journal: remembered under the key, no money moves.
    ("insufficient funds", lambda: post(pay(amount=1_001)), PRECONDITION, "INSUFFICIENT_FUNDS"),
    (
        "an unknown account",
        lambda: post(transaction("k", ("player:alice", -10), ("player:nobody", 10))),
        grpc.StatusCode.NOT_FOUND,
        "ACCOUNT_NOT_FOUND",
    ),
    (
        "a balance beyond int64",
        lambda: ("Deposit", pb.DepositRequest(idempotency_key="k", player_id="bob", amount_gold=INT64_MAX)),
        PRECONDITION,
        "BALANCE_OVERFLOW",
    ),
]


@pytest.mark.parametrize(("what", "build", "code", "reason"), CASES, ids=[c[0] for c in CASES])
async def test_a_bad_request_gets_a_reason_and_changes_nothing(
    ledger: Ledger, what: str, build: Callable[[], tuple[str, Any]], code: grpc.StatusCode, reason: str
):
    await deposit(ledger, "alice", 1_000)
    await deposit(ledger, "bob", 1)  # bob holds 1: another INT64_MAX does not fit
    url = ledger.settings.database_url or ""
    before = journal_snapshot(url)
    method, request = build()
    caller = "cashier" if method in ("Deposit", "Withdraw") else "backend"  # payments between wallets
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(ledger.stub(caller), method)(request)
    assert caught.value.code() == code, caught.value.details()
    assert error_reason(caught.value) == reason
    assert caught.value.details()  # a message a person can read
    after = journal_snapshot(url)
    assert (after.accounts, after.entries, after.journal_head) == (before.accounts, before.entries, before.journal_head)
    remembered = 0 if code == INVALID else 1
    assert after.transactions == before.transactions + remembered


@pytest.mark.parametrize(
    ("method", "request_msg", "reason"),
    [
        ("ListAccounts", pb.ListAccountsRequest(page_size=-1), "BAD_PAGE_SIZE"),
        ("ListAccounts", pb.ListAccountsRequest(page_size=1001), "BAD_PAGE_SIZE"),
        ("ListAccounts", pb.ListAccountsRequest(page_token="not a token!"), "BAD_PAGE_TOKEN"),
        ("ListAccounts", pb.ListAccountsRequest(kind="player", id_prefix="player:a"), "KIND_AND_PREFIX"),
        ("ListAccounts", pb.ListAccountsRequest(kind="casino"), "BAD_KIND"),
        ("GetAccount", pb.GetAccountRequest(account_id="wallet:1"), "BAD_ACCOUNT_ID"),
        ("OpenAccount", pb.OpenAccountRequest(account_id="player:"), "BAD_ACCOUNT_ID"),
        ("GetTransaction", pb.GetTransactionRequest(transaction_id="tx-1"), "BAD_TRANSACTION_ID"),
        ("GetTransaction", pb.GetTransactionRequest(), "ONE_OF_ID_OR_KEY"),
        ("ListEntries", pb.ListEntriesRequest(account_id="player:alice", page_token="bm9wZQ"), "BAD_PAGE_TOKEN"),
        ("GetBalanceAt", pb.GetBalanceAtRequest(account_id="player:alice"), "AS_OF_REQUIRED"),
    ],
)
async def test_a_bad_read_is_invalid_argument_with_a_reason(ledger: Ledger, method: str, request_msg: Any, reason: str):
    await deposit(ledger, "alice", 10)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(ledger.stub("operator"), method)(request_msg)
    assert caught.value.code() == INVALID
    assert error_reason(caught.value) == reason


async def test_a_malformed_item_in_a_batch_is_refused_alone_and_leaves_no_trace(ledger: Ledger):
    await deposit(ledger, "alice", 100)
    await deposit(ledger, "bob", 1)
    url = ledger.settings.database_url or ""
    before = journal_snapshot(url)
    reply = await ledger.stub("backend").PostTransactions(
        pb.PostTransactionsRequest(
            transactions=[pay(key="ok", amount=10), pay(key="", amount=10), pay(key="z", amount=0)]
        )
    )
    assert [(r.status, r.error_reason) for r in reply.results] == [
        (pb.POST_STATUS_APPLIED, ""),
        (pb.POST_STATUS_REJECTED, "IDEMPOTENCY_KEY_REQUIRED"),
        (pb.POST_STATUS_REJECTED, "ZERO_AMOUNT"),
    ]
    after = journal_snapshot(url)
    assert after.transactions == before.transactions + 1 and after.entries == before.entries + 2
