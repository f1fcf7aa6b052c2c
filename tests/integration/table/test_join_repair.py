"""A join cut between its buy-in and its seat (a crash, or an append that timed out while
NATS was paused) is finished when the table is loaded again: seated, never refunded while
its seat could still land in the log (the nemesis hour's lost gold: a PlayerSeated that
arrived after the refund), and refunded only when the table cannot seat it."""

from __future__ import annotations

import asyncio

import pytest

from socai import accounts, errors
from socai.client import TableError
from socai.events import codec
from socai.events.model import Event, PlayerSeated
from socai_table.model import buy_in_key, facts_id_of, join_key
from tests.integration.table.conftest import World
from tests.integration.table.test_client_contract import client_of

pytestmark = pytest.mark.integration

BUY_IN = 1_000


async def cut_join(w: World, table_id: str, player: str, client_key: str, guild_id: str = "") -> str:
    """What a join leaves when it stops after the ledger moved its buy-in: a pending row
    and the transfer, no PlayerSeated. Returns the stored join key."""
    deps = w.running.apps["table"].manager.deps
    key = join_key(player, client_key)
    await deps.store.begin_join(key, table_id, player, -1, BUY_IN, guild_id)
    await deps.money.transfer(
        buy_in_key(key, table_id),
        accounts.player(player),
        accounts.escrow(table_id, player),
        BUY_IN,
        "buy_in",
        table_id,
    )
    return key


async def reload(w: World, table_id: str) -> None:
    manager = w.running.apps["table"].manager
    await manager.drop(lambda t: t == table_id)
    await manager.get(table_id)


async def test_a_cut_join_is_seated_at_the_next_load_and_its_late_seat_can_never_land(world: World):
    w = world
    manager = w.running.apps["table"].manager
    async with client_of(w) as tables:
        table = await tables.create_table(game="holdem", stake_gold=10, seats_max=3)
        await w.backend.deposit("rj-cut", BUY_IN)
        facts_seq = manager.tables[table.table_id].facts_subject_seq
        await cut_join(w, table.table_id, "rj-cut", "k1")
        await reload(w, table.table_id)

        seats = {s.player_id: s for s in (await tables.table(table.table_id)).seats}
        assert seats["rj-cut"].stack_gold == BUY_IN
        assert await w.backend.balance(accounts.escrow(table.table_id, "rj-cut")) == BUY_IN
        assert await w.backend.balance(accounts.player("rj-cut")) == 0
        again = await tables.join(table.table_id, "rj-cut", BUY_IN, key="k1")  # the client's retry
        assert again.seat == seats["rj-cut"].seat

        # The cut join's own PlayerSeated, arriving late at the position it expected, is refused.
        late = Event(
            table.table_id,
            facts_id_of(table.table_id),
            2,
            "holdem",
            codec.now(),
            PlayerSeated(seats["rj-cut"].seat, "rj-cut", BUY_IN, "", ""),
        )
        with pytest.raises(errors.Conflict):
            await w.log.append(late, facts_seq)


async def test_a_cut_join_the_table_cannot_seat_any_more_is_refunded(world: World):
    w = world
    async with client_of(w) as tables:
        table = await tables.create_table(game="holdem", stake_gold=10, seats_max=2)
        for player in ("rj-a", "rj-b", "rj-late"):
            await w.backend.deposit(player, BUY_IN)
        await cut_join(w, table.table_id, "rj-late", "k1")
        await tables.join(table.table_id, "rj-a", BUY_IN)  # the table fills meanwhile
        await tables.join(table.table_id, "rj-b", BUY_IN)
        await reload(w, table.table_id)

        assert {s.player_id for s in (await tables.table(table.table_id)).seats} == {"rj-a", "rj-b"}
        assert await w.backend.balance(accounts.player("rj-late")) == BUY_IN
        assert await w.backend.balance(accounts.escrow(table.table_id, "rj-late")) == 0
        with pytest.raises(TableError) as retried:
            await tables.join(table.table_id, "rj-late", BUY_IN, key="k1")
        assert retried.value.reason == "JOIN_FAILED"


async def test_a_join_cut_while_the_table_runs_is_seated_by_the_rebuild_of_the_next_command(world: World):
    """The join's append failed (the table marked itself dirty), its row pending: the next
    command's rebuild finishes it, without waiting for the table to be loaded again."""
    w = world
    manager = w.running.apps["table"].manager
    async with client_of(w) as tables:
        table = await tables.create_table(game="holdem", stake_gold=10, seats_max=3)
        for player in ("rj-cut2", "rj-next"):
            await w.backend.deposit(player, BUY_IN)
        await cut_join(w, table.table_id, "rj-cut2", "k1")
        manager.tables[table.table_id].dirty = True  # what the failed append left
        await tables.join(table.table_id, "rj-next", BUY_IN)

        seats = {s.player_id: s.stack_gold for s in (await tables.table(table.table_id)).seats}
        assert seats == {"rj-cut2": BUY_IN, "rj-next": BUY_IN}
        assert await w.backend.balance(accounts.escrow(table.table_id, "rj-cut2")) == BUY_IN


async def test_a_cut_join_of_a_player_seated_since_by_another_join_is_refunded(world: World):
    """The bot gave up on the cut join and joined again with a new key: its seat is the new
    join's, and the cut join's buy-in goes back to the wallet (the nemesis hour's escrow
    that held a buy-in no seat had)."""
    w = world
    async with client_of(w) as tables:
        table = await tables.create_table(game="holdem", stake_gold=10, seats_max=3)
        await w.backend.deposit("rj-twice", 2 * BUY_IN)
        await cut_join(w, table.table_id, "rj-twice", "k1")
        await tables.join(table.table_id, "rj-twice", BUY_IN, key="k2")
        await reload(w, table.table_id)

        seats = {s.player_id: s.stack_gold for s in (await tables.table(table.table_id)).seats}
        assert seats == {"rj-twice": BUY_IN}
        assert await w.backend.balance(accounts.escrow(table.table_id, "rj-twice")) == BUY_IN
        assert await w.backend.balance(accounts.player("rj-twice")) == BUY_IN


async def test_a_cut_join_at_a_table_that_closes_is_refunded_when_the_close_ends(world: World):
    """Nobody loads a closed table again, so the close's end finishes the joins it left: the
    buy-in goes back to the wallet once TableClosed is in the log."""
    w = world
    manager = w.running.apps["table"].manager
    table_id = await w.backend.create("holdem", stake_gold=10, seats_max=3)
    await w.backend.deposit("rj-closed", BUY_IN)
    await cut_join(w, table_id, "rj-closed", "k1")
    await manager.tables[table_id].close("test")

    assert await w.backend.balance(accounts.escrow(table_id, "rj-closed")) == 0
    assert await w.backend.balance(accounts.player("rj-closed")) == BUY_IN


async def test_a_cut_join_at_a_closing_table_waits_for_table_closed_before_its_refund(world: World):
    """Closing is no fact in the log: refunded while the table is still closing, the join's
    late seat could land at the position it expected, seating chips no escrow backs. The
    repair leaves it pending until the close has written TableClosed, then refunds it."""
    w = world
    manager = w.running.apps["table"].manager
    table_id = await w.backend.create("holdem", stake_gold=10, seats_max=3, turn_timeout_s=1)
    for i, player in enumerate(("rj-p0", "rj-p1")):
        await w.backend.deposit(player, BUY_IN)
        await w.backend.join(table_id, player, BUY_IN, seat=i)
    await w.backend.deposit("rj-closing", BUY_IN)
    await manager.tables[table_id].start_hand()
    await cut_join(w, table_id, "rj-closing", "k1")
    await manager.tables[table_id].close("test")  # the hand in play plays to its end first
    await reload(w, table_id)  # the repair at the load finds the table closing

    table = manager.tables[table_id]
    assert table.closing and not table.closed
    assert await w.backend.balance(accounts.escrow(table_id, "rj-closing")) == BUY_IN
    assert await w.backend.balance(accounts.player("rj-closing")) == 0

    for _ in range(100):  # the hand ends by its timers, then the close completes
        if await w.backend.balance(accounts.player("rj-closing")) == BUY_IN:
            break
        await asyncio.sleep(0.1)
    assert await w.backend.balance(accounts.player("rj-closing")) == BUY_IN
    assert await w.backend.balance(accounts.escrow(table_id, "rj-closing")) == 0


async def test_a_cut_join_for_a_guild_is_seated_with_its_guild(world: World):
    """The repair seats from the join's row alone: the guild the join named (TX-6's guild
    share) is kept there with it."""
    w = world
    async with client_of(w) as tables:
        table = await tables.create_table(game="holdem", stake_gold=10, seats_max=3)
        await w.backend.deposit("rj-guild", BUY_IN)
        await cut_join(w, table.table_id, "rj-guild", "k1", guild_id="rong-vang")
        await reload(w, table.table_id)

        seats = {s.player_id: s.guild_id for s in (await tables.table(table.table_id)).seats}
        assert seats == {"rj-guild": "rong-vang"}


async def test_a_buy_in_sent_late_by_a_former_holder_is_refused_once_the_repair_found_it_missing(world: World):
    """The nemesis hour: a join's buy-in was still on its way from a table instance paused
    past its lease when the new holder's repair found no transfer and failed the join; then
    it landed: gold in escrow that no seat had (an escrow_mismatch at the player's cash-out).
    The table's transfers are posted under its partition's lease (a ledger fence), and the
    repair claims the partition before it decides: the late buy-in is refused, nothing moves."""
    w = world
    manager = w.running.apps["table"].manager
    deps = manager.deps
    async with client_of(w) as tables:
        table = await tables.create_table(game="holdem", stake_gold=10, seats_max=3)
        await w.backend.deposit("rj-late-buy", BUY_IN)
        key = join_key("rj-late-buy", "k1")
        await deps.store.begin_join(key, table.table_id, "rj-late-buy", -1, BUY_IN)  # paused before its buy-in
        await reload(w, table.table_id)  # the repair: a claim, no transfer, the join failed

        fence = manager.tables[table.table_id]._ledger_fence()
        assert fence is not None and fence[1] > 1
        partition, token = fence
        with pytest.raises(errors.Unavailable) as late:
            await deps.money.transfer(
                buy_in_key(key, table.table_id),
                accounts.player("rj-late-buy"),
                accounts.escrow(table.table_id, "rj-late-buy"),
                BUY_IN,
                "buy_in",
                table.table_id,
                fence=(partition, token - 1),  # the former holder's lease
            )
        assert late.value.code == "TABLE_NOT_HELD"
        assert await w.backend.balance(accounts.player("rj-late-buy")) == BUY_IN
        assert await w.backend.balance(accounts.escrow(table.table_id, "rj-late-buy")) == 0
        with pytest.raises(TableError) as retried:
            await tables.join(table.table_id, "rj-late-buy", BUY_IN, key="k1")
        assert retried.value.reason == "JOIN_FAILED"
        seated = await tables.join(table.table_id, "rj-late-buy", BUY_IN, key="k2")  # a new join: fenced, current
        assert await w.backend.balance(accounts.escrow(table.table_id, "rj-late-buy")) == BUY_IN
        assert seated.seat >= 0
