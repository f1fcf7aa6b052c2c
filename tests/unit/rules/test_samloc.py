"""Sâm Lốc (RULES.md §4, SL-1..SL-21) played through the engine: báo Sâm and its success,
failure and đền trắng, the chops and đè, thối 2, treo, thắng trắng, báo 1, leaving and
disconnecting.

Seats are numbered clockwise and play goes counterclockwise (GEN-2): with seats 0-2 at a
3-seat table and seat 0 leading, the turn goes 0 → 2 → 1."""

from __future__ import annotations

import pytest

from socai.cards import parse_cards
from socai.errors import RuleViolation
from socai.events.model import CardsPlayed, Declared, Passed, PlayerDisconnected, PlayerLeft, TimerExpired
from socai.rules.climbing import samloc
from tests.unit.rules.test_shedding_play import Hand, started

PLAIN = {"thang_trang": "false"}
# A Sâm that nobody can catch: the A♥, then a 9-card straight 3…J as the last play.
SAM_HAND = "Ah 3s 4s 5s 6s 7s 8s 9s Ts Js"


def lines_of(h: Hand) -> list[tuple[int, int, int, str]]:
    return h.lines()


# --- the deal, the lead and combinations (4.1, 4.2, SL-1..SL-3) -----------------------------


def test_ten_cards_each_and_the_dealer_seat_leads_sl_1() -> None:
    h = Hand(samloc, {0: "", 1: "", 2: ""}, seats_max=3, dealer=2, options=PLAIN).no_sam()
    assert all(len(cards) == 10 for cards in h.state.hands.values())
    assert h.turn == 2 and h.state.leading


def test_the_previous_winner_leads_the_next_hand_sl_1() -> None:
    h = Hand(samloc, {0: "", 1: ""}, dealer=1, options=PLAIN).no_sam().goes_out(1)
    assert samloc.next_hand_dealer(h.state, 1, (0, 1), 4, 0) == 1
    assert samloc.next_hand_dealer(None, None, (0, 1), 4, 0) == 0  # first hand: the owner


def test_straights_may_start_with_a_or_2_but_never_wrap_sl_3() -> None:
    for text in ("As 2c 3d", "2s 3c 4d 5h", "Qs Kc Ad"):
        found = samloc.combo(parse_cards(text))
        assert found is not None and found.kind == "straight", text
    assert samloc.combo(parse_cards("Ks Ac 2d")) is None
    low = samloc.combo(parse_cards("As 2c 3d"))
    mid = samloc.combo(parse_cards("2s 3c 4d"))
    assert low is not None and mid is not None and samloc.beats(mid, low)


def test_3_4_5_is_beaten_only_by_a_higher_three_card_straight_4_2() -> None:
    over = samloc.combo(parse_cards("3s 4c 5d"))
    assert over is not None
    for text, ok in (("4s 5c 6d", True), ("Ts Jc Qd", True), ("4s 5c 6d 7h", False), ("3h 4d 5c", False)):
        play = samloc.combo(parse_cards(text))
        assert play is not None and samloc.beats(play, over) is ok, text


def test_suits_do_not_count_equal_ranks_never_beat() -> None:
    seven, other = samloc.combo(parse_cards("7s")), samloc.combo(parse_cards("7h"))
    assert seven is not None and other is not None
    assert not samloc.beats(other, seven) and not samloc.beats(seven, other)


def test_two_four_of_a_kinds_played_together_are_one_play_sl_4() -> None:
    found = samloc.combo(parse_cards("3s 3c 3d 3h 4s 4c 4d 4h"))
    assert found is not None and found.kind == "two_fours"


# --- báo Sâm (4.3, SL-9, SL-10, SL-18) --------------------------------------------------------


def test_every_seat_answers_the_declaration_window_and_a_timeout_is_no_sam() -> None:
    h = Hand(samloc, {0: "", 1: "", 2: ""}, seats_max=3, options=PLAIN)
    pending = samloc.pending(h.state)
    assert set(pending.to_act) == {0, 1, 2} and pending.timer == "declare"
    h.declare(1, "no_sam").apply(TimerExpired(0, "declare"))
    assert h.refused(Declared(1, "no_sam")) == "ALREADY_ACTED"
    assert h.refused(CardsPlayed(0, (h.state.hands[0][0],))) == "NOT_YOUR_TURN"
    h.declare(2, "no_sam")
    assert h.turn == 0 and h.state.declarer is None


def test_the_declarer_leads_and_a_second_sam_is_refused() -> None:
    h = Hand(samloc, {0: "", 1: "", 2: ""}, seats_max=3, options=PLAIN)
    h.declare(1, "sam")
    assert h.refused(Declared(2, "sam")) == "BAD_DECLARATION"
    h.declare(2, "no_sam").declare(0, "no_sam")
    assert h.turn == 1 and h.state.declarer == 1


def test_sam_success_takes_25_from_each_other_player() -> None:
    h = Hand(samloc, {0: SAM_HAND, 1: "", 2: ""}, seats_max=3, options=PLAIN)
    h.declare(0, "sam").no_sam()
    h.play(0, "Ah").passes(2, 1).play(0, "3s 4s 5s 6s 7s 8s 9s Ts Js")
    assert h.state.ending == "sam_success"
    assert h.lines() == [(2, 0, 2_500, "sam_success"), (1, 0, 2_500, "sam_success")]


def test_sam_failed_the_declarer_pays_the_catcher_n_minus_1_times_25_and_play_ends() -> None:
    h = Hand(samloc, {0: SAM_HAND, 1: "", 2: "2c"}, seats_max=3, options=PLAIN)
    h.declare(0, "sam").no_sam()
    h.play(0, "Ah").play(2, "2c")
    assert samloc.pending(h.state).finished
    assert h.lines() == [(0, 2, 5_000, "sam_failed")]  # no card count after a caught Sâm


def test_a_sam_caught_by_a_chop_pays_the_chop_as_well_sl_18() -> None:
    h = Hand(samloc, {0: "2h", 1: "Kc Kd Kh Ks"}, options=PLAIN)
    h.declare(0, "sam").no_sam()
    h.play(0, "2h").play(1, "Kc Kd Kh Ks")
    assert h.lines() == [(0, 1, 2_000, "chat_heo"), (0, 1, 2_500, "sam_failed")]


def test_den_trang_the_first_seat_that_passed_holding_an_answer_pays_for_everyone_sl_10() -> None:
    h = Hand(samloc, {0: SAM_HAND, 1: "", 2: "2c"}, seats_max=3, options=PLAIN)
    h.declare(0, "sam").no_sam()
    h.play(0, "Ah").passes(2, 1)  # seat 2 held the 2♣ and did not block
    assert h.state.marked == (2,)
    h.play(0, "3s 4s 5s 6s 7s 8s 9s Ts Js")
    assert h.lines() == [(2, 0, 5_000, "den_trang")]


# --- chặt and đè (4.2, 4.4, SL-4, SL-5, SL-6, SL-19, SL-20) ---------------------------------


def test_a_tu_quy_chops_a_2_for_20() -> None:
    h = Hand(samloc, {0: "2h", 1: "Kc Kd Kh Ks"}, options=PLAIN).no_sam()
    h.play(0, "2h").play(1, "Kc Kd Kh Ks").passes(0)
    assert h.owed() == [(0, 1, 20, "chat_heo")]


def test_four_aces_chop_a_2_for_40_sl_5() -> None:
    h = Hand(samloc, {0: "2h", 1: "Ac Ad Ah As"}, options=PLAIN).no_sam()
    h.play(0, "2h").play(1, "Ac Ad Ah As").passes(0)
    assert h.owed() == [(0, 1, 40, "chat_heo_tu_quy_a")]


def test_two_tu_quy_chop_a_pair_of_2s_for_40_and_one_tu_quy_cannot_sl_20() -> None:
    h = Hand(samloc, {0: "2h 2s", 1: "Kc Kd Kh Ks Qc Qd Qh Qs"}, options=PLAIN).no_sam()
    h.play(0, "2h 2s")
    assert h.refused(CardsPlayed(1, tuple(parse_cards("Kc Kd Kh Ks")))) == "CANNOT_BEAT"
    h.play(1, "Kc Kd Kh Ks Qc Qd Qh Qs").passes(0)
    assert h.owed() == [(0, 1, 40, "chat_doi_heo")]


def test_nothing_chops_three_2s_sl_20() -> None:
    h = Hand(samloc, {0: "2h 2s 2c", 1: "Kc Kd Kh Ks"}, options=PLAIN).no_sam()
    h.play(0, "2h 2s 2c")
    assert h.refused(CardsPlayed(1, tuple(parse_cards("Kc Kd Kh Ks")))) == "CANNOT_BEAT"


def test_de_the_over_chopped_pays_the_over_chopper_and_the_2_pays_nothing_sl_6() -> None:
    # The source's example: four 3s chop the 2♥; four 4s chop the four 3s.
    hands = {0: "2h", 2: "3s 3c 3d 3h", 1: "4s 4c 4d 4h"}
    h = Hand(samloc, hands, seats_max=3, options=PLAIN).no_sam()
    h.play(0, "2h").play(2, "3s 3c 3d 3h").play(1, "4s 4c 4d 4h").passes(0, 2)
    assert h.owed() == [(2, 1, 20, "chat_de")]


def test_a_tu_quy_on_a_led_tu_quy_pays_20_sl_6() -> None:
    h = Hand(samloc, {0: "3s 3c 3d 3h", 1: "4s 4c 4d 4h"}, options=PLAIN).no_sam()
    h.play(0, "3s 3c 3d 3h").play(1, "4s 4c 4d 4h").passes(0)
    assert h.owed() == [(0, 1, 20, "chat_tu_quy")]


# --- the end of the hand (4.4, SL-7, SL-14, SL-17) --------------------------------------------


def _loser_plays_once(loser_hand: str) -> Hand:
    """Seat 1 leads its 3♣, seat 0 beats it and goes out; seat 1 keeps the rest."""
    h = Hand(samloc, {0: "", 1: loser_hand}, dealer=1, options=PLAIN).no_sam()
    h.play(1, "3c").play(0, "4s").passes(1).goes_out(0)
    return h


def test_each_loser_pays_its_cards_left_times_the_stake() -> None:
    h = _loser_plays_once("3c 5c 7c 9c Jc Kc 6d 8d Td Qd")
    assert h.lines() == [(1, 0, 900, "cards_left")]


def test_thoi_2_a_black_2_left_is_5_and_a_red_2_10_instead_of_1_sl_7() -> None:
    h = _loser_plays_once("3c 2s 2h 9c Jc Kc 6d 8d Td Qd")
    assert h.lines() == [(1, 0, 700, "cards_left"), (1, 0, 500, "thoi_heo_den"), (1, 0, 1_000, "thoi_heo_do")]


def test_a_tu_quy_left_is_four_ordinary_cards_sl_17() -> None:
    h = _loser_plays_once("3c 9s 9c 9d 9h Kc 6d 8d Td Qd")
    assert h.lines() == [(1, 0, 900, "cards_left")]


def test_treo_a_player_who_played_no_card_pays_15_flat_sl_14() -> None:
    h = Hand(samloc, {0: "", 1: "2h 2s 5c 7c 9c Jc Kc 6d 8d Td"}, options=PLAIN).no_sam().goes_out(0)
    assert h.lines() == [(1, 0, 1_500, "treo")]


def test_the_last_play_may_not_hold_a_2_and_only_2s_left_must_pass_sl_7() -> None:
    h = Hand(samloc, {0: "", 1: ""}, options=PLAIN).no_sam()
    h.state = h.state.derive(hands={**h.state.hands, 0: tuple(parse_cards("2s 2c"))})
    assert h.refused(CardsPlayed(0, tuple(parse_cards("2s 2c")))) == "ILLEGAL_MOVE"
    h.play(0, "2s")  # a 2 that does not empty the hand is fine
    h.passes(1)
    assert h.turn == 0 and h.state.leading
    assert h.refused(CardsPlayed(0, tuple(parse_cards("2c")))) == "ILLEGAL_MOVE"
    h.apply(Passed(0))  # with no legal lead the seat hands the lead on
    assert h.turn == 1 and h.state.leading


# --- thắng trắng (SL-8) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hand", "kind"),
    [
        ("3s 4c 5d 6h 7s 8c 9d Th Js Qc", "sanh_rong"),
        ("2s 2c 2d 2h 3s 5c 7d 9h Js Kc", "tu_quy_heo"),
        ("3s 3c 5d 5h 7s 7c 9d 9h Js Jc", "nam_doi"),
        ("3s 3c 3d 5h 5s 5c 9d 9h 9s Kc", "ba_sam"),
        ("3s 5s 7s 9s Js Ks 4c 6c 8c Tc", "dong_mau"),
    ],
)
def test_thang_trang_at_the_deal_takes_20_from_each_other_player(hand: str, kind: str) -> None:
    h = Hand(samloc, {0: "", 1: hand, 2: ""}, seats_max=3, dealer=1)
    assert h.state.winner == 1 and h.state.instant_kind == kind
    assert sorted(h.lines()) == [(0, 1, 2_000, "thang_trang"), (2, 1, 2_000, "thang_trang")]


# --- báo 1 (SL-11) ----------------------------------------------------------------------------


def test_bao_1_the_seat_before_a_one_card_hand_plays_only_its_highest_single_sl_11() -> None:
    h = Hand(samloc, {0: "Ks Kc 9d 5h", 1: ""}, options=PLAIN).no_sam()
    h.state = h.state.derive(hands={**h.state.hands, 1: tuple(parse_cards("Qh"))})
    assert h.refused(CardsPlayed(0, tuple(parse_cards("5h")))) == "ILLEGAL_MOVE"
    plays = [b.cards for b in samloc.candidate_actions(h.state, 0) if isinstance(b, CardsPlayed)]
    singles = [cards for cards in plays if len(cards) == 1]
    assert singles and all(cards[0].rank == 13 for cards in singles)
    h.play(0, "Ks")


def test_bao_1_can_be_turned_off() -> None:
    h = Hand(samloc, {0: "Ks Kc 9d 5h", 1: ""}, options={**PLAIN, "bao_1": "false"}).no_sam()
    h.state = h.state.derive(hands={**h.state.hands, 1: tuple(parse_cards("Qh"))})
    h.play(0, "5h")


# --- leaving and disconnecting (4.5, SL-12, SL-13, SL-21) -------------------------------------


def test_leaving_mid_hand_pays_10_to_each_other_player_sl_21() -> None:
    h = Hand(samloc, {0: "", 1: "", 2: ""}, seats_max=3, options=PLAIN).no_sam()
    h.apply(PlayerLeft(2))
    assert h.owed() == [(2, 0, 10, "leave_penalty"), (2, 1, 10, "leave_penalty")]
    assert h.state.order == (0, 2, 1) and 2 in h.state.out
    h.goes_out(0)
    assert [line for line in h.lines() if line[0] == 2] == [
        (2, 0, 1_000, "leave_penalty"),
        (2, 1, 1_000, "leave_penalty"),
    ]


def test_a_declarer_who_leaves_pays_den_bao_25_to_each_sl_12() -> None:
    h = Hand(samloc, {0: "", 1: "", 2: ""}, seats_max=3, options=PLAIN)
    h.declare(0, "sam").no_sam()
    h.apply(PlayerLeft(0))
    assert h.owed() == [(0, 2, 25, "den_bao"), (0, 1, 25, "den_bao")]
    assert h.state.declarer is None and h.turn == 2


def test_the_last_seat_left_wins_and_leavers_pay_no_count() -> None:
    h = Hand(samloc, {0: "", 1: ""}, options=PLAIN).no_sam()
    h.apply(PlayerLeft(1))
    assert h.state.winner == 0
    assert h.lines() == [(1, 0, 1_000, "leave_penalty")]


def test_a_disconnected_seat_auto_passes_and_hands_on_the_lead_sl_13() -> None:
    h = Hand(samloc, {0: "", 1: "", 2: ""}, seats_max=3, options=PLAIN).no_sam()
    h.apply(PlayerDisconnected(2))
    h.play(0, "3s")
    assert h.turn == 1  # seat 2 skipped
    h.passes(1)
    assert h.turn == 0 and h.state.leading
    h2 = Hand(samloc, {0: "", 1: "", 2: ""}, seats_max=3, options=PLAIN).no_sam()
    h2.apply(PlayerDisconnected(0))
    assert h2.turn == 2 and h2.state.leading  # the lead passes on
    assert 0 not in h2.state.out  # not out: it pays the normal count at the end


def test_options_and_player_count() -> None:
    with pytest.raises(RuleViolation) as err:
        samloc.initial_state(started("samloc", (0, 1, 2, 3, 4, 5), seats_max=6))
    assert err.value.code == "BAD_SEAT_COUNT"
    with pytest.raises(RuleViolation) as err:
        samloc.initial_state(started("samloc", options={"turn_timeout_s": "0"}))
    assert err.value.code == "BAD_OPTION"


def test_without_the_window_play_starts_at_once() -> None:
    h = Hand(samloc, {0: "", 1: ""}, options={**PLAIN, "bao_sam": "false"})
    assert h.turn == 0
    assert h.refused(Declared(0, "sam")) == "BAD_DECLARATION"


# --- decisions where RULES.md is silent ---------------------------------------------------


def test_when_nobody_can_lead_play_ends_and_the_lowest_count_is_first() -> None:
    # SL-7 (b) can leave every hand a lone 2: decision, the lowest count wins.
    h = Hand(samloc, {0: "", 1: ""}, options=PLAIN).no_sam()
    hands = {0: tuple(parse_cards("2s")), 1: tuple(parse_cards("2h"))}
    h.state = h.state.derive(hands=hands, played_any=frozenset({0, 1}))
    h.apply(Passed(0))
    assert h.state.ending == "stalemate" and h.state.winner == 0
    assert h.lines() == [(1, 0, 1_000, "thoi_heo_do")]


def test_a_declarer_left_with_a_lone_2_on_lead_fails_the_sam_paying_25_to_each() -> None:
    h = Hand(samloc, {0: "", 1: "", 2: ""}, seats_max=3, options=PLAIN)
    h.declare(0, "sam").no_sam()
    h.state = h.state.derive(hands={**h.state.hands, 0: tuple(parse_cards("2s"))})
    assert h.refused(CardsPlayed(0, tuple(parse_cards("2s")))) == "ILLEGAL_MOVE"
    h.apply(Passed(0))
    assert h.state.ending == "sam_failed"
    assert h.lines() == [(0, 2, 2_500, "sam_failed"), (0, 1, 2_500, "sam_failed")]
