"""Properties of the shedding core over random hands, for both games.

- ``beats`` is irreflexive and asymmetric, and transitive within one shape;
- ``combo`` and ``legal_plays`` agree: leading, the legal plays are exactly the subsets of
  the hand that form a combination (less Sâm Lốc's SL-7 last-play rule); following, they
  are exactly those that beat the play;
- ``legal_plays`` is deterministic, sorted and free of repeats;
- ``count_left`` prices every card once, at least 1 lá each.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socai.cards import ALL_CARDS, Card
from socai.rules.climbing import shedding
from socai.rules.climbing.shedding import SAMLOC, TIENLEN, Combination, SheddingRules

GAMES = pytest.mark.parametrize("rules", [TIENLEN, SAMLOC], ids=["tienlen", "samloc"])


# Cards of a few neighbouring ranks, so that random hands hold straights, pairs runs and fours
# (low and high ends included: A-2-3 and Q-K-A-2 are where the games differ).
RANK_WINDOWS = ((14, 2, 3, 4, 5), (3, 4, 5, 6, 7), (7, 8, 9, 10, 11), (11, 12, 13, 14, 2))
DENSE_POOLS = tuple(tuple(c for c in ALL_CARDS if c.rank in window) for window in RANK_WINDOWS)


def hands(max_cards: int) -> st.SearchStrategy[list[Card]]:
    """A hand of 1 to ``max_cards`` distinct cards: from the whole deck or from a dense pool."""
    pools = st.sampled_from((tuple(ALL_CARDS), *DENSE_POOLS))
    return pools.flatmap(lambda pool: st.lists(st.sampled_from(pool), min_size=1, max_size=max_cards, unique=True))


def subsets_forming_combinations(hand: list[Card], rules: SheddingRules) -> set[frozenset[Card]]:
    found = set()
    for size in range(1, len(hand) + 1):
        for cards in itertools.combinations(hand, size):
            if shedding.combo(cards, rules) is not None:
                found.add(frozenset(cards))
    return found


def empties_hand_on_a_two(cards: frozenset[Card], hand: list[Card], rules: SheddingRules) -> bool:
    return rules.no_two_in_last_play and len(cards) == len(hand) and any(c.rank == 2 for c in cards)


@GAMES
@settings(max_examples=150, deadline=None)
@given(hand=hands(9))
def test_leading_the_legal_plays_are_the_subsets_that_form_a_combination(
    hand: list[Card], rules: SheddingRules
) -> None:
    expected = {s for s in subsets_forming_combinations(hand, rules) if not empties_hand_on_a_two(s, hand, rules)}
    found = shedding.legal_plays(hand, None, rules)
    assert {frozenset(p.cards) for p in found} == expected
    assert len(found) == len(expected)
    for play in found:
        assert shedding.combo(play.cards, rules) == play


@GAMES
@settings(max_examples=150, deadline=None)
@given(hand=hands(10), over_hand=hands(8), data=st.data())
def test_following_the_legal_plays_are_those_that_beat_the_play(
    hand: list[Card], over_hand: list[Card], data: st.DataObject, rules: SheddingRules
) -> None:
    candidates = shedding.legal_plays(over_hand, None, dataclasses_without_last_play_rule(rules))
    over = data.draw(st.sampled_from(candidates))
    leading = shedding.legal_plays(hand, None, rules)
    following = shedding.legal_plays(hand, over, rules)
    assert following == tuple(p for p in leading if shedding.beats(p, over, rules))


def dataclasses_without_last_play_rule(rules: SheddingRules) -> SheddingRules:
    return dataclasses.replace(rules, no_two_in_last_play=False)


@GAMES
@settings(max_examples=100, deadline=None)
@given(hand=hands(10))
def test_legal_plays_are_sorted_unique_and_the_same_every_time(hand: list[Card], rules: SheddingRules) -> None:
    first = shedding.legal_plays(hand, None, rules)
    assert first == shedding.legal_plays(list(reversed(hand)), None, rules)
    assert list(first) == sorted(first, key=shedding.play_order)
    assert len({frozenset(p.cards) for p in first}) == len(first)


@GAMES
@settings(max_examples=60, deadline=None)
@given(hand=hands(8))
def test_beats_is_irreflexive_and_asymmetric(hand: list[Card], rules: SheddingRules) -> None:
    plays = shedding.legal_plays(hand, None, dataclasses_without_last_play_rule(rules))
    for a in plays:
        assert not shedding.beats(a, a, rules)
        for b in plays:
            if shedding.beats(a, b, rules):
                assert not shedding.beats(b, a, rules), (a, b)


def by_shape(combinations: list[Combination]) -> dict[tuple[str, int], list[Combination]]:
    groups: dict[tuple[str, int], list[Combination]] = {}
    for c in combinations:
        groups.setdefault((c.shape, len(c.cards)), []).append(c)
    return groups


@GAMES
@settings(max_examples=40, deadline=None)
@given(hand=hands(9))
def test_beats_is_transitive_within_a_shape(hand: list[Card], rules: SheddingRules) -> None:
    plays = list(shedding.legal_plays(hand, None, dataclasses_without_last_play_rule(rules)))
    for group in by_shape(plays).values():
        for a, b, c in itertools.product(group[:8], repeat=3):
            if shedding.beats(a, b, rules) and shedding.beats(b, c, rules):
                assert shedding.beats(a, c, rules)


@GAMES
@settings(max_examples=200, deadline=None)
@given(hand=hands(13))
def test_count_left_prices_every_card_once_and_at_least_one_la_each(hand: list[Card], rules: SheddingRules) -> None:
    count = shedding.count_left(hand, rules)
    counted = [c for line in count.lines for c in line.cards]
    assert sorted(counted, key=lambda c: c.index) == sorted(hand, key=lambda c: c.index)
    assert count.total_stakes == sum(line.amount_stakes for line in count.lines)
    assert count.total_stakes >= len(hand)
    for line in count.lines:
        assert line.reason in shedding.REASONS and line.rule


@settings(max_examples=100, deadline=None)
@given(hand=hands(13))
def test_tienlen_count_left_is_never_less_than_the_twos_and_a_plain_count(hand: list[Card]) -> None:
    """TL-5: the highest reading is at least the reading with no groups."""
    twos = sum(10 if c.is_red else 5 for c in hand if c.rank == 2)
    others = sum(1 for c in hand if c.rank != 2)
    assert shedding.count_left(hand, TIENLEN).total_stakes >= twos + others


@GAMES
@settings(max_examples=100, deadline=None)
@given(hand=hands(13))
def test_combo_of_cards_is_independent_of_their_order(hand: list[Card], rules: SheddingRules) -> None:
    assert shedding.combo(hand, rules) == shedding.combo(list(reversed(hand)), rules)
