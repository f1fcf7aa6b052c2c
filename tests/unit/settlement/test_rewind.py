"""Where settlement's durables start again after a restore (``socai_settlement.rewind``)."""

from __future__ import annotations

from socai.infra.partitions import partition_of
from socai_settlement.rewind import start_seqs


def test_one_durable_starts_right_after_the_newest_hand_recorded() -> None:
    assert start_seqs([("t1", 40), ("t2", 95), ("t3", 12)], 0) == {0: 96}


def test_with_nothing_recorded_a_durable_reads_its_filter_from_the_start() -> None:
    assert start_seqs([], 0) == {0: 1}
    assert start_seqs([], 4) == {0: 1, 1: 1, 2: 1, 3: 1}


def test_each_partition_starts_after_its_own_newest_hand_not_another_partitions() -> None:
    tables = [f"t{i}" for i in range(40)]
    newest = [(t, 100 + i) for i, t in enumerate(tables)]
    starts = start_seqs(newest, 4)
    for k in range(4):
        mine = [seq for t, seq in newest if partition_of(t, 4) == k]
        # A lagging partition must not be started at another partition's newest hand: its
        # hands between the two would never be settled.
        assert starts[k] == (max(mine) + 1 if mine else 1), k
