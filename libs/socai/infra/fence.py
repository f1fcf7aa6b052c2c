"""A fence in PostgreSQL: refuse a side effect written under a lease token older than one seen.

A lease (``socai.infra.leases``) can end while its holder is paused between ``Lease.check()``
and its write (a GC pause, SIGSTOP, a slow disk, a VM migration): the holder wakes up still
believing in it. The store therefore checks the holder's fencing token itself, in the same
transaction as the side effect::

    insert into <table> (scope, partition, token) values (…)
    on conflict (scope, partition) do update set token = excluded.token
        where <table>.token <= excluded.token
    returning token

No row back means a newer token has already written under this partition: the caller's
transaction must roll back (``advance`` raises). The row lock taken by the upsert orders
concurrent writers: once a newer holder's transaction has committed, no older holder's can.

How settlement uses it: the ledger's PostTransactions (the side effect that must not come
from two holders) runs ``advance(conn, "settlement", partition, token)`` in the posting's
own transaction, with the scope, partition and token the settlement instance sends; a new
holder also calls ``advance`` once on acquiring (``claim``), before it reads its partition,
so a paused old holder is refused from that moment on even if the new one has nothing to
post yet. The table is created by the owning service's migration (``table_ddl`` gives it).
Tokens are KV revisions and only grow; equal tokens pass (the same holder posts many times).
"""

from __future__ import annotations

from typing import Any, Final

from psycopg import AsyncConnection, sql

from socai import errors

FENCE_TABLE: Final = "lease_fence"


def _table(table: str, schema: str | None) -> sql.Composable:
    return sql.Identifier(schema, table) if schema else sql.Identifier(table)


def table_ddl(table: str = FENCE_TABLE, schema: str | None = None) -> sql.Composed:
    """``create table if not exists`` for the fence (one row per scope and partition)."""
    return sql.SQL(
        "create table if not exists {} ("
        " scope text not null,"
        " partition integer not null check (partition >= 0),"
        " token bigint not null check (token > 0),"
        " updated_at timestamptz not null default now(),"
        " primary key (scope, partition))"
    ).format(_table(table, schema))


async def advance(
    conn: AsyncConnection[Any],
    scope: str,
    partition: int,
    token: int,
    table: str = FENCE_TABLE,
    schema: str | None = None,
) -> None:
    """Record ``token`` for (scope, partition) in the caller's transaction, or refuse.

    Call it inside the transaction that writes the side effect (``async with
    conn.transaction():``), before the write. Raises PreconditionFailed("FENCED") when a
    newer token has been recorded: the caller's lease is stale and the transaction must not
    commit (raising inside ``conn.transaction()`` rolls it back).
    """
    if token <= 0:
        raise errors.InvalidArgument("BAD_FENCE_TOKEN", f"fence tokens are positive, not {token}")
    cursor = await conn.execute(advance_sql(table, schema), (scope, partition, token))
    if await cursor.fetchone() is None:
        raise refused(scope, partition, token)


def advance_sql(table: str = FENCE_TABLE, schema: str | None = None) -> sql.Composed:
    """The upsert of ``advance``, parameters (scope, partition, token): one row back when
    the token was recorded, none when a newer one was. For a store that sends it its own way
    (the ledger prepares it on its writer connection): ``advance_sql(...).as_string()``."""
    return sql.SQL(
        "insert into {t} (scope, partition, token) values (%s, %s, %s)"
        " on conflict (scope, partition) do update set token = excluded.token, updated_at = now()"
        " where {t}.token <= excluded.token"
        " returning token"
    ).format(t=_table(table, schema))


def refused(scope: str, partition: int, token: int) -> errors.PreconditionFailed:
    """The error of a stale token: PreconditionFailed("FENCED") naming the scope, partition and token."""
    return errors.PreconditionFailed(
        "FENCED",
        f"token {token} of {scope} partition {partition} is older than one already written: the lease moved on",
        scope=scope,
        partition=partition,
        token=token,
    )


async def claim(
    conn: AsyncConnection[Any],
    scope: str,
    partition: int,
    token: int,
    table: str = FENCE_TABLE,
    schema: str | None = None,
) -> None:
    """``advance`` in a transaction of its own: a new holder's first act, which fences every
    older holder out before it has anything to write. Raises PreconditionFailed("FENCED")
    when even this token is stale (the lease moved on again already)."""
    async with conn.transaction():
        await advance(conn, scope, partition, token, table, schema)


async def current(
    conn: AsyncConnection[Any], scope: str, partition: int, table: str = FENCE_TABLE, schema: str | None = None
) -> int | None:
    """The newest token recorded for (scope, partition), or None."""
    query = sql.SQL("select token from {} where scope = %s and partition = %s").format(_table(table, schema))
    cursor = await conn.execute(query, (scope, partition))
    row = await cursor.fetchone()
    return None if row is None else int(row[0])
