"""The table service chains every event and seals every HandEnded (socai.events.seal), so that
readers holding only its public key can tell its hand from a stranger's messages, even
after it rebuilt the hand around a stranger's message."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import grpc
import pytest

from socai.events import codec, seal
from socai.events.model import ActionKind, BetAction, Event
from socai.gen.table.v1 import table_pb2 as pb
from tests.integration.table.conftest import World, seat_players
from tests.support.clients import bet

pytestmark = pytest.mark.integration


async def test_a_hand_played_around_a_stranger_is_sealed_and_authenticates_without_it(world: World) -> None:
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    subject = w.log.subject_of(table_id, hand_id)
    table_so_far = [r async for r in w.log.read_raw(subject)]
    # The stranger forks the chain where the table is (the headers are public) with a fold.
    forged = Event(table_id, hand_id, len(table_so_far) + 1, "holdem", datetime.now(UTC), BetAction(1, ActionKind.FOLD))
    last = table_so_far[-1]
    prev = seal.link(bytes.fromhex(last.headers[seal.PREV_HEADER]), subject, last.data)
    js = w.running.apps["table"].nc.jetstream()
    ack = await js.publish(
        subject, codec.encode(forged), headers={seal.PREV_HEADER: prev.hex()}, stream=w.running.settings.events_stream
    )
    # The table's next append finds the subject moved on, rebuilds (the chain recomputed over
    # what it accepted, the stranger quarantined) and the retry is applied.
    for attempt in range(5):
        try:
            await w.backend.act(table_id, a, 0, bet(0, "call", 10), key="call-1", hand_id=hand_id)
            break
        except grpc.aio.AioRpcError as exc:
            assert exc.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE), exc
            await asyncio.sleep(0.2 * (attempt + 1))
    await w.backend.act(table_id, b, 1, bet(1, "fold"), hand_id=hand_id)

    stored = [r async for r in w.log.read_raw(subject)]
    messages = [seal.Message(r.stream_seq, r.data, r.headers) for r in stored]
    ends = [i for i, m in enumerate(messages) if seal.SEAL_HEADER in m.headers]
    assert len(ends) == 1  # the table sealed its HandEnded, and only that
    verdict = seal.authenticate(subject, messages, seal.SealVerifier(w.running.settings.hand_seal_public_keys()), ends)
    assert verdict.ok, verdict.detail
    assert verdict.strangers == [
        (messages.index(next(m for m in messages if m.stream_seq == ack.seq)), seal.NOT_ON_CHAIN)
    ]
    hand = [codec.decode(messages[i].payload) for i in verdict.hand]
    assert [e.seq for e in hand] == list(range(1, len(hand) + 1))
    assert type(hand[-1].body).__name__ == "HandEnded"
    assert codec.encode(forged) not in [messages[i].payload for i in verdict.hand]
    # Another key does not open it: the seal is the table's.
    stranger_key = seal.HandSigner(seal.derive_private_key("someone-else"))
    other = seal.SealVerifier({stranger_key.key_id: stranger_key.public_key})
    assert seal.authenticate(subject, messages, other, ends).reason == seal.HAND_SEAL_INVALID
