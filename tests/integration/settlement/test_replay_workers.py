"""Replaying in a worker process (the default on a machine with two or more cores) settles
exactly what replaying in the service's own process does, refusals included; the workers are
warm before the service reads its first hand."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from socai.cards import parse_card
from socai.events.model import CardsDealt, DealtCard
from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai_settlement.sealed_replay import Replayer
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import fund, publish, publish_hand, simulate

pytestmark = pytest.mark.integration


async def test_a_replay_worker_settles_every_hand_and_names_a_forged_card(harness: Harness) -> None:
    sim = simulate(20, ("holdem", "xito", "taixiu"), seed=71, table_prefix="w")
    forged = simulate(1, ("holdem",), seed=72, table_prefix="f").hands[0]
    events = list(forged.events)
    deal = next(i for i, e in enumerate(events) if isinstance(e.body, CardsDealt))
    body = events[deal].body
    assert isinstance(body, CardsDealt)
    first = body.cards[0]
    other = next(c for c in ("2c", "3c", "4c") if parse_card(c) != first.card)
    events[deal] = dataclasses.replace(
        events[deal], body=CardsDealt((DealtCard(first.seat, parse_card(other), first.face_up), *body.cards[1:]))
    )
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    app = await harness.start_settlement(dataclasses.replace(harness.config, replay_workers=1))
    assert app.settler.replayer.workers == 1
    await publish_hand(harness.log, events)
    await publish(harness.log, sim)

    async def done() -> bool:
        return sum(await harness.counts()) == len(sim.hands) + 1

    await wait_for(done, 60, "every hand settled or dead-lettered")
    assert await harness.counts() == (len(sim.hands), 1)
    for hand in sim.hands:
        record = await app.store.get(hand.hand_id)
        assert record is not None
        assert {s.seat: s.net_gold for s in record.seats} == dict(hand.settlement.nets)
        assert record.transfers == hand.settlement.transfers
    letter = (await harness.api().ListDeadLetters(pb.ListDeadLettersRequest())).dead_letters[0]
    assert (letter.hand_id, letter.reason) == (forged.hand_id, "DEAL_MISMATCH")
    assert letter.detail == (
        f"{forged.hand_id}/{deal + 1}: dealt {other} to seat {first.seat}, the seed deals {first.card}"
    )


async def test_start_returns_once_every_worker_has_warmed_up() -> None:
    replayer = Replayer(2)
    await replayer.start()
    try:
        pool = replayer._pool
        assert pool is not None
        # Each pid answered a call, which a worker takes only after its initializer (the warm-up).
        assert replayer.warm_pids == frozenset(pool._processes)  # type: ignore[attr-defined]
        assert len(replayer.warm_pids) == 2
        for pid in replayer.warm_pids:
            assert int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid()
    finally:
        await replayer.close()
    assert replayer._pool is None
