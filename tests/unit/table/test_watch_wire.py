"""A WatchTable message is built and serialized once per visibility class (issue 32):
``Watchers.flush`` queues one ``WatchItem`` for all the streams of a class, and
``add_to_server`` registers the generated TableService handlers but for WatchTable's
serializer (its messages leave ``TableServicer.WatchTable`` already serialized). The latter
is the guard on grpc's generated registration: it fails the day an upgrade registers its
handlers another way."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from socai.events.model import Event, PlayerSeated
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.rules import registry
from socai_table import convert
from socai_table.server import TableServicer, add_to_server
from socai_table.views import SPECTATOR_SEAT, Moment, Watcher, Watchers, WatchItem

AT = datetime(2026, 12, 6, tzinfo=UTC)


class Recorder:
    """A server that keeps what is registered on it."""

    def __init__(self) -> None:
        self.generic: list[Any] = []
        self.registered: dict[str, dict[str, grpc.RpcMethodHandler]] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.registered[service] = dict(handlers)


class Details:
    def __init__(self, method: str) -> None:
        self.method = method


def servicer() -> TableServicer:
    return TableServicer(manager=None, player_token_key="k")  # type: ignore[arg-type]  # never called here


def test_every_method_keeps_the_generated_handler_but_watch_table_s_serializer():
    table = servicer()
    generated, ours = Recorder(), Recorder()
    pb_grpc.add_TableServiceServicer_to_server(table, generated)
    add_to_server(table, ours)
    service = pb.DESCRIPTOR.services_by_name["TableService"]
    assert set(ours.registered) == set(generated.registered) == {service.full_name}
    theirs, mine = generated.registered[service.full_name], ours.registered[service.full_name]
    assert set(mine) == set(theirs) == {m.name for m in service.methods}
    for name, handler in theirs.items():
        kept = mine[name]
        assert kept.request_deserializer == handler.request_deserializer, name
        assert (kept.unary_unary, kept.unary_stream) == (handler.unary_unary, handler.unary_stream), name
        if name == "WatchTable":
            assert handler.response_serializer == pb.WatchTableResponse.SerializeToString
            assert kept.response_serializer is None  # the servicer's bytes go out as they are
        else:
            assert kept.response_serializer == handler.response_serializer, name
    # The generic handler (servers without registered methods) answers with the same ones.
    (generic,) = ours.generic
    path = f"/{service.full_name}/WatchTable"
    assert generic.service(Details(path)) is mine["WatchTable"]
    assert generic.service(Details(f"/{service.full_name}/Act")) is mine["Act"]


def test_every_spectator_is_queued_one_message_built_and_serialized_once(monkeypatch: pytest.MonkeyPatch):
    """``Watchers.flush``: the streams of one visibility class share one ``WatchItem``, so
    its ``WatchTableResponse`` is built and serialized once however many they are; a seated
    player is a class of their own, and a cash-out is its player's alone."""
    watchers = Watchers(registry.get("holdem"))
    spectators = [watchers.add(None, None, SPECTATOR_SEAT) for _ in range(5)]
    seated = watchers.add("p0", None, 0)
    seat_of = {"p0": 0}.get
    seated_event = Event("t", "t-f1", 1, "holdem", AT, PlayerSeated(1, "p1", 500))
    moment = Moment(None, None, False, 7, 0)
    watchers.broadcast(seated_event, None, lambda p: seat_of(p or "", SPECTATOR_SEAT), False, moment)
    watchers.cash_out("p0", object(), moment, lambda p: 0)
    watchers.flush(0.0)

    def queued(watcher: Watcher) -> list[WatchItem]:
        return [watcher.queue.get_nowait() for _ in range(watcher.queue.qsize())]  # type: ignore[misc]

    (shared,) = {id(item): item for w in spectators for item in queued(w)}.values()
    theirs = queued(seated)
    assert [item.cash_out is not None for item in theirs] == [False, True]
    assert theirs[0] is not shared and theirs[0].view.viewer_seat == 0 and shared.view.viewer_seat == -1
    built = []
    to_proto = convert.watch_item_to_proto

    def counted(item: WatchItem) -> pb.WatchTableResponse:
        built.append(item)
        return to_proto(item)

    monkeypatch.setattr(convert, "watch_item_to_proto", counted)
    sent = {convert.watch_item_wire(shared) for _ in spectators}
    assert len(sent) == 1 and built == [shared]
    message = pb.WatchTableResponse.FromString(sent.pop())
    assert message.event.player_seated.player_id == "p1" and message.view.log_seq == 7
