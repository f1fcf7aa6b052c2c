"""Wiring of the table service: ``build_app(settings)`` creates every dependency."""

from __future__ import annotations

from dataclasses import dataclass

from nats.aio.client import Client as NatsClient

from socai.events import seal
from socai.events.log import EventLog
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra import nats as socai_nats
from socai.infra.config import Settings
from socai.infra.grpc_server import GrpcServer, build_server, caller_limiter
from socai.infra.nats_liveness import ConnectionWatch
from socai.rules import registry
from socai_table import metrics, seeds, signing
from socai_table.forward import Forwarder
from socai_table.ledger_client import Money
from socai_table.manager import TableManager
from socai_table.ownership import Ownership, OwnershipSettings, advertised, lease_config
from socai_table.server import TableLimits, TableServicer, add_to_server, policy
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
    ownership: Ownership
    forwarder: Forwarder
    grpc: GrpcServer
    nats_watch: ConnectionWatch
    limits: TableLimits

    async def start(self) -> None:
        registry.warm()  # every game's costly first-use tables, before the first Act needs them
        self.nats_watch.start()
        await self.manager.start()
        # Leases (and the tables they bring) before the server listens, as the tables were
        # loaded before it listened with one instance: a caller never sees this instance
        # without its tables. Another instance forwarding here in between finds the port
        # closed (UNAVAILABLE) and its caller retries.
        await self.ownership.start(wait_s=self.ownership.leases.config.ttl_s)
        await self.grpc.server.start()
        await self.grpc.set_serving(True)

    async def stop(self, grace_s: float = 5.0) -> None:
        await self.grpc.set_serving(False)
        # Leases first: the tables stop here and another instance takes them at once,
        # rather than a TTL later.
        await self.ownership.stop()
        await self.grpc.server.stop(grace_s)
        await self.forwarder.close()
        await self.manager.stop()
        await self.money.close()
        await self.store.close()
        await self.nats_watch.stop()
        await self.nc.drain()


async def build_app(settings: Settings, own: OwnershipSettings | None = None) -> TableApp:
    own = own or OwnershipSettings.from_env()
    instance = own.instance_id or settings.table_instance
    nc = await socai_nats.connect(settings.nats_url_for("table"), name=f"socai-table-{instance}")
    await socai_nats.ensure_stream(nc.jetstream(), settings.events_stream_spec())
    store = await TableStore.open(settings.effective_database_url)
    money = Money(settings.ledger_addr, settings.settlement_addr, settings.token_of("table"))
    event_log = EventLog(nc, settings.events_stream, settings.events_prefix)
    deps = Deps(
        event_log,
        store,
        money,
        instance,
        seeds.rest_key(settings.player_token_key),
        signing.writer_key(settings.player_token_key),
        hand_signer=seal.HandSigner(settings.hand_seal_private_key()),
        heartbeat_timeout_s=settings.heartbeat_timeout_s,
        writer_keys_accepted=tuple(
            (signing.writer_key(key), last) for key, last in settings.player_token_keys_accepted
        ),
        seed_keys_accepted=tuple(seeds.rest_key(key) for key, _ in settings.player_token_keys_accepted),
    )
    manager = TableManager(deps)
    ownership = Ownership(
        nc.jetstream(),
        lease_config(settings, own),
        instance,
        own.advertise_addr or advertised(settings.listen_address(settings.table_addr)),
        # The event log's P (1 when unpartitioned): a table's events and its instance are
        # chosen by the same function of its id.
        await event_log.layout(),
        manager.load,
        manager.drop,
        metrics.LEASES,
    )
    manager.holds = ownership.holds
    deps.fence = ownership.fence
    deps.partition_of = ownership.partition_of
    forwarder = Forwarder(ownership)
    limits = TableLimits.of(settings.limits)
    servicer = TableServicer(
        manager,
        settings.player_token_key,
        forwarder,
        limits,
        accepted_token_keys=tuple(key for key, _ in settings.player_token_keys_accepted),
    )
    server = build_server(
        service="table",
        address=settings.listen_address(settings.table_addr),
        registrations=[lambda s: add_to_server(servicer, s)],
        service_names=[SERVICE_NAME],
        policy=policy(dict(settings.tokens)),
        caller_rate=caller_limiter("table", settings.limits.caller_calls_per_s),
    )
    return TableApp(
        settings, nc, store, money, manager, ownership, forwarder, server, ConnectionWatch(nc, "table"), limits
    )
