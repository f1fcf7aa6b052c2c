"""socai.infra.tracing: off unless OTEL_TRACES_EXPORTER names an exporter; while on, trace ids
in log lines, exemplars and message headers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import structlog
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from socai import errors
from socai.infra import tracing
from socai.infra.logging import configure
from tests.support.tracing import spans_in_memory


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    with spans_in_memory() as exporter:
        yield exporter


def test_tracing_is_off_without_an_exporter_and_costs_nothing_then() -> None:
    for environ in (
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"},
    ):
        assert tracing.configure("table", environ) is False
    assert not tracing.enabled()
    assert tracing.server_interceptors() == [] and tracing.client_interceptors() == []
    headers: dict[str, str] = {}
    with tracing.new_trace("socai.table", "timer expired"):
        tracing.inject(headers)
        assert tracing.current() is None and tracing.exemplar() is None
    assert headers == {}
    assert tracing.tracer("socai.table").start_span("x").get_span_context().is_valid is False


def test_an_exporter_named_by_otel_traces_exporter_turns_tracing_on_with_the_service_name() -> None:
    try:
        assert tracing.configure("ledger", {"OTEL_TRACES_EXPORTER": "console"}) is True
        assert tracing.enabled()
        assert len(tracing.server_interceptors()) == 1 and tracing.client_interceptors()
        span = tracing.start_span("socai.ledger", "batch")
        assert span.resource.attributes["service.name"] == "socai-ledger"  # type: ignore[attr-defined]
    finally:
        tracing.shutdown()
    assert not tracing.enabled()


def test_otlp_means_the_installed_otlp_grpc_exporter() -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    try:
        environ = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
        assert tracing.configure("settlement", environ) is True
        processors = tracing._provider._active_span_processor._span_processors
        assert [type(p._batch_processor._exporter) for p in processors] == [OTLPSpanExporter]
    finally:
        tracing.shutdown()


def test_an_unknown_exporter_is_refused_by_name() -> None:
    with pytest.raises(errors.InvalidArgument) as exc:
        tracing.configure("table", {"OTEL_TRACES_EXPORTER": "jaegerish"})
    assert exc.value.code == "OTEL_EXPORTER_UNKNOWN" and "jaegerish" in exc.value.message
    assert not tracing.enabled()


def test_the_traceparent_injected_into_headers_names_the_current_span(memory: InMemorySpanExporter) -> None:
    span = tracing.start_span("socai.events", "append HandEnded")
    headers: dict[str, str] = {"Socai-Writer": "table-1/3"}
    with tracing.current_span(span):
        tracing.inject(headers)
        assert tracing.exemplar() == {"trace_id": format(span.get_span_context().trace_id, "032x")}
    span.end()
    carried = tracing.context_of(headers[tracing.TRACEPARENT])
    assert carried is not None and carried.is_remote
    assert (carried.trace_id, carried.span_id) == (span.get_span_context().trace_id, span.get_span_context().span_id)
    child = tracing.start_span("socai.settlement", "settle", parent=carried)
    assert child.get_span_context().trace_id == carried.trace_id
    assert tracing.context_of("00-not-a-traceparent") is None and tracing.context_of(None) is None


def test_log_lines_carry_the_trace_and_span_ids_while_a_span_is_current(memory: InMemorySpanExporter) -> None:
    out = io.StringIO()
    configure(fmt="json", level="info", stream=out)
    try:
        log = structlog.get_logger("test")
        log.info("outside")
        span = tracing.start_span("socai.table", "Act")
        with tracing.current_span(span):
            log.info("inside")
        span.end()
    finally:
        configure(fmt="console", level=os.environ.get("SOCAI_TEST_LOG_LEVEL", "warning"))  # as tests/conftest.py
    outside, inside = (json.loads(line) for line in out.getvalue().splitlines())
    assert "trace_id" not in outside
    assert inside["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert inside["span_id"] == format(span.get_span_context().span_id, "016x")


def test_a_timer_starts_a_new_trace_linked_to_the_call_that_armed_it(memory: InMemorySpanExporter) -> None:
    armed_by = tracing.start_span("socai.table", "Act")
    with tracing.current_span(armed_by), tracing.new_trace("socai.table", "timer expired"):
        inner = tracing.current()
    armed_by.end()
    assert inner is not None and inner.trace_id != armed_by.get_span_context().trace_id
    (timer,) = [s for s in memory.get_finished_spans() if s.name == "timer expired"]
    assert timer.parent is None
    assert [link.context.span_id for link in timer.links] == [armed_by.get_span_context().span_id]


def test_links_keep_one_per_trace_and_at_most_the_limit(memory: InMemorySpanExporter) -> None:
    contexts = [
        tracing.start_span("socai.table", f"append {i}").get_span_context() for i in range(tracing.LINKS_MAX + 5)
    ]
    assert len(tracing.links([*contexts, contexts[0], None])) == tracing.LINKS_MAX
    assert [link.context for link in tracing.links(contexts[:3], besides=contexts[0])] == contexts[1:3]


def test_marks_hand_each_journal_sequence_over_once_and_forget_the_oldest(memory: InMemorySpanExporter) -> None:
    marks = tracing.Marks(limit=3)
    assert not marks
    first = tracing.start_span("socai.ledger", "batch").get_span_context()
    second = tracing.start_span("socai.ledger", "batch").get_span_context()
    marks.mark([1, 2], first)
    marks.mark([3, 4], second)
    assert marks.take(1) is None  # the oldest, beyond the limit
    assert marks.take(2) == first and marks.take(2) is None
    assert marks.take(4) == second and marks


def test_a_service_reads_otel_traces_exporter_at_start_and_refuses_an_unknown_one() -> None:
    env = {**os.environ, "SOCAI_DEV_MODE": "1", "OTEL_TRACES_EXPORTER": "jaegerish"}
    env.pop("OTEL_SDK_DISABLED", None)
    done = subprocess.run([sys.executable, "-m", "socai_ledger"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "OTEL_EXPORTER_UNKNOWN" in done.stdout + done.stderr and "jaegerish" in done.stderr
