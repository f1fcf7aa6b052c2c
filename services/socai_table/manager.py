"""The tables this instance runs, and the background work that keeps them going.

A table runs on exactly one table-service instance at a time: the holder of its
partition's lease (``socai_table.ownership``), which is the table's only writer. The
ownership calls ``load`` when this instance acquires a partition (its tables are read from
the store and rebuilt from the stream) and ``drop`` when it loses one (their timers stop and
they leave memory before the lease is released). ``tables.instance`` records which instance
created a table; it no longer decides who runs it. A request for a table this instance does
not hold never reaches ``get``: the server forwards it to the holder. A table whose close
is complete leaves memory (``forget_closed``); the cash-out worker still pays its last
cash-outs, and ``get`` refuses it as TABLE_CLOSED.
Background tasks: a heartbeat watchdog (missed heartbeats become PlayerDisconnected) and
the cash-out worker (escrow → wallet once the player's last hand is settled, after
checking that the ledger's escrow equals the table's stack). A cash-out that cannot be
completed yet is tried again later, each time after a longer pause (``CashoutRetries``), so
that a settlement that lags (a restart) is not asked about every pending cash-out four
times a second; a new cash-out is tried at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from socai import accounts, errors
from socai.events import codec
from socai.events.model import Event
from socai.infra.grpc_errors import database_unavailable, nats_unavailable
from socai.infra.logging import get_logger
from socai_table import metrics
from socai_table.model import TABLE_ID, TableConfig, facts_id_of
from socai_table.ownership import RETRY_AFTER_MS
from socai_table.store import Cashout, ClosedTable
from socai_table.table import CashOutDone, Deps, Table, table_opened

log = get_logger("socai.table.manager")

CASHOUT_POLL_S = 0.25  # the first pause before a cash-out is tried again
CASHOUT_BACKOFF_MAX_S = 5.0  # the longest pause: while a dependency is down, and between tries of one cash-out
CASHOUT_SWEEP_S = 5.0  # look for pending cash-outs at least this often, kicked or not
CASHOUT_ALARM_AFTER_S = 120.0
WATCHDOG_PERIOD_S = 1.0
WATCHDOG_BACKOFF_MAX_S = 10.0
LIST_PAGE_MAX = 500
RETIRE_WAIT_S = 5.0  # how long a dropped table's command in progress may take to finish
LOAD_CONCURRENCY = 8  # tables of an acquired partition rebuilt at once


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


@dataclass
class _Retry:
    tries: int
    due: float  # time.monotonic() of the next try


class CashoutRetries:
    """When each pending cash-out that could not be completed is tried next: after
    ``CASHOUT_POLL_S``, then twice as long each time, up to ``CASHOUT_BACKOFF_MAX_S``.

    Per cash-out, so that one waiting for a hand that is not settled yet never delays
    another: a cash-out seen for the first time is due at once.
    """

    def __init__(self, first_s: float = CASHOUT_POLL_S, max_s: float = CASHOUT_BACKOFF_MAX_S) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._retries: dict[str, _Retry] = {}

    def due(self, cashout_id: str, now: float) -> bool:
        retry = self._retries.get(cashout_id)
        return retry is None or retry.due <= now

    def later(self, cashout_id: str, now: float) -> tuple[int, float]:
        """Record a try that did not complete; (tries so far, pause before the next)."""
        retry = self._retries.get(cashout_id)
        tries = 1 if retry is None else retry.tries + 1
        pause_s = min(self.max_s, self.first_s * 2 ** (tries - 1))
        self._retries[cashout_id] = _Retry(tries, now + pause_s)
        return tries, pause_s

    def forget(self, cashout_id: str) -> None:
        self._retries.pop(cashout_id, None)

    def keep_only(self, cashout_ids: set[str]) -> None:
        """Drop what is known of cash-outs no longer pending (finished, or alarmed)."""
        for cashout_id in [c for c in self._retries if c not in cashout_ids]:
            del self._retries[cashout_id]

    def next_due_in(self, now: float) -> float | None:
        """Seconds until the next cash-out is due (None: none waits)."""
        if not self._retries:
            return None
        return max(0.0, min(r.due for r in self._retries.values()) - now)


class TableManager:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.deps.on_cashout = self.kick_cashouts
        self.deps.on_closed = self.forget_closed
        self.tables: dict[str, Table] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._cashout_wakeup = asyncio.Event()
        self._cashout_wakeup.set()  # the first pass at once: cash-outs left pending by a restart
        self._first_seen: dict[str, float] = {}
        self.cashout_retries = CashoutRetries()
        self.broken: dict[str, str] = {}  # table id -> why it could not be loaded
        # Tables whose rebuild met a dependency's outage: not broken, tried again by the
        # watchdog (a caller's call tries at once).
        self.deferred: dict[str, TableConfig] = {}
        # Rebuilds in flight, by table and the lease token they were started under.
        self._loading: dict[tuple[str, int], asyncio.Future[Table | None]] = {}
        self._tenures: dict[str, int] = {}  # table id -> the lease token its Table was built under
        self._opening: dict[tuple[str, int], asyncio.Future[Table]] = {}  # creates in flight
        # Whether this instance runs ``table_id`` now (its partition's lease); the app sets it.
        self.holds: Callable[[str], bool] = lambda _table_id: True

    async def start(self) -> None:
        """Start the background work; the tables come with the leases (``load``)."""
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._watchdog()), loop.create_task(self._cashout_worker())]

    async def load(self, select: Callable[[str], bool]) -> None:
        """Load and rebuild every open table of the store that ``select`` picks (the tables
        of a partition this instance just acquired).

        A table still in memory from an earlier tenure is retired and rebuilt: the log may
        hold what another instance wrote meanwhile. A table that cannot be rebuilt is
        logged, counted and left out (its calls answer UNAVAILABLE ``TABLE_UNAVAILABLE``):
        one bad table must not keep every other table of the instance from serving.
        """
        started = time.monotonic()
        gate = asyncio.Semaphore(LOAD_CONCURRENCY)
        took: list[float] = []

        async def one(table_id: str, config: TableConfig) -> None:
            async with gate:
                token = self._token(table_id)
                if token is None:
                    return  # the partition was lost again meanwhile: its drop follows
                if table_id in self.tables and self._tenures.get(table_id) == token:
                    return
                began = time.monotonic()
                await self._retire(table_id)
                await self._load(table_id, config)
                took.append(time.monotonic() - began)

        # Concurrently: a table's rebuild waits on NATS and PostgreSQL, not the CPU, and the
        # last table of a partition is back when the slowest rebuild is done, not the sum.
        chosen = [(t, c) for t, c in await self.deps.store.open_tables() if select(t)]
        await asyncio.gather(*(one(t, c) for t, c in chosen))
        metrics.TABLES.set(len(self.tables))
        log.info(
            "tables_loaded",
            count=len(took),
            total=len(self.tables),
            broken=len(self.broken),
            took_ms=round((time.monotonic() - started) * 1000),
            slowest_ms=round(max(took, default=0.0) * 1000),
        )

    def _token(self, table_id: str) -> int | None:
        """The lease token this instance holds ``table_id``'s partition under (None: not held)."""
        try:
            return self.deps.fence(table_id)
        except errors.Unavailable:
            return None

    def _fence(self, table_id: str, token: int) -> int:
        """``Deps.fence`` of a table built under ``token``: the token to write with, while the
        instance still holds the partition under that very token. Raises
        Unavailable("TABLE_NOT_HELD") otherwise (a stale object: the caller retries and
        reaches the table's current object, here or on the holder)."""
        current = self.deps.fence(table_id)
        if current != token:
            raise errors.Unavailable(
                "TABLE_NOT_HELD",
                f"table {table_id} was loaded under lease token {token}, the partition's is {current} now; "
                f"retry in {RETRY_AFTER_MS} ms",
                retry_after_ms=RETRY_AFTER_MS,
            )
        return token

    def _new_table(self, table_id: str, config: TableConfig, token: int) -> Table:
        deps = replace(self.deps, fence=lambda t: self._fence(t, token))
        return Table(table_id, config, deps)

    async def _load(self, table_id: str, config: TableConfig) -> Table | None:
        """Rebuild one table (once per tenure, however many callers ask at the same time).
        Raises Unavailable("TABLE_NOT_HELD") when this instance does not hold it."""
        token = self.deps.fence(table_id)
        existing = self.tables.get(table_id)
        if existing is not None and self._tenures.get(table_id) == token:
            # Loaded meanwhile (a caller that found no table before its awaits): never a
            # second object of one tenure, whose rebuild would repair joins the live one is
            # seating (a buy-in refunded while its player sat down on it).
            return existing
        key = (table_id, token)
        pending = self._loading.get(key)
        if pending is None:
            pending = self._loading[key] = asyncio.ensure_future(self._rebuild_one(table_id, config, token))
            pending.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(pending)

    async def _rebuild_one(self, table_id: str, config: TableConfig, token: int) -> Table | None:
        table = self._new_table(table_id, config, token)
        try:
            await table.open()
            await table.repair_joins()
        except Exception as exc:
            await table.stop()
            if self._token(table_id) != token:
                log.info("table_load_abandoned", table_id=table_id, token=token, error=type(exc).__name__)
                return None
            if is_outage(exc):
                # PostgreSQL or NATS away (a restart): the table is sound, only unreadable
                # now. Marked broken it would refuse every call until its partition moved.
                if table_id not in self.deferred:
                    log.warning("table_load_deferred", table_id=table_id, error=f"{type(exc).__name__}: {exc}"[:500])
                self.deferred[table_id] = config
                return None
            self.deferred.pop(table_id, None)
            self.broken[table_id] = f"{type(exc).__name__}: {exc}"[:500]
            metrics.TABLES_BROKEN.set(len(self.broken))
            log.error("table_load_failed", table_id=table_id, error=self.broken[table_id], exc_info=exc)
            return None
        if self._token(table_id) != token:
            # The partition was dropped (or moved and came back) while the table was being
            # rebuilt: kept, this object would run next to the holder's (or a newer tenure's).
            await table.stop()
            log.info("table_load_abandoned", table_id=table_id, token=token)
            return None
        existing = self.tables.get(table_id)
        if existing is not None and self._tenures.get(table_id) == token:
            # ``create`` opened it meanwhile: one object per tenure, never two.
            await table.stop()
            return existing
        self.broken.pop(table_id, None)
        if self.deferred.pop(table_id, None) is not None:
            log.info("table_load_resumed", table_id=table_id)
        metrics.TABLES_BROKEN.set(len(self.broken))
        if table.closed:
            return table  # its close completed in the rebuild (a resumed close): not kept in memory
        await self._install(table_id, table, token)
        return table

    async def _install(self, table_id: str, table: Table, token: int) -> None:
        """Make ``table`` the one object of ``table_id`` (built under ``token``), in one step
        (no other object can be installed in between), then retire the one it replaces."""
        stale = self.tables.pop(table_id, None)
        self.tables[table_id] = table
        self._tenures[table_id] = token
        if stale is not None and stale is not table:
            await stale.retire(RETIRE_WAIT_S)

    async def _retire(self, table_id: str) -> None:
        table = self.tables.pop(table_id, None)
        self._tenures.pop(table_id, None)
        if table is not None:
            await table.retire(RETIRE_WAIT_S)

    async def drop(self, select: Callable[[str], bool]) -> None:
        """Stop running the tables ``select`` picks (a partition this instance lost or gives
        up): each finishes the command in progress, stops its timers and watchers, and
        leaves memory. Nothing of theirs is written here any more: their fence is bound to
        the tenure that ends (``_fence``), and a rebuild still in flight for one of them
        discards its table when it finishes (``_rebuild_one``)."""
        chosen = [t for t in self.tables if select(t)]
        for table_id in chosen:
            # At once, before any of them waits for its command in progress: a timer that
            # fired now would only be refused (TABLE_NOT_HELD).
            self.tables[table_id].timer.cancel()
            self.tables[table_id].autostart.cancel()
        # Concurrently: each waits only for its own command in progress, so the partition
        # is handed over after the slowest table's, not the sum of all (RETIRE_WAIT_S at most).
        await asyncio.gather(*(self._retire(table_id) for table_id in chosen))
        for table_id in [t for t in self.broken if select(t)]:
            del self.broken[table_id]
        for table_id in [t for t in self.deferred if select(t)]:
            del self.deferred[table_id]
        metrics.TABLES.set(len(self.tables))
        metrics.TABLES_BROKEN.set(len(self.broken))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for table in self.tables.values():
            await table.stop()
        self.tables.clear()
        self._tenures.clear()

    @staticmethod
    def new_table_id() -> str:
        return uuid.uuid4().hex[:16]

    async def create(self, config: TableConfig, table_id: str = "", *, owner_tables_max: int = 0) -> Table:
        """Create a table (idempotent for the same id and config). With ``owner_tables_max``,
        a new table of an owner who has that many open ones already is refused
        (ResourceExhausted "TOO_MANY_TABLES", ``TableStore.create_table``)."""
        normalized = config.normalized()
        table_id = table_id or self.new_table_id()
        if not TABLE_ID.fullmatch(table_id):
            raise errors.InvalidArgument("BAD_TABLE_ID", "table_id must be 1-32 letters and digits")
        _check_encodable(table_id, normalized)
        token = self._token(table_id)
        if token is None:
            raise errors.Unavailable(
                "TABLE_NOT_HELD",
                f"this instance does not hold table {table_id}'s partition; retry",
                table_id=table_id,
                retry_after_ms=RETRY_AFTER_MS,
            )
        stored, inserted = await self.deps.store.create_table(
            table_id, normalized, self.deps.instance, owner_tables_max=owner_tables_max
        )
        if stored != normalized:
            raise errors.AlreadyExists("TABLE_EXISTS", f"{table_id} exists with another configuration")
        if not inserted:
            await self._refuse_closed(table_id)
        table = self.tables.get(table_id)
        if table is None or self._tenures.get(table_id) != token:
            key = (table_id, token)
            opening = self._opening.get(key)
            if opening is not None:
                # The same create is in flight (a client's retry): one object, one TableOpened.
                return await asyncio.shield(opening)
            self._opening[key] = done = asyncio.get_running_loop().create_future()
            try:
                table = await self._open_new(table_id, normalized, token, inserted)
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError):
                    exc = errors.Unavailable(
                        "TABLE_NOT_OPENED",
                        f"the call opening {table_id} was cancelled; retry",
                        retry_after_ms=RETRY_AFTER_MS,
                    )
                done.set_exception(exc)
                done.exception()  # retrieved: a failed create with no retry waiting is no error
                raise
            else:
                done.set_result(table)
            finally:
                self._opening.pop(key, None)
            metrics.TABLES.set(len(self.tables))
            log.info("table_created", table_id=table_id, game=normalized.game)
        return table

    async def _open_new(self, table_id: str, config: TableConfig, token: int, inserted: bool) -> Table:
        """Open a new table object under ``token`` and make it the table's (see ``create``)."""
        table = self._new_table(table_id, config, token)
        try:
            await table.open()
        except BaseException:
            # A table that cannot be opened must not exist: left stored, it would be loaded
            # (and fail) at every start of the service. Unless its TableOpened is on the log
            # after all (written by a call that raced this one).
            if inserted and table.facts_seq == 0 and not await self._has_facts(table_id):
                await self.deps.store.delete_table(table_id, self.deps.instance)
            raise
        existing = self.tables.get(table_id)
        if self._token(table_id) != token:
            pass  # the partition moved while the table opened: its holder loads it
        elif existing is not None and self._tenures.get(table_id) == token:
            # A call loaded it meanwhile (``get``): one object per tenure, never two.
            await table.stop()
            table = existing
        else:
            await self._install(table_id, table, token)
        return table

    async def _has_facts(self, table_id: str) -> bool:
        """Whether the log holds any fact of ``table_id`` (False when it cannot be asked)."""
        try:
            return await self.deps.log.last(self.deps.log.subject_of(table_id, facts_id_of(table_id))) is not None
        except Exception:
            return False

    async def get(self, table_id: str) -> Table:
        """The table, rebuilt here if this instance holds it but has not loaded it yet (it
        was created after the partition was loaded, or this object is of an earlier tenure
        of its partition). Raises NotFound, InvalidArgument,
        PreconditionFailed("TABLE_CLOSED") for a closed table,
        Unavailable("TABLE_UNAVAILABLE") for a table that could not be rebuilt, and
        Unavailable("TABLE_NOT_HELD") when this instance does not hold the table (the
        server forwards such calls; this is the race of a partition moving meanwhile)."""
        table = self.tables.get(table_id)
        if table is not None and self._tenures.get(table_id) == self._token(table_id):
            return table
        if not TABLE_ID.fullmatch(table_id or ""):
            raise errors.InvalidArgument("BAD_TABLE_ID", "table_id must be 1-32 letters and digits")
        if table_id in self.broken:
            raise errors.Unavailable("TABLE_UNAVAILABLE", f"{table_id} could not be loaded; see the service log")
        config = await self.deps.store.config_of(table_id)
        if config is None:
            await self._refuse_closed(table_id)
            raise errors.NotFound("TABLE_NOT_FOUND", f"no table {table_id}")
        if self._token(table_id) is None:
            # Never rebuilt here when not held: a lazy load must not run a table next to its
            # holder's (the caller retries and is forwarded).
            raise errors.Unavailable(
                "TABLE_NOT_HELD",
                f"this instance does not hold table {table_id}; retry",
                table_id=table_id,
                retry_after_ms=RETRY_AFTER_MS,
            )
        if table is not None:
            # Kept from an earlier tenure of its partition (the load of the new one has not
            # reached it yet): the log may hold what another instance wrote since.
            await self._retire(table_id)
        loaded = await self._load(table_id, config)
        if loaded is None and table_id in self.deferred:
            raise errors.Unavailable(
                "TABLE_UNAVAILABLE",
                f"{table_id} cannot be rebuilt while PostgreSQL or NATS is unavailable; retry in {RETRY_AFTER_MS} ms",
                retry_after_ms=RETRY_AFTER_MS,
            )
        if loaded is None:
            raise errors.Unavailable("TABLE_UNAVAILABLE", f"{table_id} could not be loaded; see the service log")
        metrics.TABLES.set(len(self.tables))
        return loaded

    async def directory(
        self, game: str = "", after: str = "", limit: int = 100
    ) -> tuple[list[tuple[str, TableConfig, float]], str]:
        """A page of every instance's open tables from the shared store, by id: (id, config,
        created at), and the next page's token ("" on the last page)."""
        limit = max(1, min(limit or 100, LIST_PAGE_MAX))
        rows = await self.deps.store.list_tables(game, after, limit + 1)
        page = rows[:limit]
        return page, page[-1][0] if len(rows) > limit else ""

    def list(self, game: str = "", after: str = "", limit: int = 100) -> tuple[list[Table], str]:
        """A page of the tables this instance runs, by id (what it answers a forwarded
        ListTables with)."""
        limit = max(1, min(limit or 100, LIST_PAGE_MAX))
        ids = sorted(t for t, table in self.tables.items() if (not game or table.config.game == game) and t > after)
        page = ids[:limit]
        next_token = page[-1] if len(ids) > limit else ""
        return [self.tables[t] for t in page], next_token

    # --- closing ------------------------------------------------------------------------

    async def close(self, table_id: str, reason: str) -> Table | ClosedTable:
        """Close ``table_id`` (``Table.close``); a table already closed answers its row.
        Returns the table while it is closing (a hand in play finishes first), its row once
        closed. Raises what ``get`` raises (NotFound for an unknown table)."""
        closed = await self.deps.store.closed_table(table_id) if TABLE_ID.fullmatch(table_id or "") else None
        if closed is not None:
            return closed
        table = await self.get(table_id)
        await table.close(reason)
        if table.closed:
            return await self.closed_or_raise(table_id)
        return table

    async def closed_or_raise(self, table_id: str) -> ClosedTable:
        """The row of closed ``table_id``; raises NotFound("TABLE_NOT_FOUND") otherwise."""
        closed = await self.deps.store.closed_table(table_id)
        if closed is None:
            raise errors.NotFound("TABLE_NOT_FOUND", f"no table {table_id}")
        return closed

    async def _refuse_closed(self, table_id: str) -> None:
        """Raises PreconditionFailed("TABLE_CLOSED") when ``table_id`` is a closed table: a
        call for it is refused for what it is, not as an unknown table."""
        closed = await self.deps.store.closed_table(table_id)
        if closed is not None:
            raise errors.PreconditionFailed("TABLE_CLOSED", f"{table_id} is closed ({closed.close_reason})")

    def forget_closed(self, table_id: str) -> None:
        """A table whose close is complete leaves memory: a closed table costs nothing. Its
        last cash-outs are still paid (the cash-out pass reads closed tables' rows)."""
        table = self.tables.pop(table_id, None)
        if table is not None:
            table.timer.cancel()
            table.watchers.close()
        metrics.TABLES.set(len(self.tables))
        self.kick_cashouts()

    # --- background work ---------------------------------------------------------------

    async def _watchdog(self) -> None:
        """Heartbeats and healing of every table (``Table.heal``), and the rebuilds an
        outage deferred, with a back-off per table while its dependency is down: one
        failing table never stops the loop."""
        period = min(WATCHDOG_PERIOD_S, self.deps.heartbeat_timeout_s / 4)
        failures: dict[str, int] = {}
        retry_at: dict[str, float] = {}
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for table in list(self.tables.values()):
                table_id = table.table_id
                if retry_at.get(table_id, 0.0) > now or not table.holds():
                    continue  # backing off, or of a tenure that ended: the manager drops it
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
            for table_id, config in list(self.deferred.items()):
                if retry_at.get(table_id, 0.0) > now or table_id in self.tables or self._token(table_id) is None:
                    continue
                try:
                    loaded = await self._load(table_id, config)
                except errors.Unavailable:
                    loaded = None  # the partition moved meanwhile: its drop forgets the table
                if loaded is None:
                    count = failures[table_id] = failures.get(table_id, 0) + 1
                    retry_at[table_id] = now + min(WATCHDOG_BACKOFF_MAX_S, period * 2**count)
                else:
                    failures.pop(table_id, None)
                    retry_at.pop(table_id, None)
                    metrics.TABLES.set(len(self.tables))

    def kick_cashouts(self) -> None:
        self._cashout_wakeup.set()

    async def _cashout_worker(self) -> None:
        """Complete pending cash-outs, each when it is due (``CashoutRetries``).

        Wakes at a kick (a new cash-out), when the next cash-out is due, and at least every
        ``CASHOUT_SWEEP_S``. While the ledger or settlement is unreachable (UNAVAILABLE)
        the whole pass backs off, up to ``CASHOUT_BACKOFF_MAX_S``; a kick still wakes it.
        """
        failures = 0
        while True:
            if failures:
                wait_s = min(CASHOUT_BACKOFF_MAX_S, CASHOUT_POLL_S * 2**failures)
            else:
                due_in = self.cashout_retries.next_due_in(time.monotonic())
                wait_s = CASHOUT_SWEEP_S if due_in is None else min(CASHOUT_SWEEP_S, due_in)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._cashout_wakeup.wait(), wait_s)
            self._cashout_wakeup.clear()
            try:
                await self._cashout_pass()
                failures = 0
            except errors.SocaiError as exc:
                failures = min(failures + 1, 8)
                if failures in (1, 8):
                    log.warning("cashout_worker_waiting", code=exc.code, error=exc.message)
            except Exception as exc:
                failures = min(failures + 1, 8)
                log.error("cashout_worker_crashed", error=str(exc), exc_info=exc)

    async def _cashout_pass(self) -> None:
        """Try every pending cash-out that is due. Raises Unavailable (and stops the pass)
        when the ledger, settlement or the database is unreachable: every cash-out would
        fail the same way. Any other failure backs that one cash-out off and the pass goes
        on: one cash-out the ledger refuses must not hold back the others."""
        pending = [
            c
            for c in await self.deps.store.pending_cashouts(list(self.tables), include_closed=True)
            if c.table_id in self.tables or self.holds(c.table_id)  # a closed table's: its partition's holder
        ]
        metrics.CASHOUTS_PENDING.set(len(pending))
        retries = self.cashout_retries
        ids = {c.cashout_id for c in pending}
        retries.keep_only(ids)
        for gone in [c for c in self._first_seen if c not in ids]:
            del self._first_seen[gone]
        unsettled: set[str] = set()  # hands found unsettled in this pass: asked about once
        for cashout in pending:
            now = time.monotonic()
            if not retries.due(cashout.cashout_id, now):
                continue
            table = self.tables.get(cashout.table_id)
            if table is not None and (table.dirty or table.seat_of(cashout.player_id) is not None):
                # The stand-up is not written (yet, or its append failed and the rebuild will
                # write it): the player's chips are still in play; paid now, the escrow
                # would be short for their hand.
                continue
            try:
                done = await self.process_cashout(cashout, unsettled)
            except errors.Unavailable:
                raise
            except Exception as exc:
                tries, pause_s = retries.later(cashout.cashout_id, now)
                if tries in (1, 10) or tries % 100 == 0:
                    code = exc.code if isinstance(exc, errors.SocaiError) else type(exc).__name__
                    log.warning(
                        "cashout_failed",
                        cashout_id=cashout.cashout_id,
                        table_id=cashout.table_id,
                        code=code,
                        error=str(exc),
                        tries=tries,
                        retry_in_s=pause_s,
                        exc_info=exc if not isinstance(exc, errors.SocaiError) else None,
                    )
                continue
            if done:
                retries.forget(cashout.cashout_id)
            else:
                # Not settled yet, or the escrow not yet what the table says: an expected
                # wait (settlement lags the table), not a warning.
                retries.later(cashout.cashout_id, now)

    async def process_cashout(self, cashout: Cashout, unsettled: set[str] | None = None) -> bool:
        """Try to complete one cash-out; True when done, False when it must wait (its last
        hand is not settled yet, or the ledger's escrow differs from the stack within the
        grace period). ``unsettled``: hands already found unsettled in this pass (not asked
        again), to which a hand found unsettled is added."""
        money = self.deps.money
        first = self._first_seen.setdefault(cashout.cashout_id, time.monotonic())
        hand_id = cashout.last_hand_id
        if hand_id:
            if unsettled is not None and hand_id in unsettled:
                return False
            if not await money.is_settled(hand_id):
                if unsettled is not None:
                    unsettled.add(hand_id)
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
        table = self.tables.get(cashout.table_id)
        if table is not None:
            done = CashOutDone(
                cashout.table_id, cashout.player_id, cashout.amount_gold, cashout.last_hand_id, tx, time.time()
            )
            await table.cashed_out(done)
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


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is a dependency's outage (PostgreSQL or NATS unreachable or slow to
    answer), which passes, rather than a fault of the table's own data."""
    return (
        isinstance(exc, errors.Unavailable | TimeoutError)
        or database_unavailable(exc) is not None
        or nats_unavailable(exc) is not None
    )
