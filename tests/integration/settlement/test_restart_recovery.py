"""A settlement that starts after another instance died holding messages settles what that
instance left unacked from the stream, at once — not after the messages' ``ack_wait`` — and
their redeliveries, when they come, change nothing (issue 17, defect 6)."""

from __future__ import annotations

import time
from dataclasses import replace

import psycopg
import pytest
from nats.js import api as js_api
from prometheus_client import REGISTRY

from socai.gen.events.v1 import events_pb2
from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai.infra.db import libpq_url
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import fund, publish, simulate

pytestmark = pytest.mark.integration

ACK_WAIT_S = 8.0  # long enough that a restart waiting for it would show; short enough to see the redeliveries


def counter(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


@pytest.mark.parametrize("dead_took", ["150", "all_but_the_last"])
async def test_a_restart_settles_what_a_dead_instance_left_unacked_without_waiting_for_its_redelivery(
    harness: Harness, dead_took: str
) -> None:
    sim = simulate(30, ("holdem", "xito", "taixiu"), seed=1717)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await publish(harness.log, sim)
    config = replace(harness.config, ack_wait_s=ACK_WAIT_S)
    js = harness.log.js
    stream, durable = harness.settings.events_stream, config.durable
    await js.add_consumer(
        stream,
        js_api.ConsumerConfig(
            durable_name=durable,
            name=durable,
            deliver_policy=js_api.DeliverPolicy.ALL,
            ack_policy=js_api.AckPolicy.EXPLICIT,
            ack_wait=config.ack_wait_s,
            max_deliver=config.max_deliver,
            max_ack_pending=config.max_ack_pending,
            filter_subject=f"{harness.settings.events_prefix}.>",
        ),
    )

    # An instance that pulled the first 150 messages (or all but the last, a HandEnded: the
    # new instance's own first message is then one to settle, not to recover), acked every
    # event but no HandEnded (its batch was still being settled), then died.
    last_seq = (await js.stream_info(stream)).state.last_seq
    if dead_took == "all_but_the_last":
        last = events_pb2.Event.FromString((await js.get_msg(stream, last_seq)).data or b"")
        assert last.WhichOneof("body") == "hand_ended"  # every hand's last event: so is the stream's
    dead = await js.pull_subscribe_bind(durable, stream)
    taken = await dead.fetch(150 if dead_took == "150" else last_seq - 1, timeout=5)
    held: list[str] = []
    for msg in taken:
        ev = events_pb2.Event()
        ev.ParseFromString(msg.data)
        if ev.WhichOneof("body") == "hand_ended":
            held.append(ev.hand_id)
        else:
            await msg.ack()
    await dead.unsubscribe()
    assert len(held) >= 3, held

    async def acks_arrived() -> bool:
        return (await js.consumer_info(stream, durable)).num_ack_pending == len(held)

    await wait_for(acks_arrived, 5, "the dead instance's acks")

    recovered_before = counter("socai_settlement_recovered_hands_total")
    duplicates_before = counter("socai_settlement_ignored_messages_total", {"kind": "duplicate_hand_ended"})
    started = time.monotonic()
    app = await harness.start_settlement(config)

    async def all_settled() -> bool:
        return (await harness.counts())[0] == len(sim.hands)

    await wait_for(all_settled, 60, "every hand to be settled")
    elapsed_s = time.monotonic() - started

    async def only_the_dead_instances_left() -> bool:
        return (await js.consumer_info(stream, durable)).num_ack_pending == len(held)

    # Settled before the dead instance's messages could even come back: nothing has been
    # redelivered, they are all still pending on the consumer.
    await wait_for(only_the_dead_instances_left, 2, "the new instance's own acks")
    assert (await js.consumer_info(stream, durable)).num_redelivered == 0
    assert elapsed_s < ACK_WAIT_S
    assert counter("socai_settlement_recovered_hands_total") - recovered_before == len(held)

    # Then the server redelivers them: acked as already settled, nothing posted twice.
    async def drained() -> bool:
        i = await js.consumer_info(stream, durable)
        return i.num_ack_pending == 0 and i.num_pending == 0

    await wait_for(drained, ACK_WAIT_S + 30, "the redeliveries to be acked")
    assert await harness.counts() == (len(sim.hands), 0)
    assert counter("socai_settlement_ignored_messages_total", {"kind": "duplicate_hand_ended"}) == duplicates_before
    for hand in sim.hands:
        tx = await harness.transaction(f"settle:{hand.hand_id}")
        entries = hand.settlement.entries()
        assert (tx is None) == (not entries), hand.hand_id
        if tx is not None:
            assert {e.account_id: e.amount_gold for e in tx.entries} == entries
    for account, expected in sim.expected_balances().items():
        if account.startswith("escrow:"):
            assert await harness.balance(account) == expected, account
    assert app.pipeline.batches > 0


async def test_a_restart_after_a_dead_instance_whose_hands_are_all_settled_does_not_wait(harness: Harness) -> None:
    """The dead instance had stored its batch but died before acking it: the range holds
    only settled hands, so there is nothing to settle and nothing to wait for."""
    before = simulate(6, ("holdem", "xito"), seed=1718, table_prefix="before")
    after = simulate(6, ("holdem", "xito"), seed=1719, table_prefix="after")
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), before)
    await fund(harness.ledger("cashier"), after)
    config = replace(harness.config, ack_wait_s=60.0)  # a wait would fail this test
    await harness.start_settlement(config)
    await publish(harness.log, before)

    async def first_half() -> bool:
        return (await harness.counts())[0] == len(before.hands)

    await wait_for(first_half, 60, "the first hands")
    await harness.stop_settlement()
    js = harness.log.js
    stream, durable = harness.settings.events_stream, config.durable
    # Make the first six hands' HandEnded messages outstanding again, as if their acks had
    # been lost: a fresh durable (same name) whose dead first reader took them all.
    await js.delete_consumer(stream, durable)
    await js.add_consumer(
        stream,
        js_api.ConsumerConfig(
            durable_name=durable,
            name=durable,
            deliver_policy=js_api.DeliverPolicy.ALL,
            ack_policy=js_api.AckPolicy.EXPLICIT,
            ack_wait=config.ack_wait_s,
            max_deliver=config.max_deliver,
            max_ack_pending=config.max_ack_pending,
            filter_subject=f"{harness.settings.events_prefix}.>",
        ),
    )
    dead = await js.pull_subscribe_bind(durable, stream)
    taken = await dead.fetch(10_000, timeout=2)
    await dead.unsubscribe()
    assert taken
    await publish(harness.log, after)

    recovered_before = counter("socai_settlement_recovered_hands_total")
    await harness.start_settlement(config)

    hands = len(before.hands) + len(after.hands)

    async def all_settled() -> bool:
        return (await harness.counts())[0] == hands

    await wait_for(all_settled, 30, "the later hands, well before ack_wait")

    async def only_the_dead_instances_left() -> bool:
        return (await js.consumer_info(stream, durable)).num_ack_pending == len(taken)

    # Still outstanding (never waited for), never redelivered, nothing settled twice.
    await wait_for(only_the_dead_instances_left, 10, "the new instance's own acks")
    assert (await js.consumer_info(stream, durable)).num_redelivered == 0
    assert counter("socai_settlement_recovered_hands_total") == recovered_before
    assert await harness.counts() == (hands, 0)


async def test_a_hand_whose_earlier_starts_died_settling_it_is_set_aside_not_tried_for_ever(
    harness: Harness,
) -> None:
    """What a dead instance left unacked is settled from the stream at start, whether or not
    it was delivered before; each such attempt is counted first (``delivery_attempts``), so a
    hand that kills the process at every start is dead-lettered MAX_DELIVERIES once
    ``poison_after_deliveries`` attempts never finished, instead of being tried for ever."""
    # One hand per table: no hand pays out of the one set aside (a later hand of its table
    # would be refused INSUFFICIENT_FUNDS, rightly).
    sim = simulate(20, ("holdem", "xito"), seed=1720, hands_per_table=1)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await publish(harness.log, sim)
    config = replace(harness.config, ack_wait_s=60.0, poison_after_deliveries=3)
    js = harness.log.js
    stream, durable = harness.settings.events_stream, config.durable
    await js.add_consumer(
        stream,
        js_api.ConsumerConfig(
            durable_name=durable,
            name=durable,
            deliver_policy=js_api.DeliverPolicy.ALL,
            ack_policy=js_api.AckPolicy.EXPLICIT,
            ack_wait=config.ack_wait_s,
            max_deliver=config.max_deliver,
            max_ack_pending=config.max_ack_pending,
            filter_subject=f"{harness.settings.events_prefix}.>",
        ),
    )
    # A first instance takes 300 messages and dies holding its HandEnded messages.
    dead = await js.pull_subscribe_bind(durable, stream)
    held: list[tuple[int, str]] = []
    for msg in await dead.fetch(300, timeout=5):
        ev = events_pb2.Event()
        ev.ParseFromString(msg.data)
        if ev.WhichOneof("body") == "hand_ended":
            held.append((msg.metadata.sequence.stream, ev.hand_id))
        else:
            await msg.ack()
    await dead.unsubscribe()
    assert len(held) >= 2
    # Two starts before this one died while settling the first of them from the stream
    # (what they left on record before trying).
    poison_seq, poison = held[0]
    with psycopg.connect(libpq_url(harness.settings.database_url or "")) as conn:
        conn.execute(
            'insert into "socai_settlement".delivery_attempts (stream_seq, hand_id, recovered) values (%s, %s, 2)',
            (poison_seq, poison),
        )

    recovered_before = counter("socai_settlement_recovered_hands_total")
    await harness.start_settlement(config)

    async def all_done() -> bool:
        return (await harness.counts()) == (len(sim.hands) - 1, 1)

    await wait_for(all_done, 45, "every hand settled but the one set aside")  # well before the ack wait
    letters = (await harness.api().ListDeadLetters(pb.ListDeadLettersRequest())).dead_letters
    assert [(d.hand_id, d.reason) for d in letters] == [(poison, "MAX_DELIVERIES")]
    assert "tried 2 times without finishing" in letters[0].detail
    assert counter("socai_settlement_recovered_hands_total") - recovered_before == len(held) - 1
    assert await harness.transaction(f"settle:{poison}") is None
    for hand in sim.hands:
        if hand.hand_id == poison:
            continue
        tx = await harness.transaction(f"settle:{hand.hand_id}")
        entries = hand.settlement.entries()
        assert (tx is None) == (not entries), hand.hand_id
        if tx is not None:
            assert {e.account_id: e.amount_gold for e in tx.entries} == entries
    # Retried, it settles: it was the process, not the hand (here, nothing at all).
    reply = await harness.api().RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id=poison))
    assert reply.settled
