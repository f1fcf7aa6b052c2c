"""Bring a journal restored from a backup up to date from the ledger's own stream.

Disaster recovery (docs/run/operations.md): PostgreSQL is lost, the last base backup is
restored (``socai restore``), and the journal then lacks every transaction committed after
the backup. The outbox relay published each of them, in journal order, to the stream
``SOCAI_LEDGER`` (``outbox``): the ``socai.ledger.v1.Transaction`` with its id, key, kind,
reference, metadata, commit time, journal sequence and every entry's balance and account
version after it, plus the request's canonical hash in a header. ``catch_up`` reads the
stream after the restored journal's head and appends those transactions as they were, in
order: the same ids, journal sequence numbers, times and balances, so the journal after the
restore is the journal before the loss up to the last published transaction.

Why not post them again through ``PostTransactions``: a new posting gets a new id, a new
commit time and a new journal sequence whenever anything else is posted first, the relay
would publish it again under its new id, and the callers' reserved key prefixes would need
every caller's token. Appending the rows themselves keeps every guarantee of the database
(ledger_0003): PostgreSQL still refuses an unbalanced transaction, a broken chain of
balances, an account row that does not follow its entries and any change to a committed
row; each transaction is checked once more here against the accounts it finds (the next
journal sequence, each entry's version and balance after) and a mismatch stops the catch-up
with nothing of its batch written. It runs as the ledger's own role, under the journal's
write lock, with the ledger service stopped.

Each transaction is applied once, by its idempotency key: a key the journal already holds
is refused (``RESTORE_CONFLICT``), and the catch-up only ever appends the journal sequence
after the head, so running it again applies nothing. The holds a settlement released when
it was posted are released again here (the write path's rule). The relay's cursor is moved
to the last transaction the stream holds, so the relay publishes only what it never had.

What the stream cannot give back: transactions committed but never published (the relay's
lag at the loss; settlement posts its hands again, ``socai restore``), refusals remembered
under a key (a retry is decided afresh), accounts opened without a posting (opened again by
their next ``OpenAccount`` or posting) and holds taken after the backup.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import psycopg
from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.js.errors import NotFoundError

from socai import accounts as account_ids
from socai import errors
from socai.events.log import Direct, direct_page
from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.logging import get_logger
from socai_ledger import domain, pg_wire
from socai_ledger.db import SCHEMA, WRITE_LOCK, AConn
from socai_ledger.journal_copy import ENTRY_COLUMNS, TRANSACTION_COLUMNS
from socai_ledger.outbox import REQUEST_HASH_HEADER

log = get_logger("socai.ledger.restore")

JOURNAL_SEQ_HEADER: Final = "Socai-Journal-Seq"
BATCH_MAX: Final = 1000  # transactions appended per database transaction
SCAN_BATCH: Final = 256  # messages per direct-get request (the server's page)
SCAN_TIMEOUT_S: Final = 10.0
# Callers that always post with ``open_accounts`` (settlement, the table service, Deposit):
# what a message published before the request hash header existed is hashed with.
_OPENS_ACCOUNTS_PREFIXES: Final = ("settle:", "join:", "cashout:", "refund:")


@dataclass(frozen=True, slots=True)
class Posting:
    """One message of the ledger's stream: a committed transaction as the relay published it."""

    stream_seq: int
    journal_seq: int
    transaction: pb.Transaction
    request_hash: bytes | None  # None: published without the header


@dataclass
class CatchUp:
    """What ``catch_up`` did."""

    head_before: int = 0
    head_after: int = 0
    applied: int = 0
    skipped: int = 0  # stream messages at or below the head (or published twice)
    stream_last_journal_seq: int = 0
    published_seq: int = 0
    hashes_inferred: int = 0  # transactions published without their request hash
    accounts_opened: list[str] = field(default_factory=list)


# --- reading the stream ----------------------------------------------------------------------


def _posting(msg: Direct) -> Posting:
    headers, stream_seq = msg.headers, msg.stream_seq
    tx = pb.Transaction()
    tx.ParseFromString(msg.data)
    journal_seq = int(headers.get(JOURNAL_SEQ_HEADER) or tx.journal_seq)
    errors.check(journal_seq == tx.journal_seq, f"stream message {stream_seq}: its journal_seq header and body agree")
    hashed = headers.get(REQUEST_HASH_HEADER)
    return Posting(stream_seq, journal_seq, tx, bytes.fromhex(hashed) if hashed else None)


async def _journal_seq_at(nc: NatsClient, stream: str, stream_seq: int) -> int | None:
    page, _ = await direct_page(nc, stream, {"seq": stream_seq}, SCAN_TIMEOUT_S)
    for msg in page:
        return int(msg.headers.get(JOURNAL_SEQ_HEADER) or 0)
    return None


async def _first_after(nc: NatsClient, stream: str, first: int, last: int, head: int) -> int:
    """The first stream sequence in [first, last] whose journal sequence is past ``head``
    (``last + 1`` when none is): a binary search, the relay publishing in journal order."""
    low, high = first, last + 1
    while low < high:
        middle = (low + high) // 2
        seq = await _journal_seq_at(nc, stream, middle)
        if seq is not None and seq > head:
            high = middle
        else:
            low = middle + 1
    return low


async def stream_bounds(nc: NatsClient, stream: str) -> tuple[int, int, int]:
    """(first stream seq, last stream seq, the last message's journal seq; 0 when empty).

    Raises PreconditionFailed("LEDGER_STREAM_MISSING") when there is no such stream,
    Unavailable("NATS_UNAVAILABLE") when the server does not answer."""
    try:
        info = await nc.jetstream().stream_info(stream)
    except NotFoundError as exc:
        raise errors.PreconditionFailed(
            "LEDGER_STREAM_MISSING",
            f"the ledger's stream {stream} does not exist: the postings after the backup cannot come back from it "
            "(docs/run/operations.md: when the streams are lost too)",
        ) from exc
    except NatsError as exc:
        raise errors.Unavailable("NATS_UNAVAILABLE", f"the stream {stream}: {exc!r}") from exc
    if not info.state.messages:
        return 0, 0, 0
    first, last = int(info.state.first_seq), int(info.state.last_seq)
    return first, last, await _journal_seq_at(nc, stream, last) or 0


async def read_postings(nc: NatsClient, stream: str, after_journal_seq: int) -> AsyncIterator[Posting]:
    """The stream's postings from the first one past ``after_journal_seq``, in stream order
    (a transaction published twice, after the duplicate window, appears twice).

    Raises Unavailable("NATS_UNAVAILABLE") when the server does not answer."""
    first, last, _ = await stream_bounds(nc, stream)
    if not last:
        return
    seq = await _first_after(nc, stream, first, last, after_journal_seq)
    while seq <= last:
        page, _ = await direct_page(nc, stream, {"seq": seq, "batch": SCAN_BATCH}, SCAN_TIMEOUT_S)
        if not page:
            return
        for msg in page:
            yield _posting(msg)
            seq = msg.stream_seq + 1


# --- appending --------------------------------------------------------------------------------


def request_hash_of(posting: Posting) -> tuple[bytes, bool]:
    """(the request hash to store, whether it was inferred): the published one, or for a
    message published before the relay sent it, the hash of the request its caller most
    likely sent: ``open_accounts`` for settlement's and the table's keys and for ``Deposit``
    (they always set it), else exactly when the posting opened an account. A guess can be
    wrong only for a backend's or an operator's posting that set ``open_accounts`` without
    opening anything; a retry of it under its key would then be refused
    (``IDEMPOTENCY_KEY_REUSED``), never applied twice."""
    if posting.request_hash is not None:
        return posting.request_hash, False
    tx = posting.transaction
    opened = any(e.account_version == 1 and e.account_id.partition(":")[0] in domain.OPENABLE_KINDS for e in tx.entries)
    deposit = tx.kind == "deposit" and any(e.account_id.startswith("player:") for e in tx.entries)  # Deposit
    opens = tx.idempotency_key.startswith(_OPENS_ACCOUNTS_PREFIXES) or deposit or opened
    entries = [domain.EntryInput(e.account_id, e.amount_gold) for e in tx.entries]
    return domain.request_hash(tx.kind, tx.reference, entries, dict(tx.metadata), opens), True


_HEAD_SQL = f"select coalesce(max(journal_seq), 0) from {SCHEMA}.transactions"
_KNOWN_SQL = f"select idempotency_key from {SCHEMA}.transactions where idempotency_key = any(%s::text[])"
_LOCK_SQL = (
    f"select account_id, balance_gold, version from {SCHEMA}.accounts "
    f"where account_id = any(%s::text[]) order by account_id for update"
)
_INSERT_TRANSACTIONS_SQL = f"""
insert into {SCHEMA}.transactions ({TRANSACTION_COLUMNS})
select r.id, r.k, decode(r.h, 'hex'), 'applied', r.s, r.kd, r.rf, r.m::jsonb, null, null, r.t
from unnest(%s::uuid[], %s::text[], %s::text[], %s::int8[], %s::text[], %s::text[], %s::text[], %s::timestamptz[])
     as r(id, k, h, s, kd, rf, m, t)
"""
_INSERT_ENTRIES_SQL = f"""
insert into {SCHEMA}.entries ({ENTRY_COLUMNS})
select * from unnest(%s::text[], %s::int8[], %s::int8[], %s::int2[], %s::uuid[], %s::int8[], %s::int8[],
                     %s::timestamptz[])
"""
_UPDATE_BALANCES_SQL = f"""
update {SCHEMA}.accounts a set balance_gold = u.balance_gold, version = u.version
from unnest(%s::text[], %s::int8[], %s::int8[]) as u(account_id, balance_gold, version)
where a.account_id = u.account_id
"""
_INSERT_ACCOUNTS_SQL = f"""
insert into {SCHEMA}.accounts (account_id, kind, balance_gold, version, may_go_negative, created_at)
select * from unnest(%s::text[], %s::text[], %s::int8[], %s::int8[], %s::bool[], %s::timestamptz[])
"""
# The write path's rule (journal_write._RELEASE_HOLDS_SQL): a settlement releases its hand's
# holds on the accounts it moves, when it is applied.
_RELEASE_HOLDS_SQL = f"""
update {SCHEMA}.holds h
set status = 'released', released_at = r.at, updated_at = clock_timestamp(), released_by = 'settlement',
    release_transaction_id = r.transaction_id
from unnest(%s::text[], %s::text[], %s::uuid[], %s::timestamptz[]) as r(account_id, hand_id, transaction_id, at)
where h.account_id = r.account_id and h.hand_id = r.hand_id and h.status <> 'released'
"""


def _created_at(tx: pb.Transaction) -> datetime:
    return tx.created_at.ToDatetime(tzinfo=UTC)


async def _append(conn: AConn, batch: Sequence[Posting], report: CatchUp) -> None:
    """Append ``batch`` (consecutive journal sequences after the head) in one database
    transaction, or nothing: raises PreconditionFailed("RESTORE_CONFLICT") when the journal
    does not continue where the batch starts."""
    async with conn.transaction():
        await conn.execute("select pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        cur = await conn.execute(_HEAD_SQL)
        row = await cur.fetchone()
        head = int(row[0]) if row else 0
        if batch[0].journal_seq != head + 1:
            raise errors.PreconditionFailed(
                "RESTORE_CONFLICT", f"the journal's head is {head}, the stream continues at {batch[0].journal_seq}"
            )
        keys = [p.transaction.idempotency_key for p in batch]
        cur = await conn.execute(_KNOWN_SQL, (pg_wire.text_array(keys),))
        known = [r[0] for r in await cur.fetchall()]
        if known or len(set(keys)) != len(keys):
            raise errors.PreconditionFailed(
                "RESTORE_CONFLICT", f"idempotency keys already in the journal: {sorted(known or keys)[:5]}"
            )
        ids = sorted({e.account_id for p in batch for e in p.transaction.entries})
        cur = await conn.execute(_LOCK_SQL, (pg_wire.plain_array(ids),))
        state = {r[0]: (int(r[1]), int(r[2])) for r in await cur.fetchall()}
        existing = set(state)
        opened_at: dict[str, datetime] = {}
        tx_cols: list[list[Any]] = [[] for _ in range(8)]
        entry_cols: list[list[Any]] = [[] for _ in range(8)]
        releases: list[list[Any]] = [[] for _ in range(4)]
        for expected_seq, posting in enumerate(batch, start=head + 1):
            tx = posting.transaction
            if posting.journal_seq != expected_seq:
                raise errors.PreconditionFailed(
                    "RESTORE_GAP", f"the stream skips from journal_seq {expected_seq - 1} to {posting.journal_seq}"
                )
            at = _created_at(tx)
            request_hash, inferred = request_hash_of(posting)
            report.hashes_inferred += inferred
            for col, value in zip(
                tx_cols,
                (
                    tx.transaction_id,
                    tx.idempotency_key,
                    request_hash.hex(),
                    expected_seq,
                    tx.kind,
                    tx.reference,
                    json.dumps(dict(tx.metadata)) if tx.metadata else None,
                    at.isoformat(),
                ),
                strict=True,
            ):
                col.append(value)
            if sum(e.amount_gold for e in tx.entries) != 0:
                raise errors.PreconditionFailed(
                    "RESTORE_CONFLICT", f"journal_seq {expected_seq} on the stream does not balance"
                )
            for index, e in enumerate(tx.entries):
                balance, version = state.get(e.account_id, (0, 0))
                if e.account_version != version + 1 or e.balance_after_gold != balance + e.amount_gold:
                    raise errors.PreconditionFailed(
                        "RESTORE_CONFLICT",
                        f"journal_seq {expected_seq}: {e.account_id} stands at version {version}, balance {balance}; "
                        f"the stream's entry is version {e.account_version}, balance after {e.balance_after_gold}",
                    )
                if e.account_id not in state:
                    opened_at[e.account_id] = at
                state[e.account_id] = (e.balance_after_gold, e.account_version)
                for entry_col, cell in zip(
                    entry_cols,
                    (
                        e.account_id,
                        e.account_version,
                        expected_seq,
                        index,
                        tx.transaction_id,
                        e.amount_gold,
                        e.balance_after_gold,
                        at.isoformat(),
                    ),
                    strict=True,
                ):
                    entry_col.append(cell)
            if tx.idempotency_key.startswith(domain.SETTLEMENT_KEY_PREFIX):
                hand_id = tx.idempotency_key[len(domain.SETTLEMENT_KEY_PREFIX) :].partition(":")[0]
                for e in tx.entries:
                    for col, value in zip(
                        releases, (e.account_id, hand_id, tx.transaction_id, at.isoformat()), strict=True
                    ):
                        col.append(value)
        # Array literals made here (``pg_wire``, as the write path does): psycopg's dumping of
        # Python lists cost more than the rest of a batch.
        text = pg_wire.text_array
        ids_, keys_, hashes_, seqs_, kinds_, refs_, metadata_, times_ = tx_cols
        await conn.execute(
            _INSERT_TRANSACTIONS_SQL,
            (
                pg_wire.plain_array(ids_),
                text(keys_),
                pg_wire.plain_array(hashes_),
                pg_wire.plain_array(seqs_),
                text(kinds_),
                text(refs_),
                text(metadata_),
                pg_wire.plain_array(times_),
            ),
        )
        await conn.execute(_INSERT_ENTRIES_SQL, [pg_wire.plain_array(col) for col in entry_cols])
        if releases[0]:
            accounts_, hands_, transactions_, at_ = releases
            await conn.execute(
                _RELEASE_HOLDS_SQL,
                (pg_wire.plain_array(accounts_), text(hands_), pg_wire.plain_array(transactions_), text(at_)),
            )
        updated = [a for a in ids if a in existing]
        if updated:
            await conn.execute(
                _UPDATE_BALANCES_SQL,
                (
                    pg_wire.plain_array(updated),
                    pg_wire.plain_array(state[a][0] for a in updated),
                    pg_wire.plain_array(state[a][1] for a in updated),
                ),
            )
        opened = [a for a in ids if a not in existing]
        if opened:
            kinds = [a.partition(":")[0] for a in opened]
            await conn.execute(
                _INSERT_ACCOUNTS_SQL,
                (
                    opened,
                    kinds,
                    [state[a][0] for a in opened],
                    [state[a][1] for a in opened],
                    [account_ids.may_go_negative(a) for a in opened],
                    [opened_at[a] for a in opened],
                ),
            )
            report.accounts_opened += opened
    report.applied += len(batch)


async def catch_up(conn: AConn, nc: NatsClient, stream: str, *, batch_max: int = BATCH_MAX) -> CatchUp:
    """Append every transaction of the ledger's ``stream`` past the journal's head, in order,
    then move the relay's cursor to the last one the stream holds (see the module docstring).

    ``conn``: a connection as the ledger's role, in autocommit mode, the ledger service
    stopped. Raises PreconditionFailed("LEDGER_STREAM_MISSING") when the stream is gone,
    PreconditionFailed("RESTORE_GAP") when the stream lacks a journal
    sequence between the head and its last one, PreconditionFailed("RESTORE_CONFLICT") when a
    posting does not continue the journal (nothing of its batch is written), Unavailable when
    NATS does not answer.
    """
    cur = await conn.execute(_HEAD_SQL)
    row = await cur.fetchone()
    report = CatchUp(head_before=int(row[0]) if row else 0)
    head = report.head_before
    _, _, report.stream_last_journal_seq = await stream_bounds(nc, stream)
    batch: list[Posting] = []
    async for posting in read_postings(nc, stream, head):
        report.stream_last_journal_seq = max(report.stream_last_journal_seq, posting.journal_seq)
        expected = head + len(batch) + 1
        if posting.journal_seq < expected:
            report.skipped += 1  # published twice (a relay restart after the duplicate window)
            continue
        if posting.journal_seq > expected:
            raise errors.PreconditionFailed(
                "RESTORE_GAP", f"the stream skips from journal_seq {expected - 1} to {posting.journal_seq}"
            )
        batch.append(posting)
        if len(batch) >= batch_max:
            await _append(conn, batch, report)
            head += len(batch)
            batch = []
    if batch:
        await _append(conn, batch, report)
        head += len(batch)
    report.head_after = head
    report.published_seq = await _advance_cursor(conn, min(head, report.stream_last_journal_seq))
    log.info(
        "journal_caught_up",
        head_before=report.head_before,
        head_after=report.head_after,
        applied=report.applied,
        published_seq=report.published_seq,
        hashes_inferred=report.hashes_inferred,
    )
    return report


async def _advance_cursor(conn: AConn, stream_has_through: int) -> int:
    """Move the relay's cursor to ``stream_has_through`` (the stream already holds those
    transactions; never backwards) and drop the outbox ranges it covers. Returns the cursor."""
    try:
        cur = await conn.execute(
            f"with dropped as (delete from {SCHEMA}.outbox where last_seq <= %(seq)s) "
            f"update {SCHEMA}.outbox_progress set published_seq = greatest(published_seq, %(seq)s), "
            f"updated_at = now() returning published_seq",
            {"seq": stream_has_through},
        )
        row = await cur.fetchone()
    except psycopg.Error as exc:
        raise errors.Unavailable("DATABASE_UNAVAILABLE", f"moving the outbox cursor: {exc}") from exc
    return int(row[0]) if row else 0
