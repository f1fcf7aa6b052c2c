"""The card cores of the newer games, on fixed random inputs (seeded):

- ``rules.lieng.eval3`` / ``rules.bacay_ga.eval3``: three-card hand comparisons per second
  (two hands valued and compared; the lookup tables are built by ``warm`` first);
- ``rules.tienlen.beats``: legal-move generations per second for a 13-card hand against a
  lead (``shedding.legal_plays``, which bots and ``legal_actions`` use);
- ``rules.phom.meld_search``: best arrangements per second of a random 10-card hand with no
  taken card (``phom_melds.best_arrangement``), each searched anew (the kept searches
  cleared each round).
"""

from __future__ import annotations

import random

from socai.cards import deck
from socai.rules.climbing import shedding
from socai.rules.rummy import phom_melds
from socai.rules.three_card import threecard
from tests.bench.harness import BenchContext, Result, rate


def _hands(game: str, size: int, count: int, seed: int) -> list[list]:  # type: ignore[type-arg]
    rng = random.Random(seed)
    cards = deck(game)
    return [rng.sample(cards, size) for _ in range(count)]


def run(ctx: BenchContext) -> list[Result]:
    n = 2_000 if ctx.quick else 50_000
    rounds = 2 if ctx.quick else 5
    threecard.warm()
    results = []
    for game, value in (("lieng", threecard.lieng_value), ("bacay_ga", threecard.bacay_value)):
        pairs = _hands(game, 6, n, 3)

        def compare(pairs: list = pairs, value=value) -> int:  # type: ignore[no-untyped-def,type-arg]
            for cards in pairs:
                _ = value(cards[:3]) < value(cards[3:])
            return len(pairs)

        results.append(Result(f"rules.{game}.eval3", rate(compare, rounds), "comparisons/s", params={"pairs": n}))

    hands = _hands("tienlen", 13, max(200, n // 50), 5)
    leads = [shedding.combo(h[:1], shedding.TIENLEN) for h in _hands("tienlen", 1, len(hands), 6)]

    def generate() -> int:
        for hand, lead in zip(hands, leads, strict=True):
            shedding.legal_plays([c for c in hand if lead is None or c not in lead.cards], lead, shedding.TIENLEN)
        return len(hands)

    results.append(
        Result(
            "rules.tienlen.beats",
            rate(generate, rounds),
            "generations/s",
            params={"hands": len(hands), "lead": "a random single"},
        )
    )

    phom_hands = _hands("phom", 10, max(200, n // 20), 9)

    def search() -> int:
        # Each hand's search anew: best_arrangement keeps the searches of recent hands.
        phom_melds._search_of.cache_clear()
        for hand in phom_hands:
            phom_melds.best_arrangement(hand)
        return len(phom_hands)

    results.append(Result("rules.phom.meld_search", rate(search, rounds), "hands/s", params={"hands": len(phom_hands)}))
    return results
