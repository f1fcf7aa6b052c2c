"""The ``settle`` span of each hand of a batch, while tracing is on (``socai.infra.tracing``).

A hand is made of many events, each appended under the span of the call that wrote it (one
trace per player's call). Its ``settle`` span continues the trace of its HandEnded — the
call that ended the hand — as that append's child, and links to the traces of the hand's
other events (at most ``tracing.LINKS_MAX``), read from the ``traceparent`` headers of the
messages settlement replays anyway. It lasts from the moment the hand is prepared until its
settlement record (or dead letter) is stored, and has two children: ``replay`` (the batch's
replay, in a worker process: the hand's share is not measured apart) and ``post`` (the
PostTransactions call with the batch's hands that move gold; it is the child of the first of
them and links to the others, whose traces show it through their links).

While tracing is off every method returns at once: a batch carries an empty ``HandSpans``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode

from socai.infra import tracing
from socai.infra.nats_pull import header_values
from socai_settlement.sealed_replay import EventBytes

COMPONENT = "socai.settlement"


def traceparent_of(item: object) -> str | None:
    """The ``traceparent`` header of a hand's message as the settler holds it: an
    ``EventBytes`` with its raw header block (the consumer's cache) or a stored message
    read by subject (``socai.events.log.RawStored``, headers parsed)."""
    if isinstance(item, EventBytes):
        block = item.chain_headers
        return (
            header_values(block, (tracing.TRACEPARENT,)).get(tracing.TRACEPARENT) if isinstance(block, bytes) else None
        )
    headers = getattr(item, "headers", None)
    return headers.get(tracing.TRACEPARENT) if isinstance(headers, dict) else None


def _stream_seq(item: object) -> int:
    return int(getattr(item, "stream_seq", 0) or 0)


class HandSpans:
    """Open ``settle`` spans by hand id (see the module docstring)."""

    __slots__ = ("spans",)

    def __init__(self) -> None:
        self.spans: dict[str, Span] = {}

    def start(self, hands: Sequence[tuple[str, str, int, Sequence[object]]], started_ns: int) -> None:
        """Open a ``settle`` span, started at ``started_ns``, for each (hand id, table id,
        HandEnded's stream seq, the hand's messages)."""
        if not tracing.enabled():
            return
        for hand_id, table_id, end_seq, events in hands:
            contexts = [(_stream_seq(e), tracing.context_of(traceparent_of(e))) for e in events]
            ended = [c for seq, c in contexts if seq == end_seq and c is not None]
            parent = ended[0] if ended else None
            self.spans[hand_id] = tracing.start_span(
                COMPONENT,
                "settle",
                parent=parent,
                kind=SpanKind.CONSUMER,
                attributes={
                    "messaging.system": "nats",
                    "socai.hand_id": hand_id,
                    "socai.table_id": table_id,
                    "socai.stream_seq": end_seq,
                    "socai.events": len(events),
                },
                span_links=tracing.links([c for _, c in contexts], besides=parent),
                start_time_ns=started_ns,
            )

    def replayed(self, started_ns: int, hands: int) -> None:
        """A ``replay`` child of every open span: the batch of ``hands`` replayed from
        ``started_ns`` until now."""
        if not self.spans:
            return
        now_ns = time.time_ns()
        for span in self.spans.values():
            child = tracing.start_span(
                COMPONENT,
                "replay",
                parent=span.get_span_context(),
                attributes={"socai.batch_hands": hands},
                start_time_ns=started_ns,
            )
            child.end(end_time=now_ns)

    @contextmanager
    def posting(self, hand_ids: Sequence[str]) -> Iterator[None]:
        """The block posting ``hand_ids`` runs under their ``post`` span (the gRPC call its child)."""
        spans = [self.spans[h] for h in hand_ids if h in self.spans]
        if not spans:
            yield
            return
        first: SpanContext = spans[0].get_span_context()
        post = tracing.start_span(
            COMPONENT,
            "post",
            parent=first,
            attributes={"socai.batch_hands": len(hand_ids)},
            span_links=tracing.links([s.get_span_context() for s in spans[1:]], besides=first),
        )
        with tracing.current_span(post), post:
            yield

    def end(self, hand_id: str, *, dead_reason: str = "", already_settled: bool = False) -> None:
        """End ``hand_id``'s span: settled (or already), or dead-lettered with ``dead_reason``."""
        span = self.spans.pop(hand_id, None)
        if span is None:
            return
        if dead_reason:
            span.set_attribute("socai.dead_letter", dead_reason)
            span.set_status(Status(StatusCode.ERROR, dead_reason))
        elif already_settled:
            span.set_attribute("socai.already_settled", True)
        span.end()

    def exemplar(self) -> dict[str, Any] | None:
        """``{"trace_id": …}`` of one of the batch's hands, for the batch's latency sample."""
        for span in self.spans.values():
            span_context = span.get_span_context()
            if span_context.trace_flags.sampled:
                return {"trace_id": format(span_context.trace_id, "032x")}
        return None
