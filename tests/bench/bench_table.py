"""Table service benchmarks, each against one real table-service process.

``table.act_p99_ms_50_tables``: Act round trips with 50 tables of bots playing at once. The
ledger and table services run as their own processes on embedded NATS and PostgreSQL (fsync
on every event: ``sync_interval: always``); the bots (``socai simulate``'s Simulator) run
in this process and time every Act call from request to response, which covers the rules
engine's validation, the JetStream append and its acknowledgement, and whatever dealing
follows the move. Reported: p99 (the fixed name), p50 and accepted actions per second, all
from the same run.

``table.hands_per_s_250_tables``: throughput under the soak's load. 250 tables of all eleven
games played by the chaos suite's bots (``tests/chaos/bots.py``: they play until
stopped and buy in again when broke; here they decide every move, and a turn waits 10 s)
against the ledger, table and settlement services;
after a warm-up, the hands the table service ended (its ``socai_table_hands_ended_total``)
over a fixed window. Beside it, the table process's CPU per hand and its share of one
core over the window: a share near 1.0 says the table service is the bottleneck, and the
CPU per hand is the figure that moves least with the machine's load. With
``SOCAI_BENCH_TABLE_PROFILE=1`` the table process runs under cProfile for the window only
(``SOCAI_TABLE_PROFILE``, SIGUSR1/SIGUSR2) and the top of the profile is written to
``var/bench/bench_table/table_profile.txt``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import pstats
import shutil
import signal
import time
import urllib.request
from pathlib import Path

from socai.infra.config import Settings
from socai.infra.service import METRICS_OFFSET
from socai.rules import registry
from socai_cli.embedded import free_port, port_is_free
from socai_cli.stack import Stack
from socai_table.simulate import SimConfig, Simulator
from tests.bench.harness import BenchContext, Result, percentile
from tests.bench.stack_support import bench_settings, stack
from tests.chaos.bots import Bots
from tests.chaos.stack import metric_sum, parse_metrics

TABLES = 50
THROUGHPUT_TABLES = 250
# Every game, as issue 32 measures the table service: the long hands of Tiến Lên, Sâm Lốc
# and Phỏm and the heavy moves of Mậu Binh weigh on hands per second and on the bots' own
# CPU, which a choice of three quick games hid.
GAMES = registry.available()
WARMUP_S = 10.0  # every table seated and past its first hands before the window opens
WINDOW_S = 30.0
PROFILE_ENV = "SOCAI_BENCH_TABLE_PROFILE"


def run(ctx: BenchContext) -> list[Result]:
    return act_latency(ctx) + hands_per_s(ctx)


def act_latency(ctx: BenchContext) -> list[Result]:
    tables = 10 if ctx.quick else TABLES
    hands = 2 if ctx.quick else 6
    with stack(ctx.workdir, ("ledger", "table")) as s:
        config = SimConfig(
            tables=tables,
            hands=hands,
            games=GAMES,
            timeout_rate=0.0,
            seed=1,
            between_hands_ms=10,
        )

        async def play() -> object:
            sim = Simulator(s.resolved_settings(), config)
            try:
                return await sim.run()
            finally:
                await sim.close()

        result = asyncio.run(play())
    latencies = [ms for t in result.tables for ms in t.act_latency_ms]  # type: ignore[attr-defined]
    actions = len(latencies)
    params = {"tables": tables, "hands_per_table": hands, "games": list(config.games), "actions": actions}
    per_s = actions / result.elapsed_s  # type: ignore[attr-defined]
    return [
        Result("table.act_p99_ms_50_tables", percentile(latencies, 99), "ms", False, params=params),
        Result("table.act_p50_ms_50_tables", percentile(latencies, 50), "ms", False, params=params),
        Result("table.actions_per_s_50_tables", per_s, "actions/s", True, params=params),
    ]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


COUNTERS = (
    "socai_table_hands_ended_total",
    "socai_table_actions_total",
    "socai_table_timeouts_total",
    "socai_events_published_total",
)
# The bots decide every move (no deliberate timeouts) and a turn waits long enough for a
# slow bot on a loaded machine: a turn that times out folds, so a slower table service
# would end shorter hands and look no worse in hands per second.
TURN_TIMEOUT_S = 10


def counters(metrics_port: int) -> dict[str, float]:
    """The table service's hands ended, actions and timer expiries so far."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as reply:
        metrics = parse_metrics(reply.read().decode())
    return {name: metric_sum(metrics, name) for name in COUNTERS}


def with_metrics_ports(settings: Settings) -> Settings:
    """``settings`` with a metrics port block that is free and clear of the stack's other
    ports: this benchmark reads the table's counters, and a free port handed out just
    before (free ports come in sequence) can be the table's metrics port plus one."""
    taken = {settings.nats_port, settings.pg_port}
    taken |= {int(a.rsplit(":", 1)[1]) for a in (settings.ledger_addr, settings.table_addr, settings.settlement_addr)}
    for _ in range(100):
        base = free_port()
        block = set(range(base, base + len(METRICS_OFFSET)))
        if not block & taken and all(port_is_free(port) for port in block):
            return dataclasses.replace(settings, metrics_port_base=base)
    raise RuntimeError("no free block of metrics ports")


def hands_per_s(ctx: BenchContext) -> list[Result]:
    tables = 20 if ctx.quick else THROUGHPUT_TABLES
    warmup_s, window_s = (3.0, 5.0) if ctx.quick else (WARMUP_S, WINDOW_S)
    profile = ctx.workdir / "table.prof" if os.environ.get(PROFILE_ENV) == "1" else None
    if profile is not None:
        profile.unlink(missing_ok=True)
        os.environ["SOCAI_TABLE_PROFILE"] = str(profile)  # the table process inherits it
    shutil.rmtree(ctx.workdir / "var", ignore_errors=True)
    s = Stack(with_metrics_ports(bench_settings(ctx.workdir)))
    try:
        s.start_infra()
        for name in ("ledger", "table", "settlement"):
            s.start_service(name)
        pid = s.procs["table"].pid
        port = s.resolved_settings().metrics_port_base + METRICS_OFFSET["table"]

        async def measure() -> tuple[dict[str, float], float, float, float, dict[str, object]]:
            bots = Bots(s.resolved_settings(), tables, GAMES, seed=1)
            bots.config = dataclasses.replace(bots.config, timeout_rate=0.0, turn_timeout_s=TURN_TIMEOUT_S)
            try:
                await bots.open_tables()
                bots.start()
                await asyncio.sleep(warmup_s)
                if profile is not None:
                    os.kill(pid, signal.SIGUSR1)
                first, cpu0, t0 = await asyncio.to_thread(counters, port), cpu_s(pid), time.monotonic()
                bots0 = time.process_time()
                await asyncio.sleep(window_s)
                last, cpu1, t1 = await asyncio.to_thread(counters, port), cpu_s(pid), time.monotonic()
                bots_cpu = time.process_time() - bots0
                if profile is not None:
                    os.kill(pid, signal.SIGUSR2)
                counted = {name: last[name] - first[name] for name in COUNTERS}
                return counted, cpu1 - cpu0, bots_cpu, t1 - t0, bots.summary()
            finally:
                await bots.stop(leave=False)

        counted, cpu, bots_cpu, elapsed_s, summary = asyncio.run(measure())
    finally:
        s.stop()
        os.environ.pop("SOCAI_TABLE_PROFILE", None)
    if profile is not None and profile.exists():
        out = io.StringIO()
        pstats.Stats(str(profile), stream=out).sort_stats("tottime").print_stats(40)
        pstats.Stats(str(profile), stream=out).sort_stats("cumulative").print_stats(60)
        (ctx.workdir / "table_profile.txt").write_text(out.getvalue())
    hands = counted["socai_table_hands_ended_total"]
    params = {
        "tables": tables,
        "games": list(GAMES),
        "window_s": round(elapsed_s, 1),
        "hands": int(hands),
        "actions": int(counted["socai_table_actions_total"]),
        "timeouts": int(counted["socai_table_timeouts_total"]),
        "events": int(counted["socai_events_published_total"]),
        "table_cpu_share": round(cpu / elapsed_s, 2),
        "bots_cpu_share": round(bots_cpu / elapsed_s, 2),
        "bot_errors": summary["errors"],
        "load_avg_1m": round(os.getloadavg()[0], 1),
        "profiled": profile is not None,
    }
    per_hand_ms = cpu * 1000 / hands if hands else float("nan")
    return [
        Result("table.hands_per_s_250_tables", hands / elapsed_s, "hands/s", True, params=params),
        Result("table.cpu_ms_per_hand_250_tables", per_hand_ms, "ms", False, params=params),
    ]
