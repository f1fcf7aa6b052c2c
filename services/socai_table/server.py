"""The TableService gRPC servicer: shape checks at the edge, then the tables.

A call for a table this instance does not hold is forwarded to the instance that does
(``socai_table.forward``); everything else is served here. ``ListTables`` answers for every
instance's tables: the page comes from the directory in PostgreSQL that all instances share,
and the live state of each table from the instance that runs it.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc

from socai import accounts, errors
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra import player_tokens
from socai.infra.config import Limits
from socai.infra.grpc_server import AccessPolicy, current_caller
from socai.infra.limits import RateLimiter, Slots
from socai.infra.logging import bound
from socai_table import convert
from socai_table.core import LEAVE_AFTER_HAND, LEAVE_NOW, STOOD_UP, LeaveResult
from socai_table.forward import Forwarder, forwarded_by
from socai_table.manager import TableManager
from socai_table.model import TABLE_ID
from socai_table.table import Table
from socai_table.views import MEMORY_FULL, WATCH_QUEUE_MAX, WATCH_QUEUED_SETTING, WatchBudget, Watcher

KEY_MAX_CHARS = 200
REASON_MAX_CHARS = 200
GAME_ID = re.compile(r"[a-z_]{1,32}")  # the shape of a rules registry id (anything else names no table)
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
    "ValidateAction": frozenset({"backend", "operator"}),
    "GetHand": frozenset({"*"}),
    "GetCashOut": frozenset({"backend", "operator"}),
    "Heartbeat": frozenset({"backend", "operator"}),
    "Reconnect": frozenset({"backend", "operator"}),
    "IssuePlayerToken": frozenset({"backend", "operator"}),
    # Closing returns every player's chips and ends the table for good: a human decision.
    "CloseTable": frozenset({"operator"}),
}


def policy(tokens: dict[str, str]) -> AccessPolicy:
    return AccessPolicy(tokens=tokens, allow=ALLOW)


@dataclass
class TableLimits:
    """What one player, calling service or owner may take of this instance
    (``socai.infra.limits``; the settings are ``SOCAI_LIMIT_*``).

    A player's calls and streams are counted where they are served (a forwarded call, at the
    instance holding its table, once); the calling service's streams likewise. An owner's
    creations are counted by the instance that creates the table, its open tables over every
    instance (``TableStore.create_table``)."""

    player_calls: RateLimiter
    player_streams: Slots
    caller_streams: Slots
    owner_creates: RateLimiter
    owner_tables: int
    watch_budget: WatchBudget

    @classmethod
    def of(cls, limits: Limits) -> TableLimits:
        per_min = limits.owner_tables_per_min
        return cls(
            player_calls=RateLimiter("table", "SOCAI_LIMIT_PLAYER_CALLS_PER_S", limits.player_calls_per_s),
            player_streams=Slots("table", "SOCAI_LIMIT_PLAYER_STREAMS", limits.player_streams),
            caller_streams=Slots("table", "SOCAI_LIMIT_CALLER_STREAMS", limits.caller_streams),
            owner_creates=RateLimiter(
                "table",
                "SOCAI_LIMIT_OWNER_TABLES_PER_MIN",
                per_min / 60.0,
                burst=float(per_min),
                rate_text=f"{per_min} tables per minute",
                setting_value=per_min,
            ),
            owner_tables=limits.owner_tables,
            watch_budget=WatchBudget(limits.watch_queued_events),
        )

    @contextmanager
    def stream(self, caller: str, player: str | None) -> Iterator[None]:
        """Hold a stream of ``caller`` (and of ``player``, when the viewer is one) while it is
        open. Raises ResourceExhausted("TOO_MANY_STREAMS") when either has all it may."""
        if player:
            self.player_streams.acquire(player)
        try:
            self.caller_streams.acquire(caller)
        except BaseException:
            if player:
                self.player_streams.release(player)
            raise
        try:
            yield
        finally:
            self.caller_streams.release(caller)
            if player:
                self.player_streams.release(player)


def _fell_behind(watcher: Watcher, budget: WatchBudget) -> errors.ResourceExhausted:
    """Why a stream that fell too far behind was ended (its client watches again from the
    last ``seq`` it kept)."""
    if watcher.ended_by == MEMORY_FULL:
        return errors.ResourceExhausted(
            MEMORY_FULL,
            f"this stream was the furthest behind when every stream of the instance together held "
            f"{budget.max_events} events ({WATCH_QUEUED_SETTING}); watch again from the last seq kept",
            limit=WATCH_QUEUED_SETTING,
            max=budget.max_events,
        )
    return errors.ResourceExhausted(
        watcher.ended_by,
        f"this stream fell {WATCH_QUEUE_MAX} events behind; watch again from the last seq kept",
        limit="WATCH_QUEUE_MAX",
        max=WATCH_QUEUE_MAX,
    )


def _key(key: str, what: str = "idempotency_key") -> str:
    if not key or len(key) > KEY_MAX_CHARS or not key.isprintable():
        raise errors.InvalidArgument("BAD_IDEMPOTENCY_KEY", f"{what} must be 1..{KEY_MAX_CHARS} printable characters")
    return key


def _reason(reason: str) -> str:
    if not reason.strip() or len(reason) > REASON_MAX_CHARS or not reason.isprintable():
        raise errors.InvalidArgument("BAD_REASON", f"reason must be 1..{REASON_MAX_CHARS} printable characters")
    return reason


def _table_id(table_id: str) -> str:
    if not TABLE_ID.fullmatch(table_id or ""):
        raise errors.InvalidArgument("BAD_TABLE_ID", "table_id must be 1-32 letters and digits")
    return table_id


class TableServicer(pb_grpc.TableServiceServicer):
    def __init__(
        self,
        manager: TableManager,
        player_token_key: str,
        router: Forwarder | None = None,
        limits: TableLimits | None = None,
        accepted_token_keys: tuple[str, ...] = (),
    ) -> None:
        self.manager = manager
        self.token_key = player_token_key  # issues tokens
        self.token_keys = (player_token_key, *accepted_token_keys)  # verifies them
        self.router = router
        self.limits = limits or TableLimits.of(Limits())

    def _elsewhere(self, table_id: str, context: Any) -> bool:
        """Whether the call must go to another instance (after checking the id's shape)."""
        return self.router is not None and not self.router.local(_table_id(table_id), context)

    async def _forward(self, method: str, table_id: str, request: Any, context: Any) -> Any:
        assert self.router is not None  # _elsewhere said so
        return await self.router.unary(method, table_id, request, context)

    def _player(self, token: str) -> str:
        """The player of ``token``. Raises what ``player_tokens.verify`` raises, and
        ResourceExhausted("RATE_LIMITED") when the player is over their calls per second."""
        player = player_tokens.verify(self.token_keys, token)
        self.limits.player_calls.admit(player)
        return player

    def _viewer(self, token: str) -> str | None:
        return self._player(token) if token else None

    async def CreateTable(self, request: pb.CreateTableRequest, context: Any) -> pb.CreateTableResponse:
        # The id decides the table's partition, hence which instance runs it: chosen here, so
        # that a call forwarded to that instance creates the very table it was sent for.
        config = convert.config_from_proto(request.config)
        if not request.table_id:
            request.table_id = self.manager.new_table_id()
        if self._elsewhere(request.table_id, context):
            return await self._forward("CreateTable", request.table_id, request, context)  # type: ignore[no-any-return]
        if config.owner_player_id:
            self.limits.owner_creates.admit(config.owner_player_id)
        table = await self.manager.create(config, request.table_id, owner_tables_max=self.limits.owner_tables)
        return pb.CreateTableResponse(table=convert.table_to_proto(table))

    async def GetTable(self, request: pb.GetTableRequest, context: Any) -> pb.GetTableResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("GetTable", request.table_id, request, context)  # type: ignore[no-any-return]
        try:
            table = await self.manager.get(request.table_id)
        except errors.PreconditionFailed as exc:
            if exc.code != "TABLE_CLOSED":
                raise
            closed = await self.manager.closed_or_raise(request.table_id)
            return pb.GetTableResponse(table=convert.closed_to_proto(closed))
        return pb.GetTableResponse(table=convert.table_to_proto(table))

    async def ListTables(self, request: pb.ListTablesRequest, context: Any) -> pb.ListTablesResponse:
        if request.page_size < 0:
            raise errors.InvalidArgument("BAD_PAGE_SIZE", "page_size must not be negative")
        if request.page_token and not TABLE_ID.fullmatch(request.page_token):
            raise errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token must be a table id from a previous page")
        if request.game and not GAME_ID.fullmatch(request.game):
            return pb.ListTablesResponse()  # no table plays a game of that name (and no query is made)
        if self.router is None or forwarded_by(context):
            # One instance, or a peer asking for this instance's part of its page.
            tables, next_token = self.manager.list(request.game, request.page_token, request.page_size)
            listed = [convert.table_to_proto(t) for t in tables]
            if request.include_closed and self.router is None:
                listed, next_token = await self._with_closed(request, listed, next_token)
            return pb.ListTablesResponse(tables=listed, next_page_token=next_token)
        # Every instance's tables: the page from the shared directory, each table's live
        # state from whoever runs it (here, or its holder: ``Forwarder.tables_elsewhere``).
        rows, next_token = await self.manager.directory(request.game, request.page_token, request.page_size)
        here = {t: self.manager.tables[t] for t, _, _ in rows if t in self.manager.tables}
        elsewhere = await self.router.tables_elsewhere([t for t, _, _ in rows if t not in here], request, context)
        page = []
        for table_id, config, created_s in rows:
            if table_id in here:
                table = convert.table_to_proto(here[table_id])
            elif table_id in elsewhere:
                table = elsewhere[table_id]
            else:
                # Between holders (or its holder did not answer): what the directory knows.
                table = pb.Table(table_id=table_id, config=convert.config_to_proto(config))
            table.created_at.CopyFrom(convert.timestamp(created_s))
            page.append(table)
        if request.include_closed:
            page, next_token = await self._with_closed(request, page, next_token)
        return pb.ListTablesResponse(tables=page, next_page_token=next_token)

    async def _with_closed(
        self, request: pb.ListTablesRequest, open_page: list[pb.Table], open_next: str
    ) -> tuple[list[pb.Table], str]:
        """One page of the open tables and the closed ones (every instance's: closed tables
        live in the shared store only), merged by id: the page ends at the page size, and the
        token is its last id."""
        limit = max(1, min(request.page_size or 100, 500))
        closed = await self.manager.deps.store.closed_tables(request.game, request.page_token, limit + 1)
        merged = sorted(open_page + [convert.closed_to_proto(c) for c in closed], key=lambda t: t.table_id)
        more = len(merged) > limit or bool(open_next) or len(closed) > limit
        page = merged[:limit]
        return page, (page[-1].table_id if more and page else "")

    async def CloseTable(self, request: pb.CloseTableRequest, context: Any) -> pb.CloseTableResponse:
        reason = _reason(request.reason)
        if self._elsewhere(request.table_id, context):
            return await self._forward("CloseTable", request.table_id, request, context)  # type: ignore[no-any-return]
        with bound(table_id=request.table_id):
            table = await self.manager.close(request.table_id, reason)
        return pb.CloseTableResponse(table=convert.any_table_to_proto(table))

    async def JoinTable(self, request: pb.JoinTableRequest, context: Any) -> pb.JoinTableResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("JoinTable", request.table_id, request, context)  # type: ignore[no-any-return]
        player = self._player(request.player_token)
        key = _key(request.idempotency_key)
        if request.guild_id:
            accounts.guild(request.guild_id)  # a malformed id: BAD_ACCOUNT_ID, nothing written
        table = await self.manager.get(request.table_id)
        with bound(table_id=table.table_id):
            seat = await table.join(player, request.buy_in_gold, request.seat, key, request.guild_id)
        return pb.JoinTableResponse(seat=seat, table=convert.table_to_proto(table))

    async def LeaveTable(self, request: pb.LeaveTableRequest, context: Any) -> pb.LeaveTableResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("LeaveTable", request.table_id, request, context)  # type: ignore[no-any-return]
        player = self._player(request.player_token)
        when = LEAVE_AFTER_HAND if request.when == pb.LEAVE_WHEN_AFTER_HAND else LEAVE_NOW
        table = await self.manager.get(request.table_id)
        with bound(table_id=table.table_id):
            try:
                result = await table.leave(player, when)
            except errors.NotFound as exc:
                # Asked again with its key once the player stood up (the first answer was
                # lost): the leave is done, and the answer is where its cash-out stands.
                row = await self.manager.deps.store.last_cashout(table.table_id, player)
                if exc.code != "NOT_SEATED" or not request.idempotency_key or row is None:
                    raise
                result = LeaveResult(STOOD_UP, cash_out_gold=row.cashout.amount_gold)
        cashed = result.outcome == STOOD_UP and await self.manager.wait_cashout(table.table_id, player, LEAVE_WAIT_S)
        cash_out = await self._cash_out(table, player)
        return convert.leave_to_proto(result, cashed, cash_out)

    async def _cash_out(self, table: Table, player: str) -> pb.CashOut:
        row = await self.manager.deps.store.last_cashout(table.table_id, player)
        return convert.cash_out_to_proto(table.table_id, player, row, table.seat_of(player) is not None)

    async def GetCashOut(self, request: pb.GetCashOutRequest, context: Any) -> pb.GetCashOutResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("GetCashOut", request.table_id, request, context)  # type: ignore[no-any-return]
        player = self._player(request.player_token)
        try:
            table = await self.manager.get(request.table_id)
        except errors.PreconditionFailed as exc:
            if exc.code != "TABLE_CLOSED":
                raise
            row = await self.manager.deps.store.last_cashout(request.table_id, player)
            return pb.GetCashOutResponse(cash_out=convert.cash_out_to_proto(request.table_id, player, row, False))
        return pb.GetCashOutResponse(cash_out=await self._cash_out(table, player))

    async def StartHand(self, request: pb.StartHandRequest, context: Any) -> pb.StartHandResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("StartHand", request.table_id, request, context)  # type: ignore[no-any-return]
        table = await self.manager.get(request.table_id)
        with bound(table_id=table.table_id):
            hand_id = await table.start_hand()
        return pb.StartHandResponse(hand_id=hand_id)

    async def Act(self, request: pb.ActRequest, context: Any) -> pb.ActResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("Act", request.table_id, request, context)  # type: ignore[no-any-return]
        player = self._player(request.player_token)
        key = _key(request.idempotency_key)
        body = convert.action_from_proto(request.action)
        table = await self.manager.get(request.table_id)
        result, replayed = await table.act(player, request.hand_id, request.seat, body, key)
        return pb.ActResponse(seq=result.seq, event_id=result.event_id, replayed=replayed, log_seq=result.log_seq)

    async def ValidateAction(self, request: pb.ValidateActionRequest, context: Any) -> pb.ValidateActionResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("ValidateAction", request.table_id, request, context)  # type: ignore[no-any-return]
        player = self._player(request.player_token)
        table = await self.manager.get(request.table_id)
        try:
            body = convert.action_from_proto(request.action)
            refused = await table.validate(player, request.hand_id, request.seat, body)
        except errors.InvalidArgument as exc:  # a malformed action is refused like Act refuses it
            refused = exc
        if refused is None:
            return pb.ValidateActionResponse(accepted=True)
        return pb.ValidateActionResponse(
            accepted=False, reason=refused.code, message=refused.message, rule=refused.details.get("rule", "")
        )

    async def GetHand(self, request: pb.GetHandRequest, context: Any) -> pb.GetHandResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("GetHand", request.table_id, request, context)  # type: ignore[no-any-return]
        viewer = self._viewer(request.player_token)
        table = await self.manager.get(request.table_id)
        events, record = await table.hand_events(viewer, request.hand_id)
        reply = pb.GetHandResponse(hand_id=request.hand_id, ended=record is not None, events=events)
        if record is not None and record.replayed is not None:
            reply.settlement.CopyFrom(convert.settlement_to_proto(record.replayed))
        return reply

    async def GetTableState(self, request: pb.GetTableStateRequest, context: Any) -> pb.GetTableStateResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("GetTableState", request.table_id, request, context)  # type: ignore[no-any-return]
        viewer = self._viewer(request.player_token)
        table = await self.manager.get(request.table_id)
        view = await table.view_now(viewer)
        return pb.GetTableStateResponse(state=convert.state_to_proto(table, view))

    async def WatchTable(  # type: ignore[override]  # serialized messages: see add_to_server
        self, request: pb.WatchTableRequest, context: Any
    ) -> AsyncIterator[bytes]:
        """The table's stream as ``WatchTableResponse`` messages already serialized: each
        built and serialized once for all the streams of a visibility class
        (``convert.watch_item_wire``), and a forwarded stream relayed as its holder sent it."""
        if self._elsewhere(request.table_id, context):
            assert self.router is not None
            async for reply in self.router.stream("WatchTable", request.table_id, request, context):
                yield reply
            return
        viewer = self._viewer(request.player_token)
        with self.limits.stream(current_caller.get(), viewer):
            async for reply in self._watch(request, viewer):
                yield reply

    async def _watch(self, request: pb.WatchTableRequest, viewer: str | None) -> AsyncIterator[bytes]:
        table = await self.manager.get(request.table_id)
        budget = self.limits.watch_budget
        watcher, snapshot = await table.watch(viewer, request.from_seq)
        budget.add(watcher)  # before the next await: no event is queued for it unbudgeted
        try:
            for first in snapshot:
                yield convert.watch_item_wire(first)
            while True:
                item = await watcher.next()
                if item is None:
                    if watcher.overflowed:
                        raise _fell_behind(watcher, budget)
                    if table.closed:
                        return  # the table closed (TableClosed was the last event sent)
                    if self.manager.tables.get(table.table_id) is not table:
                        # The table moved to another instance: watch again (from the last
                        # seq seen) and the call reaches the new one.
                        raise errors.Unavailable(
                            "TABLE_MOVED", f"{table.table_id} moved to another instance; watch again"
                        )
                    return
                yield convert.watch_item_wire(item)
        finally:
            table.unwatch(watcher)
            budget.remove(watcher)

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Any) -> pb.HeartbeatResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("Heartbeat", request.table_id, request, context)  # type: ignore[no-any-return]
        player = self._player(request.player_token)
        table = await self.manager.get(request.table_id)
        await table.heartbeat(player)
        return pb.HeartbeatResponse(server_time=convert.timestamp(time.time()))

    async def Reconnect(self, request: pb.ReconnectRequest, context: Any) -> pb.ReconnectResponse:
        if self._elsewhere(request.table_id, context):
            return await self._forward("Reconnect", request.table_id, request, context)  # type: ignore[no-any-return]
        player = self._player(request.player_token)
        table = await self.manager.get(request.table_id)
        view = await table.reconnect(player)
        return pb.ReconnectResponse(state=convert.state_to_proto(table, view))

    async def IssuePlayerToken(self, request: pb.IssuePlayerTokenRequest, context: Any) -> pb.IssuePlayerTokenResponse:
        ttl = request.ttl_s or player_tokens.TTL_DEFAULT_S
        token, expires = player_tokens.issue(self.token_key, request.player_id, ttl)
        return pb.IssuePlayerTokenResponse(player_token=token, expires_at=convert.timestamp(expires))


class _Registered:
    """Stands in for a server while the generated registration runs, keeping the method
    handlers it registers (``add_to_server``)."""

    def __init__(self) -> None:
        self.service = ""
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass  # the same handlers come through add_registered_method_handlers

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.service, self.handlers = service, dict(handlers)


def add_to_server(servicer: TableServicer, server: Any) -> None:
    """Register ``servicer`` on ``server`` with the generated code's own method handlers
    (``add_TableServiceServicer_to_server``), but for WatchTable's serializer: none, so the
    bytes ``TableServicer.WatchTable`` yields go out as they are. A message shared by every
    stream of a visibility class is then serialized once, not once per stream.

    Raises AssertionError (``errors.check``) when the generated registration no longer
    hands over its handlers (a grpcio upgrade; ``tests/unit/table/test_watch_wire.py``
    checks it)."""
    generated = _Registered()
    pb_grpc.add_TableServiceServicer_to_server(servicer, generated)
    watch = generated.handlers.get("WatchTable")
    errors.check(
        watch is not None and watch.unary_stream is not None,
        "the generated TableService registration registers WatchTable as a server stream",
    )
    assert watch is not None  # for the type checker: checked above
    generated.handlers["WatchTable"] = grpc.unary_stream_rpc_method_handler(
        watch.unary_stream, request_deserializer=watch.request_deserializer
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(generated.service, generated.handlers),))
    server.add_registered_method_handlers(generated.service, generated.handlers)
