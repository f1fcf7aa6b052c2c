"""Helpers of the lease tests: a recorder of each holder's leases, waiting with a deadline,
and a lease holder run as a child process."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from socai.infra.leases import Lease, LeaseManager, lease_clock

DEADLINE_S = 60.0  # a deadline only: every wait returns as soon as its condition holds


async def wait_until(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():
        if loop.time() > end:
            raise AssertionError(f"gave up waiting ({deadline_s} s) for {what}")
        await asyncio.sleep(0.05)


@dataclass
class Window:
    """One holder's belief in one lease, by its own clock."""

    holder: str
    partition: int
    token: int
    lease: Lease

    @property
    def start(self) -> float:
        return self.lease.acquired_at

    @property
    def end(self) -> float:
        ended = self.lease.ended_at
        return ended if ended is not None else self.lease.valid_until


@dataclass
class Recorder:
    """Collects every lease each manager acquired, and the order of callbacks."""

    windows: list[Window] = field(default_factory=list)
    events: list[tuple[str, str, int, int]] = field(default_factory=list)  # (kind, holder, partition, token)

    def callbacks(self, holder: str, manager: Callable[[], LeaseManager]) -> tuple[object, object]:
        async def on_acquired(partition: int, token: int) -> None:
            lease = manager().lease(partition)
            assert lease is not None and lease.token == token
            self.windows.append(Window(holder, partition, token, lease))
            self.events.append(("acquired", holder, partition, token))

        async def on_lost(partition: int) -> None:
            self.events.append(("lost", holder, partition, 0))

        return on_acquired, on_lost

    def check_one_holder_at_a_time(self) -> None:
        """Per partition: tokens strictly increase from one lease to the next, and each
        lease's window ends (by its holder's clock) before the next one starts."""
        by_partition: dict[int, list[Window]] = {}
        for window in self.windows:
            by_partition.setdefault(window.partition, []).append(window)
        for partition, windows in by_partition.items():
            windows.sort(key=lambda w: w.start)
            for before, after in itertools.pairwise(windows):
                assert after.token > before.token, (partition, before, after)
                assert before.end <= after.start, (
                    f"partition {partition}: {before.holder} believed until {before.end:.3f}, "
                    f"{after.holder} from {after.start:.3f}"
                )

    def check_callbacks_alternate(self) -> None:
        """Per holder and partition: acquired, lost, acquired, lost …"""
        state: dict[tuple[str, int], str] = {}
        for kind, holder, partition, _ in self.events:
            previous = state.get((holder, partition), "lost")
            assert previous != kind, (holder, partition, kind)
            state[(holder, partition)] = kind


def holders_now(managers: dict[str, LeaseManager]) -> dict[int, list[str]]:
    """Who believes, right now, that they hold each partition."""
    believers: dict[int, list[str]] = {}
    for name, manager in managers.items():
        for partition in manager.held():
            believers.setdefault(partition, []).append(name)
    return believers


class Holder:
    """``tests.integration.infra.lease_holder`` as a child process, line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[tuple[float, str]] = []
        self._taken: set[int] = set()

    @classmethod
    async def start(cls, *args: str) -> Holder:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.infra.lease_holder",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "SOCAI_LOG_LEVEL": "warning"},
        )
        return cls(proc)

    async def expect(self, prefix: str, deadline_s: float = DEADLINE_S) -> str:
        """The first line starting with ``prefix`` not returned before (lines read while
        looking for another prefix count: facts may come in either order)."""
        assert self.proc.stdout is not None
        while True:
            for index, (_, line) in enumerate(self.lines):
                if index not in self._taken and line.startswith(prefix):
                    self._taken.add(index)
                    return line
            raw = await asyncio.wait_for(self.proc.stdout.readline(), deadline_s)
            if not raw:
                raise AssertionError(f"holder exited waiting for {prefix!r}; said {self.lines}")
            self.lines.append((lease_clock(), raw.decode().strip()))

    async def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()
