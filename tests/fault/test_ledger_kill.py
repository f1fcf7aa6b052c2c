"""The ledger process killed with SIGKILL in the middle of a batch loses nothing that was
acknowledged and applies nothing twice after restart; its outbox still delivers every
committed transaction once.

A real ``python -m socai_ledger`` runs under load (batches and single posts from several
clients). The test waits until the process holds the journal's write lock — a batch is
between its first statement and its commit — and kills it. After a restart every request is
sent again under its key, and the journal is checked against what the clients were told.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from socai.infra.nats import connect
from socai_cli.embedded import free_port
from socai_cli.stack import grpc_health
from socai_ledger.db import WRITE_LOCK

pytestmark = [pytest.mark.fault, pytest.mark.integration]

# Settlement-shaped load: the escrows of one table, under settlement's keys (the ledger
# lets settlement post only among the escrows of the hand's table, fees and the bank).
TABLE = "f"
PLAYERS = [f"escrow:{TABLE}:p{i}" for i in range(200)]
OPENING_GOLD = 100_000
CLIENTS = 6
BATCH = 100


@dataclass
class Ledger:
    settings: Settings
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, **self.settings.as_env()}
        env.pop("SOCAI_SERVICE_TOKEN", None)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "socai_ledger"], env=env, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_path.read_text()[-3000:]
            if asyncio.run(grpc_health(self.settings.ledger_addr, 1.0)) == "SERVING":
                return
            time.sleep(0.1)
        raise AssertionError(f"ledger not serving: {self.log_path.read_text()[-3000:]}")

    def signal(self, sig: int, timeout_s: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout_s)
        self.proc = None
        return code

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


@pytest.fixture
def ledger(nats_url: str, migrated_database_url: str, tmp_path: Path) -> Iterator[Ledger]:
    token = uuid.uuid4().hex[:10]
    settings = Settings(
        nats_url=nats_url,
        database_url=migrated_database_url,
        ledger_addr=f"127.0.0.1:{free_port()}",
        metrics_port_base=free_port(),
        ledger_stream=f"K_{token.upper()}",
        ledger_prefix=f"k{token}.ledger",
        log_format="json",
    )
    running = Ledger(settings, tmp_path / "ledger.log")
    try:
        yield running
    finally:
        running.stop()


@dataclass
class Book:
    """What the clients sent and what they were told."""

    requests: dict[str, pb.TransactionInput] = field(default_factory=dict)
    applied: dict[str, str] = field(default_factory=dict)  # key -> transaction id acknowledged
    refused: dict[str, str] = field(default_factory=dict)  # key -> reason acknowledged
    unknown: set[str] = field(default_factory=set)  # sent, no answer (the kill)


def random_transfer(rng: random.Random, key: str) -> pb.TransactionInput:
    source, target = rng.sample(PLAYERS, 2)
    amount = 10**12 if rng.random() < 0.02 else rng.randint(40, 2_000)  # a few cannot be paid
    fee = amount // 20
    return pb.TransactionInput(
        idempotency_key=key,
        kind="settlement",
        reference=key,
        entries=[
            pb.EntryInput(account_id=source, amount_gold=-amount),
            pb.EntryInput(account_id=target, amount_gold=amount - fee),
            pb.EntryInput(account_id="house:fees", amount_gold=fee),
        ],
    )


def record(book: Book, key: str, result: pb.PostResult) -> None:
    if result.status == pb.POST_STATUS_REJECTED:
        book.refused[key] = result.error_reason
    else:
        book.applied[key] = result.transaction.transaction_id


async def load(address: str, token: str, book: Book, stop: asyncio.Event, index: int) -> None:
    rng = random.Random(index)
    async with channel(address, token) as ch:
        stub = pb_grpc.LedgerServiceStub(ch)
        n = 0
        while not stop.is_set():
            n += 1
            size = BATCH if n % 3 else 1
            items = [random_transfer(rng, f"settle:{TABLE}-h{index}{n:07d}{i:03d}") for i in range(size)]
            for item in items:
                book.requests[item.idempotency_key] = item
            try:
                if size == 1:
                    reply = await stub.PostTransaction(pb.PostTransactionRequest(transaction=items[0]), timeout=10)
                    record(book, items[0].idempotency_key, reply.result)
                else:
                    replies = await stub.PostTransactions(pb.PostTransactionsRequest(transactions=items), timeout=10)
                    for item, result in zip(items, replies.results, strict=True):
                        record(book, item.idempotency_key, result)
            except grpc.aio.AioRpcError as exc:
                if size == 1 and exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                    book.refused[items[0].idempotency_key] = error_reason(exc)
                    continue
                book.unknown.update(item.idempotency_key for item in items)
                await asyncio.sleep(0.05)


async def kill_mid_batch(ledger: Ledger, url: str, timeout_s: float = 20) -> bool:
    """SIGKILL as soon as the ledger holds the journal's write lock (inside a batch)."""
    assert ledger.proc is not None
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            row = await (
                await conn.execute(
                    "select count(*) from pg_locks where locktype = 'advisory' and granted and objsubid = 1 "
                    "and ((classid::bigint << 32) | objid::bigint) = %s and database = "
                    "(select oid from pg_database where datname = current_database())",
                    (WRITE_LOCK,),
                )
            ).fetchone()
            if row and row[0]:
                ledger.proc.kill()
                return True
    ledger.proc.kill()
    return False


def journal(url: str) -> tuple[dict[str, str], dict[str, str], dict[str, int]]:
    with psycopg.connect(url) as conn:
        applied = dict(
            conn.execute(
                "select idempotency_key, transaction_id::text from socai_ledger.transactions where status = 'applied'"
            ).fetchall()
        )
        refused = dict(
            conn.execute(
                "select idempotency_key, error_reason from socai_ledger.transactions where status = 'rejected'"
            ).fetchall()
        )
        balances = dict(conn.execute("select account_id, balance_gold from socai_ledger.accounts").fetchall())
    return applied, refused, balances


async def stream_messages(nats_url: str, stream: str, prefix: str, expected: int) -> list[Any]:
    nc = await connect(nats_url, name="kill-test-follower")
    try:
        js = nc.jetstream()
        sub = await js.pull_subscribe(f"{prefix}.>", durable=None, stream=stream)
        messages: list[Any] = []
        deadline = time.monotonic() + 60
        quiet_until = None
        while time.monotonic() < deadline:
            try:
                batch = await sub.fetch(500, timeout=0.5)
            except TimeoutError:
                if len(messages) >= expected:
                    quiet_until = quiet_until or time.monotonic() + 1
                    if time.monotonic() > quiet_until:
                        break
                continue
            messages.extend(batch)
            for msg in batch:
                await msg.ack()
        return messages
    finally:
        await nc.close()


def test_sigkill_mid_batch_loses_nothing_acknowledged_and_applies_nothing_twice(ledger: Ledger):
    url = ledger.settings.database_url or ""
    token = ledger.settings.tokens["settlement"]
    ledger.start()

    async def fund() -> None:
        async with channel(ledger.settings.ledger_addr, ledger.settings.tokens["cashier"]) as ch:
            stub = pb_grpc.LedgerServiceStub(ch)
            await asyncio.gather(
                *(
                    stub.Transfer(
                        pb.TransferRequest(
                            idempotency_key=f"open:{p}",
                            from_account_id="external:cashier",
                            to_account_id=p,
                            amount_gold=OPENING_GOLD,
                            kind="deposit",
                            reference=p,
                            open_accounts=True,
                        )
                    )
                    for p in PLAYERS
                )
            )

    asyncio.run(fund())
    book = Book()

    async def run_until_killed() -> bool:
        stop = asyncio.Event()
        clients = [asyncio.create_task(load(ledger.settings.ledger_addr, token, book, stop, i)) for i in range(CLIENTS)]
        deadline = time.monotonic() + 120
        while len(book.applied) < 3_000:  # the clients fill the book; poll it
            assert time.monotonic() < deadline, (
                f"only {len(book.applied)} postings applied ({len(book.refused)} refused)"
            )
            await asyncio.sleep(0.05)
        killed_mid_batch = await kill_mid_batch(ledger, url)
        await asyncio.sleep(1.0)  # the clients see their calls fail
        stop.set()
        await asyncio.gather(*clients)
        return killed_mid_batch

    assert asyncio.run(run_until_killed()), "the kill landed while a batch held the write lock"
    ledger.proc.wait(10)  # type: ignore[union-attr]
    ledger.proc = None
    assert book.unknown, "some calls were in flight when the process died"

    # Nothing acknowledged was lost; nothing refused turned into a success.
    applied, refused, _ = journal(url)
    for key, tx_id in book.applied.items():
        assert applied.get(key) == tx_id, key
    for key, reason in book.refused.items():
        assert key not in applied and refused.get(key) == reason, key

    # After a restart, every request sent again under its key gets its one answer.
    ledger.start()

    async def resend_everything() -> dict[str, pb.PostResult]:
        answers: dict[str, pb.PostResult] = {}
        keys = sorted(book.requests)
        async with channel(ledger.settings.ledger_addr, token) as ch:
            stub = pb_grpc.LedgerServiceStub(ch)
            for start in range(0, len(keys), 1000):
                chunk = keys[start : start + 1000]
                reply = await stub.PostTransactions(
                    pb.PostTransactionsRequest(transactions=[book.requests[k] for k in chunk]), timeout=60
                )
                answers.update(zip(chunk, reply.results, strict=True))
        return answers

    answers = asyncio.run(resend_everything())
    for key, tx_id in book.applied.items():
        assert answers[key].status == pb.POST_STATUS_REPLAYED and answers[key].transaction.transaction_id == tx_id
    for key, reason in book.refused.items():
        assert (answers[key].status, answers[key].error_reason) == (pb.POST_STATUS_REJECTED, reason)
    for key in book.unknown:
        assert answers[key].status in (pb.POST_STATUS_APPLIED, pb.POST_STATUS_REPLAYED, pb.POST_STATUS_REJECTED)

    # Every balance is its opening deposit plus exactly the applied transactions, once each.
    applied, _, balances = journal(url)
    expected = {p: OPENING_GOLD for p in PLAYERS} | {"house:fees": 0}
    for key in applied:
        if key.startswith("open:"):
            continue
        for entry in book.requests[key].entries:
            expected[entry.account_id] += entry.amount_gold
    assert {a: balances[a] for a in expected} == expected
    assert sum(balances.values()) == 0

    async def audit() -> tuple[Any, Any]:
        async with channel(ledger.settings.ledger_addr, ledger.settings.tokens["auditor"]) as ch:
            stub = pb_grpc.LedgerServiceStub(ch)
            return await stub.VerifyJournal(pb.VerifyJournalRequest()), await stub.TrialBalance(
                pb.TrialBalanceRequest()
            )

    report, trial = asyncio.run(audit())
    assert report.ok, report.mismatches
    assert trial.total_gold == 0

    # The outbox delivers every committed transaction once, across the kill.
    messages = asyncio.run(
        stream_messages(
            ledger.settings.nats_url or "", ledger.settings.ledger_stream, ledger.settings.ledger_prefix, len(applied)
        )
    )
    ids = [m.headers["Nats-Msg-Id"] for m in messages]
    assert len(ids) == len(set(ids)) == len(applied)
    assert set(ids) == set(applied.values())
    seqs = [int(m.headers["Socai-Journal-Seq"]) for m in messages]
    assert seqs == sorted(seqs) == list(range(1, len(applied) + 1))

    # And a graceful stop after all that exits cleanly.
    assert ledger.signal(signal.SIGTERM) == 0
