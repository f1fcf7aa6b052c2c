"""The WatchTable fan-out costs per visibility class, not per stream (issue 32): every
spectator of a table is sent the same message for an event, and that message is built and
serialized once for all of them; a seated player (another class) gets their own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from socai.gen.table.v1 import table_pb2 as pb
from socai_table import convert
from tests.integration.table.conftest import World, seat_players
from tests.support.clients import bet

pytestmark = pytest.mark.integration

SPECTATORS = 8
WAIT_S = 20.0


async def read_command(call: Any) -> list[pb.WatchTableResponse]:
    """A stream's messages up to the last one of a command (the one whose view is final)."""
    messages = []
    while True:
        message = await asyncio.wait_for(call.read(), WAIT_S)
        messages.append(message)
        if not message.view.more_follows:
            return messages


async def test_spectators_share_one_built_message_per_event(world: World, monkeypatch: pytest.MonkeyPatch):
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2, turn_timeout_s=120)
    spectators = [w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id)) for _ in range(SPECTATORS)]
    player = w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id, player_token=await w.backend.token(b)))
    for call in (*spectators, player):
        await read_command(call)  # the snapshot: every stream is open before the hand starts

    built: list[pb.WatchTableResponse] = []
    to_proto = convert.watch_item_to_proto

    def counted(item: Any) -> pb.WatchTableResponse:
        message = to_proto(item)
        built.append(message)
        return message

    monkeypatch.setattr(convert, "watch_item_to_proto", counted)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    dealt = [await read_command(call) for call in spectators]
    theirs = await read_command(player)
    await w.backend.act(table_id, a, 0, bet(0, "call", 10), hand_id=hand_id)
    called = [await read_command(call) for call in spectators]
    theirs += await read_command(player)
    for call in (*spectators, player):
        call.cancel()

    seen = [first + then for first, then in zip(dealt, called, strict=True)]
    assert all(messages == seen[0] for messages in seen)  # every spectator: the same messages
    kinds = [m.event.WhichOneof("body") for m in seen[0]]
    assert kinds == ["hand_started", "cards_dealt", "bet_action"], kinds
    for message in seen[0] + theirs:
        # Built once for the eight spectators (each stream building its own made eight).
        # Compared as messages: a map's entries need not serialize in one order.
        times = sum(1 for m in built if m == message)
        assert times == 1, (times, message)
    # The seated player is a class of their own: their deal shows their cards.
    deal = next(m.event.cards_dealt for m in theirs if m.event.WhichOneof("body") == "cards_dealt")
    assert {c.seat for c in deal.cards if c.card} == {1}
    assert all(
        c.card == "" for m in seen[0] if m.event.WhichOneof("body") == "cards_dealt" for c in m.event.cards_dealt.cards
    )
