"""Two table-service instances in one process sharing the tables by lease (P = 2, 2 s TTL):
A holds partition 0, B partition 1, and the players' backend dials B only, so every call
for a table in partition 0 is forwarded from B to A. Real NATS, PostgreSQL, gRPC, leases."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

from nats.aio.client import Client as NatsClient

from socai.events.log import EventLog
from socai.infra.leases import assign
from socai.infra.nats import StreamSpec, connect
from socai.infra.partitions import partition_of
from socai_cli.embedded import free_port
from socai_table.app import TableApp, build_app
from socai_table.ownership import OwnershipSettings
from tests.support.clients import Backend
from tests.support.services import running, service_settings

P = 2
SPLIT_WAIT_S = 30.0  # generous: the machine may be loaded


@dataclass
class Two:
    a: TableApp  # holds partition 0
    b: TableApp  # holds partition 1; the backend dials only this one
    backend: Backend
    nc: NatsClient
    log: EventLog


def table_in(partition: int, partitions: int = P) -> str:
    """A fresh table id whose partition is ``partition``."""
    while True:
        table_id = uuid.uuid4().hex[:16]
        if partition_of(table_id, partitions) == partition:
            return table_id


@asynccontextmanager
async def two_instances(nats_url: str, database_url: str, stream_spec: StreamSpec, name: str) -> AsyncIterator[Two]:
    """A and B, each holding its partition; ``name`` prefixes their instance ids."""
    settings = service_settings(nats_url, database_url, stream_spec, event_partitions=P)
    async with running(settings, ("ledger",)) as r:
        names = [f"{name}a{uuid.uuid4().hex[:6]}", f"{name}b{uuid.uuid4().hex[:6]}"]
        owners = assign(P, sorted(names))
        apps = {}
        for instance in names:
            app = await build_app(
                replace(r.settings, table_addr=f"127.0.0.1:{free_port()}"),
                OwnershipSettings(instance_id=instance, lease_ttl_s=2.0),
            )
            await app.start()
            apps[instance] = app
        a, b = apps[owners[0]], apps[owners[1]]
        nc = await connect(nats_url, name=f"{name}-check")
        backend = Backend(b.settings)
        try:
            # The first of them took both partitions until the second came.
            deadline = time.monotonic() + SPLIT_WAIT_S
            while not (a.ownership.leases.held() == {0} and b.ownership.leases.held() == {1}):
                assert time.monotonic() < deadline, "each instance did not come to hold its partition"
                await asyncio.sleep(0.05)
            yield Two(a, b, backend, nc, EventLog(nc, settings.events_stream, settings.events_prefix))
        finally:
            await backend.close()
            for app in apps.values():
                await app.stop()
            await nc.jetstream().delete_stream(stream_spec.name)
            await nc.close()
