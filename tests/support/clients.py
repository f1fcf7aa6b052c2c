"""Thin gRPC clients for tests: the calls a game backend and a cashier make."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc

from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel


class Backend:
    """A game backend (caller "backend") plus a cashier (caller "cashier")."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._channels = [
            channel(settings.table_addr, settings.tokens["backend"]),
            channel(settings.ledger_addr, settings.tokens["cashier"]),
            channel(settings.ledger_addr, settings.tokens["backend"]),
        ]
        self.table = pb_grpc.TableServiceStub(self._channels[0])
        self.cashier = lgrpc.LedgerServiceStub(self._channels[1])
        self.ledger = lgrpc.LedgerServiceStub(self._channels[2])
        self.tokens: dict[str, str] = {}

    async def close(self) -> None:
        for ch in self._channels:
            await ch.close()

    async def table_connected(self, timeout_s: float = 30.0) -> None:
        """Wait until the table channel is connected again. After the table service was
        killed and started again, the channel may still be in its reconnect backoff, where a
        call fails at once with UNAVAILABLE although the new service already serves."""
        await asyncio.wait_for(self._channels[0].channel_ready(), timeout_s)

    async def token(self, player: str) -> str:
        if player not in self.tokens:
            reply = await self.table.IssuePlayerToken(pb.IssuePlayerTokenRequest(player_id=player))
            self.tokens[player] = reply.player_token
        return self.tokens[player]

    async def deposit(self, player: str, amount: int) -> None:
        await self.cashier.Deposit(
            lpb.DepositRequest(idempotency_key=uuid.uuid4().hex, player_id=player, amount_gold=amount)
        )

    async def balance(self, account: str) -> int:
        try:
            reply = await self.ledger.GetAccount(lpb.GetAccountRequest(account_id=account))
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return 0
            raise
        return int(reply.account.balance_gold)

    async def create(self, game: str, **config: Any) -> str:
        cfg = pb.TableConfig(game=game, **config)
        reply = await self.table.CreateTable(pb.CreateTableRequest(config=cfg))
        return str(reply.table.table_id)

    async def join(self, table_id: str, player: str, buy_in: int, seat: int = -1, key: str | None = None) -> int:
        reply = await self.table.JoinTable(
            pb.JoinTableRequest(
                table_id=table_id,
                player_token=await self.token(player),
                buy_in_gold=buy_in,
                seat=seat,
                idempotency_key=key or uuid.uuid4().hex,
            )
        )
        return int(reply.seat)

    async def state(self, table_id: str, player: str | None = None) -> pb.TableState:
        token = await self.token(player) if player else ""
        reply = await self.table.GetTableState(pb.GetTableStateRequest(table_id=table_id, player_token=token))
        return reply.state

    async def act(
        self, table_id: str, player: str, seat: int, action: pb.PlayerAction, key: str | None = None, hand_id: str = ""
    ) -> pb.ActResponse:
        if not hand_id:
            hand_id = (await self.state(table_id)).hand_id
        return await self.table.Act(
            pb.ActRequest(
                table_id=table_id,
                hand_id=hand_id,
                seat=seat,
                action=action,
                idempotency_key=key or uuid.uuid4().hex,
                player_token=await self.token(player),
            )
        )

    async def leave(self, table_id: str, player: str) -> pb.LeaveTableResponse:
        return await self.table.LeaveTable(
            pb.LeaveTableRequest(table_id=table_id, player_token=await self.token(player))
        )


def bet(seat: int, kind: str, amount: int = 0) -> pb.PlayerAction:
    value = epb.ActionKind.Value(f"ACTION_KIND_{kind.upper()}")
    return pb.PlayerAction(bet=epb.BetAction(seat=seat, kind=value, amount_gold=amount))


def wager(seat: int, kind: str, amount: int, *selection: int) -> pb.PlayerAction:
    return pb.PlayerAction(wager=epb.WagerPlaced(seat=seat, kind=kind, selection=list(selection), amount_gold=amount))


def body_names(state: pb.TableState) -> list[str]:
    return [str(e.WhichOneof("body")) for e in state.events]
