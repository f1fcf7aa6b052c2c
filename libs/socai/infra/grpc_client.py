"""Channels to socai services that present a bearer token on every call."""

from __future__ import annotations

from typing import Any

import grpc

from socai.infra import tracing
from socai.infra.logging import get_logger

log = get_logger("socai.grpc.client")


def _with_token(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    metadata = list(details.metadata or [])
    metadata.append(("authorization", f"Bearer {token}"))
    return grpc.aio.ClientCallDetails(
        method=details.method,
        timeout=details.timeout,
        metadata=grpc.aio.Metadata(*metadata),
        credentials=details.credentials,
        wait_for_ready=details.wait_for_ready,
    )


class _UnaryToken(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        self.token = token

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_token(details, self.token), request)


class _StreamToken(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        self.token = token

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_token(details, self.token), request)


def channel(address: str, token: str | None) -> grpc.aio.Channel:
    """An insecure channel to ``address`` (TLS terminates at the mesh in deploy/k8s) that
    adds ``authorization: Bearer <token>`` to every call when ``token`` is given.

    ``address`` may name several instances (``ipv4:127.0.0.1:50053,127.0.0.1:50153``, or a
    DNS name with several addresses, as a headless Service has): calls go round robin over
    the ones that answer, so one instance down does not fail every call. While tracing is on
    (``socai.infra.tracing``) every call is a span and carries its ``traceparent``."""
    interceptors: list[Any] = [_UnaryToken(token), _StreamToken(token)] if token else []
    interceptors += tracing.client_interceptors()  # traceparent in the metadata while tracing is on
    return grpc.aio.insecure_channel(
        address,
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", 16 * 1024 * 1024),
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.enable_retries", 1),
            ("grpc.lb_policy_name", "round_robin"),
        ],
    )
