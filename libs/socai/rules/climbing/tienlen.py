"""Tiến Lên Miền Nam đếm lá (RULES.md §9, TL-1..TL-20) on the game kit.

The hand is ``socai.rules.climbing.shedding_play`` (deal, the 3♠ lead, rounds and passes, chop
chains, the first player out ending play, instant wins, disconnects) with Tiến Lên's card
rules ``shedding.TIENLEN``; this module holds only what is Tiến Lên's own:

- who leads (9.1, TL-1): the holder of the lowest card (3♠, else 3♣ …) in the first hand
  of a table (``HandStarted.hand_number`` 1); from the second hand on ``dealer_seat``,
  which the table sets to the previous winner (``next_hand_dealer``; the second-placed
  seat when the winner has left, 9.1);
- the chặt table (9.2, TL-17) and chop chains paid when the round closes, the last chopped
  paying the last chopper the sum of the chain (TL-6, TL-16);
- tới trắng at the deal (9.1, TL-9, TL-15, TL-20): 26 × S from each other player in count
  mode, 2 × S in rank mode (TL-3), no thối (TL-10);
- count mode (9.4, TL-5, TL-14): every loser pays the first its cards left, 2s and groups
  at their converted values (thối heo đen 5, heo đỏ 10, ba đôi thông 10, tứ quý 20, bốn
  đôi thông 30); cóng pays the count, doubled with ``cong_double`` (TL-4);
- rank mode (TL-2, TL-18): places by converted count pay 1, 2, 3 × S (9.4's table);
- a disconnect or a leave takes the seat out of play at once; it pays at the end for the
  cards it held (TL-11, GEN-6); the last seat left in play wins.

Options off by default (9.6): ``restore_turn_4dt`` (TL-8), ``first_hand_3s_instant_win``
(9.6 #2), ``dut_3_bich`` (9.6 #3 and #4, TL-13): going out on the 3♠ alone takes
(26 + H_i) × S from each other player i instead of the count; beating the play that left a
seat holding only the 3♠ ends the hand, that seat (Thối 3 Bích) paying the blocker (Cứu
Làng, the winner) Σ (26 + H_i) × S over every other player i (chops already made stand).
"""

from __future__ import annotations

import dataclasses
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

SPEC: Final = GameSpec("tienlen", "Tiến Lên Miền Nam", 2, 4, "standard", direction=COUNTERCLOCKWISE)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("play", "pass")
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("turn",)
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "9.5, TL-11, GEN-6: declared the loser: out of play at once; pays for the cards it holds (count mode) or is placed last (rank mode)"
RULES_VERSION: Final = 1
RULES: Final = shedding.TIENLEN


@dataclass(frozen=True, slots=True)
class Options:
    """Tiến Lên's table rules and [Proposed TL-n] decisions, defaults as in RULES.md §9.

    - ``settlement_mode``: ``count`` (đếm lá, default) or ``rank`` (TL-2).
    - ``cong_double``: a cóng player pays twice the count (TL-4's flag; off).
    - ``first_lead_must_include_3s``: the first lead of the first hand holds the lowest
      card (TL-12; off).
    - ``instant_wins``: tới trắng at the deal (9.1; on).
    - ``restore_turn_4dt``: a bốn đôi thông chop brings passed seats back (9.6 #1, TL-8; off).
    - ``first_hand_3s_instant_win``: four 3s or 3-4-5 pairs with the 3♠ win the first hand
      (9.6 #2; off).
    - ``dut_3_bich``: Đút / Thối 3 Bích and Cứu Làng (9.6 #3, #4, TL-13; off).
    - ``turn_timeout_s``: the turn timer (GEN-5).
    """

    settlement_mode: str = shedding.COUNT
    cong_double: bool = False
    first_lead_must_include_3s: bool = False
    instant_wins: bool = True
    restore_turn_4dt: bool = False
    first_hand_3s_instant_win: bool = False
    dut_3_bich: bool = False
    turn_timeout_s: int = 20

    def validate(self) -> None:
        if self.settlement_mode not in shedding.SETTLEMENT_MODES:
            raise RuleViolation("BAD_OPTION", f"settlement_mode {self.settlement_mode!r}", option="settlement_mode")
        if self.turn_timeout_s < 1:
            raise RuleViolation("BAD_OPTION", "turn_timeout_s must be >= 1", option="turn_timeout_s")


OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType(
    {
        1: MappingProxyType(
            {
                "settlement_mode": "count",
                "cong_double": "false",
                "first_lead_must_include_3s": "false",
                "instant_wins": "true",
                "restore_turn_4dt": "false",
                "first_hand_3s_instant_win": "false",
                "dut_3_bich": "false",
                "turn_timeout_s": "20",
            }
        )
    }
)

REASONS: Final[Mapping[str, Reason]] = MappingProxyType(
    shedding_play.reasons(RULES, {shedding_play.RANK_PLACE: "9.4 ranking table, TL-2, TL-18"})
)


@per_record
def variant(options: Options) -> shedding_play.Variant:
    rules = RULES
    if options.cong_double:
        rules = dataclasses.replace(rules, cong_multiplier=2)
    if options.first_hand_3s_instant_win:
        rules = dataclasses.replace(rules, first_hand_instant_wins=(shedding.TU_QUY_BA, shedding.DOI_THONG_BA_BICH))
    return shedding_play.Variant(
        spec=SPEC,
        rules=rules,
        settlement_mode=options.settlement_mode,
        first_hand_lowest_leads=True,
        first_lead_must_include_lowest=options.first_lead_must_include_3s,
        disconnect_is_out=True,
        instant_wins=options.instant_wins,
        first_hand_instant_wins=options.first_hand_3s_instant_win,
        restore_turn_4dt=options.restore_turn_4dt,
        dut_3_bich=options.dut_3_bich,
        turn_timeout_s=options.turn_timeout_s,
    )


def initial_state(started: HandStarted) -> State:
    """The state before the deal. Raises RuleViolation with the kit's codes
    (``base.validate_start``): WRONG_GAME, BAD_SEAT_COUNT (2..4), BAD_SEATS, BAD_STACK,
    BAD_STAKE, BAD_FEE, BAD_DEALER, BAD_OWNER, UNKNOWN_RULES_VERSION, BAD_OPTION."""
    validate_start(SPEC, started)
    options = parse_options(Options, resolve_options(OPTION_DEFAULTS, started))
    return shedding_play.new_state(started, variant(options))


def combo(cards: Iterable[Card]) -> Combination | None:
    """The Tiến Lên combination ``cards`` form (``.kind``: single, pair, triple, straight,
    pairs_run, four), or None (TL-7)."""
    return shedding.combo(cards, RULES)


def beats(play: Combination, over: Combination) -> bool:
    """``play`` may be played on ``over`` in Tiến Lên: stronger of the same kind, or a chop (9.2)."""
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
