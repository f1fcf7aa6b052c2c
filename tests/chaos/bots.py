"""Bots that keep playing through faults: the load of the chaos suite and the soak.

They play as ``socai simulate`` does (``socai_table.simulate``: one table per game in turn,
its table configurations, players per game and fees; each bot a client of the table service
through ``socai.client``, acting on its own stream's turns with random legal moves, now and
then letting its timer run out) with three differences a fault run needs:

- they never give up: a failed call or a broken ``WatchTable`` stream (a service killed, NATS
  or PostgreSQL restarting) is retried with back-off (the client's, then the bot's own for
  as long as it plays), so a bot acts again as soon as the stack does;
- they play until told to stop, not a number of hands, and a bot that went broke buys in
  again (new deposit, new join key), so every table keeps two or more players;
- they count what they saw per table (the latest hand number, seated players, errors by
  code), which the frozen-table check reads.

With a ``seed`` each table's bots draw their choices (which candidate move, whether to let
the timer run out) from a random stream of their own, ``Random(f"{seed}/{index}")``: the
same seed gives every table the same sequence of draws, whatever the other tables do. What
they are offered to choose from is another matter: the cards come from the table service's
deck seeds (OS CSPRNG, never derivable: provably fair dealing) and the timing of a run
moves the hands on, so a run's hands are not replayed by its seed.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

import grpc

from socai import accounts
from socai.client import Seat, TableClient, TableError
from socai.client.bots import random_action
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from socai.rules import registry
from socai_table.simulate import SIMULTANEOUS_ACTIONS_MAX, fee_for, options_for, players_for

RPC_DEADLINE_S = 5.0
RETRY_FOR_S = 30.0  # the client's retries of one call; the bot goes on trying after that
BACKOFF_MAX_S = 2.0
REBUY_INTERVAL_S = 2.0
# A bot asks to leave until the table answers, for this long at most: each try is itself the
# client's retries of up to RETRY_FOR_S, so a count of tries would not bound it.
LEAVE_FOR_S = 180.0
LEAVE_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# A call that still ends in one of these after the client's own retries failed the player:
# the service was not there for longer than a client waits (``RETRY_FOR_S``) or broke.
GAVE_UP: Final = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)


def hand_number(hand_id: str) -> int:
    """``t123-h7`` -> 7 (0 for no hand)."""
    _, sep, n = hand_id.rpartition("-h")
    return int(n) if sep and n.isdigit() else 0


@dataclass
class TableLoad:
    table_id: str
    game: str
    players: dict[str, str] = field(default_factory=dict)  # player id -> token
    seats: dict[str, Seat] = field(default_factory=dict)  # player id -> its seat (its stream, its moves)
    hand: int = 0  # the latest hand number seen
    seated: int = 0  # players seated at the last look
    facts_seen: set[str] = field(default_factory=set)  # the seatings and stand-ups seen
    recount: bool = False  # a seating or stand-up since ``seated`` was counted
    hands_ended: int = 0
    actions: int = 0
    rebuys: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    last_progress: float = field(default_factory=time.monotonic)  # when the latest hand started
    # When the table last moved at all (a new event of its hand): a long Tiến Lên or Sâm Lốc
    # hand under load can outlast any "no new hand for N s" limit while it plays on.
    last_event: float = field(default_factory=time.monotonic)
    last_seq: int = 0  # the table's log position at the last look
    per_hand: Counter[tuple[str, int]] = field(default_factory=Counter)  # (hand, seat) -> decisions
    buy_ins: Counter[str] = field(default_factory=Counter)  # player -> buy-ins that seated them
    join_attempts: Counter[str] = field(default_factory=Counter)  # player -> join keys used up
    next_rebuy: dict[str, float] = field(default_factory=dict)  # player -> earliest next try
    left: set[str] = field(default_factory=set)  # players whose LeaveTable was answered (or not seated)
    rng: random.Random = field(default_factory=random.Random)  # this table's bots' choices
    leave_refused: dict[str, str] = field(default_factory=dict)  # player -> why their leave never got through
    gave_up: list[tuple[float, str]] = field(default_factory=list)  # (epoch s, "<call>:<reason>") past retries


@dataclass(frozen=True)
class BotConfig:
    tables: int
    games: tuple[str, ...]
    stake_gold: int = 100
    turn_timeout_s: int = 1
    timeout_rate: float = 0.02  # chance a bot lets its timer run out
    between_hands_ms: int = 50


class Bots:
    def __init__(self, settings: Settings, tables: int, games: tuple[str, ...] = (), seed: int | None = None) -> None:
        self.settings = settings
        self.config = BotConfig(tables=tables, games=games or tuple(registry.available()))
        self.seed = seed
        self.run_id = uuid.uuid4().hex[:8]
        self._channels = [
            channel(settings.ledger_addr, settings.tokens.get("cashier", settings.token_of("backend"))),
        ]
        self.tables = TableClient(
            settings.table_addr, settings.token_of("backend"), rpc_timeout_s=RPC_DEADLINE_S, retry_for_s=RETRY_FOR_S
        )
        self.cashier = lgrpc.LedgerServiceStub(self._channels[0])
        self.loads: dict[str, TableLoad] = {}
        self.stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def close(self) -> None:
        await self.tables.close()
        for ch in self._channels:
            await ch.close()

    # ---- lifecycle -------------------------------------------------------------------

    async def open_tables(self) -> list[str]:
        """Create every table and seat its bots (retrying through transient failures)."""
        games = self.config.games
        loads = await asyncio.gather(*(self._open(i, games[i % len(games)]) for i in range(self.config.tables)))
        for load in loads:
            self.loads[load.table_id] = load
        return [load.table_id for load in loads]

    def start(self) -> None:
        for load in self.loads.values():
            for player in load.players:
                self._tasks.append(asyncio.create_task(self._bot(load, player), name=f"bot-{player}"))

    async def stop(self, leave: bool = True) -> None:
        self.stopping.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if leave:
            await asyncio.gather(*(self._leave(load) for load in self.loads.values()), return_exceptions=True)
        await self.close()

    # ---- setup -----------------------------------------------------------------------

    async def _retry(self, what: str, call: object, load: TableLoad | None = None) -> object:
        delay = 0.1
        for _ in range(60):
            try:
                return await call()  # type: ignore[operator]
            except (grpc.aio.AioRpcError, TableError) as exc:
                status, reason = _status(exc)
                if load is not None:
                    load.errors[f"{what}:{reason or status.name}"] += 1
                if status not in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    grpc.StatusCode.ABORTED,
                    grpc.StatusCode.INTERNAL,
                ):
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
        raise RuntimeError(f"{what}: still failing after 60 attempts")

    async def _open(self, index: int, game: str) -> TableLoad:
        c = self.config
        options = options_for(game, index)
        buy_in = c.stake_gold * 20
        n = max(2, players_for(game, 0))
        owner = f"bot{self.run_id}x{index}x0"
        spec = registry.get(game).SPEC
        config = pb.TableConfig(
            game=game,
            stake_gold=c.stake_gold,
            fee_bps=fee_for(game, index, options),
            seats_max=n if game == "taixiu" else max(n, spec.players_min),
            options=options,
            buy_in_min_gold=buy_in,
            buy_in_max_gold=buy_in * 5,
            auto_start_players=spec.players_min,
            turn_timeout_s=c.turn_timeout_s,
            owner_player_id=owner,
            between_hands_ms=c.between_hands_ms,
        )
        table_id = f"c{self.run_id}x{index}"
        created = await self._retry("CreateTable", lambda: self.tables.create_table(config, table_id=table_id))
        load = TableLoad(created.table_id, game)  # type: ignore[attr-defined]
        load.rng = random.Random(f"{self.seed}/{index}") if self.seed is not None else random.Random()
        if game == "taixiu" and options.get("mode") == "system":
            await self._retry(
                "FundBank",
                lambda: self.cashier.Transfer(
                    lpb.TransferRequest(
                        idempotency_key=f"chaos:{self.run_id}:bank:{load.table_id}",
                        from_account_id=accounts.EXTERNAL_CASHIER,
                        to_account_id=accounts.HOUSE_BANK,
                        amount_gold=c.stake_gold * 1_000_000,
                        kind="bankroll",
                        reference=load.table_id,
                    ),
                    timeout=RPC_DEADLINE_S,
                ),
                load,
            )
        for k in range(n):
            player = f"bot{self.run_id}x{index}x{k}"
            token = await self._retry("IssuePlayerToken", lambda p=player: self.tables.issue_player_token(p), load)
            load.players[player] = str(token)
            await self._buy_in(load, player, seat=k)
        await self._count_seated(load)
        return load

    def _stake_of(self, load: TableLoad, player: str) -> int:
        buy_in = self.config.stake_gold * 20
        return buy_in * (5 if load.game == "taixiu" and player.endswith("x0") else 1)  # the banker brings more

    async def _buy_in(self, load: TableLoad, player: str, seat: int = -1) -> None:
        """Deposit one buy-in and sit down. The deposit's key names the buy-in's number (a
        retry deposits once); the join's names the attempt, since a join refused for good
        (e.g. CASHOUT_PENDING) uses its key up."""
        stake = self._stake_of(load, player)
        attempt = load.buy_ins[player]
        join_attempt = load.join_attempts[player]
        await self._retry(
            "Deposit",
            lambda: self.cashier.Deposit(
                lpb.DepositRequest(
                    idempotency_key=f"chaos:{self.run_id}:{player}:{attempt}",
                    player_id=player,
                    amount_gold=stake,
                    reference="chaos bots",
                ),
                timeout=RPC_DEADLINE_S,
            ),
            load,
        )
        try:
            joined = await self._retry(
                "JoinTable",
                lambda: self.tables.join(
                    load.table_id,
                    player,
                    stake,
                    player_token=load.players[player],
                    seat=seat,
                    key=f"join-{player}-{join_attempt}",
                ),
                load,
            )
            assert isinstance(joined, Seat)
            load.seats[player] = joined
        except (grpc.aio.AioRpcError, TableError) as exc:
            status, reason = _status(exc)
            if status in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ALREADY_EXISTS):
                load.join_attempts[player] += 1  # the key is used up: the next try takes a new one
            if reason in ("ALREADY_SEATED", "INSUFFICIENT_FUNDS"):
                # An earlier join whose answer was lost seated them with this deposit: the
                # next buy-in needs a deposit of its own.
                load.buy_ins[player] += 1
            raise
        load.buy_ins[player] += 1
        load.join_attempts[player] += 1

    # ---- play ------------------------------------------------------------------------

    async def _bot(self, load: TableLoad, player: str) -> None:
        """One bot for as long as the bots play: it reads its own stream (opened again
        whenever it breaks), notes the table's progress, acts on its turns and, when it went
        broke and stood up, buys in again."""
        delay = 0.1
        while not self.stopping.is_set():
            seat = load.seats.get(player) or self.tables.seat(load.table_id, player, load.players[player], -1)
            opened = seat.streams_opened
            try:
                async for update in seat.updates():
                    delay = 0.1
                    if seat.streams_opened != opened:
                        opened = seat.streams_opened
                        if opened > 1:
                            await self._count_seated(load)  # facts may have passed while the stream was down
                    self._note(load, update)
                    if load.recount:
                        load.recount = False
                        await self._count_seated(load)
                    if seat.stood_up(update):
                        break  # broke: buy in again below
                    turn = seat.turn_of(update)
                    if turn is not None:
                        await self._decide(load, turn)
                    if self.stopping.is_set():
                        return
                await self._rebuy(load, player)
            except asyncio.CancelledError:
                raise
            except (grpc.aio.AioRpcError, TableError) as exc:
                status, reason = _status(exc)
                _failed(load, f"watch:{reason or status.name}", status)
            except Exception as exc:  # a bot must outlive anything the stack does to it
                load.errors[f"bot:{type(exc).__name__}: {str(exc)[:120]}"] += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    def _note(self, load: TableLoad, update: Any) -> None:
        """The table's progress as one of its bots sees it (every bot of a table sees it)."""
        view = update.view
        number = hand_number(view.hand_id)
        if number > load.hand or view.log_seq > load.last_seq:
            load.last_event = time.monotonic()
            load.last_seq = max(load.last_seq, int(view.log_seq))
        if number > load.hand:
            load.hand = number
            load.last_progress = time.monotonic()
            load.per_hand.clear()
        kind = update.kind
        if kind == "hand_ended":
            load.hands_ended += 1
        elif kind in ("player_seated", "player_stood_up") and update.event.event_id not in load.facts_seen:
            load.facts_seen.add(update.event.event_id)  # every bot of the table sees each fact: one look
            load.recount = True

    async def _rebuy(self, load: TableLoad, player: str) -> None:
        """Buy ``player`` in again once its cash-out is done (a pending one refuses the join:
        it is tried again every ``REBUY_INTERVAL_S``), and note who is seated."""
        while not self.stopping.is_set():
            await asyncio.sleep(REBUY_INTERVAL_S)
            try:
                await self._buy_in(load, player)
                load.rebuys += 1
                await self._count_seated(load)
                return
            except (grpc.aio.AioRpcError, TableError) as exc:
                status, reason = _status(exc)
                if reason == "ALREADY_SEATED":
                    await self._count_seated(load)  # seated already (a join whose answer was lost)
                    return
                _failed(load, f"rebuy:{reason or status.name}", status)
            except RuntimeError:
                load.errors["rebuy:RETRIES"] += 1

    async def _count_seated(self, load: TableLoad) -> None:
        table = await self.tables.table(load.table_id)
        load.seated = sum(1 for s in table.seats if s.player_id)

    async def _decide(self, load: TableLoad, turn: Any) -> None:
        """As ``socai simulate``'s bots: one of the turn's legal moves at random, or now and
        then the timer left to run out."""
        seat = turn.view.viewer_seat
        if len(turn.view.to_act) > 1:
            if load.per_hand[(turn.hand_id, seat)] >= SIMULTANEOUS_ACTIONS_MAX:
                return  # betting at once (Tài Xỉu): a few wagers each, then let the window close
            load.per_hand[(turn.hand_id, seat)] += 1
        if load.rng.random() < self.config.timeout_rate:
            return  # let the timer run out
        action = random_action(turn, load.rng)
        if action is None:
            return
        try:
            await turn.act(action)
            load.actions += 1
        except TableError as exc:
            _failed(load, f"act:{exc.reason or exc.status.name}", exc.status)

    async def _leave(self, load: TableLoad) -> None:
        """Every bot of the table asks to leave, as a client must: an UNAVAILABLE answer (a
        table between instances, one that had to rebuild itself) or no answer is asked
        again, with back-off, until the table answers; NOT_FOUND ``NOT_SEATED`` means the
        bot is not seated (broke, or an earlier try that stood it up lost its answer)."""
        for player, token in load.players.items():
            seat = self.tables.seat(load.table_id, player, token, -1)
            delay = 0.1
            deadline = time.monotonic() + LEAVE_FOR_S
            while True:
                try:
                    await seat.leave()
                    load.left.add(player)
                    break
                except TableError as exc:
                    reason = exc.reason or exc.status.name
                    load.errors[f"leave:{reason}"] += 1
                    if exc.status == grpc.StatusCode.NOT_FOUND:
                        load.left.add(player)
                        break
                    if exc.status not in LEAVE_RETRYABLE:
                        load.leave_refused[player] = reason
                        break
                    if time.monotonic() > deadline:
                        load.leave_refused[player] = f"still {reason} after {LEAVE_FOR_S:.0f} s"
                        break
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_MAX_S)

    def summary(self) -> dict[str, object]:
        errors: Counter[str] = Counter()
        for load in self.loads.values():
            errors.update(load.errors)
        return {
            "tables": len(self.loads),
            "hands_seen": sum(load.hand for load in self.loads.values()),
            "actions": sum(load.actions for load in self.loads.values()),
            "rebuys": sum(load.rebuys for load in self.loads.values()),
            "errors": dict(errors.most_common()),
        }

    def gave_up_between(self, start: float, end: float) -> Counter[str]:
        """The calls that failed a player past the client's retries (``GAVE_UP``) in [start, end]."""
        out: Counter[str] = Counter()
        for load in self.loads.values():
            out.update(what for at, what in load.gave_up if start <= at <= end)
        return out


def _failed(load: TableLoad, what: str, status: grpc.StatusCode) -> None:
    """Count a call that failed after every retry, and note when one failed the player."""
    load.errors[what] += 1
    if status in GAVE_UP:
        load.gave_up.append((time.time(), what))


def _status(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status and reason of a failed call, from the client's error or grpc's."""
    if isinstance(exc, TableError):
        return exc.status, exc.reason
    assert isinstance(exc, grpc.aio.AioRpcError)
    return exc.code(), error_reason(exc)
