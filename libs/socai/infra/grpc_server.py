"""The grpc.aio server every socai service runs on.

``build_server`` gives a server with:
- health checking (grpc.health.v1) and reflection;
- one interceptor that authenticates the calling service by bearer token
  (``authorization: Bearer <token>``), enforces a per-method allow-list of callers and
  each caller's calls per second (``caller_rate``: ``RESOURCE_EXHAUSTED RATE_LIMITED``),
  binds a ``request_id`` into the log context, maps domain errors to status codes with a
  ``google.rpc.ErrorInfo`` reason (``socai.infra.grpc_errors``), and writes one log line
  and Prometheus samples per RPC (method, status, latency_ms);
- ``serve_until_stopped``: graceful shutdown on SIGTERM/SIGINT (in-flight calls get
  ``grace_s`` to finish; health flips to NOT_SERVING first so load balancers drain).

Health and reflection need no token: probes and grpcurl reach them without one.
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import random
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection
from prometheus_client import Counter, Histogram
from structlog.contextvars import bind_contextvars, reset_contextvars

from socai import errors
from socai.infra import tracing
from socai.infra.grpc_errors import (
    database_unavailable,
    internal_status,
    nats_unavailable,
    rich_status,
    status_code_of,
)
from socai.infra.limits import RateLimiter
from socai.infra.logging import get_logger

log = get_logger("socai.grpc")

# Request ids only need to be unique in the logs, not unpredictable: a seeded PRNG instead of
# uuid4, whose os.urandom system call per RPC showed up in the ledger's profile.
_REQUEST_IDS = random.Random()

current_caller: contextvars.ContextVar[str] = contextvars.ContextVar("socai_caller", default="")

RPC_TOTAL = Counter("socai_rpc_requests_total", "RPCs handled", ["service", "method", "code"])
RPC_LATENCY = Histogram(
    "socai_rpc_latency_seconds",
    "RPC latency",
    ["service", "method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
ANY_CALLER = "*"
KNOWN_HEADERS_MAX = 256
WRAPPED_METHODS_MAX = 1024


@dataclass(frozen=True)
class AccessPolicy:
    """Who may call what: ``tokens`` maps caller name → bearer token (``new|old`` during a
    rotation); ``allow`` maps a method
    name (``PostTransaction``) to the callers allowed (``{"settlement", "table"}`` or
    ``{"*"}``). Methods not listed are refused to everyone (deny by default)."""

    tokens: Mapping[str, str]
    allow: Mapping[str, frozenset[str]]
    # Authorization headers already found valid → caller. Every RPC presents one of a few
    # headers; the constant-time comparison against every token runs once per header, not
    # once per call. Only valid headers are remembered (a wrong token always takes the full
    # path), and a dict lookup reveals nothing about how close a wrong token was.
    _known: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def caller_of(self, metadata: Mapping[str, str]) -> str:
        return self.caller_of_header(metadata.get("authorization", ""))

    def caller_of_header(self, header: str) -> str:
        """The caller named by an ``authorization`` header. Raises Unauthenticated."""
        known = self._known.get(header)
        if known is not None:
            return known
        caller = self._verify(header)
        if len(self._known) < KNOWN_HEADERS_MAX:
            self._known[header] = caller
        return caller

    def _verify(self, header: str) -> str:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise errors.Unauthenticated("UNAUTHENTICATED", "missing bearer token")
        found = ""
        for caller, expected in self.tokens.items():
            # "new|old" accepts either during a rotation. Compare against every token so
            # timing does not reveal which one matched.
            for candidate in expected.split("|"):
                if hmac.compare_digest(candidate.encode(), token.encode()):
                    found = caller
        if not found:
            raise errors.Unauthenticated("UNAUTHENTICATED", "unknown token")
        return found

    def check(self, method: str, caller: str) -> None:
        _check_allowed(self.allowed(method), method, caller)

    def allowed(self, method: str) -> frozenset[str]:
        """The callers allowed to call ``method`` (``/package.Service/Method`` or ``Method``)."""
        return self.allow.get(method.rsplit("/", 1)[-1], frozenset())


def _check_allowed(allowed: frozenset[str], method: str, caller: str) -> None:
    if ANY_CALLER not in allowed and caller not in allowed:
        raise errors.PermissionDenied("PERMISSION_DENIED", f"{caller} may not call {method}")


class SocaiInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps every method handler (health and reflection excepted) with authentication, the
    allow-list, error mapping, and one log line and Prometheus samples per RPC.

    Cheap per call, because the ledger's single-transaction calls spend a good share of
    their CPU here: the wrapped handler is built once per method (the caller and request id
    come from the call's own metadata), the metric children and the allow-list are looked
    up once per method, a known token header maps to its caller without another
    constant-time scan, and the request context is bound without a context manager.
    """

    def __init__(self, service: str, policy: AccessPolicy, caller_rate: RateLimiter | None = None) -> None:
        self.service = service
        self.policy = policy
        self.caller_rate = caller_rate
        # method → (the handler it wraps, the wrapped handler); rebuilt if the inner changes.
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method: str = details.method
        if handler is None or method.startswith(OPEN_PREFIXES):
            return handler
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(handler, method)
        if len(self._wrapped) < WRAPPED_METHODS_MAX:  # methods are the servicers' own: few
            self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        rpc = _Rpc(self.service, method, self.policy, self.caller_rate)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                _wrap_unary(handler.unary_unary, rpc),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                _wrap_stream(handler.unary_stream, rpc),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


def _call_metadata(context: grpc.aio.ServicerContext) -> tuple[str, str]:
    """(authorization, x-request-id) of the call ("" when absent; the last one wins)."""
    authorization = request_id = ""
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str):
            authorization = value
        elif key == "x-request-id" and isinstance(value, str):
            request_id = value
    return authorization, request_id


def _wrap_unary(inner: Any, rpc: _Rpc) -> Any:
    async def behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
        outcome = _Outcome(rpc, context)
        try:
            outcome.authorize()
            return await inner(request, context)
        except BaseException as exc:
            await outcome.fail(exc, context)
        finally:
            outcome.end()

    return behavior


def _wrap_stream(inner: Any, rpc: _Rpc) -> Any:
    async def behavior(request: Any, context: grpc.aio.ServicerContext) -> Any:
        outcome = _Outcome(rpc, context)
        try:
            outcome.authorize()
            async for item in inner(request, context):
                yield item
        except GeneratorExit:
            # The client went away (a WatchTable cancelled): grpc drops the stream's
            # generator and it is closed, possibly later and from another task (the event
            # loop's finalizer of garbage-collected generators), so in another context:
            # ``end`` copes with that. Nothing failed; nothing may be awaited or yielded.
            outcome.code = grpc.StatusCode.CANCELLED
            raise
        except BaseException as exc:
            await outcome.fail(exc, context)
        finally:
            outcome.end()

    return behavior


def _new_request_id() -> str:
    return f"{_REQUEST_IDS.getrandbits(64):016x}"


# One line in this many for routine successes of a method (failures and slow calls: always).
OK_LOG_EVERY = 100
SLOW_RPC_S = 0.5


class _Rpc:
    """What every call of one method shares: its names, who may call it, its metric children."""

    __slots__ = (
        "_by_code",
        "allowed",
        "caller_rate",
        "latency",
        "method",
        "not_found_calls",
        "ok_calls",
        "policy",
        "service",
        "short",
    )

    def __init__(self, service: str, method: str, policy: AccessPolicy, caller_rate: RateLimiter | None = None) -> None:
        self.service = service
        self.method = method
        self.short = method.rsplit("/", 1)[-1]
        self.policy = policy
        self.allowed = policy.allowed(method)
        self.caller_rate = caller_rate if caller_rate is not None and caller_rate.enabled else None
        self.latency = RPC_LATENCY.labels(service, self.short)
        self._by_code: dict[grpc.StatusCode, Any] = {}
        self.ok_calls = 0
        self.not_found_calls = 0

    def authorize(self, authorization: str) -> str:
        """The caller. Raises Unauthenticated / PermissionDenied, and ResourceExhausted
        ("RATE_LIMITED") when the caller is over its calls per second."""
        caller = self.policy.caller_of_header(authorization)
        _check_allowed(self.allowed, self.method, caller)
        if self.caller_rate is not None:
            self.caller_rate.admit(caller)
        return caller

    def total(self, code: grpc.StatusCode) -> Any:
        child = self._by_code.get(code)
        if child is None:
            child = self._by_code[code] = RPC_TOTAL.labels(self.service, self.short, code.name)
        return child


class _Outcome:
    """One call from start to end: its request context bound for logging, its caller, the
    code it ended with and its latency.

    The call's own line names its request id, method and caller itself rather than taking
    them from the context: a server stream's generator may be closed from another task,
    whose context is not the call's (its line would carry another call's request id)."""

    __slots__ = ("authorization", "caller", "code", "reason", "request_id", "rpc", "start", "tokens")

    def __init__(self, rpc: _Rpc, context: grpc.aio.ServicerContext) -> None:
        self.rpc = rpc
        self.start = time.perf_counter()
        self.code = grpc.StatusCode.OK
        self.reason = ""
        self.caller = ""
        self.authorization, request_id = _call_metadata(context)
        self.request_id = request_id or _new_request_id()
        self.tokens = bind_contextvars(request_id=self.request_id, rpc=rpc.short)

    def authorize(self) -> None:
        """Set ``current_caller``. Raises Unauthenticated / PermissionDenied."""
        self.caller = self.rpc.authorize(self.authorization)
        current_caller.set(self.caller)

    def end(self) -> None:
        self.log()
        try:
            reset_contextvars(**self.tokens)
        except ValueError:
            # A stream closed from another task (see ``_wrap_stream``): the tokens belong to
            # the call's context, which ends with the call's task; the context running now
            # had nothing bound by this call, so there is nothing to undo here.
            pass

    async def fail(self, exc: BaseException, context: grpc.aio.ServicerContext) -> None:
        if not isinstance(exc, errors.SocaiError):
            # A database or NATS outage a service did not map itself is still UNAVAILABLE (a
            # dependency), never INTERNAL (issue 17 defect 4, issue 29 item 2).
            mapped = database_unavailable(exc) or nats_unavailable(exc)
            if mapped is not None:
                log.warning(
                    "rpc_dependency_unavailable", method=self.rpc.method, reason=mapped.code, error=repr(exc)[:300]
                )
                exc = mapped
        if isinstance(exc, errors.SocaiError):
            self.code, self.reason = status_code_of(exc), exc.code
            await self._abort(context, rich_status(exc))
        if isinstance(exc, asyncio.CancelledError):
            self.code = grpc.StatusCode.CANCELLED
            raise exc
        if type(exc).__name__ == "AbortError":  # the servicer called context.abort itself
            code = context.code()
            self.code = code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN
            raise exc
        self.code, self.reason = grpc.StatusCode.INTERNAL, "INTERNAL"
        log.error("rpc_failed", method=self.rpc.method, exc_info=exc)
        await self._abort(context, internal_status())

    async def _abort(self, context: grpc.aio.ServicerContext, status: grpc.Status) -> None:
        """Answer the call with ``status``; a call its client has already left ends CANCELLED.

        A handler that fails just as its caller's deadline passes (a NATS lookup timing out
        at 5 s under a 5 s deadline) finds the call closed by grpc's core before the
        cancellation reached the handler: sending the status then fails with grpc's
        ``ExecuteBatchError``, which grpc logs as an error with a traceback. Nobody is
        there to read the answer, so the call ends as cancelled, which grpc logs at debug."""
        try:
            await context.abort_with_status(status)
        except Exception as exc:
            if type(exc).__name__ != "ExecuteBatchError":
                raise
            self.code = grpc.StatusCode.CANCELLED
            raise asyncio.CancelledError from None

    def log(self) -> None:
        latency = time.perf_counter() - self.start
        rpc = self.rpc
        code = self.code
        rpc.total(code).inc()
        rpc.latency.observe(latency, tracing.exemplar())
        fields = {
            "method": rpc.method,
            "status": code.name,
            "latency_ms": round(latency * 1000, 3),
            "request_id": self.request_id,
            "rpc": rpc.short,
        }
        if self.reason:
            fields["reason"] = self.reason
        if self.caller:
            fields["caller"] = self.caller
        if code is grpc.StatusCode.OK or code is grpc.StatusCode.CANCELLED:
            # Routine successes are counted by the metrics above; one line per call made a
            # busy table service write 235 MB of logs in 25 minutes. The first success of
            # each method and then one in OK_LOG_EVERY are logged (saying so), and every
            # slow call; every failure is logged below.
            rpc.ok_calls += 1
            if rpc.ok_calls % OK_LOG_EVERY == 1 or latency >= SLOW_RPC_S:
                if OK_LOG_EVERY > 1:
                    fields["sampled_1_in"] = OK_LOG_EVERY
                log.info("rpc", **fields)
        elif code is grpc.StatusCode.NOT_FOUND:
            # A NOT_FOUND is an answer, not a server fault: a look-up of something that does
            # not exist (yet). An audit asks for every hand's transaction, and hands that move
            # no gold have none: one warning each made the ledger log ~1,600 lines per audit
            # (issue 17). Sampled like the successes, at INFO; the metrics count every one.
            rpc.not_found_calls += 1
            if rpc.not_found_calls % OK_LOG_EVERY == 1 or latency >= SLOW_RPC_S:
                if OK_LOG_EVERY > 1:
                    fields["sampled_1_in"] = OK_LOG_EVERY
                log.info("rpc", **fields)
        elif code is grpc.StatusCode.INTERNAL:
            log.error("rpc", **fields)
        else:
            log.warning("rpc", **fields)


@dataclass
class GrpcServer:
    server: grpc.aio.Server
    health: health_aio.HealthServicer
    port: int
    service_names: tuple[str, ...]

    async def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *self.service_names):
            await self.health.set(name, status)


def build_server(
    *,
    service: str,
    address: str,
    registrations: Iterable[Callable[[grpc.aio.Server], None]],
    service_names: Iterable[str],
    policy: AccessPolicy,
    max_workers_hint: int = 0,
    caller_rate: RateLimiter | None = None,
) -> GrpcServer:
    """A server listening on ``address`` (``host:port``; port 0 picks a free one) with the
    servicers of ``registrations`` (``lambda s: add_XServicer_to_server(servicer, s)``);
    ``caller_rate`` bounds each calling service's calls per second (``caller_limiter``).

    Raises Unavailable("PORT_IN_USE") when the address cannot be bound.
    """
    names = tuple(service_names)
    server = grpc.aio.server(
        # The trace's span first, so that the call's log line and exemplar carry its trace id.
        interceptors=[*tracing.server_interceptors(), SocaiInterceptor(service, policy, caller_rate)],
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", 16 * 1024 * 1024),
            ("grpc.max_send_message_length", 16 * 1024 * 1024),
            # Clients keep long watch streams open with a ping every 30 s; accept that.
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 0),
        ],
    )
    for register in registrations:
        register(server)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection((*names, reflection.SERVICE_NAME, "grpc.health.v1.Health"), server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise errors.Unavailable("PORT_IN_USE", f"cannot listen on {address}: {exc}") from exc
    if port == 0:
        raise errors.Unavailable("PORT_IN_USE", f"cannot listen on {address}: address in use")
    return GrpcServer(server, health, port, names)


def caller_limiter(service: str, per_s: float) -> RateLimiter:
    """Each calling service's calls per second to this instance (``SOCAI_LIMIT_CALLER_CALLS_PER_S``;
    0: no limit). A call the table service forwards to the instance holding its table is
    counted there too: each instance guards its own CPU."""
    return RateLimiter(service, "SOCAI_LIMIT_CALLER_CALLS_PER_S", per_s)


def install_stop_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` (graceful shutdown) instead of killing the process."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def serve_until_stopped(app: GrpcServer, stop: asyncio.Event, grace_s: float = 5.0) -> None:
    """Start ``app``, mark it SERVING, wait for ``stop``, then drain and stop."""
    await app.server.start()
    await app.set_serving(True)
    try:
        await stop.wait()
    finally:
        await app.set_serving(False)
        await app.server.stop(grace_s)
