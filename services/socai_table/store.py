"""The table service's own rows in PostgreSQL (schema ``socai_table``).

Every statement goes through ``TableStore._exec`` on a ``socai.infra.db_pool.Pool``: a
database outage is ``Unavailable("DATABASE_UNAVAILABLE")``, a connection that outlived a
restart is replaced before use, and a read whose connection dies under it runs once more.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from socai.infra import db_pool, limits
from socai.infra.db import libpq_url
from socai_table.model import TableConfig

SCHEMA = "socai_table"


@dataclass(frozen=True)
class Quarantined:
    """A message on a table's subject that its rebuild did not apply, and why."""

    table_id: str
    hand_id: str
    stream_seq: int
    reason: str  # UNSIGNED | BAD_SIGNATURE | BAD_EVENT | OUT_OF_ORDER | a rules engine code
    detail: str = ""


@dataclass(frozen=True)
class Cashout:
    cashout_id: str
    table_id: str
    player_id: str
    amount_gold: int
    last_hand_id: str
    status: str


@dataclass(frozen=True)
class CashoutRow:
    """A cash-out as its row keeps it: the cash-out, the ledger transaction that paid it
    and when (epoch seconds; 0 while pending)."""

    cashout: Cashout
    ledger_transaction_id: str
    done_s: float


@dataclass(frozen=True)
class ClosedTable:
    """A closed table as its row keeps it (closed tables are not in any instance's memory)."""

    table_id: str
    config: TableConfig
    created_at: datetime
    closed_at: datetime
    close_reason: str
    hands_played: int


class TableStore:
    def __init__(self, pool: db_pool.Pool) -> None:
        self.pool = pool

    @classmethod
    async def open(cls, url: str, max_size: int = 10) -> TableStore:
        pool = db_pool.Pool(
            libpq_url(url),
            name="socai-table",
            min_size=1,
            max_size=max_size,
            kwargs={"autocommit": True, "application_name": "socai-table"},
        )
        await pool.open(wait=True, wait_s=30)
        return cls(pool)

    async def close(self) -> None:
        await self.pool.close()

    async def _exec(self, sql: str, params: tuple[Any, ...] = (), *, read: bool = False) -> list[dict[str, Any]]:
        """The rows of one statement (autocommit). ``read``: it changes nothing, so it runs once
        more when its connection dies under it; a write does not (whether it committed is
        unknown; the caller's retry finds out).

        Raises Unavailable("DATABASE_UNAVAILABLE") when PostgreSQL cannot be reached.
        """
        if read:
            return await db_pool.read(lambda: self._exec_once(sql, params))
        return await self._exec_once(sql, params)

    async def _exec_once(self, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, params)
            return await cur.fetchall() if cur.description else []

    # tables ----------------------------------------------------------------------------

    async def create_table(
        self, table_id: str, config: TableConfig, instance: str, *, owner_tables_max: int = 0
    ) -> tuple[TableConfig, bool]:
        """Insert the table (idempotent for the same config); returns the stored config and
        whether this call inserted it.

        The caller compares the returned config with its own to detect an id reused with
        different settings. With ``owner_tables_max`` (> 0) and an owner, a new table is
        refused when its owner has that many open tables already: ResourceExhausted
        ("TOO_MANY_TABLES"), nothing stored. The count and the insert run under a lock on
        the owner (a transaction-scoped advisory lock), so two creates on two instances at
        once cannot both take the last place.
        """
        owner = config.owner_player_id
        if owner_tables_max <= 0 or not owner:
            rows = await self._exec(self._INSERT_TABLE, (table_id, config.game, instance, json.dumps(asdict(config))))
            return TableConfig.from_json(rows[0]["config"]), bool(rows[0]["inserted"])
        async with self.pool.connection() as conn, conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            await cur.execute("select pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{SCHEMA}.owner:{owner}",))
            await cur.execute(f"select config from {SCHEMA}.tables where table_id = %s", (table_id,))
            existing = await cur.fetchone()
            if existing is not None:
                return TableConfig.from_json(existing["config"]), False
            await cur.execute(
                f"select count(*) as open from {SCHEMA}.tables "
                f"where closed_at is null and config ->> 'owner_player_id' = %s",
                (owner,),
            )
            row = await cur.fetchone()
            held = int(row["open"]) if row else 0
            if held >= owner_tables_max:
                raise limits.refused(
                    "table",
                    "TOO_MANY_TABLES",
                    "SOCAI_LIMIT_OWNER_TABLES",
                    owner_tables_max,
                    f"{owner} owns {held} open tables, the most allowed (SOCAI_LIMIT_OWNER_TABLES); close one first",
                    open=held,
                )
            await cur.execute(self._INSERT_TABLE, (table_id, config.game, instance, json.dumps(asdict(config))))
            rows = await cur.fetchall()
        return TableConfig.from_json(rows[0]["config"]), bool(rows[0]["inserted"])

    _INSERT_TABLE = (
        f"insert into {SCHEMA}.tables (table_id, game, instance, config) values (%s, %s, %s, %s) "
        f"on conflict (table_id) do update set table_id = excluded.table_id "
        f"returning config, (xmax = 0) as inserted"
    )

    async def delete_table(self, table_id: str, instance: str) -> None:
        """Forget a table that could not be opened (it has no events)."""
        await self._exec(f"delete from {SCHEMA}.tables where table_id = %s and instance = %s", (table_id, instance))

    async def open_tables(self) -> list[tuple[str, TableConfig]]:
        """Every open table (the caller picks those of the partitions it holds: the
        partition is a function of the id and P, not a column, so a new P needs no update)."""
        rows = await self._exec(
            f"select table_id, config from {SCHEMA}.tables where closed_at is null order by created_at, table_id",
            read=True,
        )
        return [(r["table_id"], TableConfig.from_json(r["config"])) for r in rows]

    async def list_tables(self, game: str, after: str, limit: int) -> list[tuple[str, TableConfig, float]]:
        """Up to ``limit`` open tables of every instance with ids after ``after``, by id
        (``game``: only that game's): (id, config, created at in epoch seconds)."""
        rows = await self._exec(
            f"select table_id, config, extract(epoch from created_at)::float8 as created_s from {SCHEMA}.tables "
            f"where closed_at is null and table_id > %s and (%s = '' or config->>'game' = %s) "
            f"order by table_id limit %s",
            (after, game, game, limit),
            read=True,
        )
        return [(r["table_id"], TableConfig.from_json(r["config"]), float(r["created_s"])) for r in rows]

    async def config_of(self, table_id: str) -> TableConfig | None:
        rows = await self._exec(
            f"select config from {SCHEMA}.tables where table_id = %s and closed_at is null", (table_id,), read=True
        )
        return TableConfig.from_json(rows[0]["config"]) if rows else None

    async def owner_of(self, table_id: str) -> str | None:
        """The instance that created ``table_id`` (None: no such table). Who runs it is the
        lease holder of its partition (``socai_table.ownership``)."""
        rows = await self._exec(f"select instance from {SCHEMA}.tables where table_id = %s", (table_id,), read=True)
        return rows[0]["instance"] if rows else None

    # closing ---------------------------------------------------------------------------

    async def begin_close(self, table_id: str, reason: str) -> str:
        """Record that ``table_id`` is closing (idempotent); returns the reason kept: the
        first one given (a second CloseTable does not rewrite why the table closed)."""
        rows = await self._exec(
            f"update {SCHEMA}.tables set closing_at = coalesce(closing_at, now()), "
            f"close_reason = case when closing_at is null then %s else close_reason end "
            f"where table_id = %s returning close_reason",
            (reason, table_id),
        )
        return str(rows[0]["close_reason"]) if rows else reason

    async def closing_reason(self, table_id: str) -> str | None:
        """Why the table is closing, or None when nobody closed it."""
        rows = await self._exec(
            f"select close_reason from {SCHEMA}.tables where table_id = %s and closing_at is not null",
            (table_id,),
            read=True,
        )
        return str(rows[0]["close_reason"]) if rows else None

    async def finish_close(self, table_id: str) -> None:
        """The close is complete (TableClosed is written): the table is no longer loaded."""
        await self._exec(
            f"update {SCHEMA}.tables set closed_at = coalesce(closed_at, now()), "
            f"closing_at = coalesce(closing_at, now()) where table_id = %s",
            (table_id,),
        )

    _CLOSED_COLUMNS = (
        "t.table_id, t.config, t.created_at, t.closed_at, t.close_reason, "
        f"coalesce((select max(h.hand_number) from {SCHEMA}.hand_seeds h where h.table_id = t.table_id), 0) as hands"
    )

    @staticmethod
    def _closed(row: dict[str, Any]) -> ClosedTable:
        return ClosedTable(
            row["table_id"],
            TableConfig.from_json(row["config"]),
            row["created_at"],
            row["closed_at"],
            row["close_reason"],
            int(row["hands"]),
        )

    async def closed_table(self, table_id: str) -> ClosedTable | None:
        rows = await self._exec(
            f"select {self._CLOSED_COLUMNS} from {SCHEMA}.tables t where t.table_id = %s and t.closed_at is not null",
            (table_id,),
            read=True,
        )
        return self._closed(rows[0]) if rows else None

    async def closed_tables(self, game: str, after: str, limit: int) -> list[ClosedTable]:
        """Closed tables by id after ``after`` (all games when ``game`` is empty), at most ``limit``."""
        rows = await self._exec(
            f"select {self._CLOSED_COLUMNS} from {SCHEMA}.tables t where t.closed_at is not null "
            f"and (%s = '' or t.game = %s) and t.table_id > %s order by t.table_id limit %s",
            (game, game, after, limit),
            read=True,
        )
        return [self._closed(r) for r in rows]

    # seeds -----------------------------------------------------------------------------

    async def save_seed(self, table_id: str, hand_id: str, hand_number: int, sealed_seed: bytes) -> bytes:
        """Store the hand's encrypted seed (``socai_table.seeds``) before HandStarted is
        published; an existing row wins (a restart re-uses the seed it already committed
        to). Returns the stored (encrypted) seed."""
        rows = await self._exec(
            f"insert into {SCHEMA}.hand_seeds (hand_id, table_id, hand_number, seed) values (%s, %s, %s, %s) "
            f"on conflict (hand_id) do update set hand_id = excluded.hand_id returning seed",
            (hand_id, table_id, hand_number, sealed_seed),
        )
        return bytes(rows[0]["seed"])

    async def last_hands(self, table_id: str, limit: int = 2) -> list[tuple[int, str, bytes]]:
        """(hand number, hand id, encrypted seed) of the table's last hands, newest first."""
        rows = await self._exec(
            f"select hand_number, hand_id, seed from {SCHEMA}.hand_seeds where table_id = %s "
            f"order by hand_number desc limit %s",
            (table_id, limit),
            read=True,
        )
        return [(int(r["hand_number"]), r["hand_id"], bytes(r["seed"])) for r in rows]

    # joins -----------------------------------------------------------------------------

    async def begin_join(
        self, key: str, table_id: str, player_id: str, seat: int, amount: int, guild_id: str = ""
    ) -> dict[str, Any]:
        rows = await self._exec(
            f"insert into {SCHEMA}.joins (idempotency_key, table_id, player_id, seat, amount_gold, guild_id, status) "
            f"values (%s, %s, %s, %s, %s, %s, 'pending') "
            f"on conflict (idempotency_key) do update set idempotency_key = excluded.idempotency_key "
            f"returning table_id, player_id, seat, amount_gold, status, ledger_transaction_id, error",
            (key, table_id, player_id, seat, amount, guild_id),
        )
        return rows[0]

    async def finish_join(self, key: str, status: str, ledger_tx: str = "", error: str = "") -> None:
        await self._exec(
            f"update {SCHEMA}.joins set status = %s, ledger_transaction_id = %s, error = %s where idempotency_key = %s",
            (status, ledger_tx, error, key),
        )

    async def pending_joins(self, table_id: str) -> list[dict[str, Any]]:
        return await self._exec(
            f"select idempotency_key, player_id, seat, amount_gold, guild_id from {SCHEMA}.joins "
            f"where table_id = %s and status = 'pending' order by created_at",
            (table_id,),
            read=True,
        )

    # cash-outs -------------------------------------------------------------------------

    async def add_cashout(self, c: Cashout) -> None:
        """Record a cash-out; a pending one of the same id takes the new amount and last hand
        (a stand-up retried after its append failed: the stack is what it is now)."""
        await self._exec(
            f"insert into {SCHEMA}.cashouts (cashout_id, table_id, player_id, amount_gold, last_hand_id, status) "
            f"values (%s, %s, %s, %s, %s, 'pending') on conflict (cashout_id) do update "
            f"set amount_gold = excluded.amount_gold, last_hand_id = excluded.last_hand_id "
            f"where {SCHEMA}.cashouts.status = 'pending'",
            (c.cashout_id, c.table_id, c.player_id, c.amount_gold, c.last_hand_id),
        )

    async def pending_cashouts(self, table_ids: list[str], include_closed: bool = False) -> list[Cashout]:
        """The pending cash-outs of ``table_ids``, and with ``include_closed`` those of every
        closed table too (a closed table is in no instance's memory, and its last cash-outs
        wait for its last hand's settlement)."""
        rows = await self._exec(
            f"select cashout_id, table_id, player_id, amount_gold, last_hand_id, status from {SCHEMA}.cashouts "
            f"where status = 'pending' and (table_id = any(%s) or (%s and table_id in "
            f"(select table_id from {SCHEMA}.tables where closed_at is not null))) order by created_at",
            (table_ids, include_closed),
            read=True,
        )
        return [Cashout(**r) for r in rows]

    async def last_cashout(self, table_id: str, player_id: str) -> CashoutRow | None:
        """The player's latest cash-out at the table (any status), or None."""
        rows = await self._exec(
            f"select cashout_id, table_id, player_id, amount_gold, last_hand_id, status, ledger_transaction_id, "
            f"done_at from {SCHEMA}.cashouts where table_id = %s and player_id = %s "
            f"order by created_at desc, cashout_id desc limit 1",
            (table_id, player_id),
            read=True,
        )
        if not rows:
            return None
        r = rows[0]
        done_s = r["done_at"].timestamp() if r["done_at"] is not None else 0.0
        return CashoutRow(
            Cashout(r["cashout_id"], r["table_id"], r["player_id"], r["amount_gold"], r["last_hand_id"], r["status"]),
            r["ledger_transaction_id"],
            done_s,
        )

    async def has_pending_cashout(self, table_id: str, player_id: str) -> bool:
        rows = await self._exec(
            f"select 1 from {SCHEMA}.cashouts where table_id = %s and player_id = %s and status <> 'done' limit 1",
            (table_id, player_id),
            read=True,
        )
        return bool(rows)

    async def finish_cashout(self, cashout_id: str, status: str, ledger_tx: str = "", detail: str = "") -> None:
        await self._exec(
            f"update {SCHEMA}.cashouts set status = %s, ledger_transaction_id = %s, detail = %s, done_at = now() "
            f"where cashout_id = %s",
            (status, ledger_tx, detail, cashout_id),
        )

    # quarantine --------------------------------------------------------------------------

    async def quarantine(self, q: Quarantined) -> None:
        """Record a message the rebuild would not apply (once per stream sequence)."""
        await self._exec(
            f"insert into {SCHEMA}.quarantine (stream_seq, table_id, hand_id, reason, detail) "
            f"values (%s, %s, %s, %s, %s) on conflict (stream_seq) do nothing",
            (q.stream_seq, q.table_id, q.hand_id, q.reason, q.detail[:2000]),
        )

    async def quarantined(self, table_id: str = "", include_resolved: bool = False) -> list[dict[str, Any]]:
        where = ["(%s = '' or table_id = %s)"]
        if not include_resolved:
            where.append("resolved_at is null")
        return await self._exec(
            f"select stream_seq, table_id, hand_id, reason, detail, found_at, resolved_at, resolution "
            f"from {SCHEMA}.quarantine where {' and '.join(where)} order by stream_seq",
            (table_id, table_id),
            read=True,
        )

    async def resolve_quarantined(self, stream_seq: int, resolution: str) -> bool:
        rows = await self._exec(
            f"update {SCHEMA}.quarantine set resolved_at = now(), resolution = %s "
            f"where stream_seq = %s and resolved_at is null returning stream_seq",
            (resolution, stream_seq),
        )
        return bool(rows)
