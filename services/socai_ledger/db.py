"""How the ledger reaches PostgreSQL, and the names every one of its statements shares.

Tables (schema ``socai_ledger``, migration ``0002_journal``): ``accounts`` (the balance
projection), ``transactions`` and ``entries`` (the journal: append-only, the database
refuses UPDATE, DELETE and TRUNCATE), ``outbox`` (journal ranges not yet published) and
``outbox_progress``.

One access style, two kinds of connection:

- Every statement an RPC runs apart from postings (the reads in ``queries`` and ``verify``,
  and ``OpenAccount``) goes through the service's pool (``create_pool``, a
  ``socai.infra.db_pool.Pool``): checked connections, a lost connection answered as
  UNAVAILABLE, a read run once more when its connection died under it.
- Two long-lived tasks own one connection each (``connect``): the write batcher, whose
  statements are prepared once per connection and sent through ``pg_wire`` (a pooled
  connection would have to be prepared again whenever the pool replaced it, and the write
  path never waits for a free one), and the outbox relay, whose connection holds the relay's
  session advisory lock (``RELAY_LOCK``) for as long as it relays, so its statements must
  run on that same session.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import psycopg
from psycopg.rows import TupleRow

from socai import errors
from socai.infra import db_pool
from socai.infra.db import libpq_url
from socai_ledger.domain import Entry, Transaction

SCHEMA: Final = "socai_ledger"
# pg_advisory_xact_lock keys (int8): the journal writer and the outbox relay leader.
WRITE_LOCK: Final = 0x50CA1_0001
RELAY_LOCK: Final = 0x50CA1_0002
APPLICATION_NAME: Final = "socai-ledger"

AConn = psycopg.AsyncConnection[TupleRow]


async def connect(url: str, *, autocommit: bool = True) -> AConn:
    """One dedicated connection (the batch writer and the relay each own one; see the module
    docstring). Raises Unavailable("DATABASE_UNAVAILABLE") when PostgreSQL cannot be reached."""
    try:
        return await psycopg.AsyncConnection.connect(
            libpq_url(url), autocommit=autocommit, application_name=APPLICATION_NAME, connect_timeout=5
        )
    except psycopg.OperationalError as exc:
        raise errors.Unavailable("DATABASE_UNAVAILABLE", f"cannot connect to PostgreSQL: {exc}") from exc


def create_pool(url: str, *, min_size: int = 1, max_size: int = 8) -> db_pool.Pool:
    """The pool every read runs on (autocommit: each read is one statement or an explicit
    transaction).

    Its connections are checked when taken out and its failures are
    Unavailable("DATABASE_UNAVAILABLE") (``socai.infra.db_pool``); the reads run once more
    when their connection dies under them (``db_pool.retried_read``).
    """
    return db_pool.Pool(
        libpq_url(url),
        name="socai-ledger-reads",
        min_size=min_size,
        max_size=max_size,
        wait_s=10,
        kwargs={"autocommit": True, "application_name": APPLICATION_NAME},
    )


# A transaction with its entries, one row per entry (or one row with NULL entry columns for a
# refused key), in the column order of ``TRANSACTION_WITH_ENTRIES_COLUMNS``: the write path's
# look-up of known keys and ``GetTransaction`` read the journal the same way.
TRANSACTION_WITH_ENTRIES_COLUMNS: Final = (
    "t.idempotency_key, t.request_hash, t.status, t.transaction_id, t.journal_seq, t.kind, t.reference, "
    "t.metadata, t.created_at, t.error_reason, t.error_message, "
    "e.account_id, e.amount_gold, e.balance_after_gold, e.account_version"
)


def transaction_from_rows(group: Sequence[tuple[Any, ...]]) -> Transaction:
    """An applied transaction from its rows in ``TRANSACTION_WITH_ENTRIES_COLUMNS`` order."""
    first = group[0]
    tx_id = str(first[3])
    created_at: datetime = first[8]
    seq: int = first[4]
    entries = tuple(Entry(tx_id, r[11], r[12], r[13], r[14], created_at, seq) for r in group if r[11] is not None)
    return Transaction(tx_id, first[0], first[5], first[6], entries, first[7] or {}, created_at, seq)
