"""Cards, notation and the canonical deck order of every game.

Notation is rank then suit: ``As Td 9h 2c``; ``10`` is accepted for ``T`` and the suit
symbols ``♠ ♣ ♦ ♥`` for ``s c d h`` (``A♠ 10♦``). ``str(card)`` always gives the ASCII form.

Canonical order (DESIGN.md "Fairness" 4): ranks ascending 2..A, within a rank ♠ ♣ ♦ ♥.
A short deck keeps that order over its own cards; Ba Cây puts A first (A 2 … 9).
Suit *strength* differs between games (RULES.md 0.5) and lives in each game's module,
never here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from socai.errors import InvalidArgument

RANK_CHARS: Final = "23456789TJQKA"
SUIT_CHARS: Final = "scdh"  # canonical order: spades, clubs, diamonds, hearts
SUIT_SYMBOLS: Final = "♠♣♦♥"
SPADES, CLUBS, DIAMONDS, HEARTS = 0, 1, 2, 3
JACK, QUEEN, KING, ACE = 11, 12, 13, 14


@dataclass(frozen=True, slots=True)
class Card:
    """One card: ``rank`` 2..14 (14 is the ace), ``suit`` 0..3 in canonical order ♠ ♣ ♦ ♥."""

    rank: int
    suit: int

    def __post_init__(self) -> None:
        # Without this check Card(1, 0) would print as "As" yet differ from the real ace.
        if (
            type(self.rank) is not int
            or type(self.suit) is not int
            or not (2 <= self.rank <= 14 and 0 <= self.suit <= 3)
        ):
            raise InvalidArgument("BAD_CARD", f"no card has rank {self.rank!r} and suit {self.suit!r}")

    @property
    def index(self) -> int:
        """Position 0..51 in the canonical 52-card order (``2s`` is 0, ``Ah`` is 51)."""
        return (self.rank - 2) * 4 + self.suit

    @property
    def is_red(self) -> bool:
        return self.suit in (DIAMONDS, HEARTS)

    def __str__(self) -> str:
        return RANK_CHARS[self.rank - 2] + SUIT_CHARS[self.suit]

    def __repr__(self) -> str:
        return f"Card({self})"

    @property
    def symbol(self) -> str:
        """The display form, ``A♠`` or ``10♦``."""
        rank = "10" if self.rank == 10 else RANK_CHARS[self.rank - 2]
        return rank + SUIT_SYMBOLS[self.suit]


@dataclass(frozen=True, slots=True)
class HiddenCard(Card):
    """A card a viewer may not see (``socai.rules.base.visible``): encoded as ``""``, in no
    deck. Its one value is ``socai.events.model.HIDDEN_CARD``. Here beside ``Card`` so that
    both compile as native classes under mypyc (a compiled class takes no interpreted
    subclass)."""

    def __post_init__(self) -> None:
        pass  # the one Card that is not in any deck

    def __str__(self) -> str:
        return ""


ALL_CARDS: Final[tuple[Card, ...]] = tuple(Card(r, s) for r in range(2, 15) for s in range(4))
_BY_TEXT: Final[dict[str, Card]] = {str(c): c for c in ALL_CARDS}
# Used with fullmatch. re.ASCII keeps case folding to ASCII letters: without it "ſ" (long s)
# and "K" (Kelvin sign) match and then crash the lookup below with ValueError.
_TOKEN = re.compile(r"(10|[2-9TJQKA])([scdh♠♣♦♥])", re.IGNORECASE | re.ASCII)


def card_from_index(index: int) -> Card:
    """The card at ``index`` of the canonical 52-card order.

    Raises InvalidArgument("BAD_CARD") unless ``index`` is in 0..51.
    """
    if not 0 <= index < 52:
        raise InvalidArgument("BAD_CARD", f"card index {index} is not 0..51")
    return ALL_CARDS[index]


def parse_card(text: object) -> Card:
    """Parse one card: ``As``, ``td``, ``10d``, ``A♠``, ``10♦``.

    Raises InvalidArgument("BAD_CARD") for anything else.
    """
    m = _TOKEN.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise InvalidArgument("BAD_CARD", f"not a card: {text!r}")
    rank_text, suit_text = m.group(1).upper(), m.group(2).lower()
    rank = 10 if rank_text == "10" else RANK_CHARS.index(rank_text) + 2
    suit = SUIT_SYMBOLS.index(suit_text) if suit_text in SUIT_SYMBOLS else SUIT_CHARS.index(suit_text)
    return ALL_CARDS[(rank - 2) * 4 + suit]


def parse_cards(text: str | Iterable[str]) -> list[Card]:
    """Parse ``"As Td 9h"`` (spaces or commas) or an iterable of card strings.

    Raises InvalidArgument("BAD_CARD") at the first token that is not a card.
    """
    # Items typed object: a non-string item is a BAD_CARD on either build (compiled code would
    # refuse it at the typed boundary with a TypeError).
    tokens: list[object] = list(text.replace(",", " ").split() if isinstance(text, str) else text)
    return [parse_card(t) for t in tokens]


def format_cards(cards: Iterable[Card]) -> str:
    return " ".join(str(c) for c in cards)


# Canonical decks. Xì Tố uses 8..A; Ba Cây uses A..9 with the ace first.
_DECK_RANKS: Final[dict[str, tuple[int, ...]]] = {
    "standard": tuple(range(2, 15)),
    "xito": tuple(range(8, 15)),
    "bacay": (ACE, 2, 3, 4, 5, 6, 7, 8, 9),
}

# Which deck each game plays with (DESIGN.md "Fairness" 4, RULES.md §13).
GAME_DECKS: Final[dict[str, str]] = {
    "holdem": "standard",
    "xito": "xito",
    "maubinh": "standard",
    "lieng": "standard",
    "lieng_sanh": "standard",
    "bacay_ga": "bacay",
    "bacay_chuong": "bacay",
    "tienlen": "standard",
    "samloc": "standard",
    "phom": "standard",
}


def deck_of_ranks(ranks: Sequence[int]) -> list[Card]:
    """The cards of ``ranks`` in the given rank order, suits ♠ ♣ ♦ ♥ within each rank."""
    return [ALL_CARDS[(r - 2) * 4 + s] for r in ranks for s in range(4)]


def deck(game_id: str) -> list[Card]:
    """The game's deck in canonical order (a fresh list; callers may shuffle it).

    Raises InvalidArgument("UNKNOWN_GAME") for a game without cards (Tài Xỉu) or an unknown id.
    """
    kind = GAME_DECKS.get(game_id)
    if kind is None:
        raise InvalidArgument("UNKNOWN_GAME", f"game {game_id!r} is not played with cards")
    return list(_DECKS[kind])


# Each kind of deck, built once: every replayed hand asks for its game's deck.
_DECKS: dict[str, tuple[Card, ...]] = {kind: tuple(deck_of_ranks(ranks)) for kind, ranks in _DECK_RANKS.items()}
