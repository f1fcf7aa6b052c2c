"""A partition changing hands while hands are in flight (issue 19's open defects): the hands
reach the ledger in play order whatever the previous holder left behind, and a delivery that
ended because the lease moved is no failure of its hand."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools

import psycopg
import pytest
from nats.js.errors import KeyNotFoundError
from prometheus_client import REGISTRY

from socai import accounts
from socai.gen.events.v1 import events_pb2
from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.db import libpq_url
from socai_settlement.app import App
from socai_settlement.pipeline import Pipeline
from socai_settlement.poster import LedgerPoster
from socai_settlement.sealed_replay import Replayer, seal_policy
from socai_settlement.settler import HandJob, Settler
from socai_settlement.store import Store
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import SimHand, Simulation, fund, publish, publish_hand, simulate

pytestmark = [pytest.mark.integration, pytest.mark.serial]  # leases with short TTLs: timing on a shared machine


def counter(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def dependent_pairs(sim: Simulation) -> list[tuple[SimHand, SimHand]]:
    """(hand, the next hand of its table) where the next one, posted without the first,
    would find an escrow short: it pays out of the first hand's winnings."""
    out = []
    for table in sim.tables:
        balances = {accounts.escrow(table.table_id, s.player_id): s.buy_in_gold for s in table.seats}
        for first, then in zip(table.hands, table.hands[1:], strict=False):
            entries = then.settlement.entries()
            if any(balances[a] + amount < 0 for a, amount in entries.items() if a in balances):
                out.append((first, then))
            for account, amount in first.settlement.entries().items():
                if account in balances:
                    balances[account] += amount
    return out


async def settled_in_play_order(harness: Harness, sim: Simulation) -> None:
    """Each hand once, under its first key ``settle:{hand_id}`` (nothing was refused and
    posted again), each table's hands in the journal in play order, the escrows right."""
    for table in sim.tables:
        seqs = []
        for hand in table.hands:
            tx = await harness.transaction(f"settle:{hand.hand_id}")
            entries = hand.settlement.entries()
            assert (tx is None) == (not entries), hand.hand_id
            if tx is not None:
                assert {e.account_id: e.amount_gold for e in tx.entries} == entries, hand.hand_id
                seqs.append(tx.journal_seq)
        assert seqs == sorted(seqs), f"{table.table_id}: hands reached the ledger out of play order"
    for account, expected in sim.expected_balances().items():
        if account.startswith("escrow:"):
            assert await harness.balance(account) == expected, account


async def test_a_later_hand_never_jumps_one_the_previous_holder_still_holds(harness: Harness) -> None:
    """The previous holder gave back (nak) what it held in its batch, but one HandEnded it
    had been delivered stays pending with it (it was in its pull buffer, or it is paused).
    The new holder's first message is then a redelivery: it must still settle, first, from
    the stream, the hand left behind, before the next hand of that table, which pays out of
    its winnings (posted first, the ledger would refuse it INSUFFICIENT_FUNDS)."""
    sim = simulate(60, ("holdem",), seed=1919)
    pairs = dependent_pairs(sim)
    assert pairs, "the simulation has a hand that pays out of the previous one's winnings"
    left_behind, dependent = pairs[0]
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await publish(harness.log, sim)
    config = dataclasses.replace(harness.config, ack_wait_s=60.0)

    # The previous holder: acks events on sight, as the pipeline does, until it has been
    # delivered the HandEnded it will leave behind; every other HandEnded it gives back.
    previous = Pipeline(harness.nc, None, config, stream=harness.settings.events_stream, prefix=harness.log.prefix)  # type: ignore[arg-type]
    pull = await previous.subscribe()
    given_back = []
    holding = None
    while holding is None:
        for msg in await pull.fetch(50, 5):
            ev = events_pb2.Event.FromString(msg.data)
            if ev.WhichOneof("body") != "hand_ended":
                await msg.ack()
            elif ev.hand_id == left_behind.hand_id:
                holding = msg
            else:
                given_back.append(msg)
    assert given_back, "the previous holder gave back some HandEnded"
    for msg in sorted(given_back, key=lambda m: m.stream_seq):
        await msg.nak()
    await pull.close()  # no stop(): what its buffer held waits for the ack wait, like a paused holder's

    await harness.start_settlement(config)

    async def all_settled() -> bool:
        return (await harness.counts()) == (len(sim.hands), 0)

    # Well before the ack wait: the hand left behind was settled from the stream.
    await wait_for(all_settled, 45, "every hand settled, none dead-lettered")
    await settled_in_play_order(harness, sim)
    first = await harness.transaction(f"settle:{left_behind.hand_id}")
    then = await harness.transaction(f"settle:{dependent.hand_id}")
    assert first.journal_seq < then.journal_seq


async def test_a_stolen_lease_again_and_again_dead_letters_no_healthy_hand(harness: Harness) -> None:
    """The partition's lease is taken from its holder over and over while it drains a
    backlog (its key deleted: the holder's next renewal is refused, it stops its pipeline
    and gives back what it holds, then acquires the partition afresh). With a poison limit
    of 2, any delivery given back that counted as a failure would dead-letter its hand
    MAX_DELIVERIES; none may be, and every hand reaches the ledger once, in play order."""
    sim = simulate(480, ("holdem", "xito", "taixiu"), seed=2626)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await publish(harness.log, sim)
    config = dataclasses.replace(harness.config, poison_after_deliveries=2, post_batch_max=10, fetch_batch=100)
    given_back_before = counter("socai_settlement_given_back_total")
    app = await harness.start_settlement(config)
    await wait_for(lambda: _token(app, None), 30, "the partition held")
    kv = await harness.log.js.key_value(f"settlement_leases_{harness.settings.events_stream}")

    async def drained() -> bool:
        return (await harness.counts())[0] + (await harness.counts())[1] == len(sim.hands)

    steals = 0
    while not await drained() and counter("socai_settlement_given_back_total") - given_back_before < 20:
        assert steals < 100, "a deadline on the number of steals"
        token = app.workers.manager.lease(0).token if app.workers.manager and app.workers.manager.lease(0) else 0
        with contextlib.suppress(KeyNotFoundError):
            await kv.delete("partition.0")
        steals += 1
        await wait_for(functools.partial(_token, app, token), 30, "the partition acquired again, with a new token")
        await asyncio.sleep(0.2)  # let the new pipeline take its first batches

    async def all_settled() -> bool:
        return (await harness.counts())[0] == len(sim.hands)

    await wait_for(all_settled, 120, "every hand settled")
    assert (await harness.counts()) == (len(sim.hands), 0), "a hand was dead-lettered"
    assert counter("socai_settlement_given_back_total") - given_back_before >= 3, "nothing was held at a handover"
    await settled_in_play_order(harness, sim)


async def _token(app: App, old: int | None) -> bool:
    """The partition is held, under a token other than ``old``."""
    manager = app.workers.manager
    lease = manager.lease(0) if manager is not None else None
    return lease is not None and lease.token != old and 0 in app.workers.held()


async def test_a_hand_refused_for_an_earlier_hand_not_posted_yet_is_posted_after_it(harness: Harness) -> None:
    """What happens when a hand reaches the ledger before the earlier hand of its table it
    pays out of: the ledger refuses it INSUFFICIENT_FUNDS and remembers the refusal under
    ``settle:{hand_id}`` (a LEDGER_REJECTED dead letter until now). The pipeline finds the
    earlier hand outstanding in the stream, settles it first, and posts the refused hand
    again under the next key of its chain: no dead letter, play order kept."""
    sim = simulate(60, ("holdem",), seed=1919)
    first, then = dependent_pairs(sim)[0]
    table = next(t for t in sim.tables if t.table_id == first.table_id)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await publish_hand(harness.log, table.table_events)
    ends = {}
    for hand in table.hands:
        ends[hand.hand_id] = await publish_hand(harness.log, hand)
    store = await Store.open(harness.settings.database_url or "")
    try:
        settler = Settler(
            harness.log,
            store,
            LedgerPoster(harness.ledger("settlement")),
            replayer=Replayer(0, seal_policy(harness.settings.hand_seal_public_keys())),
        )
        pipeline = Pipeline(
            harness.nc, settler, harness.config, stream=harness.settings.events_stream, prefix=harness.log.prefix
        )
        await pipeline.subscribe()
        before = table.hands[: table.hands.index(first)]
        await settler.settle([HandJob(h.table_id, h.hand_id, ends[h.hand_id]) for h in before])

        posted = await settler.post(await settler.prepare([HandJob(then.table_id, then.hand_id, ends[then.hand_id])]))
        assert posted.refused == {then.hand_id: "INSUFFICIENT_FUNDS"}  # what the ledger says
        assert [d.reason for d in posted.dead] == ["LEDGER_REJECTED"]

        fixed = await pipeline.refused_out_of_order(posted)
        assert fixed.dead == [] and fixed.refused == {}
        await pipeline.close()
    finally:
        await store.close()
    earlier = await harness.transaction(f"settle:{first.hand_id}")
    again = await harness.transaction(f"settle:{then.hand_id}:retry1")
    assert {e.account_id: e.amount_gold for e in again.entries} == then.settlement.entries()
    assert earlier.journal_seq < again.journal_seq
    with psycopg.connect(libpq_url(harness.settings.database_url or "")) as conn:
        row = conn.execute(
            'select idempotency_key from "socai_settlement".settlements where hand_id = %s', (then.hand_id,)
        ).fetchone()
    assert row is not None and row[0] == f"settle:{then.hand_id}:retry1"
    trial = await harness.ledger("auditor").TrialBalance(ledger_pb2.TrialBalanceRequest())
    assert trial.total_gold == 0
