"""PostgreSQL connections that outlive a database restart: a checked pool, lost connections
told apart from other failures, and one more try for a read.

A database restart must cost the callers no more than its own downtime. Left to itself, every
pooled connection that idled through the restart fails once with ``AdminShutdown``, and
psycopg_pool, whose reconnection attempts back off (1, 2, 4, … s) while the server is down,
keeps its callers queueing for a connection long after the server answers again. Here:

- Every failure to reach PostgreSQL is ``Unavailable("DATABASE_UNAVAILABLE")``
  (``socai.infra.grpc_errors.database_unavailable`` says which errors those are); a
  connection that died under the caller's statements is ``ConnectionLost``, a kind of it.
- A connection is checked as it is taken out of the pool (``usable``), as psycopg_pool's
  ``check=AsyncConnectionPool.check_connection`` would, except that the round trip is only
  paid when the socket says something happened: a server sends nothing unasked to an idle
  session but its goodbye (``AdminShutdown``, then end of file) and rare notices, so bytes
  waiting on an idle connection are what a restart leaves behind (a poll costs ~1 µs; the
  round trip on every check-out, ~0.1 ms, would be paid by every read). A server that
  vanished without a word (a network partition) leaves nothing to read: the first statement
  finds out, as it would anyway. One stale connection drains the pool: the others idled
  through the same restart.
- After a failure the pool is marked down. While it is, each caller first tries one
  connection of its own (callers arriving meanwhile share it): refused, the call answers
  UNAVAILABLE at once instead of queueing for the pool's timeout; accepted, the database is
  back, and the pool is drained and refilled right away instead of on its back-off schedule
  (which a short ``reconnect_timeout`` also keeps from growing).
- ``read`` runs an idempotent read once more when its connection was lost. A write is never
  run again here: whether it committed is unknown, and its caller retries it under its
  idempotency key.
"""

from __future__ import annotations

import asyncio
import functools
import select
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, ParamSpec, TypeVar

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from socai import errors
from socai.infra.grpc_errors import DATABASE_UNAVAILABLE, database_unavailable
from socai.infra.logging import get_logger

log = get_logger("socai.db")

AConn = psycopg.AsyncConnection[TupleRow]
P = ParamSpec("P")
T = TypeVar("T")

WAIT_S: Final = 10.0  # for a connection of a pool that works but is busy
# psycopg_pool keeps retrying a failed connection with growing pauses for this long; short,
# so that a pool never sleeps through the database's return (the down mark, not the pool's
# schedule, decides when to try again).
RECONNECT_TIMEOUT_S: Final = 2.0
PROBE_CONNECT_TIMEOUT_S: Final = 3


class ConnectionLost(errors.Unavailable):
    """The connection died under the caller's statements (the server restarted, the network
    dropped it). A read may run again on a fresh connection (``read``); whether a write
    committed is unknown."""

    default_code = DATABASE_UNAVAILABLE


def unavailable(exc: BaseException) -> errors.Unavailable:
    """``exc`` (a connection failure) as ``Unavailable("DATABASE_UNAVAILABLE")``."""
    return database_unavailable(exc) or errors.Unavailable(DATABASE_UNAVAILABLE, "PostgreSQL is unavailable")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def lost(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether ``conn`` can no longer be used (closed, or broken by a failure)."""
    return conn.closed or conn.broken


def _has_input(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server sent ``conn`` something while it was idle (see the module docstring)."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


async def usable(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle connection still works: not closed, and, when the server sent it
    something while it was idle, still answering a round trip (an empty query)."""
    if lost(conn):
        return False
    if not _has_input(conn):
        return True
    try:
        await AsyncConnectionPool.check_connection(conn)
    except psycopg.Error:
        return False
    return True


async def read(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()``, run once more when its connection was lost under it (``ConnectionLost``).
    For reads only: a read that ran twice answers as if it ran once."""
    try:
        return await attempt()
    except ConnectionLost as exc:
        log.info("read_retried", error=exc.message)
        return await attempt()


def retried_read(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``fn`` (a read that takes its own connection) run through ``read``."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return await read(lambda: fn(*args, **kwargs))

    return run


class Pool:
    """An ``AsyncConnectionPool`` whose connections are checked when taken out and whose
    failures are ``Unavailable`` (see the module docstring). ``kwargs`` go to every
    connection (``autocommit``, ``application_name``)."""

    def __init__(
        self,
        conninfo: str,
        *,
        name: str,
        min_size: int = 1,
        max_size: int = 8,
        wait_s: float = WAIT_S,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self._conninfo = conninfo
        self._kwargs = dict(kwargs or {})
        self._pool: AsyncConnectionPool[AConn] = AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            kwargs=self._kwargs,
            open=False,
            timeout=wait_s,
            name=name,
            reconnect_timeout=RECONNECT_TIMEOUT_S,
            reconnect_failed=self._reconnect_failed,
        )
        self._down = False
        self._probe: asyncio.Future[str] | None = None
        self._unreachable_why = ""

    @property
    def down(self) -> bool:
        """Whether the last news of the database was a failure to reach it."""
        return self._down

    async def open(self, wait: bool = True, wait_s: float = 30.0) -> None:
        """Start connecting; with ``wait``, until ``min_size`` connections are made (raises
        PoolTimeout after ``wait_s``)."""
        await self._pool.open(wait=wait, timeout=wait_s)

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
        await self._pool.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AConn]:
        """A working connection, given back to the pool afterwards (committed, or rolled back
        after an error, as psycopg_pool's own ``connection`` does).

        Raises Unavailable("DATABASE_UNAVAILABLE") when PostgreSQL cannot be reached or fails
        the statements for want of a connection, ConnectionLost when the connection dies
        under them; other errors (SQL errors, the caller's own) pass through unchanged.
        """
        conn = await self._checkout()
        try:
            async with conn:
                yield conn
        except psycopg.Error as exc:
            if lost(conn):
                self._mark_down(_first_line(exc))
                raise ConnectionLost(DATABASE_UNAVAILABLE, unavailable(exc).message) from exc
            mapped = database_unavailable(exc)
            if mapped is None:
                raise
            raise mapped from exc
        finally:
            await self._pool.putconn(conn)

    async def _checkout(self) -> AConn:
        # Two rounds: the first may find a connection that idled through a restart; the
        # second then starts from a drained pool and a database known to answer.
        for _ in range(2):
            if self._down:
                await self._wait_for_database()
            try:
                conn = await self._pool.getconn()
            except psycopg.OperationalError as exc:  # PoolTimeout, PoolClosed, TooManyRequests
                self._mark_down(_first_line(exc))
                raise unavailable(exc) from exc
            try:
                ok = await usable(conn)
            except BaseException:
                await self._pool.putconn(conn)
                raise
            if ok:
                return conn
            await self._pool.putconn(conn)  # closed: the pool discards and replaces it
            self._mark_down("a pooled connection no longer answers")
            await self._pool.drain()
        raise errors.Unavailable(DATABASE_UNAVAILABLE, "no working connection to PostgreSQL; retry later")

    async def _wait_for_database(self) -> None:
        """One connection attempt of the pool's own, shared by the callers that arrive while
        it runs. Raises Unavailable when it fails; when it works, the database is back: the
        down mark is cleared and the pool drained of the connections made before."""
        probe = self._probe
        if probe is None or probe.done():  # done: its callers were all cancelled; its news is old
            probe = self._probe = asyncio.ensure_future(self._try_connect())
        try:
            why = await asyncio.shield(probe)
        finally:
            if probe.done() and self._probe is probe:
                self._probe = None
        if why:
            raise errors.Unavailable(DATABASE_UNAVAILABLE, f"PostgreSQL is unavailable ({why}); retry later")

    async def _try_connect(self) -> str:
        """Empty when a new connection can be made, else the name of the error that refused it."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._conninfo, **{**self._kwargs, "connect_timeout": PROBE_CONNECT_TIMEOUT_S}
            )
        except psycopg.Error as exc:
            # The driver's words (refused, starting up, bad password …) are for the log, once
            # per change; callers get the error's class only (they hear no server address).
            why = _first_line(exc)
            if why != self._unreachable_why:
                self._unreachable_why = why
                log.warning("database_unreachable", pool=self.name, error=why)
            return type(exc).__name__
        await conn.close()
        self._unreachable_why = ""
        if self._down:
            self._down = False
            log.warning("database_back", pool=self.name)
            await self._pool.drain()
        return ""

    def _mark_down(self, why: str) -> None:
        if not self._down:
            self._down = True
            log.warning("database_down", pool=self.name, why=why)

    async def _reconnect_failed(self, pool: AsyncConnectionPool[Any]) -> None:
        self._mark_down("the pool cannot connect")
