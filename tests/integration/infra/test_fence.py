"""The PostgreSQL fence: a side effect under an older lease token than one seen is refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from socai import errors
from socai.infra import fence

pytestmark = pytest.mark.integration


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[object]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as connection:
        await connection.execute(fence.table_ddl())
        await connection.execute("create table effects (partition int, token bigint, label text)")
        yield connection


async def write(conn: psycopg.AsyncConnection[object], partition: int, token: int, label: str) -> None:
    async with conn.transaction():
        await fence.advance(conn, "settlement", partition, token)
        await conn.execute("insert into effects values (%s, %s, %s)", (partition, token, label))


async def labels(conn: psycopg.AsyncConnection[object]) -> list[str]:
    cursor = await conn.execute("select label from effects order by label")
    return [row[0] for row in await cursor.fetchall()]


async def test_the_same_and_newer_tokens_write_an_older_one_is_refused_and_rolled_back(conn):
    await write(conn, 0, 10, "a first")
    await write(conn, 0, 10, "b same holder again")
    await write(conn, 0, 25, "c next holder")
    with pytest.raises(errors.PreconditionFailed) as raised:
        await write(conn, 0, 10, "d stale holder")
    assert raised.value.code == "FENCED"
    assert await labels(conn) == ["a first", "b same holder again", "c next holder"]
    assert await fence.current(conn, "settlement", 0) == 25


async def test_partitions_and_scopes_are_fenced_apart(conn):
    await write(conn, 0, 30, "p0")
    await write(conn, 1, 5, "p1 with a smaller token is another partition")
    await fence.claim(conn, "table", 0, 2)
    assert await fence.current(conn, "settlement", 1) == 5
    assert await fence.current(conn, "table", 0) == 2


async def test_a_claim_fences_out_the_old_holder_before_the_new_one_writes_anything(conn):
    await write(conn, 3, 7, "old holder")
    await fence.claim(conn, "settlement", 3, 12)
    with pytest.raises(errors.PreconditionFailed):
        await write(conn, 3, 7, "old holder after a pause")
    with pytest.raises(errors.PreconditionFailed):
        await fence.claim(conn, "settlement", 3, 11)
    assert await labels(conn) == ["old holder"]


async def test_an_older_token_waiting_on_a_newer_uncommitted_one_is_refused(database_url: str, conn):
    # The newer holder's transaction holds the fence row; the older holder's upsert waits for
    # it, then sees the newer token and must not commit.
    await write(conn, 4, 1, "seed")
    newer = await psycopg.AsyncConnection.connect(database_url)
    older = await psycopg.AsyncConnection.connect(database_url)
    try:
        await fence.advance(newer, "settlement", 4, 9)  # opens newer's transaction
        waiting = asyncio.create_task(write(older, 4, 8, "older"))
        await wait_until_a_backend_waits_on_a_lock(conn, waiting)
        await newer.execute("insert into effects values (4, 9, 'newer')")
        await newer.commit()
        with pytest.raises(errors.PreconditionFailed):
            await waiting
    finally:
        await newer.close()
        await older.close()
    assert await labels(conn) == ["newer", "seed"]


async def wait_until_a_backend_waits_on_a_lock(conn: psycopg.AsyncConnection[object], task: asyncio.Task[None]) -> None:
    for _ in range(1200):  # a deadline of about a minute, never a timing assertion
        cursor = await conn.execute(
            "select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'"
        )
        row = await cursor.fetchone()
        if row is not None and row[0] > 0:
            return
        assert not task.done(), "the older write finished while the newer transaction held the fence row"
        await asyncio.sleep(0.05)
    raise AssertionError("the older write never waited for the fence row")


async def test_a_token_must_be_positive(conn):
    with pytest.raises(errors.InvalidArgument):
        await fence.advance(conn, "settlement", 0, 0)
