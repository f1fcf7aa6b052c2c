"""A hand that cannot be settled is set aside with its reason and never holds back the hands
behind it; RetryDeadLetter settles it once its cause is fixed."""

from __future__ import annotations

import dataclasses

import grpc
import pytest
from prometheus_client import REGISTRY

from socai.events.model import HandEnded
from socai.gen.events.v1 import events_pb2
from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai.infra.grpc_errors import error_reason
from socai.settle.keys import find_settlement
from socai_settlement.pipeline import Pipeline
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import SimHand, fund, publish, publish_hand, simulate

pytestmark = pytest.mark.integration


def dead_letter_count(reason: str) -> float:
    return REGISTRY.get_sample_value("socai_settlement_dead_letters_total", {"reason": reason}) or 0.0


async def settled(harness: Harness, n: int) -> None:
    async def check() -> bool:
        return (await harness.counts())[0] >= n

    await wait_for(check, 60, f"{n} settlements")


async def test_a_poison_hand_is_dead_lettered_the_hands_behind_it_settle_and_retry_settles_it_once_fixed(
    harness: Harness,
) -> None:
    poison = simulate(1, ("xito",), seed=11, table_prefix="poison")  # its escrows are never funded
    good = simulate(12, ("holdem", "xito"), seed=12, table_prefix="good")
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), good)
    await harness.start_settlement()
    before = dead_letter_count("LEDGER_REJECTED")

    await publish(harness.log, poison)
    await publish(harness.log, good)
    await settled(harness, len(good.hands))
    assert await harness.counts() == (len(good.hands), 1)
    assert dead_letter_count("LEDGER_REJECTED") == before + 1

    api = harness.api("operator")
    letters = (await api.ListDeadLetters(pb.ListDeadLettersRequest())).dead_letters
    hand = poison.hands[0]
    assert [(d.hand_id, d.table_id, d.reason, d.attempts) for d in letters] == [
        (hand.hand_id, hand.table_id, "LEDGER_REJECTED", 1)
    ]
    assert "INSUFFICIENT_FUNDS" in letters[0].detail
    assert letters[0].stream_seq > 0
    assert await harness.transaction(f"settle:{hand.hand_id}") is None

    # The operator funds the escrows, then retries: the hand settles, once.
    await fund(harness.ledger("cashier"), poison)
    reply = await api.RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id=hand.hand_id))
    assert reply.settled
    assert {s.seat: s.net_gold for s in reply.settlement.seats} == dict(hand.settlement.nets)
    # settle:{hand} stays refused in the ledger; the hand is posted once, under the next key.
    assert reply.settlement.idempotency_key == f"settle:{hand.hand_id}:retry1"
    found = await find_settlement(harness.ledger("auditor"), hand.hand_id)
    assert found.refused == ((f"settle:{hand.hand_id}", "INSUFFICIENT_FUNDS"),)
    assert found.key == f"settle:{hand.hand_id}:retry1"
    tx = found.transaction
    assert tx is not None and tx.transaction_id == reply.settlement.ledger_transaction_id
    assert found.entries == hand.settlement.entries()
    assert (await api.ListDeadLetters(pb.ListDeadLettersRequest())).dead_letters == []
    again = await api.RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id=hand.hand_id))
    assert again.settled and again.settlement.ledger_transaction_id == tx.transaction_id
    assert await harness.counts() == (len(good.hands) + 1, 0)
    for account, expected in poison.expected_balances().items():
        if account.startswith("escrow:"):
            assert await harness.balance(account) == expected


def with_seed(hand: SimHand, seed_hex: str) -> list:
    events = list(hand.events)
    events[-1] = dataclasses.replace(events[-1], body=HandEnded(seed_hex))
    return events


async def test_a_hand_with_a_wrong_seed_is_dead_lettered_and_stays_so_when_retried(harness: Harness) -> None:
    sim = simulate(3, ("taixiu",), seed=21, hands_per_table=3)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await harness.start_settlement()
    before = dead_letter_count("BAD_SEED")
    first, *rest = sim.hands
    # A forged seed on the first hand of the table. Tài Xỉu against the house: the hands
    # after it do not depend on it (the bank pays), so they settle.
    await publish_hand(harness.log, with_seed(first, "ab" * 32))
    for h in rest:
        await publish_hand(harness.log, h)
    await settled(harness, len(rest))
    assert await harness.counts() == (len(rest), 1)
    assert dead_letter_count("BAD_SEED") == before + 1

    api = harness.api("operator")  # a retry posts money: the operator's (the auditor reads)
    reply = await api.RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id=first.hand_id))
    assert not reply.settled
    assert reply.dead_letter.reason == "BAD_SEED"
    assert reply.dead_letter.attempts == 2
    assert reply.dead_letter.detail.startswith(f"{first.hand_id}/{len(first.events)}: the revealed seed abababababab…")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await api.ReplayHand(pb.ReplayHandRequest(hand_id=first.hand_id))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(err.value) == "BAD_SEED"


async def test_a_hand_ended_delivered_too_often_is_dead_lettered_not_dropped(harness: Harness) -> None:
    sim = simulate(1, ("xito",), seed=31)
    hand = sim.hands[0]
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    config = dataclasses.replace(harness.config, poison_after_deliveries=3, max_deliver=5)
    await publish_hand(harness.log, hand)

    # A worker on the same durable consumer keeps failing on this hand: it takes the
    # HandEnded and gives it back (nak) twice, so the settlement service gets delivery 3.
    worker = Pipeline(harness.nc, None, config, stream=harness.settings.events_stream, prefix=harness.log.prefix)  # type: ignore[arg-type]
    pull = await worker.subscribe()
    naks = 0
    while naks < 2:
        # One message per pull request: none is left open to receive the redelivery of the
        # last nak (the worker's close would give it back, a third delivery).
        for msg in await pull.fetch(1, 5):
            ev = events_pb2.Event.FromString(msg.data)
            if ev.WhichOneof("body") == "hand_ended":
                await msg.nak()
                naks += 1
            else:
                await msg.ack()
    await worker.close()

    app = await harness.start_settlement(config)

    async def dead() -> bool:
        return (await harness.counts())[1] == 1

    await wait_for(dead, 30, "a MAX_DELIVERIES dead letter")
    letters = (await harness.api().ListDeadLetters(pb.ListDeadLettersRequest())).dead_letters
    assert [(d.hand_id, d.reason) for d in letters] == [(hand.hand_id, "MAX_DELIVERIES")]
    assert (
        letters[0].detail == f"{hand.hand_id}/{len(hand.events)}: HandEnded delivered 3 times without being settled "
        "(2 failed attempts, 0 given back at a handover or a stop); set aside"
    )
    assert await harness.transaction(f"settle:{hand.hand_id}") is None
    lag, _ = await app.lag.measure()
    assert lag == 0  # acked: set aside, not left to block the consumer

    # Retried, it settles: the hand itself was fine.
    reply = await harness.api().RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id=hand.hand_id))
    assert reply.settled
    assert await app.store.counts() == (1, 0)


async def test_a_message_that_is_not_an_event_is_dead_lettered_under_its_hand(harness: Harness) -> None:
    app = await harness.start_settlement()
    subject = f"{harness.log.prefix}.t9.t9-h1"
    await harness.log.js.publish(subject, b"\xff\xff not protobuf", headers={"Nats-Msg-Id": "garbage-1"})

    async def dead() -> bool:
        return (await harness.counts())[1] == 1

    await wait_for(dead, 30, "a BAD_EVENT dead letter")
    letters = (await harness.api().ListDeadLetters(pb.ListDeadLettersRequest())).dead_letters
    assert [(d.hand_id, d.table_id, d.reason) for d in letters] == [("t9-h1", "t9", "BAD_EVENT")]
    assert letters[0].detail.startswith(f"stream seq 1 on {subject} is not an Event message")

    async def drained() -> bool:
        return (await app.lag.measure())[0] == 0

    await wait_for(drained, 10, "the message to be acked")
