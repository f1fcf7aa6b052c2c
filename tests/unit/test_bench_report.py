"""``make bench``'s report has the format DESIGN.md "Benchmarks" fixes (checked on the cheapest
module, in quick mode; the figures themselves are never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from socai.rules import registry

ROOT = Path(__file__).resolve().parents[2]


def test_the_report_names_every_result_in_the_fixed_format(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench", "--quick", "--out", str(tmp_path), "bench_rules_selfplay"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report) == {"machine", "results", "failed"} and report["failed"] == []
    names = [r["name"] for r in report["results"]]
    assert names == [f"rules.{game}.selfplay" for game in registry.available() if game != "holdem"]
    for result in report["results"]:
        assert set(result) == {"name", "value", "unit", "higher_is_better", "peers", "params"}
        assert result["unit"] == "hands/s" and result["higher_is_better"] is True
        assert isinstance(result["value"], float) and result["value"] > 0
    assert "| rules.xito.selfplay |" in (tmp_path / "report.md").read_text()
