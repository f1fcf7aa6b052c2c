"""A holder paused past its TTL is fenced when it wakes; a killed holder's partitions move.

The holder runs in a process of its own (``lease_holder``) so that SIGSTOP and SIGKILL hit
only it; the instance that takes over runs in the test.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator

import psycopg
import pytest
from nats.aio.client import Client as NatsClient

from socai.infra import fence
from socai.infra.leases import LeaseConfig, LeaseManager, assign, lease_clock
from socai.infra.nats import connect
from tests.integration.infra.lease_holder import SCOPE
from tests.integration.infra.lease_support import Holder, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]

KEEPER = "keeper"


def holder_name_that_defers_to_the_keeper(partitions: int) -> str:
    """A holder name for which the balanced assignment gives partition 0 to the keeper, so
    that once both are live members the woken holder has no claim on it."""
    for n in range(100):
        name = f"holder-{n}"
        if assign(partitions, [KEEPER, name])[0] == KEEPER:
            return name
    raise AssertionError("no holder name defers partition 0 to the keeper")


@pytest.fixture
async def keeper_nc(nats_url: str) -> AsyncIterator[NatsClient]:
    nc = await connect(nats_url, name=KEEPER)
    yield nc
    await nc.close()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[object]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(fence.table_ddl())
        await conn.execute("create table effects (partition int, token bigint, holder text, label text)")
        yield conn


async def test_a_holder_paused_past_its_ttl_is_fenced_when_it_wakes(
    nats_url: str, database_url: str, lease_config: LeaseConfig, keeper_nc: NatsClient, db
):
    name = holder_name_that_defers_to_the_keeper(1)
    holder = await Holder.start(nats_url, lease_config.bucket, name, "1", str(lease_config.ttl_s), database_url)
    keeper_tokens: list[int] = []

    async def keeper_acquired(partition: int, token: int) -> None:
        # The new holder's first act: fence out every older token, then act.
        await fence.claim(db, SCOPE, partition, token)
        async with db.transaction():
            await fence.advance(db, SCOPE, partition, token)
            await db.execute("insert into effects values (%s, %s, %s, %s)", (partition, token, KEEPER, "keeper's post"))
        keeper_tokens.append(token)

    keeper = LeaseManager(keeper_nc.jetstream(), lease_config, KEEPER, 1, keeper_acquired)
    try:
        await holder.expect("READY")
        old_token = int((await holder.expect("ACQUIRED 0")).split()[2])
        await holder.send("write 0 before-the-pause")
        assert await holder.expect("WRITE 0") == "WRITE 0 ok"
        await holder.send("check 0")
        assert await holder.expect("CHECK 0") == "CHECK 0 ok"

        # Paused right after its check, before its next write: the lease moves meanwhile.
        os.kill(holder.proc.pid, signal.SIGSTOP)
        await keeper.start()
        await wait_until(lambda: bool(keeper_tokens), "the keeper to take partition 0")
        os.kill(holder.proc.pid, signal.SIGCONT)

        await holder.send("write 0 after-the-pause")
        assert await holder.expect("WRITE 0") == "WRITE 0 fenced"
        await holder.expect("LOST 0")
        await holder.send("check 0")
        assert await holder.expect("CHECK 0") == "CHECK 0 lost"
        assert keeper.lease(0) is not None  # the woken holder did not take it back
    finally:
        await holder.close()
        await keeper.stop()

    assert keeper_tokens[0] > old_token
    cursor = await db.execute("select holder, token, label from effects order by token, label")
    assert await cursor.fetchall() == [
        (name, old_token, "before-the-pause"),
        (KEEPER, keeper_tokens[0], "keeper's post"),
    ]
    assert await fence.current(db, SCOPE, 0) == keeper_tokens[0]


async def test_a_killed_holders_partitions_move_after_their_ttl(
    nats_url: str, lease_config: LeaseConfig, keeper_nc: NatsClient
):
    partitions = 4
    holder = await Holder.start(nats_url, lease_config.bucket, "victim", str(partitions), str(lease_config.ttl_s))
    acquired_at: dict[int, float] = {}
    tokens: dict[int, int] = {}

    async def keeper_acquired(partition: int, token: int) -> None:
        acquired_at[partition] = lease_clock()
        tokens[partition] = token

    keeper = LeaseManager(keeper_nc.jetstream(), lease_config, KEEPER, partitions, keeper_acquired)
    try:
        await holder.expect("READY")
        victim_tokens = {}
        for _ in range(partitions):
            _, partition, token = (await holder.expect("ACQUIRED")).split()
            victim_tokens[int(partition)] = int(token)
        await keeper.start()
        await wait_until(lambda: len(keeper.held()) == partitions // 2, "the keeper's fair share")
        for _ in range(partitions // 2):
            await holder.expect("LOST")  # the victim released what the keeper now holds
        kept_by_victim = set(range(partitions)) - keeper.held()

        killed_at = lease_clock()
        os.kill(holder.proc.pid, signal.SIGKILL)
        await wait_until(lambda: len(keeper.held()) == partitions, "the keeper to take the dead holder's partitions")
    finally:
        await holder.close()
        await keeper.stop()

    handover_s = sorted(acquired_at[p] - killed_at for p in kept_by_victim)
    print(f"\nhandover after SIGKILL, TTL {lease_config.ttl_s} s: " + ", ".join(f"{s:.2f} s" for s in handover_s))
    for partition in kept_by_victim:
        assert acquired_at[partition] > killed_at
        assert tokens[partition] > victim_tokens[partition]
