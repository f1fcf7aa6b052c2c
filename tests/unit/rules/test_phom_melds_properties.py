"""Phỏm card logic against brute force: every way to split a small hand into melds and junk.

The brute force knows nothing of the module's search: it tries every subset of the cards
left with the lowest card as a block, keeps the blocks that a plain reading of §6.2 calls
a Phỏm, and scores what is left. Hands come from a dense part of the deck (A–6, or
10–K with A for the PH-10 edge) so that melds, and melds that share cards, are common.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from socai.cards import ALL_CARDS, Card
from socai.rules.rummy.phom_melds import (
    REASONS,
    Discard,
    PlayerResult,
    UWin,
    best_arrangement,
    best_lay_down,
    can_take,
    card_order,
    find_u,
    hand_payments,
    is_meld,
    iter_arrangements,
    sends,
)

LOW = [c for c in ALL_CARDS if c.rank <= 6 or c.rank == 14]  # A 2 3 4 5 6
HIGH = [c for c in ALL_CARDS if c.rank >= 10]  # 10 J Q K A

Split = tuple[frozenset[frozenset[Card]], frozenset[Card]]


def plain_rank(card: Card) -> int:
    return 1 if card.rank == 14 else card.rank


def plain_is_meld(cards: Sequence[Card]) -> bool:
    """§6.2 read plainly: 3–4 distinct cards of one rank, or 3+ of one suit in a row, A low."""
    if len(set(cards)) != len(cards):
        return False
    if len({c.rank for c in cards}) == 1:
        return len(cards) in (3, 4)
    if len({c.suit for c in cards}) != 1 or len(cards) < 3:
        return False
    ranks = sorted(plain_rank(c) for c in cards)
    return ranks == list(range(ranks[0], ranks[0] + len(cards)))


def brute_splits(cards: Sequence[Card]) -> Iterator[tuple[list[tuple[Card, ...]], list[Card]]]:
    """Every split of ``cards`` into blocks that are Phỏm and single junk cards."""
    if not cards:
        yield [], []
        return
    first, rest = cards[0], list(cards[1:])
    for melds, junk in brute_splits(rest):
        yield melds, [first, *junk]
    for size in range(2, len(rest) + 1):
        for others in combinations(rest, size):
            block = (first, *others)
            if plain_is_meld(block):
                left = [c for c in rest if c not in others]
                for melds, junk in brute_splits(left):
                    yield [block, *melds], junk


def valid_splits(cards: Sequence[Card], taken: Sequence[Card], one_taken_per_meld: bool = False) -> set[Split]:
    out = set()
    for melds, junk in brute_splits(cards):
        if set(taken) & set(junk):
            continue
        if one_taken_per_meld and any(len(set(m) & set(taken)) > 1 for m in melds):
            continue
        out.add((frozenset(frozenset(m) for m in melds), frozenset(junk)))
    return out


def points(cards: Sequence[Card] | frozenset[Card]) -> int:
    return sum(plain_rank(c) for c in cards)


def as_split(melds: Sequence[Sequence[Card]], junk: Sequence[Card]) -> Split:
    return (frozenset(frozenset(m) for m in melds), frozenset(junk))


MELDS_IN = {
    id(pool): [list(m) for size in (3, 4) for m in combinations(pool, size) if plain_is_meld(m)] for pool in (LOW, HIGH)
}


@st.composite
def hands(draw: st.DrawFn, size_max: int = 8) -> tuple[list[Card], list[Card], bool]:
    """A hand (random cards, or half the time melds plus a few cards: Ù is then common),
    up to two of its cards taken, and the PH-13 one-taken-per-meld flag."""
    pool = draw(st.sampled_from([LOW, HIGH]))
    if draw(st.booleans()):
        hand = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=size_max, unique=True))
    else:
        hand = []
        for meld in draw(st.lists(st.sampled_from(MELDS_IN[id(pool)]), min_size=1, max_size=3)):
            if len(hand) + len(meld) <= size_max and not set(meld) & set(hand):
                hand.extend(meld)
        extra = draw(st.lists(st.sampled_from(pool), max_size=2, unique=True))
        hand.extend(c for c in extra if c not in hand and len(hand) < size_max)
    taken = draw(st.lists(st.sampled_from(hand), max_size=2, unique=True))
    return hand, taken, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(LOW + HIGH), max_size=5))
def test_is_meld_agrees_with_the_plain_reading_of_the_rules(cards: list[Card]) -> None:
    assert is_meld(cards) == plain_is_meld(cards)


@st.composite
def ten_card_hands(draw: st.DrawFn) -> tuple[list[Card], list[Card], bool]:
    """10 cards, the hand Ù is judged on (PH-4): up to three melds filled up with random
    cards of the same part of the deck (Ù is then common), up to two of them taken, and
    the PH-13 one-taken-per-meld flag."""
    pool = draw(st.sampled_from([LOW, HIGH]))
    hand: list[Card] = []
    for meld in draw(st.lists(st.sampled_from(MELDS_IN[id(pool)]), max_size=3)):
        if len(hand) + len(meld) <= 10 and not set(meld) & set(hand):
            hand.extend(meld)
    hand.extend(draw(st.permutations([c for c in pool if c not in hand]))[: 10 - len(hand)])
    taken = draw(st.lists(st.sampled_from(hand), max_size=2, unique=True))
    return hand, taken, draw(st.booleans())


def melded_splits(cards: Sequence[Card], taken: Sequence[Card], one_taken_per_meld: bool) -> list[Split]:
    """Every split of ``cards`` into Phỏm alone, no junk (at least one Phỏm): the brute
    force with the lowest card always in a block."""

    def blocks(left: list[Card]) -> Iterator[list[tuple[Card, ...]]]:
        if not left:
            yield []
            return
        first, rest = left[0], left[1:]
        for size in range(2, len(rest) + 1):
            for others in combinations(rest, size):
                block = (first, *others)
                if plain_is_meld(block):
                    for more in blocks([c for c in rest if c not in others]):
                        yield [block, *more]

    out = []
    for melds in blocks(list(cards)) if cards else []:
        if one_taken_per_meld and any(len(set(m) & set(taken)) > 1 for m in melds):
            continue
        out.append(as_split(melds, ()))
    return out


@settings(max_examples=400, deadline=None)
@given(hands())
def test_the_best_arrangement_has_the_fewest_junk_points_of_every_split(
    case: tuple[list[Card], list[Card], bool],
) -> None:
    hand, taken, flag = case
    splits = valid_splits(hand, taken, flag)
    arrangement = best_arrangement(hand, taken, one_taken_per_meld=flag)
    if not splits:
        assert arrangement is None
        return
    assert arrangement is not None
    # It is one of the splits (melds are Phỏm, disjoint, cover the hand with the junk) …
    assert as_split(arrangement.melds, arrangement.junk) in splits
    # … and no split leaves fewer junk points.
    assert arrangement.junk_points == min(points(junk) for _, junk in splits)


@settings(max_examples=300, deadline=None)
@given(hands())
def test_every_split_is_listed_once_and_the_best_is_the_first_of_the_cheapest(
    case: tuple[list[Card], list[Card], bool],
) -> None:
    hand, taken, flag = case
    listed = list(iter_arrangements(hand, taken, one_taken_per_meld=flag))
    assert len({as_split(a.melds, a.junk) for a in listed}) == len(listed)
    assert {as_split(a.melds, a.junk) for a in listed} == valid_splits(hand, taken, flag)
    if listed:
        cost = min((a.junk_points, len(a.junk), len(a.melds)) for a in listed)
        first = next(a for a in listed if (a.junk_points, len(a.junk), len(a.melds)) == cost)
        assert best_arrangement(hand, taken, one_taken_per_meld=flag) == first


@settings(max_examples=200, deadline=None)
@given(hands(), st.randoms(use_true_random=False))
def test_the_arrangement_depends_only_on_the_cards_not_their_order(
    case: tuple[list[Card], list[Card], bool], rng: random.Random
) -> None:
    hand, taken, flag = case
    shuffled = list(hand)
    rng.shuffle(shuffled)
    assert best_arrangement(shuffled, taken, one_taken_per_meld=flag) == best_arrangement(
        hand, taken, one_taken_per_meld=flag
    )


@settings(max_examples=300, deadline=None)
@given(hands(size_max=7), st.data())
def test_a_card_can_be_taken_exactly_when_some_split_melds_it_and_every_earlier_take(
    case: tuple[list[Card], list[Card], bool], data: st.DataObject
) -> None:
    hand, taken, flag = case
    pool = LOW if hand[0] in LOW else HIGH
    outside = [c for c in pool if c not in hand]
    discard = data.draw(st.sampled_from(outside))
    expected = bool(valid_splits([*hand, discard], [*taken, discard], flag))
    assert can_take(hand, discard, taken, one_taken_per_meld=flag) is expected


@settings(max_examples=200, deadline=None)
@given(ten_card_hands(), st.booleans())
def test_u_is_found_exactly_when_all_cards_or_all_but_one_free_card_can_be_melded(
    case: tuple[list[Card], list[Card], bool], drew: bool
) -> None:
    hand, taken, flag = case
    u = find_u(hand, taken, drew_from_stock=drew, one_taken_per_meld=flag)

    def with_king_set(split: Split) -> bool:
        return any(len({c.rank for c in m}) == 1 and next(iter(m)).rank == 13 for m in split[0])

    tron = melded_splits(hand, taken, flag)
    discards = {d: melded_splits([c for c in hand if c != d], taken, flag) for d in hand if d not in taken and not tron}
    discards = {d: splits for d, splits in discards.items() if splits}
    if tron:
        assert u is not None and u.tron and u.discard is None
        kings = not drew and any(with_king_set(split) for split in tron)
    elif discards:
        assert u is not None and not u.tron and u.discard in discards
        kings = not drew and any(with_king_set(split) for splits in discards.values() for split in splits)
    else:
        assert u is None
        return
    assert u.kings is kings
    # The melds are a split of the hand without the discard, with a set of Kings for Ù K.
    rest = [c for c in hand if c != u.discard]
    assert as_split(u.melds, ()) in melded_splits(rest, taken, flag)
    assert not u.kings or with_king_set(as_split(u.melds, ()))


def fewest_left(junk: list[Card], melds: list[list[Card]]) -> list[Card]:
    """What is left of ``junk`` after the sends that leave the fewest points, trying every
    order of sends and every meld for each (exhaustive)."""
    best = list(junk)
    for i, card in enumerate(junk):
        for j, meld in enumerate(melds):
            if plain_is_meld([*meld, card]):
                grown = [m if k != j else [*m, card] for k, m in enumerate(melds)]
                left = fewest_left(junk[:i] + junk[i + 1 :], grown)
                if points(left) < points(best):
                    best = left
    return best


def most_sent_points(junk: list[Card], melds: list[list[Card]]) -> int:
    return points(junk) - points(fewest_left(junk, melds))


@st.composite
def table_melds(draw: st.DrawFn, pool: list[Card], used: list[Card]) -> list[list[Card]]:
    free = [c for c in pool if c not in used]
    candidates = [list(m) for size in (3, 4) for m in combinations(free, size) if plain_is_meld(m)]
    laid: list[list[Card]] = []
    for meld in draw(st.lists(st.sampled_from(candidates), max_size=3)) if candidates else []:
        if not any(set(meld) & set(m) for m in laid):
            laid.append(meld)
    return laid


@settings(max_examples=200, deadline=None)
@given(hands(size_max=7), st.data())
def test_sending_gets_rid_of_the_most_junk_any_order_of_sends_could(
    case: tuple[list[Card], list[Card], bool], data: st.DataObject
) -> None:
    hand, _, _ = case
    pool = LOW if hand[0] in LOW else HIGH
    laid = data.draw(table_melds(pool, hand))
    sent = sends(hand, laid)
    grown = [list(m) for m in laid]
    for s in sent:  # each send fits when it is made
        assert plain_is_meld([*grown[s.meld_index], s.card])
        grown[s.meld_index].append(s.card)
    assert sum(plain_rank(s.card) for s in sent) == most_sent_points(hand, [list(m) for m in laid])


@settings(max_examples=150, deadline=None)
@given(hands(size_max=7), st.data())
def test_the_best_lay_down_leaves_the_fewest_points_after_sending(
    case: tuple[list[Card], list[Card], bool], data: st.DataObject
) -> None:
    hand, taken, flag = case
    pool = LOW if hand[0] in LOW else HIGH
    laid = data.draw(table_melds(pool, hand))
    lay_down = best_lay_down(hand, taken, laid, one_taken_per_meld=flag)
    splits = valid_splits(hand, taken, flag)
    if not splits:
        assert lay_down is None
        return
    assert lay_down is not None
    # A hand that can lay a meld lays one; among those, the fewest points kept after
    # sending and throwing the highest card left.
    can_lay = any(melds for melds, _ in splits)
    eligible = [(melds, junk) for melds, junk in splits if melds or not can_lay]

    def kept_points(junk: frozenset[Card]) -> int:
        left = fewest_left(sorted(junk, key=card_order), laid)
        return points(left) - max((plain_rank(c) for c in left), default=0)

    assert lay_down.junk_points == min(kept_points(junk) for _, junk in eligible)
    assert bool(lay_down.melds) == can_lay
    sent = {s.card for s in lay_down.sends}
    assert not set(taken) & sent and lay_down.discard not in taken
    kept = [*lay_down.junk, *([lay_down.discard] if lay_down.discard else [])]
    assert as_split(lay_down.melds, [*kept, *sent]) in splits


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_payments_are_whole_stakes_between_two_players_in_the_hand_under_known_reasons(data: st.DataObject) -> None:
    seats = data.draw(st.lists(st.integers(0, 8), min_size=2, max_size=4, unique=True))
    discards = []
    for _ in range(data.draw(st.integers(0, 16))):
        seat = data.draw(st.sampled_from(seats))
        others = [s for s in seats if s != seat]
        taken_by = data.draw(st.one_of(st.none(), st.sampled_from(others)))
        discards.append(Discard(seat, taken_by, data.draw(st.booleans())))
    if data.draw(st.booleans()):
        u = UWin(data.draw(st.sampled_from(seats)), data.draw(st.booleans()), data.draw(st.booleans()))
        payments = hand_payments(seats, discards, u=u)
        ended = [p for p in payments if p.reason.startswith("u_")]
        # Ù: the others pay 5 or 10 × S each, or one liable player pays it all (Ù đền).
        each = 10 if u.tron else 5
        assert sum(p.amount_stakes for p in ended) == each * (len(seats) - 1)
        assert all(p.payee == u.seat and p.payer != u.seat for p in ended)
    else:
        orders = data.draw(st.permutations(range(len(seats))))
        results = [
            PlayerResult(s, data.draw(st.integers(0, 100)), data.draw(st.booleans()), o)
            for s, o in zip(seats, orders, strict=True)
        ]
        payments = hand_payments(seats, discards, results=results)
        placed = [p for p in payments if p.reason in ("ve_nhi", "ve_ba", "ve_chot", "mom")]
        assert len(placed) == len(seats) - 1
        assert len({p.payee for p in placed}) == 1
    for p in payments:
        assert p.reason in REASONS
        assert p.amount_stakes > 0 and p.payer != p.payee
        assert {p.payer, p.payee} <= set(seats)


@settings(max_examples=40, deadline=None)
@given(hands(size_max=10))
def test_ten_card_hands_get_the_fewest_junk_points_too(case: tuple[list[Card], list[Card], bool]) -> None:
    hand, taken, flag = case
    splits = valid_splits(hand, taken, flag)
    arrangement = best_arrangement(hand, taken, one_taken_per_meld=flag)
    assert (arrangement is None) == (not splits)
    if arrangement is not None:
        assert as_split(arrangement.melds, arrangement.junk) in splits
        assert arrangement.junk_points == min(points(junk) for _, junk in splits)
