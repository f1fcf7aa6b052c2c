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
subjects and filters it reads (``stored``), so no reader needs to know the layout.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from socai import errors
from socai.events import codec
from socai.events.model import Event, subject
from socai.infra.nats import publish
from socai.infra.partitions import partition_of, partitions_of

DIRECT_BATCH = 256
READ_TIMEOUT_S = 5.0


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

    def subject_of(self, table_id: str, hand_id: str) -> str:
        """The canonical subject of a hand: where it is published, what its signature covers."""
        return subject(table_id, hand_id, self.prefix)

    async def layout(self) -> int:
        """The stream's P (0 when it is not partitioned), read once from its configuration."""
        if self.partitions is None:
            try:
                info = await self.js.stream_info(self.stream)
            except NotFoundError:
                return 0  # no stream yet: nothing to read; ask again next time
            except Exception as exc:
                raise errors.Unavailable("NATS_UNAVAILABLE", f"stream {self.stream}: {exc}") from exc
            self.partitions = partitions_of(info.config, self.prefix) or 0
        return self.partitions

    def stored(self, subj: str) -> str:
        """Where the stream keeps canonical subject or filter ``subj`` (call ``layout`` first):
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
        """
        subj = self.subject_of(event.table_id, event.hand_id)
        if payload is None:
            payload = codec.encode(event)
        try:
            ack = await publish(
                self.js,
                subj,
                payload,
                msg_id=msg_id or event.event_id,
                expected_last_subject_seq=expected_last_subject_seq,
                stream=self.stream,
                headers=headers,
            )
        except errors.Conflict:
            last = await self.last(subj)
            if last is not None and last[1] == payload:
                return last[0]  # our own earlier attempt was stored; its ack was lost
            raise
        if ack.duplicate:
            # JetStream answers a duplicate with the sequence of the message it kept: only
            # ours if the bytes are ours (a lost ack retried), never a stranger's.
            stored = await self.js.get_msg(self.stream, int(ack.seq), direct=True)
            if bytes(stored.data or b"") != payload:
                raise errors.Conflict("DUPLICATE_OF_ANOTHER", f"{subj}: message id taken by another publisher")
        return int(ack.seq)

    async def last(self, subj: str) -> tuple[int, bytes] | None:
        """The (stream sequence, payload) of the (canonical) subject's last message, or None."""
        await self.layout()
        try:
            msg = await self.js.get_last_msg(self.stream, self.stored(subj), direct=True)
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
        decode (the table's rebuild quarantines it) looks at the bytes itself."""
        await self.layout()
        subj = self.stored(subj)
        seq = from_seq
        while True:
            inbox = self.nc.new_inbox()
            sub = await self.nc.subscribe(inbox)
            try:
                request = {"seq": seq, "next_by_subj": subj, "batch": DIRECT_BATCH}
                await self.nc.publish(f"$JS.API.DIRECT.GET.{self.stream}", json.dumps(request).encode(), reply=inbox)
                more = False
                while True:
                    msg = await sub.next_msg(timeout=READ_TIMEOUT_S)
                    headers = msg.headers or {}
                    status = headers.get("Status")
                    if status == "404":
                        return
                    if status == "204":  # end of batch
                        more = headers.get("Nats-Num-Pending", "0") != "0"
                        break
                    if status:
                        raise errors.Unavailable("NATS_UNAVAILABLE", f"direct get {subj}: status {status}")
                    stream_seq = int(headers["Nats-Sequence"])
                    extra = {k: v for k, v in headers.items() if isinstance(k, str) and not k.startswith("Nats-")}
                    yield RawStored(stream_seq, bytes(msg.data or b""), extra)
                    seq = stream_seq + 1
            finally:
                await sub.unsubscribe()
            if not more:
                return

    async def read_hand(self, table_id: str, hand_id: str) -> list[Stored]:
        return [s async for s in self.read(self.subject_of(table_id, hand_id))]
