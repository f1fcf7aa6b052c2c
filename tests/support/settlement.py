"""Settlement on real NATS, real PostgreSQL and the real ledger service, in this process.

Each test gets its own database (every service's schema migrated), its own stream and
subject prefix, a ledger and a settlement service on free ports. ``Harness`` bundles what a
test needs: the event log to publish on, ledger and settlement stubs (with the tokens of
the callers that use them), and waits. ``harness_for`` is the fixture body shared by the
integration, fault and end-to-end suites.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import grpc
from nats.aio.client import Client as NatsClient
from nats.js.errors import NotFoundError

from socai.events.log import EventLog
from socai.gen.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from socai.gen.settlement.v1 import settlement_pb2_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.nats import StreamSpec, ensure_stream
from socai.infra.nats_auth import Layout
from socai_settlement.app import App, build_app
from socai_settlement.config import SettlementConfig
from tests.support.nats_users import Identities, identities, users_server
from tests.support.ports import free_port
from tests.support.stack import metrics_base


async def start_service(app: Any) -> None:
    """What ``socai.infra.service.serve`` does before it waits for SIGTERM (``start``
    serves gRPC and starts the background work)."""
    await app.start()


async def stop_service(app: Any) -> None:
    await app.stop()


async def start_ledger(settings: Settings) -> Any:
    from socai_ledger.app import build_app as build_ledger

    app = await build_ledger(settings)
    await start_service(app)
    return app


@dataclass
class Harness:
    settings: Settings  # NATS: the test harness's URL, which publishes the simulated hands
    log: EventLog
    nc: NatsClient
    config: SettlementConfig
    # Each service's own NATS user on the test's streams (tests.support.nats_users).
    users: Identities = field(default_factory=lambda: Identities(lambda _user: "", with_users=False))
    ledger_app: Any = None
    _permits: list[Layout] = field(default_factory=list)
    settlement: App | None = None
    _channels: list[Any] = field(default_factory=list)

    def _channel(self, address: str, caller: str) -> Any:
        ch = channel(address, self.settings.tokens[caller])
        self._channels.append(ch)
        return ch

    def ledger(self, caller: str = "cashier") -> Any:
        return ledger_pb2_grpc.LedgerServiceStub(self._channel(self.settings.ledger_addr, caller))

    def api(self, caller: str = "operator") -> Any:
        return settlement_pb2_grpc.SettlementServiceStub(self._channel(self.settings.settlement_addr, caller))

    def as_user(self, user: str) -> Settings:
        """The settings of a service that connects to NATS as ``user``."""
        return replace(self.settings, nats_url=self.users.url_for(user) or self.settings.nats_url)

    async def start_ledger(self) -> None:
        self.ledger_app = await start_ledger(self.as_user("ledger"))

    async def stop_ledger(self) -> None:
        if self.ledger_app is not None:
            await stop_service(self.ledger_app)
            self.ledger_app = None

    async def start_settlement(self, config: SettlementConfig | None = None) -> App:
        config = config or self.config
        # The settlement user may touch the durables of the stream's P now (a test may have
        # partitioned the stream after the harness began).
        self.log.partitions = None
        partitions = await self.log.layout()
        self.permit(replace(Layout.of(self.settings, settlement_durable=config.durable), partitions=partitions))
        self.settlement = await build_app(self.as_user("settlement"), config)
        await start_service(self.settlement)
        return self.settlement

    async def stop_settlement(self) -> None:
        if self.settlement is not None:
            await stop_service(self.settlement)
            self.settlement = None

    def permit(self, layout: Layout) -> None:
        """Let the users touch ``layout`` too, until the harness closes."""
        server = users_server(self.settings.nats_url or "")
        if server is not None and layout not in self._permits:
            server.add(layout)
            self._permits.append(layout)

    async def close(self) -> None:
        await self.stop_settlement()
        await self.stop_ledger()
        for ch in self._channels:
            await ch.close()
        server = users_server(self.settings.nats_url or "")
        while server is not None and self._permits:
            server.remove(self._permits.pop())

    async def counts(self) -> tuple[int, int]:
        """(settled hands, open dead letters) in the settlement database."""
        assert self.settlement is not None
        return await self.settlement.store.counts()

    async def transaction(self, key: str) -> Any:
        """The ledger transaction under ``key``, or None."""
        try:
            reply = await self.ledger("auditor").GetTransaction(ledger_pb2.GetTransactionRequest(idempotency_key=key))
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        return reply.transaction

    async def balance(self, account_id: str) -> int:
        try:
            reply = await self.ledger("auditor").GetAccount(ledger_pb2.GetAccountRequest(account_id=account_id))
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return 0
            raise
        return int(reply.account.balance_gold)


async def wait_for(check: Callable[[], Awaitable[bool]], timeout_s: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what or check}")
        await asyncio.sleep(0.05)


def test_settings(nats_url: str, database_url: str, stream_spec: StreamSpec) -> Settings:
    return replace(
        Settings(),
        nats_url=nats_url,
        database_url=database_url,
        ledger_addr=f"127.0.0.1:{free_port()}",
        settlement_addr=f"127.0.0.1:{free_port()}",
        table_addr=f"127.0.0.1:{free_port()}",
        metrics_port_base=metrics_base(),
        events_stream=stream_spec.name,
        events_prefix=stream_spec.subjects[0].removesuffix(".>"),
        # The ledger's outbox stream of this test alone (its subjects beside the events').
        ledger_stream=f"{stream_spec.name}_LEDGER",
        ledger_prefix=stream_spec.subjects[0].removesuffix(".events.>") + ".ledger",
        log_format="console",
    )


# Replay in the test's own process (replay_workers=0): a pool of worker processes per test
# would cost each test their start-up on a shared machine; test_replay_workers.py covers them.
FAST = SettlementConfig(
    fetch_timeout_s=0.2, backoff_initial_s=0.05, backoff_max_s=0.5, lag_interval_s=0.5, replay_workers=0
)


@asynccontextmanager
async def harness_for(
    nats_url: str, database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[Harness]:
    settings = test_settings(nats_url, database_url, stream_spec)
    log = EventLog(nats_client, settings.events_stream, settings.events_prefix)
    await ensure_stream(log.js, stream_spec)
    await ensure_stream(log.js, settings.ledger_stream_spec())  # as the migration job does
    # Leases live in a bucket named after the test's own stream; a short TTL lets a restart
    # after a kill take over quickly.
    config = dataclasses.replace(FAST, lease_ttl_s=2.0)
    with identities(settings, Layout.of(settings, settlement_durable=config.durable)) as users:
        h = Harness(settings, log, nats_client, config, users)
        try:
            yield h
        finally:
            await h.close()
            await log.js.delete_stream(stream_spec.name)
            with contextlib.suppress(NotFoundError):
                await log.js.delete_stream(settings.ledger_stream)
