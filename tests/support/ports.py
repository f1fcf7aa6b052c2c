"""Ports for the tests' servers, below the kernel's ephemeral range and split by xdist worker.

``socai_cli.embedded.free_port`` asks the kernel for a free port, which comes from the
ephemeral range: the range every outgoing connection of the machine also draws its local
port from. A test that picks a port and starts a server on it seconds later (a ``socai up``
stack on a loaded machine) can find it taken by then, by a client connection of its own or
of another xdist worker. Ports below that range are never handed out by the kernel, so here
each process walks its own share of them (one share per xdist worker), from a random start,
and returns the next one that is free now.
"""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

from socai_cli.embedded import free_port as kernel_free_port
from socai_cli.embedded import port_is_free

LOWEST = 20_000  # above the well-known services a developer's machine may run
SHARE_MIN = 500  # below this many ports a share, fall back to the kernel's free ports


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _share() -> range:
    """This process's ports: its xdist worker's slice of [LOWEST, ephemeral start)."""
    top = _ephemeral_start()
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    size = (top - LOWEST) // max(workers, 1)
    start = LOWEST + size * (index % max(workers, 1))
    return range(start, start + size)


class _Ports:
    def __init__(self) -> None:
        self.share = _share()
        self.lock = threading.Lock()
        self.next = random.randrange(len(self.share)) if len(self.share) else 0

    def block(self, size: int) -> int:
        """The first of ``size`` consecutive ports that are all free now."""
        if len(self.share) < SHARE_MIN:
            return kernel_free_port()
        with self.lock:
            for _ in range(len(self.share)):
                first = self.share[self.next % len(self.share)]
                self.next = (self.next + size) % len(self.share)
                if first + size <= self.share.stop and all(port_is_free(p) for p in range(first, first + size)):
                    return first
        raise RuntimeError(f"no {size} free ports in a row in {self.share}")


_ports = _Ports()


def free_port() -> int:
    """A port free now, outside the ephemeral range, not handed out before by this process
    (until its share wraps around)."""
    return _ports.block(1)


def free_ports(size: int) -> int:
    """The first of ``size`` consecutive free ports (a metrics block: base + each offset)."""
    return _ports.block(size)
