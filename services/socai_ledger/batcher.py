"""The write batcher: one per ledger process, the only path by which money moves.

Why a batcher. Nearly every hand posts a fee to ``house:fees``; if each posting were its own
database transaction, every one would queue on that row's lock and the ledger would run at
one commit (one WAL flush) per posting. Instead, concurrent ``PostTransaction`` calls and
``PostTransactions`` items are coalesced into one database transaction per batch (up to
``max_batch`` transactions): the batch locks its accounts once, applies every item against
running balances in memory (each item atomic on its own: a refused item is skipped without
touching the others), writes the entries with COPY, updates each touched balance once, and
commits once. A hot account then costs one row update per batch instead of one per
transaction, and the commit's fsync is shared by the whole batch. Sharded balances (N
sub-rows of house:fees summed on read) were the alternative; they only spread the row lock
and still pay one commit per posting, and they make "balance after" and the never-negative
check need every shard. Batching removes both costs and keeps one row per account.

How batches form. Callers put units (the items of one RPC) on a bounded queue and wait for
their futures. The writer loop takes everything queued up to ``max_batch`` items and,
when the batch is not full, keeps taking what arrives in steps of ``linger_s / 4`` for as
long as each step brings something, ``linger_s`` (2 ms) at most; then it writes, commits,
and only then resolves the futures. Under load, requests accumulate while the previous batch
commits, so batches grow by themselves; the linger adds the requests still being parsed. The queue is
bounded by ``max_pending`` items: when full, callers wait (backpressure, bounded by their
RPC deadline) instead of piling up memory.

Two batches in flight (``pipeline``, 2 by default; ``SOCAI_LEDGER_WRITE_PIPELINE``). A batch
costs two round trips (``journal_write``: the lock and the reads, then the writes and the
commit), and a caller answered by one batch waits for the next; one batch at a time, the
next one's first round trip only starts once the commit's answer is back and the loop has
had its turn. So once a batch has planned and sends its last script, the loop forms the
next batch and sends its first script on a second connection: it waits on the journal's
lock *in the server* and its reads run right after the commit, each statement with a
snapshot taken after the lock, so it sees everything the batch before it wrote. Nothing is
decided on stale data; only the wait moves from the event loop to the server. The lock
still admits one writer at a time (commit order = journal order), each batch has its own
connection, retries, isolation of a poison item and failures as below, and a third batch
waits for a connection to come free. ``pipeline=1`` writes as one batch at a time.

Failures. Serialization failures and deadlocks (possible when something outside the
ledger locks account rows) are retried with a short backoff. A lost database connection
fails the batch's callers with UNAVAILABLE — the commit may or may not have happened, and
a retry with the same idempotency key returns the original outcome either way — and the
next batch opens a fresh connection; so does a batch that finds the database unreachable
(nothing was written: UNAVAILABLE too). A batch is never written again by the batcher
after a lost connection: only the caller's retry, under its key, learns the outcome. The
writer's connection is checked before each batch (``socai.infra.db_pool.usable``), so one
that idled through a database restart is replaced instead of failing the first batch after
it. Any other database error on a multi-item batch re-runs its items one by one, so a
poison item fails alone instead of taking the batch with it.

Fenced requests (a lease holder's ``PostTransactions`` with a ``Fence``). The fence check
must commit or roll back with the request's writes, and a refused fence must refuse the
whole request while leaving every other caller's postings alone. The simplest way to have
both: **a fenced request is a batch of its own**. ``_take`` never puts a fenced unit
together with another unit (it stops before one, and a batch that starts with one takes
nothing more), and ``journal_write.write_batch`` advances the fence in that batch's database
transaction before deciding anything; a stale token rolls the batch back and the unit's
caller gets PreconditionFailed("FENCED"), nothing written (not even replays or remembered
refusals, so the keys stay free for the new holder). A fenced unit with no items is a claim:
its batch records the token and writes nothing else. What this costs: a fenced request does
not share its commit with others. Settlement, the one fenced caller, sends up to hundreds of
hands per call (``SOCAI_SETTLEMENT_POST_BATCH``), so its requests are batches already;
unfenced requests batch among themselves as before (a fenced unit in the queue only ends the
batch before it, in queue order). Mixing fenced units into shared batches (each fence
upserted first, a refused one dropping only its unit) would keep the sharing, at the price of
more bookkeeping: the units of one partition in the same batch, and a failed batch's
re-runs. The poison-item fallback keeps the fence: each item of a fenced unit is re-run in its
own transaction *with the unit's fence*, so every write is still checked; should the lease
move on between two of them, the items after it are answered REJECTED / FENCED one by one
(the ones before it were written under a valid token) rather than failing the whole call.

The outbox's bound (``outbox_backlog``). With a ``backlog``, the writer writes no batch while
the outbox relay is ``max_lag`` or more transactions behind: postings wait in the queue,
each at most ``wait_s``, and past it are refused with UNAVAILABLE / ``OUTBOX_BACKLOG``
(never written, so a retry under the same key is a first attempt); when the relay has
published nothing for a whole wait, every waiting posting is refused at once. Refusing
happens here, in the queue, and not per item: a caller hears one retryable status for its
whole call (settlement retries its batch; a per-item refusal would dead-letter hands). A
fenced claim writes nothing to the journal and passes. While it holds postings back the
writer does not count as busy, so the relay publishes at full speed.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections import Counter as Counter_
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psycopg
from opentelemetry.trace import SpanContext
from prometheus_client import Counter, Histogram
from psycopg import errors as pg_errors

from socai import errors
from socai.infra import db_pool, tracing
from socai.infra.logging import get_logger
from socai_ledger import db, domain, journal_write
from socai_ledger.config import PIPELINE, PIPELINE_MAX
from socai_ledger.domain import PostOutcome, PostStatus, PreparedTransaction
from socai_ledger.outbox_backlog import REFUSED, WAIT_SECONDS, OutboxBacklog

log = get_logger("socai.ledger.batcher")

POSTINGS = Counter("socai_ledger_postings_total", "Transactions handled by the write path", ["status"])
BATCH_ITEMS = Histogram(
    "socai_ledger_batch_items",
    "Transactions per database transaction",
    buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000),
)
BATCH_SECONDS = Histogram(
    "socai_ledger_batch_seconds",
    "Time to write and commit one batch",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
BATCH_RETRIES = Counter("socai_ledger_batch_retries_total", "Batches retried after a conflict", ["reason"])
FENCED = Counter("socai_ledger_fenced_total", "Fenced calls refused: their lease token was older than one recorded")

_POSTINGS_BY_STATUS = {status: POSTINGS.labels(status.name.lower()) for status in PostStatus}

RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
BUSY_WINDOW_S = 0.1  # a batch written this recently still counts as load
LINGER_STEPS = 4  # the linger is spent in steps; a step in which nothing arrives ends it
REFUSAL_LOG_EVERY_S = 10.0


class UuidV7:
    """Time-ordered transaction ids (RFC 9562 version 7): 48 bits of Unix milliseconds, then
    74 random bits. Ordered ids keep the transactions primary key an append-mostly btree."""

    def __init__(self) -> None:
        self._random = random.Random(os.urandom(32))

    def __call__(self) -> uuid.UUID:
        value = (time.time_ns() // 1_000_000) << 80 | self._random.getrandbits(80)
        value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
        value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
        return uuid.UUID(int=value)


@dataclass(eq=False)
class _Unit:
    items: Sequence[PreparedTransaction]
    future: asyncio.Future[list[PostOutcome]] = field(repr=False)
    fence: domain.Fence | None = None  # a fenced unit is always a batch of its own
    queued_at: float = 0.0  # time.monotonic() when it was queued
    held: bool = False  # the outbox's bound held it back for a while
    trace: SpanContext | None = None  # the caller's span (its RPC) while tracing is on


class WriteBatcher:
    def __init__(
        self,
        database_url: str,
        *,
        max_batch: int = domain.BATCH_MAX,
        linger_s: float = 0.002,
        max_pending: int = 20_000,
        retries: int = 8,
        on_commit: Callable[[int], None] | None = None,
        backlog: OutboxBacklog | None = None,
        marks: tracing.Marks | None = None,
        pipeline: int = PIPELINE,
    ) -> None:
        """``marks``: where each applied transaction's journal sequence is marked with the
        span of the batch that wrote it, for the outbox relay (tracing on). ``pipeline``:
        batches in flight at once, each on its own connection (module docstring)."""
        errors.check(max_batch >= 1 and max_pending >= max_batch, "batcher limits")
        errors.check(1 <= pipeline <= PIPELINE_MAX, f"pipeline is 1..{PIPELINE_MAX}")
        self._url = database_url
        self.max_batch = max_batch
        self.linger_s = linger_s
        self.max_pending = max_pending
        self.retries = retries
        self._on_commit = on_commit
        self._backlog = backlog
        self._marks = marks
        self._queue: deque[_Unit] = deque()
        self._pending = 0
        self._space = asyncio.Condition()
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        # One connection per batch in flight: a batch takes a free one and gives it back.
        self._free: list[_Writer] = [_Writer() for _ in range(pipeline)]
        self._freed = asyncio.Event()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._new_id = UuidV7()
        # Batches in flight, counted by the batch itself: ``_in_flight`` loses a task only in
        # its done callback, after the writer loop has woken on ``_freed``.
        self._writing = 0
        self._writing_items = 0  # and their items
        self._holding = False
        self._last_write = 0.0
        self._refusal_logged_at = float("-inf")
        self._refused_unlogged = 0

    def busy(self) -> bool:
        """Whether postings are waiting or were written in the last moment (the relay yields).
        Postings held back by the outbox's bound wait for the relay: then it must not yield."""
        if self._holding:
            return False
        return bool(self._queue) or self._writing > 0 or time.monotonic() - self._last_write < BUSY_WINDOW_S

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ledger-write-batcher")

    async def submit(
        self, items: Sequence[PreparedTransaction], fence: domain.Fence | None = None
    ) -> list[PostOutcome]:
        """Post ``items`` (validated) and wait for their outcomes, in order.

        With a ``fence``, the items are written in a batch of their own, only if the fence's
        token is current (see the module docstring); no items is then a claim of the token.
        Raises PreconditionFailed("FENCED") when a newer token was recorded (nothing written),
        Unavailable("LEDGER_STOPPING") once the batcher is closing,
        Unavailable("OUTBOX_BACKLOG") when the outbox relay is too far behind (nothing written;
        see the module docstring) and Unavailable("DATABASE_UNAVAILABLE") when the outcome is
        unknown (retry with the same keys).
        """
        least = 0 if fence is not None else 1
        errors.check(least <= len(items) <= self.max_batch, "a unit holds 1..max_batch items (0: a claim)")
        if self._closing:
            raise errors.Unavailable("LEDGER_STOPPING", "the ledger is shutting down; retry on another replica")
        if self._pending + len(items) > self.max_pending:  # backpressure: wait for room
            async with self._space:
                await self._space.wait_for(lambda: self._pending + len(items) <= self.max_pending or self._closing)
        if self._closing:
            raise errors.Unavailable("LEDGER_STOPPING", "the ledger is shutting down; retry on another replica")
        future: asyncio.Future[list[PostOutcome]] = asyncio.get_running_loop().create_future()
        self._queue.append(_Unit(items, future, fence, time.monotonic(), trace=tracing.current()))
        self._pending += len(items)
        self._wakeup.set()
        # A caller that goes away (deadline, cancel) cancels only this future: its items stay
        # queued and are written all the same (the writer skips delivering to a done future),
        # and the outcome is found again under its idempotency key.
        return await future

    async def close(self) -> None:
        """Stop accepting, write everything already queued, then release the connection."""
        self._closing = True
        self._wakeup.set()
        async with self._space:
            self._space.notify_all()
        if self._task is not None:
            await self._task
            self._task = None
        for writer in self._free:
            await writer.drop()

    # --- the writer loop --------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    while self._in_flight:
                        await asyncio.wait(set(self._in_flight))
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self._backlog is not None and self._backlog.over() and self._queue[0].items:
                await self._hold(self._backlog)
                continue
            if not self._free or self._may_cross_the_bound():
                # Every connection has a batch in flight, or the outbox's bound could be
                # crossed by the batches in flight: wait for one to end.
                self._freed.clear()
                await self._freed.wait()
                continue
            units, count = self._take()
            now = time.monotonic()
            for unit in units:
                if unit.held:
                    WAIT_SECONDS.observe(now - unit.queued_at)
            waited = 0.0
            step = self.linger_s / LINGER_STEPS
            alone = units[0].fence is not None  # a fenced unit takes no company
            while not alone and count < self.max_batch and waited < self.linger_s and not self._closing:
                # Wait while requests keep arriving (a burst is still being parsed), and no
                # longer than linger_s in all: one step that brings nothing ends the wait.
                await asyncio.sleep(step)
                waited += step
                more, added = self._take(self.max_batch - count)
                if not added:
                    break
                units += more
                count += added
            writer = self._free.pop()
            last_script = writer.last_script = asyncio.Event()
            self._writing += 1
            self._writing_items += count
            task = asyncio.create_task(self._write_batch(units, count, writer), name="ledger-write-batch")
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)
            # The next batch forms once this one sends its last script (set again when it
            # ends, however): its first script then waits on the journal's lock in the server.
            await last_script.wait()

    async def _write_batch(self, units: list[_Unit], count: int, writer: _Writer) -> None:
        try:
            await self._write(units, writer)
        except Exception as exc:  # never let the writer die: fail this batch, keep serving
            log.error("batch_failed", items=count, exc_info=exc)
            self._fail(units, exc)
        finally:
            self._writing -= 1
            self._writing_items -= count
            self._last_write = time.monotonic()
            self._free.append(writer)
            self._freed.set()
            writer.last_script.set()
        self._pending -= count
        async with self._space:
            self._space.notify_all()

    def _may_cross_the_bound(self) -> bool:
        """With a batch in flight, whether the outbox is at its bound counting that batch's
        items: the lag the writer knows is from before it, so a next batch waits for it to
        end (the bound is overshot by one batch at most, as with one batch at a time)."""
        backlog = self._backlog
        if backlog is None or not backlog.enabled or not self._writing or not self._queue[0].items:
            return False
        return backlog.lag + self._writing_items >= backlog.max_lag

    async def _hold(self, backlog: OutboxBacklog) -> None:
        """Write nothing while the outbox is over its bound: return once the relay has made
        room, refusing each posting that waited ``backlog.wait_s`` on the way, and every
        one at once when the relay publishes nothing (or the batcher is closing). A claim
        at the head of the queue (no items, nothing for the journal) ends the wait."""
        self._holding = True
        try:
            while self._queue and self._queue[0].items:
                for unit in self._queue:
                    unit.held = True
                seen = backlog.published_seq
                await backlog.refresh()
                if not backlog.over():
                    return
                now = time.monotonic()
                waiting = [unit for unit in self._queue if unit.items]
                if self._closing or backlog.stalled(now):
                    await self._refuse(waiting, backlog, "stopping" if self._closing else "relay_stalled", now)
                    continue
                expired = [unit for unit in waiting if now - unit.queued_at >= backlog.wait_s]
                if expired:
                    await self._refuse(expired, backlog, "wait_expired", now)
                    continue
                oldest = min(unit.queued_at for unit in waiting)
                await backlog.progressed(seen, min(backlog.refresh_s, oldest + backlog.wait_s - now))
        finally:
            self._holding = False

    async def _refuse(self, units: list[_Unit], backlog: OutboxBacklog, reason: str, now: float) -> None:
        """Take ``units`` off the queue unwritten and answer them OUTBOX_BACKLOG."""
        gone = set(map(id, units))
        self._queue = deque(unit for unit in self._queue if id(unit) not in gone)
        refused = 0
        for unit in units:
            refused += len(unit.items)
            WAIT_SECONDS.observe(now - unit.queued_at)
            if not unit.future.done():
                unit.future.set_exception(backlog.refusal(reason))
        self._pending -= refused
        REFUSED.labels(reason).inc(refused)
        # One line per REFUSAL_LOG_EVERY_S at most, with the count since the last one: while
        # NATS is down every posting is refused, and the metric counts each of them.
        self._refused_unlogged += refused
        if now - self._refusal_logged_at >= REFUSAL_LOG_EVERY_S:
            log.warning("postings_refused", reason=reason, transactions=self._refused_unlogged, outbox_lag=backlog.lag)
            self._refusal_logged_at = now
            self._refused_unlogged = 0
        async with self._space:
            self._space.notify_all()

    def _take(self, room: int | None = None) -> tuple[list[_Unit], int]:
        """Queued units, oldest first, up to ``room`` items (a unit is never split).

        ``room`` None starts a batch: a fenced unit at the head is then taken alone. Otherwise
        (adding to a batch) and after the first unit, a fenced unit ends the taking.
        """
        starting = room is None
        room = self.max_batch if room is None else room
        units: list[_Unit] = []
        count = 0
        while self._queue and count + len(self._queue[0].items) <= room:
            if self._queue[0].fence is not None and (units or not starting):
                break
            unit = self._queue.popleft()
            units.append(unit)
            count += len(unit.items)
            if unit.fence is not None:
                break
        return units, count

    async def _write(self, units: list[_Unit], writer: _Writer) -> None:
        """Write a batch on ``writer``'s connection, setting its ``last_script`` as it sends
        its last script; while tracing is on, under a ``batch`` span, child of the first traced
        caller's RPC span with links to the others' (each caller's trace shows it)."""
        traced = [unit.trace for unit in units if unit.trace is not None]
        if not traced:
            await self._write_units(units, writer)
            return
        span = tracing.start_span(
            "socai.ledger",
            "batch",
            parent=traced[0],
            attributes={"socai.batch_units": len(units), "socai.batch_items": sum(len(u.items) for u in units)},
            span_links=tracing.links(traced[1:], besides=traced[0]),
        )
        with tracing.current_span(span), span:
            await self._write_units(units, writer)

    async def _write_units(self, units: list[_Unit], writer: _Writer) -> None:
        items = [item for unit in units for item in unit.items]
        fence = units[0].fence
        errors.check(
            len(units) == 1 or all(unit.fence is None for unit in units), "a fenced unit is a batch of its own"
        )
        started = time.perf_counter()
        try:
            # Only a whole batch lets the next one form early: items isolated one by one go
            # in before the next batch (``_write_one_by_one``).
            result = await self._write_with_retries(writer, items, fence, writer.last_script.set)
        except errors.PreconditionFailed as exc:  # FENCED: rolled back, nothing written
            FENCED.inc()
            log.info("fenced", scope=exc.details.get("scope"), partition=exc.details.get("partition"))
            self._fail(units, exc)
            return
        except errors.Unavailable as exc:  # no connection could be made: nothing was sent
            log.warning("batch_not_written", items=len(items), error=exc.message)
            self._fail(units, exc)
            return
        except psycopg.OperationalError as exc:
            await writer.drop()
            log.warning("batch_outcome_unknown", items=len(items), error=str(exc))
            self._fail(
                units,
                errors.Unavailable(
                    "DATABASE_UNAVAILABLE",
                    "the ledger lost its database connection; the outcome is unknown: retry with the same idempotency key",
                ),
            )
            return
        except psycopg.Error as exc:
            if len(items) <= 1:  # nothing to isolate (a claim has no items)
                raise
            log.error("batch_isolating_items", items=len(items), error=str(exc))
            await self._write_one_by_one(units, writer)
            return
        BATCH_ITEMS.observe(len(items))
        BATCH_SECONDS.observe(time.perf_counter() - started, tracing.exemplar())
        self._deliver(units, result.outcomes)
        self._committed(result)

    def _committed(self, result: journal_write.BatchResult) -> None:
        if self._marks is not None and (span_context := tracing.current()) is not None:
            applied = [
                o.transaction.journal_seq for o in result.outcomes if o.status is PostStatus.APPLIED and o.transaction
            ]
            self._marks.mark(applied, span_context)
        if self._backlog is not None:
            self._backlog.observe(result.head_seq, result.published_seq)
        if result.last_seq and self._on_commit is not None:
            self._on_commit(result.last_seq)

    async def _write_with_retries(
        self,
        writer: _Writer,
        items: list[PreparedTransaction],
        fence: domain.Fence | None = None,
        last_script: Callable[[], None] | None = None,
    ) -> journal_write.BatchResult:
        for attempt in range(1, self.retries + 1):
            conn = await writer.connection(self._url)
            try:
                return await journal_write.write_batch(conn, items, self._new_id, fence, last_script)
            except RETRYABLE as exc:
                if attempt == self.retries:
                    raise
                reason = type(exc).__name__
                BATCH_RETRIES.labels(reason).inc()
                log.warning("batch_retry", attempt=attempt, reason=reason, items=len(items))
                await asyncio.sleep(min(0.002 * 2**attempt, 0.25) * (0.5 + random.random()))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _write_one_by_one(self, units: list[_Unit], writer: _Writer) -> None:
        """Each item in its own database transaction: a failing item fails alone.

        A fenced unit's items are each written under its fence; once the fence is refused,
        it and every later item of the unit are answered with the refusal (module docstring).
        """
        for unit in units:
            outcomes: list[PostOutcome] = []
            fenced: errors.PreconditionFailed | None = None
            for item in unit.items:
                if fenced is not None:
                    outcomes.append(PostOutcome(PostStatus.REJECTED, error=fenced))
                    continue
                try:
                    result = await self._write_with_retries(writer, [item], unit.fence)
                except errors.PreconditionFailed as exc:
                    FENCED.inc()
                    fenced = exc
                    outcomes.append(PostOutcome(PostStatus.REJECTED, error=exc))
                    continue
                except errors.Unavailable as exc:
                    outcomes.append(PostOutcome(PostStatus.REJECTED, error=exc))
                    continue
                except psycopg.OperationalError:
                    await writer.drop()
                    outcomes.append(
                        _failed("DATABASE_UNAVAILABLE", "database connection lost; retry with the same key")
                    )
                    continue
                except psycopg.Error as exc:
                    log.error("posting_failed", key=item.idempotency_key, exc_info=exc)
                    outcomes.append(_failed("INTERNAL", "internal error"))
                    continue
                outcomes.extend(result.outcomes)
                self._committed(result)
            self._deliver([unit], outcomes)

    def _deliver(self, units: list[_Unit], outcomes: list[PostOutcome]) -> None:
        errors.check(len(outcomes) == sum(len(u.items) for u in units), "one outcome per item")
        position = 0
        for unit in units:
            mine = outcomes[position : position + len(unit.items)]
            position += len(unit.items)
            if not unit.future.done():
                unit.future.set_result(mine)
        # One counter update per status and batch, not one per posting.
        counts = Counter_(outcome.status for outcome in outcomes)
        for status, count in counts.items():
            _POSTINGS_BY_STATUS[status].inc(count)

    def _fail(self, units: list[_Unit], exc: BaseException) -> None:
        for unit in units:
            if not unit.future.done():
                unit.future.set_exception(exc)


class _Writer:
    """One writer connection: a batch in flight holds it (``WriteBatcher._free_writer``)."""

    def __init__(self) -> None:
        self._conn: db.AConn | None = None
        # Set as the batch holding this connection sends its last script (and when it ends):
        # the writer loop then forms the next batch.
        self.last_script = asyncio.Event()

    async def connection(self, url: str) -> db.AConn:
        """The connection, a new one when there is none or it stopped working.

        Raises Unavailable("DATABASE_UNAVAILABLE") when PostgreSQL cannot be reached.
        """
        if self._conn is not None and not await db_pool.usable(self._conn):
            log.info("writer_connection_replaced")
            await self.drop()
        if self._conn is None:
            self._conn = await db.connect(url)
            # A statement stuck longer than this (a lock held by a stuck session) fails the batch
            # with UNAVAILABLE instead of blocking every caller forever.
            await self._conn.execute("set statement_timeout = '30s'")
            await self._conn.commit()
        return self._conn

    async def drop(self) -> None:
        if self._conn is not None:
            try:
                await self._conn.close()
            finally:
                self._conn = None


def _failed(reason: str, message: str) -> PostOutcome:
    error: errors.SocaiError = (
        errors.Unavailable(reason, message) if reason == "DATABASE_UNAVAILABLE" else errors.SocaiError(reason, message)
    )
    return PostOutcome(PostStatus.REJECTED, error=error)
