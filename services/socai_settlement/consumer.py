"""The JetStream side of settlement: a durable pull consumer over every event.

Consumer ``settlement`` (name configurable) on ``{prefix}.>``: explicit acks, at most
``max_ack_pending`` unacknowledged messages, ``ack_wait`` before a redelivery,
``max_deliver`` deliveries. Each pulled batch is handled in stream order:

- table-level facts (TableOpened, PlayerSeated, PlayerStoodUp, TableClosed on the table's
  own subject) carry no money: acked;
- a hand's events other than HandEnded are kept (as the bytes the stream holds) in a
  bounded per-hand cache and acked at once (the stream keeps them; the cache only saves
  reading them back);
- a HandEnded makes a ``HandJob``; the jobs of the batch are settled together by the
  ``Settler`` (chunks of ``post_batch_max``), and acked only after the settlement or dead
  letter is committed. Every HandEnded held longer than a third of ``ack_wait`` gets a
  progress beat (``+WPI``), so a slow or unavailable ledger or database causes no
  redelivery and does not use up the message's deliveries;
- a message that is not an Event is dead-lettered (BAD_EVENT) under the hand its subject
  names, then acked;
- a HandEnded delivered ``poison_after_deliveries`` times (it kept failing or crashing the
  process) is dead-lettered with MAX_DELIVERIES instead of tried again. The server's
  ``max_deliver`` is larger, so even a crash while recording that dead letter leaves
  deliveries to record it with; the MAX_DELIVERIES advisory is also listened to, so a
  message the server gives up on is dead-lettered, never silently dropped.

The cache is used only when it holds the whole hand exactly (seq 1..n in stream order,
ending with this HandEnded); otherwise the hand is read by subject, which is the truth
(after a restart, or when the cache overflowed).

A table's hands must reach the ledger in the order they were played (each hand's stacks
include the one before), so nothing here reorders: one pull at a time, chunks posted and
stored in order, a held batch given back with a nak (redelivered ahead of newer messages),
and at start the unsettled HandEnded messages a killed instance left unacked are settled
first, read from the stream (``_recover``).

Messages acked with no effect — bytes that are not an Event on a hand already settled, a
second HandEnded of a hand, a hand's event after its settlement — are counted in
``socai_settlement_ignored_messages_total{kind}`` and logged with their stream sequence
(``IgnoredMessages``).

Throughput: a pulled batch is cut into chunks, and each chunk goes through three stages
that overlap — replay (``Settler.prepare``: a worker process), post (one PostTransactions
call) and store (one statement), then the acks — so while chunk *k* is stored, *k+1* is
being posted and *k+2* replayed, and the pull loop reads on. Messages come off the wire as
raw frames (``Pull``), not as nats-py ``Msg`` objects: about 15 of them per hand made
the client's per-message work (header parsing, metadata parsing, a queue and a task hop
each) a large part of settlement's CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError

from socai.gen.events.v1 import events_pb2
from socai.infra.logging import bound, get_logger
from socai_settlement import metrics, recovery
from socai_settlement.config import SettlementConfig
from socai_settlement.poster import Backoff
from socai_settlement.recovery import subject_tokens
from socai_settlement.replayer import EventBytes
from socai_settlement.settler import HandJob, PostedBatch, Prepared, Settler
from socai_settlement.store import NewDeadLetter

log = get_logger("socai.settlement.consumer")

TABLE_BODIES: Final = frozenset({"table_opened", "player_seated", "player_stood_up", "table_closed"})
BAD_EVENT: Final = "BAD_EVENT"
MAX_DELIVERIES: Final = "MAX_DELIVERIES"
RECENTLY_SETTLED_MAX: Final = 10_000
REDELIVERY_MARGIN_S: Final = 0.5
PULL_PENDING_MSGS_MAX: Final = 100_000  # above fetch_batch: the inbox never drops a message
PULL_GRACE_S: Final = 1.0  # past a pull request's expiry, give up waiting for its 408
REDELIVERY_FETCHES_MAX: Final = 1_000  # a limit on the loop that collects a killed instance's messages
IGNORED_LOG_EVERY_S: Final = 60.0  # one line per kind of ignored message at most this often
# Kinds of ``socai_settlement_ignored_messages_total``: messages acked with no effect.
NOT_AN_EVENT: Final = "not_an_event"  # bytes that are not an Event, on a hand already settled
DUPLICATE_HAND_ENDED: Final = "duplicate_hand_ended"  # a second HandEnded of a hand (another stream seq)
EVENT_AFTER_SETTLEMENT: Final = "event_after_settlement"  # a hand's event after its settlement
ACK: Final = b""
IN_PROGRESS: Final = b"+WPI"
NAK: Final = b"-NAK"
_STATUS_LINE: Final = b"NATS/1.0 "  # a status frame's header block starts "NATS/1.0 404 No Messages"


class Enveloped(Protocol):
    """What the hand cache reads of an event: a protobuf ``Event`` or ``EventBytes``."""

    @property
    def seq(self) -> int: ...
    @property
    def hand_id(self) -> str: ...
    @property
    def table_id(self) -> str: ...


class HandCache:
    """The events of hands in progress, as delivered: bounded by ``max_events`` (the oldest
    hands are dropped first; they are read by subject when their HandEnded comes)."""

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.size = 0
        self._hands: OrderedDict[tuple[str, str], dict[int, Any]] = OrderedDict()

    def add(self, table_id: str, hand_id: str, stream_seq: int, event: Enveloped) -> None:
        key = (table_id, hand_id)
        entries = self._hands.get(key)
        if entries is None:
            entries = self._hands[key] = {}
        if stream_seq not in entries:
            entries[stream_seq] = event
            self.size += 1
        while self.size > self.max_events and self._hands:
            _, dropped = self._hands.popitem(last=False)
            self.size -= len(dropped)

    def discard(self, table_id: str, hand_id: str) -> None:
        dropped = self._hands.pop((table_id, hand_id), None)
        if dropped:
            self.size -= len(dropped)

    def take(self, table_id: str, hand_id: str, end_seq: int, end: Enveloped) -> list[Any] | None:
        """The whole hand if the cache holds exactly seq 1..n-1 before ``end`` (seq n), else
        None. The hand's entries are removed either way."""
        entries = self._hands.pop((table_id, hand_id), None) or {}
        self.size -= len(entries)
        ordered = [entries[s] for s in sorted(entries) if s < end_seq]
        ordered.append(end)
        for i, ev in enumerate(ordered, start=1):
            if ev.seq != i or ev.hand_id != hand_id or ev.table_id != table_id:
                return None
        return ordered


class Delivery:
    """One message of the pull subscription: its subject, reply (ack) subject and data, and
    the delivery count and stream sequence its ack subject carries. ``ack``/``nak``/
    ``in_progress`` as on nats-py's ``Msg``."""

    __slots__ = ("_nc", "data", "num_delivered", "reply", "stream_seq", "subject")

    def __init__(self, nc: NatsClient, subject: str, reply: str, data: bytes) -> None:
        self._nc = nc
        self.subject = subject
        self.reply = reply
        self.data = data
        self.num_delivered, self.stream_seq = ack_fields(reply)

    async def ack(self) -> None:
        await self._nc.publish(self.reply, ACK)

    async def nak(self) -> None:
        await self._nc.publish(self.reply, NAK)

    async def in_progress(self) -> None:
        await self._nc.publish(self.reply, IN_PROGRESS)


def ack_fields(reply: str) -> tuple[int, int]:
    """(deliveries, stream sequence) from a JetStream ack subject:
    ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ms>.<pending>``,
    or the newer form with ``<domain>.<account hash>`` after ``$JS.ACK`` (and a trailing
    token). Raises NotJSMessageError for anything else."""
    tokens = reply.split(".")
    if len(tokens) == 9 and tokens[0] == "$JS" and tokens[1] == "ACK":
        return int(tokens[4]), int(tokens[5])
    metadata = Msg.Metadata._from_reply(reply)  # the other forms, or NotJSMessageError
    return int(metadata.num_delivered or 1), int(metadata.sequence.stream or 0)


Frame = Callable[[bytes, bytes, bytes, bytes | None], None]


def _tap(nc: NatsClient, sid: int, handler: Frame) -> bool:
    """Route the frames of subscription ``sid`` to ``handler(subject, reply, data,
    headers)`` as the protocol parser hands them over, before nats-py builds a ``Msg``
    (header dict, metadata, a queue and a task per message). False when this nats-py's
    ``_process_msg`` is not the one this was written for: the subscription's callback then
    gets ``Msg`` objects as usual."""
    taps: dict[int, Frame] | None = getattr(nc, "_socai_taps", None)
    if taps is None:
        original = getattr(nc, "_process_msg", None)
        if original is None or list(inspect.signature(original).parameters) != [
            "sid",
            "subject",
            "reply",
            "data",
            "headers",
        ]:
            return False
        routes: dict[int, Frame] = {}

        async def process_msg(sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
            handler = routes.get(sid)
            if handler is None:
                await original(sid, subject, reply, data, headers)
            else:
                handler(subject, reply, data, headers)

        nc._process_msg = process_msg  # type: ignore[method-assign]
        nc._socai_taps = taps = routes  # type: ignore[attr-defined]
    taps[sid] = handler
    return True


def _untap(nc: NatsClient, sid: int) -> None:
    taps: dict[int, Frame] | None = getattr(nc, "_socai_taps", None)
    if taps is not None:
        taps.pop(sid, None)


class Pull:
    """A pull subscription read through one inbox.

    One pull request at a time asks for up to ``batch`` messages; they land in a buffer as
    they arrive, ``fetch`` hands out what is there (waiting up to ``timeout_s`` for the
    first), and a new request is sent only once the previous one is complete (all its
    messages, or a 404/408/409 status) and the buffer is empty. So at most ``batch``
    messages are ever buffered, in stream order. The frames are read raw (``_tap``): a
    ``Delivery`` is built straight from the subject, reply and payload bytes.
    """

    def __init__(self, nc: NatsClient, stream: str, durable: str) -> None:
        self.nc = nc
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self.inbox = nc.new_inbox()
        self._buffer: deque[Delivery] = deque()
        self._arrived = asyncio.Event()
        self._open = False
        self._remaining = 0
        self._sub: Any = None
        self.raw = False

    async def start(self) -> None:
        self._sub = await self.nc.subscribe(
            self.inbox, cb=self._on_msg, pending_msgs_limit=PULL_PENDING_MSGS_MAX, pending_bytes_limit=-1
        )
        self.raw = _tap(self.nc, self._sub._id, self._on_frame)

    async def close(self) -> None:
        if self._sub is not None:
            _untap(self.nc, self._sub._id)
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    def _on_frame(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if headers is not None and headers.startswith(_STATUS_LINE):
            line = headers[len(_STATUS_LINE) :].split(b"\r\n", 1)[0].decode(errors="replace")
            status, _, description = line.partition(" ")
            self._on_status(status, description)
            return
        self._on_data(Delivery(self.nc, subject.decode(), reply.decode(), data))

    async def _on_msg(self, msg: Msg) -> None:
        """The same as ``_on_frame``, for a nats-py whose frames cannot be tapped."""
        status = msg.headers.get("Status") if msg.headers else None
        if status:
            self._on_status(status, (msg.headers or {}).get("Description", ""))
            return
        self._on_data(Delivery(self.nc, msg.subject, msg.reply, msg.data))

    def _on_status(self, status: str, description: str) -> None:
        if status == "100":  # idle heartbeat or flow control: not the end of the request
            return
        if status not in ("404", "408"):
            log.warning("pull_request_ended", status=status, description=description)
        self._open = False
        self._arrived.set()

    def _on_data(self, delivery: Delivery) -> None:
        self._buffer.append(delivery)
        self._remaining -= 1
        if self._remaining <= 0:
            self._open = False
        self._arrived.set()

    async def fetch(self, batch: int, timeout_s: float) -> list[Delivery]:
        """Up to ``batch`` messages; [] when none came within ``timeout_s``."""
        if not self._buffer:
            self._arrived.clear()
            if not self._open:
                self._open, self._remaining = True, batch
                request = {"batch": batch, "expires": int(timeout_s * 1e9)}
                await self.nc.publish(self.next_subject, json.dumps(request).encode(), reply=self.inbox)
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout_s + PULL_GRACE_S)
            except TimeoutError:
                self._open = False  # the request expired unseen (a reconnect): ask again
                return []
        buffer = self._buffer
        if len(buffer) <= batch:
            out = list(buffer)
            buffer.clear()
            return out
        return [buffer.popleft() for _ in range(batch)]


class IgnoredMessages:
    """Messages acked with no effect (garbage or a duplicate on a hand already settled, a
    hand's event after its settlement): counted by kind, and logged with their stream
    sequence — the first of each kind at once, then at most one line per kind every
    ``IGNORED_LOG_EVERY_S`` with how many came since, so that a flood of them (a
    misbehaving publisher) is seen without flooding the log."""

    def __init__(self, log_every_s: float = IGNORED_LOG_EVERY_S) -> None:
        self.log_every_s = log_every_s
        self._logged_at: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def add(self, kind: str, stream_seq: int, **context: Any) -> None:
        metrics.IGNORED.labels(kind).inc()
        count = self._since[kind] = self._since.get(kind, 0) + 1
        now = time.monotonic()
        last = self._logged_at.get(kind)
        if last is not None and now - last < self.log_every_s:
            return
        self._logged_at[kind] = now
        self._since[kind] = 0
        log.warning("message_ignored", kind=kind, stream_seq=stream_seq, count=count, **context)


@dataclass
class _Chunk:
    """Up to ``post_batch_max`` finished hands, being replayed, with the messages to ack
    once they are stored."""

    prepared: asyncio.Future[Prepared]
    msgs: list[Delivery]
    last_stream_seq: int
    started: float


@dataclass
class _Pending:
    job: HandJob
    msgs: list[Delivery] = field(default_factory=list)


class Consumer:
    def __init__(
        self,
        nc: NatsClient,
        settler: Settler,
        config: SettlementConfig,
        *,
        stream: str,
        prefix: str,
    ) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.settler = settler
        self.config = config
        self.stream = stream
        self.prefix = prefix
        self.cache = HandCache(config.cache_events_max)
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._sub: Any = None
        self._advisory: Any = None
        self._held: dict[int, tuple[Delivery, float]] = {}  # HandEnded messages not acked yet
        self._replaying: set[asyncio.Future[Prepared]] = set()
        self._started = False
        self.batches = 0
        self.ignored = IgnoredMessages()

    # --- setup --------------------------------------------------------------------------

    def consumer_config(self) -> js_api.ConsumerConfig:
        c = self.config
        return js_api.ConsumerConfig(
            durable_name=c.durable,
            name=c.durable,
            description="settlement: replays each finished hand and posts it to the ledger",
            deliver_policy=js_api.DeliverPolicy.ALL,
            ack_policy=js_api.AckPolicy.EXPLICIT,
            ack_wait=c.ack_wait_s,
            max_deliver=c.max_deliver,
            max_ack_pending=c.max_ack_pending,
            filter_subject=f"{self.prefix}.>",
            replay_policy=js_api.ReplayPolicy.INSTANT,
        )

    async def subscribe(self) -> None:
        """Create (or bring up to date) the durable consumer and bind a pull subscription."""
        wanted = self.consumer_config()
        try:
            await self.js.consumer_info(self.stream, self.config.durable)
            exists = True
        except NotFoundError:
            exists = False
        try:
            await self.js.add_consumer(self.stream, wanted)
        except NatsError as exc:
            if not exists:
                raise
            # An existing durable whose immutable fields differ: keep it, say so.
            log.warning("consumer_config_kept", durable=self.config.durable, error=str(exc))
        pull = Pull(self.nc, self.stream, self.config.durable)
        await pull.start()
        self._sub = pull
        self._advisory = await self.nc.subscribe(
            f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self.stream}.{self.config.durable}",
            cb=self._on_max_deliveries,
        )

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.close()
        if self._advisory is not None:
            with contextlib.suppress(Exception):
                await self._advisory.unsubscribe()
        self._sub = self._advisory = None

    # --- the loop -----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Pull and settle until ``stop`` is set.

        Three stages, so that replaying, posting and storing overlap: this loop pulls,
        sorts and starts each chunk's replay (``Settler.prepare``, a task of its own); a
        poster task posts the replayed chunks strictly in order; a saver task stores them,
        strictly in order, and only then acks them. At most ``pipeline_depth`` chunks wait
        for the poster and one for the saver. On stop, the chunks already started are
        committed first.
        """
        backoff = Backoff(self.config.backoff_initial_s, self.config.backoff_max_s)
        while not stop.is_set():
            try:
                if self._sub is None:
                    await self.subscribe()
                # A previous run of this process that crashed left messages unacked: give
                # them back at once, so that they come before newer hands (see _give_back).
                await self._give_back()
                break
            except (NatsError, TimeoutError) as exc:
                delay = backoff.next_delay()
                log.warning("consumer_unavailable", stream=self.stream, error=repr(exc), retry_in_s=round(delay, 3))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
        to_post: asyncio.Queue[_Chunk | None] = asyncio.Queue(maxsize=self.config.pipeline_depth)
        to_save: asyncio.Queue[tuple[_Chunk, PostedBatch] | None] = asyncio.Queue(maxsize=1)
        saver = asyncio.create_task(self._save_loop(to_save), name="settlement-save")
        poster = asyncio.create_task(self._post_loop(to_post, to_save, saver), name="settlement-post")
        stages = (poster, saver)
        beats = asyncio.create_task(self._beat_loop(stop), name="settlement-beats")
        try:
            carry: list[Delivery] = []
            if not self._started:
                # Until it succeeds once in this process: a later run gave back what it
                # held itself.
                carry = await self._recover(stop)
                self._started = True
            while not stop.is_set():
                for stage in stages:
                    if stage.done():
                        stage.result()  # re-raise what stopped it
                try:
                    msgs = carry or await self._sub.fetch(self.config.fetch_batch, self.config.fetch_timeout_s)
                    carry = []
                except NatsError as exc:
                    delay = backoff.next_delay()
                    log.warning("fetch_failed", error=str(exc), retry_in_s=round(delay, 3))
                    await asyncio.sleep(delay)
                    continue
                if not msgs:
                    continue
                backoff.reset()
                for chunk in await self._prepare(msgs):
                    await _put(to_post, chunk, stages)
            await _put(to_post, None, stages)
            await poster
            await saver
        finally:
            beats.cancel()
            pipeline: list[asyncio.Future[Any]] = [*stages, *self._replaying]
            for task in pipeline:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*stages, beats, *self._replaying, return_exceptions=True)
            self._replaying.clear()
            await self._give_back()

    async def _give_back(self) -> None:
        """Nak every HandEnded still held (a cancelled batch, a crashed run), in stream
        order: the server redelivers them at once, before any newer message. Settling a
        table's hands out of order would make the ledger refuse the later hand (its escrows
        do not hold the earlier hand's winnings yet) and remember the refusal."""
        held = {msg.stream_seq: msg.reply for msg, _ in self._held.values()}
        self._held.clear()
        for seq in sorted(held):
            if held[seq]:
                with contextlib.suppress(Exception):
                    await self.nc.publish(held[seq], NAK)

    async def _recover(self, stop: asyncio.Event) -> list[Delivery]:
        """Settle what a stopped instance took and never acked before anything newer.

        JetStream redelivers those messages only when their ack wait runs out, and meanwhile
        hands out newer ones: a table's later hand could then reach the ledger before an
        earlier one (see ``_give_back``). So the first message is pulled alone: a redelivery
        (or no message) means nothing is outstanding ahead of us; a fresh message while other
        acks are pending means another instance holds older ones. They lie between the
        consumer's ack floor and this message: that range is read from the stream
        (``recovery``), and the HandEnded messages in it whose hands are neither settled nor
        dead-lettered are settled now, in stream order. The cost is what is really pending —
        nothing when the stopped instance held no unsettled HandEnded — not an ``ack_wait``
        per restart. Their redeliveries come later and are acked as already settled.

        It waits for the redeliveries instead (``_await_redeliveries``) when the range is
        longer than ``recovery.SCAN_MESSAGES_MAX``, and when a hand must be
        settled while some outstanding message was redelivered already: a hand that crashes
        the process must use up its deliveries towards MAX_DELIVERIES, not be settled from
        the stream at every start, which no delivery count would ever stop.
        (One instance per durable: scaling out means partitioning the tables, see README.)

        Returns the messages to handle before the next pull.
        """
        first: list[Delivery] = await self._sub.fetch(1, self.config.fetch_timeout_s)
        if not first:
            return []
        msg = first[0]
        if msg.num_delivered > 1:
            return first
        try:
            info = await self.js.consumer_info(self.stream, self.config.durable)
        except (NatsError, TimeoutError) as exc:
            log.warning("consumer_info_unavailable", error=repr(exc))
            return first
        others = int(info.num_ack_pending or 0) - 1
        if others <= 0:
            return first
        floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor is not None else 0
        self._held[id(msg)] = (msg, time.monotonic())  # beaten while we work or wait
        try:
            if await self._settle_outstanding(stop, floor + 1, msg.stream_seq - 1, others, info):
                return first
            collected = await self._await_redeliveries(stop, info, others)
        finally:
            # Not given back with a nak if this fails: a nak would make it look like a
            # redelivery to the next run, which would then skip this recovery; left pending,
            # it is inside the range the next run reads.
            self._held.pop(id(msg), None)
        return sorted([*collected, msg], key=lambda m: m.stream_seq)

    async def _settle_outstanding(
        self, stop: asyncio.Event, first_seq: int, last_seq: int, others: int, info: js_api.ConsumerInfo
    ) -> bool:
        """Settle the unsettled HandEnded messages of ``first_seq..last_seq`` from the
        stream (see ``_recover``); False when the redeliveries must be waited for instead."""
        span = last_seq - first_seq + 1
        if span > recovery.SCAN_MESSAGES_MAX:
            log.warning("outstanding_range_too_long", messages=span, limit=recovery.SCAN_MESSAGES_MAX)
            return False
        clock = time.monotonic()
        found = await self.settler.retrying(
            lambda: recovery.outstanding_hand_ends(
                self.nc, self.settler.store, self.stream, f"{self.prefix}.>", first_seq, last_seq
            ),
            None,
        )
        redelivered = int(info.num_redelivered or 0)
        if found.jobs and redelivered:
            log.warning(
                "outstanding_hands_wait_for_redelivery", hands=len(found.jobs), redelivered_messages=redelivered
            )
            return False
        settled = 0
        step = self.config.post_batch_max
        for start in range(0, len(found.jobs), step):
            if stop.is_set():
                break  # what is left stays pending: the next start reads it again
            for o in await self.settler.settle(found.jobs[start : start + step]):
                if o.settled:
                    self._remember(o.hand_id)
                    settled += not o.already_settled
        metrics.RECOVERED.inc(settled)
        log.warning(
            "outstanding_settled",
            unacked_messages=others,
            scanned=found.scanned,
            hand_ends=found.hand_ends,
            hands=len(found.jobs),
            settled=settled,
            first_stream_seq=first_seq,
            last_stream_seq=last_seq,
            elapsed_s=round(time.monotonic() - clock, 3),
        )
        return True

    async def _await_redeliveries(self, stop: asyncio.Event, info: js_api.ConsumerInfo, others: int) -> list[Delivery]:
        """Wait until the last delivery is ``ack_wait`` old, when the server hands out the
        redeliveries first — over as many pulls as they take, until all of them came or a
        fresh message shows there are no more. At most ``ack_wait``."""
        last = info.delivered.last_active if info.delivered is not None else None
        age_s = (datetime.now(UTC) - last).total_seconds() if last is not None else 0.0
        wait_s = max(0.0, self.config.ack_wait_s - age_s) + REDELIVERY_MARGIN_S
        log.warning("awaiting_redeliveries", messages=others, wait_s=round(wait_s, 1))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)
        collected: list[Delivery] = []
        redelivered = 0
        for _ in range(REDELIVERY_FETCHES_MAX):
            got: list[Delivery] = await self._sub.fetch(self.config.fetch_batch, self.config.fetch_timeout_s)
            if not got:
                break
            collected += got
            redelivered += sum(1 for m in got if m.num_delivered > 1)
            if redelivered >= others or any(m.num_delivered == 1 for m in got):
                break
        return collected

    async def _post_loop(
        self,
        inbox: asyncio.Queue[_Chunk | None],
        outbox: asyncio.Queue[tuple[_Chunk, PostedBatch] | None],
        saver: asyncio.Task[None],
    ) -> None:
        while True:
            chunk = await inbox.get()
            if chunk is None:
                await _put(outbox, None, (saver,))
                return
            posted = await self.settler.post(await chunk.prepared)
            await _put(outbox, (chunk, posted), (saver,))

    async def _save_loop(self, inbox: asyncio.Queue[tuple[_Chunk, PostedBatch] | None]) -> None:
        while True:
            item = await inbox.get()
            if item is None:
                return
            await self._save(*item)

    async def _save(self, chunk: _Chunk, posted: PostedBatch) -> None:
        outcomes = await self.settler.save(posted)
        for o in outcomes:
            if o.settled:
                self._remember(o.hand_id)
            if o.duplicate_of is not None:
                seq, settled_seq = o.duplicate_of
                self.ignored.add(DUPLICATE_HAND_ENDED, seq, hand_id=o.hand_id, settled_from_stream_seq=settled_seq)
        metrics.LAST_SETTLED_SEQ.set(chunk.last_stream_seq)
        await self._ack(chunk.msgs)
        for m in chunk.msgs:
            self._held.pop(id(m), None)
        metrics.BATCH_SECONDS.observe(time.perf_counter() - chunk.started)
        self.batches += 1

    async def _prepare(self, msgs: Sequence[Delivery]) -> list[_Chunk]:
        """Sort a pulled batch (see the module docstring); ack what needs no settling;
        start replaying the finished hands in chunks of ``post_batch_max``."""
        started = time.perf_counter()
        now = time.monotonic()
        finished: list[Delivery] = []  # nothing more to do: acked now
        dead_now: list[tuple[NewDeadLetter, Delivery]] = []
        pending: dict[str, _Pending] = {}
        cache, recent, held = self.cache, self._recent, self._held
        poison_after = self.config.poison_after_deliveries
        table_facts = events = ends = 0
        for msg in msgs:
            stream_seq = msg.stream_seq
            table_id, hand_id = subject_tokens(msg.subject)
            ev = events_pb2.Event()
            try:
                ev.ParseFromString(msg.data)
            except Exception as exc:  # protobuf's DecodeError is a bare Exception subclass
                detail = f"stream seq {stream_seq} on {msg.subject} is not an Event message: {exc}"
                dead_now.append((NewDeadLetter(hand_id, table_id, BAD_EVENT, detail, stream_seq), msg))
                continue
            which = ev.WhichOneof("body")
            if which in TABLE_BODIES:
                table_facts += 1
                finished.append(msg)
                continue
            if which != "hand_ended":
                events += 1
                if msg.num_delivered > 1:
                    # A redelivery (its ack was lost): its HandEnded, if it comes again,
                    # reads the hand by subject; caching it would only hold memory.
                    finished.append(msg)
                    continue
                if hand_id in recent:
                    self.ignored.add(EVENT_AFTER_SETTLEMENT, stream_seq, subject=msg.subject)
                else:
                    cache.add(table_id, hand_id, stream_seq, EventBytes(ev.seq, ev.hand_id, ev.table_id, msg.data))
                finished.append(msg)
                continue
            ends += 1
            if msg.num_delivered >= poison_after:
                cache.discard(table_id, hand_id)
                detail = (
                    f"{ev.event_id}: HandEnded delivered {msg.num_delivered} times without being settled; set aside"
                )
                dead_now.append((NewDeadLetter(hand_id, table_id, MAX_DELIVERIES, detail, stream_seq), msg))
                continue
            held[id(msg)] = (msg, now)
            seen = pending.get(hand_id)
            if seen is not None:
                seen.msgs.append(msg)  # acked with the first, once the hand is settled
                if stream_seq != seen.job.stream_seq:  # not a redelivery of the same message
                    self.ignored.add(DUPLICATE_HAND_ENDED, stream_seq, subject=msg.subject)
                continue
            end = EventBytes(ev.seq, ev.hand_id, ev.table_id, msg.data)
            hand_events = cache.take(table_id, hand_id, stream_seq, end)
            pending[hand_id] = _Pending(HandJob(table_id, hand_id, stream_seq, hand_events), [msg])
        metrics.MESSAGES_TABLE.inc(table_facts)
        metrics.MESSAGES_EVENT.inc(events)
        metrics.MESSAGES_HAND_ENDED.inc(ends)

        if dead_now:
            await self._dead_letter_now(dead_now)
        await self._ack(finished)
        jobs = list(pending.values())
        chunks = []
        for start in range(0, len(jobs), self.config.post_batch_max):
            part = jobs[start : start + self.config.post_batch_max]
            replaying = asyncio.ensure_future(self.settler.prepare([p.job for p in part]))
            self._replaying.add(replaying)
            replaying.add_done_callback(self._replaying.discard)
            chunks.append(
                _Chunk(
                    prepared=replaying,
                    msgs=[m for p in part for m in p.msgs],
                    last_stream_seq=max(p.job.stream_seq for p in part),
                    started=started,
                )
            )
        return chunks

    async def _dead_letter_now(self, items: list[tuple[NewDeadLetter, Delivery]]) -> None:
        """Record dead letters found while reading the batch (not an Event; too many
        deliveries), skipping hands that turn out to be settled already, then ack."""
        ids = [d.hand_id for d, _ in items]
        settled = await self.settler.retrying(lambda: self.settler.store.settled_among(ids), None)
        dead = [d for d, _ in items if d.hand_id not in settled]
        for d, m in items:
            if d.hand_id in settled and d.reason == BAD_EVENT:
                self.ignored.add(NOT_AN_EVENT, d.stream_seq, subject=m.subject)
        if dead:
            await self.settler.retrying(lambda: self.settler.store.commit_rows([], dead), None)
        for d in dead:
            metrics.DEAD_LETTERS.labels(d.reason).inc()
            log.warning("hand_dead_lettered", hand_id=d.hand_id, table_id=d.table_id, reason=d.reason, detail=d.detail)
        await self._ack([m for _, m in items])

    async def _beat_loop(self, stop: asyncio.Event) -> None:
        """Tell the server every HandEnded held for a while is still being worked on
        (``+WPI``), so that a slow or unavailable ledger causes no redelivery and does not
        use up the message's deliveries."""
        every_s = self.config.ack_wait_s / 3
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
            now = time.monotonic()
            for key, (msg, since) in list(self._held.items()):
                if now - since >= every_s and msg.reply:
                    with contextlib.suppress(Exception):
                        await self.nc.publish(msg.reply, IN_PROGRESS)
                    self._held[key] = (msg, now)

    async def _ack(self, msgs: Sequence[Delivery]) -> None:
        await self._publish([m.reply for m in msgs], ACK)

    async def _publish(self, subjects: Sequence[str], payload: bytes) -> None:
        """Ack (or nak, beat) by publishing to each message's reply subject. A lost ack
        only means a redelivery, which is harmless."""
        publish = self.nc.publish
        try:
            for subject in subjects:
                if subject:
                    await publish(subject, payload)
        except NatsError as exc:
            log.warning("ack_failed", error=str(exc))

    def _remember(self, hand_id: str) -> None:
        self._recent[hand_id] = None
        while len(self._recent) > RECENTLY_SETTLED_MAX:
            self._recent.popitem(last=False)

    async def _on_max_deliveries(self, msg: Msg) -> None:
        """The server gave up redelivering a message: make sure it has a dead letter."""
        try:
            advisory = json.loads(msg.data)
            stream_seq = int(advisory["stream_seq"])
            raw = await self.js.get_msg(self.stream, stream_seq)
            table_id, hand_id = subject_tokens(raw.subject or "")
            ev = events_pb2.Event()
            with contextlib.suppress(Exception):
                ev.ParseFromString(raw.data or b"")
            which = ev.WhichOneof("body")
            if which is not None and which != "hand_ended":
                return  # other events are acked on sight; only a HandEnded can be held back
            with bound(hand_id=hand_id, table_id=table_id):
                settled = await self.settler.store.settled_among([hand_id])
                if settled:
                    return
                detail = f"stream seq {stream_seq}: the server stopped redelivering after {advisory.get('deliveries')}"
                await self.settler.store.record_dead_letter(
                    NewDeadLetter(hand_id, table_id, MAX_DELIVERIES, detail, stream_seq)
                )
                metrics.DEAD_LETTERS.labels(MAX_DELIVERIES).inc()
                log.warning("hand_dead_lettered", reason=MAX_DELIVERIES, detail=detail)
        except Exception:
            log.exception("max_deliveries_advisory_failed")

    # --- lag ----------------------------------------------------------------------------

    async def lag(self) -> tuple[int, int]:
        """(stream last seq − the consumer's ack floor, messages not yet delivered)."""
        info = await self.js.consumer_info(self.stream, self.config.durable)
        stream = await self.js.stream_info(self.stream)
        floor = info.ack_floor.stream_seq if info.ack_floor else 0
        return int(stream.state.last_seq) - int(floor or 0), int(info.num_pending or 0)

    async def watch_lag(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                lag, pending = await self.lag()
                metrics.LAG.set(lag)
                metrics.PENDING.set(pending)
            except Exception as exc:
                log.debug("lag_unavailable", error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.lag_interval_s)


async def _put(queue: asyncio.Queue[Any], item: Any, stages: Collection[asyncio.Task[None]]) -> None:
    """Put ``item`` on a pipeline queue; if a stage downstream stops meanwhile (it failed),
    raise its error instead of waiting on a full queue for ever."""
    if not queue.full():
        queue.put_nowait(item)
        return
    put = asyncio.ensure_future(queue.put(item))
    try:
        await asyncio.wait({put, *stages}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not put.done():
            put.cancel()
    if put.cancelled() or not put.done():
        for stage in stages:
            if stage.done():
                stage.result()
        raise RuntimeError("a settlement stage stopped")
