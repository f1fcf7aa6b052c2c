"""The event log on a partitioned stream (issue 19): writers and readers keep naming hands by
their canonical subject; the stream stores them under their partition, and the log maps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from socai import errors
from socai.events.log import EventLog
from socai.events.model import Event, Passed
from socai.infra.nats import StreamSpec, ensure_stream
from socai.infra.partitions import partition_of

pytestmark = pytest.mark.integration
AT = datetime(2026, 11, 29, tzinfo=UTC)
P = 4


@pytest.fixture
async def spec(stream_spec: StreamSpec) -> StreamSpec:
    return StreamSpec(stream_spec.name, stream_spec.subjects, partitions=P)


@pytest.fixture
async def log(nats_client: object, spec: StreamSpec) -> AsyncIterator[EventLog]:
    prefix = spec.subjects[0].removesuffix(".>")
    event_log = EventLog(nats_client, spec.name, prefix)  # type: ignore[arg-type]
    await ensure_stream(event_log.js, spec)
    yield event_log
    await event_log.js.delete_stream(spec.name)


def ev(table: str, hand: str, seq: int) -> Event:
    return Event(table, hand, seq, "tienlen", AT, Passed(seq % 3))


async def test_hands_are_stored_under_their_partition_and_read_back_by_their_canonical_subject(log: EventLog):
    tables = [f"t{i}" for i in range(12)]
    last: dict[str, int] = {}
    for seq in range(1, 4):
        for t in tables:
            last[t] = await log.append(ev(t, f"{t}-h1", seq), last.get(t, 0))
    assert await log.layout() == P
    for t in tables:
        stored = await log.read_hand(t, f"{t}-h1")
        assert [s.event.seq for s in stored] == [1, 2, 3] and {s.event.table_id for s in stored} == {t}
        msg = await log.js.get_last_msg(log.stream, f"{log.prefix}.{partition_of(t, P)}.{t}.{t}-h1", direct=True)
        assert int(msg.seq or 0) == last[t]  # really stored under its partition
        assert (await log.last(log.subject_of(t, f"{t}-h1")))[0] == last[t]  # type: ignore[index]
    # a filter by table, a filter by hand id across tables, and everything
    assert len([s async for s in log.read(log.subject_of("t3", "*"))]) == 3
    assert [s.event.table_id async for s in log.read(f"{log.prefix}.*.t5-h1")] == ["t5"] * 3
    assert len([s async for s in log.read(f"{log.prefix}.>")]) == 36


async def test_one_writer_per_hand_still_holds_on_a_partitioned_stream(log: EventLog):
    first = await log.append(ev("t1", "t1-h1", 1), 0)
    await log.append(ev("t1", "t1-h1", 2), first)
    with pytest.raises(errors.Conflict):
        await log.append(ev("t1", "t1-h1", 3), first)  # a second writer's stale view
    # a retry of the stored event after a lost ack is recognised as its own
    assert await log.append(ev("t1", "t1-h1", 2), first) > first


async def test_the_partitioning_of_a_stream_changes_only_on_purpose(log: EventLog, spec: StreamSpec):
    with pytest.raises(errors.PreconditionFailed) as refused:
        await ensure_stream(log.js, StreamSpec(spec.name, spec.subjects, partitions=P * 2))
    assert refused.value.code == "STREAM_PARTITIONS_DIFFER"
    with pytest.raises(errors.PreconditionFailed):
        await ensure_stream(log.js, StreamSpec(spec.name, spec.subjects, partitions=0))
    await ensure_stream(log.js, spec)  # the same P: nothing to do
    info = await ensure_stream(log.js, StreamSpec(spec.name, spec.subjects, partitions=P * 2), allow_repartition=True)
    fresh = EventLog(log.nc, spec.name, log.prefix)
    assert await fresh.layout() == P * 2
    assert info.config.subject_transform is not None
