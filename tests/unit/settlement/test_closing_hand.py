"""A table's closing hand (CloseTable): HandStarted marked ``closing``, then HandEnded.

Settlement and the auditor settle it through ``socai.settle.replay`` like any hand, with the
game's closing rule (3 Cây Gà: ``closing_pot_settlement``): the Gà carried in goes back to
the seats the HandStarted names, odd chips in seat order.
"""

from __future__ import annotations

import dataclasses

import pytest

from socai import accounts, cards, fairness
from socai.events import codec
from socai.events.model import CardsDealt, DealtCard, Event, HandEnded, HandStarted, SeatInfo
from socai.rules.three_card import bacay_ga
from socai.settle import replay
from socai.settle.replay import ILLEGAL_EVENT, ReplayError, closing_settlement, has_closing_rule

SEED = bytes(range(32))
TABLE = "t1"
HAND = "t1-h4"


def closing_started(game: str = "bacay_ga", pot_gold: int = 303, seats: tuple[int, ...] = (4, 1)) -> HandStarted:
    return HandStarted(
        table_id=TABLE,
        hand_id=HAND,
        game=game,
        hand_number=4,
        stake_gold=101,
        fee_bps=0,
        seats_max=6,
        seats=tuple(SeatInfo(s, f"p{s}", 50 + s) for s in seats),
        dealer_seat=seats[0],
        deck_commitment=fairness.commitment(SEED),
        pot_gold=pot_gold,
        closing=True,
    )


def events(started: HandStarted, *middle: object) -> list[Event]:
    bodies = [started, *middle, HandEnded(SEED.hex())]
    return [Event(TABLE, HAND, n, started.game, codec.now(), b) for n, b in enumerate(bodies, start=1)]  # type: ignore[arg-type]


def test_a_closing_hand_returns_the_carried_ga_to_the_seats_named_odd_chip_to_the_lowest_seat() -> None:
    result = replay.replay(events(closing_started()))
    s = result.settlement
    assert s.nets == {1: 152, 4: 151}
    assert s.entries() == {
        accounts.pot(TABLE): -303,
        accounts.escrow(TABLE, "p1"): 152,
        accounts.escrow(TABLE, "p4"): 151,
    }
    assert set(s.by_reason()) == {bacay_ga.GA_POT_RETURNED}
    assert s.pot_carry_gold == 0
    assert result.state is None and result.cards_verified == 0


def test_the_table_and_the_replay_settle_a_closing_hand_the_same_way() -> None:
    started = closing_started(pot_gold=300, seats=(0, 1, 2))
    assert closing_settlement(started) == replay.replay_hand(events(started))
    assert closing_settlement(started) == bacay_ga.closing_pot_settlement(TABLE, HAND, 300, {0: "p0", 1: "p1", 2: "p2"})


def test_a_closing_hand_with_any_other_event_is_refused() -> None:
    extra = CardsDealt((DealtCard(1, fairness.shuffle(SEED, cards.deck("bacay_ga"))[0], False),))
    with pytest.raises(ReplayError) as caught:
        replay.replay(events(closing_started(), extra))
    assert caught.value.code == ILLEGAL_EVENT
    assert "in a closing hand" in caught.value.message


def test_a_closing_hand_of_a_game_without_a_closing_rule_is_refused() -> None:
    assert has_closing_rule("bacay_ga") and not has_closing_rule("holdem")
    with pytest.raises(ReplayError) as caught:
        replay.replay(events(closing_started(game="holdem")))
    assert caught.value.code == ILLEGAL_EVENT
    assert "NO_CLOSING_RULE" in caught.value.message


def test_a_closing_hand_with_a_forged_seed_is_refused() -> None:
    started = closing_started()
    forged = [*events(started)[:1], Event(TABLE, HAND, 2, "bacay_ga", codec.now(), HandEnded(bytes(32).hex()))]
    with pytest.raises(ReplayError) as caught:
        replay.replay(forged)
    assert caught.value.code == replay.BAD_SEED


def test_the_closing_mark_survives_protobuf_and_json_and_ordinary_hands_stay_ordinary() -> None:
    event = events(closing_started())[0]
    assert codec.decode(codec.encode(event)).body.closing is True  # type: ignore[union-attr]
    assert codec.from_json(codec.to_json(event)).body.closing is True  # type: ignore[union-attr]
    ordinary = dataclasses.replace(event, body=dataclasses.replace(closing_started(), closing=False))
    assert codec.decode(codec.encode(ordinary)).body.closing is False  # type: ignore[union-attr]
    assert len(codec.encode(ordinary)) < len(codec.encode(event))  # false is not written: old hands' bytes unchanged


def test_an_open_closing_hand_is_sound_alone_and_refused_with_anything_after_its_start() -> None:
    """``socai audit --allow-open`` on a table stopped inside its close: the closing
    HandStarted alone is an open hand; any event after it is a finding, as in ``replay``."""
    alone = events(closing_started())[:1]
    opened = replay.replay_open(alone)
    assert opened.started.closing and opened.state is None
    extra = CardsDealt((DealtCard(1, fairness.shuffle(SEED, cards.deck("bacay_ga"))[0], False),))
    with pytest.raises(ReplayError) as caught:
        replay.replay_open(events(closing_started(), extra)[:2])
    assert caught.value.code == ILLEGAL_EVENT
    assert "in a closing hand" in caught.value.message
