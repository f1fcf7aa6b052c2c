"""The table service SIGKILLed in the middle of a close (CloseTable answered CLOSING, the hand
in play not over yet) resumes the close at rebuild: the hand plays on, the table closes once,
and every chip is cashed out."""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from socai import accounts
from socai.events.log import EventLog
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from socai.infra.nats import StreamSpec, connect
from tests.fault.test_table_kill import start_table
from tests.support.clients import Backend, bet
from tests.support.services import running, service_settings

pytestmark = [pytest.mark.fault, pytest.mark.slow]

DEPOSIT = 5_000
WAIT_S = 30.0


async def test_a_table_service_killed_while_a_table_is_closing_finishes_the_close_after_a_restart(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, tmp_path: Path
) -> None:
    settings = service_settings(nats_url, migrated_database_url, stream_spec)
    async with running(settings, ("ledger", "settlement")) as r:
        settings = replace(r.settings, metrics_port_base=0)
        proc = await start_table(settings, tmp_path / "table.log")
        backend = Backend(settings)
        chans = [
            channel(settings.table_addr, settings.tokens["operator"]),
            channel(settings.ledger_addr, settings.tokens["auditor"]),
        ]
        operator, auditor = pb_grpc.TableServiceStub(chans[0]), lgrpc.LedgerServiceStub(chans[1])
        try:
            players = ("ka", "kb")
            table_id = await backend.create("holdem", stake_gold=100, seats_max=2, owner_player_id="ka")
            for seat, player in enumerate(players):
                await backend.deposit(player, DEPOSIT)
                await backend.join(table_id, player, 1_000, seat=seat)
            hand_id = (await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
            closing = await operator.CloseTable(pb.CloseTableRequest(table_id=table_id, reason="kill test"))
            assert closing.table.status == pb.TABLE_STATUS_CLOSING

            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            proc = await start_table(settings, tmp_path / "table.log")

            # Rebuilt closing: the hand goes on, nothing new is taken.
            table = (await backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
            assert (table.status, table.hand_id, table.close_reason) == (pb.TABLE_STATUS_CLOSING, hand_id, "kill test")
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
            assert error_reason(refused.value) == "TABLE_CLOSING"
            seat = (await backend.state(table_id)).to_act[0]
            await backend.act(table_id, players[seat], seat, bet(seat, "fold"), hand_id=hand_id)

            deadline = time.monotonic() + WAIT_S
            while True:
                escrows = [await backend.balance(accounts.escrow(table_id, p)) for p in players]
                table = (await backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
                if table.status == pb.TABLE_STATUS_CLOSED and escrows == [0, 0]:
                    break
                assert time.monotonic() < deadline, f"not closed and cashed out: {table.status} {escrows}"
                await asyncio.sleep(0.1)
            wallets = [await backend.balance(accounts.player(p)) for p in players]
            assert sum(wallets) == 2 * DEPOSIT and wallets != [DEPOSIT, DEPOSIT]  # a blind moved; nothing lost
            assert (await auditor.TrialBalance(lpb.TrialBalanceRequest())).total_gold == 0

            nc = await connect(nats_url, name="check")
            try:
                log = EventLog(nc, settings.events_stream, settings.events_prefix)
                facts = [type(x.event.body).__name__ for x in await log.read_hand(table_id, f"{table_id}-t")]
                hand = [x.event.seq for x in await log.read_hand(table_id, hand_id)]
                await nc.jetstream().delete_stream(stream_spec.name)
            finally:
                await nc.close()
            assert facts.count("TableClosed") == 1 and facts[-1] == "TableClosed"
            assert facts.count("PlayerStoodUp") == 2
            assert hand == list(range(1, len(hand) + 1))  # gapless, no duplicate
        finally:
            await backend.close()
            for ch in chans:
                await ch.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
