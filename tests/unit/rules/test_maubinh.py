"""Mậu Binh, the game (RULES.md §11 with MB-1 to MB-24): the hand on the kit, the arranging
window, automatic arrangements, secrecy, and the settlement in stakes.

The chi values, special hands and unit comparisons themselves are tested in
``test_maubinh_hands*.py``; here they are played as hands and paid in gold. Names as in
the ``Arranged`` event: ``back`` is chi đầu (5 cards), ``middle`` chi giữa (5), ``front``
chi cuối (3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final

import pytest

from socai import accounts
from socai.cards import Card, parse_cards
from socai.errors import RuleViolation
from socai.events import codec
from socai.events.model import (
    COMMUNITY,
    HIDDEN_CARD,
    Arranged,
    BetAction,
    CardsDealt,
    DealtCard,
    Event,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
)
from socai.rules import base, registry
from socai.rules.base import GameRules, LegalAction, Settlement
from socai.rules.chinese_poker import maubinh, maubinh_hands

_CONTRACT: GameRules = maubinh  # mypy checks the module against the kit's Protocol

TABLE = "mb1"
SEED_HEX = "00" * 32
Chi = tuple[str, str, str]  # back, middle, front

# --- hands used below (each checked in test_the_example_hands_are_what_the_tests_say) ---------

# A Home Run table (MB-6): seat 0 holds four aces, a full house and trips in front, and
# beats every chi of the three others; the 52 cards are all dealt.
HOME_RUN: Final = {
    0: ("As Ah Ad Ac 2s", "Ks Kh Kd Qs Qh", "Js Jh Jd"),  # Tứ Quý 4, Cù Lũ in chi giữa 2, Sám Cô 3
    1: ("Kc Qd Jc Ts 9s", "8s 8h 7s 7h 2h", "6s 6h 5s"),  # straight, two pair, pair of 6s
    2: ("Th Td 9h 9d 3s", "8d 8c 4s 4h 2d", "7d 7c 5h"),  # two pair, two pair, pair of 7s
    3: ("3h 3d 3c Qc Tc", "6d 6c 5d 5c 9c", "4d 4c 2c"),  # trips, two pair, pair of 4s
}
# The source's xử bắn example: A beats B on all three chi, 1 unit each.
SHOOTER: Chi = ("As Ad 9c 7h 4s", "Ks Kd 8c 6h 3s", "Qs Qd 2c")
SHOT: Chi = ("Js Jd 9d 7c 4h", "Ts Td 8d 6c 3h", "5s 5d 2d")
# Equal backs (suits never break ties), then one chi each.
DRAW_A: Chi = ("As Ks 9d 7c 4h", "Qs Jh 8d 6c 3h", "Th 9s 2s")
DRAW_B: Chi = ("Ah Kh 9c 7d 4s", "Qd Jd 8c 5d 3s", "Ts 9h 5c")
WEAK: Chi = ("Js 7h 5h 3c 2c", "8s 6h 4c 3d 2d", "7s 6s 4d")  # loses every chi to DRAW_A and DRAW_B
# Ngược chi: a high-card back behind a pair of aces (MB-5), and a valid hand of pairs.
FOULED: Chi = ("2s 3h 5d 7c 9h", "As Ad Kc Qh Jd", "4s 4h 6d")
PAIRS: Chi = ("Ks Kd 8c 6h 3s", "Qs Qd 8d 6c 3d", "Js Td 2c")
THIRD: Chi = ("Ah Ac 9s 7s 4d", "Kh Kc 8s 6s 3d", "Qh Qc 2h")  # a third seat beside SHOOTER and SHOT
# Special hands (11.3): Lục Phé Bôn (six pairs, 4), Ba Đồng Chất (three flushes, 3).
SIX_PAIRS: Chi = ("6s 5s 4s 3s 2s", "6h 5h 4h 3h 2h", "Ad 7s 7h")
SIX_PAIRS_TOO: Chi = ("6c 5c 4c 3c 2c", "6d 5d 4d 3d 2d", "Ac 7c 7d")
THREE_FLUSHES: Chi = ("Ah Jh Th 9h 8h", "Kd Td 8d 5d 2d", "Qc 7c 3c")
NORMAL_BESIDE_SPECIALS: Chi = ("Ks Kc 9c 6c 4c", "Qs Qh 9s 8s 4d", "Js Jd 2c")
# Issue 28's GEN-4 table, net units {0: 3, 1: 1, 2: 12, 3: -16}: seat 2 holds Ba Sảnh (4 from
# each); seats 0 and 1 each shoot seat 3 (3 chi, doubled: 6); seat 0 beats seat 1 by one
# chi (back and front against middle).
SHORT_SEAT_TABLE: Final = {
    0: ("As Ac Ad Ks Kc", "Qs Qd Ah Ts 5h", "Jc 4h 3d"),  # Cù Lũ, a pair of queens, J high
    1: ("9h Td Jh Qh Kd", "8d 8h 6c 6d 2h", "7h 5d 4c"),  # a straight, two pair, 7 high
    2: ("9s Th Jd Qc Kh", "5s 6h 7d 8c 9c", "2s 3h 4d"),  # three straights
    3: ("Js 9d 7s 5c 3s", "Tc 8s 6s 4s 2c", "2d 3c 7c"),  # J high, T high, 7 high
}


def cards(text: str) -> tuple[Card, ...]:
    return tuple(parse_cards(text))


def all_cards(chi: Chi) -> tuple[Card, ...]:
    return tuple(c for part in chi for c in cards(part))


def started(
    stacks: Mapping[int, int],
    *,
    stake_gold: int = 100,
    fee_bps: int = 0,
    dealer_seat: int | None = None,
    seats_max: int = 4,
    rules_version: int = maubinh.RULES_VERSION,
    **options: str,
) -> HandStarted:
    seats = tuple(SeatInfo(seat, f"p{seat}", stack) for seat, stack in sorted(stacks.items()))
    return HandStarted(
        table_id=TABLE,
        hand_id="h1",
        game="maubinh",
        hand_number=1,
        stake_gold=stake_gold,
        fee_bps=fee_bps,
        seats_max=seats_max,
        seats=seats,
        dealer_seat=min(stacks) if dealer_seat is None else dealer_seat,
        deck_commitment="c",
        options=options,
        rules_version=rules_version,
    )


def deal(state: maubinh.State, hands: Mapping[int, tuple[Card, ...]]) -> CardsDealt:
    """The CardsDealt that gives each seat ``hands[seat]``, in the slots the hand wants."""
    given = {seat: list(held) for seat, held in hands.items()}
    return CardsDealt(
        tuple(DealtCard(slot.seat, given[slot.seat].pop(0), False) for slot in maubinh.pending(state).deal)
    )


def dealt_state(chis: Mapping[int, Chi], stacks: Mapping[int, int] | None = None, **kwargs: object) -> maubinh.State:
    state = maubinh.initial_state(started(stacks or {seat: 100_000 for seat in chis}, **kwargs))  # type: ignore[arg-type]
    return maubinh.apply(state, deal(state, {seat: all_cards(chi) for seat, chi in chis.items()}))


def arranged(seat: int, chi: Chi) -> Arranged:
    back, middle, front = chi
    return Arranged(seat, cards(back), cards(middle), cards(front))


def play(
    chis: Mapping[int, Chi], stacks: Mapping[int, int] | None = None, **kwargs: object
) -> tuple[maubinh.State, Settlement]:
    """Deal ``chis``, let every seat send its arrangement, end the hand and settle."""
    state = dealt_state(chis, stacks, **kwargs)
    for seat, chi in chis.items():
        state = maubinh.apply(state, arranged(seat, chi))
    state = maubinh.apply(state, HandEnded(SEED_HEX))
    return state, maubinh.settle(state)


def paid(settlement: Settlement) -> dict[str, int]:
    return settlement.by_reason()


def escrow(seat: int) -> str:
    return accounts.escrow(TABLE, f"p{seat}")


# --- the example hands --------------------------------------------------------------------------


def test_the_example_hands_are_what_the_tests_say() -> None:
    normal = (SHORT_SEAT_TABLE[0], SHORT_SEAT_TABLE[1], SHORT_SEAT_TABLE[3])
    for chi in (*HOME_RUN.values(), *normal, SHOOTER, SHOT, DRAW_A, DRAW_B, WEAK, PAIRS, THIRD, NORMAL_BESIDE_SPECIALS):
        assert maubinh.special_hand(all_cards(chi)) is None
        back, middle, front = (cards(part) for part in chi)
        assert maubinh.is_valid_arrangement(front, middle, back)
    back, middle, front = (cards(part) for part in FOULED)
    assert not maubinh.is_valid_arrangement(front, middle, back)
    assert maubinh.special_hand(all_cards(SIX_PAIRS)) == "six_pairs"
    assert maubinh.special_hand(all_cards(SIX_PAIRS_TOO)) == "six_pairs"
    assert maubinh.special_hand(all_cards(THREE_FLUSHES)) == "three_flushes"
    assert maubinh.special_hand(all_cards(SHORT_SEAT_TABLE[2])) == "three_straights"
    for table in (HOME_RUN, SHORT_SEAT_TABLE):
        assert len({c for chi in table.values() for c in all_cards(chi)}) == 52


# --- the public API (DESIGN.md) -------------------------------------------------------------


def test_the_public_names_are_the_hands_modules() -> None:
    assert maubinh.hand_value is maubinh_hands.hand_value
    assert maubinh.special_hand is maubinh_hands.special_hand
    assert maubinh.is_valid_arrangement is maubinh_hands.is_valid_arrangement
    assert maubinh.suggest_arrangement is maubinh_hands.suggest_arrangement
    assert maubinh.hand_value(cards("Qh Qd Qc Qs Ks")).category == "four_of_a_kind"
    assert maubinh.hand_value(cards("Kh Kd Kc")).category == "three_of_a_kind"


def test_the_game_is_registered_and_warms_the_arranger() -> None:
    assert "maubinh" in registry.available()
    assert registry.get("maubinh") is maubinh
    maubinh.warm()
    assert maubinh_hands._TABLES.keys() == {True, False}


# --- starting a hand (MB-21) ----------------------------------------------------------------


@pytest.mark.parametrize("players", [1, 5])
def test_mau_binh_is_played_by_two_to_four(players: int) -> None:
    with pytest.raises(RuleViolation) as err:
        maubinh.initial_state(started({s: 1000 for s in range(players)}, seats_max=max(players, 2)))
    assert err.value.code == "BAD_SEAT_COUNT"


@pytest.mark.parametrize("players", [2, 3, 4])
def test_each_of_two_to_four_players_is_dealt_thirteen_face_down_cards(players: int) -> None:
    state = maubinh.initial_state(started({s: 1000 for s in range(players)}))
    slots = maubinh.pending(state).deal
    assert len(slots) == 13 * players
    assert not any(slot.face_up for slot in slots)
    # One card at a time to each seat, counterclockwise from the reference seat.
    assert [slot.seat for slot in slots[:players]] == base.seats_in_order(range(players), 0, 4, base.COUNTERCLOCKWISE)


def test_a_bad_option_is_refused() -> None:
    for name, value in (("home_run_multiplier", "1"), ("arrange_timeout_s", "0"), ("home_run_extra_units", "-1")):
        with pytest.raises(RuleViolation) as err:
            maubinh.initial_state(dataclasses.replace(started({0: 1000, 1: 1000}), options={name: value}))
        assert err.value.code == "BAD_OPTION"


def test_a_stake_whose_results_would_not_fit_int64_is_refused() -> None:
    with pytest.raises(RuleViolation) as err:
        maubinh.initial_state(started({0: 1000, 1: 1000}, stake_gold=2**62))
    assert err.value.code == "BAD_STAKE"


def test_the_default_fee_is_the_five_percent_commission() -> None:
    assert base.default_fee_bps(maubinh, {}) == 500  # MB-17, RULES.md 0.6


# --- the deal ----------------------------------------------------------------------------------


def test_a_deal_of_the_wrong_shape_or_a_repeated_card_is_refused() -> None:
    state = maubinh.initial_state(started({0: 1000, 1: 1000}))
    good = deal(state, {0: all_cards(SHOOTER), 1: all_cards(SHOT)})
    for bad, code in (
        (CardsDealt(good.cards[:-1]), "WRONG_DEAL"),
        (CardsDealt((*good.cards[:-1], DealtCard(good.cards[-1].seat, good.cards[-1].card, True))), "WRONG_DEAL"),
        (CardsDealt((good.cards[1], good.cards[0], *good.cards[2:])), "WRONG_DEAL"),  # seat 1 dealt first
        (CardsDealt((*good.cards[:-1], DealtCard(good.cards[-1].seat, good.cards[0].card, False))), "DUPLICATE_CARD"),
        (CardsDealt((*good.cards[:-1], DealtCard(good.cards[-1].seat, HIDDEN_CARD, False))), "BAD_CARD"),
    ):
        with pytest.raises(RuleViolation) as err:
            maubinh.apply(state, bad)
        assert err.value.code == code
    after = maubinh.apply(state, good)
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(after, good)
    assert err.value.code == "WRONG_DEAL"


# --- the arranging window (11.1, GEN-5) ----------------------------------------------------------


def test_every_seat_arranges_at_once_on_one_ninety_second_timer() -> None:
    state = dealt_state({0: SHOOTER, 1: SHOT})
    pending = maubinh.pending(state)
    assert pending.to_act == (0, 1)
    assert (pending.timer, pending.timeout_s) == ("arrange", 90)
    assert maubinh.legal_actions(state, 1) == (LegalAction("arrange"),)
    state = maubinh.apply(state, arranged(1, SHOT))
    assert maubinh.pending(state).to_act == (0,)
    assert maubinh.legal_actions(state, 1) == ()


def test_the_window_length_is_an_option() -> None:
    state = dealt_state({0: SHOOTER, 1: SHOT}, arrange_timeout_s="5")
    assert maubinh.pending(state).timeout_s == 5


def test_the_hands_are_compared_as_soon_as_everyone_has_arranged() -> None:
    state = dealt_state({0: SHOOTER, 1: SHOT})
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, HandEnded(SEED_HEX))
    assert err.value.code == "HAND_NOT_OVER"
    state = maubinh.apply(maubinh.apply(state, arranged(0, SHOOTER)), arranged(1, SHOT))
    assert maubinh.pending(state).finished
    assert maubinh.auto_arranged(state) == frozenset()
    with pytest.raises(RuleViolation) as err:
        maubinh.settle(state)
    assert err.value.code == "HAND_NOT_OVER"
    ended = maubinh.apply(state, HandEnded(SEED_HEX))
    assert maubinh.is_finished(ended)
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(ended, arranged(0, SHOOTER))
    assert err.value.code == "HAND_FINISHED"


def test_an_arrangement_is_final_a_second_one_is_already_acted() -> None:
    state = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT}), arranged(0, SHOOTER))
    other = ("As Ad 9c 7h 2c", "Ks Kd 8c 6h 3s", "Qs Qd 4s")  # the same cards arranged otherwise
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, arranged(0, other))
    assert err.value.code == "ALREADY_ACTED"


def test_the_done_button_rejects_a_fouled_arrangement() -> None:
    """MB-5: 'The client's "Done" button rejects invalid arrangements.'"""
    state = dealt_state({0: FOULED, 1: PAIRS})
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, arranged(0, FOULED))
    assert err.value.code == "ILLEGAL_MOVE"
    assert maubinh.legal_actions(state, 0) == (LegalAction("arrange"),)  # still to arrange


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (Arranged(0, cards("As Ad 9c 7h"), cards("Ks Kd 8c 6h 3s"), cards("Qs Qd 2c 4s")), "BAD_ARRANGEMENT"),
        (Arranged(0, cards("As Ad 9c 7h 4s"), cards("Ks Kd 8c 6h 3s"), cards("Qs Qd Qs")), "BAD_ARRANGEMENT"),
        (Arranged(0, cards("As Ad 9c 7h 4s"), cards("Ks Kd 8c 6h 3s"), cards("Qs Qd 2h")), "NOT_HOLDING"),
        (Arranged(7, cards("As Ad 9c 7h 4s"), cards("Ks Kd 8c 6h 3s"), cards("Qs Qd 2c")), "UNKNOWN_SEAT"),
        (TimerExpired(0, "turn"), "WRONG_TIMER"),
        (TimerExpired(7, "arrange"), "UNKNOWN_SEAT"),
        (BetAction(0, "call", 10), "UNEXPECTED_EVENT"),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_move_is_refused_and_changes_nothing(body: object, code: str) -> None:
    state = dealt_state({0: SHOOTER, 1: SHOT})
    snapshot = maubinh.State.create(**{name: getattr(state, name) for name in maubinh.State.FIELDS})
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, body)  # type: ignore[arg-type]
    assert err.value.code == code
    assert state == snapshot


def test_nobody_arranges_before_the_deal() -> None:
    state = maubinh.initial_state(started({0: 1000, 1: 1000}))
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, arranged(0, SHOOTER))
    assert err.value.code == "NOT_YOUR_TURN"
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, TimerExpired(0, "arrange"))
    assert err.value.code == "WRONG_TIMER"


# --- automatic arrangements (MB-20) ---------------------------------------------------------------


def test_a_seat_whose_time_runs_out_is_arranged_by_suggest_arrangement() -> None:
    state = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT}), arranged(0, SHOOTER))
    state = maubinh.apply(state, TimerExpired(1, "arrange"))
    assert maubinh.pending(state).finished
    assert maubinh.auto_arranged(state) == {1}
    suggestion = maubinh.suggest_arrangement(all_cards(SHOT))
    assert state.arranged[1].arrangement == suggestion.arrangement
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, TimerExpired(1, "arrange"))
    assert err.value.code == "WRONG_TIMER"  # the window is closed


def test_the_tables_window_closing_arranges_everyone_still_arranging() -> None:
    state = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT, 2: THIRD}), arranged(2, THIRD))
    state = maubinh.apply(state, TimerExpired(COMMUNITY, "arrange"))
    assert maubinh.pending(state).finished
    assert maubinh.auto_arranged(state) == {0, 1}


def test_a_disconnected_seat_stops_holding_up_the_comparison_and_is_arranged_automatically() -> None:
    state = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT, 2: THIRD}), PlayerDisconnected(1))
    assert maubinh.pending(state).to_act == (0, 2)
    state = maubinh.apply(state, arranged(0, SHOOTER))
    state = maubinh.apply(state, arranged(2, THIRD))
    assert maubinh.pending(state).finished
    assert maubinh.auto_arranged(state) == {1}


def test_a_disconnected_seat_may_still_arrange_and_one_that_comes_back_is_waited_for() -> None:
    state = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT}), PlayerDisconnected(1))
    assert maubinh.legal_actions(state, 1) == (LegalAction("arrange"),)
    back = maubinh.apply(state, PlayerReconnected(1))
    assert maubinh.pending(back).to_act == (0, 1)
    sent = maubinh.apply(state, arranged(1, SHOT))
    assert maubinh.pending(sent).to_act == (0,)
    assert maubinh.auto_arranged(maubinh.apply(sent, arranged(0, SHOOTER))) == frozenset()


def test_a_disconnect_when_everyone_else_is_done_compares_at_once() -> None:
    state = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT}), arranged(0, SHOOTER))
    state = maubinh.apply(state, PlayerDisconnected(1))
    assert maubinh.pending(state).finished
    assert maubinh.auto_arranged(state) == {1}


def test_a_leaver_is_arranged_automatically_and_settles_like_anyone_else() -> None:
    state = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT, 2: THIRD}), PlayerLeft(1))
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, arranged(1, SHOT))
    assert err.value.code == "SEAT_LEFT"
    with pytest.raises(RuleViolation) as err:
        maubinh.apply(state, PlayerLeft(1))
    assert err.value.code == "SEAT_LEFT"
    state = maubinh.apply(maubinh.apply(state, arranged(0, SHOOTER)), arranged(2, THIRD))
    assert maubinh.auto_arranged(state) == {1}
    settlement = maubinh.settle(maubinh.apply(state, HandEnded(SEED_HEX)))
    assert settlement.nets[1] != 0  # compared and paid, no extra penalty


def test_automatic_arrangements_replay_the_same() -> None:
    state = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT}), TimerExpired(COMMUNITY, "arrange"))
    maubinh._suggested.cache_clear()
    again = maubinh.apply(dealt_state({0: SHOOTER, 1: SHOT}), TimerExpired(COMMUNITY, "arrange"))
    assert again == state


# --- candidate actions (bots, the hint button) ------------------------------------------------------


def test_candidates_start_with_the_suggestion_and_are_all_valid() -> None:
    state = dealt_state(HOME_RUN)
    for seat, chi in HOME_RUN.items():
        candidates = maubinh.candidate_actions(state, seat)
        assert 1 <= len(candidates) <= 3
        suggestion = maubinh.suggest_arrangement(all_cards(chi))
        first = candidates[0]
        assert isinstance(first, Arranged)
        assert (first.back, first.middle, first.front) == (suggestion.back, suggestion.middle, suggestion.front)
        for body in candidates:
            maubinh.apply(state, body)  # each is accepted now
    assert maubinh.candidate_actions(maubinh.apply(state, arranged(0, HOME_RUN[0])), 0) == []


# --- secrecy: nobody sees an arrangement before the comparison ------------------------------------


def test_another_seats_arrangement_is_blank_until_the_comparison() -> None:
    state = dealt_state({0: SHOOTER, 1: SHOT, 2: THIRD})
    body = arranged(0, SHOOTER)
    state = maubinh.apply(state, body)
    for viewer in (1, 2, -2):  # the other players and a spectator
        seen = maubinh.visible(body, viewer, state)
        assert isinstance(seen, Arranged) and seen.seat == 0
        assert (len(seen.back), len(seen.middle), len(seen.front)) == (5, 5, 3)
        assert set(seen.back + seen.middle + seen.front) == {HIDDEN_CARD}
    assert maubinh.visible(body, 0, state) == body  # the seat itself sees its arrangement
    state = maubinh.apply(maubinh.apply(state, arranged(1, SHOT)), arranged(2, THIRD))
    assert maubinh.visible(body, 1, state) == body  # compared: public


def test_the_tables_views_hide_arrangements_and_dealt_cards() -> None:
    state = dealt_state({0: SHOOTER, 1: SHOT})
    body = arranged(0, SHOOTER)
    event = Event(TABLE, "h1", 3, "maubinh", datetime(2026, 1, 1, tzinfo=UTC), body)
    seen = base.visible_event(maubinh, event, 1, maubinh.apply(state, body), hand_over=False)
    assert seen is not None
    msg = codec.to_proto(seen)
    assert msg.arranged.seat == 0
    assert list(msg.arranged.back) == [""] * 5 and list(msg.arranged.front) == [""] * 3
    assert base.visible_event(maubinh, event, 1, state, hand_over=True) is event
    deal_event = dataclasses.replace(
        event, body=deal(maubinh.initial_state(started({0: 9, 1: 9})), {0: all_cards(SHOOTER), 1: all_cards(SHOT)})
    )
    dealt_seen = base.visible_event(maubinh, deal_event, 1, state, hand_over=False)
    assert dealt_seen is not None
    assert {d.card for d in dealt_seen.body.cards if d.seat == 0} == {HIDDEN_CARD}  # type: ignore[union-attr]
    assert HIDDEN_CARD not in {d.card for d in dealt_seen.body.cards if d.seat == 1}  # type: ignore[union-attr]


# --- settlement in stakes (11.5) ---------------------------------------------------------------


def test_xu_ban_the_source_example_three_units_lost_become_six() -> None:
    """11.5: "A shoots B; B would have lost 3 units, and after the shoot loses 6"."""
    _, s = play({0: SHOOTER, 1: SHOT})
    assert s.nets == {0: 600, 1: -600}
    assert paid(s) == {"chi_back": 100, "chi_middle": 100, "chi_front": 100, "shoot": 300}
    assert all(t.from_account == escrow(1) and t.to_account == escrow(0) for t in s.transfers)


def test_a_drawn_chi_pays_nothing_and_suits_never_break_ties() -> None:
    """MB-16 and 11.1: equal backs draw; one chi each cancels out; no xử bắn."""
    state, s = play({0: DRAW_A, 1: DRAW_B})
    _, _, result = maubinh.comparison(state)
    assert result.pairs[0].chi_units == (0, 1, -1)
    assert s.nets == {0: 0, 1: 0}
    assert paid(s) == {"chi_middle": 100, "chi_front": 100}


def test_home_run_each_shot_player_pays_four_times_the_base_total() -> None:
    """MB-6, MB-7: seat 0 shoots all three others at a table of four.

    Base per victim: Tứ Quý in chi đầu 4 + Cù Lũ in chi giữa 2 + Sám Cô in chi cuối 3 = 9;
    xử bắn doubles it (18), Home Run doubles again (36). Among the others: 1 beats 2 by one
    chi (+1), 1 shoots 3 (1 + 1 + 1, doubled: 6), 2 beats 3 by one chi (+1).
    """
    _, s = play(HOME_RUN, stake_gold=10)
    assert s.nets == {0: 1080, 1: -290, 2: -360, 3: -430}
    reasons = paid(s)
    assert reasons["chi_back"] == 3 * 40 + 3 * 10  # three Tứ Quý and three 1-unit backs
    assert reasons["home_run"] == 3 * 180  # 18 more units from each victim
    assert s.shortfalls == ()


def test_home_run_as_plus_two_units_is_an_option() -> None:
    """MB-6's flag: 'a literal "+2 units" alternative' (xử bắn doubling only, plus 2)."""
    _, s = play(HOME_RUN, stake_gold=10, home_run_multiplier="2", home_run_extra_units="2")
    assert s.nets[0] == 3 * (18 + 2) * 10


def test_no_home_run_with_three_players() -> None:
    """MB-7: only against exactly three opponents."""
    _, s = play({seat: HOME_RUN[seat] for seat in (0, 1, 2)}, stake_gold=10)
    assert s.nets == {0: 360, 1: -170, 2: -190}
    assert "home_run" not in paid(s)


def test_the_winner_pays_five_percent_commission_on_the_net_win() -> None:
    """MB-17: 5 % of each positive net result after all multipliers; losers pay the gross."""
    _, s = play({0: SHOOTER, 1: SHOT}, stake_gold=101, fee_bps=500)
    assert s.nets == {0: 606 - 30, 1: -606}  # floor(606 * 5 %) = 30
    assert s.fees_gold() == 30
    assert next(t for t in s.transfers if t.reason == "fee").from_account == escrow(0)


def test_a_fouled_hand_loses_all_three_chi_and_is_shot() -> None:
    """MB-5: ngược chi pays the valid hand's chi units on all three chi, doubled (xử bắn)."""
    _, s = play({0: FOULED, 1: PAIRS}, accept_fouled="true")
    assert s.nets == {0: -600, 1: 600}
    assert paid(s) == {"foul": 300, "shoot": 300}
    assert base.is_penalty(maubinh, "foul")


def test_two_fouled_hands_draw() -> None:
    fouled_pairs: Chi = ("Js Td 2c 3s 3d", "Ks Kd 8c 6h Qs", "Qd 8d 6c")  # high card behind a pair of kings
    _, s = play({0: FOULED, 1: fouled_pairs}, accept_fouled="true")
    assert s.nets == {0: 0, 1: 0}
    assert s.transfers == ()


def test_a_special_hand_wins_its_multiple_and_the_higher_special_wins_its_own() -> None:
    """11.3: Lục Phé Bôn wins 4 from each; against Ba Đồng Chất (3) the higher wins its own
    multiple; Ba Đồng Chất still wins its 3 from the normal hand."""
    state, s = play({0: SIX_PAIRS, 1: THREE_FLUSHES, 2: NORMAL_BESIDE_SPECIALS})
    assert s.nets == {0: 800, 1: -100, 2: -700}
    assert paid(s) == {"special_hand": 1100}
    _, hands, _ = maubinh.comparison(state)
    assert [h.special for h in hands] == ["six_pairs", "three_flushes", None]


def test_two_special_hands_of_one_type_draw() -> None:
    """MB-8."""
    _, s = play({0: SIX_PAIRS, 1: SIX_PAIRS_TOO})
    assert s.nets == {0: 0, 1: 0}


def test_a_special_hand_beats_a_fouled_hand_by_its_multiple() -> None:
    """MB-9: no xử bắn with a special hand."""
    fouled: Chi = ("Qs Qh 9s 8s 4d", "Ks Kc 9c 6c 4c", "Js Jd 2c")  # NORMAL_BESIDE_SPECIALS, fouled
    _, s = play({0: SIX_PAIRS, 1: fouled}, accept_fouled="true")
    assert s.nets == {0: 400, 1: -400}
    assert paid(s) == {"special_hand": 400}


# --- GEN-4 on net settlement --------------------------------------------------------------------


def test_a_net_loser_pays_at_most_their_chips_and_the_winner_bears_the_rest() -> None:
    """GEN-4: seat 3 owes 43 units × 100 = 4,300 but brought 1,000; the shortfall of
    3,300 comes off the only net winner's gain, then the 5 % commission."""
    stacks = {0: 100_000, 1: 100_000, 2: 100_000, 3: 1_000}
    _, s = play(HOME_RUN, stacks, stake_gold=100, fee_bps=500)
    assert s.nets[3] == -1_000
    assert (s.nets[1], s.nets[2]) == (-2_900, -3_600)
    assert s.nets[0] == (10_800 - 3_300) - (10_800 - 3_300) * 5 // 100
    assert paid(s)["gen4_cap"] == 3_300
    assert [(f.seat, f.owed_gold, f.paid_gold) for f in s.shortfalls] == [(3, 4_300, 1_000)]


def test_net_winners_share_what_a_short_seat_paid_pro_rata() -> None:
    """GEN-4 and DESIGN.md "Money": seats 0 and 1 draw with each other and each shoot seat
    2 (6 units each); seat 2 owes 1,200 and has 301. The 301 paid is shared by the two
    winners in proportion to their wins, the odd gold to the first in playing order after
    the reference seat (seat 1, counterclockwise from seat 0)."""
    stacks = {0: 100_000, 1: 100_000, 2: 301}
    _, s = play({0: DRAW_A, 1: DRAW_B, 2: WEAK}, stacks, stake_gold=100)
    assert s.nets == {0: 150, 1: 151, 2: -301}
    assert paid(s)["gen4_cap"] == 899
    assert [(f.seat, f.owed_gold, f.paid_gold) for f in s.shortfalls] == [(2, 1_200, 301)]


def test_the_capped_amount_is_shared_pro_rata_the_odd_gold_by_playing_order_issue_28() -> None:
    """GEN-4: "the capped amount is shared pro rata to what each was owed"; HE-6: the odd
    gold one at a time in playing order. S = 1; net units {0: 3, 1: 1, 2: 12, 3: -16} and
    seat 3 holds 12. Exact shares of the 12 paid: 2.25, 0.75, 9; floors 2, 0, 9; the odd
    gold to seat 2, the first after the reference seat 3 (counterclockwise: 2, 1, 0)."""
    stacks = {0: 100, 1: 100, 2: 100, 3: 12}
    state, s = play(SHORT_SEAT_TABLE, stacks, stake_gold=1, dealer_seat=3)
    assert maubinh.comparison(state)[2].units == (3, 1, 12, -16)
    assert s.nets == {0: 2, 1: 0, 2: 10, 3: -12}
    assert [(f.seat, f.owed_gold, f.paid_gold) for f in s.shortfalls] == [(3, 16, 12)]
    assert paid(s)["gen4_cap"] == 4


def test_version_1_hands_still_share_the_shortfall_pro_rata_as_recorded() -> None:
    """Rules version 1 (and 0, hands logged before the version was recorded) split the
    *shortfall* pro rata, its odd gold on the first winner: the same two tables as above
    settle as they did when they were played."""
    stacks = {0: 100, 1: 100, 2: 100, 3: 12}
    for version in (0, 1):
        _, s = play(SHORT_SEAT_TABLE, stacks, stake_gold=1, dealer_seat=3, rules_version=version)
        # The 4 short: exact shares 0.75, 0.25, 3; floors 0, 0, 3; the odd gold to seat 2.
        assert s.nets == {0: 3, 1: 1, 2: 8, 3: -12}
        _, s = play({0: DRAW_A, 1: DRAW_B, 2: WEAK}, {0: 100_000, 1: 100_000, 2: 301}, rules_version=version)
        assert s.nets == {0: 600 - 449, 1: 600 - 450, 2: -301}


def test_a_seat_pays_out_of_what_it_wins_in_the_same_hand() -> None:
    """Net settlement (11.5 step 4): each seat wins one chi of the other, so each owes a
    stake it does not have, and is owed one too. Nobody is short."""
    _, s = play({0: DRAW_A, 1: DRAW_B}, {0: 1, 1: 1}, stake_gold=100)
    assert s.nets == {0: 0, 1: 0}
    assert s.shortfalls == ()


def test_a_fee_of_zero_means_no_commission() -> None:
    _, s = play({0: SHOOTER, 1: SHOT}, fee_bps=0)
    assert s.fees_gold() == 0


# --- the reasons -----------------------------------------------------------------------------


def test_every_reason_names_its_rule() -> None:
    assert set(maubinh.REASONS) == {
        "chi_back",
        "chi_middle",
        "chi_front",
        "shoot",
        "home_run",
        "special_hand",
        "foul",
        "gen4_cap",
        "fee",
    }
    assert all(reason.rule for reason in maubinh.REASONS.values())
    assert registry.penalty_reasons("maubinh") == {"foul"}


# --- the audit ------------------------------------------------------------------------------------


def test_the_auditor_re_derives_hands_with_timeouts_and_disconnects_from_the_export() -> None:
    """Simulated tables (bots that sometimes let the window run out, disconnect or leave):
    every hand, exported as JSON and replayed by the auditor, settles exactly as it did
    while it was played, automatic arrangements included (MB-20)."""
    from socai.settle.replay import replay_hand
    from tests.support.synthetic import simulate

    hands = simulate(40, ("maubinh",), seed=13).hands
    timed_out = 0
    for hand in hands:
        exported = [codec.to_json(e) for e in hand.events]
        assert replay_hand(exported) == hand.settlement
        timed_out += any(isinstance(e.body, TimerExpired | PlayerDisconnected | PlayerLeft) for e in hand.events)
    assert timed_out > 0
