"""The journal is append-only, enforced by PostgreSQL itself; VerifyJournal finds tampering."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pg_errors

from socai.gen.ledger.v1 import ledger_pb2 as pb
from tests.integration.ledger.conftest import Ledger, fund_escrow, journal_snapshot, transaction

pytestmark = pytest.mark.integration


async def settle_one_hand(ledger: Ledger) -> None:
    await fund_escrow(ledger, "t1", "alice", 1_000)
    await ledger.stub("settlement").PostTransaction(
        pb.PostTransactionRequest(
            transaction=transaction(
                "settle:t1-h1",
                ("escrow:t1:alice", -100),
                ("escrow:t1:bob", 95),
                ("house:fees", 5),
                open_accounts=True,
            )
        )
    )


@pytest.mark.parametrize(
    "statement",
    [
        "update socai_ledger.entries set amount_gold = amount_gold + 1",
        "update socai_ledger.entries set balance_after_gold = 0 where account_id = 'escrow:t1:bob'",
        "delete from socai_ledger.entries",
        "truncate socai_ledger.entries",
        "update socai_ledger.transactions set reference = 'rewritten'",
        "delete from socai_ledger.transactions where idempotency_key = 'settle:t1-h1'",
        "truncate socai_ledger.transactions cascade",
        "delete from socai_ledger.accounts where account_id = 'escrow:t1:bob'",
        "update socai_ledger.accounts set kind = 'house' where account_id = 'escrow:t1:bob'",
        "update socai_ledger.accounts set may_go_negative = true where account_id = 'escrow:t1:bob'",
        "update socai_ledger.accounts set version = 0 where account_id = 'escrow:t1:bob'",
    ],
)
async def test_the_database_refuses_to_rewrite_the_journal_even_for_its_owner(ledger: Ledger, statement: str):
    await settle_one_hand(ledger)
    url = ledger.settings.database_url or ""
    before = journal_snapshot(url)
    with psycopg.connect(url) as conn:  # the superuser that owns the tables
        with pytest.raises(pg_errors.InsufficientPrivilege) as caught:
            conn.execute(statement)
        conn.rollback()
    assert "refused" in str(caught.value)
    assert journal_snapshot(url) == before


async def test_the_database_refuses_a_negative_balance_on_an_account_that_may_not_hold_one(ledger: Ledger):
    await settle_one_hand(ledger)
    url = ledger.settings.database_url or ""
    with psycopg.connect(url) as conn:
        with pytest.raises(pg_errors.CheckViolation):
            conn.execute("update socai_ledger.accounts set balance_gold = -1 where account_id = 'house:fees'")
        conn.rollback()
        # The outside world may: external:cashier is negative after every deposit.
        (cashier,) = conn.execute(
            "select balance_gold from socai_ledger.accounts where account_id = 'external:cashier'"
        ).fetchone() or (0,)
    assert cashier == -1_000


async def test_verify_and_trial_balance_are_clean_after_postings(ledger: Ledger):
    await settle_one_hand(ledger)
    auditor = ledger.stub("auditor")
    report = await auditor.VerifyJournal(pb.VerifyJournalRequest())
    assert report.ok and not report.mismatches
    assert (report.accounts_checked, report.entries_checked) == (5, 5)  # 3 house/external + 2 escrows
    trial = await auditor.TrialBalance(pb.TrialBalanceRequest())
    assert trial.total_gold == 0
    assert {(k.kind, k.balance_gold, k.accounts) for k in trial.kinds} == {
        ("external", -1_000, 1),
        ("house", 5, 2),
        ("escrow", 995, 2),
    }


async def test_verify_finds_a_balance_written_around_the_journal(ledger: Ledger):
    await settle_one_hand(ledger)
    url = ledger.settings.database_url or ""
    with psycopg.connect(url) as conn:  # someone with the owner's password and a bad idea
        # The database itself refuses a balance its entries do not give; only the owner,
        # switching its guards off, can write one, and VerifyJournal must still find it.
        conn.execute("alter table socai_ledger.accounts disable trigger user")
        conn.execute(
            "update socai_ledger.accounts set balance_gold = balance_gold + 50 where account_id = 'escrow:t1:bob'"
        )
        conn.execute("alter table socai_ledger.accounts enable trigger user")
        conn.commit()
    auditor = ledger.stub("auditor")
    report = await auditor.VerifyJournal(pb.VerifyJournalRequest())
    assert not report.ok
    (mismatch,) = report.mismatches
    assert (mismatch.account_id, mismatch.stored_balance_gold, mismatch.computed_balance_gold) == (
        "escrow:t1:bob",
        145,
        95,
    )
    assert "entries sum to 95" in mismatch.detail
    assert (await auditor.TrialBalance(pb.TrialBalanceRequest())).total_gold == 50


async def test_verify_finds_an_entry_rewritten_with_the_guards_switched_off(ledger: Ledger):
    await settle_one_hand(ledger)
    url = ledger.settings.database_url or ""
    with psycopg.connect(url) as conn:
        conn.execute("alter table socai_ledger.entries disable trigger user")
        conn.execute("update socai_ledger.entries set amount_gold = 90 where account_id = 'escrow:t1:bob'")
        conn.execute("alter table socai_ledger.entries enable trigger user")
        conn.commit()
    report = await ledger.stub("auditor").VerifyJournal(pb.VerifyJournalRequest())
    assert not report.ok
    details = " | ".join(f"{m.account_id}: {m.detail}" for m in report.mismatches)
    assert "escrow:t1:bob: balance 95 but entries sum to 90" in details
    assert "balance_after 95 but previous 0 + amount 90" in details
    assert "entries sum to -5" in details  # the transaction no longer balances
