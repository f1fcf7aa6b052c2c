"""The test order for xdist's worksteal scheduler (tests/support/schedule.py)."""

from __future__ import annotations

import pytest

from tests.support.schedule import block_sizes, worksteal_order


@pytest.mark.parametrize(("count", "workers"), [(10, 3), (2584, 3), (7, 2), (5, 4), (0, 3)])
def test_blocks_cover_the_collection_as_xdist_splits_it(count: int, workers: int):
    sizes = block_sizes(count, workers)
    assert sum(sizes) == count and len(sizes) == workers
    assert max(sizes) - min(sizes) <= 1


def test_each_block_starts_with_its_share_of_the_slow_tests_and_nothing_is_lost():
    items = [f"fast{i}" for i in range(20)] + ["slowA", "slowB", "slowC", "slowD"] + [f"late{i}" for i in range(6)]
    order = worksteal_order(items, 3, lambda name: name.startswith("slow"))
    assert sorted(order) == sorted(items)
    blocks, start = [], 0
    for size in block_sizes(len(items), 3):
        blocks.append(order[start : start + size])
        start += size
    assert [b[: 2 if i == 0 else 1] for i, b in enumerate(blocks)] == [["slowA", "slowD"], ["slowB"], ["slowC"]]
    fast = [name for name in order if not name.startswith("slow")]
    assert fast == [name for name in items if not name.startswith("slow")]  # the rest keep their order


def test_one_worker_or_too_many_slow_tests_put_the_slow_ones_first():
    items = ["a", "S1", "b", "S2"]
    assert worksteal_order(items, 1, lambda n: n.startswith("S")) == ["S1", "S2", "a", "b"]
    assert worksteal_order(items, 2, lambda n: n.startswith("S")) == ["S1", "a", "S2", "b"]
    all_slow = ["S1", "S2", "S3", "S4", "S5"]
    assert worksteal_order(all_slow, 3, lambda n: True) == all_slow
