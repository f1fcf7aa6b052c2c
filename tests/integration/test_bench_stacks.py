"""The benchmarks' own stacks come up and measure (``python -m tests.bench --quick``).

``make bench`` is not run in CI, so a stack the benchmarks build themselves can break
unseen: the settlement benchmarks loaded their backlog into a nats-server without the
deployment's account, which the real server (account SOCAI) never looked in, and each drain
waited its 30-minute limit for hands it could not read; the end-to-end latency read the
log at an address without a user. Both run here in quick mode; the figures are not asserted,
only that each result is there and measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

EXPECTED = {
    "bench_seal": {"settlement.drain_sealed", "settlement.seal_check_us_per_hand"},
    "bench_e2e": {
        "settlement.e2e_p99_ms_100_tables",
        "settlement.e2e_p50_ms_100_tables",
        "settlement.e2e_p99_ms_100_tables_steady",
    },
}


@pytest.mark.parametrize("module", sorted(EXPECTED))
def test_a_benchmark_stack_comes_up_and_measures(module: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench", "--quick", "--out", str(tmp_path), module],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["failed"] == [], done.stdout[-4000:] + done.stderr[-4000:]
    results = {r["name"]: r for r in report["results"]}
    assert set(results) == EXPECTED[module]
    assert all(r["value"] > 0 for r in results.values())
    if module == "bench_e2e":  # the steady figure is of the hands that ended after the setup
        steady = results["settlement.e2e_p99_ms_100_tables_steady"]["params"]
        every = results["settlement.e2e_p99_ms_100_tables"]["params"]
        assert 0 < steady["hands_measured"] <= every["hands_measured"] and steady["setup_s"] > 0
