"""Moves, ready to send: one ``PlayerAction`` per kind of move of the API guide.

A move's seat is left 0, which the table reads as the caller's own seat (the player's
token says which). Cards are strings in the table's notation, ``"As Td 9h"`` (``T`` is ten).
Usually a client picks a move from ``Turn.moves`` (every legal move, listed where the game
can list them); these build the ones it describes instead (a bet in a range, an
arrangement, a lay-down).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb


def cards_of(cards: str | Iterable[str]) -> list[str]:
    """``"As Td"`` or ``["As", "Td"]`` as a list of card strings."""
    return cards.replace(",", " ").split() if isinstance(cards, str) else list(cards)


def _bet(kind: int, amount_gold: int = 0) -> pb.PlayerAction:
    return pb.PlayerAction(bet=epb.BetAction(kind=kind, amount_gold=amount_gold))  # type: ignore[arg-type]


def check() -> pb.PlayerAction:
    return _bet(epb.ACTION_KIND_CHECK)


def call(amount_gold: int) -> pb.PlayerAction:
    """Call: ``amount_gold`` is what calling adds (``Facing.amount_gold``)."""
    return _bet(epb.ACTION_KIND_CALL, amount_gold)


def bet(amount_gold: int) -> pb.PlayerAction:
    return _bet(epb.ACTION_KIND_BET, amount_gold)


def raise_to_add(amount_gold: int) -> pb.PlayerAction:
    """A raise adding ``amount_gold`` chips, the call included (BetAction RAISE)."""
    return _bet(epb.ACTION_KIND_RAISE, amount_gold)


def fold() -> pb.PlayerAction:
    return _bet(epb.ACTION_KIND_FOLD)


def all_in(amount_gold: int) -> pb.PlayerAction:
    """All-in: ``amount_gold`` is everything the seat has left."""
    return _bet(epb.ACTION_KIND_ALL_IN, amount_gold)


def wager(kind: str, amount_gold: int, selection: Sequence[int] = ()) -> pb.PlayerAction:
    """A Tài Xỉu bet (``tai``, ``single`` with ``(4,)`` …) or Ba Cây Chương's ``bet``."""
    return pb.PlayerAction(wager=epb.WagerPlaced(kind=kind, selection=list(selection), amount_gold=amount_gold))


def play(cards: str | Iterable[str]) -> pb.PlayerAction:
    """Play a combination (Tiến Lên, Sâm Lốc) or discard one card (Phỏm)."""
    return pb.PlayerAction(play=epb.CardsPlayed(cards=cards_of(cards)))


def pass_turn() -> pb.PlayerAction:
    """Pass this round (Tiến Lên, Sâm Lốc)."""
    return pb.PlayerAction(pass_turn=epb.Passed())


def declare(declaration: str) -> pb.PlayerAction:
    """``draw``, ``u``, ``u_khan`` (Phỏm), ``sam``, ``no_sam`` (Sâm Lốc), ``flip`` (Ba Cây)."""
    return pb.PlayerAction(declare=epb.Declared(declaration=declaration))


def arrange(back: str | Iterable[str], middle: str | Iterable[str], front: str | Iterable[str]) -> pb.PlayerAction:
    """A Mậu Binh arrangement: back 5 (the strongest chi), middle 5, front 3."""
    return pb.PlayerAction(arrange=epb.Arranged(back=cards_of(back), middle=cards_of(middle), front=cards_of(front)))


def take(from_seat: int, card: str) -> pb.PlayerAction:
    """Take the previous discard (Phỏm): ``Facing`` of kind ``discard`` names both."""
    return pb.PlayerAction(take=epb.CardTaken(from_seat=from_seat, card=card))


def lay(melds: Iterable[str | Iterable[str]]) -> pb.PlayerAction:
    """Lay down Phỏm melds, e.g. ``lay(["5s 5c 5d", "7h 8h 9h"])``."""
    return pb.PlayerAction(lay=epb.MeldsLaid(melds=[epb.Meld(cards=cards_of(m)) for m in melds]))


def send(to_seat: int, meld_index: int, card: str) -> pb.PlayerAction:
    """Send a card to another seat's laid Phỏm (its index in that seat's melds)."""
    return pb.PlayerAction(send=epb.CardSent(to_seat=to_seat, meld_index=meld_index, card=card))
