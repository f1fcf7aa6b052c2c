"""Holds: the statements behind Hold, FinalizeHold, ReleaseHold and ListHolds.

A hold sets gold of an account (``house:bank``) aside for a hand in play (migration
``ledger_0005``; the decisions are ``domain.raise_hold`` / ``finalize_hold`` /
``release_hold``). Each call is one database transaction on the service's pool that locks
the account's row first (``SELECT … FOR UPDATE``), then reads and writes the hand's hold and
the account's ``held_gold``. The write batcher locks the same row before it plans a batch
touching the account, so holds and postings on it are serialized by that one row lock: many
tables racing for the bank's last free gold are answered one after the other, each against
the balance and the holds the one before left, and no posting slips between a hold's check
and its write. The settlement's own release happens inside the batch
(``journal_write._RELEASE_HOLDS_SQL``).

Every call is idempotent (a raise to at least, a finalize to at most, a release): a caller
that lost the answer calls again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final
from uuid import UUID

from prometheus_client import Counter, Gauge

from socai import errors
from socai.infra import db_pool
from socai_ledger import domain
from socai_ledger.db import SCHEMA, AConn
from socai_ledger.domain import Hold, HoldChange

HOLD_CALLS = Counter(
    "socai_ledger_hold_calls_total", "Hold calls by what they did", ["call", "outcome"]
)  # outcome: raised, unchanged, lowered, released, refused reason
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
_LOCK_ACCOUNT_SQL: Final = f"select balance_gold, held_gold from {SCHEMA}.accounts where account_id = %s for update"
_HOLD_SQL: Final = f"select {_HOLD_COLUMNS} from {SCHEMA}.holds where account_id = %s and hand_id = %s"


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


async def _locked(conn: AConn, account_id: str, hand_id: str) -> tuple[int, int, Hold | None]:
    """Lock the account's row; its (balance, held) and the hand's hold, if any."""
    row = await (await conn.execute(_LOCK_ACCOUNT_SQL, (account_id,))).fetchone()
    if row is None:
        raise errors.NotFound("ACCOUNT_NOT_FOUND", f"account {account_id} does not exist", account_id=account_id)
    found = await (await conn.execute(_HOLD_SQL, (account_id, hand_id))).fetchone()
    return int(row[0]), int(row[1]), hold_of(found) if found is not None else None


async def _write(
    conn: AConn,
    account_id: str,
    hand_id: str,
    current: Hold | None,
    change: HoldChange,
    released_by: str = "",
    reason: str = "",
) -> Hold:
    """Write ``change`` (the hold's new amount and status, and the account's held_gold)."""
    if current is None:
        row = await (
            await conn.execute(
                f"insert into {SCHEMA}.holds (account_id, hand_id, amount_gold, status, created_at, updated_at) "
                f"values (%s, %s, %s, %s, clock_timestamp(), clock_timestamp()) returning {_HOLD_COLUMNS}",
                (account_id, hand_id, change.amount_gold, change.status),
            )
        ).fetchone()
    else:
        released = change.status == domain.HOLD_RELEASED
        row = await (
            await conn.execute(
                f"update {SCHEMA}.holds set amount_gold = %s, status = %s, updated_at = clock_timestamp(), "
                f"released_at = case when %s then clock_timestamp() end, released_by = %s, release_reason = %s "
                f"where account_id = %s and hand_id = %s returning {_HOLD_COLUMNS}",
                (
                    change.amount_gold,
                    change.status,
                    released,
                    released_by or None,
                    reason or None,
                    account_id,
                    hand_id,
                ),
            )
        ).fetchone()
    if change.held_delta:
        await conn.execute(
            f"update {SCHEMA}.accounts set held_gold = held_gold + %s where account_id = %s",
            (change.held_delta, account_id),
        )
    errors.check(row is not None, f"the hold of {hand_id} on {account_id} was written")
    assert row is not None
    return hold_of(row)


def _outcome(current: Hold | None, change: HoldChange) -> str:
    if change.status == domain.HOLD_RELEASED:
        return "unchanged" if change.held_delta == 0 else "released"
    if change.held_delta > 0:
        return "raised"
    if change.held_delta < 0 or (current is not None and current.status != change.status):
        return "lowered"
    return "unchanged"


async def raise_hold(pool: db_pool.Pool, account_id: str, hand_id: str, amount_gold: int) -> HoldResult:
    """Hold at least ``amount_gold`` of ``account_id`` for ``hand_id`` (``domain.raise_hold``).

    Raises PreconditionFailed("BANKER_CAPACITY") when the account's free gold cannot cover
    the increase (nothing written), HOLD_RELEASED, HOLD_FINAL; NotFound("ACCOUNT_NOT_FOUND").
    """
    async with pool.connection() as conn, conn.transaction():
        balance, held, current = await _locked(conn, account_id, hand_id)
        try:
            change = domain.raise_hold(current, account_id, balance, held, amount_gold)
        except errors.SocaiError as exc:
            HOLD_CALLS.labels("hold", exc.code).inc()
            HOLDS_REFUSED.labels(exc.code).inc()
            raise
        if current is not None and change.held_delta == 0:
            HOLD_CALLS.labels("hold", "unchanged").inc()
            return HoldResult(current, balance, held)
        hold = await _write(conn, account_id, hand_id, current, change)
    HOLD_CALLS.labels("hold", _outcome(current, change)).inc()
    observe_bank(balance, held + change.held_delta)
    return HoldResult(hold, balance, held + change.held_delta)


async def finalize_hold(pool: db_pool.Pool, account_id: str, hand_id: str, amount_gold: int) -> HoldResult:
    """The hand's outcome is known: its hold becomes at most ``amount_gold``, and 0 releases
    it (``domain.finalize_hold``). Raises NotFound("HOLD_NOT_FOUND" / "ACCOUNT_NOT_FOUND")."""
    async with pool.connection() as conn, conn.transaction():
        balance, held, current = await _locked(conn, account_id, hand_id)
        change = domain.finalize_hold(current, hand_id, amount_gold)
        assert current is not None  # finalize_hold raised otherwise
        if change.status == current.status and change.amount_gold == current.amount_gold:
            HOLD_CALLS.labels("finalize", "unchanged").inc()
            return HoldResult(current, balance, held)
        released_by = domain.RELEASED_BY_OUTCOME if change.status == domain.HOLD_RELEASED else ""
        hold = await _write(conn, account_id, hand_id, current, change, released_by)
    HOLD_CALLS.labels("finalize", _outcome(current, change)).inc()
    observe_bank(balance, held + change.held_delta)
    return HoldResult(hold, balance, held + change.held_delta)


async def release_hold(pool: db_pool.Pool, account_id: str, hand_id: str, reason: str) -> HoldResult:
    """An operator releases the hold of a hand that will never settle (``domain.release_hold``).
    Raises NotFound("HOLD_NOT_FOUND" / "ACCOUNT_NOT_FOUND")."""
    async with pool.connection() as conn, conn.transaction():
        balance, held, current = await _locked(conn, account_id, hand_id)
        change = domain.release_hold(current, hand_id)
        assert current is not None  # release_hold raised otherwise
        if change.held_delta == 0:
            HOLD_CALLS.labels("release", "unchanged").inc()
            return HoldResult(current, balance, held)
        hold = await _write(conn, account_id, hand_id, current, change, domain.RELEASED_BY_OPERATOR, reason)
    HOLD_CALLS.labels("release", "released").inc()
    observe_bank(balance, held + change.held_delta)
    return HoldResult(hold, balance, held + change.held_delta)


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
