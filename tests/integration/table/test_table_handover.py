"""A table changing hands never has two writers, and a LeaveTable is never lost (issue 19).

`make chaos CHAOS_ARGS=--scaleout` once saw a LeaveTable refused ``WRONG_LAST_SEQUENCE``
during a handover: a table object of an earlier lease tenure (a call had taken it before its
instance lost the partition and took it back) appended next to the object the new tenure had
rebuilt, the stream refused the second, the caller was told ABORTED and gave up, and the table
went on dealing that player in with the cash-out pending. Two real instances in one process
(real NATS, PostgreSQL, gRPC and leases; P = 2, 2 s TTL) reproduce both halves:

- the instance loses its lease on the server (its key expired while it was slow) and takes the
  partition back with a new token: the old object may write nothing any more;
- another writer gets to the table's log first: the caller is told UNAVAILABLE with a retry
  hint, the table rebuilds itself and stands up the player who asked to leave, who is cashed
  out without even retrying.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest

from socai import accounts, errors
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.grpc_errors import error_info, error_reason
from socai.infra.nats import StreamSpec
from socai.infra.partitions import partition_of
from socai_table.model import facts_id_of
from socai_table.ownership import WRITER_HEADER
from tests.support.table_pair import P, Two, table_in, two_instances

pytestmark = pytest.mark.serial  # two instances on 2 s leases: timing on a shared machine

WAIT_S = 30.0  # generous: the machine may be loaded


async def eventually(what: str, check: object) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def two(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[Two]:
    async with two_instances(nats_url, migrated_database_url, stream_spec, "h") as pair:
        yield pair


async def seated_table(two: Two, players: tuple[str, ...]) -> str:
    table_id = table_in(0)  # A runs it; every call goes through B
    await two.backend.table.CreateTable(
        pb.CreateTableRequest(
            table_id=table_id, config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=len(players) + 1)
        )
    )
    for seat, player in enumerate(players):
        await two.backend.deposit(player, 2000)
        assert await two.backend.join(table_id, player, 1000, seat=seat) == seat
    return table_id


async def seated(two: Two, table_id: str) -> set[str]:
    return {s.player_id for s in (await two.backend.state(table_id)).table.seats if s.player_id}


async def tokens_per_subject(two: Two, table_id: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    prefix = two.a.settings.events_prefix
    async for stored in two.log.read(f"{prefix}.{table_id}.*"):
        out.setdefault(stored.event.hand_id, []).append(int(stored.headers[WRITER_HEADER].rpartition("/")[2]))
    return out


async def test_a_table_object_of_an_ended_tenure_writes_nothing_when_its_instance_takes_the_partition_back(
    two: Two,
):
    p0, p1, p2 = (f"{p}{uuid.uuid4().hex[:6]}" for p in ("p", "q", "r"))
    table_id = await seated_table(two, (p0, p1))
    old = two.a.manager.tables[table_id]
    lease = two.a.ownership.leases.lease(0)
    assert lease is not None
    old_token = lease.token

    # The key expires on the server under A (as when A was too slow to renew it): A's next
    # renewal is refused, A drops the partition and, still assigned it, acquires it again.
    kv = await two.nc.jetstream().key_value(two.a.ownership.leases.config.bucket)
    await kv.delete("partition.0")

    async def taken_back() -> bool:
        now = two.a.ownership.leases.lease(0)
        table = two.a.manager.tables.get(table_id)
        return now is not None and now.token > old_token and table is not None and table is not old

    await eventually("A holds partition 0 again, under a new token, with the table rebuilt", taken_back)

    # The table as it is now moves on: a third player sits down (a fact the old object never saw).
    await two.backend.deposit(p2, 2000)
    assert await two.backend.join(table_id, p2, 1000, seat=2) == 2

    # A LeaveTable that took the old object before the handover and got its lock only now:
    # refused as retryable before anything is recorded (no cash-out row, no event).
    with pytest.raises(errors.Unavailable) as refused:
        await old.leave(p0)
    assert refused.value.code == "TABLE_NOT_HELD"
    assert "retry_after_ms" in refused.value.details
    assert not await two.a.store.has_pending_cashout(table_id, p0)
    assert await seated(two, table_id) == {p0, p1, p2}

    # The caller's retry reaches the table as it is now: p0 stands up and is cashed out.
    reply = await two.backend.leave(table_id, p0)
    assert reply.cash_out_gold == 1000
    assert await seated(two, table_id) == {p1, p2}

    async def cashed_out() -> bool:
        return await two.backend.balance(accounts.player(p0)) == 2000

    await eventually("p0's chips are back in the wallet", cashed_out)
    assert await two.backend.balance(accounts.escrow(table_id, p0)) == 0
    # One writer at a time: on every subject of the table the lease tokens never go back.
    for subject, tokens in (await tokens_per_subject(two, table_id)).items():
        assert tokens == sorted(tokens), subject
    facts = (await tokens_per_subject(two, table_id))[facts_id_of(table_id)]
    assert facts[0] == old_token and facts[-1] > old_token


async def test_a_leave_the_stream_refuses_is_retryable_and_the_table_stands_the_player_up_by_itself(two: Two):
    p0, p1 = (f"{p}{uuid.uuid4().hex[:6]}" for p in ("p", "q"))
    table_id = await seated_table(two, (p0, p1))

    # Another writer gets to the table's facts first (what the current holder sees of a stale
    # holder's late write): the next append names a last sequence that is no longer the last.
    subject = two.log.subject_of(table_id, facts_id_of(table_id))
    await two.nc.jetstream().publish(subject, b"\x00a stranger's message\xff", stream=two.a.settings.events_stream)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await two.backend.leave(table_id, p0)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert error_reason(refused.value) == "TABLE_RESYNC"
    info = error_info(refused.value)
    assert info is not None and int(info.metadata["retry_after_ms"]) > 0

    # Nobody retries: the table rebuilds itself, finds p0's cash-out pending and stands p0 up;
    # the cash-out completes.
    async def stood_up_and_paid() -> bool:
        return p0 not in await seated(two, table_id) and await two.backend.balance(accounts.player(p0)) == 2000

    await eventually("p0 stood up and cashed out", stood_up_and_paid)
    assert await seated(two, table_id) == {p1}
    assert not await two.a.store.has_pending_cashout(table_id, p0)
    assert await two.backend.balance(accounts.escrow(table_id, p0)) == 0

    # A retry after all is answered as for a player who has left.
    with pytest.raises(grpc.aio.AioRpcError) as again:
        await two.backend.leave(table_id, p0)
    assert again.value.code() == grpc.StatusCode.NOT_FOUND and error_reason(again.value) == "NOT_SEATED"


async def test_list_tables_answers_for_every_instance_s_tables(two: Two):
    mine = sorted(table_in(k) for k in (0, 0, 1, 1))
    for table_id in mine:
        await two.backend.table.CreateTable(
            pb.CreateTableRequest(table_id=table_id, config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=2))
        )
    p0 = f"p{uuid.uuid4().hex[:6]}"
    await two.backend.deposit(p0, 2000)
    await two.backend.join(mine[0], p0, 1000, seat=1)
    assert {t for t in mine if partition_of(t, P) == 0} == {t for t in mine if t in two.a.manager.tables}

    # Through B (which runs half of them), in pages of 3: all four, in id order, each with
    # its live state from whoever runs it.
    listed: list[pb.Table] = []
    token = ""
    while True:
        page = await two.backend.table.ListTables(pb.ListTablesRequest(page_size=3, page_token=token))
        listed += page.tables
        token = page.next_page_token
        if not token:
            break
    assert [t.table_id for t in listed] == mine
    by_id = {t.table_id: t for t in listed}
    assert [s.player_id for s in by_id[mine[0]].seats] == [p0]
    assert all(t.status == pb.TABLE_STATUS_WAITING and t.config.game == "holdem" for t in listed)
    other = await two.backend.table.ListTables(pb.ListTablesRequest(game="xito"))
    assert list(other.tables) == []


async def test_a_create_retried_while_the_first_is_still_opening_gives_one_table_and_one_table_opened(two: Two):
    table_id = table_in(0)
    request = pb.CreateTableRequest(
        table_id=table_id, config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=2)
    )
    first, second = await asyncio.gather(two.backend.table.CreateTable(request), two.backend.table.CreateTable(request))
    assert first.table.table_id == second.table.table_id == table_id
    facts = [s async for s in two.log.read(two.log.subject_of(table_id, facts_id_of(table_id)))]
    assert [type(s.event.body).__name__ for s in facts] == ["TableOpened"]
    assert await two.a.store.config_of(table_id) is not None
    p0 = f"p{uuid.uuid4().hex[:6]}"
    await two.backend.deposit(p0, 2000)
    assert await two.backend.join(table_id, p0, 1000) >= 0
    assert [s.player_id for s in two.a.manager.tables[table_id].seats.values()] == [p0]
