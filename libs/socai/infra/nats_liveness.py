"""A NATS connection that cannot die silently: the one module that touches nats-py's
connection internals (``socai.infra.nats_pull`` is the other adapter, for message frames).

nats-py 2.16 matches each PONG to the oldest waiting PING future and calls ``set_result``
on it. A ``flush(timeout=…)`` or ``rtt(…)`` that times out (or whose caller is cancelled)
cancels its future but leaves it in that queue; when the server answers at last — a
nats-server paused past the timeout and continued — ``_process_pong`` raises
``InvalidStateError`` inside the client's read loop, the loop ends, and nothing else
notices: the socket stays open, ``is_connected`` stays true, no callback fires and no
reconnect starts. Every request from then on times out (a settlement instance's lease
renewals, forever). nats-py calls ``flush`` itself after a reconnect and in ``drain``, so
not calling it is not enough. Three things here:

- ``harden(nc)``: ``connect`` (``socai.infra.nats``) replaces the client's
  ``_process_pong`` with one that pops the oldest future as nats-py does but resolves it
  only when nobody gave up on it yet: the PONG is still the answer to that PING;
- ``round_trip(nc, timeout_s)``: a PING/PONG that never cancels its future (it stays in
  the queue and is resolved by its PONG, or dropped with the queue at a reconnect), for
  the pull subscription's stop;
- ``ConnectionWatch``: a supervised task a service runs beside its client. Every
  ``every_s`` it checks that the read loop still runs and that its last PING was answered
  within ``stale_after_s``; if not, it forces the reconnect nats-py would have started had
  it noticed (``_process_op_err``: the socket is closed, the client reconnects and
  subscribes again). Only while the client believes it is connected: a client that is
  reconnecting is nats-py's business. Should a forced reconnect be impossible (another
  nats-py) or keep failing (``DEAD_AFTER_RECOVERIES`` in a row without an answered PING),
  it calls ``on_dead``: a service process then exits and its supervisor starts it again
  (``socai.infra.service``).

``tests/integration/test_nats_liveness.py`` pins each internal on the pinned nats-py
(``pyproject.toml``) and the failure itself: an unhardened client's read loop dies of a
timed-out flush and a late PONG, a hardened one's does not, and the watch brings a dead
client back.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Callable
from typing import Any, Final

import nats.errors
from nats.aio.client import Client as NatsClient
from prometheus_client import Counter

from socai.infra.logging import get_logger

log = get_logger("socai.nats_liveness")

EVERY_S: Final = 1.0  # how often the watch looks (and sends its PING when none is waiting)
STALE_AFTER_S: Final = 15.0  # a PING unanswered this long on a connected client: reconnect
DEAD_AFTER_RECOVERIES: Final = 3  # forced reconnects in a row with no PONG between: give up
RECOVERIES = Counter(
    "socai_nats_connection_recoveries_total",
    "Reconnects the connection watch forced on a NATS client that looked connected but was not, by reason",
    ["client", "reason"],
)
READ_LOOP_DEAD: Final = "read_loop_dead"
PONG_OVERDUE: Final = "pong_overdue"

OnDead = Callable[[str], None]


def _default_on_dead(why: str) -> None:
    log.error("nats_connection_dead", why=why, action="none: no supervisor hook set")


_process_on_dead: list[OnDead] = [_default_on_dead]


def set_process_on_dead(hook: OnDead) -> None:
    """What a watch without its own ``on_dead`` calls: ``socai.infra.service.run`` sets a
    hook that stops the process with a failure status (its supervisor restarts it)."""
    _process_on_dead[0] = hook


def _coroutine_without_parameters(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) and not inspect.signature(fn).parameters


def harden(nc: NatsClient) -> bool:
    """Let ``nc``'s read loop survive a PONG whose PING's waiter gave up (see the module
    docstring). False (and a warning) when this nats-py's ``_process_pong`` is not the one
    this was written for: the watch still recovers a client whose read loop died."""
    original = getattr(nc, "_process_pong", None)
    if getattr(nc, "_socai_hardened", False):
        return True
    if not _coroutine_without_parameters(original) or not isinstance(getattr(nc, "_pongs", None), list):
        log.warning("nats_pong_unguarded", why="nats-py's Client._process_pong or _pongs is not what this expects")
        return False

    async def process_pong() -> None:
        pongs: list[asyncio.Future[Any]] = nc._pongs
        if pongs:
            future = pongs.pop(0)
            if not future.done():  # a flush or rtt that timed out cancelled it: nobody waits
                future.set_result(True)
            nc._pongs_received += 1
            nc._pings_outstanding = 0

    nc._process_pong = process_pong  # type: ignore[method-assign]
    nc._socai_hardened = True  # type: ignore[attr-defined]
    return True


def read_loop_alive(nc: NatsClient) -> bool:
    """Whether ``nc``'s read loop is running (False too when this nats-py has none to see)."""
    task = getattr(nc, "_reading_task", None)
    return isinstance(task, asyncio.Task) and not task.done()


def _send_ping(nc: NatsClient) -> asyncio.Future[Any] | None:
    """Queue a PING whose PONG resolves the returned future (None: cannot send now)."""
    send = getattr(nc, "_send_ping", None)
    if send is None or not nc.is_connected or getattr(nc, "_transport", None) is None:
        return None
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(send(future))
    task.add_done_callback(_retrieve)
    return future


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # a PING that could not be written: the watch sees no PONG


async def round_trip(nc: NatsClient, timeout_s: float) -> bool:
    """Whether the server answered a PING within ``timeout_s``: every message it sent this
    client before that PONG has been read by then. Unlike ``nc.flush(timeout=…)`` a timeout
    leaves the PING's future pending, to be resolved by its PONG."""
    future = _send_ping(nc)
    if future is None:
        return False
    try:
        await asyncio.wait_for(asyncio.shield(future), timeout_s)
    except TimeoutError:
        return False
    return True


async def force_reconnect(nc: NatsClient, why: str) -> bool:
    """Close ``nc``'s socket and let nats-py reconnect as it would after a read error.
    False when this nats-py offers no way to (the caller gives up on the client)."""
    process_op_err = getattr(nc, "_process_op_err", None)
    if process_op_err is None or not inspect.iscoroutinefunction(process_op_err):
        return False
    await process_op_err(nats.errors.StaleConnectionError(why))
    return True


class ConnectionWatch:
    """Keeps one client honest (see the module docstring); ``start``/``stop``, or ``check``
    step by step. ``name`` labels its log lines and ``socai_nats_connection_recoveries_total``."""

    def __init__(
        self,
        nc: NatsClient,
        name: str,
        *,
        every_s: float = EVERY_S,
        stale_after_s: float = STALE_AFTER_S,
        on_dead: OnDead | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nc = nc
        self.name = name
        self.every_s = every_s
        self.stale_after_s = stale_after_s
        self.on_dead = on_dead
        self.clock = clock
        self.recoveries = 0  # forced reconnects since the last answered PING
        self.dead = False
        self._ping: asyncio.Future[Any] | None = None
        self._ping_sent = 0.0
        self._ping_reconnects = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"nats-watch-{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while not self.nc.is_closed and not self.dead:
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the watch must outlive whatever the client does
                log.warning("nats_watch_failed", client=self.name, error=repr(exc))
            await asyncio.sleep(self.every_s)

    async def check(self) -> str | None:
        """One look: the reason a reconnect was forced now (None: nothing to do)."""
        nc = self.nc
        if nc.is_closed or not nc.is_connected:
            self._ping = None  # reconnecting: nats-py's own business, and its PING queue is new
            return None
        reconnects = nc.stats.get("reconnects", 0)
        if self._ping is not None and self._ping_reconnects != reconnects:
            self._ping = None  # sent on a connection that is gone: its future was dropped with it
        if not read_loop_alive(nc):
            return await self._recover(READ_LOOP_DEAD)
        now = self.clock()
        if self._ping is not None and self._ping.done():
            self._ping = None
            self.recoveries = 0
        if self._ping is None:
            self._ping = _send_ping(nc)
            self._ping_sent, self._ping_reconnects = now, reconnects
            return None
        if now - self._ping_sent > self.stale_after_s:
            return await self._recover(PONG_OVERDUE)
        return None

    async def _recover(self, reason: str) -> str:
        self._ping = None
        self.recoveries += 1
        RECOVERIES.labels(self.name, reason).inc()
        log.warning("nats_connection_recovering", client=self.name, reason=reason, attempt=self.recoveries)
        if self.recoveries > DEAD_AFTER_RECOVERIES or not await force_reconnect(self.nc, reason):
            self.dead = True
            why = f"{self.name}: {reason}, {self.recoveries} forced reconnects did not bring it back"
            (self.on_dead or _process_on_dead[0])(why)
        return reason
