"""What tracing adds to the hot paths (``socai.infra.tracing``), off and on.

Off (the default) must cost nothing measurable: each path then only asks ``enabled()`` and
returns. The figures are the time the tracing code itself adds per call, measured without
NATS, PostgreSQL or gRPC around it (their time would bury a difference this small in noise),
in this process's CPU time (``time.process_time_ns``: a machine busy with other work takes
the CPU away between rounds, which wall-clock time would count):

- ``tracing.append_overhead_ns``: ``EventLog.append`` over the append it wraps (an
  ``_append`` that returns at once), per event; peer ``on``: with a provider installed
  (spans kept by an in-memory exporter), the append span and the header injection;
- ``tracing.settle_overhead_ns_per_hand``: a hand's ``HandSpans`` steps (start, replay,
  post, end) with its 12 messages' headers, per hand; peer ``on``;
- ``tracing.rpc_overhead_ns``: what each RPC and log line asks of tracing (the exemplar, the
  log processor) with no span; peer ``on``, under a span.

Each also has peer ``python_call_ns``, one Python call doing nothing in the same run: on a
loaded machine everything slows alike, and the overheads read best as a number of calls.

Compare them with what the paths cost whole (docs/run/operations.md, "Traces"): an append acknowledged by
JetStream ~0.6 ms (p50, fsync included), a hand settled ~1.3 ms of settlement's time (``settlement.drain``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from socai.events.log import EventLog
from socai.events.model import Event, HandEnded
from socai.infra import tracing
from socai_settlement.hand_spans import HandSpans
from socai_settlement.sealed_replay import EventBytes
from tests.bench.harness import BenchContext, Result

EVENTS_PER_HAND = 12


class _Instant(EventLog):
    """An event log whose append returns at once: what is left is the wrapper's own cost."""

    def __init__(self) -> None:
        self.prefix = "socai.events"

    async def _append(self, *args: Any) -> int:
        return 1


def _per_call_ns(fn: Callable[[], None], calls: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time_ns() - start) / calls)
    return best


def _append_ns(calls: int) -> float:
    log = _Instant()
    event = Event("t1", "h1", 12, "holdem", datetime.now(UTC), HandEnded(deck_seed="00"))

    async def wrapped() -> None:
        for _ in range(calls):
            await log.append(event, 11, {"Socai-Writer": "table-1/1"}, payload=b"x")

    async def bare() -> None:
        for _ in range(calls):
            await log._append(event, 11, {"Socai-Writer": "table-1/1"}, b"x", None)

    def timed(coro: Callable[[], Any]) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.process_time_ns()
            asyncio.run(coro())
            best = min(best, (time.process_time_ns() - start) / calls)
        return best

    return max(0.0, timed(wrapped) - timed(bare))


def _settle_ns(calls: int) -> float:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    block = f"NATS/1.0\r\nSocai-Writer: table-1/1\r\ntraceparent: {parent}\r\n\r\n".encode()
    events = [EventBytes(i, "h1", "t1", b"x", 100 + i, block) for i in range(1, EVENTS_PER_HAND + 1)]

    def one_hand() -> None:
        spans = HandSpans()
        spans.start([("h1", "t1", 100 + EVENTS_PER_HAND, events)], time.time_ns())
        spans.replayed(time.time_ns(), 1)
        with spans.posting(["h1"]):
            pass
        spans.end("h1")

    return _per_call_ns(one_hand, calls)


def _rpc_ns(calls: int) -> float:
    def one_rpc() -> None:
        tracing.exemplar()
        tracing.add_trace_ids(None, "info", {})

    if not tracing.enabled():
        return _per_call_ns(one_rpc, calls)
    span = tracing.start_span("socai.table", "Act")
    with tracing.current_span(span):
        return _per_call_ns(one_rpc, calls)


def _measure(calls: int) -> dict[str, float]:
    return {
        "append": _append_ns(calls),
        "settle": _settle_ns(calls // 10),
        "rpc": _rpc_ns(calls),
        "call": _per_call_ns(_nothing, calls),
    }


def _nothing() -> None:
    """One Python call doing nothing: the unit the figures are read in (a loaded machine slows all alike)."""


def run(ctx: BenchContext) -> list[Result]:
    calls = 2_000 if ctx.quick else 50_000
    off = _measure(calls)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        on = _measure(calls // 10)
    finally:
        tracing.shutdown()
    params = {"calls": calls, "note": "best of 5 rounds; 2 cores shared with other work"}
    call = {"python_call_ns": off["call"]}
    return [
        Result("tracing.append_overhead_ns", off["append"], "ns", False, {"on": on["append"], **call}, params),
        Result(
            "tracing.settle_overhead_ns_per_hand",
            off["settle"],
            "ns",
            False,
            {"on": on["settle"], **call},
            {**params, "events_per_hand": EVENTS_PER_HAND},
        ),
        Result("tracing.rpc_overhead_ns", off["rpc"], "ns", False, {"on": on["rpc"], **call}, params),
    ]
