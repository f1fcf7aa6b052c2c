"""Run socai services in-process against the test's own NATS stream and database.

``running(...)`` builds each service with its real ``build_app`` on free ports (real gRPC,
real NATS, real PostgreSQL), wires their addresses into one another, and stops them in
reverse order. Fault tests that kill processes use subprocesses instead (tests/fault).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from socai.infra.config import Settings
from socai.infra.nats import StreamSpec
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
    settings: Settings
    apps: dict[str, Any] = field(default_factory=dict)


async def build(name: str, settings: Settings) -> Any:
    module = importlib.import_module(f"socai_{name}.app")
    return await module.build_app(settings)


@asynccontextmanager
async def running(settings: Settings, names: Sequence[str] = ("ledger", "table")) -> AsyncIterator[Running]:
    """Start ``names`` in order (each may call the ones before it)."""
    state = Running(settings)
    try:
        for name in names:
            app = await build(name, state.settings)
            await app.start()
            state.apps[name] = app
        yield state
    finally:
        for name in reversed(list(state.apps)):
            await state.apps[name].stop()
