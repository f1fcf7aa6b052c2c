"""3 Cây Gà: scoring, winner takes all, the Gà pot carried between hands, squeeze and flip,
disconnects (RULES.md §7, GA-1 to GA-6).

Seats are numbered clockwise; play is counterclockwise (GEN-2).
"""

from __future__ import annotations

import pytest

from socai import accounts
from socai.audit.auditor import verify
from socai.audit.export import RawEvent
from socai.cards import parse_cards
from socai.errors import RuleViolation
from socai.events import codec
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
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
)
from socai.rules import base, registry
from socai.rules.base import Settlement
from socai.rules.three_card import bacay_ga
from socai.rules.three_card.threecard_play import deal_three_face_down
from tests.support.snapshot import snapshot
from tests.support.synthetic import simulate

S = 100
SEED_HEX = "00" * 32
POT = accounts.pot("t1")


def start(
    stacks: dict[int, int], *, pot_gold: int = 0, dealer_seat: int = 0, hand: int = 1, **options: str
) -> bacay_ga.State:
    seats = tuple(SeatInfo(seat, f"p{seat}", stack) for seat, stack in sorted(stacks.items()))
    started = HandStarted(
        "t1",
        f"h{hand}",
        "bacay_ga",
        hand,
        S,
        0,
        len(stacks),
        seats,
        dealer_seat,
        "c",
        owner_seat=0,
        pot_gold=pot_gold,
        options=options,
    )
    return bacay_ga.initial_state(started)


def dealt(state: bacay_ga.State, hands: dict[int, str]) -> CardsDealt:
    cards = {seat: parse_cards(text) for seat, text in hands.items()}
    taken = dict.fromkeys(cards, 0)
    out = []
    for slot in deal_three_face_down(state.order):
        out.append(DealtCard(slot.seat, cards[slot.seat][taken[slot.seat]], False))
        taken[slot.seat] += 1
    return CardsDealt(tuple(out))


def deal(state: bacay_ga.State, hands: dict[int, str]) -> bacay_ga.State:
    return bacay_ga.apply(state, dealt(state, hands))


def play(state: bacay_ga.State, *bodies: Body) -> bacay_ga.State:
    for body in bodies:
        state = bacay_ga.apply(state, body)
    return state


def flip_all(state: bacay_ga.State) -> bacay_ga.State:
    for seat in bacay_ga.pending(state).to_act:
        state = bacay_ga.apply(state, Declared(seat, "flip"))
    return state


def settle(state: bacay_ga.State) -> Settlement:
    return bacay_ga.settle(bacay_ga.apply(state, HandEnded(SEED_HEX)))


def hand(stacks: dict[int, int], hands: dict[int, str], *, pot_gold: int = 0) -> Settlement:
    return settle(flip_all(deal(start(stacks, pot_gold=pot_gold), hands)))


def test_bacay_ga_is_registered() -> None:
    assert registry.get("bacay_ga") is bacay_ga


# --- 7.2 scoring -----------------------------------------------------------------------------


def test_the_worked_example_a_diamond_beats_eight_of_diamonds_at_ten_points() -> None:
    hand1 = bacay_ga.hand_value(parse_cards("8d As Ac"))
    hand2 = bacay_ga.hand_value(parse_cards("7d 2h Ad"))
    assert hand1.points == hand2.points == 10
    assert hand2 > hand1


def test_a_sum_of_10_or_20_is_10_points_the_best_score() -> None:
    assert bacay_ga.hand_value(parse_cards("9s 9c 2d")).points == 10
    assert bacay_ga.hand_value(parse_cards("5s 3c 2d")).points == 10
    assert bacay_ga.hand_value(parse_cards("5s 3c 2d")) > bacay_ga.hand_value(parse_cards("9d 9h 9c"))


def test_the_deck_is_a_to_9_a_ten_is_not_a_card_of_the_game() -> None:
    state = start({0: 1000, 1: 1000})
    body = dealt(state, {0: "As 2s 3s", 1: "4s 5s 6s"})
    bad = CardsDealt((DealtCard(0, parse_cards("10s")[0], False), *body.cards[1:]))
    with pytest.raises(RuleViolation) as err:
        bacay_ga.apply(state, bad)
    assert err.value.code == "BAD_CARD"


# --- 7.4 settlement -----------------------------------------------------------------------------


def test_winner_takes_all_every_other_player_pays_the_best_hand_its_bet() -> None:
    settlement = hand({0: 1000, 1: 1000, 2: 1000}, {0: "9s 8s Ac", 1: "2h 3h 2c", 2: "4d 4s Ah"}, pot_gold=300)
    # Seat 0 has 8 points, seat 1 7, seat 2 9: seat 2 takes S from each; nobody scored 10.
    assert settlement.nets == {0: -S, 1: -S, 2: 2 * S}
    assert settlement.by_reason() == {"hand_bet": 2 * S}
    assert settlement.pot_carry_gold == 300


def test_a_new_ga_opens_with_one_stake_from_each_player_ga_1() -> None:
    settlement = hand({0: 1000, 1: 1000, 2: 1000}, {0: "9s 8s Ac", 1: "2h 3h 2c", 2: "4d 4s Ah"})
    assert settlement.by_reason() == {"ga_contribution": 3 * S, "hand_bet": 2 * S}
    assert settlement.entries()[POT] == 3 * S
    assert settlement.pot_carry_gold == 3 * S


def test_no_contribution_while_the_ga_is_not_won_ga_2() -> None:
    settlement = hand({0: 1000, 1: 1000}, {0: "9s 8s Ac", 1: "2h 3h 2c"}, pot_gold=200)
    assert "ga_contribution" not in settlement.by_reason()
    assert POT not in settlement.entries()


def test_a_ten_takes_the_whole_ga_and_the_hand() -> None:
    settlement = hand({0: 1000, 1: 1000, 2: 1000}, {0: "9s 8s Ac", 1: "5h 3h 2c", 2: "4d 4s Ah"}, pot_gold=600)
    assert settlement.by_reason() == {"hand_bet": 2 * S, "ga_pot": 6 * S}
    assert settlement.nets == {0: -S, 1: 8 * S, 2: -S}
    assert settlement.pot_carry_gold == 0
    assert settlement.entries()[POT] == -6 * S


def test_two_tens_the_ga_goes_to_the_better_single_card_the_worked_example() -> None:
    settlement = hand({0: 1000, 1: 1000}, {0: "8d As Ac", 1: "7d 2h Ad"}, pot_gold=400)
    assert settlement.nets == {0: -S, 1: 5 * S}
    assert settlement.pot_carry_gold == 0


def test_a_ga_opened_and_won_in_one_hand_pays_the_contributions_back_out() -> None:
    settlement = hand({0: 1000, 1: 1000}, {0: "8d As Ac", 1: "7d 2h 4c"})
    assert settlement.by_reason() == {"ga_contribution": 2 * S, "hand_bet": S, "ga_pot": 2 * S}
    assert settlement.nets == {0: 2 * S, 1: -2 * S}
    assert POT not in settlement.entries()


def test_the_last_player_who_can_still_pay_takes_the_ga() -> None:
    # Seat 1 brings exactly a hand bet and a Gà contribution: after losing its bet it can no
    # longer pay, so seat 0, the only one who can, takes the Gà.
    settlement = hand({0: 1000, 1: 2 * S}, {0: "9s 8s Ac", 1: "2h 3h 2c"}, pot_gold=500)
    assert settlement.by_reason() == {"hand_bet": S, "ga_last_payer": 5 * S}
    assert settlement.nets == {0: 6 * S, 1: -S}
    assert settlement.pot_carry_gold == 0


def test_a_player_who_cannot_pay_the_ga_and_the_bet_cannot_play() -> None:
    assert not base.can_play(bacay_ga, 2 * S - 1, S, {})
    assert base.can_play(bacay_ga, 2 * S, S, {})
    with pytest.raises(RuleViolation) as err:
        start({0: 1000, 1: 2 * S - 1})
    assert err.value.code == "BAD_STACK"


def test_the_ga_is_carried_over_two_hands_then_won_and_the_pot_account_follows() -> None:
    stacks = {0: 2000, 1: 2000, 2: 2000}
    carry = 0
    moved = 0
    deals = [
        {0: "9s 8s Ac", 1: "2h 3h 2c", 2: "4d 4s Ah"},  # 8, 7, 9: no 10, the Gà opens
        {0: "2s 2c 3d", 1: "6h 6s 6c", 2: "Ad As 5c"},  # 7, 8, 7: no 10, carried again
        {0: "9c 8c 3s", 1: "Ah 2d 3h", 2: "4c 7h 7s"},  # 10, 6, 8: seat 0 takes the Gà
    ]
    for number, hands in enumerate(deals, start=1):
        state = start(stacks, pot_gold=carry, hand=number)
        settlement = settle(flip_all(deal(state, hands)))
        moved += settlement.entries().get(POT, 0)
        assert settlement.entries().get(POT, 0) == settlement.pot_carry_gold - carry
        carry = settlement.pot_carry_gold
        for seat, net in settlement.nets.items():
            stacks[seat] += net
        if number < 3:
            assert carry == 3 * S
    assert carry == 0 and moved == 0
    assert stacks == {0: 2000 - S - S - S + 2 * S + 3 * S, 1: 2000 - S - S + 2 * S - S, 2: 2000 - S + 2 * S - S - S}


# --- squeeze and flip, timers ------------------------------------------------------------------


def test_everyone_flips_at_once_and_the_timer_flips_for_who_did_not() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), {0: "9s 8s Ac", 1: "2h 3h 2c", 2: "4d 4s Ah"})
    pending = bacay_ga.pending(state)
    assert (pending.to_act, pending.timer, pending.timeout_s) == ((0, 2, 1), "flip", 15)
    state = play(state, Declared(2, "flip"), TimerExpired(0, "flip"))
    assert bacay_ga.pending(state).to_act == (1,)
    state = play(state, TimerExpired(1, "flip"))
    assert bacay_ga.pending(state).finished


def test_fast_mode_gives_7_seconds_to_flip() -> None:
    state = deal(start({0: 1000, 1: 1000}, fast_mode="true"), {0: "9s 8s Ac", 1: "2h 3h 2c"})
    assert bacay_ga.pending(state).timeout_s == 7


def test_cards_are_hidden_from_the_others_until_their_owner_flips() -> None:
    state = deal(start({0: 1000, 1: 1000}), {0: "9s 8s Ac", 1: "2h 3h 2c"})
    body = dealt(start({0: 1000, 1: 1000}), {0: "9s 8s Ac", 1: "2h 3h 2c"})
    seen = base.visible_to(bacay_ga, body, 0, state)
    assert isinstance(seen, CardsDealt)
    assert [d.card for d in seen.cards if d.seat == 1] == [HIDDEN_CARD] * 3
    assert [d.card for d in seen.cards if d.seat == 0] == parse_cards("9s 8s Ac")
    state = play(state, Declared(1, "flip"))
    seen = base.visible_to(bacay_ga, body, 0, state)
    assert isinstance(seen, CardsDealt)
    assert [d.card for d in seen.cards if d.seat == 1] == parse_cards("2h 3h 2c")


def test_a_flip_twice_or_another_declaration_is_refused_and_changes_nothing() -> None:
    state = play(deal(start({0: 1000, 1: 1000}), {0: "9s 8s Ac", 1: "2h 3h 2c"}), Declared(0, "flip"))
    before = snapshot(state)
    for body, code in (
        (Declared(0, "flip"), "ALREADY_ACTED"),
        (Declared(1, "bank"), "BAD_DECLARATION"),
        (TimerExpired(1, "turn"), "WRONG_TIMER"),
        (Declared(5, "flip"), "UNKNOWN_SEAT"),
    ):
        with pytest.raises(RuleViolation) as err:
            bacay_ga.apply(state, body)
        assert err.value.code == code
    assert snapshot(state) == before


# --- disconnect (7.5, GA-4, GA-6) ---------------------------------------------------------------


def test_a_disconnected_players_cards_do_not_count_for_the_hand_or_the_ga_ga_6() -> None:
    state = deal(start({0: 1000, 1: 1000, 2: 1000}), {0: "9s 8s Ac", 1: "5h 3h 2c", 2: "4d 4s Ah"})
    state = play(state, PlayerDisconnected(1), PlayerReconnected(1))
    assert bacay_ga.pending(state).to_act == (0, 2)  # reconnecting does not bring seat 1 back
    settlement = settle(flip_all(state))
    # Seat 1's 10 does not count: seat 2's 9 wins the hand and nobody takes the Gà.
    assert settlement.nets == {0: -2 * S, 1: -2 * S, 2: S}
    assert settlement.by_reason() == {"ga_contribution": 3 * S, "hand_bet": S, "disconnect_forfeit": S}
    assert settlement.pot_carry_gold == 3 * S  # seat 1's contribution stays in the Gà (GA-4)


def test_leaving_is_a_disconnect_gen_6() -> None:
    state = deal(start({0: 1000, 1: 1000}), {0: "9s 8s Ac", 1: "5h 3h 2c"})
    state = play(state, PlayerLeft(1))
    assert bacay_ga.pending(state).to_act == (0,)
    settlement = settle(flip_all(state))
    # Seat 0 wins seat 1's bet; the Gà both opened carries (seat 1 could still pay).
    assert settlement.nets == {0: 0, 1: -2 * S}
    assert settlement.pot_carry_gold == 2 * S


# --- a Gà left on a closing table (decision) ---------------------------------------------------


def test_a_ga_left_on_a_closing_table_is_shared_by_the_players_seated_odd_chips_in_seat_order() -> None:
    settlement = bacay_ga.closing_pot_settlement("t1", "t1-close", 301, {4: "p4", 1: "p1", 2: "p2"})
    assert settlement.nets == {1: 101, 2: 100, 4: 100}
    assert settlement.entries()[POT] == -301
    assert settlement.pot_carry_gold == 0
    assert set(settlement.by_reason()) == {"ga_pot_returned"}


def test_with_nobody_seated_the_ga_stays_in_the_pot_account() -> None:
    settlement = bacay_ga.closing_pot_settlement("t1", "t1-close", 301, {})
    assert settlement.transfers == () and settlement.pot_carry_gold == 301


# --- the auditor re-derives a carried Gà --------------------------------------------------------


def test_a_ga_carried_over_two_hands_then_won_is_audited_clean() -> None:
    tables = simulate(200, ("bacay_ga",), seed=3).tables
    carried_then_won = [
        t
        for t in tables
        if any(
            a.settlement.pot_carry_gold and b.settlement.pot_carry_gold and not c.settlement.pot_carry_gold
            for a, b, c in zip(t.hands, t.hands[1:], t.hands[2:], strict=False)
        )
    ]
    assert carried_then_won, "no simulated table carried a Gà over two hands"
    table = carried_then_won[0]
    events = [*table.table_events, *(e for h in table.hands for e in h.events)]
    raws = [RawEvent(n, f"events.{e.table_id}.{e.hand_id}", codec.to_proto(e)) for n, e in enumerate(events, 1)]
    audit = verify(raws, source="bacay_ga carry")
    assert audit.report.mismatches == []
    assert audit.report.hands_verified == len(table.hands)
    carries = [h.settlement.pot_carry_gold for h in table.hands]
    assert all(h.events[0].body.pot_gold == c for h, c in zip(table.hands[1:], carries, strict=False))  # type: ignore[union-attr]
