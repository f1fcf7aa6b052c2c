"""Three-card hands (``socai.rules.three_card.threecard``) as RULES.md writes them.

Liêng §5.2 (LI-1, LI-2, LI-3, LI-7), Liêng Sảnh §12.2 with every example of its table
(LS-1, LS-5, LS-7, LS-8, LS-12), 3 Cây Gà §7.2 and §7.4 (GA-3, GA-6) and Ba Cây Chương
§8.2 and §8.4 (CH-1, CH-3, CH-4), each with its worked example.
"""

from __future__ import annotations

import pytest

from socai.cards import parse_cards
from socai.errors import RuleViolation
from socai.rules.three_card import threecard
from socai.rules.three_card.threecard import BaCayValue, LiengSanhValue, LiengValue


def lieng(text: str) -> LiengValue:
    return threecard.lieng_value(parse_cards(text))


def sanh(text: str) -> LiengSanhValue:
    return threecard.lieng_sanh_value(parse_cards(text))


def bacay(text: str) -> BaCayValue:
    return threecard.bacay_value(parse_cards(text))


# --- Liêng (§5.2): categories in the order of LI-1 -------------------------------------------


def test_sap_of_aces_beats_sap_of_kings() -> None:
    assert lieng("As Ac Ad") > lieng("Ks Kc Kd")


def test_sap_3_is_three_threes() -> None:
    """ "Sáp 3" = 3-3-3."""
    assert lieng("3s 3c 3d").category == "sap"


def test_sap_order_runs_from_twos_up_to_aces() -> None:
    """ "Sáp order is 2 (lowest) … A (highest)"."""
    saps = [lieng(f"{rank}s {rank}c {rank}h") for rank in "23456789TJQKA"]
    assert saps == sorted(saps)
    assert len(set(saps)) == 13


def test_sap_of_one_rank_is_equal_whatever_its_suits() -> None:
    """Sáp compares its rank only; two of one rank are never dealt together."""
    assert lieng("7s 7c 7d") == lieng("7c 7d 7h")


def test_lowest_sap_beats_the_highest_suited_run() -> None:
    """LI-1: Sáp > Liêng đồng chất."""
    assert lieng("2s 2c 2h") > lieng("Qd Kd Ad")


def test_suited_runs_of_one_height_go_to_the_suit_diamonds_beat_clubs() -> None:
    """The source's example: 4♦ 5♦ 6♦ beats 4♣ 5♣ 6♣."""
    assert lieng("4d 5d 6d") > lieng("4c 5c 6c")
    assert lieng("4d 5d 6d").category == "suited_run"


def test_suited_runs_of_one_height_rank_diamonds_hearts_clubs_spades() -> None:
    runs = [lieng(f"8{s} 9{s} T{s}") for s in "dhcs"]
    assert runs == sorted(runs, reverse=True)
    assert len(set(runs)) == 4


def test_higher_suited_run_beats_a_lower_one_in_a_better_suit() -> None:
    """Height first, suit only between equal heights."""
    assert lieng("5s 6s 7s") > lieng("4d 5d 6d")


def test_lowest_suited_run_beats_the_highest_unsuited_run() -> None:
    """ "Beats any unsuited Liêng" (LI-1)."""
    assert lieng("Ah 2h 3h") > lieng("Qd Kd Ah")


def test_three_four_five_is_a_run() -> None:
    """The source's run example 3-4-5."""
    assert lieng("3s 4d 5h").category == "run"


def test_q_k_a_is_the_highest_run_and_a_2_3_the_lowest() -> None:
    heights = ["Ac 2d 3h", "2c 3d 4h", "9c Td Jh", "Jc Qd Kh", "Qc Kd Ah"]
    runs = [lieng(text) for text in heights]
    assert all(run.category == "run" for run in runs)
    assert runs == sorted(runs)
    assert len(set(runs)) == len(runs)


def test_k_a_2_is_no_run_runs_do_not_wrap() -> None:
    """LI-2: A is high or low, never both; K-A-2 scores 0 + 1 + 2 = 3 points."""
    hand = lieng("Ks Ad 2c")
    assert (hand.category, hand.points) == ("points", 3)


def test_equal_runs_go_to_the_highest_suit_in_the_hand() -> None:
    """5.2: "Nước cao nhất trong bài liêng là Rô > Cơ > Chuồn > Bích" (LI-2 step 1)."""
    assert lieng("3d 4s 5s") > lieng("3h 4h 5c")


def test_equal_runs_with_the_same_highest_suit_go_to_that_suits_higher_card() -> None:
    """LI-2 step 2: both hold a ♦; the 4♦ beats the 3♦."""
    assert lieng("3s 4d 5c") > lieng("3d 4c 5s")


def test_any_run_beats_faces() -> None:
    assert lieng("Ac 2s 3d") > lieng("Kd Kh Qd")


def test_j_q_k_is_a_run_not_faces() -> None:
    """LI-3: a hand takes its highest category."""
    assert lieng("Js Qc Kd").category == "run"
    assert lieng("Js Qc Kd") > lieng("Kd Kh Qd")


def test_j_q_k_in_one_suit_is_a_suited_run() -> None:
    assert lieng("Jh Qh Kh").category == "suited_run"


def test_k_k_k_is_sap_not_faces() -> None:
    """LI-3."""
    assert lieng("Ks Kc Kd").category == "sap"


def test_faces_beat_nine_points() -> None:
    """LI-1: Ảnh > points, although Ảnh scores 0 points."""
    faces = lieng("Js Qs Qc")
    assert (faces.category, faces.points) == ("faces", 0)
    assert faces > lieng("9s Th Kc")


def test_any_two_faces_go_to_the_highest_suit_not_the_highest_rank() -> None:
    """LI-2: "Ảnh bằng nhau" are all Ảnh; J♦ beats the hand of kings."""
    assert lieng("Jd Js Qs") > lieng("Kh Kc Qh")


def test_faces_with_the_same_highest_suit_go_to_that_suits_higher_card() -> None:
    assert lieng("Kd Js Jc") > lieng("Qd Qh Kh")


def test_card_points_ace_one_tens_and_faces_zero() -> None:
    """5.2 card points and LI-7: 10 counts 0 (≡ 10 mod 10)."""
    assert lieng("As 4c 8d").points == 3  # 1 + 4 + 8 = 13
    assert lieng("Th 7c 2d").points == 9
    assert lieng("Ks Qs Th").points == 0
    assert lieng("Ks Qs Th").category == "points"


def test_nine_points_is_best_and_zero_points_worst() -> None:
    by_points = [lieng(text) for text in ("Ks Qs Th", "As Kc Jd", "5c 5d 2s", "8d Td Kd", "9s Th Kc")]
    assert [v.points for v in by_points] == [0, 1, 2, 8, 9]
    assert by_points == sorted(by_points)


def test_equal_points_go_to_the_highest_suit() -> None:
    """LI-2 on points: 5♦ 2♠ 2♣ and 9♥ 10♣ K♠ both score 9; ♦ beats ♥."""
    assert lieng("5d 2s 2c") > lieng("9h Tc Ks")


def test_equal_points_with_the_same_highest_suit_go_to_that_suits_higher_card() -> None:
    assert lieng("Kd 2c 7s") > lieng("2d 7c Ks")


def test_the_ace_is_the_highest_card_of_its_suit_in_the_tie_break() -> None:
    """LI-2 step 2 ranks A > K > … > 2."""
    assert lieng("Ad 8c Ks") > lieng("Kd 9c Js")


def test_a_pair_has_no_value_of_its_own() -> None:
    assert lieng("3s 3c Kh").points == 6
    assert lieng("4s 3d Kc") > lieng("3s 3c Kh")


# --- Liêng Sảnh (§12.2): every example of the table ------------------------------------------

# (row, category, points, example) in the table's order, highest first.
SANH_TABLE = [
    (1, "sap", 0, "Th Tc Td"),
    (1, "sap", 3, "As Ac Ah"),
    (2, "run", 6, "Ac 2c 3c"),
    (2, "run", 1, "Qd Kh Ah"),
    (3, "faces", 0, "Jh Qh Qs"),
    (3, "faces", 0, "Js Kd Kc"),
    (4, "points", 9, "Th 3h 6s"),
    (5, "points", 8, "5s 2h Ac"),
    (6, "points", 7, "Qd 3h 4s"),
    (7, "points", 6, "Kh 3c 3s"),
    (8, "points", 5, "3s Ad Ac"),
    (9, "points", 4, "Ks Th 4c"),
    (10, "points", 3, "7s 4d 2c"),
    (11, "points", 2, "Th Qh 2s"),
    (12, "points", 1, "8s Ah 2c"),
    (13, "points", 0, "Ks 8d 2c"),
]


@pytest.mark.parametrize(("row", "category", "points", "example"), SANH_TABLE)
def test_lieng_sanh_example_scores_as_its_row_says(row: int, category: str, points: int, example: str) -> None:
    value = sanh(example)
    assert (value.category, value.points) == (category, points), f"row {row}"


@pytest.mark.parametrize("row", range(1, 13))
def test_lieng_sanh_each_row_beats_the_next(row: int) -> None:
    """SÁP > LIÊNG > ẢNH > ĐIỂM, points 9 > … > 0: every example of a row beats every
    example of the rows below."""
    higher = [sanh(example) for r, _, _, example in SANH_TABLE if r == row]
    lower = [sanh(example) for r, _, _, example in SANH_TABLE if r > row]
    assert min(higher) > max(lower)


def test_lieng_sanh_sap_of_aces_beats_sap_of_tens() -> None:
    """Row 1: A♠ A♣ A♥ beats 10♥ 10♣ 10♦ (A highest)."""
    assert sanh("As Ac Ah") > sanh("Th Tc Td")


def test_lieng_sanh_q_k_a_beats_a_2_3() -> None:
    """Row 2: "A with 2-3 is the lowest run and A with Q-K the highest"."""
    assert sanh("Qd Kh Ah") > sanh("Ac 2c 3c")


def test_lieng_sanh_a_suited_run_is_an_ordinary_run() -> None:
    """LS-1: A♣ 2♣ 3♣ is a Liêng; no suited-run tier, so a higher unsuited run beats it."""
    assert sanh("Ac 2c 3c").category == "run"
    assert sanh("2s 3d 4h") > sanh("Ac 2c 3c")
    # The same two hands in Liêng, which has the tier, go the other way.
    assert lieng("Ac 2c 3c") > lieng("2s 3d 4h")


def test_lieng_sanh_faces_go_to_the_diamond() -> None:
    """Row 3 and LS-7: J♠ K♦ K♣ beats J♥ Q♥ Q♠ (♦ > ♥)."""
    assert sanh("Js Kd Kc") > sanh("Jh Qh Qs")


def test_lieng_sanh_pair_scores_only_points() -> None:
    """ "Pairs such as K♥ 3♣ 3♠ have no value of their own; they score only points"."""
    assert sanh("Qd 3h 4s") > sanh("Kh 3c 3s")


def test_lieng_sanh_equal_points_compare_suits_then_the_card_of_that_suit() -> None:
    """12.1: "if hands have equal points, compare suits; if the suit is the same, compare
    the rank of that suit's card" (LS-7)."""
    assert sanh("7s 4d 2c") > sanh("Th 3h Kh")  # both 3 points: ♦ beats ♥
    assert sanh("Kd 2c Tc") > sanh("2d Ks Ts")  # both 2 points, both ♦: K♦ beats 2♦


def test_lieng_sanh_equal_runs_go_to_the_suit() -> None:
    """12.2 row 2: "Equal runs are decided by suit" (LS-7)."""
    assert sanh("4d 5d 6d") > sanh("4c 5c 6c")
    assert sanh("9h Ts Jc") > sanh("9c Tc Js")


def test_lieng_sanh_j_q_k_is_a_run_and_k_k_k_is_sap() -> None:
    """LS-8."""
    assert sanh("Js Qd Kh").category == "run"
    assert sanh("Kh Kd Kc").category == "sap"


def test_lieng_sanh_k_a_2_is_no_run() -> None:
    assert sanh("Kc Ad 2h").category == "points"


# --- Liêng Sảnh's Sáp bonus (12.4) -----------------------------------------------------------


def test_sap_bonus_goes_to_the_best_sap_dealt() -> None:
    """LS-5: with two or more Sáp, the highest Sáp takes the bonus."""
    values = {1: sanh("2s 2c 2d"), 2: sanh("As Ad Ac"), 3: sanh("Kd Qd Jd")}
    assert threecard.sap_bonus_seat(values) == 2


def test_sap_bonus_goes_to_a_sap_holder_who_folded() -> None:
    """LS-12: the caller passes every seat dealt in; a fold does not lose the bonus, even
    when the pot goes to a better showdown hand without a Sáp there."""
    dealt = {1: sanh("9s 9c 9d"), 2: sanh("Qd Kh Ah"), 3: sanh("Th 3h 6s")}
    still_in = {2: dealt[2], 3: dealt[3]}
    assert threecard.winner(still_in) == 2
    assert threecard.sap_bonus_seat(dealt) == 1


def test_no_sap_no_bonus_runs_and_faces_are_not_sap() -> None:
    values = {1: sanh("Qd Kd Ad"), 2: sanh("Kh Kc Qs"), 3: sanh("Ks Kd 2c")}
    assert threecard.sap_bonus_seat(values) is None


# --- Ba Cây (§7.2, §8.2) ---------------------------------------------------------------------


def test_ba_cay_points_are_the_units_digit_with_ten_for_zero() -> None:
    """7.2: "20 điểm được tính là 10 điểm"; scores run 1–10."""
    assert bacay("Ad 2h 3s").points == 6
    assert bacay("9s 9c 2d").points == 10  # 20
    assert bacay("As 4c 5d").points == 10  # 10
    assert bacay("9s 9c As").points == 9  # 19
    assert bacay("As Ac Ah").points == 3
    assert bacay("9s 9c 4d").category == "points"


def test_ba_cay_ten_points_is_the_best_score() -> None:
    assert bacay("As 4c 5s") > bacay("9d 9h 9c")  # the weakest 10 beats the best 7
    assert bacay("As 4c 5s") > bacay("Ad 9d 9s")  # ... and the best 9
    assert bacay("Ad 9d 9s") > bacay("Ad 8d 9s") > bacay("Ad 7d 9s")


def test_ba_cay_worked_example_ace_of_diamonds_beats_eight_of_diamonds() -> None:
    """7.2 (and 8.2): 7♦ 2♥ A♦ beats 8♦ A♠ A♣, both 10 points, A♦ beating 8♦."""
    hand_1, hand_2 = bacay("8d As Ac"), bacay("7d 2h Ad")
    assert hand_1.points == hand_2.points == 10
    assert hand_2 > hand_1


def test_ba_cay_card_order_is_the_one_written_in_7_2() -> None:
    """A♦ > 9♦ > … > 2♦ > 9♥ > … > 2♥ > A♥ > 9♣ > … > A♣ > 9♠ > … > A♠."""
    written = (
        "Ad 9d 8d 7d 6d 5d 4d 3d 2d 9h 8h 7h 6h 5h 4h 3h 2h Ah 9c 8c 7c 6c 5c 4c 3c 2c Ac 9s 8s 7s 6s 5s 4s 3s 2s As"
    )
    cards = parse_cards(written)
    assert sorted(cards, key=threecard.bacay_card_order, reverse=True) == cards
    assert len({threecard.bacay_card_order(c) for c in cards}) == 36


def test_ba_cay_equal_points_go_to_the_best_suit_before_the_card_value() -> None:
    """GA-3: suit first; 2♦ beats 9♥ (both hands 10 points)."""
    assert bacay("2d Ac 7s") > bacay("9h 5s 6s")


def test_ba_cay_ace_of_hearts_ranks_below_the_two_of_hearts() -> None:
    """7.2: "A♥, A♣ and A♠ still rank below 2 within their suits" (both hands 10 points)."""
    assert bacay("2h 3s 5s") > bacay("Ah 4s 5c")


def test_ba_cay_ace_of_diamonds_tops_the_nine_of_diamonds() -> None:
    assert bacay("Ad 4s 5s") > bacay("9d 6s 5c")  # both 10 points


# --- 3 Cây Gà settlement (§7.4) ----------------------------------------------------------------


def test_ga_highest_scoring_player_wins_the_hand() -> None:
    """ "Nhất ăn tất": every other player pays the highest-scoring player."""
    values = {1: bacay("2s 3c 2d"), 2: bacay("9s 9c Ad"), 3: bacay("As 2c 4h")}
    assert threecard.winner(values) == 2


def test_ga_pot_goes_to_the_best_ten() -> None:
    """Two players with 10: the suit rule decides (the worked example's hands)."""
    values = {1: bacay("8d As Ac"), 2: bacay("7d 2h Ad"), 3: bacay("9s 9c 9h")}
    assert threecard.ga_pot_winner(values) == 2


def test_ga_pot_goes_to_the_only_ten() -> None:
    values = {1: bacay("2s 3c 2d"), 2: bacay("9s Ac Ah"), 3: bacay("As 4c 5h")}
    assert threecard.ga_pot_winner(values) == 3
    assert threecard.winner(values) == 3


def test_ga_pot_carries_over_when_nobody_scores_ten() -> None:
    values = {1: bacay("2s 3c 2d"), 2: bacay("9s 9c Ad"), 3: bacay("As 2c 4h")}
    assert threecard.ga_pot_winner(values) is None


def test_ga_disconnected_players_ten_does_not_count() -> None:
    """GA-6: the caller leaves the disconnected seat's cards out."""
    dealt = {1: bacay("As 4c 5h"), 2: bacay("9s 9c Ad")}
    counted = {seat: value for seat, value in dealt.items() if seat != 1}
    assert threecard.ga_pot_winner(counted) is None
    assert threecard.winner(counted) == 2


# --- Ba Cây Chương settlement (§8.4) -----------------------------------------------------------


def test_chuong_worked_example() -> None:
    """8.4: B is banker; A scores 10, B 9, C 8. B receives C's bet and pays A, who then
    becomes banker. Under CH-1 A is paid 2 × bet (flag on), 1 × bet with the flag off."""
    a, b, c = bacay("As 4c 5d"), bacay("2s 3c 4d"), bacay("2c 2h 4s")
    assert (a.points, b.points, c.points) == (10, 9, 8)
    assert threecard.player_result(c, b) == -1
    assert threecard.player_result(a, b) == 2
    assert threecard.player_result(a, b, ten_point_double=False) == 1
    assert threecard.tens_best_first({"A": a, "B": b, "C": c}) == ("A",)


def test_chuong_player_outscoring_the_banker_without_ten_is_paid_once() -> None:
    assert threecard.player_result(bacay("9s 9c Ad"), bacay("2s 3c 2d")) == 1


def test_chuong_bankers_ten_is_not_doubled() -> None:
    """CH-1: the banker's own 10 brings no doubling; the player pays the bet."""
    assert threecard.player_result(bacay("9s 9c Ad"), bacay("As 4c 5h")) == -1


def test_chuong_equal_points_are_decided_by_suit_no_draw() -> None:
    """8.4 "Equal points: decided by suit (7.2)", with the worked example's hands."""
    assert threecard.player_result(bacay("7d 2h Ad"), bacay("8d As Ac")) == 2
    assert threecard.player_result(bacay("8d As Ac"), bacay("7d 2h Ad")) == -1


def test_chuong_banker_who_disconnects_pays_each_player_double_for_a_ten() -> None:
    """CH-4: the banker loses to every player, × 2 for a player's 10."""
    assert threecard.player_win_multiplier(bacay("As 4c 5h")) == 2
    assert threecard.player_win_multiplier(bacay("As 4c 5h"), ten_point_double=False) == 1
    assert threecard.player_win_multiplier(bacay("2s 3c 2d")) == 1


def test_chuong_bank_must_cover_twice_every_bet_when_tens_double() -> None:
    """CH-2: the worst case is every player paid double; 1 × when CH-1's flag is off."""
    assert threecard.max_player_win_multiplier() == 2
    assert threecard.max_player_win_multiplier(ten_point_double=False) == 1


def test_chuong_next_banker_candidates_are_the_tens_best_first_banker_included() -> None:
    """CH-3: the best 10-point hand, banker included, then the next-best; the caller skips
    an insolvent (CH-2) or disconnected (CH-7) seat."""
    values = {
        "banker": bacay("8d As Ac"),
        "p1": bacay("9s 9c 9h"),
        "p2": bacay("7d 2h Ad"),
        "p3": bacay("5s 4c Ah"),
    }
    assert threecard.tens_best_first(values) == ("p2", "banker", "p3")


def test_chuong_nobody_with_ten_keeps_the_banker() -> None:
    assert threecard.tens_best_first({1: bacay("2s 3c 2d"), 2: bacay("9s 9c Ad")}) == ()


# --- winners, checks and types ---------------------------------------------------------------


def test_one_deck_always_gives_one_winner() -> None:
    values = {1: lieng("Kh Kc Qh"), 2: lieng("Jd Js Qs"), 3: lieng("9s Th Kc")}
    assert threecard.winners(values) == (2,)
    assert threecard.winner(values) == 2
    assert threecard.ranked(values) == (2, 1, 3)


def test_winners_lists_every_best_seat_of_hands_from_different_decks() -> None:
    values = {4: lieng("7s 7c 7d"), 2: lieng("7c 7d 7h"), 3: lieng("2s 2c 2d")}
    assert threecard.winners(values) == (4, 2)
    assert threecard.ranked(values) == (4, 2, 3)


def test_winner_refuses_a_tie_or_no_hands() -> None:
    with pytest.raises(AssertionError):
        threecard.winner({1: lieng("7s 7c 7d"), 2: lieng("7c 7d 7h")})
    with pytest.raises(AssertionError):
        threecard.winner({})
    assert threecard.winners({}) == ()


def test_player_and_banker_never_hold_equal_hands() -> None:
    with pytest.raises(AssertionError):
        threecard.player_result(bacay("9s 9c Ad"), bacay("9h 9d Ad"))


@pytest.mark.parametrize(
    ("value_of", "text"),
    [
        (threecard.lieng_value, "As Ac"),
        (threecard.lieng_value, "As Ac Ad Ah"),
        (threecard.lieng_value, "As Ac As"),
        (threecard.lieng_sanh_value, "2s"),
        (threecard.lieng_sanh_value, "Ks Ks Qd"),
        (threecard.bacay_value, "Ts 2c 3d"),  # the Ba Cây deck stops at 9
        (threecard.bacay_value, "Ks 2c 3d"),
        (threecard.bacay_value, "As As 3d"),
        (threecard.lieng_key, "As Ac"),
        (threecard.lieng_sanh_key, "As As Kd"),
        (threecard.bacay_key, "Qs 2c 3d"),
    ],
)
def test_anything_but_three_distinct_cards_of_the_deck_is_a_bad_hand(value_of: object, text: str) -> None:
    with pytest.raises(RuleViolation) as caught:
        value_of(parse_cards(text))  # type: ignore[operator]
    assert caught.value.code == "BAD_HAND"


def test_not_cards_is_a_bad_hand() -> None:
    with pytest.raises(RuleViolation):
        threecard.lieng_value(["As", "Kd", "Qc"])  # type: ignore[list-item]
    with pytest.raises(RuleViolation):
        threecard.bacay_value(None)  # type: ignore[arg-type]


def test_the_order_of_the_cards_in_the_hand_does_not_matter() -> None:
    assert lieng("Ad 2d 3d") == lieng("3d Ad 2d") == lieng("2d 3d Ad")
    assert bacay("7d 2h Ad") == bacay("Ad 7d 2h")


def test_values_of_different_games_never_compare() -> None:
    """A Liêng value and a Liêng Sảnh value of the same cards are different things."""
    with pytest.raises(TypeError):
        _ = lieng("As Ac Ad") < sanh("Ks Kc Kd")  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = bacay("As 2c 3d") > lieng("As 2c 3d")  # type: ignore[operator]
    assert lieng("As 2c 3d") != sanh("As 2c 3d")  # type: ignore[comparison-overlap]


def test_each_game_id_has_its_value_function() -> None:
    assert threecard.HAND_VALUE["lieng"] is threecard.lieng_value
    assert threecard.HAND_VALUE["lieng_sanh"] is threecard.lieng_sanh_value
    assert threecard.HAND_VALUE["bacay_ga"] is threecard.HAND_VALUE["bacay_chuong"] is threecard.bacay_value
