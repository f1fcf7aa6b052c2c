"""What earlier holders of the durable consumer left outstanding, read from the stream.

A killed or paused instance's unacknowledged messages come back only when their
``ack_wait`` runs out, while newer messages are handed out at once. Instead of waiting for
them, a starting consumer reads the stream range the consumer's info says may be
outstanding (after the ack floor, up to the last message delivered) and finds there the HandEnded messages whose
hands are neither settled nor dead-lettered: those, and only those, must be settled before
anything newer (a table's hands reach the ledger in the order they were played). Everything
else in the range is either acked already or a message that is acked on sight anyway (table
facts, a hand's other events, a HandEnded whose hand is settled), whose redelivery, when it
comes, changes nothing.

``StartupRecovery`` is what a starting consumer runs before its first batch; the functions
below it read the stream range.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js import api as js_api

from socai import errors
from socai.events.log import direct_get
from socai.gen.events.v1 import events_pb2
from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.logging import get_logger
from socai.infra.nats_pull import Delivery, Pull
from socai_settlement import metrics
from socai_settlement.config import SettlementConfig
from socai_settlement.poster import Backoff
from socai_settlement.settler import HandJob, Settler
from socai_settlement.store import NewDeadLetter

log = get_logger("socai.settlement.outstanding")

UNCOUNT_S: Final = 5.0  # a bound on taking back an attempt's count when stopping
MAX_DELIVERIES: Final = "MAX_DELIVERIES"  # the dead letter reason (``dead_letters`` re-exports it)
Held = dict[int, tuple[Delivery, float]]  # HandEnded messages not acked yet, beaten while held


@dataclass(frozen=True, slots=True)
class Raw:
    stream_seq: int
    subject: str
    data: bytes


async def read_range(nc: NatsClient, stream: str, subjects: str, first_seq: int, last_seq: int) -> AsyncIterator[Raw]:
    """The stream's messages on ``subjects`` with ``first_seq <= seq <= last_seq``, in order,
    as stored (bytes, not decoded: a message that is not an Event is the caller's to judge).

    Raises Unavailable("NATS_UNAVAILABLE") when the server does not answer (``direct_get``).
    """
    async with contextlib.aclosing(direct_get(nc, stream, subjects, first_seq, last_seq)) as messages:
        async for m in messages:
            yield Raw(m.stream_seq, m.subject, m.data)


def subject_tokens(subject: str) -> tuple[str, str]:
    """(table_id, hand_id) of ``{prefix}.{table_id}.{hand_id}``."""
    parts = subject.rsplit(".", 2)
    if len(parts) < 3:
        return "", parts[-1]
    return parts[1], parts[2]


def hand_ended_job(raw: Raw) -> HandJob | None:
    """A HandJob for a HandEnded message (its events to be read by subject, as the
    consumer does), else None."""
    ev = events_pb2.Event()
    try:
        ev.ParseFromString(raw.data)
    except Exception:  # protobuf's DecodeError: not an Event, acked on sight when redelivered
        return None
    if ev.WhichOneof("body") != "hand_ended":
        return None
    table_id, hand_id = subject_tokens(raw.subject)
    return HandJob(table_id, hand_id, raw.stream_seq)


class StartupRecovery:
    """Settle, before anything newer, what earlier holders of the durable took and never acked.

    JetStream redelivers those messages only when their ack wait runs out (or when their
    holder gives them back), and meanwhile hands out newer ones: a table's later hand could
    then reach the ledger before an earlier one, which the ledger would refuse (its escrows
    do not hold the earlier hand's winnings yet) and remember. So the first message is
    pulled alone and the consumer's info read: when messages other than this one await an
    ack, someone else was given them — a killed or paused instance, or the previous holder
    of the partition, which gives back with a nak only what it could. Every one of them lies
    between the consumer's ack floor and the last stream sequence it delivered; that range is
    read from the stream, page by page, and the HandEnded messages in it whose hands are
    neither settled nor dead-lettered are settled now, in stream order. Whether the first
    message is fresh or a redelivery says nothing: a redelivery of what the previous holder
    gave back may come first while other messages it held wait for their ack wait.

    No pull request of an earlier holder outlives its lease (``Pipeline.fetch_timeout_s``),
    so nothing is delivered to it after this instance acquired the partition: the range
    read here holds everything this instance will not be given first.

    The cost is what is really pending — nothing when nobody else holds a message. The
    redeliveries come later and are acked as already settled. A hand that crashes the
    process would otherwise be settled from the stream at every start, which no delivery
    count would ever stop: each attempt is counted (``Store.count_attempts``, ``recovered``)
    before it is made and taken back when it ends because this instance stops or loses the
    lease, and a hand with ``poison_after_deliveries`` unfinished attempts is dead-lettered
    MAX_DELIVERIES instead. (One instance per durable at a time: the partition's lease,
    ``socai_settlement.workers``.)
    """

    def __init__(
        self,
        pull: Pull,
        settler: Settler,
        config: SettlementConfig,
        *,
        stream: str,
        filter_subject: str,
        held: Held,
        on_settled: Callable[[str], None],
        fetch_timeout_s: Callable[[], float] | None = None,
        fence: ledger_pb2.Fence | None = None,
    ) -> None:
        self.pull = pull
        self.nc: NatsClient = pull.nc
        self.js: JetStreamContext = pull.nc.jetstream()
        self.settler = settler
        self.config = config
        self.stream = stream
        self.filter_subject = filter_subject
        self.held = held
        self.on_settled = on_settled
        self.fetch_timeout_s = fetch_timeout_s or (lambda: config.fetch_timeout_s)
        self.fence = fence  # the pipeline's lease, carried by every post (LedgerPoster.post)

    async def run(self, stop: asyncio.Event) -> list[Delivery]:
        """Returns the messages to handle before the next pull."""
        first = await self.pull.fetch(1, self.fetch_timeout_s())
        # Held while we work: beaten, and given back by the pipeline if this fails or stops.
        for msg in first:
            self.held[id(msg)] = (msg, time.monotonic())
        info = await self._consumer_info(stop)
        if info is not None:
            others = int(info.num_ack_pending or 0) - len(first)
            if others > 0:
                floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor is not None else 0
                last = int(info.delivered.stream_seq or 0) if info.delivered is not None else 0
                if first and first[0].stream_seq >= last:
                    # This instance's own message, the newest delivered, is the pipeline's next
                    # (after the range, so in order): not another holder's to recover and count.
                    last = first[0].stream_seq - 1
                await self._settle_outstanding(stop, floor + 1, last, others)
        for msg in first:
            self.held.pop(id(msg), None)  # the caller handles it next (or gives it back)
        return first

    async def _consumer_info(self, stop: asyncio.Event) -> js_api.ConsumerInfo | None:
        """The consumer's info, waiting (with backoff) while NATS does not answer: without
        it nothing says whether older messages are outstanding. None when stopped first."""
        backoff = Backoff(self.config.backoff_initial_s, self.config.backoff_max_s)
        while not stop.is_set():
            try:
                info: js_api.ConsumerInfo = await self.js.consumer_info(self.stream, self.config.durable)
                return info
            except (NatsError, TimeoutError) as exc:
                delay = backoff.next_delay()
                log.warning("consumer_info_unavailable", error=repr(exc), retry_in_s=round(delay, 3))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
        return None

    async def _settle_outstanding(self, stop: asyncio.Event, first_seq: int, last_seq: int, others: int) -> None:
        """Settle the unsettled HandEnded messages of ``first_seq..last_seq`` from the
        stream, in stream order, ``post_batch_max`` at a time as the range is read."""
        clock = time.monotonic()
        step = self.config.post_batch_max
        scanned = hand_ends = hands = settled = 0
        batch: dict[str, HandJob] = {}

        async def flush() -> None:
            nonlocal hands, settled
            jobs = list(batch.values())
            batch.clear()
            n_hands, n_settled = await self._settle_chunk(jobs)
            hands += n_hands
            settled += n_settled

        async def scan() -> None:
            nonlocal scanned, hand_ends
            async for raw in read_range(self.nc, self.stream, self.filter_subject, first_seq, last_seq):
                if stop.is_set():
                    return  # what is left stays pending: the next holder reads it again
                scanned += 1
                job = hand_ended_job(raw)
                if job is None:
                    continue
                hand_ends += 1
                batch.setdefault(job.hand_id, job)  # a hand's first HandEnded
                if len(batch) >= step:
                    await flush()
            if batch and not stop.is_set():
                await flush()

        # A NATS outage while reading starts the range again (what was settled is skipped).
        await self.settler.retrying(scan, None)
        metrics.RECOVERED.inc(settled)
        log.warning(
            "outstanding_settled",
            unacked_messages=others,
            scanned=scanned,
            hand_ends=hand_ends,
            hands=hands,
            settled=settled,
            first_stream_seq=first_seq,
            last_stream_seq=last_seq,
            elapsed_s=round(time.monotonic() - clock, 3),
        )

    async def _settle_chunk(self, jobs: list[HandJob]) -> tuple[int, int]:
        """Settle the jobs whose hands are neither settled nor dead-lettered, counting the
        attempt first; (hands attempted, hands settled now)."""
        store = self.settler.store
        todo = await unsettled(self.settler, jobs)
        if not todo:
            return 0, 0
        pairs = [(j.stream_seq, j.hand_id) for j in todo]
        counts = await self.settler.retrying(lambda: store.count_attempts(pairs, recovered=1), None)
        limit = self.config.poison_after_deliveries
        poisoned = [j for j in todo if counts.get(j.stream_seq, (0, 0))[1] >= limit]
        if poisoned:
            dead = [
                NewDeadLetter(
                    j.hand_id,
                    j.table_id,
                    MAX_DELIVERIES,
                    f"stream seq {j.stream_seq}: settling it from the stream at start was tried "
                    f"{counts[j.stream_seq][1] - 1} times without finishing (the process died each time); set aside",
                    j.stream_seq,
                )
                for j in poisoned
            ]
            await self.settler.retrying(lambda: store.commit_rows([], dead), None)
            for d in dead:
                metrics.DEAD_LETTERS.labels(MAX_DELIVERIES).inc()
                log.warning("hand_dead_lettered", hand_id=d.hand_id, table_id=d.table_id, reason=d.reason)
        gone = {j.hand_id for j in poisoned}
        todo = [j for j in todo if j.hand_id not in gone]
        try:
            outcomes = await self.settler.settle(todo, fence=self.fence)
        except (asyncio.CancelledError, errors.PreconditionFailed) as exc:
            if isinstance(exc, asyncio.CancelledError) or exc.code == "LEASE_LOST":
                # Ended because this instance stops or lost the lease: not the hands' failure.
                back = [(j.stream_seq, j.hand_id) for j in todo]
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(store.count_attempts(back, recovered=-1), UNCOUNT_S)
            raise
        settled = 0
        for o in outcomes:
            if o.settled:
                self.on_settled(o.hand_id)
                settled += not o.already_settled
        return len(todo), settled


async def unsettled(settler: Settler, jobs: Sequence[HandJob]) -> list[HandJob]:
    """The jobs whose hands are neither settled nor dead-lettered, in the order given
    (waits while PostgreSQL is unavailable)."""
    if not jobs:
        return []
    ids = [j.hand_id for j in jobs]
    store = settler.store

    async def done() -> set[str]:
        return await store.settled_among(ids) | await store.dead_lettered_among(ids)

    finished = await settler.retrying(done, None)
    return [j for j in jobs if j.hand_id not in finished]
