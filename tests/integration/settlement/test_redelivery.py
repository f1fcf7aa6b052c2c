"""Redelivery and an unavailable ledger are harmless: nothing posted twice, nothing lost."""

from __future__ import annotations

import psycopg
import pytest

from socai.infra.db import libpq_url
from socai_settlement.settler import HandJob
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import fund, publish, simulate

pytestmark = pytest.mark.integration


async def test_every_hand_ended_delivered_again_changes_nothing(harness: Harness) -> None:
    sim = simulate(24, ("holdem", "xito", "taixiu"), seed=41)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    app = await harness.start_settlement()
    await publish(harness.log, sim)

    async def all_settled() -> bool:
        return (await harness.counts())[0] == len(sim.hands)

    await wait_for(all_settled, 60, "the first settlement")
    first = {h.hand_id: (await app.store.get(h.hand_id)) for h in sim.hands}
    balances = {a: await harness.balance(a) for a in sim.expected_balances()}
    await harness.stop_settlement()

    # As if the service had crashed after posting some hands but before storing them…
    forgotten = [h.hand_id for h in sim.hands[::5]]
    async with await psycopg.AsyncConnection.connect(libpq_url(harness.settings.effective_database_url)) as conn:
        await conn.execute('delete from "socai_settlement".settlements where hand_id = any(%s)', (forgotten,))
    # …and as if every message were delivered again: a fresh durable consumer starts from
    # the first event.
    await harness.log.js.delete_consumer(harness.settings.events_stream, harness.config.durable)
    app = await harness.start_settlement()
    await wait_for(all_settled, 60, "the forgotten hands to be stored again")

    async def drained() -> bool:
        lag, pending = await app.lag.measure()
        return lag == 0 and pending == 0

    await wait_for(drained, 30, "the redelivered stream to be drained")
    assert await harness.counts() == (len(sim.hands), 0)
    for h in sim.hands:
        again = await app.store.get(h.hand_id)
        before = first[h.hand_id]
        assert again is not None and before is not None
        # The ledger answered REPLAYED with the original transaction.
        assert again.ledger_transaction_id == before.ledger_transaction_id
        assert again.seats == before.seats and again.transfers == before.transfers
    assert {a: await harness.balance(a) for a in sim.expected_balances()} == balances


async def test_the_same_hand_twice_in_one_batch_is_settled_once(harness: Harness) -> None:
    sim = simulate(1, ("holdem",), seed=42)
    hand = sim.hands[0]
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await publish(harness.log, sim)
    app = await harness.start_settlement()

    async def settled() -> bool:
        return (await harness.counts())[0] == 1

    await wait_for(settled, 30, "the hand")
    job = HandJob(hand.table_id, hand.hand_id, stream_seq=1)
    outcomes = await app.settler.settle([job, job])
    assert [(o.hand_id, o.settled, o.already_settled) for o in outcomes] == [(hand.hand_id, True, True)]
    escrows = {a: v for a, v in sim.expected_balances().items() if a.startswith("escrow:")}
    assert {a: await harness.balance(a) for a in escrows} == escrows


async def test_while_the_ledger_is_down_nothing_is_settled_or_dropped_and_all_settles_when_it_is_back(
    harness: Harness,
) -> None:
    sim = simulate(15, ("xito", "taixiu"), seed=43)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await harness.stop_ledger()
    app = await harness.start_settlement()
    await publish(harness.log, sim)

    async def retrying() -> bool:
        return app.poster.retries >= 3

    await wait_for(retrying, 30, "the poster to retry")
    # Nothing that moves gold is settled, nothing is dead-lettered (a hand that moves no
    # gold needs no ledger and may settle).
    assert (await harness.counts())[1] == 0
    for h in sim.hands:
        if h.settlement.entries():
            assert await app.store.get(h.hand_id) is None

    await harness.start_ledger()

    async def all_settled() -> bool:
        return (await harness.counts())[0] == len(sim.hands)

    await wait_for(all_settled, 60, "every hand once the ledger is back")
    assert await harness.counts() == (len(sim.hands), 0)
    for account, expected in sim.expected_balances().items():
        if account.startswith("escrow:"):
            assert await harness.balance(account) == expected
