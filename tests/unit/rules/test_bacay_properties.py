"""3 Cây Gà and Ba Cây Chương in self-play (``audit.simulate``'s bots, which also time
out, disconnect and leave): after every hand the settlement balances, nobody pays more than
their table chips, every card is the fair shuffle's, replay agrees with play; the Gà pot
account always equals the carried pot (each hand starts with the previous hand's carry and
moves the account by the change); the Chương bank was solvent for every bet it accepted.

``SOCAI_SELFPLAY_HANDS`` sets the hands per game (10,000 by default, the issue's figure).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from socai import accounts, cards, fairness
from socai.events.model import CardsDealt, HandEnded, HandStarted, WagerPlaced
from socai.rules import autoplay, registry
from tests.support import synthetic as sim

HANDS = int(os.environ.get("SOCAI_SELFPLAY_HANDS", "10000"))
# Short stacks and a fee: last payers, bank capacity, shortfalls and fees all come up.
SETUP = sim.GameSetup(seats_max=6, players_min=2, players_max=6, stake_gold=50, buy_in_gold=1_500, fee_bps=300)


@pytest.mark.parametrize("game", ["bacay_ga", "bacay_chuong"])
def test_self_play_keeps_every_invariant_after_every_hand(game: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sim.SETUPS, game, SETUP)  # type: ignore[index]
    module = registry.get(game)
    simulation = sim.simulate(HANDS, (game,), seed=5)
    reasons: set[str] = set()
    played = 0
    for table in simulation.tables:
        carry = 0
        for hand in table.hands:
            played += 1
            started = hand.events[0].body
            ended = hand.events[-1].body
            assert isinstance(started, HandStarted) and isinstance(ended, HandEnded)
            settlement = hand.settlement
            stacks = {info.seat: info.stack_gold for info in started.seats}
            entries = settlement.entries()
            assert sum(entries.values()) == 0
            for seat, net in settlement.nets.items():
                assert net >= -stacks[seat], f"{hand.hand_id}: seat {seat} lost more than it brought"
            pot_moved = entries.get(accounts.pot(table.table_id), 0)
            assert sum(settlement.nets.values()) + settlement.fees_gold() + pot_moved == 0
            # The Gà account equals the carried pot, hand after hand.
            assert started.pot_gold == carry
            assert pot_moved == settlement.pot_carry_gold - started.pot_gold
            assert settlement.pot_carry_gold >= 0
            carry = settlement.pot_carry_gold
            if game == "bacay_chuong":
                bets = sum(e.body.amount_gold for e in hand.events if isinstance(e.body, WagerPlaced))
                assert 2 * bets <= stacks[started.dealer_seat], f"{hand.hand_id}: the bank could not pay"
                assert settlement.shortfalls == ()
                assert carry == 0
            dealt = [d.card for e in hand.events if isinstance(e.body, CardsDealt) for d in e.body.cards]
            assert dealt == fairness.shuffle(bytes.fromhex(ended.deck_seed), cards.deck(game))[: len(dealt)]
            assert len(dealt) == 3 * len(stacks)
            if played <= 300:
                bodies: list[Any] = [e.body for e in hand.events]
                assert module.settle(autoplay.replay(module, bodies)) == settlement
            reasons |= set(settlement.by_reason())
    assert played == HANDS
    if game == "bacay_ga":
        assert {"hand_bet", "ga_contribution", "ga_pot", "disconnect_forfeit", "fee"} <= reasons
    else:
        assert {"banker_win", "banker_loss", "ten_double", "disconnect_forfeit", "fee"} <= reasons
