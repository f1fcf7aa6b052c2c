"""Wiring of the table service: ``build_app(settings)`` creates every dependency."""

from __future__ import annotations

from dataclasses import dataclass

from nats.aio.client import Client as NatsClient

from socai.events.log import EventLog
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra import nats as socai_nats
from socai.infra.config import Settings
from socai.infra.grpc_server import GrpcServer, build_server
from socai.rules import registry
from socai_table import seeds, signing
from socai_table.ledger_client import Money
from socai_table.manager import TableManager
from socai_table.server import TableServicer, policy
from socai_table.store import TableStore
from socai_table.table import Deps

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["TableService"].full_name


@dataclass
class TableApp:
    settings: Settings
    nc: NatsClient
    store: TableStore
    money: Money
    manager: TableManager
    grpc: GrpcServer

    async def start(self) -> None:
        registry.warm()  # every game's costly first-use tables, before the first Act needs them
        await self.manager.start()
        await self.grpc.server.start()
        await self.grpc.set_serving(True)

    async def stop(self, grace_s: float = 5.0) -> None:
        await self.grpc.set_serving(False)
        await self.grpc.server.stop(grace_s)
        await self.manager.stop()
        await self.money.close()
        await self.store.close()
        await self.nc.drain()


async def build_app(settings: Settings) -> TableApp:
    nc = await socai_nats.connect(settings.effective_nats_url, name=f"socai-table-{settings.table_instance}")
    await socai_nats.ensure_stream(nc.jetstream(), settings.events_stream_spec())
    store = await TableStore.open(settings.effective_database_url)
    money = Money(settings.ledger_addr, settings.settlement_addr, settings.token_of("table"))
    deps = Deps(
        EventLog(nc, settings.events_stream, settings.events_prefix),
        store,
        money,
        settings.table_instance,
        seeds.seal_key(settings.player_token_key),
        signing.writer_key(settings.player_token_key),
        heartbeat_timeout_s=settings.heartbeat_timeout_s,
    )
    manager = TableManager(deps)
    servicer = TableServicer(manager, settings.player_token_key)
    server = build_server(
        service="table",
        address=settings.listen_address(settings.table_addr),
        registrations=[lambda s: pb_grpc.add_TableServiceServicer_to_server(servicer, s)],
        service_names=[SERVICE_NAME],
        policy=policy(dict(settings.tokens)),
    )
    return TableApp(settings, nc, store, money, manager, server)
