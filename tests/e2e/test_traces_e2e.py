"""One trace per hand (issue 35): a hand played through the real table, settlement and ledger
services forms one tree of spans, from the player's last Act to the ledger's outbox publish.

The services run in this process with tracing on (``socai.infra.tracing``), their spans
read from the SDK's in-memory exporter. Nothing but the trace context in gRPC metadata and
in the JetStream headers joins the services' spans: settlement's consumer, the ledger's
write batcher and its outbox relay each run in background tasks that inherit no span, so a
propagation that breaks anywhere leaves a trace without the spans after the break, or a span
whose parent is in no trace here.

The Act's latency sample and the ledger's batch carry the trace id as an exemplar (what the
dashboard's exemplar dots link to Tempo with).

The hand: Ba Cây Gà with two players in fast mode, started by StartHand and ended by the
second player's flip (an Act), so the call that ends the hand is the player's.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import REGISTRY
from prometheus_client.openmetrics.exposition import generate_latest

from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra import tracing
from socai.infra.nats import StreamSpec
from tests.support.e2e import GameStack, game_stack, until
from tests.support.tracing import spans_in_memory

pytestmark = [pytest.mark.e2e]

STAKE = 100
BUY_IN = 2_000
DEPOSIT = 5_000


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process for the test, every finished span kept in memory."""
    with spans_in_memory() as exporter:
        yield exporter


@pytest.fixture
async def stack(
    spans: InMemorySpanExporter, nats_url: str, migrated_database_url: str, stream_spec: StreamSpec
) -> AsyncIterator[GameStack]:
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


def flip(seat: int) -> pb.PlayerAction:
    return pb.PlayerAction(declare=epb.Declared(seat=seat, declaration="flip"))


def attr(span: ReadableSpan, name: str) -> Any:
    return (span.attributes or {}).get(name)


def chain_to_root(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    """The names of ``span`` and its ancestors up to the root, the root last."""
    names = [span.name]
    while span.parent is not None:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


async def test_one_hand_is_one_tree_of_spans_from_the_act_to_the_outbox_publish(
    stack: GameStack, spans: InMemorySpanExporter
) -> None:
    s = stack
    players = [f"tr{time.time_ns() % 10**9}p{i}" for i in range(2)]
    table_id = await s.backend.create(
        "bacay_ga",
        stake_gold=STAKE,
        seats_max=len(players),
        owner_player_id=players[0],
        options={"fast_mode": "true"},
        buy_in_min_gold=BUY_IN,
        buy_in_max_gold=BUY_IN,
    )
    for seat, player in enumerate(players):
        await s.backend.deposit(player, DEPOSIT)
        assert await s.backend.join(table_id, player, BUY_IN, seat=seat) == seat
    hand_id = (await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    for seat, player in enumerate(players):
        await s.backend.act(table_id, player, seat, flip(seat), hand_id=hand_id)
    await s.settled(hand_id)

    def of_hand(name: str) -> list[ReadableSpan]:
        return [x for x in spans.get_finished_spans() if x.name == name and attr(x, "socai.hand_id") == hand_id]

    ended = await until("the HandEnded append span", lambda: _async(of_hand("append HandEnded")))
    trace_id = ended[0].context.trace_id

    def in_trace() -> list[ReadableSpan]:
        return [x for x in spans.get_finished_spans() if x.context.trace_id == trace_id]

    # The outbox relay publishes after the batch commits, and settlement stores its record
    # (ending the settle span) after the post: wait for both.
    await until(
        "the outbox publish and settle spans in the hand's trace",
        lambda: _async({"publish", "settle"} <= {x.name for x in in_trace()}),
    )
    tree = in_trace()
    by_id = {x.context.span_id: x for x in tree}

    # One tree: a single root, every other span's parent in the same trace.
    roots = [x for x in tree if x.parent is None]
    assert len(roots) == 1, [x.name for x in roots]
    missing = [x.name for x in tree if x.parent is not None and x.parent.span_id not in by_id]
    assert not missing, f"spans whose parent is not in the hand's trace: {missing}"

    # The path of the money, leaf to root, across the three services and NATS twice.
    (publish,) = [x for x in tree if x.name == "publish"]
    assert chain_to_root(publish, by_id) == [
        "publish",  # the ledger's outbox relay (JetStream SOCAI_LEDGER)
        "batch",  # the ledger's write batcher
        "/socai.ledger.v1.LedgerService/PostTransactions",  # the ledger's server span
        "/socai.ledger.v1.LedgerService/PostTransactions",  # settlement's client span
        "post",
        "settle",  # settlement, continued from the HandEnded's headers
        "append HandEnded",  # the table's append (JetStream SOCAI_EVENTS)
        "/socai.table.v1.TableService/Act",  # the table's server span
        "/socai.table.v1.TableService/Act",  # the player's (the test backend's) client span
    ]
    kinds = [by_id[x.context.span_id].kind for x in (publish, roots[0])]
    assert kinds == [SpanKind.PRODUCER, SpanKind.CLIENT]
    scopes = {x.instrumentation_scope.name for x in tree if x.instrumentation_scope is not None}
    assert {"socai.events", "socai.settlement", "socai.ledger"} <= scopes
    (settle,) = [x for x in tree if x.name == "settle"]
    assert attr(settle, "socai.hand_id") == hand_id and attr(settle, "socai.table_id") == table_id
    assert [x.name for x in tree if x.parent is not None and x.parent.span_id == settle.context.span_id] == [
        "replay",
        "post",
    ]

    # The hand's other events were written by other calls (StartHand, the first flip): their
    # traces are linked from the settle span, each holding that event's append.
    linked = {link.context.trace_id for link in settle.links}
    started = of_hand("append HandStarted")
    assert started and started[0].context.trace_id in linked
    assert trace_id not in linked

    # The HandEnded message in the stream carries the append span's traceparent.
    stored = await s.log.read_hand(table_id, hand_id)
    last = stored[-1]
    assert last.event.body.__class__.__name__ == "HandEnded"
    # The Act's latency sample links to the trace (an exemplar on its histogram bucket, served
    # in the OpenMetrics exposition Prometheus asks for); the ledger's batches carry theirs.
    exposition = generate_latest(REGISTRY).decode()
    acts = [line for line in exposition.splitlines() if line.startswith("socai_rpc_latency_seconds_bucket{")]
    acts = [line for line in acts if 'method="Act"' in line and 'service="table"' in line]
    assert any(f'# {{trace_id="{trace_id:032x}"}}' in line for line in acts), acts
    batches = [line for line in exposition.splitlines() if line.startswith("socai_ledger_batch_seconds_bucket")]
    assert any("# {trace_id=" in line for line in batches), batches

    carried = tracing.context_of(last.headers.get("traceparent"))
    assert carried is not None
    assert (carried.trace_id, carried.span_id) == (trace_id, ended[0].context.span_id)


async def _async(value: Any) -> Any:
    return value
