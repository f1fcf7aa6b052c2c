"""Issue 14: 10,000 self-played hands per shedding game, invariants after every hand.

Through ``tests.support.synthetic`` (whole tables of random bots that also leave and
disconnect, the events recorded as the table service writes them): every card accounted
for (in a hand or played), dealt in the seed's order, the hand ends, the settlement
balances and equals a replay of the events, nobody pays more than their table chips, and
each penalty's amount is the table's figure for its reason (RULES.md §9.4, §4.4), in lá.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest

from socai import cards, fairness
from socai.events.model import CardsDealt, HandStarted
from socai.rules import autoplay, registry
from tests.support.synthetic import simulate

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

HANDS = 10_000
# Lá per obligation, by reason: the settlement tables of RULES.md.
FIGURES: Mapping[str, Mapping[str, set[int]]] = {
    "tienlen": {
        "thoi_heo_den": {5},
        "thoi_heo_do": {10},
        "thoi_ba_doi_thong": {10},
        "thoi_tu_quy": {20},
        "thoi_bon_doi_thong": {30},
        "chat_heo_den": {5},
        "chat_heo_do": {10},
        "chat_doi_heo": {10, 15, 20},
        "chat_ba_doi_thong": {10},
        "chat_tu_quy": {20},
        "chat_bon_doi_thong": {30},
        "toi_trang": {26, 2},
        "rank_place": {1, 2, 3},
    },
    "samloc": {
        "thoi_heo_den": {5},
        "thoi_heo_do": {10},
        "treo": {15},
        "chat_heo": {20},
        "chat_heo_tu_quy_a": {40},
        "chat_doi_heo": {40},
        "chat_tu_quy": {20},
        "chat_hai_tu_quy": {40},
        "thang_trang": {20},
        "sam_success": {25},
        "den_bao": {25},
        "leave_penalty": {10},
    },
}


@pytest.mark.parametrize("game", ["tienlen", "samloc"])
def test_ten_thousand_self_played_hands_keep_every_invariant(game: str) -> None:
    module = registry.get(game)
    sim = simulate(HANDS, (game,), seed=2026)
    assert len(sim.hands) >= HANDS
    reasons: Counter[str] = Counter()
    for hand in sim.hands:
        bodies = [e.body for e in hand.events]
        started = bodies[0]
        assert isinstance(started, HandStarted)
        state = autoplay.replay(module, bodies)
        settlement = module.settle(state)
        assert settlement == hand.settlement, hand.hand_id
        assert sum(settlement.entries().values()) == 0
        stacks = {info.seat: info.stack_gold for info in started.seats}
        for seat, net in settlement.nets.items():
            assert net >= -stacks[seat], (hand.hand_id, seat)
        assert state.phase == "ended", hand.hand_id
        dealt = [d.card for b in bodies if isinstance(b, CardsDealt) for d in b.cards]
        seed = bytes.fromhex(bodies[-1].deck_seed)
        assert dealt == fairness.shuffle(seed, cards.deck(game))[: len(dealt)]
        held = [c for hand_cards in state.hands.values() for c in hand_cards]
        assert sorted(c.index for c in held + list(state.played_cards)) == sorted(c.index for c in dealt)
        players = len(state.order)
        for obligation in state.obligations:
            la, rest = divmod(obligation.amount_gold, started.stake_gold)
            assert rest == 0, (hand.hand_id, obligation)
            allowed = FIGURES[game].get(obligation.reason)
            if obligation.reason == "sam_failed":
                allowed = {(players - 1) * 25, 25}
            elif obligation.reason == "den_trang":
                allowed = {(players - 1) * 25}
            if allowed is not None:
                assert la in allowed, (hand.hand_id, obligation)
            reasons[obligation.reason] += 1
    # The bots reach the penalties: the chops and the thối heo at least.
    assert reasons["thoi_heo_den"] + reasons["thoi_heo_do"] > 0
    assert any(reason.startswith("chat_") for reason in reasons)
