"""``python -m tests.chaos`` (``make chaos``): every fault in turn against a private stack.

    python -m tests.chaos [--tables 12] [--games all|holdem,…] [--faults kill_table,nats_sigkill,…]
                          [--short] [--with-known-defects] [--outage-s 6] [--stop-s 12] [--stop-settlement-s 35] [--out var/chaos]

Writes ``<out>/report.json`` (per fault: the recovery time and its parts, the checks and any
problem) and exits 1 when any check failed. The faults known to fail on today's code
(``KNOWN_DEFECTS``) run only with ``--with-known-defects``, after the others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from socai.infra.logging import configure
from tests.chaos.faults import (
    DEFAULT_FAULTS,
    FAULTS,
    KNOWN_DEFECTS,
    SCALEOUT_FAULTS,
    SHORT_FAULTS,
    ChaosOptions,
    run_chaos,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=int, default=12, help="bot tables, games in turn (default 12)")
    p.add_argument("--games", default="all", help="comma-separated game ids, or all (default)")
    p.add_argument(
        "--faults", default="", help=f"comma-separated, in order (default: all but known defects): {','.join(FAULTS)}"
    )
    p.add_argument("--short", action="store_true", help=f"the short form's faults: {','.join(SHORT_FAULTS)}")
    p.add_argument("--with-known-defects", action="store_true", help=f"also run {','.join(KNOWN_DEFECTS)} (last)")
    p.add_argument("--outage-s", type=float, default=6.0, help="NATS / PostgreSQL down this long (default 6)")
    p.add_argument(
        "--stop-s", type=float, default=12.0, help="SIGSTOP of the ledger and the table service (default 12)"
    )
    p.add_argument(
        "--stop-settlement-s", type=float, default=35.0, help="SIGSTOP of settlement, past its ack_wait (default 35)"
    )
    p.add_argument(
        "--scaleout",
        action="store_true",
        help=f"two table and two settlement instances on P=4 partitions (2 s lease TTLs); faults {','.join(SCALEOUT_FAULTS)}",
    )
    p.add_argument("--warmup-s", type=float, default=10.0)
    p.add_argument("--no-audit-each", action="store_true", help="socai audit only at the end, not after every fault")
    p.add_argument("--out", default="var/chaos", help="report and stack directory (default var/chaos)")
    args = p.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f) or (
        SCALEOUT_FAULTS if args.scaleout else SHORT_FAULTS if args.short else DEFAULT_FAULTS
    )
    if args.with_known_defects:
        faults += tuple(f for f in KNOWN_DEFECTS if f not in faults)
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        p.error(f"unknown faults: {unknown}")
    configure(fmt="console", level="warning")
    options = ChaosOptions(
        root=Path(args.out).resolve(),
        tables=args.tables,
        games=() if args.games == "all" else tuple(g for g in args.games.split(",") if g),
        faults=faults,
        warmup_s=args.warmup_s,
        outage_s=args.outage_s,
        stop_s=args.stop_s,
        stop_settlement_s=args.stop_settlement_s,
        audit_every_fault=not args.no_audit_each,
        instances={"table": 2, "settlement": 2} if args.scaleout else {},
        env={"SOCAI_EVENT_PARTITIONS": "4", "SOCAI_TABLE_LEASE_TTL_S": "2", "SOCAI_SETTLEMENT_LEASE_TTL_S": "2"}
        if args.scaleout
        else {},
    )
    report = asyncio.run(run_chaos(options, log=lambda line: print(line, flush=True)))
    print(
        json.dumps({"ok": report["ok"], "recovery_s": report["recovery_s"], "elapsed_s": report["elapsed_s"]}, indent=2)
    )
    print(f"report: {options.root / 'report.json'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
