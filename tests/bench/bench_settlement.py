"""Settlement and audit benchmarks, on real NATS, PostgreSQL and the real ledger.

- ``settlement.drain`` (hands/s): 20,000 finished hands of every available game (500 with
  ``--quick``), from ``tests.support.synthetic`` at 10 hands a table, are in the stream before
  settlement starts; the ledger (``python -m socai_ledger``) and settlement
  (``python -m socai_settlement``) run as their own processes, as in production. The figure
  is hands / (last ``settled_at`` − first ``settled_at``) from the settlement database, once
  every hand is stored. Params: hands, games, post batch, the first hand's delay after start.
  Peer ``nats_raw_read`` (hands/s): the same stream read on the same server just before
  settlement starts, by a consumer that does nothing else (``socai.infra.nats_pull.Pull``, as
  settlement pulls, in batches of settlement's ``fetch_batch``, no acks): hands / the time to
  receive every message; the ratio drain / raw read is in the params.
  The backlog is loaded through a nats-server on the same store without
  ``sync_interval: always`` (fsync per message) to save minutes of setup; the drain itself
  runs on the production setting.
- ``audit.replay`` (hands/s): the offline auditor (``read_jsonl`` + ``verify``: commitment,
  every card and die, the rules engine) on a JSONL export of the same hands, no ledger.
  Peer ``via_protobuf``: the same audit with each line read into its protobuf first (as the
  auditor read an export before it read one straight into domain events), one round.
- ``audit.offline_verify_hands_per_s`` (hands/s): the same hands as a ``stored`` export,
  every message chained and every HandEnded sealed as the table service writes them; the
  offline audit reads the file and checks every hand's chain and seal, then replays it
  (``verify`` with the table's key). Peers in the same run: ``audit.replay`` (no seal, no
  chain) and ``seals_only`` (read the file, group by subject, ``seal.authenticate`` each
  hand: the checks alone).
- ``settlement.publish_to_ledger_p99_ms`` / ``…_p50_ms`` (ms, lower is better): 100
  simulated tables publish their hands at a steady pace through ``EventLog`` (as the table
  service does); the latency of a hand is the ledger transaction's ``created_at`` minus its
  HandEnded ``occurred_at`` (stamped when it is published).

Scale-out (issue 19), on event logs of 8 partitions (``Settings.event_partitions``) that
settlement instances share through leases:

- ``settlement.drain_2_instances`` (hands/s): the same backlog on a second stack, drained by
  two settlement processes started at once (announced as members in the lease bucket
  beforehand, so each takes its 4 partitions without a rebalance) at the default lease TTL
  (10 s); hands settled after both hold their partitions / (last ``settled_at`` − that
  moment). Both compete with the ledger, PostgreSQL and NATS for this machine's cores (the
  result's note says so).
- ``settlement.handover_ms`` / ``settlement.handover_graceful_ms`` (ms, p99; p50 and every
  sample in the params): on a third stack, two instances with a 2 s lease TTL under a light
  load; one is sent SIGKILL 5 times, then SIGTERM 5 times (restarted each time under a new
  instance id); the time from the signal until every ``partition.<k>`` key of
  ``settlement_leases_<stream>`` names a live instance. After a crash that is about the TTL,
  by design.
- ``settlement.e2e_latency_by_tables`` (ms, p99 at 200 tables with 2 instances): publish →
  ledger p50/p99 as above at 10, 50, 100 and 200 tables, with 1 instance on the
  unpartitioned log (first stack), then 2 instances and 1 instance on 8 partitions (second
  stack, after the drain); the figures in the params, plotted to
  ``var/bench/settlement_latency.png``.

Hook for ``settlement.e2e_p99_ms_100_tables`` (the table service's bots): run the stack
with ``BenchEnv``, let the table service play, then ``await env.hand_latencies_ms()``
gives the same latency for every hand in the stream (HandEnded ``occurred_at`` → ledger
commit), whoever published it; report ``percentile(…, 99)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import psycopg
from nats.aio.client import Client as NatsClient
from nats.js import api as js_api
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from nats.js.kv import KeyValue

from socai.audit.auditor import Seals, verify
from socai.audit.export import RawEvent, _decode, parse_event_json, read_jsonl, write_jsonl, write_stored_jsonl
from socai.events import seal
from socai.events.log import EventLog
from socai.events.model import HandEnded
from socai.events.model import subject as canonical_subject
from socai.gen.events.v1 import events_pb2
from socai.gen.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.leases import LeaseConfig, ensure_lease_bucket, member_key
from socai.infra.nats import connect, ensure_stream, events_stream_spec
from socai.infra.nats_auth import TEST_HARNESS
from socai.infra.nats_pull import Pull
from socai.rules import registry
from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port
from socai_cli.stack import grpc_health
from socai_settlement.config import SettlementConfig, default_replay_workers
from tests.bench.harness import BenchContext, Result, percentile, rate
from tests.support.synthetic import DEV_SIGNER, Simulation, fund, sealed, simulate

DRAIN_HANDS = 20_000
DRAIN_HANDS_QUICK = 500
LATENCY_TABLES = 100
LATENCY_HANDS_PER_TABLE = 6
LATENCY_HANDS_PER_TABLE_QUICK = 2
LATENCY_GAMES = ("holdem", "xito", "taixiu")
THINK_S = 0.002  # a bot's think time between a table's events
POST_BATCH = 200
SCALEOUT_PARTITIONS = 8
HANDOVER_TTL_S = 2.0  # short, so that a crash's handover (about one TTL) keeps the benchmark short
LEASE_POLL_S = 0.02
LEASE_WAIT_S = 60.0
HANDOVER_ROUNDS = 5  # of each: SIGKILL, then SIGTERM
HANDOVER_ROUNDS_QUICK = 2
SERIES_TABLES = (10, 50, 100, 200)
SERIES_HANDS_PER_TABLE = 4
LOAD_TABLES = 10
LOAD_THINK_MS = 10
LOAD_HANDS = 3000
LOAD_HANDS_QUICK = 600
LOAD_HANDS_PER_TABLE = 40

# Publish → ledger p50/p99 by number of tables, per setup ("2 instances, P = 8" → 200 → …).
LatencySeries = dict[str, dict[int, dict[str, float]]]


def run(ctx: BenchContext) -> list[Result]:
    hands = DRAIN_HANDS_QUICK if ctx.quick else DRAIN_HANDS
    sim = simulate(hands, registry.available(), seed=2026)
    audit = audit_replay(ctx, sim)
    offline = audit_offline_verify(ctx, sim, audit.value)
    single, series = asyncio.run(_services(ctx, sim))
    drain_2, scaled, graceful_default_ttl_ms = asyncio.run(_two_instances(ctx, sim))
    series |= scaled
    handovers = asyncio.run(_handovers(ctx, graceful_default_ttl_ms))
    plot = ctx.workdir.parent / "settlement_latency.png"  # beside report.json
    plot_latency(series, plot, f"settlement, publish → ledger ({os.cpu_count()} cores shared by every process)")
    drain, *publish_to_ledger = single
    return [audit, offline, drain, drain_2, *publish_to_ledger, *handovers, latency_result(series, plot)]


# --- audit.replay ---------------------------------------------------------------------------


def audit_replay(ctx: BenchContext, sim: Simulation) -> Result:
    export = ctx.workdir / "export.jsonl"
    with export.open("w", encoding="utf-8") as out:
        write_jsonl(sim.events(), out)

    def once() -> int:
        audit = verify(read_jsonl(export), source="bench")
        assert audit.report.ok, audit.report.render()
        return audit.report.hands_verified

    def via_protobuf() -> int:
        audit = verify(protobuf_raws(export), source="bench")
        assert audit.report.ok, audit.report.render()
        return audit.report.hands_verified

    return Result(
        "audit.replay",
        rate(once, rounds=1 if ctx.quick else 3),
        "hands/s",
        peers={"via_protobuf": rate(via_protobuf, rounds=1)},
        params={"hands": len(sim.hands), "games": list(registry.available()), "source": "jsonl"},
    )


def protobuf_raws(export: Path) -> Iterator[RawEvent]:
    """The export's events as the auditor read them before it read them straight into domain
    events: each line into its protobuf (``parse_event_json``), which the replay converts."""
    with export.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            msg = events_pb2.Event()
            parse_event_json(json.loads(line), msg)
            yield RawEvent(0, f"line {number}", msg)


def audit_offline_verify(ctx: BenchContext, sim: Simulation, replay_rate: float) -> Result:
    export = ctx.workdir / "export.stored.jsonl"
    chains: dict[str, bytes] = {}
    raws = []
    for event in sim.events():
        subject = canonical_subject(event.table_id, event.hand_id, "socai.events")
        payload, headers = sealed(subject, event, chains)
        raws.append(_decode(len(raws) + 1, subject, payload, tuple(headers.items())))
    with export.open("w", encoding="utf-8") as out:
        write_stored_jsonl(raws, out)
    keys = {DEV_SIGNER.key_id: DEV_SIGNER.public_key}
    seals = Seals(seal.SealVerifier(keys))

    def once() -> int:
        audit = verify(read_jsonl(export), source="bench", seals=seals)
        assert audit.report.ok and audit.report.proof.hand_seals == "checked", audit.report.render()
        return sum(audit.report.proof.hands_sealed.values())

    def seals_only() -> int:
        by_subject: dict[str, list[seal.Message]] = {}
        ends: dict[str, list[int]] = {}
        for raw in read_jsonl(export):
            if raw.is_table_fact:
                continue
            messages = by_subject.setdefault(raw.subject, [])
            if seal.SEAL_HEADER in dict(raw.chain_headers):
                ends.setdefault(raw.subject, []).append(len(messages))
            messages.append(seal.Message(raw.stream_seq, raw.payload, dict(raw.chain_headers)))
        verifier = seal.SealVerifier(keys)
        for subject, messages in by_subject.items():
            assert seal.authenticate(subject, messages, verifier, ends[subject]).ok
        return len(by_subject)

    return Result(
        "audit.offline_verify_hands_per_s",
        rate(once, rounds=1 if ctx.quick else 3),
        "hands/s",
        peers={"audit.replay": replay_rate, "seals_only": rate(seals_only, rounds=1 if ctx.quick else 3)},
        params={"hands": len(sim.hands), "games": list(registry.available()), "source": "stored (sealed)"},
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
    partitions: int = 0  # the event log's P (Settings.event_partitions); 0: one durable

    def start_infra(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.postgres = EmbeddedPostgres(self.root / "pg", port=free_port(), database="postgres")
        self.postgres.start()
        with psycopg.connect(self.postgres.url, autocommit=True) as conn:
            conn.execute("create database bench")
        url = self.postgres.url.rsplit("/", 1)[0] + "/bench"
        migrate.upgrade_all(url)
        # The bench loads and checks the log as the test harness (services: their own users).
        self.nats = EmbeddedNats(self.root / "nats", port=free_port(), test_harness=True)
        self.settings = dataclasses.replace(
            Settings(),
            var_dir=self.root,
            nats_url=self.nats.url_for(TEST_HARNESS),
            database_url=url,
            ledger_addr=f"127.0.0.1:{free_port()}",
            settlement_addr=f"127.0.0.1:{free_port()}",
            table_addr=f"127.0.0.1:{free_port()}",
            metrics_port_base=free_port(),
            log_level="warning",
            event_partitions=self.partitions,
        )

    def start_nats(self) -> None:
        assert self.nats is not None
        self.nats.start()

    def start_nats_for_loading(self) -> EmbeddedNats:
        """nats-server on the same store, with the same account and users, without an fsync
        per message (loading only): a server without the account would store the streams
        where the real one, which runs them under account SOCAI, never looks."""
        assert self.nats is not None
        loader = dataclasses.replace(self.nats, fsync_every_message=False, proc=None)
        loader.start()
        return loader

    async def start_service(self, name: str, **env: str) -> None:
        full = {**os.environ, **self.settings.as_env(), "SOCAI_LOG_FORMAT": "json", **env}
        log = (self.root / f"{name}.log").open("ab")
        proc = subprocess.Popen([sys.executable, "-m", f"socai_{name}"], env=full, stdout=log, stderr=subprocess.STDOUT)
        self.procs[name] = proc
        address = self.settings.ledger_addr if name == "ledger" else self.settings.settlement_addr
        await self._wait_serving(name, proc, address)

    async def start_settlement_instance(self, instance: str, **env: str) -> subprocess.Popen[bytes]:
        """One more settlement process, named ``instance`` among the lease holders, with its
        own gRPC and metrics ports (its log ``settlement-<instance>.log``)."""
        address = f"127.0.0.1:{free_port()}"
        own = dataclasses.replace(self.settings, settlement_addr=address, metrics_port_base=free_port())
        full = {**os.environ, **own.as_env(), "SOCAI_LOG_FORMAT": "json", "SOCAI_INSTANCE_ID": instance, **env}
        name = f"settlement-{instance}"
        log = (self.root / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "socai_settlement"], env=full, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs[name] = proc
        await self._wait_serving(name, proc, address)
        return proc

    async def _wait_serving(self, name: str, proc: subprocess.Popen[bytes], address: str) -> None:
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

    def dead_letters(self) -> dict[str, int]:
        """How many hands were dead-lettered, by reason."""
        assert self.settings.database_url
        with psycopg.connect(self.settings.database_url) as conn:
            rows = conn.execute('select reason, count(*) from "socai_settlement".dead_letters group by reason')
            return {str(reason): int(n) for reason, n in rows.fetchall()}

    def ledger(self, caller: str = "cashier") -> tuple[Any, Any]:
        ch = channel(self.settings.ledger_addr, self.settings.tokens[caller])
        return ch, ledger_pb2_grpc.LedgerServiceStub(ch)

    async def hand_latencies_ms(self) -> list[float]:
        return await hand_latencies_ms(self.settings)


async def hand_latencies_ms(settings: Settings) -> list[float]:
    """For every hand in the stream: its ledger transaction's ``created_at`` minus its
    HandEnded ``occurred_at``, in ms (``hand_latencies``)."""
    return [ms for _, ms in await hand_latencies(settings)]


async def hand_latencies(settings: Settings) -> list[tuple[datetime, float]]:
    """For every hand in the stream: its HandEnded ``occurred_at`` and its ledger
    transaction's ``created_at`` minus that, in ms (hands that move no gold are skipped).
    The table stamps ``occurred_at`` when it publishes, and both clocks are this machine's."""
    nc = await connect(settings.nats_url_for("auditor"), name="bench-latency")
    log = EventLog(nc, settings.events_stream, settings.events_prefix)
    ended: dict[str, datetime] = {}
    try:
        async for stored in log.read(f"{log.prefix}.>"):
            if isinstance(stored.event.body, HandEnded):
                ended[stored.event.hand_id] = stored.event.occurred_at
    finally:
        await nc.close()
    out: list[tuple[datetime, float]] = []
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
            out.append((at, (committed - at).total_seconds() * 1000))
    return out


async def _load(env: BenchEnv, sim: Simulation, signer: seal.HandSigner | None = DEV_SIGNER) -> None:
    """Put every event in the stream, table facts then hands, each subject in order, chained
    and sealed by ``signer`` (None: neither, as written before hand seals)."""
    nc = await connect(env.settings.nats_url or "", name="bench-load", pending_size=64 * 1024 * 1024)
    try:
        js = nc.jetstream()
        spec = events_stream_spec(env.settings.events_stream, env.settings.events_prefix, partitions=env.partitions)
        await ensure_stream(js, spec, allow_repartition=env.partitions > 0)  # a fresh stream: created as asked
        log = EventLog(nc, env.settings.events_stream, env.settings.events_prefix)
        events = sim.events()
        chains: dict[str, bytes] = {}  # chained and sealed as the table service writes them
        for i, e in enumerate(events):
            subject = log.subject_of(e.table_id, e.hand_id)
            payload, headers = sealed(subject, e, chains, signer)
            if signer is None:
                headers = {}  # as written before hand seals: no chain either
            await nc.publish(subject, payload, headers={"Nats-Msg-Id": e.event_id, **headers})
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


async def _backlogged(
    root: Path, sim: Simulation, partitions: int = 0, signer: seal.HandSigner | None = DEV_SIGNER
) -> BenchEnv:
    """A fresh stack with ``sim`` in the stream and funded in the ledger; no settlement yet."""
    env = BenchEnv(root, partitions=partitions)
    env.start_infra()
    try:
        loader = env.start_nats_for_loading()
        try:
            await _load(env, sim, signer)
        finally:
            loader.stop()
        env.start_nats()
        await env.start_service("ledger")
        ch, ledger = env.ledger("cashier")
        try:
            await fund(ledger, sim)
        finally:
            await ch.close()
    except BaseException:
        env.stop()
        raise
    return env


async def _services(ctx: BenchContext, sim: Simulation) -> tuple[list[Result], LatencySeries]:
    env = await _backlogged(ctx.workdir / "stack", sim)
    results: list[Result] = []
    try:
        post_batch = POST_BATCH
        raw_s, raw_messages = await _raw_read_s(env, len(sim.events()))
        raw_rate = len(sim.hands) / raw_s
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
                peers={"nats_raw_read": raw_rate},
                params={
                    "drain_over_raw_read": round(count / span_s / raw_rate, 3),
                    "raw_read_messages_per_s": round(raw_messages / raw_s),
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
        series = await _latency_series(ctx, env, "1 instance, P = 0", "zero")
    finally:
        env.stop()
    return results, series


async def _raw_read_s(env: BenchEnv, messages: int) -> tuple[float, int]:
    """(seconds, messages): every message of the events stream received by a consumer that
    does nothing else (a durable of its own, no acks), through ``Pull`` in batches of
    settlement's ``fetch_batch``; timed from the first pull request to the last message."""
    nc = await connect(env.settings.nats_url or "", name="bench-raw-read", pending_size=64 * 1024 * 1024)
    durable = "bench-raw-read"
    try:
        js = nc.jetstream()
        config = js_api.ConsumerConfig(
            durable_name=durable,
            deliver_policy=js_api.DeliverPolicy.ALL,
            ack_policy=js_api.AckPolicy.NONE,
            replay_policy=js_api.ReplayPolicy.INSTANT,
        )
        await js.add_consumer(env.settings.events_stream, config)
        pull = Pull(nc, env.settings.events_stream, durable)
        await pull.start()
        batch = SettlementConfig().fetch_batch
        received = 0
        began = time.monotonic()
        while received < messages:
            got = await pull.fetch(batch, 5.0)
            if not got:
                raise RuntimeError(f"the raw read stopped at {received} of {messages} messages")
            received += len(got)
        elapsed = time.monotonic() - began
        await pull.close()
        await js.delete_consumer(env.settings.events_stream, durable)
        return elapsed, received
    finally:
        await nc.close()


# --- publish → ledger latency -----------------------------------------------------------------


async def _publish_to_ledger_ms(
    env: BenchEnv, tables: int, per_table: int, *, prefix: str, seed: int
) -> tuple[list[float], int]:
    """``tables`` simulated tables publish ``per_table`` hands each at a steady pace while
    settlement runs; returns each gold-moving hand's HandEnded → ledger commit (ms) and how
    many such hands there were."""
    sim = simulate(tables * per_table, LATENCY_GAMES, seed=seed, hands_per_table=per_table, table_prefix=prefix)
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
            chains: dict[str, bytes] = {}
            for e in hand.events:
                now = datetime.now(UTC)
                stamped = dataclasses.replace(e, occurred_at=now)
                payload, headers = sealed(log.subject_of(e.table_id, e.hand_id), stamped, chains)
                last = await log.append(stamped, last, headers, payload=payload)
                if isinstance(e.body, HandEnded):
                    ended[e.hand_id] = now
                await asyncio.sleep(THINK_S)  # a bot's think time between events

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
    return latencies, len(keys)


async def _latency(ctx: BenchContext, env: BenchEnv) -> list[Result]:
    """100 tables publish at a steady pace while settlement runs: HandEnded → ledger commit."""
    per_table = LATENCY_HANDS_PER_TABLE_QUICK if ctx.quick else LATENCY_HANDS_PER_TABLE
    latencies, hands = await _publish_to_ledger_ms(env, LATENCY_TABLES, per_table, prefix="lat", seed=99)
    params = {
        "tables": LATENCY_TABLES,
        "hands": hands,
        "think_ms": 2,
        "publisher": "tests.support.synthetic via EventLog",
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


async def _latency_series(ctx: BenchContext, env: BenchEnv, label: str, tag: str) -> LatencySeries:
    """Publish → ledger p50/p99 at each of SERIES_TABLES tables, one run after the other on
    the running stack (``tag`` keeps the runs' table ids apart)."""
    per_table = LATENCY_HANDS_PER_TABLE_QUICK if ctx.quick else SERIES_HANDS_PER_TABLE
    points: dict[int, dict[str, float]] = {}
    for tables in SERIES_TABLES:
        latencies, hands = await _publish_to_ledger_ms(
            env, tables, per_table, prefix=f"{tag}n{tables}t", seed=1000 + tables
        )
        points[tables] = {
            "p50_ms": round(percentile(latencies, 50), 1),
            "p99_ms": round(percentile(latencies, 99), 1),
            "hands": len(latencies),
        }
        if len(latencies) < hands:
            raise RuntimeError(f"{label}, {tables} tables: only {len(latencies)} of {hands} hands reached the ledger")
    return {label: points}


# --- scale-out: two instances on a partitioned event log (issue 19) ---------------------------


@dataclass
class LeaseView:
    """Who holds which partition: the lease bucket's ``partition.<k>`` keys (holder ids),
    read the way ``tests/fault/test_settlement_instances.py`` reads them."""

    nc: NatsClient
    bucket: str
    partitions: int
    kv: KeyValue | None = field(default=None, repr=False)

    async def holders(self) -> dict[int, str]:
        if self.kv is None:
            try:
                self.kv = await self.nc.jetstream().key_value(self.bucket)
            except BucketNotFoundError:
                return {}  # no instance has started yet
        out = {}
        for k in range(self.partitions):
            try:
                entry = await self.kv.get(f"partition.{k}")
            except KeyNotFoundError:  # never held, released (deleted) or expired
                continue
            if entry.value:
                out[k] = entry.value.decode()
        return out

    async def wait(self, done: Callable[[dict[int, str]], bool], since: float, what: str) -> float:
        """Seconds from ``since`` (``time.monotonic``) until ``done(holders)``."""
        while True:
            held = await self.holders()
            now = time.monotonic()
            if done(held):
                return now - since
            if now - since > LEASE_WAIT_S:
                raise RuntimeError(f"{what} after {LEASE_WAIT_S} s: {held}")
            await asyncio.sleep(LEASE_POLL_S)


def split_between(instances: set[str], partitions: int) -> Callable[[dict[int, str]], bool]:
    """Every partition held, by exactly these instances, ⌊P/n⌋ or ⌈P/n⌉ each."""

    def done(held: dict[int, str]) -> bool:
        counts = Counter(held.values())
        return len(held) == partitions and set(counts) == instances and max(counts.values()) - min(counts.values()) <= 1

    return done


def held_only_by(instances: set[str], partitions: int) -> Callable[[dict[int, str]], bool]:
    """Every partition held by one of ``instances`` (a handover is over)."""
    return lambda held: len(held) == partitions and set(held.values()) <= instances


async def _announce(nc: NatsClient, bucket: str, ttl_s: float, instances: tuple[str, ...]) -> None:
    """Keep ``member.<id>`` of each instance alive in the lease bucket until cancelled, as
    their own heartbeats will once they run: whichever process starts first then sees both
    members and takes only its share."""
    kv = await ensure_lease_bucket(nc.jetstream(), LeaseConfig(bucket, ttl_s=ttl_s))
    while True:
        for instance in instances:
            await kv.put(member_key(instance), b"")
        await asyncio.sleep(ttl_s / 5)


async def _settle_all(env: BenchEnv, hands: int) -> tuple[int, datetime, datetime]:
    deadline = time.monotonic() + 1800
    while True:
        count, first, last = env.settled()
        if count >= hands:
            assert first is not None and last is not None
            return count, first, last
        if time.monotonic() > deadline or (dead := env.dead_letters()):
            raise RuntimeError(f"only {count} of {hands} hands settled; dead letters: {dead}")
        await asyncio.sleep(0.25)


async def _quiet(env: BenchEnv) -> None:
    """Until settlement has stored nothing new for a second (what was published is settled)."""
    count = -1
    while (now := env.settled()[0]) != count:
        count = now
        await asyncio.sleep(1.0)


async def _two_instances(ctx: BenchContext, sim: Simulation) -> tuple[Result, LatencySeries, float]:
    """``settlement.drain_2_instances`` and the latency series with 2 and then 1 instance, on
    one stack whose event log has SCALEOUT_PARTITIONS partitions, at the default lease TTL.
    Also returns the graceful handover (ms) between the two series, at that TTL."""
    p = SCALEOUT_PARTITIONS
    ttl_s = SettlementConfig().lease_ttl_s
    env = await _backlogged(ctx.workdir / "stack_2_instances", sim, partitions=p)
    knobs = {"SOCAI_SETTLEMENT_POST_BATCH": str(POST_BATCH)}
    nc = await connect(env.settings.nats_url or "", name="bench-leases")
    try:
        leases = LeaseView(nc, f"settlement_leases_{env.settings.events_stream}", p)
        # Both processes start at once, announced as members beforehand so that the first one
        # up takes only its own half (no rebalance mid-drain); the clock starts when they
        # hold 4 + 4.
        announcing = asyncio.create_task(_announce(nc, leases.bucket, ttl_s, ("a", "b")))
        started = time.monotonic()
        started_at = datetime.now(UTC)
        starting = [asyncio.create_task(env.start_settlement_instance(i, **knobs)) for i in ("a", "b")]
        try:
            await leases.wait(split_between({"a", "b"}, p), started, "the two instances did not split the partitions")
        finally:
            announcing.cancel()
        split_at = datetime.now(UTC)
        before = env.settled()[0]
        live = dict(zip(("a", "b"), await asyncio.gather(*starting), strict=True))
        count, first, last = await _settle_all(env, len(sim.hands))
        timed = count - before
        whole = count / max((last - first).total_seconds(), 1e-6)
        if timed >= count // 10 and last > split_at:
            value, timed_from = timed / (last - split_at).total_seconds(), "both instances hold their partitions"
        else:  # a --quick backlog can be gone before the second instance is in
            value, timed_from = whole, "the first hand settled (the backlog was mostly drained before the split)"
        drain = Result(
            "settlement.drain_2_instances",
            value,
            "hands/s",
            params={
                "hands": count,
                "instances": 2,
                "partitions": p,
                "timed_from": timed_from,
                "hands_timed": timed if timed_from.startswith("both") else count,
                "split_after_start_s": round((split_at - started_at).total_seconds(), 3),
                "whole_span_hands_per_s": round(whole, 1),
                "games": list(registry.available()),
                "post_batch": POST_BATCH,
                "lease_ttl_s": ttl_s,
                "replay_workers_per_instance": default_replay_workers(),
                "note": (
                    "On this 2-core machine the two instances (each with its replay workers) compete with the "
                    "ledger, PostgreSQL and NATS for the same two cores: the figure is limited by the cores, not by "
                    "the design, and says that partitioned settlement works, not how it scales."
                ),
            },
        )
        series = await _latency_series(ctx, env, f"2 instances, P = {p}", "two")
        await _quiet(env)
        # One stops (gracefully): the other takes every partition, then the 1-instance series.
        proc = live.pop("a")
        proc.send_signal(signal.SIGTERM)
        graceful_s = await leases.wait(held_only_by({"b"}, p), time.monotonic(), "no handover after SIGTERM")
        proc.wait(30)
        series |= await _latency_series(ctx, env, f"1 instance, P = {p}", "one")
        if dead := env.dead_letters():
            raise RuntimeError(f"hands were dead-lettered with two instances: {dead}")
    finally:
        await nc.close()
        env.stop()
    return drain, series, graceful_s * 1000


async def _handovers(ctx: BenchContext, graceful_default_ttl_ms: float) -> list[Result]:
    """Two instances on SCALEOUT_PARTITIONS partitions with a HANDOVER_TTL_S lease TTL, under
    a light load: SIGKILL one (restarted each time, under a new id), then SIGTERM one, and
    time each signal → every partition held by a live instance."""
    p = SCALEOUT_PARTITIONS
    env = BenchEnv(ctx.workdir / "stack_handover", partitions=p)
    env.start_infra()
    knobs = {"SOCAI_SETTLEMENT_LEASE_TTL_S": str(HANDOVER_TTL_S)}
    rounds = HANDOVER_ROUNDS_QUICK if ctx.quick else HANDOVER_ROUNDS
    crashed: list[float] = []
    stopped: list[float] = []
    rejoined: list[float] = []
    nc: NatsClient | None = None
    try:
        env.start_nats()
        nc = await connect(env.settings.nats_url or "", name="bench-leases")
        spec = events_stream_spec(env.settings.events_stream, env.settings.events_prefix, partitions=p)
        await ensure_stream(nc.jetstream(), spec, allow_repartition=True)  # a fresh stream: created as asked
        await env.start_service("ledger")
        leases = LeaseView(nc, f"settlement_leases_{env.settings.events_stream}", p)
        announcing = asyncio.create_task(_announce(nc, leases.bucket, HANDOVER_TTL_S, ("a", "b")))
        try:
            live = {i: await env.start_settlement_instance(i, **knobs) for i in ("a", "b")}
            await leases.wait(split_between(set(live), p), time.monotonic(), "the instances did not split")
        finally:
            announcing.cancel()
        load = asyncio.create_task(_background_load(env, ctx.quick))
        signals = [signal.SIGKILL] * rounds + [signal.SIGTERM] * rounds
        try:
            for n, sig in enumerate(signals, start=1):
                victim = next(iter(live))  # the oldest: the two alternate
                proc = live.pop(victim)
                proc.send_signal(sig)
                since = time.monotonic()
                took_s = await leases.wait(held_only_by(set(live), p), since, f"no handover after {sig.name}")
                (crashed if sig == signal.SIGKILL else stopped).append(took_s * 1000)
                proc.wait(30)
                newcomer = f"r{n}"
                since = time.monotonic()
                live[newcomer] = await env.start_settlement_instance(newcomer, **knobs)
                took_s = await leases.wait(split_between(set(live), p), since, f"{newcomer} did not get its share")
                rejoined.append(took_s * 1000)
        finally:
            load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await load
        await _quiet(env)
        # Kept in the results rather than raised: the times are still measured, and a dead
        # letter here is a finding about the handovers, which the report must show.
        dead = env.dead_letters()
        if dead:
            print(f"   WARNING: hands dead-lettered during the handover rounds: {dead}", flush=True)
    finally:
        if nc is not None:
            await nc.close()
        env.stop()
    common = {
        "instances": 2,
        "partitions": p,
        "lease_ttl_s": HANDOVER_TTL_S,
        "rounds": rounds,
        "load": f"{LOAD_TABLES} tables publishing at a time, {LOAD_THINK_MS} ms between events",
        "dead_letters": dead,
        "measured": "signal sent → every partition's lease key names a live instance (lease bucket polled every "
        f"{int(LEASE_POLL_S * 1000)} ms)",
    }
    return [
        Result(
            "settlement.handover_ms",
            percentile(crashed, 99),
            "ms",
            higher_is_better=False,
            params={
                **common,
                "after": "SIGKILL",
                "p50_ms": round(percentile(crashed, 50), 1),
                "p99_ms": round(percentile(crashed, 99), 1),
                "samples_ms": [round(x, 1) for x in crashed],
                "restart_to_split_p50_ms": round(percentile(rejoined, 50), 1),
                "note": (
                    "After a crash the dead instance's partitions move when its leases expire, about one TTL "
                    "after its last renewal (TTL/5 before the kill at most), plus the survivor's next rebalance "
                    f"round: the handover is about the TTL by design (10 s by default; {HANDOVER_TTL_S:g} s here)."
                ),
            },
        ),
        Result(
            "settlement.handover_graceful_ms",
            percentile(stopped, 99),
            "ms",
            higher_is_better=False,
            params={
                **common,
                "after": "SIGTERM",
                "p50_ms": round(percentile(stopped, 50), 1),
                "p99_ms": round(percentile(stopped, 99), 1),
                "samples_ms": [round(x, 1) for x in stopped],
                "at_default_ttl_ms": round(graceful_default_ttl_ms, 1),
                "note": (
                    "A graceful stop stops its pipelines and deletes its lease keys, one partition after the "
                    "other; the survivor takes them in its next rebalance rounds (every TTL/5), so the handover "
                    "does not wait for the TTL. at_default_ttl_ms: one SIGTERM on the 2-instance drain's stack "
                    "(TTL 10 s), after its latency runs."
                ),
            },
        ),
    ]


async def _background_load(env: BenchEnv, quick: bool) -> None:
    """LOAD_TABLES tables publishing hands at a time, until cancelled (or out of hands)."""
    hands = LOAD_HANDS_QUICK if quick else LOAD_HANDS
    sim = simulate(hands, LATENCY_GAMES, seed=77, hands_per_table=LOAD_HANDS_PER_TABLE, table_prefix="load")
    ch, ledger = env.ledger("cashier")
    try:
        await fund(ledger, sim)
    finally:
        await ch.close()
    nc = await connect(env.settings.nats_url or "", name="bench-load-tables")
    log = EventLog(nc, env.settings.events_stream, env.settings.events_prefix)

    gate = asyncio.Semaphore(LOAD_TABLES)  # a table whose players are broke gives way to the next

    async def table(t: Any) -> None:
        async with gate:
            for hand in t.hands:
                last = 0
                chains: dict[str, bytes] = {}
                for e in hand.events:
                    payload, headers = sealed(log.subject_of(e.table_id, e.hand_id), e, chains)
                    last = await log.append(e, last, headers, payload=payload)
                    await asyncio.sleep(LOAD_THINK_MS / 1000)

    try:
        await asyncio.gather(*(table(t) for t in sim.tables))
    finally:
        await nc.close()


# --- the plot ----------------------------------------------------------------------------------


def latency_result(series: LatencySeries, plot: Path) -> Result:
    two = series.get(f"2 instances, P = {SCALEOUT_PARTITIONS}", {})
    biggest = max(SERIES_TABLES)
    return Result(
        "settlement.e2e_latency_by_tables",
        two[biggest]["p99_ms"] if biggest in two else float("nan"),
        "ms",
        higher_is_better=False,
        params={
            "value": f"p99 at {biggest} tables with 2 instances",
            "series": {label: {str(t): v for t, v in points.items()} for label, points in series.items()},
            "plot": plot.name,
            "publisher": "simulated tables through EventLog (as the table service publishes), in the bench process",
            "think_ms": int(THINK_S * 1000),
            "hands_per_table": SERIES_HANDS_PER_TABLE,
            "games": list(LATENCY_GAMES),
            "latency": "HandEnded occurred_at (stamped at publish) → ledger transaction created_at",
        },
    )


def plot_latency(series: LatencySeries, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, points) in enumerate(series.items()):
        tables = sorted(points)
        color = f"C{i}"
        ax.plot(tables, [points[t]["p99_ms"] for t in tables], "o-", color=color, label=f"{label}: p99")
        ax.plot(tables, [points[t]["p50_ms"] for t in tables], "s--", color=color, label=f"{label}: p50")
    ax.set_xlabel("tables publishing at once")
    ax.set_ylabel("HandEnded published → ledger commit (ms)")
    ax.set_xticks(list(SERIES_TABLES))
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")  # 300, not 3 × 10²
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    ax.set_title(title, fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
