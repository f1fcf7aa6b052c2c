"""Tiến Lên Miền Nam đếm lá (RULES.md §9, TL-1..TL-20) played through the engine: who
leads, the chặt table and chained chops, tới trắng, counting and ranking settlement, cóng,
disconnects, and the §9.6 variants that are off by default.

Seats are numbered clockwise and play goes counterclockwise (GEN-2): with seats 0-3 and
seat 0 leading, the turn goes 0 → 3 → 2 → 1."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from socai import fairness
from socai.cards import parse_cards
from socai.errors import RuleViolation
from socai.events.model import Body, CardsPlayed, Event, PlayerDisconnected, PlayerLeft, PlayerReconnected
from socai.rules import autoplay, base
from socai.rules.climbing import shedding, tienlen
from socai.settle import replay_hand
from tests.unit.rules.test_shedding_play import Hand, started

NO_INSTANT = {"instant_wins": "false"}
# Four hands of one suit each: seat 0 spades, 1 clubs, 2 diamonds, 3 hearts (each a Sảnh
# Rồng, so instant wins must be off unless a test is about them).
SUITS = {s: " ".join(f"{r}{'scdh'[s]}" for r in "3456789TJQKA2") for s in range(4)}


# --- who leads (9.1, TL-1, TL-9, TL-12) ----------------------------------------------------


def test_the_holder_of_3s_leads_the_first_hand() -> None:
    h = Hand(tienlen, SUITS, dealer=2, hand_number=1, options=NO_INSTANT)
    assert h.turn == 0 and h.state.leading


def test_without_the_3s_the_lowest_card_leads_the_first_hand_tl_1() -> None:
    hands = {0: SUITS[2], 1: SUITS[1]}  # 3♠ undealt: 3♣ (seat 1) is the lowest card
    h = Hand(tienlen, hands, dealer=0, hand_number=1, options=NO_INSTANT)
    assert h.turn == 1


def test_from_the_second_hand_the_previous_winner_leads() -> None:
    h = Hand(tienlen, SUITS, dealer=2, hand_number=2, options=NO_INSTANT)
    assert h.turn == 2
    h.goes_out(2)
    assert h.state.winner == 2
    assert tienlen.next_hand_dealer(h.state, 2, (0, 1, 2, 3), 4, 0) == 2


def test_when_the_winner_has_left_the_second_placed_seat_leads() -> None:
    hands = {0: SUITS[0], 1: "2c 2d 2h 3c 4c 5c 6c 7c 8c 9c Tc Jc Qc", 2: SUITS[2].replace("2d", "Kc")}
    h = Hand(tienlen, hands, seats_max=3, dealer=0, options=NO_INSTANT)
    h.goes_out(0)
    # Seat 2 holds 13 ordinary cards (13 lá), seat 1 three 2s (25 + 10 = 35 lá).
    assert tienlen.next_hand_dealer(h.state, 0, (1, 2), 3, 0) == 2


def test_the_first_lead_need_not_hold_the_3s_tl_12() -> None:
    h = Hand(tienlen, SUITS, hand_number=1, options=NO_INSTANT)
    h.play(0, "5s")  # allowed by default


def test_with_the_flag_the_first_lead_must_hold_the_3s_tl_12() -> None:
    h = Hand(tienlen, SUITS, hand_number=1, options={**NO_INSTANT, "first_lead_must_include_3s": "true"})
    assert h.refused(CardsPlayed(0, tuple(parse_cards("5s")))) == "ILLEGAL_MOVE"
    h.play(0, "3s 4s 5s")


# --- combinations and beating (9.2, TL-7, DESIGN.md public API) ------------------------------


def test_combo_and_beats_are_bound_to_tien_lens_rules() -> None:
    kinds = {
        "7h": "single",
        "7h 7s": "pair",
        "7h 7s 7d": "triple",
        "Qs Kd Ah": "straight",
        "3s 3c 4d 4h 5s 5c": "pairs_run",
        "9s 9c 9d 9h": "four",
    }
    for text, kind in kinds.items():
        found = tienlen.combo(parse_cards(text))
        assert found is not None and found.kind == kind, text
    assert tienlen.combo(parse_cards("Ks As 2s")) is None  # TL-7: no 2 in a straight
    assert tienlen.combo(parse_cards("As 2s 3s")) is None  # A is high only
    single = tienlen.combo(parse_cards("7s"))
    higher = tienlen.combo(parse_cards("7h"))
    assert single is not None and higher is not None
    assert tienlen.beats(higher, single) and not tienlen.beats(single, higher)  # ♥ > ♠


def test_a_higher_suit_on_the_top_card_beats_an_equal_group() -> None:
    h = Hand(tienlen, SUITS, options=NO_INSTANT)
    h.play(0, "9s")
    assert h.refused(CardsPlayed(3, tuple(parse_cards("8h")))) == "CANNOT_BEAT"
    h.play(3, "9h")  # 9♥ beats 9♠


# --- chặt (9.2, 9.4, TL-6, TL-16, TL-17) ------------------------------------------------------

CHOP = {
    0: "2h 2s Kc Kd Ks",
    2: "3s 3c 4s 4c 5s 5c",
    1: "7s 7c 7d 7h",
}


def test_ba_doi_thong_chops_a_red_2_for_10_when_the_round_closes() -> None:
    h = Hand(tienlen, CHOP, seats_max=3, options=NO_INSTANT)
    assert h.state.order == (0, 2, 1)
    h.play(0, "2h").play(2, "3s 3c 4s 4c 5s 5c")
    assert h.owed() == []  # paid when the round closes (TL-6)
    h.passes(1, 0)
    assert h.owed() == [(0, 2, 10, "chat_heo_do")]


def test_a_black_2_chopped_costs_5() -> None:
    h = Hand(tienlen, CHOP, seats_max=3, options=NO_INSTANT)
    h.play(0, "2s").passes(2).play(1, "7s 7c 7d 7h").passes(0)
    assert h.owed() == [(0, 1, 5, "chat_heo_den")]


def test_tu_quy_chops_a_pair_of_2s_for_their_converted_value() -> None:
    h = Hand(tienlen, CHOP, seats_max=3, options=NO_INSTANT)
    h.play(0, "2s 2h").passes(2).play(1, "7s 7c 7d 7h").passes(0)
    assert h.owed() == [(0, 1, 15, "chat_doi_heo")]  # 5 + 10


def test_tu_quy_chops_a_led_ba_doi_thong_for_10() -> None:
    h = Hand(tienlen, CHOP, seats_max=3, dealer=2, options=NO_INSTANT)
    h.play(2, "3s 3c 4s 4c 5s 5c").play(1, "7s 7c 7d 7h").passes(0, 2)
    assert h.owed() == [(2, 1, 10, "chat_ba_doi_thong")]


def test_bon_doi_thong_chops_a_tu_quy_for_20() -> None:
    hands = {0: "9s 9c 9d 9h", 2: "3s 3c 4s 4c 5s 5c 6s 6c", 1: "3d 3h 4d 4h 5d 5h 6d 6h"}
    h = Hand(tienlen, hands, seats_max=3, options=NO_INSTANT)
    h.play(0, "9s 9c 9d 9h").play(2, "3s 3c 4s 4c 5s 5c 6s 6c").passes(1, 0)
    assert h.owed() == [(0, 2, 20, "chat_tu_quy")]


def test_bon_doi_thong_on_a_smaller_bon_doi_thong_is_a_chop_for_30() -> None:
    hands = {0: "9s 9c 9d 9h", 2: "3s 3c 4s 4c 5s 5c 6s 6c", 1: "3d 3h 4d 4h 5d 5h 6d 6h"}
    h = Hand(tienlen, hands, seats_max=3, dealer=2, options=NO_INSTANT)
    assert h.state.order == (2, 1, 0)
    h.play(2, "3s 3c 4s 4c 5s 5c 6s 6c").play(1, "3d 3h 4d 4h 5d 5h 6d 6h").passes(0, 2)
    assert h.owed() == [(2, 1, 30, "chat_bon_doi_thong")]


def test_a_chain_of_three_chops_pays_the_sum_of_what_was_chopped_tl_6() -> None:
    # Tứ quý (20) chopped by bốn đôi thông (30) chopped by a higher bốn đôi thông: the
    # last chopped (seat 2) pays the last chopper 20 + 30; the tứ quý pays nothing.
    hands = {0: "9s 9c 9d 9h", 2: "3s 3c 4s 4c 5s 5c 6s 6c", 1: "3d 3h 4d 4h 5d 5h 6d 6h"}
    h = Hand(tienlen, hands, seats_max=3, options=NO_INSTANT)
    h.play(0, "9s 9c 9d 9h").play(2, "3s 3c 4s 4c 5s 5c 6s 6c").play(1, "3d 3h 4d 4h 5d 5h 6d 6h")
    h.passes(0, 2)
    assert h.owed() == [(2, 1, 50, "chat_de")]


def test_chat_de_the_last_chopped_pays_the_last_chopper_the_whole_chain_tl_6() -> None:
    # RULES.md TL-6's example: 2♥ (10) chopped by ba đôi thông (10), chopped by tứ quý:
    # the ba đôi thông player pays the tứ quý player 20 lá; the 2♥ pays nothing.
    h = Hand(tienlen, CHOP, seats_max=3, options=NO_INSTANT)
    h.play(0, "2h").play(2, "3s 3c 4s 4c 5s 5c").play(1, "7s 7c 7d 7h").passes(0, 2)
    assert h.owed() == [(2, 1, 20, "chat_de")]
    assert tienlen.REASONS["chat_de"].penalty and "TL-6" in tienlen.REASONS["chat_de"].rule
    assert tienlen.explain(h.state) == ["chat_de [TL-6]: seat 2 pays seat 1 20 lá (plays 1, 2, 3)"]
    # ... and the settlement line that pays it says which plays caused it (issue 14)
    assert [o.detail for o in h.state.obligations] == ["TL-6; plays 1, 2, 3"]


def test_the_chop_table_is_a_closed_list_tl_17() -> None:
    h = Hand(tienlen, {0: "2s 2c 2h", 1: "7s 7c 7d 7h"}, options=NO_INSTANT)
    h.play(0, "2s 2c 2h")
    assert h.refused(CardsPlayed(1, tuple(parse_cards("7s 7c 7d 7h")))) == "CANNOT_BEAT"


def test_a_chop_with_the_last_card_closes_its_chain_at_once_and_the_hand_settles_tl_16() -> None:
    # Seat 1 sheds a straight, seat 0 beats it and leads the 2♠; seat 1 chops it with its
    # last six cards (ba đôi thông) and goes out. Seat 0 pays the chop (black 2, 5 lá) and
    # its cards: a red 2 left (thối heo, 10 lá) and four ordinary cards.
    hands = {
        0: "6h 7h 8h 9h Th Jh Qh 2s Ks Kd Ah Ad 2h",
        1: "3s 3c 4s 4c 5s 5c 6c 7c 8c 9c Tc Jc Qc",
    }
    h = Hand(tienlen, hands, dealer=1)
    h.play(1, "6c 7c 8c 9c Tc Jc Qc").play(0, "6h 7h 8h 9h Th Jh Qh").passes(1)
    h.play(0, "2s").play(1, "3s 3c 4s 4c 5s 5c")
    assert h.state.winner == 1
    assert h.lines() == [
        (0, 1, 500, "chat_heo_den"),
        (0, 1, 400, "cards_left"),
        (0, 1, 1_000, "thoi_heo_do"),
    ]


# --- counting (9.4, TL-5, TL-14) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("loser", "expected"),
    [
        ("2s 2h 3c 5c 7c 9c Jc Kc 4d 6d 8d Td Qd", [("cards_left", 11), ("thoi_heo_den", 5), ("thoi_heo_do", 10)]),
        ("9s 9c 9d 9h 3c 5c 7c Jc Kc 4d 6d 8d Qd", [("cards_left", 9), ("thoi_tu_quy", 20)]),
        ("3c 3d 4c 4d 5c 5d 7c 9c Jc Kc 8d Td Qd", [("cards_left", 7), ("thoi_ba_doi_thong", 10)]),
        ("6c 6d 7c 7d 8c 8d 9c 9d 3c Jc Kc Td Qd", [("cards_left", 5), ("thoi_bon_doi_thong", 30)]),
        (
            "2s 2c 2d 2h 3c 5c 7c 9c Jc 4d 6d 8d Qd",
            [("cards_left", 9), ("thoi_heo_den", 5), ("thoi_heo_den", 5), ("thoi_heo_do", 10), ("thoi_heo_do", 10)],
        ),
    ],
    ids=["two_2s", "tu_quy", "ba_doi_thong", "bon_doi_thong", "four_2s_tl_14"],
)
def test_each_loser_pays_the_first_its_cards_left_with_converted_values(
    loser: str, expected: list[tuple[str, int]]
) -> None:
    h = Hand(tienlen, {0: "", 1: loser}, options=NO_INSTANT)
    h.goes_out(0)
    assert sorted((reason, gold // 100) for _, _, gold, reason in h.lines()) == sorted(expected)


def test_tl_5_a_red_2_and_seven_other_cards_cost_17() -> None:
    h = Hand(tienlen, {0: "", 1: "2h 3c 5c 7c 9c 4d 6d 8d Td Qd Jc Kc Ad"}, dealer=1, options=NO_INSTANT)
    for card in ("3c", "5c", "7c", "9c"):
        h.play(1, card).passes(0)
    h.play(1, "4d").play(0, "4h").passes(1)  # seat 0 takes the lead
    h.goes_out(0)
    assert set(h.state.hands[1]) == set(parse_cards("2h 6d 8d Td Qd Jc Kc Ad"))
    assert sum(gold for *_, gold, _ in h.lines()) == (10 + 7) * 100


def test_cong_pays_the_count_of_all_13_cards_tl_4() -> None:
    h = Hand(tienlen, {0: "", 1: "2h 3c 5c 7c 9c Jc Kc 4d 6d 8d Td Qd Ad"}, options=NO_INSTANT)
    h.goes_out(0)
    assert sum(gold for *_, gold, _ in h.lines()) == (12 + 10) * 100


def test_cong_double_doubles_the_count_tl_4_flag() -> None:
    options = {**NO_INSTANT, "cong_double": "true"}
    h = Hand(tienlen, {0: "", 1: "2h 3c 5c 7c 9c Jc Kc 4d 6d 8d Td Qd Ad"}, options=options)
    h.goes_out(0)
    lines = h.lines()
    assert ("cong" in {r for *_, r in lines}) and sum(g for *_, g, _ in lines) == 2 * 22 * 100


# --- tới trắng (9.1, TL-3, TL-9, TL-10) ------------------------------------------------------


def test_toi_trang_at_the_deal_takes_26_from_each_other_player_without_thoi() -> None:
    h = Hand(tienlen, SUITS, dealer=2)
    assert h.state.winner == 2 and h.state.instant_kind == "sanh_rong"
    assert h.lines() == [(1, 2, 2_600, "toi_trang"), (0, 2, 2_600, "toi_trang"), (3, 2, 2_600, "toi_trang")]


def test_several_toi_trang_the_first_in_turn_order_wins_tl_9() -> None:
    assert Hand(tienlen, SUITS, dealer=3).state.winner == 3
    # First hand: from the 3♠ holder (seat 0), whoever deals.
    assert Hand(tienlen, SUITS, dealer=3, hand_number=1).state.winner == 0


def test_toi_trang_in_rank_mode_is_2_from_each_tl_3() -> None:
    h = Hand(tienlen, SUITS, dealer=1, options={"settlement_mode": "rank"})
    assert {gold for *_, gold, _ in h.lines()} == {200}


@pytest.mark.parametrize(
    ("hand", "kind"),
    [
        ("3s 3c 4s 4c 5s 5c 6s 6c 7s 7c Kd Ah 2h", "nam_doi_thong"),
        ("3s 3c 5s 5c 7s 7c 9s 9c Js Jc Ks Kc 2h", "sau_doi"),
        ("2s 2c 2d 2h 3s 5c 7s 9c Js Kc Ad 4h 6d", "tu_quy_heo"),
        ("3s 3c 3d 3h 5s 5c 7s 7c 9s 9c Kd Kh 2h", "sau_doi"),  # TL-15: a tứ quý is two pairs
    ],
)
def test_each_toi_trang_hand_wins_at_the_deal(hand: str, kind: str) -> None:
    h = Hand(tienlen, {0: "", 1: hand}, dealer=1)
    assert h.state.winner == 1 and h.state.instant_kind == kind


def test_first_hand_instant_wins_are_off_by_default_9_6() -> None:
    hand = "3s 3c 3d 3h 5s 7c 9s Jc Kd Ah 2h 6d 8c"
    assert Hand(tienlen, {0: "", 1: hand}, hand_number=1).state.winner is None
    h = Hand(tienlen, {0: "", 1: hand}, hand_number=1, options={"first_hand_3s_instant_win": "true"})
    assert h.state.winner == 1 and h.state.instant_kind == "tu_quy_ba"


# --- ranking mode (TL-2, TL-18) ---------------------------------------------------------------


def test_rank_mode_places_pay_1_2_3_by_converted_count_tl_18() -> None:
    hands = {
        0: "3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As Ac",
        1: "2s 2c 2d 3c 4c 5c 6c 7c 8c 9c Tc Jc Qc",  # 5 + 5 + 10 + 10 = 30
        2: "3h 4h 5h 6h 7h 8h 9h Th Jh Qh Kh Ah Kc",  # 13
        3: "2h 3d 4d 5d 6d 7d 8d 9d Td Jd Qd Kd Ad",  # 10 + 12 = 22
    }
    h = Hand(tienlen, hands, options={**NO_INSTANT, "settlement_mode": "rank"})
    h.goes_out(0)
    assert sorted(h.lines()) == [(1, 0, 300, "rank_place"), (2, 0, 100, "rank_place"), (3, 0, 200, "rank_place")]


def test_rank_mode_ties_go_to_turn_order_after_the_winner_and_two_players_pay_1() -> None:
    h = Hand(tienlen, {0: "", 1: ""}, options={**NO_INSTANT, "settlement_mode": "rank"})
    h.goes_out(0)
    assert h.lines() == [(1, 0, 100, "rank_place")]


def test_chops_are_paid_in_rank_mode_too_tl_16() -> None:
    h = Hand(tienlen, CHOP, seats_max=3, options={**NO_INSTANT, "settlement_mode": "rank"})
    h.play(0, "2h").play(2, "3s 3c 4s 4c 5s 5c").passes(1, 0)
    assert h.owed() == [(0, 2, 10, "chat_heo_do")]


# --- disconnects (TL-11, GEN-6) ------------------------------------------------------------


def test_a_disconnected_seat_is_out_at_once_and_pays_for_its_cards_at_the_end_tl_11() -> None:
    h = Hand(tienlen, {0: "", 1: "", 2: "2h 3c 5c 7c 9c Jc Kc 4d 6d 8d Td Qd Ad"}, seats_max=3, options=NO_INSTANT)
    h.play(0, "3s").apply(PlayerDisconnected(2))
    assert 2 in h.state.out and h.turn == 1
    h.apply(PlayerReconnected(2))
    assert 2 in h.state.out  # removed for the hand
    h.passes(1)
    h.goes_out(0)
    paid_by_2 = sum(g for payer, _, g, _ in h.lines() if payer == 2)
    assert paid_by_2 == (12 + 10) * 100


def test_the_last_seat_left_in_play_wins_tl_11() -> None:
    h = Hand(tienlen, {0: "", 1: "2h 3c 5c 7c 9c Jc Kc 4d 6d 8d Td Qd Ad"}, options=NO_INSTANT)
    h.apply(PlayerLeft(1))
    assert h.state.winner == 0
    assert sum(g for *_, g, _ in h.lines()) == 22 * 100


# --- options -------------------------------------------------------------------------------


def test_restore_turn_4dt_brings_passed_seats_back_9_6_off_by_default() -> None:
    hands = {0: "2h", 2: "Ks", 1: "3s 3c 4s 4c 5s 5c 6s 6c"}
    h = Hand(tienlen, hands, seats_max=3, options=NO_INSTANT)
    h.play(0, "2h").passes(2).play(1, "3s 3c 4s 4c 5s 5c 6s 6c")
    assert h.turn == 0 and h.state.round_passed == frozenset({2})
    h2 = Hand(tienlen, hands, seats_max=3, options={**NO_INSTANT, "restore_turn_4dt": "true"})
    h2.play(0, "2h").passes(2).play(1, "3s 3c 4s 4c 5s 5c 6s 6c")
    assert h2.state.round_passed == frozenset()


def test_dut_3_bich_is_off_by_default_going_out_on_the_3s_is_an_ordinary_win() -> None:
    h = Hand(tienlen, {0: "3s", 1: "2h"}, options=NO_INSTANT).goes_out(0)
    assert h.state.ending == "out"
    reasons = {r for *_, r in h.lines()}
    assert "thoi_heo_do" in reasons and "dut_ba_bich" not in reasons


def test_dut_3_bich_each_other_player_pays_26_plus_its_2s_9_6_tl_13() -> None:
    h = Hand(tienlen, {0: "3s", 1: "2h"}, options={**NO_INSTANT, "dut_3_bich": "true"}).goes_out(0)
    assert h.state.ending == "dut_ba_bich"
    assert h.lines() == [(1, 0, (26 + 10) * 100, "dut_ba_bich")]


def test_thoi_3_bich_the_blocker_saves_the_village_9_6_tl_13_example() -> None:
    # RULES.md 9.6 #4: a 3-player table at 1,000. A holds 2♥ and 3♠; B chops the 2♥ with
    # three consecutive pairs; A is Thối 3 Bích and pays B 2 × 26 × 1,000 = 52,000.
    hands = {0: "3s 2h", 2: "4s 4c 5s 5c 6s 6c", 1: ""}
    h = Hand(tienlen, hands, seats_max=3, stake=1_000, options={**NO_INSTANT, "dut_3_bich": "true"})
    h.state = h.state.derive(hands={**h.state.hands, 0: tuple(parse_cards("3s 2h"))})
    h.play(0, "2h").play(2, "4s 4c 5s 5c 6s 6c")
    assert h.state.winner == 2 and h.state.ending == "thoi_ba_bich"
    assert h.lines() == [(0, 2, 52_000, "thoi_ba_bich")]


def test_options_defaults_are_recorded_and_a_bad_mode_is_refused() -> None:
    assert base.full_options(tienlen, {})["settlement_mode"] == "count"
    with pytest.raises(RuleViolation) as err:
        tienlen.initial_state(started("tienlen", options={"settlement_mode": "bogus"}))
    assert err.value.code == "BAD_OPTION"


def test_two_to_four_players_tl_1() -> None:
    with pytest.raises(RuleViolation) as err:
        tienlen.initial_state(started("tienlen", (0,)))
    assert err.value.code == "BAD_SEAT_COUNT"


# --- a dealt hand through the auditor's replay ---------------------------------------------


def _chop_first(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
    """A bot that chops whenever it can, else plays its weakest play, else passes."""
    assert isinstance(state, tienlen.State)
    over = state.round_plays[-1].combination if state.round_plays and not state.leading else None
    plays = [c for c in candidates if isinstance(c, CardsPlayed)]
    for c in plays:
        found = tienlen.combo(c.cards)
        if over is not None and found is not None and shedding.is_chop(found, over, tienlen.RULES):
            return c
    return plays[0] if plays else candidates[-1]


def test_a_shuffled_hand_with_a_chop_and_a_red_2_left_settles_and_the_audit_agrees() -> None:
    # Seed 70 (found by search) deals a hand in which a black 2 is chopped during play and a
    # loser is left holding a red 2 (thối heo).
    seed = bytes([70, 0]) + bytes(30)
    hand = dataclasses.replace(
        started("tienlen", (0, 1, 2, 3), options=base.full_options(tienlen, {})),
        table_id="tl-e2e",
        hand_id="tl-e2e-h1",
        deck_commitment=fairness.commitment(seed),
    )
    bodies, state = autoplay.play_hand(tienlen, hand, seed, _chop_first)
    settlement = tienlen.settle(state)
    assert {"chat_heo_den", "thoi_heo_do"} <= set(settlement.by_reason())
    at = datetime(2026, 1, 1, tzinfo=UTC)
    events = [Event("tl-e2e", "tl-e2e-h1", i, "tienlen", at, body) for i, body in enumerate(bodies, start=1)]
    assert replay_hand(events) == settlement
    chop = next(e for e in tienlen.explain(state) if e.startswith("chat_heo_den"))
    assert chop.startswith("chat_heo_den [9.4]: seat 2 pays seat 1 5 lá (plays ")
