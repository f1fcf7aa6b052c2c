"""The table's cash-out worker backs off a cash-out whose hand is not settled yet (issue 17,
defect 6: while settlement restarted, the poller asked about every pending cash-out four
times a second), without delaying a cash-out that can complete: a new one is done at once,
and the waiting one completes soon after its hand is settled.

Real ledger and table services, and a real settlement service whose gRPC answers
GetSettlement (NOT_FOUND: nothing settled yet) while its consumer is not running — as
during a settlement restart; then the consumer starts and settles the hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator

import pytest

from socai import accounts
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec
from socai_settlement.app import App
from socai_settlement.app import build_app as build_settlement
from socai_table.manager import CASHOUT_BACKOFF_MAX_S
from tests.support.clients import Backend, bet
from tests.support.services import Running, running, service_settings
from tests.support.settlement import wait_for

pytestmark = pytest.mark.integration

WATCH_S = 8.0  # long enough for five back-offs: 0.25 + 0.5 + 1 + 2 + 4 s


@pytest.fixture
async def services(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[Running]:
    settings = service_settings(nats_url, migrated_database_url, stream_spec)
    async with running(settings, ("ledger", "table")) as r:
        yield r
        await r.delete_streams(stream_spec.name)


@contextlib.asynccontextmanager
async def settlement_answering_only(r: Running) -> AsyncIterator[tuple[App, asyncio.Event]]:
    """The settlement service with its gRPC server up and its consumer not running yet
    (start it with ``app.workers.run(stop)``)."""
    app = await build_settlement(r.settings)
    stop = asyncio.Event()
    await app.settler.replayer.start()
    await app.grpc.server.start()
    await app.grpc.set_serving(True)
    try:
        yield app, stop
    finally:
        stop.set()
        await app.stop()


async def test_an_unsettled_cash_out_is_asked_about_with_growing_pauses_and_completes_once_settled(
    services: Running,
) -> None:
    r = services
    manager = r.apps["table"].manager
    backend = Backend(r.settings)
    asked: list[tuple[float, str, bool]] = []
    money = manager.deps.money
    is_settled = money.is_settled

    async def recording_is_settled(hand_id: str) -> bool:
        # The real gRPC call to the real settlement service; only the times are recorded.
        answer = await is_settled(hand_id)
        asked.append((time.monotonic(), hand_id, answer))
        return answer

    money.is_settled = recording_is_settled  # type: ignore[method-assign]
    try:
        async with settlement_answering_only(r) as (settlement, stop):
            table_id = await backend.create("holdem", owner_player_id="a", stake_gold=100, seats_max=2)
            for seat, player in enumerate(("a", "b")):
                await backend.deposit(player, 2000)
                assert await backend.join(table_id, player, 1000, seat=seat) == seat
            hand_id = (await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
            await backend.act(table_id, "a", 0, bet(0, "fold"))  # b wins the small blind's 10

            left = await backend.leave(table_id, "b")
            assert (left.cash_out_gold, left.cashed_out) == (1010, False)  # the hand is not settled
            await asyncio.sleep(WATCH_S - 2.0)  # LeaveTable already waited its 2 s

            # Meanwhile a cash-out that needs no settlement (no hand played) is done at once,
            # backed-off neighbour or not.
            other = await backend.create("holdem", owner_player_id="c", stake_gold=100, seats_max=2)
            await backend.deposit("c", 500)
            await backend.join(other, "c", 500, seat=0)
            reply = await backend.leave(other, "c")
            assert reply.cashed_out and reply.cash_out_gold == 500  # in LeaveTable's own answer
            assert await backend.balance(accounts.player("c")) == 500

            times = [t for t, h, answer in asked if h == hand_id and not answer]
            assert all(h == hand_id and not answer for _, h, answer in asked)
            pauses = [b - a for a, b in itertools.pairwise(times)]
            # About five tries in 8 s (0.25, 0.5, 1, 2, 4 s apart), where polling every
            # 0.25 s (and at every one of LeaveTable's kicks) asked over thirty times.
            # Counted, not timed (a loaded machine stretches any one pause): few asks, and the
            # pauses grow from the first to the last (the schedule itself: test_cashout_retries_double_up_to_the_cap).
            assert 3 <= len(times) <= 8, pauses
            assert pauses[-1] > pauses[0], pauses

            # Settlement catches up: the cash-out completes at its next try.
            consumer = asyncio.create_task(settlement.workers.run(stop))
            try:

                async def cashed_out() -> bool:
                    return await backend.balance(accounts.player("b")) == 1000 + 1010

                await wait_for(cashed_out, CASHOUT_BACKOFF_MAX_S + 10, "b's cash-out")
            finally:
                stop.set()
                await consumer
            assert asked[-1][1:] == (hand_id, True)
            assert await backend.balance(accounts.escrow(table_id, "b")) == 0
    finally:
        money.is_settled = is_settled  # type: ignore[method-assign]
        await backend.close()
