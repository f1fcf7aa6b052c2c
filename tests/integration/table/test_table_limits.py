"""Limits per player, per calling service and per owner, through the real services (issue 27).

Each test failed on the code before the limits: one player could open any number of
``WatchTable`` streams, one owner create any number of tables as fast as they liked, a
player or a calling service make any number of calls, and unread streams each hold up to
2,000 events with no bound on all of them together. Now each is refused with
``RESOURCE_EXHAUSTED`` and an ErrorInfo reason whose metadata name the limit, and nothing
is done. The limits are set small here (``SOCAI_LIMIT_*``); their defaults leave room for
the bots, the demo and the benchmarks.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from prometheus_client import REGISTRY

from socai import accounts
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra.config import Limits
from socai.infra.grpc_errors import error_info
from socai.infra.nats import StreamSpec
from tests.integration.table.conftest import World
from tests.support.clients import Backend, wager
from tests.support.services import running, service_settings

pytestmark = pytest.mark.integration


def small_limits(**overrides: Any) -> Limits:
    """Limits a test reaches in a few calls; the ones it does not test stay out of its way."""
    values: dict[str, Any] = {
        "caller_calls_per_s": 0,
        "player_calls_per_s": 0,
        "player_streams": 0,
        "caller_streams": 0,
        "owner_tables": 0,
        "owner_tables_per_min": 0,
        "watch_queued_events": 0,
    }
    values.update(overrides)
    return Limits(**values)


@asynccontextmanager
async def limited_world(nats_url: str, database_url: str, stream: StreamSpec, limits: Limits) -> AsyncIterator[World]:
    settings = service_settings(nats_url, database_url, stream, limits=limits)
    async with running(settings, ("ledger", "table")) as r:
        backend = Backend(r.settings)
        table_app = r.apps["table"]
        try:
            yield World(r, backend, table_app.manager.deps.log)
        finally:
            await backend.close()
            await r.delete_streams(stream.name)


async def refusal(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


def exhausted(error: grpc.aio.AioRpcError, reason: str, setting: str, limit: int) -> dict[str, str]:
    """Check ``error`` is RESOURCE_EXHAUSTED ``reason`` naming ``setting`` = ``limit``; its metadata."""
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (error.code(), error.details())
    info = error_info(error)
    assert info is not None and info.reason == reason, info
    assert info.metadata["limit"] == setting and info.metadata["max"] == str(limit), dict(info.metadata)
    return dict(info.metadata)


def refusals(setting: str) -> float:
    return REGISTRY.get_sample_value("socai_limit_refusals_total", {"service": "table", "limit": setting}) or 0.0


async def next_event(stream: Any) -> pb.WatchTableResponse:
    """The stream's next message with an event (a stream opens with the viewer's view alone
    when the table has no event to send yet)."""
    while True:
        message = await asyncio.wait_for(stream.read(), 10)
        if message.HasField("event"):
            return message


async def until(what: str, check: Any) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"still not: {what}")


@pytest.fixture
async def streams_world(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[World]:
    async with limited_world(
        nats_url, migrated_database_url, stream_spec, small_limits(player_streams=3, caller_streams=5)
    ) as w:
        yield w


async def test_one_player_cannot_hold_more_streams_than_the_limit(streams_world: World):
    w = streams_world
    table_id = await w.backend.create("holdem", stake_gold=100, seats_max=6)
    token = await w.backend.token("mallory")
    before = refusals("SOCAI_LIMIT_PLAYER_STREAMS")
    seated = 0

    def watch(player_token: str = token) -> Any:
        return w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id, player_token=player_token))

    async def live(*streams: Any) -> None:
        """Each stream is open at the table: it is sent the next event (someone sits down)."""
        nonlocal seated
        seated += 1
        await w.backend.deposit(f"sitter{seated}", 1_000)
        await w.backend.join(table_id, f"sitter{seated}", 1_000)
        for stream in streams:
            assert (await next_event(stream)).event.WhichOneof("body") == "player_seated"

    held = [watch() for _ in range(3)]
    await live(*held)
    error = await refusal(next_event(watch()))
    metadata = exhausted(error, "TOO_MANY_STREAMS", "SOCAI_LIMIT_PLAYER_STREAMS", 3)
    assert metadata["open"] == "3"
    assert refusals("SOCAI_LIMIT_PLAYER_STREAMS") == before + 1
    # another player is not held back by mallory's streams
    other = watch(await w.backend.token("alice"))
    await live(*held, other)
    # a stream closed gives its place back (once the service has seen the cancel)
    held.pop().cancel()
    limits = w.running.apps["table"].limits
    await until("the cancelled stream gives its place back", lambda: limits.player_streams.held("mallory") == 2)
    held.append(watch())
    await live(*held, other)
    # the calling service's own bound counts every stream of its players and spectators:
    # 3 of mallory, 1 of alice = 4 of 5; one spectator more, then no more
    spectator = watch("")
    await live(spectator)
    error = await refusal(next_event(watch("")))
    exhausted(error, "TOO_MANY_STREAMS", "SOCAI_LIMIT_CALLER_STREAMS", 5)
    # ... the operator is another caller
    async with grpc.aio.insecure_channel(w.running.settings.table_addr) as ch:
        operator = pb_grpc.TableServiceStub(ch)
        metadata_op = (("authorization", f"Bearer {w.running.settings.tokens['operator']}"),)
        theirs = operator.WatchTable(pb.WatchTableRequest(table_id=table_id), metadata=metadata_op)
        await live(theirs)
        theirs.cancel()
    for stream in [*held, other, spectator]:
        stream.cancel()


@pytest.fixture
async def rate_world(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[World]:
    # Rates of a few calls per second, bursts of two seconds' worth.
    async with limited_world(
        nats_url, migrated_database_url, stream_spec, small_limits(player_calls_per_s=4, caller_calls_per_s=40)
    ) as w:
        yield w


async def test_a_player_over_their_calls_per_second_is_told_when_to_come_back(rate_world: World):
    w = rate_world
    table_id = await w.backend.create("holdem", stake_gold=100, seats_max=6)
    mallory, alice = await w.backend.token("mallory"), await w.backend.token("alice")

    def state(token: str) -> Any:
        return w.backend.table.GetTableState(pb.GetTableStateRequest(table_id=table_id, player_token=token))

    for _ in range(8):  # the burst: two seconds' worth
        await state(mallory)
    error = await refusal(state(mallory))
    metadata = exhausted(error, "RATE_LIMITED", "SOCAI_LIMIT_PLAYER_CALLS_PER_S", 4)
    retry_after_ms = int(metadata["retry_after_ms"])
    assert 0 < retry_after_ms <= 250  # a token every 250 ms
    await state(alice)  # another player is not held back
    await asyncio.sleep(retry_after_ms / 1000)
    await state(mallory)  # back when told


async def test_a_calling_service_over_its_calls_per_second_is_refused_and_another_is_not(rate_world: World):
    w = rate_world
    settings = w.running.settings
    async with grpc.aio.insecure_channel(settings.table_addr) as ch:
        table = pb_grpc.TableServiceStub(ch)

        def as_caller(caller: str) -> Any:
            metadata = (("authorization", f"Bearer {settings.tokens[caller]}"),)
            return table.ListTables(pb.ListTablesRequest(page_size=1), metadata=metadata)

        started = time.monotonic()
        refused = None
        for _ in range(200):
            try:
                await as_caller("auditor")
            except grpc.aio.AioRpcError as exc:
                refused = exc
                break
        assert refused is not None, "200 calls at once were all admitted"
        metadata = exhausted(refused, "RATE_LIMITED", "SOCAI_LIMIT_CALLER_CALLS_PER_S", 40)
        assert int(metadata["retry_after_ms"]) > 0
        assert time.monotonic() - started < 2.0  # the burst (80) was spent, not a second's refill
        await as_caller("operator")


@pytest.fixture
async def owner_world(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[World]:
    async with limited_world(nats_url, migrated_database_url, stream_spec, small_limits(owner_tables=3)) as w:
        yield w


async def test_an_owner_has_at_most_the_limit_of_open_tables_even_when_creating_at_once(owner_world: World):
    w = owner_world
    before = refusals("SOCAI_LIMIT_OWNER_TABLES")
    outcomes = await asyncio.gather(
        *(w.backend.create("holdem", stake_gold=100, seats_max=2, owner_player_id="olga") for _ in range(5)),
        return_exceptions=True,
    )
    created = [o for o in outcomes if isinstance(o, str)]
    errors_ = [o for o in outcomes if not isinstance(o, str)]
    assert len(created) == 3 and len(errors_) == 2, outcomes
    for error in errors_:
        assert isinstance(error, grpc.aio.AioRpcError)
        assert exhausted(error, "TOO_MANY_TABLES", "SOCAI_LIMIT_OWNER_TABLES", 3)["open"] == "3"
    assert refusals("SOCAI_LIMIT_OWNER_TABLES") == before + 2
    listed = await w.backend.table.ListTables(pb.ListTablesRequest(page_size=100))
    assert sorted(t.table_id for t in listed.tables if t.config.owner_player_id == "olga") == sorted(created)
    # a retry of a create that succeeded is an answer, not a fourth table
    again = await w.backend.table.CreateTable(
        pb.CreateTableRequest(
            table_id=created[0],
            config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=2, owner_player_id="olga"),
        )
    )
    assert again.table.table_id == created[0]
    # tables without an owner, and other owners, are not counted
    await w.backend.create("holdem", stake_gold=100, seats_max=2)
    await w.backend.create("holdem", stake_gold=100, seats_max=2, owner_player_id="oscar")
    # a closed table gives its place back
    async with grpc.aio.insecure_channel(w.running.settings.table_addr) as ch:
        operator = pb_grpc.TableServiceStub(ch)
        metadata = (("authorization", f"Bearer {w.running.settings.tokens['operator']}"),)
        await operator.CloseTable(pb.CloseTableRequest(table_id=created[1], reason="limits test"), metadata=metadata)
    for _ in range(100):
        got = await w.backend.table.GetTable(pb.GetTableRequest(table_id=created[1]))
        if got.table.status == pb.TABLE_STATUS_CLOSED:
            break
        await asyncio.sleep(0.05)
    assert await w.backend.create("holdem", stake_gold=100, seats_max=2, owner_player_id="olga")


@pytest.fixture
async def rate_of_creation_world(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec
) -> AsyncIterator[World]:
    async with limited_world(nats_url, migrated_database_url, stream_spec, small_limits(owner_tables_per_min=2)) as w:
        yield w


async def test_an_owner_creating_tables_faster_than_the_limit_is_told_when_to_come_back(
    rate_of_creation_world: World,
):
    w = rate_of_creation_world
    before = refusals("SOCAI_LIMIT_OWNER_TABLES_PER_MIN")
    for _ in range(2):  # two a minute: the burst is the minute's two
        await w.backend.create("holdem", stake_gold=100, seats_max=2, owner_player_id="rita")
    error = await refusal(w.backend.create("holdem", stake_gold=100, seats_max=2, owner_player_id="rita"))
    metadata = exhausted(error, "RATE_LIMITED", "SOCAI_LIMIT_OWNER_TABLES_PER_MIN", 2)
    assert 29_000 <= int(metadata["retry_after_ms"]) <= 30_000  # one table every 30 s
    assert refusals("SOCAI_LIMIT_OWNER_TABLES_PER_MIN") == before + 1
    listed = await w.backend.table.ListTables(pb.ListTablesRequest(page_size=100))
    assert len([t for t in listed.tables if t.config.owner_player_id == "rita"]) == 2  # nothing more was made
    await w.backend.create("holdem", stake_gold=100, seats_max=2, owner_player_id="sam")  # another owner


@pytest.fixture
async def memory_world(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[World]:
    async with limited_world(nats_url, migrated_database_url, stream_spec, small_limits(watch_queued_events=60)) as w:
        yield w


async def test_unread_streams_hold_at_most_the_instance_bound_and_the_furthest_behind_is_ended(memory_world: World):
    """Three streams that read nothing (a client whose receive window is 1 KB: the server
    can hand the transport a few events, then they wait in the stream's queue), one that
    reads. Past 60 queued events in all, the stream furthest behind is ended
    RESOURCE_EXHAUSTED WATCH_MEMORY_FULL, its events dropped; the reader sees every event."""
    w = memory_world
    table_id = await w.backend.create(
        "taixiu", stake_gold=10, seats_max=2, options={"mode": "system", "betting_window_s": "120"}
    )
    await w.backend.cashier.Transfer(
        lpb.TransferRequest(
            idempotency_key=uuid.uuid4().hex,
            from_account_id=accounts.EXTERNAL_CASHIER,
            to_account_id=accounts.HOUSE_BANK,
            amount_gold=10_000_000,
            kind="bankroll",
        )
    )
    await w.backend.deposit("tam", 1_000)
    await w.backend.join(table_id, "tam", 1_000, seat=0)
    before = refusals("SOCAI_LIMIT_WATCH_QUEUED_EVENTS")
    settings = w.running.settings
    auth = (("authorization", f"Bearer {settings.tokens['backend']}"),)
    slow_options = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
    slow_channels = [grpc.aio.insecure_channel(settings.table_addr, options=slow_options) for _ in range(3)]
    try:
        slow = [
            pb_grpc.TableServiceStub(ch).WatchTable(pb.WatchTableRequest(table_id=table_id), metadata=auth)
            for ch in slow_channels
        ]
        reader = w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id))
        seen: list[int] = []

        async def read_all() -> None:
            async for reply in reader:
                seen.append(reply.event.seq)

        reading = asyncio.ensure_future(read_all())
        await asyncio.sleep(0.3)  # every stream is open before the first wager
        await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
        for _ in range(60):
            await w.backend.act(table_id, "tam", 0, wager(0, "tai", 10))
        # the first slow stream to be ended is the one furthest behind; the others keep
        # theirs (60 in all), so at most one more is ended as the bound is reached again
        ended = []
        for stream in slow:
            try:
                while True:
                    await asyncio.wait_for(stream.read(), 5)
            except grpc.aio.AioRpcError as exc:
                ended.append(exc)
            except TimeoutError:
                pass  # still open, its events still queued
        assert ended, "no slow stream was ended: the streams held more than 60 events in all"
        for error in ended:
            exhausted(error, "WATCH_MEMORY_FULL", "SOCAI_LIMIT_WATCH_QUEUED_EVENTS", 60)
        assert refusals("SOCAI_LIMIT_WATCH_QUEUED_EVENTS") == before + len(ended)
        budget = w.running.apps["table"].limits.watch_budget
        assert budget.queued <= 60
        for _ in range(100):
            if len(seen) >= 61:  # the hand's start and the 60 wagers
                break
            await asyncio.sleep(0.05)
        assert len([s for s in seen if s >= 1]) >= 61, seen
        reading.cancel()
    finally:
        for ch in slow_channels:
            await ch.close()
