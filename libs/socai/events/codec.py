"""Domain events ↔ protobuf ↔ JSON, generically.

Each domain body class in ``socai.events.model`` has a protobuf message of the same name
with the same field names; this module converts between them by reflection, so adding a
body means adding it in both places and nothing here. Conventions: ``Card`` ↔ ``"As"``
(``DealtCard.card`` may be ``""``: ``HIDDEN_CARD``, a card the log writes by position,
``socai.events.hidden``);
``tuple`` ↔ ``repeated``; ``StrEnum`` ↔ proto enum ``{ENUM}_{VALUE}``; ``Mapping`` ↔ ``map``;
``datetime`` ↔ ``Timestamp``. JSON is the protobuf JSON mapping (int64 as strings), used by
``socai events export`` and read back by the auditor.

This is the only module where event protobufs meet the domain.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import Message

from socai.cards import ALL_CARDS, Card, parse_card
from socai.errors import InvalidArgument
from socai.events import model
from socai.gen.events.v1 import events_pb2

ALL_BODY_TYPES: tuple[type, ...] = model.BODY_TYPES + model.TABLE_BODY_TYPES
_BY_NAME: dict[str, type] = {cls.__name__: cls for cls in ALL_BODY_TYPES}
_NESTED: dict[str, type] = {"SeatInfo": model.SeatInfo, "DealtCard": model.DealtCard, "Meld": model.Meld}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


BODY_FIELD: dict[type, str] = {cls: _snake(cls.__name__) for cls in ALL_BODY_TYPES}
_FIELD_BODY: dict[str, type] = {v: k for k, v in BODY_FIELD.items()}


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _enum_prefix(enum_cls: type[StrEnum]) -> str:
    return _snake(enum_cls.__name__).upper() + "_"


def _value_to_proto(value: Any, hint: Any, target: Message, name: str) -> None:
    origin = typing.get_origin(hint)
    if hint is Card:
        setattr(target, name, str(value))
    elif isinstance(hint, type) and issubclass(hint, StrEnum):
        setattr(target, name, getattr(events_pb2, _enum_prefix(hint) + value.name))
    elif origin in (tuple, list):
        (item_hint, *_) = typing.get_args(hint)
        container = getattr(target, name)
        for item in value:
            if item_hint is Card:
                container.append(str(item))
            elif dataclasses.is_dataclass(item_hint):
                _fill_by_reflection(container.add(), item)
            else:
                container.append(item)
    elif origin in (Mapping, dict) or hint is Mapping:
        getattr(target, name).update(dict(value))
    elif dataclasses.is_dataclass(hint):
        _fill_by_reflection(getattr(target, name), value)
    else:
        setattr(target, name, value)


def _fill_by_reflection(target: Message, obj: Any) -> Message:
    """The definition of encoding: every field of ``obj`` by its type hint, read for every
    value. ``_fill`` (planned once per class) must give the same message; the codec's tests
    hold the two byte-equal over every body of the golden corpus and of self-play."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        _value_to_proto(getattr(obj, f.name), hints[f.name], target, f.name)
    return target


# Encoding is planned once per class (``_plan_encoder``): reading the type hints of every
# field of every value made encoding most of the table service's cost of an event (the
# hand's log and every watcher's legal moves).
Filler = Callable[[Message, Any], Message]
_ENCODERS: dict[type, Filler] = {}


def _fill(target: Message, obj: Any) -> Message:
    """``obj``'s fields into ``target`` (its message, empty), as ``_fill_by_reflection``."""
    fill = _ENCODERS.get(type(obj))
    if fill is None:
        fill = _ENCODERS[type(obj)] = _plan_encoder(type(obj))
    return fill(target, obj)


def _plan_encoder(cls: type) -> Filler:
    """How to fill a message from a ``cls``: its plain fields set as they are, the others
    each by a step chosen here from the field's type hint, as ``_value_to_proto`` chooses."""
    hints = _hints(cls)
    plain: list[str] = []
    steps: list[Callable[[Message, Any], None]] = []
    for f in dataclasses.fields(cls):
        step = _field_step(f.name, hints[f.name])
        if step is None:
            plain.append(f.name)
        else:
            steps.append(step)
    names = tuple(plain)
    planned = tuple(steps)

    def fill(target: Message, obj: Any) -> Message:
        for name in names:
            setattr(target, name, getattr(obj, name))
        for each in planned:
            each(target, obj)
        return target

    return fill


def _field_step(name: str, hint: Any) -> Callable[[Message, Any], None] | None:
    """How ``_fill`` writes field ``name`` of type ``hint`` (None: set as it is)."""
    origin = typing.get_origin(hint)
    if hint is Card:

        def card(target: Message, obj: Any) -> None:
            setattr(target, name, str(getattr(obj, name)))

        return card
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        numbers = {member: getattr(events_pb2, _enum_prefix(hint) + member.name) for member in hint}

        def enum(target: Message, obj: Any) -> None:
            setattr(target, name, numbers[getattr(obj, name)])

        return enum
    if origin in (tuple, list):
        (item_hint, *_) = typing.get_args(hint)
        if item_hint is Card:

            def cards(target: Message, obj: Any) -> None:
                getattr(target, name).extend([str(c) for c in getattr(obj, name)])

            return cards
        if dataclasses.is_dataclass(item_hint):

            def messages(target: Message, obj: Any) -> None:
                container = getattr(target, name)
                for item in getattr(obj, name):
                    _fill(container.add(), item)

            return messages

        def values(target: Message, obj: Any) -> None:
            getattr(target, name).extend(getattr(obj, name))

        return values
    if origin in (Mapping, dict) or hint is Mapping:

        def mapping(target: Message, obj: Any) -> None:
            getattr(target, name).update(dict(getattr(obj, name)))

        return mapping
    if dataclasses.is_dataclass(hint):

        def message(target: Message, obj: Any) -> None:
            _fill(getattr(target, name), getattr(obj, name))

        return message
    return None


def _value_from_proto(raw: Any, hint: Any) -> Any:
    conv = _converter(hint)
    return raw if conv is None else conv(raw)


# Decoding is compiled once per class into a function (``_compile_decoder``): reflecting
# over type hints for every field of every event made decoding the largest cost of a
# replay (settlement and the auditor decode every event of every hand).
_DECODERS: dict[type, Callable[[Any], Any]] = {}
# Small frozen values decoded so often that their decoder keeps each one it built, by its
# raw fields: a deal is dozens of DealtCards, and building one (a card lookup and a frozen
# dataclass) cost a replay ~1 µs where a lookup costs ~0.3. Bounded: a stream of made-up
# seats cannot grow it past SHARED_MAX (past it, values are built as before).
_SHARED: Final = frozenset({model.DealtCard})
SHARED_MAX: Final = 8192
_CARD_BY_TEXT: dict[str, Card] = {str(c): c for c in ALL_CARDS}


def _card(raw: Any) -> Card:
    card = _CARD_BY_TEXT.get(raw) if isinstance(raw, str) else None
    return card if card is not None else parse_card(raw)


def _cards(raw: Any) -> tuple[Card, ...]:
    """Repeated cards: each looked up by its text in C (``map`` over the table's lookup); a
    text that is not a card's goes through ``_card``, whose error names it."""
    try:
        return tuple(map(_CARD_BY_TEXT.__getitem__, raw))
    except (KeyError, TypeError):
        return tuple([_card(x) for x in raw])


def _dealt_card(raw: Any) -> Card:
    """A ``DealtCard.card``: "" is a card dealt face down in a hand that writes those by
    position (``socai.events.hidden``, which checks where it may stand), not a bad card."""
    return model.HIDDEN_CARD if raw == "" else _card(raw)


# Fields decoded otherwise than their type says: only a dealt card may be written empty.
_FIELD_CONVERTERS: dict[tuple[type, str], Callable[[Any], Any]] = {(model.DealtCard, "card"): _dealt_card}


def _enum_converter(hint: type[StrEnum]) -> Callable[[Any], Any]:
    prefix = _enum_prefix(hint)
    if hint is model.ActionKind:
        members: dict[int, Any] = {}
        for number in events_pb2.ActionKind.values():
            name = events_pb2.ActionKind.Name(number)
            if name.startswith(prefix) and name != prefix + "UNSPECIFIED":
                members[number] = hint[name[len(prefix) :]]

        def action_kind(raw: Any) -> Any:
            member = members.get(raw)
            if member is None:
                raise InvalidArgument("BAD_EVENT", f"{hint.__name__} is unspecified")
            return member

        return action_kind

    def by_name(raw: Any) -> Any:
        name = str(raw)
        if not name.startswith(prefix) or name == prefix + "UNSPECIFIED":
            raise InvalidArgument("BAD_EVENT", f"{hint.__name__} is unspecified")
        return hint[name[len(prefix) :]]

    return by_name


def _converter(hint: Any) -> Callable[[Any], Any] | None:
    """How to turn a protobuf value into the domain value of ``hint`` (None: as it is)."""
    origin = typing.get_origin(hint)
    if hint is Card:
        return _card
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return _enum_converter(hint)
    if origin in (tuple, list):
        (item_hint, *_) = typing.get_args(hint)
        if item_hint is Card:
            return _cards
        item = _converter(item_hint)
        if item is None:
            return tuple
        convert_item = item
        # ``map`` iterates in C: a deal's DealtCards a third faster than a list comprehension.
        return lambda raw: tuple(map(convert_item, raw))
    if origin in (Mapping, dict) or hint is Mapping:
        return dict
    if dataclasses.is_dataclass(hint):
        return _decoder(hint)  # type: ignore[arg-type]
    if hint is int:
        return int
    return None


def field_converter(cls: type, name: str) -> Callable[[Any], Any] | None:
    """How ``from_proto`` turns the protobuf value of the scalar, repeated scalar or map field
    ``name`` of the domain class ``cls`` into its domain value (None: taken as it is); a reader
    of the same values from elsewhere (the auditor's JSON reader, ``socai.audit.export``)
    converts them the same way through it."""
    return _FIELD_CONVERTERS.get((cls, name)) or _converter(_hints(cls)[name])


def _decoder(cls: type) -> Callable[[Any], Any]:
    decode_msg = _DECODERS.get(cls)
    if decode_msg is None:
        decode_msg = _DECODERS[cls] = _compile_decoder(cls)
    return decode_msg


def _slot_setters(cls: type) -> list[Any] | None:
    """Each field's slot setter, in field order, for a frozen slots dataclass built without its
    ``__init__`` (``_compile_decoder``, ``_new_event``); None for a class that must be built
    through it (no slots, a ``__post_init__``). Its generated ``__init__`` sets each field by
    ``object.__setattr__`` (a frozen class refuses plain assignment): 1.06 µs for a 6-field
    record against 0.56 by the slots' own setters (timeit, this machine)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or hasattr(cls, "__post_init__"):
        return None
    setters = []
    for f in dataclasses.fields(cls):
        slot = cls.__dict__.get(f.name)
        if slot is None or type(slot).__name__ != "member_descriptor":
            return None
        setters.append(slot.__set__)
    return setters


def _build_source(cls: type, values: list[str], namespace: dict[str, Any], indent: str, target: str) -> str:
    """Lines that build ``cls`` from the expressions ``values`` (in field order) into ``target``."""
    setters = _slot_setters(cls)
    if setters is None:
        names = [f.name for f in dataclasses.fields(cls)]
        arguments = ", ".join(f"{name}={value}" for name, value in zip(names, values, strict=True))
        return f"{indent}{target} = cls({arguments})\n"
    namespace["new"] = object.__new__
    lines = [f"{indent}{target} = new(cls)\n"]
    for n, (setter, value) in enumerate(zip(setters, values, strict=True)):
        namespace[f"set{n}"] = setter
        lines.append(f"{indent}set{n}({target}, {value})\n")
    return "".join(lines)


def _compile_decoder(cls: type) -> Callable[[Any], Any]:
    """``def decode(msg): return cls(a=msg.a, b=conv_b(msg.b), …)``, made once per class:
    every field read and converted inline (measured: a BetAction body in 1.0 µs, 1.5 µs by
    a loop over the fields that built a dict first), a frozen slots record filled through its
    slots (``_slot_setters``)."""
    hints = _hints(cls)
    namespace: dict[str, Any] = {"cls": cls}
    values = []
    for n, f in enumerate(dataclasses.fields(cls)):
        if not f.name.isidentifier():  # dataclass fields always are; be safe with exec
            raise TypeError(f"{cls.__name__}.{f.name} is not an identifier")
        conv = _FIELD_CONVERTERS.get((cls, f.name)) or _converter(hints[f.name])
        if conv is None:
            values.append(f"msg.{f.name}")
        else:
            namespace[f"conv{n}"] = conv
            values.append(f"conv{n}(msg.{f.name})")
    if cls in _SHARED:
        # Decoded once per distinct raw value and then shared (an immutable value).
        namespace["shared"] = {}
        key = "".join(f"msg.{f.name}, " for f in dataclasses.fields(cls))
        source = (
            f"def decode_{cls.__name__}(msg):\n"
            f"    key = ({key})\n"
            "    found = shared.get(key)\n"
            "    if found is None:\n"
            + _build_source(cls, values, namespace, "        ", "found")
            + f"        if len(shared) < {SHARED_MAX}:\n"
            "            shared[key] = found\n"
            "    return found\n"
        )
    else:
        source = (
            f"def decode_{cls.__name__}(msg):\n"
            + _build_source(cls, values, namespace, "    ", "built")
            + "    return built\n"
        )
    exec(compile(source, f"<socai.events.codec decoder of {cls.__name__}>", "exec"), namespace)
    decode: Callable[[Any], Any] = namespace[f"decode_{cls.__name__}"]
    return decode


def _compile_builder(cls: type) -> Callable[..., Any]:
    """``build(a, b, …)``: ``cls(a, b, …)`` by its fields in order, through the slots when
    ``_slot_setters`` allows."""
    names = [f"v{n}" for n in range(len(dataclasses.fields(cls)))]
    namespace: dict[str, Any] = {"cls": cls}
    source = (
        f"def build({', '.join(names)}):\n"
        + _build_source(cls, names, namespace, "    ", "built")
        + "    return built\n"
    )
    exec(compile(source, f"<socai.events.codec builder of {cls.__name__}>", "exec"), namespace)
    build: Callable[..., Any] = namespace["build"]
    return build


def body_into(target: Message, body: Any) -> Message:
    """``body`` written into ``target``, an empty message of its type held by a parent
    (a oneof member): marked present even when every field is at its default."""
    target.SetInParent()
    return _fill(target, body)


def body_from_proto(msg: Message) -> Any:
    """The domain body of a protobuf body message (cards parsed, enums checked)."""
    decode = _DECODER_BY_MESSAGE.get(type(msg))
    if decode is None:
        cls = _BY_NAME.get(type(msg).__name__) or _NESTED.get(type(msg).__name__)
        if cls is None:
            raise InvalidArgument("BAD_EVENT", f"no domain body for {type(msg).__name__}")
        decode = _DECODER_BY_MESSAGE[type(msg)] = _decoder(cls)
    return decode(msg)


_DECODER_BY_MESSAGE: dict[type, Callable[[Any], Any]] = {}


def nested_class(message_name: str) -> type | None:
    """The domain class of a body or nested protobuf message, by the message's name."""
    return _BY_NAME.get(message_name) or _NESTED.get(message_name)


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp_into(target: Any, at: datetime) -> None:
    """``at`` into the Timestamp ``target``: what ``Timestamp.FromDatetime`` sets (a naive time
    read as local, as it reads one), exact, without its calendar round trip (an event encoded
    and an export's time read by the auditor, ``socai.audit.export``, each pay it)."""
    if at.tzinfo is None:
        at = at.astimezone(UTC)
    since = at - _EPOCH
    target.seconds = since.days * 86_400 + since.seconds
    target.nanos = since.microseconds * 1000


def to_proto(event: model.Event) -> events_pb2.Event:
    msg = events_pb2.Event(
        event_id=event.event_id,
        table_id=event.table_id,
        hand_id=event.hand_id,
        seq=event.seq,
        game=event.game,
    )
    timestamp_into(msg.occurred_at, event.occurred_at)
    body_into(getattr(msg, BODY_FIELD[type(event.body)]), event.body)
    return msg


def _to_proto_by_reflection(event: model.Event) -> events_pb2.Event:
    """The definition ``to_proto`` is held byte-equal to (``tests/unit/test_codec.py``)."""
    msg = events_pb2.Event(
        event_id=event.event_id, table_id=event.table_id, hand_id=event.hand_id, seq=event.seq, game=event.game
    )
    msg.occurred_at.FromDatetime(event.occurred_at.astimezone(UTC))
    body = getattr(events_pb2, type(event.body).__name__)()
    getattr(msg, BODY_FIELD[type(event.body)]).CopyFrom(_fill_by_reflection(body, event.body))
    return msg


_SECONDS_MIN: Final = -62_135_596_800  # 0001-01-01T00:00:00Z, the Timestamp type's range
_SECONDS_MAX: Final = 253_402_300_799  # 9999-12-31T23:59:59Z


def _time(ts: Any, event_id: str) -> datetime:
    """A Timestamp as an aware UTC datetime (what ``ToDatetime(tzinfo=UTC)`` gives, at a
    fraction of its cost); one outside the Timestamp range is a bad event."""
    seconds, nanos = ts.seconds, ts.nanos
    if not (_SECONDS_MIN <= seconds <= _SECONDS_MAX and 0 <= nanos < 1_000_000_000):
        raise InvalidArgument("BAD_EVENT", f"event {event_id!r}: occurred_at {seconds}s {nanos}ns is not a valid time")
    # Positional: half the cost of naming them (0.59 against 1.04 µs, timeit on this machine).
    return _EPOCH + timedelta(0, seconds, nanos // 1000)


_BUILDERS: dict[type, Callable[..., Any]] = {}


def builder(cls: type) -> Callable[..., Any]:
    """``build(a, b, …)`` equal to ``cls(a, b, …)`` (a record's fields in order) for a dataclass
    of ``socai.events.model``, filled through its slots when it is a frozen slots record
    without ``__post_init__`` (half the generated ``__init__``'s cost): what this module's
    decoders and the auditor's JSON reader (``socai.audit.export``) build events with."""
    build = _BUILDERS.get(cls)
    if build is None:
        build = _BUILDERS[cls] = _compile_builder(cls)
    return build


# model.Event(table_id, hand_id, seq, game, occurred_at, body), through its slots.
_new_event: Final = builder(model.Event)


def from_proto(msg: events_pb2.Event) -> model.Event:
    """The domain event of an envelope. Raises InvalidArgument("BAD_EVENT") when the
    envelope has no body, an unparseable card, or an event_id that disagrees with hand/seq."""
    which = msg.WhichOneof("body")
    if which is None:
        raise InvalidArgument("BAD_EVENT", f"event {msg.event_id!r} has no body")
    event: model.Event = _new_event(
        msg.table_id,
        msg.hand_id,
        msg.seq,
        msg.game,
        _time(msg.occurred_at, msg.event_id),
        body_from_proto(getattr(msg, which)),
    )
    if msg.event_id != event.event_id:
        raise InvalidArgument("BAD_EVENT", f"event_id {msg.event_id!r} is not {event.event_id!r}")
    return event


def encode(event: model.Event) -> bytes:
    return to_proto(event).SerializeToString(deterministic=True)


def decode(data: bytes) -> model.Event:
    msg = events_pb2.Event()
    try:
        msg.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError, a bare Exception subclass
        raise InvalidArgument("BAD_EVENT", f"not an Event message: {exc}") from exc
    return from_proto(msg)


def to_json(event: model.Event | events_pb2.Event) -> dict[str, Any]:
    """The protobuf JSON mapping (what ``socai events export`` writes, one object a line)."""
    msg = to_proto(event) if isinstance(event, model.Event) else event
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def from_json(obj: Mapping[str, Any]) -> model.Event:
    msg = events_pb2.Event()
    try:
        json_format.ParseDict(dict(obj), msg)
    except json_format.ParseError as exc:
        raise InvalidArgument("BAD_EVENT", f"not an Event: {exc}") from exc
    return from_proto(msg)


def now() -> datetime:
    return datetime.now(UTC)
