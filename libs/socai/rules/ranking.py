"""The shared 5-card poker ranking (category + tie-break key), with each game's quirks.

Used directly by Xì Tố and Mậu Binh (one chi of 3 or 5 cards) and as the reference the
fast Hold'em evaluator is tested against. Suits never enter here: games that break ties
by suit (Xì Tố) add their own last key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from socai.cards import Card
from socai.errors import broken, check

(
    HIGH_CARD,
    PAIR,
    TWO_PAIR,
    THREE_OF_A_KIND,
    STRAIGHT,
    FLUSH,
    FULL_HOUSE,
    FOUR_OF_A_KIND,
    STRAIGHT_FLUSH,
) = range(9)
CATEGORY_NAMES: Final = (
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

# How A-2-3-4-5 counts: the lowest straight (poker), the second highest (a Mậu Binh
# option), or not a straight at all (Xì Tố's 28-card deck has no 2-5 anyway).
WHEEL_LOWEST: Final = "lowest"
WHEEL_SECOND_HIGHEST: Final = "second_highest"
WHEEL_NONE: Final = "none"
WHEELS: Final = (WHEEL_LOWEST, WHEEL_SECOND_HIGHEST, WHEEL_NONE)


def straight_key(ranks: Sequence[int], wheel: str = WHEEL_LOWEST) -> int | None:
    """The ordering key of five distinct ranks that form a straight, else None.

    The key is the top card, except the wheel: 5 when lowest; under ``second_highest``
    the wheel is 14 and broadway (10-A) becomes 15.
    """
    # An unknown wheel would silently behave like WHEEL_NONE for A-2-3-4-5 only.
    if wheel not in WHEELS:  # formats the message only on failure
        broken(f"unknown wheel rule {wheel!r}")
    distinct = sorted(set(ranks))
    if len(distinct) != 5 or len(ranks) != 5:
        return None
    if distinct[-1] - distinct[0] == 4:
        top = distinct[-1]
        if wheel == WHEEL_SECOND_HIGHEST and top == 14:
            return 15
        return top
    if distinct == [2, 3, 4, 5, 14]:
        if wheel == WHEEL_LOWEST:
            return 5
        if wheel == WHEEL_SECOND_HIGHEST:
            return 14
    return None


def rank_cards(cards: Sequence[Card], wheel: str = WHEEL_LOWEST) -> tuple[int, tuple[int, ...]]:
    """``(category, key)`` of 3 or 5 cards; higher tuples are stronger hands.

    With 3 cards only three of a kind, a pair or high card exist (a Mậu Binh front chi).
    The key lists ranks by group size then rank: quads then kicker, trips then pair,
    pairs high to low then kicker, high cards from the top.
    """
    check(len(cards) in (3, 5), "a poker hand here has 3 or 5 cards")
    # A repeated card would make impossible shapes (five of a kind ranks as high card).
    check(len(set(cards)) == len(cards), "a card appears twice in one hand")
    # A plain dict and (count, rank) pairs sorted as they are: ``collections.Counter`` and a
    # key function are interpreted code even in the compiled core, and Xì Tố ranks every
    # showdown hand here (15 % of its replay, py-spy --native).
    counts: dict[int, int] = {}
    for c in cards:
        counts[c.rank] = counts.get(c.rank, 0) + 1
    groups = sorted([(n, r) for r, n in counts.items()], reverse=True)  # ranks differ: no ties
    key = tuple([r for _, r in groups])
    shape = tuple([n for n, _ in groups])
    if len(cards) == 5:
        flush = len({c.suit for c in cards}) == 1
        top = straight_key([c.rank for c in cards], wheel)
        if top is not None:
            return (STRAIGHT_FLUSH if flush else STRAIGHT, (top,))
        if shape == (4, 1):
            return (FOUR_OF_A_KIND, key)
        if shape == (3, 2):
            return (FULL_HOUSE, key)
        if flush:
            return (FLUSH, key)
    if shape[0] == 3:
        return (THREE_OF_A_KIND, key)
    if shape[:2] == (2, 2):
        return (TWO_PAIR, key)
    if shape[0] == 2:
        return (PAIR, key)
    return (HIGH_CARD, key)
