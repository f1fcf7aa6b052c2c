"""The shape every service process shares: ``python -m socai_<name>``.

``run(name, build)`` reads Settings from the environment, configures JSON logging and
tracing (``socai.infra.tracing``: off unless ``OTEL_TRACES_EXPORTER`` is set), serves
Prometheus metrics on ``metrics_port_base + METRICS_OFFSET[name]`` (on the host the service's
gRPC listens on, or ``SOCAI_METRICS_HOST``: ``Settings.metrics_bind_host``), builds the app with
``build(settings)``, starts it (the app starts its gRPC server and background work), waits
for SIGTERM/SIGINT, then stops the app gracefully (health NOT_SERVING first, in-flight
calls finish, background work drains). A NATS client that cannot be brought back
(``socai.infra.nats_liveness``) stops the process the same way, with exit status 1: its
supervisor (Kubernetes, ``socai up``'s launcher) starts it again.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Protocol

from prometheus_client import start_http_server

from socai import errors
from socai.infra import collector, tracing
from socai.infra.config import Settings
from socai.infra.grpc_errors import database_unavailable, nats_unavailable
from socai.infra.grpc_server import GrpcServer, install_stop_signals
from socai.infra.logging import configure, get_logger
from socai.infra.nats_liveness import set_process_on_dead

METRICS_OFFSET = {"ledger": 0, "table": 1, "settlement": 2}


def own_address(settings: Settings, name: str) -> str:
    """The address others dial for service ``name`` (its gRPC listens there unless
    SOCAI_LISTEN_ADDR says otherwise)."""
    return {"ledger": settings.ledger_addr, "table": settings.table_addr, "settlement": settings.settlement_addr}.get(
        name, "127.0.0.1:0"
    )


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


# The collector's setting for a service's life (socai.infra.collector says why and what it
# measured).
GC_GEN0_THRESHOLD = collector.GEN0_THRESHOLD


def tune_gc() -> None:
    collector.tune_for_service()


def run(name: str, build: Callable[[Settings], Awaitable[App]]) -> None:
    settings = Settings.from_env()
    configure(
        fmt=settings.log_format,
        level=settings.log_level,
        log_file=settings.log_file,
        max_bytes=settings.log_max_bytes,
        backups=settings.log_backups,
    )
    log = get_logger(f"socai.{name}")
    try:
        settings.check_secrets()
        tracing.configure(name)  # off unless OTEL_TRACES_EXPORTER names an exporter
    except errors.SocaiError as exc:
        log.error("service_failed", service=name, code=exc.code, error=exc.message)
        print(f"socai {name}: {exc.message}", file=sys.stderr)
        sys.exit(2)

    failed: list[str] = []

    async def main() -> None:
        stop = asyncio.Event()
        install_stop_signals(stop)

        def dead_connection(why: str) -> None:
            failed.append(why)
            log.error("service_exiting", service=name, why=why)
            stop.set()

        set_process_on_dead(dead_connection)
        app = await build(settings)
        tune_gc()
        log.info("service_starting", service=name, grpc_port=app.grpc.port)
        await serve(app, stop)
        log.info("service_stopped", service=name)

    port = settings.metrics_port_base + METRICS_OFFSET.get(name, 9)
    host = settings.metrics_bind_host(own_address(settings, name))
    try:
        start_http_server(port, addr=host)
    except OSError as exc:
        log.warning("metrics_port_unavailable", host=host, port=port, error=str(exc))
    try:
        asyncio.run(main())
    except errors.SocaiError as exc:
        log.error("service_failed", service=name, code=exc.code, error=exc.message)
        sys.exit(2)
    except Exception as exc:
        # PostgreSQL or NATS not answering while the service starts (a database restarting
        # under a rolling restart): one structured line and exit status 1 for the supervisor
        # to start it again, not a traceback; anything else is a bug and keeps its traceback.
        outage = database_unavailable(exc) or nats_unavailable(exc)
        if outage is None:
            raise
        log.error("service_failed", service=name, code=outage.code, error=outage.message)
        sys.exit(1)
    finally:
        tracing.shutdown()  # export the spans still buffered
    if failed:
        sys.exit(1)
