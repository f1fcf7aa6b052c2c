"""What a timer's running out did (RULES.md GEN-5): the move the rules engine made for the
seat, read from its state before and after ``TimerExpired``.

A ``TimerExpired`` row says only that time ran out; the game's own timeout rule decides what
follows (a Tiến Lên leader plays its lowest combination, a Hold'em seat checks or folds, a
Mậu Binh hand is arranged for its seat …). A dispute needs that move as a move: the play it
was (``play 5``, numbered as the settlement's details number plays) and its cards. The
engine already made it; this module reads it back from the two states, so the desk
(``socai.audit.handview``), the replay and the table describe it alike. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from socai.cards import Card
from socai.events.model import COMMUNITY, TimerExpired


@dataclass(frozen=True, slots=True)
class AutomaticMove:
    """What the engine did for the seat: ``text`` in words (``played 3♠ 3♣``, ``passed``,
    ``checked``, ``folded`` …), ``play`` the hand's play number when it was a play (Tiến
    Lên, Sâm Lốc: numbered from 1 as settlement details cite them), ``cards`` its cards."""

    text: str
    play: int = 0
    cards: tuple[Card, ...] = ()


def _cards(cards: Sequence[Any]) -> str:
    return " ".join(str(getattr(c, "card", c)) for c in cards)


def automatic_move(before: Any, after: Any, body: TimerExpired) -> AutomaticMove:
    """The move ``body`` made, from the game's state ``before`` and ``after`` it."""
    seat = body.seat
    if hasattr(after, "plays_made"):  # Tiến Lên, Sâm Lốc (socai.rules.shedding_play)
        if after.plays_made > before.plays_made:
            played = tuple(after.played_cards[len(before.played_cards) :])
            return AutomaticMove(f"played {_cards(played)} (the lowest lead)", after.plays_made, played)
        if dict(after.declarations) != dict(before.declarations):
            return AutomaticMove(f"declared {after.declarations.get(seat, '')}")
        return AutomaticMove("passed")
    if hasattr(after, "laid") and hasattr(after, "discards"):  # Phỏm
        return _phom(before, after, seat)
    if hasattr(after, "arranged"):  # Mậu Binh
        seats = [s for s in after.arranged if s not in before.arranged]
        if not seats:
            return AutomaticMove("nothing left to arrange")
        named = "" if seat != COMMUNITY else "for seats " + ", ".join(map(str, seats)) + ": "
        return AutomaticMove(f"arranged {named}by the rules (MB-20)" if named else "arranged by the rules (MB-20)")
    folded_before, folded_after = _folded(before), _folded(after)
    if folded_before is not None and folded_after is not None:
        return AutomaticMove("folded" if folded_after > folded_before else "checked")
    if body.timer == "flip":
        return AutomaticMove("flipped its cards")
    if body.timer == "betting":
        return AutomaticMove("closed the betting window" if seat == COMMUNITY else "placed no (more) bet")
    return AutomaticMove("acted for the seat (GEN-5)")


def _folded(state: Any) -> int | None:
    folded = getattr(state, "folded", None)
    if folded is None:
        return None
    if isinstance(folded, list | tuple):
        return sum(1 for f in folded if f)
    return len(folded)


def _phom(before: Any, after: Any, seat: int) -> AutomaticMove:
    if len(after.discards) > len(before.discards):
        card = after.discards[-1].card
        return AutomaticMove(f"discarded {card}", cards=(card,))
    laid: Mapping[int, Sequence[Sequence[Card]]] = after.laid
    if tuple(laid.get(seat, ())) != tuple(before.laid.get(seat, ())):
        melds = " | ".join(_cards(m) for m in laid.get(seat, ()))
        return AutomaticMove(f"laid {melds or 'no meld'}")
    if after.taken.get(seat) != before.taken.get(seat):
        new = sorted(set(after.taken[seat]) - set(before.taken.get(seat, ())), key=str)
        return AutomaticMove(f"took {_cards(new)}", cards=tuple(new))
    if getattr(after, "phase", "") != getattr(before, "phase", ""):
        return AutomaticMove("drew from the stock" if "draw" in str(getattr(after, "phase", "")) else "declared Ù")
    return AutomaticMove("acted for the seat (GEN-5)")
