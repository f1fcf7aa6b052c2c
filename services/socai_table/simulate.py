"""Bots that play random legal moves through the table service's gRPC API.

``socai simulate --tables N --hands M --games LIST|all`` creates N tables (games taken in
turn from LIST), funds bot wallets through the ledger (cashier token), seats the bots, and
lets each table play M hands: every bot watches its table and, when it is to act, picks
one of the candidate moves the server offers it — or, now and then, lets its timer run
out or leaves mid-hand, so timeouts and forfeits are exercised too. Used by ``make run``,
the end-to-end tests and the benchmarks.

The bots outlive a table-service restart: a call answered UNAVAILABLE or not at all
(DEADLINE_EXCEEDED) is tried again with back-off (the calls are idempotent: tables by
their id, joins, deposits and actions by their keys), and a broken ``WatchTable`` stream
is opened again. What they do not hide is a table that stopped: a table with enough
players where no hand started for ``frozen_after_s`` is left and reported as frozen,
with the reason (``SimResult.problems``; ``socai simulate`` then exits 1).
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
from functools import partial
from typing import TypeVar

import grpc

from socai import accounts
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
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
QUIET_POLL_S = 2.0  # no event for this long: look at the table anyway (one may be missed across a reconnect)
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
        self._table_ch = channel(settings.table_addr, settings.token_of("backend"))
        self._ledger_ch = channel(settings.ledger_addr, settings.tokens.get("cashier", settings.token_of("backend")))
        self._backend_ledger_ch = channel(settings.ledger_addr, settings.token_of("backend"))
        self.tables = pb_grpc.TableServiceStub(self._table_ch)
        self.cashier = lgrpc.LedgerServiceStub(self._ledger_ch)
        self.ledger = lgrpc.LedgerServiceStub(self._backend_ledger_ch)

    async def close(self) -> None:
        for ch in (self._table_ch, self._ledger_ch, self._backend_ledger_ch):
            await ch.close()

    async def run(self) -> SimResult:
        games = self.config.games or registry.available()
        start = time.perf_counter()
        results = await asyncio.gather(*(self._play_table(i, games[i % len(games)]) for i in range(self.config.tables)))
        return SimResult(list(results), time.perf_counter() - start)

    async def _retrying(self, call: Callable[[], Awaitable[T]], result: TableResult, limit_s: float | None = None) -> T:
        """``call()`` until the service answers it: UNAVAILABLE and DEADLINE_EXCEEDED (a
        restart, a stall) are tried again with back-off, for ``limit_s`` (None: until the
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
        try:
            bots = await self._open(index, game, result)
        except grpc.aio.AioRpcError as exc:
            result.failed = f"could not open the table: {exc.code().name}: {exc.details()}"
            return result
        await self._drive(result.table_id, bots, result)
        return result

    async def _open(self, index: int, game: str, result: TableResult) -> dict[int, str]:
        """Create the table, fund the bots and seat them; returns seat -> player token."""
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
        create = pb.CreateTableRequest(config=config, table_id=result.table_id)
        await self._retrying(lambda: self.tables.CreateTable(create, timeout=RPC_DEADLINE_S), result, SETUP_LIMIT_S)
        table_id = result.table_id
        if game == "taixiu" and options.get("mode") == "system":
            await self._fund_house_bank(table_id, c.stake_gold * 100_000, result)
        bots: dict[int, str] = {}
        for k in range(n):
            player = f"bot{self.run_id}x{index}x{k}"
            issue = pb.IssuePlayerTokenRequest(player_id=player)
            issued = await self._retrying(
                partial(self.tables.IssuePlayerToken, issue, timeout=RPC_DEADLINE_S), result, SETUP_LIMIT_S
            )
            stake = buy_in * (5 if game == "taixiu" and k == 0 else 1)  # the banker brings more
            await self._fund(player, stake * WALLET_MULTIPLE, result)
            join = pb.JoinTableRequest(
                table_id=table_id,
                player_token=issued.player_token,
                buy_in_gold=stake,
                seat=k,
                idempotency_key=f"join-{player}",
            )
            joined = await self._retrying(
                partial(self.tables.JoinTable, join, timeout=RPC_DEADLINE_S), result, SETUP_LIMIT_S
            )
            bots[joined.seat] = issued.player_token
        return bots

    async def _drive(self, table_id: str, bots: dict[int, str], result: TableResult) -> None:
        """Play the table until its hands are done, its bots are too few to go on, or it
        freezes: a watchdog (a supervisor of the play, which may be waiting on a service
        that does not answer) ends it when no hand has started for ``frozen_after_s``."""
        silent: dict[int, float] = {}  # seat -> monotonic time it reconnects
        heartbeats = asyncio.get_running_loop().create_task(self._heartbeats(table_id, bots, silent, result))
        result.last_hand_at = time.monotonic()
        play = asyncio.get_running_loop().create_task(self._play(table_id, bots, result, silent))
        limit_s = self.config.frozen_after_s
        try:
            while not play.done():
                await asyncio.wait({play}, timeout=WATCHDOG_PERIOD_S)
                idle_s = time.monotonic() - result.last_hand_at
                if not play.done() and idle_s > limit_s:
                    error = f"; last error {result.last_error}" if result.last_error else ""
                    result.frozen = (
                        f"no hand started for {limit_s:g} s (after {result.hands} hands ended, "
                        f"{len(bots)} bots seated){error}"
                    )
                    log.warning("table_frozen", table_id=table_id, reason=result.frozen)
                    break  # the play is cancelled below, mid-call if it waits on the service
            if not result.frozen:
                play.result()  # what ended the play: an error is the table's failure
        except grpc.aio.AioRpcError as exc:
            result.failed = f"{exc.code().name}: {exc.details()}"
        finally:
            for task in (play, heartbeats):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await task
        await self._leave_all(table_id, bots)

    async def _play(self, table_id: str, bots: dict[int, str], result: TableResult, silent: dict[int, float]) -> None:
        """Watch the table and act when due, opening the stream again whenever it breaks
        (the table service went away) until the table's hands are done."""
        acted: set[tuple[str, int]] = set()
        per_hand: Counter[tuple[str, int]] = Counter()
        minimum = result.players_min
        # A stream opened again starts with the hand in play (or the last one) from its
        # first event: hands are counted by id, so none is counted twice.
        started: set[str] = set()
        ended: set[str] = set()
        delay = BACKOFF_FIRST_S
        opened = 0
        while True:
            stream = self.tables.WatchTable(pb.WatchTableRequest(table_id=table_id))
            result.streams_reopened += 1 if opened else 0
            opened += 1
            messages = stream.__aiter__()
            pending: asyncio.Future[pb.WatchTableResponse] | None = None
            try:
                while True:
                    if pending is None:
                        pending = asyncio.ensure_future(messages.__anext__())
                    # Waiting without cancelling the read: a cancelled read would end the call.
                    done, _ = await asyncio.wait({pending}, timeout=QUIET_POLL_S)
                    if not done:
                        view = await self._act_if_due(table_id, bots, result, acted, per_hand, silent)
                        if self._too_few_left(view, bots, minimum):
                            result.ended_early = True
                            return
                        continue
                    message, pending = pending.result(), None
                    delay = BACKOFF_FIRST_S
                    event = message.event
                    body = event.WhichOneof("body")
                    if body == "hand_started" and event.hand_id not in started:
                        started.add(event.hand_id)
                        result.last_hand_at = time.monotonic()
                    if body == "hand_ended" and event.hand_id not in ended:
                        ended.add(event.hand_id)
                        result.hands += 1
                        self.on_hand(result.game)
                        if result.hands >= self.config.hands:
                            return
                    if body == "player_stood_up":
                        bots.pop(event.player_stood_up.seat, None)
                        if len(bots) < minimum:
                            result.ended_early = True  # the others went broke: the table cannot go on
                            return
                    if body in ("hand_ended", "player_stood_up", "table_opened", "player_seated"):
                        continue
                    view = await self._act_if_due(table_id, bots, result, acted, per_hand, silent)
                    if self._too_few_left(view, bots, minimum):
                        result.ended_early = True
                        return
            except StopAsyncIteration:
                pass  # the service ended the stream (it is stopping): open it again
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in RETRYABLE:
                    raise
                result.last_error = f"{exc.code().name}: {exc.details()}"[:200]
            finally:
                if pending is not None:
                    pending.cancel()
                stream.cancel()
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    async def _heartbeats(
        self, table_id: str, bots: dict[int, str], silent: dict[int, float], result: TableResult
    ) -> None:
        """Every bot that is not silent says it is here; a silent bot whose time is up
        reconnects. A bot that never sent a heartbeat is never disconnected by the table,
        so every bot sends them. A failed heartbeat is not retried: the next one follows."""
        period = max(0.1, self.settings.heartbeat_timeout_s / 3)
        while True:
            now = time.monotonic()
            for seat, token in list(bots.items()):
                back_at = silent.get(seat)
                if back_at is not None and now < back_at:
                    continue
                if back_at is not None:
                    del silent[seat]
                    reconnect = pb.ReconnectRequest(table_id=table_id, player_token=token)
                    if await self._call(result, partial(self.tables.Reconnect, reconnect, timeout=RPC_DEADLINE_S)):
                        result.reconnects += 1
                    continue
                heartbeat = pb.HeartbeatRequest(table_id=table_id, player_token=token)
                await self._call(result, partial(self.tables.Heartbeat, heartbeat, timeout=RPC_DEADLINE_S), retry=False)
            await asyncio.sleep(period)

    @staticmethod
    def _too_few_left(view: pb.TableState, bots: dict[int, str], minimum: int) -> bool:
        """Forget the bots the table no longer seats; True when too few are left to play.

        A reopened stream shows the hand, not the table's facts: a bot that stood up
        (went broke) while the stream was down is known only from the table's seats.
        """
        seated = {s.seat for s in view.table.seats if s.player_id}
        for seat in [seat for seat in bots if seat not in seated]:
            del bots[seat]
        return len(bots) < minimum

    async def _act_if_due(
        self,
        table_id: str,
        bots: dict[int, str],
        result: TableResult,
        acted: set[tuple[str, int]],
        per_hand: Counter[tuple[str, int]],
        silent: dict[int, float],
    ) -> pb.TableState:
        """Look at the table and let each bot due to act decide; returns the spectator's view."""
        spectator = pb.GetTableStateRequest(table_id=table_id)
        answer: pb.GetTableStateResponse = await self._retrying(
            lambda: self.tables.GetTableState(spectator, timeout=RPC_DEADLINE_S), result
        )
        view = answer.state
        for seat in view.to_act:
            token = bots.get(seat)
            if token is None or seat in silent:
                continue
            own = pb.GetTableStateRequest(table_id=table_id, player_token=token)
            mine = (await self._retrying(partial(self.tables.GetTableState, own, timeout=RPC_DEADLINE_S), result)).state
            if not mine.candidate_actions or mine.hand_id != view.hand_id:
                continue
            marker = (mine.hand_id, int(mine.last_seq) * 1000 + seat)
            if marker in acted:
                continue
            acted.add(marker)
            if len(view.to_act) > 1 and per_hand[(mine.hand_id, seat)] >= SIMULTANEOUS_ACTIONS_MAX:
                continue  # betting at once (Tài Xỉu): a few wagers each, then let the window close
            per_hand[(mine.hand_id, seat)] += 1
            roll = self.rng.random()
            if roll < self.config.disconnect_rate:
                # Silent for twice the heartbeat timeout: the table disconnects it first.
                silent[seat] = time.monotonic() + 2 * self.settings.heartbeat_timeout_s
                result.silences += 1
                continue
            roll -= self.config.disconnect_rate
            if roll < self.config.timeout_rate:
                continue  # let the timer run out
            if roll < self.config.timeout_rate + self.config.leave_rate:
                leave = pb.LeaveTableRequest(table_id=table_id, player_token=token)
                await self._call(result, partial(self.tables.LeaveTable, leave, timeout=RPC_DEADLINE_S))
                continue
            act = pb.ActRequest(
                table_id=table_id,
                hand_id=mine.hand_id,
                seat=seat,
                action=self.rng.choice(list(mine.candidate_actions)),
                # One key for every try of this decision: a retry after a lost answer is
                # answered with the first result instead of acting twice.
                idempotency_key=uuid.uuid4().hex,
                player_token=token,
            )
            start = time.perf_counter()
            ok = await self._call(result, partial(self.tables.Act, act, timeout=RPC_DEADLINE_S))
            if ok:
                result.actions += 1
                result.act_latency_ms.append((time.perf_counter() - start) * 1000)
        return view

    async def _call(self, result: TableResult, call: Callable[[], Awaitable[object]], retry: bool = True) -> bool:
        """Make ``call`` (retried as ``_retrying`` does, unless ``retry`` is False); a refusal
        is counted by its reason and answers False."""
        try:
            if retry:
                await self._retrying(call, result)
            else:
                await call()
        except grpc.aio.AioRpcError as exc:
            result.rejected[error_reason(exc) or exc.code().name] += 1
            return False
        return True

    async def _leave_all(self, table_id: str, bots: dict[int, str]) -> None:
        async def leave(token: str) -> None:
            try:
                request = pb.LeaveTableRequest(table_id=table_id, player_token=token)
                await self.tables.LeaveTable(request, timeout=LEAVE_DEADLINE_S)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    log.warning("leave_failed", table_id=table_id, reason=error_reason(exc) or exc.code().name)

        await asyncio.gather(*(leave(token) for token in bots.values()))
