"""Domain events ↔ protobuf ↔ JSON: every body survives both round trips unchanged."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest

from socai.cards import parse_cards
from socai.errors import InvalidArgument
from socai.events import codec
from socai.events import model as m
from socai.gen.events.v1 import events_pb2

AT = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)
C = parse_cards

SAMPLES = [
    m.HandStarted(
        "t1",
        "h1",
        "holdem",
        7,
        1000,
        300,
        6,
        (m.SeatInfo(0, "p1", 5000), m.SeatInfo(4, "p2", 800, "g9")),
        4,
        "ab" * 32,
        owner_seat=0,
        pot_gold=12,
        options={"heads_up_dealer_is_small_blind": "true"},
    ),
    m.CardsDealt((m.DealtCard(0, C("As")[0], False), m.DealtCard(m.COMMUNITY, C("Td")[0], True))),
    m.DiceRolled((1, 6, 6)),
    m.BetAction(4, m.ActionKind.RAISE, 250),
    m.BetAction(0, m.ActionKind.FOLD),
    m.WagerPlaced(2, "pair", (1, 2), 100),
    m.TimerExpired(m.COMMUNITY, "betting"),
    m.PlayerDisconnected(3),
    m.PlayerReconnected(3),
    m.PlayerLeft(0),
    m.HandEnded("00" * 32),
    m.CardsPlayed(1, tuple(C("3s 3c 3d"))),
    m.Passed(2),
    m.Declared(1, "sam"),
    m.Arranged(1, tuple(C("As Ks Qs Js Ts")), tuple(C("2h 2d 2c 9s 9d")), tuple(C("7c 8c 4h"))),
    m.CardTaken(2, 1, C("9h")[0]),
    m.MeldsLaid(2, (m.Meld(tuple(C("9h 9d 9c"))), m.Meld(tuple(C("4s 5s 6s"))))),
    m.CardSent(3, 2, 1, C("7s")[0]),
    m.TableOpened("t1", "xito", 500, 0, 5, "p1", {"tay_max": "true"}, 500, 5000),
    m.PlayerSeated(2, "p7", 5000, "g1", "tx-1"),
    m.PlayerStoodUp(2, "p7", 4200, "tx-2"),
    m.TableClosed("owner closed it"),
]


def test_every_body_type_has_a_sample_and_a_protobuf_twin():
    assert {type(b) for b in SAMPLES} == set(codec.ALL_BODY_TYPES)
    for cls in codec.ALL_BODY_TYPES:
        msg = getattr(events_pb2, cls.__name__)
        proto_fields = set(msg.DESCRIPTOR.fields_by_name)
        assert {f.name for f in dataclasses.fields(cls)} == proto_fields, cls.__name__


@pytest.mark.parametrize("body", SAMPLES, ids=lambda b: type(b).__name__)
def test_binary_and_json_round_trips_are_exact(body: m.Body):
    event = m.Event("t1", "h1", 3, "holdem", AT, body)
    assert codec.decode(codec.encode(event)) == event
    assert codec.from_json(codec.to_json(event)) == event


def test_json_export_uses_the_protobuf_mapping():
    event = m.Event("t1", "h1", 5, "holdem", AT, m.BetAction(4, m.ActionKind.ALL_IN, 900))
    doc = codec.to_json(event)
    assert doc["event_id"] == "h1/5"
    assert doc["bet_action"] == {"seat": 4, "kind": "ACTION_KIND_ALL_IN", "amount_gold": "900"}
    assert doc["occurred_at"] == "2026-11-29T12:00:00.123456Z"


def test_a_bad_card_in_an_event_is_rejected():
    msg = events_pb2.Event(event_id="h1/1", hand_id="h1", seq=1)
    msg.cards_played.seat = 1
    msg.cards_played.cards.append("Xx")
    with pytest.raises(InvalidArgument) as caught:
        codec.from_proto(msg)
    assert caught.value.code == "BAD_CARD"


def test_an_event_id_that_disagrees_with_hand_and_seq_is_rejected():
    msg = codec.to_proto(m.Event("t1", "h1", 2, "holdem", AT, m.Passed(1)))
    msg.event_id = "h1/3"
    with pytest.raises(InvalidArgument) as caught:
        codec.from_proto(msg)
    assert caught.value.code == "BAD_EVENT"


def test_an_unspecified_action_kind_is_rejected():
    msg = events_pb2.Event(event_id="h1/1", hand_id="h1", seq=1)
    msg.bet_action.seat = 0
    with pytest.raises(InvalidArgument):
        codec.from_proto(msg)


def test_garbage_bytes_are_rejected():
    with pytest.raises(InvalidArgument):
        codec.decode(b"\xff\xff\xff")


@pytest.mark.parametrize(
    ("seconds", "nanos"), [(253_402_300_800, 0), (-62_135_596_801, 0), (0, 1_000_000_000), (0, -1)]
)
def test_an_occurred_at_outside_the_timestamp_range_is_a_bad_event(seconds: int, nanos: int):
    msg = codec.to_proto(m.Event("t1", "h1", 2, "holdem", AT, m.Passed(1)))
    msg.occurred_at.seconds, msg.occurred_at.nanos = seconds, nanos
    with pytest.raises(InvalidArgument) as caught:
        codec.from_proto(msg)
    assert caught.value.code == "BAD_EVENT" and "occurred_at" in caught.value.message


def test_occurred_at_decodes_as_protobuf_does_to_the_microsecond():
    for seconds, nanos in [(0, 0), (1_700_000_000, 999_999_999), (-1, 1), (253_402_300_799, 123_456_789)]:
        msg = codec.to_proto(m.Event("t1", "h1", 2, "holdem", AT, m.Passed(1)))
        msg.occurred_at.seconds, msg.occurred_at.nanos = seconds, nanos
        assert codec.from_proto(msg).occurred_at == msg.occurred_at.ToDatetime(tzinfo=UTC)


def test_dealt_cards_are_decoded_once_per_raw_value_and_shared() -> None:
    deal = events_pb2.CardsDealt(
        cards=[
            events_pb2.DealtCard(seat=1, card="As", face_up=False),
            events_pb2.DealtCard(seat=1, card="As", face_up=False),
            events_pb2.DealtCard(seat=1, card="A♠", face_up=False),  # another spelling: equal
            events_pb2.DealtCard(seat=1, card="As", face_up=True),
        ]
    )
    a, b, c, d = codec.body_from_proto(deal).cards
    assert a == b == c == m.DealtCard(1, parse_cards("As")[0], False)
    assert a is b  # shared, not built again
    assert d == m.DealtCard(1, a.card, True) and d != a


def test_a_bad_dealt_card_is_rejected_every_time_and_never_kept() -> None:
    bad = events_pb2.CardsDealt(cards=[events_pb2.DealtCard(seat=2, card="1x", face_up=False)])
    for _ in range(2):
        with pytest.raises(InvalidArgument):
            codec.body_from_proto(bad)


def test_shared_dealt_cards_are_bounded_and_stay_exact_past_the_bound() -> None:
    many = codec.SHARED_MAX + 50
    deal = events_pb2.CardsDealt(
        cards=[events_pb2.DealtCard(seat=100_000 + i, card="Td", face_up=False) for i in range(many)]
    )
    decoded = codec.body_from_proto(deal).cards
    assert [d.seat for d in decoded] == [100_000 + i for i in range(many)]
    assert {str(d.card) for d in decoded} == {"Td"}
    decoder = codec._decoder(m.DealtCard)
    assert len(decoder.__globals__["shared"]) <= codec.SHARED_MAX


def _corpus_events() -> list[m.Event]:
    """Events of the golden corpus: the first ``PER_GAME`` events of each game's first
    recorded table batch (deals, plays, melds, arrangements, wagers, table facts)."""
    from socai.audit.export import read_jsonl
    from tests.golden import corpus

    events: list[m.Event] = []
    seen: set[str] = set()
    for batch in corpus.batches():
        game = batch.path.name.split("-")[3]
        if batch.kind == corpus.ENGINE or game in seen:
            continue
        seen.add(game)
        events.extend(codec.decode(raw.payload) for raw in itertools.islice(read_jsonl(batch.events_path), PER_GAME))
    return events


PER_GAME = 600


def test_planned_encoding_is_byte_equal_to_the_definition_by_reflection() -> None:
    """``to_proto`` plans each class's encoding once; ``_to_proto_by_reflection`` reads
    every field's type hint every time. Over every body type and the recorded hands of every
    game the two give the same bytes."""
    events = [m.Event("t1", "h1", 3, "holdem", AT, body) for body in SAMPLES] + _corpus_events()
    kinds = {type(e.body) for e in events}
    assert len(events) > 1000 and kinds == set(codec.ALL_BODY_TYPES)
    for event in events:
        want = codec._to_proto_by_reflection(event).SerializeToString(deterministic=True)
        assert codec.encode(event) == want, event


@pytest.mark.parametrize(
    "at",
    [
        AT,
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 12, 7, 1, 2, 3, 4, tzinfo=timezone(timedelta(hours=7))),
        datetime(2026, 12, 7, 1, 2, 3, 4),  # naive: local time, as FromDatetime after astimezone
    ],
)
def test_occurred_at_encodes_as_protobuf_s_from_datetime_does(at: datetime) -> None:
    event = m.Event("t1", "h1", 2, "holdem", at, m.Passed(1))
    assert codec.to_proto(event).occurred_at == codec._to_proto_by_reflection(event).occurred_at


def test_a_body_with_every_field_at_its_default_is_still_that_body() -> None:
    event = m.Event("t1", "h1", 2, "tienlen", AT, m.Passed(0))
    assert codec.to_proto(event).WhichOneof("body") == "passed"
    assert codec.decode(codec.encode(event)) == event


def test_every_events_record_is_built_through_its_slots_equal_to_its_init() -> None:
    # codec.builder fills a frozen slots record through its slots (the decoders and the
    # auditor's JSON reader build with it): the same record its __init__ makes, for every
    # record of every game's events, and every record of the model takes that path.
    import dataclasses

    from socai.events import codec, model
    from socai.rules import registry
    from tests.support.synthetic import simulate

    records: dict[type, list[object]] = {}

    def walk(value: object) -> None:
        if dataclasses.is_dataclass(value) and type(value).__module__ == model.__name__:
            records.setdefault(type(value), []).append(value)
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name))
        elif isinstance(value, tuple):
            for item in value:
                walk(item)

    for event in simulate(3 * len(registry.available()), registry.available(), seed=17).events():
        walk(event)
    assert model.Event in records and model.DealtCard in records and len(records) >= 15
    for cls, values in records.items():
        assert codec._slot_setters(cls) is not None, f"{cls.__name__} is built through its __init__"
        build = codec.builder(cls)
        for value in values[:50]:
            fields = [getattr(value, f.name) for f in dataclasses.fields(value)]
            built = build(*fields)
            assert type(built) is cls
            assert built == value and built == cls(*fields) and repr(built) == repr(value)
            try:
                expected = hash(value)
            except TypeError:  # a record holding a map refuses to hash; so must the built one
                with pytest.raises(TypeError):
                    hash(built)
            else:
                assert hash(built) == expected
