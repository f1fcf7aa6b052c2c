"""``rules.<game>.selfplay`` (hands/s) for every game in the rules registry except Hold'em
(``bench_rules_holdem`` measures it on a fixed 6-max setup).

Whole tables of random bots through ``tests.support.simulate``: each hand deals from the fair
shuffle (or rolls the seeded dice), the bots choose among ``candidate_actions`` through
``autoplay.play_hand``, the events are recorded as the table service writes them, and the
hand is settled. A game added to the registry gets its figure here without changes.
"""

from __future__ import annotations

from socai.rules import registry
from tests.bench.harness import BenchContext, Result, rate
from tests.support.simulate import HANDS_PER_TABLE, setup_of, simulate


def run(ctx: BenchContext) -> list[Result]:
    hands = 100 if ctx.quick else 1000
    results = []
    for game in registry.available():
        if game == "holdem":
            continue
        setup = setup_of(game)

        def play(game: str = game) -> int:
            return len(simulate(hands, (game,), seed=7).hands)

        results.append(
            Result(
                f"rules.{game}.selfplay",
                rate(play, 2 if ctx.quick else 3),
                "hands/s",
                params={
                    "hands": hands,
                    "players": f"{setup.players_min}-{setup.players_max}",
                    "hands_per_table": HANDS_PER_TABLE,
                    "chooser": "uniform over candidate_actions (tests.support.simulate.random_bot)",
                    "includes": "fair shuffle or dice, events recorded, settle",
                },
            )
        )
    return results
