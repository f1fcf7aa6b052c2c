"""A typed client of the table service, for a game backend: seat players, play their turns
from their streams, leave and wait for the cash-out.

The patterns of the API guide (docs/api/README.md), written once::

    async with TableClient("127.0.0.1:50052", service_token) as tables:
        table = await tables.create_table(game="tienlen", stake_gold=10, seats_max=4, auto_start_players=4)
        seat = await tables.join(table.table_id, "alice", buy_in_gold=1_000)
        async for turn in seat.turns():           # each time alice's decision is due
            await turn.act(turn.actions()[0])     # every legal move is listed or described
        ...
        leaving = await seat.leave()
        paid = await leaving.cashed_out()

- Every call presents the service's bearer token; a player's calls carry the player's token
  (``issue_player_token``; ``join`` issues one when given none).
- Calls that may be tried again are (the service restarting, the table between instances:
  UNAVAILABLE, DEADLINE_EXCEEDED), with back-off and the service's ``retry_after_ms``, for
  up to ``retry_for_s``; writes are retried under the same idempotency key, which the
  service answers with the first result (an action whose answer was lost is never played
  twice, even when it was the hand's last). Any other error is an answer: ``TableError``.
- ``Seat.turns`` reads the player's ``WatchTable`` stream: every message carries the
  player's view (whose turn, the deadline, their cards, what to beat, their legal moves), so
  a turn needs no other call; the stream is opened again where it broke.

Only the generated protobuf code and grpc are used here, never the services.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import grpc

from socai.client.errors import TableError, table_error
from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc

T = TypeVar("T")

RPC_TIMEOUT_S: Final = 10.0  # one call's deadline: a stalled service fails the call, which is retried
RETRY_FOR_S: Final = 60.0  # how long a retryable call is tried again
BACKOFF_FIRST_S: Final = 0.1
BACKOFF_MAX_S: Final = 2.0
LEAVE_NOW: Final = "now"
LEAVE_AFTER_HAND: Final = "after_hand"


@dataclass(frozen=True)
class Update:
    """One message of a player's stream: the event (None when the message only brings the
    view, or a cash-out), the player's view right after it, and a completed cash-out."""

    event: epb.Event | None
    view: pb.TableView
    cash_out: pb.CashOut | None = None

    @property
    def kind(self) -> str:
        """The event's body (``hand_started``, ``cards_played`` …), "" without an event."""
        return str(self.event.WhichOneof("body") or "") if self.event is not None else ""


@dataclass(frozen=True)
class Turn:
    """A decision of the player is due: the view that says so, with the legal moves."""

    seat: Seat
    view: pb.TableView

    @property
    def hand_id(self) -> str:
        return self.view.hand_id

    @property
    def log_seq(self) -> int:
        return int(self.view.log_seq)

    @property
    def cards(self) -> list[str]:
        """The player's cards now."""
        return list(self.view.cards)

    @property
    def facing(self) -> pb.Facing:
        """What the player must beat or answer (the trick, the discard, the bet to call …)."""
        return self.view.facing

    @property
    def moves(self) -> list[pb.LegalMove]:
        """The legal moves, by kind: ``complete`` ones list every move, the others describe
        them (``text``, amount bounds) and give examples."""
        return list(self.view.legal_moves)

    @property
    def deadline_s(self) -> float:
        """When the decision's timer runs out (epoch seconds; 0 when none is armed)."""
        d = self.view.deadline
        return d.seconds + d.nanos / 1e9 if self.view.HasField("deadline") else 0.0

    def kinds(self) -> list[str]:
        return [m.kind for m in self.view.legal_moves]

    def move(self, kind: str) -> pb.LegalMove | None:
        return next((m for m in self.view.legal_moves if m.kind == kind), None)

    def actions(self, kind: str | None = None) -> list[pb.PlayerAction]:
        """The moves ready to send (of ``kind``): every move of a complete kind, the
        examples of the others."""
        return [a for m in self.view.legal_moves if kind is None or m.kind == kind for a in m.actions]

    async def act(self, action: pb.PlayerAction, *, key: str | None = None) -> pb.ActResponse:
        """``Seat.act`` for this turn's hand."""
        return await self.seat.act(action, hand_id=self.hand_id, key=key)

    async def validate(self, action: pb.PlayerAction) -> pb.ValidateActionResponse:
        """Whether ``action`` would be accepted now, without playing it."""
        return await self.seat.validate(action, hand_id=self.hand_id)


@dataclass(frozen=True)
class Leaving:
    """What ``Seat.leave`` did (``response.outcome``: stood up, forfeited the hand in play,
    or leaving after it), and the way to wait for the cash-out."""

    seat: Seat
    response: pb.LeaveTableResponse

    @property
    def outcome(self) -> int:
        return int(self.response.outcome)

    async def cashed_out(self, timeout_s: float = 60.0) -> pb.CashOut:
        """The player's cash-out once it is paid (``DONE``) or held (``ALARM``), from the
        player's stream (``WatchTableResponse.cash_out``). Raises TimeoutError."""
        return await self.seat.cashed_out(timeout_s)


class TableClient:
    """The table service, as a game backend (a service token: caller ``backend``) uses it.

    ``calls`` counts the calls made, by method (a test can check what a client needed)."""

    def __init__(
        self,
        address: str,
        service_token: str,
        *,
        rpc_timeout_s: float = RPC_TIMEOUT_S,
        retry_for_s: float = RETRY_FOR_S,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        self._channel = channel or grpc.aio.insecure_channel(
            address,
            options=[("grpc.max_receive_message_length", 16 * 1024 * 1024), ("grpc.lb_policy_name", "round_robin")],
        )
        self._own_channel = channel is None
        self.stub = pb_grpc.TableServiceStub(self._channel)
        self.metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {service_token}"),)
        self.rpc_timeout_s = rpc_timeout_s
        self.retry_for_s = retry_for_s
        self.calls: Counter[str] = Counter()
        self.retries = 0

    async def __aenter__(self) -> TableClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_channel:
            await self._channel.close()

    async def call(self, method: str, request: Any, *, retry: bool = True, timeout_s: float | None = None) -> Any:
        """``method`` of the service with ``request``: tried again while the answer is
        UNAVAILABLE or DEADLINE_EXCEEDED (with ``retry``), else its answer. Raises
        ``TableError``."""
        self.calls[method] += 1
        stub_method = getattr(self.stub, method)
        timeout = timeout_s or self.rpc_timeout_s

        async def once() -> Any:
            return await stub_method(request, metadata=self.metadata, timeout=timeout)

        return await self.retrying(once) if retry else await _answer(once)

    async def retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()`` until it answers, as the API guide recommends: a retryable failure is
        tried again after a back-off (0.1 s, doubling to 2 s, or the service's
        ``retry_after_ms``) for up to ``retry_for_s``. Raises ``TableError``."""
        delay = BACKOFF_FIRST_S
        started = time.monotonic()
        while True:
            try:
                return await _answer(call)
            except TableError as exc:
                if not exc.retryable or time.monotonic() - started > self.retry_for_s:
                    raise
                self.retries += 1
                await asyncio.sleep(max(delay, exc.retry_after_s))
                delay = min(delay * 2, BACKOFF_MAX_S)

    # --- players, tables, seats ------------------------------------------------------

    async def issue_player_token(self, player_id: str, ttl_s: int = 0) -> str:
        reply = await self.call("IssuePlayerToken", pb.IssuePlayerTokenRequest(player_id=player_id, ttl_s=ttl_s))
        return str(reply.player_token)

    async def create_table(
        self, config: pb.TableConfig | None = None, *, table_id: str = "", **fields: Any
    ) -> pb.Table:
        """Open a table: ``config``, or its fields by name (``game``, ``stake_gold``,
        ``seats_max``, ``options`` …). With ``table_id`` (1-32 letters and digits) the
        call is idempotent, hence retried; without it the service picks the id and the
        call is made once."""
        request = pb.CreateTableRequest(config=config or pb.TableConfig(**fields), table_id=table_id)
        reply: pb.CreateTableResponse = await self.call("CreateTable", request, retry=bool(table_id))
        return reply.table

    async def table(self, table_id: str) -> pb.Table:
        reply: pb.GetTableResponse = await self.call("GetTable", pb.GetTableRequest(table_id=table_id))
        return reply.table

    async def join(
        self,
        table_id: str,
        player_id: str,
        buy_in_gold: int,
        *,
        player_token: str | None = None,
        seat: int = -1,
        key: str | None = None,
        guild_id: str = "",
    ) -> Seat:
        """Buy in and sit ``player_id`` down (any free seat with -1), a member of
        ``guild_id`` if given; the join's key (one of its own when none is given) makes a
        retry answer the same seating."""
        token = player_token or await self.issue_player_token(player_id)
        request = pb.JoinTableRequest(
            table_id=table_id,
            player_token=token,
            buy_in_gold=buy_in_gold,
            seat=seat,
            idempotency_key=key or f"join-{uuid.uuid4().hex}",
            guild_id=guild_id,
        )
        reply = await self.call("JoinTable", request)
        return Seat(self, table_id, player_id, token, int(reply.seat))

    def seat(self, table_id: str, player_id: str, player_token: str, seat: int) -> Seat:
        """A player already seated (a backend that restarted, say)."""
        return Seat(self, table_id, player_id, player_token, seat)

    async def start_hand(self, table_id: str) -> str:
        return str((await self.call("StartHand", pb.StartHandRequest(table_id=table_id))).hand_id)

    async def state(self, table_id: str, player_token: str = "") -> pb.TableState:
        """What the player (a spectator without a token) sees now. A client that follows a
        stream needs this only to show a table before watching it."""
        request = pb.GetTableStateRequest(table_id=table_id, player_token=player_token)
        reply: pb.GetTableStateResponse = await self.call("GetTableState", request)
        return reply.state

    async def hand(self, table_id: str, hand_id: str, player_token: str = "") -> pb.GetHandResponse:
        """One hand's events as the viewer may see them and, once ended, its settlement."""
        request = pb.GetHandRequest(table_id=table_id, hand_id=hand_id, player_token=player_token)
        reply: pb.GetHandResponse = await self.call("GetHand", request)
        return reply

    def watch(self, table_id: str, player_token: str = "", from_seq: int = 0) -> Any:
        """The raw ``WatchTable`` call (``Seat.updates`` opens it again where it breaks)."""
        self.calls["WatchTable"] += 1
        request = pb.WatchTableRequest(table_id=table_id, player_token=player_token, from_seq=from_seq)
        return self.stub.WatchTable(request, metadata=self.metadata)


class Seat:
    """One player at one table: their stream, their moves, their leaving."""

    def __init__(self, client: TableClient, table_id: str, player_id: str, player_token: str, seat: int) -> None:
        self.client = client
        self.table_id = table_id
        self.player_id = player_id
        self.player_token = player_token
        self.seat = seat
        self.streams_opened = 0
        # The log position of the player's latest accepted action: a view before it was
        # built before that action counted, so its decision is answered already.
        self.acted_log_seq = 0

    def __repr__(self) -> str:
        return f"Seat({self.table_id}, {self.player_id}, seat {self.seat})"

    async def updates(self) -> AsyncIterator[Update]:
        """Every message of the player's stream, in order. The stream is opened again when
        it breaks (UNAVAILABLE: a restart, the table moving to another instance; or ended by
        a service that stops), after a back-off; the hand's events already seen are not
        repeated, and the first message of the new stream brings the view now. Ends when
        the table is closed."""
        seen: set[tuple[str, int]] = set()
        delay = BACKOFF_FIRST_S
        while True:
            self.streams_opened += 1
            replaying = self.streams_opened > 1  # a stream opened again starts with the hand so far
            call = self.client.watch(self.table_id, self.player_token)
            try:
                async for message in call:
                    delay = BACKOFF_FIRST_S
                    event = message.event if message.HasField("event") else None
                    view = message.view
                    if event is not None:
                        where = (event.hand_id, int(event.seq))
                        if replaying and view.more_follows and where in seen:
                            continue
                        seen.add(where)
                    if not view.more_follows:
                        replaying = False
                    yield Update(event, view, message.cash_out if message.HasField("cash_out") else None)
            except grpc.aio.AioRpcError as exc:
                error = table_error(exc)
                if not error.retryable:
                    raise error from None
                delay = max(delay, error.retry_after_s)
            finally:
                call.cancel()
            table = await self.client.table(self.table_id)
            if table.status == pb.TABLE_STATUS_CLOSED:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    async def turns(self) -> AsyncIterator[Turn]:
        """Each moment a decision of the player is due (``turn_of``), once. A player who
        does not act gets the next moment that needs them (a timer that ran out moves the
        hand on). Ends when the player stands up or the table closes."""
        last: tuple[str, int] | None = None
        async for update in self.updates():
            if self.stood_up(update):
                return
            turn = self.turn_of(update)
            if turn is None or (turn.hand_id, turn.log_seq) == last:
                continue
            last = (turn.hand_id, turn.log_seq)
            yield turn

    def turn_of(self, update: Update) -> Turn | None:
        """The player's turn in ``update``, or None: its view is the last of a change
        (``more_follows`` false), names the player's seat in ``to_act``, has legal moves and
        is not older than the player's latest accepted action (``acted_log_seq``). For a
        client that reads ``updates`` itself (to count hands, say).

        The last check matters where players decide at once (Mậu Binh's arrangements, Ba
        Cây's and Tài Xỉu's bets): while the player's action was on its way, the others'
        actions kept coming, each with a view that still waits for the player. Those views
        were built before the action counted; acting on them again is refused
        (``ALREADY_ACTED``, or ``STALE_HAND`` once the hand is over)."""
        view = update.view
        if view.more_follows or view.viewer_seat < 0 or view.viewer_seat not in view.to_act or not view.legal_moves:
            return None
        if view.log_seq < self.acted_log_seq:
            return None
        self.seat = view.viewer_seat
        return Turn(self, view)

    def stood_up(self, update: Update) -> bool:
        """Whether ``update`` shows the player stood up: their PlayerStoodUp, or the view at
        the end of a change naming no seat of theirs (``viewer_seat`` -1). The second covers
        a stand-up written while the stream was down (a restart, a handover, a timeout that
        stood them up): the stream opened again starts from the hand in play, so its
        PlayerStoodUp, a table fact of the moment, is not sent again, and a client that
        waited for it would sit at a table it has left."""
        event = update.event
        if (
            event is not None
            and event.WhichOneof("body") == "player_stood_up"
            and event.player_stood_up.player_id == self.player_id
        ):
            return True
        return not update.view.more_follows and update.view.viewer_seat < 0

    async def act(self, action: pb.PlayerAction, *, hand_id: str, key: str | None = None) -> pb.ActResponse:
        """Play ``action`` in ``hand_id`` for this player (its seat left 0: the caller's).

        One idempotency key for every try (a fresh one when none is given): a retry after a
        lost answer returns the first result (``replayed``), even after the hand ended.
        Raises ``TableError`` for a refusal (``reason`` e.g. ``CANNOT_BEAT``, ``rule``)."""
        request = pb.ActRequest(
            table_id=self.table_id,
            hand_id=hand_id,
            action=action,
            idempotency_key=key or uuid.uuid4().hex,
            player_token=self.player_token,
        )
        reply: pb.ActResponse = await self.client.call("Act", request)
        self.acted_log_seq = max(self.acted_log_seq, int(reply.log_seq))
        return reply

    async def validate(self, action: pb.PlayerAction, *, hand_id: str) -> pb.ValidateActionResponse:
        request = pb.ValidateActionRequest(
            table_id=self.table_id, hand_id=hand_id, action=action, player_token=self.player_token
        )
        reply: pb.ValidateActionResponse = await self.client.call("ValidateAction", request)
        return reply

    async def heartbeat(self) -> None:
        """The player is here (a player who sent heartbeats and stops is disconnected)."""
        request = pb.HeartbeatRequest(table_id=self.table_id, player_token=self.player_token)
        await self.client.call("Heartbeat", request, retry=False)

    async def reconnect(self) -> pb.TableState:
        request = pb.ReconnectRequest(table_id=self.table_id, player_token=self.player_token)
        reply: pb.ReconnectResponse = await self.client.call("Reconnect", request)
        return reply.state

    async def leave(self, when: str = LEAVE_NOW) -> Leaving:
        """Leave the table: ``LEAVE_NOW`` (a hand in play is forfeited by the game's rule)
        or ``LEAVE_AFTER_HAND`` (play it out first). The answer says which, what it costs
        and where the cash-out stands. A retry (its key) after the player stood up answers
        where that cash-out stands, not NOT_SEATED."""
        request = pb.LeaveTableRequest(
            table_id=self.table_id,
            player_token=self.player_token,
            when=pb.LEAVE_WHEN_AFTER_HAND if when == LEAVE_AFTER_HAND else pb.LEAVE_WHEN_NOW,
            idempotency_key=f"leave-{uuid.uuid4().hex}",
        )
        return Leaving(self, await self.client.call("LeaveTable", request))

    async def cash_out(self) -> pb.CashOut:
        """The player's last cash-out at the table, now."""
        request = pb.GetCashOutRequest(table_id=self.table_id, player_token=self.player_token)
        reply: pb.GetCashOutResponse = await self.client.call("GetCashOut", request)
        return reply.cash_out

    async def cashed_out(self, timeout_s: float = 60.0) -> pb.CashOut:
        """Wait for the player's cash-out to complete (``DONE``, or ``ALARM`` when held),
        from their stream; asked once more each time the stream opens, in case it completed
        before. Raises TimeoutError."""
        finished = (pb.CASH_OUT_STATUS_DONE, pb.CASH_OUT_STATUS_ALARM)

        async def wait() -> pb.CashOut:
            opened = self.streams_opened
            async for update in self.updates():
                if update.cash_out is not None and update.cash_out.status in finished:
                    return update.cash_out
                if self.streams_opened != opened:
                    opened = self.streams_opened
                    now = await self.cash_out()
                    if now.status in finished:
                        return now
            return await self.cash_out()  # the table closed: its last cash-outs are still paid

        return await asyncio.wait_for(wait(), timeout_s)


async def _answer(call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except grpc.aio.AioRpcError as exc:
        raise table_error(exc) from None


__all__ = [
    "LEAVE_AFTER_HAND",
    "LEAVE_NOW",
    "Leaving",
    "Seat",
    "TableClient",
    "Turn",
    "Update",
]
