"""The table service on real NATS, PostgreSQL and gRPC, with the real ledger behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from socai.events.log import EventLog
from socai.infra.nats import StreamSpec
from tests.support.clients import Backend
from tests.support.services import Running, running, service_settings


@dataclass
class World:
    running: Running
    backend: Backend
    log: EventLog

    async def stored(self, table_id: str, hand_id: str) -> list[str]:
        return [str(type(s.event.body).__name__) for s in await self.log.read_hand(table_id, hand_id)]


@pytest.fixture
async def world(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[World]:
    settings = service_settings(nats_url, migrated_database_url, stream_spec, heartbeat_timeout_s=0.5)
    async with running(settings, ("ledger", "table")) as r:
        backend = Backend(r.settings)
        table_app = r.apps["table"]
        try:
            yield World(r, backend, table_app.manager.deps.log)
        finally:
            await backend.close()
            await r.delete_streams(stream_spec.name)


async def seat_players(w: World, game: str, buy_ins: list[int], **config: object) -> tuple[str, list[str]]:
    players = [f"p{i}" for i in range(len(buy_ins))]
    table_id = await w.backend.create(game, owner_player_id=players[0], **config)
    for i, (player, amount) in enumerate(zip(players, buy_ins, strict=True)):
        await w.backend.deposit(player, amount * 2)
        assert await w.backend.join(table_id, player, amount, seat=i) == i
    return table_id, players
