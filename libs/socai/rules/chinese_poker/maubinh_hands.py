"""Mậu Binh hands, pure: chi values, arrangements, special hands, comparison, auto-arranging.

RULES.md §11 with MB-1 to MB-24. The game module ``socai.rules.chinese_poker.maubinh`` re-exports the
public names of DESIGN.md ("Public Python API"): ``hand_value``, ``special_hand`` and
``is_valid_arrangement``. Names follow the ``Arranged`` event: ``back`` is RULES.md's chi
đầu (5 cards, the strongest), ``middle`` the chi giữa (5 cards), ``front`` the chi cuối
(3 cards).

- **Chi values** (11.2, MB-4, MB-14, MB-19). One int ``code`` orders every chi, of 3 or 5
  cards: the category (``socai.rules.ranking``) in the high bits, then up to five ranks,
  most important first (main group, then kickers), four bits each, left-aligned and padded
  with 0. Suits never enter it, so equal ranks draw. A-2-3-4-5 (Sảnh Nhị) is the second
  highest straight (MB-4, ``wheel_second_highest``) or the lowest. A 3-card chi is only
  Sám Cô, Đôi or Mậu Thầu (MB-14). Because the 3-card code is padded with 0, comparing a
  5-card chi with a 3-card one is MB-14's comparison: type, main group, then the kickers
  both have, with equality counting as valid.
- **Arrangements** (11.1, MB-5): 5/5/3 with ``back >= middle >= front``; anything else is
  ngược chi (fouled).
- **Special hands** (11.3, MB-8 to MB-13, MB-22, MB-23): found from the 13 dealt cards
  whatever the arrangement; Ba Sảnh Đồng Chất, Ba Sảnh and Ba Đồng Chất by a search for a
  5/5/3 partition.
- **Comparison** (11.5, MB-1 to MB-3, MB-5 to MB-9, MB-16, MB-24): units per pair of seats
  and per seat, before the stake; the game module multiplies by S, takes the commission
  (MB-17) and builds the transfers.
- **Auto-arranging** (``suggest_arrangement``, MB-20): see its docstring for the criterion.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations, combinations_with_replacement
from typing import TYPE_CHECKING, Any, Final

from socai.cards import DIAMONDS, HEARTS, Card
from socai.errors import RuleViolation, broken, check
from socai.rules import ranking

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "BACK",
    "FRONT",
    "MIDDLE",
    "POSITIONS",
    "SPECIAL_HANDS",
    "SPECIAL_UNITS",
    "Arrangement",
    "HandOptions",
    "HandValue",
    "PairResult",
    "PlayedHand",
    "Suggestion",
    "TableResult",
    "baseline_arrangement",
    "chi_units",
    "compare_hands",
    "compared",
    "hand_value",
    "is_fouled",
    "is_valid_arrangement",
    "played_arrangement",
    "played_hand",
    "special_hand",
    "special_partition",
    "suggest",
    "suggest_arrangement",
    "table_result",
    "warm",
]

BACK: Final = "back"  # chi đầu, 5 cards, compared first
MIDDLE: Final = "middle"  # chi giữa, 5 cards
FRONT: Final = "front"  # chi cuối, 3 cards
POSITIONS: Final = (BACK, MIDDLE, FRONT)  # the order of comparison (11.5 step 2)
CHI_SIZES: Final = {BACK: 5, MIDDLE: 5, FRONT: 3}
CARDS_PER_HAND: Final = 13
PLAYERS_MIN: Final = 2  # MB-21
PLAYERS_MAX: Final = 4

# Special hands (11.3), highest first, with the units each wins from a lower hand. The ids
# are DESIGN.md's; ``one_colour`` is the special Đồng Chất, never the regular ``flush`` (MB-12).
SPECIAL_HANDS: Final = (
    "dragon_roll",
    "dragon",
    "twelve_royals",
    "three_straight_flushes",
    "three_quads",
    "all_big",
    "all_small",
    "one_colour",
    "four_triples",
    "five_pairs_triple",
    "six_pairs",
    "three_straights",
    "three_flushes",
)
SPECIAL_UNITS: Final = {
    "dragon_roll": 32,
    "dragon": 30,
    "twelve_royals": 24,
    "three_straight_flushes": 20,
    "three_quads": 20,
    "all_big": 10,
    "all_small": 10,
    "one_colour": 10,
    "four_triples": 6,
    "five_pairs_triple": 5,
    "six_pairs": 4,
    "three_straights": 4,
    "three_flushes": 3,
}

# Pair kinds of ``PairResult.kind``.
KIND_CHI: Final = "chi"  # two valid normal hands compared chi by chi
KIND_FOUL: Final = "foul"  # at least one normal hand is fouled (MB-5), no special hand
KIND_SPECIAL: Final = "special"  # at least one special hand (11.3, MB-8, MB-9)


@dataclass(frozen=True, slots=True, init=False)
class HandOptions:
    """The table's Mậu Binh flags that change hand values or units (RULES.md §13).

    ``wheel_second_highest`` (MB-4): A-2-3-4-5 ranks just below 10-J-Q-K-A; else lowest.
    ``home_run_multiplier`` (MB-6): what each victim of a Home Run pays, as a multiple of
    the pair's base total: 4 (xử bắn doubled again) by default, 2 for no extra doubling.
    ``home_run_extra_units`` (MB-6's "+2 units" reading): added to each victim's payment
    on top of the multiple; use ``home_run_multiplier=2, home_run_extra_units=2`` for it.
    Raises RuleViolation("BAD_OPTION") for a multiplier outside 2..16 or extra units
    outside 0..100 (the detail ``option`` names which).
    """

    wheel_second_highest: bool = True
    home_run_multiplier: int = 4
    home_run_extra_units: int = 0

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    # The numbers are ``object`` so that the compiled core refuses a bool or a float as the
    # interpreted one does (BAD_OPTION), rather than converting or raising TypeError at the call.
    def __init__(
        self, wheel_second_highest: bool = True, home_run_multiplier: object = 4, home_run_extra_units: object = 0
    ) -> None:
        if type(home_run_multiplier) is not int or not 2 <= home_run_multiplier <= 16:
            raise RuleViolation("BAD_OPTION", "home_run_multiplier is 2..16", option="home_run_multiplier")
        if type(home_run_extra_units) is not int or not 0 <= home_run_extra_units <= 100:
            raise RuleViolation("BAD_OPTION", "home_run_extra_units is 0..100", option="home_run_extra_units")
        object.__setattr__(self, "wheel_second_highest", wheel_second_highest)
        object.__setattr__(self, "home_run_multiplier", home_run_multiplier)
        object.__setattr__(self, "home_run_extra_units", home_run_extra_units)

    @property
    def wheel(self) -> str:
        return ranking.WHEEL_SECOND_HIGHEST if self.wheel_second_highest else ranking.WHEEL_LOWEST


DEFAULT_OPTIONS: Final = HandOptions()


# --- chi values ---------------------------------------------------------------------------

_CATEGORY_SHIFT: Final = 20  # category << 20 | five 4-bit ranks


def _code(category: int, ranks: Sequence[int]) -> int:
    code = category
    for i in range(5):
        code = (code << 4) | (ranks[i] if i < len(ranks) else 0)
    return code


def _code_of_cards(cards: Sequence[Card], wheel: str) -> int:
    """The order code of one chi (3 or 5 distinct cards), from the shared poker ranking.

    A chi's code depends only on its ranks, whether 5 cards share a suit, and the wheel
    rule, so each such key is ranked once and remembered (``_CODES``: at most 2 × 7,917
    keys, the chi values of both wheel rules). Every caller passes distinct cards.

    The key is one int: each rank's count in four bits from bit 8 (rank 2) up, the flush in
    bit 2, the wheel rule in bits 0–1 (a tuple key cost a sort and a tuple's hash per chi,
    and every seat's three chi are valued at each arrangement and comparison).
    """
    first_suit = cards[0].suit
    memo_key = _WHEEL_BITS.get(wheel, _WHEEL_UNKNOWN)
    flush = len(cards) == 5
    for c in cards:
        memo_key += 1 << (4 * c.rank)
        flush = flush and c.suit == first_suit
    if flush:
        memo_key |= _FLUSH_BIT
    code = _CODES.get(memo_key)
    if code is None:
        category, key = ranking.rank_cards(cards, wheel)  # raises for a wheel rule it does not know
        code = _CODES[memo_key] = _code(category, key)
    return code


_CODES: dict[int, int] = {}
_WHEEL_BITS: Final = {wheel: i for i, wheel in enumerate(ranking.WHEELS)}
_WHEEL_UNKNOWN: Final = len(ranking.WHEELS)
_FLUSH_BIT: Final = 1 << 2


def category_of_code(code: int) -> str:
    """The category id (``ranking.CATEGORY_NAMES``) of a chi code."""
    return ranking.CATEGORY_NAMES[code >> _CATEGORY_SHIFT]


@dataclass(frozen=True, order=True, slots=True)
class HandValue:
    """The value of one chi (3 or 5 cards), totally ordered by ``code``.

    Equal codes are equally strong chi: a draw (MB-16); suits never break ties (0.5, 11.1).
    A 3-card value compares with a 5-card value as MB-14 says (used for ``front <=
    middle``). ``category`` is a poker id: ``straight_flush`` … ``high_card``; a 3-card chi
    is only ``three_of_a_kind``, ``pair`` or ``high_card``.
    """

    code: int
    category: str = field(compare=False)
    cards: tuple[Card, ...] = field(compare=False)


def hand_value(cards: Sequence[Card], wheel_second_highest: bool = True) -> HandValue:
    """The Mậu Binh value of one chi of 3 or 5 cards (RULES.md 11.2, MB-4, MB-14).

    Raises RuleViolation("BAD_HAND") unless given 3 or 5 distinct cards.
    """
    hand = tuple(cards)
    if len(hand) not in (3, 5) or len(set(hand)) != len(hand) or not all(isinstance(c, Card) for c in hand):
        raise RuleViolation("BAD_HAND", "a chi is 3 or 5 distinct cards")
    wheel = ranking.WHEEL_SECOND_HIGHEST if wheel_second_highest else ranking.WHEEL_LOWEST
    code = _code_of_cards(hand, wheel)
    return HandValue(code, category_of_code(code), hand)


def chi_units(value: HandValue | int, position: str) -> int:
    """Units a chi wins from each opponent it beats (11.2, MB-1 to MB-3).

    Chi đầu (``back``): Sảnh Đồng Chất 5 (MB-3), Tứ Quý 4, else 1. Chi giữa (``middle``):
    Sảnh Đồng Chất 10, Tứ Quý 8, Cù Lũ 2 (MB-2), else 1. Chi cuối (``front``): Sám Cô 3
    (MB-1), else 1.
    """
    code = value.code if isinstance(value, HandValue) else value
    return _units(code >> _CATEGORY_SHIFT, position)


def _units(category: int, position: str) -> int:
    if position == BACK:
        return 5 if category == ranking.STRAIGHT_FLUSH else 4 if category == ranking.FOUR_OF_A_KIND else 1
    if position == MIDDLE:
        if category == ranking.STRAIGHT_FLUSH:
            return 10
        if category == ranking.FOUR_OF_A_KIND:
            return 8
        return 2 if category == ranking.FULL_HOUSE else 1
    if position != FRONT:  # formats the message only on failure
        broken(f"unknown chi position {position!r}")
    return 3 if category == ranking.THREE_OF_A_KIND else 1


# --- arrangements -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Arrangement:
    """Thirteen cards split into chi: ``front`` 3 (chi cuối), ``middle`` 5, ``back`` 5 (chi đầu)."""

    front: tuple[Card, ...]
    middle: tuple[Card, ...]
    back: tuple[Card, ...]

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, front: tuple[Card, ...], middle: tuple[Card, ...], back: tuple[Card, ...]) -> None:
        object.__setattr__(self, "front", front)
        object.__setattr__(self, "middle", middle)
        object.__setattr__(self, "back", back)

    @property
    def cards(self) -> tuple[Card, ...]:
        return (*self.back, *self.middle, *self.front)

    def __str__(self) -> str:
        return " | ".join(" ".join(str(c) for c in chi) for chi in (self.back, self.middle, self.front))


def _well_formed(front: Sequence[Card], middle: Sequence[Card], back: Sequence[Card]) -> bool:
    cards = (*front, *middle, *back)
    return (
        len(front) == 3
        and len(middle) == 5
        and len(back) == 5
        and all(isinstance(c, Card) for c in cards)
        and len(set(cards)) == CARDS_PER_HAND
    )


def is_valid_arrangement(
    front: Sequence[Card], middle: Sequence[Card], back: Sequence[Card], wheel_second_highest: bool = True
) -> bool:
    """True when the chi are 3/5/5 distinct cards with ``back >= middle >= front`` (11.1).

    False for a fouled hand (ngược chi, MB-5) and for chi of the wrong sizes or repeated
    cards. Equal chi are allowed; ``front`` compares with ``middle`` as MB-14 says.
    """
    if not _well_formed(front, middle, back):
        return False
    wheel = ranking.WHEEL_SECOND_HIGHEST if wheel_second_highest else ranking.WHEEL_LOWEST
    middle_code = _code_of_cards(middle, wheel)
    return _code_of_cards(back, wheel) >= middle_code >= _code_of_cards(front, wheel)


# --- special hands ----------------------------------------------------------------------

# Runs of ranks: a 5-card straight (A-2-3-4-5 to 10-A) and, for Ba Sảnh and Ba Sảnh Đồng
# Chất, a 3-card straight in chi cuối (A-2-3 to Q-K-A, MB-13). No run wraps past the ace.
_RUNS5: Final = ((14, 2, 3, 4, 5), *(tuple(range(low, low + 5)) for low in range(2, 11)))
_RUNS3: Final = ((14, 2, 3), *(tuple(range(low, low + 3)) for low in range(2, 13)))
_RUN3_SETS: Final = frozenset(frozenset(run) for run in _RUNS3)
_RUN5_MASKS: Final = tuple(sum(1 << r for r in run) for run in _RUNS5)  # bit r for rank r


def _check_thirteen(cards: Iterable[Card]) -> tuple[Card, ...]:
    hand = tuple(cards)
    if len(hand) != CARDS_PER_HAND or len(set(hand)) != CARDS_PER_HAND or not all(isinstance(c, Card) for c in hand):
        raise RuleViolation("BAD_HAND", "a Mậu Binh hand is 13 distinct cards")
    return hand


def special_hand(cards13: Iterable[Card]) -> str | None:
    """The highest special hand (11.3) the 13 dealt cards hold, or None (MB-10).

    Ids and order: ``SPECIAL_HANDS``. The arrangement plays no part: Ba Sảnh Đồng Chất,
    Ba Sảnh and Ba Đồng Chất count when some 5/5/3 partition has them (MB-10, MB-13,
    MB-23); a tứ quý counts as two pairs for Lục Phé Bôn and Năm Đôi Một Sám but not as a
    triple for Tứ Quý Sám (MB-22); Mười Hai Hoàng Gia is all 13 cards J, Q, K or A (MB-11).
    Raises RuleViolation("BAD_HAND") unless given 13 distinct cards.

    Every seat's hand is checked at every comparison, so the counts are plain lists: with
    ``collections.Counter`` (an interpreted class even in the compiled core) this was two
    thirds of a seat's ``played_hand``. ``tests/unit/rules/maubinh_reference.py`` keeps the
    Counter form as the definition, and ``test_maubinh_hands_properties`` pins this to it.
    """
    hand = _check_thirteen(cards13)
    by_rank = [0] * 15
    by_suit = [0, 0, 0, 0]
    for c in hand:
        by_rank[c.rank] += 1
        by_suit[c.suit] += 1
    held = [r for r in range(2, 15) if by_rank[r]]  # ranks held, low to high
    if len(held) == 13:
        return "dragon_roll" if 13 in by_suit else "dragon"
    lowest, highest = held[0], held[-1]
    if lowest >= 11:
        return "twelve_royals"
    # Three straight flushes are three single-suited chi, so the suits must split 5/5/3
    # (``_flush_split``); the cheap test spares nearly every hand the partition search.
    flush_split = False
    for n in by_suit:
        if n not in _FLUSH_SPLIT_COUNTS:
            break
    else:
        flush_split = _flush_split({s: n for s, n in enumerate(by_suit) if n}) is not None
    if flush_split and _straight_flush_partition(hand) is not None:
        return "three_straight_flushes"
    quads = triples = pairs = singles = 0
    for r in held:
        n = by_rank[r]
        if n == 1:
            singles += 1
        elif n == 2:
            pairs += 1
        elif n == 3:
            triples += 1
        else:
            quads += 1
    if quads == 3 and singles == 1:
        return "three_quads"
    if lowest >= 8:
        return "all_big"
    if highest <= 8:
        return "all_small"
    red = by_suit[DIAMONDS] + by_suit[HEARTS]
    if red == 0 or red == CARDS_PER_HAND:
        return "one_colour"
    if triples == 4 and singles == 1:
        return "four_triples"
    pairs += 2 * quads  # MB-22: a tứ quý is two pairs
    if pairs == 5 and triples == 1:
        return "five_pairs_triple"
    if pairs == 6 and singles == 1:
        return "six_pairs"
    if not quads and _holds_a_run5(held) and _straight_partition({r: by_rank[r] for r in held}) is not None:
        return "three_straights"
    if flush_split:
        return "three_flushes"
    return None


# A suit's count in a hand whose suits split into single-suited chi of 5, 5 and 3 (``_flush_split``).
_FLUSH_SPLIT_COUNTS: Final = frozenset((0, 3, 5, 8, 10, 13))


def _holds_a_run5(ranks: Iterable[int]) -> bool:
    """Some 5-card run of ranks (``_RUNS5``) is among ``ranks``: Ba Sảnh needs two."""
    held = 0
    for rank in ranks:
        held |= 1 << rank
    return any(held & mask == mask for mask in _RUN5_MASKS)


def _straight_partition(counts: Mapping[int, int]) -> tuple[tuple[int, ...], ...] | None:
    """Ba Sảnh (MB-13, MB-23): two 5-card runs and one 3-card run of ranks using every card.

    Returns the runs (5, 5, 3), the first found in ``_RUNS5`` order, or None.
    """
    # Most hands hold no 5-card run, or a rank four times (three runs hold a rank at most
    # three times): no partition, found without the search.
    if max(counts.values()) > 3 or not _holds_a_run5(counts):
        return None
    left = dict(counts)
    for i, first in enumerate(_RUNS5):
        if not all(left.get(r, 0) for r in first):
            continue
        for r in first:
            left[r] -= 1
        for second in _RUNS5[i:]:
            if all(left.get(r, 0) for r in second):
                rest = [r for r, n in left.items() for _ in range(n - second.count(r))]
                if len(rest) == 3 and frozenset(rest) in _RUN3_SETS:
                    return first, second, tuple(sorted(rest))
        for r in first:
            left[r] += 1
    return None


def _straight_flush_partition(hand: Sequence[Card]) -> tuple[tuple[Card, ...], ...] | None:
    """Ba Sảnh Đồng Chất: two 5-card straight flushes and a 3-card one using every card."""
    held = set(hand)
    by_suit = Counter(c.suit for c in hand)
    candidates = [
        tuple(Card(r, suit) for r in run)
        for suit, n in sorted(by_suit.items())
        if n >= 5
        for run in _RUNS5
        if all(Card(r, suit) in held for r in run)
    ]
    for i, first in enumerate(candidates):
        for second in candidates[i + 1 :]:
            if set(first) & set(second):
                continue
            rest = held - set(first) - set(second)
            if len({c.suit for c in rest}) == 1 and frozenset(c.rank for c in rest) in _RUN3_SETS:
                return first, second, tuple(sorted(rest, key=_card_order))
    return None


def _flush_split(suits: Mapping[int, int]) -> tuple[int, ...] | None:
    """Ba Đồng Chất (MB-13): the suits' counts split into single-suited chi of 5, 5 and 3.

    Returns the suit of each chi in the order 5, 5, 3, or None. The counts that split are
    {5, 5, 3}, {10, 3}, {8, 5} and {13} (13 of a suit is already Rồng Cuốn).
    """
    by_count = sorted(suits.items(), key=lambda sn: (-sn[1], sn[0]))
    shape = [n for _, n in by_count]
    if shape == [5, 5, 3]:
        return by_count[0][0], by_count[1][0], by_count[2][0]
    if shape == [10, 3]:
        return by_count[0][0], by_count[0][0], by_count[1][0]
    if shape == [8, 5]:
        return by_count[0][0], by_count[1][0], by_count[0][0]
    if shape == [13]:
        return by_count[0][0], by_count[0][0], by_count[0][0]
    return None


def _card_order(card: Card) -> tuple[int, int]:
    """Display and canonical order: rank high to low, then suit ♠ ♣ ♦ ♥."""
    return (-card.rank, card.suit)


def special_partition(cards13: Iterable[Card], wheel_second_highest: bool = True) -> Arrangement | None:
    """A valid arrangement that shows the hand's Ba Sảnh Đồng Chất, Ba Sảnh or Ba Đồng Chất.

    For display only: these special hands are found whatever the player's arrangement
    (MB-10). Returns None when the hand's special hand (if any) is another one.
    """
    hand = _check_thirteen(cards13)
    special = special_hand(hand)
    chi: tuple[tuple[Card, ...], ...] | None = None
    if special == "three_straight_flushes":
        chi = _straight_flush_partition(hand)
    elif special == "three_straights":
        runs = _straight_partition(Counter(c.rank for c in hand))
        check(runs is not None, "Ba Sảnh without a partition")
        pool = sorted(hand, key=_card_order)
        picked: list[tuple[Card, ...]] = []
        for run in runs or ():
            part = []
            for rank in run:
                card = next(c for c in pool if c.rank == rank)
                pool.remove(card)
                part.append(card)
            picked.append(tuple(part))
        chi = tuple(picked)
    elif special == "three_flushes":
        split = _flush_split(Counter(c.suit for c in hand))
        check(split is not None, "Ba Đồng Chất without a split")
        left = sorted(hand, key=_card_order)
        parts: list[tuple[Card, ...]] = []
        for suit, size in zip(split or (), (5, 5, 3), strict=True):
            suited = tuple([c for c in left if c.suit == suit][:size])
            left = [c for c in left if c not in suited]
            parts.append(suited)
        chi = tuple(parts)
    if chi is None:
        return None
    first, second, front = (tuple(sorted(part, key=_card_order)) for part in chi)
    wheel = ranking.WHEEL_SECOND_HIGHEST if wheel_second_highest else ranking.WHEEL_LOWEST
    if _code_of_cards(first, wheel) < _code_of_cards(second, wheel):
        first, second = second, first
    arrangement = Arrangement(front=front, middle=second, back=first)
    check(is_valid_arrangement(front, second, first, wheel_second_highest), "a special partition is fouled")
    return arrangement


# --- one seat's hand at the comparison ------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class PlayedHand:
    """A seat's arranged 13 cards as the comparison sees them.

    ``special`` is the special hand of the 13 cards (MB-10), whatever the arrangement;
    ``fouled`` is ngược chi (MB-5). ``codes`` are the chi codes in comparison order
    (back, middle, front).
    """

    arrangement: Arrangement
    special: str | None
    fouled: bool
    codes: tuple[int, int, int]

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(
        self, arrangement: Arrangement, special: str | None, fouled: bool, codes: tuple[int, int, int]
    ) -> None:
        object.__setattr__(self, "arrangement", arrangement)
        object.__setattr__(self, "special", special)
        object.__setattr__(self, "fouled", fouled)
        object.__setattr__(self, "codes", codes)

    @property
    def is_normal(self) -> bool:
        return self.special is None

    def value(self, position: str) -> HandValue:
        chi = getattr(self.arrangement, position)
        code = self.codes[POSITIONS.index(position)]
        return HandValue(code, category_of_code(code), chi)


def played_hand(
    front: Sequence[Card], middle: Sequence[Card], back: Sequence[Card], options: HandOptions = DEFAULT_OPTIONS
) -> PlayedHand:
    """A seat's hand for the comparison: its special hand, whether it is fouled, chi values.

    Raises RuleViolation("BAD_ARRANGEMENT") unless the chi are 3/5/5 distinct cards.
    """
    if not _well_formed(front, middle, back):
        raise RuleViolation("BAD_ARRANGEMENT", "an arrangement is 3 + 5 + 5 distinct cards")
    return played_arrangement(Arrangement(tuple(front), tuple(middle), tuple(back)), options)


def played_arrangement(arrangement: Arrangement, options: HandOptions = DEFAULT_OPTIONS) -> PlayedHand:
    """``played_hand`` of an arrangement already known to be 3 + 5 + 5 distinct cards (the
    game's state holds only such: ``apply`` checks each, the arranger makes them)."""
    wheel = options.wheel
    codes = (
        _code_of_cards(arrangement.back, wheel),
        _code_of_cards(arrangement.middle, wheel),
        _code_of_cards(arrangement.front, wheel),
    )
    fouled = not codes[0] >= codes[1] >= codes[2]
    return PlayedHand(arrangement, special_hand(arrangement.cards), fouled, codes)


def is_fouled(arrangement: Arrangement, wheel_second_highest: bool = True) -> bool:
    """``not is_valid_arrangement`` of an arrangement already known to be 3 + 5 + 5 distinct cards."""
    wheel = ranking.WHEEL_SECOND_HIGHEST if wheel_second_highest else ranking.WHEEL_LOWEST
    middle_code = _code_of_cards(arrangement.middle, wheel)
    return not _code_of_cards(arrangement.back, wheel) >= middle_code >= _code_of_cards(arrangement.front, wheel)


# --- comparison --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class PairResult:
    """What seat ``seat_b`` pays seat ``seat_a`` (negative: what a pays b), in units of S.

    ``kind``: ``special`` (a special hand decides, 11.3), ``foul`` (a fouled hand, MB-5),
    ``chi`` (chi by chi). ``chi_units`` are the back, middle and front results (MB-1 to
    MB-3, a draw is 0, MB-16); ``shoot_units`` the xử bắn doubling (the base total once
    more); ``home_run_units`` what a Home Run adds on top (MB-6, MB-7, MB-24);
    ``special_units`` the special hands' result (11.3, MB-8, MB-9).
    """

    seat_a: int
    seat_b: int
    kind: str
    chi_units: tuple[int, int, int] = (0, 0, 0)
    shoot_units: int = 0
    home_run_units: int = 0
    special_units: int = 0

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(
        self,
        seat_a: int,
        seat_b: int,
        kind: str,
        chi_units: tuple[int, int, int] = (0, 0, 0),
        shoot_units: int = 0,
        home_run_units: int = 0,
        special_units: int = 0,
    ) -> None:
        object.__setattr__(self, "seat_a", seat_a)
        object.__setattr__(self, "seat_b", seat_b)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "chi_units", chi_units)
        object.__setattr__(self, "shoot_units", shoot_units)
        object.__setattr__(self, "home_run_units", home_run_units)
        object.__setattr__(self, "special_units", special_units)

    @property
    def base_units(self) -> int:
        return sum(self.chi_units)

    @property
    def total(self) -> int:
        """Units seat a wins from seat b (negative when a loses)."""
        return self.base_units + self.shoot_units + self.home_run_units + self.special_units

    @property
    def shooter(self) -> int | None:
        """The seat that shot the other (won all three chi), or None."""
        if self.shoot_units == 0:
            return None
        return self.seat_a if self.shoot_units > 0 else self.seat_b


def compare_hands(a: PlayedHand, b: PlayedHand, seat_a: int = 0, seat_b: int = 1) -> PairResult:
    """Seat a against seat b, before any Home Run (``table_result`` adds it).

    - Special hands first (11.5 step 1): a special hand wins its multiple from a normal
      hand, valid or fouled (MB-9); of two special hands the higher wins its own multiple,
      two of one type draw (MB-8). No xử bắn with a special hand.
    - A fouled hand loses all three chi to a valid hand, paying the valid hand's chi units,
      and is shot (MB-5); two fouled hands draw.
    - Otherwise chi by chi (back, middle, front): the winner gets its chi's units, equal
      chi draw (MB-16); winning all three doubles the pair's total (xử bắn).
    """
    if a.special is not None or b.special is not None:
        return PairResult(seat_a, seat_b, KIND_SPECIAL, special_units=_special_units(a.special, b.special))
    if a.fouled and b.fouled:
        return PairResult(seat_a, seat_b, KIND_FOUL)
    if a.fouled or b.fouled:
        winner = b if a.fouled else a
        sign = -1 if a.fouled else 1
        units = tuple(
            sign * _units(code >> _CATEGORY_SHIFT, pos) for code, pos in zip(winner.codes, POSITIONS, strict=True)
        )
        chi = (units[0], units[1], units[2])
        return PairResult(seat_a, seat_b, KIND_FOUL, chi, shoot_units=sum(chi))
    results = []
    for code_a, code_b, pos in zip(a.codes, b.codes, POSITIONS, strict=True):
        if code_a > code_b:
            results.append(_units(code_a >> _CATEGORY_SHIFT, pos))
        elif code_a < code_b:
            results.append(-_units(code_b >> _CATEGORY_SHIFT, pos))
        else:
            results.append(0)
    chi = (results[0], results[1], results[2])
    swept = all(r > 0 for r in chi) or all(r < 0 for r in chi)
    return PairResult(seat_a, seat_b, KIND_CHI, chi, shoot_units=sum(chi) if swept else 0)


def _special_units(a: str | None, b: str | None) -> int:
    """Units a wins from b when at least one holds a special hand (11.3, MB-8, MB-9)."""
    # A normal hand (None) ranks below every special hand.
    rank_a = SPECIAL_HANDS.index(a) if a is not None else len(SPECIAL_HANDS)
    rank_b = SPECIAL_HANDS.index(b) if b is not None else len(SPECIAL_HANDS)
    if a is not None and rank_a < rank_b:
        return SPECIAL_UNITS[a]
    if b is not None and rank_b < rank_a:
        return -SPECIAL_UNITS[b]
    return 0


@dataclass(frozen=True, slots=True)
class TableResult:
    """Every pair's result (seat i < seat j, i's view) and each seat's net units (sum 0)."""

    pairs: tuple[PairResult, ...]
    units: tuple[int, ...]
    home_run_seat: int | None


def table_result(hands: Sequence[PlayedHand], options: HandOptions = DEFAULT_OPTIONS) -> TableResult:
    """The comparison of 2–4 seats' hands (11.5), in units of the stake S (MB-18).

    Each pair is ``compare_hands``. A Home Run (MB-6, MB-7, MB-24): at a table of exactly
    four, a seat that shoots each of the three others, all holding normal hands (valid or
    fouled), is paid ``options.home_run_multiplier`` × each pair's base total (xử bắn
    included) plus ``options.home_run_extra_units``. Each seat's units are the sum of its
    pairs (net settlement, 11.5 step 4).
    Raises RuleViolation("BAD_SEAT_COUNT") outside 2–4 seats (MB-21) and
    RuleViolation("BAD_HAND") when a card is held by two seats.
    """
    n = len(hands)
    if not PLAYERS_MIN <= n <= PLAYERS_MAX:
        raise RuleViolation("BAD_SEAT_COUNT", f"Mậu Binh is played by 2 to 4, not {n}")
    cards = [c for h in hands for c in h.arrangement.cards]
    if len(set(cards)) != len(cards):
        raise RuleViolation("BAD_HAND", "a card is held by two seats")
    return compared(hands, options)


def compared(hands: Sequence[PlayedHand], options: HandOptions = DEFAULT_OPTIONS) -> TableResult:
    """``table_result`` of 2–4 hands already known to hold distinct cards (the game's state
    holds only such: its deal is checked card by card, each arrangement against the deal)."""
    n = len(hands)
    pairs = {(i, j): compare_hands(hands[i], hands[j], i, j) for i in range(n) for j in range(i + 1, n)}
    home_run_seat = None
    if n == 4:
        for seat in range(n):
            shot_all = all(
                hands[other].is_normal and pairs[min(seat, other), max(seat, other)].shooter == seat
                for other in range(n)
                if other != seat
            )
            if shot_all:
                home_run_seat = seat
    if home_run_seat is not None:
        extra_multiple = options.home_run_multiplier - 2
        for key, pair in pairs.items():
            if home_run_seat in key:
                sign = 1 if pair.seat_a == home_run_seat else -1
                extra = pair.base_units * extra_multiple + sign * options.home_run_extra_units
                pairs[key] = PairResult(
                    pair.seat_a, pair.seat_b, pair.kind, pair.chi_units, pair.shoot_units, extra, pair.special_units
                )
    units = [0] * n
    for (i, j), pair in pairs.items():
        units[i] += pair.total
        units[j] -= pair.total
    check(sum(units) == 0, "units of a table do not sum to zero")
    return TableResult(tuple(pairs.values()), tuple(units), home_run_seat)


# --- auto-arranging ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Suggestion:
    """The auto-arranger's answer: a valid arrangement, and the special hand if any.

    ``special`` is the hand's special hand (MB-10): it wins whatever the arrangement, which
    then only shows it (for Ba Sảnh Đồng Chất, Ba Sảnh and Ba Đồng Chất, the partition).
    ``score_micro_units`` is the criterion of ``suggest_arrangement`` for the best normal
    arrangement, in millionths of a unit.
    """

    front: tuple[Card, ...]
    middle: tuple[Card, ...]
    back: tuple[Card, ...]
    special: str | None
    score_micro_units: int

    @property
    def arrangement(self) -> Arrangement:
        return Arrangement(self.front, self.middle, self.back)


_PARTITION_SPECIALS: Final = frozenset({"three_straight_flushes", "three_straights", "three_flushes"})
_SCALE: Final = 1000  # probabilities are integers in thousandths, so scores are exact ints
_CLASS_BITS: Final = 13  # class indices are < 8192 (7462 five-card and 455 three-card values)


def suggest_arrangement(cards13: Iterable[Card], options: HandOptions = DEFAULT_OPTIONS) -> Suggestion:
    """Arrange 13 cards for a player (the hint button, timeouts and disconnects, MB-20; bots).

    Never fouled. Declares the special hand when there is one (``Suggestion.special``;
    for the three partition specials the arrangement shows the partition). Otherwise it
    returns, among **all** valid arrangements (up to 72,072), the one with the highest
    *estimated expected units against one opponent*:

        sum over chi of  P(win) × units won − E[units lost]
        + P(win all three) × units of the three chi − E[units lost on all three]

    For each position, P(win), P(lose) and the opponent's units come from the empirical
    distribution of that chi among opponents arranged by this same arranger
    (``_SAMPLE_TEXT``: 256 quantiles per position over the hands of 15,000 random deals);
    the three chi are taken as independent; the last two terms are xử bắn's doubling.
    Fouls, special hands and Home Runs of opponents are left out; with
    ``wheel_second_highest`` off the same samples serve (only straights' estimates move).
    Scores are exact integers, so the choice is deterministic: ties go to the stronger
    front, then middle, then back, then the first arrangement in canonical card order. The
    result depends only on the set of cards, not their order.
    Raises RuleViolation("BAD_HAND") unless given 13 distinct cards.
    """
    hand = tuple(sorted(_check_thirteen(cards13), key=_card_order))
    special = special_hand(hand)
    best, score = _best_arrangement(hand, options.wheel_second_highest, _tables(options.wheel_second_highest))
    if special in _PARTITION_SPECIALS:
        shown = special_partition(hand, options.wheel_second_highest)
        check(shown is not None, "a partition special hand without its partition")
        best = shown or best
    check(is_valid_arrangement(best.front, best.middle, best.back, options.wheel_second_highest), "suggested a foul")
    return Suggestion(best.front, best.middle, best.back, special, score)


suggest = suggest_arrangement  # the short name; issue 13 calls it suggest_arrangement


def baseline_arrangement(cards13: Iterable[Card], wheel_second_highest: bool = True) -> Arrangement:
    """The simplest valid arrangement: the best five cards in back, the best five of the
    rest in the middle, the last three in front (ties: first in canonical order).

    Always valid: the middle is a subset of what the back was chosen from, and the best
    five of eight cards beat the three left over. A yardstick for ``suggest_arrangement``.
    """
    import numpy as np

    hand = tuple(sorted(_check_thirteen(cards13), key=_card_order))
    static = _static()
    classes5, _ = _hand_classes(hand, wheel_second_highest)
    back = int(np.argmax(classes5))
    disjoint = np.flatnonzero((static.masks5 & int(static.masks5[back])) == 0)
    middle = int(disjoint[int(np.argmax(classes5[disjoint]))])
    used = int(static.masks5[back]) | int(static.masks5[middle])
    chi = [tuple(sorted((hand[p] for p in static.subsets5[i].tolist()), key=_card_order)) for i in (back, middle)]
    front = tuple(hand[p] for p in range(CARDS_PER_HAND) if not used >> p & 1)
    return Arrangement(front, chi[1], chi[0])


def warm() -> None:
    """Build the arranger's tables now (well under a second for both wheel rules) and its
    split indices (``_static``, about 0.3 s) rather than on the first hand that needs them;
    imports numpy."""
    _tables(True)
    _tables(False)
    _static()


# How a seat's 13 cards (positions 0..12 in canonical order) can be split: every 5-card
# and 3-card subset, and every split into a front and two 5-card chi (36,036 of them: the
# stronger of the two is the back, so each split stands for the one arrangement that can
# be valid, or both when the two chi are equal).
class _Static:
    __slots__ = (
        "index5",
        "masks5",
        "member3",
        "member5",
        "split_first",
        "split_first_by_front",
        "split_front",
        "split_second",
        "split_second_by_front",
        "subsets3",
        "subsets5",
    )

    def __init__(self) -> None:
        import numpy as np

        fives = list(combinations(range(CARDS_PER_HAND), 5))
        threes = list(combinations(range(CARDS_PER_HAND), 3))
        index5: dict[tuple[int, ...], int] = {s: i for i, s in enumerate(fives)}
        firsts, seconds, fronts = [], [], []
        for f, front in enumerate(threes):
            rest = [p for p in range(CARDS_PER_HAND) if p not in front]
            for first in combinations(rest[1:], 4):
                # The chi holding the lowest remaining position is ``first``: each
                # unordered split once.
                chi = (rest[0], *first)
                firsts.append(index5[chi])
                seconds.append(index5[tuple(p for p in rest if p not in chi)])
                fronts.append(f)
        self.subsets5 = np.array(fives, dtype=np.intp)
        self.masks5 = np.array([sum(1 << p for p in s) for s in fives], dtype=np.int64)
        self.subsets3 = np.array(threes, dtype=np.intp)
        self.index5 = index5
        # Membership of each position in each subset, as float64 0/1 rows: the rank keys
        # of all 1,287 (286) subsets of a hand are one matrix-vector product, exact
        # because every key sum is an integer below 2**53.
        self.member5 = np.zeros((len(fives), CARDS_PER_HAND), dtype=np.float64)
        self.member5[np.arange(len(fives))[:, None], self.subsets5] = 1.0
        self.member3 = np.zeros((len(threes), CARDS_PER_HAND), dtype=np.float64)
        self.member3[np.arange(len(threes))[:, None], self.subsets3] = 1.0
        self.split_first = np.array(firsts, dtype=np.intp)
        self.split_second = np.array(seconds, dtype=np.intp)
        self.split_front = np.array(fronts, dtype=np.intp)
        # The splits come front by front, the 126 splits of the other ten cards each.
        check(fronts == [f for f in range(len(threes)) for _ in range(126)], "splits not grouped by front")
        self.split_first_by_front = self.split_first.reshape(len(threes), 126)
        self.split_second_by_front = self.split_second.reshape(len(threes), 126)


_STATIC: _Static | None = None


def _static() -> _Static:
    global _STATIC
    if _STATIC is None:
        _STATIC = _Static()
    return _STATIC


def _rank_key(rank: int) -> int:
    """A rank's share of a multiset key: 4 bits of count per rank, so sums are unique."""
    return 1 << (4 * (rank - 2))


def _rank_multisets(size: int) -> list[tuple[int, ...]]:
    """Every multiset of ``size`` ranks with at most four of a rank, as sorted tuples."""
    return [ranks for ranks in combinations_with_replacement(range(2, 15), size) if max(Counter(ranks).values()) <= 4]


def _cards_of(ranks: Sequence[int], flush: bool) -> list[Card]:
    """Cards with these ranks: all ♠ for a flush, else suits that make no flush."""
    if flush:
        return [Card(r, 0) for r in ranks]
    seen: Counter[int] = Counter()
    cards = []
    for r in ranks:
        cards.append(Card(r, seen[r]))
        seen[r] += 1
    if len(cards) == 5 and len({c.suit for c in cards}) == 1:
        cards[-1] = Card(cards[-1].rank, 1)
    return cards


class _Tables:
    """Per wheel rule: every chi value as a dense class index (in code order), the look-ups
    from cards to class, and each position's scoring terms per class."""

    def __init__(self, wheel: str, samples: Sequence[Sequence[int]]) -> None:
        import numpy as np

        nonflush5 = {ranks: _code_of_cards(_cards_of(ranks, False), wheel) for ranks in _rank_multisets(5)}
        flush5 = {ranks: _code_of_cards(_cards_of(ranks, True), wheel) for ranks in combinations(range(2, 15), 5)}
        three = {ranks: _code_of_cards(_cards_of(ranks, False), wheel) for ranks in _rank_multisets(3)}
        self.codes: list[int] = sorted({*nonflush5.values(), *flush5.values(), *three.values()})
        check(len(self.codes) < 1 << _CLASS_BITS, "too many chi classes")
        index = {code: i for i, code in enumerate(self.codes)}
        # Rank-multiset key (sum of ``_rank_key``) → class, as sorted arrays for searchsorted.
        by_key5 = sorted((sum(map(_rank_key, r)), index[c]) for r, c in nonflush5.items())
        by_key3 = sorted((sum(map(_rank_key, r)), index[c]) for r, c in three.items())
        # The keys are float64 because a hand's sums are one float matrix product
        # (``_Static.member5``); every key is below 2**53, so both are exact.
        self.nonflush5_keys = np.array([k for k, _ in by_key5], dtype=np.float64)
        self.three_keys = np.array([k for k, _ in by_key3], dtype=np.float64)
        check(max(k for k, _ in by_key5) < 1 << 53, "rank keys are not exact as floats")
        # Class indices are int16 (< 8192): the 36,036-split pass moves a quarter of the
        # bytes of int64, and that pass is most of a suggestion.
        self.nonflush5_class = np.array([c for _, c in by_key5], dtype=np.int16)
        self.three_class = np.array([c for _, c in by_key3], dtype=np.int16)
        check(len(set(self.nonflush5_keys.tolist())) == len(by_key5), "rank keys collide")
        flush_by_mask = [0] * (1 << 13)
        for ranks, code in flush5.items():
            flush_by_mask[sum(1 << (r - 2) for r in ranks)] = index[code]
        self.flush5 = np.array(flush_by_mask, dtype=np.int16)
        # Scoring terms per position and class, in thousandths: P(win), P(lose), P(win) ×
        # units won, E[units lost] (the opponent's units summed over the stronger samples).
        n = len(self.codes)
        win = np.zeros((3, n), dtype=np.int64)
        lose = np.zeros((3, n), dtype=np.int64)
        gain = np.zeros((3, n), dtype=np.int64)
        loss = np.zeros((3, n), dtype=np.int64)
        for p, position in enumerate(POSITIONS):
            sample = sorted(samples[p])
            size = len(sample)
            check(size > 0, "an empty sample")
            units_above = [0] * (size + 1)
            for k in range(size - 1, -1, -1):
                units_above[k] = units_above[k + 1] + _units(sample[k] >> _CATEGORY_SHIFT, position)
            for i, code in enumerate(self.codes):
                below = bisect_left(sample, code)
                above = bisect_right(sample, code)
                win[p, i] = below * _SCALE // size
                lose[p, i] = (size - above) * _SCALE // size
                gain[p, i] = below * _SCALE * _units(code >> _CATEGORY_SHIFT, position) // size
                loss[p, i] = units_above[above] * _SCALE // size
        # Per position: (P(win), P(lose), P(win) × units won, E[units lost]) per class, as
        # rows (``terms``) and as one contiguous array per term (``columns``: a 1-D take is
        # the cheapest gather numpy has).
        self.terms: tuple[npt.NDArray[Any], ...] = tuple(
            np.stack([win[p], lose[p], gain[p], loss[p]], axis=1) for p in range(3)
        )
        self.columns = tuple(tuple(np.ascontiguousarray(t[p]) for t in (win, lose, gain, loss)) for p in range(3))
        # The four terms as the rows of one (4, classes) array per position: one gather
        # fetches all four for a set of splits.
        self.rows = tuple(np.stack([win[p], lose[p], gain[p], loss[p]]) for p in range(3))
        # Per position and class, a term of an upper bound on the criterion, in billionths:
        # the chi's own expected units (P(win) × units − E[units lost]) plus P(win) ×
        # units once more. Every sweep term of the criterion is a product of one chi's
        # P(win) × units with two probabilities (at most 1), or is subtracted, so the sum
        # of the three chi's bounds is never below the criterion of the arrangement.
        self.bound = tuple((2 * gain[p] - loss[p]) * (_SCALE * _SCALE) for p in range(3))
        # The same bound, coarser and int16 for the 36,036-split pass: in steps of
        # ``_BOUND_STEP`` thousandths, rounded up, so ``bound_steps`` × _BOUND_STEP × _SCALE²
        # is never below ``bound``. A fouled split has ``_FOUL_PENALTY`` taken off; the
        # checks say that its bound then lies below every valid split's and below the
        # threshold of every possible floor, and that no sum leaves int16.
        self.bound_steps = tuple((-((loss[p] - 2 * gain[p]) // _BOUND_STEP)).astype(np.int16) for p in range(3))
        highest = sum(int(b.max()) for b in self.bound_steps)
        lowest = sum(int(b.min()) for b in self.bound_steps)
        # A criterion is at least −2 × _SCALE² × (the three largest E[units lost]), so a
        # floor's threshold (floor / (_BOUND_STEP × _SCALE²), rounded up) is at least this.
        lowest_threshold = -(2 * sum(int(loss[p].max()) for p in range(3))) // _BOUND_STEP
        check(
            lowest - _FOUL_PENALTY >= -(1 << 15) and highest - _FOUL_PENALTY < min(lowest, lowest_threshold),
            "the coarse bound does not fit int16",
        )
        check(highest < 1 << 15, "the coarse bound does not fit int16")
        # The terms as Python ints, per position and class, to score one split exactly.
        self.term_rows: tuple[list[tuple[int, int, int, int]], ...] = tuple(
            [(int(a), int(b), int(c), int(d)) for a, b, c, d in self.terms[p].tolist()] for p in range(3)
        )


_TABLES: dict[bool, _Tables] = {}


def _tables(wheel_second_highest: bool) -> _Tables:
    tables = _TABLES.get(wheel_second_highest)
    if tables is None:
        wheel = ranking.WHEEL_SECOND_HIGHEST if wheel_second_highest else ranking.WHEEL_LOWEST
        tables = _TABLES[wheel_second_highest] = _Tables(wheel, _samples())
    return tables


@lru_cache(maxsize=64)
def _hand_classes(hand: tuple[Card, ...], wheel_second_highest: bool) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """``_classes`` of a hand in canonical order, read-only, remembered for the few hands
    in play: a bot's candidates ask for the suggestion and the baseline of the same cards.
    The classes depend on the wheel rule only (``_Tables.codes``), not on the samples."""
    classes5, classes3 = _classes(hand, _tables(wheel_second_highest))
    classes5.flags.writeable = False
    classes3.flags.writeable = False
    return classes5, classes3


def _classes(hand: Sequence[Card], tables: _Tables) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The class index (int16) of every 5-card and every 3-card subset of the hand."""
    import numpy as np

    static = _static()
    keys = np.array([_rank_key(c.rank) for c in hand], dtype=np.float64)
    classes5 = tables.nonflush5_class.take(np.searchsorted(tables.nonflush5_keys, static.member5 @ keys))
    classes3 = tables.three_class.take(np.searchsorted(tables.three_keys, static.member3 @ keys))
    # The flushes: the 5-subsets of each suit's positions that hold five or more cards.
    by_suit: dict[int, list[int]] = {}
    for p, card in enumerate(hand):
        by_suit.setdefault(card.suit, []).append(p)
    for positions in by_suit.values():
        if len(positions) >= 5:
            for subset in combinations(positions, 5):
                mask = 0
                for p in subset:
                    mask |= 1 << (hand[p].rank - 2)
                classes5[static.index5[subset]] = tables.flush5[mask]
    return classes5, classes3


def _valid_splits(hand: Sequence[Card], tables: _Tables) -> tuple[npt.NDArray[Any], ...]:
    """Every valid arrangement of the hand (in canonical order): the classes of its 5-card
    subsets, then for each valid split its index in ``_Static`` and its back, middle and
    front classes."""
    import numpy as np

    static = _static()
    classes5, classes3 = _classes(hand, tables)
    first = classes5.take(static.split_first)
    second = classes5.take(static.split_second)
    front = classes3.take(static.split_front)
    valid = np.flatnonzero(np.minimum(first, second) >= front)
    check(valid.size > 0, "no valid arrangement")
    first, second, front = first.take(valid), second.take(valid), front.take(valid)
    return classes5, valid, np.maximum(first, second), np.minimum(first, second), front


def _scores(
    tables: _Tables, back: npt.NDArray[Any], middle: npt.NDArray[Any], front: npt.NDArray[Any]
) -> npt.NDArray[Any]:
    """The criterion of ``suggest_arrangement`` for arrangements given by their back, middle
    and front classes, exact int64 in billionths of a unit (every term stays below 10**12).
    """
    wb, qb, gb, lb = tables.rows[0].take(back, axis=1)
    wm, qm, gm, lm = tables.rows[1].take(middle, axis=1)
    wf, qf, gf, lf = tables.rows[2].take(front, axis=1)
    scores: npt.NDArray[Any] = (gb - lb + gm - lm + gf - lf) * (_SCALE * _SCALE)
    scores += gb * (wm * wf) + gm * (wb * wf) + gf * (wb * wm)
    scores -= lb * (qm * qf) + lm * (qb * qf) + lf * (qb * qm)
    return scores


_BOUND_STEP: Final = 4  # thousandths per step of ``_Tables.bound_steps`` (int16)
_FOUL_PENALTY: Final = 20_000  # steps taken off a fouled split's coarse bound


def _best_arrangement(hand: Sequence[Card], wheel_second_highest: bool, tables: _Tables) -> tuple[Arrangement, int]:
    """The best valid arrangement of the hand (in canonical order) and its score in
    millionths of a unit (the criterion of ``suggest_arrangement``).

    Exhaustive, in two passes. The first visits all 36,036 splits with the cheap separable
    bound of ``_Tables.bound`` (fouled splits sink below every valid split) and scores the split with
    the highest bound exactly: that score ``floor`` is reached by a valid arrangement, so
    the best is at least ``floor``. The second scores exactly every split whose bound is
    at least ``floor``; no other split can reach the best, or tie with it, because its
    criterion is at most its bound. The candidates keep the splits' order, so ties are
    broken as over all valid splits.

    The first pass works in int16: the classes, and the bound in steps of ``_BOUND_STEP``
    thousandths rounded up (``bound_steps``), which is most of its speed. The coarse bound
    is still never below a split's criterion, so the candidates (coarse bound at least
    ``floor`` / (_BOUND_STEP × _SCALE²), rounded up) hold every split that can reach the
    best; a few more are scored than with the exact bound, and the choice is the same.
    """
    import numpy as np

    static = _static()
    classes5, classes3 = _hand_classes(tuple(hand), wheel_second_highest)
    # Splits are grouped by front, 126 to a front (``_Static``), so the front's class and
    # bound broadcast down the rows instead of being gathered 36,036 times.
    first = classes5.take(static.split_first_by_front)
    second = classes5.take(static.split_second_by_front)
    back, middle = np.maximum(first, second), np.minimum(first, second)
    bound = tables.bound_steps[0].take(back)
    bound += tables.bound_steps[1].take(middle)
    bound += tables.bound_steps[2].take(classes3)[:, None]
    # Fouled splits (middle below front) sink below every valid one (``_Tables``' checks).
    bound -= (middle < classes3[:, None]) * np.int16(_FOUL_PENALTY)
    seed = int(np.argmax(bound))
    back, middle = back.ravel(), middle.ravel()
    front_of = static.split_front
    check(int(middle[seed]) >= int(classes3[front_of[seed]]), "no valid arrangement")
    floor = _score(tables, int(back[seed]), int(middle[seed]), int(classes3[front_of[seed]]))
    candidates = np.flatnonzero(bound.ravel() >= -(-floor // (_BOUND_STEP * _SCALE * _SCALE)))
    cb = back.take(candidates).astype(np.int64)
    cm = middle.take(candidates).astype(np.int64)
    cf = classes3.take(front_of.take(candidates)).astype(np.int64)
    scores = _scores(tables, cb, cm, cf)
    best_score = scores.max()
    top = np.flatnonzero(scores == best_score)
    tie = (cf[top] << (2 * _CLASS_BITS)) | (cm[top] << _CLASS_BITS) | cb[top]
    chosen = int(candidates[top[int(np.argmax(tie))]])
    first_subset, second_subset = int(static.split_first[chosen]), int(static.split_second[chosen])
    if classes5[first_subset] < classes5[second_subset]:
        first_subset, second_subset = second_subset, first_subset
    chi = [
        tuple(sorted((hand[p] for p in positions), key=_card_order))
        for positions in (
            static.subsets3[static.split_front[chosen]].tolist(),
            static.subsets5[second_subset].tolist(),
            static.subsets5[first_subset].tolist(),
        )
    ]
    return Arrangement(chi[0], chi[1], chi[2]), int(best_score) // _SCALE


def _score(tables: _Tables, back: int, middle: int, front: int) -> int:
    """``_scores`` of one split, in Python ints (the same exact integer)."""
    wb, qb, gb, lb = tables.term_rows[0][back]
    wm, qm, gm, lm = tables.term_rows[1][middle]
    wf, qf, gf, lf = tables.term_rows[2][front]
    score = (gb - lb + gm - lm + gf - lf) * (_SCALE * _SCALE)
    score += gb * (wm * wf) + gm * (wb * wf) + gf * (wb * wm)
    score -= lb * (qm * qf) + lm * (qb * qf) + lf * (qb * qm)
    return score


# --- the opponents' chi distributions ---------------------------------------------------

# For each position (back, middle, front), 256 quantiles of the chi codes among opponents
# arranged by ``suggest_arrangement`` itself, over random deals. Each is six hex digits:
# the category (0 high card … 8 straight flush) then five ranks (2-9, a = 10, b = J, c = Q,
# d = K, e = A; f = 10-J-Q-K-A when A-2-3-4-5 is the second-highest straight, which is e),
# e.g. 195320 = a pair of 9s with 5, 3, 2. Regenerated by
# ``python -m tests.bench.bench_maubinh --samples --deals 15000 --rounds 3`` (see that module).
_SAMPLE_TEXT: Final = (
    (
        "184320 1a6520 1c5320 1da540 1e5420 232600 242300 243200 253400 262300 264200 272300 273800 282600 "
        "283400 286200 292600 294200 297200 2a2900 2a4300 2a8200 2b2600 2b4300 2b6500 2c2500 2c3800 2c6300 "
        "2d3500 347200 460000 460000 460000 470000 470000 470000 470000 480000 480000 480000 480000 490000 "
        "490000 490000 490000 4a0000 4a0000 4a0000 4a0000 4a0000 4b0000 4b0000 4b0000 4b0000 4c0000 4c0000 "
        "4c0000 4c0000 4c0000 4d0000 4d0000 4d0000 4d0000 4e0000 4e0000 4e0000 4e0000 4e0000 4e0000 4e0000 "
        "4e0000 4e0000 4f0000 4f0000 4f0000 4f0000 4f0000 4f0000 586432 597632 598764 5a8642 5a9652 5a9872 "
        "5b8632 5b9542 5b9853 5ba732 5ba874 5ba986 5c8542 5c9432 5c9754 5ca432 5ca765 5ca952 5cb632 5cb842 "
        "5cb954 5cba52 5cba94 5d7652 5d8742 5d9652 5d9843 5da543 5da765 5da932 5da982 5db654 5db853 5db953 "
        "5dba32 5dba84 5dc652 5dc842 5dc876 5dc976 5dca65 5dca96 5dcb75 5dcba4 5e7642 5e8654 5e9542 5e9752 "
        "5e9864 5ea643 5ea832 5ea932 5ea976 5eb643 5eb832 5eb875 5eb973 5eba53 5eba86 5ec643 5ec764 5ec865 "
        "5ec963 5ec987 5eca72 5eca95 5ecb64 5ecb87 5ed432 5ed732 5ed843 5ed874 5ed965 5eda32 5eda73 5eda94 "
        "5edb62 5edb83 5edb97 5edc52 5edc75 5edc95 5edcb3 623000 624000 625000 627000 629000 62e000 632000 "
        "634000 636000 638000 63a000 642000 643000 645000 646000 648000 64b000 652000 653000 654000 656000 "
        "658000 65c000 662000 663000 664000 667000 669000 66c000 672000 673000 674000 676000 678000 67b000 "
        "682000 683000 684000 685000 687000 68a000 692000 693000 693000 695000 696000 698000 69b000 6a2000 "
        "6a3000 6a4000 6a5000 6a6000 6a8000 6ac000 6b2000 6b3000 6b4000 6b5000 6b6000 6b8000 6ba000 6c2000 "
        "6c2000 6c3000 6c5000 6c6000 6c8000 6ca000 6d2000 6d3000 6d4000 6d5000 6d7000 6d8000 6db000 6e2000 "
        "6e3000 6e4000 6e6000 6e8000 6eb000 726000 747000 754000 772000 786000 7a2000 7b5000 7d2000 7e6000 "
        "870000 890000 8c0000 8e0000 "
    ),
    (
        "0c7642 0d8542 0e7642 0e8653 0e9532 0e9753 0ea732 127650 136420 138740 145320 148630 14a850 156420 "
        "158640 15a640 15c730 167520 169320 16a720 16b980 175420 176540 179320 179840 17b820 17ca80 186320 "
        "187430 189430 18a540 18b420 18c320 194320 196520 197620 198430 198760 19a740 19b720 19c720 1a4320 "
        "1a6540 1a7520 1a8540 1a8760 1a9740 1ab860 1ac840 1b4320 1b6430 1b7540 1b8430 1b8650 1b9640 1b9860 "
        "1ba720 1bc740 1c4320 1c6530 1c7620 1c8420 1c8740 1c9430 1c9730 1ca630 1cb420 1cb830 1d4320 1d6520 "
        "1d7540 1d8420 1d8650 1d9320 1d9630 1d9840 1da650 1db530 1db870 1dc540 1dc840 1dcb70 1e6430 1e7430 "
        "1e8320 1e8630 1e8760 1e9640 1e9830 1ea720 1ea960 1eb650 1ec320 1ec820 1ecb50 1ed730 1ed870 1edb70 "
        "232a00 243500 252900 254700 263500 264a00 265d00 274200 275400 276500 283200 284600 285d00 286c00 "
        "287a00 293200 294600 295800 296800 297600 298500 2a2500 2a3500 2a4600 2a5700 2a6500 2a7400 2a8300 "
        "2a8700 2a9500 2b2400 2b3200 2b3800 2b4700 2b5400 2b6400 2b7200 2b7600 2b8400 2b8900 2b9500 2ba300 "
        "2c2300 2c2900 2c3600 2c4500 2c5300 2c6200 2c6700 2c7500 2c8300 2c9200 2c9800 2ca800 2d2300 2d2900 "
        "2d3800 2d4800 2d5b00 2d7300 2d8500 2da200 2db400 2e2300 2e3600 2e5600 324300 326500 328700 335200 "
        "337600 33b500 346500 349600 354300 358400 364200 368200 373200 376500 383200 389200 395300 39a200 "
        "3a6300 3b4200 3b8300 3c5400 3c9600 3d6500 3e3200 3e9600 460000 460000 460000 460000 460000 460000 "
        "470000 470000 470000 470000 470000 480000 480000 480000 480000 480000 480000 490000 490000 490000 "
        "490000 490000 4a0000 4a0000 4a0000 4a0000 4a0000 4b0000 4b0000 4b0000 4b0000 4c0000 4c0000 4c0000 "
        "4c0000 4d0000 4d0000 4d0000 4d0000 4e0000 4e0000 4e0000 4e0000 4f0000 4f0000 4f0000 4f0000 598532 "
        "5a8653 5a9873 5b9532 5ba754 5c8642 5ca542 5cb732 5cba96 5d9875 5db763 5dc753 5dcb82 5ea765 5ec842 "
        "5eda83 634000 656000 696000 "
    ),
    (
        "054300 075200 085200 093200 098200 0a4300 0a7400 0a8700 0a9700 0b5300 0b7500 0b9300 0b9800 0ba500 "
        "0ba800 0c4200 0c6300 0c8200 0c8700 0c9600 0ca300 0ca600 0ca700 0cb200 0cb500 0cb700 0cb800 0cb900 "
        "0cba00 0d4300 0d6300 0d7400 0d8300 0d9200 0d9500 0d9800 0da500 0da700 0da800 0da900 0db300 0db500 "
        "0db700 0db800 0db900 0db900 0dba00 0dba00 0dc400 0dc600 0dc700 0dc800 0dc900 0dc900 0dca00 0dca00 "
        "0dca00 0dcb00 0dcb00 0dcb00 0e3200 0e5300 0e6300 0e7200 0e7500 0e8300 0e8500 0e8700 0e9400 0e9600 "
        "0e9700 0ea200 0ea400 0ea600 0ea700 0ea800 0ea900 0ea900 0eb400 0eb500 0eb700 0eb800 0eb900 0eb900 "
        "0eb900 0eba00 0eba00 0ec200 0ec400 0ec600 0ec700 0ec800 0ec800 0ec900 0ec900 0eca00 0eca00 0eca00 "
        "0eca00 0ecb00 0ecb00 0ecb00 0ecb00 0ed200 0ed300 0ed500 0ed600 0ed700 0ed800 0ed800 0ed900 0ed900 "
        "0ed900 0eda00 0eda00 0eda00 0eda00 0eda00 0edb00 0edb00 0edb00 0edb00 0edb00 0edc00 0edc00 0edc00 "
        "0edc00 0edc00 0edc00 0edc00 0edc00 125000 128000 12b000 12d000 12d000 134000 137000 139000 13c000 "
        "13d000 13e000 145000 147000 149000 14c000 14d000 14e000 154000 157000 159000 15b000 15c000 15d000 "
        "162000 165000 167000 169000 16a000 16b000 16c000 16d000 16e000 172000 175000 176000 178000 17a000 "
        "17b000 17c000 17d000 17d000 17e000 184000 186000 187000 189000 18a000 18b000 18c000 18d000 18d000 "
        "192000 194000 196000 198000 19a000 19a000 19b000 19c000 19d000 19e000 1a2000 1a5000 1a7000 1a9000 "
        "1a9000 1ab000 1ac000 1ad000 1ae000 1b3000 1b6000 1b9000 1ba000 1ba000 1bc000 1bc000 1bd000 1be000 "
        "1c2000 1c5000 1c8000 1c9000 1ca000 1cb000 1cb000 1cb000 1cd000 1cd000 1ce000 1ce000 1d3000 1d6000 "
        "1d7000 1d9000 1d9000 1da000 1da000 1db000 1db000 1dc000 1dc000 1dc000 1de000 1de000 1de000 1e4000 "
        "1e5000 1e6000 1e8000 1e8000 1e9000 1ea000 1ea000 1eb000 1eb000 1eb000 1ec000 1ec000 1ed000 1ed000 "
        "1ed000 1ed000 330000 390000 "
    ),
)


def _samples() -> tuple[list[int], list[int], list[int]]:
    back, middle, front = ([int(word, 16) for word in text.split()] for text in _SAMPLE_TEXT)
    return back, middle, front
