"""NATS down longer than a publish timeout: every table moves again on its own once NATS is back.

Issue 17, defect 3: with NATS down, a timer's TimerExpired (or the next hand's HandStarted)
fails to append, the table marks itself dirty, and before the fix nothing re-armed its
timer until a client sent a command: hands stayed frozen. The table service's watchdog now
heals every table (rebuild, re-arm, auto-start). Here tables of idle bots play hands by
timeouts alone, a private nats-server is stopped for several seconds and started again on
the same store, and every table must start new hands within seconds of its return, with no
client call in between.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import pytest

from socai.events.model import HandEnded
from socai.infra.nats import StreamSpec
from socai.infra.nats_auth import TEST_HARNESS
from socai_cli.embedded import EmbeddedNats, free_port
from tests.support.clients import Backend
from tests.support.services import running, service_settings

pytestmark = [pytest.mark.fault, pytest.mark.slow]

TABLES = 3
OUTAGE_S = 6.0  # longer than the event log's publish timeout
RECOVERY_S = 20.0


async def hands_ended(app: object, table_ids: list[str]) -> dict[str, int]:
    manager = app.manager  # type: ignore[attr-defined]
    out = {}
    for table_id in table_ids:
        table = manager.tables.get(table_id)
        if table is None:
            # An outage longer than the lease's validity drops the tables; the instance takes
            # them back (rebuilt from the stream) once NATS answers again.
            out[table_id] = -1
            continue
        last = table.last_hand
        out[table_id] = last.number if last is not None and isinstance(last.events[-1].body, HandEnded) else 0
    return out


async def test_tables_resume_by_themselves_after_a_nats_outage(
    migrated_database_url: str, stream_spec: StreamSpec, tmp_path: Path
):
    server = EmbeddedNats(tmp_path / "nats", port=free_port(), test_harness=True)
    server.start()
    try:
        settings = service_settings(server.url_for(TEST_HARNESS), migrated_database_url, stream_spec)
        async with running(replace(settings, metrics_port_base=0), ("ledger", "table")) as r:
            backend = Backend(r.settings)
            try:
                table_ids = []
                for t in range(TABLES):
                    table_id = await backend.create(
                        "holdem",
                        stake_gold=100,
                        seats_max=2,
                        turn_timeout_s=1,
                        auto_start_players=2,
                        between_hands_ms=100,
                        owner_player_id=f"o{t}",
                    )
                    for player in (f"o{t}", f"x{t}"):
                        await backend.deposit(player, 100_000)
                        await backend.join(table_id, player, 10_000)
                    table_ids.append(table_id)
                table_app = r.apps["table"]
                for _ in range(100):  # every table plays by timeouts alone
                    if min((await hands_ended(table_app, table_ids)).values()) >= 1:
                        break
                    await asyncio.sleep(0.1)
                assert min((await hands_ended(table_app, table_ids)).values()) >= 1

                before = await hands_ended(table_app, table_ids)
                server.stop()
                await asyncio.sleep(OUTAGE_S)
                server.start()
                back_at = time.monotonic()
                while time.monotonic() - back_at < RECOVERY_S:
                    now = await hands_ended(table_app, table_ids)
                    if all(now[t] >= before[t] + 2 for t in table_ids):
                        break
                    await asyncio.sleep(0.2)
                now = await hands_ended(table_app, table_ids)
                frozen = [t for t in table_ids if now[t] < before[t] + 2]
                assert frozen == [], f"tables frozen after NATS came back: {frozen} ({before} -> {now})"
            finally:
                await backend.close()
    finally:
        server.stop()
