"""Ba Cây squeeze-and-flip seen live (issue 12): a live WatchTable stream is sent the cards
a flip reveals, as the deal event again (same seq, more cards), and never another seat's
unflipped cards. Mậu Binh's arrangements reach live watchers at the comparison."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb
from tests.integration.table.conftest import World, seat_players

pytestmark = pytest.mark.integration

BUY_IN = 5_000
STREAM_GUARD_S = 30  # only a guard against a hung stream; nothing here is timed


class Stream:
    """One WatchTable stream, read as far as the test needs."""

    def __init__(self, call: AsyncIterator[pb.WatchTableResponse]) -> None:
        self.call = call
        self.messages = call.__aiter__()
        self.seen: list[epb.Event] = []

    async def until(self, body: str, count: int = 1) -> list[epb.Event]:
        """Read until the ``count``-th event with ``body`` has arrived; the events read."""
        read: list[epb.Event] = []
        found = 0
        while found < count:
            message = await asyncio.wait_for(self.messages.__anext__(), STREAM_GUARD_S)
            read.append(message.event)
            self.seen.append(message.event)
            found += message.event.WhichOneof("body") == body
        return read


def cards_of(dealt: epb.CardsDealt) -> dict[int, list[str]]:
    by_seat: dict[int, list[str]] = {}
    for card in dealt.cards:
        by_seat.setdefault(card.seat, []).append(card.card)
    return by_seat


async def own_cards(w: World, table_id: str, player: str, seat: int) -> list[str]:
    state = await w.backend.state(table_id, player)
    dealt = next(e.cards_dealt for e in state.events if e.WhichOneof("body") == "cards_dealt")
    return cards_of(dealt)[seat]


def flip(seat: int) -> pb.PlayerAction:
    return pb.PlayerAction(declare=epb.Declared(seat=seat, declaration="flip"))


async def test_a_flip_sends_live_watchers_exactly_the_flipped_cards(world: World) -> None:
    w = world
    table_id, (p0, p1, p2) = await seat_players(w, "bacay_ga", [BUY_IN] * 3, stake_gold=100, seats_max=4)
    player_watch = Stream(
        w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id, player_token=await w.backend.token(p1)))  # type: ignore[arg-type]
    )
    spectator_watch = Stream(w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id)))  # type: ignore[arg-type]
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    cards = {seat: await own_cards(w, table_id, p, seat) for seat, p in enumerate((p0, p1, p2))}
    assert all(len(c) == 3 and "" not in c for c in cards.values())

    # Before any flip: seat 1 sees its own cards only, the spectator none.
    dealt_to_p1 = (await player_watch.until("cards_dealt"))[-1]
    dealt_to_spectator = (await spectator_watch.until("cards_dealt"))[-1]
    assert cards_of(dealt_to_p1.cards_dealt) == {0: [""] * 3, 1: cards[1], 2: [""] * 3}
    assert cards_of(dealt_to_spectator.cards_dealt) == {0: [""] * 3, 1: [""] * 3, 2: [""] * 3}

    # Seat 0 flips: both streams get the flip, then the deal again with seat 0's cards.
    await w.backend.act(table_id, p0, 0, flip(0), hand_id=hand_id)
    after_p1 = await player_watch.until("cards_dealt")
    after_spectator = await spectator_watch.until("cards_dealt")
    assert [e.WhichOneof("body") for e in after_p1] == ["declared", "cards_dealt"]
    assert [e.WhichOneof("body") for e in after_spectator] == ["declared", "cards_dealt"]
    resent_p1, resent_spectator = after_p1[-1], after_spectator[-1]
    assert (resent_p1.seq, resent_p1.event_id) == (dealt_to_p1.seq, dealt_to_p1.event_id)  # the same event
    assert cards_of(resent_p1.cards_dealt) == {0: cards[0], 1: cards[1], 2: [""] * 3}
    assert cards_of(resent_spectator.cards_dealt) == {0: cards[0], 1: [""] * 3, 2: [""] * 3}

    # Seat 1 flips: only the spectator learns something new (seat 1 always saw its cards).
    await w.backend.act(table_id, p1, 1, flip(1), hand_id=hand_id)
    after_spectator = await spectator_watch.until("cards_dealt")
    assert cards_of(after_spectator[-1].cards_dealt) == {0: cards[0], 1: cards[1], 2: [""] * 3}
    assert [e.WhichOneof("body") for e in await player_watch.until("declared")] == ["declared"]

    # Seat 2 flips last: its cards reach both streams then, and never before its flip.
    await w.backend.act(table_id, p2, 2, flip(2), hand_id=hand_id)
    await player_watch.until("hand_ended")
    await spectator_watch.until("hand_ended")
    for stream in (player_watch, spectator_watch):
        flip_2 = next(
            i for i, e in enumerate(stream.seen) if e.WhichOneof("body") == "declared" and e.declared.seat == 2
        )
        before = [e.cards_dealt for e in stream.seen[:flip_2] if e.WhichOneof("body") == "cards_dealt"]
        after = [e.cards_dealt for e in stream.seen[flip_2:] if e.WhichOneof("body") == "cards_dealt"]
        assert before and all(cards_of(d)[2] == [""] * 3 for d in before)
        assert [cards_of(d) for d in after] == [cards]
    # GetTableState agrees with the latest copy each stream holds.
    final = await w.backend.state(table_id)
    dealt_final = next(e.cards_dealt for e in final.events if e.WhichOneof("body") == "cards_dealt")
    assert cards_of(dealt_final) == cards
    player_watch.call.cancel()  # type: ignore[attr-defined]
    spectator_watch.call.cancel()  # type: ignore[attr-defined]


async def test_a_watcher_who_joins_mid_hand_is_sent_a_flip_made_after_it_joined(world: World) -> None:
    w = world
    table_id, (_banker, p1) = await seat_players(w, "bacay_chuong", [BUY_IN] * 2, stake_gold=100, seats_max=4)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    # Seat 0 (the owner) banks; seat 1's bet closes the betting window and the cards are dealt.
    state = await w.backend.state(table_id, p1)
    seat = state.viewer_seat
    assert seat == 1 and state.timer == "betting", state
    bets = [a for a in state.candidate_actions if a.WhichOneof("action") == "wager"]
    await w.backend.act(table_id, p1, seat, bets[0], hand_id=hand_id)
    state = await w.backend.state(table_id, p1)
    assert state.timer == "flip", state
    cards = await own_cards(w, table_id, p1, seat)
    spectator = Stream(w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id)))  # type: ignore[arg-type]
    snapshot_dealt = (await spectator.until("cards_dealt"))[-1]
    assert cards_of(snapshot_dealt.cards_dealt)[seat] == [""] * 3
    flips = [a for a in state.candidate_actions if a.WhichOneof("action") == "declare"]
    await w.backend.act(table_id, p1, seat, flips[0], hand_id=hand_id)
    resent = (await spectator.until("cards_dealt"))[-1]
    assert resent.seq == snapshot_dealt.seq
    assert cards_of(resent.cards_dealt)[seat] == cards
    assert all(c == [""] * 3 for s, c in cards_of(resent.cards_dealt).items() if s != seat)
    spectator.call.cancel()  # type: ignore[attr-defined]
