"""Holds: the hold writer behind Hold, FinalizeHold and ReleaseHold, and ListHolds.

A hold sets gold of an account (``house:bank``) aside for a hand in play (migration
``ledger_0005``; the decisions are ``domain.plan_holds``). All of a bank's holds are decided
against its one row, so like postings on a hot account they are batched: one writer per
ledger process coalesces concurrent hold calls into one database transaction, which locks
the calls' accounts (``SELECT … FOR UPDATE``, account-id order), reads their holds, decides
every call in arrival order against what the calls before it left, writes the holds that
changed (the holds' trigger moves each account's ``held_gold`` in the same statement) and
commits once; callers hear back after the commit. A second call for a hold already in the
batch waits for the next one, so each hold moves in one step (the database's guard checks
each step). The write batcher locks the same account row before it plans a batch touching
it, so holds and postings on the bank are serialized by that one row lock, across replicas
too: tables racing for the bank's last free gold are answered one after the other, each
against the balance and the holds the one before left, and no posting slips between a
hold's check and its write. A settlement's own release happens inside its batch
(``journal_write._RELEASE_HOLDS_SQL``).

Every call is idempotent (a raise to at least, a finalize to at most, a release): a caller
that lost the answer (UNAVAILABLE: the commit's outcome unknown) calls again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from datetime import UTC, datetime
from typing import Any, Final
from uuid import UUID

import psycopg
from prometheus_client import Counter, Gauge

from socai import errors
from socai.infra import db_pool
from socai.infra.logging import get_logger
from socai_ledger import domain
from socai_ledger.db import SCHEMA
from socai_ledger.domain import Hold

log = get_logger("socai.ledger.holds")

HOLD_CALLS = Counter(
    "socai_ledger_hold_calls_total", "Hold calls answered (outcome: done, or the refusal's reason)", ["call", "outcome"]
)
HOLDS_REFUSED = Counter(
    "socai_ledger_holds_refused_total", "Holds refused (BANKER_CAPACITY: bets the bank cannot cover)", ["reason"]
)

# The house bank's free capacity: set by every hold call from the figures it read under the
# account's lock, and every few seconds from the database (``App._watch_bank``: postings move
# the balance too, and another replica may have answered the hold calls).
BANK_BALANCE = Gauge("socai_ledger_bank_balance_gold", "house:bank's balance")
BANK_HELD = Gauge("socai_ledger_bank_held_gold", "Gold of house:bank held for hands in play")
BANK_FREE = Gauge("socai_ledger_bank_free_gold", "house:bank's free capacity: balance minus the gold held")
HOLDS_OPEN = Gauge("socai_ledger_holds_open", "Holds of house:bank not released (hands in play or not yet settled)")
HOLD_OLDEST_SECONDS = Gauge(
    "socai_ledger_hold_oldest_seconds", "Age of the oldest hold of house:bank not released (0: none)"
)

_HOLD_COLUMNS: Final = (
    "account_id, hand_id, amount_gold, status, created_at, updated_at, released_at, released_by, "
    "release_transaction_id, release_reason"
)


def observe_bank(balance_gold: int, held_gold: int) -> None:
    BANK_BALANCE.set(balance_gold)
    BANK_HELD.set(held_gold)
    BANK_FREE.set(balance_gold - held_gold)


def hold_of(row: tuple[Any, ...]) -> Hold:
    release_tx: UUID | None = row[8]
    return Hold(
        account_id=row[0],
        hand_id=row[1],
        amount_gold=row[2],
        status=row[3],
        created_at=row[4],
        updated_at=row[5],
        released_at=row[6],
        released_by=row[7] or "",
        release_transaction_id=str(release_tx) if release_tx is not None else "",
        release_reason=row[9] or "",
    )


class HoldResult:
    """A hold as a call left it, with its account's balance and held gold after the call."""

    __slots__ = ("balance_gold", "held_gold", "hold")

    def __init__(self, hold: Hold, balance_gold: int, held_gold: int) -> None:
        self.hold = hold
        self.balance_gold = balance_gold
        self.held_gold = held_gold

    @property
    def free_gold(self) -> int:
        return self.balance_gold - self.held_gold


# A limit on everything: calls waiting for the writer, and calls per database transaction.
HOLD_QUEUE_MAX: Final = 10_000
HOLD_BATCH_MAX: Final = 500

_LOCK_ACCOUNTS_SQL: Final = (
    f"select account_id, balance_gold, held_gold, clock_timestamp() from {SCHEMA}.accounts "
    f"where account_id = any(%s) order by account_id for update"
)
_HOLDS_SQL: Final = (
    f"select {_HOLD_COLUMNS} from {SCHEMA}.holds "
    f"where (account_id, hand_id) in (select * from unnest(%s::text[], %s::text[]))"
)
_INSERT_HOLDS_SQL: Final = (
    f"insert into {SCHEMA}.holds (account_id, hand_id, amount_gold, status, created_at, updated_at) "
    f"select * from unnest(%s::text[], %s::text[], %s::int8[], %s::text[], %s::timestamptz[], %s::timestamptz[])"
)
_UPDATE_HOLDS_SQL: Final = f"""
update {SCHEMA}.holds h
set amount_gold = r.amount_gold, status = r.status, updated_at = r.updated_at, released_at = r.released_at,
    released_by = r.released_by, release_reason = r.release_reason
from unnest(%s::text[], %s::text[], %s::int8[], %s::text[], %s::timestamptz[], %s::timestamptz[], %s::text[],
            %s::text[]) as r(account_id, hand_id, amount_gold, status, updated_at, released_at, released_by,
                             release_reason)
where h.account_id = r.account_id and h.hand_id = r.hand_id
"""
_CALL_NAMES: Final = {domain.HOLD: "hold", domain.FINALIZE: "finalize", domain.RELEASE: "release"}


class HoldWriter:
    """The one writer of holds in this process (see the module docstring)."""

    def __init__(self, pool: db_pool.Pool) -> None:
        self.pool = pool
        self._queue: asyncio.Queue[tuple[domain.HoldCall, asyncio.Future[HoldResult]]] = asyncio.Queue(HOLD_QUEUE_MAX)
        self._held_back: deque[tuple[domain.HoldCall, asyncio.Future[HoldResult]]] = deque()
        self._writing: list[tuple[domain.HoldCall, asyncio.Future[HoldResult]]] = []  # the batch in flight
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ledger-hold-writer")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        stopping = errors.Unavailable("STOPPING", "the ledger is stopping; call again")
        for _, future in self._writing:  # its commit's outcome unknown: calling again is harmless
            if not future.done():
                future.set_exception(stopping)
        while self._held_back:
            _, future = self._held_back.popleft()
            if not future.done():
                future.set_exception(stopping)
        while not self._queue.empty():
            _, future = self._queue.get_nowait()
            if not future.done():
                future.set_exception(stopping)

    async def submit(self, call: domain.HoldCall) -> HoldResult:
        """Queue ``call`` and wait for its answer (after its batch commits). Raises what the
        call's decision raises (BANKER_CAPACITY …), Unavailable for the database."""
        future: asyncio.Future[HoldResult] = asyncio.get_running_loop().create_future()
        await self._queue.put((call, future))
        return await future

    async def _run(self) -> None:
        while True:
            batch = self._writing = await self._take()
            try:
                await self._write(batch)
            except Exception as exc:  # the writer goes on; every caller of the batch hears why
                failure = db_pool.unavailable(exc) if isinstance(exc, psycopg.OperationalError) else exc
                if not isinstance(exc, errors.SocaiError | psycopg.OperationalError):
                    log.error("hold_batch_failed", calls=len(batch), error=str(exc)[:500], exc_info=exc)
                for _, future in batch:
                    if not future.done():
                        future.set_exception(failure)

    async def _take(self) -> list[tuple[domain.HoldCall, asyncio.Future[HoldResult]]]:
        """The next batch: calls held back first, then whatever is queued, at most one per
        hold; a second call for a hold waits for the next batch."""
        if not self._held_back:
            self._held_back.append(await self._queue.get())
        while not self._queue.empty() and len(self._held_back) < HOLD_QUEUE_MAX:
            self._held_back.append(self._queue.get_nowait())
        batch: list[tuple[domain.HoldCall, asyncio.Future[HoldResult]]] = []
        seen: set[tuple[str, str]] = set()
        later: deque[tuple[domain.HoldCall, asyncio.Future[HoldResult]]] = deque()
        while self._held_back and len(batch) < HOLD_BATCH_MAX:
            item = self._held_back.popleft()
            where = (item[0].account_id, item[0].hand_id)
            if where in seen:
                later.append(item)
            else:
                seen.add(where)
                batch.append(item)
        later.extend(self._held_back)
        self._held_back = later
        return batch

    async def _write(self, batch: list[tuple[domain.HoldCall, asyncio.Future[HoldResult]]]) -> None:
        calls = [call for call, _ in batch]
        account_ids = sorted({c.account_id for c in calls})
        async with self.pool.connection() as conn, conn.transaction():
            rows = await (await conn.execute(_LOCK_ACCOUNTS_SQL, (account_ids,))).fetchall()
            found = {r[0]: (int(r[1]), int(r[2])) for r in rows}
            now: datetime = rows[0][3] if rows else datetime.now(UTC)
            existing_rows = await (
                await conn.execute(_HOLDS_SQL, ([c.account_id for c in calls], [c.hand_id for c in calls]))
            ).fetchall()
            existing = {(h.account_id, h.hand_id): h for h in map(hold_of, existing_rows)}
            plan = domain.plan_holds(calls, found, existing, now)
            if plan.inserts:
                await conn.execute(_INSERT_HOLDS_SQL, _columns(plan.inserts, with_release=False))
            if plan.updates:
                await conn.execute(_UPDATE_HOLDS_SQL, _columns(plan.updates, with_release=True))
        for (call, future), answer in zip(batch, plan.answers, strict=True):
            name = _CALL_NAMES[call.kind]
            if answer.error is not None:
                HOLD_CALLS.labels(name, answer.error.code).inc()
                if call.kind == domain.HOLD:
                    HOLDS_REFUSED.labels(answer.error.code).inc()
                if not future.done():
                    future.set_exception(answer.error)
                continue
            errors.check(answer.hold is not None, "an answered hold call has its hold")
            assert answer.hold is not None
            HOLD_CALLS.labels(name, "done").inc()
            observe_bank(answer.balance_gold, answer.held_gold)
            if not future.done():
                future.set_result(HoldResult(answer.hold, answer.balance_gold, answer.held_gold))


def _columns(holds: list[Hold], *, with_release: bool) -> tuple[list[Any], ...]:
    if not with_release:
        return (
            [h.account_id for h in holds],
            [h.hand_id for h in holds],
            [h.amount_gold for h in holds],
            [h.status for h in holds],
            [h.created_at for h in holds],
            [h.updated_at for h in holds],
        )
    return (
        [h.account_id for h in holds],
        [h.hand_id for h in holds],
        [h.amount_gold for h in holds],
        [h.status for h in holds],
        [h.updated_at for h in holds],
        [h.released_at for h in holds],
        [h.released_by or None for h in holds],
        [h.release_reason or None for h in holds],
    )


@db_pool.retried_read
async def list_holds(
    pool: db_pool.Pool, account_id: str, *, include_released: bool, after_hand: str, limit: int
) -> tuple[list[Hold], bool]:
    """``account_id``'s holds by hand id after ``after_hand`` (not released only, unless
    ``include_released``): (up to ``limit``, whether more follow)."""
    where = "account_id = %s and hand_id > %s" + ("" if include_released else " and status <> 'released'")
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                f"select {_HOLD_COLUMNS} from {SCHEMA}.holds where {where} order by hand_id limit %s",
                (account_id, after_hand, limit + 1),
            )
        ).fetchall()
    return [hold_of(r) for r in rows[:limit]], len(rows) > limit


@db_pool.retried_read
async def bank_figures(pool: db_pool.Pool, account_id: str) -> tuple[int, int, int, datetime | None]:
    """(balance, held, holds not released, the oldest one's creation time) of ``account_id``:
    the bank's free capacity for the metrics."""
    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                f"select a.balance_gold, a.held_gold, h.open, h.oldest from {SCHEMA}.accounts a "
                f"cross join lateral (select count(*) as open, min(created_at) as oldest from {SCHEMA}.holds "
                f"where account_id = a.account_id and status <> 'released') h where a.account_id = %s",
                (account_id,),
            )
        ).fetchone()
    if row is None:
        return 0, 0, 0, None
    return int(row[0]), int(row[1]), int(row[2]), row[3]
