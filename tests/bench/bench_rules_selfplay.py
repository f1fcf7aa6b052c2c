"""``rules.<game>.selfplay`` (hands/s) for every game in the rules registry except Hold'em
(``bench_rules_holdem`` measures it on a fixed 6-max setup), then ``rules.<game>.replay``
(hands/s) for every game: the recorded hands of a self-played run replayed as settlement and
the auditor replay them, no bot.

Whole tables of random bots through ``tests.support.synthetic``: each hand deals from the fair
shuffle (or rolls the seeded dice), the bots choose among ``candidate_actions`` through
``autoplay.play_hand``, the events are recorded as the table service writes them, and the
hand is settled. A game added to the registry gets its figure here without changes.
"""

from __future__ import annotations

from socai.rules import registry
from socai.settle.replay import replay
from tests.bench.harness import BenchContext, Result, rate
from tests.support.synthetic import HANDS_PER_TABLE, setup_of, simulate


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
                    "chooser": "uniform over candidate_actions (tests.support.synthetic.random_bot)",
                    "includes": "fair shuffle or dice, events recorded, settle",
                },
            )
        )
    return results + [_replay_result(game, hands, 2 if ctx.quick else 5) for game in registry.available()]


def _replay_result(game: str, hands: int, rounds: int) -> Result:
    """The hands of one self-played run, replayed from their events (``socai.settle.replay``:
    the envelope and sequence checks, the deck re-derived from the revealed seed and every
    card checked against it, each event applied, the hand settled), each checked once before
    timing to settle as it did in play."""
    recorded = simulate(hands, (game,), seed=11).hands
    for hand in recorded:
        settled = replay(hand.events).settlement
        if settled != hand.settlement:
            raise AssertionError(f"{hand.hand_id} replays to {settled}, not {hand.settlement}")

    def run() -> int:
        for hand in recorded:
            replay(hand.events)
        return len(recorded)

    return Result(
        f"rules.{game}.replay",
        rate(run, rounds),
        "hands/s",
        params={
            "hands": len(recorded),
            "events_per_hand": round(sum(len(h.events) for h in recorded) / len(recorded), 2),
            "includes": "envelope and sequence checks, deck from the seed and every card checked, apply, settle",
            "excludes": "decoding the messages, the seal check",
        },
    )
