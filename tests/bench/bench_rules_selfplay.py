"""``rules.<game>.selfplay`` (hands/s) for every game in the rules registry except Hold'em
(``bench_rules_holdem`` measures it on a fixed 6-max setup), then ``rules.<game>.replay``
(hands/s) for every game: the recorded hands of a self-played run replayed as settlement and
the auditor replay them, no bot.

Whole tables of random bots through ``tests.support.synthetic``: each hand deals from the fair
shuffle (or rolls the seeded dice), the bots choose among ``candidate_actions`` through
``autoplay.play_hand``, the events are recorded as the table service writes them, and the
hand is settled. A game added to the registry gets its figure here without changes.

On the compiled core (``make bench`` builds it first: docs/inside/native.md) each figure is
the compiled core's, with the interpreted core's in ``peers["interpreted"]``, measured the
same way in a child process run with ``SOCAI_CORE=interpreted``; game by game, one build
after the other, so the machine's load weighs on both alike. On the interpreted core (no
build, or ``SOCAI_CORE=interpreted``) the figure is the interpreted core's alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import socai
from socai import native
from socai.rules import registry
from socai.settle.replay import replay
from tests.bench.harness import BenchContext, Result, rate
from tests.support.synthetic import HANDS_PER_TABLE, setup_of, simulate

ROOT = Path(__file__).resolve().parents[2]


def run(ctx: BenchContext) -> list[Result]:
    hands = 100 if ctx.quick else 1000
    selfplay_rounds, replay_rounds = (2, 2) if ctx.quick else (3, 5)
    on_compiled = socai.core_build() == "compiled"
    selfplay, replays = [], []
    for game in registry.available():
        if on_compiled:
            compiled: dict[str, float] | None = measure(game, hands, selfplay_rounds, replay_rounds)
            interpreted = _measure_interpreted(game, hands, selfplay_rounds, replay_rounds)
        else:
            compiled, interpreted = None, measure(game, hands, selfplay_rounds, replay_rounds)
        setup = setup_of(game)
        if game != "holdem":
            selfplay.append(
                _beside(
                    Result(
                        f"rules.{game}.selfplay",
                        interpreted["selfplay"],
                        "hands/s",
                        params={
                            "hands": hands,
                            "players": f"{setup.players_min}-{setup.players_max}",
                            "hands_per_table": HANDS_PER_TABLE,
                            "chooser": "uniform over candidate_actions (tests.support.synthetic.random_bot)",
                            "includes": "fair shuffle or dice, events recorded, settle",
                        },
                    ),
                    compiled and compiled["selfplay"],
                )
            )
        replays.append(
            _beside(
                Result(
                    f"rules.{game}.replay",
                    interpreted["replay"],
                    "hands/s",
                    params={
                        "hands": hands,
                        "events_per_hand": interpreted["events_per_hand"],
                        "includes": "envelope and sequence checks, deck from the seed and every card checked, "
                        "apply, settle",
                        "excludes": "decoding the messages, the seal check",
                    },
                ),
                compiled and compiled["replay"],
            )
        )
    return selfplay + replays


def _beside(result: Result, compiled: float | None) -> Result:
    """The compiled core's figure, with the interpreted one as its peer; or the interpreted."""
    if compiled is None:
        result.params["core"] = "interpreted"
        return result
    result.peers["interpreted"] = result.value
    result.value = compiled
    result.params["core"] = "compiled"
    return result


def measure(game: str, hands: int, selfplay_rounds: int, replay_rounds: int) -> dict[str, float]:
    """Self-play (``simulate(hands, (game,), seed=7)``, median of ``selfplay_rounds``) and the
    replay of ``seed=11``'s hands (``socai.settle.replay``: the envelope and sequence checks,
    the deck re-derived from the revealed seed and every card checked against it, each event
    applied, the hand settled; each hand checked once before timing to settle as it did in
    play; median of ``replay_rounds``), in hands/s, on the core this process runs."""

    def play() -> int:
        return len(simulate(hands, (game,), seed=7).hands)

    recorded = simulate(hands, (game,), seed=11).hands
    for hand in recorded:
        settled = replay(hand.events).settlement
        if settled != hand.settlement:
            raise AssertionError(f"{hand.hand_id} replays to {settled}, not {hand.settlement}")

    def replay_all() -> int:
        for hand in recorded:
            replay(hand.events)
        return len(recorded)

    return {
        "selfplay": rate(play, selfplay_rounds) if game != "holdem" else 0.0,
        "replay": rate(replay_all, replay_rounds),
        "events_per_hand": round(sum(len(h.events) for h in recorded) / len(recorded), 2),
    }


def _measure_interpreted(game: str, hands: int, selfplay_rounds: int, replay_rounds: int) -> dict[str, float]:
    env = {**os.environ, native.ENV: "interpreted"}
    args = [game, str(hands), str(selfplay_rounds), str(replay_rounds)]
    out = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_rules_selfplay", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    measured: dict[str, float] = json.loads(out)
    if measured.pop("core") != "interpreted":
        raise AssertionError(f"{native.ENV}=interpreted ran the compiled core")
    return measured


if __name__ == "__main__":  # the child of _measure_interpreted: one game on the core it runs
    game, hands, selfplay_rounds, replay_rounds = sys.argv[1], *map(int, sys.argv[2:5])
    print(json.dumps({"core": socai.core_build(), **measure(game, hands, selfplay_rounds, replay_rounds)}))
