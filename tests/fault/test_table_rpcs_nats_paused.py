"""Every table RPC while nats-server is paused answers UNAVAILABLE (or its own answer), never INTERNAL.

Issue 29, item 2: with NATS slow or paused, GetTableState, WatchTable, Act and JoinTable
answered INTERNAL after 5 s (nats-py's ``TimeoutError`` escaping a lease-bucket look-up or
a read of the log). Two table instances share the tables (P = 2, ``tests.support.table_pair``:
the backend dials B, a table of partition 0 is A's and reached through B) on a nats-server of
this test's own. With a hand in play at a table of each partition, nats-server is stopped
(SIGSTOP) and every RPC of a game backend is called through B for both tables, at once
and again 2 s later: each answer must be OK, a domain answer, DEADLINE_EXCEEDED or
UNAVAILABLE with an ErrorInfo reason.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.grpc_errors import error_reason
from socai.infra.nats import StreamSpec
from socai.infra.nats_auth import TEST_HARNESS
from socai.infra.partitions import partition_of
from socai_cli.embedded import EmbeddedNats
from tests.support.clients import Backend, bet
from tests.support.ports import free_port
from tests.support.table_pair import P, table_in, two_instances

pytestmark = [pytest.mark.fault, pytest.mark.slow]

PLAYERS = ("a", "b", "c")
DEADLINE_S = 7.5  # longer than nats-py's request timeouts (5 s): the server's own answer comes first
# Two rounds of calls: at once (the instances still hold their leases and serve their tables:
# reads, appends, a forwarded call to the owner it found a moment ago) and past the 1 s owner
# cache and the leases' 1.6 s validity (a forwarded call asks the lease bucket).
ROUNDS = {"at_once": 0.0, "later": 2.0}


async def seat_and_start(backend: Backend, table_id: str) -> pb.ActRequest:
    """A Hold'em hand in play at ``table_id``; the move its player to act may make next."""
    await backend.table.CreateTable(
        pb.CreateTableRequest(
            table_id=table_id,
            config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=4, turn_timeout_s=60, owner_player_id="a"),
        )
    )
    for seat, player in enumerate(PLAYERS):
        await backend.deposit(player, 5000)
        await backend.join(table_id, player, 1000, seat=seat)
    await backend.deposit("d", 5000)
    hand_id = (await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    state = await backend.state(table_id)
    seat = state.to_act[0]
    legal = {a.kind: a for a in (await backend.state(table_id, PLAYERS[seat])).legal_actions}
    action = bet(seat, "check") if "check" in legal else bet(seat, "call", legal["call"].min_gold)
    return pb.ActRequest(
        table_id=table_id,
        hand_id=hand_id,
        seat=seat,
        action=action,
        idempotency_key=uuid.uuid4().hex,
        player_token=await backend.token(PLAYERS[seat]),
    )


async def first_of_watch(backend: Backend, table_id: str) -> Any:
    stream = backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id), timeout=DEADLINE_S)
    try:
        async for item in stream:
            return item
    finally:
        stream.cancel()
    return None


def calls(backend: Backend, table_id: str, act: pb.ActRequest) -> dict[str, Callable[[], Awaitable[Any]]]:
    t, b, tok = table_id, backend.table, backend.tokens
    return {
        "GetTable": lambda: b.GetTable(pb.GetTableRequest(table_id=t), timeout=DEADLINE_S),
        "ListTables": lambda: b.ListTables(pb.ListTablesRequest(), timeout=DEADLINE_S),
        "GetTableState": lambda: b.GetTableState(pb.GetTableStateRequest(table_id=t), timeout=DEADLINE_S),
        "WatchTable": lambda: first_of_watch(backend, t),
        "Act": lambda: b.Act(act, timeout=DEADLINE_S),
        "JoinTable": lambda: b.JoinTable(
            pb.JoinTableRequest(
                table_id=t, player_token=tok["d"], buy_in_gold=1000, seat=3, idempotency_key=uuid.uuid4().hex
            ),
            timeout=DEADLINE_S,
        ),
        "LeaveTable": lambda: b.LeaveTable(pb.LeaveTableRequest(table_id=t, player_token=tok["c"]), timeout=DEADLINE_S),
        "StartHand": lambda: b.StartHand(pb.StartHandRequest(table_id=t), timeout=DEADLINE_S),
        "Heartbeat": lambda: b.Heartbeat(pb.HeartbeatRequest(table_id=t, player_token=tok["a"]), timeout=DEADLINE_S),
        "Reconnect": lambda: b.Reconnect(pb.ReconnectRequest(table_id=t, player_token=tok["b"]), timeout=DEADLINE_S),
        "CreateTable": lambda: b.CreateTable(  # a new table in the same partition
            pb.CreateTableRequest(
                table_id=table_in(partition_of(t, P)),
                config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=4, owner_player_id="a"),
            ),
            timeout=DEADLINE_S,
        ),
    }


async def answer(call: Callable[[], Awaitable[Any]]) -> tuple[str, str]:
    try:
        await call()
    except grpc.aio.AioRpcError as exc:
        return exc.code().name, error_reason(exc)
    return "OK", ""


async def test_every_table_rpc_answers_unavailable_not_internal_while_nats_is_paused(
    migrated_database_url: str, stream_spec: StreamSpec, tmp_path: Path
) -> None:
    server = EmbeddedNats(tmp_path / "nats", port=free_port(), test_harness=True)
    server.start()
    assert server.proc is not None
    try:
        async with two_instances(server.url_for(TEST_HARNESS), migrated_database_url, stream_spec, "paused") as two:
            backend = two.backend
            await backend.token("d")
            tables = {"forwarded": table_in(0), "local": table_in(1)}
            acts = {where: await seat_and_start(backend, table_id) for where, table_id in tables.items()}
            names = [
                (when, where, rpc)
                for when in ROUNDS
                for where in tables
                for rpc in calls(backend, tables[where], acts[where])
            ]

            async def at(when: str, where: str, rpc: str) -> tuple[str, str]:
                await asyncio.sleep(ROUNDS[when])
                return await answer(calls(backend, tables[where], acts[where])[rpc])

            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                answers = await asyncio.gather(*(at(*name) for name in names))
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            got = {"/".join(name): a for name, a in zip(names, answers, strict=True)}
            print("answers while NATS was paused:", got)
            internal = {k: a for k, a in got.items() if a[0] in ("INTERNAL", "UNKNOWN")}
            assert internal == {}, got
            unexplained = {k: a for k, a in got.items() if a[0] == "UNAVAILABLE" and not a[1]}
            assert unexplained == {}, got
            # The pause did reach the calls: the instances' own dependency failed under some.
            assert any(a[0] in ("UNAVAILABLE", "DEADLINE_EXCEEDED") for a in got.values()), got
    finally:
        if server.proc is not None:
            os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()
