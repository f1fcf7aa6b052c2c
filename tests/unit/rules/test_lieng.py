"""Liêng: ante, the one betting round, showdown, side pots and disconnects (RULES.md §5).

The ranking itself is pinned in ``test_threecard.py``; here it is checked through the
module's public ``hand_value`` and through whole hands. Seats are numbered clockwise, so
counterclockwise play (GEN-2) goes to lower seat numbers: from seat 0 of three, 0 → 2 → 1.
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
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
)
from socai.rules import base, registry
from socai.rules.three_card import lieng
from socai.rules.three_card.threecard_play import deal_three_face_down
from tests.support.snapshot import snapshot

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


def start(
    stacks: dict[int, int],
    *,
    dealer_seat: int = 0,
    fee_bps: int = 0,
    stake_gold: int = S,
    rules_version: int = lieng.RULES_VERSION,
    **options: str,
) -> lieng.State:
    seats = tuple(SeatInfo(seat, f"p{seat}", stack) for seat, stack in sorted(stacks.items()))
    started = HandStarted(
        "t1",
        "h1",
        "lieng",
        1,
        stake_gold,
        fee_bps,
        len(stacks),
        seats,
        dealer_seat,
        "c",
        owner_seat=0,
        options=options,
        rules_version=rules_version,
    )
    return lieng.initial_state(started)


def deal(state: lieng.State, hands: dict[int, str]) -> lieng.State:
    """Deal ``hands`` (seat → three cards) in the order the hand deals them."""
    cards = {seat: parse_cards(text) for seat, text in hands.items()}
    slots = deal_three_face_down([s for s in state.order if s not in state.folded])
    taken = {seat: 0 for seat in cards}
    dealt = []
    for slot in slots:
        dealt.append(DealtCard(slot.seat, cards[slot.seat][taken[slot.seat]], False))
        taken[slot.seat] += 1
    return lieng.apply(state, CardsDealt(tuple(dealt)))


def play(state: lieng.State, *bodies: Body) -> lieng.State:
    for body in bodies:
        state = lieng.apply(state, body)
    return state


def end(state: lieng.State) -> lieng.State:
    return lieng.apply(state, HandEnded(SEED_HEX))


def bet(seat: int, kind: ActionKind, amount: int = 0) -> BetAction:
    return BetAction(seat, kind, amount)


# Seat 0 holds a Sáp of aces, seat 1 a run, seat 2 nine points.
SAP_RUN_NINE = {0: "As Ac Ad", 1: "3h 4s 5c", 2: "9s Kh Qd"}


# --- registration and hand values -------------------------------------------------------


def test_lieng_is_registered() -> None:
    assert registry.get("lieng") is lieng


@pytest.mark.parametrize(
    ("better", "worse"),
    [
        ("2s 2c 2d", "Qd Kd Ad"),  # Sáp beats the best suited run (LI-1)
        ("4d 5d 6d", "4c 5c 6c"),  # 5.2: equal suited runs, ♦ > ♣
        ("Ah 2h 3h", "Qd Ks Ac"),  # the lowest suited run beats the highest run
        ("Qs Kh Ac", "Ad 2d 3c"),  # Q-K-A is the highest run, A-2-3 the lowest
        ("3c 4s 5h", "Jd Qd Qh"),  # a run beats Ảnh
        ("Jh Jc Qd", "Js Ks Kh"),  # any two Ảnh: the highest suit present, not the rank (LI-2)
        ("Jd Qs Qc", "9h Ks Qd"),  # Ảnh beats nine points
        ("9d 10s Kh", "9h 10c Kc"),  # equal points: the highest suit present, ♦ first (LI-2)
    ],
)
def test_hand_value_orders_the_liengs_hands_as_rules_5_2_says(better: str, worse: str) -> None:
    assert lieng.hand_value(parse_cards(better)) > lieng.hand_value(parse_cards(worse))


def test_hand_value_names_the_category_and_the_points() -> None:
    assert lieng.hand_value(parse_cards("3s 3c 3d")).category == "sap"
    assert lieng.hand_value(parse_cards("4d 5d 6d")).category == "suited_run"
    assert lieng.hand_value(parse_cards("Jh Qs Kc")).category == "run"  # LI-3
    assert lieng.hand_value(parse_cards("Kh Ks Kc")).category == "sap"  # LI-3
    assert lieng.hand_value(parse_cards("Jh Qs Qc")).category == "faces"
    value = lieng.hand_value(parse_cards("10s 7h Ad"))
    assert (value.category, value.points) == ("points", 8)  # 10 counts 0 (LI-7)


def test_hand_value_refuses_a_hand_that_is_not_three_distinct_cards() -> None:
    with pytest.raises(RuleViolation) as err:
        lieng.hand_value(parse_cards("As As Kd"))
    assert err.value.code == "BAD_HAND"


# --- ante, deal and the single round ----------------------------------------------------


def test_every_player_antes_the_table_stake_before_the_deal() -> None:
    state = start({0: 1000, 1: 1000, 2: 1000})
    assert dict(state.put_in_gold) == {0: S, 1: S, 2: S}
    pending = lieng.pending(state)
    assert len(pending.deal) == 9 and not any(slot.face_up for slot in pending.deal)


def test_a_stack_that_cannot_cover_the_ante_cannot_start_or_play() -> None:
    with pytest.raises(RuleViolation) as err:
        start({0: 1000, 1: S - 1})
    assert err.value.code == "BAD_STACK"
    assert not base.can_play(lieng, S - 1, S, {})
    assert base.can_play(lieng, S, S, {})


def test_the_first_to_act_is_the_dealer_seat_then_counterclockwise() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), SAP_RUN_NINE)
    assert lieng.pending(state).to_act == (0,)
    state = play(state, bet(0, CHECK))
    assert lieng.pending(state).to_act == (2,)


def test_exactly_one_betting_round_then_showdown_the_best_hand_takes_the_pot() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), SAP_RUN_NINE)
    state = play(state, bet(0, BET, 2 * S), bet(2, CALL, 2 * S), bet(1, CALL, 2 * S))
    assert lieng.pending(state).finished
    settlement = lieng.settle(end(state))
    assert settlement.nets == {0: 6 * S, 1: -3 * S, 2: -3 * S}
    # each loser's first S is its ante (5.1), the rest what it called (issue 12: ante has its own reason)
    assert settlement.by_reason() == {"ante": 2 * S, "pot": 4 * S}


def test_checks_all_round_go_to_showdown_for_the_antes() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), SAP_RUN_NINE)
    state = play(state, bet(0, CHECK), bet(2, CHECK), bet(1, CHECK))
    assert lieng.settle(end(state)).nets == {0: 2 * S, 1: -S, 2: -S}


def test_a_raise_is_k_times_the_stake_for_k_from_1_to_30() -> None:
    state = deal(start({0: 10_000, 1: 10_000}), {0: "As Ac Ad", 1: "3h 4s 5c"})
    legal = {a.kind: a for a in lieng.legal_actions(state, 0)}
    assert (legal["bet"].min_gold, legal["bet"].max_gold) == (S, 30 * S)
    for amount, code in ((31 * S, "BET_TOO_LARGE"), (S + 1, "BAD_AMOUNT"), (S - 1, "BET_TOO_SMALL")):
        with pytest.raises(RuleViolation) as err:
            lieng.apply(state, bet(0, BET, amount))
        assert err.value.code == code
    state = play(state, bet(0, BET, 30 * S))
    raise_ = {a.kind: a for a in lieng.legal_actions(state, 1)}["raise"]
    assert (raise_.min_gold, raise_.max_gold) == (31 * S, 60 * S)  # the call plus 1..30 × S


def test_raises_are_unlimited_and_each_reopens_the_round() -> None:
    state = deal(start({0: 10_000, 1: 10_000}), {0: "As Ac Ad", 1: "3h 4s 5c"})
    state = play(state, bet(0, BET, S), bet(1, RAISE, 2 * S), bet(0, RAISE, 2 * S), bet(1, RAISE, 2 * S))
    assert lieng.pending(state).to_act == (0,)
    state = play(state, bet(0, CALL, S))
    assert lieng.pending(state).finished
    assert lieng.settle(end(state)).nets == {0: 5 * S, 1: -5 * S}


def test_when_all_others_fold_the_last_player_takes_the_whole_pot_li_6() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), SAP_RUN_NINE)
    state = play(state, bet(0, BET, S), bet(2, FOLD), bet(1, FOLD))
    settlement = lieng.settle(end(state))
    assert settlement.nets == {0: 2 * S, 1: -S, 2: -S}  # the antes; seat 0's bet is its own


def test_a_short_stack_calls_all_in_and_wins_only_the_main_pot() -> None:
    # Seat 1 (the run) has 300: ante 100 and 200 left to call a 500 bet.
    state = deal(start({0: 2000, 1: 300, 2: 2000}), {0: "9s Kh Qd", 1: "3h 4s 5c", 2: "2h 7s 8c"})
    state = play(state, bet(0, BET, 5 * S))
    calls = {a.kind: a for a in lieng.legal_actions(state, 2)}
    state = play(state, bet(2, CALL, calls["call"].min_gold))
    state = play(state, bet(1, ALL_IN, 2 * S))
    assert lieng.pending(state).finished
    settlement = lieng.settle(end(state))
    # Main pot 3 × 300 to the run (seat 1); side pot 2 × 300 to seat 0's 9 points over 7.
    assert settlement.nets == {0: 0, 1: 6 * S, 2: -6 * S}
    assert settlement.by_reason() == {"ante": 2 * S, "pot": 4 * S, "side_pot": 3 * S}


def test_a_timeout_checks_when_free_and_folds_facing_a_bet() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), SAP_RUN_NINE)
    state = play(state, TimerExpired(0, lieng.TURN_TIMER))
    assert 0 not in state.folded
    state = play(state, bet(2, BET, S), TimerExpired(1, lieng.TURN_TIMER))
    assert 1 in state.folded


# --- disconnect and leaving (5.5, LI-5) --------------------------------------------------


def test_a_disconnected_player_is_folded_at_once_and_forfeits_what_they_bet() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), SAP_RUN_NINE)
    state = play(state, bet(0, CHECK), bet(2, BET, 3 * S), PlayerDisconnected(1))
    assert 1 in state.folded  # out of turn: it was seat 1's turn anyway
    state = play(state, bet(0, CALL, 3 * S))
    settlement = lieng.settle(end(state))
    # Seat 1 loses its ante S; seats 0 and 2 matched 4 × S; the Sáp of aces wins.
    assert settlement.nets == {0: 5 * S, 1: -S, 2: -4 * S}
    # the leaver's ante is part of its forfeit; seat 2's ante is labelled as such
    assert settlement.by_reason() == {"ante": S, "pot": 3 * S, "disconnect_forfeit": S}


def test_a_player_who_disconnects_while_raising_loses_everything_bet_li_5() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), {0: "2h 7s 8c", 1: "As Ac Ad", 2: "3h 4s 5c"})
    state = play(state, bet(0, BET, 4 * S), bet(2, CALL, 4 * S), bet(1, RAISE, 8 * S), PlayerDisconnected(1))
    assert lieng.pending(state).to_act == (0,)
    state = play(state, bet(0, CALL, 4 * S), bet(2, FOLD))
    settlement = lieng.settle(end(state))
    # The Sáp of aces (seat 1) does not count: it left. Seat 0 wins seat 1's 9 × S.
    assert settlement.nets == {0: 14 * S, 1: -9 * S, 2: -5 * S}


def test_a_leaver_forfeits_a_raise_nobody_matched_too_issue_28() -> None:
    """LI-5 (and 5.4): the leaver forfeits everything it put in, never "uncalled". S = 1,
    ante 2: seat 1 bets 2, seat 0 raises to 4 and leaves (out of turn, seat 1 to act)."""
    state = deal(start({0: 100, 1: 100}, dealer_seat=1, stake_gold=1, ante_stakes="2"), {0: "As Ac Ad", 1: "3h 4s 5c"})
    state = play(state, bet(1, BET, 2), bet(0, RAISE, 4), PlayerLeft(0))
    assert lieng.pending(state).finished
    settlement = lieng.settle(end(state))
    assert settlement.nets == {0: -6, 1: 6}
    assert settlement.by_reason() == {"disconnect_forfeit": 6}


def test_the_all_in_limit_does_not_protect_a_leavers_chips_li_5() -> None:
    """LI-5: the showdown winner takes all a leaver put in, even above its own all-in stack;
    the limit still protects a live player's chips beyond it. Seat 2 bets 10 × S and leaves,
    seat 1 calls, seat 0 (the run, the best hand) calls all-in for 2 × S."""
    hands = {0: "Qs Kh Ac", 1: "9s Kd Qd", 2: "2h 7s 8c"}
    state = deal(start({0: 3 * S, 1: 2000, 2: 2000}, dealer_seat=2), hands)
    state = play(state, bet(2, BET, 10 * S), PlayerLeft(2), bet(1, CALL, 10 * S), bet(0, ALL_IN, 2 * S))
    assert lieng.pending(state).finished
    settlement = lieng.settle(end(state))
    # Main pot 3 × S from seats 0 and 1 to seat 0; seat 1's other 8 × S are its own again;
    # seat 2's 11 × S to seat 0.
    assert settlement.nets == {0: 14 * S, 1: -3 * S, 2: -11 * S}
    assert settlement.by_reason() == {"ante": S, "pot": 2 * S, "disconnect_forfeit": 11 * S}


@pytest.mark.parametrize("version", [0, 1])
def test_version_1_hands_still_return_a_leavers_unmatched_chips_as_recorded(version: int) -> None:
    """Rules version 1 (0: logged before the version was recorded) settles the two hands
    above as they were played: the unmatched raise back to the leaver, and the leaver's
    chips above the all-in winner's stack to the side pot's winner."""
    state = deal(
        start({0: 100, 1: 100}, dealer_seat=1, stake_gold=1, ante_stakes="2", rules_version=version),
        {0: "As Ac Ad", 1: "3h 4s 5c"},
    )
    state = play(state, bet(1, BET, 2), bet(0, RAISE, 4), PlayerLeft(0))
    assert lieng.settle(end(state)).nets == {0: -4, 1: 4}
    hands = {0: "Qs Kh Ac", 1: "9s Kd Qd", 2: "2h 7s 8c"}
    state = deal(start({0: 3 * S, 1: 2000, 2: 2000}, dealer_seat=2, rules_version=version), hands)
    state = play(state, bet(2, BET, 10 * S), PlayerLeft(2), bet(1, CALL, 10 * S), bet(0, ALL_IN, 2 * S))
    assert lieng.settle(end(state)).nets == {0: 6 * S, 1: 5 * S, 2: -11 * S}


def test_leaving_is_a_disconnect_gen_6_and_reconnecting_does_not_unfold() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), SAP_RUN_NINE)
    state = play(state, PlayerLeft(2), PlayerDisconnected(1), PlayerReconnected(1))
    assert lieng.pending(state).finished
    assert lieng.settle(end(state)).nets == {0: 2 * S, 1: -S, 2: -S}


def test_a_rejected_action_leaves_the_state_unchanged() -> None:
    state = deal(start({0: 1000, 1: 1000}), {0: "As Ac Ad", 1: "3h 4s 5c"})
    before = snapshot(state)
    for body, code in (
        (bet(1, CHECK), "NOT_YOUR_TURN"),
        (bet(0, CALL, S), "BAD_BET_KIND"),
        (bet(7, CHECK), "UNKNOWN_SEAT"),
        (TimerExpired(0, "flip"), "WRONG_TIMER"),
        (HandEnded(SEED_HEX), "HAND_NOT_OVER"),
    ):
        with pytest.raises(RuleViolation) as err:
            lieng.apply(state, body)
        assert err.value.code == code
    assert snapshot(state) == before


# --- who acts first (LI-4) and the fee (GEN-1) ---------------------------------------------


def test_the_owner_acts_first_in_the_first_hand_then_the_previous_winner() -> None:
    assert base.choose_dealer(lieng, None, None, [0, 1, 2], 3, 1) == 1
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), {0: "9s Kh Qd", 1: "3h 4s 5c", 2: "2h 7s 8c"})
    state = end(play(state, bet(0, CHECK), bet(2, CHECK), bet(1, CHECK)))
    assert lieng.winner(state) == 1
    assert base.choose_dealer(lieng, state, 0, [0, 1, 2], 3, 0) == 1
    assert base.choose_dealer(lieng, state, 0, [0, 2], 3, 0) == 0  # the winner left: the owner


def test_the_fee_is_charged_on_the_net_win_only() -> None:
    state = deal(start({0: 1000, 1: 1000}, fee_bps=500), {0: "As Ac Ad", 1: "3h 4s 5c"})
    settlement = lieng.settle(end(play(state, bet(0, CHECK), bet(1, CHECK))))
    assert settlement.fees_gold() == 5
    assert settlement.nets == {0: 95, 1: -S}


def test_a_deal_out_of_turn_short_or_face_up_is_refused_as_wrong_deal() -> None:
    state = play(start({0: 1000, 1: 1000, 2: 1000}))
    slots = deal_three_face_down([s for s in state.order if s not in state.folded])
    deck = parse_cards("As Ac Ad 3h 4s 5c 9s Kh Qd")
    right = tuple(DealtCard(slot.seat, deck[i], False) for i, slot in enumerate(slots))
    swapped = (right[1], right[0], *right[2:])
    face_up = (DealtCard(right[0].seat, right[0].card, True), *right[1:])
    for cards in (swapped, right[:-1], face_up):
        with pytest.raises(RuleViolation) as err:
            lieng.apply(state, CardsDealt(cards))
        assert err.value.code == "WRONG_DEAL"
    assert lieng.apply(state, CardsDealt(right)) != state  # the right deal is taken
