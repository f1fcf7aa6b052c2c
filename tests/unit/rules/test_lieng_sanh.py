"""Liêng Sảnh: the §12.2 examples, three betting rounds with "Tố", "Cân" and "Chuyển", and
the Sáp bonus (RULES.md §12, LS-1 to LS-12).

Seats are numbered clockwise; play is counterclockwise (GEN-2): from seat 0 of three,
0 → 2 → 1.
"""

from __future__ import annotations

import pytest

from socai.cards import parse_cards
from socai.errors import RuleViolation
from socai.events.model import (
    ActionKind,
    BetAction,
    Body,
    CardsDealt,
    DealtCard,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    SeatInfo,
)
from socai.rules import base, registry
from socai.rules.three_card import lieng_sanh
from socai.rules.three_card.threecard_play import deal_three_face_down

S = 100
SEED_HEX = "00" * 32
CHECK, CALL, BET, RAISE, FOLD, ALL_IN = (
    ActionKind.CHECK,
    ActionKind.CALL,
    ActionKind.BET,
    ActionKind.RAISE,
    ActionKind.FOLD,
    ActionKind.ALL_IN,
)
CHUYEN = CHECK  # "Chuyển": pass the opening on, adding nothing


def start(
    stacks: dict[int, int],
    *,
    dealer_seat: int = 0,
    stake_gold: int = S,
    rules_version: int = lieng_sanh.RULES_VERSION,
    **options: str,
) -> lieng_sanh.State:
    seats = tuple(SeatInfo(seat, f"p{seat}", stack) for seat, stack in sorted(stacks.items()))
    started = HandStarted(
        "t1",
        "h1",
        "lieng_sanh",
        1,
        stake_gold,
        0,
        len(stacks),
        seats,
        dealer_seat,
        "c",
        owner_seat=0,
        options=options,
        rules_version=rules_version,
    )
    return lieng_sanh.initial_state(started)


def deal(state: lieng_sanh.State, hands: dict[int, str]) -> lieng_sanh.State:
    cards = {seat: parse_cards(text) for seat, text in hands.items()}
    taken = dict.fromkeys(cards, 0)
    dealt = []
    for slot in deal_three_face_down(state.order):
        dealt.append(DealtCard(slot.seat, cards[slot.seat][taken[slot.seat]], False))
        taken[slot.seat] += 1
    return lieng_sanh.apply(state, CardsDealt(tuple(dealt)))


def play(state: lieng_sanh.State, *bodies: Body) -> lieng_sanh.State:
    for body in bodies:
        state = lieng_sanh.apply(state, body)
    return state


def end(state: lieng_sanh.State) -> lieng_sanh.State:
    return lieng_sanh.apply(state, HandEnded(SEED_HEX))


def bet(seat: int, kind: ActionKind, amount: int = 0) -> BetAction:
    return BetAction(seat, kind, amount)


def chuyen_round(*seats: int) -> list[Body]:
    return [bet(s, CHUYEN) for s in seats]


def test_lieng_sanh_is_registered() -> None:
    assert registry.get("lieng_sanh") is lieng_sanh


# --- 12.2: every example of the ranking table -----------------------------------------------


@pytest.mark.parametrize(
    ("cards", "category", "points"),
    [
        ("10h 10c 10d", "sap", 0),
        ("As Ac Ah", "sap", 3),
        ("Ac 2c 3c", "run", 6),  # LS-1: a suited run is an ordinary Liêng
        ("Qd Kh Ah", "run", 1),
        ("Jh Qh Qs", "faces", 0),
        ("Js Kd Kc", "faces", 0),
        ("10h 3h 6s", "points", 9),
        ("5s 2h Ac", "points", 8),
        ("Qd 3h 4s", "points", 7),
        ("Kh 3c 3s", "points", 6),  # a pair has no value of its own
        ("3s Ad Ac", "points", 5),
        ("Ks 10h 4c", "points", 4),
        ("7s 4d 2c", "points", 3),
        ("10h Qh 2s", "points", 2),
        ("8s Ah 2c", "points", 1),
        ("Ks 8d 2c", "points", 0),
    ],
)
def test_every_example_of_the_ranking_table_12_2(cards: str, category: str, points: int) -> None:
    value = lieng_sanh.hand_value(parse_cards(cards))
    assert (value.category, value.points) == (category, points)


def test_the_examples_rank_sap_over_lieng_over_anh_over_points_9_to_0() -> None:
    rows = ["As Ac Ah", "10h 10c 10d", "Qd Kh Ah", "Ac 2c 3c", "Jh Qh Qs", "10h 3h 6s", "5s 2h Ac", "Qd 3h 4s"]
    rows += ["Kh 3c 3s", "3s Ad Ac", "Ks 10h 4c", "7s 4d 2c", "10h Qh 2s", "8s Ah 2c", "Ks 8d 2c"]
    values = [lieng_sanh.hand_value(parse_cards(r)) for r in rows]
    assert values == sorted(values, reverse=True)


# --- three rounds of Tố, Cân, Chuyển (12.3, LS-3, LS-6) ---------------------------------------


def test_everyone_antes_one_stake_ls_2() -> None:
    assert dict(start({0: 1000, 1: 1000}).put_in_gold) == {0: S, 1: S}


def test_chuyen_all_the_way_round_ends_the_round_with_nobody_adding() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), {0: "2h 7s 8c", 1: "3h 4s 5c", 2: "9s Kh Qd"})
    state = play(state, *chuyen_round(0, 2, 1))
    assert state.betting_round == 2 and lieng_sanh.pending(state).to_act == (0,)
    state = play(state, *chuyen_round(0, 2, 1), *chuyen_round(0, 2, 1))
    assert lieng_sanh.pending(state).finished
    assert dict(state.put_in_gold) == {0: S, 1: S, 2: S}
    assert lieng_sanh.settle(end(state)).nets == {0: -S, 1: 2 * S, 2: -S}


def test_chuyen_hands_the_opening_on_and_the_next_player_may_open_with_to() -> None:
    state = deal(start({0: 5000, 1: 5000, 2: 5000}), {0: "2h 7s 8c", 1: "3h 4s 5c", 2: "9s Kh Qd"})
    state = play(state, bet(0, CHUYEN))
    kinds = {a.kind: a for a in lieng_sanh.legal_actions(state, 2)}
    assert set(kinds) == {"check", "bet", "fold"}
    assert (kinds["bet"].min_gold, kinds["bet"].max_gold) == (S, 30 * S)  # Tố × 1, slider × 1..30
    state = play(state, bet(2, BET, S))
    kinds = {a.kind: a for a in lieng_sanh.legal_actions(state, 1)}
    assert set(kinds) == {"call", "raise", "fold"}  # Cân, Tố theo thanh kéo, Úp bỏ


def test_three_rounds_then_the_best_hand_takes_the_pot() -> None:
    state = deal(start({0: 5000, 1: 5000, 2: 5000}), {0: "2h 7s 8c", 1: "3h 4s 5c", 2: "9s Kh Qd"})
    state = play(state, bet(0, BET, S), bet(2, CALL, S), bet(1, RAISE, 2 * S), bet(0, CALL, S), bet(2, CALL, S))
    assert state.betting_round == 2
    state = play(state, *chuyen_round(0, 2), bet(1, BET, 3 * S), bet(0, FOLD), bet(2, CALL, 3 * S))
    assert state.betting_round == 3 and lieng_sanh.pending(state).to_act == (2,)  # seat 0 folded
    state = play(state, bet(2, CHUYEN), bet(1, CHUYEN))
    assert lieng_sanh.pending(state).finished
    settlement = lieng_sanh.settle(end(state))
    # The run (seat 1) takes what seat 0 (3 × S) and seat 2 (6 × S) put in.
    assert settlement.nets == {0: -3 * S, 1: 9 * S, 2: -6 * S}


# --- the Sáp bonus (12.4, LS-5, LS-9, LS-12) ----------------------------------------------


def test_the_sap_holder_takes_5_stakes_from_every_other_player_besides_the_pot() -> None:
    state = deal(start({0: 2000, 1: 2000, 2: 2000}), {0: "7s 7c 7d", 1: "3h 4s 5c", 2: "9s Kh Qd"})
    state = play(state, *chuyen_round(0, 2, 1), *chuyen_round(0, 2, 1), *chuyen_round(0, 2, 1))
    settlement = lieng_sanh.settle(end(state))
    assert settlement.by_reason() == {"ante": 2 * S, "sap_bonus": 10 * S}
    assert settlement.nets == {0: 12 * S, 1: -6 * S, 2: -6 * S}


def test_folded_players_pay_the_sap_bonus_too() -> None:
    state = deal(start({0: 2000, 1: 2000, 2: 2000}), {0: "7s 7c 7d", 1: "3h 4s 5c", 2: "9s Kh Qd"})
    state = play(state, bet(0, BET, S), bet(2, FOLD), bet(1, FOLD))
    settlement = lieng_sanh.settle(end(state))
    assert settlement.nets == {0: 12 * S, 1: -6 * S, 2: -6 * S}


def test_the_best_sap_dealt_takes_the_bonus_even_when_its_holder_folded_ls_12() -> None:
    state = deal(start({0: 2000, 1: 2000, 2: 2000}), {0: "7s 7c 7d", 1: "3h 4s 5c", 2: "9s Kh Qd"})
    state = play(state, bet(0, FOLD), *chuyen_round(2, 1), *chuyen_round(2, 1), *chuyen_round(2, 1))
    settlement = lieng_sanh.settle(end(state))
    # The run (seat 1) wins the antes; the folded Sáp still takes 5 × S from each other seat.
    assert settlement.nets == {0: 9 * S, 1: -3 * S, 2: -6 * S}


def test_with_two_saps_only_the_highest_takes_the_bonus_and_the_lower_pays_it() -> None:
    state = deal(start({0: 2000, 1: 2000, 2: 2000}), {0: "7s 7c 7d", 1: "Ks Kc Kd", 2: "9s Kh Qd"})
    state = play(state, *chuyen_round(0, 2, 1), *chuyen_round(0, 2, 1), *chuyen_round(0, 2, 1))
    settlement = lieng_sanh.settle(end(state))
    assert settlement.nets == {0: -6 * S, 1: 12 * S, 2: -6 * S}


def test_a_player_who_leaves_mid_hand_still_pays_the_sap_bonus_ls_9() -> None:
    state = deal(start({0: 2000, 1: 2000, 2: 2000}), {0: "7s 7c 7d", 1: "3h 4s 5c", 2: "9s Kh Qd"})
    state = play(state, bet(0, BET, 2 * S), PlayerLeft(2), bet(1, CALL, 2 * S))
    state = play(state, *chuyen_round(0, 1), *chuyen_round(0, 1))
    settlement = lieng_sanh.settle(end(state))
    assert settlement.nets == {0: 14 * S, 1: -8 * S, 2: -6 * S}
    assert settlement.by_reason()["disconnect_forfeit"] == S


def test_a_leaver_loses_a_raise_nobody_matched_too_issue_28() -> None:
    """12.4, 12.5: the leaver loses the gold already bet, all of it, to the winner. S = 1,
    ante 2: seat 1 opens for 2, seat 0 raises to 4 and leaves (out of turn)."""
    state = deal(start({0: 100, 1: 100}, dealer_seat=1, stake_gold=1, ante_stakes="2"), {0: "As Kc Qd", 1: "3h 4s 5c"})
    state = play(state, bet(1, BET, 2), bet(0, RAISE, 4), PlayerLeft(0))
    assert lieng_sanh.pending(state).finished
    settlement = lieng_sanh.settle(end(state))
    assert settlement.nets == {0: -6, 1: 6}
    assert settlement.by_reason() == {"disconnect_forfeit": 6}


def test_the_all_in_limit_does_not_protect_a_leavers_chips() -> None:
    """As Liêng's LI-5: seat 2 opens for 10 × S and leaves, seat 1 calls, seat 0 (the run,
    the best hand) calls all-in for 2 × S; nobody has chips for rounds 2 and 3."""
    hands = {0: "Qs Kh Ac", 1: "9s Kd Qd", 2: "2h 7s 8c"}
    state = deal(start({0: 3 * S, 1: 2000, 2: 2000}, dealer_seat=2), hands)
    state = play(state, bet(2, BET, 10 * S), PlayerLeft(2), bet(1, CALL, 10 * S), bet(0, ALL_IN, 2 * S))
    assert lieng_sanh.pending(state).finished
    settlement = lieng_sanh.settle(end(state))
    assert settlement.nets == {0: 14 * S, 1: -3 * S, 2: -11 * S}


@pytest.mark.parametrize("version", [0, 1])
def test_version_1_hands_still_return_a_leavers_unmatched_chips_as_recorded(version: int) -> None:
    """Rules version 1 (and 0) settles the two hands above as they were played."""
    state = deal(
        start({0: 100, 1: 100}, dealer_seat=1, stake_gold=1, ante_stakes="2", rules_version=version),
        {0: "As Kc Qd", 1: "3h 4s 5c"},
    )
    state = play(state, bet(1, BET, 2), bet(0, RAISE, 4), PlayerLeft(0))
    assert lieng_sanh.settle(end(state)).nets == {0: -4, 1: 4}
    hands = {0: "Qs Kh Ac", 1: "9s Kd Qd", 2: "2h 7s 8c"}
    state = deal(start({0: 3 * S, 1: 2000, 2: 2000}, dealer_seat=2, rules_version=version), hands)
    state = play(state, bet(2, BET, 10 * S), PlayerLeft(2), bet(1, CALL, 10 * S), bet(0, ALL_IN, 2 * S))
    assert lieng_sanh.settle(end(state)).nets == {0: 6 * S, 1: 5 * S, 2: -11 * S}


def test_the_bonus_is_capped_at_what_a_payer_has_left_gen_4() -> None:
    # Seat 1 brings 250: it loses its ante and a call of 100, and has 50 left for the bonus.
    state = deal(start({0: 2000, 1: 250}), {0: "7s 7c 7d", 1: "3h 4s 5c"})
    state = play(state, bet(0, BET, S), bet(1, CALL, S))
    state = play(state, *chuyen_round(0, 1), *chuyen_round(0, 1))
    settlement = lieng_sanh.settle(end(state))
    assert settlement.nets == {0: 250, 1: -250}
    assert [(s.seat, s.owed_gold, s.paid_gold, s.reason) for s in settlement.shortfalls] == [(1, 500, 50, "sap_bonus")]


def test_a_disconnected_player_loses_what_they_bet_12_5() -> None:
    state = deal(start({0: 2000, 1: 2000}), {0: "2h 7s 8c", 1: "3h 4s 5c"})
    state = play(state, bet(0, BET, 4 * S), PlayerDisconnected(1))
    assert lieng_sanh.pending(state).finished
    assert lieng_sanh.settle(end(state)).nets == {0: S, 1: -S}


def test_the_opener_is_the_owner_then_the_previous_winner_ls_4() -> None:
    state = deal(start({0: 1000, 1: 1000}), {0: "2h 7s 8c", 1: "3h 4s 5c"})
    state = end(play(state, *chuyen_round(0, 1), *chuyen_round(0, 1), *chuyen_round(0, 1)))
    assert base.choose_dealer(lieng_sanh, None, None, [0, 1], 2, 0) == 0
    assert base.choose_dealer(lieng_sanh, state, 0, [0, 1], 2, 0) == 1


def test_a_bad_option_is_refused() -> None:
    with pytest.raises(RuleViolation) as err:
        start({0: 1000, 1: 1000}, sap_bonus_stakes="-1")
    assert err.value.code == "BAD_OPTION"
