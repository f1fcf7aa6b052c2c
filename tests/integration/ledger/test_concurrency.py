"""32 concurrent clients make 10,000 random transfers among 50 accounts.

Afterwards: the balances sum to 0, none is negative, every acknowledged transfer is applied
exactly once (each balance equals its deposit plus the acknowledged transfers in and out,
and the journal holds exactly the acknowledged keys), and VerifyJournal is clean.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import grpc
import psycopg
import pytest
from prometheus_client import REGISTRY

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from tests.integration.ledger.conftest import Ledger, balances, deposit

# Heavy (~33 s alone): make test-heavy runs it, in CI after make test.
pytestmark = [pytest.mark.integration, pytest.mark.heavy]

CLIENTS = 32
TRANSFERS = 10_000
ACCOUNTS = [f"player:p{i}" for i in range(50)]
OPENING_GOLD = 10_000
RETRY_RATE = 0.05  # a client resends this share of its requests, as after a lost reply


def batches_written() -> float:
    return REGISTRY.get_sample_value("socai_ledger_batch_items_count") or 0.0


async def test_32_clients_make_10000_random_transfers_and_the_books_still_balance(ledger: Ledger):
    for account in ACCOUNTS:
        await deposit(ledger, account.removeprefix("player:"), OPENING_GOLD, key=f"open:{account}")
    rng = random.Random(20261129)
    plan = []
    for n in range(TRANSFERS):
        source, target = rng.sample(ACCOUNTS, 2)
        plan.append((f"t{n}", source, target, rng.randint(1, 2_500)))
    work = iter(plan)
    applied: dict[str, tuple[str, str, int]] = {}
    refused: Counter[str] = Counter()
    batches_before = batches_written()

    async def client(index: int) -> None:
        client_rng = random.Random(index)
        async with channel(ledger.address, ledger.settings.tokens["backend"]) as ch:
            stub = pb_grpc.LedgerServiceStub(ch)
            for key, source, target, amount in work:
                request = pb.TransferRequest(
                    idempotency_key=key, from_account_id=source, to_account_id=target, amount_gold=amount
                )
                sends = 2 if client_rng.random() < RETRY_RATE else 1
                answers = []
                for _ in range(sends):
                    try:
                        reply = await stub.Transfer(request, timeout=60)
                        answers.append(("ok", reply.result.status, reply.result.transaction.transaction_id))
                    except grpc.aio.AioRpcError as exc:
                        answers.append(("refused", error_reason(exc), ""))
                first = answers[0]
                if first[0] == "ok":
                    assert first[1] == pb.POST_STATUS_APPLIED
                    applied[key] = (source, target, amount)
                else:
                    assert first[1] == "INSUFFICIENT_FUNDS", first
                    refused[first[1]] += 1
                if sends == 2:  # the resend gets the same answer: replayed, or the same refusal
                    second = answers[1]
                    assert second[0] == first[0] and second[2] == first[2]
                    assert second[1] == (pb.POST_STATUS_REPLAYED if first[0] == "ok" else first[1])

    await asyncio.gather(*(client(i) for i in range(CLIENTS)))

    assert len(applied) + sum(refused.values()) == TRANSFERS
    assert len(applied) > TRANSFERS // 2 and refused  # both outcomes were exercised
    expected = {account: OPENING_GOLD for account in ACCOUNTS}
    for source, target, amount in applied.values():
        expected[source] -= amount
        expected[target] += amount
    url = ledger.settings.database_url or ""
    actual = balances(url)
    assert {a: actual[a] for a in ACCOUNTS} == expected  # every acknowledged transfer exactly once
    assert min(actual[a] for a in ACCOUNTS) >= 0
    assert sum(actual.values()) == 0
    with psycopg.connect(url) as conn:
        keys = conn.execute(
            "select idempotency_key from socai_ledger.transactions where status = 'applied' and idempotency_key like 't%'"
        ).fetchall()
    assert {k for (k,) in keys} == set(applied)

    auditor = ledger.stub("auditor")
    report = await auditor.VerifyJournal(pb.VerifyJournalRequest())
    assert report.ok, report.mismatches
    assert report.entries_checked == 2 * (len(applied) + len(ACCOUNTS))
    assert (await auditor.TrialBalance(pb.TrialBalanceRequest())).total_gold == 0
    # Concurrent calls were coalesced: far fewer database transactions than postings.
    assert batches_written() - batches_before < TRANSFERS / 2
