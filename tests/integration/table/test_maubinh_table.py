"""Mậu Binh at a real table (issue 13): every seat arranges at once, a seat whose window
runs out is arranged automatically (MB-20), and no other seat or spectator can read an
arrangement before the comparison, in GetTableState or WatchTable."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb
from socai.settle.replay import replay
from tests.integration.table.conftest import World, seat_players
from tests.support.clients import body_names

pytestmark = pytest.mark.integration

BUY_IN = 5_000


def arrangements(state: pb.TableState) -> dict[int, epb.Arranged]:
    return {e.arranged.seat: e.arranged for e in state.events if e.WhichOneof("body") == "arranged"}


def blank(arranged: epb.Arranged) -> bool:
    sizes = (len(arranged.back), len(arranged.middle), len(arranged.front))
    return sizes == (5, 5, 3) and all(c == "" for c in (*arranged.back, *arranged.middle, *arranged.front))


async def events_until_hand_ended(stream: AsyncIterator[pb.WatchTableResponse]) -> list[epb.Event]:
    seen = []
    async for message in stream:
        seen.append(message.event)
        if message.event.WhichOneof("body") == "hand_ended":
            return seen
    raise AssertionError("the stream ended before the hand")


async def test_arrangements_stay_secret_until_the_comparison_and_a_late_seat_is_arranged_for(world: World) -> None:
    w = world
    table_id, (a, b, c) = await seat_players(
        w, "maubinh", [BUY_IN] * 3, stake_gold=100, seats_max=4, options={"arrange_timeout_s": "8"}
    )
    watch_b = w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id, player_token=await w.backend.token(b)))
    watch_spectator = w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id))
    streamed_b = asyncio.ensure_future(events_until_hand_ended(watch_b))  # type: ignore[arg-type]
    streamed_spectator = asyncio.ensure_future(events_until_hand_ended(watch_spectator))  # type: ignore[arg-type]
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id

    start = await w.backend.state(table_id, a)
    assert sorted(start.to_act) == [0, 1, 2] and start.timer == "arrange"
    assert [x.kind for x in start.legal_actions] == ["arrange"]
    assert start.candidate_actions and all(x.WhichOneof("action") == "arrange" for x in start.candidate_actions)
    await w.backend.act(table_id, a, 0, start.candidate_actions[0], hand_id=hand_id)

    # Seat 0 has arranged: it sees its own chi; seat 1 and a spectator see only that it did.
    mine = arrangements(await w.backend.state(table_id, a))[0]
    assert "" not in (*mine.back, *mine.middle, *mine.front)
    for viewer in (b, c, None):
        seen = await w.backend.state(table_id, viewer)
        assert blank(arrangements(seen)[0]), viewer
        assert sorted(seen.to_act) == [1, 2]
    second_try = (await w.backend.state(table_id, a)).candidate_actions
    assert list(second_try) == []  # one arrangement per seat: nothing more to send

    b_state = await w.backend.state(table_id, b)
    await w.backend.act(table_id, b, 1, b_state.candidate_actions[-1], hand_id=hand_id)
    assert blank(arrangements(await w.backend.state(table_id, c))[1])
    assert (await w.backend.state(table_id, c)).to_act == [2]

    # Seat 2 never arranges: its window (8 s: long enough for the calls above on a loaded
    # machine) runs out and the engine arranges it.
    final = await w.backend.state(table_id)
    for _ in range(300):
        final = await w.backend.state(table_id)
        if final.table.status == pb.TABLE_STATUS_WAITING:
            break
        await asyncio.sleep(0.1)
    names = body_names(final)
    assert names == ["hand_started", "cards_dealt", "arranged", "arranged", "timer_expired", "hand_ended"]
    assert final.events[4].timer_expired.seat == 2 and final.events[4].timer_expired.timer == "arrange"
    # After the hand every arrangement is public.
    revealed = arrangements(final)
    assert sorted(revealed) == [0, 1] and not any(blank(x) for x in revealed.values())
    # Each stack moved by what the rules engine settles from the stored hand (every chi can
    # cancel out, so "some stack changed" would fail on such a deal: the nets are exact).
    settled = replay([s.event for s in await w.log.read_hand(table_id, hand_id)]).settlement
    stacks = {s.seat: s.stack_gold for s in final.table.seats}
    assert stacks == {seat: BUY_IN + settled.nets.get(seat, 0) for seat in (0, 1, 2)}
    assert sum(stacks.values()) <= 3 * BUY_IN  # gold moved between seats, less the commission

    # What the streams carried while the hand was in play: the same blanks; then, at the
    # comparison (after seat 2's timer, before HandEnded), each arrangement the viewer had
    # seen blank is sent again, revealed (same seq).
    seen_by_b = await asyncio.wait_for(streamed_b, 10)
    seen_by_spectator = await asyncio.wait_for(streamed_spectator, 10)
    watch_b.cancel()
    watch_spectator.cancel()
    b_arranged = [e.arranged for e in seen_by_b if e.WhichOneof("body") == "arranged"]
    assert [x.seat for x in b_arranged] == [0, 1, 0]
    assert blank(b_arranged[0]) and not blank(b_arranged[1])  # seat 1 sees its own
    assert b_arranged[2] == revealed[0]
    spectator_arranged = [e.arranged for e in seen_by_spectator if e.WhichOneof("body") == "arranged"]
    assert [x.seat for x in spectator_arranged] == [0, 1, 0, 1]
    assert all(blank(x) for x in spectator_arranged[:2])
    assert spectator_arranged[2:] == [revealed[0], revealed[1]]
    names_seen = [e.WhichOneof("body") for e in seen_by_spectator]
    assert names_seen[-4:] == ["timer_expired", "arranged", "arranged", "hand_ended"]
    resent_seqs = [e.seq for e in seen_by_spectator if e.WhichOneof("body") == "arranged"]
    assert resent_seqs[:2] == resent_seqs[2:]
    dealt = next(e.cards_dealt for e in seen_by_spectator if e.WhichOneof("body") == "cards_dealt")
    assert len(dealt.cards) == 39 and all(card.card == "" for card in dealt.cards)
    assert await w.stored(table_id, hand_id) == [
        "HandStarted",
        "CardsDealt",
        "Arranged",
        "Arranged",
        "TimerExpired",
        "HandEnded",
    ]
