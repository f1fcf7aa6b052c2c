"""A command whose caller goes away halfway still finishes (``socai_table.table.run_to_end``).

gRPC cancels a handler when its client cancels or its deadline passes. A JoinTable cancelled
between the ledger's buy-in (wallet → escrow) and PlayerSeated used to leave the player's
gold in escrow with no seat until the service restarted (seen by the chaos run's final
audit as ESCROW_BALANCE). Real table service, ledger, NATS and PostgreSQL; the only thing
added is a pause after the real buy-in so the client can leave at that exact point.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from socai import accounts
from socai.gen.table.v1 import table_pb2 as pb
from tests.integration.table.conftest import World
from tests.support.settlement import wait_for


async def test_a_join_whose_caller_left_after_the_buy_in_seats_the_player_anyway(world: World) -> None:
    w = world
    table_id = await w.backend.create("holdem", stake_gold=10, seats_max=6)
    await w.backend.deposit("alice", 1_000)
    money = w.running.apps["table"].manager.deps.money
    real_transfer = money.transfer
    moved, release = asyncio.Event(), asyncio.Event()

    async def transfer_then_pause(*args: Any, **kwargs: Any) -> str:
        tx = await real_transfer(*args, **kwargs)
        moved.set()
        await release.wait()  # the client goes away here: the buy-in is done, the seat not yet
        return tx

    money.transfer = transfer_then_pause  # type: ignore[method-assign]
    key = uuid.uuid4().hex
    request = pb.JoinTableRequest(
        table_id=table_id,
        player_token=await w.backend.token("alice"),
        buy_in_gold=400,
        seat=2,
        idempotency_key=key,
    )
    call = w.backend.table.JoinTable(request)
    await asyncio.wait_for(moved.wait(), 30)
    call.cancel()
    await asyncio.sleep(0.5)  # the server hears of the cancellation before the buy-in returns
    release.set()
    money.transfer = real_transfer  # type: ignore[method-assign]

    async def seated() -> bool:
        state = await w.backend.state(table_id)
        return any(s.player_id == "alice" and s.seat == 2 for s in state.table.seats)

    await wait_for(seated, 30, "alice seated by the join her client left")
    assert await w.backend.balance(accounts.escrow(table_id, "alice")) == 400
    assert await w.backend.balance(accounts.player("alice")) == 600
    # A retry under the same key answers the seating, and moves nothing again.
    assert await w.backend.join(table_id, "alice", 400, seat=2, key=key) == 2
    assert await w.backend.balance(accounts.escrow(table_id, "alice")) == 400
