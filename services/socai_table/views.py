"""What each viewer may see of a table: ``GetTableState`` views and the ``WatchTable`` fan-out.

The game's ``visible`` hook decides, per event, from the seat the viewer holds at that
moment (the kit's default hides other seats' face-down cards; Mậu Binh's arrangements and
Ba Cây's unflipped cards are hidden by their games) until the hand is over, when the
revealed seed makes every card public anyway.

A game with its own hook may show more of an earlier event as the hand moves on (a Ba Cây
flip, Mậu Binh's comparison). A live watcher is then sent that earlier event again, as it
may see it now: same ``seq`` and ``event_id``, more cards. A client keeps the latest copy
of each ``seq``; ``GetTableState`` always shows the latest.

Every message also carries the viewer's ``View`` right after its event: whose decision the
hand waits for and until when, the viewer's own cards (from the hand in memory, never from
the log), what they must beat or answer, and their legal moves when it is their turn. A
command (a call, a timer) may write several events; the watchers get them when the command
ends (``Watchers.flush``, run as the table's lock is released), so the last message of a
command carries the view ``GetTableState`` would show at that moment, deadline and legal
moves included, with the same ``log_seq``: the stream and the state never disagree. The
earlier messages of the command carry the view right after their own event, without the
legal moves and the deadline (``more_follows``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from socai.errors import check as errors_check
from socai.events import codec
from socai.events.model import COMMUNITY, Event
from socai.gen.events.v1 import events_pb2
from socai.infra import limits
from socai.infra.logging import get_logger
from socai.rules import base as kit
from socai.rules.base import Facing, LegalAction, MoveSet
from socai_table.hand import Hand
from socai_table.model import Seat

log = get_logger("socai.table")

WATCH_QUEUE_MAX = 2000
NOTHING_FACED = Facing()
SPECTATOR_SEAT = COMMUNITY - 1  # no seat: sees no hidden card
FULL_VIEW = COMMUNITY - 2  # the key of an event's whole message in ``Hand.protos``

ProtoCache = dict[tuple[int, int], events_pb2.Event]


def redact(
    module: ModuleType,
    event: Event,
    viewer_seat: int,
    state: Any,
    hand_over: bool,
    cache: ProtoCache | None = None,
) -> events_pb2.Event | None:
    """The event as ``viewer_seat`` may see it, or None when they may not see it at all.

    With ``cache`` (the hand's ``Hand.protos``, for an event of that hand) each message is
    converted once and then shared: a caller copies it into its response (protobuf's
    constructors and ``CopyFrom`` do) and never changes it. An event seen whole is one
    message for every viewer; a redacted one is kept per viewer only under the kit's
    default visibility, which depends on the event and the seat alone. A game with its own
    ``visible`` hook may show more of an event as the hand moves on, so its redacted
    copies are converted each time.
    """
    default_hook = getattr(module, "visible", None) is None
    if cache is not None and default_hook and not hand_over:
        known = cache.get((event.seq, viewer_seat))
        if known is not None:
            return known
    seen = kit.visible_event(module, event, viewer_seat, state, hand_over)
    if seen is None:
        return None
    if cache is None:
        return codec.to_proto(seen)
    message = cache.get((event.seq, FULL_VIEW)) if seen is event else None
    if message is None:
        message = codec.to_proto(seen)
        if seen is event:
            cache[(event.seq, FULL_VIEW)] = message
        elif not default_hook:
            return message
    if default_hook and not hand_over:
        cache[(event.seq, viewer_seat)] = message
    return message


def viewer_seat(seats: Mapping[int, Seat], player_id: str | None) -> int:
    """The seat ``player_id`` holds now; a spectator's (``SPECTATOR_SEAT``) for anyone else."""
    if player_id:
        for seat in seats.values():
            if seat.player_id == player_id:
                return seat.seat
    return SPECTATOR_SEAT


@dataclass(frozen=True)
class View:
    """One viewer's situation at one moment of the table (``TableView`` at the edge)."""

    log_seq: int
    hand_id: str = ""
    seq: int = 0
    hand_over: bool = False
    to_act: tuple[int, ...] = ()
    timer: str = ""
    deadline: float = 0.0  # wall-clock seconds; 0 = none
    viewer_seat: int = -1
    cards: tuple[Any, ...] = ()
    facing: Facing = NOTHING_FACED
    legal_moves: tuple[MoveSet, ...] = ()
    more_follows: bool = False


@dataclass(frozen=True)
class Moment:
    """The table right after one event (or now): the hand shown (the hand in play, else
    the last one) and its rules state then (states are never changed, so keeping one is
    keeping that moment), whether the hand was over, and the log position."""

    hand: Hand | None
    state: Any
    over: bool
    log_seq: int
    seq: int


def view_at(module: ModuleType, moment: Moment, viewer: int, deadline: float, final: bool) -> View:
    """What ``viewer`` (a seat, or ``SPECTATOR_SEAT``) sees at ``moment``. Only a ``final``
    view (the last of a command, or a view taken now) has the deadline and the legal moves:
    computing legal moves is the costly part, and only the last view is acted on."""
    shown_seat = viewer if viewer >= 0 else -1
    hand = moment.hand
    if hand is None:
        return View(moment.log_seq, viewer_seat=shown_seat, more_follows=not final)
    state = moment.state
    cards: tuple[Any, ...] = ()
    to_act: tuple[int, ...] = ()
    timer = ""
    facing = NOTHING_FACED
    legal: tuple[MoveSet, ...] = ()
    if state is not None and not hand.closing:  # a closing hand has no rules state
        dealt = viewer in hand.dealt_seats  # a seat taken after the deal has no part in the hand
        if dealt:
            cards = kit.held_cards(module, state, viewer)
        if not moment.over:
            pending = module.pending(state)
            to_act, timer = tuple(pending.to_act), pending.timer
            if dealt:
                facing = kit.facing(module, state, viewer)
                if final and viewer in to_act:
                    legal = kit.legal_moves(module, state, viewer)
    return View(
        moment.log_seq,
        hand.hand_id,
        moment.seq,
        moment.over,
        to_act,
        timer,
        deadline if final and to_act else 0.0,
        shown_seat,
        cards,
        facing,
        legal,
        not final,
    )


def moment_now(hand: Hand | None, log_seq: int) -> Moment:
    """The table's moment now: ``hand`` is the hand in play, else the last one."""
    if hand is None:
        return Moment(None, None, False, log_seq, 0)
    return Moment(hand, hand.state, hand.ended, log_seq, hand.seq)


def hand_view(module: ModuleType, hand: Hand | None, viewer: int, deadline: float, log_seq: int = 0) -> dict[str, Any]:
    """What ``viewer`` may see of ``hand`` (the hand in play, or else the last one) now:
    its events, whose decision it is and until when, the viewer's own legal moves, and the
    whole ``View`` (``view``)."""
    result: dict[str, Any] = {
        "viewer_seat": viewer if viewer >= 0 else -1,
        "hand_id": "",
        "last_seq": 0,
        "events": [],
        "to_act": [],
        "timer": "",
        "deadline": 0.0,
        "legal_actions": [],
        "candidate_actions": [],
        "view": view_at(module, moment_now(hand, log_seq), viewer, deadline, True),
    }
    if hand is None:
        return result
    over = hand.ended
    seen = (redact(module, e, viewer, hand.state, over, hand.protos) for e in hand.events)
    result.update(
        hand_id=hand.hand_id,
        last_seq=hand.seq,
        events=[e for e in seen if e is not None],
    )
    if not over and not hand.closing:  # a closing hand waits for nobody
        pending = module.pending(hand.state)
        result.update(to_act=list(pending.to_act), timer=pending.timer, deadline=deadline)
        if viewer in pending.to_act:
            legal: tuple[LegalAction, ...] = module.legal_actions(hand.state, viewer)
            result["legal_actions"] = list(legal)
            result["candidate_actions"] = list(module.candidate_actions(hand.state, viewer))
    return result


# Why a stream was ended for falling behind (the ErrorInfo reason of its RESOURCE_EXHAUSTED).
QUEUE_FULL = "WATCH_QUEUE_FULL"  # its own queue held WATCH_QUEUE_MAX events
MEMORY_FULL = "WATCH_MEMORY_FULL"  # every stream's queue together reached the instance's bound
WATCH_QUEUED_SETTING = "SOCAI_LIMIT_WATCH_QUEUED_EVENTS"


@dataclass(eq=False)
class WatchItem:
    """One WatchTable message: the event as its viewer may see it (None: the message only
    brings the view, or a cash-out), the viewer's view right after it, and a completed
    cash-out of the viewer's (``CashOutDone``).

    ``Watchers.flush`` queues one item for every stream of a visibility class (the same
    event as seen from the same seat, the same view), so ``wire`` — the serialized
    ``WatchTableResponse``, filled in by whichever stream sends the item first
    (``convert.watch_item_wire``) — is built once per class, not once per stream. An item
    is never changed once built, ``wire`` aside."""

    event: events_pb2.Event | None
    view: View
    cash_out: Any = None
    wire: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class _Out:
    """A message of the command in progress, sent when it ends (``Watchers.flush``)."""

    event: events_pb2.Event | None
    moment: Moment
    viewer: int
    cash_out: Any = None


@dataclass(eq=False)  # identity semantics: watchers live in a set
class Watcher:
    """One open WatchTable stream. It remembers who watches, not which seat: what the
    viewer may see is decided per event from the seat they hold *then* (a player who
    leaves seat 0 must not see the cards of the next player seated there).

    Events wait in ``queue`` (at most ``WATCH_QUEUE_MAX``) until the stream sends them; a
    ``None`` ends the stream. One that falls behind is ended, ``ended_by`` saying why: a
    watcher that fell this far behind must re-read the table rather than see a view with
    holes in it."""

    player_id: str | None
    queue: asyncio.Queue[WatchItem | None]
    ended_by: str = ""  # QUEUE_FULL | MEMORY_FULL; "" while it keeps up
    waiting: int = 0  # events in ``queue`` (the end marker not counted)
    # The instance's bound on every stream's queued events together (set by the server).
    budget: WatchBudget | None = None
    # This command's messages, sent when it ends (``Watchers.flush``).
    outbox: list[_Out] = field(default_factory=list)
    # The events of ``hand_id`` (the hand in play) this watcher has seen only in part, or
    # not at all: seq -> the copy it was sent (None: none). Only these can show more later.
    hand_id: str = ""
    partial: dict[int, Event | None] = field(default_factory=dict)

    @property
    def overflowed(self) -> bool:
        return bool(self.ended_by)

    def offer(self, message: WatchItem) -> None:
        """Queue ``message`` for the stream, or end the stream when it is too far behind."""
        if self.ended_by:
            return
        if self.budget is not None and not self.budget.room_for(self):
            return  # this stream was the one furthest behind: ended
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            self.end(QUEUE_FULL)
            limits.REFUSALS.labels("table", "WATCH_QUEUE_MAX").inc()
            return
        self.waiting += 1
        if self.budget is not None:
            self.budget.queued += 1

    def end(self, reason: str) -> None:
        """End the stream at once for ``reason``: what it still had queued is dropped (its
        memory freed), and the stream sees the end next."""
        self.ended_by = reason
        while not self.queue.empty():
            self.queue.get_nowait()
        if self.budget is not None:
            self.budget.queued -= self.waiting
        self.waiting = 0
        self.queue.put_nowait(None)

    async def next(self) -> WatchItem | None:
        """The next event to send; None when the stream is over."""
        item = await self.queue.get()
        if item is not None:
            self.waiting -= 1
            if self.budget is not None:
                self.budget.queued -= 1
        return item

    def close(self) -> None:
        """End the stream after what is queued (the table stops or moves)."""
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)


class WatchBudget:
    """Events queued in every WatchTable stream of the instance together, at most
    ``max_events`` (``SOCAI_LIMIT_WATCH_QUEUED_EVENTS``; 0: no bound beyond each stream's own
    ``WATCH_QUEUE_MAX``).

    An event waiting for a stream is a reference to a message every stream of the same
    visibility class shares (one ``WatchItem``, its event from ``redact``'s cache), so the
    number of queued events is the measure of what the streams hold. At the bound the
    stream furthest behind — the one with the most events waiting, often the one about to
    be sent to — is ended with ``RESOURCE_EXHAUSTED WATCH_MEMORY_FULL`` and its queue
    dropped, so a few unread streams cannot make every reader wait or the instance run out
    of memory; its client watches again from the last ``seq`` it kept, like any stream
    that ends.
    """

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.queued = 0
        self._watchers: set[Watcher] = set()

    def add(self, watcher: Watcher) -> None:
        errors_check(watcher.budget is None, "a watcher joins one budget once")
        watcher.budget = self
        self.queued += watcher.waiting
        self._watchers.add(watcher)

    def remove(self, watcher: Watcher) -> None:
        """The stream is over: what it still had queued no longer counts."""
        if watcher in self._watchers:
            self._watchers.discard(watcher)
            self.queued -= watcher.waiting
            watcher.budget = None

    def room_for(self, sender: Watcher) -> bool:
        """Make room for one more event for ``sender``: at the bound, end the stream furthest
        behind. False when that was ``sender`` itself."""
        while self.max_events and self.queued >= self.max_events:
            slowest = max(self._watchers, key=lambda w: w.waiting, default=None)
            if slowest is None or slowest.waiting == 0:
                return True  # nothing queued to drop (the count is of these watchers)
            slowest.end(MEMORY_FULL)
            limits.REFUSALS.labels("table", WATCH_QUEUED_SETTING).inc()
            if slowest is sender:
                return False
        return True

    def __len__(self) -> int:
        return len(self._watchers)


class Watchers:
    """The table's open WatchTable streams, and what each is sent as events happen."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self._watchers: set[Watcher] = set()
        self._waiting: list[Watcher] = []  # the watchers with messages in their outbox
        # The kit's default visibility depends on the event alone; only a game's own hook
        # looks at the state, so only such a game can show more of an event later.
        self._reveals_later = getattr(module, "visible", None) is not None

    def add(self, player_id: str | None, hand: Hand | None, viewer: int) -> Watcher:
        """A new stream for ``player_id``, which is about to be sent the view of ``hand``
        as ``viewer`` may see it now (the caller's snapshot)."""
        watcher = Watcher(player_id, asyncio.Queue(maxsize=WATCH_QUEUE_MAX))
        if self._reveals_later and hand is not None and not hand.ended:
            watcher.hand_id = hand.hand_id
            for event in hand.events:
                seen = kit.visible_event(self.module, event, viewer, hand.state, False)
                if seen is not event:
                    watcher.partial[event.seq] = seen
        self._watchers.add(watcher)
        return watcher

    def discard(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def broadcast(
        self, event: Event, hand: Hand | None, seat_of: Callable[[str | None], int], hand_over: bool, moment: Moment
    ) -> None:
        """Queue ``event`` for every watcher as its viewer may see it, followed by any
        earlier event of the hand that the viewer now sees more of; ``flush`` sends them.
        ``hand`` is the hand in play with ``event`` already applied (None, or another hand,
        for a table fact); ``moment`` the table right after it. A watcher that may not see
        the event still gets the moment, so that its last message of a command carries the
        view of the command's end."""
        if not self._watchers:
            return
        in_hand = hand is not None and event.hand_id == hand.hand_id
        state = hand.state if hand is not None and in_hand else None
        cache = hand.protos if hand is not None and in_hand else None
        protos: dict[int, events_pb2.Event | None] = {}  # per viewer seat: this event as sent
        for watcher in list(self._watchers):
            if watcher.overflowed:
                continue
            viewer = seat_of(watcher.player_id)
            if viewer not in protos:
                protos[viewer] = redact(self.module, event, viewer, state, hand_over, cache)
            self._queue(watcher, _Out(protos[viewer], moment, viewer))
            if self._reveals_later and hand is not None and in_hand:
                self._track(watcher, event, hand, viewer, hand_over, moment)

    def cash_out(self, player_id: str, done: Any, moment: Moment, seat_of: Callable[[str | None], int]) -> None:
        """Queue ``done`` (a completed cash-out) for ``player_id``'s streams."""
        for watcher in list(self._watchers):
            if watcher.player_id == player_id and not watcher.overflowed:
                self._queue(watcher, _Out(None, moment, seat_of(player_id), done))

    def _queue(self, watcher: Watcher, out: _Out) -> None:
        if not watcher.outbox:
            self._waiting.append(watcher)
        watcher.outbox.append(out)

    def flush(self, deadline: float) -> None:
        """Send every watcher what the command that ends now queued for it: each event
        with the view right after it, the last message with the final view (``deadline``
        the hand's timer now, and the legal moves). A message that carries neither an event
        the viewer may see nor a cash-out is sent only when it is the last (its view)."""
        waiting, self._waiting = self._waiting, []
        views: dict[tuple[int, int, bool], View] = {}  # (moment, viewer, final): computed once
        # (event as seen, moment, viewer, final): one message for every stream of that
        # visibility class, so that it is built and serialized once (``WatchItem.wire``).
        # ``broadcast`` gives every viewer of a seat the same event message. The ids are
        # safe keys: ``items`` keeps each event it keys alive, and no moment is made here.
        items: dict[tuple[int, int, int, bool], WatchItem] = {}
        for watcher in waiting:
            outbox, watcher.outbox = watcher.outbox, []
            last = len(outbox) - 1
            for i, out in enumerate(outbox):
                final = i == last
                if out.event is None and out.cash_out is None and not final:
                    continue
                key = (id(out.moment), out.viewer, final)
                view = views.get(key)
                if view is None:
                    view = views[key] = self._view(out, deadline, final)
                if out.cash_out is not None:  # the viewer's own: never shared
                    self._send(watcher, WatchItem(out.event, view, out.cash_out))
                    continue
                shared = (id(out.event), *key)
                item = items.get(shared)
                if item is None:
                    item = items[shared] = WatchItem(out.event, view)
                self._send(watcher, item)

    def _view(self, out: _Out, deadline: float, final: bool) -> View:
        """``view_at``; should a game's hook fail, the message still goes out with the
        view's position only (a stream never loses an event), and the failure is logged."""
        try:
            return view_at(self.module, out.moment, out.viewer, deadline, final)
        except Exception as exc:
            log.error("view_failed", game=self.module.SPEC.game_id, error=repr(exc)[:300], exc_info=exc)
            hand = out.moment.hand
            return View(
                out.moment.log_seq,
                hand.hand_id if hand is not None else "",
                out.moment.seq,
                viewer_seat=out.viewer if out.viewer >= 0 else -1,
                more_follows=not final,
            )

    def _track(self, watcher: Watcher, event: Event, hand: Hand, viewer: int, hand_over: bool, moment: Moment) -> None:
        if hand_over or watcher.hand_id != hand.hand_id:
            # A new hand (or its end, when HandEnded's seed reveals every card): what was
            # partly seen of the hand before no longer matters.
            watcher.partial = {}
            watcher.hand_id = "" if hand_over else hand.hand_id
            if hand_over:
                return
        for seq, before in list(watcher.partial.items()):
            original = hand.events[seq - 1]
            now = kit.visible_event(self.module, original, viewer, hand.state, False)
            if now == before:
                continue
            if now is original:
                del watcher.partial[seq]
            else:
                watcher.partial[seq] = now
            if now is not None:
                self._queue(watcher, _Out(codec.to_proto(now), moment, viewer))
        seen = kit.visible_event(self.module, event, viewer, hand.state, False)
        if seen is not event:
            watcher.partial[event.seq] = seen

    @staticmethod
    def _send(watcher: Watcher, message: WatchItem) -> None:
        watcher.offer(message)

    def close(self, deadline: float = 0.0) -> None:
        """End every stream (the service is stopping, the table closed or moved), after
        what the command in progress queued for it."""
        self.flush(deadline)
        for watcher in list(self._watchers):
            watcher.close()
