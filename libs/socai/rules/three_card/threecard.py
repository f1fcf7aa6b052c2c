"""Three-card hands: Liêng (RULES.md §5), Liêng Sảnh (§12), 3 Cây Gà (§7), Ba Cây Chương (§8).

The four games share this core (LI-8: "sharing the hand evaluator"); each game module
re-exports its game's value function as ``hand_value``:

| game | value function | deck | order, strongest first |
|---|---|---|---|
| ``lieng`` | ``lieng_value`` | 52 | Sáp > Liêng đồng chất > Liêng > Ảnh > points 9…0 (LI-1) |
| ``lieng_sanh`` | ``lieng_sanh_value`` | 52 | Sáp > Liêng > Ảnh > points 9…0 (§12.2, LS-1) |
| ``bacay_ga``, ``bacay_chuong`` | ``bacay_value`` | 36, A–9 | points 10, 9, …, 1 (§7.2, §8.2) |

A value is ordered by ``strength`` (0 is the weakest hand of its game; higher is
stronger) and is equal to another exactly when the two hands are equally strong under the
game's rules, tie-breaks included. Values of different games never compare (``<`` raises
TypeError, ``==`` is False). ``.category`` is ``sap``, ``suited_run``, ``run``, ``faces``
or ``points`` (Ba Cây hands are all ``points``) and ``.points`` is the hand's points: the
sum of the card points, units digit, 0–9 in Liêng and Liêng Sảnh (every hand has them,
though only the ``points`` category is ranked by them), 1–10 in Ba Cây, where a units
digit of 0 is the best score and is called 10 ("20 điểm được tính là 10 điểm", §7.2).

Tie-breaks, built into the value:

- Liêng and Liêng Sảnh (LI-2, LS-7): runs of one height (a suited run in Liêng too), any
  two Ảnh, and equal points compare the highest suit present in each hand (♦ > ♥ > ♣ > ♠),
  then the rank (A > K > … > 2) of each hand's highest card of that suit. Sáp compares
  its rank only, 2 lowest and A highest.
- Ba Cây (§7.2, GA-3, §8.2): equal points compare each hand's single best card in the
  order A♦ > 9♦ > … > 2♦ > 9♥ > … > 2♥ > A♥ > 9♣ > … > A♣ > 9♠ > … > A♠.

The deciding card of every tie-break is one physical card, so two hands dealt from one
deck never have equal values (two Sáp of one rank would need six cards of that rank):
every comparison in a real hand has a winner and no pot is ever split. ``winner`` checks
that invariant; ``winners`` returns every best seat for callers that compare hands from
different deals.

How it is fast: the plain definitions (``lieng_key``, ``lieng_sanh_key``, ``bacay_key``)
return a tuple key; on first use (or ``warm()``) every 3-card combination of the game's
deck (22,100 of 52 cards, 7,140 of 36) is evaluated once and its value stored under the
bit mask of its three cards, with ``strength`` the dense rank of its key. ``*_value`` is
then one dictionary lookup; a test pins the tables to the definitions over every
combination.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Final, TypeVar

from socai.cards import ACE, CLUBS, DIAMONDS, HEARTS, JACK, KING, SPADES, Card
from socai.cards import deck as canonical_deck
from socai.errors import RuleViolation, broken, check

CARDS_PER_HAND: Final = 3

# Category ids (DESIGN.md "Public Python API").
SAP: Final = "sap"  # Sáp: three cards of one rank
SUITED_RUN: Final = "suited_run"  # Liêng đồng chất: a run in one suit (Liêng only)
RUN: Final = "run"  # Liêng: three consecutive ranks
FACES: Final = "faces"  # Ảnh: three cards from J, Q, K
POINTS: Final = "points"  # Điểm: everything else

# Each game's categories, weakest first: the index is the first element of the game's key.
LIENG_CATEGORIES: Final = (POINTS, FACES, RUN, SUITED_RUN, SAP)  # LI-1
LIENG_SANH_CATEGORIES: Final = (POINTS, FACES, RUN, SAP)  # §12.2, LS-1: no suited-run tier

# Suit strengths, higher is stronger. RULES.md 0.5 gives all four games ♦ > ♥ > ♣ > ♠ and
# says never to share one suit-order constant across games: each game keeps its own.
LIENG_SUIT_STRENGTH: Final[Mapping[int, int]] = {DIAMONDS: 3, HEARTS: 2, CLUBS: 1, SPADES: 0}
LIENG_SANH_SUIT_STRENGTH: Final[Mapping[int, int]] = {DIAMONDS: 3, HEARTS: 2, CLUBS: 1, SPADES: 0}
BACAY_SUIT_STRENGTH: Final[Mapping[int, int]] = {DIAMONDS: 3, HEARTS: 2, CLUBS: 1, SPADES: 0}

TEN_POINTS: Final = 10  # Ba Cây's best score: a units digit of 0 (§7.2)

_LOW_ACE_RUN: Final = (2, 3, ACE)  # A-2-3, the lowest run; its height is its 3
_NO_CARD: Final = 0  # the suit and rank fields of a Sáp key, which has no suit tie-break

# Liêng and Liêng Sảnh deal from 52 cards, Ba Cây from the 36 cards A to 9 (5.1, 12.1, 7.1).
_STANDARD_DECK: Final[tuple[Card, ...]] = tuple(canonical_deck("lieng"))
_BACAY_DECK: Final[tuple[Card, ...]] = tuple(canonical_deck("bacay_ga"))
_STANDARD_CARDS: Final = frozenset(_STANDARD_DECK)
_BACAY_CARDS: Final = frozenset(_BACAY_DECK)


# --- values ------------------------------------------------------------------------------


@dataclass(frozen=True, order=True, slots=True)
class ThreeCardValue:
    """The value of a three-card hand, ordered by ``strength`` alone (higher is stronger).

    ``category`` and ``points`` say what the hand is (module docstring); they take no part
    in comparisons, since ``strength`` already orders by them. Only values of one game
    compare: each game has its own subclass.
    """

    strength: int
    category: str = field(compare=False)
    points: int = field(compare=False)


class LiengValue(ThreeCardValue):
    """A Liêng hand (RULES.md 5.2): ``category`` is ``sap``, ``suited_run``, ``run``,
    ``faces`` or ``points``; ``points`` is 0–9."""

    __slots__ = ()


class LiengSanhValue(ThreeCardValue):
    """A Liêng Sảnh hand (RULES.md 12.2): ``category`` is ``sap``, ``run``, ``faces`` or
    ``points`` (no suited-run tier, LS-1); ``points`` is 0–9."""

    __slots__ = ()


class BaCayValue(ThreeCardValue):
    """A 3 Cây Gà or Ba Cây Chương hand (RULES.md 7.2, 8.2): ``category`` is always
    ``points``; ``points`` is 1–10, 10 the best."""

    __slots__ = ()


# --- the definitions -----------------------------------------------------------------------


def card_points(card: Card) -> int:
    """A card's points, the same in all four games: A is 1, 2–9 their face value, and 10,
    J, Q, K are 0 (5.2 with LI-7, 12.1; the Ba Cây deck stops at 9, 7.1)."""
    if card.rank == ACE:
        return 1
    return card.rank if card.rank <= 9 else 0


def hand_points(cards: Sequence[Card]) -> int:
    """Liêng and Liêng Sảnh points: the units digit of the card points, 0–9 (9 is best)."""
    return sum(card_points(c) for c in cards) % 10


def bacay_points(cards: Sequence[Card]) -> int:
    """Ba Cây points, 1–10: the units digit of the card points, where a units digit of 0
    (a sum of 10 or 20) is 10, the best score (7.2)."""
    return hand_points(cards) or TEN_POINTS


def run_height(ranks: Sequence[int]) -> int | None:
    """The height of three ranks that form a run (Liêng), or None.

    The height is the top rank (Q-K-A is 14, the highest), except A-2-3, the lowest, whose
    height is 3: the ace is high or low but never both, so K-A-2 is no run (5.2, LI-2, 12.2).
    """
    low, mid, high = sorted(ranks)
    if (low, mid, high) == _LOW_ACE_RUN:
        return 3
    return high if mid == low + 1 and high == mid + 1 else None


def _suit_tiebreak(hand: Sequence[Card], suit_strength: Mapping[int, int]) -> tuple[int, int]:
    """LI-2 and LS-7: the strength of the highest suit present, then the rank (A > K > … > 2)
    of the hand's highest card of that suit."""
    top_suit = max(suit_strength[c.suit] for c in hand)
    return top_suit, max(c.rank for c in hand if suit_strength[c.suit] == top_suit)


def _lieng_family_key(
    hand: Sequence[Card], categories: Sequence[str], suit_strength: Mapping[int, int]
) -> tuple[int, int, int, int]:
    """(category, height or rank or points, tie-break suit, tie-break rank), higher stronger.

    A hand takes its highest category (LI-3, LS-8): K-K-K is Sáp, not Ảnh; J-Q-K is a run.
    """
    ranks = [c.rank for c in hand]
    if ranks[0] == ranks[1] == ranks[2]:
        # Sáp: the rank alone (2 lowest, A highest). Two Sáp of one rank cannot be dealt
        # from one deck, and the rules give them no tie-break.
        return (categories.index(SAP), ranks[0], _NO_CARD, _NO_CARD)
    suit, rank = _suit_tiebreak(hand, suit_strength)
    height = run_height(ranks)
    if height is not None:
        suited = hand[0].suit == hand[1].suit == hand[2].suit
        category = SUITED_RUN if suited and SUITED_RUN in categories else RUN
        return (categories.index(category), height, suit, rank)
    if all(JACK <= r <= KING for r in ranks):
        # Ảnh: all score 0 points, so any two compare by the tie-break alone (LI-2).
        return (categories.index(FACES), 0, suit, rank)
    return (categories.index(POINTS), hand_points(hand), suit, rank)


def lieng_key(cards: Sequence[Card]) -> tuple[int, int, int, int]:
    """The Liêng order as a plain tuple, higher is stronger: the definition ``lieng_value``
    is built from (RULES.md 5.2, LI-1, LI-2, LI-3). Slower than ``lieng_value``.

    Raises RuleViolation("BAD_HAND") unless given three distinct cards.
    """
    return _lieng_family_key(_checked(cards, _STANDARD_CARDS, "lieng"), LIENG_CATEGORIES, LIENG_SUIT_STRENGTH)


def lieng_sanh_key(cards: Sequence[Card]) -> tuple[int, int, int, int]:
    """The Liêng Sảnh order as a plain tuple, higher is stronger: the definition
    ``lieng_sanh_value`` is built from (RULES.md 12.2, LS-1, LS-7, LS-8).

    Raises RuleViolation("BAD_HAND") unless given three distinct cards.
    """
    hand = _checked(cards, _STANDARD_CARDS, "lieng_sanh")
    return _lieng_family_key(hand, LIENG_SANH_CATEGORIES, LIENG_SANH_SUIT_STRENGTH)


def bacay_card_order(card: Card) -> tuple[int, int]:
    """A card's place in the Ba Cây order (7.2, GA-3), higher is stronger: suit first
    (♦ > ♥ > ♣ > ♠), then 9 > 8 > … > 2 > A within the suit, except that A♦ tops everything."""
    if card.rank == ACE and card.suit == DIAMONDS:
        return (BACAY_SUIT_STRENGTH[DIAMONDS], 10)
    return (BACAY_SUIT_STRENGTH[card.suit], card_points(card))


def bacay_key(cards: Sequence[Card]) -> tuple[int, int, int]:
    """The Ba Cây order as a plain tuple, higher is stronger: points 1–10, then the single
    best card (7.2, GA-3, 8.2). The definition ``bacay_value`` is built from; slower.

    Raises RuleViolation("BAD_HAND") unless given three distinct cards of the A–9 deck.
    """
    return _bacay_key(_checked(cards, _BACAY_CARDS, "bacay"))


def _bacay_key(hand: Sequence[Card]) -> tuple[int, int, int]:
    return (bacay_points(hand), *max(bacay_card_order(c) for c in hand))


# --- the fast path -------------------------------------------------------------------------

ValueT = TypeVar("ValueT", bound=ThreeCardValue)
SeatT = TypeVar("SeatT", bound=Hashable)


def _checked(cards: Sequence[Card], deck_cards: frozenset[Card], game: str) -> tuple[Card, ...]:
    """``cards`` as a tuple. Raises RuleViolation("BAD_HAND") unless they are three
    distinct cards of ``deck_cards``."""
    hand = tuple(cards)
    if len(hand) != CARDS_PER_HAND or len(set(hand)) != CARDS_PER_HAND or not deck_cards.issuperset(hand):
        raise _bad_hand(game, cards)
    return hand


def _bad_hand(game: str, cards: object) -> RuleViolation:
    deck_name = "A to 9" if game == "bacay" else "a 52-card deck"
    # At most 80 characters of what was sent: enough to see the mistake, never a huge message.
    return RuleViolation("BAD_HAND", f"a {game} hand is three distinct cards of {deck_name}, not {repr(cards)[:80]}")


def _mask(hand: Sequence[Card]) -> int:
    """The hand's cards as bits ``rank * 4 + suit``, the key of the lookup tables."""
    return sum(1 << (c.rank * 4 + c.suit) for c in hand)


def _build(
    deck_cards: Sequence[Card],
    key: Callable[[Sequence[Card]], tuple[int, ...]],
    category: Callable[[tuple[int, ...]], str],
    points: Callable[[Sequence[Card]], int],
    value_type: type[ValueT],
) -> dict[int, ValueT]:
    """Every 3-card hand of ``deck_cards`` by ``_mask``, valued from ``key``: ``strength``
    is the dense rank of the key (0 for the weakest), so equal keys give equal values."""
    keys = {hand: key(hand) for hand in combinations(deck_cards, CARDS_PER_HAND)}
    strength = {k: i for i, k in enumerate(sorted(set(keys.values())))}
    shared: dict[tuple[int, ...], ValueT] = {}
    table: dict[int, ValueT] = {}
    for hand, k in keys.items():
        value = value_type(strength[k], category(k), points(hand))
        first = shared.setdefault(k, value)
        # Equal keys must describe equal hands, or one value could not stand for them all.
        check(first.category == value.category and first.points == value.points, f"{hand}: key {k} is ambiguous")
        table[_mask(hand)] = first
    return table


_lieng_table: dict[int, LiengValue] | None = None
_lieng_sanh_table: dict[int, LiengSanhValue] | None = None
_bacay_table: dict[int, BaCayValue] | None = None


def _lieng_tables() -> dict[int, LiengValue]:
    global _lieng_table
    if _lieng_table is None:
        _lieng_table = _build(
            _STANDARD_DECK,
            lambda hand: _lieng_family_key(hand, LIENG_CATEGORIES, LIENG_SUIT_STRENGTH),
            lambda k: LIENG_CATEGORIES[k[0]],
            hand_points,
            LiengValue,
        )
    return _lieng_table


def _lieng_sanh_tables() -> dict[int, LiengSanhValue]:
    global _lieng_sanh_table
    if _lieng_sanh_table is None:
        _lieng_sanh_table = _build(
            _STANDARD_DECK,
            lambda hand: _lieng_family_key(hand, LIENG_SANH_CATEGORIES, LIENG_SANH_SUIT_STRENGTH),
            lambda k: LIENG_SANH_CATEGORIES[k[0]],
            hand_points,
            LiengSanhValue,
        )
    return _lieng_sanh_table


def _bacay_tables() -> dict[int, BaCayValue]:
    global _bacay_table
    if _bacay_table is None:
        _bacay_table = _build(_BACAY_DECK, _bacay_key, lambda k: POINTS, bacay_points, BaCayValue)
    return _bacay_table


def warm() -> None:
    """Build the three lookup tables now (about 0.1 s; game modules call this from their
    ``warm()``, ``registry.warm``), rather than in the first hand that needs them."""
    _lieng_tables()
    _lieng_sanh_tables()
    _bacay_tables()


def lieng_value(cards: Sequence[Card]) -> LiengValue:
    """The value of a Liêng hand (RULES.md 5.2; LI-1, LI-2, LI-3, LI-7); ``lieng.hand_value``.

    Raises RuleViolation("BAD_HAND") unless given three distinct cards.
    """
    table = _lieng_table if _lieng_table is not None else _lieng_tables()
    # Written out rather than through _mask: every showdown of every replayed hand comes here.
    try:
        a, b, c = cards
        return table[(1 << (a.rank * 4 + a.suit)) | (1 << (b.rank * 4 + b.suit)) | (1 << (c.rank * 4 + c.suit))]
    except (ValueError, TypeError, AttributeError, KeyError):
        # A wrong count, a repeated card (two bits make no entry) or not a card.
        raise _bad_hand("lieng", cards) from None


def lieng_sanh_value(cards: Sequence[Card]) -> LiengSanhValue:
    """The value of a Liêng Sảnh hand (RULES.md 12.2; LS-1, LS-7, LS-8); ``lieng_sanh.hand_value``.

    Raises RuleViolation("BAD_HAND") unless given three distinct cards.
    """
    table = _lieng_sanh_table if _lieng_sanh_table is not None else _lieng_sanh_tables()
    try:
        a, b, c = cards
        return table[(1 << (a.rank * 4 + a.suit)) | (1 << (b.rank * 4 + b.suit)) | (1 << (c.rank * 4 + c.suit))]
    except (ValueError, TypeError, AttributeError, KeyError):
        raise _bad_hand("lieng_sanh", cards) from None


def bacay_value(cards: Sequence[Card]) -> BaCayValue:
    """The value of a Ba Cây hand (RULES.md 7.2, 8.2; GA-3); ``bacay_ga.hand_value`` and
    ``bacay_chuong.hand_value``.

    Raises RuleViolation("BAD_HAND") unless given three distinct cards of the A–9 deck.
    """
    table = _bacay_table if _bacay_table is not None else _bacay_tables()
    try:
        a, b, c = cards
        return table[(1 << (a.rank * 4 + a.suit)) | (1 << (b.rank * 4 + b.suit)) | (1 << (c.rank * 4 + c.suit))]
    except (ValueError, TypeError, AttributeError, KeyError):
        raise _bad_hand("bacay", cards) from None


# Each game's value function, for callers that hold a game id (benchmarks, auditors).
HAND_VALUE: Final[Mapping[str, Callable[[Sequence[Card]], ThreeCardValue]]] = {
    "lieng": lieng_value,
    "lieng_sanh": lieng_sanh_value,
    "bacay_ga": bacay_value,
    "bacay_chuong": bacay_value,
}


# --- comparisons settlements use ---------------------------------------------------------------


def ranked(values: Mapping[SeatT, ValueT]) -> tuple[SeatT, ...]:
    """The seats best hand first; equal values (never dealt from one deck) keep the
    mapping's order."""
    return tuple(sorted(values, key=values.__getitem__, reverse=True))


def winners(values: Mapping[SeatT, ValueT]) -> tuple[SeatT, ...]:
    """Every seat holding the best value, in the mapping's order; () for no seats.

    Hands dealt from one deck never tie (module docstring), so for a real hand this is one
    seat. Pass only the seats that may win: those still in, or a side pot's eligible seats.
    """
    if not values:
        return ()
    best = max(values.values())
    return tuple(seat for seat, value in values.items() if value == best)


def winner(values: Mapping[SeatT, ValueT]) -> SeatT:
    """The one seat with the best hand: the showdown winner of all four games (5.4, 7.4,
    12.4), the suit tie-break being part of the value.

    Raises AssertionError when ``values`` is empty or two seats tie, which hands dealt from
    one deck never do: a broken invariant, never split silently.
    """
    best = winners(values)
    if len(best) != 1:  # formats the message only on failure
        broken(f"exactly one best hand expected, found {len(best)}")
    return best[0]


def sap_bonus_seat(values: Mapping[SeatT, LiengSanhValue]) -> SeatT | None:
    """Liêng Sảnh's Sáp bonus (12.4, LS-5, LS-12): the seat dealt the best Sáp, or None.

    Pass every seat dealt in, folded and leaving seats included: the best Sáp takes the
    bonus even when its holder folded, and every other seat dealt in pays it (LS-9).
    """
    saps = {seat: value for seat, value in values.items() if value.category == SAP}
    return winner(saps) if saps else None


def ga_pot_winner(values: Mapping[SeatT, BaCayValue]) -> SeatT | None:
    """3 Cây Gà (7.4): the seat that takes the Gà pot, the best of the 10-point hands, or
    None when nobody scored 10 and the pot carries over (GA-2).

    Pass only the hands that count: a disconnected player's cards do not (GA-6).
    """
    tens = {seat: value for seat, value in values.items() if value.points == TEN_POINTS}
    return winner(tens) if tens else None


def tens_best_first(values: Mapping[SeatT, BaCayValue]) -> tuple[SeatT, ...]:
    """Ba Cây Chương (CH-3): the seats that scored 10, best hand first, banker included
    when passed. The first that may take the bank becomes banker (the caller checks
    solvency, CH-2, and that the seat is still connected, CH-7); () keeps the banker."""
    return ranked({seat: value for seat, value in values.items() if value.points == TEN_POINTS})


def player_win_multiplier(player: BaCayValue, *, ten_point_double: bool = True) -> int:
    """Ba Cây Chương: what the banker pays a winning player, in multiples of the player's bet:
    2 when the player scored 10 and ``ten_point_double`` is on (CH-1), else 1. Also what a
    banker who disconnects pays each player (CH-4)."""
    return 2 if ten_point_double and player.points == TEN_POINTS else 1


def max_player_win_multiplier(*, ten_point_double: bool = True) -> int:
    """Ba Cây Chương: the most a banker can owe a player, in multiples of the player's bet,
    whatever the cards: the bank must cover this times every accepted bet (CH-2)."""
    return 2 if ten_point_double else 1


def player_result(player: BaCayValue, banker: BaCayValue, *, ten_point_double: bool = True) -> int:
    """Ba Cây Chương (8.4): one player against the banker, in multiples of the player's bet,
    from the player's side: +2 or +1 when the player's hand is better (the banker pays,
    ``player_win_multiplier``), -1 when the banker's is (the player pays the bet). A
    banker's 10 is never doubled (CH-1). Equal points go to the better single card (7.2),
    so there is no draw.

    Raises AssertionError for equal values, which hands dealt from one deck never have.
    """
    check(player != banker, "a player and the banker cannot hold equal hands")
    return player_win_multiplier(player, ten_point_double=ten_point_double) if player > banker else -1
