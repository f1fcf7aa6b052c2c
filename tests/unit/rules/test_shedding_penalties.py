"""Penalty valuation of the shedding core: one test per row of RULES.md §9.4 and §4.4.

Amounts are in lá (units of the stake S); each comes with its reason code and rule id.
"""

from __future__ import annotations

import dataclasses

from socai.cards import parse_cards
from socai.rules.climbing import shedding
from socai.rules.climbing.shedding import SAMLOC, TIENLEN, Penalty, Play, SheddingRules


def left(text: str, rules: SheddingRules, *, played_any: bool = True) -> shedding.HandCount:
    return shedding.count_left(parse_cards(text), rules, played_any=played_any)


def lines(text: str, rules: SheddingRules) -> list[tuple[str, int]]:
    return [(line.reason, line.amount_stakes) for line in left(text, rules).lines]


def round_of(rules: SheddingRules, *plays: str) -> list[Play]:
    """A round's plays, seat i playing the i-th play."""
    found = []
    for seat, text in enumerate(plays):
        combination = shedding.combo(parse_cards(text), rules)
        assert combination is not None, text
        found.append(Play(seat, combination))
    return found


def chop(rules: SheddingRules, *plays: str) -> Penalty | None:
    return shedding.chop_penalty(round_of(rules, *plays), rules)


def instant(text: str, rules: SheddingRules, *, first_hand: bool = False) -> str | None:
    found = shedding.instant_win(parse_cards(text), rules, first_hand=first_hand)
    return None if found is None else found.kind


# --- Tiến Lên: cards left and thối (9.4, TL-4, TL-5, TL-14) ---------------------------------


def test_ordinary_cards_left_cost_one_la_each() -> None:
    count = left("3s 5d 9h Kc", TIENLEN)
    assert count.total_stakes == 4
    assert count.lines[0].reason == "cards_left" and count.lines[0].rule == "9.4"


def test_thoi_heo_den_a_black_two_left_costs_5() -> None:
    assert lines("2s", TIENLEN) == [("thoi_heo_den", 5)]
    assert lines("2c", TIENLEN) == [("thoi_heo_den", 5)]


def test_thoi_heo_do_a_red_two_left_costs_10() -> None:
    assert lines("2h", TIENLEN) == [("thoi_heo_do", 10)]
    assert lines("2d", TIENLEN) == [("thoi_heo_do", 10)]


def test_thoi_ba_doi_thong_costs_10() -> None:
    assert lines("3s 3c 4s 4c 5s 5c", TIENLEN) == [("thoi_ba_doi_thong", 10)]


def test_thoi_tu_quy_costs_20() -> None:
    assert lines("9s 9c 9d 9h", TIENLEN) == [("thoi_tu_quy", 20)]


def test_thoi_bon_doi_thong_costs_30() -> None:
    assert lines("3s 3c 4s 4c 5s 5c 6s 6c", TIENLEN) == [("thoi_bon_doi_thong", 30)]


def test_tl5_a_red_two_plus_seven_other_cards_is_17() -> None:
    """TL-5's example: converted values replace the 1 lá per card: 10 + 7 = 17."""
    assert left("2h 3s 5s 7d 8c 9h Jd Ks", TIENLEN).total_stakes == 17


def test_tl14_four_twos_count_as_four_single_twos_30() -> None:
    """TL-14: 5 + 5 + 10 + 10 = 30, more than a tứ quý's 20."""
    assert left("2s 2c 2d 2h", TIENLEN).total_stakes == 30


def test_tl14_five_consecutive_pairs_are_bon_doi_thong_plus_two_cards() -> None:
    """TL-14: 30 for the four pairs, 2 ordinary cards: 32."""
    count = left("3s 3c 4s 4c 5s 5c 6s 6c 7s 7c", TIENLEN)
    assert count.total_stakes == 32
    assert [(line.reason, line.amount_stakes) for line in count.lines] == [
        ("cards_left", 2),
        ("thoi_bon_doi_thong", 30),
    ]


def test_tl14_seven_consecutive_pairs_read_as_bon_plus_ba_doi_thong() -> None:
    """TL-14 "unless another decomposition gives more": 30 + 10 = 40 beats 30 + 6."""
    assert left("3s 3c 4s 4c 5s 5c 6s 6c 7s 7c 8s 8c 9s 9c", TIENLEN).total_stakes == 40


def test_tl5_a_four_inside_pairs_takes_the_highest_reading() -> None:
    """TL-5: 5566 7777 is tứ quý 20 + 4 cards = 24, not ba đôi thông 10 + 2 = 12."""
    assert left("5s 5c 6s 6c 7s 7c 7d 7h", TIENLEN).total_stakes == 24
    # 55 66 77 88 8888: bốn đôi thông 30 + 2 = 32 beats tứ quý 8 (20) + ba đôi thông (10) = 30.
    assert left("5s 5c 6s 6c 7s 7c 8s 8c 8d 8h", TIENLEN).total_stakes == 32


def test_every_card_left_is_counted_once() -> None:
    hand = parse_cards("2s 2h 3s 3c 4s 4c 5s 5c 9s 9c 9d 9h Kd")
    count = shedding.count_left(hand, TIENLEN)
    counted = [c for line in count.lines for c in line.cards]
    assert sorted(counted, key=lambda c: c.index) == sorted(hand, key=lambda c: c.index)
    assert count.total_stakes == 5 + 10 + 10 + 20 + 1


def test_tl4_cong_pays_the_normal_count_of_thirteen_cards() -> None:
    """TL-4: a cóng player pays the count with conversions, no extra multiplier by default."""
    hand = "2h 3s 4s 5s 6s 7s 8s 9s Ts Js Qs Kd 9d"
    assert left(hand, TIENLEN, played_any=False).total_stakes == 22


def test_tl4_cong_doubles_with_the_flag() -> None:
    doubled = dataclasses.replace(TIENLEN, cong_multiplier=2)
    count = shedding.count_left(parse_cards("2h 3s 4s"), doubled, played_any=False)
    assert count.total_stakes == 24
    assert count.lines[-1].reason == "cong" and count.lines[-1].rule == "TL-4"


# --- Sâm Lốc: cards left, thối 2, treo (4.4, SL-7, SL-14, SL-17) ----------------------------


def test_samloc_cards_left_cost_one_la_each() -> None:
    assert left("3s 5d 9h Kc", SAMLOC).total_stakes == 4


def test_samloc_thoi_2_black_5_red_10_instead_of_one() -> None:
    """4.4 and SL-7 (a): "5/10 lá tùy theo màu đen/đỏ", per 2, instead of 1 lá."""
    assert lines("2s 5d", SAMLOC) == [("cards_left", 1), ("thoi_heo_den", 5)]
    assert lines("2h 5d", SAMLOC) == [("cards_left", 1), ("thoi_heo_do", 10)]
    assert left("2s 2h 5d", SAMLOC).lines[-1].rule == "SL-7"


def test_samloc_four_of_a_kind_is_never_thoi() -> None:
    """4.2 and SL-17: "Tứ quý không tính thối": four ordinary cards, even four 2s."""
    assert left("9s 9c 9d 9h", SAMLOC).total_stakes == 4
    assert left("2s 2c 2d 2h", SAMLOC).total_stakes == 4


def test_samloc_treo_is_a_flat_15_with_no_thoi() -> None:
    """SL-14: played no card: 15 lá replaces the count and the thối surcharge."""
    count = left("2h 2d 3s 4s 5s 6s 7s 8s 9s Ts", SAMLOC, played_any=False)
    assert count.total_stakes == 15
    assert [(line.reason, line.rule) for line in count.lines] == [("treo", "SL-14")]


# --- chặt, Tiến Lên (9.4, TL-6) -------------------------------------------------------------


def test_chopping_a_black_two_costs_5() -> None:
    assert chop(TIENLEN, "2s", "3s 3c 3d 3h") == Penalty(0, 1, 5, "chat_heo_den", "9.4", tuple(parse_cards("2s")))


def test_chopping_a_red_two_costs_10() -> None:
    penalty = chop(TIENLEN, "2h", "3s 3c 4s 4c 5s 5c")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason) == (10, "chat_heo_do")


def test_chopping_a_pair_of_twos_costs_both_twos() -> None:
    penalty = chop(TIENLEN, "2s 2h", "3s 3c 3d 3h")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason) == (15, "chat_doi_heo")


def test_chopping_ba_doi_thong_costs_10() -> None:
    penalty = chop(TIENLEN, "3s 3c 4s 4c 5s 5c", "6s 6c 7s 7c 8s 8c")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason) == (10, "chat_ba_doi_thong")


def test_chopping_tu_quy_costs_20() -> None:
    penalty = chop(TIENLEN, "3s 3c 3d 3h", "4s 4c 4d 4h")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason) == (20, "chat_tu_quy")


def test_chopping_bon_doi_thong_costs_30() -> None:
    penalty = chop(TIENLEN, "3s 3c 4s 4c 5s 5c 6s 6c", "4d 4h 5d 5h 6d 6h 7s 7c")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason) == (30, "chat_bon_doi_thong")


def test_tl6_example_the_last_chopped_pays_the_last_chopper_the_whole_chain() -> None:
    """TL-6: 2♥ (10) chopped by ba đôi thông (10), chopped by tứ quý: the ba đôi thông
    player pays the tứ quý player 20 lá; the player of the 2♥ pays nothing."""
    penalty = chop(TIENLEN, "2h", "3s 3c 4s 4c 5s 5c", "9s 9c 9d 9h")
    assert penalty is not None
    assert (penalty.payer, penalty.payee, penalty.amount_stakes) == (1, 2, 20)
    assert (penalty.reason, penalty.rule) == ("chat_de", "TL-6")


def test_tl6_a_longer_chain_adds_every_chopped_play() -> None:
    """2♥ 10 + ba đôi thông 10 + tứ quý 20, all paid by the tứ quý to the bốn đôi thông."""
    penalty = chop(TIENLEN, "2h", "3s 3c 4s 4c 5s 5c", "9s 9c 9d 9h", "Ts Tc Js Jc Qs Qc Ks Kc")
    assert penalty is not None and (penalty.payer, penalty.payee, penalty.amount_stakes) == (2, 3, 40)


def test_a_two_beaten_by_a_two_before_the_chop_is_not_chopped() -> None:
    """Only the 2 that was actually chopped is priced: 2♠ beaten by 2♥, 2♥ chopped: 10."""
    penalty = chop(TIENLEN, "2s", "2h", "3s 3c 3d 3h")
    assert penalty is not None and (penalty.payer, penalty.payee, penalty.amount_stakes) == (1, 2, 10)


def test_a_round_without_a_chop_costs_nothing() -> None:
    assert chop(TIENLEN, "5s", "9h", "2s", "2h") is None
    assert chop(SAMLOC, "5s", "9h", "2s") is None


# --- chặt and đè, Sâm Lốc (4.4, SL-4, SL-5, SL-6, SL-19) ------------------------------------


def test_samloc_a_four_chopping_a_two_costs_20_whatever_its_colour() -> None:
    for two in ("2s", "2h"):
        assert chop(SAMLOC, two, "3s 3c 3d 3h") == Penalty(0, 1, 20, "chat_heo", "4.4", tuple(parse_cards(two)))


def test_samloc_four_aces_chopping_a_two_cost_40() -> None:
    """SL-5: "Tứ quý A chặt 2 = 40 lá"."""
    penalty = chop(SAMLOC, "2h", "As Ac Ad Ah")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason, penalty.rule) == (
        40,
        "chat_heo_tu_quy_a",
        "SL-5",
    )


def test_samloc_two_fours_chopping_a_pair_of_twos_cost_40() -> None:
    """4.4 and SL-4: "Hai tứ quý chặt đôi 2 = 40 lá"."""
    penalty = chop(SAMLOC, "2s 2h", "3s 3c 3d 3h 4s 4c 4d 4h")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason, penalty.rule) == (40, "chat_doi_heo", "SL-4")


def test_samloc_de_example_the_over_chopped_four_pays_20_and_the_two_nothing() -> None:
    """4.2: four 3s chop the 2♥, four 4s chop the four 3s; SL-6: the four 3s pay 20 lá."""
    penalty = chop(SAMLOC, "2h", "3s 3c 3d 3h", "4s 4c 4d 4h")
    assert penalty is not None
    assert (penalty.payer, penalty.payee, penalty.amount_stakes) == (1, 2, 20)
    assert (penalty.reason, penalty.rule) == ("chat_de", "SL-6")


def test_samloc_de_of_two_fours_pays_the_overridden_40() -> None:
    """SL-6: the value of the chop that was overridden, 40 when it was a two-fours chop."""
    penalty = chop(SAMLOC, "2s 2h", "3s 3c 3d 3h 4s 4c 4d 4h", "5s 5c 5d 5h 6s 6c 6d 6h")
    assert penalty is not None and (penalty.payer, penalty.payee, penalty.amount_stakes) == (1, 2, 40)


def test_samloc_a_four_on_a_led_four_costs_20() -> None:
    """SL-6: a tứ quý beating a tứ quý that was led (no 2 involved) pays 20 lá."""
    penalty = chop(SAMLOC, "5s 5c 5d 5h", "9s 9c 9d 9h")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason) == (20, "chat_tu_quy")


def test_samloc_sl19_a_longer_de_chain_sums_the_chops_it_overrode() -> None:
    """SL-19: only the last chop pays; the last chopped pays the sum of the chain: 20 + 20."""
    penalty = chop(SAMLOC, "2h", "3s 3c 3d 3h", "4s 4c 4d 4h", "5s 5c 5d 5h")
    assert penalty is not None
    assert (penalty.payer, penalty.payee, penalty.amount_stakes, penalty.rule) == (2, 3, 40, "SL-19")


def test_samloc_de_chain_without_summing_pays_only_the_last_overridden_chop() -> None:
    """The SL-19 flag off reads SL-6 alone: 20."""
    plain = dataclasses.replace(SAMLOC, chop_chain_sums=False)
    plays = round_of(plain, "2h", "3s 3c 3d 3h", "4s 4c 4d 4h", "5s 5c 5d 5h")
    penalty = shedding.chop_penalty(plays, plain)
    assert penalty is not None and penalty.amount_stakes == 20


def test_samloc_two_fours_on_led_two_fours_cost_40() -> None:
    penalty = chop(SAMLOC, "3s 3c 3d 3h 4s 4c 4d 4h", "5s 5c 5d 5h 6s 6c 6d 6h")
    assert penalty is not None and (penalty.amount_stakes, penalty.reason) == (40, "chat_hai_tu_quy")


def test_the_chain_is_the_first_chopped_play_and_everything_after() -> None:
    plays = round_of(TIENLEN, "9s", "2s", "2h", "3s 3c 3d 3h", "4s 4c 4d 4h")
    assert shedding.chop_chain(plays, TIENLEN) == tuple(plays[2:])


# --- instant wins (9.1, TL-9, TL-15, TL-20, 9.6 #2; SL-8) -----------------------------------


def test_tienlen_sanh_rong_3_to_a_with_any_thirteenth_card() -> None:
    """TL-20: twelve ranks 3 to A; the thirteenth card, a 2 included, does not matter."""
    assert instant("3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As 2h", TIENLEN) == "sanh_rong"
    assert instant("3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As 9h", TIENLEN) == "sanh_rong"


def test_tienlen_nam_doi_thong() -> None:
    assert instant("3s 3c 4s 4c 5s 5c 6s 6c 7s 7c 9d Jh 2s", TIENLEN) == "nam_doi_thong"


def test_tienlen_five_consecutive_pairs_with_a_two_are_not_nam_doi_thong() -> None:
    """TL-7: Q-K-A-2 pairs are not consecutive pairs (and 5 pairs are not 6 đôi)."""
    assert instant("Js Jc Qs Qc Ks Kc As Ac 2s 2c 3d 5h 7h", TIENLEN) is None


def test_tienlen_sau_doi_six_pairs_of_any_ranks() -> None:
    assert instant("3s 3c 5s 5c 7s 7c 9s 9c Js Jc 2s 2c Kd", TIENLEN) == "sau_doi"


def test_tl15_a_four_counts_as_two_pairs_toward_sau_doi() -> None:
    assert instant("3s 3c 3d 3h 7s 7c 9s 9c Js Jc Ad Ah 6h", TIENLEN) == "sau_doi"


def test_tienlen_tu_quy_heo() -> None:
    assert instant("2s 2c 2d 2h 3s 5c 7d 9h Jd Ks 4s 6h 8h", TIENLEN) == "tu_quy_heo"


def test_an_ordinary_hand_is_no_instant_win() -> None:
    assert instant("3s 4c 5s 7c 8s 9c Jh Qs Kc As 2c 5d 9d", TIENLEN) is None
    assert instant("3s 4c 5s 7c 8s 9c Jh Qs Kc 2d", SAMLOC) is None


def test_first_hand_instant_wins_are_off_by_default() -> None:
    """9.6 #2 (not applied): four 3s, or consecutive pairs 3-4-5 holding the 3♠."""
    hand = "3s 3c 3d 3h 5c 7d 9h Jd Ks 4s 6h 8h Ac"
    assert instant(hand, TIENLEN, first_hand=True) is None
    variant = dataclasses.replace(TIENLEN, first_hand_instant_wins=("tu_quy_ba", "doi_thong_ba_bich"))
    assert instant(hand, variant, first_hand=True) == "tu_quy_ba"
    assert instant(hand, variant, first_hand=False) is None
    assert instant("3s 3c 4s 4c 5d 5h 9h Jd Ks 7s 6h 8h Ac", variant, first_hand=True) == "doi_thong_ba_bich"


def test_tl9_the_first_qualifying_player_in_turn_order_wins() -> None:
    ordinary = parse_cards("3s 4c 5s 7c 8s 9c Jh Qs Kc As 2c 5d 9d")
    dragon = parse_cards("3c 4s 5c 6s 7s 8c 9s Ts Js Qc Ks Ah 2h")
    six_pairs = parse_cards("6c 6d Td Th 4d 4h 8d 8h Jd Qd Qh Kd Kh")
    assert shedding.instant_winner([ordinary, six_pairs, dragon], TIENLEN) == 1
    assert shedding.instant_winner([ordinary, dragon, six_pairs], TIENLEN) == 1
    assert shedding.instant_winner([ordinary], TIENLEN) is None


def test_toi_trang_pays_26_each_in_count_mode_and_2_in_rank_mode() -> None:
    """9.1, TL-3, TL-10: a flat amount from each other player, no thối counted."""
    count = shedding.instant_win_penalties(2, [0, 1, 2, 3], TIENLEN)
    assert [(p.payer, p.payee, p.amount_stakes, p.reason) for p in count] == [
        (0, 2, 26, "toi_trang"),
        (1, 2, 26, "toi_trang"),
        (3, 2, 26, "toi_trang"),
    ]
    rank = shedding.instant_win_penalties(2, [0, 1, 3], TIENLEN, settlement_mode="rank")
    assert [p.amount_stakes for p in rank] == [2, 2, 2]


def test_samloc_thang_trang_hands() -> None:
    """SL-8: a 10-card straight, four 2s, five pairs, three triples, one colour."""
    assert instant("As 2s 3d 4c 5h 6s 7d 8c 9h Ts", SAMLOC) == "sanh_rong"
    assert instant("5s 6s 7d 8c 9h Ts Jd Qc Kh Ah", SAMLOC) == "sanh_rong"
    assert instant("2s 2c 2d 2h 3s 5c 7d 9h Jd Ks", SAMLOC) == "tu_quy_heo"
    assert instant("3s 3c 5s 5c 7s 7c 9s 9c Jd Jh", SAMLOC) == "nam_doi"
    assert instant("3s 3c 3d 5s 5c 5d 9s 9c 9d Jh", SAMLOC) == "ba_sam"
    assert instant("3s 4c 6s 7c 8s 9c Js Qc Ks 2c", SAMLOC) == "dong_mau"


def test_samloc_thang_trang_pays_20_each() -> None:
    penalties = shedding.instant_win_penalties(0, [1, 2], SAMLOC)
    assert [(p.payer, p.payee, p.amount_stakes, p.reason, p.rule) for p in penalties] == [
        (1, 0, 20, "thang_trang", "SL-8"),
        (2, 0, 20, "thang_trang", "SL-8"),
    ]


# --- Sâm Lốc's flat amounts (4.4, SL-9, SL-10, SL-12, SL-21) -------------------------------


def test_bao_sam_success_25_from_each_other_player() -> None:
    assert [(p.payer, p.payee, p.amount_stakes, p.reason) for p in shedding.sam_success(1, [0, 1, 2, 3])] == [
        (0, 1, 25, "sam_success"),
        (2, 1, 25, "sam_success"),
        (3, 1, 25, "sam_success"),
    ]


def test_bao_sam_failed_the_declarer_pays_the_catcher_n_minus_one_times_25() -> None:
    assert shedding.sam_failed(0, 2, players=4) == Penalty(0, 2, 75, "sam_failed", "SL-9")


def test_den_trang_pays_for_every_loser() -> None:
    """SL-10: the marked player pays (n − 1) × 25 lá alone."""
    assert shedding.den_trang(2, 0, players=3) == Penalty(2, 0, 50, "den_trang", "SL-10")


def test_leaving_pays_10_to_each_other_player() -> None:
    """SL-12, SL-21: rời bàn is (n − 1) × 10, 10 lá to each other player."""
    found = shedding.leave_penalties(1, [0, 1, 2], declared_sam=False)
    assert [(p.payer, p.payee, p.amount_stakes, p.reason, p.rule) for p in found] == [
        (1, 0, 10, "leave_penalty", "SL-21"),
        (1, 2, 10, "leave_penalty", "SL-21"),
    ]


def test_den_bao_a_declarer_who_leaves_pays_25_to_each_other_player() -> None:
    """SL-12: đền báo is (n − 1) × 25 lá, 25 to each other player."""
    found = shedding.leave_penalties(0, [0, 1, 2], declared_sam=True)
    assert [(p.payee, p.amount_stakes, p.reason, p.rule) for p in found] == [
        (1, 25, "den_bao", "SL-12"),
        (2, 25, "den_bao", "SL-12"),
    ]


def test_every_reason_code_is_described() -> None:
    for rules in (TIENLEN, SAMLOC):
        for reason, rule in rules.rule_ids:
            assert reason in shedding.REASONS and rule


# --- Tiến Lên's 3♠ variants (9.6 #3, #4, TL-13; not applied) -------------------------------


def test_dut_ba_bich_each_other_player_pays_26_plus_their_twos() -> None:
    """TL-13: each other player i pays (26 + H_i) lá, H_i the converted value of i's 2s."""
    found = shedding.dut_ba_bich_penalties(0, {1: parse_cards("2h 2s 5d"), 2: parse_cards("9c")})
    assert [(p.payer, p.payee, p.amount_stakes, p.reason, p.rule) for p in found] == [
        (1, 0, 41, "dut_ba_bich", "TL-13"),
        (2, 0, 26, "dut_ba_bich", "TL-13"),
    ]


def test_thoi_ba_bich_source_example_a_pays_b_52_la() -> None:
    """9.6 #4 example at 3 players, stake 1,000: A plays 2♥, B chops it with three
    consecutive pairs, A is left with the 3♠ alone: A pays B 2 × 26 lá = 52,000 iCash
    (TL-13), and the chop of the 2♥ costs A its 10 lá as usual."""
    a, b, c = 0, 1, 2
    chop_of_the_two = chop(TIENLEN, "2h", "4s 4c 5s 5c 6s 6c")
    assert chop_of_the_two is not None and chop_of_the_two.amount_stakes == 10
    village = shedding.thoi_ba_bich_penalty(a, b, {b: parse_cards("9d Jh"), c: parse_cards("7s 8s Kd")})
    assert (village.payer, village.payee, village.amount_stakes, village.rule) == (a, b, 52, "TL-13")
    assert village.amount_stakes * 1_000 == 52_000
