"""``make bench``'s report has the format DESIGN.md "Benchmarks" fixes (checked on the cheapest
module, in quick mode; the figures themselves are never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from socai.rules import registry

ROOT = Path(__file__).resolve().parents[2]


def test_the_report_names_every_result_in_the_fixed_format(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench", "--quick", "--out", str(tmp_path), "bench_rules_selfplay"],
        cwd=ROOT,
        env={**os.environ, "SOCAI_CORE": "interpreted"},  # the interpreted core only
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["machine"]["core"] == "interpreted"
    assert set(report) == {"machine", "results", "failed"} and report["failed"] == []
    names = [r["name"] for r in report["results"]]
    selfplay = [f"rules.{game}.selfplay" for game in registry.available() if game != "holdem"]
    assert names == selfplay + [f"rules.{game}.replay" for game in registry.available()]
    for result in report["results"]:
        assert set(result) == {"name", "value", "unit", "higher_is_better", "peers", "params"}
        assert result["unit"] == "hands/s" and result["higher_is_better"] is True
        assert isinstance(result["value"], float) and result["value"] > 0
        assert result["params"]["core"] == "interpreted" and result["peers"] == {}
    assert "| rules.xito.selfplay |" in (tmp_path / "report.md").read_text()


def test_the_latency_by_tables_result_carries_its_figures_and_its_plot(tmp_path: Path) -> None:
    from tests.bench.bench_settlement import SERIES_TABLES, latency_result, plot_latency

    def points(p99_ms: float) -> dict[int, dict[str, float]]:
        return {t: {"p50_ms": p99_ms / 4, "p99_ms": p99_ms + t, "hands": 6 * t} for t in SERIES_TABLES}

    series = {"1 instance, P = 8": points(100.0), "2 instances, P = 8": points(200.0)}
    plot = tmp_path / "settlement_latency.png"
    plot_latency(series, plot, "publish → ledger")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = latency_result(series, plot).as_json()
    assert set(result) == {"name", "value", "unit", "higher_is_better", "peers", "params"}
    assert result["name"] == "settlement.e2e_latency_by_tables" and result["unit"] == "ms"
    assert result["higher_is_better"] is False
    assert result["value"] == 400.0  # p99 at 200 tables with 2 instances
    assert result["params"]["series"]["1 instance, P = 8"]["10"] == {"p50_ms": 25.0, "p99_ms": 110.0, "hands": 60}
    assert result["params"]["plot"] == "settlement_latency.png"
    json.dumps(result)  # the report is JSON
