"""``rules.<game>.view_us``: what a client's view of the seat to act costs the table, in
microseconds (lower is better): the kit's ``legal_moves``, ``facing`` and ``held_cards`` for
that seat, which every ``WatchTable`` message ending a change and every ``GetTableState``
compute for each viewer whose decision is due (issue 36).

Measured at every decision of self-played hands (``tests.support.synthetic``), the mean over
all of them; Tiến Lên lists every play of the seat, Mậu Binh's example is the suggested
arrangement, Tài Xỉu describes each of its 50 bets.
"""

from __future__ import annotations

import time

from socai.rules import base, registry
from tests.bench.harness import BenchContext, Result
from tests.support.synthetic import simulate


def run(ctx: BenchContext) -> list[Result]:
    hands = 6 if ctx.quick else 40
    results = []
    for game in registry.available():
        module = registry.get(game)
        spent_s, views = 0.0, 0
        for hand in simulate(hands, (game,), seed=36).hands:
            bodies = [e.body for e in hand.events]
            state = module.initial_state(bodies[0])
            for body in bodies[1:]:
                for seat in module.pending(state).to_act:
                    if seat < 0:
                        continue
                    start = time.perf_counter()
                    base.legal_moves(module, state, seat)
                    base.facing(module, state, seat)
                    base.held_cards(module, state, seat)
                    spent_s += time.perf_counter() - start
                    views += 1
                state = module.apply(state, body)
        results.append(
            Result(
                f"rules.{game}.view_us",
                spent_s / max(views, 1) * 1e6,
                "µs",
                higher_is_better=False,
                params={
                    "hands": hands,
                    "views": views,
                    "includes": "legal_moves, facing, held_cards of the seat to act",
                },
            )
        )
    return results
