"""Liêng and Liêng Sảnh in self-play (``audit.simulate``'s bots, which also time out,
disconnect and leave): after every hand the settlement balances, nobody pays more than
their table chips, every card is the fair shuffle's, and replay agrees with play.

``SOCAI_SELFPLAY_HANDS`` sets the hands per game (10,000 by default, the issue's figure).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from socai import cards, fairness
from socai.events.model import BetAction, CardsDealt, HandEnded, HandStarted
from socai.rules import autoplay, registry
from tests.support import synthetic as sim

HANDS = int(os.environ.get("SOCAI_SELFPLAY_HANDS", "10000"))
# Short stacks and a fee, so that all-ins, side pots, shortfalls and fees all come up.
SETUP = sim.GameSetup(seats_max=6, players_min=2, players_max=6, stake_gold=50, buy_in_gold=2_000, fee_bps=300)


@pytest.mark.parametrize("game", ["lieng", "lieng_sanh"])
def test_self_play_keeps_every_invariant_after_every_hand(game: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sim.SETUPS, game, SETUP)  # type: ignore[index]
    module = registry.get(game)
    hands = sim.simulate(HANDS, (game,), seed=7).hands
    assert len(hands) == HANDS
    reasons: set[str] = set()
    for number, hand in enumerate(hands):
        started = hand.events[0].body
        ended = hand.events[-1].body
        assert isinstance(started, HandStarted) and isinstance(ended, HandEnded)
        settlement = hand.settlement
        stacks = {info.seat: info.stack_gold for info in started.seats}
        assert sum(settlement.entries().values()) == 0
        assert sum(settlement.nets.values()) + settlement.fees_gold() == 0
        for seat, net in settlement.nets.items():
            assert net >= -stacks[seat], f"{hand.hand_id}: seat {seat} lost more than it brought"
        put_in = {seat: started.stake_gold for seat in stacks}  # the ante
        for e in hand.events:
            if isinstance(e.body, BetAction):
                put_in[e.body.seat] += e.body.amount_gold
        assert all(put_in[seat] <= stacks[seat] for seat in stacks)
        dealt = [d.card for e in hand.events if isinstance(e.body, CardsDealt) for d in e.body.cards]
        assert dealt == fairness.shuffle(bytes.fromhex(ended.deck_seed), cards.deck(game))[: len(dealt)]
        if number < 300:
            bodies: list[Any] = [e.body for e in hand.events]
            assert module.settle(autoplay.replay(module, bodies)) == settlement
        if game == "lieng":
            assert "sap_bonus" not in settlement.by_reason()
        reasons |= set(settlement.by_reason())
    assert {"pot", "side_pot", "disconnect_forfeit", "fee"} <= reasons
    if game == "lieng_sanh":
        assert "sap_bonus" in reasons
