"""socai_settlement.hand_spans: a hand's settle span continues its HandEnded's trace, links
the traces of its other events, has replay and post children, and ends with the outcome."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, StatusCode

from socai.events.log import RawStored
from socai.infra import tracing
from socai_settlement.hand_spans import HandSpans
from socai_settlement.sealed_replay import EventBytes
from tests.support.tracing import spans_in_memory


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    with spans_in_memory() as exporter:
        yield exporter


def appended(name: str) -> tuple[SpanContext, str]:
    """A table's append span (ended) and the traceparent it put into its message."""
    span = tracing.start_span("socai.events", name)
    headers: dict[str, str] = {}
    with tracing.current_span(span):
        tracing.inject(headers)
    span.end()
    return span.get_span_context(), headers[tracing.TRACEPARENT]


def cached(stream_seq: int, traceparent: str) -> EventBytes:
    """A message as the consumer's hand cache keeps it: the raw NATS header block."""
    block = f"NATS/1.0\r\nSocai-Prev: 00\r\ntraceparent: {traceparent}\r\n\r\n".encode()
    return EventBytes(stream_seq - 100, "h1", "t1", b"event", stream_seq, block)


def named(memory: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in memory.get_finished_spans() if s.name == name]


def test_the_settle_span_is_the_hand_ended_appends_child_and_links_the_other_events(
    memory: InMemorySpanExporter,
) -> None:
    started, started_tp = appended("append HandStarted")
    acted, acted_tp = appended("append BetPlaced")
    ended, ended_tp = appended("append HandEnded")
    events = [cached(101, started_tp), cached(102, acted_tp), cached(103, ended_tp)]
    spans = HandSpans()
    spans.start([("h1", "t1", 103, events)], time.time_ns())
    spans.replayed(time.time_ns(), 1)
    with spans.posting(["h1"]):
        post = tracing.current()
    spans.end("h1")

    (settle,) = named(memory, "settle")
    assert settle.parent is not None and settle.parent.span_id == ended.span_id
    assert settle.context.trace_id == ended.trace_id
    assert [link.context.span_id for link in settle.links] == [started.span_id, acted.span_id]
    assert settle.attributes is not None and settle.attributes["socai.hand_id"] == "h1"
    for child in (*named(memory, "replay"), *named(memory, "post")):
        assert child.parent is not None and child.parent.span_id == settle.context.span_id
    assert post is not None and post.trace_id == ended.trace_id
    assert settle.status.status_code is StatusCode.UNSET


def test_hands_read_from_the_stream_and_posted_together(memory: InMemorySpanExporter) -> None:
    first, first_tp = appended("append HandEnded")
    second, second_tp = appended("append HandEnded")
    spans = HandSpans()
    spans.start(
        [
            ("h1", "t1", 7, [RawStored(7, b"event", {tracing.TRACEPARENT: first_tp})]),
            ("h2", "t1", 9, [RawStored(9, b"event", {tracing.TRACEPARENT: second_tp})]),
            ("h3", "t1", 11, [RawStored(11, b"event", {})]),  # written with tracing off
        ],
        time.time_ns(),
    )
    with spans.posting(["h1", "h2", "h3"]):
        pass
    spans.end("h1")
    spans.end("h2", dead_reason="LEDGER_REJECTED")
    spans.end("h3", already_settled=True)
    spans.end("h3")  # once only

    (post,) = named(memory, "post")
    assert post.context.trace_id == first.trace_id
    settles = {s.attributes["socai.hand_id"]: s for s in named(memory, "settle") if s.attributes}
    assert [link.context.span_id for link in post.links] == [
        settles["h2"].context.span_id,
        settles["h3"].context.span_id,
    ]
    assert settles["h2"].context.trace_id == second.trace_id
    assert settles["h2"].status.status_code is StatusCode.ERROR
    assert settles["h3"].parent is None  # its own trace
    assert len(named(memory, "settle")) == 3


def test_with_tracing_off_a_batch_holds_no_span() -> None:
    spans = HandSpans()
    spans.start([("h1", "t1", 1, [RawStored(1, b"event", {})])], time.time_ns())
    with spans.posting(["h1"]):
        assert tracing.current() is None
    assert spans.spans == {} and spans.exemplar() is None
