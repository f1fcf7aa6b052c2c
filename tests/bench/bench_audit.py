"""The auditor's desk (issue 20).

- ``audit.html_hands_per_s`` (hand pages/s): ``socai audit --html`` on a 20,000-hand export
  of every game (``tests/support/synthetic.py``, no services), reconciled with a journal
  export of the same hands: the hand views (``socai.audit.handview``) and every page,
  the hand list and the overview written to disk, divided into the hands written. The
  replay and the reconciliation are done once before the clock starts: ``audit.replay``
  (``bench_settlement``) measures those; the peer ``audit.replay_jsonl`` is the same
  replay on this export in this run, for comparison.
"""

from __future__ import annotations

import asyncio
import shutil

from socai.audit import html
from socai.audit.auditor import reconcile, verify
from socai.audit.export import read_jsonl, write_jsonl
from socai.audit.ledger_source import JournalLedger
from socai.rules import registry
from tests.bench.harness import BenchContext, Result, rate
from tests.support.synthetic import simulate
from tests.unit.audit.ledger_journal import journal_of

HANDS = 20_000
HANDS_QUICK = 300


def run(ctx: BenchContext) -> list[Result]:
    hands = HANDS_QUICK if ctx.quick else HANDS
    sim = simulate(hands, registry.available(), seed=2020)
    export = ctx.workdir / "export.jsonl"
    with export.open("w", encoding="utf-8") as out:
        write_jsonl(sim.events(), out)

    def replay() -> int:
        return verify(read_jsonl(export), source="bench").report.hands_verified

    replay_rate = rate(replay, rounds=1)
    audit = verify(read_jsonl(export), source="bench")
    asyncio.run(reconcile(audit, JournalLedger(journal_of(sim), "journal bench")))
    assert audit.report.ok, audit.report.render()
    site = ctx.workdir / "site"

    def pages() -> int:
        shutil.rmtree(site, ignore_errors=True)
        return html.write_site(audit, site)

    return [
        Result(
            "audit.html_hands_per_s",
            rate(pages, rounds=1 if ctx.quick else 3),
            "hands/s",
            peers={"audit.replay_jsonl": replay_rate},
            params={"hands": len(sim.hands), "games": list(registry.available()), "ledger": "journal export"},
        )
    ]
