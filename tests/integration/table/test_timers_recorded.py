"""A log that records what happened (issue 33): a table created with a short turn timer (as
tests and bots make them) records that timer in every HandStarted, its turns run out after
it, and each TimerExpired carries the move the rules made for the seat, which the audit of
the stream derives again."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from socai.audit.auditor import Seals, verify
from socai.audit.export import _decode
from socai.events import codec, seal
from socai.events.model import CardsDealt, Event, HandEnded, HandStarted, TimerExpired
from socai.gen.table.v1 import table_pb2 as pb
from tests.integration.table.conftest import World, seat_players

pytestmark = pytest.mark.integration


async def test_a_short_turn_timer_is_recorded_and_each_timeout_says_what_it_did(world: World) -> None:
    w = world
    table_id, _ = await seat_players(w, "tienlen", [1000, 1000], stake_gold=10, seats_max=2, turn_timeout_s=1)
    state = await w.backend.state(table_id)
    assert state.table.config.options["turn_timeout_s"] == "1"  # the override is an option like any other
    started_at = time.monotonic()
    # A deal can end the hand before anyone's turn (Tiến Lên's instant wins: four 2s, six
    # pairs, a dragon…), then nothing times out: such a hand must have ended at its deal, and
    # the next hand is played instead.
    for _attempt in range(5):
        hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
        subject = w.log.subject_of(table_id, hand_id)
        stored, events = await _sealed_hand(w, subject)
        if any(isinstance(e.body, TimerExpired) for e in events):
            break
        assert [type(e.body) for e in events] == [HandStarted, CardsDealt, HandEnded], events
        await _wait_for_no_hand_in_play(w, table_id)
    first = events[0].body
    assert isinstance(first, HandStarted) and first.options["turn_timeout_s"] == "1"
    timeouts = [e.body for e in events if isinstance(e.body, TimerExpired)]
    assert timeouts and all(t.automatic for t in timeouts), timeouts
    assert {t.automatic.split(" ")[0] for t in timeouts} <= {"play", "pass"}
    assert any(t.automatic.startswith("play ") for t in timeouts)  # a leader's timer plays its lowest
    # Each turn waited about the recorded 1 s, not the game's default 20 s.
    gaps = [
        (b.occurred_at - a.occurred_at).total_seconds()
        for a, b in itertools.pairwise(events)
        if isinstance(b.body, TimerExpired)
    ]
    assert max(gaps) < 5, gaps
    assert time.monotonic() - started_at < 120
    raws = [_decode(r.stream_seq, subject, r.data, tuple(r.headers.items())) for r in stored]
    keys = w.running.settings.hand_seal_public_keys()
    report = verify(
        raws, source="stream", seals=Seals(seal.SealVerifier(keys), w.running.settings.events_prefix)
    ).report
    assert report.ok and report.hands_verified == 1, report.render()


async def _sealed_hand(w: World, subject: str) -> tuple[list[Any], list[Event]]:
    """The hand's stored messages and events once it is sealed (every turn runs out after 1 s
    and the rules play or pass for the seat)."""
    stored: list[Any] = []
    for _ in range(200):
        stored = [r async for r in w.log.read_raw(subject)]
        if any(seal.SEAL_HEADER in r.headers for r in stored):
            break
        await asyncio.sleep(0.2)
    return stored, [codec.decode(r.data) for r in stored]


async def _wait_for_no_hand_in_play(w: World, table_id: str) -> None:
    for _ in range(100):
        if not (await w.backend.state(table_id)).table.hand_id:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{table_id} still has a hand in play")
