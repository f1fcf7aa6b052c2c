"""Mậu Binh hands (RULES.md §11, MB-1 to MB-24): the source's examples, one test per rule.

Names as in the ``Arranged`` event: ``back`` is chi đầu (5 cards), ``middle`` chi giữa
(5 cards), ``front`` chi cuối (3 cards).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from socai.cards import parse_cards
from socai.errors import RuleViolation
from socai.rules.base import RULE_CODES
from socai.rules.chinese_poker import maubinh_hands as mb
from socai.rules.chinese_poker.maubinh_hands import BACK, FRONT, MIDDLE


def value(text: str, *, wheel_second_highest: bool = True) -> mb.HandValue:
    return mb.hand_value(parse_cards(text), wheel_second_highest)


def beats(winner: str, loser: str) -> bool:
    return value(winner) > value(loser)


def valid(back: str, middle: str, front: str) -> bool:
    return mb.is_valid_arrangement(parse_cards(front), parse_cards(middle), parse_cards(back))


def hand(back: str, middle: str, front: str) -> mb.PlayedHand:
    return mb.played_hand(parse_cards(front), parse_cards(middle), parse_cards(back))


def special(text: str) -> str | None:
    return mb.special_hand(parse_cards(text))


# --- 11.2: the source's example of each regular type ------------------------------------


@pytest.mark.parametrize(
    ("cards", "category"),
    [
        ("9h Th Jh Qh Kh", "straight_flush"),
        ("Qh Qd Qc Qs Ks", "four_of_a_kind"),  # Tứ Quý: Q♥ Q♦ Q♣ Q♠ K♠
        ("Qh Qd Qs 9c 9s", "full_house"),  # Cù Lũ: Q♥ Q♦ Q♠ 9♣ 9♠
        ("7d Qd Td Kd Ad", "flush"),  # Đồng Chất (Thùng): 7♦ Q♦ 10♦ K♦ A♦
        ("Td Jc Qs Kh Ad", "straight"),  # Sảnh Đại
        ("Kh Kd Kc Ac 2s", "three_of_a_kind"),  # Sám Cô: K♥ K♦ K♣ A♣ 2♠
        ("Jd Jc 9s 9h Kc", "two_pair"),  # Thú: J♦ J♣ 9♠ 9♥ K♣
        ("7d 7c Ts Qc As", "pair"),  # Đôi: 7♦ 7♣ 10♠ Q♣ A♠
        ("As Qc Th 9d 8h", "high_card"),  # Mậu Thầu: A♠ Q♣ 10♥ 9♦ 8♥
    ],
)
def test_each_source_example_has_its_type(cards: str, category: str) -> None:
    assert value(cards).category == category


def test_types_rank_in_the_order_of_the_source_chain_mb19() -> None:
    """MB-19: the ">" chain wins over "strength increases from top to bottom"."""
    chain = [
        "9h Th Jh Qh Kh",
        "Qh Qd Qc Qs Ks",
        "Qh Qd Qs 9c 9s",
        "7d Qd Td Kd Ad",
        "Td Jc Qs Kh Ad",
        "Kh Kd Kc Ac 2s",
        "Jd Jc 9s 9h Kc",
        "7d 7c Ts Qc As",
        "As Qc Th 9d 8h",
    ]
    values = [value(c) for c in chain]
    assert values == sorted(values, reverse=True)
    assert len(set(values)) == len(values)


def test_the_ace_is_the_highest_card() -> None:
    assert beats("As 9c 7h 5d 3s", "Kh Qd Jc 9s 8h")


def test_suits_never_break_ties_equal_ranks_draw() -> None:
    assert value("As Kc Qh 9d 8h") == value("Ah Kd Qc 9s 8s")
    assert value("7d 7c Ts Qc As") == value("7h 7s Td Qd Ad")
    assert value("2h 3h 4h 5h 6h") == value("2c 3c 4c 5c 6c")


def test_same_type_compares_the_main_group_first() -> None:
    assert beats("8s 8c 2d 3h 4s", "7s 7c Ad Kh Qs")
    assert beats("Jd Jc 9s 9h 2c", "Jh Js 8s 8h Ac")
    assert beats("5s 5c 5d 2h 2s", "4s 4c 4d Ah As")
    assert beats("9s 9c 9d 9h 2s", "8s 8c 8d 8h As")


def test_same_type_then_compares_the_kickers_in_order() -> None:
    assert beats("7d 7c Ts Qc As", "7h 7s 9s Qd Ah")
    assert beats("Jd Jc 9s 9h Kc", "Js Jh 9c 9d Qc")
    assert beats("2d 5d 7d 9d Kd", "2c 4c 7c 9c Kc")


# --- MB-4: Sảnh Nhị ---------------------------------------------------------------------


def test_sanh_nhi_is_smaller_than_sanh_dai_mb4() -> None:
    assert beats("Td Jc Qs Kh Ad", "As 2c 3d 4h 5s")


def test_sanh_nhi_is_the_second_highest_straight_mb4() -> None:
    assert beats("As 2c 3d 4h 5s", "9d Tc Js Qh Kd")
    assert value("As 2c 3d 4h 5s").category == "straight"


def test_two_sanh_nhi_draw_mb4() -> None:
    """MB-4: "if another player also has A, it is a draw"."""
    assert value("As 2c 3d 4h 5s") == value("Ah 2d 3c 4s 5h")


def test_sanh_nhi_straight_flush_is_the_second_highest_straight_flush_mb4() -> None:
    assert beats("Ah 2h 3h 4h 5h", "9c Tc Jc Qc Kc")
    assert beats("Ts Js Qs Ks As", "Ah 2h 3h 4h 5h")


def test_sanh_nhi_is_the_lowest_straight_when_the_flag_is_off_mb4() -> None:
    wheel = value("As 2c 3d 4h 5s", wheel_second_highest=False)
    assert wheel < value("2d 3c 4s 5h 6d", wheel_second_highest=False)
    assert wheel.category == "straight"


def test_no_straight_wraps_past_the_ace() -> None:
    assert value("Qs Kc Ad 2h 3s").category == "high_card"


# --- MB-14: the 3-card chi ----------------------------------------------------------------


def test_a_three_card_chi_is_only_trips_a_pair_or_high_cards_mb14() -> None:
    assert value("Kh Kd Kc").category == "three_of_a_kind"
    assert value("Kh Kd 2c").category == "pair"
    assert value("Qh Kh Ah").category == "high_card"  # no 3-card straight or flush
    assert value("2h 3h 4h") == value("2c 3d 4s")


def test_front_equal_to_middle_on_the_kickers_both_have_is_valid_mb14() -> None:
    """MB-14: type, main group, then the available kickers; equality is valid."""
    assert valid("As Ac Ad 2h 2s", "9s 9c 5d 3h 2c", "9h 9d 5s")
    assert valid("As Ac Ad 2h 2s", "Ks Qc Jd 9h 7c", "Kh Qd Jc")


def test_front_stronger_than_middle_by_a_kicker_is_fouled_mb14() -> None:
    assert not valid("As Ac Ad 2h 2s", "9s 9c 5d 4h 3c", "9h 9d 6s")


def test_front_trips_over_middle_two_pair_is_fouled_mb14() -> None:
    assert not valid("Ks Kc Kd 2h 2s", "Js Jc 5d 5h 3c", "7h 7d 7s")
    assert valid("Ks Kc Kd 2h 2s", "Js Jc Jd 5h 3c", "7h 7d 7s")


# --- 11.1 and MB-5: valid and fouled arrangements ----------------------------------------


def test_back_at_least_middle_at_least_front_is_valid() -> None:
    assert valid("Qh Qd Qc Qs 3s", "7d 9d Td Kd Ad", "Kh Ks 2c")


def test_equal_back_and_middle_are_valid() -> None:
    assert valid("As 2c 3d 4h 5s", "Ah 2d 3c 4s 5h", "Kh Qd 9c")


def test_middle_stronger_than_back_is_fouled_nguoc_chi() -> None:
    assert not valid("7d 7c Ts Qc As", "Jd Jc 9s 9h Kc", "2h 3d 4s")


def test_an_arrangement_of_the_wrong_shape_is_not_valid() -> None:
    assert not mb.is_valid_arrangement(
        parse_cards("2h 3d"), parse_cards("Jd Jc 9s 9h Kc"), parse_cards("7d 7s Th Qh Ah")
    )
    repeated = parse_cards("2h 3d 4s")
    assert not mb.is_valid_arrangement(repeated, parse_cards("2h Jc 9s 9h Kc"), parse_cards("7d 7s Th Qh Ah"))


def test_hand_value_rejects_a_chi_of_four_cards() -> None:
    with pytest.raises(RuleViolation) as err:
        mb.hand_value(parse_cards("2h 3d 4s 5c"))
    assert err.value.code == "BAD_HAND"


# --- 11.2 units, MB-1 to MB-3 -------------------------------------------------------------


@pytest.mark.parametrize(
    ("cards", "position", "units"),
    [
        ("9h Th Jh Qh Kh", BACK, 5),  # MB-3
        ("9h Th Jh Qh Kh", MIDDLE, 10),  # MB-3
        ("Qh Qd Qc Qs Ks", BACK, 4),
        ("Qh Qd Qc Qs Ks", MIDDLE, 8),  # MB-2: "+4" in chi giữa
        ("Qh Qd Qs 9c 9s", BACK, 1),
        ("Qh Qd Qs 9c 9s", MIDDLE, 2),  # MB-2: "+1" in chi giữa
        ("7d Qd Td Kd Ad", BACK, 1),
        ("7d Qd Td Kd Ad", MIDDLE, 1),
        ("Td Jc Qs Kh Ad", MIDDLE, 1),
        ("Kh Kd Kc Ac 2s", BACK, 1),  # MB-1: a 5-card Sám Cô pays 1
        ("Kh Kd Kc Ac 2s", MIDDLE, 1),
        ("Jd Jc 9s 9h Kc", BACK, 1),
        ("7d 7c Ts Qc As", MIDDLE, 1),
        ("As Qc Th 9d 8h", BACK, 1),
        ("Kh Kd Kc", FRONT, 3),  # MB-1: Sám Cô in the 3-card chi, "+2"
        ("Kh Kd 2c", FRONT, 1),
        ("Ah Kd 2c", FRONT, 1),
    ],
)
def test_units_won_by_each_chi_type(cards: str, position: str, units: int) -> None:
    assert mb.chi_units(value(cards), position) == units


# --- 11.3: every special hand, with a near miss --------------------------------------------

SPECIALS = [
    # (id, the hand, a near miss, what the near miss is)
    ("dragon_roll", "2h 3h 4h 5h 6h 7h 8h 9h Th Jh Qh Kh Ah", "2h 3h 4h 5h 6h 7h 8h 9h Th Jh Qh Kh As", "dragon"),
    ("dragon", "2s 3h 4d 5c 6h 7h 8s 9h Td Jh Qc Kh Ah", "2s 2h 4d 5c 6h 7h 8s 9h Td Jh Qc Kh Ah", None),
    ("twelve_royals", "Js Jh Jd Qs Qh Qd Qc Ks Kh Kd As Ah Ad", "Js Jh Jd Qs Qh Qd Qc Ks Kh Kd As Ah Td", "all_big"),
    (
        "three_straight_flushes",
        "2h 3h 4h 5h 6h 9s Ts Js Qs Ks Qd Kd Ad",
        "2h 3h 4h 5h 6h 9s Ts Js Qs Ks Qd Kd Ac",
        "three_straights",
    ),
    ("three_quads", "2s 2h 2d 2c 7s 7h 7d 7c Ks Kh Kd Kc 9d", "2s 2h 2d 2c 7s 7h 7d 7c Ks Kh Kd Qc 9d", None),
    ("all_big", "8s 8h 9d Tc Jh Qs Kd Ah As Td 9c Jc Qh", "7s 8h 9d Tc Jh Qs Kd Ah As Td 9c Jc Qh", None),
    ("all_small", "2s 3h 4d 5c 6h 7s 8d 8h 2c 3d 5h 6s 7c", "2s 3h 4d 5c 6h 7s 8d 9h 2c 3d 5h 6s 7c", None),
    ("one_colour", "2h 4d 5h 7d 8h 9d Th Jd Qh Kd Ah 3d 3h", "2h 4d 5h 7d 8h 9d Th Jd Qh Kd Ah 3d 3s", None),
    ("four_triples", "2s 2h 2d 5s 5h 5d 9s 9h 9d Qs Qh Qd Ac", "2s 2h 2d 5s 5h 5d 9s 9h 9d Qs Qh Kd Ac", None),
    ("five_pairs_triple", "2s 2h 4d 4c 6s 6h 8d 8c Ts Th Qd Qc Qs", "2s 2h 4d 4c 6s 6h 8d 8c Ts Jh Qd Qc Qs", None),
    ("six_pairs", "2s 2h 4d 4c 6s 6h 8d 8c Ts Th Qd Qc Ks", "2s 2h 4d 4c 6s 6h 8d 8c Ts Th Qd Jc Ks", None),
    ("three_straights", "As 2h 3d 4c 5s 9h Td Jc Qs Kh Qd Kc Ah", "As 2h 3d 4c 5s 9h Td Jc Qs Kh Jd Kc Ah", None),
    ("three_flushes", "2h 5h 7h 9h Jh 3s 6s 8s Ts Qs 4d 8d Kd", "2h 5h 7h 9h Jh 3s 6s 8s Ts Qs 4d 8d Kc", None),
]


@pytest.mark.parametrize(("name", "cards", "miss", "miss_is"), SPECIALS, ids=[s[0] for s in SPECIALS])
def test_each_special_hand_and_its_near_miss(name: str, cards: str, miss: str, miss_is: str | None) -> None:
    assert special(cards) == name
    assert special(miss) == miss_is


def test_special_hands_are_listed_highest_first_with_their_units() -> None:
    assert mb.SPECIAL_HANDS[0] == "dragon_roll" and mb.SPECIAL_HANDS[-1] == "three_flushes"
    assert [mb.SPECIAL_UNITS[s] for s in mb.SPECIAL_HANDS] == [32, 30, 24, 20, 20, 10, 10, 10, 6, 5, 4, 4, 3]


def test_one_colour_is_not_the_regular_flush_mb12() -> None:
    assert "one_colour" in mb.SPECIAL_HANDS and "flush" not in mb.SPECIAL_HANDS


def test_all_small_and_all_big_both_allow_the_eight() -> None:
    assert special("8s 8h 8d 8c 9h Ts Jd Qh As Td 9c Jc Qs") in ("all_big",)
    assert special("2s 3h 4d 5c 6h 7s 8d 8h 8c 3d 5h 6s 7c") == "all_small"


def test_twelve_royals_is_all_thirteen_cards_j_to_a_mb11() -> None:
    assert special("Js Jh Jd Jc Qh Qd Qc Ks Kh Kd As Ah Ad") == "twelve_royals"


def test_the_highest_qualifying_special_hand_counts_mb10() -> None:
    # Dragon also makes three straights; twelve royals is also all big.
    assert special("2s 3h 4d 5c 6h 7h 8s 9h Td Jh Qc Kh Ah") == "dragon"
    # All red, and three flushes (5 ♥, 5 ♦, 3 ♥ … split as ♥8 + ♦5): one colour is higher.
    assert special("2h 4h 5h 7h 8h 9h Jh Kh 3d 6d 9d Td Qd") == "one_colour"


def test_three_straights_count_whatever_the_arrangement_mb10() -> None:
    played = hand("As 2h 3d 4c 5s", "9h Td Jc Qs Kh", "Qd Kc Ah")
    assert played.special == "three_straights"
    # The same 13 cards arranged otherwise still hold the special hand.
    assert hand("9h Td Jc Qs Kh", "Qd Kc Ah As 2h", "3d 4c 5s").special == "three_straights"


def test_three_straights_allow_a23_and_qka_in_the_front_mb13() -> None:
    assert special("As 2h 3d 4c 5s 6h 7d 8c 9s Th Ad 2s 3c") == "three_straights"
    assert special("2s 3h 4d 5c 6s 6h 7d 8c 9s Th Qd Kc Ah") == "three_straights"


def test_three_straights_need_a_partition_not_just_runs_mb13() -> None:
    # 2-6 and 7-J are straights, but Q K 2 is no run.
    assert special("2s 3h 4d 5c 6s 7h 8d 9c Ts Jh Qd Kc 2h") is None


def test_a_straight_flush_chi_counts_as_a_straight_mb23() -> None:
    assert special("2h 3h 4h 5h 6h 9c Td Jc Qs Kh Qd Kc Ah") == "three_straights"


def test_a_straight_flush_chi_counts_as_a_single_suited_chi_mb23() -> None:
    assert special("2h 3h 4h 5h 6h 3s 6s 8s Ts Qs 4d 8d Kd") == "three_flushes"


def test_three_flushes_may_use_a_suit_for_two_chi_mb13() -> None:
    # 8 hearts = 5 + 3, and 5 spades.
    assert special("2h 4h 6h 8h Th Qh Kh Ah 3s 5s 7s 9s Ts") == "three_flushes"
    # 10 hearts = 5 + 5, and 3 clubs (3 diamonds would make it one colour).
    assert special("2h 3h 4h 6h 7h 9h Th Jh Qh Ah 5c 8c Jc") == "three_flushes"


def test_three_flushes_need_each_chi_single_suited_mb13() -> None:
    # 6 hearts, 4 spades, 3 clubs: no 5/5/3 split by suit.
    assert special("2h 4h 6h 8h Th Qh 3s 5s 7s 9s 4c Jc Ac") is None


def test_a_quad_counts_as_two_pairs_for_six_pairs_mb22() -> None:
    assert special("2s 2h 2d 2c 6s 6h 8d 8c Ts Th Qd Qc Ks") == "six_pairs"


def test_a_quad_counts_as_two_pairs_for_five_pairs_and_a_triple_mb22() -> None:
    assert special("2s 2h 2d 2c 6s 6h 8d 8c Ts Th Qd Qc Qs") == "five_pairs_triple"


def test_a_quad_is_not_a_triple_for_four_triples_mb22() -> None:
    assert special("2s 2h 2d 2c 5s 5h 5d 9s 9h 9d Qs Qh Qd") is None


def test_special_hand_needs_thirteen_distinct_cards() -> None:
    with pytest.raises(RuleViolation):
        mb.special_hand(parse_cards("2s 3h 4d"))
    with pytest.raises(RuleViolation):
        mb.special_hand(parse_cards("2s 2s 4d 5c 6h 7h 8s 9h Td Jh Qc Kh Ah"))


@pytest.mark.parametrize("name", ["three_straight_flushes", "three_straights", "three_flushes"])
def test_the_partition_of_a_partition_special_is_shown_as_a_valid_arrangement(name: str) -> None:
    cards = next(s[1] for s in SPECIALS if s[0] == name)
    shown = mb.special_partition(parse_cards(cards))
    assert shown is not None
    assert mb.is_valid_arrangement(shown.front, shown.middle, shown.back)
    assert sorted(shown.cards, key=str) == sorted(parse_cards(cards), key=str)


# --- 11.5: settlement units -----------------------------------------------------------------

# Three normal hands used below (back | middle | front), no card twice.
STRONG = ("Qh Qd Qc Qs 3s", "7d 9d Td Kd Ad", "Kh Ks Kc")  # quads, flush, trips
MEDIUM = ("8s 8c 8d 2h 2s", "7h 8h 9c Ts Jd", "5h 5d 4c")  # full house, straight, pair
WEAK = ("As Jc 9h 6d 4s", "Jh 9s 6c 5c 3h", "Th 3c 2c")  # high cards


def test_a_chi_won_pays_the_units_of_the_winning_chi() -> None:
    a = hand("Qh Qd Qc Qs 3s", "8s 8c 8d 2h 2s", "9h 9d 4c")
    b = hand("Ac Kc 7c 5c 3c", "9c Tc Jd Qd Kd", "Ah As 5d")
    result = mb.compare_hands(a, b)
    # back: Tứ Quý beats a straight, 4 in chi đầu; middle: Cù Lũ beats a flush, 2 in chi
    # giữa (MB-2); front: a pair of aces beats a pair of 9s and pays 1.
    assert result.kind == "chi"
    assert result.chi_units == (4, 2, -1)
    assert result.shoot_units == 0 and result.total == 5


def test_a_drawn_chi_scores_zero_mb16() -> None:
    a = hand("8s 8c 8d 2h 2s", "Td Jc Qs Kh Ah", "9h 9d 4c")
    b = hand("7s 7c 7d 3h 3s", "Ts Jd Qc Kc Ad", "5h 5d 4d")
    result = mb.compare_hands(a, b)
    assert result.chi_units == (1, 0, 1)
    assert result.shoot_units == 0 and result.total == 2


def test_winning_more_chi_is_not_winning_the_hand_mb15() -> None:
    """MB-15: money is settled per chi; winning two chi of 1 can lose to one Sám Cô of 3."""
    a = hand("2h 5h 7h 9h Jh", "Td Jc Qs Kh Ad", "Ac Kc 4c")
    b = hand("5s 6c 7d 8s 9c", "Ts Th Tc 3d 2s", "8h 8d 8c")
    assert not a.fouled and not b.fouled
    result = mb.compare_hands(a, b)
    assert result.chi_units == (1, 1, -3)
    assert result.total == -1


def test_xu_ban_the_source_example_three_units_become_six() -> None:
    """11.5: "A xử bắn B, B vốn thua 3 lần tiền cược, sau khi xử bắn sẽ thua 6 lần"."""
    a = hand("Td Jc Qs Kh Ah", "Js Jd 9s 9d 5h", "9h 9c 4c")
    b = hand("7s 7c 4d 3h 2s", "6s 6c 5d 3c 2h", "Ad Kc Qh")
    result = mb.compare_hands(a, b)
    assert result.base_units == 3
    assert result.total == 6 and result.shooter == 0


def test_a_chi_lost_pays_the_opponents_units() -> None:
    result = mb.compare_hands(hand(*WEAK), hand(*STRONG))
    assert result.chi_units == (-4, -1, -3)
    assert result.total == -16 and result.shooter == 1


def test_fouled_hand_loses_all_three_chi_and_is_shot_mb5() -> None:
    fouled = hand("7d 7c Ts Qc As", "Jd Jc 9s 9h Kc", "2h 3d 4s")
    assert fouled.fouled
    result = mb.compare_hands(fouled, hand(*WEAK))
    # The valid hand's chi are high cards: 1 + 1 + 1, doubled.
    assert result.kind == "foul"
    assert result.chi_units == (-1, -1, -1) and result.total == -6


def test_fouled_hand_pays_the_valid_hands_chi_units_mb5() -> None:
    fouled = hand("7d 7c Ts Qc As", "Jd Jc 9s 9h Ks", "2h 3d 4s")
    result = mb.compare_hands(hand(*STRONG), fouled, 0, 1)
    assert result.kind == "foul"
    assert result.chi_units == (4, 1, 3) and result.total == 16


def test_two_fouled_hands_draw_mb5() -> None:
    one = hand("7d 7c Ts Qc As", "Jd Jc 9s 9h Kc", "2h 3d 4s")
    other = hand("6d 6c Th Qd Ah", "8d 8c 5s 5h Kd", "2s 3c 4c")
    assert one.fouled and other.fouled
    assert mb.compare_hands(one, other).total == 0


def test_special_hand_wins_its_multiple_from_a_normal_hand() -> None:
    six_pairs = hand("2s 2h 4d 4c 6s", "6h 8d 8c Ts Th", "Qd Qc Ks")
    result = mb.compare_hands(six_pairs, hand(*STRONG))
    assert result.kind == "special" and result.total == 4 and result.shoot_units == 0


def test_special_hand_wins_its_multiple_from_a_fouled_hand_mb9() -> None:
    six_pairs = hand("2s 2h 4d 4c 6s", "6h 8d 8c Ts Th", "Qd Qc Ks")
    fouled = hand("7d 7c 5s Jc As", "Jd 3c 9s 9h Kc", "2h 3d 4s")
    assert fouled.fouled
    assert mb.compare_hands(fouled, six_pairs).total == -4


def test_the_higher_special_hand_wins_its_own_multiple() -> None:
    dragon = hand("2s 3h 4d 5c 6h", "7h 8s 9h Td Jh", "Qc Kh Ah")
    three_flushes = hand("2d 5d 7d 9d Jd", "3c 6c 8c Tc Qc", "4s 8d Kd")
    assert three_flushes.special is None  # 4♠ breaks it …
    three_flushes = hand("2c 5c 7c 9c Jc", "3s 6s 8s Ts Qs", "4d 8d Kd")
    assert three_flushes.special == "three_flushes"
    assert mb.compare_hands(dragon, three_flushes).total == 30
    assert mb.compare_hands(three_flushes, dragon).total == -30


def test_three_straight_flushes_beat_three_quads_for_twenty() -> None:
    sf = hand("2h 3h 4h 5h 6h", "9s Ts Js Qs Ks", "Qd Kd Ad")
    quads = hand("2s 2d 2c 2h 7s", "7h 7d 7c 8s 8h", "8d 8c 9d")
    assert sf.special == "three_straight_flushes" and quads.special == "three_quads"
    assert mb.compare_hands(sf, quads).total == 20


def test_two_special_hands_of_one_type_draw_mb8() -> None:
    one = hand("2s 2h 4d 4c 6s", "6h 8d 8c Ts Th", "Qd Qc Ks")
    other = hand("3s 3h 5d 5c 7s", "7h 9d 9c Js Jh", "Ad Ac Kc")
    assert one.special == other.special == "six_pairs"
    assert mb.compare_hands(one, other).total == 0


def test_units_of_a_table_net_per_seat() -> None:
    result = mb.table_result([hand(*STRONG), hand(*MEDIUM), hand(*WEAK)])
    assert sum(result.units) == 0
    assert result.home_run_seat is None  # MB-7: three players never make a Home Run
    by_pair = {(p.seat_a, p.seat_b): p.total for p in result.pairs}
    assert result.units == (
        by_pair[0, 1] + by_pair[0, 2],
        -by_pair[0, 1] + by_pair[1, 2],
        -by_pair[0, 2] - by_pair[1, 2],
    )


# Four hands in which seat 0 beats every chi of every other seat; no card twice.
HOME_RUN_TABLE = [STRONG, MEDIUM, WEAK, ("7s 7c Ah Ac 6s", "4h 4d Js Tc 5s", "2d 3d 6h")]


def test_home_run_pays_four_times_the_base_mb6() -> None:
    hands = [hand(*h) for h in HOME_RUN_TABLE]
    result = mb.table_result(hands)
    assert result.home_run_seat == 0
    won = [p for p in result.pairs if p.seat_a == 0]
    # Tứ Quý 4 + Đồng Chất 1 + Sám Cô in chi cuối 3 = 8 from each, × 4.
    assert [p.base_units for p in won] == [8, 8, 8]
    assert [p.total for p in won] == [32, 32, 32]
    assert result.units[0] == 96 and sum(result.units) == 0


def test_home_run_literal_plus_two_units_option_mb6() -> None:
    hands = [hand(*h) for h in HOME_RUN_TABLE]
    options = mb.HandOptions(home_run_multiplier=2, home_run_extra_units=2)
    result = mb.table_result(hands, options)
    assert [p.total for p in result.pairs if p.seat_a == 0] == [18, 18, 18]


def test_no_home_run_with_three_players_mb7() -> None:
    result = mb.table_result([hand(*h) for h in HOME_RUN_TABLE[:3]])
    assert result.home_run_seat is None
    assert [p.total for p in result.pairs if p.seat_a == 0] == [16, 16]


def test_a_fouled_opponent_counts_as_beaten_for_a_home_run_mb24() -> None:
    fouled = ("4h 4d Js Tc 5s", "7s 7c Ah Ac 6s", "2d 3d 6h")
    hands = [hand(*h) for h in [*HOME_RUN_TABLE[:3], fouled]]
    assert hands[3].fouled
    result = mb.table_result(hands)
    assert result.home_run_seat == 0
    assert result.pairs[2].total == 32


def test_a_special_hand_among_the_opponents_rules_a_home_run_out_mb24() -> None:
    table = [
        ("Ah Ad Ac Kh Kd", "2h 5h 7h 9h Jh", "Qh Qd Qc"),
        ("3h 4d 5c 6h 7d", "8h 8d Tc 6c 4c", "Kc 9c 2d"),
        ("Jd Jc 9d 8c 2c", "Td Th 6d 5d 3c", "7c 4h 3d"),
        ("2s 3s 4s 5s 6s", "7s 8s 9s Ts Js", "Qs Ks As"),
    ]
    hands = [hand(*h) for h in table]
    assert hands[3].special == "dragon_roll"
    result = mb.table_result(hands)
    assert result.home_run_seat is None
    totals = {(p.seat_a, p.seat_b): p.total for p in result.pairs}
    assert totals[0, 1] == totals[0, 2] == 2 * (1 + 1 + 3)  # shot, not a Home Run
    assert totals[0, 3] == totals[1, 3] == totals[2, 3] == -32
    assert sum(result.units) == 0


def test_a_table_has_two_to_four_players_mb21() -> None:
    with pytest.raises(RuleViolation) as err:
        mb.table_result([hand(*STRONG)])
    assert err.value.code == "BAD_SEAT_COUNT"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("home_run_multiplier", 1),
        ("home_run_multiplier", 17),
        ("home_run_extra_units", -1),
        ("home_run_extra_units", 101),
        ("home_run_multiplier", True),  # on both cores: the compiled one is given the bool itself
        ("home_run_multiplier", 4.0),
        ("home_run_extra_units", "2"),
    ],
)
def test_hand_options_outside_their_range_are_a_bad_option(field: str, value: object) -> None:
    with pytest.raises(RuleViolation) as err:
        mb.HandOptions(**{field: value})  # type: ignore[arg-type]
    assert err.value.code == "BAD_OPTION"
    assert err.value.details == {"option": field}


def test_every_code_the_hands_module_raises_is_a_kit_code() -> None:
    """The kit's contract test reads the game module (``maubinh``); its pure helper module
    raises codes too, and the table maps only the kit's one set (``base.RULE_CODES``)."""
    assert mb.__file__ is not None
    source = Path(mb.__file__).with_name("maubinh_hands.py").read_text(encoding="utf-8")  # also when compiled
    raised = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "RuleViolation":
            first = node.args[0]
            assert isinstance(first, ast.Constant) and isinstance(first.value, str), ast.unparse(node)
            raised.add(first.value)
    assert {"BAD_HAND", "BAD_ARRANGEMENT", "BAD_OPTION", "BAD_SEAT_COUNT"} <= raised
    assert raised <= set(RULE_CODES), raised - set(RULE_CODES)


def test_a_card_held_by_two_seats_is_rejected() -> None:
    with pytest.raises(RuleViolation):
        mb.table_result([hand(*STRONG), hand(*STRONG)])


def test_play_rejects_an_arrangement_of_the_wrong_shape() -> None:
    with pytest.raises(RuleViolation) as err:
        mb.played_hand(parse_cards("2h 3d"), parse_cards("Jd Jc 9s 9h Kc"), parse_cards("7d 7s Th Qh Ah"))
    assert err.value.code == "BAD_ARRANGEMENT"
