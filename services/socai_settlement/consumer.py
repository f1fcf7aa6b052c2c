"""The JetStream side of settlement: a durable pull consumer over every event.

Consumer ``settlement`` (name configurable) on ``{prefix}.>``: explicit acks, at most
``max_ack_pending`` unacknowledged messages, ``ack_wait`` before a redelivery,
``max_deliver`` deliveries. Each pulled batch is handled in stream order:

- table-level facts (TableOpened, PlayerSeated, PlayerStoodUp, TableClosed on the table's
  own subject) carry no money: acked;
- a hand's events other than HandEnded are kept in a bounded per-hand cache and acked at
  once (the stream keeps them; the cache only saves reading them back);
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
include the one before), so nothing here reorders: one pull at a time, chunks committed in
order, a held batch given back with a nak (redelivered ahead of newer messages), and at
start the redeliveries a killed instance left behind are waited for
(``_await_foreign_redeliveries``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError

from socai.gen.events.v1 import events_pb2
from socai.infra.logging import bound, get_logger
from socai_settlement import metrics
from socai_settlement.config import SettlementConfig
from socai_settlement.settler import HandJob, Prepared, Settler
from socai_settlement.store import NewDeadLetter

log = get_logger("socai.settlement.consumer")

TABLE_BODIES: Final = frozenset({"table_opened", "player_seated", "player_stood_up", "table_closed"})
BAD_EVENT: Final = "BAD_EVENT"
MAX_DELIVERIES: Final = "MAX_DELIVERIES"
RECENTLY_SETTLED_MAX: Final = 10_000
REDELIVERY_MARGIN_S: Final = 0.5
PULL_PENDING_MSGS_MAX: Final = 100_000  # above fetch_batch: the inbox never drops a message
PULL_GRACE_S: Final = 1.0  # past a pull request's expiry, give up waiting for its 408
ACK: Final = b""
IN_PROGRESS: Final = b"+WPI"
NAK: Final = b"-NAK"


class HandCache:
    """The events of hands in progress, as delivered: bounded by ``max_events`` (the oldest
    hands are dropped first; they are read by subject when their HandEnded comes)."""

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.size = 0
        self._hands: OrderedDict[tuple[str, str], dict[int, events_pb2.Event]] = OrderedDict()

    def add(self, table_id: str, hand_id: str, stream_seq: int, event: events_pb2.Event) -> None:
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

    def take(self, table_id: str, hand_id: str, end_seq: int, end: events_pb2.Event) -> list[events_pb2.Event] | None:
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


class Pull:
    """A pull subscription read through one inbox with a callback.

    nats-py's ``fetch`` waits for each message with its own ``wait_for`` (a task per
    message) and ``Msg.ack`` does bookkeeping on every call; at 15 messages a hand that was
    most of settlement's CPU. Here one pull request at a time asks for up to ``batch``
    messages; they land in a buffer as they arrive, ``fetch`` hands out what is there
    (waiting up to ``timeout_s`` for the first), and a new request is sent only once the
    previous one is complete (all its messages, or a 404/408/409 status) and the buffer is
    empty. So at most ``batch`` messages are ever buffered, in stream order.
    """

    def __init__(self, nc: NatsClient, stream: str, durable: str) -> None:
        self.nc = nc
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self.inbox = nc.new_inbox()
        self._buffer: deque[Msg] = deque()
        self._arrived = asyncio.Event()
        self._open = False
        self._remaining = 0
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self.nc.subscribe(
            self.inbox, cb=self._on_msg, pending_msgs_limit=PULL_PENDING_MSGS_MAX, pending_bytes_limit=-1
        )

    async def close(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    async def _on_msg(self, msg: Msg) -> None:
        status = msg.headers.get("Status") if msg.headers else None
        if status:
            if status == "100":  # idle heartbeat or flow control: not the end of the request
                return
            if status not in ("404", "408"):
                log.warning("pull_request_ended", status=status, description=msg.headers.get("Description", ""))
            self._open = False
            self._arrived.set()
            return
        self._buffer.append(msg)
        self._remaining -= 1
        if self._remaining <= 0:
            self._open = False
        self._arrived.set()

    async def fetch(self, batch: int, timeout_s: float) -> list[Msg]:
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
        out = []
        while self._buffer and len(out) < batch:
            out.append(self._buffer.popleft())
        return out


@dataclass
class _Chunk:
    """Up to ``post_batch_max`` finished hands, replayed, with the messages to ack after."""

    prepared: Prepared | None
    msgs: list[Msg]
    last_stream_seq: int
    started: float


@dataclass
class _Pending:
    job: HandJob
    msgs: list[Msg] = field(default_factory=list)


def subject_tokens(subject: str) -> tuple[str, str]:
    """(table_id, hand_id) of ``{prefix}.{table_id}.{hand_id}``."""
    parts = subject.rsplit(".", 2)
    if len(parts) < 3:
        return "", parts[-1]
    return parts[1], parts[2]


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
        self._held: dict[int, tuple[Msg, float]] = {}  # HandEnded messages not acked yet
        self._started = False
        self.batches = 0

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

        Two stages, so that replaying a batch overlaps posting the previous one: this loop
        pulls, sorts and replays (``prepare``), a committer task posts and stores the
        prepared chunks strictly in order and acks them. At most ``pipeline_depth`` chunks
        wait between the two. On stop, the chunks already prepared are committed first.
        """
        idle_backoff = 0.1
        while self._sub is None and not stop.is_set():
            try:
                await self.subscribe()
            except (NatsError, TimeoutError) as exc:
                log.warning("consumer_unavailable", stream=self.stream, error=repr(exc), retry_in_s=idle_backoff)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), idle_backoff)
                idle_backoff = min(idle_backoff * 2, self.config.backoff_max_s)
        # A previous run of this process that crashed left HandEnded messages unacked: give
        # them back at once, so that they come before newer hands (see _give_back).
        await self._give_back()
        queue: asyncio.Queue[_Chunk | None] = asyncio.Queue(maxsize=self.config.pipeline_depth)
        committer = asyncio.create_task(self._commit_loop(queue), name="settlement-commit")
        beats = asyncio.create_task(self._beat_loop(stop), name="settlement-beats")
        try:
            carry: list[Msg] = []
            if not self._started:
                # Only at the process's first run: a later run gave back what it held itself.
                self._started = True
                carry = await self._await_foreign_redeliveries(stop)
            while not stop.is_set():
                if committer.done():
                    committer.result()  # re-raise what stopped it
                try:
                    msgs = carry or await self._sub.fetch(self.config.fetch_batch, self.config.fetch_timeout_s)
                    carry = []
                except NatsError as exc:
                    log.warning("fetch_failed", error=str(exc), retry_in_s=idle_backoff)
                    await asyncio.sleep(idle_backoff)
                    idle_backoff = min(idle_backoff * 2, self.config.backoff_max_s)
                    continue
                if not msgs:
                    continue
                idle_backoff = 0.1
                for chunk in await self._prepare(msgs):
                    await queue.put(chunk)
            await queue.put(None)
            await committer
        finally:
            beats.cancel()
            if not committer.done():
                committer.cancel()
            await asyncio.gather(committer, beats, return_exceptions=True)
            await self._give_back()

    async def _give_back(self) -> None:
        """Nak every HandEnded still held (a cancelled batch, a crashed run): the server
        redelivers them at once, before any newer message. Settling a table's hands out of
        order would make the ledger refuse the later hand (its escrows do not hold the
        earlier hand's winnings yet) and remember the refusal."""
        held = [msg for msg, _ in self._held.values()]
        self._held.clear()
        for msg in held:
            if msg.reply:
                with contextlib.suppress(Exception):
                    await self.nc.publish(msg.reply, NAK)

    async def _await_foreign_redeliveries(self, stop: asyncio.Event) -> list[Msg]:
        """Let the messages a killed instance took and never acked come back first.

        JetStream redelivers them only when their ack wait runs out, and meanwhile hands out
        newer messages: a table's later hand could then reach the ledger before an earlier
        one (see ``_give_back``). So the first message is pulled alone: a redelivery (or no
        message) means nothing is outstanding ahead of us; a fresh message while other acks
        are pending means another instance holds older ones. Then the fresh message is kept
        (with progress beats) until the last delivery is ``ack_wait`` old, when the server
        hands out the redeliveries first, and it joins them in stream order. This costs at
        most ``ack_wait`` after an unclean stop, nothing otherwise. (One instance per
        durable: scaling out means partitioning the tables, see README.)

        Returns the messages to handle before the next pull.
        """
        first = await self._sub.fetch(1, self.config.fetch_timeout_s)
        if not first:
            return []
        msg = first[0]
        if (msg.metadata.num_delivered or 1) > 1:
            return first
        try:
            info = await self.js.consumer_info(self.stream, self.config.durable)
        except (NatsError, TimeoutError) as exc:
            log.warning("consumer_info_unavailable", error=repr(exc))
            return first
        others = int(info.num_ack_pending or 0) - 1
        last = info.delivered.last_active if info.delivered is not None else None
        if others <= 0 or last is None:
            return first
        self._held[id(msg)] = (msg, time.monotonic())  # beaten while we wait
        age_s = (datetime.now(UTC) - last).total_seconds()
        wait_s = max(0.0, self.config.ack_wait_s - age_s) + REDELIVERY_MARGIN_S
        log.warning("awaiting_redeliveries", messages=others, wait_s=round(wait_s, 1))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)
        self._held.pop(id(msg), None)
        redelivered = await self._sub.fetch(self.config.fetch_batch, self.config.fetch_timeout_s)
        return sorted([*redelivered, msg], key=lambda m: int(m.metadata.sequence.stream))

    async def handle(self, msgs: Sequence[Msg]) -> None:
        """Settle one pulled batch inline (prepare, then commit each chunk)."""
        for chunk in await self._prepare(msgs):
            await self._commit(chunk)

    async def _commit_loop(self, queue: asyncio.Queue[_Chunk | None]) -> None:
        while True:
            chunk = await queue.get()
            if chunk is None:
                return
            await self._commit(chunk)

    async def _commit(self, chunk: _Chunk) -> None:
        if chunk.prepared is not None:
            outcomes = await self.settler.commit(chunk.prepared)
            for o in outcomes:
                if o.settled:
                    self._remember(o.hand_id)
            metrics.LAST_SETTLED_SEQ.set(chunk.last_stream_seq)
        await self._ack(chunk.msgs)
        for m in chunk.msgs:
            self._held.pop(id(m), None)
        metrics.BATCH_SECONDS.observe(time.perf_counter() - chunk.started)
        self.batches += 1

    async def _prepare(self, msgs: Sequence[Msg]) -> list[_Chunk]:
        """Sort a pulled batch (see the module docstring); ack what needs no settling;
        replay the finished hands in chunks of ``post_batch_max``."""
        started = time.perf_counter()
        acks: list[Msg] = []
        dead_now: list[tuple[NewDeadLetter, Msg]] = []
        pending: dict[str, _Pending] = {}
        for msg in msgs:
            meta = msg.metadata
            stream_seq = int(meta.sequence.stream)
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
                metrics.MESSAGES_TABLE.inc()
                acks.append(msg)
                continue
            if which != "hand_ended":
                metrics.MESSAGES_EVENT.inc()
                if meta.num_delivered is not None and meta.num_delivered > 1:
                    # A redelivery (its ack was lost): its HandEnded, if it comes again,
                    # reads the hand by subject; caching it would only hold memory.
                    acks.append(msg)
                    continue
                if hand_id in self._recent:
                    metrics.LATE_EVENTS.inc()
                    log.warning("event_after_settlement", hand_id=hand_id, event_id=ev.event_id, stream_seq=stream_seq)
                else:
                    self.cache.add(table_id, hand_id, stream_seq, ev)
                acks.append(msg)
                continue
            metrics.MESSAGES_HAND_ENDED.inc()
            if meta.num_delivered is not None and meta.num_delivered >= self.config.poison_after_deliveries:
                self.cache.discard(table_id, hand_id)
                detail = (
                    f"{ev.event_id}: HandEnded delivered {meta.num_delivered} times without being settled; set aside"
                )
                dead_now.append((NewDeadLetter(hand_id, table_id, MAX_DELIVERIES, detail, stream_seq), msg))
                continue
            self._held[id(msg)] = (msg, time.monotonic())
            seen = pending.get(hand_id)
            if seen is not None:
                seen.msgs.append(msg)  # the same HandEnded twice in one batch
                continue
            events = self.cache.take(table_id, hand_id, stream_seq, ev)
            pending[hand_id] = _Pending(HandJob(table_id, hand_id, stream_seq, events), [msg])

        if dead_now:
            await self._dead_letter_now(dead_now)
        await self._ack(acks)
        jobs = list(pending.values())
        chunks = []
        for start in range(0, len(jobs), self.config.post_batch_max):
            part = jobs[start : start + self.config.post_batch_max]
            prepared = await self.settler.prepare([p.job for p in part])
            chunks.append(
                _Chunk(
                    prepared=prepared,
                    msgs=[m for p in part for m in p.msgs],
                    last_stream_seq=max(p.job.stream_seq for p in part),
                    started=started,
                )
            )
        return chunks

    async def _dead_letter_now(self, items: list[tuple[NewDeadLetter, Msg]]) -> None:
        """Record dead letters found while reading the batch (not an Event; too many
        deliveries), skipping hands that turn out to be settled already, then ack."""
        ids = [d.hand_id for d, _ in items]
        settled = await self.settler.retrying(lambda: self.settler.store.settled_among(ids), None)
        dead = [d for d, _ in items if d.hand_id not in settled]
        if dead:
            await self.settler.retrying(lambda: self.settler.store.commit([], dead), None)
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

    async def _ack(self, msgs: Sequence[Msg]) -> None:
        """Ack by publishing to each message's reply subject (what ``Msg.ack`` does,
        without its bookkeeping). A lost ack only means a redelivery, which is harmless."""
        publish = self.nc.publish
        try:
            for m in msgs:
                if m.reply:
                    await publish(m.reply, ACK)
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
