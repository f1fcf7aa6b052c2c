"""Bots that play random legal moves through the table service, as a game backend would.

``socai simulate --tables N --hands M --games LIST|all`` creates N tables (games taken in
turn from LIST), funds bot wallets through the ledger (cashier token), seats the bots, and
lets each table play M hands. The bots are clients of the table service like any other:
``socai.client`` (the typed client a backend builds on), each bot reading its own
``WatchTable`` stream, whose every message says whose turn it is and, on its turn, its
legal moves; a bot picks one of them (``socai.client.bots.random_action``) — or, now and
then, lets its timer run out, leaves mid-hand or goes silent, so timeouts, forfeits and
disconnects are exercised too. No bot asks for the table's state: the stream is enough.
Used by ``make run``, the end-to-end tests, the benchmarks and the golden corpus.

The bots outlive a table-service restart: the client tries a call answered UNAVAILABLE or
not at all (DEADLINE_EXCEEDED) again with back-off under the same idempotency key (tables
by their id, joins, deposits and actions by their keys), and opens a broken stream again.
What they do not hide is a table that stopped: a table with enough players where no hand
started for ``frozen_after_s`` is left and reported as frozen, with the reason
(``SimResult.problems``; ``socai simulate`` then exits 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from socai import accounts
from socai.client import Seat, TableClient, TableError, Update
from socai.client.bots import random_action
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.logging import get_logger
from socai.rules import registry
from socai.rules.base import default_fee_bps

log = get_logger("socai.simulate")

T = TypeVar("T")

WALLET_MULTIPLE = 3  # each bot's wallet holds this many buy-ins
SIMULTANEOUS_ACTIONS_MAX = 2
FROZEN_AFTER_S = 30.0  # a table where no hand started for this long is frozen
RPC_DEADLINE_S = 10.0  # a stalled service must not hang a bot: the call fails and is retried
LEAVE_DEADLINE_S = 5.0
SETUP_LIMIT_S = 120.0  # opening a table gives up after retrying this long
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 2.0
WATCHDOG_PERIOD_S = 1.0
# The service is restarting or stalled: the same call is tried again. Anything else is an
# answer (a refused move, a bug) and is not retried.
# A call refused by a limit (RESOURCE_EXHAUSTED: a rate, or a stream ended behind the
# instance's bound on queued events) is tried again after a pause, like an unavailable one.
RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)


@dataclass(frozen=True)
class TablePlan:
    """How one table is set up, where it should differ from the defaults of ``SimConfig``
    (the golden corpus plays every mode, option and seat count this way): ``players`` 0,
    ``options`` None and ``fee_bps`` None keep ``players_for``, ``options_for`` and
    ``fee_for``."""

    players: int = 0
    options: Mapping[str, str] | None = None
    fee_bps: int | None = None


@dataclass(frozen=True)
class SimConfig:
    tables: int = 3
    hands: int = 5
    games: tuple[str, ...] = ()
    stake_gold: int = 100
    players: int = 0  # 0: a sensible number per game
    turn_timeout_s: int = 1
    timeout_rate: float = 0.02  # chance a bot lets its timer run out
    leave_rate: float = 0.0  # chance a bot leaves mid-hand
    # Chance a bot goes silent at a decision: no actions and no heartbeats until it calls
    # Reconnect a while later. The table disconnects it after SOCAI_HEARTBEAT_TIMEOUT_S, so
    # every game's disconnect rule (forfeits, automatic play) runs under the bots too.
    disconnect_rate: float = 0.0
    seed: int | None = None
    between_hands_ms: int = 20
    frozen_after_s: float = FROZEN_AFTER_S
    plans: tuple[TablePlan, ...] = ()  # table i is set up by plans[i] where given


@dataclass
class TableResult:
    table_id: str
    game: str
    hands: int = 0
    silences: int = 0  # bots that went silent (and were disconnected by the table)
    reconnects: int = 0
    actions: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    act_latency_ms: list[float] = field(default_factory=list)
    ended_early: bool = False
    streams_reopened: int = 0  # WatchTable streams opened again after one broke
    retries: int = 0  # calls tried again after UNAVAILABLE or DEADLINE_EXCEEDED
    last_error: str = ""  # the last such failure, for the report
    frozen: str = ""  # why the table is frozen ("" when it is not)
    failed: str = ""  # why the bots could not go on ("" when they could)
    last_hand_at: float = field(default_factory=time.monotonic)  # when a hand last started
    players_min: int = 1  # the table stops when fewer bots than this are left (players_min_for)
    seated_at: float = 0.0  # when (time.time()) every bot of the table was funded and seated


@dataclass
class SimResult:
    tables: list[TableResult]
    elapsed_s: float

    @property
    def hands(self) -> int:
        return sum(t.hands for t in self.tables)

    def by_game(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for t in self.tables:
            counts[t.game] += t.hands
        return dict(sorted(counts.items()))

    @property
    def problems(self) -> list[str]:
        """One line per frozen or failed table (empty: every table played as it should)."""
        lines = [f"FROZEN {t.table_id} ({t.game}): {t.frozen}" for t in self.tables if t.frozen]
        return lines + [f"FAILED {t.table_id} ({t.game}): {t.failed}" for t in self.tables if t.failed]


def players_for(game: str, wanted: int) -> int:
    spec = registry.get(game).SPEC
    default: int = {"taixiu": 4, "holdem": 4, "xito": 3}.get(game, max(spec.players_min, 4))
    return int(max(spec.players_min, min(wanted or default, spec.players_max, 9)))


def players_min_for(game: str, options: Mapping[str, str]) -> int:
    """The fewest players a table of ``game`` with ``options`` plays with: the game's
    minimum, and in Tài Xỉu between players (p2p) a banker and a bettor."""
    minimum = int(registry.get(game).SPEC.players_min)
    return max(minimum, 2) if game == "taixiu" and options.get("mode") == "p2p" else minimum


def fee_for(game: str, index: int, options: dict[str, str]) -> int:
    """The games' own fees (Tài Xỉu 5 % against the house, 3 % against a player); half the
    tables of games without a stated fee charge 3 % (GEN-1), half charge none."""
    module = registry.get(game)
    return default_fee_bps(module, options) or (0 if index % 2 else 300)


def options_for(game: str, index: int) -> dict[str, str]:
    """Vary the options across tables so every mode is played (Tài Xỉu: house and banker)."""
    if game == "taixiu":
        return {"mode": "p2p" if index % 2 else "system", "betting_window_s": "1"}
    if game == "xito" and index % 2:
        return {"tay_max": "true", "auto_follow_2": "true"}
    # The games' own windows (not the table's turn timer) short enough for bots: a bot
    # that lets one run out must not leave the table idle for the rules' 90 s.
    if game == "maubinh":
        return {"arrange_timeout_s": "3"}
    if game == "samloc":
        return {"declare_timeout_s": "2"}
    if game in ("bacay_ga", "bacay_chuong"):
        return {"fast_mode": "true", **({"betting_timeout_s": "3"} if game == "bacay_chuong" else {})}
    return {}


class Simulator:
    def __init__(self, settings: Settings, config: SimConfig, on_hand: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self.config = config
        self.rng = random.Random(config.seed)
        self.on_hand = on_hand or (lambda game: None)
        self.run_id = uuid.uuid4().hex[:8]
        # The bots' table client shares one channel; each table gets a client of its own
        # over it (``_client``), so that its calls and retries are counted per table.
        self._table_ch = grpc.aio.insecure_channel(
            settings.table_addr, options=[("grpc.lb_policy_name", "round_robin"), ("grpc.enable_retries", 1)]
        )
        self._ledger_ch = channel(settings.ledger_addr, settings.tokens.get("cashier", settings.token_of("backend")))
        self._backend_ledger_ch = channel(settings.ledger_addr, settings.token_of("backend"))
        self.cashier = lgrpc.LedgerServiceStub(self._ledger_ch)
        self.ledger = lgrpc.LedgerServiceStub(self._backend_ledger_ch)

    def _client(self) -> TableClient:
        return TableClient(
            self.settings.table_addr,
            self.settings.token_of("backend"),
            channel=self._table_ch,
            rpc_timeout_s=RPC_DEADLINE_S,
            retry_for_s=SETUP_LIMIT_S,
        )

    async def close(self) -> None:
        for ch in (self._table_ch, self._ledger_ch, self._backend_ledger_ch):
            await ch.close()

    async def run(self) -> SimResult:
        games = self.config.games or registry.available()
        start = time.perf_counter()
        results = await asyncio.gather(*(self._play_table(i, games[i % len(games)]) for i in range(self.config.tables)))
        return SimResult(list(results), time.perf_counter() - start)

    async def _retrying(self, call: Callable[[], Awaitable[T]], result: TableResult, limit_s: float | None = None) -> T:
        """``call()`` (a ledger call) until the service answers it: UNAVAILABLE and
        DEADLINE_EXCEEDED are tried again with back-off, for ``limit_s`` (None: until the
        table's watchdog gives up on it). Raises any other error, and the last one after
        ``limit_s``."""
        delay = BACKOFF_FIRST_S
        started = time.monotonic()
        while True:
            try:
                return await call()
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in RETRYABLE or (limit_s is not None and time.monotonic() - started > limit_s):
                    raise
                result.retries += 1
                result.last_error = f"{exc.code().name}: {exc.details()}"[:200]
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    async def _fund(self, player_id: str, amount: int, result: TableResult) -> None:
        request = lpb.DepositRequest(
            idempotency_key=f"sim:{self.run_id}:{player_id}",
            player_id=player_id,
            amount_gold=amount,
            reference="simulate",
        )
        await self._retrying(lambda: self.cashier.Deposit(request, timeout=RPC_DEADLINE_S), result, SETUP_LIMIT_S)

    async def _fund_house_bank(self, table_id: str, amount: int, result: TableResult) -> None:
        request = lpb.TransferRequest(
            idempotency_key=f"sim:{self.run_id}:bank:{table_id}",
            from_account_id=accounts.EXTERNAL_CASHIER,
            to_account_id=accounts.HOUSE_BANK,
            amount_gold=amount,
            kind="bankroll",
            reference=table_id,
        )
        await self._retrying(lambda: self.cashier.Transfer(request, timeout=RPC_DEADLINE_S), result, SETUP_LIMIT_S)

    async def _play_table(self, index: int, game: str) -> TableResult:
        # The table's id is chosen here, not by the service: CreateTable is idempotent for
        # the same id and config, so a retry after a lost answer opens no second table.
        result = TableResult(f"s{self.run_id}x{index}", game)
        tables = self._client()
        try:
            bots = await self._open(tables, index, game, result)
        except (grpc.aio.AioRpcError, TableError) as exc:
            result.failed = f"could not open the table: {_why(exc)}"
            return result
        await self._drive(tables, bots, result)
        result.retries += tables.retries
        return result

    async def _open(self, tables: TableClient, index: int, game: str, result: TableResult) -> dict[int, Seat]:
        """Create the table, fund the bots and seat them; returns seat -> the bot's seat."""
        c = self.config
        plan = c.plans[index] if index < len(c.plans) else TablePlan()
        n = players_for(game, plan.players or c.players)
        options = dict(plan.options) if plan.options is not None else options_for(game, index)
        fee_bps = plan.fee_bps if plan.fee_bps is not None else fee_for(game, index, options)
        result.players_min = players_min_for(game, options)
        buy_in = c.stake_gold * 20
        owner = f"bot{self.run_id}x{index}x0"
        config = pb.TableConfig(
            game=game,
            stake_gold=c.stake_gold,
            fee_bps=fee_bps,
            seats_max=max(n, registry.get(game).SPEC.players_min),
            options=options,
            buy_in_min_gold=buy_in,
            buy_in_max_gold=buy_in * 5,
            # Go on with fewer players when some bust: a hand needs only the game's minimum.
            auto_start_players=players_min_for(game, options),
            turn_timeout_s=c.turn_timeout_s,
            owner_player_id=owner,
            between_hands_ms=c.between_hands_ms,
        )
        if game == "taixiu":
            config.seats_max = n
        table = await tables.create_table(config, table_id=result.table_id)
        if game == "taixiu" and options.get("mode") == "system":
            await self._fund_house_bank(table.table_id, c.stake_gold * 100_000, result)
        bots: dict[int, Seat] = {}
        for k in range(n):
            player = f"bot{self.run_id}x{index}x{k}"
            stake = buy_in * (5 if game == "taixiu" and k == 0 else 1)  # the banker brings more
            await self._fund(player, stake * WALLET_MULTIPLE, result)
            seat = await tables.join(table.table_id, player, stake, seat=k, key=f"join-{player}")
            bots[seat.seat] = seat
        result.seated_at = time.time()
        return bots

    async def _drive(self, tables: TableClient, bots: dict[int, Seat], result: TableResult) -> None:
        """Play the table until its hands are done, its bots are too few to go on, or it
        freezes: a watchdog (a supervisor of the play, which may be waiting on a service
        that does not answer) ends it when no hand has started for ``frozen_after_s``."""
        silent: dict[int, float] = {}  # seat -> monotonic time it reconnects
        loop = asyncio.get_running_loop()
        heartbeats = loop.create_task(self._heartbeats(bots, silent, result))
        result.last_hand_at = time.monotonic()
        play = _TablePlay(self, tables, bots, silent, result)
        players = [loop.create_task(play.bot(seat)) for seat in list(bots.values())]
        finished = loop.create_task(play.done.wait())
        limit_s = self.config.frozen_after_s
        try:
            while not play.done.is_set() and not all(p.done() for p in players):
                await asyncio.wait({finished, *players}, timeout=WATCHDOG_PERIOD_S, return_when=asyncio.FIRST_COMPLETED)
                failed = next((p for p in players if p.done() and not p.cancelled() and p.exception()), None)
                if failed is not None:
                    failed.result()  # what ended the bot: an error is the table's failure
                idle_s = time.monotonic() - result.last_hand_at
                if not play.done.is_set() and idle_s > limit_s:
                    error = f"; last error {result.last_error}" if result.last_error else ""
                    result.frozen = (
                        f"no hand started for {limit_s:g} s (after {result.hands} hands ended, "
                        f"{len(bots)} bots seated){error}"
                    )
                    log.warning("table_frozen", table_id=result.table_id, reason=result.frozen)
                    break  # the play is cancelled below, mid-call if it waits on the service
        except (grpc.aio.AioRpcError, TableError) as exc:
            result.failed = _why(exc)
        finally:
            for task in (*players, heartbeats, finished):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError, TableError):
                    await task
        result.streams_reopened += sum(max(0, seat.streams_opened - 1) for seat in play.seats)
        await self._leave_all(list(bots.values()))

    async def _heartbeats(self, bots: dict[int, Seat], silent: dict[int, float], result: TableResult) -> None:
        """Every bot that is not silent says it is here; a silent bot whose time is up
        reconnects. A bot that never sent a heartbeat is never disconnected by the table,
        so every bot sends them. A failed heartbeat is not retried: the next one follows."""
        period = max(0.1, self.settings.heartbeat_timeout_s / 3)
        while True:
            now = time.monotonic()
            for number, seat in list(bots.items()):
                back_at = silent.get(number)
                if back_at is not None and now < back_at:
                    continue
                try:
                    if back_at is not None:
                        del silent[number]
                        await seat.reconnect()
                        result.reconnects += 1
                    else:
                        await seat.heartbeat()
                except TableError as exc:
                    result.rejected[exc.reason or exc.status.name] += 1
            await asyncio.sleep(period)

    async def _leave_all(self, bots: list[Seat]) -> None:
        async def leave(seat: Seat) -> None:
            try:
                await asyncio.wait_for(seat.leave(), LEAVE_DEADLINE_S)
            except TableError as exc:
                if exc.status != grpc.StatusCode.NOT_FOUND:
                    log.warning("leave_failed", table_id=seat.table_id, reason=exc.reason or exc.status.name)
            except TimeoutError:
                log.warning("leave_failed", table_id=seat.table_id, reason="DEADLINE_EXCEEDED")

        await asyncio.gather(*(leave(seat) for seat in bots))


class _TablePlay:
    """The bots of one table at play: each reads its own stream and acts on its turns;
    they share the count of hands and who is still seated."""

    def __init__(
        self,
        sim: Simulator,
        tables: TableClient,
        bots: dict[int, Seat],
        silent: dict[int, float],
        result: TableResult,
    ) -> None:
        self.sim = sim
        self.tables = tables
        self.bots = bots
        self.seats = list(bots.values())
        self.silent = silent
        self.result = result
        self.done = asyncio.Event()
        self.started: set[str] = set()
        self.ended: set[str] = set()
        self.per_hand: Counter[tuple[str, int]] = Counter()

    async def bot(self, seat: Seat) -> None:
        """Read ``seat``'s stream until the table's hands are done or the bot stood up,
        counting hands and acting on each turn."""
        opened = 0
        async for update in seat.updates():
            if seat.streams_opened != opened:
                opened = seat.streams_opened
                if opened > 1:
                    await self._who_is_seated()  # facts may have been missed while the stream was down
            self._count(update)
            if self.done.is_set() or seat.stood_up(update):
                return
            turn = seat.turn_of(update)
            if turn is not None:
                await self._decide(seat, turn)

    def _count(self, update: Update) -> None:
        r = self.result
        kind = update.kind
        event = update.event
        if event is None:
            return
        if kind == "hand_started" and event.hand_id not in self.started:
            self.started.add(event.hand_id)
            r.last_hand_at = time.monotonic()
        elif kind == "hand_ended" and event.hand_id not in self.ended:
            self.ended.add(event.hand_id)
            r.hands += 1
            self.sim.on_hand(r.game)
            if r.hands >= self.sim.config.hands:
                self.done.set()
        elif kind == "player_stood_up":
            self.bots.pop(event.player_stood_up.seat, None)
            if len(self.bots) < r.players_min:
                r.ended_early = True  # the others went broke: the table cannot go on
                self.done.set()

    async def _who_is_seated(self) -> None:
        """Forget the bots the table no longer seats (a stream opened again shows the hand,
        not the table's facts)."""
        table = await self.tables.table(self.result.table_id)
        seated = {s.seat for s in table.seats if s.player_id}
        for number in [n for n in self.bots if n not in seated]:
            del self.bots[number]
        if len(self.bots) < self.result.players_min:
            self.result.ended_early = True
            self.done.set()

    async def _decide(self, seat: Seat, turn: Any) -> None:
        c = self.sim.config
        r = self.result
        number = turn.view.viewer_seat
        if number in self.silent:
            return
        if len(turn.view.to_act) > 1:
            if self.per_hand[(turn.hand_id, number)] >= SIMULTANEOUS_ACTIONS_MAX:
                return  # betting at once (Tài Xỉu): a few wagers each, then let the window close
            self.per_hand[(turn.hand_id, number)] += 1
        rng = self.sim.rng
        roll = rng.random()
        if roll < c.disconnect_rate:
            # Silent for twice the heartbeat timeout: the table disconnects it first.
            self.silent[number] = time.monotonic() + 2 * self.sim.settings.heartbeat_timeout_s
            r.silences += 1
            return
        roll -= c.disconnect_rate
        if roll < c.timeout_rate:
            return  # let the timer run out
        if roll < c.timeout_rate + c.leave_rate:
            try:
                await seat.leave()
            except TableError as exc:
                r.rejected[exc.reason or exc.status.name] += 1
            return
        action = random_action(turn, rng)
        if action is None:
            return
        start = time.perf_counter()
        try:
            await turn.act(action)
        except TableError as exc:
            r.rejected[exc.reason or exc.status.name] += 1
            if exc.retryable:
                r.last_error = str(exc)[:200]
            return
        r.actions += 1
        r.act_latency_ms.append((time.perf_counter() - start) * 1000)


def _why(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    if isinstance(exc, TableError):
        return f"{exc.status.name}: {exc.message}"
    return str(exc)
