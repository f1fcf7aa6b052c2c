"""Attacks on the table service, each reproduced through the real service (issue 16).

Every test here failed on the code before its fix: free chips from a replayed join key,
one CreateTable stopping the service, seeds of hands in play readable from the database,
a watcher keeping a seat it left, and idempotency keys shared between players.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import grpc
import psycopg
import pytest

from socai import accounts, fairness
from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.db import libpq_url
from socai.infra.grpc_errors import error_reason
from socai.infra.nats import connect, ensure_stream
from socai_cli.embedded import free_port
from tests.integration.table.conftest import World, seat_players
from tests.support.clients import bet
from tests.support.services import build

pytestmark = pytest.mark.integration


async def refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def test_a_join_key_replayed_after_leaving_does_not_seat_the_player_again(world: World):
    """Defect 1, free chips: the ledger answers REPLAYED to the old key and moves nothing,
    so seating the player again would put 1,000 unbacked chips on the table."""
    w = world
    table_id = await w.backend.create("holdem", stake_gold=100, seats_max=6)
    await w.backend.deposit("mallory", 1000)
    assert await w.backend.join(table_id, "mallory", 1000, key="join-once") == 0
    # A retry while the seating lasts answers the same seat and moves nothing.
    assert await w.backend.join(table_id, "mallory", 1000, key="join-once") == 0
    assert await w.backend.balance(accounts.escrow(table_id, "mallory")) == 1000
    left = await w.backend.leave(table_id, "mallory")
    assert left.cashed_out and left.cash_out_gold == 1000
    assert await w.backend.balance(accounts.player("mallory")) == 1000

    error = await refused(w.backend.join(table_id, "mallory", 1000, key="join-once"))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(error) == "JOIN_KEY_USED"
    table = (await w.backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
    assert list(table.seats) == []
    assert await w.backend.balance(accounts.escrow(table_id, "mallory")) == 0
    assert await w.backend.balance(accounts.player("mallory")) == 1000
    # A new key is a new join, paid for by the wallet.
    assert await w.backend.join(table_id, "mallory", 600, key="join-twice") == 0
    assert await w.backend.balance(accounts.escrow(table_id, "mallory")) == 600


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({"stake_gold": 10**17}, "BAD_STAKE"),  # buy_in_max (100x) overflowed int64 in TableOpened
        ({"stake_gold": 100, "owner_player_id": "x" * 2_000_000}, "BAD_PLAYER_ID"),  # over NATS max payload
        ({"stake_gold": 100, "owner_player_id": "alice\x00"}, "BAD_PLAYER_ID"),
        ({"stake_gold": 100, "options": {"min_bet": "9" * 5000}}, "BAD_OPTION"),
    ],
)
async def test_a_create_table_that_cannot_be_recorded_is_refused_and_the_service_still_starts(
    world: World, config: dict[str, Any], reason: str
):
    """Defect 2: the bad table used to be stored, answer INTERNAL and stop every restart."""
    w = world
    request = pb.CreateTableRequest(table_id="badtable", config=pb.TableConfig(game="holdem", seats_max=6, **config))
    error = await refused(w.backend.table.CreateTable(request))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(error) == reason
    assert len(error.details() or "") < 2000  # the input is not echoed back
    assert await w.running.apps["table"].store.owner_of("badtable") is None
    # A second table service on the same database and stream starts and serves.
    again = await build("table", replace(w.running.settings, table_addr=f"127.0.0.1:{free_port()}"))
    try:
        await again.manager.start()
        assert not again.manager.broken
    finally:
        await again.manager.stop()
        await again.money.close()
        await again.store.close()
        await again.nc.drain()


async def test_a_table_whose_first_event_cannot_be_written_is_not_left_stored(world: World):
    """Defect 2, second half: a table that cannot be opened must not exist."""
    w = world
    spec = w.running.settings.events_stream_spec()
    harness = await connect(w.running.settings.nats_url or "", name="test-harness")  # the test may delete streams
    js = harness.jetstream()
    await js.delete_stream(spec.name)  # every append now fails
    try:
        error = await refused(
            w.backend.table.CreateTable(
                pb.CreateTableRequest(table_id="nostream", config=pb.TableConfig(game="holdem", stake_gold=100))
            )
        )
        assert error.code() != grpc.StatusCode.OK
    finally:
        await ensure_stream(js, spec)
        await harness.close()
    assert await w.running.apps["table"].store.owner_of("nostream") is None


async def test_the_database_never_holds_the_seed_of_a_hand_in_play(world: World):
    """Defect 3: whoever could read socai_table.hand_seeds during a hand (the auditor role,
    a backup) could shuffle the deck and see every card before it is dealt."""
    w = world
    table_id, _ = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    started = (await w.log.read_hand(table_id, hand_id))[0].event.body
    async with await psycopg.AsyncConnection.connect(libpq_url(w.running.settings.database_url or "")) as conn:
        cursor = await conn.execute("select seed from socai_table.hand_seeds where hand_id = %s", (hand_id,))
        row = await cursor.fetchone()
    assert row is not None
    stored = bytes(row[0])
    assert fairness.commitment(stored) != started.deck_commitment
    # The table itself still deals the committed deck (and reveals the seed at the end).
    await w.backend.act(table_id, "p0", 0, bet(0, "fold"))
    ended = (await w.log.read_hand(table_id, hand_id))[-1].event.body
    assert fairness.commitment(bytes.fromhex(ended.deck_seed)) == started.deck_commitment


async def first_deal(stream: Any) -> epb.CardsDealt:
    async for message in stream:
        if message.event.WhichOneof("body") == "cards_dealt":
            return message.event.cards_dealt
    raise AssertionError("no deal")


async def test_a_watcher_who_left_their_seat_does_not_see_the_next_occupants_cards(world: World):
    """Defect 4: visibility is decided per event from the seat the viewer holds now."""
    w = world
    table_id, (a, _b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    stream = w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id, player_token=await w.backend.token(a)))
    await asyncio.sleep(0.2)  # the stream is open while a still holds seat 0
    assert (await w.backend.leave(table_id, a)).cashed_out
    await w.backend.deposit("carol", 2000)
    assert await w.backend.join(table_id, "carol", 1000, seat=0) == 0
    await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
    dealt = await asyncio.wait_for(first_deal(stream), 10)
    stream.cancel()
    assert [c.card for c in dealt.cards] == [""] * len(dealt.cards)
    # The new occupant does see their own cards.
    state = await w.backend.state(table_id, "carol")
    assert {c.seat for e in state.events for c in e.cards_dealt.cards if c.card} == {0}


async def test_act_keys_belong_to_their_player(world: World):
    """Defect 7: another player's key neither replays their result nor blocks yours."""
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    first = await w.backend.act(table_id, a, 0, bet(0, "call", 10), key="shared-key")
    second = await w.backend.act(table_id, b, 1, bet(1, "check"), key="shared-key")
    assert second.seq == first.seq + 1  # b's own check, not a's call replayed
    bodies = [s.event.body for s in await w.log.read_hand(table_id, hand_id)]
    assert [(type(x).__name__, x.seat, x.kind) for x in bodies if type(x).__name__ == "BetAction"] == [
        ("BetAction", 0, "call"),
        ("BetAction", 1, "check"),
    ]
    # Each player's own retry still answers their own result.
    assert (await w.backend.act(table_id, b, 1, bet(1, "check"), key="shared-key")).seq == second.seq


async def test_join_keys_belong_to_their_player(world: World):
    """Defect 7: a key another player used is not refused for you."""
    w = world
    table_id = await w.backend.create("holdem", stake_gold=100, seats_max=6)
    for player in ("ann", "ben"):
        await w.backend.deposit(player, 1000)
    assert await w.backend.join(table_id, "ann", 500, key="same") == 0
    assert await w.backend.join(table_id, "ben", 700, key="same") == 1
    assert await w.backend.balance(accounts.escrow(table_id, "ann")) == 500
    assert await w.backend.balance(accounts.escrow(table_id, "ben")) == 700


async def test_a_watcher_who_hangs_up_mid_stream_is_a_cancelled_call_not_an_internal_error(world: World):
    """Issue 17, defect 7: cancelling WatchTable logged an ERROR with a GeneratorExit
    traceback and counted as INTERNAL."""
    import logging

    import structlog
    from structlog.testing import capture_logs

    w = world
    table_id, _ = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
    previous = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with capture_logs() as logs:
            for _ in range(5):
                stream = w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id))
                async for _message in stream:
                    break  # hang up while the server still has the snapshot to send
                stream.cancel()
            await asyncio.sleep(0.5)
    finally:
        structlog.configure(wrapper_class=previous)
    assert [entry for entry in logs if entry["event"] == "rpc_failed"] == []
    statuses = {entry["status"] for entry in logs if entry["event"] == "rpc" and "WatchTable" in entry["method"]}
    assert "INTERNAL" not in statuses and "UNKNOWN" not in statuses


async def test_a_join_retried_after_its_seating_was_written_but_not_acknowledged_answers_its_seat(world: World):
    """Found by `make chaos`: NATS killed between the PlayerSeated append and its ack left the
    join pending though the player sat; the retry with the same key answered ALREADY_SEATED
    and used the key up. The retry now recognises its own seating (same ledger buy-in)."""
    w = world
    table_id = await w.backend.create("holdem", stake_gold=100, seats_max=6)
    await w.backend.deposit("dora", 1000)
    assert await w.backend.join(table_id, "dora", 500, seat=2, key="j-lost-ack") == 2
    async with await psycopg.AsyncConnection.connect(
        libpq_url(w.running.settings.database_url or ""), autocommit=True
    ) as conn:
        await conn.execute(
            "update socai_table.joins set status = 'pending', ledger_transaction_id = '' where idempotency_key = %s",
            ("dora/j-lost-ack",),
        )
    assert await w.backend.join(table_id, "dora", 500, seat=2, key="j-lost-ack") == 2
    assert await w.backend.balance(accounts.escrow(table_id, "dora")) == 500  # paid once
    # Another key is still a second join, refused while seated.
    error = await refused(w.backend.join(table_id, "dora", 500, key="j-other"))
    assert error_reason(error) == "ALREADY_SEATED"


async def joins_recorded(w: World, table_id: str) -> int:
    async with await psycopg.AsyncConnection.connect(libpq_url(w.running.settings.database_url or "")) as conn:
        row = await (
            await conn.execute("select count(*) from socai_table.joins where table_id = %s", (table_id,))
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("seat", [-2, -7, -(2**31), 6])
async def test_a_join_to_a_seat_that_is_not_one_is_refused_and_changes_nothing(world: World, seat: int):
    """Issue 27, item 5: -2 used to mean "any free seat" like -1 (and a seat past the table
    recorded the join before it was refused)."""
    w = world
    table_id = await w.backend.create("holdem", stake_gold=100, seats_max=6)
    await w.backend.deposit("nina", 1000)
    error = await refused(w.backend.join(table_id, "nina", 1000, seat=seat, key="nina-1"))
    assert (error.code(), error_reason(error)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_SEAT")
    table = (await w.backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
    assert list(table.seats) == [] and await joins_recorded(w, table_id) == 0
    assert await w.backend.balance(accounts.player("nina")) == 1000
    assert await w.backend.balance(accounts.escrow(table_id, "nina")) == 0
    # -1 is "any free seat"; the same key works, as nothing was recorded under it.
    assert await w.backend.join(table_id, "nina", 1000, seat=-1, key="nina-1") == 0


@pytest.mark.parametrize("player", [".", "..", "..."])
async def test_a_player_id_of_dots_alone_is_refused(world: World, player: str):
    """Issue 27, item 5: ``..`` was a player (account ``player:..``)."""
    w = world
    error = await refused(w.backend.table.IssuePlayerToken(pb.IssuePlayerTokenRequest(player_id=player)))
    assert (error.code(), error_reason(error)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_PLAYER_ID")
    error = await refused(w.backend.deposit(player, 100))
    assert (error.code(), error_reason(error)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_ACCOUNT_ID")
    assert await w.backend.balance(accounts.EXTERNAL_CASHIER) == 0
    # Dots beside other characters are a player id as before.
    await w.backend.table.IssuePlayerToken(pb.IssuePlayerTokenRequest(player_id=f"{player}x"))
