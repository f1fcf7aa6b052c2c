"""The short form of ``make chaos``: a few faults against real processes under bot load.

Four bot tables (Hold'em, Xì Tố, Tài Xỉu) on a private stack under ``var/chaos/short-<pid>``
(nats-server, PostgreSQL and each service its own process); in turn the table service,
settlement and the ledger are SIGKILLed and restarted, nats-server is SIGKILLed, PostgreSQL
shut down immediately (2 s outages), and every table's latest events are published again
with their own Msg-Id. After each: every finished hand settled exactly once, trial balance
0, VerifyJournal and ``socai audit`` clean, no table frozen, no escrow mismatch; at the end
the bots leave and the whole log is audited. About 70 s. The full suite, with the SIGSTOP and
SIGTERM faults and longer outages, is ``make chaos`` (``python -m tests.chaos``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.chaos.faults import SHORT_FAULTS, ChaosOptions, run_chaos

pytestmark = [pytest.mark.fault, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

# The games that run end to end today (table, settlement, audit); four tables cannot cover
# eleven games anyway. ``make chaos`` plays every game in the registry; SOCAI_CHAOS_GAMES
# ("all" or a list) widens this one.
GAMES = ("holdem", "xito", "taixiu")


def games() -> tuple[str, ...]:
    wanted = os.environ.get("SOCAI_CHAOS_GAMES", "")
    if wanted == "all":
        return ()
    return tuple(g for g in wanted.split(",") if g) or GAMES


async def test_every_fault_of_the_short_form_recovers_with_the_books_clean():
    root = ROOT / "var" / "chaos" / f"short-{os.getpid()}"
    options = ChaosOptions(
        root=root,
        tables=4,
        games=games(),
        faults=SHORT_FAULTS,
        warmup_s=4.0,
        outage_s=2.0,
        resume_timeout_s=30.0,
        settle_timeout_s=45.0,
    )
    report = await run_chaos(options, log=lambda line: None)
    failed = {f["fault"]: f["problems"] for f in report["faults"] if not f["ok"]}
    final = report.get("final", {})
    assert report["ok"], json.dumps(
        {"failed": failed, "final": final.get("problems"), "aborted": report.get("aborted"), "report": str(root)},
        indent=2,
    )
    assert [f["fault"] for f in report["faults"]] == list(SHORT_FAULTS)
    assert all(f["recovery_s"] is not None for f in report["faults"])
    shutil.rmtree(root / "stack", ignore_errors=True)  # keep the report, not the servers' data
