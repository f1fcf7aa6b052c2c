"""Foreign and broken messages on a table's subjects are quarantined, never applied (issue 17, defect 1).

Before: an event appended after a hand's HandEnded, or garbage bytes, on a table's last hand
made the table service exit at start, and the same message in a live hand made every Act
and LeaveTable fail. Now only what the table service wrote (signed) and the rules accept
is a fact: anything else is skipped and recorded with its table, hand, stream sequence and
reason, and the table goes on from its last valid state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import grpc
import psycopg_pool
import pytest

from socai import errors
from socai.events import codec
from socai.events.model import ActionKind, BetAction, Event
from socai.gen.table.v1 import table_pb2 as pb
from socai_cli.embedded import free_port
from tests.integration.infra.lease_support import wait_until
from tests.integration.table.conftest import World, seat_players
from tests.support.clients import bet
from tests.support.services import build

pytestmark = pytest.mark.integration


async def publish_raw(w: World, table_id: str, hand_id: str, data: bytes) -> int:
    """A stranger's publish onto the table's subject: no signature, no expected sequence."""
    js = w.running.apps["table"].nc.jetstream()
    ack = await js.publish(w.log.subject_of(table_id, hand_id), data, stream=w.running.settings.events_stream)
    return int(ack.seq)


async def restarted_table_service(w: World, store: Callable[[Any], Any] | None = None) -> Any:
    """A second table service on the same database and stream that takes over the first
    one's tables: the first gives its leases up, the second acquires them and rebuilds every
    table from the log (through ``store``'s wrapper of its store, when given)."""
    await w.running.apps["table"].ownership.stop()
    app: Any = await build("table", replace(w.running.settings, table_addr=f"127.0.0.1:{free_port()}"))
    if store is not None:
        app.manager.deps = replace(app.manager.deps, store=store(app.manager.deps.store))
    await app.manager.start()
    await app.ownership.start(wait_s=10)
    return app


async def stop(app: object) -> None:
    await app.ownership.stop()  # type: ignore[attr-defined]
    await app.manager.stop()  # type: ignore[attr-defined]
    await app.money.close()  # type: ignore[attr-defined]
    await app.store.close()  # type: ignore[attr-defined]
    await app.nc.drain()  # type: ignore[attr-defined]


async def one_finished_hand(w: World) -> tuple[str, str]:
    table_id, _ = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    await w.backend.act(table_id, "p0", 0, bet(0, "fold"))
    return table_id, hand_id


@pytest.mark.parametrize("kind", ["event_after_hand_ended", "garbage"])
async def test_a_stranger_on_the_last_hand_does_not_stop_the_table_service(world: World, kind: str):
    w = world
    table_id, hand_id = await one_finished_hand(w)
    if kind == "garbage":
        data = b"\x00not an event\xff"
    else:
        late = Event(table_id, hand_id, 99, "holdem", datetime.now(UTC), BetAction(0, ActionKind.CHECK))
        data = codec.encode(late)
    stream_seq = await publish_raw(w, table_id, hand_id, data)

    app = await restarted_table_service(w)
    try:
        manager = app.manager  # type: ignore[attr-defined]
        assert table_id in manager.tables and not manager.broken
        records = await manager.deps.store.quarantined(table_id)
        assert [(r["stream_seq"], r["hand_id"]) for r in records] == [(stream_seq, hand_id)]
        assert records[0]["reason"] == "UNSIGNED"
        # The table goes on: its next hand starts and is written after the stranger's message.
        table = manager.tables[table_id]
        next_hand = await table.start_hand()
        assert next_hand != hand_id
    finally:
        await stop(app)


async def test_a_stranger_in_a_live_hand_is_skipped_and_play_goes_on(world: World):
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    stored = await w.log.read_hand(table_id, hand_id)
    # A forged "fold" for seat 1 with the very event id the table's next event will have.
    forged = Event(table_id, hand_id, len(stored) + 1, "holdem", datetime.now(UTC), BetAction(1, ActionKind.FOLD))
    stream_seq = await publish_raw(w, table_id, hand_id, codec.encode(forged))

    # The table's next append finds the subject moved on: that call is ABORTED, the table
    # rebuilds, quarantines the stranger, and the player's retry is applied.
    for attempt in range(3):
        try:
            await w.backend.act(table_id, a, 0, bet(0, "call", 10), key="call-1", hand_id=hand_id)
            break
        except grpc.aio.AioRpcError as exc:
            assert exc.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE), exc
            await asyncio.sleep(0.2 * (attempt + 1))
    await w.backend.act(table_id, b, 1, bet(1, "check"), hand_id=hand_id)
    state = await w.backend.state(table_id)
    assert state.hand_id == hand_id and list(state.to_act) == [1]  # the flop: b acts first
    records = await w.running.apps["table"].manager.deps.store.quarantined(table_id)
    assert [(r["stream_seq"], r["reason"]) for r in records] == [(stream_seq, "UNSIGNED")]
    # Nothing the stranger wrote is a fact: seat 1 did not fold.
    table = w.running.apps["table"].manager.tables[table_id]
    assert not any(
        isinstance(e.body, BetAction) and e.body.seat == 1 and e.body.kind == ActionKind.FOLD for e in table.hand.events
    )


async def test_a_rotated_player_token_key_keeps_every_table_whole_while_the_old_key_is_accepted(world: World):
    """The player-token key keys the writer signature checked on every load and the seeds'
    pads: a table service that signs with a new key loads its tables (seats, the hand in
    play and its seed) from what the old key signed, as long as the old key is accepted
    (``SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED``); without it, every fact would be quarantined."""
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    last_seq = max(s.stream_seq for s in await w.log.read_hand(table_id, hand_id))
    old = w.running.settings.player_token_key
    rotated = replace(
        w.running.settings,
        player_token_key="rotated-player-token-key",
        player_token_keys_accepted=((old, last_seq),),
    )
    await w.running.apps["table"].ownership.stop()
    app = await build("table", replace(rotated, table_addr=f"127.0.0.1:{free_port()}"))
    await app.manager.start()  # type: ignore[attr-defined]
    await app.ownership.start(wait_s=10)  # type: ignore[attr-defined]
    try:
        manager = app.manager  # type: ignore[attr-defined]
        table = await manager.get(table_id)
        assert await manager.deps.store.quarantined(table_id) == []
        assert {s.player_id for s in table.seats.values()} == {a, b}
        assert table.hand is not None and table.hand.hand_id == hand_id  # its seed read with the old key
        await table.act(a, hand_id, 0, BetAction(0, ActionKind.FOLD), "k-fold")  # written under the new key
        stored = await w.log.read_hand(table_id, hand_id)
        assert type(stored[-1].event.body).__name__ == "HandEnded"
        seq = len(stored)
        await manager.drop(lambda t: t == table_id)
        again = await manager.get(table_id)  # both keys' events read back
        assert again.last_hand is not None and len(again.last_hand.events) == seq
        assert await manager.deps.store.quarantined(table_id) == []
    finally:
        await stop(app)


class StoreAway:
    """The table store, with PostgreSQL away for ``table_id``'s first ``times`` reads of its
    closing row (what a rebuild reads first): ``PoolTimeout``, as a database restart gives."""

    def __init__(self, store: Any, table_id: str, times: int) -> None:
        self._store, self._table_id, self.times = store, table_id, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def closing_reason(self, table_id: str) -> str | None:
        if table_id == self._table_id and self.times > 0:
            self.times -= 1
            raise psycopg_pool.PoolTimeout("couldn't get a connection after 5.00 sec")
        return await self._store.closing_reason(table_id)


async def test_a_table_whose_rebuild_meets_a_database_outage_is_rebuilt_once_it_is_back(world: World):
    """An outage while a table is rebuilt (the partition taken during a database restart)
    defers the table, never marks it broken (a broken table refuses every call until its
    partition moves): a call meanwhile answers UNAVAILABLE with a retry delay, and the
    watchdog rebuilds it when the database answers again."""
    w = world
    table_id, hand_id = await one_finished_hand(w)
    app = await restarted_table_service(w, store=lambda store: StoreAway(store, table_id, times=3))
    try:
        manager = app.manager
        assert table_id not in manager.broken and table_id in manager.deferred
        with pytest.raises(errors.Unavailable) as raised:
            await manager.get(table_id)
        assert raised.value.code == "TABLE_UNAVAILABLE" and raised.value.details["retry_after_ms"]
        await wait_until(lambda: table_id in manager.tables, "the deferred table rebuilt", deadline_s=20)
        assert manager.deps.store.times == 0 and not manager.deferred and not manager.broken
        assert await manager.tables[table_id].start_hand() != hand_id  # and it plays on
    finally:
        await stop(app)


class ConfigGate:
    """The table store, whose read of ``table_id``'s config waits at ``gate`` once armed:
    the window in which a caller has found no table and has not loaded it yet."""

    def __init__(self, store: Any, table_id: str) -> None:
        self._store, self._table_id = store, table_id
        self.armed, self.entered, self.gate = False, asyncio.Event(), asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def config_of(self, table_id: str) -> Any:
        if table_id == self._table_id and self.armed:
            self.entered.set()
            await self.gate.wait()
        return await self._store.config_of(table_id)


async def test_a_caller_that_found_no_table_gets_the_one_loaded_meanwhile_not_a_second(world: World):
    """A call that finds no table, then waits on the store while the table is loaded, must
    be given the loaded object: a second object's rebuild repairs the joins the first is
    seating (a nemesis run's buy-in was refunded while its player sat down on it, and the
    ledger refused the player's next hands for want of the gold)."""
    w = world
    table_id, _ = await one_finished_hand(w)
    app = await restarted_table_service(w, store=lambda store: ConfigGate(store, table_id))
    try:
        manager = app.manager
        config = manager.tables[table_id].config
        await manager._retire(table_id)  # as if not loaded yet
        built: list[object] = []
        new_table = manager._new_table

        def counted(*args: Any) -> Any:
            built.append(new_table(*args))
            return built[-1]

        manager._new_table = counted
        store = manager.deps.store
        store.armed = True
        caller = asyncio.create_task(manager.get(table_id))
        await asyncio.wait_for(store.entered.wait(), 10)
        loaded = await manager._load(table_id, config)  # the partition's load, meanwhile
        store.gate.set()
        assert await caller is loaded and manager.tables[table_id] is loaded
        assert built == [loaded]  # one object of the tenure, rebuilt once
    finally:
        await stop(app)
