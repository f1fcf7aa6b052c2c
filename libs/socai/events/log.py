"""The event log on JetStream: append a hand's events in order, read them back by subject.

Writers (the table service) append with ``Nats-Msg-Id = event_id`` and the expected last
subject sequence, so a hand has exactly one writer and a retried append is harmless.
JetStream checks the expected sequence *before* duplicates, so a retry after a lost ack is
refused as ``WRONG_LAST_SEQUENCE`` even though the first attempt was stored; ``append``
resolves that by looking at the subject's last message: if it is byte for byte our event, the
earlier attempt succeeded and its sequence is returned; a different event under the same id
is another writer's, and the conflict stands.

Readers (settlement, the auditor, a restarting table) read one subject's messages in order
with batched direct gets (``$JS.API.DIRECT.GET``, one request per 256 messages), which is
far cheaper than a consumer per hand.

Everyone names a hand by its canonical subject ``<prefix>.<table>.<hand>``: writers publish
to it and sign it. A partitioned stream (``socai.infra.partitions``) stores it as
``<prefix>.<k>.<table>.<hand>``; this class learns P from the stream once and maps the
subjects and filters it reads, so no reader needs to know the layout.

**After a change of P** (the migration, ``socai migrate --repartition``) a table's messages
sit under every P the stream has had (its recorded history): the log reads them all, in
stream order (``history_filters``; one literal subject while the table never moved, one
wildcard ``<prefix>.*.<table>.<hand>`` once it did, plus the unpartitioned subject when P
was ever 0). A writer's expected sequence is then the last sequence of the hand across the
history, while JetStream compares ``Nats-Expected-Last-Subject-Sequence`` with the last
message of the *stored* subject, i.e. under the new partition, which holds nothing of the
table yet: an old writer's append would be refused, and a writer sending 0 would be let in
whatever the table's history. So once a table has had several partitions the append names
its wildcard in ``Nats-Expected-Last-Subject-Sequence-Subject`` (nats-server 2.11+): the
server checks the expectation against the hand's last message in any partition, atomically,
as before. The one boundary no subject filter spans is unpartitioned history (3 tokens)
against partitioned (4 tokens); the first append across it takes the guarded path in
``_append_across_forms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError
from opentelemetry.trace import SpanKind

from socai import errors
from socai.events import codec
from socai.events.model import Event, subject
from socai.infra import tracing
from socai.infra.nats import publish
from socai.infra.partitions import history_filters, partition_of, partitions_history, partitions_of

DIRECT_BATCH = 256
READ_TIMEOUT_S = 5.0
CHECK_SUBJECT_HEADER = "Nats-Expected-Last-Subject-Sequence-Subject"


@dataclass(frozen=True, slots=True)
class RawStored:
    """A message as stored, not yet decoded: its stream sequence, bytes and headers."""

    stream_seq: int
    data: bytes
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Stored:
    """An event as stored: its stream sequence and the decoded event."""

    stream_seq: int
    event: Event
    headers: dict[str, str]


class EventLog:
    def __init__(
        self, nc: NatsClient, stream: str = "SOCAI_EVENTS", prefix: str = "socai.events", partitions: int | None = None
    ) -> None:
        """``partitions``: the stream's P (0: not partitioned); None reads it from the
        stream's configuration on first use."""
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.stream = stream
        self.prefix = prefix
        self.partitions = partitions
        # every P the stream stored events under, the current one last (read with P)
        self.history: tuple[int, ...] | None = None if partitions is None else (partitions,)

    def subject_of(self, table_id: str, hand_id: str) -> str:
        """The canonical subject of a hand: where it is published, what its signature covers."""
        return subject(table_id, hand_id, self.prefix)

    async def layout(self) -> int:
        """The stream's P (0 when it is not partitioned), read once from its configuration,
        with the history of its P's (``history``). A process started before a change of P
        keeps the old layout: the migration restarts every service."""
        if self.partitions is None or self.history is None:
            try:
                info = await self.js.stream_info(self.stream)
            except NotFoundError:
                return 0  # no stream yet: nothing to read; ask again next time
            except Exception as exc:
                raise errors.Unavailable("NATS_UNAVAILABLE", f"stream {self.stream}: {exc}") from exc
            self._learn(info.config)
        return self.partitions or 0

    def _learn(self, config: js_api.StreamConfig) -> None:
        self.history = partitions_history(config, self.prefix)  # the current P last
        self.partitions = partitions_of(config, self.prefix) or 0

    def filters(self, subj: str) -> list[str]:
        """Where the stream keeps canonical subject or filter ``subj`` under every P it has
        had (call ``layout`` first): one filter, or two when P was 0 once and is not now (or
        the other way round); ``<prefix>.>`` and anything outside the prefix stay as they are."""
        return history_filters(self.prefix, subj, self.history or (self.partitions or 0,))

    def _check_subject(self, subj: str) -> str | None:
        """The filter the append's expected sequence must be checked against when it is not
        the stored subject itself: the hand's subjects in every partition it has had."""
        if not self.partitions:
            return None
        partitioned = history_filters(
            self.prefix, subj, tuple(p for p in self.history or () if p) or (self.partitions,)
        )
        return partitioned[0] if "*" in partitioned[0] else None

    def _spans_forms(self) -> bool:
        history = self.history or ()
        return 0 in history and any(history)

    def stored(self, subj: str) -> str:
        """Where the stream stores canonical subject or filter ``subj`` under its current P
        (call ``layout`` first; ``filters`` names every P it has had):
        ``<prefix>.<t>.<h>`` → ``<prefix>.<k>.<t>.<h>``, ``<prefix>.*.<h>`` →
        ``<prefix>.*.*.<h>``; ``<prefix>.>`` and anything outside the prefix stay as they are."""
        if not self.partitions or not subj.startswith(self.prefix + "."):
            return subj
        rest = subj[len(self.prefix) + 1 :]
        table = rest.split(".", 1)[0]
        if table == ">":
            return subj
        k = "*" if table == "*" else str(partition_of(table, self.partitions))
        return f"{self.prefix}.{k}.{rest}"

    async def append(
        self,
        event: Event,
        expected_last_subject_seq: int,
        headers: dict[str, str] | None = None,
        *,
        payload: bytes | None = None,
        msg_id: str | None = None,
    ) -> int:
        """Publish ``event`` (``payload``: its encoding, when the caller has it already);
        returns its stream sequence. ``msg_id`` defaults to the event id.

        Raises Conflict("WRONG_LAST_SEQUENCE") when another writer appended to the hand
        first, Conflict("DUPLICATE_OF_ANOTHER") when JetStream took the message for a
        duplicate of a different one (another publisher used the same message id),
        Unavailable when NATS does not acknowledge.

        While tracing is on (``socai.infra.tracing``) the append is a span, child of the
        current one (the player's call), and its ``traceparent`` goes into the message's
        headers: settlement continues the hand's trace from its HandEnded.
        """
        if not tracing.enabled():
            return await self._append(event, expected_last_subject_seq, headers, payload, msg_id)
        span = tracing.start_span(
            "socai.events",
            f"append {type(event.body).__name__}",
            parent=tracing.current(),
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "nats",
                "messaging.destination.name": self.subject_of(event.table_id, event.hand_id),
                "socai.table_id": event.table_id,
                "socai.hand_id": event.hand_id,
                "socai.event_seq": event.seq,
            },
        )
        with tracing.current_span(span), span:
            headers = dict(headers or {})
            tracing.inject(headers)
            stream_seq = await self._append(event, expected_last_subject_seq, headers, payload, msg_id)
            span.set_attribute("messaging.message.id", str(stream_seq))
            return stream_seq

    async def _append(
        self,
        event: Event,
        expected_last_subject_seq: int,
        headers: dict[str, str] | None,
        payload: bytes | None,
        msg_id: str | None,
    ) -> int:
        subj = self.subject_of(event.table_id, event.hand_id)
        if payload is None:
            payload = codec.encode(event)
        await self.layout()
        check = self._check_subject(subj)
        try:
            ack = await publish(
                self.js,
                subj,
                payload,
                msg_id=msg_id or event.event_id,
                expected_last_subject_seq=expected_last_subject_seq,
                stream=self.stream,
                headers={**(headers or {}), CHECK_SUBJECT_HEADER: check} if check else headers,
            )
        except errors.Conflict:
            last = await self.last(subj)
            if last is not None and last[1] == payload:
                return last[0]  # our own earlier attempt was stored; its ack was lost
            if last is not None and last[0] == expected_last_subject_seq and self._spans_forms():
                return await self._append_across_forms(
                    subj, expected_last_subject_seq, payload, msg_id or event.event_id, headers
                )
            raise
        return await self._accepted(subj, ack, payload)

    async def _append_across_forms(
        self, subj: str, expected: int, payload: bytes, msg_id: str, headers: dict[str, str] | None
    ) -> int:
        """The first append of a hand whose last message (at ``expected``) is stored in the
        other form: unpartitioned while the stream is partitioned now, or the other way round.

        No subject filter spans both forms, so the check is made in two steps that together
        hold: (1) the stream's configuration, read first, shows the current form; from then
        on nothing can be stored in the other form (every canonical publish is stored in the
        current one), so the hand's last message there is frozen; (2) read after it, that
        last message is ``expected``; (3) the publish expects the hand's last message in the
        current form, checked by the server. Two writers racing here both pass (1) and (2);
        the server lets one through (3) and refuses the other. A stream-wide expected last
        sequence would also be safe, but it is refused whenever any other table appended in
        between, which on a busy portal is all the time.
        """
        try:
            info = await self.js.stream_info(self.stream)
        except Exception as exc:
            raise errors.Unavailable("NATS_UNAVAILABLE", f"stream {self.stream}: {exc}") from exc
        self._learn(info.config)
        current = self.partitions or 0
        filters = self.filters(subj)
        mine = [f for f in filters if (f.count(".") > subj.count(".")) == bool(current)]
        lasts = {f: await self._last_of(f) for f in filters}
        overall = max((last for last in lasts.values() if last is not None), default=None)
        if overall is None or overall[0] != expected:
            raise errors.Conflict("WRONG_LAST_SEQUENCE", f"{subj}: another writer appended first")
        in_form = max([last for f in mine if (last := lasts[f]) is not None], default=None)
        check = mine[0] if mine else subj
        ack = await publish(
            self.js,
            subj,
            payload,
            msg_id=msg_id,
            expected_last_subject_seq=in_form[0] if in_form else 0,
            stream=self.stream,
            headers={**(headers or {}), CHECK_SUBJECT_HEADER: check},
        )
        return await self._accepted(subj, ack, payload)

    async def _accepted(self, subj: str, ack: js_api.PubAck, payload: bytes) -> int:
        if ack.duplicate:
            # JetStream answers a duplicate with the sequence of the message it kept: only
            # ours if the bytes are ours (a lost ack retried), never a stranger's.
            stored = await self.js.get_msg(self.stream, int(ack.seq), direct=True)
            if bytes(stored.data or b"") != payload:
                raise errors.Conflict("DUPLICATE_OF_ANOTHER", f"{subj}: message id taken by another publisher")
        return int(ack.seq)

    async def last(self, subj: str) -> tuple[int, bytes] | None:
        """The (stream sequence, payload) of the (canonical) subject's last message under
        any P the stream has had, or None."""
        await self.layout()
        lasts = [await self._last_of(f) for f in self.filters(subj)]
        return max((last for last in lasts if last is not None), default=None)

    async def _last_of(self, stored: str) -> tuple[int, bytes] | None:
        try:
            msg = await self.js.get_last_msg(self.stream, stored, direct=True)
        except NotFoundError:
            return None
        return int(msg.seq or 0), bytes(msg.data or b"")

    async def read(self, subj: str, from_seq: int = 1) -> AsyncIterator[Stored]:
        """Every message of ``subj`` (a subject or a wildcard) from stream sequence
        ``from_seq`` on, in order, as of the moment of reading.

        Raises InvalidArgument("BAD_EVENT") for a message that does not decode.
        """
        async for raw in self.read_raw(subj, from_seq):
            yield Stored(raw.stream_seq, codec.decode(raw.data), raw.headers)

    async def read_raw(self, subj: str, from_seq: int = 1) -> AsyncIterator[RawStored]:
        """Like ``read``, without decoding: a reader that must survive a message it cannot
        decode (the table's rebuild quarantines it) looks at the bytes itself. Under every P
        the stream has had, merged in stream order."""
        await self.layout()
        filters = self.filters(subj)
        if len(filters) == 1:
            async for raw in self._read_stored(filters[0], from_seq):
                yield raw
            return
        async with contextlib.AsyncExitStack() as stack:
            readers = [
                await stack.enter_async_context(contextlib.aclosing(self._read_stored(f, from_seq))) for f in filters
            ]
            heads: list[tuple[int, int, RawStored]] = []
            for i, reader in enumerate(readers):
                first = await anext(reader, None)
                if first is not None:
                    heapq.heappush(heads, (first.stream_seq, i, first))
            while heads:
                _, i, raw = heapq.heappop(heads)
                yield raw
                following = await anext(readers[i], None)
                if following is not None:
                    heapq.heappush(heads, (following.stream_seq, i, following))

    async def _read_stored(self, subj: str, from_seq: int) -> AsyncGenerator[RawStored, None]:
        async with contextlib.aclosing(direct_get(self.nc, self.stream, subj, from_seq)) as messages:
            async for m in messages:
                extra = {k: v for k, v in m.headers.items() if isinstance(k, str) and not k.startswith("Nats-")}
                yield RawStored(m.stream_seq, m.data, extra)

    async def read_hand(self, table_id: str, hand_id: str) -> list[Stored]:
        return [s async for s in self.read(self.subject_of(table_id, hand_id))]


@dataclass(frozen=True, slots=True)
class Direct:
    """One message as the stream stores it: its sequence, subject, bytes and headers."""

    stream_seq: int
    subject: str
    data: bytes
    headers: Mapping[str, str]


async def direct_page(
    nc: NatsClient, stream: str, request: Mapping[str, object], timeout_s: float = READ_TIMEOUT_S
) -> tuple[list[Direct], bool]:
    """The messages one JetStream direct-get ``request`` returns, in stream order, and
    whether more wait past them on its subjects: a page of ``request["batch"]``, or the one
    message at ``request["seq"]`` ([] when none). Answered by any replica, with no consumer
    on the server.

    The replies are gathered by a callback and the page awaited once: awaiting each message
    (``next_msg``) cost an event-loop round per message, a fifth of the ledger's catch-up.
    Raises Unavailable("NATS_UNAVAILABLE") when the server answers an error or not at all."""
    inbox = nc.new_inbox()
    found: list[Direct] = []
    done = asyncio.Event()
    failure: list[str] = []
    more = [False]

    async def on_reply(msg: Msg) -> None:
        headers = msg.headers or {}
        status = headers.get("Status")
        if status == "204":  # the end of a page
            more[0] = headers.get("Nats-Num-Pending", "0") != "0"
            done.set()
        elif status == "404":  # nothing (more) there
            done.set()
        elif status:
            failure.append(status)
            done.set()
        else:
            found.append(Direct(int(headers["Nats-Sequence"]), headers.get("Nats-Subject", ""), msg.data, headers))
            if "batch" not in request:
                done.set()

    sub = None
    try:
        sub = await nc.subscribe(inbox, cb=on_reply)  # refused too on a connection that is closed
        await nc.publish(f"$JS.API.DIRECT.GET.{stream}", json.dumps(request).encode(), reply=inbox)
        await asyncio.wait_for(done.wait(), timeout_s)
    except (NatsError, TimeoutError) as exc:
        raise errors.Unavailable("NATS_UNAVAILABLE", f"direct get on {stream}: {exc!r}") from exc
    finally:
        if sub is not None:
            with contextlib.suppress(NatsError):
                await sub.unsubscribe()
    if failure:
        raise errors.Unavailable("NATS_UNAVAILABLE", f"direct get on {stream}: status {failure[0]}")
    return found, more[0]


async def direct_get(
    nc: NatsClient,
    stream: str,
    subjects: str,
    first_seq: int = 1,
    last_seq: int | None = None,
    *,
    timeout_s: float = READ_TIMEOUT_S,
) -> AsyncGenerator[Direct, None]:
    """The stream's messages on ``subjects`` from ``first_seq`` (up to ``last_seq``), in
    stream order, as stored, by pages of ``DIRECT_BATCH`` (``direct_page``): the one reader
    of ranges of the log (the table's rebuild, the auditor's export, settlement's scan of
    what is outstanding). Raises Unavailable("NATS_UNAVAILABLE") as ``direct_page``."""
    seq = first_seq
    while last_seq is None or seq <= last_seq:
        batch = DIRECT_BATCH if last_seq is None else min(DIRECT_BATCH, last_seq - seq + 1)
        page, more = await direct_page(nc, stream, {"seq": seq, "next_by_subj": subjects, "batch": batch}, timeout_s)
        for message in page:
            if last_seq is not None and message.stream_seq > last_seq:
                return
            yield message
            seq = message.stream_seq + 1
        if not more or not page:
            return
