"""Every SQL statement of the ledger, on psycopg 3 (async) directly.

Tables (schema ``socai_ledger``, migration ``0002_journal``): ``accounts`` (the balance
projection), ``transactions`` and ``entries`` (the journal: append-only, the database
refuses UPDATE, DELETE and TRUNCATE), ``outbox`` (journal ranges not yet published) and
``outbox_progress``.

The write path (``write_batch``) runs one batch of requests in one database transaction,
in two scripts (round trips; a large batch's COPY data is exchanged inside the second):

1. One script: ``BEGIN``; ``pg_advisory_xact_lock(WRITE_LOCK)`` — one writer at a time
   across every ledger replica, so journal sequence numbers, assigned under it, follow the
   commit order (the outbox relay publishes in that order); then, each statement with its
   own snapshot taken after the lock: the batch's time and the journal head, what the
   journal knows about the batch's idempotency keys, and the batch's accounts locked with
   one ``SELECT … FOR UPDATE`` in account-id order (one fixed order: no deadlocks).
2. ``domain.plan_batch`` decides every item against running balances in memory.
3. The journal rows: for a large batch, binary ``COPY`` of the transactions and the entries
   at the head of the last script (each stream goes out when the server asks for it); for a
   small one they ride in the last script as array literals.
4. The last script: the journal rows, one ``UPDATE … FROM unnest(…)`` of the touched
   balances, one insert of the accounts opened, one outbox row naming the journal range,
   ``COMMIT``. Callers are answered only after the commit.

A hot account (``house:fees`` takes a posting from nearly every hand) therefore costs one
row update per batch, not one per transaction: the batch is the unit of serialisation.
The ``CHECK (may_go_negative OR balance_gold >= 0)`` constraint on ``accounts`` makes the
database itself refuse a negative balance should the planner ever be wrong.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import json
import re
import struct
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from uuid import UUID

import psycopg
from psycopg.rows import TupleRow
from psycopg.waiting import Ready, Wait

from socai import accounts as account_ids
from socai import errors
from socai.infra import db_pool
from socai.infra.db import libpq_url
from socai.money import INT64_MAX
from socai_ledger import domain
from socai_ledger.domain import (
    Account,
    Entry,
    KindTotal,
    KnownKey,
    LockedAccounts,
    Mismatch,
    PreparedTransaction,
    Transaction,
    TrialBalance,
    VerifyReport,
)

SCHEMA: Final = "socai_ledger"
# pg_advisory_xact_lock keys (int8): the journal writer and the outbox relay leader.
WRITE_LOCK: Final = 0x50CA1_0001
RELAY_LOCK: Final = 0x50CA1_0002
VERIFY_MISMATCHES_MAX: Final = 1000
APPLICATION_NAME: Final = "socai-ledger"

AConn = psycopg.AsyncConnection[TupleRow]

_TX_COLUMNS = (
    "transaction_id, idempotency_key, request_hash, status, journal_seq, kind, reference, metadata, "
    "error_reason, error_message, created_at"
)
_ENTRY_COLUMNS = (
    "account_id, account_version, journal_seq, entry_index, transaction_id, amount_gold, balance_after_gold, created_at"
)

_SEPARATOR: Final = "\x1f"
_HEAD_SQL = f"select clock_timestamp(), coalesce(max(journal_seq), 0) from {SCHEMA}.transactions"
_COPY_TRANSACTIONS_SQL = f"copy {SCHEMA}.transactions ({_TX_COLUMNS}) from stdin (format binary)"
_COPY_ENTRIES_SQL = f"copy {SCHEMA}.entries ({_ENTRY_COLUMNS}) from stdin (format binary)"
_OUTBOX_SQL = f"insert into {SCHEMA}.outbox (first_seq, last_seq) values (%s, %s)"
# Up to this many entries a batch's journal rows travel as array literals inside the final
# script (one round trip for every write and the commit); above it, binary COPY is faster
# on the server (measured: ~35 % less time for 1,000 transactions) and worth the two
# exchanges it adds to that script (the server asks for each COPY's data).
ROWS_BY_ARRAY_MAX: Final = 300
_INSERT_TRANSACTIONS_SQL = f"""
insert into {SCHEMA}.transactions ({_TX_COLUMNS})
select r.id, r.k, decode(r.h, 'hex'), r.st, r.s, r.kd, r.rf, r.m::jsonb, r.er, r.em, %s
from unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::int8[], %s::text[], %s::text[], %s::text[],
            %s::text[], %s::text[]) as r(id, k, h, st, s, kd, rf, m, er, em)
"""
_INSERT_ENTRIES_SQL = f"""
insert into {SCHEMA}.entries ({_ENTRY_COLUMNS})
select r.a, r.v, r.s, r.i, r.t, r.am, r.b, %s
from unnest(%s::text[], %s::int8[], %s::int8[], %s::int2[], %s::uuid[], %s::int8[], %s::int8[]) as r(a, v, s, i, t, am, b)
"""
# What the journal holds under the batch's keys. One index probe per key, whatever the
# statistics say: with a plain "= any(array)" the planner preferred a sequential scan of the
# whole transactions table (its cost grew with the journal; seen at 20-60 ms a batch). The
# LIMITs keep the lateral subqueries from being flattened into a hash join.
_KNOWN_SQL = f"""
with found as materialized (
    select t.idempotency_key, t.request_hash, t.status, t.transaction_id, t.journal_seq, t.kind, t.reference,
           t.metadata, t.created_at, t.error_reason, t.error_message
    from unnest(string_to_array(%s, E'\\x1f')) as k(key)
    cross join lateral (select * from {SCHEMA}.transactions t where t.idempotency_key = k.key limit 1) t
)
select f.*, e.account_id, e.amount_gold, e.balance_after_gold, e.account_version
from found f
left join lateral (
    select * from {SCHEMA}.entries e where e.journal_seq = f.journal_seq order by e.entry_index limit {domain.ENTRIES_MAX}
) e on true
order by f.idempotency_key, e.entry_index
"""
# The batch's accounts, locked in account-id order, come back as one text value: "id,balance,
# version,t|f" per account, separated by spaces (ids hold neither character). Measured on
# batches of 1,000 transactions (~1,800 accounts): as rows they were ~110 kB that reached
# the writer in pieces, and each piece was a wait in the event loop's queue (7 waits for
# the reads, 1 now), and psycopg built a row tuple per account. The kind is not sent: the
# accounts_kind_is_id_prefix constraint makes it the id's first part.
_LOCK_ACCOUNTS_SQL = f"""
select string_agg(concat_ws(',', account_id, balance_gold, version, case when may_go_negative then 't' else 'f' end), ' ')
from (
    select account_id, balance_gold, version, may_go_negative
    from {SCHEMA}.accounts where account_id = any(string_to_array(%s, ',')) order by account_id for update
) locked
"""
_UPDATE_BALANCES_SQL = f"""
update {SCHEMA}.accounts a set balance_gold = u.balance_gold, version = u.version
from unnest(string_to_array(%s, ','), string_to_array(%s, ',')::int8[], string_to_array(%s, ',')::int8[])
     as u(account_id, balance_gold, version)
where a.account_id = u.account_id
"""
_INSERT_ACCOUNTS_SQL = f"""
insert into {SCHEMA}.accounts (account_id, kind, balance_gold, version, may_go_negative, created_at)
select r.*, %s::timestamptz from unnest(%s::text[], %s::text[], %s::int8[], %s::int8[], %s::bool[]) as r
"""
_ACCOUNT_COLUMNS = "account_id, kind, balance_gold, version, may_go_negative, created_at"
_JOURNAL_TRANSACTIONS_SQL = f"""
select journal_seq, transaction_id, idempotency_key, kind, reference, metadata, created_at
from {SCHEMA}.transactions where journal_seq between %s and %s order by journal_seq
"""
_JOURNAL_ENTRIES_SQL = f"""
select journal_seq, account_id, amount_gold, balance_after_gold, account_version
from {SCHEMA}.entries where journal_seq between %s and %s order by journal_seq, entry_index
"""


# The write path's statements are prepared once per writer connection and run as EXECUTE
# inside the two simple-query scripts (still one round trip each): as plain SQL text
# PostgreSQL parsed, analysed and planned every statement of every batch again. Measured on
# a batch of 10 transactions: the read script went from ~425 to ~150 µs of server CPU (and
# from ~0.9 to ~0.25 ms of wall time). Parameters keep their explicit types, so the arrays
# still travel as literals (cheaper to make in Python than psycopg's list dumping).
_WRITER_STATEMENTS: Final = (
    ("socai_ledger_head", (), _HEAD_SQL),
    ("socai_ledger_known", ("text",), _KNOWN_SQL),
    ("socai_ledger_lock", ("text",), _LOCK_ACCOUNTS_SQL),
    (
        "socai_ledger_insert_transactions",
        (
            "timestamptz",
            "uuid[]",
            "text[]",
            "text[]",
            "text[]",
            "int8[]",
            "text[]",
            "text[]",
            "text[]",
            "text[]",
            "text[]",
        ),
        _INSERT_TRANSACTIONS_SQL,
    ),
    (
        "socai_ledger_insert_entries",
        ("timestamptz", "text[]", "int8[]", "int8[]", "int2[]", "uuid[]", "int8[]", "int8[]"),
        _INSERT_ENTRIES_SQL,
    ),
    ("socai_ledger_update_balances", ("text", "text", "text"), _UPDATE_BALANCES_SQL),
    (
        "socai_ledger_insert_accounts",
        ("timestamptz", "text[]", "text[]", "int8[]", "int8[]", "bool[]"),
        _INSERT_ACCOUNTS_SQL,
    ),
    ("socai_ledger_outbox", ("int8", "int8"), _OUTBOX_SQL),
)


def _numbered(sql: str) -> str:
    """``%s`` placeholders as ``$1 … $n`` (the statements hold no other ``%``)."""
    pieces = sql.split("%s")
    return pieces[0] + "".join(f"${n}{piece}" for n, piece in enumerate(pieces[1:], 1))


def _execute(name: str, count: int) -> str:
    return f"execute {name}({', '.join(['%s'] * count)})" if count else f"execute {name}"


_PREPARE_SQL: Final = "; ".join(
    f"prepare {name}{'(' + ', '.join(types) + ')' if types else ''} as {_numbered(sql)}"
    for name, types, sql in _WRITER_STATEMENTS
)
_EXECUTE: Final = {name: _execute(name, len(types)) for name, types, _ in _WRITER_STATEMENTS}
_READS_SQL: Final = (
    "begin; select pg_advisory_xact_lock(%s); "
    f"{_EXECUTE['socai_ledger_head']}; {_EXECUTE['socai_ledger_known']}; {_EXECUTE['socai_ledger_lock']}"
)
_prepared_connections: weakref.WeakSet[AConn] = weakref.WeakSet()


async def prepare_writer(conn: AConn) -> None:
    """Prepare the write path's statements on ``conn`` (once per connection; ``write_batch``
    does it on first use)."""
    if conn not in _prepared_connections:
        async with psycopg.AsyncClientCursor(conn) as cur:  # simple protocol: several statements
            await cur.execute(_PREPARE_SQL)
        _prepared_connections.add(conn)


async def connect(url: str, *, autocommit: bool = True) -> AConn:
    """One connection (the batch writer and the relay each own one)."""
    try:
        return await psycopg.AsyncConnection.connect(
            libpq_url(url), autocommit=autocommit, application_name=APPLICATION_NAME, connect_timeout=5
        )
    except psycopg.OperationalError as exc:
        raise errors.Unavailable("DATABASE_UNAVAILABLE", f"cannot connect to PostgreSQL: {exc}") from exc


def create_pool(url: str, *, min_size: int = 1, max_size: int = 8) -> db_pool.Pool:
    """The read pool (autocommit: each read is one statement or an explicit transaction).

    Its connections are checked when taken out and its failures are
    Unavailable("DATABASE_UNAVAILABLE") (``socai.infra.db_pool``); the reads below run once
    more when their connection dies under them (``retried_read``).
    """
    return db_pool.Pool(
        libpq_url(url),
        name="socai-ledger-reads",
        min_size=min_size,
        max_size=max_size,
        wait_s=10,
        kwargs={"autocommit": True, "application_name": APPLICATION_NAME},
    )


# --- the write path ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchResult:
    outcomes: list[domain.PostOutcome]
    applied: int
    rejected: int
    last_seq: int  # 0 when nothing was appended


async def write_batch(conn: AConn, items: Sequence[PreparedTransaction], new_id: Callable[[], UUID]) -> BatchResult:
    """Apply ``items`` in one database transaction (see the module docstring).

    ``conn`` is in autocommit mode: BEGIN and COMMIT travel inside the scripts of the first
    and the last round trip. Each item is atomic on its own: a refused item leaves no trace
    except, for refusals decided against the journal (insufficient funds, unknown account,
    overflow), a remembered refusal under its key. Raises psycopg errors as they come, after
    rolling back; the batcher retries serialization failures and deadlocks.
    """
    # Lists travel as one delimited string (string_to_array on the server): dumping a
    # Python list of thousands of strings is slow in psycopg. Keys are printable and ids are
    # ASCII without ',', so neither separator can occur inside a value.
    keys = _SEPARATOR.join(dict.fromkeys(item.idempotency_key for item in items))
    ids = ",".join({account_id for item in items for account_id, _ in item.entries})  # the SQL orders them
    reads: asyncio.Future[list[list[tuple[Any, ...]]]] | None = None
    if conn not in _prepared_connections:
        await prepare_writer(conn)
    try:
        # One round trip: the lock is its own statement, so the reads after it (each with a
        # fresh READ COMMITTED snapshot) see every batch committed before the lock was ours.
        reads = asyncio.ensure_future(_script(conn, _READS_SQL, (WRITE_LOCK, keys, ids), skip=2))
        await asyncio.sleep(0)  # let the reads go out, then make the ids while the server works
        tx_ids = [new_id() for _ in items]
        _, _, head_rows, known_rows, locked_rows = await reads
        errors.check(len(head_rows) == 1 and len(locked_rows) == 1, "the head and lock queries return a row")
        now: datetime = head_rows[0][0]
        head_seq: int = head_rows[0][1]
        locked = LockedAccounts(_locked_accounts(locked_rows[0][0]))
        plan = domain.plan_batch(items, _known_keys(known_rows), locked, head_seq, now, iter(tx_ids))

        small = len(plan.entry_rows) <= ROWS_BY_ARRAY_MAX
        statements: list[str] = []
        params: list[object] = []
        copies: list[Callable[[], bytes]] = []  # the streams are made while the server works
        if not small and plan.transaction_rows:
            statements.append(_COPY_TRANSACTIONS_SQL)
            copies.append(functools.partial(_transactions_copy, plan.transaction_rows, now))
        if not small and plan.entry_rows:
            statements.append(_COPY_ENTRIES_SQL)
            copies.append(functools.partial(_entries_copy, plan.entry_rows, now))
        if small and plan.transaction_rows:
            statements.append(_EXECUTE["socai_ledger_insert_transactions"])
            params += _transaction_arrays(plan, now)
        if small and plan.entry_rows:
            statements.append(_EXECUTE["socai_ledger_insert_entries"])
            params += _entry_arrays(plan, now)
        if plan.applied:
            updated = [k for k in locked.touched if k not in locked.opened]
            opened = sorted(locked.opened)  # only accounts of applied items stay opened
            if updated:
                statements.append(_EXECUTE["socai_ledger_update_balances"])
                params += [
                    ",".join(updated),
                    ",".join([str(locked.balance_gold[k]) for k in updated]),
                    ",".join([str(locked.version[k]) for k in updated]),
                ]
            if opened:
                statements.append(_EXECUTE["socai_ledger_insert_accounts"])
                params += [
                    now,
                    _array(opened),
                    _array(locked.kind[k] for k in opened),
                    _array(locked.balance_gold[k] for k in opened),
                    _array(locked.version[k] for k in opened),
                    _array("t" if k in locked.may_go_negative else "f" for k in opened),
                ]
            statements.append(_EXECUTE["socai_ledger_outbox"])
            params += [plan.first_seq, plan.last_seq]
        statements.append("commit")
        await _write_script(conn, "; ".join(statements), params, copies)
    except BaseException:
        if reads is not None and not reads.done():
            reads.cancel()
            with contextlib.suppress(BaseException):
                await reads
        await _rollback(conn)
        raise
    return BatchResult(
        outcomes=plan.outcomes,
        applied=plan.applied,
        rejected=sum(1 for o in plan.outcomes if o.status is domain.PostStatus.REJECTED),
        last_seq=plan.last_seq,
    )


async def _script(conn: AConn, sql: str, params: Sequence[object], *, skip: int = 0) -> list[list[tuple[Any, ...]]]:
    """Several statements in one round trip: the rows of each, in order (the first ``skip``
    results are not read: ``[]``).

    Client-side binding (the simple query protocol takes many statements at once). Not a
    pipeline: psycopg's async pipeline polls for "readable or writable" while it waits for
    results, and a socket is always writable, so it spun the CPU for every round trip.

    The parameters are rendered here (``_literal``) and the script goes out as plain text:
    psycopg's client-side binding parses the query and adapts each value through its dumper
    machinery, and reading ``cursor.description`` builds a Column object per column of each
    result; both were a visible share of the writer's CPU for small batches.
    """
    text = sql % tuple([_literal(value) for value in params]) if params else sql
    async with psycopg.AsyncClientCursor(conn) as cur:
        await cur.execute(text)
        results: list[list[tuple[Any, ...]]] = []
        position = 0
        while True:
            result = cur.pgresult
            if position >= skip and result is not None and result.status == _TUPLES_OK:
                results.append(await cur.fetchall())
            else:
                results.append([])
            position += 1
            if not cur.nextset():
                return results


_TUPLES_OK: Final = psycopg.pq.ExecStatus.TUPLES_OK


def _literal(value: object) -> str:
    """``value`` as an SQL literal, for the writer's scripts: the types they use only.

    Strings are escape-string literals (``E'…'``, backslash and quote doubled), which read
    the same whatever ``standard_conforming_strings`` says. A NUL cannot be sent in a query
    at all (validated text holds none), so it is refused here as psycopg would.
    """
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'::timestamptz"
    raise TypeError(f"no SQL literal for {type(value).__name__}")


async def _rollback(conn: AConn) -> None:
    """End a failed batch's transaction (autocommit connection: nobody else will)."""
    if conn.closed or conn.broken:
        return
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        try:
            await conn.execute("rollback")
        except psycopg.Error:
            await conn.close()  # the batcher reconnects


async def _write_script(conn: AConn, sql: str, params: Sequence[object], copies: Sequence[Callable[[], bytes]]) -> None:
    """The batch's last round trips: one simple query holding the COPY statements (a large
    batch's journal rows), the balance and outbox statements and COMMIT. ``copies`` make
    the COPY streams, in the order of the COPY statements in ``sql``.

    One query for everything: the server runs the statements back to back, stopping only to
    ask for each COPY's data, which goes out as soon as it is asked for. psycopg's
    ``cursor.copy()`` took two round trips per COPY and a third query for the rest: with the
    reads, 12 socket waits per batch of 1,000 transactions, 4 now. Under load each wait is a
    trip through the event loop's queue, behind the handlers parsing requests and building
    answers (measured under the post_batch_100 load, with the lock change of
    ``_LOCK_ACCOUNTS_SQL``: ~57 -> ~45 ms for a batch of ~900). Each stream is also made
    while the server works on what went out before it (the query, the previous stream):
    the writer alone went from ~41 to ~35 ms for a batch of 1,000.
    """
    text = (sql % tuple([_literal(value) for value in params]) if params else sql).encode()
    async with conn.lock:
        results = await conn.wait(_write_gen(conn.pgconn, text, copies))
    for result in results:
        if result.status == _FATAL_ERROR:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


_FATAL_ERROR: Final = psycopg.pq.ExecStatus.FATAL_ERROR
_COPY_IN: Final = psycopg.pq.ExecStatus.COPY_IN
# A COPY stream goes to libpq in pieces of at most this size (as psycopg's own copy does).
_COPY_CHUNK_BYTES: Final = 128 * 1024


def _write_gen(
    pgconn: Any, query: bytes, copies: Sequence[Callable[[], bytes]]
) -> Generator[Wait, Ready | int, list[Any]]:
    """Send ``query`` and answer each of its COPY FROM STDIN with the stream the next of
    ``copies`` makes (as soon as what went before is sent); the results of the other
    statements. A psycopg wait generator (``AsyncConnection.wait`` drives it): it yields
    what the socket must become (readable, writable) and gets back what it became.

    A statement that fails ends the query there (the server skips the rest of it, a
    failed COPY included): its error is among the results, and the transaction is left
    failed for the caller to roll back.
    """
    makers = list(reversed(copies))
    upcoming: bytes | None = None  # the next COPY stream, made before the server asks for it
    results: list[Any] = []
    pgconn.send_query(query)
    while True:
        while pgconn.flush():  # 1: more to send; the server may be answering meanwhile
            if (yield Wait.RW) & Ready.R:
                pgconn.consume_input()
        if upcoming is None and makers:
            upcoming = makers.pop()()
        pgconn.consume_input()
        while pgconn.is_busy():
            yield Wait.R
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            return results
        if result.status != _COPY_IN:
            results.append(result)
            continue
        errors.check(upcoming is not None, "a COPY stream for every COPY statement")
        assert upcoming is not None
        data, upcoming = memoryview(upcoming), None
        for start in range(0, len(data), _COPY_CHUNK_BYTES):
            while not _queued(pgconn, pgconn.put_copy_data(data[start : start + _COPY_CHUNK_BYTES])):
                yield Wait.W
        while not _queued(pgconn, pgconn.put_copy_end()):
            yield Wait.W


def _queued(pgconn: Any, status: int) -> bool:
    """libpq's answer to a COPY write: queued (1), not now (0: nonblocking, wait until the
    socket is writable), or failed (-1: the connection is broken)."""
    if status < 0:
        raise psycopg.OperationalError(f"COPY failed: {pgconn.error_message.decode(errors='replace')}")
    return status == 1


# PostgreSQL's binary COPY format: a signature, flags and header extension, then per row a
# field count and each field as a length (-1 for NULL) and its binary value, then -1. A
# batch's streams are encoded whole, with ``struct`` (``_transactions_copy``,
# ``_entries_copy``): psycopg's ``write_row`` costs an await and a dumper call per value, a
# visible share of the ledger's CPU at four rows per transaction.
_COPY_SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_COPY_TRAILER: Final = struct.pack(">h", -1)
_PG_EPOCH: Final = datetime(2000, 1, 1, tzinfo=UTC)
_NULL: Final = struct.pack(">i", -1)
_TEXT_HEAD = struct.Struct(">i")
_INT8 = struct.Struct(">iq")
# entries: (8 fields) account_id | account_version, journal_seq, entry_index, transaction_id,
# amount_gold, balance_after_gold, created_at
_ENTRY_HEAD = struct.Struct(">hi")
_ENTRY_TAIL = struct.Struct(">iqiqihi16siqiqiq")
# transactions: (11 fields) transaction_id, then the texts and the rest one by one
_TX_HEAD = struct.Struct(">hi16s")
_HASH_HEAD = struct.pack(">i", 32)


def _pg_time(value: datetime) -> int:
    """A timestamptz as PostgreSQL's binary value: microseconds since 2000-01-01 UTC."""
    delta = value - _PG_EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _text(value: str | None) -> bytes:
    if value is None:
        return _NULL
    data = value.encode()
    return _TEXT_HEAD.pack(len(data)) + data


def _entries_copy(rows: Sequence[domain.EntryRow], now: datetime) -> bytes:
    head = _ENTRY_HEAD.pack
    tail = _ENTRY_TAIL.pack
    at = _pg_time(now)
    ids: dict[str, bytes] = {}  # an account appears in many rows of a batch (house:fees in all)
    out = [_COPY_SIGNATURE]
    for account_id, version, seq, index, tx_id, amount, balance in rows:
        encoded = ids.get(account_id)
        if encoded is None:
            encoded = ids[account_id] = account_id.encode()
        out.append(head(8, len(encoded)))
        out.append(encoded)
        out.append(tail(8, version, 8, seq, 2, index, 16, tx_id.bytes, 8, amount, 8, balance, 8, at))
    out.append(_COPY_TRAILER)
    return b"".join(out)


def _transactions_copy(rows: Sequence[domain.TransactionRow], now: datetime) -> bytes:
    created_at = _INT8.pack(8, _pg_time(now))
    statuses = {"applied": _text("applied"), "rejected": _text("rejected")}
    out = [_COPY_SIGNATURE]
    for tx_id, key, request_hash, status, seq, kind, reference, metadata, reason, message in rows:
        out.append(_TX_HEAD.pack(11, 16, tx_id.bytes))
        out.append(_text(key))
        out.append(_HASH_HEAD + request_hash if len(request_hash) == 32 else _bytea(request_hash))
        out.append(statuses.get(status) or _text(status))
        out.append(_NULL if seq is None else _INT8.pack(8, seq))
        out.append(_text(kind))
        out.append(_text(reference))
        out.append(_text("\x01" + json.dumps(metadata)) if metadata else _NULL)  # jsonb: version 1, then the text
        out.append(_text(reason))
        out.append(_text(message))
        out.append(created_at)
    out.append(_COPY_TRAILER)
    return b"".join(out)


def _bytea(value: bytes) -> bytes:
    return _TEXT_HEAD.pack(len(value)) + value


def _quoted(value: str | None) -> str:
    """One element of a PostgreSQL array literal (any text; None is NULL)."""
    if value is None:
        return "NULL"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _array(values: Iterable[object]) -> str:
    """An array literal of values that need no quoting (ints, UUIDs, account ids; None is NULL)."""
    return "{" + ",".join("NULL" if v is None else str(v) for v in values) + "}"


def _text_array(values: Iterable[str | None]) -> str:
    return "{" + ",".join(map(_quoted, values)) + "}"


def _transaction_arrays(plan: domain.BatchPlan, now: datetime) -> tuple[object, ...]:
    ids, keys, hashes, statuses, seqs, kinds, references, metadata, reasons, messages = zip(
        *plan.transaction_rows, strict=True
    )
    return (
        now,
        _plain_array(ids),
        _text_array(keys),
        _plain_array([h.hex() for h in hashes]),
        _plain_array(statuses),
        _array(seqs),
        _text_array(kinds),
        _text_array(references),
        _text_array([json.dumps(m) if m else None for m in metadata]),
        _text_array(reasons),
        _text_array(messages),
    )


def _entry_arrays(plan: domain.BatchPlan, now: datetime) -> tuple[object, ...]:
    rows = plan.entry_rows
    # Seven columns, none NULL.
    return (now, *["{" + ",".join([str(row[i]) for row in rows]) + "}" for i in range(7)])


def _plain_array(values: Iterable[object]) -> str:
    """``_array`` of values none of which is None."""
    return "{" + ",".join(map(str, values)) + "}"


def _locked_accounts(text: str | None) -> Iterator[tuple[str, int, int, bool, str]]:
    """The text of ``_LOCK_ACCOUNTS_SQL`` (None: no account exists) as LockedAccounts rows."""
    for account in text.split(" ") if text else ():
        account_id, balance, version, may_go_negative = account.split(",")
        yield account_id, int(balance), int(version), may_go_negative == "t", account_id.partition(":")[0]


def _known_keys(rows: Sequence[tuple[Any, ...]]) -> dict[str, KnownKey]:
    """Rows of ``_KNOWN_SQL`` (one per entry, or one per rejected key) → KnownKey by key."""
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    known = {}
    for key, group in grouped.items():
        first = group[0]
        if first[2] == "applied":
            known[key] = KnownKey(bytes(first[1]), _transaction_from_rows(group))
        else:
            known[key] = KnownKey(bytes(first[1]), None, first[9], first[10])
    return known


def _transaction_from_rows(group: Sequence[tuple[Any, ...]]) -> Transaction:
    first = group[0]
    tx_id = str(first[3])
    created_at: datetime = first[8]
    seq: int = first[4]
    entries = tuple(Entry(tx_id, r[11], r[12], r[13], r[14], created_at, seq) for r in group if r[11] is not None)
    return Transaction(tx_id, first[0], first[5], first[6], entries, first[7] or {}, created_at, seq)


# --- accounts -----------------------------------------------------------------------------------


def _account(row: tuple[Any, ...]) -> Account:
    return Account(row[0], row[1], row[2], row[3], row[4], row[5])


async def open_account(pool: db_pool.Pool, account_id: str) -> tuple[Account, bool]:
    """Open ``account_id`` (idempotent): (the account, whether this call created it).

    Takes the journal's write lock, so an account never appears under a running batch
    (the batch inserts the accounts it opens itself and counts on nobody else doing so).
    """
    kind = account_ids.kind_of(account_id)
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("select pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        cur = await conn.execute(
            f"insert into {SCHEMA}.accounts (account_id, kind, may_go_negative) values (%s, %s, %s) "
            f"on conflict (account_id) do nothing returning {_ACCOUNT_COLUMNS}",
            (account_id, kind, account_ids.may_go_negative(account_id)),
        )
        row = await cur.fetchone()
        if row is not None:
            return _account(row), True
        cur = await conn.execute(
            f"select {_ACCOUNT_COLUMNS} from {SCHEMA}.accounts where account_id = %s", (account_id,)
        )
        row = await cur.fetchone()
    errors.check(row is not None, f"account {account_id} exists after insert-or-nothing")
    assert row is not None
    return _account(row), False


@db_pool.retried_read
async def get_account(pool: db_pool.Pool, account_id: str) -> Account:
    """Raises NotFound("ACCOUNT_NOT_FOUND")."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"select {_ACCOUNT_COLUMNS} from {SCHEMA}.accounts where account_id = %s", (account_id,)
        )
        row = await cur.fetchone()
    if row is None:
        raise errors.NotFound("ACCOUNT_NOT_FOUND", f"account {account_id} does not exist", account_id=account_id)
    return _account(row)


@db_pool.retried_read
async def list_accounts(
    pool: db_pool.Pool, *, kind: str, id_prefix: str, after: str, limit: int
) -> tuple[list[Account], bool]:
    """Accounts ordered by id after ``after``: (up to ``limit`` accounts, whether more follow)."""
    where = ["account_id > %s"]
    params: list[Any] = [after]
    if kind:
        where.append("kind = %s")
        params.append(kind)
    if id_prefix:
        # account_id is collated "C": the btree range [prefix, prefix + U+FFFF) is the prefix.
        where.append("account_id >= %s and account_id < %s")
        params += [id_prefix, id_prefix + "\uffff"]
    params.append(limit + 1)
    sql = f"select {_ACCOUNT_COLUMNS} from {SCHEMA}.accounts where {' and '.join(where)} order by account_id limit %s"
    async with pool.connection() as conn:
        rows = await (await conn.execute(sql, params)).fetchall()
    return [_account(r) for r in rows[:limit]], len(rows) > limit


# --- journal reads ------------------------------------------------------------------------------

_TX_READ_SQL = f"""
select t.idempotency_key, t.request_hash, t.status, t.transaction_id, t.journal_seq, t.kind, t.reference,
       t.metadata, t.created_at, t.error_reason, t.error_message,
       e.account_id, e.amount_gold, e.balance_after_gold, e.account_version
from {SCHEMA}.transactions t
left join {SCHEMA}.entries e on e.journal_seq = t.journal_seq
where {{where}}
order by e.entry_index
"""


@db_pool.retried_read
async def get_transaction(pool: db_pool.Pool, *, transaction_id: UUID | None, idempotency_key: str) -> Transaction:
    """Raises NotFound("TRANSACTION_NOT_FOUND"), also for a key whose request was refused
    (the refusal's reason is in the message and in the ErrorInfo metadata)."""
    param: UUID | str
    if transaction_id is not None:
        sql, param, what = _TX_READ_SQL.format(where="t.transaction_id = %s"), transaction_id, str(transaction_id)
    else:
        sql, param, what = _TX_READ_SQL.format(where="t.idempotency_key = %s"), idempotency_key, idempotency_key
    async with pool.connection() as conn:
        rows = await (await conn.execute(sql, (param,))).fetchall()
    if not rows:
        raise errors.NotFound("TRANSACTION_NOT_FOUND", f"no transaction {what}")
    if rows[0][2] != "applied":
        raise errors.NotFound(
            "TRANSACTION_NOT_FOUND",
            f"the request under {what} was refused ({rows[0][9]}): it is not in the journal",
            refused_reason=rows[0][9],
        )
    return _transaction_from_rows(rows)


async def _require_account(conn: AConn, account_id: str) -> None:
    """Raises NotFound("ACCOUNT_NOT_FOUND") unless the account exists."""
    exists = await (
        await conn.execute(f"select 1 from {SCHEMA}.accounts where account_id = %s", (account_id,))
    ).fetchone()
    if exists is None:
        raise errors.NotFound("ACCOUNT_NOT_FOUND", f"account {account_id} does not exist", account_id=account_id)


@db_pool.retried_read
async def list_entries(
    pool: db_pool.Pool, account_id: str, *, before_version: int, limit: int
) -> tuple[list[Entry], bool]:
    """An account's entries, newest first, with versions below ``before_version``.

    Raises NotFound("ACCOUNT_NOT_FOUND").
    """
    async with pool.connection() as conn:
        await _require_account(conn, account_id)
        rows = await (
            await conn.execute(
                f"select transaction_id, account_id, amount_gold, balance_after_gold, account_version, created_at, "
                f"journal_seq from {SCHEMA}.entries where account_id = %s and account_version < %s "
                f"order by account_version desc limit %s",
                (account_id, before_version, limit + 1),
            )
        ).fetchall()
    entries = [Entry(str(r[0]), r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows[:limit]]
    return entries, len(rows) > limit


@db_pool.retried_read
async def balance_at(
    pool: db_pool.Pool, account_id: str, *, transaction_id: UUID | None, at: datetime | None
) -> tuple[int, int]:
    """(balance, version) of an account right after a transaction, or at a time.

    Raises NotFound("ACCOUNT_NOT_FOUND" / "TRANSACTION_NOT_FOUND").
    """
    async with pool.connection() as conn:
        await _require_account(conn, account_id)
        if transaction_id is not None:
            seq_row = await (
                await conn.execute(
                    f"select journal_seq from {SCHEMA}.transactions where transaction_id = %s and status = 'applied'",
                    (transaction_id,),
                )
            ).fetchone()
            if seq_row is None:
                raise errors.NotFound("TRANSACTION_NOT_FOUND", f"no transaction {transaction_id} in the journal")
            condition, param = "journal_seq <= %s", seq_row[0]
        else:
            condition, param = "created_at <= %s", at
        # Versions, journal sequence numbers and batch times all grow together per account,
        # so the newest entry satisfying the condition is found scanning the primary key back.
        row = await (
            await conn.execute(
                f"select balance_after_gold, account_version from {SCHEMA}.entries "
                f"where account_id = %s and {condition} order by account_version desc limit 1",
                (account_id, param),
            )
        ).fetchone()
    return (row[0], row[1]) if row else (0, 0)


# --- audit --------------------------------------------------------------------------------------

_VERIFY_BALANCES_SQL = f"""
with computed as (
    select account_id, sum(amount_gold)::numeric as total, count(*) as n, max(account_version) as max_version
    from {SCHEMA}.entries group by account_id
), last_entry as (
    select distinct on (account_id) account_id, balance_after_gold
    from {SCHEMA}.entries order by account_id, account_version desc
)
select a.account_id, a.balance_gold, coalesce(c.total, 0), a.version, coalesce(c.n, 0), coalesce(c.max_version, 0),
       l.balance_after_gold, a.may_go_negative
from {SCHEMA}.accounts a
left join computed c on c.account_id = a.account_id
left join last_entry l on l.account_id = a.account_id
where a.balance_gold <> coalesce(c.total, 0)
   or a.version <> coalesce(c.n, 0)
   or a.version <> coalesce(c.max_version, 0)
   or (l.balance_after_gold is not null and l.balance_after_gold <> a.balance_gold)
   or (a.balance_gold < 0 and not a.may_go_negative)
order by a.account_id
limit {VERIFY_MISMATCHES_MAX}
"""
_VERIFY_CHAIN_SQL = f"""
select account_id, account_version, amount_gold, balance_after_gold, previous_after, position
from (
    select account_id, account_version, amount_gold, balance_after_gold,
           lag(balance_after_gold, 1, 0::bigint) over w as previous_after,
           row_number() over w as position
    from {SCHEMA}.entries
    window w as (partition by account_id order by account_version)
) chain
where balance_after_gold::numeric <> previous_after::numeric + amount_gold or account_version <> position
order by account_id, account_version
limit {VERIFY_MISMATCHES_MAX}
"""
_VERIFY_TRANSACTIONS_SQL = f"""
select t.journal_seq, t.transaction_id, coalesce(s.total, 0), coalesce(s.n, 0)
from {SCHEMA}.transactions t
left join (
    select journal_seq, sum(amount_gold)::numeric as total, count(*) as n from {SCHEMA}.entries group by journal_seq
) s on s.journal_seq = t.journal_seq
where t.status = 'applied' and (coalesce(s.total, 0) <> 0 or coalesce(s.n, 0) < {domain.ENTRIES_MIN})
order by t.journal_seq
limit {VERIFY_MISMATCHES_MAX}
"""
_VERIFY_ORPHANS_SQL = f"""
select e.account_id, sum(e.amount_gold)::numeric from {SCHEMA}.entries e
where not exists (select 1 from {SCHEMA}.accounts a where a.account_id = e.account_id)
group by e.account_id order by e.account_id limit {VERIFY_MISMATCHES_MAX}
"""


def _gold(value: Any) -> int:
    """A numeric sum as int64 gold, clamped (a sum outside int64 is itself a mismatch)."""
    number = int(value)
    return max(-INT64_MAX - 1, min(INT64_MAX, number))


@db_pool.retried_read
async def verify_journal(pool: db_pool.Pool) -> VerifyReport:
    """Recompute every balance from the entries, in one consistent snapshot.

    Checks: each account's balance and version against the sum and count of its entries and
    its last ``balance_after``; each entry's ``balance_after`` against the previous one plus
    its amount, versions gapless from 1; each applied transaction balanced with at least two
    entries; no entry on a missing account; no forbidden negative balance.
    """
    mismatches: list[Mismatch] = []
    async with pool.connection() as conn:
        await conn.set_autocommit(False)
        try:
            await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
            await conn.set_read_only(True)
            async with conn.transaction():
                counts = await (
                    await conn.execute(
                        f"select (select count(*) from {SCHEMA}.accounts), (select count(*) from {SCHEMA}.entries)"
                    )
                ).fetchone()
                assert counts is not None
                for row in await (await conn.execute(_VERIFY_BALANCES_SQL)).fetchall():
                    account_id, stored, computed, version, n, max_version, last_after, may_go_negative = row
                    problems = []
                    if stored != computed:
                        problems.append(f"balance {stored} but entries sum to {computed}")
                    if version != n or version != max_version:
                        problems.append(f"version {version} but {n} entries (last version {max_version})")
                    if last_after is not None and last_after != stored:
                        problems.append(f"last balance_after is {last_after}")
                    if stored < 0 and not may_go_negative:
                        problems.append("negative balance on an account that may not go negative")
                    mismatches.append(Mismatch(account_id, stored, _gold(computed), "; ".join(problems)))
                for row in await (await conn.execute(_VERIFY_CHAIN_SQL)).fetchall():
                    account_id, version, amount, after, previous, position = row
                    mismatches.append(
                        Mismatch(
                            account_id,
                            after,
                            _gold(previous + amount),
                            f"entry version {version} (position {position}): balance_after {after} "
                            f"but previous {previous} + amount {amount}",
                        )
                    )
                for seq, tx_id, total, n in await (await conn.execute(_VERIFY_TRANSACTIONS_SQL)).fetchall():
                    mismatches.append(
                        Mismatch(
                            "", 0, _gold(total), f"transaction {tx_id} (journal {seq}): {n} entries sum to {total}"
                        )
                    )
                for account_id, total in await (await conn.execute(_VERIFY_ORPHANS_SQL)).fetchall():
                    mismatches.append(
                        Mismatch(account_id, 0, _gold(total), "entries on an account that does not exist")
                    )
        finally:
            await conn.set_read_only(False)
            await conn.set_isolation_level(None)
            await conn.set_autocommit(True)
    return VerifyReport(int(counts[0]), int(counts[1]), tuple(mismatches[:VERIFY_MISMATCHES_MAX]))


@db_pool.retried_read
async def trial_balance(pool: db_pool.Pool) -> TrialBalance:
    """The sum of all balances, and per account kind (one statement: one snapshot)."""
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                f"select kind, sum(balance_gold)::numeric, count(*) from {SCHEMA}.accounts group by kind order by kind"
            )
        ).fetchall()
    total = sum(int(r[1]) for r in rows)
    return TrialBalance(_gold(total), tuple(KindTotal(r[0], _gold(r[1]), int(r[2])) for r in rows))


# --- the outbox ---------------------------------------------------------------------------------


async def journal_head(conn: AConn) -> int:
    row = await (await conn.execute(f"select coalesce(max(journal_seq), 0) from {SCHEMA}.transactions")).fetchone()
    return int(row[0]) if row else 0


async def outbox_pending(conn: AConn, limit: int) -> tuple[int, int, list[tuple[int, int]]]:
    """(the journal head, the published cursor, up to ``limit`` pending journal ranges in
    journal order), in one round trip. The head is read first: a batch committing meanwhile
    only adds ranges."""
    (head,), (progress,), ranges = await _script(
        conn,
        f"select coalesce(max(journal_seq), 0) from {SCHEMA}.transactions; "
        f"select published_seq from {SCHEMA}.outbox_progress; "
        f"select first_seq, last_seq from {SCHEMA}.outbox order by first_seq limit %s",
        (limit,),
    )
    return int(head[0]), int(progress[0]), [(int(a), int(b)) for a, b in ranges]


async def load_journal(conn: AConn, first_seq: int, last_seq: int) -> list[Transaction]:
    """Applied transactions with journal_seq in [first_seq, last_seq], in journal order."""
    txs, entries = await _script(
        conn, f"{_JOURNAL_TRANSACTIONS_SQL}; {_JOURNAL_ENTRIES_SQL}", (first_seq, last_seq, first_seq, last_seq)
    )
    ids = {row[0]: (str(row[1]), row[6]) for row in txs}
    by_seq: dict[int, list[Entry]] = {}
    for seq, account_id, amount, after, version in entries:
        tx_id, created_at = ids[seq]
        by_seq.setdefault(seq, []).append(Entry(tx_id, account_id, amount, after, version, created_at, seq))
    return [
        Transaction(ids[seq][0], key, kind, reference, tuple(by_seq.get(seq, ())), metadata or {}, created_at, seq)
        for seq, _, key, kind, reference, metadata, created_at in txs
    ]


async def mark_published(conn: AConn, published_seq: int) -> None:
    """Advance the cursor and drop the outbox ranges it covers: one statement, so one
    atomic step on an autocommit connection."""
    await conn.execute(
        f"with dropped as (delete from {SCHEMA}.outbox where last_seq <= %(seq)s) "
        f"update {SCHEMA}.outbox_progress set published_seq = %(seq)s, updated_at = now() "
        f"where published_seq < %(seq)s",
        {"seq": published_seq},
    )


# --- page tokens (opaque to callers) ------------------------------------------------------------


def encode_token(*parts: str) -> str:
    return base64.urlsafe_b64encode("\x1f".join(parts).encode()).decode().rstrip("=")


# A token this service issues holds an account id (at most 200 characters) and a number:
# anything much longer was not issued here, and is refused before it is decoded.
PAGE_TOKEN_MAX_CHARS: Final = 1024
_TOKEN_ALPHABET = re.compile(r"[A-Za-z0-9_\-]*")
_INT64_TEXT = re.compile(r"[0-9]{1,19}")


def _bad_token() -> errors.InvalidArgument:
    return errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token is not one this service issued")


def decode_token(token: str, parts: int) -> list[str]:
    """The printable fields of a token from ``encode_token``. Raises InvalidArgument("BAD_PAGE_TOKEN").

    Strict: the urlsafe alphabet only (the decoder would skip other characters), and fields
    of printable characters only (a NUL reaching PostgreSQL is an error there, not a miss).
    """
    if len(token) > PAGE_TOKEN_MAX_CHARS or not _TOKEN_ALPHABET.fullmatch(token):
        raise _bad_token()
    try:
        padded = token + "=" * (-len(token) % 4)
        fields = base64.urlsafe_b64decode(padded.encode()).decode().split("\x1f")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise _bad_token() from exc
    if len(fields) != parts or not all(field.isprintable() for field in fields):
        raise _bad_token()
    return fields


def parse_int64(text: str) -> int:
    """A non-negative int64 written in ASCII digits. Raises InvalidArgument("BAD_PAGE_TOKEN")."""
    if not _INT64_TEXT.fullmatch(text):
        raise _bad_token()
    value = int(text)
    if value > INT64_MAX:
        raise _bad_token()
    return value
