"""The benchmark harness behind ``make bench``.

Each ``tests/bench/bench_*.py`` module defines ``run(ctx: BenchContext) -> list[Result]``.
The runner (``python -m tests.bench [name-filter]``) imports them in name order, runs
them, and writes ``var/bench/report.json`` and ``var/bench/report.md`` in the format fixed
by DESIGN.md "Benchmarks". Figures are medians of several rounds; peers are measured in
the same run, on the same inputs, so they compare side by side.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Result:
    name: str  # stable, e.g. "rules.holdem.eval7"
    value: float
    unit: str  # "evals/s", "hands/s", "tx/s", "ms"
    higher_is_better: bool = True
    peers: dict[str, float] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": round(self.value, 3),
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "peers": {k: round(v, 3) for k, v in self.peers.items()},
            "params": self.params,
        }


@dataclass
class BenchContext:
    """What a benchmark may use: a scratch directory under var/bench and a quick flag."""

    workdir: Path
    quick: bool = False  # fewer rounds, smaller inputs (used by the smoke test)
    extras: dict[str, Any] = field(default_factory=dict)


def rate(fn: Callable[[], int], rounds: int = 5) -> float:
    """Median items per second over ``rounds`` calls; ``fn`` returns how many items it did."""
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        items = fn()
        elapsed = time.perf_counter() - start
        rates.append(items / elapsed if elapsed > 0 else float("inf"))
    return statistics.median(rates)


def percentile(samples: list[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) by nearest rank."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1))))
    return ordered[k]
