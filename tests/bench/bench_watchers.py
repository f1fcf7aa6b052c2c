"""``table.watchers_per_table_<n>``: WatchTable messages per second delivered to ``n``
spectators (1, 10 and 100) of one table, and what each costs the table process.

One Hold'em table of four bots (the chaos suite's, ``tests/chaos/bots.py``: every move
decided at once, a turn waiting 10 s) plays against real ledger, table and settlement
processes; the spectators hold one WatchTable stream each from a process of their own
(``tests/bench/watch_spectators.py``, real gRPC clients reading each message's bytes). After
a warm-up, over a fixed window: the messages every spectator together received per second
(the figure), the events the table appended per second, and the table process's CPU.

Every spectator is in one visibility class (no seat: no hidden card), so the table builds
and serializes each message once for all of them (``Watchers.flush``, ``WatchItem.wire``);
what is left per spectator is gRPC sending the bytes. Beside each figure:
``table.watchers_per_table_<n>_cpu_us``, the table process's CPU per message delivered, and
``table.watch_cpu_us_per_spectator_message``, what one more spectator's message costs: the
table's CPU per event with 100 spectators less that with 1, over the spectators' extra
messages per event (each round on its own, the median reported).

With ``SOCAI_BENCH_WATCHERS_BASELINE=<checkout>`` (a source tree of another commit, e.g.
``git archive <commit> | tar -x -C <dir>``) every round also runs the table service from that
tree (``PYTHONPATH``: its ``libs``, ``services`` and ``apps``), alternating with this one on
fresh stacks, and reports its figures as the peer ``baseline``: the two side by side, medians
of the same run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from socai.infra.service import METRICS_OFFSET
from socai_cli.stack import Stack
from tests.bench.bench_table import counters, cpu_s, with_metrics_ports
from tests.bench.harness import BenchContext, Result
from tests.bench.stack_support import bench_settings
from tests.chaos.bots import Bots

ROOT = Path(__file__).resolve().parents[2]
SPECTATORS = (1, 10, 100)
GAME = "holdem"
TURN_TIMEOUT_S = 10
WARMUP_S = 4.0  # the streams open and the snapshot sent before the window opens
WINDOW_S = 12.0
ROUNDS = 3
BASELINE_ENV = "SOCAI_BENCH_WATCHERS_BASELINE"
SPECTATORS_MODULE = "tests.bench.watch_spectators"


@dataclasses.dataclass(frozen=True)
class Window:
    spectators: int
    delivered: int  # messages every spectator together received
    events: float  # the table's appended events
    cpu_s: float  # the table process's
    elapsed_s: float
    ended: int  # spectator streams that ended in the window (0 when every one kept up)

    @property
    def delivered_per_s(self) -> float:
        return self.delivered / self.elapsed_s

    @property
    def cpu_us_per_delivered(self) -> float:
        return self.cpu_s * 1e6 / self.delivered if self.delivered else float("nan")

    @property
    def cpu_us_per_event(self) -> float:
        return self.cpu_s * 1e6 / self.events if self.events else float("nan")

    @property
    def delivered_per_event(self) -> float:
        return self.delivered / self.events if self.events else float("nan")


def run(ctx: BenchContext) -> list[Result]:
    quick = ctx.quick
    spectators = (1, 10) if quick else SPECTATORS
    rounds = 1 if quick else ROUNDS
    warmup_s, window_s = (2.0, 3.0) if quick else (WARMUP_S, WINDOW_S)
    baseline = os.environ.get(BASELINE_ENV, "")
    variants = {"": ""} if not baseline else {"": "", "baseline": str(Path(baseline).resolve())}
    measured: dict[str, list[dict[int, Window]]] = {name: [] for name in variants}
    for r in range(rounds):
        order = spectators if r % 2 == 0 else tuple(reversed(spectators))
        for name, source in variants.items():
            measured[name].append(play(ctx, source, order, warmup_s, window_s))
    return results(measured, spectators, warmup_s, window_s)


def results(
    measured: dict[str, list[dict[int, Window]]], spectators: tuple[int, ...], warmup_s: float, window_s: float
) -> list[Result]:
    def median(name: str, n: int, figure: str) -> float:
        return float(statistics.median(getattr(rounds[n], figure) for rounds in measured[name]))

    def peers(n: int, figure: str) -> dict[str, float]:
        return {name: median(name, n, figure) for name in measured if name}

    out = []
    for n in spectators:
        windows = [rounds[n] for rounds in measured[""]]
        params = {
            "game": GAME,
            "spectators": n,
            "rounds": len(windows),
            "window_s": window_s,
            "warmup_s": warmup_s,
            "table_events_per_s": round(statistics.median(w.events / w.elapsed_s for w in windows), 1),
            "messages_per_event_per_spectator": round(statistics.median(w.delivered_per_event / n for w in windows), 2),
            "table_cpu_share": round(statistics.median(w.cpu_s / w.elapsed_s for w in windows), 2),
            "table_cpu_us_per_event": round(median("", n, "cpu_us_per_event"), 1),
            "streams_ended": sum(w.ended for w in windows),
            "load_avg_1m": round(os.getloadavg()[0], 1),
        }
        for name in measured:
            if name:
                params[f"{name}_table_cpu_us_per_event"] = round(median(name, n, "cpu_us_per_event"), 1)
        out.append(
            Result(
                f"table.watchers_per_table_{n}",
                median("", n, "delivered_per_s"),
                "messages/s",
                True,
                peers=peers(n, "delivered_per_s"),
                params=params,
            )
        )
        out.append(
            Result(
                f"table.watchers_per_table_{n}_cpu_us",
                median("", n, "cpu_us_per_delivered"),
                "µs",
                False,
                peers=peers(n, "cpu_us_per_delivered"),
                params=params,
            )
        )
    fewest, most = min(spectators), max(spectators)

    def marginal(name: str) -> float:
        def one(rounds: dict[int, Window]) -> float:
            extra = rounds[most].delivered_per_event - rounds[fewest].delivered_per_event
            return (rounds[most].cpu_us_per_event - rounds[fewest].cpu_us_per_event) / extra

        return statistics.median(one(rounds) for rounds in measured[name])

    out.append(
        Result(
            "table.watch_cpu_us_per_spectator_message",
            marginal(""),
            "µs",
            False,
            peers={name: marginal(name) for name in measured if name},
            params={"game": GAME, "between": [fewest, most], "rounds": len(measured[""])},
        )
    )
    return out


@contextmanager
def table_source(source: str) -> Iterator[None]:
    """Processes started inside run the code of checkout ``source`` ("" for this one)."""
    if not source:
        yield
        return
    before = os.environ.get("PYTHONPATH")
    paths = [str(Path(source) / part) for part in ("libs", "services", "apps")]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([before] if before else []))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def play(ctx: BenchContext, source: str, order: tuple[int, ...], warmup_s: float, window_s: float) -> dict[int, Window]:
    """One table played on a fresh stack (its table service from ``source``), each count of
    spectators in ``order`` watching it for one window."""
    workdir = ctx.workdir / ("baseline" if source else "this")
    shutil.rmtree(workdir / "var", ignore_errors=True)
    s = Stack(with_metrics_ports(bench_settings(workdir)))
    try:
        s.start_infra()
        s.start_service("ledger")
        with table_source(source):
            s.start_service("table")
        s.start_service("settlement")
        settings = s.resolved_settings()
        pid = s.procs["table"].pid
        metrics_port = settings.metrics_port_base + METRICS_OFFSET["table"]

        async def measure() -> dict[int, Window]:
            bots = Bots(settings, 1, (GAME,), seed=1)
            bots.config = dataclasses.replace(bots.config, timeout_rate=0.0, turn_timeout_s=TURN_TIMEOUT_S)
            windows = {}
            try:
                (table_id,) = await bots.open_tables()
                bots.start()
                await asyncio.sleep(warmup_s)
                for n in order:
                    windows[n] = await asyncio.to_thread(
                        watch_window,
                        settings.table_addr,
                        settings.token_of("backend"),
                        table_id,
                        n,
                        pid,
                        metrics_port,
                        warmup_s,
                        window_s,
                    )
            finally:
                await bots.stop(leave=False)
            return windows

        return asyncio.run(measure())
    finally:
        s.stop()


def watch_window(
    address: str, token: str, table_id: str, n: int, pid: int, metrics_port: int, warmup_s: float, window_s: float
) -> Window:
    """``n`` spectators (a process of their own) watch ``table_id`` for one window."""
    child = subprocess.Popen(
        [sys.executable, "-m", SPECTATORS_MODULE, address, token, table_id, str(n)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        line = child.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"the spectators did not start: {line!r}")
        time.sleep(warmup_s)
        first, cpu0, t0 = counters(metrics_port), cpu_s(pid), time.monotonic()
        child.stdin.write("start\n")
        child.stdin.flush()
        time.sleep(window_s)
        child.stdin.write("stop\n")
        child.stdin.flush()
        last, cpu1, t1 = counters(metrics_port), cpu_s(pid), time.monotonic()
        report = json.loads(child.stdout.readline())
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    events = last["socai_events_published_total"] - first["socai_events_published_total"]
    return Window(n, int(report["messages"]), events, cpu1 - cpu0, t1 - t0, int(report["ended"]))
