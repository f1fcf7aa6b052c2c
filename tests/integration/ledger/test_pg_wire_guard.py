"""Guards of ``socai_ledger.pg_wire`` and ``journal_copy``: they fail the day a psycopg upgrade
(or a migration) changes what the write path relies on, instead of the ledger failing or
silently writing something else.

(a) every psycopg internal the adapter uses exists on the pinned psycopg and behaves as used;
(b) the hand-encoded binary COPY streams equal, byte for byte, what psycopg's own COPY writer
    sends for the same rows, and both load the same table contents;
(c) rendered SQL literals come back from a real server exactly as sent, for awkward text.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from psycopg.copy import AsyncLibpqWriter
from psycopg.types.json import Jsonb
from psycopg.waiting import Ready, Wait

from socai.money import INT64_MAX
from socai_ledger import domain, journal_copy, pg_wire

pytestmark = pytest.mark.integration

INT64_MIN = -INT64_MAX - 1
VIETNAM = timezone(timedelta(hours=7))

AWKWARD_TEXTS = [
    "",
    "it's",
    "''",
    "'",
    "\\",
    "\\\\",
    "ends with a backslash\\",
    "\\'; drop table socai_ledger.entries; --",
    "E'not an escape'",
    "\\x41 \\101 \\u0041 \\n",  # escape sequences that must stay text
    '"double" {braces} [brackets] ,commas, NULL',
    "%s %% %(seq)s {0}",  # placeholders of every kind, inside a value
    "tab\there\nnewline\r\ncarriage",
    "\x01\x1f\x7f control characters",
    "Thối heo, chặt heo, đền làng — Tiến lên miền Nam, Phỏm, Xì dách, Mậu binh",
    "Đ đ Ư ư Ơ ơ Ă ă Â â Ê ê Ô ô ̣ ̉ ̃ (combining marks)",
    "🂡🃏🎴 👨‍👩‍👧‍👦 🇻🇳 𝕏",  # astral plane, joiners, flags
    "\ufeffbyte order mark, \u200b zero width space",
    "中文 日本語 한국어 العربية",
    "x" * 1_000_000,
    ("'\\\"🂡ế" * 40_000),  # long and awkward everywhere
]


@pytest.fixture
async def conn(migrated_database_url: str) -> AsyncIterator[pg_wire.AConn]:
    connection = await psycopg.AsyncConnection.connect(migrated_database_url, autocommit=True)
    try:
        yield connection
    finally:
        await connection.close()


# --- (a) the internals ----------------------------------------------------------------------------


def test_the_wait_protocol_flags_are_the_bit_flags_the_write_loop_tests():
    assert Wait.RW == Wait.R | Wait.W and Wait.R & Wait.W == 0
    assert Ready.R & Ready.R and not Ready.W & Ready.R
    assert Ready.RW & Ready.R and Ready.RW & Ready.W


def test_the_functions_the_adapter_calls_take_the_arguments_it_passes():
    wait = inspect.signature(psycopg.AsyncConnection.wait)
    assert list(wait.parameters)[:2] == ["self", "gen"]
    assert all(p.default is not inspect.Parameter.empty for p in list(wait.parameters.values())[2:])
    assert inspect.iscoroutinefunction(psycopg.AsyncConnection.wait)
    from_result = inspect.signature(psycopg.errors.error_from_result)
    assert list(from_result.parameters) == ["result", "encoding"]


async def test_a_connection_has_the_lock_its_own_statements_take(conn: pg_wire.AConn):
    assert isinstance(conn.lock, asyncio.Lock)
    async with conn.lock:
        blocked = asyncio.ensure_future(conn.execute("select 1"))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not blocked.done()  # psycopg waits for the lock the adapter holds
    assert await (await blocked).fetchone() == (1,)


async def test_the_libpq_calls_of_the_write_loop_exist_on_the_connection(conn: pg_wire.AConn):
    pgconn = conn.pgconn
    for name in ("send_query", "flush", "consume_input", "is_busy", "get_result", "put_copy_data", "put_copy_end"):
        assert callable(getattr(pgconn, name)), name
    assert isinstance(pgconn.error_message, bytes)
    assert pgconn.nonblocking == 1  # an async connection: COPY writes may answer "not now" (0)


async def test_a_failed_statement_raises_the_class_of_its_sqlstate_and_the_connection_goes_on(conn: pg_wire.AConn):
    with pytest.raises(psycopg.errors.DivisionByZero) as caught:
        await pg_wire.write_script(conn, "begin; select 1; select %s / 0; select 2; commit", [1], [])
    assert caught.value.sqlstate == "22012"
    assert caught.value.diag.message_primary == "division by zero"
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    await conn.execute("rollback")
    await conn.execute("create temp table unique_ids (id int primary key)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        await pg_wire.write_script(conn, "insert into unique_ids values (1), (1)", [], [])
    assert await (await conn.execute("select 41 + 1")).fetchone() == (42,)


async def test_a_script_of_copies_loads_every_stream_even_one_larger_than_a_chunk(conn: pg_wire.AConn):
    await conn.execute("create temp table entries_a (like socai_ledger.entries)")
    await conn.execute("create temp table entries_b (like socai_ledger.entries)")
    now = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)
    rows_a = [(f"player:{i}", i + 1, i + 1, 0, uuid.uuid4(), -(i + 1), 10**12 - i) for i in range(6_000)]
    rows_b = [("house:fees", 1, 1, 2, uuid.uuid4(), 5, 5)]
    stream_a = journal_copy.entries_copy(rows_a, now)
    assert len(stream_a) > 2 * pg_wire.COPY_CHUNK_BYTES
    columns = journal_copy.ENTRY_COLUMNS
    await pg_wire.write_script(
        conn,
        f"begin; copy entries_a ({columns}) from stdin (format binary); "
        f"copy entries_b ({columns}) from stdin (format binary); select %s; commit",
        ["after the copies"],
        [lambda: stream_a, lambda: journal_copy.entries_copy(rows_b, now)],
    )
    assert await (await conn.execute("select count(*), sum(amount_gold) from entries_a")).fetchone() == (
        6_000,
        -sum(range(1, 6_001)),
    )
    assert await (await conn.execute("select account_id, created_at from entries_b")).fetchone() == ("house:fees", now)


# --- (b) the COPY streams -------------------------------------------------------------------------


class CapturingWriter(AsyncLibpqWriter):
    """psycopg's own COPY writer, keeping a copy of every byte it sends."""

    def __init__(self, cursor: psycopg.AsyncCursor[Any]) -> None:
        super().__init__(cursor)
        self.sent = bytearray()

    async def write(self, data: Any) -> None:
        self.sent += bytes(data)
        await super().write(data)


async def psycopg_copy(
    conn: pg_wire.AConn, table: str, columns: str, types: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> bytes:
    """Load ``rows`` into ``table`` with psycopg's binary COPY; the bytes it sent."""
    async with conn.cursor() as cur:
        writer = CapturingWriter(cur)
        async with cur.copy(f"copy {table} ({columns}) from stdin (format binary)", writer=writer) as copy:
            copy.set_types(list(types))
            for row in rows:
                await copy.write_row(row)
    return bytes(writer.sent)


async def test_the_copy_column_types_are_those_of_the_journal_tables(conn: pg_wire.AConn):
    for table, columns, types in (
        ("transactions", journal_copy.TRANSACTION_COLUMNS, journal_copy.TRANSACTION_TYPES),
        ("entries", journal_copy.ENTRY_COLUMNS, journal_copy.ENTRY_TYPES),
    ):
        names = [c.strip() for c in columns.split(",")]
        rows = await (
            await conn.execute(
                "select a.attname, t.typname from pg_attribute a join pg_type t on t.oid = a.atttypid "
                "where a.attrelid = %s::regclass and a.attnum > 0 and not a.attisdropped",
                (f"socai_ledger.{table}",),
            )
        ).fetchall()
        found = dict(rows)
        assert [found[name] for name in names] == list(types), table


def transaction_rows() -> list[domain.TransactionRow]:
    key_texts = [t for t in AWKWARD_TEXTS if 0 < len(t) <= 200]
    rows: list[domain.TransactionRow] = []
    for seq, text in enumerate(key_texts, 1):
        rows.append(
            (
                uuid.uuid4(),
                f"k{seq}:{text}",
                bytes(range(seq, seq + 32)),
                "applied",
                seq,
                "settle.v2",
                text,
                {},
                None,
                None,
            )
        )
    rows += [
        (
            uuid.uuid4(),
            "meta",
            b"\x00" * 32,
            "applied",
            10_000,
            "deposit",
            "",
            {"note": AWKWARD_TEXTS[14], "e": ""},
            None,
            None,
        ),
        (uuid.uuid4(), "big", b"\xff" * 32, "applied", INT64_MAX, "k", "x" * 100_000, {"🂡": "'\\\""}, None, None),
        (
            uuid.uuid4(),
            "refused",
            b"\x01" * 32,
            "rejected",
            None,
            "test",
            "",
            {},
            "INSUFFICIENT_FUNDS",
            "needs 'more' \\ gold",
        ),
        (uuid.uuid4(), "short hash", b"\x07" * 5, "some-other-status", None, "test", "r", {}, "", ""),
        (uuid.uuid4(), "empty hash", b"", "applied", 3, "test", "r", {"a": "1", "b": "2"}, None, "message only"),
    ]
    return rows


def entry_rows() -> list[domain.EntryRow]:
    tx = uuid.uuid4()
    rows: list[domain.EntryRow] = [
        ("house:fees", 1, 1, 0, tx, 5, 5),
        ("player:a-b_c.d", INT64_MAX, INT64_MAX, 255, tx, INT64_MIN, INT64_MIN),
        ("escrow:t1:alice", 2, 7, 32_767, uuid.UUID(int=0), -1, 0),
        ("house:fees", 2, 2, 1, uuid.UUID(int=2**128 - 1), INT64_MAX, INT64_MAX),
    ]
    rows += [(f"player:{i}", i + 1, i + 1, i % 256, uuid.uuid4(), i - 500, i * 7) for i in range(1_000)]
    return rows


@pytest.mark.parametrize(
    "now",
    [
        datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC),
        datetime(2026, 2, 17, 23, 59, 59, 999999, tzinfo=VIETNAM),
        datetime(1999, 12, 31, 23, 59, 59, 1, tzinfo=UTC),  # before PostgreSQL's epoch: negative
    ],
    ids=["utc", "vietnam", "before-2000"],
)
async def test_the_hand_encoded_copy_streams_equal_psycopgs_and_load_the_same_rows(conn: pg_wire.AConn, now: datetime):
    for table in ("tx_psycopg", "tx_ledger"):
        await conn.execute(f"create temp table {table} (like socai_ledger.transactions)")
    for table in ("entries_psycopg", "entries_ledger"):
        await conn.execute(f"create temp table {table} (like socai_ledger.entries)")
    txs = transaction_rows()
    entries = entry_rows()

    theirs_tx = await psycopg_copy(
        conn,
        "tx_psycopg",
        journal_copy.TRANSACTION_COLUMNS,
        journal_copy.TRANSACTION_TYPES,
        [(*row[:7], Jsonb(row[7]) if row[7] else None, *row[8:], now) for row in txs],
    )
    theirs_entries = await psycopg_copy(
        conn,
        "entries_psycopg",
        journal_copy.ENTRY_COLUMNS,
        journal_copy.ENTRY_TYPES,
        [(*row, now) for row in entries],
    )
    ours_tx = journal_copy.transactions_copy(txs, now)
    ours_entries = journal_copy.entries_copy(entries, now)
    assert ours_tx == theirs_tx
    assert ours_entries == theirs_entries

    await pg_wire.write_script(
        conn,
        f"begin; copy tx_ledger ({journal_copy.TRANSACTION_COLUMNS}) from stdin (format binary); "
        f"copy entries_ledger ({journal_copy.ENTRY_COLUMNS}) from stdin (format binary); commit",
        [],
        [lambda: ours_tx, lambda: ours_entries],
    )
    for ours, theirs, order in (
        ("tx_ledger", "tx_psycopg", "transaction_id"),
        ("entries_ledger", "entries_psycopg", "account_id, account_version"),
    ):
        ledger_rows = await (await conn.execute(f"select * from {ours} order by {order}")).fetchall()
        psycopg_rows = await (await conn.execute(f"select * from {theirs} order by {order}")).fetchall()
        assert ledger_rows == psycopg_rows
        assert len(ledger_rows) == (len(txs) if ours == "tx_ledger" else len(entries))
    stored = await (
        await conn.execute("select reference, metadata, created_at from tx_ledger where idempotency_key = 'meta'")
    ).fetchone()
    assert stored == ("", {"note": AWKWARD_TEXTS[14], "e": ""}, now)


# --- (c) the literals -----------------------------------------------------------------------------


@pytest.mark.parametrize("standard_conforming_strings", ["on", "off"])
async def test_awkward_text_comes_back_exactly_through_a_script(conn: pg_wire.AConn, standard_conforming_strings: str):
    await conn.execute(f"set standard_conforming_strings = {standard_conforming_strings}")
    for text in AWKWARD_TEXTS:
        [[(back, length)]] = await pg_wire.script(conn, "select %s::text, char_length(%s)", (text, text))
        assert (back, length) == (text, len(text)), text[:40]


async def test_awkward_text_comes_back_exactly_through_the_write_script(conn: pg_wire.AConn):
    await conn.execute("create temp table texts (n int primary key, t text, a text[])")
    statements, params = [], []
    for n, text in enumerate(AWKWARD_TEXTS):
        statements.append("insert into texts values (%s, %s, %s::text[])")
        params += [n, text, pg_wire.text_array([text, None, "NULL", text[:50]])]
    await pg_wire.write_script(conn, "begin; " + "; ".join(statements) + "; commit", params, [])
    rows = await (await conn.execute("select t, a from texts order by n")).fetchall()
    assert rows == [(text, [text, None, "NULL", text[:50]]) for text in AWKWARD_TEXTS]


async def test_array_literals_keep_every_element_apart(conn: pg_wire.AConn):
    texts = [None, "NULL", "null", "", " spaced ", '"', "\\", "{", "}", ",", "a,b", "{1,2}", "Thối 🂡", "'"]
    [[(back,)]] = await pg_wire.script(conn, "select %s::text[]", (pg_wire.text_array(texts),))
    assert back == texts
    ids = [uuid.uuid4(), uuid.uuid4()]
    [[(numbers, nullable, uuids)]] = await pg_wire.script(
        conn,
        "select %s::int8[], %s::int8[], %s::uuid[]",
        (pg_wire.plain_array([INT64_MIN, 0, INT64_MAX]), pg_wire.array([1, None, 3]), pg_wire.plain_array(ids)),
    )
    assert (numbers, nullable, uuids) == ([INT64_MIN, 0, INT64_MAX], [1, None, 3], ids)


async def test_numbers_booleans_null_and_times_come_back_exactly(conn: pg_wire.AConn):
    at = datetime(2026, 2, 17, 23, 59, 59, 999999, tzinfo=VIETNAM)
    [[row]] = await pg_wire.script(
        conn,
        "select %s::int8, %s::int8, %s::int8, %s::bool, %s::bool, %s::text, %s",
        (INT64_MIN, INT64_MAX, 0, True, False, None, at),
    )
    assert row[:6] == (INT64_MIN, INT64_MAX, 0, True, False, None)
    assert row[6] == at  # the same instant, whatever the session's time zone


async def test_a_nul_is_refused_before_anything_is_sent_and_the_connection_goes_on(conn: pg_wire.AConn):
    with pytest.raises(psycopg.DataError, match="NUL"):
        await pg_wire.script(conn, "select %s", ("a\x00b",))
    with pytest.raises(psycopg.DataError, match="NUL"):
        await pg_wire.write_script(conn, "begin; select %s; commit", ["\x00"], [])
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # nothing went out
    assert await (await conn.execute("select 'still here'")).fetchone() == ("still here",)


def test_only_the_types_the_scripts_use_have_literals():
    with pytest.raises(TypeError):
        pg_wire.literal(1.5)  # money is int
    with pytest.raises(TypeError):
        pg_wire.literal(b"bytes")
    with pytest.raises(Exception, match="time zone"):
        pg_wire.literal(datetime(2026, 1, 1))  # a naive time would be read in the session's zone
