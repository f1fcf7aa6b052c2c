"""Fast poker hand evaluation for Texas Hold'em: best 5 of 5, 6 or 7 cards.

Every hand maps to a *strength*, an int from 1 (7-5-4-3-2 offsuit, the weakest high card)
to 7462 (a royal flush): the 7462 distinct classes of 5-card poker hands, numbered from
the weakest. Equal strength means equal hands (suits never break ties, RULES.md HE-5), so
comparing two ints is the whole showdown. ``category_of(strength)`` gives the category id
of ``socai.rules.ranking.CATEGORY_NAMES``.

How it is fast: a hand's rank multiset is identified by the *sum* of one key per card
(``RANK_KEYS``, chosen so that the sums of any two different multisets of 5, 6 or 7 ranks
differ; the build checks it), and its suits by a sum of 3-bit counters. A flush (five or
more cards of one suit) is looked up by the bit mask of that suit's ranks; anything else by
the rank-key sum. With seven cards a flush rules out four of a kind and a full house (the
other two cards cannot make four of a rank or a second group), so the flush table alone
decides it. These are the ideas of the SKPokerEval and PokerHandEvaluator family of
evaluators, built here from our own definition of hand order.

The tables are built from ``_code`` (a direct, readable best-5 evaluation on rank counts)
the first time they are needed, in well under a second, never at import. The scalar path
(``strength``) needs only the standard library; ``evaluate_batch`` uses numpy, imported
on first use, for millions of 7-card hands per second.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from socai.cards import Card
from socai.errors import InvalidArgument, broken, check
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
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# One key per rank, 2 first, A last. The sums over any multiset of 5, 6 or 7 ranks (at
# most four of each) are distinct among multisets of the same size (the largest 7-card sum
# is 7,825,759), which the build verifies. Found by a greedy search: each key is the
# smallest that keeps all sums distinct.
RANK_KEYS: Final = (0, 1, 5, 22, 98, 453, 2031, 8698, 22854, 83661, 262349, 636345, 1479181)
RANK_KEY_SUM_MAX: Final = 4 * RANK_KEYS[12] + 3 * RANK_KEYS[11]
# Suit counters: 3 bits per suit (a count 0..7), so a sum over up to 7 cards says how many
# cards each suit has.
SUIT_KEYS: Final = (1, 1 << 3, 1 << 6, 1 << 9)
HAND_CLASSES: Final = 7462  # distinct 5-card poker hands, the strongest is 7462

_CODE_SHIFT: Final = 20  # category << 20 | up to five 4-bit rank indices, most important first


def _straight_top(mask: int) -> int:
    """The rank index (0 = deuce … 12 = ace) of the top of the best straight in ``mask``, or -1.

    The wheel A-2-3-4-5 has top 3 (the five): it is the lowest straight (RULES.md 1.1, HE-8).
    """
    for top in range(12, 3, -1):
        window = 0b11111 << (top - 4)
        if mask & window == window:
            return top
    wheel = (1 << 12) | 0b1111
    return 3 if mask & wheel == wheel else -1


def _pack(category: int, ranks: Sequence[int]) -> int:
    code = category
    for i in range(5):
        code = (code << 4) | (ranks[i] if i < len(ranks) else 0)
    return code


def _code_flush(mask: int) -> int:
    """Order-preserving code of the best hand among 5-7 suited cards with rank bit ``mask``."""
    top = _straight_top(mask)
    if top >= 0:
        return _pack(STRAIGHT_FLUSH, (top,))
    ranks = [r for r in range(12, -1, -1) if mask >> r & 1]
    return _pack(FLUSH, ranks[:5])


def _code(counts: Sequence[int]) -> int:
    """Order-preserving code of the best non-flush 5-card hand from rank ``counts`` (index
    0 = deuce … 12 = ace; 5 to 7 cards): the standard comparison of RULES.md HE-5."""
    mask = 0
    by_count: list[list[int]] = [[], [], [], [], []]
    for r in range(12, -1, -1):
        n = counts[r]
        if n:
            mask |= 1 << r
            by_count[n].append(r)
    quads, trips, pairs, singles = by_count[4], by_count[3], by_count[2], by_count[1]
    if quads:
        q = quads[0]
        kicker = max(r for r in range(13) if counts[r] and r != q)
        return _pack(FOUR_OF_A_KIND, (q, kicker))
    if trips and (len(trips) > 1 or pairs):
        t = trips[0]
        pair = max([*trips[1:], *pairs])
        return _pack(FULL_HOUSE, (t, pair))
    top = _straight_top(mask)
    if top >= 0:
        return _pack(STRAIGHT, (top,))
    if trips:
        t = trips[0]
        return _pack(THREE_OF_A_KIND, [t, *sorted([r for r in singles], reverse=True)[:2]])
    if len(pairs) >= 2:
        high, low = pairs[0], pairs[1]
        kicker = max(r for r in range(13) if counts[r] and r not in (high, low))
        return _pack(TWO_PAIR, (high, low, kicker))
    if pairs:
        return _pack(PAIR, [pairs[0], *singles[:3]])
    return _pack(HIGH_CARD, singles[:5])


def _rank_multisets(n: int) -> list[tuple[int, ...]]:
    """Every vector of 13 rank counts (each 0..4) that adds up to ``n``."""
    out: list[tuple[int, ...]] = []
    current = [0] * 13

    def fill(rank: int, left: int) -> None:
        if rank == 12:
            if left <= 4:
                current[12] = left
                out.append(tuple(current))
            return
        for c in range(min(4, left) + 1):
            current[rank] = c
            fill(rank + 1, left - c)
        current[rank] = 0

    fill(0, n)
    return out


class _Tables:
    """The lookup tables, built once on first use (``tables()``)."""

    __slots__ = ("by_code", "category_starts", "flush", "flush_suit", "nonflush")

    def __init__(self) -> None:
        # Every hand class, from the 5-card hands (all 7462 classes occur there).
        codes: set[int] = set()
        five_nonflush = {}
        multisets = _rank_multisets(5)
        for counts in multisets:
            code = _code(counts)
            codes.add(code)
            five_nonflush[_key_of(counts)] = code
        check(len(five_nonflush) == len(multisets), "rank keys collide for 5 cards")
        flush_codes = [0] * 8192
        for mask in range(8192):
            if mask.bit_count() >= 5:
                flush_codes[mask] = _code_flush(mask)
                if mask.bit_count() == 5:
                    codes.add(flush_codes[mask])
        ordered = sorted(codes)
        check(len(ordered) == HAND_CLASSES, f"{len(ordered)} hand classes, expected {HAND_CLASSES}")
        self.by_code: dict[int, int] = {code: i + 1 for i, code in enumerate(ordered)}
        self.category_starts: tuple[int, ...] = tuple(
            next(self.by_code[c] for c in ordered if c >> _CODE_SHIFT == cat) for cat in range(9)
        )
        # flush[mask] is the strength of the flush-suit cards with rank bits ``mask`` (0 if
        # fewer than five); flush_suit[suit counters] is the suit with five or more, else -1.
        self.flush: list[int] = [self.by_code[c] if c else 0 for c in flush_codes]
        self.flush_suit: list[int] = [-1] * (1 << 12)
        for packed in range(1 << 12):
            for suit in range(4):
                if (packed >> (3 * suit)) & 7 >= 5:
                    self.flush_suit[packed] = suit
        # nonflush[n] maps the rank-key sum of n cards to the strength, for n = 5, 6, 7.
        self.nonflush: dict[int, dict[int, int]] = {5: {k: self.by_code[c] for k, c in five_nonflush.items()}}

    def nonflush_of(self, n: int) -> dict[int, int]:
        table = self.nonflush.get(n)
        if table is None:
            multisets = _rank_multisets(n)
            table = {_key_of(counts): self.by_code[_code(counts)] for counts in multisets}
            check(len(table) == len(multisets), f"rank keys collide for {n} cards")
            self.nonflush[n] = table
        return table


def _key_of(counts: Sequence[int]) -> int:
    return sum(c * k for c, k in zip(counts, RANK_KEYS, strict=True))


_TABLES: _Tables | None = None
_NONFLUSH7: dict[int, int] | None = None


def tables() -> _Tables:
    """The lookup tables (built on the first call, about half a second; then cached)."""
    global _TABLES, _NONFLUSH7
    if _TABLES is None:
        built = _Tables()
        _NONFLUSH7 = built.nonflush_of(7)
        built.nonflush_of(6)
        _TABLES = built
    return _TABLES


# Per-rank and per-suit keys indexed by ``Card.rank`` (2..14) and ``Card.suit`` (0..3).
_RANK_KEY_BY_RANK: Final = (0, 0, *RANK_KEYS)
_RANK_BIT_BY_RANK: Final = (0, 0, *(1 << r for r in range(13)))


def strength(cards: Sequence[Card]) -> int:
    """The strength (1..7462, higher is stronger) of the best 5 of 5, 6 or 7 distinct cards.

    Raises InvalidArgument("BAD_HAND") for another number of cards or a repeated card.
    """
    n = len(cards)
    if n not in (5, 6, 7):
        raise InvalidArgument("BAD_HAND", f"a hand has 5 to 7 cards, not {n}")
    if len({(c.rank, c.suit) for c in cards}) != n:
        raise InvalidArgument("BAD_HAND", "a card is repeated")
    if n == 7:
        return strength7(*cards)
    t = tables()
    flush_suit = t.flush_suit[sum(SUIT_KEYS[c.suit] for c in cards)]
    if flush_suit >= 0:
        # Five or six cards with a flush hold nothing stronger but a straight flush.
        return t.flush[sum(_RANK_BIT_BY_RANK[c.rank] for c in cards if c.suit == flush_suit)]
    return t.nonflush_of(n)[sum(_RANK_KEY_BY_RANK[c.rank] for c in cards)]


def strength7(c0: Card, c1: Card, c2: Card, c3: Card, c4: Card, c5: Card, c6: Card) -> int:
    """``strength`` of seven cards the caller knows are distinct (dealt from one deck): the
    scalar hot path of a showdown, without the checks."""
    t = _TABLES if _TABLES is not None else tables()
    flush_suit = t.flush_suit[
        SUIT_KEYS[c0.suit]
        + SUIT_KEYS[c1.suit]
        + SUIT_KEYS[c2.suit]
        + SUIT_KEYS[c3.suit]
        + SUIT_KEYS[c4.suit]
        + SUIT_KEYS[c5.suit]
        + SUIT_KEYS[c6.suit]
    ]
    if flush_suit < 0:
        k = _RANK_KEY_BY_RANK
        return _NONFLUSH7[  # type: ignore[index]
            k[c0.rank] + k[c1.rank] + k[c2.rank] + k[c3.rank] + k[c4.rank] + k[c5.rank] + k[c6.rank]
        ]
    mask = 0
    for c in (c0, c1, c2, c3, c4, c5, c6):
        if c.suit == flush_suit:
            mask |= _RANK_BIT_BY_RANK[c.rank]
    return t.flush[mask]


# Card index (``Card.index``: (rank - 2) * 4 + suit) → rank key, suit key, rank bit.
_KEY_BY_INDEX: Final = tuple(RANK_KEYS[i >> 2] for i in range(52))
_SUIT_BY_INDEX: Final = tuple(SUIT_KEYS[i & 3] for i in range(52))


def strength7_of_indices(i0: int, i1: int, i2: int, i3: int, i4: int, i5: int, i6: int) -> int:
    """The strength of seven distinct cards given by canonical index (0 = 2s … 51 = Ah).

    The fastest scalar path, for callers that keep cards as ints. Distinctness is the
    caller's duty here; a bad index raises IndexError.
    """
    t = _TABLES if _TABLES is not None else tables()
    s = _SUIT_BY_INDEX
    flush_suit = t.flush_suit[s[i0] + s[i1] + s[i2] + s[i3] + s[i4] + s[i5] + s[i6]]
    if flush_suit < 0:
        k = _KEY_BY_INDEX
        return _NONFLUSH7[k[i0] + k[i1] + k[i2] + k[i3] + k[i4] + k[i5] + k[i6]]  # type: ignore[index]
    mask = 0
    for i in (i0, i1, i2, i3, i4, i5, i6):
        if i & 3 == flush_suit:
            mask |= 1 << (i >> 2)
    return t.flush[mask]


def category_of(strength_value: int) -> int:
    """The category id (``ranking.HIGH_CARD`` … ``ranking.STRAIGHT_FLUSH``) of a strength."""
    if not (1 <= strength_value <= HAND_CLASSES):  # formats the message only on failure
        broken(f"strength {strength_value} out of range")
    return bisect_right(tables().category_starts, strength_value) - 1


def category_name(strength_value: int) -> str:
    """The category name of ``ranking.CATEGORY_NAMES`` (``"straight_flush"`` …)."""
    return CATEGORY_NAMES[category_of(strength_value)]


# --- numpy batch ------------------------------------------------------------------------

_BATCH_CHUNK_ROWS: Final = 1 << 15  # keeps the temporaries in cache: 32768 × 7 × 8 bytes
_SUIT_SHIFT: Final = 23  # rank-key sums fit in 23 bits (RANK_KEY_SUM_MAX < 2**23)
_np_tables: tuple[Any, ...] | None = None


def _numpy_tables() -> tuple[Any, ...]:
    """(card word, non-flush table, flush table, flush-suit table) as numpy arrays."""
    global _np_tables
    if _np_tables is None:
        import numpy as np

        check(RANK_KEY_SUM_MAX < 1 << _SUIT_SHIFT, "rank-key sums overflow their bits")
        t = tables()
        nonflush7 = t.nonflush_of(7)
        # One int64 word per card: its rank key in the low 23 bits and its suit counter
        # above, so one gather and one sum give both the rank-key sum and the suit counts.
        words = np.array([RANK_KEYS[i >> 2] | (SUIT_KEYS[i & 3] << _SUIT_SHIFT) for i in range(52)], dtype=np.int64)
        nonflush = np.zeros(RANK_KEY_SUM_MAX + 1, dtype=np.uint16)
        nonflush[np.fromiter(nonflush7.keys(), np.int64)] = np.fromiter(nonflush7.values(), np.uint16)
        flush = np.array(t.flush, dtype=np.uint16)
        flush_suit = np.array(t.flush_suit, dtype=np.int8)
        _np_tables = (words, nonflush, flush, flush_suit)
    return _np_tables


def evaluate_batch(card_indices: npt.ArrayLike) -> np.ndarray[Any, np.dtype[np.uint16]]:
    """Strengths of many 7-card hands at once: ``card_indices`` has shape (N, 7) of canonical
    card indices 0..51 (``Card.index``); returns N strengths (uint16, 1..7462).

    Each row must hold seven distinct cards (not checked, for speed). Raises
    InvalidArgument("BAD_HAND") for another shape or an index outside 0..51.
    """
    import numpy as np

    words, nonflush, flush, flush_suit = _numpy_tables()
    cards = np.asarray(card_indices)
    if cards.ndim != 2 or cards.shape[1] != 7 or cards.dtype.kind not in "iu":
        raise InvalidArgument("BAD_HAND", f"expected an (N, 7) integer array, got {cards.shape}")
    out = np.empty(cards.shape[0], dtype=np.uint16)
    if cards.shape[0] == 0:
        return out
    if int(cards.min()) < 0 or int(cards.max()) > 51:
        raise InvalidArgument("BAD_HAND", "card indices are 0..51")
    rank_mask = (1 << _SUIT_SHIFT) - 1
    for start in range(0, cards.shape[0], _BATCH_CHUNK_ROWS):
        chunk = cards[start : start + _BATCH_CHUNK_ROWS]
        summed = words[chunk].sum(axis=1)
        suit_of_flush = flush_suit[summed >> _SUIT_SHIFT]
        part = nonflush[summed & rank_mask]
        flushed = np.flatnonzero(suit_of_flush >= 0)
        if flushed.size:
            hands = chunk[flushed].astype(np.int64)
            bits = np.where((hands & 3) == suit_of_flush[flushed, None], 1 << (hands >> 2), 0).sum(axis=1)
            part[flushed] = flush[bits]
        out[start : start + chunk.shape[0]] = part
    return out
