"""What a timer's running out did (RULES.md GEN-5): the move the rules engine made for the
seat, read from its state before and after ``TimerExpired``.

A ``TimerExpired`` row says only that time ran out; the game's own timeout rule decides what
follows (a Tiến Lên leader plays its lowest combination, a Hold'em seat checks or folds, a
Mậu Binh hand is arranged for its seat …). A dispute needs that move as a move: the play it
was (``play 5``, numbered as the settlement's details number plays) and its cards. The
engine already made it; this module reads it back from the two states, so the table (which
records it: ``TimerExpired.automatic``), the replay (which derives it again and compares)
and the desk (``socai.audit.handview``) tell it alike. Pure: no I/O.

The recorded form is a short stable code — ``play 3s 3c``, ``pass``, ``declare no_sam``,
``check``, ``fold``, ``discard Kd``, ``lay 8s 8c 8d|…``, ``take Kd``, ``draw``, ``declare u``,
``arrange``, ``arrange 1,3`` (the seats a closed window arranged), ``flip``, ``no_bet``,
``close``, ``timeout`` — naming a card only where the move puts it in view of everyone (a
play, a discard, a meld laid, a take), never one the move keeps face down (a drawn card,
an arrangement). ``AutomaticMove.text`` says it in words; the code never changes for a
recorded hand, the words may.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from socai.cards import Card
from socai.events.model import COMMUNITY, TimerExpired


@dataclass(frozen=True, slots=True)
class AutomaticMove:
    """What the engine did for the seat: ``code`` (the recorded form, the module
    docstring), ``text`` in words, ``play`` the hand's play number when it was a play (Tiến
    Lên, Sâm Lốc: numbered from 1 as settlement details cite them), ``cards`` its cards."""

    code: str
    text: str
    play: int = 0
    cards: tuple[Card, ...] = ()


def _cards(cards: Sequence[Any]) -> str:
    return " ".join(str(getattr(c, "card", c)) for c in cards)


def automatic_move(game_id: str, before: Any, after: Any, body: TimerExpired) -> AutomaticMove:
    """The move ``body`` made in a hand of ``game_id``, from the game's state ``before`` and
    ``after`` it. The games whose timeouts make moves of their own are named (``_BY_GAME``),
    not recognised by the fields of their states, which another game could share; every
    other game's timeout folds or checks, flips, or closes a betting window."""
    family = _BY_GAME.get(game_id)
    if family is not None:
        return family(before, after, body.seat)
    folded_before, folded_after = _folded(before), _folded(after)
    if folded_before is not None and folded_after is not None:
        if folded_after > folded_before:
            return AutomaticMove("fold", "folded")
        return AutomaticMove("check", "checked")
    if body.timer == "flip":
        return AutomaticMove("flip", "flipped its cards")
    if body.timer == "betting":
        if body.seat == COMMUNITY:
            return AutomaticMove("close", "closed the betting window")
        return AutomaticMove("no_bet", "placed no (more) bet")
    return AutomaticMove("timeout", "acted for the seat (GEN-5)")


def _climbing(before: Any, after: Any, seat: int) -> AutomaticMove:
    """Tiến Lên, Sâm Lốc (``socai.rules.climbing.shedding_play``): the lowest lead, a Sâm
    answer, or a pass."""
    if after.plays_made > before.plays_made:
        played = tuple(after.played_cards[len(before.played_cards) :])
        shown = _cards(played)
        return AutomaticMove(f"play {shown}", f"played {shown} (the lowest lead)", after.plays_made, played)
    if dict(after.declarations) != dict(before.declarations):
        answer = after.declarations.get(seat, "")
        return AutomaticMove(f"declare {answer}", f"declared {answer}")
    return AutomaticMove("pass", "passed")


def _maubinh(before: Any, after: Any, seat: int) -> AutomaticMove:
    """Mậu Binh: the arrangement stays face down until compared."""
    seats = [s for s in after.arranged if s not in before.arranged]
    if seat == COMMUNITY:
        named = ",".join(map(str, seats))
        return AutomaticMove(f"arrange {named}".strip(), f"arranged seats {named or '-'} by the rules (MB-20)")
    return AutomaticMove("arrange", "arranged by the rules (MB-20)")


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
        return AutomaticMove(f"discard {card}", f"discarded {card}", cards=(card,))
    laid: Mapping[int, Sequence[Sequence[Card]]] = after.laid
    if tuple(laid.get(seat, ())) != tuple(before.laid.get(seat, ())):
        melds = "|".join(_cards(m) for m in laid.get(seat, ()))
        return AutomaticMove(f"lay {melds}".strip(), f"laid {melds.replace('|', ' | ') or 'no meld'}")
    if after.taken.get(seat) != before.taken.get(seat):
        new = tuple(sorted(set(after.taken[seat]) - set(before.taken.get(seat, ())), key=str))
        return AutomaticMove(f"take {_cards(new)}", f"took {_cards(new)}", cards=new)
    if getattr(after, "phase", "") != getattr(before, "phase", ""):
        if "draw" in str(getattr(after, "phase", "")):
            return AutomaticMove("draw", "drew from the stock")
        return AutomaticMove("declare u", "declared Ù")
    return AutomaticMove("timeout", "acted for the seat (GEN-5)")


_BY_GAME: Final[Mapping[str, Callable[[Any, Any, int], AutomaticMove]]] = {
    "tienlen": _climbing,
    "samloc": _climbing,
    "phom": _phom,
    "maubinh": _maubinh,
}
