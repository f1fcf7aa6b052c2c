"""The best arrangement of 13 cards by exhaustive search, twice: the straightforward
definition and a fast path pinned equal to it, for the arranger's property tests.

The score is the criterion that ``suggest_arrangement`` maximises (its docstring): the
estimated expected units against one opponent arranged like the arranger, with the chi
units of MB-1 to MB-3, draws worth 0 and the xử bắn doubling, exact in billionths of a
unit. Both searches take chi codes from the rules' public ``hand_value`` and the
per-position terms (P(win), P(lose), P(win) × units, E[units lost]) from the arranger's
tables, so they check the *search* (which arrangements are valid, which scores best), not
the opponent samples.

- ``definition`` walks every (back, middle, front) of the 13 cards — 1,287 backs, 56
  middles each, the front the 3 left: 72,072 arrangements — in plain Python.
- ``fast`` computes the code of each of the 1,287 five-card and 286 three-card subsets
  once, then scores the same 72,072 arrangements, in the same order, with numpy over
  static index tables. It shares nothing with the arranger's own search (which pairs
  unordered splits, uses class tables and prunes by a bound).

``tests/unit/rules/test_maubinh_hands_properties.py`` pins ``fast`` equal to
``definition`` (the best score and the validity of every arrangement) on a few hundred
deals, and then uses ``fast`` where the definition would take minutes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from socai.cards import Card
from socai.rules.chinese_poker import maubinh_hands as mb

ARRANGEMENTS = 72_072  # C(13, 5) × C(8, 5): back, then middle, then the front left over
SCALE = 1000  # the arranger's probabilities are integers in thousandths

Terms = tuple[int, int, int, int]


@dataclass(frozen=True)
class Exhaustive:
    """The best criterion over every valid arrangement, and which of the 72,072 are valid
    (in the order back, then middle, by ``itertools.combinations`` of the cards)."""

    best: int
    valid: npt.NDArray[np.bool_]

    @property
    def valid_count(self) -> int:
        return int(self.valid.sum())


def tables() -> mb._Tables:
    """The arranger's tables for the default wheel rule (Sảnh Nhị second highest, MB-4)."""
    return mb._tables(True)


@cache
def terms_of(position: int, code: int) -> Terms:
    """P(win), P(lose), P(win) × units, E[units lost] of a chi code at a position (0 back,
    1 middle, 2 front), in thousandths."""
    t = tables()
    cls = bisect_left(t.codes, code)
    if cls == len(t.codes) or t.codes[cls] != code:
        raise AssertionError(f"no class for chi code {code:x}")
    win, lose, gain, loss = (int(x) for x in t.terms[position][cls])
    return win, lose, gain, loss


def criterion_of_terms(b: Terms, m: Terms, f: Terms) -> int:
    """The arranger's score, written out in plain Python from its docstring: each chi's
    P(win) × units − E[units lost], plus xử bắn — P(win all three) × the three chi's units
    − E[units lost on all three] — with the chi taken as independent."""
    (wb, qb, gb, lb), (wm, qm, gm, lm), (wf, qf, gf, lf) = b, m, f
    single = (gb - lb + gm - lm + gf - lf) * SCALE * SCALE
    sweep_won = gb * wm * wf + gm * wb * wf + gf * wb * wm
    sweep_lost = lb * qm * qf + lm * qb * qf + lf * qb * qm
    return single + sweep_won - sweep_lost


def criterion(codes: tuple[int, int, int]) -> int:
    """The criterion of an arrangement given by its back, middle and front chi codes."""
    back, middle, front = codes
    return criterion_of_terms(terms_of(0, back), terms_of(1, middle), terms_of(2, front))


def definition(hand: Sequence[Card]) -> Exhaustive:
    """Every arrangement tried one by one: valid when back >= middle >= front (11.1, MB-14).

    Chi are written as positions in ``hand`` (ints compare and hash faster than cards).
    """
    positions = range(13)
    code = {chi: mb.hand_value([hand[p] for p in chi]).code for n in (3, 5) for chi in combinations(positions, n)}
    valid: list[bool] = []
    best: int | None = None
    for back in combinations(positions, 5):
        rest = [p for p in positions if p not in back]
        for middle in combinations(rest, 5):
            front = tuple(p for p in rest if p not in middle)
            ok = code[back] >= code[middle] >= code[front]
            valid.append(ok)
            if ok:
                score = criterion((code[back], code[middle], code[front]))
                best = score if best is None or score > best else best
    if best is None:
        raise AssertionError("no valid arrangement")
    return Exhaustive(best, np.array(valid, dtype=np.bool_))


@dataclass(frozen=True)
class _Index:
    """Positions 0..12: the 5- and 3-card subsets, and each of the 72,072 arrangements as
    (back subset, middle subset, front subset), in ``definition``'s order."""

    fives: Sequence[tuple[int, ...]]
    threes: Sequence[tuple[int, ...]]
    back: npt.NDArray[np.intp]
    middle: npt.NDArray[np.intp]
    front: npt.NDArray[np.intp]


@cache
def _index() -> _Index:
    positions = range(13)
    fives = list(combinations(positions, 5))
    threes = list(combinations(positions, 3))
    five_at = {s: i for i, s in enumerate(fives)}
    three_at: dict[tuple[int, ...], int] = {s: i for i, s in enumerate(threes)}
    rows = []
    for back in fives:
        rest = [p for p in positions if p not in back]
        for middle in combinations(rest, 5):
            front = tuple(p for p in rest if p not in middle)
            rows.append((five_at[back], five_at[middle], three_at[front]))
    table = np.array(rows, dtype=np.intp)
    if table.shape != (ARRANGEMENTS, 3):
        raise AssertionError(table.shape)
    return _Index(fives, threes, table[:, 0].copy(), table[:, 1].copy(), table[:, 2].copy())


@cache
def _term_columns() -> tuple[npt.NDArray[np.int64], tuple[tuple[npt.NDArray[np.int64], ...], ...]]:
    """The class codes in order, and per position each term as an int64 array by class."""
    t = tables()
    codes = np.array(t.codes, dtype=np.int64)
    columns = tuple(tuple(np.ascontiguousarray(t.terms[p][:, k], dtype=np.int64) for k in range(4)) for p in range(3))
    return codes, columns


def fast(hand: Sequence[Card]) -> Exhaustive:
    """``definition`` in numpy: the same arrangements, validity and best score."""
    index = _index()
    codes5 = np.array([mb.hand_value([hand[p] for p in s]).code for s in index.fives], dtype=np.int64)
    codes3 = np.array([mb.hand_value([hand[p] for p in s]).code for s in index.threes], dtype=np.int64)
    back, middle, front = codes5[index.back], codes5[index.middle], codes3[index.front]
    valid = (back >= middle) & (middle >= front)
    if not valid.any():
        raise AssertionError("no valid arrangement")
    class_codes, columns = _term_columns()
    terms: list[tuple[npt.NDArray[Any], ...]] = []
    for p, chi in enumerate((back[valid], middle[valid], front[valid])):
        cls = np.searchsorted(class_codes, chi)
        if not (class_codes[cls] == chi).all():
            raise AssertionError("a chi code with no class")
        terms.append(tuple(column[cls] for column in columns[p]))
    (wb, qb, gb, lb), (wm, qm, gm, lm), (wf, qf, gf, lf) = terms
    scores = (gb - lb + gm - lm + gf - lf) * (SCALE * SCALE)
    scores += gb * wm * wf + gm * wb * wf + gf * wb * wm
    scores -= lb * qm * qf + lm * qb * qf + lf * qb * qm
    return Exhaustive(int(scores.max()), valid)
