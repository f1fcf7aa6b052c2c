"""The outbox relay's statements, on its own connection (``db`` says why that one).

The relay reads the pending journal ranges and the journal rows they name, and advances its
cursor; each call is one round trip (``pg_wire.script``: several statements at once).
``journal_head_and_cursor`` is the one statement here on the service's pool: the lag a
writer holding postings back reads (``outbox_backlog``), on any replica.
"""

from __future__ import annotations

from typing import Any

from socai_ledger import pg_wire
from socai_ledger.db import SCHEMA, AConn
from socai_ledger.domain import Entry, Transaction

_JOURNAL_TRANSACTIONS_SQL = f"""
select journal_seq, transaction_id, idempotency_key, kind, reference, metadata, created_at, request_hash
from {SCHEMA}.transactions where journal_seq between %s and %s order by journal_seq
"""
_JOURNAL_ENTRIES_SQL = f"""
select journal_seq, account_id, amount_gold, balance_after_gold, account_version
from {SCHEMA}.entries where journal_seq between %s and %s order by journal_seq, entry_index
"""


async def outbox_pending(conn: AConn, limit: int) -> tuple[int, int, list[tuple[int, int]]]:
    """(the journal head, the published cursor, up to ``limit`` pending journal ranges in
    journal order), in one round trip. The head is read first: a batch committing meanwhile
    only adds ranges."""
    (head,), (progress,), ranges = await pg_wire.script(
        conn,
        f"select coalesce(max(journal_seq), 0) from {SCHEMA}.transactions; "
        f"select published_seq from {SCHEMA}.outbox_progress; "
        f"select first_seq, last_seq from {SCHEMA}.outbox order by first_seq limit %s",
        (limit,),
    )
    return int(head[0]), int(progress[0]), [(int(a), int(b)) for a, b in ranges]


async def journal_head_and_cursor(pool: Any) -> tuple[int, int]:
    """(the journal head, the published cursor) read through the service's ``pool`` (a
    ``socai.infra.db_pool.Pool``): two index lookups. Raises Unavailable("DATABASE_UNAVAILABLE")."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"select (select coalesce(max(journal_seq), 0) from {SCHEMA}.transactions), "
            f"(select published_seq from {SCHEMA}.outbox_progress)"
        )
        row = await cur.fetchone()
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


async def load_journal(
    conn: AConn, first_seq: int, last_seq: int, request_hashes: dict[int, bytes] | None = None
) -> list[Transaction]:
    """Applied transactions with journal_seq in [first_seq, last_seq], in journal order;
    each one's request hash into ``request_hashes`` by journal_seq when it is given (the
    relay publishes it, so a journal restored from the stream keeps it: ``journal_restore``)."""
    txs, entries = await pg_wire.script(
        conn, f"{_JOURNAL_TRANSACTIONS_SQL}; {_JOURNAL_ENTRIES_SQL}", (first_seq, last_seq, first_seq, last_seq)
    )
    ids = {row[0]: (str(row[1]), row[6]) for row in txs}
    if request_hashes is not None:
        request_hashes.update((row[0], bytes(row[7])) for row in txs)
    by_seq: dict[int, list[Entry]] = {}
    for seq, account_id, amount, after, version in entries:
        tx_id, created_at = ids[seq]
        by_seq.setdefault(seq, []).append(Entry(tx_id, account_id, amount, after, version, created_at, seq))
    return [
        Transaction(ids[seq][0], key, kind, reference, tuple(by_seq.get(seq, ())), metadata or {}, created_at, seq)
        for seq, _, key, kind, reference, metadata, created_at, _ in txs
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
