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
from socai.gen.events.v1 import events_pb2
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec, connect
from socai.settle.replay import replay
from socai_cli.stack import grpc_health
from tests.support.clients import Backend, bet
from tests.support.hidden import cards_written
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
            await backend.table_connected()

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


async def test_a_killed_table_service_rebuilds_the_face_down_cards_from_its_own_seed(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, tmp_path: Path
):
    """Mậu Binh: the log holds neither the dealt cards nor seat 0's arrangement (deck
    positions only, ``socai.events.hidden``); a restarted service fills both in from the
    hand's seed, sealed at rest, so seat 0 sees its own chi again, the others still see
    nothing, and the hand ends and settles as the rules engine says."""
    settings = service_settings(nats_url, migrated_database_url, stream_spec)
    async with running(settings, ("ledger",)) as r:
        settings = replace(r.settings, metrics_port_base=0)
        proc = await start_table(settings, tmp_path / "table.log")
        backend = Backend(settings)
        try:
            table_id = await backend.create(
                "maubinh", stake_gold=100, seats_max=2, owner_player_id="a", options={"arrange_timeout_s": "120"}
            )
            for i, player in enumerate(("a", "b")):
                await backend.deposit(player, 10_000)
                await backend.join(table_id, player, 5000, seat=i)
            hand_id = (await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
            mine = await backend.state(table_id, "a")
            arrangement = mine.candidate_actions[0]
            await backend.act(table_id, "a", 0, arrangement, hand_id=hand_id)
            before = await backend.state(table_id, "a")
            own = [c for e in before.events for c in e.cards_dealt.cards if c.card]
            assert len(own) == 13 and {c.seat for c in own} == {0}
            own_cards = {c.card for c in own}

            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            proc = await start_table(settings, tmp_path / "table.log")
            await backend.table_connected()

            after = await backend.state(table_id, "a")
            assert after.hand_id == hand_id and list(after.events) == list(before.events)
            (arranged,) = [e.arranged for e in after.events if e.WhichOneof("body") == "arranged"]
            assert list(arranged.back) == list(arrangement.arrange.back)  # rebuilt from the seed
            for viewer in ("b", None):
                seen = await backend.state(table_id, viewer)
                assert not own_cards & {c.card for e in seen.events for c in e.cards_dealt.cards}
                assert not own_cards & {c for e in seen.events for c in e.arranged.back}
            nc = await connect(nats_url, name="outsider")
            try:
                log = EventLog(nc, settings.events_stream, settings.events_prefix)
                subject = log.subject_of(table_id, hand_id)
                live = [raw async for raw in log.read_raw(subject)]
                written = {c for raw in live for c in cards_written(events_pb2.Event.FromString(raw.data))}
                assert not written & own_cards, "the log names seat 0's cards while the hand is in play"

                theirs = await backend.state(table_id, "b")
                await backend.act(table_id, "b", 1, theirs.candidate_actions[0], hand_id=hand_id)
                for _ in range(100):
                    if (await backend.state(table_id)).table.status != pb.TABLE_STATUS_PLAYING:
                        break
                    await asyncio.sleep(0.1)
                stored = [s.event for s in await log.read_hand(table_id, hand_id)]
                await nc.jetstream().delete_stream(stream_spec.name)
            finally:
                await nc.close()
            assert type(stored[-1].body).__name__ == "HandEnded"
            result = replay(stored)
            (revealed,) = [e.body for e in result.events if type(e.body).__name__ == "Arranged" and e.body.seat == 0]
            assert [str(c) for c in revealed.back] == list(arrangement.arrange.back)  # type: ignore[union-attr]
            stacks = {s.seat: s.stack_gold for s in (await backend.state(table_id)).table.seats}
            assert stacks == {seat: 5000 + net for seat, net in {0: 0, 1: 0, **result.settlement.nets}.items()}
        finally:
            await backend.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
