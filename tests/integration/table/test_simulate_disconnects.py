"""The bots of `make run` and `socai simulate` also go silent and come back (issue 11):
the table disconnects them, every game's disconnect rule runs, and they reconnect."""

from __future__ import annotations

import pytest

from socai.events.model import PlayerDisconnected, PlayerReconnected
from socai_table.simulate import SimConfig, Simulator
from tests.integration.table.conftest import World

pytestmark = pytest.mark.integration


async def test_silent_bots_are_disconnected_by_the_table_and_reconnect(world: World):
    settings = world.running.settings  # heartbeat timeout 0.5 s (the fixture)
    config = SimConfig(tables=2, hands=6, games=("holdem", "xito"), disconnect_rate=0.25, seed=7, turn_timeout_s=1)
    sim = Simulator(settings, config)
    try:
        result = await sim.run()
    finally:
        await sim.close()
    assert sum(t.silences for t in result.tables) > 0
    bodies = []
    for table in result.tables:
        async for stored in world.log.read(world.log.subject_of(table.table_id, "*")):
            bodies.append(stored.event.body)
    assert any(isinstance(b, PlayerDisconnected) for b in bodies)
    assert any(isinstance(b, PlayerReconnected) for b in bodies)
    assert sum(t.hands for t in result.tables) > 0
