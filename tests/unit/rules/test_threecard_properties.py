"""Three-card values over every hand of each deck: the lookup tables equal the plain
definitions, the order is total and equal exactly for equally strong hands, and hands
dealt from one deck never tie (so ``winner`` never meets a split)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from itertools import combinations, pairwise, permutations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socai.cards import Card, deck
from socai.rules.three_card import threecard
from socai.rules.three_card.threecard import ThreeCardValue

STANDARD = tuple(deck("lieng"))
BACAY = tuple(deck("bacay_ga"))
HANDS_52: list[tuple[Card, ...]] = list(combinations(STANDARD, 3))
HANDS_36: list[tuple[Card, ...]] = list(combinations(BACAY, 3))

ValueFn = Callable[[Sequence[Card]], ThreeCardValue]
KeyFn = Callable[[Sequence[Card]], tuple[int, ...]]

GAMES: list[tuple[str, ValueFn, KeyFn, list[tuple[Card, ...]]]] = [
    ("lieng", threecard.lieng_value, threecard.lieng_key, HANDS_52),
    ("lieng_sanh", threecard.lieng_sanh_value, threecard.lieng_sanh_key, HANDS_52),
    ("bacay", threecard.bacay_value, threecard.bacay_key, HANDS_36),
]
GAME_IDS = [game for game, *_ in GAMES]


def test_every_combination_is_counted() -> None:
    assert (len(HANDS_52), len(HANDS_36)) == (22_100, 7_140)


@pytest.mark.parametrize(("game", "value_of", "key_of", "hands"), GAMES, ids=GAME_IDS)
def test_fast_values_order_every_hand_exactly_as_the_definition(
    game: str, value_of: ValueFn, key_of: KeyFn, hands: list[tuple[Card, ...]]
) -> None:
    """Sorted by the plain key, strengths never go down, and two hands have equal values
    exactly when their keys are equal: the same total order, ties included."""
    pairs = sorted((key_of(hand), value_of(hand).strength) for hand in hands)
    for (key_1, strength_1), (key_2, strength_2) in pairwise(pairs):
        if key_1 == key_2:
            assert strength_1 == strength_2, (game, key_1)
        else:
            assert strength_1 < strength_2, (game, key_1, key_2)
    assert pairs[0][1] == 0  # strengths are dense ranks from 0


@pytest.mark.parametrize(("game", "value_of", "key_of", "hands"), GAMES, ids=GAME_IDS)
def test_fast_values_carry_the_definitions_category_and_points(
    game: str, value_of: ValueFn, key_of: KeyFn, hands: list[tuple[Card, ...]]
) -> None:
    categories = {"lieng": threecard.LIENG_CATEGORIES, "lieng_sanh": threecard.LIENG_SANH_CATEGORIES}
    for hand in hands:
        value = value_of(hand)
        if game == "bacay":
            assert (value.category, value.points) == ("points", threecard.bacay_points(hand))
            assert 1 <= value.points <= 10
        else:
            assert value.category == categories[game][key_of(hand)[0]]
            assert value.points == threecard.hand_points(hand)
            assert 0 <= value.points <= 9


@pytest.mark.parametrize(("game", "value_of", "key_of", "hands"), GAMES, ids=GAME_IDS)
def test_the_order_of_the_cards_never_matters(
    game: str, value_of: ValueFn, key_of: KeyFn, hands: list[tuple[Card, ...]]
) -> None:
    for hand in hands:
        assert len({value_of(list(p)) for p in permutations(hand)}) == 1, hand


@pytest.mark.parametrize(("game", "value_of", "key_of", "hands"), GAMES, ids=GAME_IDS)
def test_two_hands_dealt_from_one_deck_never_tie(
    game: str, value_of: ValueFn, key_of: KeyFn, hands: list[tuple[Card, ...]]
) -> None:
    """Every two hands with one value share a card, so they cannot both be dealt: no
    showdown, Gà pot or banker comparison is ever a draw."""
    by_value: defaultdict[ThreeCardValue, list[frozenset[Card]]] = defaultdict(list)
    for hand in hands:
        by_value[value_of(hand)].append(frozenset(hand))
    for value, group in by_value.items():
        if frozenset.intersection(*group):
            continue  # one card (the deciding card of the tie-break) is in all of them
        for hand_1, hand_2 in combinations(group, 2):
            assert hand_1 & hand_2, (game, value, sorted(map(str, hand_1)), sorted(map(str, hand_2)))


def test_lieng_category_counts() -> None:
    """Counted by hand: 13 × 4 Sáp; 12 heights × 4 suits of suited runs; 12 × 4³ runs less
    the suited ones; C(12, 3) Ảnh less JJJ QQQ KKK and 4³ J-Q-K runs; the rest points."""
    counts = Counter(threecard.lieng_value(hand).category for hand in HANDS_52)
    assert counts == {"sap": 52, "suited_run": 48, "run": 720, "faces": 144, "points": 21_136}


def test_lieng_sanh_category_counts() -> None:
    """LS-1: the 48 suited runs are ordinary runs."""
    counts = Counter(threecard.lieng_sanh_value(hand).category for hand in HANDS_52)
    assert counts == {"sap": 52, "run": 768, "faces": 144, "points": 21_136}


def test_lieng_and_lieng_sanh_agree_on_every_hand_but_the_suited_runs() -> None:
    """LI-8: one evaluator; ``lieng`` only adds the suited-run tier."""
    others = [hand for hand in HANDS_52 if threecard.lieng_value(hand).category != "suited_run"]
    by_lieng = sorted(others, key=threecard.lieng_value)
    strengths = [threecard.lieng_sanh_value(hand).strength for hand in by_lieng]
    assert strengths == sorted(strengths)
    assert len(set(map(threecard.lieng_value, others))) == len(set(map(threecard.lieng_sanh_value, others)))


def test_ba_cay_points_spread_over_one_to_ten() -> None:
    counts = Counter(threecard.bacay_value(hand).points for hand in HANDS_36)
    assert sorted(counts) == list(range(1, 11))
    assert sum(counts.values()) == 7_140


# --- random deals ------------------------------------------------------------------------------


@st.composite
def deals(
    draw: st.DrawFn, games: Sequence[str] = ("lieng", "lieng_sanh", "bacay_ga", "bacay_chuong")
) -> tuple[str, list[list[Card]]]:
    """One hand dealt to 2 to 9 seats from a shuffled deck of the game."""
    game = draw(st.sampled_from(games))
    cards = draw(st.permutations(BACAY if game.startswith("bacay") else STANDARD))
    seats = draw(st.integers(2, 9))
    return game, [list(cards[3 * i : 3 * i + 3]) for i in range(seats)]


@settings(max_examples=300, deadline=None)
@given(deals())
def test_every_deal_has_one_winner_holding_the_best_hand(deal: tuple[str, list[list[Card]]]) -> None:
    game, hands = deal
    values = {seat: threecard.HAND_VALUE[game](hand) for seat, hand in enumerate(hands)}
    best = threecard.winner(values)
    assert all(values[best] > value for seat, value in values.items() if seat != best)
    order = threecard.ranked(values)
    assert order[0] == best
    assert all(values[a] > values[b] for a, b in pairwise(order))


@settings(max_examples=300, deadline=None)
@given(deals())
def test_every_deal_compares_as_a_total_order(deal: tuple[str, list[list[Card]]]) -> None:
    game, hands = deal
    values = [threecard.HAND_VALUE[game](hand) for hand in hands]
    for a, b in combinations(values, 2):
        assert (a < b) + (a > b) == 1 and a != b
        assert (a <= b) == (not a > b)


@settings(max_examples=300, deadline=None)
@given(deals(games=("bacay_ga", "bacay_chuong")))
def test_ga_pot_and_chuong_helpers_agree_with_the_points(deal: tuple[str, list[list[Card]]]) -> None:
    _, hands = deal
    values = {seat: threecard.bacay_value(hand) for seat, hand in enumerate(hands)}
    tens = threecard.tens_best_first(values)
    assert [seat for seat in values if values[seat].points == 10] == sorted(tens)
    assert threecard.ga_pot_winner(values) == (tens[0] if tens else None)
    banker, *players = values  # seat 0 holds the bank
    for seat in players:
        result = threecard.player_result(values[seat], values[banker])
        assert result == (-1 if values[banker] > values[seat] else (2 if values[seat].points == 10 else 1))
