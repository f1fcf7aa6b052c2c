"""The partition of a table: fixed, spread evenly, the same as nats-server's transform."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections import Counter

import pytest
from nats.js import api as js_api

from socai import errors
from socai.infra.partitions import (
    HISTORY_KEY,
    any_partition_subject,
    fnv1a_32,
    history_filters,
    partition_filter,
    partition_of,
    partitioned_stream_config,
    partitions_history,
    partitions_of,
    stored_subject,
    subject_transform,
    with_partitions_history,
)


def test_fnv1a_32_matches_the_published_test_vectors():
    # From the FNV reference (isthe.com/chongo/tech/comp/fnv): "", "a", "foobar".
    assert fnv1a_32(b"") == 0x811C9DC5
    assert fnv1a_32(b"a") == 0xE40C292C
    assert fnv1a_32(b"foobar") == 0xBF9CF968


def test_a_table_keeps_its_partition_in_another_interpreter_with_another_hash_seed():
    ids = [f"table-{i}" for i in range(50)]
    here = [partition_of(t, 16) for t in ids]
    code = f"from socai.infra.partitions import partition_of;print([partition_of(t, 16) for t in {ids!r}])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", **_env()},
    )
    assert out.stdout.strip() == str(here)


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}


@pytest.mark.parametrize("partitions", [2, 8, 16, 32])
def test_ten_thousand_tables_spread_evenly_over_the_partitions(partitions: int):
    counts = Counter(partition_of(f"tbl-{i:05d}", partitions) for i in range(10_000))
    expected = 10_000 / partitions
    assert set(counts) == set(range(partitions))
    # Chi-square against the uniform spread; 3 × the degrees of freedom is far beyond any
    # reasonable hash's value and far below a skewed one's (all in one partition: ~10_000 × (P − 1)).
    chi_square = sum((counts[k] - expected) ** 2 / expected for k in range(partitions))
    assert chi_square < 3 * (partitions - 1) + 20
    assert max(counts.values()) < 1.25 * expected


def test_one_partition_holds_every_table():
    assert {partition_of(f"t{i}", 1) for i in range(100)} == {0}


@pytest.mark.parametrize("partitions", [0, -1, 1025])
def test_a_partition_count_out_of_range_is_refused(partitions: int):
    with pytest.raises(errors.InvalidArgument) as raised:
        partition_of("t1", partitions)
    assert raised.value.code == "BAD_PARTITIONS"


def test_an_empty_table_id_has_no_partition():
    with pytest.raises(errors.InvalidArgument) as raised:
        partition_of("", 8)
    assert raised.value.code == "BAD_TABLE_ID"


def test_the_transform_puts_the_partition_in_a_token_of_its_own():
    transform = subject_transform("socai.events", 8)
    assert transform.src == "socai.events.*.*"
    assert transform.dest == "socai.events.{{partition(8,1)}}.{{wildcard(1)}}.{{wildcard(2)}}"


def test_p_is_read_back_from_the_stream_config():
    config = js_api.StreamConfig(name="SOCAI_EVENTS", subjects=["socai.events.>"])
    assert partitions_of(config, "socai.events") is None
    assert partitions_of(partitioned_stream_config(config, "socai.events", 12), "socai.events") == 12
    assert config.subject_transform is None  # the original is left alone


def test_a_foreign_transform_is_not_taken_for_partitioning():
    config = js_api.StreamConfig(
        name="X",
        subjects=["socai.events.>"],
        subject_transform=js_api.SubjectTransform(src="socai.events.>", dest="x.>"),
    )
    with pytest.raises(errors.PreconditionFailed) as raised:
        partitions_of(config, "socai.events")
    assert raised.value.code == "STREAM_PARTITIONING_UNKNOWN"


def test_subjects_of_a_partitioned_hand():
    k = partition_of("tbl-7", 4)
    assert stored_subject("socai.events", "tbl-7", "h1", 4) == f"socai.events.{k}.tbl-7.h1"
    assert any_partition_subject("socai.events", "tbl-7", "h1") == "socai.events.*.tbl-7.h1"
    assert partition_filter("socai.events", k) == f"socai.events.{k}.*.*"


def test_a_table_is_found_under_every_p_the_stream_had():
    moved = next(f"t{i}" for i in range(100) if partition_of(f"t{i}", 4) != partition_of(f"t{i}", 8))
    stayed = next(f"t{i}" for i in range(100) if partition_of(f"t{i}", 4) == partition_of(f"t{i}", 8))
    k = partition_of(stayed, 8)
    assert history_filters("e", f"e.{stayed}.h1", (8,)) == [f"e.{k}.{stayed}.h1"]
    assert history_filters("e", f"e.{stayed}.h1", (4, 8)) == [f"e.{k}.{stayed}.h1"]  # never moved: literal
    assert history_filters("e", f"e.{moved}.h1", (4, 8)) == [f"e.*.{moved}.h1"]
    assert history_filters("e", f"e.{moved}.*", (0, 8)) == [f"e.{moved}.*", f"e.{partition_of(moved, 8)}.{moved}.*"]
    assert history_filters("e", "e.*.h1", (0, 4, 8)) == ["e.*.h1", "e.*.*.h1"]
    assert history_filters("e", "e.>", (0, 8)) == ["e.>"]
    assert history_filters("e", "other.t.h", (4, 8)) == ["other.t.h"]
    assert history_filters("e", "e.t.h", (0,)) == ["e.t.h"]


def test_the_history_of_p_is_read_from_the_stream_s_metadata_with_the_current_p_last():
    base = partitioned_stream_config(js_api.StreamConfig(name="S", subjects=["e.>"]), "e", 8)
    assert partitions_history(base, "e") == (8,)
    recorded = with_partitions_history(base, (0, 4, 8))
    assert recorded.metadata == {HISTORY_KEY: "0,4,8"}
    assert partitions_history(recorded, "e") == (0, 4, 8)
    back = partitioned_stream_config(recorded, "e", 4)  # P went back to 4: it is the current one
    assert partitions_history(back, "e") == (0, 8, 4)
    with pytest.raises(errors.PreconditionFailed):
        partitions_history(dataclasses.replace(base, metadata={HISTORY_KEY: "4,x"}), "e")
