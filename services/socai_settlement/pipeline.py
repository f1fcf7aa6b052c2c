"""The JetStream side of settlement: a durable pull consumer over every event, and the
three-stage pipeline that settles what it pulls.

Consumer ``settlement`` (name configurable) on ``{prefix}.>``: explicit acks, at most
``max_ack_pending`` unacknowledged messages, ``ack_wait`` before a redelivery,
``max_deliver`` deliveries. Each pulled batch (``socai.infra.nats_pull.Pull``) is sorted
in stream order:

- table-level facts (TableOpened, PlayerSeated, PlayerStoodUp, TableClosed on the table's
  own subject) carry no money: acked;
- a hand's events other than HandEnded are kept in the hand cache (``hand_cache``) and
  acked at once;
- a HandEnded makes a ``HandJob``; the jobs of the batch are settled together by the
  ``Settler`` (chunks of ``post_batch_max``), and acked only after the settlement or dead
  letter is committed. Every HandEnded held longer than a third of ``ack_wait`` gets a
  progress beat (``+WPI``), so a slow or unavailable ledger or database causes no
  redelivery and does not use up the message's deliveries;
- a message that is not an Event, and a HandEnded delivered ``poison_after_deliveries``
  times, are dead-lettered (``dead_letters``), then acked;
- messages acked with no effect are counted and logged (``ignored``).

A table's hands must reach the ledger in the order they were played (each hand's stacks
include the one before), so nothing here reorders: one pull at a time, chunks posted and
stored in order, a held batch given back with a nak (redelivered ahead of newer messages),
and at start the unsettled HandEnded messages a killed instance left unacked are settled
first, read from the stream (``recovery.StartupRecovery``).

Each chunk goes through three stages that overlap — replay (``Settler.prepare``: a worker
process), post (one PostTransactions call) and store (one statement), then the acks — so
while chunk *k* is stored, *k+1* is being posted and *k+2* replayed, and the pull loop
reads on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError

from socai.gen.events.v1 import events_pb2
from socai.infra.logging import get_logger
from socai.infra.nats_pull import ACK, IN_PROGRESS, NAK, Delivery, Pull
from socai_settlement import metrics
from socai_settlement.config import SettlementConfig
from socai_settlement.dead_letters import BAD_EVENT, MAX_DELIVERIES, DeadLetters
from socai_settlement.hand_cache import HandCache
from socai_settlement.ignored import DUPLICATE_HAND_ENDED, EVENT_AFTER_SETTLEMENT, IgnoredMessages
from socai_settlement.poster import Backoff
from socai_settlement.recovery import Held, StartupRecovery, subject_tokens
from socai_settlement.replayer import EventBytes, chain_headers
from socai_settlement.settler import HandJob, PostedBatch, Prepared, Settler
from socai_settlement.store import NewDeadLetter

log = get_logger("socai.settlement.pipeline")

TABLE_BODIES: Final = frozenset({"table_opened", "player_seated", "player_stood_up", "table_closed"})
RECENTLY_SETTLED_MAX: Final = 10_000


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


class Pipeline:
    """Pulls from the durable consumer and settles what it pulls (see the module docstring)."""

    def __init__(
        self,
        nc: NatsClient,
        settler: Settler,
        config: SettlementConfig,
        *,
        stream: str,
        prefix: str,
        filter_subject: str | None = None,
        lease_check: Callable[[], None] | None = None,
    ) -> None:
        """``filter_subject``: what the durable consumes (default every event; one
        partition's subjects when the stream is partitioned). ``lease_check`` raises when
        this instance no longer holds the partition: called before each chunk is posted, so
        an instance that lost its lease (a pause, a partition) stops posting."""
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.settler = settler
        self.config = config
        self.stream = stream
        self.prefix = prefix
        self.filter_subject = filter_subject or f"{prefix}.>"
        self.lease_check = lease_check
        self.cache = HandCache(config.cache_events_max)
        self.ignored = IgnoredMessages()
        self.dead_letters = DeadLetters(nc, settler, self.ignored, stream=stream, durable=config.durable)
        self.pull: Pull | None = None
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._held: Held = {}
        self._replaying: set[asyncio.Future[Prepared]] = set()
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
            filter_subject=self.filter_subject,
            replay_policy=js_api.ReplayPolicy.INSTANT,
        )

    async def subscribe(self) -> Pull:
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
        self.pull = pull
        await self.dead_letters.listen()
        return pull

    async def close(self) -> None:
        if self.pull is not None:
            await self.pull.close()
            self.pull = None
        await self.dead_letters.close()

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
        pull = self.pull
        while not stop.is_set():
            try:
                if pull is None:
                    pull = await self.subscribe()
                # A previous run of this process that crashed left messages unacked: give
                # them back at once, so that they come before newer hands (see _give_back).
                await self._give_back()
                break
            except (NatsError, TimeoutError) as exc:
                delay = backoff.next_delay()
                log.warning("consumer_unavailable", stream=self.stream, error=repr(exc), retry_in_s=round(delay, 3))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
        if pull is None:
            return  # stopped before the consumer could be reached
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
                recovery = StartupRecovery(
                    pull,
                    self.settler,
                    self.config,
                    stream=self.stream,
                    filter_subject=self.filter_subject,
                    held=self._held,
                    on_settled=self._remember,
                )
                carry = await recovery.run(stop)
                self._started = True
            while not stop.is_set():
                for stage in stages:
                    if stage.done():
                        stage.result()  # re-raise what stopped it
                try:
                    msgs = carry or await pull.fetch(self.config.fetch_batch, self.config.fetch_timeout_s)
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
            prepared = await chunk.prepared
            if self.lease_check is not None:
                self.lease_check()  # raises LEASE_LOST: nothing of this chunk is posted
            posted = await self.settler.post(prepared)
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
                    cache.add(table_id, hand_id, stream_seq, _event_bytes(ev, msg))
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
            end = _event_bytes(ev, msg)
            hand_events = cache.take(table_id, hand_id, stream_seq, end)
            pending[hand_id] = _Pending(HandJob(table_id, hand_id, stream_seq, hand_events), [msg])
        metrics.MESSAGES_TABLE.inc(table_facts)
        metrics.MESSAGES_EVENT.inc(events)
        metrics.MESSAGES_HAND_ENDED.inc(ends)

        if dead_now:
            await self.dead_letters.record_found(dead_now)
            await self._ack([m for _, m in dead_now])
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
        """Ack by publishing to each message's reply subject. A lost ack only means a
        redelivery, which is harmless."""
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


def _event_bytes(ev: events_pb2.Event, msg: Delivery) -> EventBytes:
    """What the hand cache keeps of a hand's message: its bytes and its headers (the raw block:
    the replay worker parses the hand chain's, not this loop)."""
    block = msg.header_block
    headers = block if isinstance(block, bytes) else chain_headers(block)
    return EventBytes(ev.seq, ev.hand_id, ev.table_id, msg.data, msg.stream_seq, headers)


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
