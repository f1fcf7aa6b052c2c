"""The statements behind the gRPC reads (accounts, transactions, statements, balances at a
point) and ``OpenAccount``, all on the service's pool, and the page tokens of the listings.

Every read is one statement or one explicit transaction on a pooled connection and runs once
more when that connection dies under it (``db_pool.retried_read``).
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from socai import accounts as account_ids
from socai import errors
from socai.infra import db_pool
from socai.money import INT64_MAX
from socai_ledger.db import SCHEMA, TRANSACTION_WITH_ENTRIES_COLUMNS, WRITE_LOCK, AConn, transaction_from_rows
from socai_ledger.domain import Account, Entry, Transaction

_ACCOUNT_COLUMNS = "account_id, kind, balance_gold, version, may_go_negative, created_at, held_gold"


# --- accounts -----------------------------------------------------------------------------------


def _account(row: tuple[Any, ...]) -> Account:
    return Account(row[0], row[1], row[2], row[3], row[4], row[5], row[6])


async def open_account(pool: db_pool.Pool, account_id: str) -> tuple[Account, bool]:
    """Open ``account_id`` (idempotent): (the account, whether this call created it).

    Takes the journal's write lock, so an account never appears under a running batch
    (the batch inserts the accounts it opens itself and counts on nobody else doing so).
    """
    kind = account_ids.kind_of(account_id)
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("select pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        cur = await conn.execute(
            f"insert into {SCHEMA}.accounts (account_id, kind, may_go_negative) values (%s, %s, %s) "
            f"on conflict (account_id) do nothing returning {_ACCOUNT_COLUMNS}",
            (account_id, kind, account_ids.may_go_negative(account_id)),
        )
        row = await cur.fetchone()
        if row is not None:
            return _account(row), True
        cur = await conn.execute(
            f"select {_ACCOUNT_COLUMNS} from {SCHEMA}.accounts where account_id = %s", (account_id,)
        )
        row = await cur.fetchone()
    errors.check(row is not None, f"account {account_id} exists after insert-or-nothing")
    assert row is not None
    return _account(row), False


@db_pool.retried_read
async def get_account(pool: db_pool.Pool, account_id: str) -> Account:
    """Raises NotFound("ACCOUNT_NOT_FOUND")."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"select {_ACCOUNT_COLUMNS} from {SCHEMA}.accounts where account_id = %s", (account_id,)
        )
        row = await cur.fetchone()
    if row is None:
        raise errors.NotFound("ACCOUNT_NOT_FOUND", f"account {account_id} does not exist", account_id=account_id)
    return _account(row)


@db_pool.retried_read
async def list_accounts(
    pool: db_pool.Pool, *, kind: str, id_prefix: str, after: str, limit: int
) -> tuple[list[Account], bool]:
    """Accounts ordered by id after ``after``: (up to ``limit`` accounts, whether more follow)."""
    where = ["account_id > %s"]
    params: list[Any] = [after]
    if kind:
        where.append("kind = %s")
        params.append(kind)
    if id_prefix:
        # account_id is collated "C": the btree range [prefix, prefix + U+FFFF) is the prefix.
        where.append("account_id >= %s and account_id < %s")
        params += [id_prefix, id_prefix + "\uffff"]
    params.append(limit + 1)
    sql = f"select {_ACCOUNT_COLUMNS} from {SCHEMA}.accounts where {' and '.join(where)} order by account_id limit %s"
    async with pool.connection() as conn:
        rows = await (await conn.execute(sql, params)).fetchall()
    return [_account(r) for r in rows[:limit]], len(rows) > limit


# --- journal reads ------------------------------------------------------------------------------

_TX_READ_SQL = f"""
select {TRANSACTION_WITH_ENTRIES_COLUMNS}
from {SCHEMA}.transactions t
left join {SCHEMA}.entries e on e.journal_seq = t.journal_seq
where {{where}}
order by e.entry_index
"""


@db_pool.retried_read
async def get_transaction(pool: db_pool.Pool, *, transaction_id: UUID | None, idempotency_key: str) -> Transaction:
    """Raises NotFound("TRANSACTION_NOT_FOUND"), also for a key whose request was refused
    (the refusal's reason is in the message and in the ErrorInfo metadata)."""
    param: UUID | str
    if transaction_id is not None:
        sql, param, what = _TX_READ_SQL.format(where="t.transaction_id = %s"), transaction_id, str(transaction_id)
    else:
        sql, param, what = _TX_READ_SQL.format(where="t.idempotency_key = %s"), idempotency_key, idempotency_key
    async with pool.connection() as conn:
        rows = await (await conn.execute(sql, (param,))).fetchall()
    if not rows:
        raise errors.NotFound("TRANSACTION_NOT_FOUND", f"no transaction {what}")
    if rows[0][2] != "applied":
        raise errors.NotFound(
            "TRANSACTION_NOT_FOUND",
            f"the request under {what} was refused ({rows[0][9]}): it is not in the journal",
            refused_reason=rows[0][9],
        )
    return transaction_from_rows(rows)


async def _require_account(conn: AConn, account_id: str) -> None:
    """Raises NotFound("ACCOUNT_NOT_FOUND") unless the account exists."""
    exists = await (
        await conn.execute(f"select 1 from {SCHEMA}.accounts where account_id = %s", (account_id,))
    ).fetchone()
    if exists is None:
        raise errors.NotFound("ACCOUNT_NOT_FOUND", f"account {account_id} does not exist", account_id=account_id)


@db_pool.retried_read
async def list_entries(
    pool: db_pool.Pool, account_id: str, *, before_version: int, limit: int
) -> tuple[list[Entry], bool]:
    """An account's entries, newest first, with versions below ``before_version``.

    Raises NotFound("ACCOUNT_NOT_FOUND").
    """
    async with pool.connection() as conn:
        await _require_account(conn, account_id)
        rows = await (
            await conn.execute(
                f"select transaction_id, account_id, amount_gold, balance_after_gold, account_version, created_at, "
                f"journal_seq from {SCHEMA}.entries where account_id = %s and account_version < %s "
                f"order by account_version desc limit %s",
                (account_id, before_version, limit + 1),
            )
        ).fetchall()
    entries = [Entry(str(r[0]), r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows[:limit]]
    return entries, len(rows) > limit


@db_pool.retried_read
async def balance_at(
    pool: db_pool.Pool, account_id: str, *, transaction_id: UUID | None, at: datetime | None
) -> tuple[int, int]:
    """(balance, version) of an account right after a transaction, or at a time.

    Raises NotFound("ACCOUNT_NOT_FOUND" / "TRANSACTION_NOT_FOUND").
    """
    async with pool.connection() as conn:
        await _require_account(conn, account_id)
        if transaction_id is not None:
            seq_row = await (
                await conn.execute(
                    f"select journal_seq from {SCHEMA}.transactions where transaction_id = %s and status = 'applied'",
                    (transaction_id,),
                )
            ).fetchone()
            if seq_row is None:
                raise errors.NotFound("TRANSACTION_NOT_FOUND", f"no transaction {transaction_id} in the journal")
            condition, param = "journal_seq <= %s", seq_row[0]
        else:
            condition, param = "created_at <= %s", at
        # Versions, journal sequence numbers and batch times all grow together per account,
        # so the newest entry satisfying the condition is found scanning the primary key back.
        row = await (
            await conn.execute(
                f"select balance_after_gold, account_version from {SCHEMA}.entries "
                f"where account_id = %s and {condition} order by account_version desc limit 1",
                (account_id, param),
            )
        ).fetchone()
    return (row[0], row[1]) if row else (0, 0)


# --- page tokens (opaque to callers) ------------------------------------------------------------


def encode_token(*parts: str) -> str:
    return base64.urlsafe_b64encode("\x1f".join(parts).encode()).decode().rstrip("=")


# A token this service issues holds an account id (at most 200 characters) and a number:
# anything much longer was not issued here, and is refused before it is decoded.
PAGE_TOKEN_MAX_CHARS: Final = 1024
_TOKEN_ALPHABET = re.compile(r"[A-Za-z0-9_\-]*")
_INT64_TEXT = re.compile(r"[0-9]{1,19}")


def _bad_token() -> errors.InvalidArgument:
    return errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token is not one this service issued")


def decode_token(token: str, parts: int) -> list[str]:
    """The printable fields of a token from ``encode_token``. Raises InvalidArgument("BAD_PAGE_TOKEN").

    Strict: the urlsafe alphabet only (the decoder would skip other characters), and fields
    of printable characters only (a NUL reaching PostgreSQL is an error there, not a miss).
    """
    if len(token) > PAGE_TOKEN_MAX_CHARS or not _TOKEN_ALPHABET.fullmatch(token):
        raise _bad_token()
    try:
        padded = token + "=" * (-len(token) % 4)
        fields = base64.urlsafe_b64decode(padded.encode()).decode().split("\x1f")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise _bad_token() from exc
    if len(fields) != parts or not all(field.isprintable() for field in fields):
        raise _bad_token()
    return fields


def encode_bound_token(filters: str, *parts: str) -> str:
    """``encode_token`` of ``parts`` and the call's ``filters_of``."""
    return encode_token(*parts, filters)


def decode_bound_token(token: str, parts: int, filters: str) -> list[str]:
    """The ``parts`` fields of a token from ``encode_bound_token`` for these ``filters``.
    A token without the fingerprint (issued before tokens carried one) is read as it was
    issued. Raises InvalidArgument("BAD_PAGE_TOKEN"), for another call's token too."""
    try:
        *fields, bound = decode_token(token, parts + 1)
    except errors.InvalidArgument:
        return decode_token(token, parts)
    if bound != filters:
        raise errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token belongs to a call with other filters")
    return fields


def parse_int64(text: str) -> int:
    """A non-negative int64 written in ASCII digits. Raises InvalidArgument("BAD_PAGE_TOKEN")."""
    if not _INT64_TEXT.fullmatch(text):
        raise _bad_token()
    value = int(text)
    if value > INT64_MAX:
        raise _bad_token()
    return value
