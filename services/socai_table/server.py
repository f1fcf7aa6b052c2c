"""The TableService gRPC servicer: shape checks at the edge, then the tables."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from socai import errors
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra import player_tokens
from socai.infra.grpc_server import AccessPolicy
from socai.infra.logging import bound
from socai_table import convert
from socai_table.manager import TableManager

KEY_MAX_CHARS = 200
LEAVE_WAIT_S = 2.0

# Who may call what. "backend" is the game gateway that authenticates players and relays
# their calls with player tokens; "operator" is a human with the ops token.
ALLOW = {
    "CreateTable": frozenset({"backend", "operator"}),
    "GetTable": frozenset({"*"}),
    "ListTables": frozenset({"*"}),
    "GetTableState": frozenset({"*"}),
    "WatchTable": frozenset({"*"}),
    "JoinTable": frozenset({"backend", "operator"}),
    "LeaveTable": frozenset({"backend", "operator"}),
    "StartHand": frozenset({"backend", "operator"}),
    "Act": frozenset({"backend", "operator"}),
    "Heartbeat": frozenset({"backend", "operator"}),
    "Reconnect": frozenset({"backend", "operator"}),
    "IssuePlayerToken": frozenset({"backend", "operator"}),
}


def policy(tokens: dict[str, str]) -> AccessPolicy:
    return AccessPolicy(tokens=tokens, allow=ALLOW)


def _key(key: str, what: str = "idempotency_key") -> str:
    if not key or len(key) > KEY_MAX_CHARS or not key.isprintable():
        raise errors.InvalidArgument("BAD_IDEMPOTENCY_KEY", f"{what} must be 1..{KEY_MAX_CHARS} printable characters")
    return key


class TableServicer(pb_grpc.TableServiceServicer):
    def __init__(self, manager: TableManager, player_token_key: str) -> None:
        self.manager = manager
        self.token_key = player_token_key

    def _player(self, token: str) -> str:
        return player_tokens.verify(self.token_key, token)

    def _viewer(self, token: str) -> str | None:
        return self._player(token) if token else None

    async def CreateTable(self, request: pb.CreateTableRequest, context: Any) -> pb.CreateTableResponse:
        table = await self.manager.create(convert.config_from_proto(request.config), request.table_id)
        return pb.CreateTableResponse(table=convert.table_to_proto(table))

    async def GetTable(self, request: pb.GetTableRequest, context: Any) -> pb.GetTableResponse:
        table = await self.manager.get(request.table_id)
        return pb.GetTableResponse(table=convert.table_to_proto(table))

    async def ListTables(self, request: pb.ListTablesRequest, context: Any) -> pb.ListTablesResponse:
        if request.page_size < 0:
            raise errors.InvalidArgument("BAD_PAGE_SIZE", "page_size must not be negative")
        tables, next_token = self.manager.list(request.game, request.page_token, request.page_size)
        return pb.ListTablesResponse(tables=[convert.table_to_proto(t) for t in tables], next_page_token=next_token)

    async def JoinTable(self, request: pb.JoinTableRequest, context: Any) -> pb.JoinTableResponse:
        player = self._player(request.player_token)
        key = _key(request.idempotency_key)
        table = await self.manager.get(request.table_id)
        with bound(table_id=table.table_id):
            seat = await table.join(player, request.buy_in_gold, request.seat, key)
        return pb.JoinTableResponse(seat=seat, table=convert.table_to_proto(table))

    async def LeaveTable(self, request: pb.LeaveTableRequest, context: Any) -> pb.LeaveTableResponse:
        player = self._player(request.player_token)
        table = await self.manager.get(request.table_id)
        with bound(table_id=table.table_id):
            now, amount = await table.leave(player)
        cashed = now and await self.manager.wait_cashout(table.table_id, player, LEAVE_WAIT_S)
        return pb.LeaveTableResponse(cashed_out=cashed, cash_out_gold=amount)

    async def StartHand(self, request: pb.StartHandRequest, context: Any) -> pb.StartHandResponse:
        table = await self.manager.get(request.table_id)
        with bound(table_id=table.table_id):
            hand_id = await table.start_hand()
        return pb.StartHandResponse(hand_id=hand_id)

    async def Act(self, request: pb.ActRequest, context: Any) -> pb.ActResponse:
        player = self._player(request.player_token)
        key = _key(request.idempotency_key)
        body = convert.action_from_proto(request.action)
        table = await self.manager.get(request.table_id)
        result = await table.act(player, request.hand_id, request.seat, body, key)
        return pb.ActResponse(seq=result.seq, event_id=result.event_id)

    async def GetTableState(self, request: pb.GetTableStateRequest, context: Any) -> pb.GetTableStateResponse:
        viewer = self._viewer(request.player_token)
        table = await self.manager.get(request.table_id)
        view = await table.view_now(viewer)
        return pb.GetTableStateResponse(state=convert.state_to_proto(table, view))

    async def WatchTable(self, request: pb.WatchTableRequest, context: Any) -> AsyncIterator[pb.WatchTableResponse]:
        viewer = self._viewer(request.player_token)
        table = await self.manager.get(request.table_id)
        watcher, snapshot = await table.watch(viewer)
        try:
            for event in snapshot:
                if event.seq >= request.from_seq:
                    yield pb.WatchTableResponse(event=event)
            while True:
                item = await watcher.queue.get()
                if item is None:
                    if watcher.overflowed:
                        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "watcher fell too far behind")
                    return
                yield pb.WatchTableResponse(event=item)
        finally:
            table.unwatch(watcher)

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Any) -> pb.HeartbeatResponse:
        player = self._player(request.player_token)
        table = await self.manager.get(request.table_id)
        await table.heartbeat(player)
        return pb.HeartbeatResponse(server_time=convert.timestamp(time.time()))

    async def Reconnect(self, request: pb.ReconnectRequest, context: Any) -> pb.ReconnectResponse:
        player = self._player(request.player_token)
        table = await self.manager.get(request.table_id)
        view = await table.reconnect(player)
        return pb.ReconnectResponse(state=convert.state_to_proto(table, view))

    async def IssuePlayerToken(self, request: pb.IssuePlayerTokenRequest, context: Any) -> pb.IssuePlayerTokenResponse:
        ttl = request.ttl_s or player_tokens.TTL_DEFAULT_S
        token, expires = player_tokens.issue(self.token_key, request.player_id, ttl)
        return pb.IssuePlayerTokenResponse(player_token=token, expires_at=convert.timestamp(expires))
