"""The settlement service's own records in PostgreSQL (schema ``socai_settlement``).

A settled hand is one ``settlements`` row (primary key ``hand_id``) plus its seats, written
in one transaction together with closing the hand's dead letter, if it had one. Writing a
hand that is already there changes nothing (``on conflict do nothing``): redelivery and
two settlement instances racing are harmless. Reads page newest first by the HandEnded
stream sequence.

Connection failures become ``Unavailable("DATABASE_UNAVAILABLE")`` so that callers retry
them instead of dead-lettering a hand for a database outage.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from socai import errors
from socai.rules.base import Shortfall, Transfer

SCHEMA: Final = "socai_settlement"
PAGE_SIZE_DEFAULT: Final = 50
PAGE_SIZE_MAX: Final = 500
DETAIL_MAX_CHARS: Final = 4000  # a limit on everything: a dead letter's detail text


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


def decode_token(token: str) -> tuple[int, str] | None:
    """The position a page token stands for; raises InvalidArgument("BAD_PAGE_TOKEN")."""
    if not token:
        return None
    try:
        seq_text, hand_id = base64.urlsafe_b64decode(token.encode()).decode().split(":", 1)
        return int(seq_text), hand_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token is not one this service issued") from exc


def page_size(requested: int) -> int:
    """The page size to use; raises InvalidArgument("BAD_PAGE_SIZE") below 0."""
    if requested < 0:
        raise errors.InvalidArgument("BAD_PAGE_SIZE", f"page_size must be 0..{PAGE_SIZE_MAX}")
    return min(requested or PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX)


class Store:
    def __init__(self, engine: AsyncEngine, schema: str = SCHEMA) -> None:
        self.engine = engine
        self.schema = schema

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self.engine.begin() as conn:
                yield conn
        except (OperationalError, InterfaceError) as exc:
            raise errors.Unavailable("DATABASE_UNAVAILABLE", f"PostgreSQL: {exc.orig or exc}") from exc
        except DBAPIError as exc:
            if exc.connection_invalidated:
                raise errors.Unavailable("DATABASE_UNAVAILABLE", f"PostgreSQL: {exc.orig or exc}") from exc
            raise

    def _t(self, name: str) -> str:
        return f'"{self.schema}".{name}'

    # --- writes -------------------------------------------------------------------------

    async def settled_among(self, hand_ids: Sequence[str]) -> set[str]:
        """The hands of ``hand_ids`` that are already settled."""
        if not hand_ids:
            return set()
        async with self._tx() as conn:
            rows = await conn.execute(
                text(f"select hand_id from {self._t('settlements')} where hand_id = any(:ids)"),
                {"ids": list(hand_ids)},
            )
            return {r[0] for r in rows}

    async def commit(self, records: Sequence[SettlementRecord], dead: Sequence[NewDeadLetter] = ()) -> set[str]:
        """Store settled hands and dead letters in one transaction; returns the hands this
        call settled (a hand already stored is left as it was). A settled hand's open
        dead letter is closed (``resolution = 'settled'``)."""
        async with self._tx() as conn:
            inserted: set[str] = set()
            if records:
                rows = await conn.execute(
                    text(
                        f"""insert into {self._t("settlements")}
                        (hand_id, table_id, game, stream_seq, fees_gold, pot_carry_gold, penalties, transfers,
                         shortfalls, ledger_transaction_id, idempotency_key)
                        select * from unnest(cast(:hand_id as text[]), cast(:table_id as text[]),
                            cast(:game as text[]), cast(:stream_seq as bigint[]), cast(:fees as bigint[]),
                            cast(:pot as bigint[]), cast(:penalties as jsonb[]), cast(:transfers as jsonb[]),
                            cast(:shortfalls as jsonb[]), cast(:tx as text[]), cast(:key as text[]))
                        on conflict (hand_id) do nothing
                        returning hand_id"""
                    ),
                    {
                        "hand_id": [r.hand_id for r in records],
                        "table_id": [r.table_id for r in records],
                        "game": [r.game for r in records],
                        "stream_seq": [r.stream_seq for r in records],
                        "fees": [r.fees_gold for r in records],
                        "pot": [r.pot_carry_gold for r in records],
                        "penalties": [json.dumps(r.penalties_gold, sort_keys=True) for r in records],
                        "transfers": [json.dumps([_transfer_json(t) for t in r.transfers]) for r in records],
                        "shortfalls": [json.dumps([_shortfall_json(s) for s in r.shortfalls]) for r in records],
                        "tx": [r.ledger_transaction_id for r in records],
                        "key": [r.idempotency_key for r in records],
                    },
                )
                inserted = {r[0] for r in rows}
                seats = [(r, s) for r in records if r.hand_id in inserted for s in r.seats]
                if seats:
                    await conn.execute(
                        text(
                            f"""insert into {self._t("settlement_seats")}
                            (hand_id, seat, player_id, account_id, net_gold, stream_seq)
                            select * from unnest(cast(:hand_id as text[]), cast(:seat as int[]),
                                cast(:player as text[]), cast(:account as text[]), cast(:net as bigint[]),
                                cast(:stream_seq as bigint[]))"""
                        ),
                        {
                            "hand_id": [r.hand_id for r, _ in seats],
                            "seat": [s.seat for _, s in seats],
                            "player": [s.player_id for _, s in seats],
                            "account": [s.account_id for _, s in seats],
                            "net": [s.net_gold for _, s in seats],
                            "stream_seq": [r.stream_seq for r, _ in seats],
                        },
                    )
                await conn.execute(
                    text(
                        f"""update {self._t("dead_letters")} set resolved_at = now(), resolution = 'settled'
                        where hand_id = any(:ids) and resolved_at is null"""
                    ),
                    {"ids": [r.hand_id for r in records]},
                )
            for d in dead:
                await self._upsert_dead_letter(conn, d)
            return inserted

    async def record_dead_letter(self, dead: NewDeadLetter) -> DeadLetter | None:
        """Add a dead letter, or count another failed attempt of an existing one (reopening
        it with the latest reason and detail). None when the hand is settled: a late
        failure (a redelivery racing a retry) never reopens a settled hand."""
        async with self._tx() as conn:
            return await self._upsert_dead_letter(conn, dead)

    async def _upsert_dead_letter(self, conn: AsyncConnection, d: NewDeadLetter) -> DeadLetter | None:
        row = (
            await conn.execute(
                text(
                    f"""insert into {self._t("dead_letters")} (hand_id, table_id, reason, detail, stream_seq)
                    select :hand_id, :table_id, :reason, :detail, :stream_seq
                    where not exists (select 1 from {self._t("settlements")} where hand_id = :hand_id)
                    on conflict (hand_id) do update set
                        reason = excluded.reason, detail = excluded.detail,
                        stream_seq = greatest(dead_letters.stream_seq, excluded.stream_seq),
                        table_id = case when excluded.table_id = '' then dead_letters.table_id
                                        else excluded.table_id end,
                        attempts = dead_letters.attempts + 1, last_failed_at = now(),
                        resolved_at = null, resolution = null
                    returning {_DEAD_COLUMNS}"""
                ),
                {
                    "hand_id": d.hand_id,
                    "table_id": d.table_id,
                    "reason": d.reason,
                    "detail": d.detail[:DETAIL_MAX_CHARS],
                    "stream_seq": d.stream_seq,
                },
            )
        ).one_or_none()
        return _dead(row) if row is not None else None

    # --- reads --------------------------------------------------------------------------

    async def get(self, hand_id: str) -> SettlementRecord | None:
        async with self._tx() as conn:
            row = (
                await conn.execute(
                    text(f"select {_SETTLEMENT_COLUMNS} from {self._t('settlements')} where hand_id = :h"),
                    {"h": hand_id},
                )
            ).one_or_none()
            if row is None:
                return None
            return (await self._with_seats(conn, [row]))[0]

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
        async with self._tx() as conn:
            rows = (
                await conn.execute(
                    text(f"select {columns} from {source} where {where} {position} order by {order_by} limit :size"),
                    params,
                )
            ).all()
            return await self._with_seats(conn, rows)

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
        async with self._tx() as conn:
            row = (
                await conn.execute(
                    text(f"select {_DEAD_COLUMNS} from {self._t('dead_letters')} where hand_id = :h"), {"h": hand_id}
                )
            ).one_or_none()
            return _dead(row) if row is not None else None

    async def list_dead_letters(self, size: int, after: tuple[int, str] | None) -> list[DeadLetter]:
        """Open dead letters, oldest first (by the HandEnded stream sequence)."""
        params: dict[str, Any] = {"size": size}
        position = ""
        if after is not None:
            position = "and (stream_seq, hand_id) > (:after_seq, :after_hand)"
            params.update(after_seq=after[0], after_hand=after[1])
        async with self._tx() as conn:
            rows = await conn.execute(
                text(
                    f"""select {_DEAD_COLUMNS} from {self._t("dead_letters")}
                    where resolved_at is null {position} order by stream_seq, hand_id limit :size"""
                ),
                params,
            )
            return [_dead(r) for r in rows]

    async def counts(self) -> tuple[int, int]:
        """(settled hands, open dead letters)."""
        async with self._tx() as conn:
            settled = (await conn.execute(text(f"select count(*) from {self._t('settlements')}"))).scalar_one()
            dead = (
                await conn.execute(text(f"select count(*) from {self._t('dead_letters')} where resolved_at is null"))
            ).scalar_one()
            return int(settled), int(dead)


_SETTLEMENT_COLUMNS: Final = (
    "hand_id, table_id, game, stream_seq, fees_gold, pot_carry_gold, penalties, transfers, shortfalls, "
    "ledger_transaction_id, idempotency_key, settled_at"
)
_DEAD_COLUMNS: Final = (
    "hand_id, table_id, reason, detail, stream_seq, attempts, first_failed_at, last_failed_at, resolved_at, resolution"
)


def _transfer_json(t: Transfer) -> list[Any]:
    return [t.from_account, t.to_account, t.amount_gold, t.reason]


def _shortfall_json(s: Shortfall) -> list[Any]:
    return [s.seat, s.owed_gold, s.paid_gold, s.reason]


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
