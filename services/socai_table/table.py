"""One table, run authoritatively: the table actor (its state, its events, the game loop).

A ``Table`` is the single writer of its events. Every command runs under the table's lock,
which nothing outside this class takes: the rules engine validates it against the current
state first (a rejected command writes nothing), then the event is appended to JetStream,
signed and with the expected last subject sequence, and only after the append is
acknowledged does the in-memory state move on. The table then drives what needs no player
(dealing, dice, the end of the hand) and arms the timer of whatever the hand waits for.

What a command does (to the seats, the close, the start of a hand, the hand in play: a
player's act, what the table drives without a player, the hand's timer) is decided by the
table's functional core (``core``: ``decide`` gives the effects in order, ``evolve`` the
state after each); this class is its shell: it takes the lock, reads what a decision needs,
performs the effects in order (the appends, the ledger, the store, the timers' tasks) and
keeps the hand in play's rules state, deck and events for its views.

Its helpers each do one job: ``timers`` (when the hand's timer fires, when the next hand
starts by itself), ``views`` (what each viewer may see, and
the ``WatchTable`` fan-out), ``rebuild`` (reading the table back from its log, quarantining
what does not belong), ``hand`` (the hand in play).

Everything here can be rebuilt from the event log plus the service's own rows (the table
directory and the hand seeds): ``rebuild`` reads the table's facts and its last hand, the
state is a fold of ``core.evolve`` over them, and the table carries on, so a table service
killed at any moment resumes without a duplicate or a missing event.

Closing (``close``, an operator's CloseTable) runs on the same rails: recorded in the
directory first, then a closing hand that returns a carried pot, the stand-ups and
TableClosed, each a fact a rebuild reads back, so a close is resumed, never repeated.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from socai import accounts, errors, fairness
from socai.cards import deck as canonical_deck
from socai.events import codec, hidden, seal
from socai.events.log import EventLog
from socai.events.model import (
    Body,
    CardsDealt,
    Event,
    HandEnded,
    HandStarted,
    PlayerSeated,
    PlayerStoodUp,
    SeatInfo,
    TableClosed,
    TableOpened,
)
from socai.gen.events.v1 import events_pb2
from socai.infra.grpc_errors import database_unavailable, nats_unavailable
from socai.infra.logging import bound, get_logger
from socai.rules import base as kit
from socai.rules import registry
from socai.rules.base import Settlement
from socai.settle.replay import closing_settlement, has_closing_rule
from socai_table import core, history, metrics, seeds, signing
from socai_table.core import FORFEITED, LEAVE_NOW, LeaveResult
from socai_table.hand import IDEMPOTENCY_HEADER, PLAYER_HEADER, ActResult, Hand
from socai_table.history import HandRecord
from socai_table.ledger_client import Money, buy_in_key, join_key
from socai_table.model import Seat, TableConfig, facts_id_of, hand_id_of
from socai_table.ownership import RETRY_AFTER_MS, WRITER_HEADER
from socai_table.rebuild import LogReader
from socai_table.store import Cashout, TableStore
from socai_table.timers import HEARTBEAT_TIMEOUT_S, AutoStart, HandTimer
from socai_table.views import (
    FULL_VIEW,
    Moment,
    ProtoCache,
    View,
    Watcher,
    Watchers,
    WatchItem,
    hand_view,
    moment_now,
    view_at,
    viewer_seat,
)
from socai_table.views import redact as views_redact

T = TypeVar("T")

log = get_logger("socai.table")

ACT_KEY_MAX_CHARS = core.ACT_KEY_MAX_CHARS
ENDED_HANDS_KEPT = 16  # ended hands read back from the log, kept for retries and GetHand


@dataclass(frozen=True)
class CashOutDone:
    """A completed cash-out, for the player's streams."""

    table_id: str
    player_id: str
    amount_gold: int
    after_hand_id: str
    ledger_transaction_id: str
    completed_s: float


def _is_hand_of(table_id: str, hand_id: str, hands_played: int) -> bool:
    """Whether ``hand_id`` is one of the table's first ``hands_played`` hands."""
    prefix = f"{table_id}-h"
    number = hand_id.removeprefix(prefix)
    return hand_id.startswith(prefix) and number.isdigit() and 1 <= int(number) <= max(hands_played, 1)


@dataclass
class Deps:
    log: EventLog
    store: TableStore
    money: Money
    instance: str
    seed_key: bytes  # encrypts hand seeds at rest (socai_table.seeds)
    writer_key: bytes  # signs every event this service appends (socai_table.signing)
    hand_signer: seal.HandSigner  # seals every HandEnded for settlement and the auditor (socai.events.seal)
    on_cashout: Callable[[], None] = lambda: None
    # Called with the table's id once its close is complete (TableClosed written): the
    # manager drops it from memory (``TableManager.forget_closed``).
    on_closed: Callable[[str], None] = lambda _table_id: None
    heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S
    # The lease token to write with a table's next event; raises when this instance no
    # longer holds the table (socai_table.ownership). Checked before every append.
    fence: Callable[[str], int] = lambda _table_id: 0
    # The table partition of a table (its lease's; socai_table.ownership).
    partition_of: Callable[[str], int] = lambda _table_id: 0
    # While the player-token key is rotated: the keys still accepted for what the old one
    # signed (events, by stream sequence) and encrypted (seeds of hands in play).
    writer_keys_accepted: tuple[tuple[bytes, int], ...] = ()
    seed_keys_accepted: tuple[bytes, ...] = ()

    def writer_keys(self) -> signing.WriterKeys:
        return signing.WriterKeys(self.writer_key, self.writer_keys_accepted)

    def seed_keys(self) -> tuple[bytes, ...]:
        return (self.seed_key, *self.seed_keys_accepted)


async def run_to_end(command: Coroutine[Any, Any, T], what: str, table_id: str) -> T:
    """Run a table command to its end even if its caller goes away.

    gRPC cancels a handler when its client cancels or its deadline passes, and a command
    cancelled between its steps would leave them half done until the next rebuild: a buy-in
    moved wallet → escrow with no PlayerSeated (the player's gold stuck in escrow, the
    auditor's ESCROW_BALANCE), a stand-up's cash-out row with no PlayerStoodUp, an event
    appended that the table's memory never applied. So the command runs as a task of its
    own that a cancelled caller does not cancel; its outcome is logged when nobody is left
    to hear it (a retry under the same idempotency key answers it).
    """
    task = asyncio.ensure_future(command)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        # Also when the command ended in the same turn of the loop as the cancellation (a
        # done future runs the callback at once): its outcome is logged, never dropped.
        task.add_done_callback(lambda t: _abandoned(t, what, table_id))
        raise


def _abandoned(task: asyncio.Future[Any], what: str, table_id: str) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is None:
        log.info("command_finished_after_caller_left", command=what, table_id=table_id)
    elif isinstance(exc, errors.SocaiError):
        log.info("command_refused_after_caller_left", command=what, table_id=table_id, code=exc.code)
    elif (outage := nats_unavailable(exc) or database_unavailable(exc)) is not None:
        # A dependency's outage (a NATS read timing out while it was paused): what a live
        # caller would have got as UNAVAILABLE, not a fault of the service's.
        log.warning("command_unavailable_after_caller_left", command=what, table_id=table_id, error=outage.message)
    else:
        log.error("command_failed_after_caller_left", command=what, table_id=table_id, exc_info=exc)


class CommandLock(asyncio.Lock):
    """The table's lock. Releasing it ends a command, and first sends the watchers what the
    command wrote (``Watchers.flush``): a stream never shows a moment halfway through a
    command, and a view taken under the lock (``GetTableState``) is never ahead of it."""

    def __init__(self, on_release: Callable[[], None]) -> None:
        super().__init__()
        self._on_release = on_release

    def release(self) -> None:
        try:
            self._on_release()
        except Exception as exc:  # a watcher's view must never keep the table locked
            log.error("watch_flush_failed", error=str(exc)[:500], exc_info=exc)
        finally:
            super().release()


def table_opened(table_id: str, c: TableConfig) -> TableOpened:
    """The TableOpened fact of a table with config ``c`` (the table's first event)."""
    return TableOpened(
        table_id,
        c.game,
        c.stake_gold,
        c.fee,
        c.seats_max,
        c.owner_player_id,
        dict(c.options),
        c.buy_in_min_gold,
        c.buy_in_max_gold,
    )


class Table:
    def __init__(self, table_id: str, config: TableConfig, deps: Deps) -> None:
        self.table_id = table_id
        self.config = config
        self.module = registry.get(config.game)
        # A game that may pay from house:bank (its hands hold it: ``core.HoldHouse``).
        self._pays_from_house = getattr(self.module, "house_exposure_gold", None) is not None
        self.deps = deps
        self._lock = CommandLock(self._flush)
        # Seats, the close, the hand count, the carried pot and what the seats depend on of
        # the hand in play: the functional core's value (``socai_table.core``), replaced by
        # ``core.evolve`` after each event appended and each note, never changed in place.
        self.state = core.initial(table_id, config, closing_rule=has_closing_rule(config.game))
        # The stream sequence of the last event of the table applied here (a hand event or a
        # fact): the position every view carries (``TableView.log_seq``).
        self.log_seq = 0
        self._ended: OrderedDict[str, HandRecord] = OrderedDict()  # ``ended_hand``
        self.facts_subject_seq = 0
        # subject -> the chain value of the last event accepted there (socai.events.seal);
        # the facts' and the hand in play's, set again by every rebuild.
        self.chains: dict[str, bytes] = {}
        self.hand: Hand | None = None  # its rules state, deck and events (``state.hand``: its seats)
        self.last_hand: Hand | None = None
        self.watchers = Watchers(self.module)
        self.timer = HandTimer()
        self.autostart = AutoStart()
        self.dirty = False
        # When the table opened (its TableOpened, read back by every rebuild); until then, now.
        self.created_at = time.time()
        # Ended hands whose house-bank hold is still to be finalized: hand id -> what the
        # hand's settlement debits house:bank (``_finalize_holds``).
        self.holds_to_finalize: dict[str, int] = {}

    # --- the core's state, read ----------------------------------------------------------

    @property
    def seats(self) -> Mapping[int, Seat]:
        return self.state.seats

    @property
    def facts_seq(self) -> int:
        return self.state.facts_seq

    @property
    def hands_played(self) -> int:
        return self.state.hands_played

    @property
    def pot_gold(self) -> int:
        return self.state.pot_gold

    @property
    def closing(self) -> bool:
        return self.state.closing

    @property
    def closed(self) -> bool:
        return self.state.closed

    @property
    def close_reason(self) -> str:
        return self.state.close_reason

    def seat_of(self, player_id: str) -> Seat | None:
        return self.state.seat_of(player_id)

    def participants(self) -> list[int]:
        return self.state.participants()

    def _evolve(self, event: Event | core.Note, stream_seq: int = 0) -> None:
        self.state = core.evolve(self.state, event, stream_seq)

    # --- event plumbing ------------------------------------------------------------------

    @property
    def facts_id(self) -> str:
        return facts_id_of(self.table_id)

    def _envelope(self, hand_id: str, seq: int, body: Any) -> Event:
        return Event(self.table_id, hand_id, seq, self.config.game, codec.now(), body)

    async def _fact(self, body: Any) -> Event:
        event = self._envelope(self.facts_id, self.facts_seq + 1, body)
        stream_seq = await self._append(event, self.facts_subject_seq)
        self.facts_subject_seq = stream_seq
        self.log_seq = max(self.log_seq, stream_seq)
        self._evolve(event, stream_seq)
        self._broadcast(event)
        return event

    async def _hand_event(self, body: Body, new_state: Any, key: str = "", player_id: str = "") -> Event:
        """Append ``body`` as the hand's next event and apply ``new_state`` (a bet that raises
        what the house bank may lose was held first: ``core.HoldHouse``). The table keeps
        the event whole (its views show each seat its own cards); the log gets the hand's
        stored form, no face-down card in it (``socai.events.hidden``)."""
        hand = self._require_hand()
        event = self._envelope(hand.hand_id, hand.seq + 1, body)
        stored = hidden.conceal(event, hand.deck) if hand.started.face_down_by_position else event
        headers = {IDEMPOTENCY_HEADER: key, PLAYER_HEADER: player_id} if key else None
        stream_seq = await self._append(event, hand.subject_seq, headers, hand.protos, stored)
        hand.events.append(event)
        hand.log_seqs.append(stream_seq)
        hand.subject_seq = stream_seq
        self.log_seq = max(self.log_seq, stream_seq)
        hand.state = new_state
        if isinstance(body, CardsDealt):
            hand.next_card += len(body.cards)
        self._evolve(event, stream_seq)
        self._broadcast(event)
        return event

    def _ledger_fence(self) -> tuple[int, int] | None:
        """(partition, lease token) the table's transfers are posted under (``Money.claim``);
        None without leases (a token of 0). Raises Unavailable("TABLE_NOT_HELD")."""
        token = self.deps.fence(self.table_id)
        return (self.deps.partition_of(self.table_id), token) if token > 0 else None

    async def _append(
        self,
        event: Event,
        expected: int,
        headers: dict[str, str] | None = None,
        protos: ProtoCache | None = None,
        stored: Event | None = None,
    ) -> int:
        """Append ``event``, signed and chained (HandEnded and every fact sealed: ``socai.events.seal``);
        returns its stream sequence. ``stored`` is what the log holds of it when that
        differs (a face-down card by position); the signature, the chain and the seal cover
        those stored bytes. With ``protos`` (its hand's ``Hand.protos``) the event's whole
        message is kept there as its full view, so no viewer converts it again."""
        written = codec.to_proto(stored if stored is not None else event)
        payload = written.SerializeToString(deterministic=True)  # codec.encode, message kept
        subject = self.deps.log.subject_of(self.table_id, event.hand_id)
        signature = signing.sign(self.deps.writer_key, subject, payload)
        token = self.deps.fence(self.table_id)
        prev = self.chains.get(subject) or seal.genesis(subject)
        chain = seal.link(prev, subject, payload)
        headers = {
            **(headers or {}),
            signing.SIGNATURE_HEADER: signature,
            WRITER_HEADER: f"{self.deps.instance}/{token}",
            seal.PREV_HEADER: prev.hex(),
        }
        ended = isinstance(event.body, HandEnded)
        if ended:
            headers.update(self.deps.hand_signer.headers(subject, chain))
        elif event.hand_id == self.facts_id:
            headers.update(self.deps.hand_signer.facts_headers(subject, chain))  # every fact sealed
        try:
            seq = await self.deps.log.append(
                event, expected, headers, payload=payload, msg_id=f"{event.event_id}:{signature}"
            )
        except (errors.Conflict, errors.Unavailable) as exc:
            # The log may hold more than we know (a lost ack, another writer): re-read it
            # before the next command instead of guessing.
            self.dirty = True
            if isinstance(exc, errors.Conflict) and exc.code == "WRONG_LAST_SEQUENCE":
                # Another writer got there first (a handover's other side): nothing of this
                # command was written; the table rebuilds itself (``heal`` or the next
                # command) and the caller retries, reaching whoever holds the table now.
                raise errors.Unavailable(
                    "TABLE_RESYNC",
                    f"{self.table_id} changed under this instance; retry in {RETRY_AFTER_MS} ms",
                    retry_after_ms=RETRY_AFTER_MS,
                ) from exc
            raise
        if ended:
            self.chains.pop(subject, None)  # nothing of the table's follows a hand's end
        else:
            self.chains[subject] = chain
        metrics.EVENTS_PUBLISHED.labels(self.config.game, type(event.body).__name__).inc()
        if protos is not None:
            protos[(event.seq, FULL_VIEW)] = written if stored is None or stored is event else codec.to_proto(event)
        return seq

    async def _hold(self, hold: core.HoldHouse) -> None:
        """Hold the hand's new worst case of ``house:bank`` in the ledger before the event
        that raises it (a bet against the house), so that the hand's settlement can always
        be paid.

        Raises PreconditionFailed("BANKER_CAPACITY") with the bank's free gold (``free_gold``)
        when the bank cannot cover it, Unavailable when the ledger does not answer: the event
        is then not written, and the state does not move.
        """
        hand = self._require_hand()
        try:
            await self.deps.money.hold(hold.hand_id, hold.exposure_gold)
        except errors.PreconditionFailed as exc:
            if exc.code != "BANKER_CAPACITY":
                raise
            free = exc.details.get("free_gold", "")
            needed = hold.exposure_gold - hold.held_gold
            metrics.BETS_REFUSED.labels(self.config.game, exc.code).inc()
            raise errors.PreconditionFailed(
                "BANKER_CAPACITY",
                f"the house bank cannot cover this bet: it may pay {needed} more "
                f"than this hand holds, and {free or 'less'} is free",
                free_gold=free,
                needed_gold=needed,
            ) from exc
        hand.held_gold = hold.exposure_gold

    async def _finalize_holds(self) -> None:
        """Finalize the house-bank holds of ended hands (``_after_hand`` records them): each
        becomes what its settlement will debit the bank, 0 releasing it at once. A hand
        whose finalize fails (the ledger unreachable) stays due: ``heal`` tries again, and
        the hold stays at its worst case meanwhile, which only costs the bank capacity."""
        for hand_id, debit in list(self.holds_to_finalize.items()):
            try:
                await self.deps.money.finalize_hold(hand_id, debit)
            except errors.NotFound as exc:
                # A hand read back from the log that held nothing (no bet, or a p2p hand).
                log.info("hold_not_found", table_id=self.table_id, hand_id=hand_id, code=exc.code)
            except errors.SocaiError as exc:
                log.warning("hold_finalize_failed", table_id=self.table_id, hand_id=hand_id, code=exc.code)
                continue
            del self.holds_to_finalize[hand_id]

    def _broadcast(self, event: Event) -> None:
        hand_over = isinstance(event.body, HandEnded) or event.hand_id == self.facts_id
        hand = self.hand
        if hand is not None and event.hand_id == hand.hand_id:
            moment = Moment(hand, hand.state, isinstance(event.body, HandEnded) or hand.ended, self.log_seq, event.seq)
        else:
            moment = moment_now(self.hand or self.last_hand, self.log_seq)
        self.watchers.broadcast(event, self.hand, self.viewer_seat, hand_over, moment)
        if not self._lock.locked():
            self._flush()  # not part of a command (none writes without the lock): now

    def _flush(self) -> None:
        """Send the watchers what the command that ends now wrote (``CommandLock``)."""
        self.watchers.flush(self.timer.deadline)

    def _require_hand(self) -> Hand:
        if self.hand is None:
            raise errors.PreconditionFailed("NO_HAND_IN_PLAY", f"no hand is in play at {self.table_id}")
        return self.hand

    # --- opening and rebuilding ----------------------------------------------------------

    async def open(self) -> None:
        """Publish TableOpened unless the table's facts already exist."""
        async with self._lock:
            await self._rebuild()
            if self.facts_seq == 0:
                opened = await self._fact(table_opened(self.table_id, self.config))
                self.created_at = opened.occurred_at.timestamp()

    async def rebuild(self) -> None:
        async with self._lock:
            await self._rebuild()

    async def _rebuild(self) -> None:
        """Rebuild seats and the hand in play from the stream (and the seeds in the DB).

        A rebuild that fails (NATS or PostgreSQL down) leaves the table as it was and dirty:
        reads go on showing the last known seats instead of an empty table, and the
        watchdog's ``heal`` tries again.
        """
        before = (self.state, self.facts_subject_seq, self.hand)
        try:
            await self._rebuild_from_log()
        except BaseException:
            self.state, self.facts_subject_seq, self.hand = before
            self.dirty = True
            raise

    async def _rebuild_from_log(self) -> None:
        """The table's state is a fold of ``core.evolve`` over its facts, the notes of its
        store (a close begun, a cash-out asked for) and its last hand's events."""
        self.timer.cancel()
        self.facts_subject_seq = 0
        self.hand = None
        d = self.deps
        state = core.initial(self.table_id, self.config, closing_rule=self.state.closing_rule)
        # A close begun stays begun (``closing``): the store's row says so before any fact.
        if self.state.closing:
            state = core.evolve(state, core.CloseBegun(self.state.close_reason))
        closing_reason = await d.store.closing_reason(self.table_id)
        if closing_reason is not None:
            state = core.evolve(state, core.CloseBegun(closing_reason))
        reader = LogReader(self.table_id, self.config.game, self.module, d.log, d.store, d.writer_keys(), d.seed_keys())
        async for event, stream_seq in reader.facts():
            # The next append must name the subject's real last sequence, a stranger's included.
            self.facts_subject_seq = stream_seq
            if event is not None:
                state = core.evolve(state, event, stream_seq)
                if isinstance(event.body, TableOpened):
                    self.created_at = event.occurred_at.timestamp()  # when it opened, not when loaded here
        # A seated player with a pending cash-out here asked to leave and was not stood up
        # (the PlayerStoodUp append failed: a crash, another writer): they play no further
        # hand, and stand up now (no hand played yet) or when the last hand ends
        # (``_after_hand``, as any leaver).
        asked = {c.player_id for c in await self.deps.store.pending_cashouts([self.table_id])}
        for seated in list(state.seats.values()):
            if seated.player_id in asked:
                state = core.evolve(state, core.LeavingMarked(seated.seat))
        hand = None
        for number, hand_id, seed in await self.deps.store.last_hands(self.table_id, 2):
            # Only what this service wrote and the rules engine accepts is applied: anything
            # else is quarantined, and the hand goes on from its last valid state.
            hand = await reader.hand(number, hand_id, seed)
            if hand is not None:
                hand.hold_known = False
                break
        if hand is not None:
            state = core.fold(state, zip(hand.events, hand.log_seqs, strict=True))
        self.state = state
        self.chains = reader.chains  # the Socai-Prev of the next event on each subject read
        self.log_seq = max(self.log_seq, self.facts_subject_seq, hand.subject_seq if hand is not None else 0)
        self.dirty = False
        if hand is None:
            for leaver in sorted(self.seats.values(), key=lambda s: s.seat):
                if leaver.leaving:
                    await self._perform(core.Decision((core.StandUp(leaver.seat),)))
            if self.closing:
                await self._run(core.FinishClose())  # a close with no hand ever played, resumed
            return
        self.hand = hand
        if hand.ended:
            await self._after_hand()
        else:
            log.info("hand_resumed", table_id=self.table_id, hand_id=hand.hand_id, seq=hand.seq)
            await self._advance()

    async def _ensure_synced(self) -> None:
        if self.dirty:
            await self._resync("command")

    async def _resync(self, by: str) -> None:
        """Rebuild a table whose log may hold more than it knows (``dirty``), then finish
        the joins the failure cut (``_repair_joins``). When NATS or the ledger still stops
        the repair it is deferred, the table left dirty: the next command or the watchdog's
        ``heal`` tries again, and a command goes on meanwhile (its append names the log's
        last position, so a table the repair found moved refuses it: TABLE_RESYNC)."""
        log.warning("table_resync", table_id=self.table_id, by=by)
        await self._rebuild()
        try:
            await self._repair_joins()
        except (errors.Unavailable, errors.Conflict) as exc:
            log.warning("join_repair_deferred", table_id=self.table_id, code=exc.code)

    # --- commands: decide, then perform ------------------------------------------------

    async def _run(self, command: core.Command) -> Any:
        """Decide ``command`` on the table's state, reading first what the decision needs
        (``core.Decision.needs``), and perform the decision. Under the lock."""
        decision = core.decide(self.state, command)
        for _ in range(3):  # a join reads at most its row, its buy-in and a pending cash-out
            if not decision.needs:
                break
            command = await self._read(command, decision.needs)
            decision = core.decide(self.state, command)
        errors.check(not decision.needs, f"{type(command).__name__} still needs {decision.needs}")
        return await self._perform(decision)

    async def _read(self, command: core.Command, needs: str) -> core.Command:
        """``command`` with what it needs read from the store or the ledger."""
        store = self.deps.store
        if isinstance(command, core.Join):
            if needs == core.NEEDS_JOIN_ROW:
                row = await store.begin_join(
                    command.key,
                    self.table_id,
                    command.player_id,
                    command.seat_wanted,
                    command.buy_in_gold,
                    command.guild_id,
                )
                return dataclasses.replace(command, row=core.JoinRow.of(row))
            if needs == core.NEEDS_BUY_IN_TX:
                tx = await self.deps.money.transaction_of(buy_in_key(command.key, self.table_id))
                return dataclasses.replace(command, buy_in_tx=tx, buy_in_tx_read=True)
            pending = await store.has_pending_cashout(self.table_id, command.player_id)
            return dataclasses.replace(command, cashout_pending=pending)
        if isinstance(command, core.Leave) and needs == core.NEEDS_CASHOUT_PENDING:
            self.deps.fence(self.table_id)  # a table that may not write leaves the cash-out rows alone
            pending = await store.has_pending_cashout(self.table_id, command.player_id)
            return dataclasses.replace(command, cashout_pending=pending)
        raise errors.PreconditionFailed("BAD_COMMAND", f"{type(command).__name__} cannot read {needs}")

    async def _perform(self, decision: core.Decision) -> Any:
        """Perform ``decision``'s effects in order, then raise its refusal or return its
        answer. The state evolves after each event is appended (never before: a failed
        append leaves it as it was, and the table dirty) and with each note."""
        tx = ""  # the buy-in's ledger transaction, once ``Transfer`` has made it
        acted: ActResult | None = None  # the act's result, once ``RecordAct`` has remembered it
        for effect in decision.effects:
            if isinstance(effect, core.Transfer):
                try:
                    tx = await self.deps.money.transfer(
                        effect.idempotency_key,
                        effect.debit_account,
                        effect.credit_account,
                        effect.amount_gold,
                        effect.reason,
                        effect.reference,
                        fence=self._ledger_fence(),
                    )
                except (
                    errors.InsufficientFunds,
                    errors.NotFound,
                    errors.InvalidArgument,
                    errors.PreconditionFailed,
                ) as exc:
                    if effect.refused is not None:
                        failed = effect.refused
                        await self.deps.store.finish_join(failed.key, failed.status, error=exc.code)
                    raise
            elif isinstance(effect, core.FinishJoin):
                await self.deps.store.finish_join(
                    effect.key, effect.status, tx if effect.tx == core.TRANSFER_TX else effect.tx, effect.error
                )
            elif isinstance(effect, core.AppendFact):
                await self._append_fact(effect.body, tx)
            elif isinstance(effect, core.HandEvent):
                if not await self._hand_event_of(effect):
                    break  # the rules refused it (a connection change): nothing more follows
            elif isinstance(effect, core.Evolve):
                self._evolve(effect.note)
            elif isinstance(effect, core.MarkLeaving):
                await self._mark_leaving(effect)
            elif isinstance(effect, core.StandUp):
                await self._stand_up(effect.seat)
            elif isinstance(effect, core.BeginClose):
                reason = await self.deps.store.begin_close(self.table_id, effect.reason)
                self._evolve(core.CloseBegun(reason))
                self.autostart.cancel()
                log.info("table_closing", table_id=self.table_id, reason=reason)
            elif isinstance(effect, core.ClosingHand):
                await self._closing_hand()
            elif isinstance(effect, core.CloseDone):
                # A join cut while the table was closing waited for TableClosed (see
                # ``_repair_joins``): refunded now, before the table is let go. Raises as the
                # repair does; the close is then resumed (``heal``) and this runs again.
                await self._repair_joins()
                await self.deps.store.finish_close(self.table_id)
                self.timer.cancel()
                self.deps.on_closed(self.table_id)
            elif isinstance(effect, core.PlayHand):
                await self._play_hand(effect)
            elif isinstance(effect, core.ScheduleAutostart):
                self.autostart.schedule(effect.delay_s, self._autostart)
            elif isinstance(effect, core.HoldHouse):
                await self._hold(effect)
            elif isinstance(effect, core.AppendHand):
                await self._hand_event(effect.body, effect.rules_after, effect.key, effect.player_id)
            elif isinstance(effect, core.RecordAct):
                hand = self._require_hand()
                event = hand.events[-1]
                acted = ActResult(event.seq, event.event_id, hand.log_seqs[-1])
                hand.act_keys[(effect.player_id, effect.key)] = (acted, effect.body)
                metrics.ACTIONS.labels(self.config.game).inc()
            elif isinstance(effect, core.Advance):
                await self._advance()
            elif isinstance(effect, core.ArmTimer):
                self.timer.cancel()
                if effect.timeout_s:
                    fired = functools.partial(self._timer_fired, hand_id=effect.hand_id)
                    self.timer.arm(effect.timeout_s, fired)
            elif isinstance(effect, core.HandOver):
                self._require_hand().ended = True
                if effect.counted:
                    # Counted when written, not in _after_hand, which a rebuild runs again.
                    metrics.HANDS_ENDED.labels(self.config.game).inc()
                await self._after_hand()
            elif isinstance(effect, core.CountTimeout):
                metrics.TIMEOUTS.labels(self.config.game, effect.timer).inc()
            else:
                await self._run(effect.command)
        if decision.refusal is not None:
            raise decision.refusal
        if decision.failure is not None:
            raise decision.failure
        answer = decision.answer
        if isinstance(answer, core.ActAnswer) and answer.result is None:
            errors.check(acted is not None, "an act's decision remembers its result")
            return dataclasses.replace(answer, result=acted)
        return answer

    async def _append_fact(self, body: Any, tx: str) -> None:
        if isinstance(body, PlayerSeated) and body.ledger_transaction_id == core.TRANSFER_TX:
            body = dataclasses.replace(body, ledger_transaction_id=tx)
        await self._fact(body)
        if isinstance(body, PlayerSeated):
            log.info(
                "player_seated",
                table_id=self.table_id,
                player_id=body.player_id,
                seat=body.seat,
                buy_in=body.buy_in_gold,
            )
        elif isinstance(body, TableClosed):
            # With nobody seated a carried pot stays in pot:{table} (closing_pot_settlement's
            # decision): logged, since no hand of this table will ever take it now.
            log.info("table_closed", table_id=self.table_id, reason=body.reason, pot_left_gold=self.pot_gold)

    async def _hand_event_of(self, effect: core.HandEvent) -> bool:
        """Apply ``effect.body`` by the rules, append it and drive the hand on; False when
        the rules refuse it and ``effect.ignore_refusal`` (logged, nothing written)."""
        hand = self._require_hand()
        try:
            new_state = self.module.apply(hand.state, effect.body)
        except errors.RuleViolation as exc:
            if not effect.ignore_refusal:
                raise
            log.info("connection_change_ignored", seat=getattr(effect.body, "seat", -1), code=exc.code)
            return False
        hold = core.hold_for(self.module, hand.hand_id, hand.held_gold, new_state)
        if hold is not None:
            await self._hold(hold)
        await self._hand_event(effect.body, new_state)
        if effect.advance:
            await self._advance()
        return True

    # --- seats -------------------------------------------------------------------------

    async def join(self, player_id: str, buy_in_gold: int, seat_wanted: int, key: str, guild_id: str = "") -> int:
        """``_join``, finished even when the caller stops waiting (``run_to_end``)."""
        return await run_to_end(self._join(player_id, buy_in_gold, seat_wanted, key, guild_id), "join", self.table_id)

    async def _join(self, player_id: str, buy_in_gold: int, seat_wanted: int, key: str, guild_id: str = "") -> int:
        """Buy in (wallet → escrow in the ledger), then take a seat; returns the seat
        (``core.decide`` of ``core.Join``: its key means one seating forever).

        Raises InvalidArgument for a buy-in outside the table's range or a bad seat,
        AlreadyExists when seated, InsufficientFunds when the wallet is short.
        """
        refused = core.join_refusal(self.config, buy_in_gold, seat_wanted)
        if refused is not None:
            raise refused
        async with self._lock:
            await self._ensure_synced()
            command = core.Join(player_id, buy_in_gold, seat_wanted, join_key(player_id, key), guild_id)
            seat: int = await self._run(command)
            return seat

    async def repair_joins(self) -> None:
        """Finish buy-ins a crash or an outage cut, seating nobody twice and refunding only
        what can never be seated.

        A buy-in the ledger moved whose seat is not in the log is seated now, by the decision
        a retried JoinTable makes (the ledger answers its transfer REPLAYED). Refunding it
        instead would be wrong whenever the seat's append timed out rather than failed: the
        PlayerSeated may still be on its way (NATS paused, the message in a socket buffer)
        and land after the refund, seating chips no escrow backs. Appending the seat at the
        log's last position settles it either way: if the late one landed first, this append
        is refused and the table rebuilds with the player seated (marked seated at its next
        load); if not, the late one can never land (it expects the same position). Only a
        join the table refuses now (the seat taken, the table full or closing, a cash-out
        pending) is refunded; at a closing table, once TableClosed is in the log (closing
        itself is no fact, so before it the late seat could still land). Run when the table
        is loaded, after every rebuild of a dirty table (``_ensure_synced``, ``heal``) and as
        the close ends (``CloseDone``): a join whose append failed leaves the table
        dirty. When NATS, the ledger or the log stops it, the table stays dirty and the next
        command or the watchdog's ``heal`` tries again.
        """
        async with self._lock:
            try:
                await self._repair_joins()
            except (errors.Unavailable, errors.Conflict) as exc:
                log.warning("join_repair_deferred", table_id=self.table_id, code=exc.code)

    async def _repair_joins(self) -> None:
        """``repair_joins``, under the lock. Raises Unavailable or Conflict (the table dirty)."""
        for row in await self.deps.store.pending_joins(self.table_id):
            key = row["idempotency_key"]
            player_id = row["player_id"]
            tx = await self.deps.money.transaction_of(buy_in_key(key, self.table_id))
            if tx is None:
                # The buy-in may still be on its way from a former holder paused mid-join:
                # claimed at the ledger first, this holder's lease refuses it from now on, so
                # a buy-in still missing after the claim can never land (no stuck escrow).
                fence = self._ledger_fence()
                if fence is not None:
                    await self.deps.money.claim(fence)
                    tx = await self.deps.money.transaction_of(buy_in_key(key, self.table_id))
            if tx is None:
                await self.deps.store.finish_join(key, "failed", error="no ledger transfer")
            else:
                # Seated by this very join (its append landed, its answer did not), seated
                # now, or refused: the player sits on another join's buy-in, and this one's
                # seat, expecting an earlier position of the log, can never land.
                try:
                    join = core.Join(player_id, int(row["amount_gold"]), int(row["seat"]), key, row["guild_id"])
                    seat = await self._run(join)
                    log.info("join_repaired", table_id=self.table_id, player_id=player_id, key=key, seat=seat)
                    continue
                except (errors.Unavailable, errors.Conflict):
                    # NATS, the ledger or the log moved (the late seat landed first): again
                    # after the next rebuild.
                    self.dirty = True
                    raise
                except errors.SocaiError as exc:
                    if exc.code == "TABLE_CLOSING":
                        # Closing is no fact in the log: the join's late seat could still
                        # land at the position it expects, after a refund. TableClosed
                        # moves that position on; the close's end refunds it (CloseDone).
                        log.info("join_repair_waits_for_close", table_id=self.table_id, player_id=player_id, key=key)
                        continue
                    reason = f"not seated after a restart: {exc.code}"
                refund = await self.deps.money.transfer(
                    f"refund:{self.table_id}:{key}",
                    accounts.escrow(self.table_id, player_id),
                    accounts.player(player_id),
                    int(row["amount_gold"]),
                    "buy_in_refund",
                    self.table_id,
                )
                await self.deps.store.finish_join(key, "refunded", refund, reason)
                log.warning("join_refunded", table_id=self.table_id, player_id=player_id, key=key, reason=reason)

    async def leave(self, player_id: str, when: str = LEAVE_NOW) -> LeaveResult:
        """``_leave``, finished even when the caller stops waiting (``run_to_end``)."""
        return await run_to_end(self._leave(player_id, when), "leave", self.table_id)

    async def _leave(self, player_id: str, when: str) -> LeaveResult:
        """Stand up now, or leave the hand in play now or at its end (``core.Leave``).

        The cash-out itself (escrow → wallet) happens once the player's last hand is
        settled. Leaving after the hand is recorded as the cash-out's pending row, which a
        rebuild reads back (the player is dealt into no further hand). Raises
        NotFound("NOT_SEATED").
        """
        async with self._lock:
            await self._ensure_synced()
            command = core.Leave(player_id, when)
            decision = core.decide(self.state, command)
            if decision.needs:
                decision = core.decide(self.state, await self._read(command, decision.needs))
            result: LeaveResult = decision.answer
            if result is not None and result.outcome == FORFEITED:
                # What leaving costs by the game's rule, read from the rules state before
                # the player leaves (a repeated ask: as it stands now).
                seat = self.seat_of(player_id)
                hand = self._require_hand()
                errors.check(seat is not None, f"{player_id} was seated when the leave was decided")
                assert seat is not None
                decision = dataclasses.replace(
                    decision,
                    answer=dataclasses.replace(result, forfeit=kit.forfeit(self.module, hand.state, seat.seat)),
                )
            answer: LeaveResult = await self._perform(decision)
            return answer

    async def _mark_leaving(self, effect: core.MarkLeaving) -> None:
        """``seat`` stands up when its hand ends: its cash-out's row, pending, says so to a
        rebuild (``_rebuild_from_log`` marks such a player leaving), and ``_stand_up`` takes
        the row over with the stack the hand leaves."""
        self.deps.fence(self.table_id)
        seat = self.seats[effect.seat]
        if not effect.row_exists:
            await self.deps.store.add_cashout(
                Cashout(
                    cashout_id=f"{self.table_id}:{seat.player_id}:{self.facts_seq + 1}",
                    table_id=self.table_id,
                    player_id=seat.player_id,
                    amount_gold=seat.stack_gold,
                    last_hand_id=seat.last_hand_id,
                    status="pending",
                )
            )
        self._evolve(core.LeavingMarked(seat.seat))
        log.info("player_leaving_after_hand", table_id=self.table_id, player_id=seat.player_id)

    async def cashed_out(self, done: CashOutDone) -> None:
        """Tell ``done.player_id``'s streams that their cash-out completed."""
        async with self._lock:
            moment = moment_now(self.hand or self.last_hand, self.log_seq)
            self.watchers.cash_out(done.player_id, done, moment, self.viewer_seat)

    async def _stand_up(self, number: int) -> None:
        """Stand seat ``number`` up with its stack as it is now: its cash-out row first (a
        crash now leaves a row, never a lost cash-out), then PlayerStoodUp."""
        seat = self.seats.get(number)
        if seat is None:
            return  # stood up already by an earlier effect of the same decision
        self.deps.fence(self.table_id)  # a table that may not write leaves the cash-out rows alone
        # A pending cash-out of this player here is this seating's (a pending one refuses a
        # new join): a stand-up whose append failed is retried under the same id, with the
        # stack as it is now, never as a second cash-out of the same escrow.
        pending = [c for c in await self.deps.store.pending_cashouts([self.table_id]) if c.player_id == seat.player_id]
        cashout = Cashout(
            cashout_id=pending[0].cashout_id if pending else f"{self.table_id}:{seat.player_id}:{self.facts_seq + 1}",
            table_id=self.table_id,
            player_id=seat.player_id,
            amount_gold=seat.stack_gold,
            last_hand_id=seat.last_hand_id,
            status="pending",
        )
        await self.deps.store.add_cashout(cashout)  # first: a crash now leaves a row, never a lost cash-out
        await self._fact(PlayerStoodUp(seat.seat, seat.player_id, seat.stack_gold))
        log.info("player_stood_up", table_id=self.table_id, player_id=seat.player_id, cash_out=seat.stack_gold)
        self.deps.on_cashout()

    # --- closing -------------------------------------------------------------------------

    async def close(self, reason: str) -> None:
        """Close the table for good (an operator's CloseTable); idempotent (``core.Close``).

        From this call on the table takes no joins and starts no hands (TABLE_CLOSING). A
        hand in play plays to its end (its timers guarantee that) and the close completes
        then; without one it completes now: the carried pot goes back to the players
        seated (a closing hand, ``_closing_hand``), every seat stands up and cashes out,
        TableClosed is written, and the manager drops the table. The close is recorded in
        the store before anything else, so a restart at any point resumes it; the first
        reason given is the one kept.
        """
        async with self._lock:
            await self._ensure_synced()
            await self._run(core.Close(reason))

    async def _closing_hand(self) -> None:
        """Write the closing hand: HandStarted (``closing``, the carried pot, every seated
        player), then HandEnded (``_advance``). Settlement posts it with the game's closing
        rule (``socai.settle.replay.closing_settlement``) under ``settle:{hand_id}``, the
        hand id being the table's next hand number: the same after any restart."""
        number = self.hands_played + 1
        hand_id = hand_id_of(self.table_id, number)
        seated = sorted(self.seats)
        owner_seat = next((s for s in seated if self.seats[s].player_id == self.config.owner_player_id), -1)
        # The dealer the rules choose and a seed like any hand's (committed, revealed by
        # HandEnded): no card is dealt, but the hand keeps the shape every replay checks.
        started, seed = await self._hand_started(hand_id, number, seated, owner_seat, closing=True)
        try:
            closing_settlement(started)  # a rule that refuses it must write nothing
        except errors.RuleViolation as exc:
            raise errors.PreconditionFailed(exc.code, exc.message) from exc
        await self._publish_start(Hand(hand_id, number, started, seed, [], None))
        with bound(table_id=self.table_id, hand_id=hand_id):
            log.info("closing_hand_started", pot_gold=self.pot_gold, players=len(seated))
            await self._advance()

    # --- hands -------------------------------------------------------------------------

    async def _hand_started(
        self, hand_id: str, number: int, seats: list[int], owner_seat: int, *, closing: bool = False
    ) -> tuple[HandStarted, bytes]:
        """The HandStarted of hand ``number`` for ``seats`` (at their stacks now) and its seed:
        the dealer the rules choose (``kit.choose_dealer``, as the auditor checks it), a fresh
        seed stored encrypted before its commitment is published (``save_seed``: a restart
        re-uses the seed it committed to), every option with its value after defaults and the
        rules version (the hand log replays the same after a default changes in code)."""
        stacks = {s: self.seats[s].stack_gold for s in seats}
        previous = self.last_hand
        dealer = kit.choose_dealer(
            self.module,
            previous.state if previous else None,
            previous.started.dealer_seat if previous else None,
            seats,
            self.config.seats_max,
            owner_seat,
            stacks,
        )
        stored = seeds.encrypt(self.deps.seed_key, hand_id, fairness.new_seed())
        seed = seeds.decrypt(
            self.deps.seed_key, hand_id, await self.deps.store.save_seed(self.table_id, hand_id, number, stored)
        )
        started = HandStarted(
            table_id=self.table_id,
            hand_id=hand_id,
            game=self.config.game,
            hand_number=number,
            stake_gold=self.config.stake_gold,
            fee_bps=self.config.fee,
            seats_max=self.config.seats_max,
            seats=tuple(SeatInfo(s, self.seats[s].player_id, stacks[s], self.seats[s].guild_id) for s in seats),
            dealer_seat=dealer,
            deck_commitment=fairness.commitment(seed),
            owner_seat=owner_seat,
            pot_gold=self.pot_gold,
            options=kit.full_options(self.module, self.config.options),
            rules_version=kit.rules_version(self.module),
            closing=closing,
            face_down_by_position=True,  # no face-down card in the log (socai.events.hidden)
        )
        return started, seed

    async def _publish_start(self, hand: Hand) -> None:
        """Append ``hand``'s HandStarted (seq 1) and make it the table's hand in play: the hand
        count, each seat's last hand, the watchers. A failed append leaves no hand in play."""
        self.hand = hand
        try:
            event = self._envelope(hand.hand_id, 1, hand.started)
            stream_seq = await self._append(event, 0, protos=hand.protos)
        except BaseException:
            self.hand = None
            raise
        hand.events.append(event)
        hand.log_seqs.append(stream_seq)
        hand.subject_seq = hand.started_stream_seq = stream_seq
        self.log_seq = max(self.log_seq, stream_seq)
        self._evolve(event, stream_seq)  # the hand count, each seat's last hand
        self._broadcast(event)

    async def start_hand(self) -> str:
        async with self._lock:
            await self._ensure_synced()
            hand_id: str = await self._run(core.StartHand())
            return hand_id

    async def _play_hand(self, play: core.PlayHand) -> None:
        """Start the hand ``core.StartHand`` decided: its seed and HandStarted, the rules'
        first state and deck, then everything that needs no player."""
        participants = list(play.seats)
        started, seed = await self._hand_started(play.hand_id, play.number, participants, play.owner_seat)
        try:
            state = self.module.initial_state(started)
        except errors.RuleViolation as exc:
            raise errors.PreconditionFailed(exc.code, exc.message) from exc
        deck = fairness.shuffle(seed, canonical_deck(self.config.game)) if self.module.SPEC.deck else []
        await self._publish_start(Hand(play.hand_id, play.number, started, seed, deck, state))
        metrics.HANDS_STARTED.labels(self.config.game).inc()
        with bound(table_id=self.table_id, hand_id=play.hand_id):
            log.info("hand_started", players=len(participants), dealer=started.dealer_seat)
            await self._advance()

    async def act(self, player_id: str, hand_id: str, seat_no: int, body: Body, key: str) -> tuple[ActResult, bool]:
        """``_act``, finished even when the caller stops waiting (``run_to_end``)."""
        return await run_to_end(self._act(player_id, hand_id, seat_no, body, key), "act", self.table_id)

    async def _act(self, player_id: str, hand_id: str, seat_no: int, body: Body, key: str) -> tuple[ActResult, bool]:
        """Apply one player decision; returns (its result, whether it answers a retry).

        A key names one decision of one player in one hand: a retry with it (the same
        action) is answered with the first result whatever happened since: the hand in
        play's from memory, an ended hand's from the log (``ended_hand``), and no event is
        written. Raises PermissionDenied("NOT_YOUR_SEAT") when the seat is not the caller's,
        InvalidArgument("SEAT_MISMATCH") when the action names another seat,
        PreconditionFailed NO_HAND_IN_PLAY / STALE_HAND for a hand not in play (and no retry
        of it), IDEMPOTENCY_KEY_REUSED for a key used for another action, RuleViolation
        (the engine's code, with ErrorInfo metadata seat, hand_id and rule) when the move
        is illegal; nothing is written then."""
        refused = core.act_key_refusal(key)
        if refused is not None:
            raise refused
        async with self._lock:
            await self._ensure_synced()
            hand = self._in_play()
            answered = self._answered(hand, hand_id, player_id, key)
            act = core.Act(player_id, hand_id, seat_no, body, key, hand.for_core() if hand else None, answered)
            decision = core.decide(self.state, act)
            if not decision.needs:
                with bound(table_id=self.table_id, hand_id=hand.hand_id if hand else hand_id):
                    answer: core.ActAnswer = await self._perform(decision)
                assert answer.result is not None
                return answer.result, answer.replayed
        # Not the hand in play: a retry of a decision in a hand that is over? Read outside
        # the lock: an ended hand never changes.
        record = await self.ended_hand(hand_id)
        answered = record.act_keys.get((player_id, key)) if record is not None else None
        ended: core.ActAnswer = await self._perform(core.act_after_ended_hand(decision, answered, body))
        assert ended.result is not None
        return ended.result, ended.replayed

    def _in_play(self) -> Hand | None:
        """The shell's hand in play (None when none is, or it has ended)."""
        hand = self.hand
        return hand if hand is not None and not hand.ended else None

    def _answered(self, in_play: Hand | None, hand_id: str, player_id: str, key: str) -> tuple[ActResult, Any] | None:
        """The first result of ``player_id``'s ``key`` in ``hand_id`` as the table remembers
        it: the hand in play's, or its last hand's (an older hand's is in the log:
        ``ended_hand``)."""
        hand = in_play if in_play is not None and in_play.hand_id == hand_id else None
        if hand is None and self.last_hand is not None and self.last_hand.hand_id == hand_id:
            hand = self.last_hand
        return hand.act_keys.get((player_id, key)) if hand is not None else None

    async def validate(self, player_id: str, hand_id: str, seat_no: int, body: Body) -> errors.SocaiError | None:
        """Whether ``act`` would accept ``body`` now, without playing it: None, or the error
        ``act`` would raise (the hand, the seat, the rules; a retry's key aside)."""
        async with self._lock:
            await self._ensure_synced()
            hand = self._in_play()
            return core.act_refusal(self.state, hand.for_core() if hand else None, player_id, hand_id, seat_no, body)

    async def ended_hand(self, hand_id: str) -> HandRecord | None:
        """An ended hand of this table as its log holds it (``history.read_hand``), or None
        when ``hand_id`` names none (or the hand is still in play). The last
        ``ENDED_HANDS_KEPT`` are kept: a hand that ended never changes."""
        known = self._ended.get(hand_id)
        if known is not None:
            self._ended.move_to_end(hand_id)
            return known
        if not _is_hand_of(self.table_id, hand_id, self.hands_played):
            return None
        record = await history.read_hand(self.deps.log, self.table_id, hand_id, self.deps.writer_keys())
        if record is None or not record.ended:
            return None
        self._ended[hand_id] = record
        while len(self._ended) > ENDED_HANDS_KEPT:
            self._ended.popitem(last=False)
        return record

    async def hand_events(
        self, player_id: str | None, hand_id: str
    ) -> tuple[list[events_pb2.Event], HandRecord | None]:
        """``GetHand``: the hand's events as ``player_id`` may see them, and its record once
        it has ended (every card shown, the replay's settlement). Raises NotFound
        ("HAND_NOT_FOUND") for a hand this table never played."""
        async with self._lock:
            hand = self.hand
            if hand is not None and not hand.ended and hand.hand_id == hand_id:
                return list(self.view(player_id)["events"]), None
        record = await self.ended_hand(hand_id)
        if record is None:
            raise errors.NotFound("HAND_NOT_FOUND", f"{self.table_id} has no ended hand {hand_id}")
        return [codec.to_proto(e) for e in record.events], record

    async def _advance(self) -> None:
        """Drive the hand through everything that needs no player, then arm its timer
        (``core.Drive``)."""
        hand = self._in_play()
        if hand is None:
            return
        await self._perform(core.decide(self.state, core.Drive(hand.for_core())))

    async def _after_hand(self) -> None:
        """Apply the hand's nets to the stacks, stand up leavers and busted players, and
        schedule the next hand. Safe to run twice (rebuild after a crash)."""
        hand = self._require_hand()
        self.timer.cancel()
        settlement: Settlement = closing_settlement(hand.started) if hand.closing else self.module.settle(hand.state)
        # Only each seat's occupant of that hand takes its net: someone who sat down later
        # starts fresh (``core.HandSettled``).
        self._evolve(core.HandSettled(hand.hand_id, settlement.nets, settlement.pot_carry_gold))
        self.last_hand = hand
        self.hand = None
        log.info("hand_ended", table_id=self.table_id, hand_id=hand.hand_id, nets=dict(settlement.nets))
        if not hand.closing and (hand.held_gold > 0 or (not hand.hold_known and self._pays_from_house)):
            # The hand held house:bank gold (or may have, before a rebuild): hold no more than
            # its settlement will debit the bank.
            self.holds_to_finalize[hand.hand_id] = max(0, -settlement.entries().get(accounts.HOUSE_BANK, 0))
            await self._finalize_holds()
        # Stand up leavers and busted seats, then the close or the next hand (``core.AfterHand``).
        await self._run(core.AfterHand())

    async def _stand_up_due(self) -> None:
        """Between hands: stand up every seat that is leaving or busted (``core.StandUpDue``).
        ``heal`` calls this again, since a stand-up that failed (PostgreSQL down while its
        cash-out row was written) would otherwise leave the seat taken for good and the
        table short of players (the chaos run's frozen table after a PostgreSQL restart)."""
        await self._run(core.StandUpDue())

    # --- what happens when a timer fires, a heartbeat is missed, a hand starts by itself ---

    async def _timer_fired(self, generation: int, hand_id: str) -> None:
        """The hand timer armed for ``hand_id`` ran out (``core.TimerFired``)."""
        async with self._lock:
            hand = self._in_play()
            fired = core.TimerFired(
                hand_id, self.timer.is_current(generation), not self.dirty, hand.for_core() if hand else None
            )
            decision = core.decide(self.state, fired)
            if not decision.effects:
                return
            with bound(table_id=self.table_id, hand_id=hand_id):
                try:
                    await self._perform(decision)
                except errors.SocaiError as exc:
                    if self._tenure_over(exc):
                        return
                    # An outage (NATS or PostgreSQL not answering) is what ``heal`` mends
                    # once it ends: a warning; anything else is a fault of its own.
                    report = log.warning if isinstance(exc, errors.Unavailable) else log.error
                    report("timer_failed", code=exc.code, error=exc.message)
                    self.dirty = True

    async def heartbeat(self, player_id: str) -> None:
        """The player is here: a disconnected player is reconnected (``Reconnect`` too).

        Raises NotFound("NOT_SEATED") when the player has no seat at this table.
        """
        async with self._lock:
            await self._ensure_synced()
            await self._run(core.Heartbeat(player_id, time.monotonic()))

    async def check_heartbeats(self, now: float) -> None:
        """Turn missed heartbeats into PlayerDisconnected (the game's forfeit rules follow)."""
        async with self._lock:
            await self._run(core.CheckHeartbeats(now, self.deps.heartbeat_timeout_s))

    def _maybe_autostart(self) -> None:
        """Schedule the next hand's automatic start when it is due (``core.MaybeAutostart``)."""
        for effect in core.decide(self.state, core.MaybeAutostart()).effects:
            if isinstance(effect, core.ScheduleAutostart):
                self.autostart.schedule(effect.delay_s, self._autostart)

    async def _autostart(self) -> None:
        async with self._lock:
            try:
                # A table behind its log (an append failed) rebuilds first: a player whose
                # stand-up was refused must not be dealt into the next hand.
                await self._ensure_synced()
                if self.hand is not None or not self.state.autostart_due():
                    return
                await self._run(core.StartHand())
            except errors.SocaiError as exc:
                if not self._tenure_over(exc):
                    log.warning("autostart_failed", table_id=self.table_id, code=exc.code, error=exc.message)
            except Exception as exc:  # a database or NATS client error: heal() tries again
                log.error("autostart_crashed", table_id=self.table_id, error=str(exc)[:500], exc_info=exc)

    async def heal(self) -> None:
        """Put the table back in motion after a failure no client call will notice.

        The manager's watchdog calls this every second (a supervisor, STYLE.md habit 14): a
        table whose log may hold more than it knows (a failed append: NATS was down) is
        rebuilt, which re-arms the timer of its hand; a hand in play waiting for a decision
        with no timer armed gets one; a table that should auto-start gets its start
        scheduled. Raises what the rebuild raises (the watchdog backs off and retries).
        """
        if self._lock.locked() or not self.holds():
            return
        async with self._lock:
            if self.dirty:
                await self._resync("heal")
                return
            if self.holds_to_finalize:
                await self._finalize_holds()
            hand = self.hand
            if hand is not None and not hand.ended:
                if not self.timer.armed:
                    await self._advance()
            elif hand is None and self.closing:
                await self._run(core.FinishClose())  # a close a failure stopped halfway
            elif hand is None:
                await self._stand_up_due()  # a stand-up a failure stopped halfway
                self._maybe_autostart()

    def holds(self) -> bool:
        """Whether this object may still write: its lease tenure has not ended. Once it has,
        it never may again (a later tenure builds a new object): its timers are stopped,
        so none of them fails ``TABLE_NOT_HELD`` again and again until the manager drops it."""
        try:
            self.deps.fence(self.table_id)
        except errors.Unavailable as exc:
            return not self._tenure_over(exc)
        return True

    def _tenure_over(self, exc: errors.SocaiError) -> bool:
        """True (and the table's own timers stopped) when ``exc`` says this object's lease
        tenure has ended (``Deps.fence``)."""
        if not (isinstance(exc, errors.Unavailable) and exc.code == "TABLE_NOT_HELD"):
            return False
        if self.timer.armed or self.autostart.pending:
            log.info("table_tenure_ended", table_id=self.table_id)
        self.timer.cancel()
        self.autostart.cancel()
        return True

    # --- viewers -------------------------------------------------------------------------

    def viewer_seat(self, player_id: str | None) -> int:
        return viewer_seat(self.seats, player_id)

    def view(self, player_id: str | None) -> dict[str, Any]:
        """What ``player_id`` (None: a spectator) may see of the table right now (in the
        middle of a command, too: ``view_now`` waits for the command to finish)."""
        return hand_view(
            self.module, self.hand or self.last_hand, self.viewer_seat(player_id), self.timer.deadline, self.log_seq
        )

    async def view_now(self, player_id: str | None) -> dict[str, Any]:
        """``view`` taken between commands, never halfway through one (a hand whose first
        event is still being appended, a rebuild that has cleared the seats). The table
        cannot change again before the caller's next ``await``: reading its seats in the
        same step (``convert.state_to_proto``) gives the same moment."""
        async with self._lock:
            return self.view(player_id)

    async def reconnect(self, player_id: str) -> dict[str, Any]:
        """``heartbeat``, then the player's ``view_now``. Raises as ``heartbeat`` does."""
        await self.heartbeat(player_id)
        return await self.view_now(player_id)

    async def watch(self, player_id: str | None, from_seq: int = 0) -> tuple[Watcher, list[WatchItem]]:
        """Open a WatchTable stream: the watcher and its first messages (the events of the
        hand in play, or else the last one, from ``from_seq``, as the viewer may see them),
        taken together between commands so that no event slips between the two. The last
        of them carries the viewer's view now; the earlier ones only their own position.
        With no event to send, one message brings the view."""
        async with self._lock:
            viewer = self.viewer_seat(player_id)
            hand = self.hand or self.last_hand
            now = view_at(self.module, moment_now(hand, self.log_seq), viewer, self.timer.deadline, True)
            snapshot: list[WatchItem] = []
            if hand is not None:
                shown = viewer if viewer >= 0 else -1
                for event in hand.events:
                    if event.seq < from_seq:
                        continue
                    seen = views_redact(self.module, event, viewer, hand.state, hand.ended, hand.protos)
                    if seen is not None:
                        position = hand.log_seqs[event.seq - 1] if event.seq <= len(hand.log_seqs) else self.log_seq
                        light = View(position, hand.hand_id, event.seq, viewer_seat=shown, more_follows=True)
                        snapshot.append(WatchItem(seen, light))
            if snapshot:
                snapshot[-1] = WatchItem(snapshot[-1].event, now)
            else:
                snapshot.append(WatchItem(None, now))
            return self.watchers.add(player_id, self.hand, viewer), snapshot

    def unwatch(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    async def retire(self, wait_s: float) -> None:
        """Stop running this table here (another instance takes it over): wait up to
        ``wait_s`` for the command in progress to finish, then ``stop``. A command still
        waiting for the lock finds the lease gone at its append (``Deps.fence``)."""
        try:
            await asyncio.wait_for(self._lock.acquire(), wait_s)
        except TimeoutError:
            log.warning("table_retired_busy", table_id=self.table_id, waited_s=wait_s)
        else:
            self._lock.release()
        await self.stop()

    async def stop(self) -> None:
        self.timer.cancel()
        self.autostart.cancel()
        self.watchers.close()
