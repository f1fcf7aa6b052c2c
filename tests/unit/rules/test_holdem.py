"""Texas Hold'em (RULES.md §1): named hands, one rule each, with the cards written out."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from socai.cards import Card, parse_cards
from socai.errors import RuleViolation
from socai.events.model import (
    COMMUNITY,
    ActionKind,
    BetAction,
    Body,
    CardsDealt,
    DealtCard,
    DiceRolled,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
)
from socai.rules import registry
from socai.rules.base import LegalAction, Settlement
from socai.rules.poker import holdem

CHECK, CALL, BET, RAISE, FOLD, ALL_IN = (
    ActionKind.CHECK,
    ActionKind.CALL,
    ActionKind.BET,
    ActionKind.RAISE,
    ActionKind.FOLD,
    ActionKind.ALL_IN,
)
SEED_HEX = "00" * 32


def started(
    stacks: Mapping[int, int],
    dealer: int,
    stake: int = 100,
    fee_bps: int = 0,
    seats_max: int = 9,
    options: Mapping[str, str] | None = None,
) -> HandStarted:
    """A hand at a table of ``seats_max`` with ``stacks`` (seat → chips); SB = stake/10."""
    seats = tuple(SeatInfo(seat, f"p{seat}", stack) for seat, stack in sorted(stacks.items()))
    return HandStarted("t1", "h1", "holdem", 1, stake, fee_bps, seats_max, seats, dealer, "c", options=options or {})


class Hand:
    """A hand driven event by event, the way the table records it."""

    def __init__(self, stacks: Mapping[int, int], dealer: int, **kwargs: object) -> None:
        self.started = started(stacks, dealer, **kwargs)  # type: ignore[arg-type]
        self.state = holdem.initial_state(self.started)
        self.bodies: list[Body] = [self.started]

    def apply(self, body: Body) -> Hand:
        self.state = holdem.apply(self.state, body)
        self.bodies.append(body)
        return self

    def hole(self, cards: Mapping[int, str]) -> Hand:
        """Deal each seat its two cards, in the order the hand asks for them."""
        given = {seat: parse_cards(text) for seat, text in cards.items()}
        slots = holdem.pending(self.state).deal
        taken: dict[int, int] = {}
        dealt = []
        for slot in slots:
            k = taken.get(slot.seat, 0)
            dealt.append(DealtCard(slot.seat, given[slot.seat][k], slot.face_up))
            taken[slot.seat] = k + 1
        return self.apply(CardsDealt(tuple(dealt)))

    def board(self, text: str) -> Hand:
        return self.apply(board_cards(text))

    def act(self, seat: int, kind: ActionKind, amount: int = 0) -> Hand:
        return self.apply(BetAction(seat, kind, amount))

    def end(self) -> Settlement:
        self.apply(HandEnded(SEED_HEX))
        return holdem.settle(self.state)

    @property
    def to_act(self) -> int | None:
        return self.state.seat_to_act

    def kinds(self, seat: int) -> dict[str, LegalAction]:
        return {a.kind: a for a in holdem.legal_actions(self.state, seat)}


def board_cards(text: str) -> CardsDealt:
    return CardsDealt(tuple(DealtCard(COMMUNITY, c, True) for c in parse_cards(text)))


def six_handed(dealer: int = 0, **kwargs: object) -> Hand:
    """Seats 0-5 with 1000 chips each; stake 100, so SB 10 and BB 20."""
    return Hand(dict.fromkeys(range(6), 1000), dealer, **kwargs)


SIX_HOLES = {0: "2c 7d", 1: "As Ad", 2: "Ks Kd", 3: "Qs Qd", 4: "Js Jd", 5: "Ts Td"}


def rejected(hand: Hand, body: Body, code: str) -> None:
    """``body`` raises RuleViolation(code) and leaves the state exactly as it was."""
    before = hand.state.snapshot()
    with pytest.raises(RuleViolation) as err:
        holdem.apply(hand.state, body)
    assert err.value.code == code, err.value
    assert hand.state.snapshot() == before


# --- the contract -----------------------------------------------------------------------


def test_holdem_is_registered_with_the_whole_contract() -> None:
    module = registry.get("holdem")
    assert module is holdem
    assert holdem.SPEC.players_min == 2 and holdem.SPEC.players_max == 9
    assert holdem.SPEC.direction == "clockwise" and holdem.SPEC.deck == "standard"


def test_options_default_to_the_rules_md_decisions() -> None:
    options = holdem.Options()
    assert options.heads_up_dealer_is_small_blind is True  # HE-4
    assert options.min_raise == "sb"  # HE-2


def test_an_unknown_or_malformed_option_is_refused() -> None:
    for options in ({"min_raise": "pot"}, {"no_such_flag": "true"}, {"heads_up_dealer_is_small_blind": "yes"}):
        with pytest.raises(RuleViolation) as err:
            holdem.initial_state(started({0: 100, 1: 100}, 0, options=options))
        assert err.value.code == "BAD_OPTION"


@pytest.mark.parametrize(
    ("start", "code"),
    [
        (started({0: 100}, 0), "BAD_SEAT_COUNT"),
        (started(dict.fromkeys(range(10), 100), 0, seats_max=10), "BAD_SEAT_COUNT"),
        (started({0: 100, 7: 100}, 0, seats_max=6), "BAD_SEATS"),
        (started({0: 100, 1: 0}, 0), "BAD_STACK"),
        (started({0: 100, 1: 100}, 0, stake=9), "BAD_STAKE"),
        (started({0: 100, 1: 100}, 0, fee_bps=1001), "BAD_FEE"),
        (started({0: 100, 1: 100}, 5), "BAD_DEALER"),
    ],
)
def test_a_bad_hand_start_is_refused(start: HandStarted, code: str) -> None:
    with pytest.raises(RuleViolation) as err:
        holdem.initial_state(start)
    assert err.value.code == code


def test_a_hand_of_another_game_is_refused() -> None:
    other = dataclasses.replace(started({0: 100, 1: 100}, 0), game="xito")
    with pytest.raises(RuleViolation) as err:
        holdem.initial_state(other)
    assert err.value.code == "WRONG_GAME"


# --- blinds, dealing, order --------------------------------------------------------------


def test_blinds_are_posted_left_of_the_dealer_at_a_tenth_and_a_fifth_of_the_stake() -> None:
    hand = six_handed(dealer=2)
    state = hand.state
    assert state.small_blind_seat == 3 and state.big_blind_seat == 4
    assert state.committed_of(3) == 10 and state.committed_of(4) == 20  # HE-1: 100/10, 2×100/10
    assert state.stack_of(3) == 990 and state.stack_of(4) == 980
    assert state.pot_gold == 30


def test_hole_cards_go_one_at_a_time_clockwise_from_the_left_of_the_dealer_twice() -> None:
    hand = six_handed(dealer=2)
    slots = holdem.pending(hand.state).deal
    assert [s.seat for s in slots] == [3, 4, 5, 0, 1, 2] * 2
    assert not any(s.face_up for s in slots)


def test_preflop_starts_left_of_the_big_blind_and_later_streets_left_of_the_dealer() -> None:
    hand = six_handed(dealer=2).hole(SIX_HOLES)
    assert hand.to_act == 5  # left of the big blind (seat 4)
    for seat in (5, 0, 1, 2, 3):
        hand.act(seat, CALL, 20 if seat != 3 else 10)
    assert hand.to_act == 4  # the big blind may still raise
    hand.act(4, CHECK)
    assert holdem.pending(hand.state).deal == tuple(holdem.DealSlot(COMMUNITY, True) for _ in range(3))
    hand.board("2h 7h 9c")
    assert hand.to_act == 3  # the first seat left of the dealer


def test_heads_up_the_dealer_posts_the_small_blind_acts_first_preflop_and_last_after() -> None:
    hand = Hand({0: 1000, 4: 1000}, dealer=4).hole({0: "As Ad", 4: "Ks Kd"})
    assert hand.state.small_blind_seat == 4 and hand.state.big_blind_seat == 0  # HE-4
    assert hand.to_act == 4
    hand.act(4, CALL, 10).act(0, CHECK).board("2h 7h 9c")
    assert hand.to_act == 0


def test_heads_up_flag_off_applies_the_general_rule_literally() -> None:
    options = {"heads_up_dealer_is_small_blind": "false"}
    hand = Hand({0: 1000, 4: 1000}, dealer=4, options=options).hole({0: "As Ad", 4: "Ks Kd"})
    assert hand.state.small_blind_seat == 0 and hand.state.big_blind_seat == 4
    assert hand.to_act == 0


def test_a_player_short_of_the_blind_posts_all_in() -> None:
    hand = Hand({0: 1000, 1: 6, 2: 15}, dealer=0)
    assert hand.state.committed_of(1) == 6 and hand.state.stack_of(1) == 0
    assert hand.state.committed_of(2) == 15 and hand.state.stack_of(2) == 0


def test_a_short_big_blind_does_not_lower_the_preflop_price() -> None:
    hand = Hand({0: 1000, 1: 1000, 2: 15, 3: 1000}, dealer=0).hole({0: "2c 7d", 1: "As Ad", 2: "Ks Kd", 3: "Qs Qd"})
    assert hand.to_act == 3
    assert hand.kinds(3)[CALL].min_gold == 20


def test_next_dealer_moves_clockwise_to_the_next_participating_seat() -> None:
    assert holdem.next_dealer(2, [0, 2, 3, 5], 6) == 3
    assert holdem.next_dealer(5, [0, 2, 3, 5], 6) == 0
    assert holdem.next_dealer(3, [0, 5], 6) == 5  # seat 4 sat out: HE-9
    assert holdem.next_dealer(0, [0], 6) == 0


# --- betting -----------------------------------------------------------------------------


def test_the_minimum_raise_increment_is_the_small_blind() -> None:
    hand = six_handed(dealer=0).hole(SIX_HOLES)
    assert hand.kinds(3)[RAISE].min_gold == 30  # to 30: the BB of 20 plus the SB of 10 (HE-2)
    rejected(hand, BetAction(3, RAISE, 29), "RAISE_TOO_SMALL")
    hand.act(3, RAISE, 30)
    assert hand.state.street_bet_of(3) == 30


def test_the_big_blind_and_last_raise_options_raise_the_minimum() -> None:
    for rule, minimum in (("bb", 40), ("last_raise", 40)):
        hand = six_handed(dealer=0, options={"min_raise": rule}).hole(SIX_HOLES)
        assert hand.kinds(3)[RAISE].min_gold == minimum
        rejected(hand, BetAction(3, RAISE, 30), "RAISE_TOO_SMALL")
    hand = six_handed(dealer=0, options={"min_raise": "last_raise"}).hole(SIX_HOLES)
    hand.act(3, RAISE, 100)  # a raise of 80 over the BB
    assert hand.kinds(4)[RAISE].min_gold == 180  # re-raise by at least 80 more


def test_the_opening_bet_after_the_flop_is_at_least_the_big_blind() -> None:
    hand = Hand({0: 1000, 1: 1000}, dealer=0).hole({0: "As Ad", 1: "Ks Kd"})
    hand.act(0, CALL, 10).act(1, CHECK).board("2h 7h 9c")
    assert hand.kinds(1)[BET].min_gold == 20
    rejected(hand, BetAction(1, BET, 19), "BET_TOO_SMALL")
    rejected(hand, BetAction(1, RAISE, 40), "BAD_BET_KIND")
    hand.act(1, BET, 20)
    rejected(hand, BetAction(0, BET, 40), "BAD_BET_KIND")


def test_nobody_may_commit_more_than_the_largest_stack_of_another_live_player() -> None:
    hand = Hand({0: 1000, 1: 300, 2: 500}, dealer=2).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd"})
    # Seat 2 (dealer) acts first; the largest other stack is seat 0's 1000: no cap for it.
    hand.act(2, CALL, 20)
    # Seat 0 (SB, 10 in) may commit at most 500 in all: seat 2's stack is the largest other.
    assert hand.kinds(0)[RAISE].max_gold == 490
    assert hand.kinds(0)[ALL_IN].min_gold == 490
    rejected(hand, BetAction(0, RAISE, 491), "ABOVE_MAX_COMMITMENT")
    hand.act(0, ALL_IN, 490)
    assert hand.state.committed_of(0) == 500 and hand.state.stack_of(0) == 500


def test_a_bet_above_the_stack_is_refused() -> None:
    hand = Hand({0: 100, 1: 1000, 2: 1000}, dealer=2).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd"})
    rejected(hand, BetAction(2, RAISE, 1001), "BET_ABOVE_STACK")


def test_an_all_in_for_less_than_a_full_raise_does_not_reopen_the_betting() -> None:
    hand = Hand({0: 1000, 1: 1000, 2: 125}, dealer=2).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd"})
    hand.act(2, CALL, 20).act(0, CALL, 10).act(1, CHECK).board("2h 7h 9c")
    hand.act(0, BET, 100).act(1, CALL, 100)
    hand.act(2, ALL_IN, 105)  # 105 on the flop: 5 more than the bet, less than the SB of 10
    assert hand.to_act == 0
    assert RAISE not in hand.kinds(0) and ALL_IN not in hand.kinds(0)
    rejected(hand, BetAction(0, RAISE, 200), "RAISE_NOT_ALLOWED")
    rejected(hand, BetAction(0, ALL_IN, 880), "RAISE_NOT_ALLOWED")
    hand.act(0, CALL, 5)
    assert hand.to_act == 1 and RAISE not in hand.kinds(1)
    hand.act(1, CALL, 5)
    assert holdem.pending(hand.state).deal  # the turn is dealt


def test_a_full_raise_after_an_incomplete_one_reopens_the_betting() -> None:
    hand = Hand({0: 1000, 1: 1000, 2: 125, 3: 1000}, dealer=3).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd", 3: "Js Jd"})
    hand.act(2, CALL, 20).act(3, CALL, 20).act(0, CALL, 10).act(1, CHECK).board("2h 7h 9c")
    hand.act(0, BET, 100).act(1, CALL, 100).act(2, ALL_IN, 105)
    hand.act(3, RAISE, 200)  # to 200: a full raise over 105
    assert RAISE in hand.kinds(0)


def test_a_street_ends_when_everyone_still_able_to_act_has_matched_and_acted() -> None:
    hand = six_handed(dealer=0).hole(SIX_HOLES)
    hand.act(3, RAISE, 60).act(4, CALL, 60).act(5, FOLD).act(0, FOLD).act(1, CALL, 50)
    assert hand.to_act == 2  # the big blind still owes 40
    hand.act(2, CALL, 40)
    assert holdem.pending(hand.state).deal
    hand.board("2h 7h 9c")
    assert hand.to_act == 1


def test_when_at_most_one_player_can_act_the_rest_of_the_board_is_dealt_without_betting() -> None:
    hand = Hand({0: 1000, 1: 300, 2: 1000}, dealer=2).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd"})
    hand.act(2, FOLD).act(0, ALL_IN, 290).act(1, CALL, 280)
    assert [len(holdem.pending(hand.state).deal)] == [3]
    hand.board("2h 7h 9c")
    assert len(holdem.pending(hand.state).deal) == 1
    hand.board("3d")
    hand.board("4c")
    assert holdem.pending(hand.state).finished
    settlement = hand.end()
    assert settlement.nets == {0: 300, 1: -300, 2: 0}


def test_a_lone_big_blind_facing_no_more_chips_is_not_asked_to_act() -> None:
    hand = Hand({0: 1000, 1: 1000, 2: 15}, dealer=2).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd"})
    hand.act(2, ALL_IN, 15).act(0, FOLD)
    assert holdem.pending(hand.state).deal  # the big blind already covers the 15


def test_check_call_and_fold_amounts_are_checked() -> None:
    hand = six_handed(dealer=0).hole(SIX_HOLES)
    rejected(hand, BetAction(3, CHECK), "CANNOT_CHECK")
    rejected(hand, BetAction(3, CALL, 10), "WRONG_CALL_AMOUNT")
    rejected(hand, BetAction(3, CALL, 21), "WRONG_CALL_AMOUNT")
    rejected(hand, BetAction(3, FOLD, 5), "BAD_AMOUNT")
    rejected(hand, BetAction(3, CALL, -20), "BAD_AMOUNT")
    rejected(hand, BetAction(3, ALL_IN, 999), "BAD_AMOUNT")
    rejected(hand, BetAction(3, "shove", 1000), "BAD_BET_KIND")  # type: ignore[arg-type]
    hand.act(3, CALL, 20).act(4, CALL, 20).act(5, CALL, 20).act(0, CALL, 20).act(1, CALL, 10)
    rejected(hand, BetAction(2, CALL, 0), "NOTHING_TO_CALL")
    rejected(hand, BetAction(2, CHECK, 5), "BAD_AMOUNT")


def test_acting_out_of_turn_after_folding_or_from_an_unknown_seat_is_refused() -> None:
    hand = six_handed(dealer=0)
    rejected(hand, BetAction(3, CALL, 20), "NOT_YOUR_TURN")  # the hole cards are not dealt yet
    hand.hole(SIX_HOLES)
    rejected(hand, BetAction(4, CALL, 20), "NOT_YOUR_TURN")
    rejected(hand, BetAction(7, CALL, 20), "UNKNOWN_SEAT")
    hand.act(3, FOLD)
    rejected(hand, BetAction(3, CALL, 20), "SEAT_FOLDED")
    rejected(hand, TimerExpired(5, "turn"), "NOT_YOUR_TURN")
    rejected(hand, TimerExpired(4, "flip"), "WRONG_TIMER")
    rejected(hand, PlayerLeft(8), "UNKNOWN_SEAT")


def test_a_deal_that_is_not_the_one_pending_is_refused() -> None:
    hand = six_handed(dealer=0)
    right = [DealtCard(s.seat, c, s.face_up) for s, c in zip(holdem.pending(hand.state).deal, _cards(12), strict=True)]
    rejected(hand, CardsDealt(tuple(right[:11])), "WRONG_DEAL")  # a card short
    rejected(hand, CardsDealt(tuple(reversed(right))), "WRONG_DEAL")  # wrong seats
    face_up = [DealtCard(d.seat, d.card, True) for d in right]
    rejected(hand, CardsDealt(tuple(face_up)), "WRONG_DEAL")
    twice = [*right[:11], DealtCard(right[11].seat, right[0].card, False)]
    rejected(hand, CardsDealt(tuple(twice)), "WRONG_DEAL")
    rejected(hand, board_cards("2h 3h 4h"), "WRONG_DEAL")
    hand.apply(CardsDealt(tuple(right)))
    rejected(hand, board_cards("5h 6h 7h"), "WRONG_DEAL")  # a player must act first
    hand.act(3, FOLD).act(4, FOLD).act(5, FOLD).act(0, FOLD).act(1, CALL, 10).act(2, CHECK)
    rejected(hand, board_cards(str(right[0].card) + " 6h 7h"), "WRONG_DEAL")  # already dealt
    rejected(hand, board_cards("5h 6h"), "WRONG_DEAL")
    rejected(hand, CardsDealt(tuple(DealtCard(0, c, True) for c in parse_cards("5h 6h 7h"))), "WRONG_DEAL")


def _cards(n: int) -> list[Card]:
    return parse_cards("As Ks Qs Js Ts 9s 8s 7s 6s 5s 4s 3s 2s")[:n]


def test_nothing_is_taken_after_the_hand_is_over_and_settle_waits_for_hand_ended() -> None:
    hand = Hand({0: 1000, 1: 1000}, dealer=0).hole({0: "As Ad", 1: "Ks Kd"})
    rejected(hand, HandEnded(SEED_HEX), "HAND_NOT_OVER")
    hand.act(0, FOLD)
    with pytest.raises(RuleViolation) as err:
        holdem.settle(hand.state)
    assert err.value.code == "HAND_NOT_OVER"
    rejected(hand, BetAction(1, CHECK), "HAND_FINISHED")
    rejected(hand, board_cards("2h 3h 4h"), "HAND_FINISHED")
    hand.apply(HandEnded(SEED_HEX))
    for body in (
        BetAction(1, CHECK),
        HandEnded(SEED_HEX),
        PlayerLeft(1),
        PlayerDisconnected(0),
        TimerExpired(1, "turn"),
    ):
        rejected(hand, body, "HAND_FINISHED")
    assert holdem.is_finished(hand.state)


def test_an_event_of_another_game_is_refused() -> None:
    hand = six_handed()
    rejected(hand, DiceRolled((1, 2, 3)), "UNEXPECTED_EVENT")
    rejected(hand, hand.started, "UNEXPECTED_EVENT")


# --- timeouts, disconnects, leaving (HE-10) ----------------------------------------------


def test_a_disconnected_player_is_checked_for_when_a_check_is_free() -> None:
    hand = Hand({0: 1000, 1: 1000}, dealer=0).hole({0: "As Ad", 1: "Ks Kd"})
    hand.act(0, CALL, 10).apply(PlayerDisconnected(1))
    assert hand.state.is_disconnected(1)
    hand.apply(TimerExpired(1, "turn"))
    assert not hand.state.is_folded(1)
    assert holdem.pending(hand.state).deal  # the big blind checked: the flop comes


def test_a_disconnected_player_facing_a_bet_is_folded_when_the_timer_runs_out() -> None:
    hand = Hand({0: 1000, 1: 1000, 2: 1000}, dealer=0).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd"})
    hand.apply(PlayerDisconnected(0)).act(0, RAISE, 60)  # a queued action still counts
    hand.apply(TimerExpired(1, "turn"))
    assert hand.state.is_folded(1)
    hand.apply(PlayerReconnected(0))
    assert not hand.state.is_disconnected(0)


def test_leaving_out_of_turn_is_an_immediate_fold_and_the_chips_stay_in() -> None:
    hand = six_handed(dealer=0).hole(SIX_HOLES)
    hand.act(3, RAISE, 100).apply(PlayerLeft(1))  # the small blind leaves while seat 4 is to act
    assert hand.state.is_folded(1) and hand.to_act == 4
    for seat in (4, 5, 0):
        hand.act(seat, FOLD)
    hand.act(2, FOLD)
    settlement = hand.end()
    assert settlement.nets[1] == -10 and settlement.nets[2] == -20 and settlement.nets[3] == 30


def test_leaving_on_your_turn_is_a_fold_and_the_last_player_wins_without_showdown() -> None:
    hand = Hand({0: 1000, 1: 1000}, dealer=0).hole({0: "2c 7d", 1: "As Ad"})
    hand.act(0, CALL, 10).act(1, CHECK).board("Ah Ac 9d")
    hand.act(1, BET, 100).apply(PlayerLeft(0))
    assert holdem.pending(hand.state).finished
    settlement = hand.end()
    assert settlement.nets == {0: -20, 1: 20}  # the unmatched bet of 100 goes back


def test_an_all_in_player_who_leaves_folds_too() -> None:
    hand = Hand({0: 100, 1: 1000, 2: 1000}, dealer=2).hole({0: "As Ad", 1: "Ks Kd", 2: "7c 2d"})
    hand.act(2, CALL, 20).act(0, ALL_IN, 90).act(1, CALL, 80).act(2, CALL, 80)
    hand.apply(PlayerLeft(0))
    for street in ("2h 7h 9c", "3d", "4c"):
        hand.board(street).act(1, CHECK).act(2, CHECK)
    settlement = hand.end()
    assert settlement.nets == {0: -100, 1: -100, 2: 200}  # 7-2 beats kings, the aces left


# --- showdown and pots -------------------------------------------------------------------


def play_to_showdown(
    stacks: dict[int, int], dealer: int, holes: dict[int, str], board: str, **kw: object
) -> Settlement:
    """Everyone calls pre-flop and checks down."""
    hand = Hand(stacks, dealer, **kw).hole(holes)
    while hand.to_act is not None:
        seat = hand.to_act
        kinds = hand.kinds(seat)
        hand.act(seat, CALL, kinds[CALL].min_gold) if CALL in kinds else hand.act(seat, CHECK)
    cards = board.split()
    for chunk in (cards[:3], cards[3:4], cards[4:5]):
        hand.board(" ".join(chunk))
        while hand.to_act is not None:
            hand.act(hand.to_act, CHECK)
    return hand.end()


def test_the_best_five_of_seven_wins_the_pot() -> None:
    settlement = play_to_showdown(
        {0: 1000, 1: 1000, 2: 1000}, 0, {0: "As Ad", 1: "Ks Kd", 2: "6c 8d"}, "5h 7h 9c 2s Kc"
    )
    assert settlement.nets == {0: -20, 1: -20, 2: 40}  # the straight 5-9


def test_a_six_high_straight_beats_the_wheel() -> None:
    settlement = play_to_showdown({0: 1000, 1: 1000}, 0, {0: "As 9d", 1: "6c 9c"}, "2h 3h 4d 5s Kc")
    assert settlement.nets == {0: -20, 1: 20}


def test_when_the_board_plays_the_pot_is_split() -> None:
    settlement = play_to_showdown(
        {0: 1000, 1: 1000, 2: 1000}, 0, {0: "2c 3d", 1: "4c 5d", 2: "2d 3c"}, "Ts Jh Qd Kc Ah"
    )
    assert settlement.nets == {0: 0, 1: 0, 2: 0}
    assert settlement.by_reason() == {}  # nothing moved


def test_the_odd_chip_goes_to_the_first_winner_left_of_the_dealer() -> None:
    # Stake 30: SB 3, BB 6. Seat 0 deals, seat 1 (SB) folds: a pot of 15 for two equal hands.
    hand = Hand({0: 1000, 1: 1000, 2: 1000}, dealer=0, stake=30).hole({0: "2c 3d", 1: "As Ad", 2: "2d 3c"})
    hand.act(0, CALL, 6).act(1, FOLD).act(2, CHECK)
    for street in ("Ts Jh Qd", "Kc", "9h"):
        hand.board(street)
        while hand.to_act is not None:
            hand.act(hand.to_act, CHECK)
    settlement = hand.end()
    # Seat 2 is the first winner clockwise from the dealer: 8 chips; the dealer gets 7.
    assert settlement.nets == {0: 1, 1: -3, 2: 2}


def test_an_all_in_player_wins_only_the_main_pot_and_the_side_pot_goes_to_the_next_best() -> None:
    hand = Hand({0: 100, 1: 1000, 2: 1000}, dealer=2).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd"})
    hand.act(2, RAISE, 300).act(0, ALL_IN, 90).act(1, CALL, 280)
    hand.board("2h 7h 9c")
    hand.act(1, BET, 200).act(2, CALL, 200)
    hand.board("3d")
    hand.act(1, CHECK).act(2, CHECK)
    hand.board("4c")
    hand.act(1, CHECK).act(2, CHECK)
    settlement = hand.end()
    # Main pot 300 (100 each) to the aces; side pot 800 to the kings.
    assert settlement.nets == {0: 200, 1: 300, 2: -500}
    assert settlement.by_reason() == {"pot": 200, "side_pot": 400}


def test_an_uncalled_bet_goes_back() -> None:
    hand = Hand({0: 1000, 1: 1000}, dealer=0).hole({0: "As Ad", 1: "Ks Kd"})
    hand.act(0, RAISE, 500).act(1, FOLD)
    settlement = hand.end()
    assert settlement.nets == {0: 20, 1: -20}


def test_the_fee_is_charged_on_the_winners_net_result_only() -> None:
    hand = Hand({0: 1000, 1: 1000, 2: 1000}, dealer=0, fee_bps=500).hole({0: "As Ad", 1: "Ks Kd", 2: "Qs Qd"})
    hand.act(0, RAISE, 200).act(1, CALL, 190).act(2, CALL, 180)
    for street in ("2h 7h 9c", "3d", "4c"):
        hand.board(street)
        while hand.to_act is not None:
            hand.act(hand.to_act, CHECK)
    settlement = hand.end()
    assert settlement.fees_gold() == 20  # 5 % of the net win of 400
    assert settlement.nets == {0: 380, 1: -200, 2: -200}
    assert sum(settlement.nets.values()) + settlement.fees_gold() == 0


def test_a_fold_out_pays_the_last_player_without_comparing_cards() -> None:
    hand = six_handed(dealer=0).hole(SIX_HOLES)
    for seat in (3, 4, 5, 0, 1):
        hand.act(seat, FOLD)
    settlement = hand.end()
    assert settlement.nets == {0: 0, 1: -10, 2: 10, 3: 0, 4: 0, 5: 0}


# --- bots -------------------------------------------------------------------------------


def test_candidate_actions_are_legal_and_include_fold_call_minimum_raise_and_all_in() -> None:
    hand = six_handed(dealer=0).hole(SIX_HOLES)
    candidates = holdem.candidate_actions(hand.state, 3)
    kinds = [c.kind for c in candidates]
    assert kinds[:2] == [FOLD, CALL] and RAISE in kinds and kinds[-1] == ALL_IN
    assert BetAction(3, RAISE, 30) in candidates
    for body in candidates:
        holdem.apply(hand.state, body)  # none raises
    assert holdem.candidate_actions(hand.state, 4) == []  # not seat 4's turn


def test_legal_actions_report_amounts_as_chips_added() -> None:
    hand = six_handed(dealer=0).hole(SIX_HOLES)
    hand.act(3, CALL, 20).act(4, CALL, 20).act(5, CALL, 20).act(0, CALL, 20)
    kinds = hand.kinds(1)  # the small blind has 10 in
    assert kinds[CALL] == LegalAction(CALL, 10, 10)
    assert kinds[RAISE] == LegalAction(RAISE, 20, 990)
    assert kinds[ALL_IN] == LegalAction(ALL_IN, 990, 990)
