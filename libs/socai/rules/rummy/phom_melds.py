"""Phỏm / Tá Lả: the pure card logic and the payment table (RULES.md §6, PH-1 … PH-19).

This module holds what the game module (``socai.rules.rummy.phom``) needs to know about cards and
money, with no state and no events: every function is pure and deterministic.

Cards and melds (§6.2):

- A Phỏm (meld) is 3 or 4 cards of one rank, or 3 or more consecutive cards of one suit.
  A is the lowest card only: A-2-3 is a run, Q-K-A and K-A-2 are not (PH-10).
- Card points are A = 1, 2–10 face value, J = 11, Q = 12, K = 13 (PH-2).
- A taken card (ăn) must end inside a laid meld (PH-13); the optional PH-13 flag
  ``one_taken_per_meld`` allows at most one taken card per meld. Taken cards still held
  count as the taker's own cards when the next card is taken: only the flag limits how
  they share a meld.

The best arrangement (``best_arrangement``) splits a hand into disjoint melds and junk
(bài rác) so that the junk has the fewest points, every taken card in a meld. Ties, in
order: fewer junk cards; fewer melds (a run of 6 is laid whole, not as two runs of 3); then
card by card in ascending order (``card_order``: A♠ A♣ A♦ A♥ 2♠ … K♥), the first card
that two arrangements treat differently goes into a meld rather than junk, and into the
meld whose cards sort first (shorter before longer at an equal start). The search decides
the lowest undecided card each step (junk, or one of the melds it starts) and remembers
the best finish for each set of undecided cards: at most 2^h sets for h cards (1,024 for
10), a few dozen for real hands.

Laying down (§6.1 last turn): ``best_lay_down`` chooses the melds to lay, the junk to send
and the final discard that keep the fewest points; with ``lay_every_meld`` (Phỏm rules
version 2) only among lay-downs that leave no Phỏm among the cards kept or sent
(``meld_left_to_lay``). Ù (``find_u``) is judged on the 10 cards held after a take or draw.

Payments (§6.4) are obligations in units of the stake S (``Payment.amount_stakes``), each
with a reason code from ``REASONS`` and the rule it applies. Caps at a payer's table chips
(GEN-4) are applied later by the game kit, not here.

- Taken cards (PH-6, PH-19): the discarder pays the taker; per taker, the 1st take costs
  1 × S, the 2nd 2 × S, the k-th k × S; a chốt (the discarder's fourth and last discard,
  PH-19) always costs 5 × S. A chốt take counts in the taker's ordinal.
- Placement (§6.4, PH-2, PH-3, PH-11, PH-15): by junk points, lower first; equal points go
  to whoever laid down earlier on the final turn; móm players rank last and pay 4 × S
  instead of their position amount. Everyone pays the first-place player.
- Ù (PH-4, PH-5, PH-12, PH-17): tròn 10 × S from each other player, thường and Ù K
  5 × S, tròn and K together 10 × S. Ù payments replace placement and móm; take payments
  stand.
- Ù đền (§6.2, PH-7, PH-18): the latest chốt-taker, or if nobody took a chốt the player
  whose three consecutive discards were taken latest, pays what the whole table would
  have paid; the others pay nothing. If that player is the Ù player, nobody is liable and
  everyone pays their own share.
- Disconnect (§6.5, PH-14): 5 × S to each remaining player.
- Ù khan (§6.6, PH-16, optional): 5 × S from each with 9 cards, 10 × S with 10.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, pairwise
from typing import Final

from socai.cards import ACE, KING, Card
from socai.errors import RuleViolation, broken, check

# A meld is kept as a tuple of cards in ``card_order``.
Meld = tuple[Card, ...]

# The search is exponential in the number of cards: a limit keeps it bounded. A Phỏm hand
# holds at most 10 cards (PH-1), plus room for tests and laid melds passed back in.
HAND_CARDS_MAX: Final = 16
# Laying down may list every arrangement of the hand (114 for a run of 10, the most a
# hill-climbing search over 10-card hands found): a Phỏm hand lays down with at most 10
# cards (PH-1).
LAY_DOWN_CARDS_MAX: Final = 10

# Ù is judged on the 10 cards a player holds after a take or draw (9 and the new card), or
# on the first player's 10 before the first discard (§6.2, PH-4): tròn is all 10 in Phỏm,
# thường 9 in Phỏm and 1 to throw. No other hand size is Ù or not Ù.
U_HAND_CARDS: Final = 10

SET_CARDS_MIN: Final = 3
SET_CARDS_MAX: Final = 4
RUN_CARDS_MIN: Final = 3


# --- cards and points -------------------------------------------------------------------


def phom_rank(card: Card) -> int:
    """The card's rank in Phỏm, 1 (A) to 13 (K): A is low only (PH-10)."""
    return 1 if card.rank == ACE else card.rank


def card_points(card: Card) -> int:
    """Points of a card left in hand (PH-2): A = 1, 2–10 face value, J = 11, Q = 12, K = 13."""
    return 1 if card.rank == ACE else card.rank


def junk_points(cards: Iterable[Card]) -> int:
    """Total points of ``cards`` (PH-2): what a player's junk (bài rác) scores."""
    return sum(card_points(c) for c in cards)


def card_order(card: Card) -> tuple[int, int]:
    """The order cards are written and searched in: Phỏm rank (A low), then suit ♠ ♣ ♦ ♥.

    The suit part is the canonical deck order, used only to make results deterministic:
    Phỏm's own suit order (♥ > ♦ > ♣ > ♠) has no use in the rules (PH-3).
    """
    return (phom_rank(card), card.suit)


def _sorted(cards: Iterable[Card]) -> tuple[Card, ...]:
    return tuple(sorted(cards, key=card_order))


def _distinct(cards: Sequence[Card]) -> bool:
    return len(set(cards)) == len(cards)


# --- melds ------------------------------------------------------------------------------


def is_set(cards: Sequence[Card]) -> bool:
    """3 or 4 distinct cards of one rank (different suits)."""
    return SET_CARDS_MIN <= len(cards) <= SET_CARDS_MAX and _distinct(cards) and len({c.rank for c in cards}) == 1


def is_run(cards: Sequence[Card]) -> bool:
    """3 or more consecutive cards of one suit, A low only (PH-10: A-2-3 yes, Q-K-A no)."""
    if len(cards) < RUN_CARDS_MIN or len({c.suit for c in cards}) != 1:
        return False
    ranks = sorted(phom_rank(c) for c in cards)
    return all(b == a + 1 for a, b in pairwise(ranks))


def is_meld(cards: Sequence[Card]) -> bool:
    """Whether ``cards`` form one Phỏm (§6.2): a set of 3–4 of a rank or a run of 3+ of a suit."""
    return is_set(cards) or is_run(cards)


def has_meld(cards: Sequence[Card]) -> bool:
    """Whether any Phỏm can be made from ``cards``; a player without one at the end is móm (PH-11)."""
    return bool(_candidate_melds(_sorted(set(cards))))


def _candidate_melds(cards: tuple[Card, ...]) -> list[Meld]:
    """Every meld made of ``cards`` (already in ``card_order``), each in ``card_order``."""
    by_rank: dict[int, list[Card]] = defaultdict(list)
    by_suit: dict[int, list[Card]] = defaultdict(list)
    for c in cards:
        by_rank[c.rank].append(c)
        by_suit[c.suit].append(c)
    melds: list[Meld] = []
    for same_rank in by_rank.values():
        for size in range(SET_CARDS_MIN, min(len(same_rank), SET_CARDS_MAX) + 1):
            melds.extend(combinations(same_rank, size))
    for same_suit in by_suit.values():
        # ``same_suit`` is in rank order (A low): every stretch of 3+ consecutive ranks is a run.
        start = 0
        for end in range(1, len(same_suit) + 1):
            if end == len(same_suit) or phom_rank(same_suit[end]) != phom_rank(same_suit[end - 1]) + 1:
                stretch = same_suit[start:end]
                for i in range(len(stretch)):
                    for j in range(i + RUN_CARDS_MIN, len(stretch) + 1):
                        melds.append(tuple(stretch[i:j]))
                start = end
    return melds


# --- the best arrangement ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Arrangement:
    """A hand split into disjoint melds and junk (bài rác), both in ``card_order``.

    ``melds`` are ordered by their first card.
    """

    melds: tuple[Meld, ...]
    junk: tuple[Card, ...]

    @property
    def junk_points(self) -> int:
        return junk_points(self.junk)


def _check_hand(hand: Sequence[Card], taken: Iterable[Card]) -> tuple[int, int]:
    """The hand and its taken cards as masks of ``_code`` bits, after the shape checks.

    Raises RuleViolation("BAD_HAND") for a repeated card, a hand over HAND_CARDS_MAX cards,
    or a taken card that is not in the hand.
    """
    hand_mask, count = 0, 0
    for card in hand:
        rank = card.rank  # ``_code``, inline: this runs for every question about a hand
        hand_mask |= 1 << ((0 if rank == ACE else rank - 1) * 4 + card.suit)
        count += 1
    taken_mask = _mask_of(taken)
    if hand_mask.bit_count() != count:
        raise RuleViolation("BAD_HAND", "a card appears twice in the hand")
    if count > HAND_CARDS_MAX:
        raise RuleViolation("BAD_HAND", f"{count} cards is more than {HAND_CARDS_MAX}")
    if taken_mask & ~hand_mask:
        raise RuleViolation("BAD_HAND", "a taken card is not in the hand")
    return hand_mask, taken_mask


def _mask_of(cards: Iterable[Card]) -> int:
    """The ``_code`` bits of ``cards``."""
    mask = 0
    for card in cards:
        rank = card.rank  # ``_code``, inline
        mask |= 1 << ((0 if rank == ACE else rank - 1) * 4 + card.suit)
    return mask


def _codes_of(mask: int) -> tuple[int, ...]:
    """The set bits of ``mask``, lowest first."""
    codes = []
    while mask:
        low = mask & -mask
        codes.append(low.bit_length() - 1)
        mask ^= low
    return tuple(codes)


def _cards_of(mask: int) -> tuple[Card, ...]:
    """The cards of the ``_code`` bits of ``mask``, in ``card_order``."""
    return tuple(_CARD_OF_CODE[c] for c in _codes_of(mask))


def _code(card: Card) -> int:
    """The card as a small int, 0 (A♠) … 51 (K♥), in ``card_order``: the search's key (an
    int hashes and compares at C speed, a Card through its dataclass methods)."""
    rank = card.rank
    return (0 if rank == ACE else rank - 1) * 4 + card.suit


# The card of each ``_code``, and the cards of each 52-bit mask of codes are those of its
# set bits, lowest first: in ``card_order``.
_CARD_OF_CODE: Final[tuple[Card, ...]] = tuple(Card(ACE if code < 4 else code // 4 + 1, code % 4) for code in range(52))


def _code_melds(codes: tuple[int, ...]) -> list[tuple[int, ...]]:
    """``_candidate_melds`` on codes (``codes`` ascending), in the same order."""
    by_rank: dict[int, list[int]] = defaultdict(list)
    by_suit: dict[int, list[int]] = defaultdict(list)
    for c in codes:
        by_rank[c >> 2].append(c)
        by_suit[c & 3].append(c)
    melds: list[tuple[int, ...]] = []
    for same_rank in by_rank.values():
        for size in range(SET_CARDS_MIN, min(len(same_rank), SET_CARDS_MAX) + 1):
            melds.extend(combinations(same_rank, size))
    for same_suit in by_suit.values():
        # Ascending codes of one suit: consecutive ranks differ by 4 (A low, PH-10).
        start = 0
        for end in range(1, len(same_suit) + 1):
            if end == len(same_suit) or same_suit[end] != same_suit[end - 1] + 4:
                stretch = same_suit[start:end]
                for i in range(len(stretch)):
                    for j in range(i + RUN_CARDS_MIN, len(stretch) + 1):
                        melds.append(tuple(stretch[i:j]))
                start = end
    return melds


# The sets of three and four of each rank among the four cards of a rank: by the rank's
# four bits of a hand's mask (``_code`` is rank * 4 + suit), in ``_code_melds``'s order.
_SETS_OF: Final[tuple[tuple[tuple[tuple[int, ...], ...], ...], ...]] = tuple(
    tuple(
        tuple(
            meld
            for size in range(SET_CARDS_MIN, SET_CARDS_MAX + 1)
            for meld in combinations([rank * 4 + suit for suit in range(4) if bits >> suit & 1], size)
        )
        for bits in range(16)
    )
    for rank in range(13)
)


_ONES: Final = sum(1 << (rank * 4) for rank in range(13))


def _set_ranks(hand_mask: int) -> int:
    """A bit at ``rank * 4`` for each rank of which ``hand_mask`` holds 3 or 4 cards: the
    four suits' bits of every rank summed at once (at most 4, so the nibbles never carry);
    a count plus one has its bit 2 set only from 3 up."""
    count = (hand_mask & _ONES) + (hand_mask >> 1 & _ONES) + (hand_mask >> 2 & _ONES) + (hand_mask >> 3 & _ONES)
    return (count + _ONES) >> 2 & _ONES


def _run_starts(hand_mask: int) -> int:
    """The bit of each card of ``hand_mask`` whose suit holds the next two ranks too."""
    return hand_mask & hand_mask >> 4 & hand_mask >> 8


def _search_melds(hand_mask: int) -> list[tuple[int, ...]]:
    """``_code_melds`` of the cards of ``hand_mask``, sorted: the search's tie-break order
    (codes compare as the cards do). Read off the mask's bits: a run starts at each card
    whose suit holds the next two ranks too."""
    melds: list[tuple[int, ...]] = []
    set_ranks = _set_ranks(hand_mask)
    while set_ranks:
        low = set_ranks & -set_ranks
        set_ranks ^= low
        rank = (low.bit_length() - 1) >> 2
        melds.extend(_SETS_OF[rank][hand_mask >> (rank * 4) & 15])
    starts = _run_starts(hand_mask)
    while starts:
        low = starts & -starts
        starts ^= low
        first = low.bit_length() - 1
        last = first + 8
        while True:
            melds.append(tuple(range(first, last + 1, 4)))
            last += 4
            if not hand_mask >> last & 1:
                break
    melds.sort()
    return melds


# One step of the search for a set of undecided cards: (junk points, junk cards, melds) of
# the best way to finish, and the meld chosen for the lowest card (None: it is junk).
_Step = tuple[int, int, int, int | None]


class _Search:
    """The exact search behind ``best_arrangement``, on bit masks of the hand's cards (bit
    i is ``cards[i]``). Built once per hand (``_search_of``): its memo then answers every
    question about the hand's subsets (each discard, each Ù, each lay-down)."""

    __slots__ = ("arranged", "cards", "full", "meld_cards", "meld_masks", "melds_of", "memo", "points", "taken_mask")

    def __init__(self, hand_mask: int, taken_codes: int, one_taken_per_meld: bool) -> None:
        cards: list[Card] = []
        self.points: list[int] = []
        bit: dict[int, int] = {}  # code -> the card's bit here
        taken_mask = 0
        left = hand_mask
        while left:  # the codes, lowest first: the cards in ``card_order``
            low = left & -left
            left ^= low
            code = low.bit_length() - 1
            bit[code] = 1 << len(cards)
            if taken_codes & low:
                taken_mask |= bit[code]
            cards.append(_CARD_OF_CODE[code])
            self.points.append((code >> 2) + 1)  # ``card_points``: A 1 … K 13
        self.cards = tuple(cards)
        self.full = (1 << len(cards)) - 1  # every card of the hand undecided
        self.taken_mask = taken_mask
        masks: list[int] = []
        meld_cards: list[Meld] = []
        melds_of: list[list[int]] = [[] for _ in cards]
        # Each meld is listed under its lowest card, in the tie-break order of the module
        # docstring: the meld whose cards sort first, a shorter one first at an equal start.
        for meld in _search_melds(hand_mask):
            mask = 0
            for c in meld:
                mask |= bit[c]
            if one_taken_per_meld and (mask & self.taken_mask).bit_count() > 1:
                continue
            melds_of[bit[meld[0]].bit_length() - 1].append(len(masks))
            masks.append(mask)
            meld_cards.append(tuple(_CARD_OF_CODE[c] for c in meld))
        self.meld_masks = masks
        self.meld_cards = meld_cards
        self.melds_of = melds_of
        self.memo: dict[int, _Step | None] = {0: (0, 0, 0, None)}
        self.arranged: dict[int, Arrangement | None] = {}

    def best(self, undecided: int) -> _Step | None:
        """The best way to decide the cards of ``undecided``; None if a taken card cannot be melded."""
        if undecided in self.memo:
            return self.memo[undecided]
        low = undecided & -undecided
        i = low.bit_length() - 1
        best: _Step | None = None
        # Melds first: at equal cost a card goes into a meld rather than into junk.
        for m in self.melds_of[i]:
            mask = self.meld_masks[m]
            if mask & undecided != mask:
                continue
            rest = self.best(undecided & ~mask)
            if rest is not None and (best is None or (rest[0], rest[1], rest[2] + 1) < best[:3]):
                best = (rest[0], rest[1], rest[2] + 1, m)
        if not low & self.taken_mask:
            rest = self.best(undecided & ~low)
            if rest is not None and (best is None or (rest[0] + self.points[i], rest[1] + 1, rest[2]) < best[:3]):
                best = (rest[0] + self.points[i], rest[1] + 1, rest[2], None)
        self.memo[undecided] = best
        return best

    def arrangement(self, undecided: int) -> Arrangement | None:
        """The arrangement ``best`` found for ``undecided``, rebuilt step by step (and kept)."""
        if undecided in self.arranged:
            return self.arranged[undecided]
        result = self._rebuild(undecided)
        self.arranged[undecided] = result
        return result

    def _rebuild(self, undecided: int) -> Arrangement | None:
        if self.best(undecided) is None:
            return None
        melds: list[Meld] = []
        junk: list[Card] = []
        while undecided:
            step = self.memo[undecided]
            if step is None:  # ``check`` in a form mypy narrows on
                broken("a solvable set of cards has an unsolvable rest")
            low = undecided & -undecided
            if step[3] is None:
                junk.append(self.cards[low.bit_length() - 1])
                undecided &= ~low
            else:
                melds.append(self.meld_cards[step[3]])
                undecided &= ~self.meld_masks[step[3]]
        return Arrangement(tuple(melds), tuple(junk))

    def bit_of(self, card: Card) -> int:
        """The bit of ``card`` (in the hand) in this search's masks."""
        return 1 << self.cards.index(card)


# A self-played hand asks about the same cards again and again (the candidates, the take,
# the discard, Ù and the lay-down of a turn, then apply again for the move played): one
# search per (cards, taken cards, flag), its memo filled as questions come. The memos are
# pure answers about immutable values, so sharing them is safe (two threads filling one
# write the same values). Bounded: a search holds at most 2^10 steps for a 10-card hand.
_SEARCHES_MAX: Final = 2048


@lru_cache(maxsize=_SEARCHES_MAX)
def _search_of(hand_mask: int, taken_mask: int, one_taken_per_meld: bool) -> _Search:
    return _Search(hand_mask, taken_mask, one_taken_per_meld)


def best_arrangement(
    hand: Sequence[Card], taken: Iterable[Card] = (), *, one_taken_per_meld: bool = False
) -> Arrangement | None:
    """The melds and junk of ``hand`` with the fewest junk points, every taken card in a meld.

    ``taken`` are the cards of ``hand`` that were taken from other players (ăn, PH-13).
    Ties are broken as the module docstring says, so the result depends only on the set of
    cards. Returns None when the taken cards cannot all be in melds at once.
    Raises RuleViolation("BAD_HAND") for a repeated card, more than HAND_CARDS_MAX cards or
    a taken card not in the hand.
    """
    search = _search_of(*_check_hand(hand, taken), one_taken_per_meld)
    return search.arrangement(search.full)


def iter_arrangements(
    hand: Sequence[Card], taken: Iterable[Card] = (), *, one_taken_per_meld: bool = False
) -> Iterable[Arrangement]:
    """Every way to split ``hand`` into disjoint melds and junk with each taken card in a meld.

    Used by ``best_lay_down`` (where sending makes the cost depend on the whole junk) and
    by tests. Arrangements come in the tie-break order of ``best_arrangement``. The count
    grows with sets and runs that share cards: 114 for a run of 10 cards, the most found
    for any 10-card hand. Raises as ``best_arrangement``.
    """
    return _arrangements(_search_of(*_check_hand(hand, taken), one_taken_per_meld))


def _arrangements(search: _Search) -> Iterable[Arrangement]:
    """``iter_arrangements`` of the hand of ``search``."""
    cards = search.cards

    def walk(undecided: int, melds: tuple[int, ...], junk: tuple[int, ...]) -> Iterable[Arrangement]:
        if search.best(undecided) is None:
            return
        if not undecided:
            yield Arrangement(tuple(search.meld_cards[m] for m in melds), tuple(cards[i] for i in junk))
            return
        low = undecided & -undecided
        i = low.bit_length() - 1
        for m in search.melds_of[i]:
            mask = search.meld_masks[m]
            if mask & undecided == mask:
                yield from walk(undecided & ~mask, (*melds, m), junk)
        if not low & search.taken_mask:
            yield from walk(undecided & ~low, melds, (*junk, i))

    return walk(search.full, (), ())


# --- taking and discarding --------------------------------------------------------------


def can_take(
    hand: Sequence[Card], discard: Card, taken: Iterable[Card] = (), *, one_taken_per_meld: bool = False
) -> bool:
    """Whether the player holding ``hand`` may take ``discard`` (ăn, §6.1, PH-13).

    Taking is allowed only when ``discard`` makes a Phỏm with cards the player holds while
    every card taken before (``taken``, a part of ``hand``) is in a Phỏm too, all at once.
    Raises RuleViolation("BAD_HAND") as ``best_arrangement``, and when ``discard`` is
    already in ``hand``.
    """
    if discard in set(hand):
        raise RuleViolation("BAD_HAND", f"{discard} is already in the hand")
    taken_all = [*taken, discard]
    return best_arrangement([*hand, discard], taken_all, one_taken_per_meld=one_taken_per_meld) is not None


def can_discard(
    hand: Sequence[Card], card: Card, taken: Iterable[Card] = (), *, one_taken_per_meld: bool = False
) -> bool:
    """Whether ``card`` may be discarded: it was not taken, and the taken cards left can all
    still be melded without it (PH-13: a taken card stays in a Phỏm that is laid).

    Raises RuleViolation("BAD_HAND") as ``best_arrangement``, and when ``card`` is not in ``hand``.
    """
    taken = tuple(taken)
    code = _code(card)
    if not _mask_of(hand) >> code & 1:
        raise RuleViolation("BAD_HAND", f"{card} is not in the hand")
    if _mask_of(taken) >> code & 1:
        return False
    try:
        hand_mask, taken_mask = _check_hand(hand, taken)
    except RuleViolation:
        rest = [c for c in hand if c != card]
        return best_arrangement(rest, taken, one_taken_per_meld=one_taken_per_meld) is not None
    # The search of the whole hand answers for the hand without ``card``: the melds of the
    # rest are the hand's melds without it, in the same order.
    search = _search_of(hand_mask, taken_mask, one_taken_per_meld)
    return search.best(search.full & ~search.bit_of(card)) is not None


# --- sending (gửi) ----------------------------------------------------------------------


def can_send(card: Card, meld: Sequence[Card]) -> bool:
    """Whether ``card`` fits the laid ``meld``: the meld with it is still a Phỏm (gửi, §6.1)."""
    return card not in meld and is_meld([*meld, card])


@dataclass(frozen=True, slots=True)
class Send:
    """One junk card sent (gửi) to the laid meld at ``meld_index`` of the melds given."""

    card: Card
    meld_index: int


def _fits(meld: Sequence[Card]) -> frozenset[Card]:
    """The cards that can be sent to the laid ``meld``: the missing suit of a set of three,
    the card below and above a run (A low only, PH-10).

    Raises RuleViolation("BAD_MELD") when ``meld`` is not a Phỏm.
    """
    return _fits_of(tuple(meld))


# Laid melds stay on the table for the rest of the hand and every send and lay-down asks
# what fits them again (a self-played hand asks ~70 times of ~1 or 2 distinct melds): each
# answer is kept, by the meld's cards. Bounded; pure.
@lru_cache(maxsize=4096)
def _fits_of(meld: tuple[Card, ...]) -> frozenset[Card]:
    if is_set(meld):
        rank = meld[0].rank
        return (
            frozenset({Card(rank, suit) for suit in range(4)} - set(meld)) if len(meld) < SET_CARDS_MAX else frozenset()
        )
    if not is_run(meld):
        raise RuleViolation("BAD_MELD", "a laid meld is not a Phỏm")
    ranks = sorted(phom_rank(c) for c in meld)
    ends = (r for r in (ranks[0] - 1, ranks[-1] + 1) if 1 <= r <= KING)
    return frozenset({Card(ACE if r == 1 else r, meld[0].suit) for r in ends})


# What fits a meld, by the meld's ``_code`` bits: ``_fits_of`` of its cards, as bits (a
# send asks of every meld for every junk card, and the exact search of every meld as it
# grows). Bounded; pure.
@lru_cache(maxsize=4096)
def _fit_mask(meld_mask: int) -> int:
    return _mask_of(_fits_of(_cards_of(meld_mask)))


def _laid_mask(meld: Sequence[Card]) -> int:
    """The ``_code`` bits of a laid meld. Raises RuleViolation("BAD_MELD") when it is not a
    Phỏm (``_fits``), a card twice included."""
    mask = _mask_of(meld)
    if mask.bit_count() != len(meld):
        raise RuleViolation("BAD_MELD", "a laid meld is not a Phỏm")
    return mask


# The exact search's answers, by the melds as they have grown and the cards left to send
# (``_code`` bits and codes); each send is (card code, meld index).
_SendsMemo = dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, tuple[tuple[int, int], ...]]]


def sends(junk: Sequence[Card], laid_melds: Sequence[Sequence[Card]]) -> tuple[Send, ...]:
    """The largest set of ``junk`` cards that can be sent to ``laid_melds`` (other players').

    A sent card extends its meld, so a second card may then fit (7♥ 8♥ 9♥ takes 10♥, then
    J♥). Cards are tried in ``card_order``, each to the first meld it fits, until nothing
    fits; a send can stop another card from fitting (2♣ sent to a set of 2s leaves A♣ out
    of 3♣ 4♣ 5♣ 6♣), so when that pass keeps some cards an exact search over the orders
    of sends is used instead if it sends more points.
    Raises RuleViolation("BAD_MELD") when a laid meld is not a Phỏm.
    """
    return _sends(junk, laid_melds, {})


def _sends(junk: Sequence[Card], laid_melds: Sequence[Sequence[Card]], memo: _SendsMemo) -> tuple[Send, ...]:
    """``sends``, with the exact search's ``memo`` given: one memo serves every junk sent
    to the same ``laid_melds`` (``best_lay_down`` asks once per arrangement)."""
    laid = tuple(_laid_mask(m) for m in laid_melds)
    melds = list(laid)
    fits = [_fit_mask(m) for m in melds]
    left = list(_sorted(junk))
    out: list[Send] = []
    progress = True
    while progress:
        progress = False
        for card in list(left):
            bit = 1 << _code(card)
            for index, fit in enumerate(fits):
                if fit & bit:
                    melds[index] |= bit
                    fits[index] = _fit_mask(melds[index])
                    left.remove(card)
                    out.append(Send(card, index))
                    progress = True
                    break
    if out and left:
        # A card sent to one meld can stop another from growing (2♣ sent to 2♠ 2♦ 2♥
        # leaves A♣ out of 3♣ 4♣ 5♣ 6♣): when the greedy pass kept some cards, the exact
        # search decides, and the greedy order stands whenever it already sends the most.
        best = _most_sends(laid, tuple(_code(c) for c in _sorted(junk)), memo)
        if best[0] > sum(card_points(s.card) for s in out):
            return tuple(Send(_CARD_OF_CODE[code], index) for code, index in best[1])
    return tuple(out)


def _most_sends(
    melds: tuple[int, ...], left: tuple[int, ...], memo: _SendsMemo
) -> tuple[int, tuple[tuple[int, int], ...]]:
    """The sends of the cards ``left`` (codes, in ``card_order``) to ``melds`` (their bits)
    with the most points sent, trying every card that fits each meld in ``card_order``
    (the first best found wins)."""
    key = (melds, left)
    if key in memo:
        return memo[key]
    best: tuple[int, tuple[tuple[int, int], ...]] = (0, ())
    for code in left:
        bit = 1 << code
        for index, meld in enumerate(melds):
            if not _fit_mask(meld) & bit:
                continue
            grown = (*melds[:index], meld | bit, *melds[index + 1 :])
            rest = _most_sends(grown, tuple(c for c in left if c != code), memo)
            total = rest[0] + (code >> 2) + 1  # ``card_points``
            if total > best[0]:
                best = (total, ((code, index), *rest[1]))
    memo[key] = best
    return best


@dataclass(frozen=True, slots=True)
class LayDown:
    """The last turn (§6.1): melds laid (hạ), junk sent (gửi), the final ``discard`` (None
    when no card is left to throw), and ``junk``, what is kept and scored."""

    melds: tuple[Meld, ...]
    sends: tuple[Send, ...]
    discard: Card | None
    junk: tuple[Card, ...]

    @property
    def junk_points(self) -> int:
        return junk_points(self.junk)


def meld_left_to_lay(kept: Sequence[Card]) -> Meld | None:
    """A Phỏm among ``kept``, the cards a player keeps after laying down, that could still
    be laid with a card left to throw, or None (§6.1 last turn: lay down all Phỏm, then
    send junk; junk is what is in no Phỏm, §6.2). Cards that are one Phỏm and nothing else
    stay: laying them would leave no final discard.

    Raises RuleViolation("BAD_HAND") as ``best_arrangement``.
    """
    hand_mask, _ = _check_hand(kept, ())
    return _meld_left(hand_mask)


# Asked of every arrangement ``best_lay_down`` weighs and again by the table when the lay
# is played, for the same cards: kept by the cards (their ``_code`` bits). Bounded; pure.
@lru_cache(maxsize=4096)
def _meld_left(hand_mask: int) -> Meld | None:
    if not _set_ranks(hand_mask) and not _run_starts(hand_mask):
        return None  # no Phỏm at all among the cards
    codes = _codes_of(hand_mask)
    meld = next((m for m in _code_melds(codes) if len(m) < len(codes)), None)
    return None if meld is None else tuple(_CARD_OF_CODE[c] for c in meld)


def best_lay_down(
    hand: Sequence[Card],
    taken: Iterable[Card] = (),
    laid_melds: Sequence[Sequence[Card]] = (),
    *,
    one_taken_per_meld: bool = False,
    lay_every_meld: bool = False,
) -> LayDown | None:
    """The last turn that scores least: melds to lay, junk to send to ``laid_melds`` (other
    players' melds), and the final discard, the highest-scoring card left.

    Differs from ``best_arrangement`` because sending and the discard count: with 8♠ 9♠
    10♠ on the table a J♠ kept as junk is sent, and a hand that keeps K♣ 2♦ (discards K♣,
    scores 2) beats one that keeps 5♦ 6♦ (scores 5). A hand that can lay a meld lays at
    least one (laying none is móm, PH-11). Ties as ``best_arrangement`` on what is kept
    (fewer cards, fewer melds, then card by card); of equal discards the last in
    ``card_order``. ``hand`` is held after the last take or draw (at most
    LAY_DOWN_CARDS_MAX cards). Returns None when the taken cards cannot all be melded.

    ``lay_every_meld`` (Phỏm rules version 2, §6.1 last turn): only lay-downs that leave
    no Phỏm among the cards kept or sent (``meld_left_to_lay``) and a card to throw, so
    a Phỏm is laid, never sent card by card; at equal points fewer cards sent (a card that
    fits the player's own Phỏm is laid there); when every card left could be sent, the
    last of the sends is the final discard instead. Returns None also when no card can be
    left to throw (all 10 cards bound in Phỏm by taken cards: that hand is Ù tròn).
    Without it (version 1), any melds that leave a card, and sends may empty the hand
    (``discard`` None).

    Raises as ``best_arrangement``, and RuleViolation("BAD_HAND") for a hand over
    LAY_DOWN_CARDS_MAX cards.
    """
    hand_mask, taken_mask = _check_hand(hand, taken)
    if hand_mask.bit_count() > LAY_DOWN_CARDS_MAX:
        raise RuleViolation("BAD_HAND", f"{hand_mask.bit_count()} cards is more than {LAY_DOWN_CARDS_MAX} to lay down")
    search = _search_of(hand_mask, taken_mask, one_taken_per_meld)
    # Whether any card could be sent even if every free card were junk: if not, the
    # sends of each arrangement need not be worked out (with no card fitting a laid meld
    # as it is, no subset of them can be sent either).
    memo: _SendsMemo = {}
    may_send = bool(_sends(_cards_of(hand_mask & ~taken_mask), laid_melds, memo))
    best: tuple[tuple[bool, int, int, int, int], LayDown] | None = None
    # ``iter_arrangements`` lists arrangements in the tie-break order: the first of the
    # cheapest wins. Laying no meld at all is móm (4 × S, more than any place pays), so a
    # hand that can lay a meld never sends them all away instead.
    for arrangement in _arrangements(search):
        if lay_every_meld and (not arrangement.junk or meld_left_to_lay(arrangement.junk) is not None):
            continue
        sent = _sends(arrangement.junk, laid_melds, memo) if may_send and arrangement.junk else ()
        if lay_every_meld and len(sent) == len(arrangement.junk):
            sent = sent[:-1]  # the last card is the final discard: it is never sent
        lay_down = _lay_down(arrangement, sent)
        cost = (
            not arrangement.melds,
            lay_down.junk_points,
            len(lay_down.junk),
            len(sent) if lay_every_meld else 0,
            len(arrangement.melds),
        )
        if best is None or cost < best[0]:
            best = (cost, lay_down)
    return None if best is None else best[1]


def _lay_down(arrangement: Arrangement, sent: tuple[Send, ...]) -> LayDown:
    """``arrangement`` after ``sent``, throwing the highest-scoring card left (PH-2)."""
    sent_cards = {s.card for s in sent}
    left = [c for c in arrangement.junk if c not in sent_cards]
    discard = max(left, key=lambda c: (card_points(c), card_order(c)), default=None)
    return LayDown(arrangement.melds, sent, discard, tuple(c for c in left if c != discard))


# --- ù ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class U:
    """A hand that is Ù: every card in melds, or all but ``discard`` (§6.2).

    ``tron``: Ù tròn (PH-4), all cards held melded with none to discard. ``kings``: Ù K
    (PH-5), the melds include a set of three or four Kings and the player drew nothing
    from the stock. ``melds`` is how the hand is laid.
    """

    tron: bool
    kings: bool
    discard: Card | None
    melds: tuple[Meld, ...]


def _melded(search: _Search, cards_mask: int) -> Arrangement | None:
    """The arrangement of the cards of ``cards_mask`` if it leaves no junk, else None.

    An empty set of cards is no Ù: a Ù lays at least one Phỏm.
    """
    step = search.best(cards_mask)
    return search.arrangement(cards_mask) if cards_mask and step is not None and step[0] == 0 else None


def _melded_with_kings(search: _Search, cards_mask: int, one_taken_per_meld: bool) -> tuple[Meld, ...] | None:
    """Melds covering all cards of ``cards_mask`` with a set of Kings among them (PH-5), or None."""
    kings = [i for i, c in enumerate(search.cards) if c.rank == KING and cards_mask >> i & 1]
    for size in (SET_CARDS_MAX, SET_CARDS_MIN):
        for king_bits in combinations(kings, size):
            king_mask = sum(1 << i for i in king_bits)
            if one_taken_per_meld and (king_mask & search.taken_mask).bit_count() > 1:
                continue
            rest_mask = cards_mask & ~king_mask
            rest = _melded(search, rest_mask) if rest_mask else Arrangement((), ())
            if rest is not None:
                king_set = tuple(search.cards[i] for i in king_bits)
                return tuple(sorted((king_set, *rest.melds), key=lambda m: card_order(m[0])))
    return None


def find_u(
    hand: Sequence[Card],
    taken: Iterable[Card] = (),
    *,
    drew_from_stock: bool,
    one_taken_per_meld: bool = False,
) -> U | None:
    """Whether the player holding ``hand``, the 10 cards after their take or draw, is Ù.

    Ù tròn (PH-4) when all 10 cards are in melds; otherwise Ù thường when every card but one
    not-taken card (the discard) is. Ù K (PH-5) when the melds can include a set of Kings
    and ``drew_from_stock`` is false. Tròn is preferred (it pays more, PH-17), then K; the
    discard is the first in ``card_order`` that gives the best kind. Taken cards must be
    melded (PH-13). Returns None when the hand is not Ù. Raises as ``best_arrangement``,
    and RuleViolation("BAD_HAND") for a hand of other than U_HAND_CARDS (10) cards: Ù is
    defined for no other size (9 cards all in Phỏm are neither tròn nor thường).
    """
    hand_mask, taken_mask = _check_hand(hand, taken)
    if hand_mask.bit_count() != U_HAND_CARDS:
        raise RuleViolation("BAD_HAND", f"Ù is judged on {U_HAND_CARDS} cards, not {hand_mask.bit_count()}")
    # One search serves every question below: each is about a subset of the same cards.
    search = _search_of(hand_mask, taken_mask, one_taken_per_meld)
    cards = search.cards
    all_cards = search.full
    full = _melded(search, all_cards)
    if full is not None:
        king_melds = None if drew_from_stock else _melded_with_kings(search, all_cards, one_taken_per_meld)
        if king_melds is not None:
            return U(tron=True, kings=True, discard=None, melds=king_melds)
        return U(tron=True, kings=False, discard=None, melds=full.melds)
    plain: U | None = None
    for i, discard in enumerate(cards):
        if search.taken_mask >> i & 1:
            continue
        rest = all_cards & ~(1 << i)
        arrangement = _melded(search, rest)
        if arrangement is None:
            continue
        king_melds = None if drew_from_stock else _melded_with_kings(search, rest, one_taken_per_meld)
        if king_melds is not None:
            return U(tron=False, kings=True, discard=discard, melds=king_melds)
        if plain is None:
            plain = U(tron=False, kings=False, discard=discard, melds=arrangement.melds)
    return plain


def loose_cards(hand: Iterable[Card]) -> int:
    """How many cards of ``hand`` are in no Phỏm that its cards could make: no two others of
    their rank and no run of three through them in their suit (A low, PH-10). A hand with
    two is never Ù (one card may be thrown), whatever the search would find."""
    held = _mask_of(hand)
    melded = _set_ranks(held) * 15
    starts = _run_starts(held)
    melded |= starts | starts << 4 | starts << 8
    return (held & ~melded).bit_count()


def is_u_khan(hand: Sequence[Card]) -> bool:
    """Ù khan (PH-16, optional, off by default): no two cards of the dealt hand could be in
    one Phỏm: no two of a rank, and no two of a suit within 2 ranks of each other (A low).

    Raises RuleViolation("BAD_HAND") for a repeated card.
    """
    cards = _cards_of(_check_hand(hand, ())[0])
    for a, b in combinations(cards, 2):
        if a.rank == b.rank or (a.suit == b.suit and abs(phom_rank(a) - phom_rank(b)) <= 2):
            return False
    return True


# --- payments ---------------------------------------------------------------------------

# Every reason code this game pays under, with the rules it applies.
REASONS: Final[Mapping[str, str]] = {
    "an_cay": "§6.4, PH-6",  # the taker's 1st take
    "an_cay_2": "§6.4, PH-6",  # the taker's 2nd take
    "an_cay_n": "PH-6",  # the taker's 3rd or later take (not a chốt): n × S
    "an_chot": "§6.4, PH-6, PH-19",  # a take of the discarder's last discard: 5 × S
    "ve_nhi": "§6.4, PH-15",  # 2nd place (not last)
    "ve_ba": "§6.4, PH-15",  # 3rd place (not last)
    "ve_chot": "§6.4, PH-15",  # last place
    "mom": "PH-11, PH-15",  # no Phỏm laid: 4 × S instead of the place amount
    "u_tron": "PH-4, PH-17",
    "u_thuong": "§6.4, PH-5",  # Ù K pays as Ù thường (PH-5)
    "u_den": "§6.2, §6.4, PH-7, PH-18",
    "u_khan": "§6.6, PH-16",
    "disconnect_forfeit": "§6.5, PH-14",
}

AN_CHOT_STAKES: Final = 5
MOM_STAKES: Final = 4
U_TRON_STAKES: Final = 10
U_THUONG_STAKES: Final = 5
U_KHAN_9_STAKES: Final = 5
U_KHAN_10_STAKES: Final = 10
DISCONNECT_STAKES: Final = 5
# What each place pays the first-place player, by the number of players ranked (§6.4).
PLACE_STAKES: Final[Mapping[int, tuple[int, ...]]] = {2: (0, 1), 3: (0, 1, 2), 4: (0, 1, 2, 3)}
PLAYERS_MIN: Final = 2
PLAYERS_MAX: Final = 4
TAKEN_IN_A_ROW_FOR_DEN: Final = 3  # "bị ăn 3 lá bài liên tục" (PH-7)


@dataclass(frozen=True, slots=True)
class Payment:
    """``payer`` owes ``payee`` ``amount_stakes`` × S, under ``reason`` (a ``REASONS`` key) by ``rule``."""

    payer: int
    payee: int
    amount_stakes: int
    reason: str
    rule: str


@dataclass(frozen=True, slots=True)
class Discard:
    """One discard of the hand, in the order played.

    ``taken_by`` is the seat that took it (None if nobody did). ``final`` marks the
    discarder's fourth and last discard (PH-19): a take of it is ăn chốt.
    """

    seat: int
    taken_by: int | None = None
    final: bool = False


def take_payments(discards: Sequence[Discard]) -> tuple[Payment, ...]:
    """What each taken card costs its discarder (§6.4, PH-6, PH-19), in the order taken.

    Per taker, the k-th take costs k × S (1st ``an_cay``, 2nd ``an_cay_2``, later
    ``an_cay_n``); a take of a ``final`` discard is ăn chốt and costs 5 × S, and still
    counts in the taker's ordinal. These payments stand whatever ends the hand (PH-12).
    """
    ordinal: dict[int, int] = defaultdict(int)
    out = []
    for d in discards:
        if d.taken_by is None:
            continue
        check(d.taken_by != d.seat, "a player took their own discard")
        ordinal[d.taken_by] += 1
        k = ordinal[d.taken_by]
        if d.final:
            out.append(Payment(d.seat, d.taken_by, AN_CHOT_STAKES, "an_chot", "PH-6, PH-19"))
        elif k == 1:
            out.append(Payment(d.seat, d.taken_by, 1, "an_cay", "§6.4, PH-6"))
        elif k == 2:
            out.append(Payment(d.seat, d.taken_by, 2, "an_cay_2", "§6.4, PH-6"))
        else:
            out.append(Payment(d.seat, d.taken_by, k, "an_cay_n", "PH-6"))
    return tuple(out)


def den_liable(discards: Sequence[Discard], u_seat: int) -> tuple[int, str] | None:
    """Who pays Ù đền for the Ù of ``u_seat``, with the rule, or None (§6.2 Đền, PH-7, PH-18).

    The latest chốt-taker is liable ("a later chốt-taker pays instead of an earlier one").
    With no chốt taken, the player whose three consecutive discards were taken latest is
    (PH-7). If that player is ``u_seat``, nobody is: the Ù player never pays (PH-18).
    ``discards`` are the hand's discards up to the Ù.
    """
    chot_takers = [d.taken_by for d in discards if d.final and d.taken_by is not None]
    if chot_takers:
        liable = chot_takers[-1]
        return None if liable == u_seat else (liable, "§6.2, PH-18")
    run: dict[int, int] = defaultdict(int)
    latest: int | None = None
    for d in discards:
        run[d.seat] = run[d.seat] + 1 if d.taken_by is not None else 0
        if run[d.seat] >= TAKEN_IN_A_ROW_FOR_DEN:
            latest = d.seat
    if latest is None or latest == u_seat:
        return None
    return (latest, "PH-7, PH-18")


def _check_seats(seats: Sequence[int]) -> None:
    if not (PLAYERS_MIN <= len(seats) <= PLAYERS_MAX):  # formats the message only on failure
        broken(f"{len(seats)} players in a Phỏm hand")
    check(len(set(seats)) == len(seats), "a seat is listed twice")


def u_payments(
    u_seat: int, seats: Sequence[int], tron: bool, kings: bool, discards: Sequence[Discard] = ()
) -> tuple[Payment, ...]:
    """What the others pay the Ù player ``u_seat`` (§6.4, PH-4, PH-5, PH-12, PH-17, PH-18).

    ``seats`` are the players still in the hand, ``u_seat`` among them. Each other player
    pays 10 × S for Ù tròn (also when it is Ù K too, PH-17) and 5 × S otherwise (Ù K
    included, PH-5), unless ``den_liable`` names a player who then pays the whole amount
    alone (``u_den``). Take payments are separate (``take_payments``) and stand.
    """
    _check_seats(seats)
    check(u_seat in seats, "the Ù player is not in the hand")
    each = U_TRON_STAKES if tron else U_THUONG_STAKES
    if tron:
        reason, rule = "u_tron", "PH-4, PH-17" if kings else "PH-4"
    else:
        reason, rule = "u_thuong", "§6.4, PH-5" if kings else "§6.4"
    others = [s for s in seats if s != u_seat]
    liable = den_liable(discards, u_seat)
    if liable is not None and liable[0] in others:
        return (Payment(liable[0], u_seat, each * len(others), "u_den", liable[1]),)
    return tuple(Payment(s, u_seat, each, reason, rule) for s in others)


def u_khan_payments(u_seat: int, seats: Sequence[int], hand_cards: int) -> tuple[Payment, ...]:
    """Ù khan (§6.6, PH-16, optional): 5 × S from each other player with 9 cards, 10 × S with 10."""
    _check_seats(seats)
    check(u_seat in seats and hand_cards in (9, 10), "Ù khan needs a seated player with 9 or 10 cards")
    each = U_KHAN_10_STAKES if hand_cards == 10 else U_KHAN_9_STAKES
    return tuple(Payment(s, u_seat, each, "u_khan", "§6.6, PH-16") for s in seats if s != u_seat)


@dataclass(frozen=True, slots=True)
class PlayerResult:
    """A player's result when nobody is Ù: junk points after sending, móm, and
    ``lay_order``, the player's place in the order of the final turns (0 first, PH-3)."""

    seat: int
    junk_points: int
    mom: bool
    lay_order: int


def rank_players(results: Sequence[PlayerResult]) -> tuple[PlayerResult, ...]:
    """The players best first (§6.2): not móm before móm (PH-11), fewer junk points first
    (PH-2), then who laid down earlier on the final turn (PH-3)."""
    check(len({r.seat for r in results}) == len(results), "a seat is listed twice")
    check(len({r.lay_order for r in results}) == len(results), "two players share a place in the lay order")
    return tuple(sorted(results, key=lambda r: (r.mom, r.junk_points, r.lay_order)))


def placement_payments(results: Sequence[PlayerResult]) -> tuple[Payment, ...]:
    """What each player pays the first-place player when nobody is Ù (§6.4, PH-11, PH-15).

    By place among the n players ranked: 4 players 1, 2, 3 × S from 2nd, 3rd and last; 3
    players 1 and 2 × S; 2 players 1 × S. A móm player pays 4 × S instead. If everyone is
    móm, the best of them is still first and is paid by the rest.
    """
    ranked = rank_players(results)
    _check_seats([r.seat for r in ranked])
    place_stakes = PLACE_STAKES[len(ranked)]
    first = ranked[0].seat
    out = []
    for place, r in enumerate(ranked[1:], start=1):
        if r.mom:
            out.append(Payment(r.seat, first, MOM_STAKES, "mom", "PH-11, PH-15"))
        else:
            reason = "ve_chot" if place == len(ranked) - 1 else ("ve_nhi", "ve_ba")[place - 1]
            out.append(Payment(r.seat, first, place_stakes[place], reason, "§6.4, PH-15"))
    return tuple(out)


def disconnect_payments(seat: int, remaining: Sequence[int]) -> tuple[Payment, ...]:
    """A disconnected player pays each remaining player 5 × S: their whole settlement for
    the hand (§6.5, PH-14); payments for their cards already taken stand."""
    check(seat not in remaining and len(set(remaining)) == len(remaining), "bad remaining seats")
    return tuple(Payment(seat, s, DISCONNECT_STAKES, "disconnect_forfeit", "§6.5, PH-14") for s in remaining)


@dataclass(frozen=True, slots=True)
class UWin:
    """The Ù that ended the hand: who, and which kind (see ``U``)."""

    seat: int
    tron: bool = False
    kings: bool = False


def hand_payments(
    seats: Sequence[int],
    discards: Sequence[Discard],
    *,
    u: UWin | None = None,
    results: Sequence[PlayerResult] = (),
) -> tuple[Payment, ...]:
    """Every payment of a hand that ended normally, given its facts (§6.4, PH-12).

    Take payments first, in the order taken; then the Ù payments if ``u`` is given, else
    the placement and móm payments of ``results`` (one per seat of ``seats``). ``seats`` are
    the players still in the hand (a disconnected player is settled by
    ``disconnect_payments``). Amounts are obligations before the GEN-4 cap.
    """
    _check_seats(seats)
    out = list(take_payments(discards))
    if u is not None:
        out.extend(u_payments(u.seat, seats, u.tron, u.kings, discards))
    else:
        check(sorted(r.seat for r in results) == sorted(seats), "results must cover the seats in the hand")
        out.extend(placement_payments(results))
    return tuple(out)
