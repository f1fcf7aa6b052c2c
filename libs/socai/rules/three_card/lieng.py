"""Liêng (RULES.md §5): three cards, one betting round, the best hand takes the pot.

A hand, as this module plays it (the mechanics are ``threecard_play``'s, shared with
Liêng Sảnh; hand values are ``threecard.lieng_value``):

1. ``HandStarted``: ``dealer_seat`` is the first to act, the table owner in the first hand
   and the previous winner after that (LI-4, ``next_hand_dealer``). Every player antes
   ``ante_stakes`` × S (5.1: the table's minimum bet), which a stack must cover
   (``can_play``; BAD_STACK otherwise).
2. Three cards face down to each player, one at a time counterclockwise (GEN-2) from the
   first to act.
3. **Exactly one betting round** (5.1), counterclockwise from the first to act: Tố (bet or
   raise by k × S above the call, k from 1 to ``raise_max_stakes`` = 30, LI-4), Theo (call;
   with nothing to call, a check, which the source's buttons leave implicit), Bỏ (fold).
   Raises are unlimited and each reopens the round; it ends when everyone still in has
   matched the highest contribution (LI-4). A short stack calls all-in, with side pots as
   in Xì Tố (``pots``); a voluntary all-in beyond the k × S sizes is not offered.
4. Showdown: each pot to the best eligible hand (Sáp > Liêng đồng chất > Liêng > Ảnh >
   points, ties by the highest suit ♦ > ♥ > ♣ > ♠ then its highest card; LI-1, LI-2, LI-3,
   LI-7), or the whole pot to the last player left (LI-6). No bonuses (5.4).

Disconnect and leaving (5.5, LI-5, GEN-6): the player is folded at once, in or out of turn,
and forfeits everything already in the pot (the ante at least); the showdown winner takes
all of it under the reason ``disconnect_forfeit``, even a raise no player still in matched
and what lies above an all-in winner's stack (LI-5). Rules version 1, kept for the hands
recorded under it, returned the unmatched part as ``uncalled`` and gave the part above an
all-in winner to the side pot's winner (S = 1, ante 2, seat 1 bets 2, seat 0 raises to 4
and leaves: version 1 settles seat 0 -4, version 2 -6). A turn timeout checks when free,
otherwise folds (GEN-5). Fee: ``fee_bps`` on each net win (GEN-1, default 0).
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
from socai.rules.three_card.threecard import LiengValue
from socai.rules.three_card.threecard_play import LiengState

# One hand's state: the Liêng family's (``threecard_play.LiengState``).
State = LiengState

SPEC: Final = GameSpec("lieng", "Liêng", 2, 9, "standard", direction=COUNTERCLOCKWISE, default_fee_bps=0)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("check", "call", "bet", "raise", "fold", "all_in")
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("turn",)
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"RAISE_TOO_LARGE": "LI-4", "BET_TOO_LARGE": "LI-4", "BAD_AMOUNT": "LI-4"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "LI-5, 5.5, GEN-6: folded at once; everything already in the pot goes to the showdown winner"
# Version 2: a leaver forfeits all it put in to the showdown winner, even what no player
# still in matched and what lies above an all-in winner's stack (LI-5;
# ``threecard_play.LEAVER_FORFEITS_ALL_FROM``). OPTION_DEFAULTS keeps every version's defaults.
RULES_VERSION: Final = 2
RAISE_MAX_STAKES: Final = 30  # LI-4: the [S2] slider's ×1 to ×30
TURN_TIMER: Final = play.TURN_TIMER


@dataclass(frozen=True, slots=True)
class Options:
    """Liêng's [Proposed] decisions as named options, defaults as in RULES.md §5.

    - ``ante_stakes``: the ante in multiples of S (5.1: the table's minimum bet, 1).
    - ``raise_max_stakes``: the largest k of a k × S bet or raise (LI-4: 30).
    - ``turn_timeout_s``: the action timer (GEN-5: configurable, not in the source).
    """

    ante_stakes: int = 1
    raise_max_stakes: int = RAISE_MAX_STAKES
    turn_timeout_s: int = 15

    def validate(self) -> None:
        """Raises RuleViolation("BAD_OPTION") for a value the rules cannot run with."""
        if not 1 <= self.ante_stakes <= 100:
            raise RuleViolation("BAD_OPTION", "ante_stakes must be 1..100", option="ante_stakes")
        if not 1 <= self.raise_max_stakes <= 1000:
            raise RuleViolation("BAD_OPTION", "raise_max_stakes must be 1..1000", option="raise_max_stakes")
        if self.turn_timeout_s < 1:
            raise RuleViolation("BAD_OPTION", "turn_timeout_s must be >= 1", option="turn_timeout_s")


_DEFAULTS: Final[Mapping[str, str]] = MappingProxyType(
    {"ante_stakes": "1", "raise_max_stakes": "30", "turn_timeout_s": "15"}
)
# Version 2 changed a rule, not a default.
OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType({1: _DEFAULTS, 2: _DEFAULTS})

# 5.4: the pot (and side pots) to the best hand, unmatched chips back, a leaver's chips to
# the winner (LI-5), the fee (GEN-1). No bonuses.
REASONS: Final[Mapping[str, Reason]] = MappingProxyType(dict(play.LIENG_REASONS))

GAME: Final = play.LiengFamily(
    spec=SPEC,
    options_type=Options,
    option_defaults=OPTION_DEFAULTS,
    rounds=1,
    value=threecard.lieng_value,
    deck_cards=frozenset(canonical_deck("lieng")),
    sap_bonus=False,
)


def hand_value(cards: Sequence[Card]) -> LiengValue:
    """The Liêng value of three cards (5.2; LI-1, LI-2, LI-3, LI-7), totally ordered;
    ``.category`` is ``sap``, ``suited_run``, ``run``, ``faces`` or ``points``, ``.points``
    0–9. Raises RuleViolation("BAD_HAND") unless given three distinct cards."""
    return threecard.lieng_value(cards)


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
    ``side_pot``, ``disconnect_forfeit``, ``fee``."""
    return play.lieng_settle(GAME, state)


def winner(state: State) -> int:
    """The seat that won the main pot: the last left, or the best hand at showdown."""
    return play.lieng_winner(GAME, state)


def can_play(stack_gold: int, stake_gold: int, options: Options) -> bool:
    """A seat plays the next hand when its stack covers the ante (5.1)."""
    return stack_gold >= max(1, stake_gold * options.ante_stakes)


def next_hand_dealer(
    previous_state: State | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The first to act in the next hand (LI-4): the owner first, then the previous winner."""
    return play.lieng_next_hand_dealer(GAME, previous_state, participants, owner_seat)
