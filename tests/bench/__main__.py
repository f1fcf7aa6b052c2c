"""Run every benchmark and write var/bench/report.json and report.md.

Usage: ``python -m tests.bench [--quick] [substring ...]`` (``make bench`` runs them all).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import socai
from tests.bench.harness import BenchContext, Result

ROOT = Path(__file__).resolve().parents[2]


def machine() -> dict[str, object]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "core": socai.core_build(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench")
    parser.add_argument("--quick", action="store_true", help="small inputs, for a smoke test")
    parser.add_argument("--out", default=str(ROOT / "var" / "bench"))
    parser.add_argument("filters", nargs="*", help="run only modules whose name contains one of these")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    modules = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    if args.filters:
        modules = [m for m in modules if any(f in m for f in args.filters)]
    results: list[Result] = []
    failures: list[str] = []
    for name in modules:
        print(f"== {name}", flush=True)
        try:
            module = importlib.import_module(f"tests.bench.{name}")
            ctx = BenchContext(workdir=out / name, quick=args.quick)
            ctx.workdir.mkdir(parents=True, exist_ok=True)
            for result in module.run(ctx):
                print(f"   {result.name}: {result.value:,.1f} {result.unit}  peers={result.peers}", flush=True)
                results.append(result)
        except Exception:
            traceback.print_exc()
            failures.append(name)
    report = {"machine": machine(), "results": [r.as_json() for r in results], "failed": failures}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(markdown(report))
    print(f"wrote {out / 'report.json'} and report.md ({len(results)} results, {len(failures)} failed)")
    return 1 if failures else 0


def markdown(report: dict) -> str:
    lines = ["# socai benchmarks", "", f"Machine: `{json.dumps(report['machine'])}`", ""]
    lines += ["| name | value | unit | peers (same run) | params |", "|---|---:|---|---|---|"]
    for r in report["results"]:
        peers = ", ".join(f"{k}: {v:,.1f}" for k, v in r["peers"].items())
        better = "" if r["higher_is_better"] else " (lower is better)"
        params = json.dumps(r["params"])
        lines.append(f"| {r['name']} | {r['value']:,.1f} | {r['unit']}{better} | {peers} | {params} |")
    if report.get("failed"):
        lines += ["", "Failed: " + ", ".join(report["failed"])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
