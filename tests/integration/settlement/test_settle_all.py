"""Every simulated hand of every game settles exactly once, and the audit finds it all in order."""

from __future__ import annotations

import pytest

from socai.audit.auditor import reconcile, verify
from socai.audit.export import read_stream
from socai.gen.ledger.v1 import ledger_pb2
from socai.rules import registry
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import fund, publish, simulate

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_300_hands_of_every_game_settle_exactly_once_and_the_audit_is_clean(harness: Harness) -> None:
    games = registry.available()
    sim = simulate(300, games, seed=300)
    assert len(sim.hands) == 300
    assert {h.game for h in sim.hands} == set(games)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    app = await harness.start_settlement()

    published = await publish(harness.log, sim)
    assert published == len(sim.events())

    async def all_settled() -> bool:
        return (await harness.counts())[0] == 300

    await wait_for(all_settled, 120, "300 settlements")
    assert await harness.counts() == (300, 0)

    # Exactly once in the ledger: one transaction per hand under settle:{hand_id}, with the
    # entries the rules engine gave while the hand was played.
    for hand in sim.hands:
        tx = await harness.transaction(f"settle:{hand.hand_id}")
        entries = hand.settlement.entries()
        if not entries:
            assert tx is None
            continue
        assert tx is not None, hand.hand_id
        assert {e.account_id: e.amount_gold for e in tx.entries} == entries
        assert (tx.kind, tx.reference) == ("settlement", hand.hand_id)
        record = await app.store.get(hand.hand_id)
        assert record is not None and record.ledger_transaction_id == tx.transaction_id
        assert {s.seat: s.net_gold for s in record.seats} == dict(hand.settlement.nets)

    # Every escrow holds its buy-in plus its hands: no hand was posted twice or lost.
    for account, expected in sim.expected_balances().items():
        if account.startswith("escrow:"):
            assert await harness.balance(account) == expected, account
    trial = await harness.ledger("auditor").TrialBalance(ledger_pb2.TrialBalanceRequest())
    assert trial.total_gold == 0

    # Every message was acked, table facts included; nothing is left behind.
    lag, pending = await app.lag.measure()
    assert (lag, pending) == (0, 0)

    # The auditor, from the stream, with the ledger: clean.
    audit = verify([r async for r in read_stream(harness.log)], source="stream")
    await reconcile(audit, harness.ledger("auditor"), ledger_name="test ledger")
    report = audit.report
    assert report.ok, report.render()
    assert report.hands_verified == 300
    assert report.transactions_checked == 300
    assert report.escrows_checked == sum(len(t.seats) for t in sim.tables)
    assert report.table_facts == sum(len(t.table_events) for t in sim.tables)
    assert {g: t.hands for g, t in report.games.items()} == {g: sum(1 for h in sim.hands if h.game == g) for g in games}
    assert sum(t.fees_gold for t in report.games.values()) == sum(h.settlement.fees_gold() for h in sim.hands)
