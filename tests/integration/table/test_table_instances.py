"""Two table-service instances in one process share the tables by lease; calls are forwarded."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import grpc
import pytest
from nats.aio.client import Client as NatsClient

from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.grpc_errors import error_reason
from socai.infra.leases import LeaseConfig, LeaseStore, assign, ensure_lease_bucket
from socai.infra.nats import StreamSpec, connect
from socai.infra.partitions import partition_of
from socai_cli.embedded import free_port
from socai_table.app import TableApp, build_app
from socai_table.ownership import OwnershipSettings
from tests.support.clients import Backend, bet
from tests.support.services import running, service_settings

P = 2


@dataclass
class Two:
    a: TableApp  # holds partition 0
    b: TableApp  # holds partition 1; the backend dials only this one
    backend: Backend
    nc: NatsClient


def table_in(partition: int) -> str:
    while True:
        table_id = uuid.uuid4().hex[:16]
        if partition_of(table_id, P) == partition:
            return table_id


@pytest.fixture
async def two(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[Two]:
    settings = service_settings(nats_url, migrated_database_url, stream_spec, event_partitions=P)
    async with running(settings, ("ledger",)) as r:
        names = [f"ia{uuid.uuid4().hex[:6]}", f"ib{uuid.uuid4().hex[:6]}"]
        owners = assign(P, sorted(names))
        apps = {}
        for name in names:
            app = await build_app(
                replace(r.settings, table_addr=f"127.0.0.1:{free_port()}"),
                OwnershipSettings(instance_id=name, lease_ttl_s=2.0),
            )
            await app.start()
            apps[name] = app
        a, b = apps[owners[0]], apps[owners[1]]
        nc = await connect(nats_url, name="instances-check")
        backend = Backend(b.settings)
        try:
            for _ in range(100):  # the first of them took both partitions until the second came
                if a.ownership.leases.held() == {0} and b.ownership.leases.held() == {1}:
                    break
                await asyncio.sleep(0.1)
            assert a.ownership.leases.held() == {0} and b.ownership.leases.held() == {1}
            yield Two(a, b, backend, nc)
        finally:
            await backend.close()
            for app in apps.values():
                await app.stop()
            await nc.jetstream().delete_stream(stream_spec.name)
            await nc.close()


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
        await two.backend.act(table_id, "p1", 0, bet(0, "call", 10), hand_id=hand_id)
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
