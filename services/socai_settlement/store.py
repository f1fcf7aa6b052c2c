"""The settlement service's own records in PostgreSQL (schema ``socai_settlement``).

A settled hand is one ``settlements`` row (primary key ``hand_id``) plus its seats, written
in one transaction together with closing the hand's dead letter, if it had one. Writing a
hand that is already there changes nothing (``on conflict do nothing``): redelivery and
two settlement instances racing are harmless. Reads page newest first by the HandEnded
stream sequence.

The batch path (``settled_among``, ``commit_rows``) runs on two connections of its own
(``_Lane``: one for reads, one for writes), autocommit, outside the SQLAlchemy pool: a
batch's rows go as one JSON parameter to one statement, which inserts the settlements and
their seats and closes their dead letters — one round trip, instead of a pool check-out
with its ping, BEGIN, three statements and COMMIT, and instead of binding a dozen arrays
element by element. A statement is atomic on its own; with dead letters in the batch the
lane runs the statements in one transaction.

Connection failures become ``Unavailable("DATABASE_UNAVAILABLE")`` so that callers retry
them instead of dead-lettering a hand for a database outage (and RPCs answer UNAVAILABLE).
Connections are checked before use: the SQLAlchemy pool pings each one it hands out
(``pool_pre_ping``), a lane checks its connection the way ``socai.infra.db_pool.usable``
does, so one that idled through a database restart is replaced instead of failing. A read
whose connection dies under it runs once more on a fresh one; a write does not (whether it
committed is unknown: the settler retries it, and storing a hand twice changes nothing).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NamedTuple, TypeVar

import psycopg
from psycopg.rows import namedtuple_row
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from socai import errors
from socai.infra import db_pool
from socai.infra.db import libpq_url
from socai.infra.grpc_errors import DATABASE_UNAVAILABLE, database_unavailable
from socai.infra.logging import get_logger
from socai.rules.base import Shortfall, Transfer

SCHEMA: Final = "socai_settlement"
PAGE_SIZE_DEFAULT: Final = 50
PAGE_SIZE_MAX: Final = 500
DETAIL_MAX_CHARS: Final = 4000  # a limit on everything: a dead letter's detail text
APPLICATION_NAME: Final = "socai-settlement"
CONNECT_TIMEOUT_S: Final = 5

log = get_logger("socai.settlement.store")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SeatNet:
    seat: int
    player_id: str
    account_id: str
    net_gold: int


@dataclass(frozen=True, slots=True)
class SettlementRecord:
    """What the service stores for a settled hand."""

    hand_id: str
    table_id: str
    game: str
    stream_seq: int
    seats: tuple[SeatNet, ...]
    transfers: tuple[Transfer, ...]
    fees_gold: int
    penalties_gold: dict[str, int]
    shortfalls: tuple[Shortfall, ...]
    pot_carry_gold: int
    ledger_transaction_id: str
    idempotency_key: str
    settled_at: datetime | None = None


class HandRow(NamedTuple):
    """A settled hand as the batch path writes it (plain values, JSON-ready)."""

    hand_id: str
    table_id: str
    game: str
    stream_seq: int
    fees_gold: int
    pot_carry_gold: int
    penalties_gold: Mapping[str, int]
    transfers: Sequence[tuple[str, str, int, str]]  # (from_account, to_account, amount_gold, reason)
    shortfalls: Sequence[tuple[int, int, int, str]]  # (seat, owed_gold, paid_gold, reason)
    ledger_transaction_id: str
    idempotency_key: str
    seats: Sequence[tuple[int, str, str, int]]  # (seat, player_id, account_id, net_gold)


def row_of_record(r: SettlementRecord) -> HandRow:
    return HandRow(
        r.hand_id,
        r.table_id,
        r.game,
        r.stream_seq,
        r.fees_gold,
        r.pot_carry_gold,
        r.penalties_gold,
        [(t.from_account, t.to_account, t.amount_gold, t.reason) for t in r.transfers],
        [(f.seat, f.owed_gold, f.paid_gold, f.reason) for f in r.shortfalls],
        r.ledger_transaction_id,
        r.idempotency_key,
        [(s.seat, s.player_id, s.account_id, s.net_gold) for s in r.seats],
    )


@dataclass(frozen=True, slots=True)
class DeadLetter:
    hand_id: str
    table_id: str
    reason: str
    detail: str
    stream_seq: int
    attempts: int
    first_failed_at: datetime
    last_failed_at: datetime
    resolved_at: datetime | None = None
    resolution: str | None = None


@dataclass(frozen=True, slots=True)
class NewDeadLetter:
    """A failure to record: ``upsert`` adds it or counts another attempt."""

    hand_id: str
    table_id: str
    reason: str
    detail: str
    stream_seq: int


def encode_token(stream_seq: int, hand_id: str) -> str:
    return base64.urlsafe_b64encode(f"{stream_seq}:{hand_id}".encode()).decode()


# A token holds a stream sequence (an int64) and a hand id (at most 64 characters): anything
# longer was not issued here and is refused before it is decoded.
PAGE_TOKEN_MAX_CHARS: Final = 256
_TOKEN_HAND_MAX_CHARS: Final = 200
_INT64_MAX: Final = 2**63 - 1


def decode_token(token: str) -> tuple[int, str] | None:
    """The position a page token stands for; raises InvalidArgument("BAD_PAGE_TOKEN").

    Strict, because the fields reach SQL as they are: the urlsafe alphabet only, a
    sequence of at most 19 ASCII digits that fits int64 (a 5,000-digit one overflowed
    bigint), a printable hand id (PostgreSQL refuses a NUL in text).
    """
    if not token:
        return None
    bad = errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token is not one this service issued")
    if len(token) > PAGE_TOKEN_MAX_CHARS:
        raise bad
    try:
        seq_text, hand_id = base64.b64decode(token, altchars=b"-_", validate=True).decode().split(":", 1)
    except (ValueError, UnicodeDecodeError) as exc:  # binascii.Error is a ValueError
        raise bad from exc
    if not (0 < len(seq_text) <= 19 and seq_text.isascii() and seq_text.isdigit()) or int(seq_text) > _INT64_MAX:
        raise bad
    if not hand_id or len(hand_id) > _TOKEN_HAND_MAX_CHARS or not hand_id.isprintable():
        raise bad
    return int(seq_text), hand_id


def page_size(requested: int) -> int:
    """The page size to use; raises InvalidArgument("BAD_PAGE_SIZE") below 0."""
    if requested < 0:
        raise errors.InvalidArgument("BAD_PAGE_SIZE", f"page_size must be 0..{PAGE_SIZE_MAX}")
    return min(requested or PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX)


class Store:
    def __init__(self, engine: AsyncEngine, schema: str = SCHEMA) -> None:
        self.engine = engine
        self.schema = schema
        conninfo = libpq_url(engine.url.render_as_string(hide_password=False))
        self._reads = _Lane(conninfo)
        self._writes = _Lane(conninfo)
        t = self._t
        self._settled_among_sql = f"select hand_id from {t('settlements')} where hand_id = any(%s)"
        # One statement: the batch's rows as a JSON array of HandRow arrays; seats only for
        # the hands this statement inserted (a hand already stored is left as it was).
        self._commit_sql = f"""
            with batch as (
                select r->>0 as hand_id, r->>1 as table_id, r->>2 as game, (r->>3)::bigint as stream_seq,
                    (r->>4)::bigint as fees_gold, (r->>5)::bigint as pot_carry_gold, r->6 as penalties,
                    r->7 as transfers, r->8 as shortfalls, r->>9 as ledger_transaction_id,
                    r->>10 as idempotency_key, r->11 as seats
                from jsonb_array_elements(%s::jsonb) as r
            ), inserted as (
                insert into {t("settlements")}
                    (hand_id, table_id, game, stream_seq, fees_gold, pot_carry_gold, penalties, transfers,
                     shortfalls, ledger_transaction_id, idempotency_key)
                select hand_id, table_id, game, stream_seq, fees_gold, pot_carry_gold, penalties, transfers,
                    shortfalls, ledger_transaction_id, idempotency_key
                from batch
                on conflict (hand_id) do nothing
                returning hand_id
            ), seats as (
                insert into {t("settlement_seats")} (hand_id, seat, player_id, account_id, net_gold, stream_seq)
                select b.hand_id, (s->>0)::int, s->>1, s->>2, (s->>3)::bigint, b.stream_seq
                from batch b join inserted i on i.hand_id = b.hand_id, jsonb_array_elements(b.seats) as s
            ), resolved as (
                update {t("dead_letters")} set resolved_at = now(), resolution = 'settled'
                where hand_id in (select hand_id from batch) and resolved_at is null
            )
            select hand_id from inserted"""
        # A failure to record: a new dead letter, or another attempt of an existing one
        # (reopened with the latest reason and detail); nothing when the hand is settled (a
        # late failure, e.g. a redelivery racing a retry, never reopens a settled hand).
        self._dead_letter_sql = f"""
            insert into {t("dead_letters")} (hand_id, table_id, reason, detail, stream_seq)
            select %(hand_id)s, %(table_id)s, %(reason)s, %(detail)s, %(stream_seq)s
            where not exists (select 1 from {t("settlements")} where hand_id = %(hand_id)s)
            on conflict (hand_id) do update set
                reason = excluded.reason, detail = excluded.detail,
                stream_seq = greatest(dead_letters.stream_seq, excluded.stream_seq),
                table_id = case when excluded.table_id = '' then dead_letters.table_id
                                else excluded.table_id end,
                attempts = dead_letters.attempts + 1, last_failed_at = now(),
                resolved_at = null, resolution = null
            returning {_DEAD_COLUMNS}"""

    async def close(self) -> None:
        await asyncio.gather(self._reads.close(), self._writes.close())

    async def _read(self, query: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """``query`` in one transaction; once more on a fresh connection when its connection
        died under it (reads only).

        Raises Unavailable("DATABASE_UNAVAILABLE") when PostgreSQL cannot be reached.
        """
        for attempt in (1, 2):
            try:
                async with self.engine.begin() as conn:
                    return await query(conn)
            except (DBAPIError, PoolTimeout) as exc:
                mapped = database_unavailable(exc)
                if mapped is None:
                    raise
                if attempt == 1 and isinstance(exc, DBAPIError) and exc.connection_invalidated:
                    log.info("read_retried", error=mapped.message)
                    continue
                raise mapped from exc
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _t(self, name: str) -> str:
        return f'"{self.schema}".{name}'

    # --- writes -------------------------------------------------------------------------

    async def settled_among(self, hand_ids: Sequence[str]) -> set[str]:
        """The hands of ``hand_ids`` that are already settled."""
        if not hand_ids:
            return set()
        (rows,) = await self._reads.run([(self._settled_among_sql, (list(hand_ids),))], read=True)
        return {r[0] for r in rows}

    async def commit(self, records: Sequence[SettlementRecord], dead: Sequence[NewDeadLetter] = ()) -> set[str]:
        """``commit_rows`` for records (the retry path)."""
        return await self.commit_rows([row_of_record(r) for r in records], dead)

    async def commit_rows(self, rows: Sequence[HandRow], dead: Sequence[NewDeadLetter] = ()) -> set[str]:
        """Store settled hands and dead letters in one transaction; returns the hands this
        call settled (a hand already stored is left as it was). A settled hand's open
        dead letter is closed (``resolution = 'settled'``)."""
        if not rows and not dead:
            return set()
        statements: list[tuple[str, Any]] = []
        if rows:
            statements.append((self._commit_sql, (json.dumps(rows),)))
        statements += [(self._dead_letter_sql, _dead_letter_params(d)) for d in dead]
        results = await self._writes.run(statements)
        return {r[0] for r in results[0]} if rows else set()

    async def record_dead_letter(self, dead: NewDeadLetter) -> DeadLetter | None:
        """Add a dead letter, or count another failed attempt of an existing one (reopening
        it with the latest reason and detail). None when the hand is settled: a late
        failure (a redelivery racing a retry) never reopens a settled hand."""
        (rows,) = await self._writes.run([(self._dead_letter_sql, _dead_letter_params(dead))])
        return _dead(rows[0]) if rows else None

    # --- reads --------------------------------------------------------------------------

    async def get(self, hand_id: str) -> SettlementRecord | None:
        async def query(conn: AsyncConnection) -> SettlementRecord | None:
            row = (
                await conn.execute(
                    text(f"select {_SETTLEMENT_COLUMNS} from {self._t('settlements')} where hand_id = :h"),
                    {"h": hand_id},
                )
            ).one_or_none()
            if row is None:
                return None
            return (await self._with_seats(conn, [row]))[0]

        return await self._read(query)

    async def list_by_table(self, table_id: str, size: int, after: tuple[int, str] | None) -> list[SettlementRecord]:
        """Up to ``size`` settlements of a table, newest first, after the ``after`` position."""
        return await self._list("s.table_id = :key", table_id, size, after, join_seats=False)

    async def list_by_player(self, player_id: str, size: int, after: tuple[int, str] | None) -> list[SettlementRecord]:
        """Up to ``size`` settlements a player took part in, newest first."""
        return await self._list("p.player_id = :key", player_id, size, after, join_seats=True)

    async def _list(
        self, where: str, key: str, size: int, after: tuple[int, str] | None, *, join_seats: bool
    ) -> list[SettlementRecord]:
        params: dict[str, Any] = {"key": key, "size": size}
        order_by = "s.stream_seq desc, s.hand_id desc"
        position = ""
        if after is not None:
            position = "and (s.stream_seq, s.hand_id) < (:after_seq, :after_hand)"
            params.update(after_seq=after[0], after_hand=after[1])
        source = self._t("settlements") + " s"
        if join_seats:
            # Through the seats index: (player_id, stream_seq desc, hand_id).
            source = f"{self._t('settlement_seats')} p join {self._t('settlements')} s on s.hand_id = p.hand_id"
            order_by = "p.stream_seq desc, p.hand_id desc"
            if after is not None:
                position = "and (p.stream_seq, p.hand_id) < (:after_seq, :after_hand)"
        columns = ", ".join(f"s.{c.strip()}" for c in _SETTLEMENT_COLUMNS.split(","))

        async def query(conn: AsyncConnection) -> list[SettlementRecord]:
            rows = (
                await conn.execute(
                    text(f"select {columns} from {source} where {where} {position} order by {order_by} limit :size"),
                    params,
                )
            ).all()
            return await self._with_seats(conn, rows)

        return await self._read(query)

    async def _with_seats(self, conn: AsyncConnection, rows: Sequence[Any]) -> list[SettlementRecord]:
        if not rows:
            return []
        seat_rows = await conn.execute(
            text(
                f"""select hand_id, seat, player_id, account_id, net_gold from {self._t("settlement_seats")}
                where hand_id = any(:ids) order by hand_id, seat"""
            ),
            {"ids": [r.hand_id for r in rows]},
        )
        seats: dict[str, list[SeatNet]] = {}
        for s in seat_rows:
            seats.setdefault(s.hand_id, []).append(SeatNet(s.seat, s.player_id, s.account_id, s.net_gold))
        return [_record(r, tuple(seats.get(r.hand_id, ()))) for r in rows]

    async def get_dead_letter(self, hand_id: str) -> DeadLetter | None:
        async def query(conn: AsyncConnection) -> DeadLetter | None:
            row = (
                await conn.execute(
                    text(f"select {_DEAD_COLUMNS} from {self._t('dead_letters')} where hand_id = :h"), {"h": hand_id}
                )
            ).one_or_none()
            return _dead(row) if row is not None else None

        return await self._read(query)

    async def list_dead_letters(self, size: int, after: tuple[int, str] | None) -> list[DeadLetter]:
        """Open dead letters, oldest first (by the HandEnded stream sequence)."""
        params: dict[str, Any] = {"size": size}
        position = ""
        if after is not None:
            position = "and (stream_seq, hand_id) > (:after_seq, :after_hand)"
            params.update(after_seq=after[0], after_hand=after[1])

        async def query(conn: AsyncConnection) -> list[DeadLetter]:
            rows = await conn.execute(
                text(
                    f"""select {_DEAD_COLUMNS} from {self._t("dead_letters")}
                    where resolved_at is null {position} order by stream_seq, hand_id limit :size"""
                ),
                params,
            )
            return [_dead(r) for r in rows]

        return await self._read(query)

    async def counts(self) -> tuple[int, int]:
        """(settled hands, open dead letters)."""

        async def query(conn: AsyncConnection) -> tuple[int, int]:
            settled = (await conn.execute(text(f"select count(*) from {self._t('settlements')}"))).scalar_one()
            dead = (
                await conn.execute(text(f"select count(*) from {self._t('dead_letters')} where resolved_at is null"))
            ).scalar_one()
            return int(settled), int(dead)

        return await self._read(query)


_SETTLEMENT_COLUMNS: Final = (
    "hand_id, table_id, game, stream_seq, fees_gold, pot_carry_gold, penalties, transfers, shortfalls, "
    "ledger_transaction_id, idempotency_key, settled_at"
)
_DEAD_COLUMNS: Final = (
    "hand_id, table_id, reason, detail, stream_seq, attempts, first_failed_at, last_failed_at, resolved_at, resolution"
)


def _dead_letter_params(d: NewDeadLetter) -> dict[str, Any]:
    return {
        "hand_id": d.hand_id,
        "table_id": d.table_id,
        "reason": d.reason,
        "detail": d.detail[:DETAIL_MAX_CHARS],
        "stream_seq": d.stream_seq,
    }


class _Lane:
    """One PostgreSQL connection of the batch path: autocommit, opened on first use and
    again after a failure (which is ``Unavailable``, so callers wait and retry), checked
    before each use (``db_pool.usable``: a connection that idled through a database restart
    is replaced before a statement is sent on it). Its statements run one at a time;
    several given together run in one transaction."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def run(self, statements: Sequence[tuple[str, Any]], *, read: bool = False) -> list[list[Any]]:
        """The rows of each statement (an empty list for a statement that returns none).
        ``read``: the statements change nothing, so they run once more when the connection
        dies under them.

        Raises Unavailable("DATABASE_UNAVAILABLE") when PostgreSQL cannot be reached and
        ``db_pool.ConnectionLost`` when the connection died under a write.
        """
        async with self._lock:
            for attempt in (1, 2):
                conn = await self._connection()
                try:
                    if len(statements) == 1:
                        return [await _execute(conn, *statements[0])]
                    async with conn.transaction():
                        return [await _execute(conn, query, params) for query, params in statements]
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    lost = db_pool.lost(conn)
                    await self.close()
                    if lost and read and attempt == 1:
                        log.info("read_retried", error=type(exc).__name__)
                        continue
                    # The driver's words stay in the message: the settler logs it, and no
                    # RPC caller sees it (the batch path's failures are retried, not returned).
                    error_class = db_pool.ConnectionLost if lost else errors.Unavailable
                    raise error_class(DATABASE_UNAVAILABLE, f"PostgreSQL: {exc}") from exc
            raise AssertionError("unreachable: the second attempt returns or raises")

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        conn = self._conn
        if conn is not None and not await db_pool.usable(conn):
            await self.close()
            conn = None
        if conn is None:
            try:
                conn = self._conn = await psycopg.AsyncConnection.connect(
                    self.conninfo,
                    autocommit=True,
                    application_name=APPLICATION_NAME,
                    connect_timeout=CONNECT_TIMEOUT_S,
                )
            except psycopg.Error as exc:
                raise errors.Unavailable(DATABASE_UNAVAILABLE, f"PostgreSQL: {exc}") from exc
        return conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):
                await conn.close()


async def _execute(conn: psycopg.AsyncConnection[Any], query: str, params: Any) -> list[Any]:
    async with conn.cursor(row_factory=namedtuple_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall() if cur.description is not None else []


def _record(row: Any, seats: tuple[SeatNet, ...]) -> SettlementRecord:
    return SettlementRecord(
        hand_id=row.hand_id,
        table_id=row.table_id,
        game=row.game,
        stream_seq=int(row.stream_seq),
        seats=seats,
        transfers=tuple(Transfer(a, b, int(amount), reason) for a, b, amount, reason in row.transfers),
        fees_gold=int(row.fees_gold),
        penalties_gold={k: int(v) for k, v in row.penalties.items()},
        shortfalls=tuple(Shortfall(int(s), int(o), int(p), r) for s, o, p, r in row.shortfalls),
        pot_carry_gold=int(row.pot_carry_gold),
        ledger_transaction_id=row.ledger_transaction_id,
        idempotency_key=row.idempotency_key,
        settled_at=row.settled_at,
    )


def _dead(row: Any) -> DeadLetter:
    return DeadLetter(
        hand_id=row.hand_id,
        table_id=row.table_id,
        reason=row.reason,
        detail=row.detail,
        stream_seq=int(row.stream_seq),
        attempts=int(row.attempts),
        first_failed_at=row.first_failed_at,
        last_failed_at=row.last_failed_at,
        resolved_at=row.resolved_at,
        resolution=row.resolution,
    )
