"""The definitions that ``maubinh_hands``' fast paths are pinned to: the arranger's search
as it was before its fast path (``suggest_arrangement``, arrangement for arrangement), and
the special hands counted with ``collections.Counter`` (``special_hand``).

The exhaustive searches of ``maubinh_exhaustive`` pin the *score* of the suggestion to the
best of its criterion; among arrangements of equal score the arranger's tie-break (the
stronger front, middle, back, then the first split in canonical order) picks one, and a
recorded hand replays the arrangement that was picked. This module keeps that pick as the
straightforward int64 numpy search over all 36,036 splits (every split's bound, the seed of
the highest bound scored exactly as the floor, every split whose bound reaches the floor
scored exactly), so that ``test_maubinh_hands_properties`` can require the fast path to
return the very same ``Suggestion`` on thousands of seeded hands.

It uses the arranger's tables (class codes, per-position terms, the int64 bound) and split
indices, which the tables' own tests check against ``hand_value``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from socai.cards import Card
from socai.rules.chinese_poker import maubinh_hands as mb

_INVALID = -(1 << 62)  # the bound of a fouled split: below every criterion
_CLASS_BITS = 13


def classes(hand: Sequence[Card], tables: mb._Tables) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The class index of every 5-card and every 3-card subset of the hand (int64)."""
    static = mb._static()
    keys = np.array([1 << (4 * (c.rank - 2)) for c in hand], dtype=np.int64)
    suits = np.array([c.suit for c in hand], dtype=np.int64)
    nonflush5_keys = np.asarray(tables.nonflush5_keys, dtype=np.int64)
    three_keys = np.asarray(tables.three_keys, dtype=np.int64)
    sums5 = keys[static.subsets5].sum(axis=1)
    classes5 = tables.nonflush5_class[np.searchsorted(nonflush5_keys, sums5)].astype(np.int64)
    suits5 = suits[static.subsets5]
    flushes = np.flatnonzero((suits5 == suits5[:, :1]).all(axis=1))
    if flushes.size:
        bits = np.array([1 << (c.rank - 2) for c in hand], dtype=np.int64)
        classes5[flushes] = tables.flush5[bits[static.subsets5[flushes]].sum(axis=1)]
    sums3 = keys[static.subsets3].sum(axis=1)
    classes3 = tables.three_class[np.searchsorted(three_keys, sums3)].astype(np.int64)
    return classes5, classes3


def scores(
    tables: mb._Tables, back: npt.NDArray[Any], middle: npt.NDArray[Any], front: npt.NDArray[Any]
) -> npt.NDArray[Any]:
    """The arranger's criterion in billionths of a unit, exact int64."""
    scale = 1000
    wb, qb, gb, lb = (column.take(back) for column in tables.columns[0])
    wm, qm, gm, lm = (column.take(middle) for column in tables.columns[1])
    wf, qf, gf, lf = (column.take(front) for column in tables.columns[2])
    result: npt.NDArray[Any] = (gb - lb + gm - lm + gf - lf) * (scale * scale)
    result += gb * (wm * wf) + gm * (wb * wf) + gf * (wb * wm)
    result -= lb * (qm * qf) + lm * (qb * qf) + lf * (qb * qm)
    return result


def best_arrangement(hand: Sequence[Card], tables: mb._Tables) -> tuple[mb.Arrangement, int]:
    """The best valid arrangement of the hand (in canonical order) and its score in
    millionths of a unit: all 36,036 splits bounded, the candidates scored exactly."""
    static = mb._static()
    classes5, classes3 = classes(hand, tables)
    first = classes5.take(static.split_first_by_front)
    second = classes5.take(static.split_second_by_front)
    back, middle = np.maximum(first, second), np.minimum(first, second)
    front = classes3[:, None]
    bound = tables.bound[0].take(back)
    bound += tables.bound[1].take(middle)
    bound += tables.bound[2].take(classes3)[:, None]
    bound[middle < front] = _INVALID
    seed = int(np.argmax(bound))
    assert int(bound.flat[seed]) > _INVALID, "no valid arrangement"
    back, middle = back.ravel(), middle.ravel()
    front_of = static.split_front
    floor = scores(tables, back[seed : seed + 1], middle[seed : seed + 1], classes3.take(front_of[seed : seed + 1]))
    candidates = np.flatnonzero(bound.ravel() >= floor[0])
    cb, cm, cf = back.take(candidates), middle.take(candidates), classes3.take(front_of.take(candidates))
    found = scores(tables, cb, cm, cf)
    best_score = found.max()
    top = np.flatnonzero(found == best_score)
    tie = (cf[top] << (2 * _CLASS_BITS)) | (cm[top] << _CLASS_BITS) | cb[top]
    chosen = int(candidates[top[int(np.argmax(tie))]])
    first_subset, second_subset = int(static.split_first[chosen]), int(static.split_second[chosen])
    if classes5[first_subset] < classes5[second_subset]:
        first_subset, second_subset = second_subset, first_subset
    chi = [
        tuple(sorted((hand[p] for p in positions), key=mb._card_order))
        for positions in (
            static.subsets3[static.split_front[chosen]].tolist(),
            static.subsets5[second_subset].tolist(),
            static.subsets5[first_subset].tolist(),
        )
    ]
    return mb.Arrangement(chi[0], chi[1], chi[2]), int(best_score) // 1000


def suggest_arrangement(cards13: Iterable[Card], options: mb.HandOptions = mb.DEFAULT_OPTIONS) -> mb.Suggestion:
    """``maubinh_hands.suggest_arrangement`` with the search above."""
    hand = tuple(sorted(cards13, key=mb._card_order))
    assert len(set(hand)) == 13
    special = mb.special_hand(hand)
    best, score = best_arrangement(hand, mb._tables(options.wheel_second_highest))
    if special in ("three_straight_flushes", "three_straights", "three_flushes"):
        shown = mb.special_partition(hand, options.wheel_second_highest)
        assert shown is not None
        best = shown
    assert mb.is_valid_arrangement(best.front, best.middle, best.back, options.wheel_second_highest)
    return mb.Suggestion(best.front, best.middle, best.back, special, score)


def special_hand(cards13: Iterable[Card]) -> str | None:
    """``maubinh_hands.special_hand`` as RULES.md 11.3 reads, rank and suit counts in Counters."""
    hand = mb._check_thirteen(cards13)
    counts = Counter([c.rank for c in hand])
    suits = Counter([c.suit for c in hand])
    lowest, highest = min(counts), max(counts)  # ranks
    if len(counts) == 13:
        return "dragon_roll" if len(suits) == 1 else "dragon"
    if lowest >= 11:
        return "twelve_royals"
    if mb._flush_split(suits) is not None and mb._straight_flush_partition(hand) is not None:
        return "three_straight_flushes"
    shape = sorted(counts.values(), reverse=True)
    if shape == [4, 4, 4, 1]:
        return "three_quads"
    if lowest >= 8:
        return "all_big"
    if highest <= 8:
        return "all_small"
    if all(c.is_red for c in hand) or not any(c.is_red for c in hand):
        return "one_colour"
    if shape == [3, 3, 3, 3, 1]:
        return "four_triples"
    pairs = sum(n // 2 for n in counts.values() if n in (2, 4))  # MB-22: a tứ quý is two pairs
    triples = sum(1 for n in counts.values() if n == 3)
    singles = sum(1 for n in counts.values() if n == 1)
    if pairs == 5 and triples == 1:
        return "five_pairs_triple"
    if pairs == 6 and singles == 1:
        return "six_pairs"
    if mb._straight_partition(counts) is not None:
        return "three_straights"
    if mb._flush_split(suits) is not None:
        return "three_flushes"
    return None
