"""Bots that keep playing through faults: the load of the chaos suite and the soak.

They play as ``socai simulate`` does (``socai_table.simulate``: one table per game in turn,
its table configurations, players per game and fees; candidate moves and timeouts) with
three differences a fault run needs:

- they never give up: a failed call or a broken ``WatchTable`` stream (a service killed, NATS
  or PostgreSQL restarting) is retried with back-off, and the table is polled when the stream
  is quiet, so a bot acts again as soon as the stack does;
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

import grpc

from socai import accounts
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from socai.rules import registry
from socai_table.simulate import SIMULTANEOUS_ACTIONS_MAX, fee_for, options_for, players_for

RPC_DEADLINE_S = 5.0
QUIET_POLL_S = 1.0  # no event on the stream for this long: look at the table anyway
BACKOFF_MAX_S = 2.0
REBUY_INTERVAL_S = 2.0
LEAVE_TRIES = 60  # a LeaveTable is asked again this many times at most (about 2 minutes of back-off)
LEAVE_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def hand_number(hand_id: str) -> int:
    """``t123-h7`` -> 7 (0 for no hand)."""
    _, sep, n = hand_id.rpartition("-h")
    return int(n) if sep and n.isdigit() else 0


@dataclass
class TableLoad:
    table_id: str
    game: str
    players: dict[str, str] = field(default_factory=dict)  # player id -> token
    hand: int = 0  # the latest hand number seen
    seated: int = 0  # players seated at the last look
    hands_ended: int = 0
    actions: int = 0
    rebuys: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    last_progress: float = field(default_factory=time.monotonic)  # when the latest hand started
    # When the table last moved at all (a new event of its hand): a long Tiến Lên or Sâm Lốc
    # hand under load can outlast any "no new hand for N s" limit while it plays on.
    last_event: float = field(default_factory=time.monotonic)
    last_seq: int = 0
    # What Simulator._act_if_due remembers between calls (the current hand only).
    acted: set[tuple[str, int]] = field(default_factory=set)
    per_hand: Counter[tuple[str, int]] = field(default_factory=Counter)
    buy_ins: Counter[str] = field(default_factory=Counter)  # player -> buy-ins that seated them
    join_attempts: Counter[str] = field(default_factory=Counter)  # player -> join keys used up
    next_rebuy: dict[str, float] = field(default_factory=dict)  # player -> earliest next try
    left: set[str] = field(default_factory=set)  # players whose LeaveTable was answered (or not seated)
    rng: random.Random = field(default_factory=random.Random)  # this table's bots' choices
    leave_refused: dict[str, str] = field(default_factory=dict)  # player -> why their leave never got through


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
            channel(settings.table_addr, settings.token_of("backend")),
            channel(settings.ledger_addr, settings.tokens.get("cashier", settings.token_of("backend"))),
        ]
        self.tables = pb_grpc.TableServiceStub(self._channels[0])
        self.cashier = lgrpc.LedgerServiceStub(self._channels[1])
        self.loads: dict[str, TableLoad] = {}
        self.stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def close(self) -> None:
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
        for table_id in self.loads:
            self._tasks.append(asyncio.create_task(self._play(table_id), name=f"bots-{table_id}"))

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
            except grpc.aio.AioRpcError as exc:
                if load is not None:
                    load.errors[f"{what}:{error_reason(exc) or exc.code().name}"] += 1
                if exc.code() not in (
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
        created = await self._retry(
            "CreateTable",
            lambda: self.tables.CreateTable(
                pb.CreateTableRequest(config=config, table_id=table_id), timeout=RPC_DEADLINE_S
            ),
        )
        load = TableLoad(created.table.table_id, game)  # type: ignore[attr-defined]
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
            token = await self._retry(
                "IssuePlayerToken",
                lambda p=player: self.tables.IssuePlayerToken(
                    pb.IssuePlayerTokenRequest(player_id=p), timeout=RPC_DEADLINE_S
                ),
                load,
            )
            load.players[player] = token.player_token  # type: ignore[attr-defined]
            await self._buy_in(load, player, seat=k)
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
            await self._retry(
                "JoinTable",
                lambda: self.tables.JoinTable(
                    pb.JoinTableRequest(
                        table_id=load.table_id,
                        player_token=load.players[player],
                        buy_in_gold=stake,
                        seat=seat,
                        idempotency_key=f"join-{player}-{join_attempt}",
                    ),
                    timeout=RPC_DEADLINE_S,
                ),
                load,
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ALREADY_EXISTS):
                load.join_attempts[player] += 1  # the key is used up: the next try takes a new one
            if error_reason(exc) in ("ALREADY_SEATED", "INSUFFICIENT_FUNDS"):
                # An earlier join whose answer was lost seated them with this deposit: the
                # next buy-in needs a deposit of its own.
                load.buy_ins[player] += 1
            raise
        load.buy_ins[player] += 1
        load.join_attempts[player] += 1

    # ---- play ------------------------------------------------------------------------

    async def _play(self, table_id: str) -> None:
        load = self.loads[table_id]
        delay = 0.1
        while not self.stopping.is_set():
            stream = self.tables.WatchTable(pb.WatchTableRequest(table_id=table_id))
            messages = stream.__aiter__()
            try:
                await self._tick(load)
                while not self.stopping.is_set():
                    try:
                        message = await asyncio.wait_for(messages.__anext__(), QUIET_POLL_S)
                    except TimeoutError:
                        await self._tick(load)
                        continue
                    except StopAsyncIteration:
                        break
                    body = message.event.WhichOneof("body")
                    if body == "hand_ended":
                        load.hands_ended += 1
                    if body in ("table_opened", "player_seated"):
                        continue
                    await self._tick(load)
                    delay = 0.1
            except grpc.aio.AioRpcError as exc:
                load.errors[f"watch:{error_reason(exc) or exc.code().name}"] += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bot must outlive anything the stack does to it
                load.errors[f"bot:{type(exc).__name__}: {str(exc)[:120]}"] += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
            finally:
                stream.cancel()

    async def _tick(self, load: TableLoad) -> None:
        """Look at the table: note its hand, buy broke bots back in, act where due."""
        view = (
            await self.tables.GetTableState(pb.GetTableStateRequest(table_id=load.table_id), timeout=RPC_DEADLINE_S)
        ).state
        number = hand_number(view.hand_id)
        if number > load.hand or view.last_seq != load.last_seq:
            load.last_event = time.monotonic()
            load.last_seq = view.last_seq
        if number > load.hand:
            load.hand = number
            load.last_progress = time.monotonic()
            load.acted.clear()
            load.per_hand.clear()
        seated = {s.player_id for s in view.table.seats if s.player_id}
        load.seated = len(seated)
        missing = [p for p in load.players if p not in seated]
        now = time.monotonic()
        for player in missing:
            if self.stopping.is_set() or load.next_rebuy.get(player, 0.0) > now:
                continue
            load.next_rebuy[player] = now + REBUY_INTERVAL_S  # a cash-out must finish first
            try:
                await self._buy_in(load, player)
                load.rebuys += 1
            except grpc.aio.AioRpcError as exc:
                load.errors[f"rebuy:{error_reason(exc) or exc.code().name}"] += 1
            except RuntimeError:
                load.errors["rebuy:RETRIES"] += 1
        bots = {s.seat: load.players[s.player_id] for s in view.table.seats if s.player_id in load.players}
        await self._act_if_due(load, view, bots)

    async def _act_if_due(self, load: TableLoad, view: pb.TableState, bots: dict[int, str]) -> None:
        """As ``socai simulate``'s bots: each seat to act picks one of the candidate moves
        the server offers it, or now and then lets its timer run out."""
        for seat in view.to_act:
            token = bots.get(seat)
            if token is None:
                continue
            mine = (
                await self.tables.GetTableState(
                    pb.GetTableStateRequest(table_id=load.table_id, player_token=token), timeout=RPC_DEADLINE_S
                )
            ).state
            if not mine.candidate_actions or mine.hand_id != view.hand_id:
                continue
            marker = (mine.hand_id, int(mine.last_seq) * 1000 + seat)
            if marker in load.acted:
                continue
            load.acted.add(marker)
            if len(view.to_act) > 1 and load.per_hand[(mine.hand_id, seat)] >= SIMULTANEOUS_ACTIONS_MAX:
                continue  # betting at once (Tài Xỉu): a few wagers each, then let the window close
            load.per_hand[(mine.hand_id, seat)] += 1
            if load.rng.random() < self.config.timeout_rate:
                continue  # let the timer run out
            try:
                await self.tables.Act(
                    pb.ActRequest(
                        table_id=load.table_id,
                        hand_id=mine.hand_id,
                        seat=seat,
                        action=load.rng.choice(list(mine.candidate_actions)),
                        idempotency_key=uuid.uuid4().hex,
                        player_token=token,
                    ),
                    timeout=RPC_DEADLINE_S,
                )
                load.actions += 1
            except grpc.aio.AioRpcError as exc:
                load.errors[error_reason(exc) or exc.code().name] += 1

    async def _leave(self, load: TableLoad) -> None:
        """Every bot of the table asks to leave, as a client must: an UNAVAILABLE answer (a
        table between instances, one that had to rebuild itself) or no answer is asked
        again, with back-off, until the table answers; NOT_FOUND ``NOT_SEATED`` means the
        bot is not seated (broke, or an earlier try that stood it up lost its answer)."""
        for player, token in load.players.items():
            delay = 0.1
            for _ in range(LEAVE_TRIES):
                try:
                    await self.tables.LeaveTable(
                        pb.LeaveTableRequest(table_id=load.table_id, player_token=token), timeout=RPC_DEADLINE_S
                    )
                    load.left.add(player)
                    break
                except grpc.aio.AioRpcError as exc:
                    reason = error_reason(exc) or exc.code().name
                    load.errors[f"leave:{reason}"] += 1
                    if exc.code() == grpc.StatusCode.NOT_FOUND:
                        load.left.add(player)
                        break
                    if exc.code() not in LEAVE_RETRYABLE:
                        load.leave_refused[player] = reason
                        break
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_MAX_S)
            else:
                load.leave_refused[player] = f"still failing after {LEAVE_TRIES} tries"

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
