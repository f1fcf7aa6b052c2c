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
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError

from socai import errors
from socai.gen.events.v1 import events_pb2
from socai_settlement.lookups import dead_lettered_among
from socai_settlement.settler import HandJob
from socai_settlement.store import Store

SCAN_BATCH: Final = 256  # messages per direct-get request (the server's page)
SCAN_TIMEOUT_S: Final = 5.0
SCAN_MESSAGES_MAX: Final = 200_000  # a limit on the range read; beyond it, wait for the redeliveries


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
    done = await store.settled_among(ids) | await dead_lettered_among(store, ids)
    return Outstanding([j for j in found.values() if j.hand_id not in done], scanned, hand_ends)
