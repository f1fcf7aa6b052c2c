"""Settlement and audit benchmarks, on real NATS, PostgreSQL and the real ledger.

- ``settlement.drain`` (hands/s): 20,000 finished hands of every available game (500 with
  ``--quick``), from ``tests.support.simulate`` at 10 hands a table, are in the stream before
  settlement starts; the ledger (``python -m socai_ledger``) and settlement
  (``python -m socai_settlement``) run as their own processes, as in production. The figure
  is hands / (last ``settled_at`` − first ``settled_at``) from the settlement database, once
  every hand is stored. Params: hands, games, post batch, the first hand's delay after start.
  The backlog is loaded through a nats-server on the same store without
  ``sync_interval: always`` (fsync per message) to save minutes of setup; the drain itself
  runs on the production setting.
- ``audit.replay`` (hands/s): the offline auditor (``read_jsonl`` + ``verify``: commitment,
  every card and die, the rules engine) on a JSONL export of the same hands, no ledger.
- ``settlement.publish_to_ledger_p99_ms`` / ``…_p50_ms`` (ms, lower is better): 100
  simulated tables publish their hands at a steady pace through ``EventLog`` (as the table
  service does); the latency of a hand is the ledger transaction's ``created_at`` minus its
  HandEnded ``occurred_at`` (stamped when it is published).

Hook for ``settlement.e2e_p99_ms_100_tables`` (the table service's bots): run the stack
with ``BenchEnv``, let the table service play, then ``await env.hand_latencies_ms()``
gives the same latency for every hand in the stream (HandEnded ``occurred_at`` → ledger
commit), whoever published it; report ``percentile(…, 99)``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import psycopg

from socai.audit.auditor import verify
from socai.audit.export import read_jsonl, write_jsonl
from socai.events import codec
from socai.events.log import EventLog
from socai.events.model import HandEnded
from socai.gen.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.nats import connect, ensure_stream, events_stream_spec
from socai.rules import registry
from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port
from socai_cli.stack import grpc_health
from socai_settlement.config import default_replay_workers
from tests.bench.harness import BenchContext, Result, percentile, rate
from tests.support.simulate import Simulation, fund, simulate

DRAIN_HANDS = 20_000
DRAIN_HANDS_QUICK = 500
LATENCY_TABLES = 100
LATENCY_HANDS_PER_TABLE = 6
LATENCY_HANDS_PER_TABLE_QUICK = 2


def run(ctx: BenchContext) -> list[Result]:
    hands = DRAIN_HANDS_QUICK if ctx.quick else DRAIN_HANDS
    sim = simulate(hands, registry.available(), seed=2026)
    results = [audit_replay(ctx, sim)]
    results += asyncio.run(_services(ctx, sim))
    return results


# --- audit.replay ---------------------------------------------------------------------------


def audit_replay(ctx: BenchContext, sim: Simulation) -> Result:
    export = ctx.workdir / "export.jsonl"
    with export.open("w", encoding="utf-8") as out:
        write_jsonl(sim.events(), out)

    def once() -> int:
        audit = verify(read_jsonl(export), source="bench")
        assert audit.report.ok, audit.report.render()
        return audit.report.hands_verified

    return Result(
        "audit.replay",
        rate(once, rounds=1 if ctx.quick else 3),
        "hands/s",
        params={"hands": len(sim.hands), "games": list(registry.available()), "source": "jsonl"},
    )


# --- the stack --------------------------------------------------------------------------------


@dataclass
class BenchEnv:
    """Embedded NATS and PostgreSQL under ``root``, the ledger and settlement as processes."""

    root: Path
    settings: Settings = field(init=False)
    nats: EmbeddedNats | None = None
    postgres: EmbeddedPostgres | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start_infra(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.postgres = EmbeddedPostgres(self.root / "pg", port=free_port(), database="postgres")
        self.postgres.start()
        with psycopg.connect(self.postgres.url, autocommit=True) as conn:
            conn.execute("create database bench")
        url = self.postgres.url.rsplit("/", 1)[0] + "/bench"
        migrate.upgrade_all(url)
        self.nats = EmbeddedNats(self.root / "nats", port=free_port())
        self.settings = dataclasses.replace(
            Settings(),
            var_dir=self.root,
            nats_url=self.nats.url,
            database_url=url,
            ledger_addr=f"127.0.0.1:{free_port()}",
            settlement_addr=f"127.0.0.1:{free_port()}",
            table_addr=f"127.0.0.1:{free_port()}",
            metrics_port_base=free_port(),
            log_level="warning",
        )

    def start_nats(self) -> None:
        assert self.nats is not None
        self.nats.start()

    def start_nats_for_loading(self) -> subprocess.Popen[bytes]:
        """nats-server on the same store without fsync per message (loading only)."""
        assert self.nats is not None
        root = self.nats.root.resolve()
        root.mkdir(parents=True, exist_ok=True)
        conf = root / "load.conf"
        conf.write_text(
            f'listen: 127.0.0.1:{self.nats.port}\nmax_payload: 1MB\njetstream {{ store_dir: "{root / "jetstream"}" }}\n'
        )
        proc = subprocess.Popen([str(EmbeddedNats.binary()), "-c", str(conf)], stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        return proc

    async def start_service(self, name: str, **env: str) -> None:
        full = {**os.environ, **self.settings.as_env(), "SOCAI_LOG_FORMAT": "json", **env}
        log = (self.root / f"{name}.log").open("ab")
        proc = subprocess.Popen([sys.executable, "-m", f"socai_{name}"], env=full, stdout=log, stderr=subprocess.STDOUT)
        self.procs[name] = proc
        address = self.settings.ledger_addr if name == "ledger" else self.settings.settlement_addr
        for _ in range(300):
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited: {(self.root / f'{name}.log').read_text()[-2000:]}")
            if await grpc_health(address, 0.5) == "SERVING":
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{name} did not start")

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.procs.clear()
        if self.nats is not None:
            self.nats.stop()
        if self.postgres is not None:
            self.postgres.stop()

    def settled(self) -> tuple[int, datetime | None, datetime | None]:
        assert self.settings.database_url
        with psycopg.connect(self.settings.database_url) as conn:
            row = conn.execute(
                'select count(*), min(settled_at), max(settled_at) from "socai_settlement".settlements'
            ).fetchone()
        assert row is not None
        return int(row[0]), row[1], row[2]

    def ledger(self, caller: str = "cashier") -> tuple[Any, Any]:
        ch = channel(self.settings.ledger_addr, self.settings.tokens[caller])
        return ch, ledger_pb2_grpc.LedgerServiceStub(ch)

    async def hand_latencies_ms(self) -> list[float]:
        return await hand_latencies_ms(self.settings)


async def hand_latencies_ms(settings: Settings) -> list[float]:
    """For every hand in the stream: its ledger transaction's ``created_at`` minus its
    HandEnded ``occurred_at``, in ms (hands that move no gold are skipped). The table
    stamps ``occurred_at`` when it publishes, and both clocks are this machine's."""
    nc = await connect(settings.nats_url or "", name="bench-latency")
    log = EventLog(nc, settings.events_stream, settings.events_prefix)
    ended: dict[str, datetime] = {}
    try:
        async for stored in log.read(f"{log.prefix}.>"):
            if isinstance(stored.event.body, HandEnded):
                ended[stored.event.hand_id] = stored.event.occurred_at
    finally:
        await nc.close()
    out: list[float] = []
    async with channel(settings.ledger_addr, settings.tokens["auditor"]) as ch:
        ledger = ledger_pb2_grpc.LedgerServiceStub(ch)
        for hand_id, at in ended.items():
            try:
                reply = await ledger.GetTransaction(
                    ledger_pb2.GetTransactionRequest(idempotency_key=f"settle:{hand_id}")
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.NOT_FOUND:
                    continue
                raise
            committed = reply.transaction.created_at.ToDatetime(tzinfo=UTC)
            out.append((committed - at).total_seconds() * 1000)
    return out


async def _load(env: BenchEnv, sim: Simulation) -> None:
    """Put every event in the stream, table facts then hands, each subject in order."""
    nc = await connect(env.settings.nats_url or "", name="bench-load", pending_size=64 * 1024 * 1024)
    try:
        js = nc.jetstream()
        await ensure_stream(js, events_stream_spec(env.settings.events_stream, env.settings.events_prefix))
        log = EventLog(nc, env.settings.events_stream, env.settings.events_prefix)
        events = sim.events()
        for i, e in enumerate(events):
            await nc.publish(
                log.subject_of(e.table_id, e.hand_id), codec.encode(e), headers={"Nats-Msg-Id": e.event_id}
            )
            if i % 2000 == 0:
                await nc.flush()
        await nc.flush()
        for _ in range(6000):
            if (await js.stream_info(log.stream)).state.messages >= len(events):
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("the backlog did not reach the stream")
    finally:
        await nc.close()


async def _services(ctx: BenchContext, sim: Simulation) -> list[Result]:
    env = BenchEnv(ctx.workdir / "stack")
    env.start_infra()
    results: list[Result] = []
    try:
        loader = env.start_nats_for_loading()
        try:
            await _load(env, sim)
        finally:
            loader.send_signal(signal.SIGTERM)
            loader.wait(30)
        env.start_nats()
        await env.start_service("ledger")
        ch, ledger = env.ledger("cashier")
        try:
            await fund(ledger, sim)
        finally:
            await ch.close()
        post_batch = 200
        started = time.time()
        await env.start_service("settlement", SOCAI_SETTLEMENT_POST_BATCH=str(post_batch))
        deadline = time.monotonic() + 1800
        while True:
            count, first, last = env.settled()
            if count >= len(sim.hands) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.25)
        if count < len(sim.hands):
            raise RuntimeError(f"only {count} of {len(sim.hands)} hands settled")
        assert first is not None and last is not None
        span_s = max((last - first).total_seconds(), 1e-6)
        results.append(
            Result(
                "settlement.drain",
                count / span_s,
                "hands/s",
                params={
                    "hands": count,
                    "events": len(sim.events()),
                    "games": list(registry.available()),
                    "post_batch": post_batch,
                    "first_settled_after_start_s": round(first.timestamp() - started, 3),
                    "ledger": "socai_ledger process",
                    "replay_workers": default_replay_workers(),
                },
            )
        )
        results += await _latency(ctx, env)
    finally:
        env.stop()
    return results


async def _latency(ctx: BenchContext, env: BenchEnv) -> list[Result]:
    """100 tables publish at a steady pace while settlement runs: HandEnded → ledger commit."""
    per_table = LATENCY_HANDS_PER_TABLE_QUICK if ctx.quick else LATENCY_HANDS_PER_TABLE
    sim = simulate(
        LATENCY_TABLES * per_table, ("holdem", "xito", "taixiu"), seed=99, hands_per_table=per_table, table_prefix="lat"
    )
    ch, ledger = env.ledger("cashier")
    try:
        await fund(ledger, sim)
    finally:
        await ch.close()
    nc = await connect(env.settings.nats_url or "", name="bench-tables")
    log = EventLog(nc, env.settings.events_stream, env.settings.events_prefix)
    ended: dict[str, datetime] = {}

    async def table(t: Any) -> None:
        for hand in t.hands:
            last = 0
            for e in hand.events:
                now = datetime.now(UTC)
                stamped = dataclasses.replace(e, occurred_at=now)
                last = await log.append(stamped, last)
                if isinstance(e.body, HandEnded):
                    ended[e.hand_id] = now
                await asyncio.sleep(0.002)  # a bot's think time between events

    try:
        await asyncio.gather(*(table(t) for t in sim.tables))
    finally:
        await nc.close()
    keys = [f"settle:{h.hand_id}" for h in sim.hands if h.settlement.entries()]
    ch, ledger = env.ledger("auditor")
    latencies: list[float] = []
    try:
        deadline = time.monotonic() + 120
        pending = list(keys)
        while pending and time.monotonic() < deadline:
            still = []
            for key in pending:
                try:
                    reply = await ledger.GetTransaction(ledger_pb2.GetTransactionRequest(idempotency_key=key))
                except grpc.aio.AioRpcError:
                    still.append(key)
                    continue
                committed = reply.transaction.created_at.ToDatetime(tzinfo=UTC)
                latencies.append((committed - ended[key.removeprefix("settle:")]).total_seconds() * 1000)
            pending = still
            if pending:
                await asyncio.sleep(0.2)
    finally:
        await ch.close()
    params = {
        "tables": LATENCY_TABLES,
        "hands": len(keys),
        "think_ms": 2,
        "publisher": "tests.support.simulate via EventLog",
    }
    return [
        Result(
            "settlement.publish_to_ledger_p50_ms",
            percentile(latencies, 50),
            "ms",
            higher_is_better=False,
            params=params,
        ),
        Result(
            "settlement.publish_to_ledger_p99_ms",
            percentile(latencies, 99),
            "ms",
            higher_is_better=False,
            params=params,
        ),
    ]
