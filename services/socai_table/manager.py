"""The tables this instance owns, and the background work that keeps them going.

Each table belongs to exactly one table-service instance (the ``tables.instance`` row):
that instance is the table's only writer. A request for a table owned elsewhere is refused
with FAILED_PRECONDITION ``TABLE_NOT_OWNED`` (the router sends it to the owner).
Background tasks: a heartbeat watchdog (missed heartbeats become PlayerDisconnected) and
the cash-out worker (escrow → wallet once the player's last hand is settled, after
checking that the ledger's escrow equals the table's stack).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

from socai import accounts, errors
from socai.events import codec
from socai.events.model import Event
from socai.infra.logging import get_logger
from socai_table import metrics
from socai_table.model import TABLE_ID, TableConfig, facts_id_of
from socai_table.store import Cashout
from socai_table.table import Deps, Table, table_opened

log = get_logger("socai.table.manager")

CASHOUT_POLL_S = 0.25
CASHOUT_BACKOFF_MAX_S = 5.0
CASHOUT_ALARM_AFTER_S = 120.0
WATCHDOG_PERIOD_S = 1.0
WATCHDOG_BACKOFF_MAX_S = 10.0
LIST_PAGE_MAX = 500


TABLE_OPENED_MAX_BYTES = 16 * 1024


def _check_encodable(table_id: str, config: TableConfig) -> None:
    """Refuse a config whose TableOpened event could not be written (a value outside
    int64, an oversized event) before anything is stored."""
    body = table_opened(table_id, config)
    event = Event(table_id, facts_id_of(table_id), 1, config.game, codec.now(), body)
    try:
        size = len(codec.encode(event))
    except (ValueError, TypeError, OverflowError) as exc:
        raise errors.InvalidArgument("BAD_CONFIG", "the table's configuration cannot be recorded") from exc
    if size > TABLE_OPENED_MAX_BYTES:
        raise errors.InvalidArgument("BAD_CONFIG", f"the table's configuration is over {TABLE_OPENED_MAX_BYTES} bytes")


class TableManager:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.deps.on_cashout = self.kick_cashouts
        self.tables: dict[str, Table] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._cashout_wakeup = asyncio.Event()
        self._first_seen: dict[str, float] = {}
        self.broken: dict[str, str] = {}  # table id -> why it could not be loaded

    async def start(self) -> None:
        """Load and rebuild every table this instance owns, then start background work.

        A table that cannot be rebuilt is logged, counted and left out (its calls answer
        UNAVAILABLE ``TABLE_UNAVAILABLE``): one bad table must not keep every other table
        of the instance from serving.
        """
        for table_id, config in await self.deps.store.tables_of(self.deps.instance):
            table = Table(table_id, config, self.deps)
            try:
                await table.open()
                await table.repair_joins()
            except Exception as exc:
                self.broken[table_id] = f"{type(exc).__name__}: {exc}"[:500]
                metrics.TABLES_BROKEN.set(len(self.broken))
                log.error("table_load_failed", table_id=table_id, error=self.broken[table_id], exc_info=exc)
                continue
            self.tables[table_id] = table
        metrics.TABLES.set(len(self.tables))
        log.info("tables_loaded", count=len(self.tables), broken=len(self.broken), instance=self.deps.instance)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._watchdog()), loop.create_task(self._cashout_worker())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for table in self.tables.values():
            await table.stop()

    async def create(self, config: TableConfig, table_id: str = "") -> Table:
        """Create a table (idempotent for the same id and config)."""
        normalized = config.normalized()
        table_id = table_id or uuid.uuid4().hex[:16]
        if not TABLE_ID.fullmatch(table_id):
            raise errors.InvalidArgument("BAD_TABLE_ID", "table_id must be 1-32 letters and digits")
        _check_encodable(table_id, normalized)
        stored, inserted = await self.deps.store.create_table(table_id, normalized, self.deps.instance)
        if stored != normalized:
            raise errors.AlreadyExists("TABLE_EXISTS", f"{table_id} exists with another configuration")
        owner = await self.deps.store.owner_of(table_id)
        if owner != self.deps.instance:
            raise errors.PreconditionFailed("TABLE_NOT_OWNED", f"{table_id} is owned by {owner}", owner=owner)
        table = self.tables.get(table_id)
        if table is None:
            table = Table(table_id, normalized, self.deps)
            try:
                await table.open()
            except BaseException:
                # A table that cannot be opened must not exist: left stored, it would be
                # loaded (and fail) at every start of the service.
                if inserted and table.facts_seq == 0:
                    await self.deps.store.delete_table(table_id, self.deps.instance)
                raise
            self.tables[table_id] = table
            metrics.TABLES.set(len(self.tables))
            log.info("table_created", table_id=table_id, game=normalized.game)
        return table

    async def get(self, table_id: str) -> Table:
        table = self.tables.get(table_id)
        if table is not None:
            return table
        if not TABLE_ID.fullmatch(table_id or ""):
            raise errors.InvalidArgument("BAD_TABLE_ID", "table_id must be 1-32 letters and digits")
        if table_id in self.broken:
            raise errors.Unavailable("TABLE_UNAVAILABLE", f"{table_id} could not be loaded; see the service log")
        owner = await self.deps.store.owner_of(table_id)
        if owner is None:
            raise errors.NotFound("TABLE_NOT_FOUND", f"no table {table_id}")
        raise errors.PreconditionFailed("TABLE_NOT_OWNED", f"{table_id} is owned by {owner}", owner=owner)

    def list(self, game: str = "", after: str = "", limit: int = 100) -> tuple[list[Table], str]:
        limit = max(1, min(limit or 100, LIST_PAGE_MAX))
        ids = sorted(t for t, table in self.tables.items() if (not game or table.config.game == game) and t > after)
        page = ids[:limit]
        next_token = page[-1] if len(ids) > limit else ""
        return [self.tables[t] for t in page], next_token

    # --- background work ---------------------------------------------------------------

    async def _watchdog(self) -> None:
        """Heartbeats and healing of every table (``Table.heal``), with a back-off per
        table while its dependency is down: one failing table never stops the loop."""
        period = min(WATCHDOG_PERIOD_S, self.deps.heartbeat_timeout_s / 4)
        failures: dict[str, int] = {}
        retry_at: dict[str, float] = {}
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for table in list(self.tables.values()):
                table_id = table.table_id
                if retry_at.get(table_id, 0.0) > now:
                    continue
                try:
                    await table.check_heartbeats(now)
                    await table.heal()
                except Exception as exc:
                    count = failures[table_id] = failures.get(table_id, 0) + 1
                    retry_at[table_id] = now + min(WATCHDOG_BACKOFF_MAX_S, period * 2**count)
                    metrics.HEAL_FAILURES.inc()
                    if count in (1, 10) or count % 100 == 0:
                        code = exc.code if isinstance(exc, errors.SocaiError) else type(exc).__name__
                        log.warning("table_heal_failed", table_id=table_id, code=code, failures=count)
                else:
                    if failures.pop(table_id, 0):
                        log.info("table_healed", table_id=table_id)
                    retry_at.pop(table_id, None)

    def kick_cashouts(self) -> None:
        self._cashout_wakeup.set()

    async def _cashout_worker(self) -> None:
        failures = 0
        while True:
            # Back off while the ledger or settlement is unreachable; a kick (a new
            # cash-out) still wakes the worker at once.
            wait_s = min(CASHOUT_BACKOFF_MAX_S, CASHOUT_POLL_S * 2**failures)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._cashout_wakeup.wait(), wait_s)
            self._cashout_wakeup.clear()
            try:
                pending = await self.deps.store.pending_cashouts(list(self.tables))
                metrics.CASHOUTS_PENDING.set(len(pending))
                for cashout in pending:
                    await self.process_cashout(cashout)
                failures = 0
            except errors.SocaiError as exc:
                failures = min(failures + 1, 8)
                if failures in (1, 8):
                    log.warning("cashout_worker_waiting", code=exc.code, error=exc.message)
            except Exception as exc:
                failures = min(failures + 1, 8)
                log.error("cashout_worker_crashed", error=str(exc), exc_info=exc)

    async def process_cashout(self, cashout: Cashout) -> bool:
        """Try to complete one cash-out; True when done."""
        money = self.deps.money
        first = self._first_seen.setdefault(cashout.cashout_id, time.monotonic())
        if cashout.last_hand_id and not await money.is_settled(cashout.last_hand_id):
            return False
        escrow = accounts.escrow(cashout.table_id, cashout.player_id)
        balance = await money.balance(escrow)
        if balance != cashout.amount_gold:
            # An earlier hand may still be settling; past the grace period it is an alarm,
            # never a silent correction (DESIGN.md "Accounts").
            if time.monotonic() - first > CASHOUT_ALARM_AFTER_S:
                detail = f"ledger escrow {balance} != table stack {cashout.amount_gold}"
                await self.deps.store.finish_cashout(cashout.cashout_id, "alarm", detail=detail)
                metrics.ESCROW_MISMATCH.inc()
                log.error("escrow_mismatch", table_id=cashout.table_id, player_id=cashout.player_id, detail=detail)
            return False
        tx = ""
        if cashout.amount_gold > 0:
            tx = await money.transfer(
                f"cashout:{cashout.cashout_id}",
                escrow,
                accounts.player(cashout.player_id),
                cashout.amount_gold,
                "cash_out",
                cashout.table_id,
            )
        await self.deps.store.finish_cashout(cashout.cashout_id, "done", tx)
        self._first_seen.pop(cashout.cashout_id, None)
        log.info("cashed_out", table_id=cashout.table_id, player_id=cashout.player_id, amount=cashout.amount_gold)
        return True

    async def wait_cashout(self, table_id: str, player_id: str, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the player's cash-out at the table to complete."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not await self.deps.store.has_pending_cashout(table_id, player_id):
                return True
            self.kick_cashouts()
            await asyncio.sleep(0.05)
        return False
