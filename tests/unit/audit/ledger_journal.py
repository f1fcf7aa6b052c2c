"""A ledger journal for simulated hands, built without a ledger: what the unit tests and the
``audit.html_hands_per_s`` benchmark reconcile against (``JournalLedger``)."""

from __future__ import annotations

from socai import accounts
from socai.gen.ledger.v1 import ledger_pb2
from socai.settle.keys import settlement_key
from tests.support.synthetic import Simulation


def journal_of(sim: Simulation) -> list[ledger_pb2.Transaction]:
    """What a ledger would hold after the simulation: buy-ins from the wallets, then each
    hand's settlement under its key, balances after and versions running per account."""
    balances: dict[str, tuple[int, int]] = {}
    txs: list[ledger_pb2.Transaction] = []

    def post(key: str, kind: str, reference: str, entries: dict[str, int]) -> None:
        tx = ledger_pb2.Transaction(
            transaction_id=f"tx{len(txs) + 1}",
            idempotency_key=key,
            kind=kind,
            reference=reference,
            journal_seq=len(txs) + 1,
        )
        tx.created_at.FromSeconds(1_800_000_000 + len(txs))
        for account, amount in sorted(entries.items()):
            version, balance = balances.get(account, (0, 0))
            balances[account] = (version + 1, balance + amount)
            entry = tx.entries.add(
                transaction_id=tx.transaction_id,
                account_id=account,
                amount_gold=amount,
                balance_after_gold=balance + amount,
                account_version=version + 1,
                journal_seq=tx.journal_seq,
            )
            entry.created_at.CopyFrom(tx.created_at)  # the ledger's entries share their transaction's time
        txs.append(tx)

    for table in sim.tables:
        for seat in table.seats:
            escrow = accounts.escrow(table.table_id, seat.player_id)
            post(
                f"join:{escrow}",
                "buy_in",
                table.table_id,
                {"external:cashier": -seat.buy_in_gold, escrow: seat.buy_in_gold},
            )
        for hand in table.hands:
            if hand.settlement.entries():
                post(settlement_key(hand.hand_id), "settlement", hand.hand_id, hand.settlement.entries())
    return txs
