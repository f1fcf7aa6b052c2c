"""When a table acts without a player: the hand's timer and the automatic start.

This module runs the clocks; how long a hand waits (``timeout_s_for``) and what its timer's
expiry writes (``TimerExpired``: ``core.TimerFired``) are the table core's, and a new hand
the table's to write, under its lock (``socai_table.table``). Missed heartbeats are the table
core's (``socai_table.core.missed_heartbeats``). The manager's watchdog supervises both: it
checks heartbeats and calls ``Table.heal``, which re-arms a timer or reschedules a start
that a failure lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from socai.events.model import TimerExpired
from socai.infra import tracing
from socai_table.core import timeout_s_for, timer_expired

__all__ = ["HEARTBEAT_TIMEOUT_S", "AutoStart", "HandTimer", "timeout_s_for"]

HEARTBEAT_TIMEOUT_S = 10.0


class HandTimer:
    """The one timer of a table's hand in play.

    Each ``arm`` starts a new generation and cancels the one before; a timer that fires
    hands its generation to the callback, which must check ``is_current`` under the
    table's lock (a command may have moved the hand on while the timer waited for it).
    """

    @staticmethod
    def expired(module: Any, state: Any, seat: int, timer: str) -> TimerExpired:
        """``core.timer_expired``: what the table writes for ``seat`` when this timer runs out."""
        return timer_expired(module, state, seat, timer)

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.generation = 0
        self.deadline: float = 0.0  # wall-clock seconds, shown to clients; 0 = none armed

    def arm(self, timeout_s: float, fire: Callable[[int], Awaitable[None]]) -> None:
        self.cancel()
        self.generation += 1
        self.deadline = time.time() + timeout_s
        self.task = asyncio.get_running_loop().create_task(self._sleep_then(self.generation, timeout_s, fire))

    def cancel(self) -> None:
        task = self.task
        self.task = None
        self.deadline = 0.0
        # The firing timer itself may cancel its own generation (it advances the hand and
        # re-arms): cancelling the running task would interrupt the very append it makes.
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()

    def is_current(self, generation: int) -> bool:
        return generation == self.generation

    @property
    def armed(self) -> bool:
        return self.task is not None and not self.task.done()

    @staticmethod
    async def _sleep_then(generation: int, timeout_s: float, fire: Callable[[int], Awaitable[None]]) -> None:
        await asyncio.sleep(timeout_s)
        # Its own trace, linked to the call that armed it (the task inherited that call's span).
        with tracing.new_trace("socai.table", "timer expired"):
            await fire(generation)


class AutoStart:
    """The pending automatic start of a table's next hand: at most one at a time."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None

    def schedule(self, delay_s: float, start: Callable[[], Awaitable[None]]) -> None:
        """Run ``start`` after ``delay_s`` unless a start is already on its way."""
        running = self.task
        # A hand can end inside its own auto-start (everyone all-in from the blinds): the
        # running task is then this very call's caller, about to finish, and must not stop
        # the next hand from being scheduled.
        if running is not None and not running.done() and running is not asyncio.current_task():
            return
        self.task = asyncio.get_running_loop().create_task(self._sleep_then(delay_s, start))

    @property
    def pending(self) -> bool:
        return self.task is not None and not self.task.done()

    def cancel(self) -> None:
        if self.task is not None and not self.task.done() and self.task is not asyncio.current_task():
            self.task.cancel()

    @staticmethod
    async def _sleep_then(delay_s: float, start: Callable[[], Awaitable[None]]) -> None:
        await asyncio.sleep(delay_s)
        with tracing.new_trace("socai.table", "hand auto start"):
            await start()
