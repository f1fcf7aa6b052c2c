"""Ledger throughput through gRPC, against the raw ceiling of the same PostgreSQL.

Setup (all under ``ctx.workdir``): an embedded PostgreSQL and nats-server, a real
``python -m socai_ledger`` process (gRPC server, write batcher and outbox relay, as
deployed), 10,000 funded escrows of one table. Every transaction moves gold between two escrows
and credits ``house:fees`` (three entries), so every one of them touches the hot account.

- ``ledger.post_single_32``: 32 concurrent callers, one ``PostTransaction`` per call; beside
  it, round by round, its ceiling ``ledger.grpc_empty_unary_32`` (peer
  ``grpc_empty_unary_32``: 32 callers of an empty unary method on the ledger's own server
  shape, ``grpc_empty_peer.py``), and ``ledger.post_single_32_p99_ms``, the p99 of a call as
  its caller saw it (p50 and the empty call's in its params).
- ``ledger.post_batch_100`` / ``ledger.post_batch_1000``: ``PostTransactions`` of 100 and
  1,000 items, 32 and 4 concurrent callers (the batcher coalesces concurrent calls into
  database transactions of up to 1,000 items).
- peer ``raw_postgres_copy``: the same transactions written by plain psycopg to a copy of the
  ledger's ``entries`` and ``accounts`` tables (same columns, keys and indexes, no triggers):
  balances computed in Python, a binary COPY of the entries and one ``UPDATE … FROM
  unnest(…)`` per batch of 1,000, one commit per batch. No idempotency keys, no transactions
  rows, no outbox, no gRPC: the ceiling the ledger is compared with (``params.ratio``). Its
  rounds are interleaved with each case's (one raw round before each of the case's), and a
  case's ratio is to the median of those: on a shared machine a peer measured minutes apart
  moved the ratio by half.
- ``ledger.outbox_drain``: how fast the relay publishes the backlog left by the 1,000-item
  run to JetStream (which fsyncs every message), with no postings competing.
- ``ledger.outbox_relay_under_load``: how fast the relay publishes while postings continue:
  32 callers post single settlements (``PostTransaction``: many small
  batches, so many small outbox ranges) for a fixed time on a fresh journal; the figure is
  the transactions published per second during that time, next to the transactions posted
  per second (``params.posted_tx_per_s``), the largest lag seen and the time the relay needs
  to catch up once the postings stop. The relay keeps up when it publishes what is posted
  but its trail (``params.published_of_posted`` near 1, ``lag_at_end_of_load_s`` a fraction
  of a second: what a round gathers and awaits). Measured with the outbox's bound in force
  (``SOCAI_LEDGER_OUTBOX_MAX_LAG`` = ``UNDER_LOAD_MAX_LAG``) and, in the same run on a fresh
  journal, without a bound (peer ``no_bound``): callers retry a refused posting
  (``OUTBOX_BACKLOG``) with its key.
  ``SOCAI_BENCH_LEDGER_ONLY=under_load`` runs this case alone; ``SOCAI_BENCH_LEDGER_ONLY=
  post_single_32,post_batch_100`` runs the raw peer and those posting cases only;
  ``SOCAI_BENCH_LEDGER_AB=ledger_0005`` writes each posting case's rounds to a second ledger
  too, on a journal migrated only to that revision (peer ``at_ledger_0005``): the database's
  code A/B, interleaved. ``SOCAI_BENCH_LEDGER_AB=env:SOCAI_LEDGER_WRITE_PIPELINE=1`` instead
  runs the second ledger on the same code and revision with that variable set (peer
  ``with_SOCAI_LEDGER_WRITE_PIPELINE=1``): a knob's A/B, interleaved the same way.

Every case starts from a fresh journal (a new database, 10,000 funded escrows, a
checkpoint), as the raw peer does. The ledger runs as deployed: production logging (a JSON
line per RPC), the outbox relay publishing (gently while postings wait: outbox.py), except
that the posting cases run without the outbox's bound (``WRITE_PATH_ENV``): they measure
the write path, and 40,000 transactions a round outrun JetStream's fsyncs many times over,
so with the bound their sustained rate would be the relay's (what
``ledger.outbox_relay_under_load`` measures).
Requests are serialised before the clock starts and responses parsed after it stops, so
the figures measure the ledger, not the benchmark's client; client, ledger, PostgreSQL and
NATS share the machine's cores. Medians of several rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import psycopg

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.nats_auth import TEST_HARNESS
from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port
from socai_cli.stack import grpc_health
from tests.bench.grpc_empty_peer import METHOD as EMPTY_METHOD
from tests.bench.harness import BenchContext, Result, percentile

PLAYERS = 10_000
OPENING_GOLD = 10**12
# Settlement-shaped postings: the escrows of one table under settlement's keys (the ledger
# lets settlement post only among the escrows and pot of the hand's table, fees and bank).
TABLE = "bench"
_HANDS = itertools.count(1)


def escrow(i: int) -> str:
    return f"escrow:{TABLE}:p{i}"


SERVICE = "/socai.ledger.v1.LedgerService/"
EMPTY_PEER_MODULE = "tests.bench.grpc_empty_peer"
AB = os.environ.get("SOCAI_BENCH_LEDGER_AB", "")
# "env:NAME=VALUE": the same revision, the second ledger with that variable; else a revision.
AB_ENV = dict([AB.removeprefix("env:").split("=", 1)]) if AB.startswith("env:") else {}
AB_REVISION = "" if AB_ENV else AB
AB_PEER = f"with_{AB.removeprefix('env:')}" if AB_ENV else f"at_{AB_REVISION}"


@dataclass(frozen=True)
class Workload:
    """Transactions as (source, target, amount, fee): the same for the ledger and the raw peer."""

    rng: random.Random

    def next(self) -> tuple[str, str, int, int]:
        a, b = self.rng.sample(range(PLAYERS), 2)
        amount = self.rng.randint(20, 5_000)
        return escrow(a), escrow(b), amount, amount // 20

    def transactions(self, count: int, prefix: str) -> list[pb.TransactionInput]:
        out = []
        for n in range(count):
            source, target, amount, fee = self.next()
            out.append(
                pb.TransactionInput(
                    idempotency_key=f"settle:{TABLE}-h{next(_HANDS)}",
                    kind="settlement",
                    reference=f"hand-{prefix}-{n}",
                    entries=[
                        pb.EntryInput(account_id=source, amount_gold=-amount),
                        pb.EntryInput(account_id=target, amount_gold=amount - fee),
                        pb.EntryInput(account_id="house:fees", amount_gold=fee),
                    ],
                )
            )
        return out


# --- the raw ceiling ----------------------------------------------------------------------------


class RawCeiling:
    """Binary COPY of the entries + one UPDATE … FROM per 1,000 transactions, by plain psycopg
    into a copy of the ledger's tables: ``round()`` measures one round, so that its rounds
    can be interleaved with the ledger's (the machine's load then weighs on both alike)."""

    def __init__(self, url: str, batches_per_round: int) -> None:
        self.batches_per_round = batches_per_round
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("create schema raw")
            conn.execute("create table raw.accounts (like socai_ledger.accounts including all)")
            conn.execute("create table raw.entries (like socai_ledger.entries including all)")
            # LIKE copies columns, keys and indexes but not storage parameters: copy those too.
            for table in ("accounts", "entries"):
                row = conn.execute(
                    "select array_to_string(reloptions, ', ') from pg_class where oid = %s::regclass",
                    (f"socai_ledger.{table}",),
                ).fetchone()
                if row and row[0]:
                    conn.execute(f"alter table raw.{table} set ({row[0]})")
            with conn.cursor().copy("copy raw.accounts (account_id, kind, balance_gold, version) from stdin") as copy:
                for i in range(PLAYERS):
                    copy.write_row((escrow(i), "escrow", OPENING_GOLD, 0))
                copy.write_row(("house:fees", "house", 0, 0))
        self.workload = Workload(random.Random(7))
        self.balance = {escrow(i): OPENING_GOLD for i in range(PLAYERS)} | {"house:fees": 0}
        self.version = dict.fromkeys(self.balance, 0)
        self.seq = 0
        self.conn = psycopg.connect(url)

    def close(self) -> None:
        self.conn.close()

    def round(self) -> float:
        """Transactions per second over one round."""
        conn, balance, version = self.conn, self.balance, self.version
        batches = [[self.workload.next() for _ in range(1000)] for _ in range(self.batches_per_round)]
        started = time.perf_counter()
        for batch in batches:
            now = datetime.now(UTC)
            rows = []
            touched: set[str] = set()
            for source, target, amount, fee in batch:
                self.seq += 1
                tx_id = uuid.uuid4()
                for index, (account, delta) in enumerate(
                    ((source, -amount), (target, amount - fee), ("house:fees", fee))
                ):
                    balance[account] += delta
                    version[account] += 1
                    touched.add(account)
                    rows.append((account, version[account], self.seq, index, tx_id, delta, balance[account], now))
            with conn.cursor() as cur:
                with cur.copy(
                    "copy raw.entries (account_id, account_version, journal_seq, entry_index, transaction_id, "
                    "amount_gold, balance_after_gold, created_at) from stdin (format binary)"
                ) as copy:
                    copy.set_types(["text", "int8", "int8", "int2", "uuid", "int8", "int8", "timestamptz"])
                    for row in rows:
                        copy.write_row(row)
                ids = sorted(touched)
                cur.execute(
                    "update raw.accounts a set balance_gold = u.b, version = u.v "
                    "from unnest(%s::text[], %s::int8[], %s::int8[]) as u(id, b, v) where a.account_id = u.id",
                    (ids, [balance[i] for i in ids], [version[i] for i in ids]),
                )
            conn.commit()
        return len(batches) * 1000 / (time.perf_counter() - started)


# --- the ledger ---------------------------------------------------------------------------------


class LedgerProcess:
    """``python -m socai_ledger`` (or ``module``: the empty-unary peer) on ``settings``."""

    def __init__(
        self, settings: Settings, log_path: Path, env: dict[str, str] | None = None, module: str = "socai_ledger"
    ) -> None:
        self.settings = settings
        self.log_path = log_path
        self.env = env or {}
        self.module = module
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LedgerProcess:
        env = {**os.environ, **self.settings.as_env(), **self.env}  # production logging: a JSON line per RPC
        env.pop("SOCAI_SERVICE_TOKEN", None)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", self.module], env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while asyncio.run(grpc_health(self.settings.ledger_addr, 1.0)) != "SERVING":
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ledger did not start: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def raw_call(ch: Any, method: str) -> Callable[..., Any]:
    """A call that takes and returns serialised bytes (no client-side protobuf work)."""
    return ch.unary_unary(SERVICE + method, request_serializer=None, response_deserializer=None)


async def fund(address: str, token: str) -> None:
    async with channel(address, token) as ch:
        stub = pb_grpc.LedgerServiceStub(ch)
        sem = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            request = pb.TransferRequest(
                idempotency_key=f"fund:{i}",
                from_account_id="external:cashier",
                to_account_id=escrow(i),
                amount_gold=OPENING_GOLD,
                kind="deposit",
                reference=TABLE,
                open_accounts=True,
            )
            async with sem:
                while True:
                    try:
                        await stub.Transfer(request, timeout=60)
                        return
                    except grpc.aio.AioRpcError as exc:
                        if exc.code() != grpc.StatusCode.UNAVAILABLE:  # OUTBOX_BACKLOG: retry, same key
                            raise
                        await asyncio.sleep(REFUSED_RETRY_S)

        await asyncio.gather(*(one(i) for i in range(PLAYERS)))


@dataclass
class Posted:
    calls_per_s: float
    replies: list[bytes]
    latencies_ms: list[float]  # each call's, as its caller saw it


async def post_rate(address: str, token: str, method: str, payloads: list[bytes], callers: int) -> Posted:
    """Send ``payloads`` with ``callers`` concurrent callers. ``method`` is a ledger method's
    name or a full path (``/service/method``)."""
    async with channel(address, token) as ch:
        call = raw_call(ch, method) if not method.startswith("/") else ch.unary_unary(method)
        await call(payloads[0], timeout=120)  # warm the connection (and count it as work)
        queue = iter(range(1, len(payloads)))
        replies: list[bytes] = [b""] * len(payloads)
        latencies = [0.0] * len(payloads)
        clock = time.perf_counter

        async def caller() -> None:
            for i in queue:
                sent = clock()
                replies[i] = await call(payloads[i], timeout=120)
                latencies[i] = (clock() - sent) * 1000

        started = clock()
        await asyncio.gather(*(caller() for _ in range(callers)))
        elapsed = clock() - started
    return Posted((len(payloads) - 1) / elapsed, replies[1:], latencies[1:])


def count_applied(method: str, replies: list[bytes]) -> tuple[int, int]:
    applied = total = 0
    for reply in replies:
        if method == "PostTransaction":
            results = [pb.PostTransactionResponse.FromString(reply).result]
        else:
            results = list(pb.PostTransactionsResponse.FromString(reply).results)
        total += len(results)
        applied += sum(1 for r in results if r.status == pb.POST_STATUS_APPLIED)
    return applied, total


# The posting cases measure the write path: no outbox bound (see the module docstring).
WRITE_PATH_ENV = {"SOCAI_LEDGER_OUTBOX_MAX_LAG": "0"}

CASES = (
    # name, method, transactions per call, concurrent callers, transactions per round (full, quick)
    ("ledger.post_single_32", "PostTransaction", 1, 32, (12_000, 2_000)),
    ("ledger.post_batch_100", "PostTransactions", 100, 32, (40_000, 10_000)),
    ("ledger.post_batch_1000", "PostTransactions", 1000, 4, (40_000, 10_000)),
)


def run(ctx: BenchContext) -> list[Result]:
    quick = ctx.quick
    rounds = 2 if quick else 3
    pg = EmbeddedPostgres(ctx.workdir / "pg", port=free_port(), database="postgres")
    nats = EmbeddedNats(ctx.workdir / "nats", port=free_port(), test_harness=True)
    pg.start()
    nats.start()
    nats_url = nats.url_for(TEST_HARNESS)  # the bench's own identity: it reads what the ledger published
    run_id = uuid.uuid4().hex[:8]
    base = pg.admin_url().rsplit("/", 1)[0]

    def fresh_database(name: str, revision: str = "head") -> str:
        with psycopg.connect(pg.admin_url(), autocommit=True) as conn:
            conn.execute(f'create database "{name}_{run_id}"')
        url = f"{base}/{name}_{run_id}"
        migrate.upgrade(url, "ledger", revision)  # the raw peer copies the ledger's table definitions
        return url

    ceiling: RawCeiling | None = None
    try:
        only = os.environ.get("SOCAI_BENCH_LEDGER_ONLY", "")
        if only == "under_load":
            return relay_under_load(nats_url, fresh_database, pg.admin_url(), ctx)
        cases = [c for c in CASES if not only or c[0].rsplit(".", 1)[-1] in only.split(",")]
        raw_url = fresh_database("raw")
        checkpoint(pg.admin_url())
        ceiling = RawCeiling(raw_url, batches_per_round=5 if quick else 20)
        first = [ceiling.round() for _ in range(2)]  # warm, and the figure of the run's start
        print(f"   raw_postgres_copy at the start: {statistics.median(first):,.0f} tx/s", flush=True)
        results: list[Result] = []
        for name, method, size, callers, volume in cases:
            # Every case starts from a fresh journal with the same funded accounts, as the raw
            # peer does: a figure does not depend on the cases run before it.
            url = fresh_database(name.rsplit(".", 1)[-1])
            settings = Settings(
                nats_url=nats_url,
                database_url=url,
                ledger_addr=f"127.0.0.1:{free_port()}",
                metrics_port_base=free_port(),
                ledger_stream=f"LEDGER_{name.rsplit('.', 1)[-1].upper()}",
                ledger_prefix=f"bench.{name.rsplit('.', 1)[-1]}",
                log_format="json",
            )
            # Single posts: the empty-unary peer runs beside the ledger, measured round by
            # round with it (its ceiling in the same minutes).
            peer = (
                dataclasses.replace(settings, ledger_addr=f"127.0.0.1:{free_port()}", metrics_port_base=free_port())
                if size == 1
                else None
            )
            # SOCAI_BENCH_LEDGER_AB=<revision>: a second ledger beside it on a journal migrated
            # only to that revision, written the same round by round (peer "at_<revision>").
            other = None
            if AB:
                other_url = fresh_database(f"{name.rsplit('.', 1)[-1]}_ab", AB_REVISION or "head")
                other = dataclasses.replace(
                    settings,
                    database_url=other_url,
                    ledger_addr=f"127.0.0.1:{free_port()}",
                    metrics_port_base=free_port(),
                    ledger_stream=f"{settings.ledger_stream}_AB",
                    ledger_prefix=f"{settings.ledger_prefix}.ab",
                )
            with contextlib.ExitStack() as stack:
                ledger = stack.enter_context(LedgerProcess(settings, ctx.workdir / f"{name}.log", WRITE_PATH_ENV))
                if other is not None:
                    stack.enter_context(
                        LedgerProcess(other, ctx.workdir / f"{name}_ab.log", {**WRITE_PATH_ENV, **AB_ENV})
                    )
                    asyncio.run(fund(other.ledger_addr, other.tokens["cashier"]))
                pids = None
                if peer is not None:
                    empty = stack.enter_context(
                        LedgerProcess(peer, ctx.workdir / "grpc_empty_unary_32.log", module=EMPTY_PEER_MODULE)
                    )
                    pids = (ledger.pid, empty.pid)
                asyncio.run(fund(settings.ledger_addr, settings.tokens["cashier"]))
                checkpoint(pg.admin_url())
                per_round = volume[1] if quick else volume[0]
                measured = measure(settings, name, method, size, callers, per_round, rounds, peer, pids, ceiling, other)
                value, rates = measured.value, measured.rates
                raw = statistics.median(measured.raw_rates)
                peers = {"raw_postgres_copy": raw}
                if other is not None:
                    peers[AB_PEER] = statistics.median(measured.other_rates)
                    print(
                        f"   {name} {AB_PEER}: rounds {[round(r) for r in measured.other_rates]} "
                        f"(this code {[round(r) for r in measured.rates]})",
                        flush=True,
                    )
                if peer is not None:
                    peers["grpc_empty_unary_32"] = statistics.median(measured.peer_rates)
                results.append(
                    Result(
                        name=name,
                        value=value,
                        unit="tx/s",
                        peers=peers,
                        params={
                            "ratio": round(value / raw, 3),
                            "transactions_per_call": size,
                            "concurrent_callers": callers,
                            "transactions_per_round": per_round,
                            "rounds": rounds,
                            "rates": [round(x) for x in rates],
                            "raw_rates_interleaved": [round(x) for x in measured.raw_rates],
                            "entries_per_transaction": 3,
                            "hot_account": "house:fees credited by every transaction",
                            "accounts": PLAYERS + 1,
                            "fresh_journal": True,
                            "outbox_relay": "running; publishes gently while postings wait (outbox.py)",
                            "outbox_bound": "off (SOCAI_LEDGER_OUTBOX_MAX_LAG=0): the write path alone",
                            "log_level": "info (a JSON line per RPC)",
                            "cpus": os.cpu_count(),
                        },
                    )
                )
                print(f"   {name}: {value:,.0f} tx/s (ratio {value / raw:.2f}; rounds {[round(r) for r in rates]})")
                if peer is not None:
                    results += single_post_results(measured, raw)
                    print(
                        f"   grpc_empty_unary_32: {peers['grpc_empty_unary_32']:,.0f} calls/s "
                        f"(post_single_32 at {value / peers['grpc_empty_unary_32']:.2f} of it); "
                        f"p99 {results[-1].value:.1f} ms (empty {results[-1].peers['grpc_empty_unary_32']:.1f}); "
                        f"server CPU per call {[round(x) for x in measured.cpu_us_per_call]} µs "
                        f"(empty {[round(x) for x in measured.peer_cpu_us_per_call]}); per batch "
                        f"{[round(x, 1) for x in measured.batch_items]} tx in "
                        f"{[round(x, 1) for x in measured.batch_write_ms]} ms, writer busy "
                        f"{[round(x, 2) for x in measured.writer_busy]}",
                        flush=True,
                    )
                if size == 1000:
                    results.append(drain_rate(url))
            verify(url)
        if not only:
            results += relay_under_load(nats_url, fresh_database, pg.admin_url(), ctx)
        return results
    finally:
        if ceiling is not None:
            ceiling.close()
        nats.stop()
        pg.stop()


def checkpoint(admin_url: str) -> None:
    """Start every measurement from a fresh checkpoint: no earlier run's dirty pages or WAL
    volume (which force a checkpoint mid-run) weigh on it."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("checkpoint")


@dataclass
class Measured:
    value: float  # median transactions per second
    rates: list[float]  # each round's
    latencies_ms: list[float]  # every call's, all rounds
    peer_rates: list[float]  # the empty-unary peer's calls per second, round by round (single posts)
    peer_latencies_ms: list[float]
    raw_rates: list[float] = dataclasses.field(default_factory=list)  # the raw peer's, round by round
    other_rates: list[float] = dataclasses.field(default_factory=list)  # the A/B ledger's, round by round
    cpu_us_per_call: list[float] = dataclasses.field(default_factory=list)  # the server process's, per round
    # The batcher's own figures per round: transactions per batch, ms to write and commit one
    # (socai_ledger_batch_seconds: from the first round trip to the commit's answer), and
    # the share of the round's time the writer spent writing.
    batch_items: list[float] = dataclasses.field(default_factory=list)
    batch_write_ms: list[float] = dataclasses.field(default_factory=list)
    writer_busy: list[float] = dataclasses.field(default_factory=list)
    peer_cpu_us_per_call: list[float] = dataclasses.field(default_factory=list)


def batcher_totals(settings: Settings) -> tuple[float, float, float]:
    """(seconds, batches, transactions) of the ledger's write batcher so far, from its own
    ``socai_ledger_batch_seconds`` and ``socai_ledger_batch_items`` on /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{settings.metrics_port_base}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = dict.fromkeys(BATCHER_SERIES, 0.0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in found:
            found[name] = float(value)
    seconds, batches, items = (found[n] for n in BATCHER_SERIES)
    return seconds, batches, items


BATCHER_SERIES = ("socai_ledger_batch_seconds_sum", "socai_ledger_batch_seconds_count", "socai_ledger_batch_items_sum")


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system, every thread) process ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    settings: Settings,
    name: str,
    method: str,
    size: int,
    callers: int,
    per_round: int,
    rounds: int,
    peer: Settings | None = None,
    pids: tuple[int, int] | None = None,
    ceiling: RawCeiling | None = None,
    other: Settings | None = None,
) -> Measured:
    """Every transaction must apply. With a ``peer`` (the empty-unary server), each round
    first sends as many empty calls to it with as many callers, so both see the same load;
    ``pids`` (the ledger's, the peer's) adds each server's CPU per call. With the raw
    ``ceiling``, each round also runs one of its rounds first (the ratio of a case is to the
    raw rounds interleaved with its own). With ``other`` (a second ledger), each round sends
    it the same payloads too, before or after this one in turn."""
    workload = Workload(random.Random(11))
    out = Measured(0.0, [], [], [], [])
    applied = total = 0
    for r in range(rounds):
        txs = workload.transactions(per_round + size, f"{name}:{r}")
        if size == 1:
            payloads = [pb.PostTransactionRequest(transaction=t).SerializeToString() for t in txs]
        else:
            payloads = [
                pb.PostTransactionsRequest(transactions=txs[i : i + size]).SerializeToString()
                for i in range(0, len(txs), size)
            ]
        if ceiling is not None:
            out.raw_rates.append(ceiling.round())
        if peer is not None:
            cpu = process_cpu_s(pids[1]) if pids else 0.0
            empty = asyncio.run(
                post_rate(peer.ledger_addr, peer.tokens["settlement"], EMPTY_METHOD, [b""] * len(payloads), callers)
            )
            out.peer_rates.append(empty.calls_per_s)
            out.peer_latencies_ms += empty.latencies_ms
            if pids:
                out.peer_cpu_us_per_call.append((process_cpu_s(pids[1]) - cpu) * 1e6 / len(payloads))
        if other is not None and r % 2 == 0:
            out.other_rates.append(post_other(other, method, payloads, callers) * size)
        cpu = process_cpu_s(pids[0]) if pids else 0.0
        before = batcher_totals(settings)
        started = time.perf_counter()
        posted = asyncio.run(post_rate(settings.ledger_addr, settings.tokens["settlement"], method, payloads, callers))
        elapsed = time.perf_counter() - started
        if pids:
            out.cpu_us_per_call.append((process_cpu_s(pids[0]) - cpu) * 1e6 / len(payloads))
        seconds, batches, items = (b - a for a, b in zip(before, batcher_totals(settings), strict=True))
        if batches:
            out.batch_items.append(items / batches)
            out.batch_write_ms.append(seconds / batches * 1000)
            out.writer_busy.append(seconds / elapsed)
        out.rates.append(posted.calls_per_s * size)
        out.latencies_ms += posted.latencies_ms
        if other is not None and r % 2 == 1:
            out.other_rates.append(post_other(other, method, payloads, callers) * size)
        a, t = count_applied(method, posted.replies)
        applied, total = applied + a, total + t
    if applied != total:
        raise RuntimeError(f"{name}: only {applied} of {total} transactions applied")
    out.value = statistics.median(out.rates)
    return out


def post_other(other: Settings, method: str, payloads: list[bytes], callers: int) -> float:
    """Calls per second of the A/B ledger on ``payloads``; every transaction must apply."""
    posted = asyncio.run(post_rate(other.ledger_addr, other.tokens["settlement"], method, payloads, callers))
    applied, total = count_applied(method, posted.replies)
    if applied != total:
        raise RuntimeError(f"A/B ledger: only {applied} of {total} transactions applied")
    return posted.calls_per_s


def single_post_results(measured: Measured, raw: float) -> list[Result]:
    """The empty-unary ceiling and the latency of single posts under 32 callers."""
    ceiling = statistics.median(measured.peer_rates)
    p50, p99 = percentile(measured.latencies_ms, 50), percentile(measured.latencies_ms, 99)
    peer_p50, peer_p99 = percentile(measured.peer_latencies_ms, 50), percentile(measured.peer_latencies_ms, 99)
    return [
        Result(
            name="ledger.grpc_empty_unary_32",
            value=ceiling,
            unit="calls/s",
            params={
                "what": "an empty unary call on the ledger's server (build_server: its options, interceptor, "
                "logging and metrics; tests/bench/grpc_empty_peer.py), 32 callers, rounds interleaved "
                "with ledger.post_single_32's",
                "rates": [round(x) for x in measured.peer_rates],
                "p50_ms": round(peer_p50, 2),
                "p99_ms": round(peer_p99, 2),
                "server_cpu_us_per_call": [round(x) for x in measured.peer_cpu_us_per_call],
                "ledger_cpu_us_per_call": [round(x) for x in measured.cpu_us_per_call],
                "cpus": os.cpu_count(),
            },
        ),
        Result(
            name="ledger.post_single_32_p99_ms",
            value=p99,
            unit="ms",
            higher_is_better=False,
            peers={"grpc_empty_unary_32": peer_p99},
            params={
                "p50_ms": round(p50, 2),
                "peer_p50_ms": round(peer_p50, 2),
                "calls": len(measured.latencies_ms),
                "what": "latency of one PostTransaction as its caller sees it, 32 callers",
                "ledger_cpu_us_per_call": [round(x) for x in measured.cpu_us_per_call],
                "empty_server_cpu_us_per_call": [round(x) for x in measured.peer_cpu_us_per_call],
                "transactions_per_batch": [round(x, 1) for x in measured.batch_items],
                "batch_write_ms": [round(x, 2) for x in measured.batch_write_ms],
                "writer_busy_share": [round(x, 2) for x in measured.writer_busy],
            },
        ),
    ]


def drain_rate(url: str, timeout_s: float = 600.0) -> Result:
    """Publish rate of the relay while it drains the backlog (no postings competing)."""

    def progress() -> tuple[int, int]:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "select (select published_seq from socai_ledger.outbox_progress), "
                "(select coalesce(max(journal_seq), 0) from socai_ledger.transactions)"
            ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    published, head = progress()
    start_published, started = published, time.perf_counter()
    while published < head and time.perf_counter() - started < timeout_s:
        time.sleep(0.5)
        published, head = progress()
    elapsed = time.perf_counter() - started
    rate = (published - start_published) / elapsed if elapsed > 0 and published > start_published else 0.0
    print(f"   ledger.outbox_drain: {rate:,.0f} tx/s ({published - start_published} published)", flush=True)
    return Result(
        name="ledger.outbox_drain",
        value=rate,
        unit="tx/s",
        params={
            "backlog_transactions": head - start_published,
            "caught_up": published >= head,
            "nats_sync": "sync_interval: always (fsync per message)",
        },
    )


UNDER_LOAD_CALLERS = 32
# The bound in force for the figure. A relay that keeps up stays far below it (the lag peaks
# at a few hundred here); one that falls behind for good meets it, and the postings then wait
# or are refused (``refused_calls``), which the figure shows. The service's default, 10,000,
# is sized for outages (socai_ledger.config).
UNDER_LOAD_MAX_LAG = 2_000
REFUSED_RETRY_S = 0.05


def relay_under_load(
    nats_url: str, fresh_database: Callable[[str], str], admin_url: str, ctx: BenchContext
) -> list[Result]:
    """Publish rate of the relay while 32 callers keep posting single transactions: with the
    outbox's bound (the figure) and without one (its peer ``no_bound``), each on a fresh
    journal, one after the other in the same run."""
    name = "ledger.outbox_relay_under_load"
    seconds = 8.0 if ctx.quick else 20.0
    runs: dict[str, dict[str, Any]] = {}
    for variant, max_lag in (("bound", UNDER_LOAD_MAX_LAG), ("no_bound", 0)):
        url = fresh_database(f"under_load_{variant}")
        settings = Settings(
            nats_url=nats_url,
            database_url=url,
            ledger_addr=f"127.0.0.1:{free_port()}",
            metrics_port_base=free_port(),
            ledger_stream=f"LEDGER_UNDER_LOAD_{variant.upper()}",
            ledger_prefix=f"bench.under_load_{variant}",
            log_format="json",
        )
        env = {"SOCAI_LEDGER_OUTBOX_MAX_LAG": str(max_lag)}
        with LedgerProcess(settings, ctx.workdir / f"{name}.{variant}.log", env):
            asyncio.run(fund(settings.ledger_addr, settings.tokens["cashier"]))
            wait_published(url)  # the funding's own backlog is not part of the figure
            checkpoint(admin_url)
            load = asyncio.run(post_while_sampling(settings, url, seconds))
            catch_up_started = time.perf_counter()
            published, head = outbox_progress(url)
            while published < head and time.perf_counter() - catch_up_started < 300:
                time.sleep(0.1)
                published, head = outbox_progress(url)
            load["catch_up_s"] = time.perf_counter() - catch_up_started
            load["caught_up"] = published >= head
        verify(url)
        load["max_lag"] = max_lag
        runs[variant] = load
        print(
            f"   {name} ({variant}): {load['published'] / load['elapsed_s']:,.0f} tx/s published while "
            f"{load['posted'] / load['elapsed_s']:,.0f} tx/s were posted (lag max {load['lag_max']}, at the end "
            f"{load['lag_end']}, caught up in {load['catch_up_s']:.1f} s; {load['refused']} calls refused)",
            flush=True,
        )

    def figures(load: dict[str, Any]) -> dict[str, Any]:
        return {
            "max_lag_setting": load["max_lag"],
            "published_tx_per_s": round(load["published"] / load["elapsed_s"]),
            "posted_tx_per_s": round(load["posted"] / load["elapsed_s"]),
            "published_of_posted": round(load["published"] / max(1, load["posted"]), 3),
            "load_s": round(load["elapsed_s"], 1),
            "lag_max": load["lag_max"],
            "lag_at_end_of_load": load["lag_end"],
            # The relay trails by what a round gathers and awaits: in seconds of postings.
            "lag_at_end_of_load_s": round(load["lag_end"] * load["elapsed_s"] / max(1, load["posted"]), 2),
            "lag_samples": load["lag_samples"],
            "refused_calls": load["refused"],
            "caught_up": load["caught_up"],
            "catch_up_s": round(load["catch_up_s"], 2),
        }

    bound, free = runs["bound"], runs["no_bound"]
    return [
        Result(
            name=name,
            value=bound["published"] / bound["elapsed_s"],
            unit="tx/s",
            peers={"no_bound": free["published"] / free["elapsed_s"]},
            params={
                **figures(bound),
                "no_bound": figures(free),
                "method": "PostTransaction (settlements of one table, one a call)",
                "concurrent_callers": UNDER_LOAD_CALLERS,
                "entries_per_transaction": 3,
                "refused_calls_retried_after_s": REFUSED_RETRY_S,
                "nats_sync": "sync_interval: always (fsync per message)",
                "cpus": os.cpu_count(),
            },
        )
    ]


def outbox_progress(url: str) -> tuple[int, int]:
    """(the relay's cursor, the journal head)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select (select published_seq from socai_ledger.outbox_progress), "
            "(select coalesce(max(journal_seq), 0) from socai_ledger.transactions)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def wait_published(url: str, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    published, head = outbox_progress(url)
    while published < head and time.monotonic() < deadline:
        time.sleep(0.2)
        published, head = outbox_progress(url)


async def post_while_sampling(settings: Settings, url: str, seconds: float) -> dict[str, Any]:
    """Post for ``seconds`` with UNDER_LOAD_CALLERS callers, sampling the outbox twice a second."""
    workload = Workload(random.Random(13))
    capacity = int(seconds * 4_000) + UNDER_LOAD_CALLERS  # more than one process can post
    requests = []
    # Settlements of one table's hands, one per call (many small batches, so many small
    # outbox ranges), as the other cases post them.
    for tx in workload.transactions(capacity, "under-load"):
        requests.append(pb.PostTransactionRequest(transaction=tx).SerializeToString())
    payloads = iter(requests)
    stop = asyncio.Event()
    lags: list[int] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:

        async def progress() -> tuple[int, int]:
            cursor = await db.execute(
                "select (select published_seq from socai_ledger.outbox_progress), "
                "(select coalesce(max(journal_seq), 0) from socai_ledger.transactions)"
            )
            row = await cursor.fetchone()
            assert row is not None
            return int(row[0]), int(row[1])

        async def sample() -> None:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
                published, head = await progress()
                lags.append(head - published)

        async with channel(settings.ledger_addr, settings.tokens["settlement"]) as ch:
            call = raw_call(ch, "PostTransaction")

            refused = 0

            async def caller() -> None:
                nonlocal refused
                for payload in payloads:
                    while not stop.is_set():
                        try:
                            await call(payload, timeout=120)
                            break
                        except grpc.aio.AioRpcError as exc:
                            # Held back past the outbox's bound: nothing was written; the
                            # same request again is a first attempt.
                            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                                raise
                            refused += 1
                            await asyncio.sleep(REFUSED_RETRY_S)
                    if stop.is_set():
                        return

            published_before, head_before = await progress()
            started = time.perf_counter()
            sampler = asyncio.create_task(sample())
            callers = [asyncio.create_task(caller()) for _ in range(UNDER_LOAD_CALLERS)]
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.gather(*callers, sampler)
            published_after, head_after = await progress()
            elapsed = time.perf_counter() - started
    return {
        "elapsed_s": elapsed,
        "posted": head_after - head_before,
        "published": published_after - published_before,
        "lag_max": max(lags, default=0),
        "lag_end": head_after - published_after,
        "lag_samples": lags[:: max(1, len(lags) // 20)],
        "refused": refused,
    }


def verify(url: str) -> None:
    """The benchmark's own sanity check: the books balance after everything it posted."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select sum(balance_gold)::numeric, min(balance_gold) from socai_ledger.accounts "
            "where account_id <> 'external:cashier'"
        ).fetchone()
        total = conn.execute("select sum(balance_gold)::numeric from socai_ledger.accounts").fetchone()
    assert row is not None and total is not None
    if int(total[0]) != 0 or int(row[1]) < 0:
        raise RuntimeError(f"the books do not balance after the benchmark: total {total[0]}, min {row[1]}")
