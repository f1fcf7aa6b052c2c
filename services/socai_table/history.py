"""A hand the table played, read back from the event log: for ``GetHand`` and for a retried
``Act`` whose hand is over.

Only what this service signed is read (``signing.SubjectReader``, as the rebuild does), in
its due order. An ended hand is verified and settled as settlement does it
(``socai.settle.replay``): its face-down cards filled in from the seed its HandEnded
revealed, its settlement the rules engine's. The act keys come from the events' headers
(``hand.IDEMPOTENCY_HEADER``), so a retry is answered with its first result however long
after the hand, and after any restart.

An ended hand never changes: the table keeps the last few it read (``Table.ended_hand``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from socai.events import codec
from socai.events.log import EventLog
from socai.events.model import Event, HandEnded
from socai.settle.replay import ReplayResult, replay
from socai_table import signing
from socai_table.hand import IDEMPOTENCY_HEADER, PLAYER_HEADER, ActResult

# The most events read of one hand (a hand the table wrote has far fewer: the engine's
# own limit on a hand's events is lower).
EVENTS_READ_MAX = 100_000


@dataclass(frozen=True)
class HandRecord:
    """One hand as the log holds it: its events (with every card once it has ended), each
    event's stream sequence, its act keys and, once ended, the replay's verdict."""

    hand_id: str
    events: tuple[Event, ...]
    log_seqs: tuple[int, ...]
    act_keys: dict[tuple[str, str], tuple[ActResult, Any]]
    replayed: ReplayResult | None

    @property
    def ended(self) -> bool:
        return self.replayed is not None


async def read_hand(
    log: EventLog, table_id: str, hand_id: str, writer_key: bytes | signing.WriterKeys
) -> HandRecord | None:
    """The hand ``hand_id`` of ``table_id`` as this service wrote it, or None when the log
    holds none of it. Raises ReplayError when an ended hand does not verify (it would not
    settle either)."""
    subject = log.subject_of(table_id, hand_id)
    reader = signing.SubjectReader(writer_key)
    events: list[Event] = []
    log_seqs: list[int] = []
    keys: dict[tuple[str, str], int] = {}  # (player, key) -> the seq of the event it made
    async for raw in log.read_raw(subject):
        if len(events) >= EVENTS_READ_MAX:
            break
        if reader.reject_reason(subject, raw.data, raw.headers, raw.stream_seq) is not None:
            continue
        try:
            event = codec.decode(raw.data)
        except Exception:  # a stranger's bytes: not the table's
            continue
        if (event.table_id, event.hand_id, event.seq) != (table_id, hand_id, len(events) + 1):
            continue
        reader.accepted(subject, raw.data)
        events.append(event)
        log_seqs.append(raw.stream_seq)
        key = raw.headers.get(IDEMPOTENCY_HEADER)
        if key:
            keys[(raw.headers.get(PLAYER_HEADER, ""), key)] = event.seq
        if isinstance(event.body, HandEnded):
            break
    if not events:
        return None
    replayed = replay(events) if isinstance(events[-1].body, HandEnded) else None
    whole = tuple(replayed.events) if replayed is not None else tuple(events)
    act_keys = {
        who: (ActResult(seq, whole[seq - 1].event_id, log_seqs[seq - 1]), whole[seq - 1].body)
        for who, seq in keys.items()
    }
    return HandRecord(hand_id, whole, tuple(log_seqs), act_keys, replayed)
