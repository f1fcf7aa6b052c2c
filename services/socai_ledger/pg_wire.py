"""The ledger's one adapter over psycopg's internals: scripts of several statements sent as
text, and the writer's last round trip with its COPY streams driven on libpq directly.

Why it exists. The write path is the ledger's throughput, and psycopg's general machinery
costs it: client-side binding parses each query and adapts every value through its dumpers,
reading ``cursor.description`` builds a Column object per column of each result, and
``cursor.copy()`` takes two round trips per COPY and a separate query for the rest. Under
load each socket wait is a trip through the event loop's queue behind the handlers parsing
requests, so round trips cost far more than their network time. Here a script's parameters
are rendered as literals (``literal``) and the script goes out as one simple query; the last
script of a batch (COPY statements, updates, COMMIT) is one query whose COPY data is sent as
soon as the server asks for it (``write_script``).

The psycopg internals this module relies on (psycopg 3.3, pinned in ``pyproject.toml``), each
checked by ``tests/integration/ledger/test_pg_wire_guard.py``:

- ``AsyncConnection.lock``: the asyncio lock psycopg holds while it talks on a connection;
  held here so no other psycopg call interleaves with the loop below.
- ``AsyncConnection.wait(gen)``: psycopg's driver of a wait generator (waits on the socket in
  the event loop, cancels the query on interruption).
- ``psycopg.waiting.Wait`` / ``Ready``: the generator protocol's values (what the socket
  must become; what it became), used as bit flags.
- ``psycopg.errors.error_from_result(result, encoding=…)``: a failed result as the exception
  class of its SQLSTATE, as psycopg's own ``execute`` raises it (the batcher retries
  ``SerializationFailure`` and ``DeadlockDetected`` by class).
- ``AsyncConnection.pgconn`` (``psycopg.pq.PGconn``): libpq's nonblocking calls
  ``send_query``, ``flush``, ``consume_input``, ``is_busy``, ``get_result``,
  ``put_copy_data``, ``put_copy_end``, ``error_message``.

Public psycopg API used the ordinary way: ``AsyncClientCursor.execute`` of a script,
``cursor.pgresult``, ``nextset`` and ``fetchall``. Nothing here falls back to a slower path:
if an internal changes, the guard tests fail and so does the write path.

The rendering (``literal``, ``plain_array``, ``text_array``) covers only the types the
ledger's scripts send; ``tests/integration/ledger/test_pg_wire_guard.py`` round-trips awkward
text through a real server.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from datetime import datetime
from typing import Any, Final

import psycopg
from psycopg.pq.abc import PGconn, PGresult
from psycopg.rows import TupleRow
from psycopg.waiting import Ready, Wait

from socai import errors

AConn = psycopg.AsyncConnection[TupleRow]

_TUPLES_OK: Final = psycopg.pq.ExecStatus.TUPLES_OK
_FATAL_ERROR: Final = psycopg.pq.ExecStatus.FATAL_ERROR
_COPY_IN: Final = psycopg.pq.ExecStatus.COPY_IN
# A COPY stream goes to libpq in pieces of at most this size (as psycopg's own copy does).
COPY_CHUNK_BYTES: Final = 128 * 1024


# --- literals -----------------------------------------------------------------------------------


def literal(value: object) -> str:
    """``value`` as an SQL literal, for the ledger's scripts: the types they use only.

    Strings are escape-string literals (``E'…'``, backslash and quote doubled), which read
    the same whatever ``standard_conforming_strings`` says. A NUL cannot be sent in a query
    at all (validated text holds none), so it is refused here as psycopg would refuse it:
    ``psycopg.DataError``. Raises TypeError for any other type.
    """
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        # In parentheses when negative: a cast binds tighter than the minus, and -2^63 cast
        # as a positive number first is out of range (``-9223372036854775808::int8``).
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, str):
        if "\x00" in value:
            raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    if isinstance(value, datetime):
        errors.check(value.tzinfo is not None, "a timestamptz literal has a time zone")
        return f"'{value.isoformat()}'::timestamptz"
    raise TypeError(f"no SQL literal for {type(value).__name__}")


def render(sql: str, params: Sequence[object]) -> str:
    """``sql`` with each ``%s`` replaced by the literal of the next parameter (the ledger's
    statements hold no other ``%``)."""
    return sql % tuple([literal(value) for value in params]) if params else sql


def _quoted(value: str | None) -> str:
    """One element of a PostgreSQL array literal (any text; None is NULL)."""
    if value is None:
        return "NULL"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def text_array(values: Iterable[str | None]) -> str:
    """The text of an array literal of any texts (None is NULL); sent as a ``literal``."""
    return "{" + ",".join(map(_quoted, values)) + "}"


def array(values: Iterable[object]) -> str:
    """An array literal of values that need no quoting (ints, UUIDs, account ids; None is NULL)."""
    return "{" + ",".join("NULL" if v is None else str(v) for v in values) + "}"


def plain_array(values: Iterable[object]) -> str:
    """``array`` of values none of which is None."""
    return "{" + ",".join(map(str, values)) + "}"


# --- scripts ------------------------------------------------------------------------------------


async def script(conn: AConn, sql: str, params: Sequence[object], *, skip: int = 0) -> list[list[tuple[Any, ...]]]:
    """Several statements in one round trip: the rows of each, in order (the first ``skip``
    results are not read: ``[]``).

    The simple query protocol takes many statements at once. Not a pipeline: psycopg's async
    pipeline polls for "readable or writable" while it waits for results, and a socket is
    always writable, so it spins the CPU for every round trip.
    """
    async with psycopg.AsyncClientCursor(conn) as cur:
        await cur.execute(render(sql, params))
        results: list[list[tuple[Any, ...]]] = []
        position = 0
        while True:
            result = cur.pgresult
            if position >= skip and result is not None and result.status == _TUPLES_OK:
                results.append(await cur.fetchall())
            else:
                results.append([])
            position += 1
            if not cur.nextset():
                return results


async def write_script(conn: AConn, sql: str, params: Sequence[object], copies: Sequence[Callable[[], bytes]]) -> None:
    """One simple query holding COPY … FROM STDIN statements and others; ``copies`` make the
    COPY streams, in the order of the COPY statements in ``sql``.

    The server runs the statements back to back, stopping only to ask for each COPY's data,
    which goes out as soon as it is asked for; each stream is made while the server works on
    what went out before it (the query, the previous stream). Raises the psycopg error of the
    first statement that failed (the server skips the rest of the query); the transaction is
    then left failed for the caller to roll back.
    """
    text = render(sql, params).encode()
    async with conn.lock:
        results = await conn.wait(_write_gen(conn.pgconn, text, copies))
    for result in results:
        if result.status == _FATAL_ERROR:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


def _write_gen(
    pgconn: PGconn, query: bytes, copies: Sequence[Callable[[], bytes]]
) -> Generator[Wait, Ready | int, list[PGresult]]:
    """Send ``query`` and answer each of its COPY FROM STDIN with the stream the next of
    ``copies`` makes (as soon as what went before is sent); the results of the other
    statements. A psycopg wait generator (``AsyncConnection.wait`` drives it): it yields
    what the socket must become (readable, writable) and gets back what it became.
    """
    makers = list(reversed(copies))
    upcoming: bytes | None = None  # the next COPY stream, made before the server asks for it
    results: list[PGresult] = []
    pgconn.send_query(query)
    while True:
        while pgconn.flush():  # 1: more to send; the server may be answering meanwhile
            if (yield Wait.RW) & Ready.R:
                pgconn.consume_input()
        if upcoming is None and makers:
            upcoming = makers.pop()()
        pgconn.consume_input()
        while pgconn.is_busy():
            yield Wait.R
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            return results
        if result.status != _COPY_IN:
            results.append(result)
            continue
        errors.check(upcoming is not None, "a COPY stream for every COPY statement")
        assert upcoming is not None
        data, upcoming = memoryview(upcoming), None
        for start in range(0, len(data), COPY_CHUNK_BYTES):
            while not _queued(pgconn, pgconn.put_copy_data(data[start : start + COPY_CHUNK_BYTES])):
                yield Wait.W
        while not _queued(pgconn, pgconn.put_copy_end()):
            yield Wait.W


def _queued(pgconn: PGconn, status: int) -> bool:
    """libpq's answer to a COPY write: queued (1), not now (0: nonblocking, wait until the
    socket is writable), or failed (-1: the connection is broken)."""
    if status < 0:
        raise psycopg.OperationalError(f"COPY failed: {pgconn.error_message.decode(errors='replace')}")
    return status == 1
