"""``events.encode_us`` and ``events.decode_us``: what one event costs to write as the log
stores it (``codec.encode``: the domain event to its protobuf, serialized) and to read back
(``codec.decode``), in microseconds, over every event of self-played hands of all eleven
games (deals of 52 cards, plays, melds, arrangements, wagers) in their played proportions.

The table service encodes each event it appends and each legal move of every view it
sends; settlement, the auditor and a table's rebuild decode. ``encode_us`` has the peer
``by_reflection``: the definition the planned encoder is held byte-equal to
(``codec._to_proto_by_reflection``, ``tests/unit/test_codec.py``), measured on the same
events in the same run. Best of five rounds of each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from socai.events import codec
from socai.events.model import Event
from socai.rules import registry
from tests.bench.harness import BenchContext, Result
from tests.support.synthetic import simulate

ROUNDS = 5


def best_us(events: Sequence[Any], call: Callable[[Any], object]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for event in events:
            call(event)
        best = min(best, time.perf_counter() - start)
    return best / len(events) * 1e6


def by_reflection(event: Event) -> bytes:
    return codec._to_proto_by_reflection(event).SerializeToString(deterministic=True)


def run(ctx: BenchContext) -> list[Result]:
    hands = 22 if ctx.quick else 220  # spread evenly over the games
    games = registry.available()
    events = [e for hand in simulate(hands, games, seed=30).hands for e in hand.events]
    wire = [codec.encode(e) for e in events]
    params = {"hands": hands, "events": len(events), "games": list(games), "rounds": ROUNDS}
    return [
        Result(
            "events.encode_us",
            best_us(events, codec.encode),
            "µs",
            higher_is_better=False,
            peers={"by_reflection": best_us(events, by_reflection)},
            params=params,
        ),
        Result("events.decode_us", best_us(wire, codec.decode), "µs", higher_is_better=False, params=params),
    ]
