"""Mậu Binh hands, properties: the partition searches against brute force, and the
auto-arranger (never fouled, deterministic, exhaustive over its criterion, better than a
simple baseline)."""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import combinations

import pytest

from socai.cards import Card, deck, parse_cards
from socai.rules import maubinh_hands as mb
from socai.rules.ranking import WHEEL_SECOND_HIGHEST

DECK = deck("maubinh")


def random_hands(count: int, seed: int) -> Iterator[tuple[Card, ...]]:
    rng = random.Random(seed)
    cards = list(DECK)
    for _ in range(count):
        rng.shuffle(cards)
        yield tuple(cards[:13])


def random_deals(count: int, seed: int) -> Iterator[list[tuple[Card, ...]]]:
    rng = random.Random(seed)
    cards = list(DECK)
    for _ in range(count):
        rng.shuffle(cards)
        yield [tuple(cards[i * 13 : (i + 1) * 13]) for i in range(4)]


# --- the partition searches against brute force ------------------------------------------


def is_run(ranks: Sequence[int]) -> bool:
    """5 or 3 distinct consecutive ranks, the ace high or low (A-2-3, A-2-3-4-5)."""
    distinct = sorted(set(ranks))
    if len(distinct) != len(ranks):
        return False
    wheel = [*range(2, len(ranks) + 1), 14]  # A-2-3 or A-2-3-4-5
    return distinct[-1] - distinct[0] == len(ranks) - 1 or distinct == wheel


def brute_force(hand: Sequence[Card]) -> dict[str, bool]:
    """Which of Ba Sảnh Đồng Chất, Ba Sảnh, Ba Đồng Chất some 5/5/3 split of the hand has,
    trying every split."""
    found = {"three_straight_flushes": False, "three_straights": False, "three_flushes": False}
    for front in combinations(hand, 3):
        front_run = is_run([c.rank for c in front])
        front_suited = len({c.suit for c in front}) == 1
        if not (front_run or front_suited):
            continue  # no split with this front can hold any of the three
        rest = [c for c in hand if c not in front]
        for first in combinations(rest[1:], 4):
            chi = [(rest[0], *first), tuple(c for c in rest[1:] if c not in first)]
            runs = front_run and all(is_run([c.rank for c in part]) for part in chi)
            suited = front_suited and all(len({c.suit for c in part}) == 1 for part in chi)
            found["three_straights"] |= runs
            found["three_flushes"] |= suited
            found["three_straight_flushes"] |= runs and suited
    return found


def test_the_brute_force_run_check_knows_the_wheels() -> None:
    assert is_run([14, 2, 3]) and is_run([14, 2, 3, 4, 5]) and is_run([12, 13, 14])
    assert not is_run([13, 14, 2]) and not is_run([2, 3, 5])


def partition_candidates(count: int, seed: int) -> Iterator[tuple[Card, ...]]:
    """Hands that hold, or nearly hold, a partition special hand: three runs or three
    suited chi built at random, some with one card swapped out, and random hands from a
    narrow deck (two suits, few ranks) where such splits are common."""
    rng = random.Random(seed)
    runs5 = [(14, 2, 3, 4, 5), *(tuple(range(low, low + 5)) for low in range(2, 11))]
    runs3 = [(14, 2, 3), *(tuple(range(low, low + 3)) for low in range(2, 13))]
    made = 0
    while made < count:
        kind = made % 4
        if kind in (0, 1):
            suited = kind == 1
            suit = rng.randrange(4)
            chosen: list[Card] = []
            for run in (rng.choice(runs5), rng.choice(runs5), rng.choice(runs3)):
                suit = suit if suited and rng.random() < 0.3 else rng.randrange(4)
                chosen += [Card(r, suit if suited else rng.randrange(4)) for r in run]
        elif kind == 2:
            suits = rng.sample(range(4), 3)
            chosen = []
            for size, suit in zip((5, 5, 3), suits, strict=True):
                chosen += [Card(r, suit) for r in rng.sample(range(2, 15), size)]
        else:
            narrow = [Card(r, s) for r in range(2, 10) for s in rng.sample(range(4), 2)]
            chosen = rng.sample(narrow, 13)
        if len(set(chosen)) != 13:
            continue
        if rng.random() < 0.5:
            outside = [c for c in DECK if c not in chosen]
            chosen[rng.randrange(13)] = rng.choice(outside)
        made += 1
        yield tuple(chosen)


def test_partition_searches_agree_with_brute_force() -> None:
    agreed = {"three_straight_flushes": 0, "three_straights": 0, "three_flushes": 0}
    for hand in partition_candidates(200, 11):
        truth = brute_force(hand)
        found = mb.special_hand(hand)
        ranked = mb.SPECIAL_HANDS.index(found) if found is not None else len(mb.SPECIAL_HANDS)
        for name, holds in truth.items():
            # The search must find each special the brute force finds, unless a higher
            # special hand counts instead (MB-10), and never claim one that is not there.
            if holds:
                assert ranked <= mb.SPECIAL_HANDS.index(name), (name, hand)
                agreed[name] += found == name
            else:
                assert found != name, (name, hand)
    # The candidates really exercise each search.
    assert all(n >= 10 for n in agreed.values()), agreed


def test_the_shown_partition_is_the_special_hand() -> None:
    for hand in partition_candidates(120, 12):
        name = mb.special_hand(hand)
        shown = mb.special_partition(hand)
        if name not in ("three_straight_flushes", "three_straights", "three_flushes"):
            assert shown is None
            continue
        assert shown is not None and mb.is_valid_arrangement(shown.front, shown.middle, shown.back)
        chi = (shown.back, shown.middle, shown.front)
        if name != "three_flushes":
            assert all(is_run([c.rank for c in part]) for part in chi)
        if name != "three_straights":
            assert all(len({c.suit for c in part}) == 1 for part in chi)


# --- the auto-arranger ---------------------------------------------------------------------


def test_suggestion_is_never_fouled_and_keeps_the_cards() -> None:
    for hand in random_hands(600, 1):
        s = mb.suggest_arrangement(hand)
        assert mb.is_valid_arrangement(s.front, s.middle, s.back)
        assert sorted(s.arrangement.cards, key=str) == sorted(hand, key=str)
        assert s.special == mb.special_hand(hand)


def test_suggestion_is_never_fouled_when_sanh_nhi_is_the_lowest_straight() -> None:
    options = mb.HandOptions(wheel_second_highest=False)
    for hand in random_hands(300, 2):
        s = mb.suggest_arrangement(hand, options)
        assert mb.is_valid_arrangement(s.front, s.middle, s.back, wheel_second_highest=False)


@pytest.mark.slow
def test_suggestion_is_never_fouled_over_5_000_deals() -> None:
    # 100,000 deals (about 9 minutes) passed once; CI keeps a sample that fits its budget.
    for hand in random_hands(5_000, 3):
        s = mb.suggest_arrangement(hand)
        assert mb.is_valid_arrangement(s.front, s.middle, s.back), hand


def test_suggestion_depends_only_on_the_cards_not_their_order() -> None:
    rng = random.Random(4)
    for hand in random_hands(100, 5):
        shuffled = list(hand)
        rng.shuffle(shuffled)
        assert mb.suggest_arrangement(hand) == mb.suggest_arrangement(shuffled)


def test_suggestion_declares_each_special_hand() -> None:
    assert mb.suggest_arrangement(parse_cards("2s 2h 4d 4c 6s 6h 8d 8c Ts Th Qd Qc Ks")).special == "six_pairs"
    dragon = mb.suggest_arrangement(parse_cards("2s 3h 4d 5c 6h 7h 8s 9h Td Jh Qc Kh Ah"))
    assert dragon.special == "dragon"


def test_suggestion_shows_the_partition_of_three_straights() -> None:
    s = mb.suggest_arrangement(parse_cards("As 2h 3d 4c 5s 9h Td Jc Qs Kh Qd Kc Ah"))
    assert s.special == "three_straights"
    assert [mb.hand_value(chi).category for chi in (s.back, s.middle)] == ["straight", "straight"]
    assert sorted(c.rank for c in s.front) in ([12, 13, 14], [2, 3, 14])


def test_suggestion_weighs_the_xu_ban_doubling() -> None:
    """Kings in back, the flush in the middle and queens in front win all three chi nearly
    always (8 units, doubled by xử bắn); the queens as a middle Tứ Quý (8 units) would leave
    a front that loses most of the time. The criterion prefers the sure sweep."""
    s = mb.suggest_arrangement(parse_cards("Qh Qd Qc Qs 3s 7d 9d Td Kd Ad Kh Ks Kc"))
    assert [mb.hand_value(chi).category for chi in (s.back, s.middle, s.front)] == [
        "four_of_a_kind",
        "flush",
        "three_of_a_kind",
    ]


def test_suggestion_puts_a_clear_hand_where_it_belongs() -> None:
    """Quads in back, a flush in the middle, trips in front: 4 + 1 + 3 units to win."""
    s = mb.suggest_arrangement(parse_cards("Qh Qd Qc Qs 3s 7d 9d Td Jd Ad Kh Ks Kc"))
    assert [mb.hand_value(chi).category for chi in (s.back, s.middle, s.front)] == [
        "four_of_a_kind",
        "flush",
        "three_of_a_kind",
    ]


SCALE = 1000  # the arranger's probabilities are in thousandths


def terms_of(tables: mb._Tables, position: int, code: int) -> tuple[int, int, int, int]:
    """P(win), P(lose), P(win) × units, E[units lost] of a chi code at a position."""
    cls = bisect_left(tables.codes, code)
    assert tables.codes[cls] == code
    win, lose, gain, loss = (int(x) for x in tables.terms[position][cls])
    return win, lose, gain, loss


def criterion_of_terms(b: tuple[int, ...], m: tuple[int, ...], f: tuple[int, ...]) -> int:
    """The arranger's score, written out in plain Python from its docstring."""
    (wb, qb, gb, lb), (wm, qm, gm, lm), (wf, qf, gf, lf) = b, m, f
    single = (gb - lb + gm - lm + gf - lf) * SCALE * SCALE
    sweep_won = gb * wm * wf + gm * wb * wf + gf * wb * wm
    sweep_lost = lb * qm * qf + lm * qb * qf + lf * qb * qm
    return single + sweep_won - sweep_lost


def criterion(tables: mb._Tables, codes: tuple[int, int, int]) -> int:
    return criterion_of_terms(*(terms_of(tables, p, code) for p, code in enumerate(codes)))


def exhaustive_best(hand: Sequence[Card]) -> tuple[int, int]:
    """The best criterion over every valid arrangement (all 72,072 splits tried, with the
    rules' own ``hand_value``), and how many arrangements are valid."""
    tables = mb._tables(True)
    code = {chi: mb.hand_value(chi).code for n in (3, 5) for chi in combinations(hand, n)}
    terms = [
        {chi: terms_of(tables, p, c) for chi, c in code.items() if len(chi) == (3 if p == 2 else 5)} for p in range(3)
    ]
    best, count = None, 0
    for back in combinations(hand, 5):
        rest = [c for c in hand if c not in back]
        for middle in combinations(rest, 5):
            front = tuple(c for c in rest if c not in middle)
            if code[back] >= code[middle] >= code[front]:
                count += 1
                score = criterion_of_terms(terms[0][back], terms[1][middle], terms[2][front])
                best = score if best is None or score > best else best
    assert best is not None
    return best, count


def codes_of(a: mb.Arrangement | mb.Suggestion) -> tuple[int, int, int]:
    return (mb.hand_value(a.back).code, mb.hand_value(a.middle).code, mb.hand_value(a.front).code)


def assert_exhaustive_best(hands: Iterator[tuple[Card, ...]]) -> None:
    for hand in hands:
        s = mb.suggest_arrangement(hand)
        if s.special is not None:
            continue
        best, count = exhaustive_best(hand)
        assert count > 0
        assert criterion(mb._tables(True), codes_of(s)) == best
        assert s.score_micro_units == best // 1000


def test_suggestion_is_the_exhaustive_best_of_its_criterion() -> None:
    assert_exhaustive_best(random_hands(3, 6))


@pytest.mark.slow
def test_suggestion_is_the_exhaustive_best_of_its_criterion_on_40_deals() -> None:
    # 1,000 deals (about 10 minutes) passed once; CI keeps a sample that fits its budget.
    assert_exhaustive_best(random_hands(40, 10))


def test_suggestion_scores_at_least_the_baseline_by_its_criterion() -> None:
    tables = mb._tables(True)
    better = 0
    for hand in random_hands(200, 7):
        s = mb.suggest_arrangement(hand)
        base = mb.baseline_arrangement(hand)
        assert mb.is_valid_arrangement(base.front, base.middle, base.back)
        ours, theirs = criterion(tables, codes_of(s)), criterion(tables, codes_of(base))
        assert ours >= theirs
        better += ours > theirs
    assert better > 60


def test_suggestion_beats_the_baseline_head_to_head() -> None:
    """Every seat's suggestion against every other seat's baseline arrangement, on the same
    deals: the suggestion wins units on balance (special hands are left out: they win
    whatever the arrangement)."""
    units = 0
    hands = 0
    for deal in random_deals(80, 8):
        if any(mb.special_hand(h) for h in deal):
            continue
        ours = [mb.played_hand(*_chi(mb.suggest_arrangement(h).arrangement)) for h in deal]
        theirs = [mb.played_hand(*_chi(mb.baseline_arrangement(h))) for h in deal]
        for i in range(4):
            for j in range(4):
                if i != j:
                    units += mb.compare_hands(ours[i], theirs[j]).total
                    hands += 1
    assert units > 0.1 * hands, (units, hands)


def _chi(a: mb.Arrangement) -> tuple[tuple[Card, ...], tuple[Card, ...], tuple[Card, ...]]:
    return a.front, a.middle, a.back


def test_hand_values_agree_with_the_arrangers_class_tables() -> None:
    tables = mb._tables(True)
    for hand in random_hands(50, 9):
        sorted_hand = sorted(hand, key=lambda c: (-c.rank, c.suit))
        classes5, classes3 = mb._classes(sorted_hand, tables)
        for i, chi in enumerate(combinations(sorted_hand, 5)):
            assert tables.codes[int(classes5[i])] == mb.hand_value(chi).code
        for i, chi in enumerate(combinations(sorted_hand, 3)):
            assert tables.codes[int(classes3[i])] == mb.hand_value(chi).code
    assert mb.DEFAULT_OPTIONS.wheel == WHEEL_SECOND_HIGHEST


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_suggestion_is_close_to_the_best_arrangement_by_simulation() -> None:
    """The goal behind the criterion: units against random opponents (who arrange like the
    arranger). On 40 deals, every valid arrangement is simulated against 120 opponents and
    the best one re-scored on 120 others; the suggestion gives up little to it and gains a
    lot over the baseline (measured at 60 deals × 150: 0.163 against 0.205 units per
    opponent, baseline −1.424)."""
    from tests.bench.bench_maubinh import quality

    measured = quality(40, 120, 21)
    assert measured["regret"] < 0.15, measured
    assert measured["suggest"] - measured["baseline"] > 1.0, measured
