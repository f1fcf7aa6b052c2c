"""Dead letters the consumer finds itself, before any replay: a message that is not an Event
(BAD_EVENT), a HandEnded delivered too often (MAX_DELIVERIES), and a message the server
stopped redelivering (its MAX_DELIVERIES advisory).

A HandEnded whose attempts failed ``poison_after_deliveries`` times (it kept failing or
crashing the process) is set aside instead of tried again. The count is settlement's own
(``Pipeline._poison_checked``): the server's delivery count less the deliveries given back
at a handover or a stop, plus the unfinished settlements from the stream at start. The
server sets no delivery limit by default (``max_deliver`` -1), since it counts handovers
too; where an operator sets one, it must be larger (so even a crash while recording that
dead letter leaves deliveries to record it with), and the advisory is listened to, so a
message the server gives up on is dead-lettered, never silently dropped. The replay's and
the ledger's dead letters are the settler's.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Final

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from socai.gen.events.v1 import events_pb2
from socai.infra.logging import bound, get_logger
from socai.infra.nats_pull import Delivery
from socai_settlement import metrics
from socai_settlement.ignored import NOT_AN_EVENT, IgnoredMessages
from socai_settlement.outstanding import MAX_DELIVERIES, subject_tokens
from socai_settlement.settler import Settler
from socai_settlement.store import NewDeadLetter

log = get_logger("socai.settlement.dead_letters")

BAD_EVENT: Final = "BAD_EVENT"
__all__ = ["BAD_EVENT", "MAX_DELIVERIES", "DeadLetters"]


class DeadLetters:
    """Records the dead letters found while reading the stream of durable ``durable``."""

    def __init__(
        self, nc: NatsClient, settler: Settler, ignored: IgnoredMessages, *, stream: str, durable: str
    ) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.settler = settler
        self.ignored = ignored
        self.stream = stream
        self.durable = durable
        self._advisory: Any = None

    async def record_found(self, items: list[tuple[NewDeadLetter, Delivery]]) -> None:
        """Record dead letters found while reading a batch (not an Event; too many
        deliveries), skipping hands that turn out to be settled already (garbage on a
        settled hand is an ignored message). Waits out a database outage; the caller acks
        the messages afterwards."""
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

    async def listen(self) -> None:
        """Subscribe to the server's MAX_DELIVERIES advisories of the durable."""
        if self._advisory is None:
            self._advisory = await self.nc.subscribe(
                f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self.stream}.{self.durable}",
                cb=self._on_max_deliveries,
            )

    async def close(self) -> None:
        if self._advisory is not None:
            with contextlib.suppress(Exception):
                await self._advisory.unsubscribe()
            self._advisory = None

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
