"""Texas Hold'em (RULES.md §1, id ``holdem``): the whole hand as a state machine fed by events.

A hand, as the table drives it through ``pending``/``apply``:

1. ``HandStarted``: the button is ``dealer_seat`` (moving it is the table's job, RULES.md
   HE-9; ``next_dealer`` is the pure helper). The small and big blinds are posted at once
   (HE-1: SB = stake/10, BB = 2 × SB, where ``stake_gold`` is the table's Tẩy); a player
   whose stack is below the blind posts it all-in. Heads-up, the dealer posts the small
   blind (HE-4, ``heads_up_dealer_is_small_blind``).
2. ``CardsDealt``: two hole cards face down, one to each seat clockwise from the first
   seat left of the dealer, then round again. Pre-flop betting starts left of the big blind.
3. Betting rounds (``BetAction``; ``TimerExpired`` and leaving act for a silent player),
   then the flop (3 cards), turn (1) and river (1) to ``COMMUNITY``, face up, each followed
   by a round that starts with the first live seat left of the dealer. There are no burn
   cards: the fair shuffle is fixed before the hand (DESIGN.md "Fairness"), so burning
   changes nothing a player can exploit, and the board is simply the next cards of the deck.
4. Play is over when one player is left (a fold-out: no showdown) or the river round ends
   (showdown: best 5 of 7, HE-7). ``HandEnded`` closes the hand; ``settle`` pays the main
   pot and side pots (``socai.rules.pots``), splits ties with the odd chips one at a time
   clockwise from the first seat left of the dealer (HE-6), and charges the table's
   ``fee_bps`` on each seat's net win (GEN-1, HE-11).

Betting (RULES.md 1.3). ``BetAction.amount_gold`` is always the chips the action *adds*:

- check: 0, only when the seat owes nothing; fold: 0 (allowed at any turn);
- call: exactly what the seat owes, or its whole stack when that is less;
- bet (no bet yet on this street): at least the minimum bet (``min_bet``, BB by default);
- raise: the new level must exceed the current one by the minimum raise increment, which is
  the SB (HE-2, ``min_raise="sb"``; ``"bb"`` or ``"last_raise"``, the standard no-limit
  rule, are the product options);
- all-in: everything the seat may still put in, which is its stack, or less where HE-3 caps
  it: a seat's total commitment in the hand never exceeds the largest start-of-hand stack of
  any *other* player still in the hand, since chips above that could never be called.

A bet or raise that is all-in (or at the HE-3 cap) may be smaller than the minimum. Such an
incomplete raise does **not** reopen the betting: players who already acted on this street
may then only call or fold (the standard no-limit rule); only a full raise lets them raise
again. Pre-flop, the price is at least the big blind even when the big blind was posted
all-in for less. A street ends when every live player who is not all-in has acted since the
last full raise and owes nothing; when at most one player can still act and owes nothing,
the remaining board is dealt without betting.

Timeouts, disconnects, leaving (HE-10, GEN-5, GEN-6): ``TimerExpired`` for the seat to act
checks when a check is free, otherwise folds. A disconnected player stays in the hand and is
auto-acted the same way when their timer runs out. ``PlayerLeft`` is a fold, at once even
when it is not the leaver's turn (an all-in player who leaves folds too); chips already put
in stay in the pot, and an unmatched bet of a leaver goes back to them (``pots``).

The state is the kit's frozen, slotted ``@game_state`` (``socai.rules.base``): ``apply``
drafts a copy, changes it and freezes it, never mutating a state it was given. Hold'em
keeps its own betting code rather than the kit's ``socai.rules.betting``: positions
instead of seat maps, the HE-3 caps and incomplete raises that do not reopen the betting
are tuned for the replay hot path (``rules.holdem.replay_6max``); the rules are the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress
from operator import add, not_
from types import MappingProxyType
from typing import Any, Final

from socai.cards import Card
from socai.errors import RuleViolation, check
from socai.events.model import (
    COMMUNITY,
    ActionKind,
    BetAction,
    Body,
    CardsDealt,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    TimerExpired,
)
from socai.rules.base import (
    CLOCKWISE,
    LEGACY_RULES_VERSION,
    POT_REASONS,
    DealSlot,
    Facing,
    GameSpec,
    GameState,
    LegalAction,
    Pending,
    Reason,
    Settlement,
    SettlementBuilder,
    bet_facing,
    game_state,
    next_hand_dealer,
    parse_options,
    seats_after,
    unexpected,
    validate_start,
)
from socai.rules.poker import evaluator
from socai.rules.poker.evaluator import evaluate_batch, strength7
from socai.rules.pots import award_pots, build_pots

__all__ = [
    "MOVES",
    "OPTION_DEFAULTS",
    "REASONS",
    "RULES_VERSION",
    "SPEC",
    "TIMERS",
    "HandValue",
    "HoldemState",
    "Options",
    "apply",
    "candidate_actions",
    "evaluate_batch",
    "hand_value",
    "initial_state",
    "is_finished",
    "legal_actions",
    "next_dealer",
    "pending",
    "settle",
]

SPEC: Final = GameSpec("holdem", "Texas Hold'em", 2, 9, "standard", direction=CLOCKWISE, default_fee_bps=0)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("check", "call", "bet", "raise", "fold", "all_in")
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("turn",)
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"ABOVE_MAX_COMMITMENT": "HE-3", "RAISE_TOO_SMALL": "1.3, HE-2", "BET_TOO_SMALL": "1.3, HE-2"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "HE-10, GEN-6: leaving is a fold; the chips already in the pot stay there"

# Bump when a rule or an Options default changes; OPTION_DEFAULTS keeps every version's
# defaults so that old hands replay under the rules they were played with.
RULES_VERSION: Final = 1
TURN_TIMER: Final = "turn"
TURN_TIMEOUT_S_MAX: Final = 600
STREETS: Final = ("preflop", "flop", "turn", "river")
MIN_RAISE_RULES: Final = ("sb", "bb", "last_raise")
MIN_BET_RULES: Final = ("sb", "bb")

# Action kinds as module constants: the hot path compares against them without the
# enum class's attribute lookup.
_K_FOLD, _K_CHECK, _K_CALL, _K_BET, _K_RAISE, _K_ALL_IN = (
    ActionKind.FOLD,
    ActionKind.CHECK,
    ActionKind.CALL,
    ActionKind.BET,
    ActionKind.RAISE,
    ActionKind.ALL_IN,
)

# Phases of a hand.
_HOLE, _BET, _BOARD, _OVER, _ENDED = range(5)
_PHASE_NAMES: Final = ("deal_hole", "betting", "deal_board", "over", "ended")
_BOARD_CARDS: Final = (0, 3, 1, 1)  # community cards dealt before each street's betting
_BOARD_SLOTS: Final = {k: [(COMMUNITY, True)] * k for k in (1, 3)}


@dataclass(frozen=True, slots=True)
class Options:
    """Hold'em's named flags (RULES.md 1.7), parsed from ``HandStarted.options``."""

    # HE-4: heads-up, the dealer posts the small blind and acts first pre-flop; false
    # applies the general rule literally (the seat left of the dealer is SB).
    heads_up_dealer_is_small_blind: bool = True
    # HE-2: the minimum raise increment: "sb" (the source's "mức cược nhỏ"), "bb", or
    # "last_raise" (standard no-limit: the size of the last full bet or raise, at least BB).
    min_raise: str = "sb"
    # The smallest opening bet on a street, "bb" or "sb". RULES.md is silent; "bb" is the
    # standard no-limit rule.
    min_bet: str = "bb"
    # GEN-5: the turn timer, configurable; on expiry HE-10 applies (check if free, else fold).
    turn_timeout_s: int = 20

    def validate(self) -> None:
        if self.min_raise not in MIN_RAISE_RULES:
            raise RuleViolation("BAD_OPTION", f"min_raise is one of {MIN_RAISE_RULES}", option="min_raise")
        if self.min_bet not in MIN_BET_RULES:
            raise RuleViolation("BAD_OPTION", f"min_bet is one of {MIN_BET_RULES}", option="min_bet")
        if not 1 <= self.turn_timeout_s <= TURN_TIMEOUT_S_MAX:
            raise RuleViolation("BAD_OPTION", "turn_timeout_s is 1..600", option="turn_timeout_s")


OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType(
    {
        1: MappingProxyType(
            {"heads_up_dealer_is_small_blind": "true", "min_raise": "sb", "min_bet": "bb", "turn_timeout_s": "20"}
        ),
    }
)

# Every settlement reason code Hold'em emits (RULES.md 1.4: no bonuses, no penalties).
REASONS: Final[Mapping[str, Reason]] = POT_REASONS


# --- hand values ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class HandValue:
    """The value of the best 5 of 5-7 cards: ordered by ``strength`` (1..7462, higher is
    stronger), equal exactly when the hands are equally strong (RULES.md 1.2, HE-5)."""

    strength: int

    @property
    def category(self) -> str:
        """``straight_flush`` … ``high_card`` (``socai.rules.ranking.CATEGORY_NAMES``)."""
        return evaluator.category_name(self.strength)


def hand_value(cards: Sequence[Card]) -> HandValue:
    """The value of the best 5-card hand among 5 to 7 distinct cards (best 5 of 7, HE-7).

    A is high, and low only in A-2-3-4-5, the lowest straight and straight flush (HE-8).
    Raises InvalidArgument("BAD_HAND") for another number of cards or a repeated card.
    """
    return HandValue(evaluator.strength(cards))


# --- seating ----------------------------------------------------------------------------


def warm() -> None:
    """Build the evaluator's lookup tables now (``registry.warm``): built on first use they
    would hold up the first showdown by ~0.4 s."""
    evaluator.tables()


def next_dealer(previous_dealer: int, participating_seats: Iterable[int], seats_max: int) -> int:
    """The button of the next hand (RULES.md HE-9), the kit's default
    ``base.next_hand_dealer``: the first seat clockwise after ``previous_dealer`` that
    takes part in the new hand (``previous_dealer`` itself only when it is the sole
    participant). The first hand's dealer is the table owner.

    Raises RuleViolation("BAD_SEATS") when nobody takes part or a seat is off the table.
    """
    seats = sorted(set(participating_seats))
    if not seats or any(not 0 <= s < seats_max for s in seats) or not 0 <= previous_dealer < seats_max:
        raise RuleViolation("BAD_SEATS", "participating seats must be on the table")
    return next_hand_dealer(True, previous_dealer, seats, seats_max, -1, direction=CLOCKWISE)


# --- state ------------------------------------------------------------------------------

_NOT_FOLDED: Final = (False,) * SPEC.players_max  # for the caps of a hand's first states


class _Layout:
    """Who sits where for one seating, dealer and options: positions, blinds, first to
    act, and the answers ``pending`` gives. Shared by every hand with the same seating
    (cached), never modified.

    Positions 0..n-1 are the seats in dealing order: clockwise from the first seat left of
    the dealer, the dealer last. That is also the payout order of odd chips (HE-6).
    """

    __slots__ = (
        "bb_pos",
        "board_pending",
        "hole_pending",
        "hole_seats",
        "n",
        "options",
        "order_in_started",
        "pos_of",
        "preflop_first",
        "rotations",
        "sb_pos",
        "seats",
        "turn_pending",
    )

    def __init__(self, numbers: tuple[int, ...], dealer_seat: int, seats_max: int, options: Options) -> None:
        order = seats_after(numbers, dealer_seat, seats_max, CLOCKWISE)
        n = len(order)
        self.options = options
        self.n = n
        self.seats: tuple[int, ...] = tuple(order)
        # order_in_started[pos]: the index in HandStarted.seats of the seat at ``pos``
        # (``numbers`` lists the seats in that order), so a hand reads its players and
        # stacks without a lookup by seat number.
        self.order_in_started: tuple[int, ...] = tuple([numbers.index(seat) for seat in order])
        self.pos_of: dict[int, int] = {seat: pos for pos, seat in enumerate(order)}
        if n == 2 and options.heads_up_dealer_is_small_blind:
            self.sb_pos, self.bb_pos = 1, 0  # HE-4: the dealer (last position) is SB
        else:
            self.sb_pos, self.bb_pos = 0, 1
        self.preflop_first = (self.bb_pos + 1) % n  # the player left of the big blind
        self.hole_seats: list[int] = order * 2
        # rotations[p]: every position clockwise from p (p may be n, which wraps to 0).
        self.rotations = tuple(tuple((p + k) % n for k in range(n)) for p in range(n + 1))
        self.hole_pending = Pending(deal=tuple(DealSlot(seat, False) for seat in order) * 2)
        self.board_pending = tuple(
            Pending(deal=tuple(DealSlot(COMMUNITY, True) for _ in range(k))) for k in _BOARD_CARDS
        )
        self.turn_pending = tuple(
            Pending(to_act=(seat,), timer=TURN_TIMER, timeout_s=options.turn_timeout_s) for seat in order
        )


@lru_cache(maxsize=4096)
def _layout(
    numbers: tuple[int, ...],
    dealer_seat: int,
    seats_max: int,
    option_items: frozenset[tuple[str, str]],
    rules_version: int,
) -> _Layout:
    # Keyed by the raw option items, not the parsed Options: hashing a frozen dataclass
    # runs Python code, and every hand of a replay looks its layout up here.
    return _Layout(numbers, dealer_seat, seats_max, _options(option_items, rules_version))


@lru_cache(maxsize=1024)
def _options(items: frozenset[tuple[str, str]], rules_version: int) -> Options:
    # The options the hand states, the others at their defaults under the hand's rules
    # version (``base.resolve_options``; UNKNOWN_RULES_VERSION for a version not known).
    defaults = OPTION_DEFAULTS.get(rules_version)
    if defaults is None:
        raise RuleViolation("UNKNOWN_RULES_VERSION", f"Hold'em has no rules version {rules_version}")
    return parse_options(Options, {**defaults, **dict(items)})


class _Hand:
    """What stays fixed for the whole hand, shared by all its states (never modified)."""

    __slots__ = (
        "bb_gold",
        "bb_pos",
        "board_pending",
        "caps0",
        "fee_bps",
        "hole_pending",
        "hole_seats",
        "last_raise_rule",
        "min_bet_gold",
        "min_raise_gold",
        "n",
        "options",
        "pos_of",
        "preflop_first",
        "rotations",
        "sb_gold",
        "sb_pos",
        "seat_players",
        "seats",
        "stack0",
        "started",
        "turn_pending",
    )

    def __init__(self, started: HandStarted, layout: _Layout) -> None:
        options = layout.options
        self.started = started
        self.options = options
        self.n = layout.n
        self.seats = layout.seats
        self.pos_of = layout.pos_of
        self.sb_pos = layout.sb_pos
        self.bb_pos = layout.bb_pos
        self.preflop_first = layout.preflop_first
        self.rotations = layout.rotations
        self.hole_seats = layout.hole_seats
        self.hole_pending = layout.hole_pending
        self.board_pending = layout.board_pending
        self.turn_pending = layout.turn_pending
        infos = [started.seats[i] for i in layout.order_in_started]
        # Seat → player id in dealing order, for ``settle``'s SettlementBuilder (which only
        # reads it).
        self.seat_players: dict[int, str] = {info.seat: info.player_id for info in infos}
        self.stack0: tuple[int, ...] = tuple([info.stack_gold for info in infos])
        # The HE-3 caps while nobody has folded (most states of a hand until the first fold).
        self.caps0 = _caps(self.stack0, _NOT_FOLDED, layout.rotations[0])
        self.sb_gold = started.stake_gold // 10  # HE-1: 1/10 of the Tẩy
        self.bb_gold = 2 * self.sb_gold  # HE-1: 2/10 of the Tẩy, twice the SB
        self.min_raise_gold = self.sb_gold if options.min_raise == "sb" else self.bb_gold
        self.last_raise_rule = options.min_raise == "last_raise"
        self.min_bet_gold = self.sb_gold if options.min_bet == "sb" else self.bb_gold
        self.fee_bps = started.fee_bps


@game_state
class HoldemState(GameState):
    """One moment of a hand. Immutable by contract: ``apply`` returns a new state.

    Per-position lists (index = position, see ``seats``): ``stack`` (chips behind),
    ``committed`` (put in this hand), ``street_bet`` (put in on this street), ``folded``,
    ``acted`` (acted on this street since the last full bet or raise). ``bet`` is the
    level to match on this street, ``to_act`` the position to act (-1 when nobody).
    """

    hand: _Hand
    phase: int
    street: int
    stack: list[int]
    committed: list[int]
    street_bet: list[int]
    folded: list[bool]
    acted: list[bool]
    away: frozenset[int]  # positions disconnected now
    left: frozenset[int]  # positions whose player left the hand
    to_act: int
    bet: int
    last_raise_gold: int  # the last full bet or raise increment on this street
    live: int  # players not folded
    # HE-3 caps: (the largest start-of-hand stack of a live player, its position, the
    # second largest); a seat's cap is the largest stack among the *other* live players.
    caps: tuple[int, int, int]
    hole: tuple[tuple[Card, ...], ...]
    board: tuple[Card, ...]
    dealt: frozenset[int]  # the cards dealt so far, as rank * 4 + suit

    # --- read-only views, for the table service and tests -------------------------------

    @property
    def seats(self) -> tuple[int, ...]:
        """The seats dealt in, clockwise from the first seat left of the dealer."""
        return self.hand.seats

    @property
    def phase_name(self) -> str:
        return _PHASE_NAMES[self.phase]

    @property
    def street_name(self) -> str:
        return STREETS[self.street]

    @property
    def seat_to_act(self) -> int | None:
        return self.hand.seats[self.to_act] if self.phase == _BET else None

    @property
    def pot_gold(self) -> int:
        """Everything put in so far, by every seat."""
        return sum(self.committed)

    @property
    def small_blind_seat(self) -> int:
        return self.hand.seats[self.hand.sb_pos]

    @property
    def big_blind_seat(self) -> int:
        return self.hand.seats[self.hand.bb_pos]

    def stack_of(self, seat: int) -> int:
        return self.stack[_pos(self, seat)]

    def committed_of(self, seat: int) -> int:
        return self.committed[_pos(self, seat)]

    def street_bet_of(self, seat: int) -> int:
        return self.street_bet[_pos(self, seat)]

    def is_folded(self, seat: int) -> bool:
        return self.folded[_pos(self, seat)]

    def is_disconnected(self, seat: int) -> bool:
        return _pos(self, seat) in self.away

    def hole_cards(self, seat: int) -> tuple[Card, ...]:
        pos = _pos(self, seat)
        return self.hole[pos] if self.hole else ()

    def snapshot(self) -> tuple[Any, ...]:
        """Every field's value, for comparing states (``==`` uses it)."""
        return (
            self.hand.started,
            self.phase,
            self.street,
            tuple(self.stack),
            tuple(self.committed),
            tuple(self.street_bet),
            tuple(self.folded),
            tuple(self.acted),
            self.away,
            self.left,
            self.to_act,
            self.bet,
            self.last_raise_gold,
            self.live,
            self.hole,
            self.board,
            self.dealt,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HoldemState):
            return NotImplemented
        return self.snapshot() == other.snapshot()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"HoldemState({self.phase_name}, {self.street_name}, to_act={self.seat_to_act}, "
            f"stacks={self.stack}, committed={self.committed}, folded={self.folded})"
        )


def _pos(state: HoldemState, seat: int) -> int:
    pos = state.hand.pos_of.get(seat)
    if pos is None:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat} is not in this hand", seat=seat)
    return pos


# --- the contract -----------------------------------------------------------------------


def initial_state(started: HandStarted) -> HoldemState:
    """The state right after ``HandStarted``: blinds posted, waiting for the hole cards.

    Raises RuleViolation with the kit's codes (``base.validate_start``): WRONG_GAME,
    BAD_SEAT_COUNT (2..9 players), BAD_SEATS (seats_max 2..9, seats on the table, distinct
    players), BAD_STACK (a stack must be a positive int), BAD_STAKE (the SB, stake/10, is
    at least 1), BAD_FEE (0..1000 bps), BAD_DEALER (the button is a seat in the hand),
    BAD_OWNER, UNKNOWN_RULES_VERSION, BAD_OPTION.
    """
    validate_start(SPEC, started, stake_min_gold=10)
    numbers = [info.seat for info in started.seats]
    # The layout parses the options (BAD_OPTION) the first time a seating is seen.
    hand = _Hand(
        started,
        _layout(
            tuple(numbers),
            started.dealer_seat,
            started.seats_max,
            frozenset(started.options.items()),
            started.rules_version or LEGACY_RULES_VERSION,
        ),
    )
    n = hand.n
    folded = [False] * n
    behind = list(hand.stack0)
    committed = [0] * n
    # The system posts the blinds (RULES.md 1.3); a short stack posts all it has.
    for pos, blind in ((hand.sb_pos, hand.sb_gold), (hand.bb_pos, hand.bb_gold)):
        put = blind if blind < behind[pos] else behind[pos]
        behind[pos] -= put
        committed[pos] += put
    return HoldemState.create(
        hand=hand,
        phase=_HOLE,
        street=0,
        stack=behind,
        committed=committed,
        street_bet=committed[:],  # the blinds are all that is in before the first street
        folded=folded,
        acted=[False] * n,
        away=_NOBODY,
        left=_NOBODY,
        to_act=-1,
        bet=hand.bb_gold,
        last_raise_gold=hand.bb_gold,
        live=n,
        caps=hand.caps0,
        hole=(),
        board=(),
        dealt=_NOBODY,
    )


_NOBODY: Final[frozenset[int]] = frozenset()


def apply(state: HoldemState, body: Body) -> HoldemState:
    """The state after ``body``; ``state`` is never modified.

    Raises RuleViolation with a stable code and leaves ``state`` as it was: HAND_FINISHED,
    UNKNOWN_SEAT, SEAT_FOLDED, NOT_YOUR_TURN, BAD_BET_KIND, BAD_AMOUNT, CANNOT_CHECK,
    NOTHING_TO_CALL, WRONG_CALL_AMOUNT, BET_TOO_SMALL, RAISE_TOO_SMALL, RAISE_NOT_ALLOWED,
    BET_ABOVE_STACK, ABOVE_MAX_COMMITMENT, WRONG_DEAL, WRONG_TIMER, HAND_NOT_OVER,
    UNEXPECTED_EVENT.
    """
    cls = type(body)
    # The two bodies of almost every event of a hand, without the table lookup.
    if cls is BetAction:
        return _apply_bet(state, body)  # type: ignore[arg-type]
    if cls is CardsDealt:
        return _apply_deal(state, body)  # type: ignore[arg-type]
    handler = _HANDLERS.get(cls)
    if handler is None:
        raise unexpected(SPEC.name, body)
    new: HoldemState = handler(state, body)
    return new


def pending(state: HoldemState) -> Pending:
    """What the hand waits for: cards to deal, the seat to act, or nothing (play is over)."""
    phase = state.phase
    if phase == _BET:
        return state.hand.turn_pending[state.to_act]
    if phase == _HOLE:
        return state.hand.hole_pending
    if phase == _BOARD:
        return state.hand.board_pending[state.street]
    return _FINISHED


_FINISHED: Final = Pending(finished=True)


def is_finished(state: HoldemState) -> bool:
    """True once ``HandEnded`` has been applied; then ``settle`` may be called."""
    return state.phase == _ENDED


def legal_actions(state: HoldemState, seat: int) -> tuple[LegalAction, ...]:
    """The moves ``seat`` may make now, with inclusive bounds on the chips each adds;
    empty when it is not that seat's turn."""
    pos = state.hand.pos_of.get(seat)
    if pos is None or state.phase != _BET or pos != state.to_act:
        return ()
    owed, max_add, may_raise = _limits(state, pos)
    call = min(owed, state.stack[pos])
    out = [LegalAction(ActionKind.FOLD)]
    if owed == 0:
        out.append(LegalAction(ActionKind.CHECK))
    else:
        out.append(LegalAction(ActionKind.CALL, call, call))
    if state.bet == 0:
        if max_add > 0:
            out.append(LegalAction(ActionKind.BET, min(state.hand.min_bet_gold, max_add), max_add))
    elif may_raise:
        out.append(LegalAction(ActionKind.RAISE, min(_min_raise_add(state, pos), max_add), max_add))
    if _all_in_allowed(state, max_add, call, may_raise):
        out.append(LegalAction(ActionKind.ALL_IN, max_add, max_add))
    return tuple(out)


def held(state: HoldemState, seat: int) -> tuple[Card, ...]:
    """``seat``'s two hole cards once dealt (the board is in the events, face up)."""
    return state.hole_cards(seat) if seat in state.hand.pos_of else ()


def committed_gold(state: HoldemState, seat: int) -> int:
    """The chips ``seat`` has put into the pot this hand (blinds included)."""
    pos = state.hand.pos_of.get(seat)
    return state.committed[pos] if pos is not None else 0


def facing(state: HoldemState, seat: int) -> Facing:
    """The bet ``seat`` must match on this street when it is its turn: ``amount_gold`` is
    what calling adds (0: it may check)."""
    return bet_facing(legal_actions(state, seat))


def _all_in_allowed(state: HoldemState, max_add: int, call: int, may_raise: bool) -> bool:
    """All-in (everything the seat may add) is a bet, a raise where raising is open, or a
    call when the call already takes all the seat may add."""
    return max_add > 0 and (state.bet == 0 or may_raise or max_add == call)


def candidate_actions(state: HoldemState, seat: int) -> list[BetAction]:
    """A few legal moves for bots and tests: fold (when facing a bet), check or call, the
    minimum bet or raise, a pot-sized one, and all-in (or the HE-3 maximum)."""
    legal = {a.kind: a for a in legal_actions(state, seat)}
    if not legal:
        return []
    out: list[BetAction] = []
    call = legal.get(ActionKind.CALL)
    if call is not None:
        out.append(BetAction(seat, ActionKind.FOLD, 0))
        out.append(BetAction(seat, ActionKind.CALL, call.min_gold))
        seen = {call.min_gold}
    else:
        out.append(BetAction(seat, ActionKind.CHECK, 0))
        seen = {0}
    all_in = legal.get(ActionKind.ALL_IN)
    if all_in is not None:
        seen.add(all_in.min_gold)  # offered last, as all-in rather than as a bet or raise
    owed = call.min_gold if call is not None else 0
    pot_sized = 2 * owed + state.pot_gold  # a raise to the size of the pot after calling
    for kind in (ActionKind.BET, ActionKind.RAISE):
        action = legal.get(kind)
        if action is not None:
            for amount in (action.min_gold, max(action.min_gold, min(pot_sized, action.max_gold))):
                if amount not in seen:
                    out.append(BetAction(seat, kind, amount))
                    seen.add(amount)
    if all_in is not None and (call is None or all_in.min_gold != call.min_gold):
        out.append(BetAction(seat, ActionKind.ALL_IN, all_in.min_gold))
    return out


def settle(state: HoldemState) -> Settlement:
    """Pots, side pots, split pots and fees of a finished hand.

    Each pot goes to the best hand among the live seats that matched it (one live seat: a
    fold-out, no cards compared); unmatched chips go back to whoever put them in. Ties
    split with odd chips one at a time clockwise from the first seat left of the dealer
    (HE-6). Then ``fee_bps`` is charged on each seat's net positive result (GEN-1).
    Raises RuleViolation("HAND_NOT_OVER") before ``HandEnded``.
    """
    if state.phase != _ENDED:
        raise RuleViolation("HAND_NOT_OVER", "settle needs HandEnded")
    h = state.hand
    started = h.started
    seats = h.seats
    # Positional arguments (game, table_id, hand_id, seat_players): a class call with
    # keywords takes CPython's slower path, once per replayed hand.
    builder = SettlementBuilder(SPEC.game_id, started.table_id, started.hand_id, h.seat_players)
    # Seats that put nothing in have no share in any pot; leaving them out changes nothing.
    contributions = {seats[pos]: put for pos, put in enumerate(state.committed) if put}
    folded = state.folded
    live = list(compress(seats, map(not_, folded)))
    strengths: dict[int, int] = {}
    if len(live) > 1:
        check(len(state.board) == 5, "a showdown needs the whole board")
        c2, c3, c4, c5, c6 = state.board
        for pos, (c0, c1) in enumerate(state.hole):
            if not folded[pos]:
                strengths[seats[pos]] = strength7(c0, c1, c2, c3, c4, c5, c6)

    def winners_of(eligible: tuple[int, ...]) -> list[int]:
        best = max(map(strengths.__getitem__, eligible))
        return [s for s in eligible if strengths[s] == best]

    award_pots(builder, build_pots(contributions, live), winners_of, seats)
    if h.fee_bps:
        builder.charge_fees(h.fee_bps, seats)
    settlement = builder.build()
    # Each seat's net plus its starting stack is what it ends with, never below zero.
    check(min(map(add, map(settlement.nets.__getitem__, seats), h.stack0)) >= 0, "a seat lost more than its stack")
    return settlement


# --- betting ----------------------------------------------------------------------------


def _limits(state: HoldemState, pos: int) -> tuple[int, int, bool]:
    """(chips owed to stay in, the most chips the seat may add, whether it may raise).

    What a seat owes is capped by HE-3: its total commitment never needs to exceed the
    largest start-of-hand stack of another live player, so a seat that already put in
    that much owes nothing.
    """
    top, top_pos, second = state.caps
    room = (second if pos == top_pos else top) - state.committed[pos]
    stack = state.stack[pos]
    owed = state.bet - state.street_bet[pos]
    if owed > room:
        owed = room
    if owed < 0:
        owed = 0
    call = owed if owed < stack else stack
    max_add = room if room < stack else stack
    if max_add < call:
        max_add = call
    may_raise = not state.acted[pos] and max_add > call
    return owed, max_add, may_raise


def _caps(stack0: Sequence[int], folded: Sequence[bool], positions: Iterable[int]) -> tuple[int, int, int]:
    top = second = 0
    top_pos = -1
    for j in positions:
        if not folded[j]:
            stack = stack0[j]
            if stack > top:
                top, top_pos, second = stack, j, top
            elif stack > second:
                second = stack
    return top, top_pos, second


def _min_raise_add(state: HoldemState, pos: int) -> int:
    h = state.hand
    increment = state.last_raise_gold if h.last_raise_rule else h.min_raise_gold
    return state.bet + increment - state.street_bet[pos]


def _check_turn(state: HoldemState, seat: int) -> int:
    """The position of ``seat`` when it is its turn to act; otherwise RuleViolation:
    HAND_FINISHED, UNKNOWN_SEAT, SEAT_FOLDED or NOT_YOUR_TURN, in that order."""
    pos = state.hand.pos_of.get(seat, -1)
    if pos == state.to_act and pos >= 0 and state.phase == _BET:
        return pos
    if state.phase >= _OVER:
        raise RuleViolation("HAND_FINISHED", "play is over")
    if pos < 0:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat} is not in this hand", seat=seat)
    if state.folded[pos]:
        raise RuleViolation("SEAT_FOLDED", f"seat {seat} has folded", seat=seat)
    raise RuleViolation("NOT_YOUR_TURN", f"it is not seat {seat}'s turn", seat=seat)


def _apply_bet(state: HoldemState, body: BetAction) -> HoldemState:
    h = state.hand
    pos = h.pos_of.get(body.seat, -1)
    if pos != state.to_act or pos < 0 or state.phase != _BET:
        _check_turn(state, body.seat)  # raises the reason it is not this seat's turn
    kind = body.kind
    amount = body.amount_gold
    if type(amount) is not int or amount < 0:
        raise RuleViolation("BAD_AMOUNT", f"amount_gold {amount!r} is not a non-negative int")
    if kind == _K_FOLD:
        if amount:
            raise RuleViolation("BAD_AMOUNT", "a fold adds no chips")
        return _fold(state, pos, True)
    owed, max_add, may_raise = _limits(state, pos)
    stack = state.stack[pos]
    if kind == _K_CHECK:
        if amount:
            raise RuleViolation("BAD_AMOUNT", "a check adds no chips")
        if owed:
            raise RuleViolation("CANNOT_CHECK", f"seat {body.seat} faces a bet of {owed}")
    elif kind == _K_CALL:
        if not owed:
            raise RuleViolation("NOTHING_TO_CALL", "there is no bet to call: check")
        call = owed if owed < stack else stack
        if amount != call:
            raise RuleViolation("WRONG_CALL_AMOUNT", f"a call adds exactly {call}", expected=call)
    elif kind in (_K_BET, _K_RAISE):
        if (kind == _K_BET) != (state.bet == 0):
            message = "there is a bet: call or raise" if state.bet else "there is no bet to raise: bet"
            raise RuleViolation("BAD_BET_KIND", message)
        if amount > stack:
            raise RuleViolation("BET_ABOVE_STACK", f"seat {body.seat} has only {stack}", stack=stack)
        if amount > max_add:
            raise RuleViolation(
                "ABOVE_MAX_COMMITMENT", f"at most {max_add} (the largest other stack, HE-3)", max=max_add
            )
        if kind == _K_BET:
            if amount == 0 or (amount < h.min_bet_gold and amount != max_add):
                raise RuleViolation("BET_TOO_SMALL", f"the minimum bet is {h.min_bet_gold}")
        else:
            if not may_raise:
                raise RuleViolation("RAISE_NOT_ALLOWED", "the betting was not reopened: call or fold")
            if amount <= owed or (amount < _min_raise_add(state, pos) and amount != max_add):
                raise RuleViolation(
                    "RAISE_TOO_SMALL", f"the minimum raise adds {_min_raise_add(state, pos)}", seat=body.seat
                )
    elif kind == _K_ALL_IN:
        if amount != max_add or amount == 0:
            raise RuleViolation("BAD_AMOUNT", f"all-in adds exactly {max_add}", expected=max_add)
        if not _all_in_allowed(state, max_add, owed if owed < stack else stack, may_raise):
            raise RuleViolation("RAISE_NOT_ALLOWED", "the betting was not reopened: call or fold")
    else:
        raise RuleViolation("BAD_BET_KIND", f"unknown action {kind!r}")
    return _commit(state, pos, amount)


def _commit(state: HoldemState, pos: int, add: int) -> HoldemState:
    """The state after the seat at ``pos`` adds ``add`` chips (0 is a check)."""
    h = state.hand
    bet = state.bet
    last_raise_gold = state.last_raise_gold
    acted = None
    if add:
        stack = state.stack[:]
        committed = state.committed[:]
        street_bet = state.street_bet[:]
        stack[pos] -= add
        committed[pos] += add
        level = street_bet[pos] + add
        street_bet[pos] = level
        if level > bet:
            increment = level - bet
            if bet == 0:
                full = h.min_bet_gold
            elif h.last_raise_rule:
                full = last_raise_gold
            else:
                full = h.min_raise_gold
            if increment >= full:
                # A full bet or raise reopens the betting for everyone else.
                acted = [False] * h.n
                last_raise_gold = increment
            bet = level
    else:
        stack = state.stack
        committed = state.committed
        street_bet = state.street_bet
    if acted is None:
        acted = state.acted[:]
    acted[pos] = True
    # ``_next_turn`` sets ``to_act`` and, when the street ends, ``phase`` and ``street``.
    new = state.draft()
    new.stack = stack
    new.committed = committed
    new.street_bet = street_bet
    new.acted = acted
    new.bet = bet
    new.last_raise_gold = last_raise_gold
    _next_turn(new, pos + 1)
    new.__class__ = HoldemState  # freeze(new), inlined on the replay hot path
    return new


def _fold(state: HoldemState, pos: int, on_turn: bool) -> HoldemState:
    h = state.hand
    folded = state.folded[:]
    folded[pos] = True
    live = state.live - 1
    caps = state.caps
    if h.stack0[pos] >= caps[2]:  # the fold may lower someone's HE-3 cap
        caps = _caps(h.stack0, folded, h.rotations[0])
    phase = state.phase
    new = state.draft()
    new.folded = folded
    new.live = live
    new.caps = caps
    if live <= 1:
        new.phase = _OVER
        new.to_act = -1
        new.__class__ = HoldemState  # freeze(new), inlined on the replay hot path
        return new
    if phase == _BET:
        if state.street_bet[pos] >= state.bet:
            # The folder made the price: it is now what live players have put in (the
            # unmatched part of a leaver's bet goes back to them, see ``pots``).
            level = _price_floor(new)
            street_bet = state.street_bet
            for j in range(h.n):
                if not folded[j] and street_bet[j] > level:
                    level = street_bet[j]
            new.bet = level
        _next_turn(new, pos + 1 if on_turn else state.to_act)
    new.__class__ = HoldemState  # freeze(new), inlined on the replay hot path
    return new


def _price_floor(state: HoldemState) -> int:
    """Pre-flop the price is at least the big blind, even after a short blind."""
    return state.hand.bb_gold if state.street == 0 else 0


def _next_turn(new: HoldemState, start: int) -> None:
    """Move ``to_act`` to the next seat (from ``start``, clockwise) that must act, or end
    the street. Modifies ``new``, a fresh copy."""
    folded = new.folded
    stack = new.stack
    acted = new.acted
    street_bet = new.street_bet
    committed = new.committed
    bet = new.bet
    top, top_pos, second = new.caps
    able = 0
    lone_owes = False
    first_needing = -1
    for j in new.hand.rotations[start]:
        if folded[j] or not stack[j]:
            continue
        able += 1
        if first_needing >= 0:
            break  # someone must act, and another player can still act too
        # What j owes (HE-3 caps it at the largest stack of another live player).
        owed = bet - street_bet[j]
        room = (second if j == top_pos else top) - committed[j]
        lone_owes = (owed if owed < room else room) > 0
        if lone_owes or not acted[j]:
            first_needing = j
    # A lone player who can still act is asked only when they owe chips.
    if first_needing >= 0 and (able >= 2 or lone_owes):
        new.to_act = first_needing
        return
    _end_street(new)


def _end_street(new: HoldemState) -> None:
    new.to_act = -1
    if new.live <= 1 or new.street == 3:
        new.phase = _OVER
    else:
        new.street += 1
        new.phase = _BOARD


# --- the other events -------------------------------------------------------------------


def _apply_deal(state: HoldemState, body: CardsDealt) -> HoldemState:
    phase = state.phase
    if phase >= _OVER:
        raise RuleViolation("HAND_FINISHED", "no more cards are dealt")
    h = state.hand
    if phase == _HOLE:
        slots = h.hole_pending.deal
    elif phase == _BOARD:
        slots = h.board_pending[state.street].deal
    else:
        raise RuleViolation("WRONG_DEAL", "no cards are due: a player must act")
    cards = body.cards
    if len(cards) != len(slots):
        raise RuleViolation("WRONG_DEAL", f"{len(slots)} cards are due, not {len(cards)}")
    # Comprehensions, not map(attrgetter): CPython reads a slot attribute in a loop faster
    # than it calls an attrgetter.
    if phase == _HOLE:
        right_slots = [c.seat for c in cards] == h.hole_seats and True not in [c.face_up for c in cards]
    else:
        right_slots = [(c.seat, c.face_up) for c in cards] == _BOARD_SLOTS[len(cards)]
    if not right_slots:
        expected = ", ".join(f"{d.seat}{'' if d.face_up else ' face down'}" for d in slots)
        raise RuleViolation("WRONG_DEAL", f"the cards are due to seats {expected}, in that order")
    faces = [c.card for c in cards]
    indices = {card.rank * 4 + card.suit for card in faces}
    dealt = state.dealt
    if len(indices) != len(faces) or not dealt.isdisjoint(indices):
        raise RuleViolation("WRONG_DEAL", "a card was dealt twice")
    # The street's cards are dealt: its betting round starts.
    new = state.draft()
    new.phase = _BET
    street = state.street
    new.dealt = dealt | indices
    if phase == _HOLE:
        n = h.n
        new.hole = tuple(zip(faces[:n], faces[n:], strict=True))
    else:
        new.board = state.board + tuple(faces)
    if street == 0:
        # Pre-flop the blinds stand as this street's bets; the price is the big blind.
        new.bet = h.bb_gold
        _next_turn(new, h.preflop_first)
    else:
        n = h.n
        new.street_bet = [0] * n
        new.acted = [False] * n
        new.bet = 0
        new.last_raise_gold = h.bb_gold
        _next_turn(new, 0)
    new.__class__ = HoldemState  # freeze(new), inlined on the replay hot path
    return new


def _apply_timer(state: HoldemState, body: TimerExpired) -> HoldemState:
    if body.timer != TURN_TIMER:
        raise RuleViolation("WRONG_TIMER", f"Hold'em runs only the {TURN_TIMER!r} timer")
    pos = _check_turn(state, body.seat)
    # HE-10 / GEN-5: check when a check is free, otherwise fold.
    if _limits(state, pos)[0]:
        return _fold(state, pos, on_turn=True)
    return _commit(state, pos, 0)


def _apply_disconnected(state: HoldemState, body: PlayerDisconnected) -> HoldemState:
    if state.phase == _ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    return state.derive(away=state.away | {_pos(state, body.seat)})


def _apply_reconnected(state: HoldemState, body: PlayerReconnected) -> HoldemState:
    if state.phase == _ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    return state.derive(away=state.away - {_pos(state, body.seat)})


def _apply_left(state: HoldemState, body: PlayerLeft) -> HoldemState:
    if state.phase == _ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    pos = _pos(state, body.seat)
    if state.folded[pos] or state.phase == _OVER:
        # Out of the hand already, or play is over and the result stands: nothing to fold.
        return state.derive(left=state.left | {pos})
    # HE-10: leaving is a fold, at once, whoever's turn it is.
    return _fold(state, pos, on_turn=state.phase == _BET and pos == state.to_act).derive(left=state.left | {pos})


def _apply_ended(state: HoldemState, body: HandEnded) -> HoldemState:
    if state.phase == _ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has already ended")
    if state.phase != _OVER:
        raise RuleViolation("HAND_NOT_OVER", "HandEnded comes after the last action")
    new = state.draft()
    new.phase = _ENDED
    new.__class__ = HoldemState  # freeze(new)
    return new


def _apply_started(state: HoldemState, body: HandStarted) -> HoldemState:
    raise unexpected(SPEC.name, body)


_HANDLERS: Final[dict[type, Any]] = {
    BetAction: _apply_bet,
    CardsDealt: _apply_deal,
    TimerExpired: _apply_timer,
    PlayerDisconnected: _apply_disconnected,
    PlayerReconnected: _apply_reconnected,
    PlayerLeft: _apply_left,
    HandEnded: _apply_ended,
    HandStarted: _apply_started,
}
