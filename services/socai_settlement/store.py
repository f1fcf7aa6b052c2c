"""The settlement service's own records in PostgreSQL (schema ``socai_settlement``).

A settled hand is one ``settlements`` row (primary key ``hand_id``) plus its seats, written
in one transaction together with closing the hand's dead letter, if it had one. Writing a
hand that is already there changes nothing (``on conflict do nothing``): redelivery and
two settlement instances racing are harmless. Reads page newest first by the HandEnded
stream sequence.

The batch path (``settled_among``, ``commit_rows``) is built for few round trips: a
batch's rows go as one JSON parameter to one statement, which inserts the settlements and
their seats and closes their dead letters — one round trip on an autocommit connection,
instead of BEGIN, three statements and COMMIT, and instead of binding a dozen arrays
element by element. A statement is atomic on its own; with dead letters in the batch the
statements run in one transaction.

Every statement runs on a ``socai.infra.db_pool.Pool`` (autocommit connections, as in the
ledger and table services). Connection failures become ``Unavailable("DATABASE_UNAVAILABLE")``
so that callers retry them instead of dead-lettering a hand for a database outage (and RPCs
answer UNAVAILABLE); a connection that idled through a database restart is replaced before
use. A read whose connection dies under it runs once more on a fresh one; a write does not
(whether it committed is unknown: the settler retries it, and storing a hand twice changes
nothing).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NamedTuple

from psycopg.rows import namedtuple_row

from socai import errors
from socai.infra import db_pool
from socai.infra.db import libpq_url
from socai.rules.base import Shortfall, Transfer

SCHEMA: Final = "socai_settlement"
PAGE_SIZE_DEFAULT: Final = 50
PAGE_SIZE_MAX: Final = 500
DETAIL_MAX_CHARS: Final = 4000  # a limit on everything: a dead letter's detail text
APPLICATION_NAME: Final = "socai-settlement"
CONNECT_TIMEOUT_S: Final = 5
# The batch path holds one or two connections at a time (settled_among while a chunk is
# replayed, commit_rows while the previous one is stored); the rest serve the RPCs' reads.
POOL_SIZE_MIN: Final = 2
POOL_SIZE_MAX: Final = 12


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


# A transfer as stored (JSON array): (from_account, to_account, amount_gold, reason), and its
# detail (what caused it) as a fifth item when it has one.
TransferRow = tuple[str, str, int, str] | tuple[str, str, int, str, str]


class HandRow(NamedTuple):
    """A settled hand as the batch path writes it (plain values, JSON-ready)."""

    hand_id: str
    table_id: str
    game: str
    stream_seq: int
    fees_gold: int
    pot_carry_gold: int
    penalties_gold: Mapping[str, int]
    transfers: Sequence[TransferRow]
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
        [
            (t.from_account, t.to_account, t.amount_gold, t.reason, t.detail)
            if t.detail
            else (t.from_account, t.to_account, t.amount_gold, t.reason)
            for t in r.transfers
        ],
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


def encode_token(stream_seq: int, hand_id: str, filters: str = "") -> str:
    """The token of the page after (``stream_seq``, ``hand_id``) of a list call with
    ``filters`` (``filters_of``): another call's filters refuse it."""
    bound = f":{filters}" if filters else ""
    return base64.urlsafe_b64encode(f"{stream_seq}:{hand_id}{bound}".encode()).decode()


# A token holds a stream sequence (an int64) and a hand id (at most 64 characters): anything
# longer was not issued here and is refused before it is decoded.
PAGE_TOKEN_MAX_CHARS: Final = 256
_TOKEN_HAND_MAX_CHARS: Final = 200
_INT64_MAX: Final = 2**63 - 1


def decode_token(token: str, filters: str = "") -> tuple[int, str] | None:
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
    hand_id, sep, bound = hand_id.partition(":")  # hand ids hold no colon; a token without one is read as issued
    if sep and bound != filters:
        raise errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token belongs to a call with other filters")
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
    def __init__(self, pool: db_pool.Pool, schema: str = SCHEMA) -> None:
        self.pool = pool
        self.schema = schema
        t = self._t
        self._settled_among_sql = f"select hand_id from {t('settlements')} where hand_id = any(%s)"
        self._settled_seqs_sql = f"select hand_id, stream_seq from {t('settlements')} where hand_id = any(%s)"
        self._dead_lettered_among_sql = f"select hand_id from {t('dead_letters')} where hand_id = any(%s)"
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

        # Attempts of a HandEnded that its delivery count gets wrong (migration 0004): each
        # (stream_seq, hand_id) of the JSON array gets ``given_back`` or ``recovered`` moved by
        # the delta; rows of settled hands go (they no longer matter).
        self._attempts_sql = f"""
            with batch as (
                select (r->>0)::bigint as stream_seq, r->>1 as hand_id
                from jsonb_array_elements(%(items)s::jsonb) as r
            ), pruned as (
                delete from {t("delivery_attempts")} a using {t("settlements")} s
                where s.hand_id = a.hand_id and a.stream_seq not in (select stream_seq from batch)
            )
            insert into {t("delivery_attempts")} as a (stream_seq, hand_id, given_back, recovered)
            select stream_seq, hand_id, greatest(%(given_back)s, 0), greatest(%(recovered)s, 0) from batch
            on conflict (stream_seq) do update set
                given_back = greatest(a.given_back + %(given_back)s, 0),
                recovered = greatest(a.recovered + %(recovered)s, 0),
                updated_at = now()
            returning stream_seq, given_back, recovered"""
        self._attempts_among_sql = (
            f"select stream_seq, given_back, recovered from {t('delivery_attempts')} where stream_seq = any(%s)"
        )

    @classmethod
    async def open(cls, url: str, schema: str = SCHEMA) -> Store:
        """A store on a new pool of connections to ``url``. The pool connects in the
        background: the service starts, and answers UNAVAILABLE, while PostgreSQL is down."""
        pool = db_pool.Pool(
            libpq_url(url),
            name=APPLICATION_NAME,
            min_size=POOL_SIZE_MIN,
            max_size=POOL_SIZE_MAX,
            kwargs={"autocommit": True, "application_name": APPLICATION_NAME, "connect_timeout": CONNECT_TIMEOUT_S},
        )
        await pool.open(wait=False)
        return cls(pool, schema)

    async def close(self) -> None:
        await self.pool.close()

    async def _run(self, statements: Sequence[tuple[str, Any]]) -> list[list[Any]]:
        """The rows of each statement (an empty list for a statement that returns none), on
        one connection; several statements run in one transaction.

        Raises Unavailable("DATABASE_UNAVAILABLE") when PostgreSQL cannot be reached and
        ``db_pool.ConnectionLost`` when the connection died under the statements.
        """
        async with self.pool.connection() as conn, conn.cursor(row_factory=namedtuple_row) as cur:
            if len(statements) == 1:
                return [await _execute(cur, *statements[0])]
            async with conn.transaction():
                return [await _execute(cur, query, params) for query, params in statements]

    async def _read(self, statements: Sequence[tuple[str, Any]]) -> list[list[Any]]:
        """``_run`` for statements that change nothing: once more on a fresh connection
        when the connection died under them."""
        return await db_pool.read(lambda: self._run(statements))

    def _t(self, name: str) -> str:
        return f'"{self.schema}".{name}'

    # --- writes -------------------------------------------------------------------------

    async def settled_among(self, hand_ids: Sequence[str]) -> set[str]:
        """The hands of ``hand_ids`` that are already settled."""
        if not hand_ids:
            return set()
        (rows,) = await self._read([(self._settled_among_sql, (list(hand_ids),))])
        return {r[0] for r in rows}

    async def settled_seqs(self, hand_ids: Sequence[str]) -> dict[str, int]:
        """The stream sequence of the HandEnded each settled hand of ``hand_ids`` was settled
        from (a HandEnded of the same hand at another sequence is a duplicate)."""
        if not hand_ids:
            return {}
        (rows,) = await self._read([(self._settled_seqs_sql, (list(hand_ids),))])
        return {str(r[0]): int(r[1]) for r in rows}

    async def dead_lettered_among(self, hand_ids: Sequence[str]) -> set[str]:
        """The hands of ``hand_ids`` that have a dead letter (open or resolved)."""
        if not hand_ids:
            return set()
        (rows,) = await self._read([(self._dead_lettered_among_sql, (list(hand_ids),))])
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
        results = await self._run(statements)
        return {r[0] for r in results[0]} if rows else set()

    async def record_dead_letter(self, dead: NewDeadLetter) -> DeadLetter | None:
        """Add a dead letter, or count another failed attempt of an existing one (reopening
        it with the latest reason and detail). None when the hand is settled: a late
        failure (a redelivery racing a retry) never reopens a settled hand."""
        (rows,) = await self._run([(self._dead_letter_sql, _dead_letter_params(dead))])
        return _dead(rows[0]) if rows else None

    async def count_attempts(
        self, items: Sequence[tuple[int, str]], *, given_back: int = 0, recovered: int = 0
    ) -> dict[int, tuple[int, int]]:
        """Move the ``given_back`` and ``recovered`` counts of these HandEnded messages
        ((stream_seq, hand_id) pairs) by the deltas given (never below 0); returns each
        one's counts after the change, ``{stream_seq: (given_back, recovered)}``. Settled
        hands' rows are pruned on the way."""
        if not items:
            return {}
        params = {"items": json.dumps(list(items)), "given_back": given_back, "recovered": recovered}
        (rows,) = await self._run([(self._attempts_sql, params)])
        return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

    async def attempts_among(self, stream_seqs: Sequence[int]) -> dict[int, tuple[int, int]]:
        """``{stream_seq: (given_back, recovered)}`` of those of these HandEnded messages
        that have a row (see ``count_attempts``)."""
        if not stream_seqs:
            return {}
        (rows,) = await self._read([(self._attempts_among_sql, (list(stream_seqs),))])
        return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

    # --- reads --------------------------------------------------------------------------

    async def get(self, hand_id: str) -> SettlementRecord | None:
        sql = f"select {_SETTLEMENT_COLUMNS} from {self._t('settlements')} where hand_id = %s"
        records = await self._with_seats(sql, (hand_id,))
        return records[0] if records else None

    async def list_by_table(self, table_id: str, size: int, after: tuple[int, str] | None) -> list[SettlementRecord]:
        """Up to ``size`` settlements of a table, newest first, after the ``after`` position."""
        return await self._list("s.table_id = %(key)s", table_id, size, after, join_seats=False)

    async def list_by_player(self, player_id: str, size: int, after: tuple[int, str] | None) -> list[SettlementRecord]:
        """Up to ``size`` settlements a player took part in, newest first."""
        return await self._list("p.player_id = %(key)s", player_id, size, after, join_seats=True)

    async def _list(
        self, where: str, key: str, size: int, after: tuple[int, str] | None, *, join_seats: bool
    ) -> list[SettlementRecord]:
        params: dict[str, Any] = {"key": key, "size": size}
        order_by = "s.stream_seq desc, s.hand_id desc"
        position = ""
        if after is not None:
            position = "and (s.stream_seq, s.hand_id) < (%(after_seq)s, %(after_hand)s)"
            params.update(after_seq=after[0], after_hand=after[1])
        source = self._t("settlements") + " s"
        if join_seats:
            # Through the seats index: (player_id, stream_seq desc, hand_id).
            source = f"{self._t('settlement_seats')} p join {self._t('settlements')} s on s.hand_id = p.hand_id"
            order_by = "p.stream_seq desc, p.hand_id desc"
            if after is not None:
                position = "and (p.stream_seq, p.hand_id) < (%(after_seq)s, %(after_hand)s)"
        columns = ", ".join(f"s.{c.strip()}" for c in _SETTLEMENT_COLUMNS.split(","))
        sql = f"select {columns} from {source} where {where} {position} order by {order_by} limit %(size)s"
        return await self._with_seats(sql, params)

    async def _with_seats(self, sql: str, params: Any) -> list[SettlementRecord]:
        """The settlements ``sql`` selects, with their seats (a second statement on the same
        connection; a settlement and its seats were committed together)."""
        seats_sql = f"""select hand_id, seat, player_id, account_id, net_gold from {self._t("settlement_seats")}
            where hand_id = any(%s) order by hand_id, seat"""

        async def attempt() -> list[SettlementRecord]:
            async with self.pool.connection() as conn, conn.cursor(row_factory=namedtuple_row) as cur:
                rows = await _execute(cur, sql, params)
                if not rows:
                    return []
                seat_rows = await _execute(cur, seats_sql, ([r.hand_id for r in rows],))
            seats: dict[str, list[SeatNet]] = {}
            for s in seat_rows:
                seats.setdefault(s.hand_id, []).append(SeatNet(s.seat, s.player_id, s.account_id, s.net_gold))
            return [_record(r, tuple(seats.get(r.hand_id, ()))) for r in rows]

        return await db_pool.read(attempt)

    async def get_dead_letter(self, hand_id: str) -> DeadLetter | None:
        sql = f"select {_DEAD_COLUMNS} from {self._t('dead_letters')} where hand_id = %s"
        (rows,) = await self._read([(sql, (hand_id,))])
        return _dead(rows[0]) if rows else None

    async def list_dead_letters(self, size: int, after: tuple[int, str] | None) -> list[DeadLetter]:
        """Open dead letters, oldest first (by the HandEnded stream sequence)."""
        params: dict[str, Any] = {"size": size}
        position = ""
        if after is not None:
            position = "and (stream_seq, hand_id) > (%(after_seq)s, %(after_hand)s)"
            params.update(after_seq=after[0], after_hand=after[1])
        sql = f"""select {_DEAD_COLUMNS} from {self._t("dead_letters")}
            where resolved_at is null {position} order by stream_seq, hand_id limit %(size)s"""
        (rows,) = await self._read([(sql, params)])
        return [_dead(r) for r in rows]

    async def counts(self) -> tuple[int, int]:
        """(settled hands, open dead letters)."""
        (rows,) = await self._read(
            [
                (
                    f"""select (select count(*) from {self._t("settlements")}) as settled,
                        (select count(*) from {self._t("dead_letters")} where resolved_at is null) as open_dead""",
                    None,
                )
            ]
        )
        return int(rows[0][0]), int(rows[0][1])


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


async def _execute(cur: Any, query: str, params: Any) -> list[Any]:
    await cur.execute(query, params)
    return await cur.fetchall() if cur.description is not None else []


def _record(row: Any, seats: tuple[SeatNet, ...]) -> SettlementRecord:
    return SettlementRecord(
        hand_id=row.hand_id,
        table_id=row.table_id,
        game=row.game,
        stream_seq=int(row.stream_seq),
        seats=seats,
        transfers=tuple(Transfer(t[0], t[1], int(t[2]), t[3], *t[4:5]) for t in row.transfers),
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
