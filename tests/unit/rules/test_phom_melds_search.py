"""Phỏm's shared meld search against its uncached definition.

``phom_melds`` keeps one search per hand (``_search_of``, keyed by the cards as ``_code``
bits) and answers every question about the hand's subsets from it: each discard
(``can_discard``), each Ù, each lay-down. These properties hold the shortcuts to what they
replace: the melds listed from codes are ``_candidate_melds`` of the cards, in the same
order; a shared search, however warm, answers for any subset exactly as a search built for
that subset alone; ``can_discard`` is the best arrangement of the hand without the card.
Hands come from the whole deck and from dense parts of it (A–6, 10–A), where melds share
cards.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from socai.cards import ALL_CARDS, Card
from socai.rules.rummy import phom_melds
from socai.rules.rummy.phom_melds import best_arrangement, can_discard, card_order, find_u, iter_arrangements

LOW = [c for c in ALL_CARDS if c.rank <= 6 or c.rank == 14]
HIGH = [c for c in ALL_CARDS if c.rank >= 10]


@st.composite
def hands(draw: st.DrawFn, size_max: int = 10) -> tuple[list[Card], list[Card], bool]:
    """Cards from a dense part of the deck or the whole of it, up to three of them taken,
    and the PH-13 one-taken-per-meld flag."""
    pool = draw(st.sampled_from([LOW, HIGH, list(ALL_CARDS)]))
    hand = draw(st.lists(st.sampled_from(pool), max_size=size_max, unique=True))
    taken = draw(st.lists(st.sampled_from(hand), max_size=3, unique=True)) if hand else []
    return hand, taken, draw(st.booleans())


def fresh_arrangement(cards: list[Card], taken: list[Card], flag: bool) -> phom_melds.Arrangement | None:
    """The best arrangement from a search built for ``cards`` alone, not the shared one."""
    hand_mask, taken_mask = phom_melds._check_hand(cards, [c for c in taken if c in cards])
    search = phom_melds._Search(hand_mask, taken_mask, flag)
    return search.arrangement(search.full)


@settings(max_examples=400, deadline=None)
@given(hands(size_max=13))
def test_melds_from_codes_are_the_candidate_melds_of_the_cards_in_order(
    drawn: tuple[list[Card], list[Card], bool],
) -> None:
    hand = drawn[0]
    cards = tuple(sorted(hand, key=card_order))
    codes = tuple(phom_melds._code(c) for c in cards)
    assert list(codes) == sorted(codes)
    assert [phom_melds._CARD_OF_CODE[c] for c in codes] == list(cards)
    from_codes = [tuple(phom_melds._CARD_OF_CODE[c] for c in m) for m in phom_melds._code_melds(codes)]
    assert from_codes == phom_melds._candidate_melds(cards)
    # Codes sort as the cards do, so the search's tie-break order is the cards' order.
    by_codes = [tuple(phom_melds._CARD_OF_CODE[c] for c in m) for m in sorted(phom_melds._code_melds(codes))]
    assert by_codes == sorted(from_codes, key=lambda m: [card_order(c) for c in m])
    assert phom_melds._search_melds(sum(1 << c for c in codes)) == sorted(phom_melds._code_melds(codes))


@settings(max_examples=300, deadline=None)
@given(hands(), st.lists(st.integers(min_value=0, max_value=(1 << 10) - 1), min_size=1, max_size=8))
def test_a_shared_search_answers_every_subset_as_a_search_of_that_subset(
    drawn: tuple[list[Card], list[Card], bool], subsets: list[int]
) -> None:
    hand, taken, flag = drawn
    # Warm the shared search the way play does: the whole hand, every discard, the lay-downs.
    whole = best_arrangement(hand, taken, one_taken_per_meld=flag)
    assert whole == fresh_arrangement(hand, taken, flag)
    for card in hand:
        can_discard(hand, card, taken, one_taken_per_meld=flag)
    listed = list(iter_arrangements(hand, taken, one_taken_per_meld=flag))
    assert (whole is None) == (not listed)
    search = phom_melds._search_of(*phom_melds._check_hand(hand, taken), flag)
    for bits in subsets:
        sub = bits & search.full
        cards = [c for i, c in enumerate(search.cards) if sub >> i & 1]
        assert search.arrangement(sub) == fresh_arrangement(cards, taken, flag)


@settings(max_examples=300, deadline=None)
@given(hands())
def test_can_discard_is_the_best_arrangement_of_the_rest(drawn: tuple[list[Card], list[Card], bool]) -> None:
    hand, taken, flag = drawn
    for card in hand:
        rest = [c for c in hand if c != card]
        expected = card not in taken and fresh_arrangement(rest, taken, flag) is not None
        assert can_discard(hand, card, taken, one_taken_per_meld=flag) == expected


@settings(max_examples=200, deadline=None)
@given(st.permutations(LOW + HIGH[:8]), st.integers(min_value=0, max_value=3), st.booleans(), st.booleans())
def test_u_from_the_shared_search_is_the_same_after_any_other_question(
    pool: list[Card], taken_count: int, drew: bool, flag: bool
) -> None:
    hand, taken = pool[:10], pool[:taken_count]
    phom_melds._search_of.cache_clear()
    cold = find_u(hand, taken, drew_from_stock=drew, one_taken_per_meld=flag)
    for card in hand:
        can_discard(hand, card, taken, one_taken_per_meld=flag)
    list(iter_arrangements(hand, taken, one_taken_per_meld=flag))
    assert find_u(list(reversed(hand)), taken, drew_from_stock=drew, one_taken_per_meld=flag) == cold


def plain_loose_cards(hand: list[Card]) -> int:
    """Cards with fewer than two others of their rank and no run of three through them."""
    loose = 0
    for card in hand:
        same_rank = sum(1 for c in hand if c.rank == card.rank)
        rank = phom_melds.phom_rank(card)
        suit_ranks = {phom_melds.phom_rank(c) for c in hand if c.suit == card.suit}
        runs = any({low, low + 1, low + 2} <= suit_ranks for low in (rank - 2, rank - 1, rank))
        loose += same_rank < 3 and not runs
    return loose


@settings(max_examples=400, deadline=None)
@given(hands(size_max=13))
def test_loose_cards_are_those_no_phom_of_the_hand_could_hold(drawn: tuple[list[Card], list[Card], bool]) -> None:
    hand = drawn[0]
    assert phom_melds.loose_cards(hand) == plain_loose_cards(hand)
    melded = {c for m in phom_melds._candidate_melds(tuple(sorted(hand, key=card_order))) for c in m}
    assert phom_melds.loose_cards(hand) == len(set(hand) - melded)


def reference_sends(junk: list[Card], laid_melds: list[tuple[Card, ...]]) -> tuple[phom_melds.Send, ...]:
    """``sends`` on Cards, as defined before codes: the greedy pass in ``card_order``, then
    the exact search over the orders of sends when it keeps cards and sends fewer points."""
    melds = [list(m) for m in laid_melds]
    fits = [phom_melds._fits(m) for m in melds]
    left = sorted(junk, key=card_order)
    out: list[phom_melds.Send] = []
    progress = True
    while progress:
        progress = False
        for card in list(left):
            for index, fit in enumerate(fits):
                if card in fit:
                    melds[index].append(card)
                    fits[index] = phom_melds._fits(melds[index])
                    left.remove(card)
                    out.append(phom_melds.Send(card, index))
                    progress = True
                    break
    if out and left:
        best = most_sends(tuple(laid_melds), tuple(sorted(junk, key=card_order)))
        if best[0] > sum(phom_melds.card_points(s.card) for s in out):
            return best[1]
    return tuple(out)


def most_sends(melds: tuple[tuple[Card, ...], ...], left: tuple[Card, ...]) -> tuple[int, tuple[phom_melds.Send, ...]]:
    best: tuple[int, tuple[phom_melds.Send, ...]] = (0, ())
    for card in left:
        for index, meld in enumerate(melds):
            if card not in phom_melds._fits(meld):
                continue
            grown = (*melds[:index], (*meld, card), *melds[index + 1 :])
            rest = most_sends(grown, tuple(c for c in left if c != card))
            total = rest[0] + phom_melds.card_points(card)
            if total > best[0]:
                best = (total, (phom_melds.Send(card, index), *rest[1]))
    return best


ALL_MELDS = [m for m in phom_melds._candidate_melds(tuple(sorted(LOW, key=card_order)))] + [
    m for m in phom_melds._candidate_melds(tuple(sorted(HIGH, key=card_order)))
]


@st.composite
def laid_and_junk(draw: st.DrawFn) -> tuple[list[Card], list[tuple[Card, ...]]]:
    """Up to three disjoint laid melds of a dense part of the deck, and junk around them."""
    laid: list[tuple[Card, ...]] = []
    for meld in draw(st.lists(st.sampled_from(ALL_MELDS), max_size=3)):
        if not any(set(meld) & set(m) for m in laid):
            laid.append(meld)
    used = {c for m in laid for c in m}
    # Mostly cards that fit the melds or would once they grow (the same rank, or within
    # three ranks in the suit): where sends chain and compete.
    near = [
        c
        for c in ALL_CARDS
        if c not in used
        and any(
            c.rank == m.rank or (c.suit == m.suit and abs(phom_melds.phom_rank(c) - phom_melds.phom_rank(m)) <= 3)
            for m in used
        )
    ]
    pool = near if near and draw(st.integers(0, 3)) else [c for c in LOW + HIGH if c not in used]
    junk = draw(st.lists(st.sampled_from(pool), max_size=8, unique=True))
    return junk, laid


@settings(max_examples=500, deadline=None)
@given(laid_and_junk())
def test_sends_on_codes_are_the_sends_defined_on_cards(drawn: tuple[list[Card], list[tuple[Card, ...]]]) -> None:
    junk, laid = drawn
    assert phom_melds.sends(junk, laid) == reference_sends(junk, laid)
    memo: phom_melds._SendsMemo = {}
    for cut in range(len(junk) + 1):  # one memo serves every junk sent to the same melds
        assert phom_melds._sends(junk[:cut], laid, memo) == reference_sends(junk[:cut], laid)


@settings(max_examples=300, deadline=None)
@given(laid_and_junk())
def test_the_exact_send_search_on_codes_is_the_search_on_cards(
    drawn: tuple[list[Card], list[tuple[Card, ...]]],
) -> None:
    junk, laid = drawn
    junk = junk[:6]
    left = tuple(sorted(junk, key=card_order))
    found = phom_melds._most_sends(
        tuple(phom_melds._laid_mask(m) for m in laid), tuple(phom_melds._code(c) for c in left), {}
    )
    expected = most_sends(tuple(laid), left)
    assert found[0] == expected[0]
    assert tuple(phom_melds.Send(phom_melds._CARD_OF_CODE[c], i) for c, i in found[1]) == expected[1]
