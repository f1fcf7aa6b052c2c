"""Two table-service instances in one process share the tables by lease; calls are forwarded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.grpc_errors import error_reason
from socai.infra.leases import LeaseConfig, LeaseStore, ensure_lease_bucket
from socai.infra.nats import StreamSpec
from tests.support.clients import bet
from tests.support.table_pair import Two, table_in, two_instances


@pytest.fixture
async def two(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[Two]:
    async with two_instances(nats_url, migrated_database_url, stream_spec, "i") as pair:
        yield pair


async def test_a_table_created_through_either_instance_runs_where_its_partition_is_held(two: Two):
    table_id = table_in(0)
    reply = await two.backend.table.CreateTable(
        pb.CreateTableRequest(table_id=table_id, config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=2))
    )
    assert reply.table.table_id == table_id
    assert table_id in two.a.manager.tables and table_id not in two.b.manager.tables

    for seat, player in enumerate(("p0", "p1")):
        await two.backend.deposit(player, 2000)
        assert await two.backend.join(table_id, player, 1000, seat=seat) == seat
    hand_id = (await two.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    state = await two.backend.state(table_id, "p0")
    assert state.hand_id == hand_id and state.viewer_seat == 0

    # The owner's refusal comes back through the forwarding instance with its reason.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await two.backend.act(table_id, "p0", 1, bet(1, "call", 10), hand_id=hand_id)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_reason(refused.value) == "NOT_YOUR_SEAT"

    # WatchTable relayed item by item: the snapshot, then a live event.
    call = two.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id))
    first = await call.read()
    assert first.event.seq == 1
    seen = len(state.events)
    for _ in range(seen - 1):
        await call.read()
    await two.backend.act(table_id, "p0", 0, bet(0, "call", 10), hand_id=hand_id)
    live = await asyncio.wait_for(call.read(), 10)
    assert live.event.seq == seen + 1
    call.cancel()


async def test_a_table_moves_when_its_instance_gives_its_partition_up(two: Two):
    table_id = table_in(0)
    await two.backend.table.CreateTable(
        pb.CreateTableRequest(table_id=table_id, config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=2))
    )
    await two.a.ownership.stop()  # a graceful stop: the table leaves A, B acquires at once
    assert table_id not in two.a.manager.tables
    for _ in range(100):
        if 0 in two.b.ownership.leases.held():
            break
        await asyncio.sleep(0.1)
    reply = await two.backend.table.GetTable(pb.GetTableRequest(table_id=table_id))
    assert reply.table.table_id == table_id and table_id in two.b.manager.tables


async def test_the_lease_bucket_names_each_partition_s_holder_and_its_address(two: Two):
    kv = await ensure_lease_bucket(two.nc.jetstream(), two.a.ownership.leases.config)
    reader = LeaseStore(kv, two.a.ownership.leases.config, "reader")
    assert await reader.holder(0) == two.a.ownership.instance_id
    assert await reader.member(two.a.ownership.instance_id) == two.a.ownership.address.encode()
    assert await reader.member("nobody") is None
    # A restarted holder with the same id takes its key back, with a larger token; another
    # id cannot.
    assert await reader.adopt(0) is None
    config: LeaseConfig = two.a.ownership.leases.config
    same = LeaseStore(kv, config, two.a.ownership.instance_id)
    before = two.a.ownership.leases.lease(0)
    assert before is not None
    adopted = await same.adopt(0)
    assert adopted is not None and adopted.token > before.token
