"""Two table-service processes share the tables by lease; one dies or is paused (issue 19).

Both run on one NATS and PostgreSQL with a partitioned event log (P = 2, so each holds one
partition) and a 2 s lease TTL. The players' backend dials instance B only: a table whose
partition A holds is reached through B, which forwards to A.

- SIGKILL: the table on A is mid-hand; A dies; B takes A's partition once A's lease
  expires, rebuilds the table and resumes the same hand (same events, same deck
  commitment); the hand is played out through B with no duplicate or missing event.
- SIGSTOP: A is paused past its lease while B takes over, then continued with its turn
  timer overdue: nothing A wrote under its old lease token lands after the pause began.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.errors import KeyNotFoundError

from socai import fairness
from socai.events.log import EventLog, Stored
from socai.events.model import HandEnded, HandStarted
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.config import Settings
from socai.infra.leases import assign
from socai.infra.nats import StreamSpec, connect
from socai_cli.embedded import free_port
from socai_cli.stack import grpc_health
from socai_table.ownership import WRITER_HEADER
from tests.support.clients import Backend, bet
from tests.support.services import running, service_settings
from tests.support.table_pair import table_in

pytestmark = [pytest.mark.fault, pytest.mark.slow]

P = 2
TTL_S = 2.0
PLAYERS = {0: "a", 1: "b", 2: "c"}


@dataclass
class Instance:
    name: str
    address: str
    proc: subprocess.Popen[bytes]


async def start(settings: Settings, name: str, address: str, tmp: Path) -> Instance:
    env = {
        **os.environ,
        **settings.as_env(),
        "SOCAI_LOG_FORMAT": "json",
        "SOCAI_LISTEN_ADDR": address,
        "SOCAI_INSTANCE_ID": name,
        "SOCAI_TABLE_LEASE_TTL_S": str(TTL_S),
    }
    log_path = tmp / f"{name}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "socai_table"], env=env, stdout=log_path.open("ab"), stderr=subprocess.STDOUT
    )
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited: {log_path.read_text()[-3000:]}")
        if await grpc_health(address, 0.5) == "SERVING":
            return Instance(name, address, proc)
        await asyncio.sleep(0.1)
    proc.kill()
    raise AssertionError(f"{name} did not start: {log_path.read_text()[-3000:]}")


async def holders(nc: NatsClient, bucket: str) -> dict[int, str]:
    kv = await nc.jetstream().key_value(bucket)
    found = {}
    for k in range(P):
        try:
            entry = await kv.get(f"partition.{k}")
        except KeyNotFoundError:
            continue
        found[k] = (entry.value or b"").decode()
    return found


async def wait_holders(nc: NatsClient, bucket: str, wanted: dict[int, str], timeout_s: float) -> float:
    """Seconds until the bucket names ``wanted`` holders (fails after ``timeout_s``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if await holders(nc, bucket) == wanted:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"holders {await holders(nc, bucket)} != {wanted} after {timeout_s} s")


@dataclass
class Pair:
    settings: Settings
    nc: NatsClient
    log: EventLog
    bucket: str
    a: Instance
    b: Instance
    backend: Backend  # dials B only

    async def table_stream(self, table_id: str) -> list[Stored]:
        return [s async for s in self.log.read(f"{self.settings.events_prefix}.{table_id}.*")]


@asynccontextmanager
async def pair(nats_url: str, database_url: str, stream_spec: StreamSpec, tmp: Path) -> AsyncIterator[Pair]:
    settings = service_settings(nats_url, database_url, stream_spec, event_partitions=P)
    async with running(settings, ("ledger",)) as r:
        settings = replace(r.settings, metrics_port_base=0)
        suffix = uuid.uuid4().hex[:6]
        names = (f"ta{suffix}", f"tb{suffix}")
        owners = assign(P, sorted(names))
        # A is the instance holding partition 0 once both run; B the other one.
        a_name = owners[0]
        b_name = next(n for n in names if n != a_name)
        a = await start(settings, a_name, f"127.0.0.1:{free_port()}", tmp)
        b = await start(settings, b_name, f"127.0.0.1:{free_port()}", tmp)
        nc = await connect(nats_url, name="failover-check")
        bucket = f"table_leases_{settings.events_stream}"
        backend = Backend(replace(settings, table_addr=b.address))
        try:
            await wait_holders(nc, bucket, {0: a_name, 1: b_name}, 30)
            yield Pair(
                settings, nc, EventLog(nc, settings.events_stream, settings.events_prefix), bucket, a, b, backend
            )
        finally:
            await backend.close()
            for inst in (a, b):
                if inst.proc.poll() is None:
                    inst.proc.send_signal(signal.SIGCONT)
                    inst.proc.send_signal(signal.SIGTERM)
                    inst.proc.wait(20)
            await nc.jetstream().delete_stream(stream_spec.name)
            await nc.close()


async def seat_and_start(p: Pair, table_id: str, **config: object) -> str:
    await p.backend.table.CreateTable(
        pb.CreateTableRequest(
            table_id=table_id,
            config=pb.TableConfig(game="holdem", stake_gold=100, seats_max=3, owner_player_id="a", **config),  # type: ignore[arg-type]
        )
    )
    for seat, player in PLAYERS.items():
        await p.backend.deposit(player, 5000)
        assert await p.backend.join(table_id, player, 1000, seat=seat) == seat
    hand_id = (await p.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    state = await p.backend.state(table_id)
    seat = state.to_act[0]
    await p.backend.act(table_id, PLAYERS[seat], seat, bet(seat, "call", 20 if seat != 2 else 10))
    return str(hand_id)


async def state_when_served(p: Pair, table_id: str, timeout_s: float) -> pb.TableState:
    """The table's state through B, retrying while its partition is between holders."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await p.backend.state(table_id)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


# What a move may meet when a turn timer can act first or the table is changing holders: the
# turn moved on (FAILED_PRECONDITION), the table between instances (UNAVAILABLE).
RACING = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAVAILABLE)


async def play_out(p: Pair, table_id: str, hand_id: str, *, racing_timers: bool = False) -> None:
    """Everyone checks or calls until the hand ends. With ``racing_timers`` a move refused
    because a timer moved the hand on first (or the table was between holders) is read again."""
    for _ in range(80):
        state = await state_when_served(p, table_id, 10)
        if state.table.status != pb.TABLE_STATUS_PLAYING or state.hand_id != hand_id:
            return
        seat = state.to_act[0]
        try:
            mine = await p.backend.state(table_id, PLAYERS[seat])
            kinds = {a.kind: a for a in mine.legal_actions}
            if not kinds:  # a timer took the turn between the two reads
                continue
            action = bet(seat, "check") if "check" in kinds else bet(seat, "call", kinds["call"].min_gold)
            await p.backend.act(table_id, PLAYERS[seat], seat, action)
        except grpc.aio.AioRpcError as exc:
            if not racing_timers or exc.code() not in RACING:
                raise
            await asyncio.sleep(0.1)
    raise AssertionError("the hand did not end")


def writer(stored: Stored) -> tuple[str, int]:
    instance, _, token = stored.headers[WRITER_HEADER].partition("/")
    return instance, int(token)


def check_hand(stored: list[Stored]) -> None:
    """Gapless, no duplicate, one HandStarted, one HandEnded whose seed opens the commitment."""
    seqs = [s.event.seq for s in stored]
    assert seqs == list(range(1, len(seqs) + 1))
    started = [s.event.body for s in stored if isinstance(s.event.body, HandStarted)]
    ended = [s.event.body for s in stored if isinstance(s.event.body, HandEnded)]
    assert len(started) == 1 and len(ended) == 1
    assert fairness.verify_commitment(bytes.fromhex(ended[0].deck_seed), started[0].deck_commitment)


async def test_a_killed_instance_s_table_resumes_on_the_other_with_the_same_hand(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, tmp_path: Path
):
    async with pair(nats_url, migrated_database_url, stream_spec, tmp_path) as p:
        table_id = table_in(0, P)  # A's partition: every call goes through B to A
        hand_id = await seat_and_start(p, table_id)
        before = await p.backend.state(table_id)
        written = await p.table_stream(table_id)
        assert {writer(s)[0] for s in written} == {p.a.name}  # forwarded: A ran it

        p.a.proc.send_signal(signal.SIGKILL)
        p.a.proc.wait(10)
        handover_s = await wait_holders(p.nc, p.bucket, {0: p.b.name, 1: p.b.name}, 4 * TTL_S + 10)
        after = await state_when_served(p, table_id, 10)

        assert after.hand_id == hand_id
        assert [e.event_id for e in after.events] == [e.event_id for e in before.events]
        assert list(after.to_act) == list(before.to_act)
        await play_out(p, table_id, hand_id)

        stored = await p.log.read_hand(table_id, hand_id)
        check_hand(stored)
        # A wrote the hand's start, B its end; nothing of A's after anything of B's.
        writers = [writer(s)[0] for s in stored]
        assert writers[0] == p.a.name and writers[-1] == p.b.name
        assert writers == sorted(writers, key=lambda w: w == p.b.name)
        stacks = sum(s.stack_gold for s in (await p.backend.state(table_id)).table.seats)
        assert stacks == 3000
        print(f"table handover after SIGKILL: {handover_s:.2f} s (lease TTL {TTL_S} s)")


async def test_a_paused_instance_writes_nothing_after_its_lease_moved(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, tmp_path: Path
):
    async with pair(nats_url, migrated_database_url, stream_spec, tmp_path) as p:
        table_id = table_in(0, P)
        # A turn timer that runs out while A is paused: A wakes with it overdue and, were it
        # not fenced, would write the TimerExpired under its old lease.
        turn_s = 2 * TTL_S
        hand_id = await seat_and_start(p, table_id, turn_timeout_s=int(turn_s))
        acted_at = time.monotonic()
        old = {writer(s) for s in await p.table_stream(table_id)}
        assert {w[0] for w in old} == {p.a.name}
        (old_token,) = {w[1] for w in old}

        p.a.proc.send_signal(signal.SIGSTOP)
        paused_at_seq = (await p.nc.jetstream().stream_info(p.settings.events_stream)).state.last_seq
        await wait_holders(p.nc, p.bucket, {0: p.b.name, 1: p.b.name}, 4 * TTL_S + 10)
        # B rebuilt the table and re-armed the turn timer from scratch; A's ran out meanwhile.
        await asyncio.sleep(max(0.0, turn_s + 0.5 - (time.monotonic() - acted_at)))
        p.a.proc.send_signal(signal.SIGCONT)

        # A wakes with its timer overdue: anything it would write, it tries now. Then the
        # players finish the hand wherever the partition settles (timers acting too).
        await asyncio.sleep(1.0)
        await play_out(p, table_id, hand_id, racing_timers=True)
        deadline = time.monotonic() + 60
        while not any(isinstance(s.event.body, HandEnded) for s in await p.log.read_hand(table_id, hand_id)):
            assert time.monotonic() < deadline, "the hand did not end"
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)  # anything A still had queued would have landed by now

        stale = [
            s.stream_seq
            for s in await p.table_stream(table_id)
            if writer(s) == (p.a.name, old_token) and s.stream_seq > paused_at_seq
        ]
        assert stale == []
        check_hand(await p.log.read_hand(table_id, hand_id))
        log_a = (tmp_path / f"{p.a.name}.log").read_text()
        assert '"reason": "expired"' in log_a or '"reason": "taken"' in log_a  # A saw its lease go
