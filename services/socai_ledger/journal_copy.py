"""A large batch's journal rows as PostgreSQL binary COPY streams, encoded whole with ``struct``.

The format: a signature, flags and header extension, then per row a field count and each
field as a length (-1 for NULL) and its binary value, then -1. psycopg's ``write_row`` costs
an await and a dumper call per value, a visible share of the ledger's CPU at four rows per
transaction; encoding a batch's stream in one pass does not. The streams must equal, byte
for byte, what psycopg's own COPY writer produces for the same rows:
``tests/integration/ledger/test_pg_wire_guard.py`` checks it.

The column orders are those of ``TRANSACTION_COLUMNS`` and ``ENTRY_COLUMNS``, which the COPY
statements of ``journal_write`` name; ``domain.TransactionRow`` and ``domain.EntryRow`` are
in the same order.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from socai_ledger import domain

TRANSACTION_COLUMNS: Final = (
    "transaction_id, idempotency_key, request_hash, status, journal_seq, kind, reference, metadata, "
    "error_reason, error_message, created_at"
)
ENTRY_COLUMNS: Final = (
    "account_id, account_version, journal_seq, entry_index, transaction_id, amount_gold, balance_after_gold, created_at"
)
# The PostgreSQL types of those columns, in order (what psycopg's writer is told in the guard test).
TRANSACTION_TYPES: Final = (
    "uuid",
    "text",
    "bytea",
    "text",
    "int8",
    "text",
    "text",
    "jsonb",
    "text",
    "text",
    "timestamptz",
)
ENTRY_TYPES: Final = ("text", "int8", "int8", "int2", "uuid", "int8", "int8", "timestamptz")

_COPY_SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_COPY_TRAILER: Final = struct.pack(">h", -1)
_PG_EPOCH: Final = datetime(2000, 1, 1, tzinfo=UTC)
_NULL: Final = struct.pack(">i", -1)
_TEXT_HEAD = struct.Struct(">i")
_INT8 = struct.Struct(">iq")
# entries: (8 fields) account_id | account_version, journal_seq, entry_index, transaction_id,
# amount_gold, balance_after_gold, created_at
_ENTRY_HEAD = struct.Struct(">hi")
_ENTRY_TAIL = struct.Struct(">iqiqihi16siqiqiq")
# transactions: (11 fields) transaction_id, then the texts and the rest one by one
_TX_HEAD = struct.Struct(">hi16s")
_HASH_HEAD = struct.pack(">i", 32)


def pg_time(value: datetime) -> int:
    """A timestamptz as PostgreSQL's binary value: microseconds since 2000-01-01 UTC."""
    delta = value - _PG_EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _text(value: str | None) -> bytes:
    if value is None:
        return _NULL
    data = value.encode()
    return _TEXT_HEAD.pack(len(data)) + data


def _bytea(value: bytes) -> bytes:
    return _TEXT_HEAD.pack(len(value)) + value


def entries_copy(rows: Sequence[domain.EntryRow], now: datetime) -> bytes:
    """The binary COPY stream of ``rows`` into ``entries (ENTRY_COLUMNS)``, all created at ``now``."""
    head = _ENTRY_HEAD.pack
    tail = _ENTRY_TAIL.pack
    at = pg_time(now)
    ids: dict[str, bytes] = {}  # an account appears in many rows of a batch (house:fees in all)
    out = [_COPY_SIGNATURE]
    for account_id, version, seq, index, tx_id, amount, balance in rows:
        encoded = ids.get(account_id)
        if encoded is None:
            encoded = ids[account_id] = account_id.encode()
        out.append(head(8, len(encoded)))
        out.append(encoded)
        out.append(tail(8, version, 8, seq, 2, index, 16, tx_id.bytes, 8, amount, 8, balance, 8, at))
    out.append(_COPY_TRAILER)
    return b"".join(out)


def transactions_copy(rows: Sequence[domain.TransactionRow], now: datetime) -> bytes:
    """The binary COPY stream of ``rows`` into ``transactions (TRANSACTION_COLUMNS)``, all
    created at ``now``. Metadata goes as jsonb (version 1, then ``json.dumps`` of it, as
    psycopg's ``Jsonb`` dumper writes it); empty metadata is NULL."""
    created_at = _INT8.pack(8, pg_time(now))
    statuses = {"applied": _text("applied"), "rejected": _text("rejected")}
    out = [_COPY_SIGNATURE]
    for tx_id, key, request_hash, status, seq, kind, reference, metadata, reason, message in rows:
        out.append(_TX_HEAD.pack(11, 16, tx_id.bytes))
        out.append(_text(key))
        out.append(_HASH_HEAD + request_hash if len(request_hash) == 32 else _bytea(request_hash))
        out.append(statuses.get(status) or _text(status))
        out.append(_NULL if seq is None else _INT8.pack(8, seq))
        out.append(_text(kind))
        out.append(_text(reference))
        out.append(_text("\x01" + json.dumps(metadata)) if metadata else _NULL)
        out.append(_text(reason))
        out.append(_text(message))
        out.append(created_at)
    out.append(_COPY_TRAILER)
    return b"".join(out)
