"""The order of the tests for pytest-xdist's ``worksteal`` scheduler (the Makefile's run).

``worksteal`` gives the idle workers contiguous blocks of the collection at the start
(worker ``i`` of ``W`` takes ``len(pending) // (W - i)`` of what is left), and a worker
that runs dry takes the second half of the longest queue. Putting every slow test first
loads them all into the first block, where one worker runs them one after the other while
the others steal its fast tail: the run ended with the heaviest tests (10,000 self-played
hands, 100,000 Mậu Binh deals) running last. Here each block starts with its share of the
slow tests, dealt in turn, and is filled up with the rest in collection order; stealing,
which takes from the end of a queue, then moves only fast tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def block_sizes(count: int, workers: int) -> list[int]:
    """How many tests each worker gets at the start, as xdist's worksteal splits them."""
    sizes = []
    left = count
    for i in range(workers):
        size = left // (workers - i)
        sizes.append(size)
        left -= size
    return sizes


def worksteal_order(items: Sequence[T], workers: int, is_slow: Callable[[T], bool]) -> list[T]:
    """``items`` reordered so that each worker's first block begins with its share of the slow ones."""
    slow = [item for item in items if is_slow(item)]
    rest = [item for item in items if not is_slow(item)]
    if workers < 2:
        return slow + rest
    sizes = block_sizes(len(items), workers)
    shares = [slow[i::workers] for i in range(workers)]
    if any(len(share) > size for share, size in zip(shares, sizes, strict=True)):
        return slow + rest  # more slow tests than a block holds: nothing to balance
    order: list[T] = []
    taken = 0
    for share, size in zip(shares, sizes, strict=True):
        fill = size - len(share)
        order += share + rest[taken : taken + fill]
        taken += fill
    return order
