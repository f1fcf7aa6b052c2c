"""The shape every service process shares: ``python -m socai_<name>``.

``run(name, build)`` reads Settings from the environment, configures JSON logging, serves
Prometheus metrics on ``metrics_port_base + METRICS_OFFSET[name]``, builds the app with
``build(settings)``, starts it (the app starts its gRPC server and background work), waits
for SIGTERM/SIGINT, then stops the app gracefully (health NOT_SERVING first, in-flight
calls finish, background work drains).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Protocol

from prometheus_client import start_http_server

from socai import errors
from socai.infra.config import Settings
from socai.infra.grpc_server import GrpcServer, install_stop_signals
from socai.infra.logging import configure, get_logger

METRICS_OFFSET = {"ledger": 0, "table": 1, "settlement": 2}


class App(Protocol):
    grpc: GrpcServer

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def serve(app: App, stop: asyncio.Event) -> None:
    await app.start()
    try:
        await stop.wait()
    finally:
        await app.stop()


def run(name: str, build: Callable[[Settings], Awaitable[App]]) -> None:
    settings = Settings.from_env()
    configure(fmt=settings.log_format, level=settings.log_level)
    log = get_logger(f"socai.{name}")

    async def main() -> None:
        stop = asyncio.Event()
        install_stop_signals(stop)
        app = await build(settings)
        log.info("service_starting", service=name, grpc_port=app.grpc.port)
        await serve(app, stop)
        log.info("service_stopped", service=name)

    port = settings.metrics_port_base + METRICS_OFFSET.get(name, 9)
    try:
        start_http_server(port, addr="0.0.0.0" if settings.listen_addr else "127.0.0.1")
    except OSError as exc:
        log.warning("metrics_port_unavailable", port=port, error=str(exc))
    try:
        asyncio.run(main())
    except errors.SocaiError as exc:
        log.error("service_failed", service=name, code=exc.code, error=exc.message)
        sys.exit(2)
