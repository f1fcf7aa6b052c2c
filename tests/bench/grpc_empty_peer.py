"""``python -m tests.bench.grpc_empty_peer``: the ceiling of a unary call on the ledger's server.

The peer ``grpc_empty_unary_32`` of ``ledger.post_single_32`` (``bench_ledger``): the same
process shape as ``python -m socai_ledger`` (``socai.infra.service.run``: JSON logging, the
garbage collector tuned alike, Prometheus metrics) and the same server (``build_server``:
its options, the interceptor that authenticates, checks the allow-list and the caller's
rate, logs a line and observes the metrics per call, health), serving one unary method that
takes any bytes and answers an empty message. What a single posting costs beyond it is the
ledger's own work.
"""

from __future__ import annotations

from typing import Any

import grpc

from socai.infra.config import Settings
from socai.infra.grpc_server import AccessPolicy, GrpcServer, build_server, caller_limiter
from socai.infra.service import run

SERVICE = "socai.bench.Empty"
METHOD = f"/{SERVICE}/Call"


async def _empty(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return b""


class EmptyApp:
    def __init__(self, settings: Settings) -> None:
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {"Call": grpc.unary_unary_rpc_method_handler(_empty)},  # bytes in, bytes out
        )

        def register(server: Any) -> None:
            server.add_generic_rpc_handlers((handler,))

        self.grpc: GrpcServer = build_server(
            service="ledger",
            address=settings.listen_address(settings.ledger_addr),
            registrations=[register],
            service_names=[SERVICE],
            policy=AccessPolicy(tokens=settings.tokens, allow={"Call": frozenset({"*"})}),
            caller_rate=caller_limiter("ledger", settings.limits.caller_calls_per_s),
        )

    async def start(self) -> None:
        await self.grpc.server.start()
        await self.grpc.set_serving(True)

    async def stop(self) -> None:
        await self.grpc.set_serving(False)
        await self.grpc.server.stop(5.0)


async def build(settings: Settings) -> EmptyApp:
    return EmptyApp(settings)


if __name__ == "__main__":
    run("ledger", build)
