"""OpenTelemetry tracing: one trace per hand, across the services and across NATS. Off by default.

What a hand's trace holds (docs/run/operations.md, "Traces"): the gRPC server span of the player's call that
ended the hand (``Act``), the ``append`` span of each event that call wrote, settlement's
``settle`` span (its parent is the HandEnded's ``append``; links go to the traces of the
hand's other events), its ``replay`` and ``post`` spans and the gRPC client span of the
post, the ledger's server span, its ``batch`` span and the outbox relay's ``publish`` span.

How the context travels. Over gRPC: the SDK's gRPC instrumentation (``server_interceptors``,
``client_interceptors``, added by ``socai.infra.grpc_server`` and ``grpc_client``) puts a W3C
``traceparent`` in the call's metadata. Over NATS: the one place events are appended
(``socai.events.log.EventLog.append``) and the ledger's outbox relay put ``traceparent`` into
the JetStream message's headers (``inject``); settlement reads it back from the HandEnded
message it settles (``context_of``). The headers are not part of what a hand's signature,
chain or seal cover, so tracing never changes what is stored of a hand.

Configuration: the standard ``OTEL_*`` variables, read by ``configure`` when a service starts
(``socai.infra.service.run``). ``OTEL_TRACES_EXPORTER`` names the exporters (``otlp``,
``console``, any installed ``opentelemetry_traces_exporter`` entry point); unset or ``none``
— socai's default, unlike the SDK's — leaves tracing off: no provider, no interceptors, no
headers, and every function here returns at its first test of ``enabled()``. The SDK itself
reads the rest (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_BSP_*``). ``OTEL_SDK_DISABLED=true`` turns it off too.

One provider per process, held here rather than as OpenTelemetry's global (which can be set
once per process): tests install one with an in-memory exporter and remove it again.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from typing import Any, Final

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from socai import errors

TRACEPARENT: Final = "traceparent"
EXPORTER_GROUP: Final = "opentelemetry_traces_exporter"
OTLP_BY_PROTOCOL: Final = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}
MARKS_MAX: Final = 10_000  # span contexts remembered by journal sequence (ledger → outbox relay)
LINKS_MAX: Final = 64  # links per span: a hand of a few hundred events links its first 64 traces

_PROPAGATOR: Final = TraceContextTextMapPropagator()
_NO_TRACER: Final = trace.NoOpTracer()

_provider: Any = None  # an opentelemetry.sdk.trace.TracerProvider while tracing is on
_tracers: dict[str, Tracer] = {}

log = structlog.get_logger("socai.tracing")


def enabled() -> bool:
    """Whether spans are recorded in this process (a provider is installed)."""
    return _provider is not None


def exporters_named(environ: Mapping[str, str]) -> list[str]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names (comma separated); none when it is unset,
    ``none`` or ``OTEL_SDK_DISABLED`` is true."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    return [] if not names or "none" in names else names


def configure(service: str, environ: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on for service ``service`` when ``OTEL_TRACES_EXPORTER`` names exporters
    (see the module docstring); the service name defaults to ``socai-<service>``. Returns
    whether it is on.

    Raises InvalidArgument("OTEL_EXPORTER_UNKNOWN") for an exporter no installed package provides.
    """
    env = os.environ if environ is None else environ
    names = exporters_named(env)
    if not names:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    found = {ep.name: ep for ep in metadata.entry_points(group=EXPORTER_GROUP)}
    # ``otlp`` is the standard name; the exporter packages register it by protocol (the
    # opentelemetry-exporter-otlp meta-package adds the alias, which socai does not install).
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    names = [OTLP_BY_PROTOCOL.get(protocol, name) if name == "otlp" and name not in found else name for name in names]
    unknown = [n for n in names if n not in found]
    if unknown:
        raise errors.InvalidArgument(
            "OTEL_EXPORTER_UNKNOWN", f"OTEL_TRACES_EXPORTER names {unknown}; installed: {sorted(found)}"
        )
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": f"socai-{service}"}
    provider = TracerProvider(resource=Resource.create(attributes))
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(found[name].load()()))
    install(provider)
    log.info("tracing_on", service=service, exporters=names)
    return True


def install(provider: Any) -> None:
    """Record spans with ``provider`` (an SDK ``TracerProvider``) from now on."""
    global _provider
    _provider = provider
    _tracers.clear()


def shutdown() -> None:
    """Export what is buffered and turn tracing off (a service's last step; tests)."""
    global _provider
    provider, _provider = _provider, None
    _tracers.clear()
    if provider is not None:
        provider.shutdown()


def tracer(name: str) -> Tracer:
    """The tracer of component ``name`` (``socai.table`` …); a no-op one while tracing is off."""
    if _provider is None:
        return _NO_TRACER
    found = _tracers.get(name)
    if found is None:
        found = _tracers[name] = _provider.get_tracer(name)
    return found


def server_interceptors() -> list[Any]:
    """The gRPC instrumentation's server interceptor (a span per call, its parent from the
    call's ``traceparent``), or none while tracing is off. Health checks and reflection are
    not traced: probes would fill the traces with a root span every few seconds."""
    if _provider is None:
        return []
    from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

    untraced = filters.any_of(filters.service_prefix("grpc.health."), filters.service_prefix("grpc.reflection."))
    return [aio_server_interceptor(tracer_provider=_provider, filter_=filters.negate(untraced))]  # type: ignore[no-untyped-call]


def client_interceptors() -> list[Any]:
    """The gRPC instrumentation's client interceptors (a span per call, ``traceparent`` in its
    metadata), or none while tracing is off."""
    if _provider is None:
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors

    return list(aio_client_interceptors(tracer_provider=_provider))  # type: ignore[no-untyped-call]


def inject(headers: MutableMapping[str, str]) -> None:
    """Put the current span's ``traceparent`` into message ``headers`` (nothing when no span is recorded)."""
    if _provider is not None:
        _PROPAGATOR.inject(headers)


def context_of(traceparent: str | None) -> SpanContext | None:
    """The remote span context a ``traceparent`` header names, or None (absent, malformed)."""
    if not traceparent:
        return None
    extracted = _PROPAGATOR.extract({TRACEPARENT: traceparent})
    span_context = trace.get_current_span(extracted).get_span_context()
    return span_context if span_context.is_valid else None


def current() -> SpanContext | None:
    """The span context of the current span, or None (tracing off, no span)."""
    if _provider is None:
        return None
    span_context = trace.get_current_span().get_span_context()
    return span_context if span_context.is_valid else None


def links(contexts: Sequence[SpanContext | None], besides: SpanContext | None = None) -> list[Link]:
    """Links to the distinct traces of ``contexts`` other than ``besides``'s, at most LINKS_MAX."""
    seen = {besides.trace_id} if besides is not None else set()
    out: list[Link] = []
    for span_context in contexts:
        if span_context is None or span_context.trace_id in seen:
            continue
        seen.add(span_context.trace_id)
        out.append(Link(span_context))
        if len(out) == LINKS_MAX:
            break
    return out


def start_span(
    component: str,
    name: str,
    *,
    parent: SpanContext | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    span_links: Sequence[Link] = (),
    start_time_ns: int | None = None,
) -> Span:
    """A span of ``component`` whose parent is ``parent`` (a root span when None), not made
    current; end it with ``span.end()``."""
    context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent is not None else otel_context.Context()
    return tracer(component).start_span(
        name, context=context, kind=kind, attributes=attributes, links=span_links, start_time=start_time_ns
    )


@contextmanager
def current_span(span: Span) -> Iterator[Span]:
    """Make ``span`` current for a block (calls made in it are its children); does not end it."""
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield span
    finally:
        otel_context.detach(token)


@contextmanager
def new_trace(component: str, name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Run a block in a new trace, its root span ``name`` linked to the span current before
    (a timer that fires long after the call that armed it starts its own trace)."""
    if _provider is None:
        yield
        return
    before = current()
    span = start_span(component, name, attributes=attributes, span_links=links([before]))
    with current_span(span), span:
        yield


def exemplar() -> dict[str, str] | None:
    """``{"trace_id": …}`` of the current sampled span, for a histogram's exemplar; None otherwise."""
    if _provider is None:
        return None
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid or not span_context.trace_flags.sampled:
        return None
    return {"trace_id": format(span_context.trace_id, "032x")}


def add_trace_ids(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: ``trace_id`` and ``span_id`` of the current span on every log line."""
    if _provider is None:
        return event_dict
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        event_dict["trace_id"] = format(span_context.trace_id, "032x")
        event_dict["span_id"] = format(span_context.span_id, "016x")
    return event_dict


class Marks:
    """Span contexts by sequence number, the newest MARKS_MAX: how the ledger's write batcher
    hands the outbox relay the span of the batch that wrote a journal sequence (the relay
    reads the transactions back from PostgreSQL, which keeps no trace context). A relay of
    another replica, or one that restarted, finds no mark and publishes without a parent."""

    def __init__(self, limit: int = MARKS_MAX) -> None:
        self._limit = limit
        self._by_seq: OrderedDict[int, SpanContext] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self._by_seq)

    def mark(self, seqs: Sequence[int], span_context: SpanContext) -> None:
        for seq in seqs:
            self._by_seq[seq] = span_context
        while len(self._by_seq) > self._limit:
            self._by_seq.popitem(last=False)

    def take(self, seq: int) -> SpanContext | None:
        return self._by_seq.pop(seq, None)
