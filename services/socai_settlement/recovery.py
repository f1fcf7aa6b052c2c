"""What an instance that died left outstanding on the durable consumer, read from the stream.

A killed instance's unacknowledged messages come back only when their ``ack_wait`` runs
out, while newer messages are handed out at once. Instead of waiting for them, a starting
consumer reads the stream range the consumer's info says may be outstanding (after the ack
floor, before the first message it was given) and finds there the HandEnded messages whose
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
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js import api as js_api

from socai import errors
from socai.gen.events.v1 import events_pb2
from socai.infra.logging import get_logger
from socai.infra.nats_pull import Delivery, Pull
from socai_settlement import metrics
from socai_settlement.config import SettlementConfig
from socai_settlement.settler import HandJob, Settler
from socai_settlement.store import Store

log = get_logger("socai.settlement.recovery")

SCAN_BATCH: Final = 256  # messages per direct-get request (the server's page)
SCAN_TIMEOUT_S: Final = 5.0
SCAN_MESSAGES_MAX: Final = 200_000  # a limit on the range read; beyond it, wait for the redeliveries
REDELIVERY_MARGIN_S: Final = 0.5
REDELIVERY_FETCHES_MAX: Final = 1_000  # a limit on the loop that collects a killed instance's messages
Held = dict[int, tuple[Delivery, float]]  # HandEnded messages not acked yet, beaten while held


@dataclass(frozen=True, slots=True)
class Raw:
    stream_seq: int
    subject: str
    data: bytes


async def read_range(nc: NatsClient, stream: str, subjects: str, first_seq: int, last_seq: int) -> AsyncIterator[Raw]:
    """The stream's messages on ``subjects`` with ``first_seq <= seq <= last_seq``, in order,
    as stored (bytes, not decoded: a message that is not an Event is the caller's to judge).

    Raises Unavailable("NATS_UNAVAILABLE") when the server does not answer.
    """
    seq = first_seq
    while seq <= last_seq:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        try:
            request = {"seq": seq, "next_by_subj": subjects, "batch": min(SCAN_BATCH, last_seq - seq + 1)}
            await nc.publish(f"$JS.API.DIRECT.GET.{stream}", json.dumps(request).encode(), reply=inbox)
            more = False
            while True:
                msg = await sub.next_msg(timeout=SCAN_TIMEOUT_S)
                headers = msg.headers or {}
                status = headers.get("Status")
                if status == "404":
                    return
                if status == "204":  # end of this page
                    more = headers.get("Nats-Num-Pending", "0") != "0"
                    break
                if status:
                    raise errors.Unavailable("NATS_UNAVAILABLE", f"direct get from {seq}: status {status}")
                stream_seq = int(headers["Nats-Sequence"])
                if stream_seq > last_seq:
                    return
                yield Raw(stream_seq, headers.get("Nats-Subject", msg.subject), bytes(msg.data))
                seq = stream_seq + 1
        except (NatsError, TimeoutError) as exc:
            raise errors.Unavailable("NATS_UNAVAILABLE", f"reading {stream} from {seq}: {exc!r}") from exc
        finally:
            await sub.unsubscribe()
        if not more:
            return


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


@dataclass(frozen=True, slots=True)
class Outstanding:
    """The HandEnded messages of a scanned range that still need settling, in stream order."""

    jobs: list[HandJob]
    scanned: int  # messages read
    hand_ends: int  # HandEnded messages among them


async def outstanding_hand_ends(
    nc: NatsClient, store: Store, stream: str, subjects: str, first_seq: int, last_seq: int
) -> Outstanding:
    """The HandEnded messages in ``first_seq..last_seq`` whose hands are neither settled
    nor dead-lettered (the first of each hand), in stream order."""
    found: dict[str, HandJob] = {}
    scanned = hand_ends = 0
    async for raw in read_range(nc, stream, subjects, first_seq, last_seq):
        scanned += 1
        job = hand_ended_job(raw)
        if job is None:
            continue
        hand_ends += 1
        found.setdefault(job.hand_id, job)
    if not found:
        return Outstanding([], scanned, hand_ends)
    ids = list(found)
    done = await store.settled_among(ids) | await store.dead_lettered_among(ids)
    return Outstanding([j for j in found.values() if j.hand_id not in done], scanned, hand_ends)


class StartupRecovery:
    """Settle what a stopped instance took and never acked before anything newer.

    JetStream redelivers those messages only when their ack wait runs out, and meanwhile
    hands out newer ones: a table's later hand could then reach the ledger before an
    earlier one, which the ledger would refuse (its escrows do not hold the earlier hand's
    winnings yet) and remember. So the first message is pulled alone: a redelivery (or no
    message) means nothing is outstanding ahead of us; a fresh message while other acks are
    pending means another instance holds older ones. They lie between the consumer's ack
    floor and this message: that range is read from the stream (``outstanding_hand_ends``),
    and the HandEnded messages in it whose hands are neither settled nor dead-lettered are
    settled now, in stream order. The cost is what is really pending — nothing when the
    stopped instance held no unsettled HandEnded — not an ``ack_wait`` per restart. Their
    redeliveries come later and are acked as already settled.

    It waits for the redeliveries instead (``_await_redeliveries``) when the range is
    longer than ``SCAN_MESSAGES_MAX``, and when a hand must be settled while some
    outstanding message was redelivered already: a hand that crashes the process must use
    up its deliveries towards MAX_DELIVERIES, not be settled from the stream at every
    start, which no delivery count would ever stop. (One instance per durable at a time: the
    partition's lease, ``socai_settlement.partitions``.)
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

    async def run(self, stop: asyncio.Event) -> list[Delivery]:
        """Returns the messages to handle before the next pull."""
        first = await self.pull.fetch(1, self.config.fetch_timeout_s)
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
        self.held[id(msg)] = (msg, time.monotonic())  # beaten while we work or wait
        try:
            if await self._settle_outstanding(stop, floor + 1, msg.stream_seq - 1, others, info):
                return first
            collected = await self._await_redeliveries(stop, info, others)
        finally:
            # Not given back with a nak if this fails: a nak would make it look like a
            # redelivery to the next run, which would then skip this recovery; left pending,
            # it is inside the range the next run reads.
            self.held.pop(id(msg), None)
        return sorted([*collected, msg], key=lambda m: m.stream_seq)

    async def _settle_outstanding(
        self, stop: asyncio.Event, first_seq: int, last_seq: int, others: int, info: js_api.ConsumerInfo
    ) -> bool:
        """Settle the unsettled HandEnded messages of ``first_seq..last_seq`` from the
        stream; False when the redeliveries must be waited for instead."""
        span = last_seq - first_seq + 1
        if span > SCAN_MESSAGES_MAX:
            log.warning("outstanding_range_too_long", messages=span, limit=SCAN_MESSAGES_MAX)
            return False
        clock = time.monotonic()
        found = await self.settler.retrying(
            lambda: outstanding_hand_ends(
                self.nc, self.settler.store, self.stream, self.filter_subject, first_seq, last_seq
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
                    self.on_settled(o.hand_id)
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
            got = await self.pull.fetch(self.config.fetch_batch, self.config.fetch_timeout_s)
            if not got:
                break
            collected += got
            redelivered += sum(1 for m in got if m.num_delivered > 1)
            if redelivered >= others or any(m.num_delivered == 1 for m in got):
                break
        return collected
