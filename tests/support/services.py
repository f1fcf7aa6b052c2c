"""Run socai services in-process against the test's own NATS stream and database.

``running(...)`` builds each service with its real ``build_app`` on free ports (real gRPC,
real NATS, real PostgreSQL), wires their addresses into one another, and stops them in
reverse order. Each service connects to NATS as its own user (``tests.support.nats_users``). Fault tests that kill processes use subprocesses instead (tests/fault).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from socai.infra.config import Settings
from socai.infra.nats import StreamSpec
from tests.support.nats_users import Identities, identities
from tests.support.ports import free_port

ADDR_FIELD = {"ledger": "ledger_addr", "table": "table_addr", "settlement": "settlement_addr"}


def service_settings(nats_url: str, database_url: str, stream: StreamSpec, **overrides: Any) -> Settings:
    """Settings for one test: its own event stream and subject prefix, free ports."""
    prefix = stream.subjects[0].removesuffix(".>")
    base = Settings(
        nats_url=nats_url,
        database_url=database_url,
        events_stream=stream.name,
        events_prefix=prefix,
        ledger_addr=f"127.0.0.1:{free_port()}",
        table_addr=f"127.0.0.1:{free_port()}",
        settlement_addr=f"127.0.0.1:{free_port()}",
        metrics_port_base=0,
        log_format="console",
    )
    return replace(base, **overrides)


@dataclass
class Running:
    settings: Settings  # NATS: the test harness's URL (each app has its own user's)
    apps: dict[str, Any] = field(default_factory=dict)
    users: Identities | None = None  # each NATS user's URL on the test's streams

    def nats_url_for(self, user: str) -> str:
        """The URL to connect with as ``user`` (``auditor`` …) on the test's streams."""
        assert self.users is not None, "only while running"
        return self.users.url_for(user)

    async def delete_streams(self, *names: str) -> None:
        """Delete the test's streams, as the test harness (no service may), where they exist."""
        from nats.js.errors import NotFoundError

        from socai.infra.nats import connect

        nc = await connect(self.settings.nats_url or self.settings.effective_nats_url, name="socai-test-cleanup")
        try:
            for name in names:
                with contextlib.suppress(NotFoundError):
                    await nc.jetstream().delete_stream(name)
        finally:
            await nc.close()


async def build(name: str, settings: Settings) -> Any:
    module = importlib.import_module(f"socai_{name}.app")
    return await module.build_app(settings)


@asynccontextmanager
async def running(settings: Settings, names: Sequence[str] = ("ledger", "table")) -> AsyncIterator[Running]:
    """Start ``names`` in order (each may call the ones before it), each connected to NATS as
    its own user on the test's streams (``tests.support.nats_users``), after the streams
    are provisioned as the provisioner, as ``socai up`` and the migration job do."""
    from socai_cli.stack import provision_streams

    state = Running(settings)
    with identities(settings) as users:
        state.users = users
        await provision_streams(replace(settings, nats_url=users.url_for("provisioner")))
        try:
            for name in names:
                app = await build(name, replace(state.settings, nats_url=users.url_for(name)))
                await app.start()
                state.apps[name] = app
            yield state
        finally:
            for name in reversed(list(state.apps)):
                await state.apps[name].stop()
