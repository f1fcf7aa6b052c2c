"""Reading the event log for the auditor: from the stream or from a JSONL export.

``socai events export`` writes one event a line, in one of two forms that ``socai audit
--events`` reads back alike:

- ``jsonl``: the event in the protobuf JSON mapping (``socai.events.codec.to_json``), for
  people and other tools. It keeps no bytes and no headers, so an audit of it checks no
  hand seal.
- ``stored``: each message exactly as the stream stores it, ``{"stream_seq": 17,
  "subject": "socai.events.t1.t1-h3", "headers": {"Socai-Prev": "…"}, "data": "<base64 of
  the payload>"}`` with the hand-chain headers only (``socai.events.seal.CHAIN_HEADERS``).
  An audit of it checks every hand's chain and seal offline, as it does on the stream: the
  file proves which messages the table wrote. The golden corpus (tests/golden) is kept in
  this form. Its first line is a header, ``{"format": "socai.events.stored", "version": 1,
  "stream": …, "prefix": …, "exported_at": …, "tables": […], "games": […], "since": …,
  "until": …}``: which version of this format the lines follow and what the export
  selected, so an audit knows a period's export from the whole log (a file without a
  header is version 1 of the whole log, as exports written before headers were). The
  lines follow ``schemas/events-stored.v1.schema.json``; a reader refuses a version it
  does not know.

Filters apply to
whole hands, so an export never cuts a hand in half: a hand is in when its first event
(HandStarted) is of a selected table and game and occurred in ``[since, until)``; a table's
own facts (TableOpened, PlayerSeated …) are in when their table and time are.

The stream is read with batched direct gets like ``EventLog.read``, but messages are kept
as they are stored (``RawEvent``): an auditor must report a message that does not decode,
not stop at it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from google.protobuf.descriptor import FieldDescriptor

from socai import errors
from socai.events import codec, seal
from socai.events.log import EventLog, direct_get
from socai.events.model import TABLE_BODY_TYPES, Event
from socai.gen.events.v1 import events_pb2

TABLE_BODY_FIELDS: Final = frozenset(codec.BODY_FIELD[t] for t in TABLE_BODY_TYPES)
_TABLE_BODIES: Final = frozenset(TABLE_BODY_TYPES)
STORED_FORMAT: Final = "socai.events.stored"
STORED_VERSION: Final = 1  # of the stored form's lines (schemas/events-stored.v1.schema.json)
JSONL_LINE_MAX_CHARS: Final = 2 * 1024 * 1024  # the stream's max message (1 MiB) in base64, with room
STORED_KEYS: Final = frozenset({"stream_seq", "subject", "headers", "data"})  # a ``stored`` line


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One stored message: its stream sequence (0 from a file), subject and the event as a
    protobuf message (``message``), or ``error`` when the payload is not an Event.

    An event read from a JSONL export comes as its domain event (``event``) when it reads
    straight into one (``event_of_json``): its protobuf is then built only when asked for,
    since building every event's protobuf and converting it back was most of an offline
    audit's reading (the replay takes the domain event as it is)."""

    stream_seq: int
    subject: str
    proto: events_pb2.Event | None  # ``message``: kept or built from ``event``
    error: str = ""
    table_hint: str = ""  # where an undecodable line says it belongs, when it says so
    hand_hint: str = ""
    # From the stream only: the bytes as stored and the hand-chain headers, which the audit
    # checks the table's seal with (``socai.events.seal``). A JSONL export has neither.
    payload: bytes = b""
    chain_headers: tuple[tuple[str, str], ...] = ()
    event: Event | None = None  # the domain event, when it was read straight into one

    @property
    def message(self) -> events_pb2.Event | None:
        msg = self.proto
        if msg is None and self.event is not None:
            msg = codec.to_proto(self.event)
            object.__setattr__(self, "proto", msg)  # built once (a frozen record's cache)
        return msg

    @property
    def decoded(self) -> Event | events_pb2.Event | None:
        """What the replay takes: the domain event when there is one, else the protobuf."""
        return self.event if self.event is not None else self.proto

    @property
    def table_id(self) -> str:
        if self.event is not None and self.event.table_id:
            return self.event.table_id
        if self.proto is not None and self.proto.table_id:
            return self.proto.table_id
        if self.table_hint:
            return self.table_hint
        parts = self.subject.rsplit(".", 2)
        return parts[1] if len(parts) == 3 else ""

    @property
    def hand_id(self) -> str:
        if self.event is not None and self.event.hand_id:
            return self.event.hand_id
        if self.proto is not None and self.proto.hand_id:
            return self.proto.hand_id
        if self.hand_hint:
            return self.hand_hint
        return self.subject.rsplit(".", 1)[-1] if "." in self.subject else ""

    @property
    def is_table_fact(self) -> bool:
        if self.event is not None:
            return type(self.event.body) in _TABLE_BODIES
        return self.proto is not None and self.proto.WhichOneof("body") in TABLE_BODY_FIELDS


@dataclass
class EventFilter:
    """Which hands and table facts to keep. Empty sets select everything."""

    tables: frozenset[str] = frozenset()
    games: frozenset[str] = frozenset()
    since: datetime | None = None
    until: datetime | None = None
    _hands: dict[tuple[str, str], bool] = field(default_factory=dict)

    @property
    def is_everything(self) -> bool:
        return not (self.tables or self.games or self.since or self.until)

    def keep(self, table_id: str, hand_id: str, game: str, at: datetime | None, table_fact: bool) -> bool:
        if self.tables and table_id not in self.tables:
            return False
        if table_fact:
            return self._in_time(at)
        key = (table_id, hand_id)
        decided = self._hands.get(key)
        if decided is None:
            decided = self._hands[key] = (not self.games or game in self.games) and self._in_time(at)
        return decided

    def _in_time(self, at: datetime | None) -> bool:
        if at is None:
            return self.since is None and self.until is None
        if self.since is not None and at < self.since:
            return False
        return not (self.until is not None and at >= self.until)

    def keep_raw(self, raw: RawEvent) -> bool:
        msg = raw.message
        if msg is None:
            return not self.tables or raw.table_id in self.tables
        at = msg.occurred_at.ToDatetime(tzinfo=UTC) if msg.HasField("occurred_at") else None
        return self.keep(raw.table_id, raw.hand_id, msg.game, at, raw.is_table_fact)


async def read_stream(
    event_log: EventLog, flt: EventFilter | None = None, *, after_seq: int = 0
) -> AsyncIterator[RawEvent]:
    """Every stored message of the log's prefix (or of the selected tables), in stream order
    per subject, filtered by ``flt``; only those stored after stream sequence ``after_seq``
    (a reader that keeps up with the stream reads each message once)."""
    flt = flt or EventFilter()
    await event_log.layout()  # a table's subjects under every P the stream has had
    subjects = [f for t in sorted(flt.tables) for f in event_log.filters(f"{event_log.prefix}.{t}.>")]
    subjects = subjects or [f"{event_log.prefix}.>"]
    for subj in subjects:
        async for raw in _read_raw(event_log, subj, after_seq + 1):
            if flt.keep_raw(raw):
                yield raw


async def _read_raw(event_log: EventLog, subj: str, seq: int = 1) -> AsyncIterator[RawEvent]:
    async with contextlib.aclosing(direct_get(event_log.nc, event_log.stream, subj, seq)) as messages:
        async for m in messages:
            chain = tuple((k, m.headers[k]) for k in seal.CHAIN_HEADERS if k in m.headers)
            yield _decode(m.stream_seq, m.subject, m.data, chain)


def _decode(stream_seq: int, subject: str, data: bytes, chain: tuple[tuple[str, str], ...] = ()) -> RawEvent:
    msg = events_pb2.Event()
    try:
        msg.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError is a bare Exception subclass
        error = f"stream seq {stream_seq} on {subject}: not an Event message: {exc}"
        return RawEvent(stream_seq, subject, None, error, payload=data, chain_headers=chain)
    if msg.WhichOneof("body") is None:
        error = f"stream seq {stream_seq} on {subject}: an Event without a body"
        return RawEvent(stream_seq, subject, None, error, payload=data, chain_headers=chain)
    return RawEvent(stream_seq, subject, msg, payload=data, chain_headers=chain)


def write_jsonl(events: Iterable[RawEvent | Event | events_pb2.Event], out: IO[str]) -> int:
    """Write events one a line (protobuf JSON mapping, keys in proto field names); returns
    how many. A message that did not decode is written as ``{"undecodable": …}`` so the
    export keeps the evidence."""
    count = 0
    for item in events:
        if isinstance(item, RawEvent):
            if item.message is None:
                line: Mapping[str, Any] = {"undecodable": item.error, "subject": item.subject}
            else:
                line = codec.to_json(item.message)
        else:
            line = codec.to_json(item)
        out.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
        count += 1
    return count


@dataclass(frozen=True)
class ExportHeader:
    """The first line of a ``stored`` export: the format's version and what was selected
    (times as RFC 3339 text, "" when open)."""

    version: int = STORED_VERSION
    stream: str = ""
    prefix: str = ""
    exported_at: str = ""
    tables: tuple[str, ...] = ()
    games: tuple[str, ...] = ()
    since: str = ""
    until: str = ""

    @property
    def is_everything(self) -> bool:
        return not (self.tables or self.games or self.since or self.until)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": STORED_FORMAT,
            "version": self.version,
            "stream": self.stream,
            "prefix": self.prefix,
            "exported_at": self.exported_at,
            "tables": list(self.tables),
            "games": list(self.games),
            "since": self.since or None,
            "until": self.until or None,
        }

    @classmethod
    def of(cls, flt: EventFilter, *, stream: str, prefix: str, exported_at: datetime) -> ExportHeader:
        return cls(
            STORED_VERSION,
            stream,
            prefix,
            _rfc3339(exported_at),
            tuple(sorted(flt.tables)),
            tuple(sorted(flt.games)),
            _rfc3339(flt.since) if flt.since else "",
            _rfc3339(flt.until) if flt.until else "",
        )

    @classmethod
    def parse(cls, obj: Mapping[str, Any], where: str) -> ExportHeader:
        """Raises InvalidArgument("BAD_FILE") for another format or a version this reader does not know."""
        if obj.get("format") != STORED_FORMAT:
            raise errors.InvalidArgument("BAD_FILE", f"{where}: not a socai events export ({obj.get('format')!r})")
        version = obj.get("version")
        if type(version) is not int or not 1 <= version <= STORED_VERSION:
            raise errors.InvalidArgument(
                "BAD_FILE", f"{where}: format version {version!r}; this socai reads versions 1 to {STORED_VERSION}"
            )

        def text(key: str) -> str:
            value = obj.get(key)
            return value if isinstance(value, str) else ""

        def names(key: str) -> tuple[str, ...]:
            value = obj.get(key)
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        return cls(
            version,
            text("stream"),
            text("prefix"),
            text("exported_at"),
            names("tables"),
            names("games"),
            text("since"),
            text("until"),
        )


def _rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def write_stored_jsonl(raws: Iterable[RawEvent], out: IO[str], header: ExportHeader | None = None) -> int:
    """Write messages one a line in the ``stored`` form (the module docstring), after the
    ``header`` line when one is given: the payload as stored, base64, with its stream
    sequence, subject and hand-chain headers; returns how many messages. A message that did
    not decode is kept as it was stored, like any other."""
    if header is not None:
        out.write(json.dumps(header.as_json(), separators=(",", ":"), ensure_ascii=False) + "\n")
    count = 0
    for raw in raws:
        line = {
            "stream_seq": raw.stream_seq,
            "subject": raw.subject,
            "headers": dict(raw.chain_headers),
            "data": base64.b64encode(raw.payload).decode("ascii"),
        }
        out.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
        count += 1
    return count


def stored_line(obj: Mapping[str, Any], where: str) -> RawEvent:
    """A ``stored`` line's message, decoded as it is from the stream (``_decode``); a line
    whose fields have the wrong types is a ``RawEvent`` with ``error`` set."""
    seq, subject, headers, data = obj.get("stream_seq"), obj.get("subject"), obj.get("headers"), obj.get("data")
    if type(seq) is not int or seq < 0 or not isinstance(subject, str) or not isinstance(data, str):
        return RawEvent(0, where, None, f"{where}: a stored message needs stream_seq (int), subject and data (text)")
    if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
        return RawEvent(seq, subject, None, f"{where}: headers must map names to text")
    try:
        payload = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return RawEvent(seq, subject, None, f"{where}: data is not base64")
    chain = tuple((k, str(headers[k])) for k in seal.CHAIN_HEADERS if k in headers)
    return _decode(seq, subject, payload, chain)


def read_jsonl(path: Path | str) -> Iterator[RawEvent]:
    """The events of a JSONL export (either form), in file order.

    A ``jsonl`` line becomes a ``RawEvent`` with stream_seq 0 and no bytes; a ``stored``
    line one with its stream sequence, subject, bytes and chain headers, as read from the
    stream. A line that is not JSON or not an Event becomes one with ``error`` set
    ("line 7: …") rather than stopping the audit. Raises InvalidArgument("BAD_FILE") when
    the file cannot be opened. A ``.gz`` file is read through gzip.
    """
    from google.protobuf import json_format

    source = Path(path)
    if not source.is_file():
        raise errors.InvalidArgument("BAD_FILE", f"cannot read {path}: no such file")
    with _open_text(source) as handle:
        for number, line in enumerate(handle, start=1):
            text = line.strip()
            if not text:
                continue
            where = f"line {number}"
            if number == 1 and text.startswith('{"format"'):
                ExportHeader.parse(json.loads(text), f"{path} {where}")  # refuses a version it cannot read
                continue
            if len(text) > JSONL_LINE_MAX_CHARS:
                yield RawEvent(0, where, None, f"{where}: longer than {JSONL_LINE_MAX_CHARS} characters")
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield RawEvent(0, where, None, f"{where}: not JSON: {exc.msg}")
                continue
            if isinstance(obj, dict) and obj.keys() == STORED_KEYS:
                yield stored_line(obj, where)
                continue
            if not isinstance(obj, dict) or "undecodable" in obj:
                detail = obj.get("undecodable") if isinstance(obj, dict) else "not a JSON object"
                yield RawEvent(0, where, None, f"{where}: {detail}")
                continue
            event = event_of_json(obj)
            if event is not None:
                yield RawEvent(0, where, None, event=event)
                continue
            msg = events_pb2.Event()
            try:
                parse_event_json(obj, msg)
            except json_format.ParseError as exc:
                event_id = str(obj.get("event_id", ""))
                yield RawEvent(
                    0,
                    where,
                    None,
                    f"{event_id or where}: not an Event: {exc}",
                    table_hint=str(obj.get("table_id", "")),
                    hand_hint=str(obj.get("hand_id", "")),
                )
                continue
            yield RawEvent(0, where, msg)


def read_header(path: Path | str) -> ExportHeader | None:
    """The header of an export (its first line), or None for a file without one (a ``jsonl``
    export, or a ``stored`` one written before headers). Raises InvalidArgument("BAD_FILE")
    as ``read_jsonl`` does."""
    source = Path(path)
    if not source.is_file():
        raise errors.InvalidArgument("BAD_FILE", f"cannot read {path}: no such file")
    with _open_text(source) as handle:
        first = handle.readline(JSONL_LINE_MAX_CHARS).strip()
    if not first.startswith('{"format"'):
        return None
    try:
        obj = json.loads(first)
    except json.JSONDecodeError as exc:
        raise errors.InvalidArgument("BAD_FILE", f"{path} line 1: not JSON: {exc.msg}") from exc
    return ExportHeader.parse(obj, f"{path} line 1")


def _open_text(source: Path) -> IO[str]:
    if source.suffix == ".gz":
        import gzip

        return gzip.open(source, "rt", encoding="utf-8")
    return source.open(encoding="utf-8")


def has_stored(raws: Iterable[RawEvent]) -> bool:
    """Whether any of ``raws`` carries its stored bytes (a stream read or a ``stored`` file)."""
    return any(r.payload for r in raws)


# --- a fast path for the protobuf JSON mapping ---------------------------------------------

_TIMESTAMP = "google.protobuf.Timestamp"
_INT_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_UINT32,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_FIXED32,
        FieldDescriptor.TYPE_SFIXED32,
    }
)


def parse_event_json(obj: Mapping[str, Any], msg: events_pb2.Event) -> None:
    """``json_format.ParseDict(obj, msg)``, several times faster on what an export holds.

    ``ParseDict`` (pure Python, ``strptime`` for every timestamp) was most of an offline
    audit's time. This walks the message descriptors directly for the shapes events use;
    anything it does not recognise (an unknown field, a value of the wrong type, a
    timestamp with nanoseconds) goes to ``ParseDict`` itself, so errors and edge cases
    are exactly the library's. Raises ``json_format.ParseError``.
    """
    from google.protobuf import json_format

    try:
        _fill_fast(obj, msg)
    except _Fallback:
        msg.Clear()
        json_format.ParseDict(dict(obj), msg)


class _Fallback(Exception):
    pass


# How ``_fill_fast`` fills each field, worked out once per (message type, JSON key) from the
# descriptors: an export repeats the same few keys on every line, and reading a field's
# type, label and options from its descriptor each time was most of the walk.
_MAP, _MESSAGES, _TIME, _MESSAGE, _SCALARS, _SCALAR = range(6)
_plans: dict[tuple[Any, str], tuple[int, Any]] = {}


def _plan(descriptor: Any, key: str) -> tuple[int, Any] | None:
    """How to fill ``key`` of a ``descriptor`` message: its kind and its field, or for a
    scalar the function that reads its JSON value (None: no such field, never kept)."""
    found = _plans.get((descriptor, key))
    if found is not None:
        return found
    field = descriptor.fields_by_name.get(key)
    if field is None:
        return None
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.GetOptions().map_entry:
            kind = _MAP
        elif field.is_repeated:
            kind = _MESSAGES
        elif field.message_type.full_name == _TIMESTAMP:
            kind = _TIME
        else:
            kind = _MESSAGE
    else:
        kind = _SCALARS if field.is_repeated else _SCALAR
        # The field's own reader (no descriptor read per value); an integer past its field's
        # range goes to ParseDict, whose ParseError names it (setattr would raise ValueError).
        field = _checked_reader(field) or _no_value
    plan = _plans[(descriptor, key)] = (kind, field)
    return plan


def _fill_fast(obj: Mapping[str, Any], msg: Any) -> None:
    descriptor = msg.DESCRIPTOR
    for key, value in obj.items():
        plan = _plan(descriptor, key)
        if plan is None or value is None:
            raise _Fallback
        kind, field = plan
        if kind == _SCALAR:
            setattr(msg, key, field(value))
        elif kind == _MESSAGES:
            if not isinstance(value, list):
                raise _Fallback
            container = getattr(msg, key)
            for item in value:
                if not isinstance(item, dict):
                    raise _Fallback
                _fill_fast(item, container.add())
        elif kind == _MESSAGE:
            if not isinstance(value, dict):
                raise _Fallback
            sub = getattr(msg, key)
            sub.SetInParent()
            _fill_fast(value, sub)
        elif kind == _TIME:
            _timestamp(value, getattr(msg, key))
        elif kind == _SCALARS:
            if not isinstance(value, list):
                raise _Fallback
            getattr(msg, key).extend([field(v) for v in value])
        else:  # _MAP
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise _Fallback
            getattr(msg, key).update(value)


def _scalar_reader(field: Any) -> Callable[[Any], Any]:
    """How to read a JSON value of the scalar ``field``: chosen once from its descriptor."""
    kind = field.type
    if kind in _INT_TYPES:
        return _int_value
    if kind == FieldDescriptor.TYPE_STRING:
        return _str_value
    if kind == FieldDescriptor.TYPE_BOOL:
        return _bool_value
    if kind == FieldDescriptor.TYPE_ENUM:
        numbers = {value.name: value.number for value in field.enum_type.values}

        def enum_value(value: Any) -> Any:
            number = numbers.get(value) if isinstance(value, str) else None
            if number is None:
                raise _Fallback
            return number

        return enum_value
    return _no_value


_DECIMAL: Final = re.compile(r"-?[0-9]+")  # ASCII only: str.isdigit also takes "²", which int() refuses


def _int_value(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _Fallback
    if isinstance(value, str) and _DECIMAL.fullmatch(value) is None:
        raise _Fallback
    return int(value)


def _str_value(value: Any) -> str:
    if not isinstance(value, str):
        raise _Fallback
    return value


def _bool_value(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Fallback
    return value


def _no_value(value: Any) -> Any:
    raise _Fallback


def _timestamp(value: Any, target: Any) -> None:
    # Not ``FromDatetime``, whose calendar round trip was 7 % of an audit's replay of an
    # export (py-spy): 1.3 µs a time against 6.4 (timeit, this machine).
    codec.timestamp_into(target, _time_of(value))


# --- an export's events straight to domain events ------------------------------------------

_MISSING: Final = object()
_ENVELOPE_KEYS: Final = frozenset({"event_id", "table_id", "hand_id", "seq", "game", "occurred_at"})
_BODY_OF_KEY: Final = {name: cls for cls, name in codec.BODY_FIELD.items()}
_EVENT_FIELDS: Final = events_pb2.Event.DESCRIPTOR.fields_by_name
_NEW_EVENT: Final = codec.builder(Event)  # Event(table_id, hand_id, seq, game, occurred_at, body)
_INT_RANGES: Final = {
    **dict.fromkeys(
        (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32), (-(2**31), 2**31)
    ),
    **dict.fromkeys((FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32), (0, 2**32)),
    **dict.fromkeys(
        (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64), (-(2**63), 2**63)
    ),
    **dict.fromkeys((FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64), (0, 2**64)),
}
# A time as an export writes it: UTC, at most microseconds (a datetime holds no more).
_EXPORT_TIME: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z")


def _checked_reader(field: Any) -> Callable[[Any], Any] | None:
    """``_scalar_reader``'s reader, an integer also held to its field's range (which the
    protobuf would refuse past); None for a scalar type it does not read."""
    read = _scalar_reader(field)
    if read is _no_value:
        return None
    bounds = _INT_RANGES.get(field.type)
    if bounds is None:
        return read
    low, high = bounds

    def int_in_range(value: Any) -> int:
        number = value if type(value) is int else _int_value(value)
        if not low <= number < high:
            raise _Fallback
        return number

    return int_in_range


_SEQ: Final = _checked_reader(_EVENT_FIELDS["seq"]) or _no_value
# Each domain class's reader of a JSON object (None: a class this reader does not handle,
# whose events take the protobuf path).
_json_decoders: dict[type, Callable[[Any], Any] | None] = {}


def event_of_json(obj: Mapping[str, Any]) -> Event | None:
    """The domain event of an export's JSON object, read without building its protobuf;
    None when the object is anything but the plain shape an export writes (an unknown or
    camelCase key, a value of another JSON type, a time with nanoseconds, a bad card, an
    unspecified enum, an event_id that is not its hand's and seq's): the caller then reads
    it through the protobuf (``parse_event_json``, ``codec.from_proto``), whose verdict,
    errors included, stands. Where it returns an event, that event equals what the protobuf
    path gives (``tests/unit/audit/test_export_json.py``, over every game's hands)."""
    try:
        body_key = None
        for key in obj:
            if key not in _ENVELOPE_KEYS:
                if body_key is not None or key not in _BODY_OF_KEY:
                    return None
                body_key = key
        if body_key is None:
            return None
        body_value = obj[body_key]
        decode = _json_decoder(_BODY_OF_KEY[body_key])
        if decode is None or not isinstance(body_value, dict):
            return None
        seq = obj.get("seq", _MISSING)
        event: Event = _NEW_EVENT(
            _str_value(obj.get("table_id", "")),
            _str_value(obj.get("hand_id", "")),
            0 if seq is _MISSING else _SEQ(seq),
            _str_value(obj.get("game", "")),
            _time_of(obj.get("occurred_at", _MISSING)),
            decode(body_value),
        )
        if event.event_id != obj.get("event_id", ""):
            return None
        return event
    except (_Fallback, errors.InvalidArgument, ValueError, TypeError):
        return None


def _time_of(value: Any) -> datetime:
    """A time as an export writes it ("2026-11-29T12:00:00.006Z"), else ``_Fallback``: a
    datetime holds microseconds exactly, so more digits, an offset or any other spelling are
    the library's to read (``ParseDict``)."""
    if not isinstance(value, str) or _EXPORT_TIME.fullmatch(value) is None:
        raise _Fallback
    try:
        # "+00:00" gives the UTC singleton itself (a tenth of ``replace(tzinfo=UTC)``'s cost).
        return datetime.fromisoformat(value[:-1] + "+00:00")
    except ValueError as exc:  # a month 13, a day 31 in April
        raise _Fallback from exc


def _json_decoder(cls: type) -> Callable[[Any], Any] | None:
    if cls in _json_decoders:
        return _json_decoders[cls]
    _json_decoders[cls] = None  # while planned (a class that held itself would be refused)
    descriptor = getattr(events_pb2, cls.__name__, None)
    decode = None if descriptor is None else _plan_json(cls, descriptor.DESCRIPTOR)
    _json_decoders[cls] = decode
    return decode


def _plan_json(cls: type, descriptor: Any) -> Callable[[Any], Any] | None:
    """``decode(obj) -> cls(...)``: each field read from the JSON value as the protobuf JSON
    mapping writes it and converted by ``codec.field_converter``, as ``from_proto`` would
    have converted the protobuf's value; a missing key is the field's protobuf default."""
    steps: list[tuple[str, Callable[[Any], Any]]] = []
    for f in dataclasses.fields(cls):
        field = descriptor.fields_by_name.get(f.name)
        if field is None:
            return None
        step = _json_step(cls, f.name, field)
        if step is None:
            return None
        steps.append((f.name, step))
    # ``build(step0(obj.get("a", MISSING)), …)`` made once per class, as ``codec`` makes its
    # protobuf decoders (``codec.builder``: the record through its slots): a third of a dict
    # comprehension's and ``cls(**kwargs)``'s cost.
    namespace: dict[str, Any] = {"build": codec.builder(cls), "names": frozenset(name for name, _ in steps)}
    namespace.update(dict=dict, Fallback=_Fallback, MISSING=_MISSING)
    arguments = []
    for n, (name, step) in enumerate(steps):
        namespace[f"step{n}"] = step
        arguments.append(f"step{n}(obj.get({name!r}, MISSING))")
    source = (
        "def decode(obj):\n"
        "    if type(obj) is not dict or not obj.keys() <= names:\n"
        "        raise Fallback\n"
        f"    return build({', '.join(arguments)})\n"
    )
    exec(compile(source, f"<socai.audit.export JSON reader of {cls.__name__}>", "exec"), namespace)
    decode: Callable[[Any], Any] = namespace["decode"]
    return decode


def _json_step(cls: type, name: str, field: Any) -> Callable[[Any], Any] | None:
    """How to read one field's JSON value (``_MISSING`` when the key is absent)."""
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type != FieldDescriptor.TYPE_STRING:
                return None
            convert_map = codec.field_converter(cls, name) or dict

            def map_step(value: Any) -> Any:
                if value is _MISSING:
                    return convert_map({})
                if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                    raise _Fallback
                return convert_map(value)

            return map_step
        nested_cls = codec.nested_class(field.message_type.name)
        nested = None if nested_cls is None else _json_decoder(nested_cls)
        if nested is None:
            return None
        decode_nested = nested
        if field.is_repeated:

            def messages_step(value: Any) -> Any:
                if value is _MISSING:
                    return ()
                if not isinstance(value, list):
                    raise _Fallback
                return tuple([decode_nested(item) for item in value])

            return messages_step

        def message_step(value: Any) -> Any:
            return decode_nested({} if value is _MISSING else value)

        return message_step
    read = _checked_reader(field)
    if read is None:
        return None
    convert = codec.field_converter(cls, name)
    if field.is_repeated:
        convert_items = convert or tuple

        def scalars_step(value: Any) -> Any:
            if value is _MISSING:
                return convert_items([])
            if not isinstance(value, list):
                raise _Fallback
            return convert_items([read(v) for v in value])

        return scalars_step
    default = field.default_value
    if convert is None:
        return lambda value: default if value is _MISSING else read(value)
    convert_one = convert
    return lambda value: convert_one(default if value is _MISSING else read(value))
