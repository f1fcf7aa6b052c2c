"""Ba Cây Chương: bets against the banker, the bank's solvency, the 10-point double, the
banker's rotation and disconnects (RULES.md §8, CH-1 to CH-7).

Seats are numbered clockwise; play is counterclockwise (GEN-2) from the banker.
"""

from __future__ import annotations

import pytest

from socai.cards import parse_cards
from socai.errors import RuleViolation
from socai.events.model import (
    HIDDEN_CARD,
    Body,
    CardsDealt,
    DealtCard,
    Declared,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    SeatInfo,
    TimerExpired,
    WagerPlaced,
)
from socai.rules import base, registry
from socai.rules.base import Settlement, seeded_index
from socai.rules.three_card import bacay_chuong
from socai.rules.three_card.threecard_play import deal_three_face_down
from tests.support.snapshot import snapshot

S = 100
SEED_HEX = "ab" * 32
A, B, C = 0, 1, 2  # the worked example's players; B banks


def start(stacks: dict[int, int], *, banker: int = B, **options: str) -> bacay_chuong.State:
    seats = tuple(SeatInfo(seat, f"p{seat}", stack) for seat, stack in sorted(stacks.items()))
    started = HandStarted(
        "t1", "h1", "bacay_chuong", 1, S, 0, len(stacks), seats, banker, "c", owner_seat=0, options=options
    )
    return bacay_chuong.initial_state(started)


def wager(seat: int, amount: int) -> WagerPlaced:
    return WagerPlaced(seat, "bet", (), amount)


def dealt(state: bacay_chuong.State, hands: dict[int, str]) -> CardsDealt:
    cards = {seat: parse_cards(text) for seat, text in hands.items()}
    taken = dict.fromkeys(cards, 0)
    out = []
    for slot in deal_three_face_down(state.order):
        out.append(DealtCard(slot.seat, cards[slot.seat][taken[slot.seat]], False))
        taken[slot.seat] += 1
    return CardsDealt(tuple(out))


def play(state: bacay_chuong.State, *bodies: Body) -> bacay_chuong.State:
    for body in bodies:
        state = bacay_chuong.apply(state, body)
    return state


def flip_all(state: bacay_chuong.State) -> bacay_chuong.State:
    for seat in bacay_chuong.pending(state).to_act:
        state = bacay_chuong.apply(state, Declared(seat, "flip"))
    return state


def finish(state: bacay_chuong.State, hands: dict[int, str]) -> bacay_chuong.State:
    state = flip_all(play(state, dealt(state, hands)))
    return bacay_chuong.apply(state, HandEnded(SEED_HEX))


# A scores 10, B (the banker) 9, C 8: the worked example of 8.4.
EXAMPLE = {A: "5h 3h 2c", B: "4d 4s Ah", C: "9h 8c Ac"}


def example(ten_point_double: str = "true") -> tuple[bacay_chuong.State, Settlement]:
    state = play(
        start({A: 1000, B: 5000, C: 1000}, ten_point_double=ten_point_double), wager(A, 2 * S), wager(C, 3 * S)
    )
    state = finish(state, EXAMPLE)
    return state, bacay_chuong.settle(state)


def test_bacay_chuong_is_registered() -> None:
    assert registry.get("bacay_chuong") is bacay_chuong


def test_equal_points_go_to_the_better_single_card_8_2() -> None:
    assert bacay_chuong.hand_value(parse_cards("7d 2h Ad")) > bacay_chuong.hand_value(parse_cards("8d As Ac"))


# --- 8.4 settlement and the worked example ----------------------------------------------------


def test_the_worked_example_b_takes_cs_bet_and_pays_a_who_takes_the_bank() -> None:
    state, settlement = example()
    # CH-1: A's 10 beats the banker and is paid twice A's bet.
    assert settlement.nets == {A: 4 * S, B: -S, C: -3 * S}
    assert settlement.by_reason() == {"banker_win": 3 * S, "banker_loss": 2 * S, "ten_double": 2 * S}
    stacks = {A: 1400, B: 4900, C: 700}
    assert base.choose_dealer(bacay_chuong, state, B, [A, B, C], 3, 0, stacks) == A


def test_without_ten_point_double_a_is_paid_just_the_amount_bet_as_the_example_shows() -> None:
    _, settlement = example(ten_point_double="false")
    assert settlement.nets == {A: 2 * S, B: S, C: -3 * S}


def test_the_bankers_own_ten_is_never_doubled_ch_1() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, 2 * S), wager(C, 3 * S))
    settlement = bacay_chuong.settle(finish(state, {A: "9h 8c Ac", B: "5h 3h 2c", C: "4d 4s Ah"}))
    assert settlement.nets == {A: -2 * S, B: 5 * S, C: -3 * S}


def test_a_player_who_does_not_bet_plays_for_nothing() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, 2 * S), TimerExpired(C, "betting"))
    settlement = bacay_chuong.settle(finish(state, EXAMPLE))
    assert settlement.nets == {A: 4 * S, B: -4 * S, C: 0}


# --- bets and the bank's solvency (8.3, CH-2) --------------------------------------------------


def test_bets_are_between_one_and_ten_stakes_and_only_players_bet() -> None:
    state = start({A: 5000, B: 50_000, C: 5000})
    for body, code in (
        (wager(A, S - 1), "BET_TOO_SMALL"),
        (wager(A, 10 * S + 1), "BET_TOO_LARGE"),
        (wager(B, S), "BANKER_CANNOT_BET"),
        (WagerPlaced(A, "tai", (), S), "BAD_SELECTION"),
        (wager(9, S), "UNKNOWN_SEAT"),
    ):
        with pytest.raises(RuleViolation) as err:
            bacay_chuong.apply(state, body)
        assert err.value.code == code
    state = play(state, wager(A, S))
    with pytest.raises(RuleViolation) as err:
        bacay_chuong.apply(state, wager(A, S))
    assert err.value.code == "TOO_MANY_BETS"


def test_a_bet_the_bank_could_not_pay_twice_over_is_refused_ch_2() -> None:
    state = play(start({A: 1000, B: 1000, C: 1000}), wager(A, 4 * S))
    assert {a.kind: (a.min_gold, a.max_gold) for a in bacay_chuong.legal_actions(state, C)} == {"wager": (S, S)}
    before = snapshot(state)
    with pytest.raises(RuleViolation) as err:
        bacay_chuong.apply(state, wager(C, 2 * S))
    assert err.value.code == "BANKER_CAPACITY"
    assert snapshot(state) == before
    state = play(state, wager(C, S))
    assert bacay_chuong.pending(state).deal  # everyone has bet: the cards come


def test_without_doubling_the_bank_covers_each_bet_once() -> None:
    state = play(start({A: 1000, B: 1000, C: 1000}, ten_point_double="false"), wager(A, 8 * S))
    assert {a.kind: (a.min_gold, a.max_gold) for a in bacay_chuong.legal_actions(state, C)} == {"wager": (S, 2 * S)}


# --- the flip ----------------------------------------------------------------------------------


def test_everyone_flips_at_once_cards_hidden_until_flipped_and_the_timer_flips() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, S), wager(C, S))
    body = dealt(state, EXAMPLE)
    state = play(state, body)
    pending = bacay_chuong.pending(state)
    assert (pending.to_act, pending.timer, pending.timeout_s) == ((B, A, C), "flip", 15)
    seen = base.visible_to(bacay_chuong, body, A, state)
    assert isinstance(seen, CardsDealt)
    assert {d.card for d in seen.cards if d.seat != A} == {HIDDEN_CARD}
    state = play(state, Declared(B, "flip"), TimerExpired(C, "flip"))
    seen = base.visible_to(bacay_chuong, body, A, state)
    assert isinstance(seen, CardsDealt)
    assert [d.card for d in seen.cards if d.seat == B] == parse_cards(EXAMPLE[B])
    assert bacay_chuong.pending(state).to_act == (A,)


# --- disconnects (8.5, CH-4, CH-5, CH-7) -------------------------------------------------------


def test_a_disconnected_player_loses_their_bet_to_the_banker_ch_5() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, 2 * S), wager(C, 3 * S))
    state = play(state, dealt(state, EXAMPLE), PlayerDisconnected(A))
    settlement = bacay_chuong.settle(play(flip_all(state), HandEnded(SEED_HEX)))
    assert settlement.nets == {A: -2 * S, B: 5 * S, C: -3 * S}
    assert settlement.by_reason() == {"disconnect_forfeit": 2 * S, "banker_win": 3 * S}


def test_a_disconnected_player_cannot_take_the_bank_even_with_ten_ch_7() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, 2 * S), wager(C, 3 * S))
    state = play(state, dealt(state, EXAMPLE), PlayerDisconnected(A))
    state = play(flip_all(state), HandEnded(SEED_HEX))
    assert base.choose_dealer(bacay_chuong, state, B, [A, B, C], 3, 0, {A: 800, B: 5500, C: 700}) == B


def test_a_banker_who_disconnects_loses_to_every_player_and_the_window_closes_ch_4() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, 2 * S), PlayerDisconnected(B))
    assert bacay_chuong.pending(state).deal  # C can no longer bet
    settlement = bacay_chuong.settle(finish(state, EXAMPLE))
    assert settlement.nets == {A: 4 * S, B: -4 * S, C: 0}  # A's 10 is doubled


def test_a_banker_who_leaves_is_replaced_by_a_player_drawn_from_the_revealed_seed() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, S), wager(C, S), PlayerLeft(B))
    state = finish(state, {A: "9h 8c Ac", B: "5h 3h 2c", C: "4d 4s Ah"})  # nobody who counts has 10
    participants = [A, C, 3]
    drawn = [A, C, 3][seeded_index(SEED_HEX, "bacay_chuong.banker", 3)]
    assert base.choose_dealer(bacay_chuong, state, B, participants, 4, 0, None) == drawn


# --- the banker's rotation (8.1, CH-3) ---------------------------------------------------------


def test_the_room_owner_banks_the_first_hand() -> None:
    assert base.choose_dealer(bacay_chuong, None, None, [1, 2, 3], 4, 2, None) == 2


def test_nobody_scored_ten_the_banker_stays() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, S), wager(C, S))
    state = finish(state, {A: "9h 8c Ac", B: "4d 4s Ah", C: "2d 3c 4c"})
    assert base.choose_dealer(bacay_chuong, state, B, [A, B, C], 3, 0, {A: 900, B: 5100, C: 1000}) == B


def test_the_best_ten_banker_included_takes_the_bank_if_it_can_cover_it_ch_3() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, S), wager(C, S))
    # A: 10 with 5♥ best card; C: 10 with 7♦: C's 10 is the best.
    state = finish(state, {A: "5h 3h 2c", B: "4d 4s Ah", C: "7d 2s As"})
    assert base.choose_dealer(bacay_chuong, state, B, [A, B, C], 3, 0, {A: 1200, B: 4600, C: 1200}) == C
    # C cannot cover two minimum bets twice over (4 × S): the next-best 10, A, takes it.
    assert base.choose_dealer(bacay_chuong, state, B, [A, B, C], 3, 0, {A: 1200, B: 4600, C: 399}) == A


def test_a_banker_who_can_no_longer_cover_the_bank_is_replaced_at_random() -> None:
    state = play(start({A: 1000, B: 5000, C: 1000}), wager(A, S), wager(C, S))
    state = finish(state, {A: "9h 8c Ac", B: "4d 4s Ah", C: "2d 3c 4c"})
    stacks = {A: 900, B: 100, C: 1000}
    pool = [A, C]
    drawn = pool[seeded_index(SEED_HEX, "bacay_chuong.banker", 2)]
    assert base.choose_dealer(bacay_chuong, state, B, [A, B, C], 3, 0, stacks) == drawn


def test_a_stack_below_the_minimum_bet_cannot_play() -> None:
    assert not base.can_play(bacay_chuong, S - 1, S, {})
    assert base.can_play(bacay_chuong, S, S, {})
