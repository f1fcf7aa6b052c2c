"""Bots that play random legal moves through the table service's gRPC API.

``socai simulate --tables N --hands M --games LIST|all`` creates N tables (games taken in
turn from LIST), funds bot wallets through the ledger (cashier token), seats the bots, and
lets each table play M hands: every bot watches its table and, when it is to act, picks
one of the candidate moves the server offers it — or, now and then, lets its timer run
out or leaves mid-hand, so timeouts and forfeits are exercised too. Used by ``make run``,
the end-to-end tests and the benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
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
from socai.infra.logging import get_logger
from socai.rules import registry
from socai.rules.base import default_fee_bps

log = get_logger("socai.simulate")

WALLET_MULTIPLE = 3  # each bot's wallet holds this many buy-ins
SIMULTANEOUS_ACTIONS_MAX = 2
IDLE_LIMIT_S = 30.0  # a table with no event for this long is reported and left


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


def players_for(game: str, wanted: int) -> int:
    spec = registry.get(game).SPEC
    default: int = {"taixiu": 4, "holdem": 4, "xito": 3}.get(game, max(spec.players_min, 4))
    return int(max(spec.players_min, min(wanted or default, spec.players_max, 9)))


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

    async def _fund(self, player_id: str, amount: int) -> None:
        await self.cashier.Deposit(
            lpb.DepositRequest(
                idempotency_key=f"sim:{self.run_id}:{player_id}",
                player_id=player_id,
                amount_gold=amount,
                reference="simulate",
            )
        )

    async def _fund_house_bank(self, table_id: str, amount: int) -> None:
        await self.cashier.Transfer(
            lpb.TransferRequest(
                idempotency_key=f"sim:{self.run_id}:bank:{table_id}",
                from_account_id=accounts.EXTERNAL_CASHIER,
                to_account_id=accounts.HOUSE_BANK,
                amount_gold=amount,
                kind="bankroll",
                reference=table_id,
            )
        )

    async def _play_table(self, index: int, game: str) -> TableResult:
        c = self.config
        n = players_for(game, c.players)
        options = options_for(game, index)
        buy_in = c.stake_gold * 20
        owner = f"bot{self.run_id}x{index}x0"
        config = pb.TableConfig(
            game=game,
            stake_gold=c.stake_gold,
            fee_bps=fee_for(game, index, options),
            seats_max=max(n, registry.get(game).SPEC.players_min),
            options=options,
            buy_in_min_gold=buy_in,
            buy_in_max_gold=buy_in * 5,
            # Go on with fewer players when some bust: a hand needs only the game's minimum.
            auto_start_players=registry.get(game).SPEC.players_min,
            turn_timeout_s=c.turn_timeout_s,
            owner_player_id=owner,
            between_hands_ms=c.between_hands_ms,
        )
        if game == "taixiu":
            config.seats_max = n
        created = await self.tables.CreateTable(pb.CreateTableRequest(config=config))
        table_id = created.table.table_id
        result = TableResult(table_id, game)
        if game == "taixiu" and options.get("mode") == "system":
            await self._fund_house_bank(table_id, c.stake_gold * 100_000)
        bots: dict[int, str] = {}
        for k in range(n):
            player = f"bot{self.run_id}x{index}x{k}"
            token = (await self.tables.IssuePlayerToken(pb.IssuePlayerTokenRequest(player_id=player))).player_token
            stake = buy_in * (5 if game == "taixiu" and k == 0 else 1)  # the banker brings more
            await self._fund(player, stake * WALLET_MULTIPLE)
            joined = await self.tables.JoinTable(
                pb.JoinTableRequest(
                    table_id=table_id, player_token=token, buy_in_gold=stake, seat=k, idempotency_key=f"join-{player}"
                )
            )
            bots[joined.seat] = token
        await self._drive(table_id, bots, result)
        return result

    async def _drive(self, table_id: str, bots: dict[int, str], result: TableResult) -> None:
        stream = self.tables.WatchTable(pb.WatchTableRequest(table_id=table_id))
        silent: dict[int, float] = {}  # seat -> monotonic time it reconnects
        heartbeats = asyncio.get_running_loop().create_task(self._heartbeats(table_id, bots, silent, result))
        acted: set[tuple[str, int]] = set()
        per_hand: Counter[tuple[str, int]] = Counter()
        minimum = registry.get(result.game).SPEC.players_min
        messages = stream.__aiter__()
        try:
            while True:
                try:
                    message = await asyncio.wait_for(messages.__anext__(), IDLE_LIMIT_S)
                except (StopAsyncIteration, TimeoutError):
                    log.warning("table_idle", table_id=table_id, hands=result.hands)
                    break
                body = message.event.WhichOneof("body")
                if body == "hand_ended":
                    result.hands += 1
                    self.on_hand(result.game)
                    if result.hands >= self.config.hands:
                        break
                if body == "player_stood_up":
                    bots.pop(message.event.player_stood_up.seat, None)
                    if len(bots) < minimum:
                        result.ended_early = True  # the others went broke: the table cannot go on
                        break
                if body in ("hand_ended", "player_stood_up", "table_opened", "player_seated"):
                    continue
                await self._act_if_due(table_id, bots, result, acted, per_hand, silent)
        finally:
            stream.cancel()
            heartbeats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeats
        await self._leave_all(table_id, bots)

    async def _heartbeats(
        self, table_id: str, bots: dict[int, str], silent: dict[int, float], result: TableResult
    ) -> None:
        """Every bot that is not silent says it is here; a silent bot whose time is up
        reconnects. A bot that never sent a heartbeat is never disconnected by the table,
        so every bot sends them."""
        period = max(0.1, self.settings.heartbeat_timeout_s / 3)
        while True:
            now = time.monotonic()
            for seat, token in list(bots.items()):
                back_at = silent.get(seat)
                if back_at is not None and now < back_at:
                    continue
                if back_at is not None:
                    del silent[seat]
                    call = self.tables.Reconnect(pb.ReconnectRequest(table_id=table_id, player_token=token))
                    if await self._call(result, call):
                        result.reconnects += 1
                    continue
                await self._call(
                    result, self.tables.Heartbeat(pb.HeartbeatRequest(table_id=table_id, player_token=token))
                )
            await asyncio.sleep(period)

    async def _act_if_due(
        self,
        table_id: str,
        bots: dict[int, str],
        result: TableResult,
        acted: set[tuple[str, int]],
        per_hand: Counter[tuple[str, int]],
        silent: dict[int, float],
    ) -> None:
        view = (await self.tables.GetTableState(pb.GetTableStateRequest(table_id=table_id))).state
        for seat in view.to_act:
            token = bots.get(seat)
            if token is None or seat in silent:
                continue
            mine = (
                await self.tables.GetTableState(pb.GetTableStateRequest(table_id=table_id, player_token=token))
            ).state
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
                await self._call(
                    result, self.tables.LeaveTable(pb.LeaveTableRequest(table_id=table_id, player_token=token))
                )
                continue
            action = self.rng.choice(list(mine.candidate_actions))
            start = time.perf_counter()
            ok = await self._call(
                result,
                self.tables.Act(
                    pb.ActRequest(
                        table_id=table_id,
                        hand_id=mine.hand_id,
                        seat=seat,
                        action=action,
                        idempotency_key=uuid.uuid4().hex,
                        player_token=token,
                    )
                ),
            )
            if ok:
                result.actions += 1
                result.act_latency_ms.append((time.perf_counter() - start) * 1000)

    async def _call(self, result: TableResult, call: object) -> bool:
        try:
            await call  # type: ignore[misc]
        except grpc.aio.AioRpcError as exc:
            result.rejected[error_reason(exc) or exc.code().name] += 1
            return False
        return True

    async def _leave_all(self, table_id: str, bots: dict[int, str]) -> None:
        for token in bots.values():
            try:
                await self.tables.LeaveTable(pb.LeaveTableRequest(table_id=table_id, player_token=token))
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    log.warning("leave_failed", table_id=table_id, reason=error_reason(exc))
