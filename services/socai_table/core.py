"""The table's functional core: its state as its facts make it, and what each command decides.

Pure: no I/O, no clock, no randomness (the time comes in as an argument), no protobuf, no
lock. ``TableState`` is a frozen value; ``evolve(state, event)`` is the only way it changes,
for an event of the log (a fact, a hand's start, a player leaving a hand, its end) or one of
the table's own notes (``Note``: what it remembers without writing it, a heartbeat, a
leave asked for after the hand, a close begun, a hand's settlement applied). ``decide(state,
command)`` says what a command does: the effects to perform in order (``Effect``), the
answer, or a refusal with its reason code (raised once the effects are done: a refused join
records its failure first); or what it must read first (``Decision.needs``), which the
shell reads and decides again with.

``socai_table.table.Table`` is the shell: it takes the lock, decides, performs the effects
in order (evolving the state after each event is appended, never before) and answers.
Seats, joins, leaves, stand-ups, closing, the start of a hand, a player's act, what the
table drives without a player (deals, dice, the end: ``Drive``), the hand's timer
(``TimerFired``), heartbeats and the automatic start are decided here. The hand in play's
rules state, deck and events stay in the shell's ``Hand`` (its views read them between
commands): the state knows of the hand what the seats depend on (who was dealt in at which
stack, who left it, whether it ended), and a command about the hand carries what its
decision reads of it (``HandNow``), as a join carries the row it read. The rules engine is
pure, so its ``apply`` is called here and the rules state after each event travels with the
effect that appends it (``AppendHand``). A rebuild folds ``evolve`` over the table's facts
and its last hand (``fold``).

The order of the effects is the table's crash safety, unchanged from before the core: a
buy-in is moved before the seat is taken and the join row marked seated after
(``repair_joins`` finishes a join a crash cut), a cash-out row is written before its
PlayerStoodUp (a crash leaves a row, never a lost cash-out), a close is recorded before any
step of it, each step being a fact a rebuild reads back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType, ModuleType
from typing import Any

from socai import accounts, errors
from socai.events.model import (
    Body,
    CardsDealt,
    Event,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    PlayerSeated,
    PlayerStoodUp,
    SeatInfo,
    TableClosed,
    TimerExpired,
)
from socai.rules import base as kit
from socai.rules import registry
from socai.rules.automatic import automatic_move
from socai.rules.base import Pending
from socai_table.model import TURN_TIMEOUT_DEFAULT_S, Seat, TableConfig, buy_in_key, facts_id_of, hand_id_of

ANY_SEAT = -1  # JoinTable's seat for "any free seat"
LEAVE_NOW = "now"
LEAVE_AFTER_HAND = "after_hand"
STOOD_UP, FORFEITED, AFTER_HAND = "stood_up", "forfeited", "after_hand"
# PlayerSeated's ledger transaction when the decision is taken: the buy-in's transfer,
# made by the effect before it (``Transfer``), fills it in.
TRANSFER_TX = "<the buy-in transfer>"

# What a command must read before it can be decided (``Decision.needs``).
NEEDS_JOIN_ROW = "join_row"  # the join's idempotency row (``TableStore.begin_join``)
NEEDS_BUY_IN_TX = "buy_in_tx"  # the ledger transaction of the join's buy-in, if any
NEEDS_CASHOUT_PENDING = "cashout_pending"  # whether a cash-out of the player here is pending
# An act naming no hand in play: the ended hand's act keys, read from its log outside the
# lock (an ended hand never changes); a retry finds its first result there, else the
# decision's refusal is raised (``act_after_ended_hand``).
NEEDS_ENDED_HAND = "ended_hand"

ACT_KEY_MAX_CHARS = 200
# What the table drives on its own between two decisions (deals, dice, the end): a hand
# that never comes to a decision or an end is a bug of its rules (HAND_RUNAWAY).
DRIVE_STEPS_MAX = 10_000


# --- state ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HandInPlay:
    """What the seats depend on of the hand in play (the rules state stays in ``Hand``)."""

    hand_id: str
    number: int
    started_stream_seq: int
    players: tuple[SeatInfo, ...]  # who was dealt in, at the stack each brought
    closing: bool = False
    left: frozenset[int] = frozenset()  # seats that left it (PlayerLeft)
    ended: bool = False

    @property
    def dealt_seats(self) -> frozenset[int]:
        return frozenset(info.seat for info in self.players)

    def brought(self, seat: int) -> int:
        return next(info.stack_gold for info in self.players if info.seat == seat)


@dataclass(frozen=True)
class TableState:
    """A table as its facts (and its last hand) make it: seats, the close, the hand count,
    the carried pot and the hand in play. ``seats`` is read-only; ``evolve`` makes a new one."""

    table_id: str
    config: TableConfig
    seats: Mapping[int, Seat] = field(default_factory=lambda: MappingProxyType({}))
    facts_seq: int = 0
    closing: bool = False
    closed: bool = False
    close_reason: str = ""
    hands_played: int = 0
    pot_gold: int = 0
    hand: HandInPlay | None = None
    # Seat -> the monotonic second of its player's last heartbeat (a seat absent: none since
    # it was taken). Kept beside ``seats`` rather than in each ``Seat``: a heartbeat, the
    # table's most frequent note, then changes this small mapping and not every seat's.
    heard: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))
    # The game returns a carried pot at the close with a closing hand (the shell reads it
    # from ``socai.settle.replay.has_closing_rule``, which this module does not import).
    closing_rule: bool = False

    @property
    def module(self) -> ModuleType:
        return registry.get(self.config.game)

    def seat_of(self, player_id: str) -> Seat | None:
        return next((s for s in self.seats.values() if s.player_id == player_id), None)

    @property
    def in_play(self) -> HandInPlay | None:
        """The hand in play unless it has ended."""
        return self.hand if self.hand is not None and not self.hand.ended else None

    def participants(self) -> list[int]:
        """The seats that play the next hand: not leaving, and with a stack the game
        accepts (its ``can_play`` hook: an ante, a Gà pay-in, a banker's capacity)."""
        c = self.config
        stacks = {s.seat: s.stack_gold for s in self.seats.values() if not s.leaving}
        return kit.participants(self.module, stacks, c.stake_gold, c.options)

    def autostart_due(self) -> bool:
        """Whether the next hand should start by itself (``auto_start_players`` ready)."""
        wanted = self.config.auto_start_players
        if wanted <= 0 or self.closing or self.in_play is not None:
            return False
        return len(self.participants()) >= max(wanted, kit.players_min(self.module, self.config.options))


def initial(table_id: str, config: TableConfig, *, closing_rule: bool = False) -> TableState:
    return TableState(table_id, config, closing_rule=closing_rule)


# --- the table's own notes (evolved, never written to the log) -------------------------------


@dataclass(frozen=True)
class LeavingMarked:
    """``seat`` stands up when its hand ends (asked to leave after the hand, or a pending
    cash-out found by a rebuild)."""

    seat: int


@dataclass(frozen=True)
class Heard:
    """A heartbeat from ``seat``'s player at ``at_s`` (monotonic seconds)."""

    seat: int
    at_s: float


@dataclass(frozen=True)
class ConnectionChanged:
    seat: int
    connected: bool


@dataclass(frozen=True)
class CloseBegun:
    """The close is recorded in the store, with its first reason."""

    reason: str


@dataclass(frozen=True)
class HandSettled:
    """The hand in play ended and its settlement is known: each occupant's stack becomes
    what they brought plus their net, the pot carried is the settlement's."""

    hand_id: str
    nets: Mapping[int, int]
    pot_carry_gold: int


Note = LeavingMarked | Heard | ConnectionChanged | CloseBegun | HandSettled


def evolve(state: TableState, event: Event | Note, stream_seq: int = 0) -> TableState:
    """``state`` after ``event``: an event of the log (``stream_seq`` its stream sequence),
    a fact of the table or one of its hand's, or a ``Note``. An event the seats do not
    depend on (a deal, a bet) leaves it as it is."""
    if not isinstance(event, Event):
        return _noted(state, event)
    if event.hand_id == facts_id_of(state.table_id):
        state = replace(state, facts_seq=event.seq)
    body = event.body
    seats = state.seats
    if isinstance(body, PlayerSeated):
        state = _unheard(state, body.seat)
        seat = Seat(
            body.seat,
            body.player_id,
            body.buy_in_gold,
            body.guild_id,
            join_tx=body.ledger_transaction_id,
            seated_at=stream_seq,
        )
        return replace(state, seats=_with(seats, seat))
    if isinstance(body, PlayerStoodUp):
        return replace(_unheard(state, body.seat), seats=_without(seats, body.seat))
    if isinstance(body, TableClosed):
        return replace(state, closing=True, closed=True, close_reason=body.reason)
    if isinstance(body, HandStarted):
        return _hand_started(state, body, stream_seq)
    hand = state.hand
    if hand is None or hand.hand_id != event.hand_id:
        return state
    if isinstance(body, PlayerLeft) and not hand.ended:
        # Only the hand's own player of that seat leaves: read back by a rebuild, the seat
        # may be someone's who sat down after the leaver stood up.
        info = next((i for i in hand.players if i.seat == body.seat), None)
        leaver = _occupant(state, info, hand.started_stream_seq) if info is not None else None
        if leaver is not None:
            seats = _with(seats, replace(leaver, leaving=True))
        return replace(state, seats=seats, hand=replace(hand, left=hand.left | {body.seat}))
    if isinstance(body, HandEnded):
        return replace(state, hand=replace(hand, ended=True))
    return state


def _noted(state: TableState, note: Note) -> TableState:
    if isinstance(note, Heard):
        return _heard(state, note)
    if isinstance(note, LeavingMarked):
        return _seat_changed(state, note.seat, leaving=True)
    if isinstance(note, ConnectionChanged):
        return _seat_changed(state, note.seat, connected=note.connected)
    if isinstance(note, CloseBegun):
        return replace(state, closing=True, close_reason=note.reason)
    return _hand_settled(state, note)


def fold(state: TableState, events: Iterable[tuple[Event | Note, int]]) -> TableState:
    """``evolve`` over ``events`` ((event or note, its stream sequence), in order): a rebuild."""
    for event, stream_seq in events:
        state = evolve(state, event, stream_seq)
    return state


def _occupant(state: TableState, info: SeatInfo, started_stream_seq: int) -> Seat | None:
    """``info``'s seat when its player of that hand still holds it: someone who sat down
    after the hand started starts fresh."""
    seat = state.seats.get(info.seat)
    if seat is None or seat.player_id != info.player_id or seat.seated_at >= started_stream_seq:
        return None
    return seat


def _hand_started(state: TableState, started: HandStarted, stream_seq: int) -> TableState:
    """The hand in play, each of its players' stack the one they brought (the same when
    played live; the stack of a rebuild, whose seats come from PlayerSeated)."""
    seats = dict(state.seats)
    for info in started.seats:
        seat = _occupant(state, info, stream_seq)
        if seat is not None:
            seats[info.seat] = replace(seat, stack_gold=info.stack_gold, last_hand_id=started.hand_id)
    hand = HandInPlay(started.hand_id, started.hand_number, stream_seq, started.seats, started.closing)
    return replace(state, seats=MappingProxyType(seats), hand=hand, hands_played=started.hand_number)


def _hand_settled(state: TableState, settled: HandSettled) -> TableState:
    hand = state.hand
    errors.check(hand is not None and hand.hand_id == settled.hand_id, f"{settled.hand_id} is not the hand in play")
    assert hand is not None
    seats = dict(state.seats)
    for info in hand.players:
        seat = _occupant(state, info, hand.started_stream_seq)
        if seat is not None:
            stack = info.stack_gold + settled.nets.get(info.seat, 0)
            seats[info.seat] = replace(seat, stack_gold=stack, last_hand_id=hand.hand_id)
    return replace(state, seats=MappingProxyType(seats), pot_gold=settled.pot_carry_gold, hand=None)


def _heard(state: TableState, heard: Heard) -> TableState:
    """A heartbeat: the hot path of ``evolve`` (every seated client sends one every few
    seconds). Only ``heard`` changes, not ``seats``, and the copy skips
    ``dataclasses.replace``'s walk over every field (most of a heartbeat's cost)."""
    if heard.seat not in state.seats:
        return state
    return _replaced(state, heard=MappingProxyType({**state.heard, heard.seat: heard.at_s}))


def _unheard(state: TableState, number: int) -> TableState:
    """``number``'s heartbeats forgotten: a seat taken again starts with none."""
    if number not in state.heard:
        return state
    return replace(state, heard=MappingProxyType({n: t for n, t in state.heard.items() if n != number}))


def _replaced(state: TableState, **changes: Any) -> TableState:
    """``replace(state, **changes)`` for the hot path: a frozen value copied field by field
    as ``dataclasses.replace`` would (``TableState`` has no ``__post_init__`` nor slots),
    without its per-field checks (~4 µs a call on this machine, ~0.5 µs this way)."""
    new = object.__new__(TableState)
    new.__dict__.update(state.__dict__, **changes)
    return new


def _with(seats: Mapping[int, Seat], seat: Seat) -> Mapping[int, Seat]:
    return MappingProxyType({**seats, seat.seat: seat})


def _without(seats: Mapping[int, Seat], number: int) -> Mapping[int, Seat]:
    return MappingProxyType({n: s for n, s in seats.items() if n != number})


def _seat_changed(state: TableState, number: int, **changes: Any) -> TableState:
    seat = state.seats.get(number)
    if seat is None:
        return state
    return replace(state, seats=_with(state.seats, replace(seat, **changes)))


# --- commands --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinRow:
    """The join's idempotency row as ``TableStore.begin_join`` answers it."""

    table_id: str
    player_id: str
    amount_gold: int
    status: str
    ledger_transaction_id: str = ""
    error: str = ""

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> JoinRow:
        return cls(
            str(row["table_id"]),
            str(row["player_id"]),
            int(row["amount_gold"]),
            str(row["status"]),
            str(row.get("ledger_transaction_id") or ""),
            str(row.get("error") or ""),
        )


@dataclass(frozen=True)
class Join:
    """JoinTable, under ``key`` (the player's own join key, ``ledger_client.join_key``), and
    what the shell read for it (``Decision.needs``)."""

    player_id: str
    buy_in_gold: int
    seat_wanted: int
    key: str
    guild_id: str = ""
    row: JoinRow | None = None
    buy_in_tx: str | None = None  # read: the buy-in's ledger transaction (None: none)
    buy_in_tx_read: bool = False
    cashout_pending: bool | None = None


@dataclass(frozen=True)
class Leave:
    player_id: str
    when: str = LEAVE_NOW
    cashout_pending: bool | None = None  # read when the player leaves after the hand


@dataclass(frozen=True)
class StandUpDue:
    """Between hands: stand up every seat that is leaving or busted."""


@dataclass(frozen=True)
class Close:
    reason: str


@dataclass(frozen=True)
class FinishClose:
    """The close after the last hand."""


@dataclass(frozen=True)
class StartHand:
    pass


@dataclass(frozen=True)
class Heartbeat:
    player_id: str
    now_s: float  # monotonic


@dataclass(frozen=True)
class CheckHeartbeats:
    now_s: float  # monotonic
    timeout_s: float


@dataclass(frozen=True)
class Disconnect:
    """``seat`` missed its heartbeats (``CheckHeartbeats``)."""

    seat: int


@dataclass(frozen=True)
class AfterHand:
    """The hand in play has ended and ``HandSettled`` is evolved: stand-ups, then the close
    or the next hand."""


@dataclass(frozen=True)
class MaybeAutostart:
    """A seat was taken or a hand ended: the next hand may start by itself now."""


@dataclass(frozen=True)
class ActResult:
    """An act's answer: the hand event it wrote (its hand sequence and id)."""

    seq: int
    event_id: str
    log_seq: int = 0  # the event's stream sequence in the log


@dataclass(frozen=True)
class HandNow:
    """What a decision about the hand in play reads of the shell's ``Hand`` (its rules
    state, deck and events stay there, where the views read them between commands): the
    rules state after its last event, the shuffled deck and the next card to deal from it,
    the seed HandEnded reveals, whether it is a closing hand (no rules state, no card), and
    the house-bank gold held for it (``HoldHouse``).
    A command about the hand carries it, as a join carries the row it read."""

    hand_id: str
    rules: Any
    deck: Sequence[Any]
    next_card: int
    seed: bytes
    closing: bool = False
    held_gold: int = 0  # house:bank gold the ledger holds for the hand, as the table knows it


@dataclass(frozen=True)
class Act:
    """A player's decision ``body`` in ``hand_id`` (ActOnTable) under the player's
    idempotency ``key``; ``seat_no`` is the seat the caller names (0: "mine"). ``hand`` is
    the hand in play (None: none is), ``answered`` the first result and decision of
    ``key`` in ``hand_id`` as the table remembers it (the hand in play's or its last
    hand's), or None."""

    player_id: str
    hand_id: str
    seat_no: int
    body: Body
    key: str
    hand: HandNow | None = None
    answered: tuple[ActResult, Body] | None = None


@dataclass(frozen=True)
class Drive:
    """The hand in play goes on by itself to its next decision (deals, dice) or its end."""

    hand: HandNow | None


@dataclass(frozen=True)
class TimerFired:
    """The hand timer armed for ``hand_id`` ran out. ``current``: it is still the timer last
    armed (``HandTimer.is_current``: a command may have moved the hand on while it waited
    for the lock); ``synced``: the table is not behind its log (an append failed)."""

    hand_id: str
    current: bool
    synced: bool
    hand: HandNow | None


Command = (
    Join
    | Leave
    | StandUpDue
    | Close
    | FinishClose
    | StartHand
    | Heartbeat
    | CheckHeartbeats
    | Disconnect
    | AfterHand
    | MaybeAutostart
    | Act
    | Drive
    | TimerFired
)


# --- effects ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transfer:
    """A ledger transfer under ``idempotency_key``; when the ledger refuses it, ``refused``
    is performed and its refusal raised (nothing after it is performed)."""

    idempotency_key: str
    debit_account: str
    credit_account: str
    amount_gold: int
    reason: str
    reference: str
    refused: FinishJoin | None = None


@dataclass(frozen=True)
class FinishJoin:
    """Mark the join row ``status`` (``tx``: TRANSFER_TX for the transfer just made)."""

    key: str
    status: str
    tx: str = ""
    error: str = ""


@dataclass(frozen=True)
class AppendFact:
    """Append ``body`` to the table's facts, then evolve the state with it."""

    body: Any


@dataclass(frozen=True)
class HandEvent:
    """Append ``body`` to the hand in play (the rules engine applies it first; a refusal
    raises, unless ``ignore_refusal``: then it is logged and the decision's effects end
    there), then drive the hand on (``Advance``) when ``advance``."""

    body: Any
    advance: bool = True
    ignore_refusal: bool = False


@dataclass(frozen=True)
class AppendHand:
    """Append ``body`` to the hand in play, ``rules_after`` its rules state after it as the
    decision applied it (None: a closing hand's HandEnded), under the act's ``key`` and
    ``player_id`` when a player's (the event's headers). A bet that raises what the house
    bank may lose comes after its ``HoldHouse``."""

    body: Any
    rules_after: Any
    key: str = ""
    player_id: str = ""


@dataclass(frozen=True)
class HoldHouse:
    """Hold ``exposure_gold`` of ``house:bank`` in the ledger for hand ``hand_id`` (which
    holds ``held_gold`` now) before the event that raises what the bank may lose on it to
    that (a bet against the house: ``kit.house_exposure``), so that its settlement can
    always be paid. A bank that cannot cover it refuses the event (BANKER_CAPACITY)."""

    hand_id: str
    exposure_gold: int
    held_gold: int


@dataclass(frozen=True)
class RecordAct:
    """Remember the hand event just appended as ``key``'s first result (a retry answers it)."""

    player_id: str
    key: str
    body: Body


@dataclass(frozen=True)
class Advance:
    """Drive the hand in play on (``Drive``, on the hand as the effects before left it)."""


@dataclass(frozen=True)
class ArmTimer:
    """Cancel the hand's timer, and arm it anew for ``hand_id`` with ``timeout_s`` when the
    hand waits for a seat (0: it waits for nobody)."""

    hand_id: str
    timeout_s: float


@dataclass(frozen=True)
class HandOver:
    """The hand in play's HandEnded is written: the hand has ended (counted among the
    hands played when ``counted``: a closing hand is not), its settlement and what follows
    it are ``Table._after_hand``'s."""

    counted: bool = True


@dataclass(frozen=True)
class CountTimeout:
    """A hand timer ``timer`` ran out and its expiries are written (a metric)."""

    timer: str


@dataclass(frozen=True)
class Evolve:
    """Evolve the state with a note of the table's own (nothing is written)."""

    note: Note


@dataclass(frozen=True)
class MarkLeaving:
    """Record ``seat``'s cash-out as pending (unless one is: ``row_exists``), so a rebuild
    knows the player leaves; then note the seat leaving."""

    seat: int
    row_exists: bool


@dataclass(frozen=True)
class StandUp:
    """Stand ``seat`` up: its cash-out row first, with the stack as it is then (a crash now
    leaves a row, never a lost cash-out), then PlayerStoodUp, then wake the cash-outs."""

    seat: int


@dataclass(frozen=True)
class BeginClose:
    """Record the close in the store (the first reason given is kept: ``CloseBegun``) and
    cancel the automatic start."""

    reason: str


@dataclass(frozen=True)
class ClosingHand:
    """Write the closing hand (a carried pot returned to the players seated)."""


@dataclass(frozen=True)
class CloseDone:
    """The close is complete: the store's row, the hand timer, the manager told."""


@dataclass(frozen=True)
class PlayHand:
    """Start hand ``number`` for ``seats`` (seed, HandStarted, the rules' first moves)."""

    hand_id: str
    number: int
    seats: tuple[int, ...]
    owner_seat: int


@dataclass(frozen=True)
class ScheduleAutostart:
    delay_s: float


@dataclass(frozen=True)
class Then:
    """Decide ``command`` on the state as it is then, and perform that decision."""

    command: Command


Effect = (
    Transfer
    | FinishJoin
    | AppendFact
    | HandEvent
    | Evolve
    | MarkLeaving
    | StandUp
    | BeginClose
    | ClosingHand
    | CloseDone
    | PlayHand
    | ScheduleAutostart
    | Then
    | HoldHouse
    | AppendHand
    | RecordAct
    | Advance
    | ArmTimer
    | HandOver
    | CountTimeout
)


@dataclass(frozen=True)
class ActAnswer:
    """What ``Table.act`` answers: the act's ``result`` (None: the event its ``RecordAct``
    remembers, known once appended) and whether it answers a retry (``replayed``)."""

    result: ActResult | None
    replayed: bool


@dataclass(frozen=True)
class LeaveResult:
    """What ``Table.leave`` did: ``outcome`` STOOD_UP (no hand of the player's in play: the
    cash-out of ``cash_out_gold`` follows), FORFEITED (left ``hand_id`` by the game's rule,
    ``forfeit``; stands up when it ends) or AFTER_HAND (plays ``hand_id`` out first); the
    most the hand can cost (``at_most_gold``: the stack brought into it, GEN-4)."""

    outcome: str
    hand_id: str = ""
    cash_out_gold: int = 0
    forfeit: kit.Forfeit | None = None
    at_most_gold: int = 0


@dataclass(frozen=True)
class Decision:
    """What a command does: ``effects`` in order, then ``refusal`` raised or ``answer``
    returned; or, with ``needs``, nothing yet (the shell reads it and decides again)."""

    effects: tuple[Effect, ...] = ()
    answer: Any = None
    refusal: errors.SocaiError | None = None
    needs: str = ""
    # A bug met while deciding (an invariant of the rules engine broken: ``errors.check``),
    # raised like a refusal after the effects decided before it: the shell met it there
    # when it applied each event just before appending it.
    failure: Exception | None = None


def refuse(refusal: errors.SocaiError, *effects: Effect) -> Decision:
    return Decision(effects, refusal=refusal)


def decide(state: TableState, command: Command) -> Decision:
    """What ``command`` does at ``state`` (see ``Decision``). Raises InvalidArgument
    ("BAD_COMMAND") for an object that is no ``Command`` (a bug, never a client's input)."""
    decider = _DECIDERS.get(type(command))
    if decider is None:
        raise errors.InvalidArgument("BAD_COMMAND", f"the table has no command {type(command).__name__}")
    return decider(state, command)


def open_refusal(state: TableState) -> errors.SocaiError | None:
    """TABLE_CLOSED or TABLE_CLOSING, or None when the table takes joins and hands."""
    if state.closed:
        return errors.PreconditionFailed("TABLE_CLOSED", f"{state.table_id} is closed")
    if state.closing:
        return errors.PreconditionFailed(
            "TABLE_CLOSING", f"{state.table_id} is closing ({state.close_reason}): no joins, no new hands"
        )
    return None


def join_refusal(config: TableConfig, buy_in_gold: int, seat_wanted: int) -> errors.SocaiError | None:
    """BAD_BUY_IN or BAD_SEAT, checked before anything is read or recorded (a bad seat
    changes nothing: -1 alone means any free seat)."""
    c = config
    if not c.buy_in_min_gold <= buy_in_gold <= c.buy_in_max_gold:
        return errors.InvalidArgument(
            "BAD_BUY_IN", f"buy-in must be {c.buy_in_min_gold}..{c.buy_in_max_gold} gold, not {buy_in_gold}"
        )
    if not ANY_SEAT <= seat_wanted < c.seats_max:
        return errors.InvalidArgument(
            "BAD_SEAT", f"seat must be {ANY_SEAT} (any free seat) or 0..{c.seats_max - 1}, not {seat_wanted}"
        )
    return None


def _decide_join(state: TableState, j: Join) -> Decision:
    """A join key means one seating forever: a retry while that seating lasts answers its
    seat; once the player has left, the same key is JOIN_KEY_USED rather than seating the
    player again on a buy-in the ledger already moved once."""
    bad = join_refusal(state.config, j.buy_in_gold, j.seat_wanted) or open_refusal(state)
    if bad is not None:
        return refuse(bad)
    row = j.row
    if row is None:
        return Decision(needs=NEEDS_JOIN_ROW)
    if (row.table_id, row.player_id, row.amount_gold) != (state.table_id, j.player_id, j.buy_in_gold):
        return refuse(errors.PreconditionFailed("IDEMPOTENCY_KEY_REUSED", "this join key was used for another join"))
    existing = state.seat_of(j.player_id)
    if row.status == "seated":
        if existing is not None and existing.join_tx == row.ledger_transaction_id:
            return Decision(answer=existing.seat)
        # The seating this key paid for is over (or another one holds the seat): the
        # ledger would answer REPLAYED and move nothing, so seating again would put chips
        # on the table that no escrow backs.
        return refuse(
            errors.PreconditionFailed(
                "JOIN_KEY_USED", "this join key already seated the player once; a new join needs a new key"
            )
        )
    if row.status in ("failed", "refunded"):
        return refuse(errors.PreconditionFailed("JOIN_FAILED", f"this join already failed: {row.error}"))
    if existing is not None:
        # A retry of a join whose seating was written but not acknowledged (NATS went away
        # between the append and its ack): that seat is this key's.
        if not j.buy_in_tx_read:
            return Decision(needs=NEEDS_BUY_IN_TX)
        if j.buy_in_tx is not None and existing.join_tx == j.buy_in_tx:
            return Decision((FinishJoin(j.key, "seated", j.buy_in_tx),), answer=existing.seat)
        return refuse(
            errors.AlreadyExists("ALREADY_SEATED", f"{j.player_id} is already at seat {existing.seat}"),
            FinishJoin(j.key, "failed", error="already seated"),
        )
    if j.cashout_pending is None:
        return Decision(needs=NEEDS_CASHOUT_PENDING)
    if j.cashout_pending:
        return refuse(
            errors.PreconditionFailed("CASHOUT_PENDING", "the previous cash-out at this table is not done"),
            FinishJoin(j.key, "failed", error="cash-out pending"),
        )
    seat = free_seat(state, j.seat_wanted)
    if isinstance(seat, errors.SocaiError):
        return refuse(seat)
    # The buy-in first (wallet → escrow), the seat then, the row last: a crash between
    # leaves a row ``repair_joins`` finishes (seated, or the buy-in refunded).
    transfer = Transfer(
        buy_in_key(j.key, state.table_id),
        accounts.player(j.player_id),
        accounts.escrow(state.table_id, j.player_id),
        j.buy_in_gold,
        "buy_in",
        state.table_id,
        refused=FinishJoin(j.key, "failed"),
    )
    seated = PlayerSeated(seat, j.player_id, j.buy_in_gold, j.guild_id, TRANSFER_TX)
    return Decision(
        (transfer, AppendFact(seated), FinishJoin(j.key, "seated", TRANSFER_TX), Then(MaybeAutostart())), answer=seat
    )


def free_seat(state: TableState, wanted: int) -> int | errors.SocaiError:
    """``wanted`` when it is free (SEAT_TAKEN otherwise), or the first free seat for
    ANY_SEAT (TABLE_FULL when none is)."""
    errors.check(ANY_SEAT <= wanted < state.config.seats_max, f"seat {wanted} was checked by join_refusal")
    if wanted != ANY_SEAT:
        if wanted in state.seats:
            return errors.PreconditionFailed("SEAT_TAKEN", f"seat {wanted} is taken")
        return wanted
    for seat in range(state.config.seats_max):
        if seat not in state.seats:
            return seat
    return errors.PreconditionFailed("TABLE_FULL", f"all {state.config.seats_max} seats are taken")


def _decide_leave(state: TableState, leave: Leave) -> Decision:
    """Stand up now, or leave the hand in play now (``LEAVE_NOW``: the game's leaving rule,
    ``PlayerLeft``) or at its end (``LEAVE_AFTER_HAND``), and stand up then. Asking again
    answers what was done; leaving now after asking to leave after the hand forfeits the
    hand. The FORFEITED answer's ``forfeit`` is the rules state's: the shell fills it in."""
    seat = state.seat_of(leave.player_id)
    if seat is None:
        return refuse(errors.NotFound("NOT_SEATED", f"{leave.player_id} is not seated at {state.table_id}"))
    hand = state.in_play
    if hand is not None and seat.seat in hand.dealt_seats:
        brought = hand.brought(seat.seat)
        left = seat.seat in hand.left
        if leave.when == LEAVE_AFTER_HAND and not left:
            answer = LeaveResult(AFTER_HAND, hand.hand_id, at_most_gold=brought)
            if seat.leaving:
                return Decision(answer=answer)
            if leave.cashout_pending is None:
                return Decision(needs=NEEDS_CASHOUT_PENDING)
            return Decision((MarkLeaving(seat.seat, leave.cashout_pending),), answer=answer)
        answer = LeaveResult(FORFEITED, hand.hand_id, at_most_gold=brought)
        if left:
            return Decision(answer=answer)
        return Decision((Evolve(LeavingMarked(seat.seat)), HandEvent(PlayerLeft(seat.seat))), answer=answer)
    return Decision((StandUp(seat.seat),), answer=LeaveResult(STOOD_UP, cash_out_gold=seat.stack_gold))


def _decide_stand_up_due(state: TableState, _command: object = None) -> Decision:
    """Busted is below the game's minimum (``can_play``: an ante, a Gà pay-in), not only at
    0: a seat left with chips it cannot play would sit out every hand, holding its seat (a
    table of such seats never starts again), and a rebuild, which takes stacks from the last
    hand's HandStarted, would give it back its buy-in instead of what its escrow holds."""
    c, module = state.config, state.module
    due = [
        StandUp(s.seat)
        for s in sorted(state.seats.values(), key=lambda s: s.seat)
        if s.leaving or not kit.can_play(module, s.stack_gold, c.stake_gold, c.options)
    ]
    return Decision(tuple(due))


def _decide_close(state: TableState, close: Close) -> Decision:
    """From the close on the table takes no joins and starts no hands; a hand in play plays
    to its end (its timers guarantee that) and the close completes then, or now without
    one. Idempotent: a closed table answers at once, a closing one is not recorded again."""
    if state.closed:
        return Decision()
    effects: list[Effect] = []
    if not state.closing:
        effects.append(BeginClose(close.reason))
    if state.in_play is None:
        effects.append(Then(FinishClose()))
    return Decision(tuple(effects))


def _decide_finish_close(state: TableState, _command: object = None) -> Decision:
    """The closing hand when a pot is carried and someone is seated (its own end comes back
    here with the pot at 0), then every stand-up, then TableClosed. Each step is a fact in
    the log, so a rebuild sees what was done and this picks up at the next step."""
    if state.closed:
        return Decision((CloseDone(),))
    if state.pot_gold > 0 and state.seats and state.closing_rule:
        return Decision((ClosingHand(),))
    stand_ups = tuple(StandUp(s) for s in sorted(state.seats))
    return Decision((*stand_ups, AppendFact(TableClosed(state.close_reason)), CloseDone()))


def _decide_start_hand(state: TableState, _command: object = None) -> Decision:
    bad = open_refusal(state)
    if bad is not None:
        return refuse(bad)
    hand = state.in_play
    if hand is not None:
        return refuse(errors.PreconditionFailed("HAND_IN_PLAY", f"{hand.hand_id} is still in play"))
    spec = state.module.SPEC
    participants = state.participants()
    fewest = kit.players_min(state.module, state.config.options)
    if len(participants) < fewest:
        return refuse(
            errors.PreconditionFailed(
                "NOT_ENOUGH_PLAYERS",
                f"{spec.name} needs {fewest} players with chips, {len(participants)} seated",
            )
        )
    number = state.hands_played + 1
    owner = state.config.owner_player_id
    owner_seat = next((s.seat for s in state.seats.values() if s.player_id == owner and s.seat in participants), -1)
    hand_id = hand_id_of(state.table_id, number)
    return Decision((PlayHand(hand_id, number, tuple(participants), owner_seat),), answer=hand_id)


def _decide_heartbeat(state: TableState, beat: Heartbeat) -> Decision:
    """The player is here: a disconnected player is reconnected."""
    seat = state.seat_of(beat.player_id)
    if seat is None:
        return refuse(errors.NotFound("NOT_SEATED", f"{beat.player_id} is not seated at {state.table_id}"))
    effects: list[Effect] = [Evolve(Heard(seat.seat, beat.now_s))]
    if not seat.connected:
        effects.extend(_connection(state, seat.seat, True))
    return Decision(tuple(effects))


def _decide_check_heartbeats(state: TableState, check: CheckHeartbeats) -> Decision:
    """Missed heartbeats become PlayerDisconnected (the game's forfeit rules follow): the
    connected seats whose player has sent heartbeats and then none for ``timeout_s``."""
    missed = missed_heartbeats(state, check.now_s, check.timeout_s)
    return Decision(tuple(Then(Disconnect(seat.seat)) for seat in missed))


def missed_heartbeats(state: TableState, now_s: float, timeout_s: float) -> list[Seat]:
    """The connected seats whose player has sent heartbeats and then none for ``timeout_s``
    (``now_s`` is ``time.monotonic()``). A player who never sent one is never disconnected."""
    heard = state.heard
    return [
        s
        for s in state.seats.values()
        if s.connected and heard.get(s.seat, 0.0) and now_s - heard.get(s.seat, 0.0) > timeout_s
    ]


def _connection(state: TableState, seat: int, connected: bool) -> list[Effect]:
    """The seat's connection changes; a player of the hand in play gets the event the
    game's rules read (a refusal of it is ignored: the hand goes on)."""
    effects: list[Effect] = [Evolve(ConnectionChanged(seat, connected))]
    hand = state.in_play
    if hand is not None and seat in hand.dealt_seats:
        body = PlayerReconnected(seat) if connected else PlayerDisconnected(seat)
        effects.append(HandEvent(body, advance=True, ignore_refusal=True))
    return effects


def _decide_after_hand(state: TableState, _command: object = None) -> Decision:
    effects: list[Effect] = [Then(StandUpDue())]
    effects.append(Then(FinishClose()) if state.closing else Then(MaybeAutostart()))
    return Decision(tuple(effects))


def _decide_autostart(state: TableState, _command: object = None) -> Decision:
    if not state.autostart_due():
        return Decision()
    return Decision((ScheduleAutostart(state.config.between_hands_ms / 1000),))


def _decide_disconnect(state: TableState, command: Disconnect) -> Decision:
    seat = state.seats.get(command.seat)
    if seat is None or not seat.connected:
        return Decision()
    return Decision(tuple(_connection(state, command.seat, False)))


# --- acts: who may act, in which hand (the move itself is the rules engine's) ---------------


def hand_refusal(state: TableState, hand_id: str) -> errors.SocaiError | None:
    """NO_HAND_IN_PLAY or STALE_HAND when ``hand_id`` is not the hand in play, else None."""
    hand = state.in_play
    if hand is None:
        return errors.PreconditionFailed("NO_HAND_IN_PLAY", f"no hand is in play at {state.table_id}")
    if hand_id != hand.hand_id:
        return errors.PreconditionFailed("STALE_HAND", f"{hand_id} is not the hand in play ({hand.hand_id})")
    return None


def acting(state: TableState, player_id: str, seat_no: int, body: Body) -> tuple[Seat, Body] | errors.SocaiError:
    """The caller's seat and ``body`` for it, or NOT_YOUR_SEAT / SEAT_MISMATCH. ``seat_no``
    and the action's own seat may each be 0 ("mine"); any other value must be the caller's."""
    seat = state.seat_of(player_id)
    if seat is None or seat_no not in (0, seat.seat):
        return errors.PermissionDenied("NOT_YOUR_SEAT", f"seat {seat_no} is not {player_id}'s")
    try:
        return seat, for_seat(body, seat.seat)
    except errors.InvalidArgument as exc:
        return exc


def for_seat(body: Body, seat: int) -> Body:
    """``body`` acting for ``seat``: a seat of 0 in the action means "mine"; another seat
    than the caller's is SEAT_MISMATCH (raised)."""
    named = getattr(body, "seat", None)
    if named is None or named == seat:
        return body
    if named != 0:
        raise errors.InvalidArgument("SEAT_MISMATCH", f"the action is for seat {named}, the caller's seat is {seat}")
    changed: Body = replace(body, seat=seat)  # type: ignore[arg-type, type-var]
    return changed


# --- the hand in play: a player's act, what the table drives, its timer --------------------


def act_key_refusal(key: str) -> errors.SocaiError | None:
    """BAD_IDEMPOTENCY_KEY unless ``key`` is 1..ACT_KEY_MAX_CHARS characters (checked before
    anything is read)."""
    if not key or len(key) > ACT_KEY_MAX_CHARS:
        return errors.InvalidArgument("BAD_IDEMPOTENCY_KEY", f"idempotency_key must be 1..{ACT_KEY_MAX_CHARS} chars")
    return None


def _decide_act(state: TableState, act: Act) -> Decision:
    """A key names one decision of one player in one hand: a retry with it (the same
    action) answers the first result whatever happened since (the hand in play's and the
    last hand's from memory, an ended hand's from its log: ``NEEDS_ENDED_HAND``), and
    writes nothing. Refused: BAD_IDEMPOTENCY_KEY; IDEMPOTENCY_KEY_REUSED for a key used for
    another action; NOT_YOUR_SEAT when the seat is not the caller's, SEAT_MISMATCH when the
    action names another seat; the rules engine's RuleViolation (with ErrorInfo seat,
    hand_id and rule: ``rule_refusal``) when the move is illegal; NO_HAND_IN_PLAY or
    STALE_HAND for a hand not in play (and no retry of it). Played: the event appended with
    the act's key, remembered as its first result, then the hand driven on."""
    bad = act_key_refusal(act.key)
    if bad is not None:
        return refuse(bad)
    hand = act.hand
    if hand is not None and act.hand_id == hand.hand_id:
        if act.answered is not None:
            return replayed_act(act.answered, act.body)
        acting_seat = acting(state, act.player_id, act.seat_no, act.body)
        if isinstance(acting_seat, errors.SocaiError):
            return refuse(acting_seat)
        seat, body = acting_seat
        module = state.module
        try:
            rules_after = module.apply(hand.rules, body)
        except errors.RuleViolation as exc:
            return refuse(rule_refusal(module, exc, seat.seat, hand.hand_id))
        hold = hold_for(module, hand.hand_id, hand.held_gold, rules_after)
        holds = (hold,) if hold is not None else ()
        appended = AppendHand(body, rules_after, act.key, act.player_id)
        effects = (*holds, appended, RecordAct(act.player_id, act.key, body), Advance())
        return Decision(effects, answer=ActAnswer(None, replayed=False))
    if act.answered is not None:
        return replayed_act(act.answered, act.body)
    refusal = hand_refusal(state, act.hand_id)
    errors.check(refusal is not None, f"{act.hand_id} is not the hand in play here")
    return Decision(refusal=refusal, needs=NEEDS_ENDED_HAND)


def act_after_ended_hand(decision: Decision, answered: tuple[ActResult, Body] | None, body: Body) -> Decision:
    """An act's ``decision`` that needed its ended hand (``NEEDS_ENDED_HAND``), once that
    hand's first result of the key is read (``answered``; None: the key played nothing
    there): that result, or the decision's refusal."""
    errors.check(decision.needs == NEEDS_ENDED_HAND, "the act needed no ended hand")
    if answered is not None:
        return replayed_act(answered, body)
    return Decision(refusal=decision.refusal)


def replayed_act(answered: tuple[ActResult, Body], body: Body) -> Decision:
    """The first result of a retried decision; IDEMPOTENCY_KEY_REUSED when ``body`` is not
    that decision (its seat of 0 read as the decision's)."""
    result, first = answered
    seat = getattr(first, "seat", None)
    again = for_seat(body, seat) if seat is not None and getattr(body, "seat", seat) in (0, seat) else body
    if again != first:
        return refuse(errors.PreconditionFailed("IDEMPOTENCY_KEY_REUSED", "this key was used for another action"))
    return Decision(answer=ActAnswer(result, replayed=True))


def rule_refusal(module: ModuleType, exc: errors.RuleViolation, seat: int, hand_id: str) -> errors.RuleViolation:
    """``exc`` with the ErrorInfo metadata of every rules refusal: the seat, the hand and
    the RULES.md rule it cites (``kit.refusal_rule``)."""
    details = {**exc.details, "seat": seat, "hand_id": hand_id, "rule": kit.refusal_rule(module, exc.code)}
    return errors.RuleViolation(exc.code, exc.message, **details)


def act_refusal(
    state: TableState, hand: HandNow | None, player_id: str, hand_id: str, seat_no: int, body: Body
) -> errors.SocaiError | None:
    """Whether an act would be accepted now, without playing it (ValidateAction): None, or
    what ``Act`` would refuse it with (the hand, the seat, the rules; a retry's key aside)."""
    refusal = hand_refusal(state, hand_id)
    if refusal is not None:
        return refusal
    errors.check(hand is not None and hand.hand_id == hand_id, f"{hand_id} is in play in the core only")
    assert hand is not None
    acting_seat = acting(state, player_id, seat_no, body)
    if isinstance(acting_seat, errors.SocaiError):
        return acting_seat
    seat, body = acting_seat
    refused = kit.refusal(state.module, hand.rules, body)
    return rule_refusal(state.module, refused, seat.seat, hand_id) if refused is not None else None


def _decide_drive(state: TableState, drive: Drive) -> Decision:
    """Everything the hand needs that no player decides, in order (the next cards from the
    deck, the dice, HandEnded revealing the seed once play is over: ``kit.system_event``),
    each appended with the rules state after it; then the timer of the decision it waits
    for, or the hand's end. A closing hand has nothing to decide: it ends at once. The
    rules engine is pure, so the whole run is decided before any of it is appended; a
    refusal of the rules (a bug) comes after the events before it, as when they were
    applied one by one."""
    hand = drive.hand
    if hand is None:
        return Decision()
    if hand.closing:
        return Decision((AppendHand(HandEnded(hand.seed.hex()), None), HandOver(counted=False)))
    module = state.module
    rules, next_card, held = hand.rules, hand.next_card, hand.held_gold
    effects: list[Effect] = []
    try:
        for _ in range(DRIVE_STEPS_MAX):
            pending: Pending = module.pending(rules)
            body = kit.system_event(pending, hand.deck, next_card, hand.seed)
            if body is None:
                timeout_s = timeout_s_for(pending, state.config) if pending.to_act else 0.0
                effects.append(ArmTimer(hand.hand_id, timeout_s))
                return Decision(tuple(effects))
            rules = module.apply(rules, body)
            held = _held(module, hand, rules, held, effects)
            effects.append(AppendHand(body, rules))
            if isinstance(body, CardsDealt):
                next_card += len(body.cards)
            if isinstance(body, HandEnded):
                effects.append(HandOver())
                return Decision(tuple(effects))
    except errors.SocaiError as exc:
        return refuse(exc, *effects)
    except Exception as exc:  # a bug of the rules: raised where it was met (``Decision.failure``)
        return Decision(tuple(effects), failure=exc)
    runaway = errors.PreconditionFailed("HAND_RUNAWAY", f"{hand.hand_id} did not settle into a decision")
    return refuse(runaway, *effects)


def _decide_timer_fired(state: TableState, fired: TimerFired) -> Decision:
    """The hand's timer ran out (RULES.md GEN-5): a ``TimerExpired`` for each seat still
    owing a decision on it, in the order the hand listed them, each with the move the rules
    made for it; then the hand goes on. A stale timer (another armed since, a hand no
    longer in play, a table behind its log) does nothing. An expiry that moves the hand on
    to something else (a deal, dice, its end, another timer) ends the expiries there."""
    hand = fired.hand
    if not fired.current or not fired.synced or hand is None or hand.hand_id != fired.hand_id:
        return Decision()
    module = state.module
    rules, held = hand.rules, hand.held_gold
    pending: Pending = module.pending(rules)
    effects: list[Effect] = []
    try:
        for seat in pending.to_act:
            now = module.pending(rules)
            if now.finished or now.deal or now.roll_dice or now.timer != pending.timer:
                break
            if seat not in now.to_act:
                continue
            body = timer_expired(module, rules, seat, pending.timer)
            rules = module.apply(rules, body)
            held = _held(module, hand, rules, held, effects)
            effects.append(AppendHand(body, rules))
    except errors.SocaiError as exc:
        return refuse(exc, *effects)
    except Exception as exc:  # a bug of the rules: raised where it was met (``Decision.failure``)
        return Decision(tuple(effects), failure=exc)
    return Decision((*effects, CountTimeout(pending.timer or "turn"), Advance()))


def hold_for(module: ModuleType, hand_id: str, held_gold: int, rules_after: Any) -> HoldHouse | None:
    """The house-bank hold an event of ``hand_id`` (holding ``held_gold``) must be preceded
    by: when its rules state after it (``rules_after``) may cost the bank more than the
    hand holds, the new worst case."""
    exposure = kit.house_exposure(module, rules_after)
    return HoldHouse(hand_id, exposure, held_gold) if exposure > held_gold else None


def _held(module: ModuleType, hand: HandNow, rules_after: Any, held: int, effects: list[Effect]) -> int:
    """What the hand holds once the event leading to ``rules_after`` is appended, its
    ``HoldHouse`` added to ``effects`` first when it needs one (``held``: what it holds
    before, the holds decided earlier in the same decision included)."""
    hold = hold_for(module, hand.hand_id, held, rules_after)
    if hold is None:
        return held
    effects.append(hold)
    return hold.exposure_gold


def timer_expired(module: Any, rules: Any, seat: int, timer: str) -> TimerExpired:
    """The ``TimerExpired`` the table writes for ``seat`` when ``timer`` runs out: with the
    move the rules make for it (``socai.rules.automatic``), so the log records what the
    timeout did and the replay checks it."""
    body = TimerExpired(seat, timer)
    return TimerExpired(seat, timer, automatic_move(module.SPEC.game_id, rules, module.apply(rules, body), body).code)


def timeout_s_for(pending: Pending, config: TableConfig) -> float:
    """How long the hand waits for ``pending``: the table's turn timer overrides the game's
    default turn timer; the game's other timers (Mậu Binh's arrangement, Ba Cây's flip, a
    betting window) are its own rules."""
    if pending.timer in ("", "turn") and config.turn_timeout_s:
        return float(config.turn_timeout_s)
    return float(pending.timeout_s or TURN_TIMEOUT_DEFAULT_S)


# ``decide``'s dispatch: one look-up by the command's type (a heartbeat, an act and a timer
# are the hot path; an isinstance chain tested up to eleven types first).
_DECIDERS: dict[type, Callable[[TableState, Any], Decision]] = {
    Join: _decide_join,
    Leave: _decide_leave,
    StandUpDue: _decide_stand_up_due,
    Close: _decide_close,
    FinishClose: _decide_finish_close,
    StartHand: _decide_start_hand,
    Heartbeat: _decide_heartbeat,
    CheckHeartbeats: _decide_check_heartbeats,
    Disconnect: _decide_disconnect,
    AfterHand: _decide_after_hand,
    MaybeAutostart: _decide_autostart,
    Act: _decide_act,
    Drive: _decide_drive,
    TimerFired: _decide_timer_fired,
}
