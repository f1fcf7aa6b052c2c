"""A JetStream pull subscription read as raw frames: the one module that uses nats-py's
internals.

A consumer of the event stream handles many small messages (about 15 per hand), and
nats-py's work for each (a ``Msg`` object, its header dict, its metadata, a queue and a
task hop) would be a large part of the consumer's CPU. So ``Pull`` takes the frames of its
inbox as the protocol parser hands them over and builds a ``Delivery`` straight from the
subject, reply and payload bytes. That needs three things nats-py does not promise:

- ``Client._process_msg(sid, subject, reply, data, headers)``, the parser's call for every
  message, replaced on the client instance by one that routes tapped subscriptions here
  and everything else to the original;
- ``Subscription._id``, the ``sid`` the parser passes;
- ``Msg.Metadata._from_reply``, which parses the ack-subject forms other than the common
  nine-token one.

``tests/integration/test_nats_pull.py`` checks each of them on the pinned nats-py
(``pyproject.toml``) and fails when the fast path is not taken. Should a different nats-py
be installed anyway, ``Pull`` still works through nats-py's public ``Msg`` path, slower,
and says so once with a warning naming the nats-py version (``nats_pull_slow_path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
from collections import deque
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any, Final

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from socai.infra.logging import get_logger
from socai.infra.nats_liveness import round_trip

log = get_logger("socai.nats_pull")

ACK: Final = b""
IN_PROGRESS: Final = b"+WPI"
NAK: Final = b"-NAK"
PENDING_MSGS_MAX: Final = 100_000  # above any pull batch: the inbox never drops a message
GRACE_S: Final = 1.0  # past a pull request's expiry, give up waiting for its 408
FLUSH_TIMEOUT_S: Final = 2  # stop: the round trip that brings in frames already on their way
_STATUS_LINE: Final = b"NATS/1.0 "  # a status frame's header block starts "NATS/1.0 404 No Messages"
# The parameters of the parser's per-message call that ``_tap`` replaces.
PROCESS_MSG_PARAMETERS: Final = ("sid", "subject", "reply", "data", "headers")

Frame = Callable[[bytes, bytes, bytes, bytes | None], None]


def nats_py_version() -> str:
    try:
        return metadata.version("nats-py")
    except metadata.PackageNotFoundError:
        return "unknown"


class Delivery:
    """One message of a pull subscription: its subject, reply (ack) subject and data, and
    the delivery count and stream sequence its ack subject carries. ``ack``/``nak``/
    ``in_progress`` as on nats-py's ``Msg``."""

    __slots__ = ("_headers", "_nc", "data", "num_delivered", "reply", "stream_seq", "subject")

    def __init__(
        self, nc: NatsClient, subject: str, reply: str, data: bytes, headers: bytes | dict[str, str] | None = None
    ) -> None:
        self._nc = nc
        self.subject = subject
        self.reply = reply
        self.data = data
        self._headers = headers  # the raw header block until someone asks (most never do)
        self.num_delivered, self.stream_seq = ack_fields(reply)

    @property
    def header_block(self) -> bytes | dict[str, str] | None:
        """The headers as they came: the raw block (fast path) or a dict (slow path). A
        consumer that only forwards them (settlement, to its replay workers) parses nothing."""
        return self._headers

    @property
    def headers(self) -> dict[str, str]:
        """The message's headers (parsed on first use: the hand chain's, for settlement)."""
        raw = self._headers
        if raw is None:
            return {}
        if isinstance(raw, bytes):
            parsed = self._headers = parse_header_block(raw)
            return parsed
        return raw

    async def ack(self) -> None:
        await self._nc.publish(self.reply, ACK)

    async def nak(self) -> None:
        await self._nc.publish(self.reply, NAK)

    async def in_progress(self) -> None:
        await self._nc.publish(self.reply, IN_PROGRESS)


def parse_header_block(block: bytes) -> dict[str, str]:
    """``NATS/1.0\r\nName: value\r\n…\r\n\r\n`` → {name: value} (the first value of a repeated name)."""
    out: dict[str, str] = {}
    for line in block.decode(errors="replace").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep and name and name not in out:
            out[name] = value.strip()
    return out


def header_values(block: bytes, names: Sequence[str]) -> dict[str, str]:
    """``parse_header_block(block)`` restricted to ``names``, decoding only their values (a
    settlement replay worker reads the three chain headers of every message). Equal to the
    full parse for any block (pinned by a property test): lines split on CRLF, the first
    line skipped, the first occurrence of a name wins, its value stripped. Splitting the
    bytes before decoding splits them where the full parse does, since CR, LF and ':' are
    ASCII and never part of an undecodable sequence."""
    wanted = _header_names(tuple(names))
    out: dict[str, str] = {}
    for line in block.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            text = wanted.get(name)
            if text is not None and text not in out:
                out[text] = value.decode(errors="replace").strip()
    return out


@functools.lru_cache(maxsize=16)
def _header_names(names: tuple[str, ...]) -> dict[bytes, str]:
    return {name.encode(): name for name in names if name}


def ack_fields(reply: str) -> tuple[int, int]:
    """(deliveries, stream sequence) from a JetStream ack subject:
    ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ms>.<pending>``,
    or the newer form with ``<domain>.<account hash>`` after ``$JS.ACK`` (and a trailing
    token). Raises NotJSMessageError for anything else."""
    tokens = reply.split(".")
    if len(tokens) == 9 and tokens[0] == "$JS" and tokens[1] == "ACK":
        return int(tokens[4]), int(tokens[5])
    parsed = Msg.Metadata._from_reply(reply)  # the other forms, or NotJSMessageError
    return int(parsed.num_delivered or 1), int(parsed.sequence.stream or 0)


def _tap(nc: NatsClient, sid: int, handler: Frame) -> bool:
    """Route the frames of subscription ``sid`` to ``handler(subject, reply, data,
    headers)`` before nats-py builds a ``Msg``. False when this nats-py's ``_process_msg``
    is not the one this was written for: the subscription's callback then gets ``Msg``
    objects as usual."""
    taps: dict[int, Frame] | None = getattr(nc, "_socai_taps", None)
    if taps is None:
        original = getattr(nc, "_process_msg", None)
        if original is None or tuple(inspect.signature(original).parameters) != PROCESS_MSG_PARAMETERS:
            return False
        routes: dict[int, Frame] = {}

        async def process_msg(sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
            handler = routes.get(sid)
            if handler is None:
                await original(sid, subject, reply, data, headers)
            else:
                handler(subject, reply, data, headers)

        nc._process_msg = process_msg  # type: ignore[method-assign]
        nc._socai_taps = taps = routes  # type: ignore[attr-defined]
    taps[sid] = handler
    return True


def _untap(nc: NatsClient, sid: int) -> None:
    taps: dict[int, Frame] | None = getattr(nc, "_socai_taps", None)
    if taps is not None:
        taps.pop(sid, None)


class Pull:
    """A pull subscription on durable ``durable`` of ``stream``, read through one inbox.

    One pull request at a time asks for up to ``batch`` messages; they land in a buffer as
    they arrive, ``fetch`` hands out what is there (waiting up to ``timeout_s`` for the
    first), and a new request is sent only once the previous one is complete (all its
    messages, or a 404/408/409 status) and the buffer is empty. So at most ``batch``
    messages are ever buffered, in stream order.

    ``fast_path`` says whether the inbox's frames are read raw (see the module docstring);
    ``frames_read`` and ``msgs_read`` count the messages that came each way.
    """

    def __init__(self, nc: NatsClient, stream: str, durable: str) -> None:
        self.nc = nc
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self.inbox = nc.new_inbox()
        self._buffer: deque[Delivery] = deque()
        self._arrived = asyncio.Event()
        self._open = False
        self._remaining = 0
        self._sub: Any = None
        self.fast_path = False
        self.frames_read = 0
        self.msgs_read = 0

    async def start(self) -> None:
        self._sub = await self.nc.subscribe(
            self.inbox, cb=self._on_msg, pending_msgs_limit=PENDING_MSGS_MAX, pending_bytes_limit=-1
        )
        sid = getattr(self._sub, "_id", None)
        self.fast_path = isinstance(sid, int) and _tap(self.nc, sid, self._on_frame)
        if not self.fast_path:
            log.warning(
                "nats_pull_slow_path",
                nats_py=nats_py_version(),
                why="nats-py's Client._process_msg or Subscription._id is not what socai.infra.nats_pull expects",
            )

    async def close(self) -> None:
        """Stop receiving (what was delivered and not fetched comes back by redelivery
        after the consumer's ack wait; ``stop`` returns it instead)."""
        await self.stop()

    async def stop(self) -> list[Delivery]:
        """Stop receiving and return, in stream order, what the server delivered to this
        subscription that ``fetch`` has not handed out, so the caller can give it back.

        The server stops serving a pull request whose reply subject lost its interest, so
        once the unsubscribe is through nothing more is delivered; a round trip after it
        brings in the frames that were already on their way, which the tap still routes
        here. Without the fast path, or when the server does not answer in time (it is
        paused: the reason a lease ran out), those late frames are dropped (they come back
        by redelivery after the ack wait). The round trip is never ``nc.flush(timeout=…)``,
        whose timeout leaves a cancelled future behind (``socai.infra.nats_liveness``)."""
        if self._sub is None:
            return []
        sid = getattr(self._sub, "_id", None)
        with contextlib.suppress(Exception):
            await self._sub.unsubscribe()
        with contextlib.suppress(Exception):
            await round_trip(self.nc, FLUSH_TIMEOUT_S)
        if isinstance(sid, int):
            _untap(self.nc, sid)
        self._sub = None
        self._open = False
        left = sorted(self._buffer, key=lambda d: d.stream_seq)
        self._buffer.clear()
        return left

    def _on_frame(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if headers is not None and headers.startswith(_STATUS_LINE):
            line = headers[len(_STATUS_LINE) :].split(b"\r\n", 1)[0].decode(errors="replace")
            status, _, description = line.partition(" ")
            self._on_status(status, description)
            return
        self.frames_read += 1
        self._on_data(Delivery(self.nc, subject.decode(), reply.decode(), data, headers))

    async def _on_msg(self, msg: Msg) -> None:
        """The same as ``_on_frame``, for a nats-py whose frames cannot be tapped."""
        status = msg.headers.get("Status") if msg.headers else None
        if status:
            self._on_status(status, (msg.headers or {}).get("Description", ""))
            return
        self.msgs_read += 1
        self._on_data(Delivery(self.nc, msg.subject, msg.reply, msg.data, dict(msg.headers or {})))

    def _on_status(self, status: str, description: str) -> None:
        if status == "100":  # idle heartbeat or flow control: not the end of the request
            return
        if status not in ("404", "408"):
            log.warning("pull_request_ended", status=status, description=description)
        self._open = False
        self._arrived.set()

    def _on_data(self, delivery: Delivery) -> None:
        self._buffer.append(delivery)
        self._remaining -= 1
        if self._remaining <= 0:
            self._open = False
        self._arrived.set()

    async def fetch(self, batch: int, timeout_s: float) -> list[Delivery]:
        """Up to ``batch`` messages; [] when none came within ``timeout_s``."""
        if not self._buffer:
            self._arrived.clear()
            if not self._open:
                self._open, self._remaining = True, batch
                request = {"batch": batch, "expires": int(timeout_s * 1e9)}
                await self.nc.publish(self.next_subject, json.dumps(request).encode(), reply=self.inbox)
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout_s + GRACE_S)
            except TimeoutError:
                self._open = False  # the request expired unseen (a reconnect): ask again
                return []
        buffer = self._buffer
        if len(buffer) <= batch:
            out = list(buffer)
            buffer.clear()
            return out
        return [buffer.popleft() for _ in range(batch)]
