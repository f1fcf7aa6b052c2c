"""Liêng Sảnh (RULES.md §12): three cards, three betting rounds, and the Sáp bonus.

The same mechanics as Liêng (``threecard_play``), with these differences (LI-8):

1. ``HandStarted``: ``dealer_seat`` opens round 1, the table owner in the first hand and
   the previous winner after that (LS-4, ``next_hand_dealer``). Every player antes
   ``ante_stakes`` × S before the deal (LS-2).
2. Three cards face down to each player, counterclockwise (GEN-2) from the opener.
3. **Three betting rounds** with no cards between them (12.1, LS-6), each opened from the
   same position by the first player still in (LS-4): the opener may "Tố" (bet 1 × S, or
   k × S with the slider, k 1..``raise_max_stakes`` = 30) or "Chuyển" (a check, handing the
   opening right on); after an opening, "Cân" (call), raise by k × S, or "Úp bỏ" (fold).
   A full circle of "Chuyển" ends the round with nobody adding (LS-3). A short stack calls
   all-in, with side pots (``pots``).
4. Showdown: each pot to the best eligible hand (Sáp > Liêng > Ảnh > points, no suited-run
   tier; ties by the highest suit ♦ > ♥ > ♣ > ♠ then its highest card; 12.2, LS-1, LS-7,
   LS-8), or the whole pot to the last player left.
5. **Sáp bonus** (12.4, LS-5, LS-9, LS-12): the best Sáp dealt in the hand, even folded,
   receives ``sap_bonus_stakes`` × S (5) from every other player dealt in, folded and
   leaving players included; one bonus per hand, paid after the pots and capped at what
   each payer has left (GEN-4, ``base.pay_obligations``).

Disconnect and leaving (12.5, GEN-6): the player is folded at once and loses the gold
already bet, all of it to the showdown winner (reason ``disconnect_forfeit``), as in Liêng
(LI-5; rules version 1, kept for the hands recorded under it, returned a raise no player
still in matched and gave what lay above an all-in winner's stack to a side pot's winner),
and still pays a Sáp bonus (LS-9). A turn timeout is a "Chuyển" when free, otherwise a
fold (GEN-5). Fee: ``fee_bps`` on each net win (GEN-1, default 0), charged after the bonus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from socai.cards import Card
from socai.cards import deck as canonical_deck
from socai.errors import RuleViolation
from socai.events.model import Body, HandStarted
from socai.rules.base import COUNTERCLOCKWISE, Facing, GameSpec, LegalAction, Pending, Reason, Settlement
from socai.rules.three_card import threecard
from socai.rules.three_card import threecard_play as play
from socai.rules.three_card.threecard import LiengSanhValue
from socai.rules.three_card.threecard_play import LiengState

# One hand's state: the Liêng family's (``threecard_play.LiengState``).
State = LiengState

SPEC: Final = GameSpec("lieng_sanh", "Liêng Sảnh", 2, 9, "standard", direction=COUNTERCLOCKWISE, default_fee_bps=0)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("check", "call", "bet", "raise", "fold", "all_in")
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("turn",)
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"RAISE_TOO_LARGE": "LS-3", "BET_TOO_LARGE": "LS-3", "BAD_AMOUNT": "LS-3"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "12.5, GEN-6: declared the loser; the gold already bet goes to the showdown winner"
# Version 2: a leaver forfeits all it put in to the showdown winner, even what no player
# still in matched and what lies above an all-in winner's stack (LI-5;
# ``threecard_play.LEAVER_FORFEITS_ALL_FROM``). OPTION_DEFAULTS keeps every version's defaults.
RULES_VERSION: Final = 2
RAISE_MAX_STAKES: Final = 30  # LS-3, LS-11: the slider's ×1 to ×30
SAP_BONUS_STAKES: Final = 5  # 12.4: "trả thêm x5 gold cược"
TURN_TIMER: Final = play.TURN_TIMER


@dataclass(frozen=True, slots=True)
class Options:
    """Liêng Sảnh's rules and [Proposed] decisions as named options, defaults as in §12.

    - ``ante_stakes``: the ante in multiples of S (LS-2: 1).
    - ``raise_max_stakes``: the largest k of a k × S bet or raise (LS-3: 30).
    - ``sap_bonus_stakes``: the Sáp bonus each other player pays, in multiples of S (12.4: 5).
    - ``turn_timeout_s``: the action timer (GEN-5: configurable, not in the source).
    """

    ante_stakes: int = 1
    raise_max_stakes: int = RAISE_MAX_STAKES
    sap_bonus_stakes: int = SAP_BONUS_STAKES
    turn_timeout_s: int = 15

    def validate(self) -> None:
        """Raises RuleViolation("BAD_OPTION") for a value the rules cannot run with."""
        if not 1 <= self.ante_stakes <= 100:
            raise RuleViolation("BAD_OPTION", "ante_stakes must be 1..100", option="ante_stakes")
        if not 1 <= self.raise_max_stakes <= 1000:
            raise RuleViolation("BAD_OPTION", "raise_max_stakes must be 1..1000", option="raise_max_stakes")
        if not 0 <= self.sap_bonus_stakes <= 100:
            raise RuleViolation("BAD_OPTION", "sap_bonus_stakes must be 0..100", option="sap_bonus_stakes")
        if self.turn_timeout_s < 1:
            raise RuleViolation("BAD_OPTION", "turn_timeout_s must be >= 1", option="turn_timeout_s")


_DEFAULTS: Final[Mapping[str, str]] = MappingProxyType(
    {"ante_stakes": "1", "raise_max_stakes": "30", "sap_bonus_stakes": "5", "turn_timeout_s": "15"}
)
# Version 2 changed a rule, not a default.
OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType({1: _DEFAULTS, 2: _DEFAULTS})

# 12.4: the pot (and side pots) to the best hand, unmatched chips back, a leaver's chips to
# the winner (12.5), the Sáp bonus (a penalty for its payers), the fee (GEN-1).
REASONS: Final[Mapping[str, Reason]] = MappingProxyType(dict(play.LIENG_SANH_REASONS))

GAME: Final = play.LiengFamily(
    spec=SPEC,
    options_type=Options,
    option_defaults=OPTION_DEFAULTS,
    rounds=3,
    value=threecard.lieng_sanh_value,
    deck_cards=frozenset(canonical_deck("lieng_sanh")),
    sap_bonus=True,
)


def hand_value(cards: Sequence[Card]) -> LiengSanhValue:
    """The Liêng Sảnh value of three cards (12.2; LS-1, LS-7, LS-8), totally ordered;
    ``.category`` is ``sap``, ``run``, ``faces`` or ``points``, ``.points`` 0–9. Raises
    RuleViolation("BAD_HAND") unless given three distinct cards."""
    return threecard.lieng_sanh_value(cards)


def warm() -> None:
    """Build the three-card lookup tables now (``registry.warm``)."""
    threecard.warm()


def initial_state(started: HandStarted) -> State:
    """The state before the deal, every ante in the pot (``threecard_play.lieng_initial_state``)."""
    return play.lieng_initial_state(GAME, started)


def apply(state: State, body: Body) -> State:
    """The state after ``body`` (``threecard_play.lieng_apply``); ``state`` is never changed."""
    return play.lieng_apply(GAME, state, body)


def pending(state: State) -> Pending:
    """What the hand waits for: the deal, the seat to act, or nothing (finished)."""
    return play.lieng_pending(state)


def legal_actions(state: State, seat: int) -> tuple[LegalAction, ...]:
    """The moves ``seat`` may make now (empty unless it is its turn)."""
    return play.lieng_legal_actions(state, seat)


def candidate_actions(state: State, seat: int) -> list[Body]:
    """A small finite set of legal moves for ``seat`` (bots, property tests)."""
    return play.lieng_candidate_actions(state, seat)


def held(state: State, seat: int) -> tuple[Card, ...]:
    """The three cards dealt to ``seat``."""
    return play.held(state, seat)


def committed_gold(state: State, seat: int) -> int:
    """The chips ``seat`` has put into the pot this hand, ante included."""
    return state.put_in_gold.get(seat, 0)


def facing(state: State, seat: int) -> Facing:
    """The bet ``seat`` must match when it is its turn."""
    return play.lieng_facing(state, seat)


def is_finished(state: State) -> bool:
    """True once HandEnded has been applied (settle may run)."""
    return state.phase == play.ENDED


def settle(state: State) -> Settlement:
    """The pots to the best hands (``threecard_play.lieng_settle``). Reasons: ``pot``,
    ``side_pot``, ``disconnect_forfeit``, ``sap_bonus``, ``fee``."""
    return play.lieng_settle(GAME, state)


def winner(state: State) -> int:
    """The seat that won the main pot: the last left, or the best hand at showdown."""
    return play.lieng_winner(GAME, state)


def can_play(stack_gold: int, stake_gold: int, options: Options) -> bool:
    """A seat plays the next hand when its stack covers the ante (LS-2)."""
    return stack_gold >= max(1, stake_gold * options.ante_stakes)


def next_hand_dealer(
    previous_state: State | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The opener of the next hand (LS-4): the owner first, then the previous winner."""
    return play.lieng_next_hand_dealer(GAME, previous_state, participants, owner_seat)
