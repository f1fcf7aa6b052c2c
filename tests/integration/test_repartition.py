"""Changing P is a migration that works (issue 19): tables with history on a stream of P = 4
(or unpartitioned), ``socai migrate --repartition`` to P = 8, then the table service rebuilds
every table, plays on, players leave and cash out, settlement settles every hand exactly once
and ``socai audit`` is clean. Real NATS, PostgreSQL and gRPC; services in process, the audit
as the command."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js import api as js_api

from socai import accounts, errors
from socai.events.log import EventLog
from socai.events.model import HandEnded
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.config import Settings
from socai.infra.nats import StreamSpec, connect
from socai.infra.partitions import partition_filter, partition_of, partitions_of
from socai_cli.stack import provision_streams
from socai_settlement import metrics as settlement_metrics
from tests.support.clients import Backend, bet
from tests.support.services import Running, running, service_settings
from tests.support.settlement import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SERVICES = ("ledger", "table", "settlement")
AFTER = 8
TABLES = 6
BUY_IN_GOLD = 1_000
STAKE_GOLD = 100


def moved(tables: dict[str, list[str]], before: int) -> list[str]:
    """The tables whose partition the change from ``before`` (0: unpartitioned) to AFTER moves."""
    return [t for t in tables if before == 0 or partition_of(t, before) != partition_of(t, AFTER)]


async def play_hand(backend: Backend, table_id: str) -> None:
    """One hold'em hand of two: whoever acts first folds, and the hand ends."""
    await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
    state = await backend.state(table_id)
    (seat,) = state.to_act
    player = next(s.player_id for s in state.table.seats if s.seat == seat)
    await backend.act(table_id, player, seat, bet(seat, "fold"))
    assert (await backend.state(table_id)).table.status == pb.TABLE_STATUS_WAITING


async def hands_ended(settings: Settings) -> set[str]:
    """Every HandEnded on the stream, read by a process that started after the change."""
    nc = await connect(settings.effective_nats_url, name="repartition-test")
    try:
        log = EventLog(nc, settings.events_stream, settings.events_prefix)
        return {s.event.hand_id async for s in log.read(f"{log.prefix}.>") if isinstance(s.event.body, HandEnded)}
    finally:
        await nc.close()


async def settled(r: Running) -> tuple[int, int]:
    return await r.apps["settlement"].store.counts()  # type: ignore[no-any-return]


async def durable_names(settings: Settings) -> set[str]:
    nc = await connect(settings.effective_nats_url, name="repartition-test")
    try:
        return {c.name for c in await nc.jetstream().consumers_info(settings.events_stream)}
    finally:
        await nc.close()


async def socai_audit(settings: Settings) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings.as_env(), "SOCAI_LOG_LEVEL": "warning"}
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "socai_cli.main", "audit"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("before", [4, 0])
async def test_tables_with_history_play_on_settle_once_and_audit_clean_after_p_changes(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, before: int
):
    settings = service_settings(nats_url, migrated_database_url, stream_spec, event_partitions=before)
    await provision_streams(settings)
    players: dict[str, list[str]] = {}  # seated now, by table
    seated_ever: dict[str, list[str]] = {}
    wallets: dict[str, int] = {}  # every player's deposits

    # --- before: tables with seated players and finished hands ---------------------------
    async with running(settings, SERVICES) as r:
        backend = Backend(r.settings)
        try:
            # Until a table changes partition (each does with probability 1/2 from 4 to 8): six
            # tables alone all stay put once in 64 runs, and then the test would prove nothing.
            while len(players) < TABLES or not moved(players, before):
                assert len(players) < 4 * TABLES, "no table id changes partition: is partition_of sound?"
                table_id = await backend.create("holdem", stake_gold=STAKE_GOLD, seats_max=2)
                players[table_id] = [f"{table_id}-a", f"{table_id}-b"]
                seated_ever[table_id] = list(players[table_id])
                for seat, player in enumerate(players[table_id]):
                    await backend.deposit(player, 3 * BUY_IN_GOLD)
                    await backend.join(table_id, player, BUY_IN_GOLD, seat=seat)
                    wallets[player] = 3 * BUY_IN_GOLD
                for _ in range(2):
                    await play_hand(backend, table_id)
            first = next(iter(players))
            await backend.leave(first, players[first][1])  # cashed out once its hands are settled
            players[first] = players[first][:1]

            async def all_settled_before() -> bool:
                return (await settled(r))[0] == 2 * len(players)

            await wait_for(all_settled_before, 120, "the hands before the change to settle")
        finally:
            await backend.close()
    assert moved(players, before), "some table must change partition, or the test proves nothing"

    # --- the migration: drained, P changed, services started again ------------------------
    after = dataclasses.replace(settings, event_partitions=AFTER)
    await provision_streams(after, allow_repartition=True)
    durables = await durable_names(after)
    # P = 4: the four durables stay where they are (the change); P = 0: ``settlement`` is gone.
    assert durables == ({f"settlement-p{k}" for k in range(before)} if before else set())
    ended_before = settlement_metrics.MESSAGES_HAND_ENDED._value.get()

    async with running(after, SERVICES) as r:
        backend = Backend(r.settings)
        try:
            for table_id, seated in players.items():
                state = await backend.state(table_id)  # rebuilt from the stream, across partitions
                assert sorted(s.player_id for s in state.table.seats) == sorted(seated), table_id
                assert state.table.hands_played == 2, table_id
            first = next(iter(players))
            newcomer = f"{first}-c"
            await backend.deposit(newcomer, 3 * BUY_IN_GOLD)
            await backend.join(first, newcomer, BUY_IN_GOLD, seat=1)  # the facts' first append after the change
            wallets[newcomer] = 3 * BUY_IN_GOLD
            players[first].append(newcomer)
            seated_ever[first].append(newcomer)
            for table_id in players:
                for _ in range(2):
                    await play_hand(backend, table_id)
            for table_id, seated in players.items():
                for player in seated:
                    await backend.leave(table_id, player)

            ended = await hands_ended(after)
            assert len(ended) == 4 * len(players)

            async def all_settled() -> bool:
                return (await settled(r))[0] >= len(ended)

            await wait_for(all_settled, 120, "every hand to settle")
            assert await settled(r) == (len(ended), 0)  # each once, nothing dead-lettered
            # The new durables started at the change: only the hands played since were read.
            assert settlement_metrics.MESSAGES_HAND_ENDED._value.get() - ended_before == 2 * len(players)

            async def cashed_out() -> bool:
                escrows = [
                    await backend.balance(accounts.escrow(t, p)) for t, ever in seated_ever.items() for p in ever
                ]
                return not any(escrows)

            await wait_for(cashed_out, 120, "every player to be cashed out")
            # Gold only moved between the players and the house's fees: nothing lost or made.
            held = sum([await backend.balance(accounts.player(p)) for p in wallets])
            assert held + await backend.balance(accounts.HOUSE_FEES) == sum(wallets.values())
            assert all([await backend.balance(accounts.pot(t)) == 0 for t in players])

            audit = await socai_audit(after)
            assert audit.returncode == 0, audit.stdout + audit.stderr
            assert "mismatches: none; the audit is clean" in audit.stdout
            assert f"{len(ended)} hand transactions checked" in audit.stdout
        finally:
            await backend.close()


# --- the migration's guard and settlement's durables ----------------------------------------


@pytest.fixture
async def stream8(nats_url: str, stream_spec: StreamSpec, nats_client: NatsClient) -> AsyncIterator[Settings]:
    """A stream of P = 8 holding one message in every partition, and settlement's 8 durables."""
    settings = service_settings(nats_url, "postgresql://unused/none", stream_spec, event_partitions=8)
    await provision_streams(settings)
    js = nats_client.jetstream()
    tables = {partition_of(f"t{i}", 8): f"t{i}" for i in range(200)}
    assert len(tables) == 8
    for k in range(8):
        await js.publish(f"{settings.events_prefix}.{tables[k]}.{tables[k]}-h1", b"x", stream=settings.events_stream)
    yield settings
    await js.delete_stream(settings.events_stream)


async def add_durables(js: JetStreamContext, settings: Settings, partitions: int, policy: js_api.DeliverPolicy) -> None:
    for k in range(partitions):
        config = js_api.ConsumerConfig(
            durable_name=f"settlement-p{k}",
            deliver_policy=policy,
            ack_policy=js_api.AckPolicy.EXPLICIT,
            filter_subject=partition_filter(settings.events_prefix, k),
        )
        await js.add_consumer(settings.events_stream, config)


async def test_changing_p_is_refused_while_settlement_has_not_read_everything(
    stream8: Settings, nats_client: NatsClient
):
    js = nats_client.jetstream()
    await add_durables(js, stream8, 8, js_api.DeliverPolicy.ALL)  # one unread message each
    with pytest.raises(errors.PreconditionFailed) as refused:
        await provision_streams(dataclasses.replace(stream8, event_partitions=4), allow_repartition=True)
    assert refused.value.code == "SETTLEMENT_LAG_NOT_ZERO"
    info = await js.stream_info(stream8.events_stream)
    assert partitions_of(info.config, stream8.events_prefix) == 8  # nothing changed
    assert len(await js.consumers_info(stream8.events_stream)) == 8


async def test_a_durable_p_brings_back_starts_after_the_change_and_reads_no_hand_twice(
    stream8: Settings, nats_client: NatsClient
):
    js = nats_client.jetstream()
    await add_durables(js, stream8, 8, js_api.DeliverPolicy.NEW)  # drained: lag 0
    await provision_streams(dataclasses.replace(stream8, event_partitions=4), allow_repartition=True)
    assert {c.name for c in await js.consumers_info(stream8.events_stream)} == {f"settlement-p{k}" for k in range(4)}
    last = (await js.stream_info(stream8.events_stream)).state.last_seq
    await provision_streams(stream8, allow_repartition=True)  # back to 8
    for k in range(4, 8):
        # partition k holds a hand from the first P = 8: a new durable from the start would read it again
        consumer = await js.consumer_info(stream8.events_stream, f"settlement-p{k}")
        assert consumer.config.opt_start_seq == last + 1 and consumer.num_pending == 0
    for k in range(4):
        assert (await js.consumer_info(stream8.events_stream, f"settlement-p{k}")).config.deliver_policy == (
            js_api.DeliverPolicy.NEW
        )
