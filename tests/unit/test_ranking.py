"""The shared 5-card (and 3-card front chi) poker ranking of ``socai.rules.ranking``."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socai.cards import ALL_CARDS, Card, parse_cards
from socai.rules import ranking
from socai.rules.ranking import (
    CATEGORY_NAMES,
    FLUSH,
    FOUR_OF_A_KIND,
    FULL_HOUSE,
    HIGH_CARD,
    PAIR,
    STRAIGHT,
    STRAIGHT_FLUSH,
    THREE_OF_A_KIND,
    TWO_PAIR,
    WHEEL_LOWEST,
    WHEEL_NONE,
    WHEEL_SECOND_HIGHEST,
    rank_cards,
)


def rank(text: str, wheel: str = WHEEL_LOWEST) -> tuple[int, tuple[int, ...]]:
    return rank_cards(parse_cards(text), wheel)


def category(text: str, wheel: str = WHEEL_LOWEST) -> str:
    return CATEGORY_NAMES[rank(text, wheel)[0]]


# --- every category ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cards", "expected"),
    [
        ("9h Th Jh Qh Kh", "straight_flush"),
        ("Ts Js Qs Ks As", "straight_flush"),
        ("7c 7d 7h 7s 2d", "four_of_a_kind"),
        ("Kc Kd Kh 4s 4d", "full_house"),
        ("2d 7d 9d Jd Ad", "flush"),
        ("5c 6d 7h 8s 9c", "straight"),
        ("Tc Jd Qh Ks Ad", "straight"),
        ("Qc Qd Qh 8s 2d", "three_of_a_kind"),
        ("Jc Jd 4h 4s Ad", "two_pair"),
        ("9c 9d Kh 5s 2d", "pair"),
        ("Ac Jd 8h 5s 3d", "high_card"),
    ],
)
def test_every_category_with_the_cards_written_out(cards: str, expected: str) -> None:
    assert category(cards) == expected


def test_categories_are_ordered_from_high_card_to_straight_flush() -> None:
    assert CATEGORY_NAMES == (
        "high_card",
        "pair",
        "two_pair",
        "three_of_a_kind",
        "straight",
        "flush",
        "full_house",
        "four_of_a_kind",
        "straight_flush",
    )
    assert (HIGH_CARD, PAIR, TWO_PAIR, THREE_OF_A_KIND, STRAIGHT) == (0, 1, 2, 3, 4)
    assert (FLUSH, FULL_HOUSE, FOUR_OF_A_KIND, STRAIGHT_FLUSH) == (5, 6, 7, 8)


def test_each_category_beats_the_one_below() -> None:
    ladder = [
        "Ac Jd 8h 5s 3d",  # high card
        "2c 2d 3h 4s 6d",  # pair
        "2c 2d 3h 3s 4d",  # two pair
        "2c 2d 2h 3s 4d",  # three of a kind
        "Ac 2d 3h 4s 5d",  # the lowest straight
        "2d 3d 4d 5d 7d",  # the lowest flush
        "2c 2d 2h 3s 3d",  # the lowest full house
        "2c 2d 2h 2s 3d",  # the lowest four of a kind
        "Ad 2d 3d 4d 5d",  # the lowest straight flush
    ]
    ranks = [rank(cards) for cards in ladder]
    assert ranks == sorted(ranks)
    assert len(set(ranks)) == len(ranks)


def test_the_best_of_a_category_loses_to_the_worst_of_the_next() -> None:
    assert rank("Ac Kd Qh Js 9d") < rank("2c 2d 3h 4s 5d")  # ace high < a pair of twos
    assert rank("Ac Ad Kh Ks Qd") < rank("2c 2d 2h 3s 4d")  # aces up < trip twos
    assert rank("Ac Ad Ah Ks Qd") < rank("Ac 2d 3h 4s 5d")  # trip aces < the wheel
    assert rank("Tc Jd Qh Ks Ad") < rank("2d 3d 4d 5d 7d")  # broadway < a 7-high flush
    assert rank("Ad Kd Qd Jd 9d") < rank("2c 2d 2h 3s 3d")  # ace-high flush < twos full
    assert rank("Ac Ad Ah Ks Kd") < rank("2c 2d 2h 2s 3d")  # aces full < quad twos
    assert rank("Ac Ad Ah As Kd") < rank("Ad 2d 3d 4d 5d")  # quad aces < steel wheel


# --- tie-breaks -------------------------------------------------------------------------


def test_higher_straight_flush_wins() -> None:
    assert rank("8h 9h Th Jh Qh") < rank("9s Ts Js Qs Ks")


def test_four_of_a_kind_compares_the_quads_then_the_kicker() -> None:
    assert rank("7c 7d 7h 7s Ad") < rank("8c 8d 8h 8s 2d")
    assert rank("7c 7d 7h 7s Kd") < rank("7c 7d 7h 7s Ad")


def test_full_house_compares_the_triple_then_the_pair() -> None:
    assert rank("Qc Qd Qh As Ad") < rank("Kc Kd Kh 2s 2d")
    assert rank("Kc Kd Kh 2s 2d") < rank("Kc Kd Kh 3s 3d")


def test_flushes_compare_card_by_card_from_the_top() -> None:
    assert rank("Ad Kd 9d 5d 3d") < rank("Ac Kc 9c 5c 4c")
    assert rank("Kd Qd Jd 9d 8d") < rank("Ac 2c 3c 4c 6c")


def test_three_of_a_kind_compares_the_triple_then_the_kickers() -> None:
    assert rank("9c 9d 9h As Kd") < rank("Tc Td Th 2s 3d")
    assert rank("9c 9d 9h Ks Qd") < rank("9c 9d 9h As 2d")


def test_two_pair_compares_high_pair_then_low_pair_then_kicker() -> None:
    assert rank("Jc Jd Th Ts Ad") < rank("Qc Qd 2h 2s 3d")
    assert rank("Jc Jd 4h 4s Ad") < rank("Jc Jd 5h 5s 2d")
    assert rank("Jc Jd 4h 4s 9d") < rank("Jc Jd 4h 4s Td")
    assert rank("Jc Jd 4h 4s Ad")[1] == (11, 4, 14)


def test_a_pair_compares_the_pair_then_the_kickers_from_the_top() -> None:
    assert rank("9c 9d As Kh Qd") < rank("Tc Td 2s 3h 4d")
    assert rank("9c 9d Ks Qh 2d") < rank("9c 9d Ks Qh 3d")
    assert rank("9c 9d Kh 5s 2d")[1] == (9, 13, 5, 2)


def test_high_cards_compare_from_the_top() -> None:
    assert rank("Ac Jd 8h 5s 2d") < rank("Ac Jd 8h 5s 3d")
    assert rank("Kc Qd Jh 9s 8d") < rank("Ac 2d 3h 4s 6d")


def test_the_same_ranks_in_other_suits_tie() -> None:
    assert rank("Ac Kd Qh Js 9d") == rank("As Kh Qd Jc 9s")
    assert rank("2h 3h 4h 5h 7h") == rank("2s 3s 4s 5s 7s")
    assert rank("Kc Kd Kh 4s 4d") == rank("Ks Kh Kd 4c 4h")


def test_card_order_in_the_hand_does_not_matter() -> None:
    cards = parse_cards("Jc Jd 4h 4s Ad")
    assert {rank_cards(list(p)) for p in itertools.permutations(cards)} == {rank_cards(cards)}


# --- the wheel A-2-3-4-5 ----------------------------------------------------------------


def test_with_the_usual_rule_the_wheel_is_the_lowest_straight() -> None:
    assert rank("Ac 2d 3h 4s 5d") == (STRAIGHT, (5,))
    assert rank("Ac 2d 3h 4s 5d") < rank("2c 3d 4h 5s 6d")


def test_with_the_usual_rule_the_steel_wheel_is_the_lowest_straight_flush() -> None:
    assert rank("Ah 2h 3h 4h 5h") == (STRAIGHT_FLUSH, (5,))
    assert rank("Ah 2h 3h 4h 5h") < rank("2s 3s 4s 5s 6s")


def test_as_second_highest_the_wheel_beats_king_high_and_loses_to_broadway() -> None:
    wheel = rank("Ac 2d 3h 4s 5d", WHEEL_SECOND_HIGHEST)
    king_high = rank("9c Td Jh Qs Kd", WHEEL_SECOND_HIGHEST)
    broadway = rank("Tc Jd Qh Ks Ad", WHEEL_SECOND_HIGHEST)
    assert king_high < wheel < broadway
    assert (wheel, broadway) == ((STRAIGHT, (14,)), (STRAIGHT, (15,)))


def test_as_second_highest_the_steel_wheel_is_second_only_to_the_royal_flush() -> None:
    steel = rank("Ah 2h 3h 4h 5h", WHEEL_SECOND_HIGHEST)
    assert rank("9h Th Jh Qh Kh", WHEEL_SECOND_HIGHEST) < steel < rank("Th Jh Qh Kh Ah", WHEEL_SECOND_HIGHEST)


def test_without_the_wheel_a_2_3_4_5_is_ace_high() -> None:
    assert rank("Ac 2d 3h 4s 5d", WHEEL_NONE) == (HIGH_CARD, (14, 5, 4, 3, 2))
    assert rank("Ah 2h 3h 4h 5h", WHEEL_NONE) == (FLUSH, (14, 5, 4, 3, 2))


def test_without_the_wheel_other_straights_still_count() -> None:
    assert rank("Tc Jd Qh Ks Ad", WHEEL_NONE) == (STRAIGHT, (14,))
    assert rank("8c 9d Th Js Qd", WHEEL_NONE) == (STRAIGHT, (12,))


def test_an_ace_does_not_wrap_around_the_corner() -> None:
    assert category("Qc Kd Ah 2s 3d") == "high_card"


def test_straight_key_needs_five_distinct_ranks() -> None:
    assert ranking.straight_key([2, 3, 4, 5, 6]) == 6
    assert ranking.straight_key([2, 3, 4, 5, 5]) is None
    assert ranking.straight_key([2, 3, 4, 5]) is None
    assert ranking.straight_key([14, 2, 3, 4, 5], WHEEL_NONE) is None


def test_an_unknown_wheel_rule_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        rank("Ac 2d 3h 4s 5d", "low")


# --- three cards (a Mậu Binh front chi) -------------------------------------------------


def test_three_cards_can_be_three_of_a_kind_a_pair_or_high_card() -> None:
    assert rank("5c 5d 5h") == (THREE_OF_A_KIND, (5,))
    assert rank("Qc Qd 3h") == (PAIR, (12, 3))
    assert rank("Ac 9d 3h") == (HIGH_CARD, (14, 9, 3))


def test_three_cards_make_no_straight_and_no_flush() -> None:
    assert category("Qh Kh Ah") == "high_card"
    assert category("2c 3d 4h") == "high_card"


def test_three_card_ties_and_order() -> None:
    assert rank("Qc Qd 3h") == rank("Qs Qh 3c")
    assert rank("Qc Qd 3h") < rank("Qc Qd 4h") < rank("Kc Kd 2h") < rank("2c 2d 2h")


@pytest.mark.parametrize("count", [0, 1, 2, 4, 6, 7])
def test_only_three_or_five_cards_are_ranked(count: int) -> None:
    with pytest.raises(AssertionError):
        rank_cards(list(ALL_CARDS[:count]))


def test_a_card_twice_in_one_hand_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        rank("As As Ks Qs Js")


# --- properties -------------------------------------------------------------------------

five_cards = st.lists(st.sampled_from(ALL_CARDS), min_size=5, max_size=5, unique=True)


@given(five_cards, st.sampled_from([WHEEL_LOWEST, WHEEL_SECOND_HIGHEST, WHEEL_NONE]))
def test_the_key_lists_every_rank_of_the_hand_except_in_straights(cards: list[Card], wheel: str) -> None:
    cat, key = rank_cards(cards, wheel)
    if cat in (STRAIGHT, STRAIGHT_FLUSH):
        assert len(key) == 1
    else:
        assert sorted(key) == sorted({c.rank for c in cards})


@given(five_cards, st.permutations([0, 1, 2, 3]))
def test_renaming_the_suits_never_changes_a_rank(cards: list[Card], suits: list[int]) -> None:
    # Suits only tell whether all five cards share one; which suit it is never matters here.
    renamed = [Card(c.rank, suits[c.suit]) for c in cards]
    assert rank_cards(renamed) == rank_cards(cards)
