"""Phỏm / Tá Lả hands on the game kit (RULES.md §6, PH-1 … PH-19): scripted hands with the
cards written out, one test per rule and per row of the §6.4 settlement table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from socai import cards, fairness
from socai.cards import Card, parse_cards
from socai.errors import RuleViolation
from socai.events.model import (
    HIDDEN_CARD,
    Body,
    CardsDealt,
    CardSent,
    CardsPlayed,
    CardTaken,
    DealtCard,
    Declared,
    HandEnded,
    HandStarted,
    Meld,
    MeldsLaid,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
)
from socai.rules import registry
from socai.rules.base import DealSlot, choose_dealer
from socai.rules.rummy import phom
from tests.support.snapshot import snapshot

if TYPE_CHECKING:
    from socai.rules.base import GameRules

    # The kit's Protocol, checked by mypy (registry.py would list this line for the lead).
    _PHOM: GameRules = phom

STAKE = 100
SEED = bytes(range(32))


def c(text: str) -> Card:
    return parse_cards(text)[0]


def start(
    seats: Sequence[int],
    *,
    first: int | None = None,
    stacks: int = 10_000,
    seats_max: int = 4,
    version: int = phom.RULES_VERSION,
    **options: str,
) -> phom.State:
    infos = tuple(SeatInfo(s, f"p{s}", stacks) for s in seats)
    started = HandStarted(
        "t1",
        "h1",
        "phom",
        1,
        STAKE,
        0,
        seats_max,
        infos,
        seats[0] if first is None else first,
        fairness.commitment(SEED),
        options=dict(options),
        rules_version=version,
    )
    return phom.initial_state(started)


def deal(state: phom.State, hands: dict[int, str]) -> phom.State:
    """The initial deal with these hands (10 cards to the first player, PH-1)."""
    held = {seat: parse_cards(text) for seat, text in hands.items()}
    slots = phom.pending(state).deal
    given = {seat: 0 for seat in held}
    out = []
    for slot in slots:
        out.append(DealtCard(slot.seat, held[slot.seat][given[slot.seat]], False))
        given[slot.seat] += 1
    assert all(given[s] == len(held[s]) for s in held)
    return phom.apply(state, CardsDealt(tuple(out)))


def draw(state: phom.State, seat: int, card: str) -> phom.State:
    state = phom.apply(state, Declared(seat, "draw"))
    assert phom.pending(state).deal == (DealSlot(seat, False),)
    return phom.apply(state, CardsDealt((DealtCard(seat, c(card), False),)))


def throw(state: phom.State, seat: int, card: str) -> phom.State:
    return phom.apply(state, CardsPlayed(seat, (c(card),)))


def take(state: phom.State, seat: int) -> phom.State:
    last = state.discards[-1]
    return phom.apply(state, CardTaken(seat, last.seat, last.card))


def lay(state: phom.State, seat: int, *melds: str) -> phom.State:
    return phom.apply(state, MeldsLaid(seat, tuple(Meld(tuple(parse_cards(m))) for m in melds)))


def end(state: phom.State) -> phom.State:
    assert phom.pending(state).finished
    return phom.apply(state, HandEnded(SEED.hex()))


def flows(state: phom.State) -> list[tuple[int, int, int, str]]:
    """(payer seat, payee seat, gold, reason) of every transfer between seats."""
    settlement = phom.settle(end(state))
    seat_of = {acct: seat for seat, acct in settlement.seat_accounts.items()}
    return [(seat_of[t.from_account], seat_of[t.to_account], t.amount_gold, t.reason) for t in settlement.transfers]


def rejected(state: phom.State, body: Body, code: str) -> None:
    """``body`` raises RuleViolation(code) and changes nothing."""
    before = snapshot(state)
    with pytest.raises(RuleViolation) as err:
        phom.apply(state, body)
    assert err.value.code == code
    assert snapshot(state) == before


def auto(state: phom.State, stock: Sequence[Card]) -> phom.State:
    """Play on with every turn left to the timer (GEN-5), drawing ``stock`` in order."""
    left = list(stock)
    while not phom.pending(state).finished:
        pending = phom.pending(state)
        if pending.deal:
            (slot,) = pending.deal
            state = phom.apply(state, CardsDealt((DealtCard(slot.seat, left.pop(0), False),)))
        else:
            state = phom.apply(state, TimerExpired(pending.to_act[0], "turn"))
    return state


# --- the deal, turns and order (§6.1, PH-1, GEN-2) ----------------------------------------


def test_ph1_the_first_player_gets_ten_cards_and_the_others_nine_one_at_a_time() -> None:
    state = start([0, 1, 2, 3], first=2)
    slots = phom.pending(state).deal
    assert len(slots) == 37 and all(not s.face_up for s in slots)
    assert [s.seat for s in slots[:4]] == [2, 1, 0, 3]  # counterclockwise from the first (GEN-2)
    assert slots[-1].seat == 2
    deck = fairness.shuffle(SEED, cards.deck("phom"))
    state = phom.apply(state, CardsDealt(tuple(DealtCard(s.seat, deck[i], False) for i, s in enumerate(slots))))
    assert {s: len(h) for s, h in state.hands.items()} == {2: 10, 1: 9, 0: 9, 3: 9}
    assert state.stock_left == 15  # 52 - 37: exactly the draws four rounds need (PH-8)
    assert phom.pending(state).to_act == (2,)
    assert [type(b) for b in phom.candidate_actions(state, 2)] == [CardsPlayed] * len(phom.candidate_actions(state, 2))


def test_the_first_players_discard_passes_the_turn_counterclockwise() -> None:
    state = deal(
        start([0, 1, 2], seats_max=3),
        {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 2: "2c 5c 8c Js Ks 3d 6d 9d Qd", 1: "4s 7s Ts Qc 4h 7h Th Kh Ad"},
    )
    state = throw(state, 0, "Kd")
    assert phom.pending(state).to_act == (2,)  # seats 0, 2, 1 with three seats of three
    assert phom.candidate_actions(state, 2) == [Declared(2, "draw")]  # Kd makes no Phỏm with seat 2's cards


def test_ph9_a_player_who_does_not_take_draws_one_card_face_down_from_the_stock() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "4s 7s Ts Qc 4h 7h Th Kh Ad"})
    state = throw(state, 0, "Kd")
    state = phom.apply(state, Declared(1, "draw"))
    assert phom.pending(state).deal == (DealSlot(1, False),)
    drawn = CardsDealt((DealtCard(1, c("2d"), False),))
    # Only the drawer sees the card (the kit's visible hides face-down cards of others).
    seen = phom.visible(drawn, 0, state)
    assert isinstance(seen, CardsDealt) and seen.cards[0].card == HIDDEN_CARD
    assert phom.visible(drawn, 1, state) == drawn
    state = phom.apply(state, drawn)
    assert c("2d") in state.hands[1] and state.stock_left == 52 - 19 - 1 and 1 in state.drew


def test_ph8_four_kept_discards_each_end_the_hand_and_every_card_is_accounted_for() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "4s 7s Ts Qc 4h 7h Th Kh Ad"})
    state = auto(state, parse_cards("2d 3c 5d 6c 8d 9c Jh"))
    assert {s: len(p) for s, p in state.piles.items()} == {0: 4, 1: 4}
    assert phom.hand_cards(state) == 52
    assert state.stock_left == 33 - 7  # 4n - 1 draws (PH-8)


def test_ph8_tai_a_player_whose_discard_was_taken_plays_another_turn() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "Ks Kc 7s Ts Qc 4h 7h Th Ad"})
    state = throw(state, 0, "Kd")
    state = take(state, 1)  # Ks Kc Kd
    assert state.piles[0] == ()
    state = throw(state, 1, "Qc")
    # Seat 0's pile is empty again: it still needs four kept discards, so it plays five turns.
    assert phom.pending(state).to_act == (0,)
    state = auto(state, parse_cards("2d 3c 5d 6c 8d 9c Jh 2h"))
    assert len(state.piles[0]) == 4 and len(state.piles[1]) == 4
    assert sum(1 for r in state.discards if r.seat == 0) == 5
    assert phom.hand_cards(state) == 52


# --- taking (ăn) and the illegal moves ---------------------------------------------------


def test_a_card_can_be_taken_only_when_it_makes_a_phom_with_the_takers_own_cards() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "4s 7s Ts Qc 4h 7h Th Kh Ad"})
    state = throw(state, 0, "Jc")
    rejected(state, CardTaken(1, 0, c("Jc")), "BAD_MELD")
    assert phom.candidate_actions(state, 1) == [Declared(1, "draw")]
    state = throw(draw(state, 1, "2d"), 1, "Qc")
    state = throw(draw(state, 0, "7c"), 0, "7c")
    assert phom.candidate_actions(state, 1) == [CardTaken(1, 0, c("7c")), Declared(1, "draw")]
    state = take(state, 1)  # 7s 7h 7c
    assert state.taken[1] == {c("7c")} and state.discards[-1].taken_by == 1


def test_only_the_previous_discard_can_be_taken() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "Ks Kc 7s Ts Qc 4h 7h Th Ad"})
    state = throw(state, 0, "2s")
    rejected(state, CardTaken(1, 0, c("Kd")), "ILLEGAL_MOVE")
    state = draw(state, 1, "2d")
    state = throw(state, 1, "Qc")
    state = draw(state, 0, "3c")
    state = throw(state, 0, "Kd")
    rejected(state, CardTaken(1, 0, c("2s")), "ILLEGAL_MOVE")  # an older discard
    assert take(state, 1).hands[1][-1] == c("Kd")


def test_ph13_a_taken_card_cannot_be_discarded() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "Ks Kc 7s Ts Qc 4h 7h Th Ad"})
    state = take(throw(state, 0, "Kd"), 1)
    rejected(state, CardsPlayed(1, (c("Kd"),)), "ILLEGAL_MOVE")
    rejected(state, CardsPlayed(1, (c("Ks"),)), "ILLEGAL_MOVE")  # Kd would be left without a Phỏm
    rejected(state, CardsPlayed(1, (c("2s"),)), "NOT_HOLDING")
    assert c("Kd") not in [card for b in phom.candidate_actions(state, 1) for card in getattr(b, "cards", ())]


def test_drawing_twice_is_refused() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "4s 7s Ts Qc 4h 7h Th Kh Ad"})
    state = throw(state, 0, "Kd")
    state = phom.apply(state, Declared(1, "draw"))
    rejected(state, Declared(1, "draw"), "ILLEGAL_MOVE")
    state = phom.apply(state, CardsDealt((DealtCard(1, c("2d"), False),)))
    rejected(state, Declared(1, "draw"), "ILLEGAL_MOVE")
    rejected(state, CardsDealt((DealtCard(1, c("3d"), False),)), "WRONG_DEAL")


def test_acting_out_of_turn_or_with_a_card_twice_is_refused() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "4s 7s Ts Qc 4h 7h Th Kh Ad"})
    rejected(state, Declared(1, "draw"), "NOT_YOUR_TURN")
    rejected(state, CardsPlayed(0, tuple(parse_cards("2s 5s"))), "ILLEGAL_MOVE")
    rejected(state, Declared(0, "u"), "BAD_DECLARATION")
    rejected(state, Declared(0, "sam"), "BAD_DECLARATION")
    state = phom.apply(throw(state, 0, "Kd"), Declared(1, "draw"))
    rejected(state, CardsDealt((DealtCard(1, c("Kh"), False),)), "DUPLICATE_CARD")
    rejected(state, TimerExpired(1, "betting"), "WRONG_TIMER")


# --- laying down (hạ) and sending (gửi) on the last turn ---------------------------------


def _to_last_turn() -> phom.State:
    """Two seats three rounds in; seat 0 holds 2h 3h 4h and 9s 9c 9d, seat 1 holds 5c 6c 7c."""
    state = deal(start([0, 1]), {0: "2h 3h 4h 9s 9c 9d Jc Kd Qs As", 1: "5c 6c 7c Ts Qc 4s 7h Th Kh"})
    for got0, out0, got1, out1 in (
        (None, "Kd", "2d", "Kh"),
        ("3c", "Qs", "8d", "Qc"),
        ("Jd", "Jd", "6s", "Th"),
    ):
        if got0 is not None:
            state = draw(state, 0, got0)
        state = throw(state, 0, out0)
        state = draw(state, 1, got1)
        state = throw(state, 1, out1)
    return state


def test_on_the_last_turn_a_player_lays_down_sends_then_discards() -> None:
    state = _to_last_turn()
    state = draw(state, 0, "5d")
    assert phom.legal_actions(state, 0)[-1].kind == "lay"
    rejected(state, CardsPlayed(0, (c("Jc"),)), "ILLEGAL_MOVE")  # lay first
    rejected(state, MeldsLaid(0, (Meld(tuple(parse_cards("2h 3h 9s"))),)), "BAD_MELD")
    state = lay(state, 0, "2h 3h 4h", "9s 9c 9d")
    assert state.lay_order == (0,) and state.laid[0] == (tuple(parse_cards("2h 3h 4h")), tuple(parse_cards("9s 9c 9d")))
    state = throw(state, 0, "Jc")
    state = draw(state, 1, "5h")  # 5h fits seat 0's 2h 3h 4h
    state = lay(state, 1, "5c 6c 7c")
    rejected(state, CardSent(1, 0, 1, c("5h")), "BAD_MELD")  # not the 9s
    rejected(state, CardSent(1, 0, 0, c("Ts")), "BAD_MELD")
    rejected(state, CardSent(1, 1, 0, c("5h")), "ILLEGAL_MOVE")  # one's own meld
    state = phom.apply(state, CardSent(1, 0, 0, c("5h")))
    assert state.laid[0][0] == tuple(parse_cards("2h 3h 4h 5h"))
    assert c("5h") not in state.hands[1]
    state = throw(state, 1, "Ts")
    assert phom.pending(state).finished
    assert phom.hand_cards(state) == 52


def test_ph13_every_taken_card_must_be_laid() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "Ks Kc 7s Ts Qc 4h 7h Th Ad"})
    state = take(throw(state, 0, "Kd"), 1)
    state = throw(state, 1, "Qc")
    for got0, out0, got1, out1 in (("3c", "Qh", "2d", "2d"), ("3d", "Jc", "5d", "5d")):
        state = draw(state, 0, got0)
        state = throw(state, 0, out0)
        state = draw(state, 1, got1)
        state = throw(state, 1, out1)
    state = throw(draw(state, 0, "6c"), 0, "9h")
    state = draw(state, 1, "8d")  # seat 1's fourth turn: its last
    rejected(state, MeldsLaid(1, ()), "BAD_MELD")
    state = lay(state, 1, "Ks Kc Kd")
    assert state.taken[1] == frozenset()


# --- settlement (§6.4) ---------------------------------------------------------------------


def test_s64_the_first_taken_card_costs_1_and_the_second_2_stakes() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "Ks Kc 7s Ts Qd 4h 7h Th Ad"})
    state = take(throw(state, 0, "Kd"), 1)
    state = throw(state, 1, "Qd")
    state = take(throw(draw(state, 0, "7c"), 0, "7c"), 1)  # 7s 7h 7c
    assert [(o.payer, o.payee, o.amount_gold, o.reason) for o in state.obligations] == [
        (0, 1, 100, "an_cay"),
        (0, 1, 200, "an_cay_2"),
    ]


def test_ph19_taking_a_players_fourth_discard_is_an_chot_for_5_stakes_and_u_den_makes_the_taker_pay_all() -> None:
    # Seats 0, 2, 1 (counterclockwise from 0 at a table of three). Seat 2 takes seat 0's
    # last discard (ăn chốt); then seat 1 is Ù: seat 2 pays for the whole table (Ù đền).
    state = deal(
        start([0, 1, 2], seats_max=3),
        {
            0: "7h 4s 8d Qh 2d 5h Tc Ks 6s 9c",
            2: "7c 7d Kh Qs 9h 5d 2c Jc 3s",
            1: "Ah 2h 3h 4c 5c 6c 9s Ts Kd",
        },
    )
    state = throw(state, 0, "4s")
    state = throw(draw(state, 2, "Ac"), 2, "Ac")
    state = throw(draw(state, 1, "Ad"), 1, "Ad")
    for got0, got2, got1 in (("8c", "Qc", "Qd"), ("Th", "4d", "2s")):
        state = throw(draw(state, 0, got0), 0, got0)
        state = throw(draw(state, 2, got2), 2, got2)
        state = throw(draw(state, 1, got1), 1, got1)
    state = throw(lay(draw(state, 0, "Kc"), 0), 0, "7h")  # seat 0's last turn: no Phỏm to lay
    assert state.discards[-1].final
    state = take(state, 2)  # ăn chốt: seat 2's fourth turn
    state = lay(state, 2, "7c 7d 7h")
    state = throw(state, 2, "Kh")
    state = draw(state, 1, "Js")
    assert phom.candidate_actions(state, 1) == [Declared(1, "u")]
    state = phom.apply(state, Declared(1, "u"))
    assert state.u == phom_u(1, tron=False)
    assert flows(state) == [(0, 2, 500, "an_chot"), (2, 1, 1000, "u_den")]


def phom_u(seat: int, *, tron: bool, kings: bool = False) -> object:
    from socai.rules.rummy.phom_melds import UWin

    return UWin(seat, tron, kings)


def test_ph18_the_chot_taker_who_is_u_pays_nothing_for_others() -> None:
    state = deal(start([0, 1]), {0: "7h 4s 8d Qh 2d 5h Tc Ks 6s 9c", 1: "7c 7d Ah 2h 3h 4c 5c 6c Kd"})
    state = throw(state, 0, "4s")
    state = throw(draw(state, 1, "Ad"), 1, "Ad")
    for got0, got1 in (("8c", "Qd"), ("Th", "2s")):
        state = throw(draw(state, 0, got0), 0, got0)
        state = throw(draw(state, 1, got1), 1, got1)
    state = throw(lay(draw(state, 0, "Kc"), 0), 0, "7h")
    state = take(state, 1)
    state = phom.apply(state, Declared(1, "u"))
    assert flows(state) == [(0, 1, 500, "an_chot"), (0, 1, 500, "u_thuong")]


def test_ph4_u_tron_all_ten_cards_in_phom_takes_10_stakes_from_each() -> None:
    state = deal(
        start([0, 1, 2], seats_max=3),
        {0: "2h 3h 4h 5h 9s 9c 9d Qs Qc Qd", 2: "2c 5c 8c Jd Ks 3d 6d 8d Kd", 1: "4s 7s Ts Jc 4c 7h Th Kh Ad"},
    )
    state = phom.apply(state, Declared(0, "u"))
    assert flows(state) == [(2, 0, 1000, "u_tron"), (1, 0, 1000, "u_tron")]


def test_u_thuong_nine_cards_in_phom_and_one_to_throw_takes_5_stakes_from_each() -> None:
    state = deal(start([0, 1]), {0: "2h 3h 4h 5c 6c 7c 9s 9c 9d Kd", 1: "4s 7s Ts Jc 4c 7h Th Kh Ad"})
    state = phom.apply(state, Declared(0, "u"))
    assert flows(state) == [(1, 0, 500, "u_thuong")]


def test_ph5_u_k_pays_as_u_thuong_and_ph17_u_tron_with_kings_pays_10() -> None:
    kings = deal(start([0, 1]), {0: "Ks Kc Kd 2h 3h 4h 9s 9c 9d Qh", 1: "4s 7s Ts Jc 4c 7h Th Kh Ad"})
    kings = phom.apply(kings, Declared(0, "u"))
    assert kings.u == phom_u(0, tron=False, kings=True)
    assert flows(kings) == [(1, 0, 500, "u_thuong")]
    both = deal(start([0, 1]), {0: "Ks Kc Kd 2h 3h 4h 5h 9s 9c 9d", 1: "4s 7s Ts Jc 4c 7h Th Kh Ad"})
    both = phom.apply(both, Declared(0, "u"))
    assert both.u == phom_u(0, tron=True, kings=True)
    assert flows(both) == [(1, 0, 1000, "u_tron")]


def test_ph12_u_ends_the_hand_at_once_and_take_payments_stand() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "Ks Kc 2c 3c 4c 9s 9d 9c Qd"})
    state = take(throw(state, 0, "Kd"), 1)  # Ks Kc Kd: every card but Qd in Phỏm
    state = phom.apply(state, Declared(1, "u"))
    assert phom.pending(state).finished
    assert flows(state) == [(0, 1, 100, "an_cay"), (0, 1, 500, "u_thuong")]


def test_s64_two_players_last_pays_1_stake_and_mom_pays_4() -> None:
    placed = auto(
        deal(start([0, 1]), {0: "2h 3h 4h 9s 9c 9d Jc Kd Qs As", 1: "5c 6c 7c Ts Qc 4s 7h Th Kh"}),
        parse_cards("2d 3c 8d Jd 6s 5d 8c"),
    )
    assert all(placed.laid[s] for s in (0, 1))
    assert flows(placed) == [(1, 0, 100, "ve_chot")]  # seat 0 keeps fewer points
    mom = auto(
        deal(start([0, 1]), {0: "2h 3h 4h 9s 9c 9d Jc Kd Qs As", 1: "5c 8c Jh Ts Qc 4s 7h 2d Kh"}),
        parse_cards("Td 3c Ad Jd 6s 5d Qd"),
    )
    assert mom.laid[1] == ()
    assert flows(mom) == [(1, 0, 400, "mom")]


@pytest.mark.parametrize(("players", "amounts"), [(2, [100]), (3, [100, 200]), (4, [100, 200, 300])])
def test_s64_placement_pays_the_first_by_table_size(players: int, amounts: list[int]) -> None:
    """§6.4 rows: 4 players 1/2/3 × S, 3 players 1/2 × S, 2 players 1 × S, to the first
    (PH-15), ranked by junk points (PH-2) and then by who laid down first (PH-3)."""
    seen = 0
    for n in range(40):
        seed = bytes([n]) * 32
        state = start(list(range(players)))
        deck = fairness.shuffle(seed, cards.deck("phom"))
        slots = phom.pending(state).deal
        state = phom.apply(state, CardsDealt(tuple(DealtCard(s.seat, deck[i], False) for i, s in enumerate(slots))))
        # Timers never take and never Ù here: a plain hand, ranked at the end.
        state = auto(state, deck[len(slots) :])
        if state.u is not None or any(not state.laid[s] for s in state.order):
            continue
        ranked = sorted(state.order, key=lambda s: (sum(phom_points(state.hands[s])), state.lay_order.index(s)))
        got = [(payer, payee, gold) for payer, payee, gold, reason in flows(state) if reason.startswith("ve_")]
        want = [(seat, ranked[0], gold) for seat, gold in zip(ranked[1:], amounts, strict=True)]
        assert sorted(got) == sorted(want)
        seen += 1
    assert seen > 0


def phom_points(held: Sequence[Card]) -> list[int]:
    from socai.rules.rummy.phom_melds import card_points

    return [card_points(x) for x in held]


def test_ph3_equal_points_go_to_who_laid_down_first() -> None:
    state = auto(
        deal(start([0, 1]), {0: "2h 3h 4h 9s 9c 9d Jc Kd Qs 5s", 1: "5c 6c 7c Ts Qc 4s 7h Th Kh"}),
        parse_cards("2d 3c 8d Jd 6s 5d 8c"),
    )
    points = {s: sum(phom_points(state.hands[s])) for s in (0, 1)}
    winner = phom.winner(state)
    assert winner == min((0, 1), key=lambda s: (points[s], state.lay_order.index(s)))


# --- disconnect and leaving (§6.5, PH-14) --------------------------------------------------


def test_s65_a_disconnected_player_pays_5_stakes_to_each_remaining_player_and_the_rest_play_on() -> None:
    state = deal(
        start([0, 1, 2], seats_max=3),
        {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh 3s", 2: "2c 5c 8c Js Ks 3d 6d 9d Qd", 1: "4s 7s Ts Qc 4h 7h Th Kh 7d"},
    )
    state = throw(state, 0, "Kd")
    state = phom.apply(state, PlayerDisconnected(2))
    assert phom.pending(state).to_act == (1,)  # seat 2's turn passes on
    state = phom.apply(state, PlayerReconnected(2))
    assert 2 in state.out
    state = auto(state, parse_cards("2d 3c 5d 6c 8d 9c Jh Js"))
    assert phom.hand_cards(state) == 52
    got = flows(state)
    assert [f for f in got if f[3] == "disconnect_forfeit"] == [
        (2, 0, 500, "disconnect_forfeit"),
        (2, 1, 500, "disconnect_forfeit"),
    ]
    assert [f[2:] for f in got if f[3] != "disconnect_forfeit"] == [(100, "ve_chot")]  # ranked for two players


def test_gen6_leaving_is_the_same_loss_and_the_last_player_left_ends_play() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "4s 7s Ts Qc 4h 7h Th Kh Ad"})
    state = phom.apply(state, PlayerLeft(0))
    assert phom.pending(state).finished and phom.winner(state) == 1
    assert flows(state) == [(0, 1, 500, "disconnect_forfeit")]


def test_without_disconnect_forfeits_a_disconnected_player_is_played_by_the_timer() -> None:
    state = deal(
        start([0, 1], disconnect_forfeits="false"),
        {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "4s 7s Ts Qc 4h 7h Th Kh Ad"},
    )
    state = phom.apply(state, PlayerDisconnected(1))
    assert state.out == frozenset() and state.disconnected == {1}


def test_gen4_nobody_pays_more_than_their_chips_at_the_table() -> None:
    state = deal(
        start([0, 1, 2], seats_max=3, stacks=700),
        {0: "2h 3h 4h 5h 9s 9c 9d Qs Qc Qd", 2: "2c 5c 8c Jd Ks 3d 6d 8d Kd", 1: "4s 7s Ts Jc 4c 7h Th Kh Ad"},
    )
    settlement = phom.settle(end(phom.apply(state, Declared(0, "u"))))
    assert settlement.nets == {0: 1400, 1: -700, 2: -700}
    assert [(f.seat, f.owed_gold, f.paid_gold) for f in settlement.shortfalls] == [(2, 1000, 700), (1, 1000, 700)]


# --- options, Ù khan, next hand -------------------------------------------------------------


def test_ph16_u_khan_is_off_by_default_and_pays_5_or_10_stakes_when_on() -> None:
    khan = {0: "As 4s 7s Tc Kc 2h 5h 8h Jd 3d", 1: "2s 5c 8c Jc Ks 3h 6h 9h Qh"}
    # seat 0: A♠ 4♠ 7♠ 10♣ K♣ 2♥ 5♥ 8♥ J♦ 3♦: no two of a rank, no two of a suit within 2.
    state = deal(start([0, 1]), khan)
    rejected(state, Declared(0, "u_khan"), "BAD_DECLARATION")
    state = deal(start([0, 1], u_khan="true"), khan)
    assert phom.candidate_actions(state, 0) == [Declared(0, "u_khan")]
    assert flows(phom.apply(state, Declared(0, "u_khan"))) == [(1, 0, 1000, "u_khan")]


def test_ph1_the_next_hand_starts_with_the_winner_and_the_first_with_the_owner() -> None:
    assert choose_dealer(phom, None, None, (0, 1, 2), 4, 2) == 2
    state = deal(start([0, 1]), {0: "2h 3h 4h 5c 6c 7c 9s 9c 9d Kd", 1: "4s 7s Ts Jc 4c 7h Th Kh Ad"})
    won = phom.apply(throw(state, 0, "Kd"), PlayerLeft(0))
    assert choose_dealer(phom, won, 0, (0, 1), 4, 0) == 1


def test_the_registry_offers_phom_with_the_whole_contract() -> None:
    assert "phom" in registry.available()
    assert set(phom.REASONS) >= {"an_cay", "an_cay_2", "an_chot", "u_tron", "u_thuong", "u_den", "mom"}
    assert all(r.rule for r in phom.REASONS.values())


def test_sending_finds_the_order_that_sends_the_most_points() -> None:
    from socai.rules.rummy.phom_melds import Send, sends

    # 2♣ fits the set of 2s at once, but sent there it leaves A♣ out of the club run:
    # 3♣ then 2♣ then A♣ onto 4♣ 5♣ 6♣ sends more (found in phom_melds' property test).
    laid = [parse_cards("2s 2d 2h"), parse_cards("4c 5c 6c")]
    assert sends(parse_cards("2c 3c Ac 3s 4d"), laid) == (Send(c("3c"), 1), Send(c("2c"), 1), Send(c("Ac"), 1))


def test_ph7_a_player_whose_three_discards_in_a_row_were_taken_pays_the_u_den() -> None:
    state = deal(start([0, 1]), {0: "5h Th Jc 2s 4c 7d 9s Kh Ah 3d", 1: "5c 5d 8h 9h Js Jd Kc Qd 2d"})
    state = throw(take(throw(state, 0, "5h"), 1), 1, "Kc")  # 5c 5d 5h
    state = throw(take(throw(draw(state, 0, "6s"), 0, "Th"), 1), 1, "Qd")  # 8h 9h 10h
    state = take(throw(draw(state, 0, "7s"), 0, "Jc"), 1)  # Js Jd Jc: all but 2d in Phỏm
    state = phom.apply(state, Declared(1, "u"))
    assert flows(state) == [
        (0, 1, 100, "an_cay"),
        (0, 1, 200, "an_cay_2"),
        (0, 1, 300, "an_cay_n"),  # PH-6: the k-th take costs k × S
        (0, 1, 500, "u_den"),
    ]


def test_legal_actions_name_each_kind_of_move_of_the_turn() -> None:
    state = deal(start([0, 1]), {0: "2s 5s 8s Jc Kd 3h 6h 9h Qh Ac", 1: "Ks Kc 7s Ts Qc 4h 7h Th Ad"})
    assert [a.kind for a in phom.legal_actions(state, 0)] == ["play"]
    assert phom.legal_actions(state, 1) == ()
    state = throw(state, 0, "Kd")
    assert [a.kind for a in phom.legal_actions(state, 1)] == ["take", "declare:draw"]


# --- rules version 2 (issue 28): every Phỏm laid, a take into Ù tròn; version 1 kept ------


def _lay_keeping_nines(version: int) -> phom.State:
    """Two seats to seat 0's last turn: it holds 3♠ 4♠ 5♠ and 9♣ 9♦ 9♥ after drawing 5♦."""
    state = deal(start([0, 1], version=version), {0: "3s 4s 5s 9c 9d 9h Jc Kd Qs Ah", 1: "5c 6c 7c Ts Qc 4d 7h Th Kh"})
    for got0, out0, got1, out1 in ((None, "Kd", "2d", "Kh"), ("3c", "Qs", "8d", "Qc"), ("Jd", "Jd", "6s", "Th")):
        if got0 is not None:
            state = draw(state, 0, got0)
        state = throw(state, 0, out0)
        state = draw(state, 1, got1)
        state = throw(state, 1, out1)
    return draw(state, 0, "5d")


def _seat_1_lays_and_ends(state: phom.State) -> phom.State:
    return throw(lay(draw(state, 1, "5h"), 1, "5c 6c 7c"), 1, "Ts")  # keeps 2♦ 4♦ 5♥ 6♠ 7♥ 8♦: 32


def test_issue_28_v2_a_lay_down_that_keeps_a_phom_is_refused() -> None:
    # Laying 3♠ 4♠ 5♠ while holding 9♣ 9♦ 9♥: every Phỏm is laid before junk is sent (§6.1).
    state = _lay_keeping_nines(version=2)
    rejected(state, MeldsLaid(0, (Meld(tuple(parse_cards("3s 4s 5s"))),)), "BAD_MELD")
    rejected(state, MeldsLaid(0, ()), "BAD_MELD")  # móm by choice while holding two Phỏm
    assert phom.candidate_actions(state, 0) == [
        MeldsLaid(0, (Meld(tuple(parse_cards("3s 4s 5s"))), Meld(tuple(parse_cards("9c 9d 9h")))))
    ]
    state = throw(lay(state, 0, "3s 4s 5s", "9c 9d 9h"), 0, "Jc")  # keeps A♥ 3♣ 5♦: 9
    assert flows(_seat_1_lays_and_ends(state)) == [(1, 0, 100, "ve_chot")]


def test_issue_28_v1_the_same_lay_down_is_accepted_and_settles_as_before() -> None:
    state = throw(lay(_lay_keeping_nines(version=1), 0, "3s 4s 5s"), 0, "Jc")  # keeps 9♣ 9♦ 9♥ A♥ 3♣ 5♦: 36
    assert flows(_seat_1_lays_and_ends(state)) == [(0, 1, 100, "ve_chot")]
    same = throw(lay(_lay_keeping_nines(version=0), 0, "3s 4s 5s"), 0, "Jc")  # no version recorded: 1
    assert flows(_seat_1_lays_and_ends(same)) == [(0, 1, 100, "ve_chot")]


def _kings_and_a_run(version: int) -> phom.State:
    """Seat 1 plays first and lays 7♠ 8♠ 9♠; then seat 0 holds A♠ 3♠ 4♠ 5♠ 6♠ K♠ K♣ 8♦
    K♦ K♥ on its last turn."""
    state = deal(
        start([0, 1], first=1, version=version),
        {1: "7s 8s 9s Ac Ad 2c 2h Jc Qd Tc", 0: "As 3s 4s 5s 6s Ks Kc Kd Qh"},
    )
    state = throw(state, 1, "Qd")
    for got0, out0, got1, out1 in (("Jh", "Qh", "3d", "Jc"), ("Th", "Jh", "4h", "Tc")):
        state = throw(draw(state, 0, got0), 0, out0)
        state = throw(draw(state, 1, got1), 1, out1)
    state = throw(draw(state, 0, "8d"), 0, "Th")
    state = throw(lay(draw(state, 1, "9h"), 1, "7s 8s 9s"), 1, "9h")  # keeps A♣ A♦ 2♣ 2♥ 3♦ 4♥: 13
    return draw(state, 0, "Kh")


def test_issue_28_v2_the_timer_lays_the_run_it_could_have_sent_card_by_card() -> None:
    state = _kings_and_a_run(version=2)
    state = phom.apply(state, TimerExpired(0, "turn"))
    assert state.laid[0] == (tuple(parse_cards("3s 4s 5s 6s")), tuple(parse_cards("Ks Kc Kd Kh")))
    state = phom.apply(state, TimerExpired(0, "turn"))  # throws 8♦, keeps A♠: 1 point
    assert state.hands[0] == tuple(parse_cards("As"))
    assert flows(state) == [(1, 0, 100, "ve_chot")]


def test_issue_28_v1_the_timer_lays_only_the_kings_as_before() -> None:
    state = _kings_and_a_run(version=1)
    state = phom.apply(state, TimerExpired(0, "turn"))
    assert state.laid[0] == (tuple(parse_cards("Ks Kc Kd Kh")),)
    state = phom.apply(state, TimerExpired(0, "turn"))  # throws 8♦, keeps A♠ 3♠ 4♠ 5♠ 6♠: 19
    assert flows(state) == [(0, 1, 100, "ve_chot")]


def _sevens_and_eights(version: int) -> phom.State:
    """Three seats (0, 2, 1 in turn). Seat 0 lays 4♥ 5♥ 6♥ and 3♦ 4♦ 5♦ 6♦, seat 2 lays
    10♠ J♠ Q♠ and 8♣ 9♣ 10♣; then seat 1 holds 6♠ 7♠ 8♠ 9♠ 7♣ 7♦ 8♦ 7♥ 8♥ J♥ on its last turn."""
    state = deal(
        start([0, 1, 2], seats_max=3, version=version),
        {
            0: "4h 5h 6h 3d 4d 5d 6d Kc Qc Jd",
            2: "Ts Js Qs 8c 9c Tc Kd Qd 5c",
            1: "6s 7s 8s 9s 7c 7d 7h 8d Kh",
        },
    )
    state = throw(state, 0, "Kc")
    state = throw(draw(state, 2, "3s"), 2, "Kd")
    state = throw(draw(state, 1, "Qh"), 1, "Kh")
    for got0, out0, got2, out2, got1, out1 in (
        ("As", "Qc", "Ah", "Qd", "Th", "Qh"),
        ("2c", "Jd", "2d", "5c", "8h", "Th"),
    ):
        state = throw(draw(state, 0, got0), 0, out0)
        state = throw(draw(state, 2, got2), 2, out2)
        state = throw(draw(state, 1, got1), 1, out1)
    state = throw(lay(draw(state, 0, "3c"), 0, "4h 5h 6h", "3d 4d 5d 6d"), 0, "3c")  # keeps A♠ 2♣: 3
    state = throw(lay(draw(state, 2, "9d"), 2, "Ts Js Qs", "8c 9c Tc"), 2, "9d")  # keeps 3♠ A♥ 2♦: 6
    return draw(state, 1, "Jh")


def test_issue_28_v2_the_sevens_and_eights_are_laid_and_six_points_kept() -> None:
    state = _sevens_and_eights(version=2)
    rejected(state, MeldsLaid(1, (Meld(tuple(parse_cards("6s 7s 8s"))),)), "BAD_MELD")  # keeps 7♣ 7♦ 7♥
    state = phom.apply(state, TimerExpired(1, "turn"))
    assert state.laid[1] == (tuple(parse_cards("7s 7c 7d 7h")), tuple(parse_cards("8s 8d 8h")))
    assert phom.candidate_actions(state, 1) == [CardSent(1, 2, 0, c("9s")), CardsPlayed(1, (c("Jh"),))]
    state = throw(phom.apply(state, CardSent(1, 2, 0, c("9s"))), 1, "Jh")  # keeps 6♠
    # Seat 0 first (3); seats 2 and 1 both keep 6: seat 2 laid down first (PH-3).
    assert flows(state) == [(2, 0, 100, "ve_nhi"), (1, 0, 200, "ve_chot")]


def test_issue_28_v1_the_sevens_and_eights_are_sent_away_as_before() -> None:
    state = _sevens_and_eights(version=1)
    state = phom.apply(state, TimerExpired(1, "turn"))
    assert state.laid[1] == (tuple(parse_cards("6s 7s 8s")),)
    for to_seat, index, card in ((2, 1, "7c"), (0, 1, "7d"), (0, 0, "7h"), (0, 1, "8d"), (0, 0, "8h"), (2, 0, "9s")):
        state = phom.apply(state, CardSent(1, to_seat, index, c(card)))
    state = throw(state, 1, "Jh")  # keeps nothing: 0 points
    assert flows(state) == [(0, 1, 100, "ve_nhi"), (2, 1, 200, "ve_chot")]


def _three_taken_then_ten_of_clubs(version: int) -> phom.State:
    """Seat 1 has taken 2♣, 7♣ and K♥ and holds 2♠ K♠ 2♣ 7♣ 8♣ 9♣ K♣ 2♥ K♥; seat 0 then
    discards 10♣."""
    state = deal(start([0, 1], version=version), {0: "2c 7c Kh Tc 4s 6d 9h Qd Ad 3h", 1: "2s Ks 8c 9c Kc 2h 3d 5h Js"})
    state = throw(take(throw(state, 0, "2c"), 1), 1, "3d")  # 2♠ 2♣ 2♥
    state = throw(take(throw(draw(state, 0, "5s"), 0, "7c"), 1), 1, "5h")  # 7♣ 8♣ 9♣
    state = throw(take(throw(draw(state, 0, "8h"), 0, "Kh"), 1), 1, "Js")  # K♠ K♣ K♥ (Ù thường passed up)
    return throw(draw(state, 0, "Jc"), 0, "Tc")


def test_issue_28_v2_a_take_that_completes_u_tron_is_taken_and_the_u_declared() -> None:
    state = _three_taken_then_ten_of_clubs(version=2)
    assert [a.kind for a in phom.legal_actions(state, 1)] == ["take", "declare:draw"]
    state = take(state, 1)  # 2♠ 2♣ 2♥ | 7♣ 8♣ 9♣ 10♣ | K♠ K♣ K♥: all ten in Phỏm
    assert [a.kind for a in phom.legal_actions(state, 1)] == ["declare:u"]  # no card to throw
    assert phom.candidate_actions(state, 1) == [Declared(1, "u")]
    rejected(state, CardsPlayed(1, (c("8c"),)), "ILLEGAL_MOVE")
    assert phom.apply(state, TimerExpired(1, "turn")) == phom.apply(state, Declared(1, "u"))
    state = phom.apply(state, Declared(1, "u"))
    assert state.u == phom_u(1, tron=True, kings=True)  # K♠ K♣ K♥ and no draw: Ù K too (PH-5, PH-17)
    # Seat 0's four discards in a row were taken: it pays the Ù đền (PH-7), 10 × S.
    assert flows(state) == [
        (0, 1, 100, "an_cay"),
        (0, 1, 200, "an_cay_2"),
        (0, 1, 300, "an_cay_n"),
        (0, 1, 400, "an_cay_n"),
        (0, 1, 1000, "u_den"),
    ]


def test_issue_28_v1_the_take_into_u_tron_is_refused_as_before() -> None:
    state = _three_taken_then_ten_of_clubs(version=1)
    assert [a.kind for a in phom.legal_actions(state, 1)] == ["declare:draw"]
    rejected(state, CardTaken(1, 0, c("Tc")), "BAD_MELD")


def test_every_rules_version_has_its_option_defaults_and_its_rules() -> None:
    assert set(phom.VERSIONS) == set(phom.OPTION_DEFAULTS) == {1, 2}
    assert all(v.number == n for n, v in phom.VERSIONS.items())
    assert start([0, 1], version=0).version == phom.VERSIONS[1]
    assert start([0, 1]).version == phom.VERSIONS[phom.RULES_VERSION] == phom.VERSIONS[2]
    with pytest.raises(RuleViolation) as err:
        start([0, 1], version=3)
    assert err.value.code == "UNKNOWN_RULES_VERSION"
