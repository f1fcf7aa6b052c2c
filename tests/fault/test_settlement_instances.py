"""Settlement scaled out, under load, with instances SIGKILLed (issue 19).

Two settlement processes share a partitioned event log (P = 4) through leases while hands
keep arriving; one is SIGKILLed, then (after it was started again) the other, then a third
instance joins. At the end every hand is settled exactly once (settlement records and the
ledger's ``settle:`` transactions against the simulated hands), no hand was dead-lettered,
every escrow holds what the hands say, the trial balance is 0 and the audit is clean. The
handover times (kill → every partition held by a live instance) are written to
``var/scaleout/handovers.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.errors import KeyNotFoundError

from socai.audit.auditor import reconcile, verify
from socai.audit.export import read_stream
from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.config import Settings
from socai.infra.db import libpq_url
from socai.infra.nats import StreamSpec, ensure_stream
from socai_cli.embedded import free_port
from socai_cli.stack import grpc_health
from tests.support.settlement import Harness, harness_for
from tests.support.synthetic import Simulation, fund, publish, simulate

pytestmark = [pytest.mark.fault, pytest.mark.slow]

P = 4
HANDS = 240
PAUSED_HANDS = 600
TTL_S = 2.0
ROOT = Path(__file__).resolve().parents[2]


def settled_count(settings: Settings) -> int:
    with psycopg.connect(libpq_url(settings.database_url or "")) as conn:
        row = conn.execute('select count(*) from "socai_settlement".settlements').fetchone()
        dead = conn.execute('select count(*) from "socai_settlement".dead_letters').fetchone()
    assert dead is not None and int(dead[0]) == 0, "a hand was dead-lettered"
    return int(row[0]) if row else 0


async def start(
    settings: Settings, name: str, tmp: Path, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        **replace(settings, settlement_addr=address).as_env(),
        "SOCAI_LOG_FORMAT": "json",
        "SOCAI_INSTANCE_ID": name,
        "SOCAI_SETTLEMENT_LEASE_TTL_S": str(TTL_S),
        "SOCAI_SETTLEMENT_POST_BATCH": "20",
        "SOCAI_SETTLEMENT_FETCH_BATCH": "200",
        "SOCAI_SETTLEMENT_REPLAY_WORKERS": "0",
        **(extra_env or {}),
    }
    log = tmp / f"{name}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "socai_settlement"], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT
    )
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited: {log.read_text()[-3000:]}")
        if await grpc_health(address, 0.5) == "SERVING":
            return proc
        await asyncio.sleep(0.1)
    proc.kill()
    raise AssertionError(f"{name} did not start: {log.read_text()[-3000:]}")


async def holders(nc: NatsClient, bucket: str) -> dict[int, str]:
    kv = await nc.jetstream().key_value(bucket)
    out = {}
    for k in range(P):
        try:
            entry = await kv.get(f"partition.{k}")
        except KeyNotFoundError:
            continue
        if entry.value:
            out[k] = entry.value.decode()
    return out


async def handover(nc: NatsClient, bucket: str, alive: set[str], killed_at: float) -> float:
    """Seconds from the kill until every partition is held by an instance in ``alive``."""
    while time.monotonic() - killed_at < 60:
        held = await holders(nc, bucket)
        if len(held) == P and set(held.values()) <= alive:
            return time.monotonic() - killed_at
        await asyncio.sleep(0.05)
    raise AssertionError(f"partitions not handed over: {await holders(nc, bucket)}")


@pytest.fixture
async def harness(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[Harness]:
    async with harness_for(nats_url, migrated_database_url, stream_spec, nats_client) as h:
        yield h


async def wait_settled(settings: Settings, n: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while settled_count(settings) < n:
        assert time.monotonic() < deadline, f"{settled_count(settings)} of {n} settled"
        await asyncio.sleep(0.1)


async def partitioned_backlog(harness: Harness, hands: int, seed: int) -> tuple[str, Simulation, Settings]:
    """The test's stream split into P partitions and ``hands`` simulated hands funded in the
    ledger (not published yet): the settlement lease bucket, the simulation, the settings."""
    spec = StreamSpec(harness.settings.events_stream, (f"{harness.log.prefix}.>",), partitions=P)
    await ensure_stream(harness.log.js, spec, allow_repartition=True)
    harness.log.partitions = None
    sim = simulate(hands, ("holdem", "xito", "taixiu"), seed=seed)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    return f"settlement_leases_{harness.settings.events_stream}", sim, replace(harness.settings, metrics_port_base=0)


def stop_all(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    """Every instance still running stopped gracefully (woken first when paused), else killed."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.mark.heavy  # ~17 s alone: make test-heavy runs it (a kill mid-batch stays in make test: test_settlement_kill)
async def test_instances_killed_under_load_lose_no_hand_and_post_none_twice(harness: Harness, tmp_path: Path) -> None:
    bucket, sim, settings = await partitioned_backlog(harness, HANDS, seed=1919)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    times: dict[str, float] = {}
    loader = asyncio.create_task(publish(harness.log, sim, concurrency=8))
    try:
        procs["a"] = await start(settings, "a", tmp_path)
        procs["b"] = await start(settings, "b", tmp_path)

        await wait_settled(settings, HANDS // 5)
        procs["a"].send_signal(signal.SIGKILL)
        procs["a"].wait(5)
        times["kill_a"] = await handover(harness.nc, bucket, {"b"}, time.monotonic())
        procs["a2"] = await start(settings, "a2", tmp_path)

        await wait_settled(settings, HANDS // 2)
        procs["b"].send_signal(signal.SIGKILL)
        procs["b"].wait(5)
        times["kill_b"] = await handover(harness.nc, bucket, {"a2"}, time.monotonic())
        procs["c"] = await start(settings, "c", tmp_path)
        joined = time.monotonic()
        while sorted((await holders(harness.nc, bucket)).values()) != ["a2", "a2", "c", "c"]:
            assert time.monotonic() - joined < 60, await holders(harness.nc, bucket)  # a deadline
            await asyncio.sleep(0.05)
        times["join_c"] = time.monotonic() - joined  # the newcomer took its share

        await loader
        await wait_settled(settings, HANDS, 180)

        # Exactly once: one ledger transaction per hand with the hand's entries, and every
        # escrow holds its buy-in plus its hands (a hand posted twice or lost would show).
        for hand in sim.hands:
            tx = await harness.transaction(f"settle:{hand.hand_id}")
            entries = hand.settlement.entries()
            assert (tx is None) if not entries else ({e.account_id: e.amount_gold for e in tx.entries} == entries)
        for account, expected in sim.expected_balances().items():
            if account.startswith("escrow:"):
                assert await harness.balance(account) == expected, account
        auditor = harness.ledger("auditor")
        assert (await auditor.TrialBalance(ledger_pb2.TrialBalanceRequest())).total_gold == 0
        audit = verify([r async for r in read_stream(harness.log)], source="stream")
        await reconcile(audit, auditor, ledger_name="test ledger")
        assert audit.report.ok, audit.report.render()
        assert audit.report.hands_verified == HANDS
    finally:
        loader.cancel()
        stop_all(procs)
        out = ROOT / "var" / "scaleout"
        out.mkdir(parents=True, exist_ok=True)
        (out / "handovers.json").write_text(json.dumps({"ttl_s": TTL_S, "partitions": P, **times}, indent=2))
    print(f"handover after SIGKILL (TTL {TTL_S} s): {times}")


async def test_a_paused_holder_wakes_to_a_moved_lease_and_posts_nothing(harness: Harness, tmp_path: Path) -> None:
    """SIGSTOP past the lease: the other instance claims the partition in the ledger (its
    token becomes the fence) and settles everything; woken with SIGCONT, the paused one
    finds its lease lost, stops its pipeline, and the journal holds each hand once."""
    bucket = f"settlement_leases_{harness.settings.events_stream}"  # P = 0: one leased partition
    sim = simulate(160, ("holdem", "xito", "taixiu"), seed=2020)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    settings = replace(harness.settings, metrics_port_base=0)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["a"] = await start(settings, "a", tmp_path)
        loader = asyncio.create_task(publish(harness.log, sim, concurrency=4))
        await wait_settled(settings, 40)
        procs["a"].send_signal(signal.SIGSTOP)
        procs["b"] = await start(settings, "b", tmp_path)
        paused_at = time.monotonic()
        while (await holders(harness.nc, bucket)).get(0) != "b":
            assert time.monotonic() - paused_at < 60, "b never took the partition"  # a deadline
            await asyncio.sleep(0.05)
        await loader
        await wait_settled(settings, len(sim.hands), 180)
        procs["a"].send_signal(signal.SIGCONT)

        log_a = tmp_path / "a.log"
        woke = time.monotonic()
        while '"lease_lost"' not in log_a.read_text():
            assert time.monotonic() - woke < 30, log_a.read_text()[-3000:]  # a deadline
            await asyncio.sleep(0.1)
        # Awake, A is a member again and a rebalance round may give it the partition back
        # (members are assigned in order, and "a" sorts first): only under a new lease,
        # whose token is above B's, so nothing A held while paused can be posted.
        tokens = {name: _acquired_tokens(tmp_path / f"{name}.log") for name in ("a", "b")}
        assert tokens["b"] and all(t > tokens["b"][0] for t in tokens["a"][1:]), tokens
        assert (await holders(harness.nc, bucket)).get(0) in ("a", "b", None)

        # Each hand once in the journal (A's wake-up added nothing), the books balance.
        auditor = harness.ledger("auditor")
        keys: list[str] = []
        token = ""
        while True:
            page = await auditor.ListTransactions(ledger_pb2.ListTransactionsRequest(page_size=1000, page_token=token))
            keys += [t.idempotency_key for t in page.transactions if t.idempotency_key.startswith("settle:")]
            token = page.next_page_token
            if not token:
                break
        assert len(keys) == len(set(keys)) == sum(1 for h in sim.hands if h.settlement.entries())
        for account, expected in sim.expected_balances().items():
            if account.startswith("escrow:"):
                assert await harness.balance(account) == expected, account
        assert (await auditor.TrialBalance(ledger_pb2.TrialBalanceRequest())).total_gold == 0
    finally:
        stop_all(procs)


def _acquired_tokens(log: Path) -> list[int]:
    """The tokens of the leases an instance acquired, in order, from its log."""
    found = []
    for line in log.read_text().splitlines():
        if '"lease_acquired"' in line:
            found.append(int(json.loads(line)["token"]))
    return found


@pytest.mark.heavy  # ~35 s alone: make test-heavy runs it (CI, after make test)
async def test_holders_paused_again_and_again_hand_over_in_play_order(harness: Harness, tmp_path: Path) -> None:
    """The CPU-starved holder of the benchmarks, made certain: one instance is SIGSTOPped
    past its leases, again and again, alternately, while hands arrive. Each pause hands its
    partitions to the other instance, which settles first what the paused one left behind;
    the paused one wakes to lost leases, gives back what it held, and takes its share again
    (another handover, a graceful one). With a poison limit of 2, a handover that counted as
    a failure would dead-letter its hand; none may be. Every hand is posted once, under its
    first key (none was refused for arriving before an earlier hand of its table and posted
    again), and each table's hands are in the journal in play order."""
    bucket, sim, settings = await partitioned_backlog(harness, PAUSED_HANDS, seed=2121)
    strict = {"SOCAI_SETTLEMENT_POISON_AFTER": "2"}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    # Many tables at once: the instances drain a backlog at every handover, with messages
    # delivered to a pipeline's pull buffer that it has not handled yet.
    loader = asyncio.create_task(publish(harness.log, sim, concurrency=32))
    pauses: list[float] = []
    try:
        procs["a"] = await start(settings, "a", tmp_path, strict)
        procs["b"] = await start(settings, "b", tmp_path, strict)
        for victim, other in (("a", "b"), ("b", "a")) * 3:
            both = time.monotonic()
            while set((await holders(harness.nc, bucket)).values()) != {"a", "b"}:
                assert time.monotonic() - both < 60, await holders(harness.nc, bucket)  # a deadline
                await asyncio.sleep(0.05)
            procs[victim].send_signal(signal.SIGSTOP)
            try:
                pauses.append(await handover(harness.nc, bucket, {other}, time.monotonic()))
            finally:
                procs[victim].send_signal(signal.SIGCONT)
        await loader
        await wait_settled(settings, PAUSED_HANDS, 180)  # and no dead letter (settled_count)

        for table in sim.tables:
            seqs = []
            for hand in table.hands:
                tx = await harness.transaction(f"settle:{hand.hand_id}")
                entries = hand.settlement.entries()
                assert (tx is None) if not entries else ({e.account_id: e.amount_gold for e in tx.entries} == entries)
                if tx is not None:
                    seqs.append(tx.journal_seq)
            assert seqs == sorted(seqs), f"{table.table_id}: hands reached the ledger out of play order"
        for account, expected in sim.expected_balances().items():
            if account.startswith("escrow:"):
                assert await harness.balance(account) == expected, account
        auditor = harness.ledger("auditor")
        assert (await auditor.TrialBalance(ledger_pb2.TrialBalanceRequest())).total_gold == 0
        logs = "".join((tmp_path / f"{name}.log").read_text() for name in ("a", "b"))
        # Each woken instance found its leases lost and stopped those pipelines (and later
        # the survivor released a share back to it): at least one stop per pause.
        assert logs.count('"partition_stopped"') >= len(pauses) == 6
    finally:
        loader.cancel()
        stop_all(procs)
    print(f"handover after SIGSTOP (TTL {TTL_S} s): {[round(p, 2) for p in pauses]}")
