"""Settlement scaled out over a partitioned event log (issue 19): instances share the
partitions through leases, hand them over when one stops, and every hand is settled exactly
once, in play order."""

from __future__ import annotations

import dataclasses

import pytest

from socai.infra.nats import StreamSpec, ensure_stream
from socai.infra.partitions import partition_of
from socai_cli.embedded import free_port
from socai_settlement.app import App, build_app
from tests.support.settlement import Harness, start_service, stop_service, wait_for
from tests.support.synthetic import Simulation, fund, publish, simulate

pytestmark = [pytest.mark.integration]

P = 4


async def partitioned(harness: Harness) -> None:
    spec = StreamSpec(harness.settings.events_stream, (f"{harness.log.prefix}.>",), partitions=P)
    await ensure_stream(harness.log.js, spec, allow_repartition=True)
    harness.log.partitions = None  # learn P again


async def second_instance(harness: Harness) -> App:
    settings = dataclasses.replace(harness.settings, settlement_addr=f"127.0.0.1:{free_port()}")
    app = await build_app(settings, harness.config)
    await start_service(app)
    return app


async def settled_exactly_once(harness: Harness, sim: Simulation) -> None:
    for hand in sim.hands:
        tx = await harness.transaction(f"settle:{hand.hand_id}")
        entries = hand.settlement.entries()
        assert (tx is None) if not entries else ({e.account_id: e.amount_gold for e in tx.entries} == entries)
    for account, expected in sim.expected_balances().items():
        if account.startswith("escrow:"):
            assert await harness.balance(account) == expected, account


async def test_two_instances_split_the_partitions_and_one_takes_all_when_the_other_stops(harness: Harness) -> None:
    await partitioned(harness)
    first = simulate(24, ("holdem", "xito", "taixiu"), seed=19, table_prefix="a")
    second = simulate(24, ("holdem", "xito", "taixiu"), seed=20, table_prefix="b")
    assert len({partition_of(t.table_id, P) for t in first.tables}) > 1  # the tables spread
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), first)
    await fund(harness.ledger("cashier"), second)
    a = await harness.start_settlement()
    b = await second_instance(harness)
    try:

        async def split() -> bool:
            held_a, held_b = a.workers.held(), b.workers.held()
            return len(held_a) == len(held_b) == P // 2 and not held_a & held_b

        await wait_for(split, 30, "two instances holding two partitions each")
        durables = {r.pipeline.config.durable for app in (a, b) for r in app.workers.running.values()}
        assert durables == {f"settlement-p{k}" for k in range(P)}

        await publish(harness.log, first)
        await wait_for(lambda: _settled(b, len(first.hands)), 90, "the first hands settled by both")
        for app in (a, b):  # each settled its own partitions' hands
            assert sum(r.pipeline.batches for r in app.workers.running.values()) > 0

        # One instance stops (gracefully: it releases its leases); the other takes them all.
        await harness.stop_settlement()

        async def all_in_b() -> bool:
            return b.workers.held() == frozenset(range(P))

        await wait_for(all_in_b, 30, "the remaining instance holding every partition")
        await publish(harness.log, second)
        await wait_for(lambda: _settled(b, len(first.hands) + len(second.hands)), 90, "every hand settled")
        assert (await b.store.counts())[1] == 0  # no dead letter
        await settled_exactly_once(harness, first)
        await settled_exactly_once(harness, second)
        lag, pending = await b.lag.measure()
        assert (lag, pending) == (0, 0)
    finally:
        await stop_service(b)


async def _settled(app: App, n: int) -> bool:
    return (await app.store.counts())[0] == n
