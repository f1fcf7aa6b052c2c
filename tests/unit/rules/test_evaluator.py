"""The fast Hold'em evaluator (``socai.rules.poker.evaluator``, ``holdem.hand_value``).

Checked against an independent evaluator (eval7, test-only) on random hands, and on the
hands RULES.md 1.2 names: the wheel, the steel wheel, kickers, the board playing.
"""

from __future__ import annotations

from collections import Counter

import eval7
import numpy as np
import pytest

from socai.cards import ALL_CARDS, parse_cards
from socai.errors import InvalidArgument
from socai.rules import ranking
from socai.rules.poker import evaluator, holdem
from socai.rules.poker.holdem import hand_value

EVAL7_CATEGORY = {
    "Straight Flush": "straight_flush",
    "Quads": "four_of_a_kind",
    "Full House": "full_house",
    "Flush": "flush",
    "Straight": "straight",
    "Trips": "three_of_a_kind",
    "Two Pair": "two_pair",
    "Pair": "pair",
    "High Card": "high_card",
}
E7_CARDS = [eval7.Card(str(c)) for c in ALL_CARDS]


def value(text: str) -> holdem.HandValue:
    return hand_value(parse_cards(text))


def random_hands(count: int, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((count, 52)), axis=1)[:, :size]


def assert_same_order(ours: list[int], theirs: list[int]) -> None:
    """Sorting by our values sorts theirs too, and ties are ties in both."""
    a = np.asarray(ours)
    b = np.asarray(theirs)
    order = np.lexsort((b, a))
    da, db = np.diff(a[order]), np.diff(b[order])
    assert np.all(db[da > 0] > 0), "a hand we rank higher, eval7 ranks lower or equal"
    assert np.all(db[da == 0] == 0), "hands we call equal, eval7 tells apart"


# --- against an independent evaluator ----------------------------------------------------


def test_hand_value_orders_100000_random_seven_card_hands_like_eval7() -> None:
    hands = random_hands(100_000, 7, seed=1).tolist()
    ours = [hand_value([ALL_CARDS[i] for i in h]) for h in hands]
    theirs = [eval7.evaluate([E7_CARDS[i] for i in h]) for h in hands]
    assert_same_order([v.strength for v in ours], theirs)
    categories = Counter((v.category, EVAL7_CATEGORY[eval7.handtype(t)]) for v, t in zip(ours, theirs, strict=True))
    assert all(a == b for a, b in categories), categories
    assert {a for a, _ in categories} == set(ranking.CATEGORY_NAMES)  # every category came up


@pytest.mark.parametrize("size", [5, 6])
def test_five_and_six_card_hands_order_like_eval7(size: int) -> None:
    hands = random_hands(20_000, size, seed=size).tolist()
    ours = [hand_value([ALL_CARDS[i] for i in h]) for h in hands]
    theirs = [eval7.evaluate([E7_CARDS[i] for i in h]) for h in hands]
    assert_same_order([v.strength for v in ours], theirs)
    assert all(v.category == EVAL7_CATEGORY[eval7.handtype(t)] for v, t in zip(ours, theirs, strict=True))


def test_the_numpy_batch_and_the_scalar_paths_agree() -> None:
    hands = random_hands(50_000, 7, seed=3)
    batch = evaluator.evaluate_batch(hands)
    assert batch.dtype == np.uint16
    scalar = [evaluator.strength7_of_indices(*h) for h in hands.tolist()]
    on_cards = [evaluator.strength([ALL_CARDS[i] for i in h]) for h in hands[:5000].tolist()]
    assert batch.tolist() == scalar
    assert on_cards == scalar[:5000]


def test_batch_takes_any_integer_dtype_and_an_empty_batch() -> None:
    hands = random_hands(100, 7, seed=4)
    expected = evaluator.evaluate_batch(hands.astype(np.uint8)).tolist()
    assert evaluator.evaluate_batch(hands.astype(np.int64)).tolist() == expected
    assert evaluator.evaluate_batch(hands.tolist()).tolist() == expected
    assert evaluator.evaluate_batch(np.empty((0, 7), dtype=np.uint8)).shape == (0,)


@pytest.mark.parametrize(
    "bad",
    [np.zeros((3, 6), dtype=np.uint8), np.full((2, 7), 52), np.full((2, 7), -1), np.zeros(7, dtype=np.uint8)],
)
def test_batch_rejects_bad_shapes_and_card_indices(bad: np.ndarray) -> None:
    with pytest.raises(InvalidArgument) as err:
        evaluator.evaluate_batch(bad)
    assert err.value.code == "BAD_HAND"


# --- the table itself --------------------------------------------------------------------


def test_there_are_7462_hand_classes_in_the_standard_numbers_per_category() -> None:
    per_category = Counter(evaluator.category_name(s) for s in range(1, evaluator.HAND_CLASSES + 1))
    assert per_category == {
        "straight_flush": 10,
        "four_of_a_kind": 156,
        "full_house": 156,
        "flush": 1277,
        "straight": 10,
        "three_of_a_kind": 858,
        "two_pair": 858,
        "pair": 2860,
        "high_card": 1277,
    }


def test_the_weakest_and_the_strongest_hands_are_the_ends_of_the_scale() -> None:
    assert value("7s 5d 4c 3h 2s").strength == 1
    assert value("As Ks Qs Js Ts").strength == evaluator.HAND_CLASSES


def test_rank_keys_tell_every_multiset_of_seven_ranks_apart() -> None:
    seven = evaluator.tables().nonflush_of(7)
    assert len(seven) == 49205  # every 7-card rank multiset (no rank more than 4 times)
    assert max(seven) == evaluator.RANK_KEY_SUM_MAX


# --- named hands (RULES.md 1.2, HE-5, HE-7, HE-8) ----------------------------------------


def test_categories_rank_as_the_source_lists_them() -> None:
    ladder = [
        "2s 3s 4s 5s 6s Kd Qc",  # straight flush
        "9s 9d 9c 9h Kd 2c 3h",  # four of a kind
        "9s 9d 9c Kh Kd 2c 3h",  # full house
        "As Js 8s 5s 3s Kd 2c",  # flush
        "5s 6d 7c 8h 9s Kd 2c",  # straight
        "9s 9d 9c Kh 7d 2c 3h",  # three of a kind
        "9s 9d Kc Kh 7d 2c 3h",  # two pair
        "9s 9d Kc Qh 7d 2c 3h",  # pair
        "As Jd 9c 7h 5d 3c 2h",  # high card
    ]
    values = [value(h) for h in ladder]
    assert [v.category for v in values] == list(reversed(ranking.CATEGORY_NAMES))
    assert values == sorted(values, reverse=True)


def test_the_wheel_is_the_lowest_straight() -> None:
    wheel = value("As 2d 3c 4h 5s Kd 9c")
    six_high = value("2s 3d 4c 5h 6s Kd 9c")
    assert wheel.category == six_high.category == "straight"
    assert wheel < six_high
    assert wheel > value("As Ad Kc Qh 9s 2d 3c")  # beats a pair of aces
    assert wheel > value("Ks Kd Kc Qh 9s 2d 4c")  # and three kings


def test_the_steel_wheel_is_the_lowest_straight_flush_and_still_beats_four_aces() -> None:
    steel_wheel = value("Ah 2h 3h 4h 5h Kd Kc")
    assert steel_wheel.category == "straight_flush"
    assert steel_wheel < value("2h 3h 4h 5h 6h Kd Kc")
    assert steel_wheel > value("As Ad Ac Ah Kh Kd Qc")


def test_an_ace_is_high_except_in_the_wheel() -> None:
    assert value("Ts Jd Qc Kh As 2d 3c") > value("9s Td Jc Qh Ks 2d 3c")
    assert value("Qs Kd Ac 2h 3s 8d 9c").category == "high_card"  # no wrap-around straight


def test_kickers_decide_equal_pairs_and_equal_trips() -> None:
    assert value("As Ad Kc 9h 7s 4d 2c") > value("Ah Ac Qc Jh 9s 4d 2c")
    assert value("7s 7d 7c Ah 2s 3d 9c") > value("7s 7d 7c Kh Qs 3d 9c")


def test_two_pair_compares_the_high_pair_then_the_low_pair_then_the_kicker() -> None:
    assert value("Ks Kd 2c 2h As 7d 8c") > value("Qs Qd Jc Jh As 7d 8c")
    assert value("Ks Kd 5c 5h 3s 7d 8c") > value("Ks Kd 4c 4h As 7d 8c")
    assert value("Ks Kd 5c 5h As 7d 2c") > value("Ks Kd 5c 5h Qs 7d 2c")


def test_a_third_pair_only_plays_as_a_kicker() -> None:
    # K K Q Q 8 8 A: two pair kings and queens with the ace kicker, not eights.
    assert value("Ks Kd Qc Qh 8s 8d Ac") == value("Ks Kd Qc Qh 2s 3d Ac")


def test_a_full_house_takes_the_best_pair_among_two_triples() -> None:
    assert value("9s 9d 9c 5h 5s 5d Kc") == value("9s 9d 9c 5h 5s 2d 3c")
    assert value("9s 9d 9c 5h 5s 5d Kc").category == "full_house"


def test_flush_compares_card_by_card_and_uses_the_best_five_of_six_suited() -> None:
    assert value("As Ks 9s 7s 3s 2s Qd") > value("As Ks 9s 6s 5s 4h Qd")
    assert value("As Ks 9s 7s 3s 2s Qd") == value("As Ks 9s 7s 3s 2h Qd")


def test_suits_never_break_a_tie() -> None:
    assert value("Ah Kh Qd Jc 9s 3d 2c") == value("As Ks Qc Jd 9h 3c 2d")


def test_the_board_plays_when_no_hole_card_improves_it() -> None:
    board = "Ts Jd Qc Kh As"
    assert value(board + " 2c 3d") == value(board + " 4h 5s")


def test_hand_value_refuses_too_few_too_many_or_repeated_cards() -> None:
    for text in ["As Kd Qc Jh", "As Kd Qc Jh Ts 9d 8c 7h", "As As Kd Qc Jh Ts 9d"]:
        with pytest.raises(InvalidArgument) as err:
            value(text)
        assert err.value.code == "BAD_HAND"
