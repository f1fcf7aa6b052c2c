"""An export's events read straight into domain events (``event_of_json``) are exactly what
the protobuf path (``parse_event_json`` + ``codec.from_proto``) gives, and anything but an
export's plain shape takes that path, whose verdict stands."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from socai.audit.auditor import verify
from socai.audit.export import RawEvent, event_of_json, parse_event_json, read_jsonl, write_jsonl
from socai.events import codec
from socai.gen.events.v1 import events_pb2
from socai.rules import registry
from tests.support.synthetic import simulate

FIXTURE = Path(__file__).parent / "fixtures" / "hands.jsonl"


def by_protobuf(obj: dict[str, Any]) -> events_pb2.Event:
    msg = events_pb2.Event()
    parse_event_json(obj, msg)
    return msg


def exported(events: Any) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(codec.to_json(e))) for e in events]


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    # Every game's self-played hands (table facts included) and the audit fixture's lines.
    sim = simulate(6 * len(registry.available()), registry.available(), seed=31)
    return exported(sim.events()) + [json.loads(x) for x in FIXTURE.read_text().splitlines()]


def test_every_event_of_every_game_reads_straight_into_what_the_protobuf_path_gives(
    rows: list[dict[str, Any]],
) -> None:
    games = set()
    for row in rows:
        event = event_of_json(row)
        assert event is not None, f"an export's plain line takes the fast path: {row['event_id']}"
        msg = by_protobuf(row)
        assert event == codec.from_proto(msg), row["event_id"]
        assert codec.to_proto(event).SerializeToString(deterministic=True) == msg.SerializeToString(deterministic=True)
        games.add(event.game)
    assert games == set(registry.available())


def first(rows: list[dict[str, Any]], body: str) -> dict[str, Any]:
    return copy.deepcopy(next(r for r in rows if body in r))


ODD: list[tuple[str, Any]] = [
    ("an unknown key", lambda r: r.update(no_such_field=1)),
    ("a camelCase key", lambda r: r.update(eventId=r.pop("event_id"))),
    ("two bodies", lambda r: r.update(passed={})),
    ("no body", lambda r: r.pop("cards_dealt")),
    ("seq as a float", lambda r: r.update(seq=2.0)),
    ("seq as a bool", lambda r: r.update(seq=True)),
    ("seq past uint64", lambda r: r.update(seq=str(2**64))),
    ("a negative seq", lambda r: r.update(seq="-2")),
    ("two minus signs", lambda r: r.update(seq="--2")),
    ("a superscript digit", lambda r: r.update(seq="\u00b2")),
    ("wide digits in a time", lambda r: r.update(occurred_at="\uff12026-11-29T12:00:00Z")),
    ("nanoseconds", lambda r: r.update(occurred_at="2026-11-29T12:00:00.123456789Z")),
    ("an offset", lambda r: r.update(occurred_at="2026-11-29T12:00:00+07:00")),
    ("a space for the T", lambda r: r.update(occurred_at="2026-11-29 12:00:00Z")),
    ("no such day", lambda r: r.update(occurred_at="2026-04-31T12:00:00Z")),
    ("a null", lambda r: r.update(game=None)),
    ("a bad card", lambda r: r["cards_dealt"]["cards"][0].update(card="Zz")),
    ("a list for a message", lambda r: r["cards_dealt"].update(cards={"seat": 0})),
    ("an unknown nested key", lambda r: r["cards_dealt"]["cards"][0].update(colour="red")),
    ("an event_id of another seq", lambda r: r.update(event_id=r["event_id"] + "0")),
]


@pytest.mark.parametrize("what,change", ODD, ids=[w for w, _ in ODD])
def test_anything_but_the_plain_shape_takes_the_protobuf_path(
    rows: list[dict[str, Any]], tmp_path: Path, what: str, change: Any
) -> None:
    row = first(rows, "cards_dealt")
    change(row)
    assert event_of_json(row) is None, what
    # read_jsonl then gives what the protobuf path gives: the message, or the line's error.
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (raw,) = list(read_jsonl(path))
    assert raw.event is None
    try:
        want: events_pb2.Event | None = by_protobuf(row)
    except Exception:
        want = None
    assert raw.message == want
    assert (raw.error != "") == (want is None)


def test_a_straight_read_event_builds_its_protobuf_only_when_asked(rows: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:200]))
    raws = list(read_jsonl(path))
    for raw, row in zip(raws, rows[:200], strict=True):
        assert raw.event is not None and raw.proto is None
        assert raw.decoded is raw.event
        want = by_protobuf(row)
        assert (raw.table_id, raw.hand_id) == (want.table_id, want.hand_id)
        assert raw.is_table_fact == RawEvent(0, "", want).is_table_fact
        assert raw.message == want  # built now, and kept
        assert raw.proto is raw.message


def test_the_audit_of_an_export_is_the_audit_of_its_protobufs(tmp_path: Path) -> None:
    sim = simulate(4 * len(registry.available()), registry.available(), seed=5)
    path = tmp_path / "export.jsonl"
    with path.open("w", encoding="utf-8") as out:
        write_jsonl(sim.events(), out)
    straight = verify(read_jsonl(path), source="t")
    by_proto = verify([RawEvent(0, "", codec.to_proto(e)) for e in sim.events()], source="t")
    assert straight.report.ok and straight.report.hands_verified == len(sim.hands)
    assert straight.report.render() == by_proto.report.render()
    assert [r.settlement for r in straight.results] == [r.settlement for r in by_proto.results]
