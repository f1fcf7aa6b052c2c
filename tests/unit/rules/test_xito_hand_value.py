"""Xì Tố hand values (RULES.md 3.2): the source's examples, XT-1/2/5/6/7/12/15/19."""

from __future__ import annotations

import itertools
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socai.cards import Card, deck, parse_cards
from socai.errors import RuleViolation
from socai.rules import ranking
from socai.rules.poker import xito

XITO_DECK = deck("xito")


def value(text: str, *, straight_flush_lower_wins: bool = True) -> xito.HandValue:
    return xito.hand_value(parse_cards(text), straight_flush_lower_wins)


def beats(winner: str, loser: str) -> bool:
    return value(winner) > value(loser)


# --- the tie-break table of 3.2, one test per row ------------------------------------------


def test_lower_straight_flush_wins() -> None:
    """XT-2: the source's "8♥ 10♥ 9♥ J♥ Q♥" beats 9♣ 10♣ J♣ Q♣ K♣."""
    assert beats("8h Th 9h Jh Qh", "9c Tc Jc Qc Kc")
    assert value("8h 9h Th Jh Qh").category == "straight_flush"


def test_higher_straight_flush_wins_when_the_flag_is_off() -> None:
    lower = value("8h 9h Th Jh Qh", straight_flush_lower_wins=False)
    higher = value("9c Tc Jc Qc Kc", straight_flush_lower_wins=False)
    assert higher > lower


def test_royal_straight_flush_is_the_weakest_straight_flush_but_beats_four_aces() -> None:
    assert beats("9s Ts Js Qs Ks", "Td Jd Qd Kd Ad")
    assert beats("Td Jd Qd Kd Ad", "As Ac Ad Ah Ks")


def test_higher_four_of_a_kind_wins() -> None:
    assert beats("As Ac Ad Ah 8c", "Ks Kd Kh Kc 9h")


def test_full_house_with_the_higher_three_wins() -> None:
    assert beats("Jd Js Kh Kd Ks", "8h 8d 8c Tc Ts")
    assert value("Jd Js Kh Kd Ks").category == "full_house"


def test_flush_compares_card_by_card_from_the_highest() -> None:
    """'8♠ 10♠ J♠ Q♠ A♠ beats 9♣ J♣ 8♣ Q♣ K♣ because A♠ is higher than K♣.'"""
    assert beats("8s Ts Js Qs As", "9c Jc 8c Qc Kc")


def test_higher_three_of_a_kind_wins() -> None:
    assert beats("Qd Qh Qc 9h Ac", "Tc Ts Th 9d Qs")


def test_two_pair_with_the_higher_top_pair_wins() -> None:
    assert beats("Jd Js Ah Ac 8s", "Tc Ts Qs Qh Ad")


def test_one_pair_higher_pair_wins() -> None:
    assert beats("Qh Qs 9d Ac Js", "Ts Th Qc 8s Jd")


def test_high_card_compares_the_highest_card_first() -> None:
    """XT-7: the source's six-card hand read as A♦ K♣ Q♠ 9♦ 8♠ against K♥ Q♣ J♠ 9♥ 8♣."""
    assert beats("Ad Kc Qs 9d 8s", "Kh Qc Js 9h 8c")
    assert value("Ad Kc Qs 9d 8s").category == "high_card"


def test_equal_ranks_go_to_the_suit_of_the_deciding_card() -> None:
    """XT-1: A♥ A♣ K Q J beats A♦ A♠ K Q J (♥ beats ♦)."""
    assert beats("Ah Ac Ks Qs Js", "Ad As Kc Qc Jc")


def test_pair_of_aces_holding_the_ace_of_hearts_beats_the_pair_holding_the_ace_of_spades() -> None:
    """D2's example: the player with A♥ beats the player with A♠."""
    assert beats("Ah Ac Ks Qd 9c", "Ad As Kc Qh 9d")


# --- the XT decisions around the table --------------------------------------------------------


def test_kickers_decide_before_suits() -> None:
    """XT-1 and XT-6: suits count only when all five ranks are equal."""
    assert beats("As Ad Kc Qc Jc", "Ah Ac Ks Qs Ts")


def test_two_pair_with_equal_pairs_goes_to_the_kicker_then_the_suit() -> None:
    """XT-12."""
    assert beats("Ks Kc Qs Qc 9s", "Kh Kd Qh Qd 8s")
    assert beats("Kh Ks Qh Qs 9s", "Kd Kc Qd Qc 9c")


def test_high_card_compares_down_to_the_fifth_card() -> None:
    """XT-6 (D1): the 2nd to 5th cards count in turn."""
    assert beats("As Kc Qs Js 9d", "Ah Kh Qh Jd 8c")


def test_full_house_ranks_above_flush() -> None:
    """XT-15: the document's order, although a flush is rarer in 28 cards."""
    assert beats("8h 8d 8c 9c 9s", "8s Ts Js Qs As")
    assert value("8s Ts Js Qs As").category == "flush"


def test_only_three_straights_exist_and_a_is_high_only() -> None:
    """XT-5: 8-Q, 9-K, 10-A; A 8 9 10 J is no straight."""
    assert value("8c 9d Th Js Qs").category == "straight"
    assert value("Tc Jd Qh Ks As").category == "straight"
    assert value("Ac 8d 9h Ts Js").category == "high_card"


def test_straights_rank_by_the_top_card() -> None:
    assert beats("Tc Jd Qh Ks As", "9c Td Jh Qs Ks")
    assert beats("9c Td Jh Qs Ks", "8c 9d Th Js Qs")


def test_equal_straights_go_to_the_suit_of_the_highest_card() -> None:
    assert beats("8c 9d Th Js Qh", "8s 9c Td Jh Qd")


def test_equal_straight_flushes_go_to_the_suit() -> None:
    """XT-19."""
    assert beats("8h 9h Th Jh Qh", "8d 9d Td Jd Qd")
    assert beats("8c 9c Tc Jc Qc", "8s 9s Ts Js Qs")


def test_category_ids_are_the_shared_ranking_names() -> None:
    examples = {
        "straight_flush": "9s Ts Js Qs Ks",
        "four_of_a_kind": "As Ac Ad Ah 8c",
        "full_house": "Jd Js Kh Kd Ks",
        "flush": "8s Ts Js Qs As",
        "straight": "8c 9d Th Js Qs",
        "three_of_a_kind": "Qd Qh Qc 9h Ac",
        "two_pair": "Jd Js Ah Ac 8s",
        "pair": "Qh Qs 9d Ac Js",
        "high_card": "Ad Kc Qs 9d 8s",
    }
    assert set(examples) == set(ranking.CATEGORY_NAMES)
    ordered = sorted(examples, key=lambda name: value(examples[name]))
    assert ordered == list(ranking.CATEGORY_NAMES)


@pytest.mark.parametrize("text", ["As Ac Ad Ah", "As Ac Ad Ah Ks Kc", "7s 8s 9s Ts Js", "As As Kc Qd Jh"])
def test_hand_value_needs_five_distinct_cards_of_the_short_deck(text: str) -> None:
    with pytest.raises(RuleViolation) as caught:
        xito.hand_value(parse_cards(text))
    assert caught.value.code == "BAD_HAND"


# --- no ties between hands dealt from one deck ----------------------------------------------


def test_two_hands_dealt_from_one_deck_never_tie() -> None:
    """Every equal pair of values shares a card, so it cannot come from one deal: all
    98,280 hands of the 28-card deck, grouped by value, share a common card per group."""
    groups: dict[xito.HandValue, set[Card] | None] = defaultdict(lambda: None)
    count = 0
    for hand in itertools.combinations(XITO_DECK, 5):
        v = xito.hand_value(hand)
        common = groups[v]
        groups[v] = set(hand) if common is None else common & set(hand)
        count += 1
    assert count == 98_280
    assert all(common for common in groups.values())


hands_of_two = st.lists(st.sampled_from(XITO_DECK), min_size=10, max_size=10, unique=True)


@given(cards=hands_of_two, lower_wins=st.booleans())
@settings(max_examples=300, deadline=None)
def test_disjoint_hands_compare_strictly_and_consistently(cards: list[Card], lower_wins: bool) -> None:
    first = xito.hand_value(cards[:5], lower_wins)
    second = xito.hand_value(cards[5:], lower_wins)
    assert first != second
    assert (first > second) != (second > first)
    assert xito.hand_value(list(reversed(cards[:5])), lower_wins) == first  # order of cards is irrelevant
