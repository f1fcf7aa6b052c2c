"""A restored journal brought up to date from the ledger's stream (``journal_restore.catch_up``).

Real NATS and PostgreSQL; the stream's messages are written here as the relay writes them
(the Transaction body, ``Socai-Journal-Seq``, ``Socai-Request-Hash``), so that a stream the
relay would never write — a gap, a posting that does not continue the journal — can be
tried too. What the relay really writes, restored end to end, is tests/fault/test_restore_drill.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from nats.aio.client import Client as NatsClient

from socai import errors
from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.nats import ensure_stream, ledger_stream_spec
from socai_ledger import db, domain, journal_restore
from socai_ledger.verify import verify_journal

pytestmark = pytest.mark.integration

AT = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def transaction(seq: int, key: str, *entries: tuple[str, int, int, int], kind: str = "transfer") -> pb.Transaction:
    """A committed transaction as the relay publishes it: entries (account, amount, balance
    after, account version)."""
    tx = pb.Transaction(
        transaction_id=str(uuid.uuid4()), idempotency_key=key, kind=kind, reference=f"r{seq}", journal_seq=seq
    )
    tx.created_at.FromDatetime(AT.replace(second=seq))
    for account_id, amount, after, version in entries:
        tx.entries.add(account_id=account_id, amount_gold=amount, balance_after_gold=after, account_version=version)
    return tx


def request_hash(tx: pb.Transaction, open_accounts: bool) -> bytes:
    entries = [domain.EntryInput(e.account_id, e.amount_gold) for e in tx.entries]
    return domain.request_hash(tx.kind, tx.reference, entries, dict(tx.metadata), open_accounts)


DEPOSIT = transaction(1, "dep-1", ("external:cashier", -100, -100, 1), ("player:ana", 100, 100, 1), kind="deposit")
PAYMENT = transaction(2, "pay-1", ("player:ana", -30, 70, 2), ("player:bao", 30, 30, 1))


@pytest.fixture
async def stream(nats_client: NatsClient) -> AsyncIterator[str]:
    name = f"RESTORE_{uuid.uuid4().hex[:8].upper()}"
    await ensure_stream(nats_client.jetstream(), ledger_stream_spec(name, f"restore{name.lower()}.ledger"))
    yield name
    await nats_client.jetstream().delete_stream(name)


async def publish(nc: NatsClient, stream: str, tx: pb.Transaction, *, hashed: bool = True) -> None:
    headers = {"Nats-Msg-Id": f"{tx.transaction_id}/{uuid.uuid4().hex[:6]}", "Socai-Journal-Seq": str(tx.journal_seq)}
    if hashed:
        headers["Socai-Request-Hash"] = request_hash(tx, open_accounts=True).hex()
    prefix = f"restore{stream.lower()}.ledger"
    await nc.jetstream().publish(f"{prefix}.posted.player", tx.SerializeToString(), headers=headers)


async def catch_up(url: str, nc: NatsClient, stream: str) -> journal_restore.CatchUp:
    conn = await db.connect(url)
    try:
        return await journal_restore.catch_up(conn, nc, stream)
    finally:
        await conn.close()


def journal(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "select t.journal_seq, t.transaction_id::text, t.idempotency_key, t.request_hash, t.created_at, "
            "e.account_id, e.amount_gold, e.balance_after_gold, e.account_version "
            "from socai_ledger.transactions t join socai_ledger.entries e using (journal_seq) "
            "order by t.journal_seq, e.entry_index"
        ).fetchall()


def accounts(url: str) -> dict[str, tuple[int, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("select account_id, balance_gold, version from socai_ledger.accounts").fetchall()
    return {a: (b, v) for a, b, v in rows}


async def test_postings_are_appended_as_they_were_published_and_each_only_once(
    migrated_database_url: str, nats_client: NatsClient, stream: str
) -> None:
    url = migrated_database_url
    await publish(nats_client, stream, DEPOSIT)
    await publish(nats_client, stream, PAYMENT)
    await publish(nats_client, stream, PAYMENT)  # published twice: a relay restarted after the duplicate window

    report = await catch_up(url, nats_client, stream)

    assert (report.head_before, report.head_after, report.applied, report.skipped) == (0, 2, 2, 1)
    assert report.published_seq == 2 and report.hashes_inferred == 0
    assert sorted(report.accounts_opened) == ["player:ana", "player:bao"]
    assert journal(url) == [
        (
            1,
            DEPOSIT.transaction_id,
            "dep-1",
            request_hash(DEPOSIT, True),
            AT.replace(second=1),
            "external:cashier",
            -100,
            -100,
            1,
        ),
        (
            1,
            DEPOSIT.transaction_id,
            "dep-1",
            request_hash(DEPOSIT, True),
            AT.replace(second=1),
            "player:ana",
            100,
            100,
            1,
        ),
        (
            2,
            PAYMENT.transaction_id,
            "pay-1",
            request_hash(PAYMENT, True),
            AT.replace(second=2),
            "player:ana",
            -30,
            70,
            2,
        ),
        (
            2,
            PAYMENT.transaction_id,
            "pay-1",
            request_hash(PAYMENT, True),
            AT.replace(second=2),
            "player:bao",
            30,
            30,
            1,
        ),
    ]
    assert {a: accounts(url)[a] for a in ("external:cashier", "player:ana", "player:bao")} == {
        "external:cashier": (-100, 1),
        "player:ana": (70, 2),
        "player:bao": (30, 1),
    }
    pool = db.create_pool(url)
    await pool.open()
    try:
        assert (await verify_journal(pool)).ok
    finally:
        await pool.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("select published_seq from socai_ledger.outbox_progress").fetchone() == (2,)

    again = await catch_up(url, nats_client, stream)
    assert (again.applied, again.head_after) == (0, 2)
    assert len(journal(url)) == 4


async def test_a_message_without_the_request_hash_is_hashed_as_its_caller_sent_it(
    migrated_database_url: str, nats_client: NatsClient, stream: str
) -> None:
    await publish(nats_client, stream, DEPOSIT, hashed=False)  # Deposit opens the wallet
    await publish(nats_client, stream, PAYMENT, hashed=False)  # opened player:bao: open_accounts was set

    report = await catch_up(migrated_database_url, nats_client, stream)

    assert (report.applied, report.hashes_inferred) == (2, 2)
    hashes = [row[3] for row in journal(migrated_database_url)[::2]]
    assert hashes == [request_hash(DEPOSIT, True), request_hash(PAYMENT, True)]


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        # Ana holds 100 after the deposit, not 90: the stream does not continue this journal.
        (transaction(2, "pay-1", ("player:ana", -30, 60, 2), ("player:bao", 30, 30, 1)), "RESTORE_CONFLICT"),
        # Version 3 of Ana's account without a version 2.
        (transaction(2, "pay-1", ("player:ana", -30, 70, 3), ("player:bao", 30, 30, 1)), "RESTORE_CONFLICT"),
        # Gold out of nowhere.
        (transaction(2, "pay-1", ("player:ana", -30, 70, 2), ("player:bao", 31, 31, 1)), "RESTORE_CONFLICT"),
        # The deposit's key again.
        (transaction(2, "dep-1", ("player:ana", -30, 70, 2), ("player:bao", 30, 30, 1)), "RESTORE_CONFLICT"),
        # Journal sequence 2 missing from the stream.
        (transaction(3, "pay-1", ("player:ana", -30, 70, 2), ("player:bao", 30, 30, 1)), "RESTORE_GAP"),
    ],
)
async def test_a_stream_that_does_not_continue_the_journal_is_refused_and_nothing_is_written(
    migrated_database_url: str, nats_client: NatsClient, stream: str, second: pb.Transaction, reason: str
) -> None:
    url = migrated_database_url
    before = (journal(url), accounts(url))
    await publish(nats_client, stream, DEPOSIT)
    await publish(nats_client, stream, second)

    with pytest.raises(errors.PreconditionFailed) as refused:
        await catch_up(url, nats_client, stream)

    assert refused.value.code == reason
    assert (journal(url), accounts(url)) == before


async def test_the_database_refuses_what_the_catch_up_would_not_check(migrated_database_url: str) -> None:
    """The catch-up writes through PostgreSQL's own checks (ledger_0003): a transaction whose
    legs do not balance is refused at commit even when written directly, as the catch-up does."""
    url = migrated_database_url
    with psycopg.connect(url) as conn, pytest.raises(psycopg.errors.IntegrityConstraintViolation):
        tx = str(uuid.uuid4())
        conn.execute(
            "insert into socai_ledger.transactions (transaction_id, idempotency_key, request_hash, status, "
            "journal_seq, kind, reference, created_at) values (%s, 'k', %s, 'applied', 1, 'transfer', '', now())",
            (tx, b"\0" * 32),
        )
        conn.execute(
            "insert into socai_ledger.entries (account_id, account_version, journal_seq, entry_index, transaction_id, "
            "amount_gold, balance_after_gold, created_at) values ('external:cashier', 1, 1, 0, %s, -5, -5, now())",
            (tx,),
        )
        conn.execute(
            "update socai_ledger.accounts set balance_gold = -5, version = 1 where account_id = 'external:cashier'"
        )
        conn.commit()
    assert journal(url) == []


async def test_a_settlement_from_the_stream_releases_its_hands_hold_as_the_write_path_does(
    migrated_database_url: str, nats_client: NatsClient, stream: str
) -> None:
    url = migrated_database_url
    bankroll = transaction(1, "bank-1", ("external:cashier", -1000, -1000, 1), ("house:bank", 1000, 1000, 1))
    settled = transaction(2, "settle:t1-h1", ("house:bank", -300, 700, 2), ("player:ana", 300, 300, 1))
    await publish(nats_client, stream, bankroll)
    await catch_up(url, nats_client, stream)
    with psycopg.connect(url) as conn:  # the table held the hand's worst case of the bank (Hold)
        conn.execute(
            "insert into socai_ledger.holds (account_id, hand_id, amount_gold, status, created_at, updated_at) "
            "values ('house:bank', 't1-h1', 400, 'open', now(), now())"
        )
    await publish(nats_client, stream, settled)

    assert (await catch_up(url, nats_client, stream)).applied == 1

    with psycopg.connect(url) as conn:
        hold = conn.execute(
            "select status, released_by, release_transaction_id::text from socai_ledger.holds where hand_id = 't1-h1'"
        ).fetchone()
        bank = conn.execute(
            "select balance_gold, held_gold from socai_ledger.accounts where account_id = 'house:bank'"
        ).fetchone()
    assert hold == ("released", "settlement", settled.transaction_id)
    assert bank == (700, 0)
