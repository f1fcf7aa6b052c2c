"""The short nemesis of ``make test``: one seeded round of every fault kind over a scaled-out stack.

Two table and two settlement instances on an event log of 4 partitions (2 s lease TTLs), a
ledger, nats-server and PostgreSQL, each its own process, with bots on 4 tables (Hold'em, Xì
Tố, Tài Xỉu; ``SOCAI_CHAOS_GAMES=all`` or a list for others). Seed 14's schedule
(``tests.chaos.nemesis.plan``, printed by ``python -m tests.chaos.nemesis --plan-only
--seed 14 …``) injects each kind once, one of them paired with a second fault, with 3–5 s
between groups and the short durations (``SHORT_PROFILE``): nats-server stopped past the
leases, restarted with SIGKILL; PostgreSQL shut down immediately; the ledger, a table and a
settlement instance SIGKILLed and restarted; a table instance killed while nats-server is
stopped; a settlement instance killed while nats-server is stopped; a settlement instance
and the busiest table instance stopped past their leases; a settlement instance stopped a
while; a table and a settlement instance each killed for good and a new one started; every
socai process restarted one at a time (a rolling restart: no player's call may fail past
the client's retries, no table out longer than a lease and its rebuild); every table's latest
events published again. Then every end-state check of the nemesis (its module docstring):
every hand settled once, no dead letter, trial balance 0, VerifyJournal and ``socai audit``
clean, every bot out with wallet = deposits + nets, no table frozen or out longer than the
fault allows, one writer per table, RSS bounded, no client answered INTERNAL, no crash or
unhandled traceback in any log. It covers what the chaos short run and the scale-out run
covered (kills of every service, NATS and PostgreSQL crashes, duplicates, two instances of
each service, instances replaced for good).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.chaos.nemesis import ALL_KINDS, SHORT_PROFILE, NemesisOptions, plan, run_nemesis

pytestmark = [pytest.mark.fault, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SEED = 14
GAMES = ("holdem", "xito", "taixiu")
KINDS = (*ALL_KINDS, "replace_instance")  # replaced twice: one table and one settlement instance


def games() -> tuple[str, ...]:
    wanted = os.environ.get("SOCAI_CHAOS_GAMES", "")
    if wanted == "all":
        return ()
    return tuple(g for g in wanted.split(",") if g) or GAMES


def options(root: Path) -> NemesisOptions:
    return NemesisOptions(
        root=root,
        seed=SEED,
        tables=4,
        games=games(),
        ttl_s=2.0,
        gap_s=(3.0, 5.0),
        pair_chance=0.2,
        kinds=KINDS,
        profile=SHORT_PROFILE,
        rounds=1,
        warmup_s=4.0,
        resume_timeout_s=45.0,
        settle_timeout_s=60.0,
        # Settlement replays in its own process here: two worker processes per instance take
        # 10-20 s to start on a loaded 2-core machine, at every kill and replacement.
        env={"SOCAI_SETTLEMENT_REPLAY_WORKERS": "0"},
    )


def test_the_seed_s_schedule_covers_what_the_short_and_scale_out_chaos_runs_did() -> None:
    o = options(ROOT)
    groups = plan(o.seed, o.duration_s, o.kinds, o.gap_s, o.pair_chance, o.ttl_s, o.profile, o.rounds)
    faults = [f for g in groups for f in g.faults]
    assert {f.kind for f in faults} == set(ALL_KINDS)
    assert any(f.kind == "nats_restart" and f.pick % 2 for f in faults)  # SIGKILL
    assert any(f.kind == "postgres_restart" and f.pick % 2 == 0 for f in faults)  # immediate
    assert {f.role for f in faults if f.kind == "replace_instance"} == {"table", "settlement"}
    assert any(len(g.faults) == 2 for g in groups)  # two faults at once


@pytest.mark.heavy
async def test_a_seeded_round_of_every_fault_leaves_the_books_exact_and_every_table_back() -> None:
    root = ROOT / "var" / "chaos" / f"nemesis-short-{os.getpid()}"
    report = await run_nemesis(options(root), log=print)
    print((root / "report.md").read_text())
    assert report["ok"], json.dumps(
        {"problems": report["problems"], "aborted": report.get("aborted"), "report": str(root)}, indent=2
    )
    final = report["final"]
    assert final["hands_settled"] >= final["hands_ended"] > 0
    assert final["audit"]["exit_status"] == 0 and final["audit"]["hands_verified"] > 0
    assert final["audit"]["rss_peak_mb"] > 0  # the audit process measured, not a guess
    assert report["wallets"]["players_checked"] > 0
    shutil.rmtree(root / "stack", ignore_errors=True)  # keep the report, not the servers' data
