"""Issue 19's combined test: 2 table and 2 settlement instances under bot load, SIGKILLed in turn.

A private stack (``make chaos CHAOS_ARGS=--scaleout`` in small): an event log of 4 partitions,
lease TTLs of 2 s, four bot tables (Hold'em, Xì Tố, Tài Xỉu) reached through either table
instance (a call that lands on the instance not running its table is forwarded). First the
first table and settlement instances are SIGKILLed and started again, then the second ones
are SIGKILLed for good and a third of each is started. After each: every table moves again,
every finished hand is settled exactly once (settlement records and the ledger's ``settle:``
transactions against the stream's ``HandEnded``s), no dead letter (for ordering or any other
reason), trial balance 0 and VerifyJournal clean; each kill's handover time (SIGKILL → every
partition of the service held by a running instance) is measured. At the end every bot asks
to leave (retrying UNAVAILABLE, as a client must): none is refused for good, none is still
seated, every cash-out is done and every escrow is empty; no two instances took turns
writing one table (the lease token in each event's ``Socai-Table-Writer`` header never goes
back along a table's events); ``socai audit`` is clean.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.chaos.faults import SCALEOUT_FAULTS, ChaosOptions, run_chaos

pytestmark = [pytest.mark.fault, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GAMES = ("holdem", "xito", "taixiu")
TTL_S = 2.0


async def test_two_table_and_two_settlement_instances_survive_kills_and_a_third_of_each_with_the_books_clean():
    root = ROOT / "var" / "chaos" / f"scaleout-{os.getpid()}"
    options = ChaosOptions(
        root=root,
        tables=4,
        games=GAMES,
        faults=SCALEOUT_FAULTS,
        warmup_s=4.0,
        resume_timeout_s=45.0,
        settle_timeout_s=60.0,
        audit_every_fault=False,  # the full audit at the end covers every hand (the time budget)
        instances={"table": 2, "settlement": 2},
        env={
            "SOCAI_EVENT_PARTITIONS": "4",
            "SOCAI_TABLE_LEASE_TTL_S": str(TTL_S),
            "SOCAI_SETTLEMENT_LEASE_TTL_S": str(TTL_S),
        },
    )
    report = await run_chaos(options, log=print)
    print(f"handover seconds (SIGKILL -> every partition held by a running instance): {report['handover_s']}")
    failed = {f["fault"]: f["problems"] for f in report["faults"] if not f["ok"]}
    final = report.get("final", {})
    assert report["ok"], json.dumps(
        {"failed": failed, "final": final.get("problems"), "aborted": report.get("aborted"), "report": str(root)},
        indent=2,
    )
    assert [f["fault"] for f in report["faults"]] == list(SCALEOUT_FAULTS)
    for fault in report["faults"]:
        handover = fault["handover_s"]
        assert set(handover) == {"table", "settlement"} and None not in handover.values()
    assert final["hands_settled"] >= final["hands_ended"] > 0
    assert final["audit"]["exit_status"] == 0 and final["audit"]["hands_verified"] > 0
    shutil.rmtree(root / "stack", ignore_errors=True)  # keep the report, not the servers' data
