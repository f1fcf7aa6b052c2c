"""Xì Tố: dealing order, betting rounds, side pots and settlement (RULES.md §3).

Hand-value comparisons are in ``test_xito_hand_value.py``; random-play properties in
``test_xito_properties.py``. Seats are numbered clockwise, so counterclockwise play goes
to lower seat numbers.
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
    TimerExpired,
)
from socai.rules import registry
from socai.rules.base import DealSlot
from socai.rules.poker import xito
from tests.support.snapshot import snapshot

STAKE = 1000
SEED_HEX = "00" * 32

CHECK, CALL, BET, RAISE, FOLD, ALL_IN = (
    ActionKind.CHECK,
    ActionKind.CALL,
    ActionKind.BET,
    ActionKind.RAISE,
    ActionKind.FOLD,
    ActionKind.ALL_IN,
)

# Seat 0 ends with three aces, seat 1 with three kings (hole card second, XT-3).
ACES_VS_KINGS = {0: "Ah Ad Ac 8s 9d", 1: "Ks Kd Kc 8c 9c"}


# --- helpers ------------------------------------------------------------------------------


def start(
    stacks: dict[int, int],
    *,
    dealer_seat: int = 0,
    seats_max: int = 5,
    stake_gold: int = STAKE,
    fee_bps: int = 0,
    **options: str,
) -> xito.State:
    """A hand with ``stacks`` (seat → chips); options as HandStarted strings."""
    seats = tuple(SeatInfo(seat, f"p{seat}", stack) for seat, stack in sorted(stacks.items()))
    started = HandStarted(
        table_id="t1",
        hand_id="h1",
        game="xito",
        hand_number=1,
        stake_gold=stake_gold,
        fee_bps=fee_bps,
        seats_max=seats_max,
        seats=seats,
        dealer_seat=dealer_seat,
        deck_commitment="c" * 64,
        options=options,
    )
    return xito.initial_state(started)


def deal_next(state: xito.State, hands: dict[int, str]) -> xito.State:
    """Deal the pending slots, each seat getting the next card of its ``hands`` list."""
    slots = xito.pending(state).deal
    assert slots, "no deal is pending"
    given: dict[int, int] = {}
    dealt = []
    for slot in slots:
        index = len(state.hands[slot.seat]) + given.get(slot.seat, 0)
        given[slot.seat] = given.get(slot.seat, 0) + 1
        dealt.append(DealtCard(slot.seat, parse_cards(hands[slot.seat])[index], slot.face_up))
    return xito.apply(state, CardsDealt(tuple(dealt)))


def act(state: xito.State, seat: int, kind: ActionKind, amount_gold: int = 0) -> xito.State:
    return xito.apply(state, BetAction(seat, kind, amount_gold))


def check_around(state: xito.State) -> xito.State:
    """Every seat to act checks until the betting round closes."""
    betting_round = state.betting_round
    while state.phase == xito.BETTING and state.betting_round == betting_round:
        assert state.to_act is not None
        state = act(state, state.to_act, CHECK)
    return state


def to_round(state: xito.State, hands: dict[int, str], betting_round: int) -> xito.State:
    """Deal and check through to the start of ``betting_round`` (auto-follow hands)."""
    state = deal_next(state, hands)
    while state.betting_round < betting_round:
        state = check_around(state)
        state = deal_next(state, hands)
    assert state.phase == xito.BETTING and state.betting_round == betting_round
    return state


def finish(state: xito.State) -> xito.State:
    return xito.apply(state, HandEnded(SEED_HEX))


def assert_rejected(state: xito.State, body: Body, code: str) -> None:
    """``body`` raises RuleViolation(code) and leaves ``state`` exactly as it was."""
    before = snapshot(state)
    with pytest.raises(RuleViolation) as caught:
        xito.apply(state, body)
    assert caught.value.code == code
    assert snapshot(state) == before


# --- the module contract --------------------------------------------------------------------


def test_registry_serves_xito_with_its_spec() -> None:
    module = registry.get("xito")
    assert module is xito
    assert xito.SPEC.players_min == 2 and xito.SPEC.players_max == 5
    assert xito.SPEC.deck == "xito" and xito.SPEC.direction == "counterclockwise"
    assert xito.SPEC.default_fee_bps == 0


def test_options_default_to_the_rules_md_decisions() -> None:
    options = start({0: 5000, 1: 5000}).options
    assert options == xito.Options(
        auto_follow_2=False,
        hidden_5th=False,
        tay_max=False,
        straight_flush_lower_wins=True,
        deal_order="combo",
        round3_4_max_bet_stakes=1,
        round1_bet_bps=500,
        round2_bet_bps=1000,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [("deal_order", "random"), ("tay_max", "yes"), ("round3_4_max_bet_stakes", "0"), ("nonsense", "1")],
)
def test_bad_option_is_rejected(name: str, value: str) -> None:
    with pytest.raises(RuleViolation) as caught:
        start({0: 5000, 1: 5000}, **{name: value})
    assert caught.value.code == "BAD_OPTION"


def test_one_player_or_six_players_cannot_start() -> None:
    for stacks in ({0: 5000}, {s: 5000 for s in range(6)}):
        with pytest.raises(RuleViolation) as caught:
            start(stacks, seats_max=6)
        assert caught.value.code == "BAD_SEAT_COUNT"


# --- dealing ----------------------------------------------------------------------------


def test_card_1_face_up_and_card_2_face_down_counterclockwise_from_the_first_dealt_seat() -> None:
    state = start({0: 5000, 2: 5000, 3: 5000}, dealer_seat=2)
    assert xito.pending(state).deal == (
        DealSlot(2, True),
        DealSlot(0, True),
        DealSlot(3, True),
        DealSlot(2, False),
        DealSlot(0, False),
        DealSlot(3, False),
    )


def test_worked_dealing_example_card_3_to_b_card_4_to_b_card_5_to_a() -> None:
    """RULES.md 3.1: A [hole] 9♣ 9♦ Q♥ vs B [hole] 10♠ 10♥ J♠."""
    a, b = 0, 1
    hands = {a: "9c 8h 9d Qh Ah", b: "Ts 8d Th Js Kd"}
    state = start({a: 5000, b: 5000}, seats_max=2, auto_follow_2="true")
    state = deal_next(state, hands)
    # Card 3 first to B: 10♠ beats 9♣.
    assert [slot.seat for slot in xito.pending(state).deal] == [b, a]
    state = deal_next(state, hands)
    # B's 10♥ pairs 10♠; A's 9♦ pairs 9♣: B opens round 2 and gets card 4 first.
    assert state.to_act == b
    state = check_around(state)
    assert [slot.seat for slot in xito.pending(state).deal] == [b, a]
    state = deal_next(state, hands)
    # A: Q♥ with 9♣ or 9♦ is Q-high; B: J♠ with 10♠ or 10♥ is J-high. A opens and gets card 5 first,
    # although B's exposed pair of 10s beats A's exposed pair of 9s (XT-4).
    assert state.to_act == a
    state = check_around(state)
    assert [slot.seat for slot in xito.pending(state).deal] == [a, b]


def test_worked_example_under_the_exposed_deal_order_gives_card_5_to_b() -> None:
    """The conventional alternative (deal_order=exposed): B's 10♠ 10♥ J♠ beats A's 9♣ 9♦ Q♥."""
    a, b = 0, 1
    hands = {a: "9c 8h 9d Qh Ah", b: "Ts 8d Th Js Kd"}
    state = start({a: 5000, b: 5000}, seats_max=2, auto_follow_2="true", deal_order="exposed")
    state = to_round(state, hands, 3)
    assert state.to_act == b
    state = check_around(state)
    assert [slot.seat for slot in xito.pending(state).deal] == [b, a]


def test_round_1_opens_with_the_highest_face_up_card_and_hearts_break_equal_ranks() -> None:
    # K♦ at seat 0, K♥ at seat 3, Q♠ at seat 4: K♥ is highest (♥ > ♦).
    state = start({0: 5000, 3: 5000, 4: 5000})
    state = deal_next(state, {0: "Kd 8s", 3: "Kh 8c", 4: "Qs 8d"})
    assert state.betting_round == 1 and state.to_act == 3
    # Then counterclockwise: 3 → 0 → 4.
    state = act(state, 3, CALL, 50)
    assert state.to_act == 0
    state = act(state, 0, CALL, 50)
    assert state.to_act == 4


def test_equal_best_combinations_go_to_the_suit_of_the_highest_card() -> None:
    """XT-18: seat 0 shows A♣ then Q♥ (A-Q), seat 1 shows A♠ then Q♦ (A-Q): ♣ beats ♠."""
    hands = {0: "Ac 8h Qh 9s 9h", 1: "As 8d Qd Ts Th"}
    state = start({0: 5000, 1: 5000}, seats_max=2, dealer_seat=1, auto_follow_2="true")
    state = to_round(state, hands, 2)
    assert state.to_act == 0
    state = check_around(state)
    assert [slot.seat for slot in xito.pending(state).deal] == [0, 1]


def test_a_folded_player_gets_no_more_cards() -> None:
    state = start({0: 5000, 1: 5000, 2: 5000}, seats_max=3)
    hands = {0: "Ah Ad Ac 8s 9d", 1: "Ks Kd Kc 8c 9c", 2: "Qs Qd Qc 8h 9h"}
    state = deal_next(state, hands)
    state = act(state, 0, CALL, 50)  # A♥ opens
    state = act(state, 2, FOLD)
    state = act(state, 1, CALL, 50)
    assert {slot.seat for slot in xito.pending(state).deal} == {0, 1}


def test_a_wrong_deal_is_rejected() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = deal_next(state, ACES_VS_KINGS)
    # Card 3 is due to seat 0 (A♥) first, face up.
    swapped = CardsDealt((DealtCard(1, parse_cards("Kc")[0], True), DealtCard(0, parse_cards("Ac")[0], True)))
    assert_rejected(state, swapped, "WRONG_DEAL")
    face_down = CardsDealt((DealtCard(0, parse_cards("Ac")[0], False), DealtCard(1, parse_cards("Kc")[0], True)))
    assert_rejected(state, face_down, "WRONG_DEAL")
    twice = CardsDealt((DealtCard(0, parse_cards("Ah")[0], True), DealtCard(1, parse_cards("Kc")[0], True)))
    assert_rejected(state, twice, "DUPLICATE_CARD")
    small = CardsDealt((DealtCard(0, parse_cards("7h")[0], True), DealtCard(1, parse_cards("Kc")[0], True)))
    assert_rejected(state, small, "BAD_CARD")
    state = deal_next(state, ACES_VS_KINGS)
    assert_rejected(state, CardsDealt(()), "WRONG_DEAL")  # betting, no cards due


# --- round 1: the forced 5 % --------------------------------------------------------------


def test_auto_follow_posts_five_percent_of_the_stake_for_everyone() -> None:
    state = start({0: 5000, 1: 5000, 2: 5000}, seats_max=3, auto_follow_2="true")
    state = deal_next(state, {0: "Ah Ad", 1: "Ks Kd", 2: "Qs Qd"})
    assert state.put_in_gold == {0: 50, 1: 50, 2: 50}
    assert xito.pending(state).deal  # straight on to card 3, nobody is asked


def test_without_auto_follow_each_player_confirms_the_five_percent_as_a_call() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2)
    state = deal_next(state, ACES_VS_KINGS)
    assert xito.pending(state).to_act == (0,)
    assert {a.kind for a in xito.legal_actions(state, 0)} == {"call", "fold"}
    assert_rejected(state, BetAction(0, CALL, 100), "BAD_AMOUNT")
    assert_rejected(state, BetAction(0, BET, 50), "BAD_BET_KIND")
    state = act(state, 0, CALL, 50)
    state = act(state, 1, CALL, 50)
    assert state.put_in_gold == {0: 50, 1: 50}
    assert xito.pending(state).deal


def test_not_confirming_the_forced_bet_in_time_is_a_fold() -> None:
    state = start({0: 5000, 1: 5000, 2: 5000}, seats_max=3)
    state = deal_next(state, {0: "Ah Ad", 1: "Ks Kd", 2: "Qs Qd"})
    state = xito.apply(state, TimerExpired(0, "turn"))
    assert 0 in state.folded
    state = act(state, 2, FOLD)  # declining is a fold too
    assert state.phase == xito.PLAY_OVER
    assert xito.winner(state) == 1


def test_the_five_percent_rounds_down_to_whole_gold() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, stake_gold=39, auto_follow_2="true")
    state = deal_next(state, ACES_VS_KINGS)
    assert state.put_in_gold == {0: 1, 1: 1}  # 39 × 500 // 10000 = 1


# --- round 2: exactly 10 % --------------------------------------------------------------


def test_round_2_bets_and_raises_are_exactly_ten_percent_of_the_stake() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = to_round(state, ACES_VS_KINGS, 2)
    assert state.to_act == 0
    assert_rejected(state, BetAction(0, BET, 99), "BET_TOO_SMALL")
    assert_rejected(state, BetAction(0, BET, 101), "BET_TOO_LARGE")
    state = act(state, 0, BET, 100)
    assert_rejected(state, BetAction(1, RAISE, 150), "RAISE_TOO_SMALL")
    assert_rejected(state, BetAction(1, RAISE, 300), "RAISE_TOO_LARGE")
    state = act(state, 1, RAISE, 200)  # call 100 + raise 100
    state = act(state, 0, RAISE, 200)  # unlimited raises (XT-11)
    state = act(state, 1, CALL, 100)
    assert state.put_in_gold == {0: 350, 1: 350}
    assert xito.pending(state).deal  # the round closed when both matched


def test_tay_max_keeps_round_2_at_ten_percent_and_forbids_all_in() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true", tay_max="true")
    state = to_round(state, ACES_VS_KINGS, 2)
    assert_rejected(state, BetAction(0, ALL_IN, 4950), "ALL_IN_NOT_ALLOWED")
    assert_rejected(state, BetAction(0, BET, 500), "BET_TOO_LARGE")


# --- rounds 3 and 4: free amounts up to the cap ---------------------------------------------


def test_round_3_bets_are_free_amounts_up_to_one_stake() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = to_round(state, ACES_VS_KINGS, 3)
    assert_rejected(state, BetAction(0, BET, 0), "BET_TOO_SMALL")
    assert_rejected(state, BetAction(0, BET, 1001), "BET_TOO_LARGE")
    state = act(state, 0, BET, 1)
    assert_rejected(state, BetAction(1, RAISE, 1002), "RAISE_TOO_LARGE")
    state = act(state, 1, RAISE, 1001)  # call 1 + raise 1000
    assert state.put_in_gold[1] == 50 + 1001


def test_round_3_4_cap_is_configurable_in_stakes() -> None:
    state = start({0: 9000, 1: 9000}, seats_max=2, auto_follow_2="true", round3_4_max_bet_stakes="3")
    state = to_round(state, ACES_VS_KINGS, 4)
    assert_rejected(state, BetAction(0, BET, 3001), "BET_TOO_LARGE")
    state = act(state, 0, BET, 3000)
    assert state.round_put_in_gold[0] == 3000


def test_a_bet_above_the_stack_is_rejected() -> None:
    state = start({0: 600, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = to_round(state, ACES_VS_KINGS, 3)
    assert_rejected(state, BetAction(0, BET, 700), "BET_ABOVE_STACK")


def test_a_voluntary_all_in_is_not_allowed_without_tay_max() -> None:
    state = start({0: 600, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = to_round(state, ACES_VS_KINGS, 3)
    # 550 chips left and a cap of 1000: betting all 550 would still be a voluntary all-in.
    assert_rejected(state, BetAction(0, ALL_IN, 550), "ALL_IN_NOT_ALLOWED")
    assert_rejected(state, BetAction(0, BET, 550), "ALL_IN_NOT_ALLOWED")
    bet = next(a for a in xito.legal_actions(state, 0) if a.kind == "bet")
    assert (bet.min_gold, bet.max_gold) == (1, 549)


def test_tay_max_allows_all_in_from_card_4_and_not_before() -> None:
    state = start({0: 5000, 1: 8000}, seats_max=2, auto_follow_2="true", tay_max="true")
    state = to_round(state, ACES_VS_KINGS, 2)
    assert "all_in" not in {a.kind for a in xito.legal_actions(state, 0)}
    state = check_around(state)
    state = deal_next(state, ACES_VS_KINGS)  # card 4
    assert state.betting_round == 3
    assert "all_in" in {a.kind for a in xito.legal_actions(state, 0)}
    state = act(state, 0, ALL_IN, 4950)
    state = act(state, 1, RAISE, 7950)  # raises above the cap are free under Tẩy Max
    assert state.put_in_gold == {0: 5000, 1: 8000}
    state = finish(deal_next(state, ACES_VS_KINGS))  # card 5 dealt with nobody left to bet
    settlement = xito.settle(state)
    # Three aces win the 10,000 both matched; seat 1's unmatched 3,000 is a side pot only it
    # can win, so it stays with seat 1.
    assert settlement.nets == {0: 5000, 1: -5000}
    assert settlement.by_reason() == {"pot": 5000}


# --- short stacks and side pots ------------------------------------------------------------


def test_short_stack_call_puts_in_everything_and_wins_only_the_part_it_matched() -> None:
    """RULES.md 3.3: A (120 chips) calls B's 100 with the 70 it has left; C calls too.
    The main pot is 3 × 120; B and C play for the rest, and A's trips aces take only the main pot."""
    a, b, c = 0, 4, 3
    hands = {a: "Ah Ad Ac 8s 9d", b: "Ks Kd Kc 8c 9c", c: "Qs Qd Qc 8d 9h"}
    state = start({a: 120, b: 5000, c: 5000}, auto_follow_2="true")
    state = to_round(state, hands, 2)
    assert state.to_act == a
    state = act(state, a, CHECK)
    state = act(state, b, BET, 100)
    state = act(state, c, CALL, 100)
    assert_rejected(state, BetAction(a, CALL, 100), "BAD_AMOUNT")
    state = act(state, a, CALL, 70)  # short: everything it has
    assert state.put_in_gold == {a: 120, b: 150, c: 150}
    state = deal_next(state, hands)  # the all-in player still gets card 4
    assert len(state.hands[a]) == 4
    assert state.to_act == b  # A ranks first but is all-in, so B opens
    state = act(state, b, BET, 1000)
    state = act(state, c, CALL, 1000)
    state = deal_next(state, hands)
    state = check_around(state)
    settlement = xito.settle(finish(state))
    assert settlement.nets == {a: 3 * 120 - 120, b: 2 * 1030 - 1150, c: -1150}
    assert settlement.by_reason() == {"pot": 240, "side_pot": 1030}
    assert xito.first_seat_next_hand(finish(state)) == a


def test_timer_checks_when_free_and_folds_when_facing_a_bet() -> None:
    state = start({0: 5000, 1: 5000, 2: 5000}, seats_max=3, auto_follow_2="true")
    hands = {0: "Ah Ad Ac 8s 9d", 1: "Ks Kd Kc 8c 9c", 2: "Qs Qd Qc 8d 9h"}
    state = to_round(state, hands, 2)
    state = xito.apply(state, TimerExpired(0, "turn"))
    assert 0 not in state.folded and 0 in state.acted
    state = act(state, 2, BET, 100)
    state = xito.apply(state, PlayerDisconnected(1))
    state = xito.apply(state, TimerExpired(1, "turn"))
    assert 1 in state.folded


def test_a_timer_for_another_seat_or_another_timer_is_rejected() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = to_round(state, ACES_VS_KINGS, 2)
    assert_rejected(state, TimerExpired(1, "turn"), "NOT_YOUR_TURN")
    assert_rejected(state, TimerExpired(0, "flip"), "WRONG_TIMER")


def test_leaving_is_a_fold_and_forfeits_the_chips_in_the_pot() -> None:
    state = start({0: 5000, 1: 5000, 2: 5000}, seats_max=3, auto_follow_2="true")
    hands = {0: "Ah Ad Ac 8s 9d", 1: "Ks Kd Kc 8c 9c", 2: "Qs Qd Qc 8d 9h"}
    state = to_round(state, hands, 2)
    state = act(state, 0, BET, 100)
    state = xito.apply(state, PlayerLeft(1))  # out of turn: seat 2 is to act
    assert 1 in state.folded and state.to_act == 2
    state = act(state, 2, CALL, 100)
    state = xito.apply(state, PlayerLeft(2))  # in the deal: the last other player leaves
    assert state.phase == xito.PLAY_OVER
    settlement = xito.settle(finish(state))
    assert settlement.nets == {0: 50 + 150, 1: -50, 2: -150}


def test_the_last_player_standing_wins_without_a_showdown() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = to_round(state, ACES_VS_KINGS, 3)
    state = act(state, 0, BET, 500)
    state = act(state, 1, FOLD)
    assert xito.pending(state).finished and not xito.is_finished(state)
    settlement = xito.settle(finish(state))
    # Seat 1 loses only its forced 50; seat 0's 500 bet was never called.
    assert settlement.nets == {0: 50, 1: -50}
    assert xito.first_seat_next_hand(settlement) == 0


def test_showdown_gives_the_pot_to_the_best_hand_and_charges_the_fee_on_the_net_win() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true", fee_bps=500)
    state = to_round(state, ACES_VS_KINGS, 4)
    state = act(state, 0, BET, 1000)
    state = act(state, 1, CALL, 1000)
    assert xito.pending(state).finished
    settlement = xito.settle(finish(state))
    assert settlement.fees_gold() == 1050 * 500 // 10000
    assert settlement.nets == {0: 1050 - 52, 1: -1050}
    assert xito.first_seat_next_hand(settlement) == 0


def test_lower_straight_flush_wins_the_pot_unless_the_flag_is_off() -> None:
    hands = {0: "8h 9h Th Jh Qh", 1: "9c Tc Jc Qc Kc"}
    for lower_wins, winner in (("true", 0), ("false", 1)):
        state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true", straight_flush_lower_wins=lower_wins)
        state = to_round(state, hands, 4)
        state = finish(check_around(state))
        assert xito.winner(state) == winner
        assert xito.settle(state).nets[winner] == 50


def test_hidden_fifth_card_is_dealt_face_down_and_round_4_keeps_the_order_after_card_4() -> None:
    # After card 4 seat 1 ranks first (K♣ with K♠ makes a pair); card 5 would make seat 0's
    # pair of aces show, but it is hidden, so seat 1 still opens round 4.
    hands = {0: "Ah 8h 9d Td Ad", 1: "Ks 8d 9c Kc Qs"}
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true", hidden_5th="true")
    state = to_round(state, hands, 3)
    assert state.to_act == 1
    state = check_around(state)
    assert xito.pending(state).deal == (DealSlot(1, False), DealSlot(0, False))
    state = deal_next(state, hands)
    assert state.betting_round == 4 and state.to_act == 1
    assert not state.hands[0][4].face_up
    state = finish(check_around(state))
    assert xito.winner(state) == 0  # the hidden cards count at showdown


def test_a_round_with_every_other_player_all_in_deals_on_without_betting() -> None:
    state = start({0: 100, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = to_round(state, ACES_VS_KINGS, 2)
    state = act(state, 0, CHECK)
    state = act(state, 1, BET, 100)
    state = act(state, 0, CALL, 50)  # seat 0 is all-in
    state = deal_next(state, ACES_VS_KINGS)
    assert xito.pending(state).deal  # round 3 skipped: nobody to bet against
    state = deal_next(state, ACES_VS_KINGS)
    assert xito.pending(state).finished
    settlement = xito.settle(finish(state))
    assert settlement.nets == {0: 100, 1: -100}
    assert settlement.by_reason() == {"pot": 100}


# --- illegal actions ----------------------------------------------------------------------


@pytest.fixture
def round_2() -> xito.State:
    """Seat 0 (A♥ A♣ showing) to open round 2 against seat 1; seat 2 (Q♠ Q♣) between."""
    state = start({0: 5000, 1: 5000, 2: 5000}, seats_max=3, auto_follow_2="true")
    hands = {0: "Ah Ad Ac 8s 9d", 1: "Ks Kd Kc 8c 9c", 2: "Qs Qd Qc 8d 9h"}
    return to_round(state, hands, 2)


def test_acting_out_of_turn_is_rejected(round_2: xito.State) -> None:
    assert round_2.to_act == 0
    assert_rejected(round_2, BetAction(1, CHECK), "NOT_YOUR_TURN")


def test_acting_for_an_unknown_seat_is_rejected(round_2: xito.State) -> None:
    assert_rejected(round_2, BetAction(7, CHECK), "UNKNOWN_SEAT")
    assert_rejected(round_2, PlayerLeft(7), "UNKNOWN_SEAT")


def test_acting_after_folding_is_rejected(round_2: xito.State) -> None:
    state = act(round_2, 0, FOLD)
    assert_rejected(state, BetAction(0, CHECK), "SEAT_FOLDED")


def test_checking_facing_a_bet_and_calling_nothing_are_rejected(round_2: xito.State) -> None:
    assert_rejected(round_2, BetAction(0, CALL, 0), "BAD_BET_KIND")
    assert_rejected(round_2, BetAction(0, RAISE, 100), "BAD_BET_KIND")
    state = act(round_2, 0, BET, 100)
    assert_rejected(state, BetAction(2, CHECK), "BAD_BET_KIND")
    assert_rejected(state, BetAction(2, BET, 100), "BAD_BET_KIND")
    assert_rejected(state, BetAction(2, CALL, 50), "BAD_AMOUNT")


def test_nothing_is_accepted_after_the_hand_ended() -> None:
    state = start({0: 5000, 1: 5000}, seats_max=2, auto_follow_2="true")
    state = to_round(state, ACES_VS_KINGS, 2)
    assert_rejected(state, HandEnded(SEED_HEX), "HAND_NOT_OVER")
    with pytest.raises(RuleViolation) as caught:
        xito.settle(state)
    assert caught.value.code == "HAND_NOT_OVER"
    state = act(state, 0, FOLD)
    assert_rejected(state, BetAction(1, CHECK), "HAND_FINISHED")
    state = finish(state)
    assert xito.is_finished(state)
    assert_rejected(state, BetAction(1, CHECK), "HAND_FINISHED")
    assert_rejected(state, HandEnded(SEED_HEX), "HAND_FINISHED")


def test_legal_actions_are_empty_for_a_seat_not_to_act(round_2: xito.State) -> None:
    assert xito.legal_actions(round_2, 1) == ()
    assert xito.candidate_actions(round_2, 1) == []


def test_every_candidate_action_is_accepted(round_2: xito.State) -> None:
    candidates = xito.candidate_actions(round_2, 0)
    assert {c.kind for c in candidates if isinstance(c, BetAction)} == {CHECK, BET, FOLD}
    for body in candidates:
        xito.apply(round_2, body)
