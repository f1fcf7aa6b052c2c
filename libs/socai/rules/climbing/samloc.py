"""Sâm Lốc (RULES.md §4, SL-1..SL-21) on the game kit.

The hand is ``socai.rules.climbing.shedding_play`` with Sâm Lốc's card rules ``shedding.SAMLOC``;
this module holds only what is Sâm Lốc's own:

- 10 cards each, 2 to 5 players (SL-1); ``dealer_seat`` leads: the table owner in the first
  hand, then the previous winner (``next_hand_dealer``), a báo Sâm declarer regardless;
- thắng trắng at the deal (SL-8): 20 lá from each other player;
- the báo Sâm window (SL-9): every seat answers ``Declared(sam)`` / ``Declared(no_sam)``;
  the declarer leads; the first play of another seat on the declarer's play catches the
  Sâm: the declarer pays the catcher (n − 1) × 25 lá and play ends (a chop on it is paid
  too, SL-18); a declarer who goes out unbeaten takes 25 lá from each other player, or
  (n − 1) × 25 lá from the first seat that passed holding an answer (đền trắng, SL-10);
- chặt only by tứ quý: 20 lá, four aces on a 2 40 lá (SL-5), two tứ quý on a pair of 2s
  40 lá (SL-4, SL-20); đè chains paid by the last chopped to the last chopper (SL-6,
  SL-19) when the round closes;
- no 2 in the play that empties a hand (SL-7 b); thối 2 at the end, 5 / 10 lá per 2
  (SL-7 a); treo 15 lá (SL-14); a tứ quý left is never thối (SL-17);
- báo 1 enforced (SL-11): the seat playing just before a seat holding one card may play a
  single only of its highest rank;
- a disconnected seat auto-passes (SL-13); a leaver pays 10 lá to each other player, or
  25 lá each after declaring Sâm (đền báo, SL-12, SL-21), and its cards leave play.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from socai.cards import Card
from socai.errors import RuleViolation
from socai.events.model import HandStarted
from socai.rules.base import (
    COUNTERCLOCKWISE,
    GameSpec,
    Reason,
    parse_options,
    per_record,
    resolve_options,
    validate_start,
)
from socai.rules.climbing import shedding, shedding_play
from socai.rules.climbing.shedding import Combination
from socai.rules.climbing.shedding_play import (
    State,
    apply,
    candidate_actions,
    explain,
    facing,
    held,
    is_finished,
    legal_actions,
    legal_moves,
    next_hand_dealer,
    pending,
    settle,
)

SPEC: Final = GameSpec("samloc", "Sâm Lốc", 2, 5, "standard", direction=COUNTERCLOCKWISE)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("play", "pass", "declare:sam", "declare:no_sam")
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("declare", "turn")
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"BAD_DECLARATION": "4.3, SL-9"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = (
    "4.5, SL-12: rời bàn, 10 lá x S to each other player (25 lá each after declaring Sâm: đền báo), then out of play"
)
RULES_VERSION: Final = 1
RULES: Final = shedding.SAMLOC


@dataclass(frozen=True, slots=True)
class Options:
    """Sâm Lốc's table rules and [Proposed SL-n] decisions, defaults as in RULES.md §4.

    - ``thang_trang``: instant wins at the deal (SL-8; on).
    - ``bao_sam``: the báo Sâm declaration window (SL-9; on).
    - ``bao_1``: the báo 1 restriction (SL-11; on).
    - ``turn_timeout_s``, ``declare_timeout_s``: the timers (GEN-5).
    """

    thang_trang: bool = True
    bao_sam: bool = True
    bao_1: bool = True
    turn_timeout_s: int = 20
    declare_timeout_s: int = 10

    def validate(self) -> None:
        for name in ("turn_timeout_s", "declare_timeout_s"):
            if getattr(self, name) < 1:
                raise RuleViolation("BAD_OPTION", f"{name} must be >= 1", option=name)


OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType(
    {
        1: MappingProxyType(
            {
                "thang_trang": "true",
                "bao_sam": "true",
                "bao_1": "true",
                "turn_timeout_s": "20",
                "declare_timeout_s": "10",
            }
        )
    }
)

REASONS: Final[Mapping[str, Reason]] = MappingProxyType(shedding_play.reasons(RULES))


@per_record
def variant(options: Options) -> shedding_play.Variant:
    return shedding_play.Variant(
        spec=SPEC,
        rules=RULES,
        disconnect_is_out=False,
        leave_penalty=True,
        declarations=options.bao_sam,
        bao_1=options.bao_1,
        instant_wins=options.thang_trang,
        turn_timeout_s=options.turn_timeout_s,
        declare_timeout_s=options.declare_timeout_s,
    )


def initial_state(started: HandStarted) -> State:
    """The state before the deal. Raises RuleViolation with the kit's codes
    (``base.validate_start``): WRONG_GAME, BAD_SEAT_COUNT (2..5), BAD_SEATS, BAD_STACK,
    BAD_STAKE, BAD_FEE, BAD_DEALER, BAD_OWNER, UNKNOWN_RULES_VERSION, BAD_OPTION."""
    validate_start(SPEC, started)
    options = parse_options(Options, resolve_options(OPTION_DEFAULTS, started))
    return shedding_play.new_state(started, variant(options))


def combo(cards: Iterable[Card]) -> Combination | None:
    """The Sâm Lốc combination ``cards`` form (``.kind``: single, pair, triple, straight,
    four, two_fours), or None (SL-2, SL-3, SL-4)."""
    return shedding.combo(cards, RULES)


def beats(play: Combination, over: Combination) -> bool:
    """``play`` may be played on ``over`` in Sâm Lốc: higher of the same kind and size, or
    a chop (4.2, SL-20)."""
    return shedding.beats(play, over, RULES)


__all__ = [
    "MOVES",
    "OPTION_DEFAULTS",
    "REASONS",
    "RULES_VERSION",
    "SPEC",
    "TIMERS",
    "Options",
    "State",
    "apply",
    "beats",
    "candidate_actions",
    "combo",
    "explain",
    "facing",
    "held",
    "initial_state",
    "is_finished",
    "legal_actions",
    "legal_moves",
    "next_hand_dealer",
    "pending",
    "settle",
]
