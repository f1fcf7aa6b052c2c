"""Bring up and tear down the whole stack: NATS, PostgreSQL, migrations, the services.

Used by ``socai up`` (foreground, Ctrl-C stops everything), ``socai demo`` and the
end-to-end tests. Embedded servers start only when their URL is not configured. Each
service runs as its own process (``python -m socai_<name>``), as in production, so a
test can kill one with SIGKILL and start it again.

PostgreSQL roles, as in production (``socai.infra.db``): on the embedded server the
migrations run as the owner role and each service connects as its own role, which owns
nothing and holds only its grants. With ``SOCAI_DATABASE_URL`` set, migrations and every
service use that one URL (a deployment gives each process its own: deploy/README.md).

NATS users, as in production (``socai.infra.nats_auth``): the embedded nats-server runs
with deploy/'s users for this stack's streams, prefixes and P, with passwords of this run;
each service connects as its own user, the provisioning as ``provisioner``, and a tool
(``socai audit``, ``socai status``, the demo's checks) finds its user's URL with
``Settings.nats_url_for``. With ``SOCAI_NATS_URL`` set, that URL is everyone's.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING

from socai import errors
from socai.infra.config import Settings
from socai.infra.db import OWNER_ROLE, SERVICE_ROLES, role_url
from socai.infra.logging import get_logger
from socai.infra.nats_auth import Layout
from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres

if TYPE_CHECKING:
    from nats.js import JetStreamContext


log = get_logger("socai.stack")

SERVICES = ("ledger", "table", "settlement")  # start order: each depends on the ones before


def service_exists(name: str) -> bool:
    return importlib.util.find_spec(f"socai_{name}.__main__") is not None


def service_address(settings: Settings, name: str) -> str:
    return {"ledger": settings.ledger_addr, "table": settings.table_addr, "settlement": settings.settlement_addr}[name]


INSTANCE_PORT_STEP = 100  # instance i of a service listens at its port + 100 × i
METRICS_PORT_STEP = 10  # ... and serves metrics at its metrics port + 10 × i


def nats_layout(settings: Settings) -> Layout:
    """What the NATS users of a stack with ``settings`` may touch: its streams, prefixes and
    P, settlement's durable and both lease buckets as the services name them."""
    from socai_settlement import config as settlement_config
    from socai_table import ownership

    settlement = settlement_config.SettlementConfig.from_env()
    return Layout.of(
        settings,
        settlement_durable=settlement.durable,
        table_lease_bucket=ownership.lease_config(settings, ownership.OwnershipSettings.from_env()).bucket,
        settlement_lease_bucket=settlement_config.lease_config(settings, settlement).bucket,
    )


def instance_name(name: str, instance: int) -> str:
    """``settlement`` for the first instance, ``settlement-1`` … for the others."""
    return name if instance == 0 else f"{name}-{instance}"


def instance_address(address: str, instance: int) -> str:
    host, port = address.rsplit(":", 1)
    return f"{host}:{int(port) + INSTANCE_PORT_STEP * instance}"


def clients_address(address: str, instances: int) -> str:
    """What clients dial to reach every instance (round robin, ``grpc_client.channel``)."""
    if instances <= 1:
        return address
    return "ipv4:" + ",".join(instance_address(address, i) for i in range(instances))


async def grpc_health(address: str, timeout_s: float = 2.0) -> str:
    """The grpc.health.v1 status of ``address`` ("SERVING", "NOT_SERVING", or "DOWN: …")."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
            return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
    except grpc.aio.AioRpcError as exc:
        return f"DOWN: {exc.code().name}"


@dataclass
class Stack:
    settings: Settings
    nats: EmbeddedNats | None = None
    postgres: EmbeddedPostgres | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    log_files: dict[str, IO[bytes]] = field(default_factory=dict)
    # How many processes of each service (``socai up --table-instances 2 --settlement-instances 2``);
    # 1 if absent.
    instances: dict[str, int] = field(default_factory=dict)
    # The embedded NATS also has the test harness's unrestricted user (``nats_auth.TEST_HARNESS``):
    # harnesses that watch every lease and inject faults (tests/chaos). Never for ``socai up``.
    nats_test_harness: bool = False

    @property
    def nats_url(self) -> str:
        """Where NATS listens (the embedded server's address carries no user: ``nats_url_for``)."""
        url = self.settings.nats_url or (self.nats.url if self.nats else None)
        if not url:
            raise errors.PreconditionFailed("NATS_NOT_STARTED", "the stack's NATS is not started")
        return url

    def nats_url_for(self, user: str) -> str:
        """The URL ``user`` connects with: SOCAI_NATS_URL when set, else the embedded
        server's for that user this run."""
        if self.settings.nats_url:
            return self.settings.nats_url
        if self.nats is None:
            raise errors.PreconditionFailed("NATS_NOT_STARTED", "the stack's NATS is not started")
        return self.nats.url_for(user)

    @property
    def database_url(self) -> str:
        """The configured URL, else the embedded server's owner role (migrations, tools)."""
        url = self.settings.database_url or (self.postgres.url_for(OWNER_ROLE) if self.postgres else None)
        if not url:
            raise errors.PreconditionFailed("POSTGRES_NOT_STARTED", "the stack's PostgreSQL is not started")
        return url

    def service_database_url(self, name: str) -> str:
        """The URL service ``name`` connects with: the configured one, else its own role's."""
        if self.settings.database_url:
            return self.settings.database_url
        return role_url(self.database_url, SERVICE_ROLES[name])

    def resolved_settings(self) -> Settings:
        """Settings with the URLs of whatever this stack runs (embedded or configured), and
        for a service with several instances, an address that reaches all of them. The
        NATS URL stays unset with the embedded server: each client takes its own user's
        (``Settings.nats_url_for``, from the server's credentials under ``var_dir``)."""
        s = self.settings
        return replace(
            s,
            nats_url=s.nats_url,
            database_url=self.database_url,
            table_addr=clients_address(s.table_addr, self.instances.get("table", 1)),
            settlement_addr=clients_address(s.settlement_addr, self.instances.get("settlement", 1)),
        )

    def start_infra(self) -> None:
        var = self.settings.var_dir
        if not self.settings.nats_url:
            self.nats = EmbeddedNats(
                var / "nats",
                port=self.settings.nats_port,
                layouts=(nats_layout(self.settings),),
                test_harness=self.nats_test_harness,
            )
            self.nats.start()
        if not self.settings.database_url:
            self.postgres = EmbeddedPostgres(var / "pg", port=self.settings.pg_port)
            self.postgres.start()
        migrate.upgrade_all(self.database_url)
        asyncio.run(self._provision_stream())

    async def _provision_stream(self) -> None:
        await provision_streams(self.resolved_settings())

    def start_service(self, name: str, timeout_s: float = 30.0, instance: int = 0) -> None:
        """Start instance ``instance`` of service ``name`` as its own process (its log
        ``var/log/<name>[-<instance>].log``) and wait until it serves."""
        proc_name = instance_name(name, instance)
        log_dir = self.settings.var_dir / "log"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{proc_name}.log"
        env = {
            **os.environ,
            **self.resolved_settings().as_env(),
            "SOCAI_NATS_URL": self.nats_url_for(name),
            "SOCAI_DATABASE_URL": self.service_database_url(name),
            # The service rotates this file itself and moves its stdout/stderr along; the
            # redirect below catches what it prints before its logging is configured.
            "SOCAI_LOG_FILE": str(log_path.resolve()),
        }
        if self.instances.get(name, 1) > 1:
            env["SOCAI_LISTEN_ADDR"] = instance_address(service_address(self.settings, name), instance)
            env["SOCAI_METRICS_PORT_BASE"] = str(self.settings.metrics_port_base + METRICS_PORT_STEP * instance)
            env["SOCAI_INSTANCE_ID"] = f"{proc_name}-{os.getpid()}"
        out = log_path.open("ab")
        self.log_files[proc_name] = out
        proc = subprocess.Popen([sys.executable, "-m", f"socai_{name}"], env=env, stdout=out, stderr=subprocess.STDOUT)
        self.procs[proc_name] = proc
        self.wait_serving(name, timeout_s, instance)

    def wait_serving(self, name: str, timeout_s: float = 30.0, instance: int = 0) -> None:
        address = instance_address(service_address(self.settings, name), instance)
        name = instance_name(name, instance)
        deadline = time.monotonic() + timeout_s
        status = ""
        while time.monotonic() < deadline:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise errors.Unavailable(
                    "SERVICE_START_FAILED",
                    f"{name} exited with {proc.returncode}; see {self.settings.var_dir / 'log' / (name + '.log')}",
                )
            status = asyncio.run(grpc_health(address, 1.0))
            if status == "SERVING":
                log.info("service_serving", service=name, address=address)
                return
            time.sleep(0.2)
        raise errors.Unavailable(
            "SERVICE_START_FAILED", f"{name} not serving at {address} after {timeout_s}s: {status}"
        )

    def start(self, services: tuple[str, ...] = SERVICES) -> list[str]:
        """Start the infrastructure and every service of ``services`` that exists."""
        self.start_infra()
        started = []
        for name in services:
            if service_exists(name):
                for instance in range(self.instances.get(name, 1)):
                    self.start_service(name, instance=instance)
                    started.append(instance_name(name, instance))
        return started

    def stop_service(self, name: str, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int | None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        out = self.log_files.pop(name, None)
        if out:
            out.close()
        return proc.returncode

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            self.stop_service(name)
        if self.postgres:
            self.postgres.stop()
        if self.nats:
            self.nats.stop()


async def provision_streams(
    settings: Settings, *, allow_repartition: bool = False, lease_env: Mapping[str, str] | None = None
) -> list[str]:
    """Create or update every stream socai owns (idempotent; keeps their data): the event
    log (with ``SOCAI_EVENT_PARTITIONS``) and the ledger's outbox stream. A different P on
    an existing event log is refused unless ``allow_repartition`` (the migration: see
    ``repartition``).

    With ``lease_env`` (``socai migrate`` passes its environment) also the lease buckets of
    the table and settlement partitions, named and with the TTL the services read from that
    environment (``SOCAI_TABLE_LEASE_*``, ``SOCAI_SETTLEMENT_LEASE_*``); raises
    PreconditionFailed("LEASE_BUCKET_INCOMPATIBLE") when one exists with another TTL. The
    services still create a missing bucket themselves. Returns the buckets ensured.
    """
    from socai.infra.leases import ensure_lease_bucket
    from socai.infra.nats import connect, ensure_stream
    from socai_settlement import config as settlement_config
    from socai_table import ownership

    nc = await connect(settings.nats_url_for("provisioner"), name="socai-provision")
    try:
        js = nc.jetstream()
        if allow_repartition:
            await repartition(js, settings)
        else:
            await ensure_stream(js, settings.events_stream_spec())
        await ensure_stream(js, settings.ledger_stream_spec())
        if lease_env is None:
            return []
        buckets = [
            ownership.lease_config(settings, ownership.OwnershipSettings.from_env(lease_env)),
            settlement_config.lease_config(settings, settlement_config.SettlementConfig.from_env(lease_env)),
        ]
        for bucket in buckets:
            await ensure_lease_bucket(js, bucket)
        return [b.bucket for b in buckets]
    finally:
        await nc.close()


async def repartition(js: JetStreamContext, settings: Settings) -> None:
    """Change the event log's P to ``SOCAI_EVENT_PARTITIONS`` (deploy/README.md "Changing P").

    Refuses (PreconditionFailed "SETTLEMENT_LAG_NOT_ZERO", nothing changed) while a durable
    of settlement's current layout has a message it has not acked: those hands would have
    to be settled by a durable that no longer reads them. Then changes the stream (which
    records the P's it had, so a table is read under each) and sets settlement's durables
    for the new P: a durable the new layout still uses (same name and filter) keeps its
    place, which is the change; one it no longer uses is deleted (it is drained); one it
    needs whose filter already matches stored messages, from an earlier P, is created
    starting after the stream's last message, so no hand is read twice; the others are
    created by settlement itself, from the start of their (empty) filter.
    """
    from nats.js.errors import NotFoundError

    from socai.infra.nats import ensure_stream
    from socai.infra.partitions import partitions_of
    from socai_settlement import durables
    from socai_settlement.config import SettlementConfig

    spec = settings.events_stream_spec()
    prefix = settings.events_prefix
    settlement = SettlementConfig.from_env()
    try:
        info = await js.stream_info(spec.name)
    except NotFoundError:
        await ensure_stream(js, spec)
        return
    before = partitions_of(info.config, prefix) or 0
    after = spec.partitions
    if before == after:
        await ensure_stream(js, spec)
        return
    old = durables.layout(settlement.durable, prefix, before)
    await durables.require_drained(js, spec.name, old)
    info = await ensure_stream(js, spec, allow_repartition=True)
    new = durables.layout(settlement.durable, prefix, after)
    await durables.relayout(js, spec.name, settlement, old, new, int(info.state.last_seq) + 1)
    log.info("event_log_repartitioned", stream=spec.name, partitions_before=before, partitions=after)


def running_services(settings: Settings) -> dict[str, str]:
    return {name: asyncio.run(grpc_health(service_address(settings, name))) for name in SERVICES}
