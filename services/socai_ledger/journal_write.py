"""The write path: one batch of posting requests in one database transaction.

``write_batch`` runs on a connection of the batcher's own (``db.connect``; one per batch in
flight) in two scripts (round trips; a large batch's COPY data is exchanged inside the
second), sent through ``pg_wire``:

1. One script: ``BEGIN``; ``pg_advisory_xact_lock(WRITE_LOCK)`` — one writer at a time
   across every ledger replica, so journal sequence numbers, assigned under it, follow the
   commit order (the outbox relay publishes in that order); then, each statement with its
   own snapshot taken after the lock: the batch's time and the journal head, what the
   journal knows about the batch's idempotency keys, and the batch's accounts locked with
   one ``SELECT … FOR UPDATE`` in account-id order (one fixed order: no deadlocks). A fenced
   request (a batch of its own) first advances its fence (``socai.infra.fence``'s upsert on
   ``lease_fence``), right after the lock; a stale token rolls the whole batch back.
   A batch that locks an account holding gold for hands in play and holds settlements reads
   what those settlements' hands hold of it (ledger_0005): in this script when the account
   held gold at the last batch that locked it (``_held_seen``), else in one more round trip;
   no other batch does.
2. ``domain.plan_batch`` decides every item against running balances in memory.
3. The journal rows: for a large batch, binary ``COPY`` of the transactions and the entries
   at the head of the last script (``journal_copy``; each stream goes out when the server
   asks for it); for a small one they ride in the last script as array literals.
4. The last script: the journal rows, the holds the batch's settlements release (only when
   there are some: ledger_0005), one ``UPDATE … FROM unnest(…)`` of the touched balances,
   one insert of the accounts opened, one outbox row naming the journal range, ``COMMIT``.
   Callers are answered only after the commit.

A hot account (``house:fees`` takes a posting from nearly every hand) therefore costs one
row update per batch, not one per transaction: the batch is the unit of serialisation.
The ``CHECK (may_go_negative OR balance_gold >= 0)`` constraint on ``accounts`` makes the
database itself refuse a negative balance should the planner ever be wrong, and
``CHECK (may_go_negative OR balance_gold >= held_gold)`` a balance below the gold held.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import psycopg

from socai import errors
from socai.infra import fence as fencing
from socai_ledger import domain, pg_wire
from socai_ledger.db import SCHEMA, WRITE_LOCK, AConn, transaction_from_rows
from socai_ledger.domain import Fence, KnownKey, LockedAccounts, PreparedTransaction
from socai_ledger.journal_copy import ENTRY_COLUMNS, TRANSACTION_COLUMNS, entries_copy, transactions_copy

_SEPARATOR: Final = "\x1f"
# The batch's time, the journal head and the outbox relay's cursor: every replica's writer
# learns the outbox's exact lag at each batch from this read, under the journal's lock
# (``outbox_backlog``), without a query of its own.
_HEAD_SQL = (
    f"select clock_timestamp(), coalesce(max(journal_seq), 0), "
    f"(select published_seq from {SCHEMA}.outbox_progress) from {SCHEMA}.transactions"
)
_COPY_TRANSACTIONS_SQL = f"copy {SCHEMA}.transactions ({TRANSACTION_COLUMNS}) from stdin (format binary)"
_COPY_ENTRIES_SQL = f"copy {SCHEMA}.entries ({ENTRY_COLUMNS}) from stdin (format binary)"
_OUTBOX_SQL = f"insert into {SCHEMA}.outbox (first_seq, last_seq) values (%s, %s)"
# socai.infra.fence's upsert on the ledger's fence table: a row back when the token was
# recorded, none when a newer token was (the request is then refused whole).
_FENCE_SQL = fencing.advance_sql(schema=SCHEMA).as_string()
# Up to this many entries a batch's journal rows travel as array literals inside the final
# script (one round trip for every write and the commit); above it, binary COPY costs the
# server less time, enough to pay for the two exchanges it adds to that script (the server
# asks for each COPY's data).
ROWS_BY_ARRAY_MAX: Final = 300
_INSERT_TRANSACTIONS_SQL = f"""
insert into {SCHEMA}.transactions ({TRANSACTION_COLUMNS})
select r.id, r.k, decode(r.h, 'hex'), r.st, r.s, r.kd, r.rf, r.m::jsonb, r.er, r.em, %s
from unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::int8[], %s::text[], %s::text[], %s::text[],
            %s::text[], %s::text[]) as r(id, k, h, st, s, kd, rf, m, er, em)
"""
_INSERT_ENTRIES_SQL = f"""
insert into {SCHEMA}.entries ({ENTRY_COLUMNS})
select r.a, r.v, r.s, r.i, r.t, r.am, r.b, %s
from unnest(%s::text[], %s::int8[], %s::int8[], %s::int2[], %s::uuid[], %s::int8[], %s::int8[]) as r(a, v, s, i, t, am, b)
"""
# What the journal holds under the batch's keys, in ``db.TRANSACTION_WITH_ENTRIES_COLUMNS``
# order. One index probe per key, whatever the statistics say: with a plain "= any(array)"
# the planner preferred a sequential scan of the whole transactions table, whose cost grows
# with the journal. The LIMITs keep the lateral subqueries from being flattened into a hash
# join.
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
# version,t|f" per account, separated by spaces (ids hold neither character). As rows, a
# large batch's accounts reach the writer in many pieces, each a wait in the event loop's
# queue, and psycopg builds a row tuple per account; one value arrives at once. The kind is
# not sent: the accounts_kind_is_id_prefix constraint makes it the id's first part. A second
# value names the accounts holding gold for hands in play (ledger_0005: house:bank while a
# game against the house is in play), "id|held" each, NULL when none does (nearly every
# batch): ``held`` is the locked row's own (a hold committed while the batch waited for the
# lock is in it: FOR UPDATE re-reads the row), and is what the balance must cover.
_LOCK_ACCOUNTS_SQL = f"""
select string_agg(concat_ws(',', account_id, balance_gold, version, case when may_go_negative then 't' else 'f' end), ' '),
       string_agg(case when held_gold > 0 then account_id || '|' || held_gold end, ' ')
from (
    select account_id, balance_gold, version, may_go_negative, held_gold
    from {SCHEMA}.accounts where account_id = any(string_to_array(%s, ',')) order by account_id for update
) locked
"""
# Only when a batch locked a held account and holds settlements: what those settlements'
# hands hold of it, "id|hand=gold" each (what each releases). A statement of its own, after
# the lock: its snapshot sees every hold committed before the lock was taken. PostgreSQL
# joins the batch's hands with the account's holds not released (their partial index), so the
# read grows with the holds open: 0.8 ms for 1,000 hands against 1,000 open holds (EXPLAIN
# ANALYZE on an idle embedded server).
_HELD_FOR_HANDS_SQL = f"""
select string_agg(h.account_id || '|' || h.hand_id || '=' || h.amount_gold, ' ')
from {SCHEMA}.holds h
where (h.account_id, h.hand_id) in (
    select a, b from unnest(string_to_array(%s, ',')) as a cross join unnest(string_to_array(%s, ',')) as b
) and h.status <> 'released'
"""
# The holds the batch's settlements release (``domain.plan_batch``), before the balance
# update: the holds' trigger lowers each account's held_gold in the same statement
# (ledger_0005), the accounts_holds_covered CHECK sees each row as the statement leaves it,
# and a settlement may then spend the gold its hand held.
_RELEASE_HOLDS_SQL = f"""
update {SCHEMA}.holds h
set status = 'released', released_at = %s, updated_at = clock_timestamp(), released_by = 'settlement',
    release_transaction_id = r.transaction_id
from unnest(string_to_array(%s, ','), string_to_array(%s, ','), string_to_array(%s, ',')::uuid[])
     as r(account_id, hand_id, transaction_id)
where h.account_id = r.account_id and h.hand_id = r.hand_id and h.status <> 'released'
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


# The write path's statements are prepared once per writer connection and run as EXECUTE
# inside the two simple-query scripts (still one round trip each): as plain SQL text
# PostgreSQL would parse, analyse and plan every statement of every batch again, most of the
# server's time for a small batch. Parameters keep their explicit types, so the arrays still
# travel as literals (cheaper to make in Python than psycopg's list dumping).
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
    ("socai_ledger_release_holds", ("timestamptz", "text", "text", "text"), _RELEASE_HOLDS_SQL),
    ("socai_ledger_held_for_hands", ("text", "text"), _HELD_FOR_HANDS_SQL),
    (
        "socai_ledger_insert_accounts",
        ("timestamptz", "text[]", "text[]", "int8[]", "int8[]", "bool[]"),
        _INSERT_ACCOUNTS_SQL,
    ),
    ("socai_ledger_outbox", ("int8", "int8"), _OUTBOX_SQL),
    ("socai_ledger_fence", ("text", "int4", "int8"), _FENCE_SQL),
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
# A fenced batch advances its fence first, right after the journal's lock: the row lock the
# upsert takes orders it with a concurrent claim of the same partition (socai.infra.fence).
_FENCED_READS_SQL: Final = (
    f"begin; select pg_advisory_xact_lock(%s); {_EXECUTE['socai_ledger_fence']}; "
    f"{_EXECUTE['socai_ledger_head']}; {_EXECUTE['socai_ledger_known']}; {_EXECUTE['socai_ledger_lock']}"
)
_prepared_connections: weakref.WeakSet[AConn] = weakref.WeakSet()
# Accounts this process last saw holding gold for hands in play (house:bank while a game against
# the house is played): a batch touching one of them reads its settlements' holds in its first
# round trip already, instead of one more after the lock (each round trip under the journal's
# lock waits for the event loop, busy parsing requests). A guess only: the lock tells.
_held_seen: set[str] = set()


async def prepare_writer(conn: AConn) -> None:
    """Prepare the write path's statements on ``conn`` (once per connection; ``write_batch``
    does it on first use)."""
    if conn not in _prepared_connections:
        # The scripts and the COPY streams are encoded as UTF-8 whatever the session says.
        errors.check(conn.info.encoding == "utf-8", f"the writer's connection speaks UTF-8, not {conn.info.encoding}")
        await pg_wire.script(conn, _PREPARE_SQL, ())
        _prepared_connections.add(conn)


@dataclass(frozen=True, slots=True)
class BatchResult:
    outcomes: list[domain.PostOutcome]
    applied: int
    rejected: int
    last_seq: int  # 0 when nothing was appended
    head_seq: int = 0  # the journal head after this batch
    published_seq: int = 0  # the outbox relay's cursor when the batch took the journal's lock


async def write_batch(
    conn: AConn,
    items: Sequence[PreparedTransaction],
    new_id: Callable[[], UUID],
    fence: Fence | None = None,
    last_script: Callable[[], None] | None = None,
) -> BatchResult:
    """Apply ``items`` in one database transaction (see the module docstring).

    ``conn`` is in autocommit mode: BEGIN and COMMIT travel inside the scripts of the first
    and the last round trip. Each item is atomic on its own: a refused item leaves no trace
    except, for refusals decided against the journal (insufficient funds, unknown account,
    overflow), a remembered refusal under its key. Raises psycopg errors as they come, after
    rolling back; the batcher retries serialization failures and deadlocks.

    With a ``fence`` (the batch is then one request: ``batcher``), the fence's token is
    recorded in the same database transaction, before anything is decided; a newer token
    already recorded rolls the whole transaction back and raises PreconditionFailed("FENCED"):
    nothing is written, not even a remembered refusal. ``items`` may then be empty (a claim).

    ``last_script`` is called as the last script (the writes and the commit) goes out: the
    batcher then sends the next batch's first script on another connection, where it waits
    for the journal's lock (``batcher``, "Two batches in flight").
    """
    # Lists travel as one delimited string (string_to_array on the server): dumping a
    # Python list of thousands of strings is slow in psycopg. Keys are printable and ids are
    # ASCII without ',', so neither separator can occur inside a value.
    keys = _SEPARATOR.join(dict.fromkeys(item.idempotency_key for item in items))
    account_ids = {account_id for item in items for account_id, _ in item.entries}
    ids = ",".join(account_ids)  # the SQL orders them
    reads: asyncio.Future[list[list[tuple[Any, ...]]]] | None = None
    if conn not in _prepared_connections:
        await prepare_writer(conn)
    try:
        # One round trip: the lock is its own statement, so the reads after it (each with a
        # fresh READ COMMITTED snapshot) see every batch committed before the lock was ours.
        sql, first_params = (
            (_READS_SQL, (WRITE_LOCK, keys, ids))
            if fence is None
            else (_FENCED_READS_SQL, (WRITE_LOCK, *fence, keys, ids))
        )
        held_guess = sorted(_held_seen & account_ids) if _held_seen else []
        hands = _settled_hands(items) if held_guess else ""
        if hands:
            sql = f"{sql}; {_EXECUTE['socai_ledger_held_for_hands']}"
            first_params = (*first_params, ",".join(held_guess), hands)
        reads = asyncio.ensure_future(pg_wire.script(conn, sql, first_params, skip=2))
        await asyncio.sleep(0)  # let the reads go out, then make the ids while the server works
        tx_ids = [new_id() for _ in items]
        results = await reads
        if fence is not None:
            fence_rows = results.pop(2)
            if not fence_rows:  # a newer holder has written: refuse it all (rolled back below)
                raise fencing.refused(*fence)
        held_rows = results.pop() if hands else None
        _, _, head_rows, known_rows, locked_rows = results
        errors.check(len(head_rows) == 1 and len(locked_rows) == 1, "the head and lock queries return a row")
        now: datetime = head_rows[0][0]
        head_seq: int = head_rows[0][1]
        published_seq = int(head_rows[0][2] or 0)
        locked = _locked_accounts(*locked_rows[0])
        if locked.held_gold or held_guess:
            _held_seen.difference_update(account_ids)
            _held_seen.update(locked.held_gold)
        if locked.held_gold:
            if held_rows is not None and set(locked.held_gold) <= set(held_guess):
                _add_holds(held_rows, locked)
            else:
                await _read_holds(conn, items, locked)
        plan = domain.plan_batch(items, _known_keys(known_rows), locked, head_seq, now, iter(tx_ids))

        small = len(plan.entry_rows) <= ROWS_BY_ARRAY_MAX
        statements: list[str] = []
        params: list[object] = []
        copies: list[Callable[[], bytes]] = []  # the streams are made while the server works
        if not small and plan.transaction_rows:
            statements.append(_COPY_TRANSACTIONS_SQL)
            copies.append(functools.partial(transactions_copy, plan.transaction_rows, now))
        if not small and plan.entry_rows:
            statements.append(_COPY_ENTRIES_SQL)
            copies.append(functools.partial(entries_copy, plan.entry_rows, now))
        if small and plan.transaction_rows:
            statements.append(_EXECUTE["socai_ledger_insert_transactions"])
            params += _transaction_arrays(plan, now)
        if small and plan.entry_rows:
            statements.append(_EXECUTE["socai_ledger_insert_entries"])
            params += _entry_arrays(plan, now)
        if plan.applied:
            updated = [k for k in locked.touched if k not in locked.opened]
            opened = sorted(locked.opened)  # only accounts of applied items stay opened
            if plan.released_holds:
                holders, hand_ids, transaction_ids = zip(*plan.released_holds, strict=True)
                statements.append(_EXECUTE["socai_ledger_release_holds"])
                params += [now, ",".join(holders), ",".join(hand_ids), ",".join(map(str, transaction_ids))]
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
                    pg_wire.array(opened),
                    pg_wire.array(locked.kind[k] for k in opened),
                    pg_wire.array(locked.balance_gold[k] for k in opened),
                    pg_wire.array(locked.version[k] for k in opened),
                    pg_wire.array("t" if k in locked.may_go_negative else "f" for k in opened),
                ]
            statements.append(_EXECUTE["socai_ledger_outbox"])
            params += [plan.first_seq, plan.last_seq]
        statements.append("commit")
        if last_script is not None:
            last_script()
        await pg_wire.write_script(conn, "; ".join(statements), params, copies)
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
        head_seq=plan.last_seq or head_seq,
        published_seq=published_seq,
    )


async def _rollback(conn: AConn) -> None:
    """End a failed batch's transaction (autocommit connection: nobody else will)."""
    if conn.closed or conn.broken:
        return
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        try:
            await conn.execute("rollback")
        except psycopg.Error:
            await conn.close()  # the batcher reconnects


def _transaction_arrays(plan: domain.BatchPlan, now: datetime) -> tuple[object, ...]:
    ids, keys, hashes, statuses, seqs, kinds, references, metadata, reasons, messages = zip(
        *plan.transaction_rows, strict=True
    )
    return (
        now,
        pg_wire.plain_array(ids),
        pg_wire.text_array(keys),
        pg_wire.plain_array([h.hex() for h in hashes]),
        pg_wire.plain_array(statuses),
        pg_wire.array(seqs),
        pg_wire.text_array(kinds),
        pg_wire.text_array(references),
        pg_wire.text_array([json.dumps(m) if m else None for m in metadata]),
        pg_wire.text_array(reasons),
        pg_wire.text_array(messages),
    )


def _entry_arrays(plan: domain.BatchPlan, now: datetime) -> tuple[object, ...]:
    rows = plan.entry_rows
    # Seven columns, none NULL.
    return (now, *["{" + ",".join([str(row[i]) for row in rows]) + "}" for i in range(7)])


def _locked_accounts(text: str | None, held: str | None) -> LockedAccounts:
    """The two values of ``_LOCK_ACCOUNTS_SQL`` (None: no account exists; no account holds
    gold) as LockedAccounts."""
    locked = LockedAccounts(_account_rows(text))
    for account in held.split(" ") if held else ():
        account_id, _, held_gold = account.partition("|")
        locked.held_gold[account_id] = int(held_gold)
    return locked


def _settled_hands(items: Sequence[PreparedTransaction]) -> str:
    """The hands the batch's settlements settle (``settle:{hand_id}[:retryN]``), comma-separated
    ("" when it holds none). Hand ids hold no comma: settlement's keys are checked by
    ``domain.authorize``."""
    prefix = domain.SETTLEMENT_KEY_PREFIX
    return ",".join(
        {
            item.idempotency_key[len(prefix) :].partition(":")[0]
            for item in items
            if item.idempotency_key.startswith(prefix)
        }
    )


async def _read_holds(conn: AConn, items: Sequence[PreparedTransaction], locked: LockedAccounts) -> None:
    """The holds of the batch's settlements' hands on its held accounts, into ``locked``: one
    more round trip, for a batch that locked a held account this process did not expect to
    be held (``_held_seen``) and holds a settlement."""
    hands = _settled_hands(items)
    if hands:
        (rows,) = await pg_wire.script(
            conn, _EXECUTE["socai_ledger_held_for_hands"], (",".join(locked.held_gold), hands)
        )
        _add_holds(rows, locked)


def _add_holds(rows: Sequence[tuple[Any, ...]], locked: LockedAccounts) -> None:
    """The rows of ``_HELD_FOR_HANDS_SQL`` into ``locked``: only the accounts the lock found
    holding gold (a guessed account that holds nothing has no hold to release anyway)."""
    text = rows[0][0] if rows else None
    for hold in text.split(" ") if text else ():
        account_id, _, rest = hold.partition("|")
        if account_id in locked.held_gold:
            hand_id, _, gold = rest.partition("=")
            locked.hold(hand_id, account_id, int(gold))


def _account_rows(text: str | None) -> Iterator[tuple[str, int, int, bool, str]]:
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
            known[key] = KnownKey(bytes(first[1]), transaction_from_rows(group))
        else:
            known[key] = KnownKey(bytes(first[1]), None, first[9], first[10])
    return known
