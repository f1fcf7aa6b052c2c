"""The table service killed with SIGKILL mid-hand resumes the same hand after a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from socai.events import seal
from socai.events.log import EventLog
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec, connect
from socai_cli.stack import grpc_health
from tests.support.clients import Backend, bet
from tests.support.services import running, service_settings

pytestmark = [pytest.mark.fault, pytest.mark.slow]


async def start_table(settings: object, log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **settings.as_env(), "SOCAI_LOG_FORMAT": "json"}  # type: ignore[attr-defined]
    proc = subprocess.Popen(
        [sys.executable, "-m", "socai_table"], env=env, stdout=log_path.open("ab"), stderr=subprocess.STDOUT
    )
    for _ in range(200):
        if proc.poll() is not None:
            raise AssertionError(f"table service exited: {log_path.read_text()[-3000:]}")
        if await grpc_health(settings.table_addr, 0.5) == "SERVING":  # type: ignore[attr-defined]
            return proc
        await asyncio.sleep(0.1)
    proc.kill()
    raise AssertionError(f"table service did not start: {log_path.read_text()[-3000:]}")


async def test_a_killed_table_service_resumes_the_same_hand(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, tmp_path: Path
):
    settings = service_settings(nats_url, migrated_database_url, stream_spec)
    async with running(settings, ("ledger",)) as r:
        settings = replace(r.settings, metrics_port_base=0)
        proc = await start_table(settings, tmp_path / "table.log")
        backend = Backend(settings)
        try:
            table_id = await backend.create("holdem", stake_gold=100, seats_max=3, owner_player_id="a")
            for i, player in enumerate(("a", "b", "c")):
                await backend.deposit(player, 5000)
                await backend.join(table_id, player, 1000, seat=i)
            hand_id = (await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
            players = {0: "a", 1: "b", 2: "c"}
            state = await backend.state(table_id)
            seat = state.to_act[0]
            await backend.act(table_id, players[seat], seat, bet(seat, "call", 20 if seat != 2 else 10))
            before = await backend.state(table_id)

            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            proc = await start_table(settings, tmp_path / "table.log")

            after = await backend.state(table_id)
            assert after.hand_id == hand_id
            assert [e.event_id for e in after.events] == [e.event_id for e in before.events]
            assert list(after.to_act) == list(before.to_act)
            # Play it out: everyone checks or calls until the hand ends.
            for _ in range(40):
                state = await backend.state(table_id)
                if state.table.status != pb.TABLE_STATUS_PLAYING or state.hand_id != hand_id:
                    break
                seat = state.to_act[0]
                mine = await backend.state(table_id, players[seat])
                kinds = {a.kind: a for a in mine.legal_actions}
                action = bet(seat, "check") if "check" in kinds else bet(seat, "call", kinds["call"].min_gold)
                await backend.act(table_id, players[seat], seat, action)
            nc = await connect(nats_url, name="check")
            try:
                log = EventLog(nc, settings.events_stream, settings.events_prefix)
                stored = await log.read_hand(table_id, hand_id)
                subject = log.subject_of(table_id, hand_id)
                raw = [seal.Message(r.stream_seq, r.data, r.headers) async for r in log.read_raw(subject)]
                await nc.jetstream().delete_stream(stream_spec.name)
            finally:
                await nc.close()
            seqs = [s.event.seq for s in stored]
            assert seqs == list(range(1, len(seqs) + 1))  # gapless, no duplicate
            assert type(stored[-1].event.body).__name__ == "HandEnded"
            # The restarted service went on with the chain where the killed one left it: the
            # whole hand is the sealed chain, for a reader holding only the public key.
            verdict = seal.authenticate(
                subject, raw, seal.SealVerifier(settings.hand_seal_public_keys()), [len(raw) - 1]
            )
            assert verdict.ok and verdict.hand == tuple(range(len(raw))), verdict.detail
            stacks = sum(s.stack_gold for s in (await backend.state(table_id)).table.seats)
            assert stacks == 3000
        finally:
            await backend.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
