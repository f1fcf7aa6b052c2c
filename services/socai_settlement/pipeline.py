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
- a message that is not an Event, and a HandEnded whose attempts failed
  ``poison_after_deliveries`` times, are dead-lettered (``dead_letters``), then acked. A
  delivery that ended because this instance stopped or the partition's lease moved is no
  failure of the hand: what the pipeline holds then is given back with a nak and recorded
  as given back (``_give_back_messages``), and the count leaves it out (``_poison_checked``);
- messages acked with no effect are counted and logged (``ignored``).

A table's hands must reach the ledger in the order they were played (each hand's stacks
include the one before), so nothing here reorders: one pull at a time, chunks posted and
stored in order, a held batch given back with a nak (redelivered ahead of newer messages),
and at start the unsettled HandEnded messages an earlier holder left unacked are settled
first, read from the stream (``outstanding.StartupRecovery``); no pull request outlives the
partition's lease, so nothing reaches an old holder once a new one may have started.

Each chunk goes through three stages that overlap — replay (``Settler.prepare``: a worker
process), post (one PostTransactions call) and store (one statement), then the acks — so
while chunk *k* is stored, *k+1* is being posted and *k+2* replayed, and the pull loop
reads on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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

from socai import errors
from socai.gen.events.v1 import events_pb2
from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.logging import get_logger
from socai.infra.nats_pull import ACK, IN_PROGRESS, NAK, Delivery, Pull
from socai_settlement import durables, metrics
from socai_settlement.config import SettlementConfig
from socai_settlement.dead_letters import BAD_EVENT, MAX_DELIVERIES, DeadLetters
from socai_settlement.hand_cache import HandCache
from socai_settlement.ignored import DUPLICATE_HAND_ENDED, EVENT_AFTER_SETTLEMENT, IgnoredMessages
from socai_settlement.outstanding import (
    Held,
    StartupRecovery,
    hand_ended_job,
    read_range,
    subject_tokens,
    unsettled,
)
from socai_settlement.poster import Backoff
from socai_settlement.sealed_replay import EventBytes, chain_headers
from socai_settlement.settler import HandJob, PostedBatch, Prepared, Settler
from socai_settlement.store import NewDeadLetter

log = get_logger("socai.settlement.pipeline")

TABLE_BODIES: Final = frozenset({"table_opened", "player_seated", "player_stood_up", "table_closed"})
RECENTLY_SETTLED_MAX: Final = 10_000
INSUFFICIENT_FUNDS: Final = "INSUFFICIENT_FUNDS"
GIVE_BACK_RECORD_S: Final = 5.0  # a bound on recording a give-back when stopping
MIN_FETCH_S: Final = 0.05  # a pull shorter than this is not worth sending: the lease is about to end


def table_filter(filter_subject: str, table_id: str) -> str:
    """The subjects of one table's hands within a durable's filter: ``{prefix}.>`` or a
    partition's ``{prefix}.{k}.*.*`` → ``….{table_id}.*``."""
    for suffix in (".>", ".*.*"):
        if filter_subject.endswith(suffix):
            return f"{filter_subject.removesuffix(suffix)}.{table_id}.*"
    raise ValueError(f"not a settlement durable's filter: {filter_subject}")


def hand_ended_of(msgs: Sequence[Delivery]) -> list[tuple[int, str]]:
    """(stream_seq, hand_id) of the HandEnded messages among ``msgs`` (others are acked
    on sight whatever their delivery count, so only a HandEnded's count matters)."""
    out = []
    for m in msgs:
        ev = events_pb2.Event()
        try:
            ev.ParseFromString(m.data)
        except Exception:  # protobuf's DecodeError: not an Event
            continue
        if ev.WhichOneof("body") == "hand_ended":
            out.append((m.stream_seq, subject_tokens(m.subject)[1]))
    return out


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
        lease_left_s: Callable[[], float] | None = None,
        fence: ledger_pb2.Fence | None = None,
    ) -> None:
        """``filter_subject``: what the durable consumes (default every event; one
        partition's subjects when the stream is partitioned). ``lease_check`` raises when
        this instance no longer holds the partition: called before each chunk is posted, so
        an instance that lost its lease (a pause, a partition) stops posting.
        ``lease_left_s`` says how long the lease stays valid by this instance's clock: no
        pull request outlives it, so nothing is delivered here once a new holder may have
        started (a new holder settles, in stream order, what was delivered before it took
        over; a message delivered to the old holder after that would come back only later,
        behind newer hands). ``fence``: the partition's lease as the ledger knows it, which
        every post of this pipeline carries (``LedgerPoster.post``); None: unfenced."""
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.settler = settler
        self.config = config
        self.stream = stream
        self.prefix = prefix
        self.filter_subject = filter_subject or f"{prefix}.>"
        self.lease_check = lease_check
        self.lease_left_s = lease_left_s
        self.fence = fence
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
        return durables.consumer_config(self.config, self.filter_subject)

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
        """Stop consuming. What the server delivered here and nobody handled yet is given
        back (recorded as given back, then nakked in stream order), so that it does not wait
        an ack wait for its redelivery behind newer messages, nor count towards its
        hand's poison limit: call this only when this instance stops or its lease moved."""
        if self.pull is not None:
            left = await self.pull.stop()
            self.pull = None
            await self._give_back_messages(left, handover=True)
        await self.dead_letters.close()

    def fetch_timeout_s(self) -> float:
        """The pull timeout, which is also the pull request's expiry: never past the lease.
        Raises PreconditionFailed("LEASE_LOST") when the lease has run out."""
        timeout_s = self.config.fetch_timeout_s
        if self.lease_left_s is not None:
            left_s = self.lease_left_s()
            if left_s <= MIN_FETCH_S:
                if self.lease_check is not None:
                    self.lease_check()  # raises LEASE_LOST
                raise errors.PreconditionFailed("LEASE_LOST", "the lease runs out before a pull could end")
            timeout_s = min(timeout_s, left_s)
        return timeout_s

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
                # A crashed predecessor of this process left messages unacked: give
                # them back at once, so that they come before newer hands (see _give_back).
                await self._give_back(handover=False)
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
        lease_lost = False
        carry: list[Delivery] = []
        try:
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
                    fetch_timeout_s=self.fetch_timeout_s,
                    fence=self.fence,
                )
                carry = await recovery.run(stop)
                self._started = True
            while not stop.is_set():
                for stage in stages:
                    if stage.done():
                        stage.result()  # re-raise what stopped it
                try:
                    msgs = carry or await pull.fetch(self.config.fetch_batch, self.fetch_timeout_s())
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
        except errors.PreconditionFailed as exc:
            lease_lost = exc.code == "LEASE_LOST"
            raise
        finally:
            beats.cancel()
            pipeline: list[asyncio.Future[Any]] = [*stages, *self._replaying]
            for task in pipeline:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*stages, beats, *self._replaying, return_exceptions=True)
            self._replaying.clear()
            # Stopped, or the lease moved: not a failure of the hands held. A crash is.
            handover = stop.is_set() or lease_lost
            await self._give_back(handover=handover, also=carry)  # recovery's first, if not handled yet

    async def _give_back(self, *, handover: bool, also: Sequence[Delivery] = ()) -> None:
        """Nak every HandEnded still held (a cancelled batch, a crashed run), and ``also``,
        in stream order: the server redelivers them at once, before any newer message.
        Settling a table's hands out of order would make the ledger refuse the later hand
        (its escrows do not hold the earlier hand's winnings yet) and remember the refusal."""
        held = [msg for msg, _ in self._held.values()]
        self._held.clear()
        await self._give_back_messages([*held, *also], handover=handover)

    async def _give_back_messages(self, msgs: Sequence[Delivery], *, handover: bool) -> None:
        """Nak ``msgs`` in stream order. With ``handover`` (this instance stops, or its
        lease moved) their deliveries first go on record as given back, so that they do not
        count towards the poison limit: JetStream counts every delivery, and a hand whose
        partition changed hands a few times while it was in flight is as healthy as any
        (``_poison_checked``). Recording waits at most ``GIVE_BACK_RECORD_S``: a stop must
        not hang on a database outage (those deliveries then count, as a crash's would)."""
        ordered = sorted((m for m in msgs if m.reply), key=lambda m: m.stream_seq)
        if not ordered:
            return
        if handover:
            ends = hand_ended_of(ordered)
            if ends:
                try:
                    await asyncio.wait_for(
                        self.settler.retrying(lambda: self.settler.store.count_attempts(ends, given_back=1), None),
                        GIVE_BACK_RECORD_S,
                    )
                    metrics.GIVEN_BACK.inc(len(ends))
                except Exception as exc:  # a stop goes on: those deliveries count, as a crash's would
                    log.warning("given_back_not_recorded", hand_ends=len(ends), error=repr(exc))
        for m in ordered:
            with contextlib.suppress(Exception):
                await self.nc.publish(m.reply, NAK)

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
            posted = await self.settler.post(prepared, fence=self.fence)
            if any(reason == INSUFFICIENT_FUNDS for reason in posted.refused.values()):
                posted = await self.refused_out_of_order(posted)
            await _put(outbox, (chunk, posted), (saver,))

    async def refused_out_of_order(self, posted: PostedBatch) -> PostedBatch:
        """Settle again, in play order, the hands the ledger refused for INSUFFICIENT_FUNDS
        because an earlier hand of their table was not posted yet.

        That cannot happen while every holder of the partition keeps stream order; should it
        happen all the same (a message of the table still held by an earlier holder), the
        refusal is no fault of the hand. So for each such hand, in stream order, the table's
        HandEnded messages between the consumer's ack floor and this one are read from the
        stream; when one of them is neither settled nor dead-lettered, those hands are
        settled first, and then the refused hand again through ``Settler.retry`` (the ledger
        remembers the refusal under ``settle:{hand_id}``, so it is posted under the next key
        of its chain). A hand of a table with no earlier hand outstanding stays
        dead-lettered: its escrow really is short."""
        dead_by_hand = {d.hand_id: d for d in posted.dead}
        short = sorted(
            (dead_by_hand[h] for h, reason in posted.refused.items() if reason == INSUFFICIENT_FUNDS),
            key=lambda d: d.stream_seq,
        )
        info = await self.js.consumer_info(self.stream, self.config.durable)
        floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor is not None else 0
        # Hands of this batch, and of the chunks before it that are posted but not stored
        # yet (their HandEnded messages are still held), are not outstanding.
        this_batch = set(dead_by_hand) | {r.hand_id for r in posted.rows}
        in_flight = {msg.stream_seq for msg, _ in self._held.values()}
        reordered: set[str] = set()
        tables: set[str] = set()
        for d in short:
            earlier: dict[str, HandJob] = {}
            subjects = table_filter(self.filter_subject, d.table_id)
            async for raw in read_range(self.nc, self.stream, subjects, floor + 1, d.stream_seq - 1):
                job = hand_ended_job(raw)
                if job is not None and job.hand_id not in this_batch and job.stream_seq not in in_flight:
                    earlier.setdefault(job.hand_id, job)
            missing = await unsettled(self.settler, list(earlier.values()))
            if not missing and d.table_id not in tables:
                continue  # nothing of its table was outstanding: the escrow is short
            log.warning(
                "hand_refused_out_of_order",
                hand_id=d.hand_id,
                table_id=d.table_id,
                earlier_hands=[j.hand_id for j in missing],
            )
            if missing:
                for o in await self.settler.settle(missing, fence=self.fence):
                    if o.settled:
                        self._remember(o.hand_id)
            outcome = await self.settler.retry(HandJob(d.table_id, d.hand_id, d.stream_seq), fence=self.fence)
            if outcome.settled:
                self._remember(d.hand_id)
                reordered.add(d.hand_id)
            tables.add(d.table_id)  # the table's later refused hands are retried after it
        if not reordered:
            return posted
        return dataclasses.replace(
            posted,
            dead=[d for d in posted.dead if d.hand_id not in reordered],
            refused={h: r for h, r in posted.refused.items() if h not in reordered},
        )

    async def _save_loop(self, inbox: asyncio.Queue[tuple[_Chunk, PostedBatch] | None]) -> None:
        while True:
            item = await inbox.get()
            if item is None:
                return
            await self._save(*item)

    async def _save(self, chunk: _Chunk, posted: PostedBatch) -> None:
        exemplar = posted.prepared.spans.exemplar()  # a trace of the batch, before its spans end
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
        metrics.BATCH_SECONDS.observe(time.perf_counter() - chunk.started, exemplar)
        self.batches += 1

    async def _prepare(self, msgs: Sequence[Delivery]) -> list[_Chunk]:
        """Sort a pulled batch (see the module docstring); ack what needs no settling;
        start replaying the finished hands in chunks of ``post_batch_max``."""
        started = time.perf_counter()
        poisoned = await self._poison_checked(msgs)
        now = time.monotonic()
        finished: list[Delivery] = []  # nothing more to do: acked now
        dead_now: list[tuple[NewDeadLetter, Delivery]] = []
        pending: dict[str, _Pending] = {}
        cache, recent, held = self.cache, self._recent, self._held
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
            poison = poisoned.get(stream_seq)
            if poison is not None:
                cache.discard(table_id, hand_id)
                failures, given_back = poison
                detail = (
                    f"{ev.event_id}: HandEnded delivered {msg.num_delivered} times without being settled "
                    f"({failures} failed attempts, {given_back} given back at a handover or a stop); set aside"
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

    async def _poison_checked(self, msgs: Sequence[Delivery]) -> dict[int, tuple[int, int]]:
        """The stream seqs of the messages of ``msgs`` to set aside as MAX_DELIVERIES, with
        their failed attempts and the deliveries given back.

        A delivery ends without an ack either because the attempt failed (a crash, an error
        in this process) or because it was given back: this instance stopped, or the
        partition's lease moved. JetStream counts both; the hand's own failures are its
        deliveries minus those given back (recorded by the instance that gave them back),
        plus its unfinished settlements from the stream at start (``outstanding``), which no
        delivery counts. Only a redelivery can reach the limit this way, so a first
        delivery costs no query."""
        limit = self.config.poison_after_deliveries
        again = [m.stream_seq for m in msgs if m.num_delivered > 1]
        if not again:
            return {}
        # Settled hands and other events are acked whatever their count (the caller sorts
        # them); asking for every redelivery keeps this one query.
        attempts = await self.settler.retrying(lambda: self.settler.store.attempts_among(again), None)
        out: dict[int, tuple[int, int]] = {}
        for m in msgs:
            if m.num_delivered <= 1:
                continue
            given_back, recovered = attempts.get(m.stream_seq, (0, 0))
            failures = m.num_delivered - 1 - given_back + recovered
            if failures + 1 >= limit:  # this delivery would be attempt failures + 1
                out[m.stream_seq] = (failures, given_back)
        return out

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
