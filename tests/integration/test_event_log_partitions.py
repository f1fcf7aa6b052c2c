"""The event log on a partitioned stream (issue 19): writers and readers keep naming hands by
their canonical subject; the stream stores them under their partition, and the log maps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from socai import errors
from socai.events.log import EventLog
from socai.events.model import Event, Passed
from socai.infra.nats import StreamSpec, ensure_stream, publish
from socai.infra.partitions import HISTORY_KEY, partition_of

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


# --- a change of P (the migration) ---------------------------------------------------------


def moved(before: int, after: int, count: int) -> list[str]:
    """Tables whose partition changes from P = ``before`` to ``after`` (0: unpartitioned)."""
    tables = (f"m{i}" for i in range(10_000))
    return [t for t in tables if before == 0 or partition_of(t, before) != partition_of(t, after)][:count]


async def fill(log: EventLog, tables: list[str], events: int) -> dict[str, int]:
    """``events`` events of hand ``<t>-h`` at each table; the last stream sequence of each."""
    last: dict[str, int] = {}
    for seq in range(1, events + 1):
        for t in tables:
            last[t] = await log.append(ev(t, f"{t}-h", seq), last.get(t, 0))
    return last


async def repartition(log: EventLog, spec: StreamSpec, partitions: int) -> EventLog:
    """Change P as ``socai migrate --repartition`` does; a process started afterwards."""
    await ensure_stream(log.js, StreamSpec(spec.name, spec.subjects, partitions=partitions), allow_repartition=True)
    return EventLog(log.nc, spec.name, log.prefix)


@pytest.fixture
async def flat(nats_client: object, stream_spec: StreamSpec) -> AsyncIterator[EventLog]:
    """An event log on an unpartitioned stream (P = 0)."""
    prefix = stream_spec.subjects[0].removesuffix(".>")
    event_log = EventLog(nats_client, stream_spec.name, prefix)  # type: ignore[arg-type]
    await ensure_stream(event_log.js, stream_spec)
    yield event_log
    await event_log.js.delete_stream(stream_spec.name)


async def test_the_server_checks_the_expected_sequence_against_the_new_partition_only(log: EventLog, spec: StreamSpec):
    """Why the log names a check subject after a change of P: the plain header compares with
    the stored subject under the new partition, which holds nothing of the table yet, so the
    table's real last sequence is refused and 0 — any writer's guess — is let in."""
    (t,) = moved(P, P * 2, 1)
    last = (await fill(log, [t], 2))[t]
    await ensure_stream(log.js, StreamSpec(spec.name, spec.subjects, partitions=P * 2), allow_repartition=True)
    subj = log.subject_of(t, f"{t}-h")
    with pytest.raises(errors.Conflict):
        await publish(log.js, subj, b"x", msg_id="a", expected_last_subject_seq=last, stream=log.stream)
    ack = await publish(log.js, subj, b"y", msg_id="b", expected_last_subject_seq=0, stream=log.stream)
    assert ack.seq > last  # a second writer got in: the hole the log's check subject closes


@pytest.mark.parametrize(("before", "after"), [(P, P * 2), (P * 2, P - 1), (0, P * 2)])
async def test_a_table_is_read_across_a_change_of_p_and_extended_by_one_writer(
    nats_client: object, stream_spec: StreamSpec, before: int, after: int
):
    spec = StreamSpec(stream_spec.name, stream_spec.subjects, partitions=before)
    old = EventLog(nats_client, spec.name, spec.subjects[0].removesuffix(".>"))  # type: ignore[arg-type]
    await ensure_stream(old.js, spec)
    try:
        tables = moved(before, after, 6)
        last = await fill(old, tables, 3)
        new = await repartition(old, spec, after)
        assert await new.layout() == after and new.history == (before, after)
        for t in tables:
            stored = await new.read_hand(t, f"{t}-h")
            assert [s.event.seq for s in stored] == [1, 2, 3]
            assert (await new.last(new.subject_of(t, f"{t}-h")))[0] == last[t]  # type: ignore[index]
        # a writer that read the table before the change (its view is current) goes on...
        t0 = tables[0]
        seq4 = await new.append(ev(t0, f"{t0}-h", 4), last[t0])
        # ...and a stale view is refused, here and under the new partition alike
        other = Event(t0, f"{t0}-h", 4, "tienlen", AT, Passed(7))  # another writer's 4th event
        with pytest.raises(errors.Conflict):
            await new.append(other, last[t0])
        with pytest.raises(errors.Conflict):
            await old.append(other, last[t0])
        assert await new.append(ev(t0, f"{t0}-h", 5), seq4) > seq4
        assert [s.event.seq for s in await new.read_hand(t0, f"{t0}-h")] == [1, 2, 3, 4, 5]
        # by table across the change, and everything
        assert len([s async for s in new.read(new.subject_of(t0, "*"))]) == 5
        assert len([s async for s in new.read(f"{new.prefix}.>")]) == 3 * len(tables) + 2
    finally:
        await old.js.delete_stream(spec.name)


@pytest.mark.parametrize(("before", "after"), [(P, P * 2), (0, P * 2)])
async def test_two_writers_racing_for_a_table_after_a_change_of_p_never_both_append(
    nats_url: str, stream_spec: StreamSpec, before: int, after: int
):
    """Two processes rebuilt the same tables after the change and append at once: for every
    table exactly one is stored, the other is refused, and the table's history has no fork."""
    from socai.infra.nats import connect

    spec = StreamSpec(stream_spec.name, stream_spec.subjects, partitions=before)
    prefix = spec.subjects[0].removesuffix(".>")
    ncs = [await connect(nats_url, name=f"writer-{i}") for i in range(2)]
    try:
        setup = EventLog(ncs[0], spec.name, prefix)
        await ensure_stream(setup.js, spec)
        tables = moved(before, after, 20)
        last = await fill(setup, tables, 2)
        await ensure_stream(setup.js, StreamSpec(spec.name, spec.subjects, partitions=after), allow_repartition=True)
        writers = [EventLog(nc, spec.name, prefix) for nc in ncs]
        reader = EventLog(ncs[0], spec.name, prefix)  # started after the change, as the runbook says

        async def attempt(writer: EventLog, t: str, who: int) -> int | None:
            event = Event(t, f"{t}-h", 3, "tienlen", AT, Passed(who))
            try:
                return await writer.append(event, last[t])
            except errors.Conflict:
                return None

        for t in tables:
            outcomes = await asyncio.gather(*(attempt(w, t, i) for i, w in enumerate(writers)))
            assert sum(o is not None for o in outcomes) == 1, (t, outcomes)
            stored = await reader.read_hand(t, f"{t}-h")
            assert [s.event.seq for s in stored] == [1, 2, 3]
            winner = next(i for i, o in enumerate(outcomes) if o is not None)
            assert stored[-1].event.body == Passed(winner)
    finally:
        await ncs[0].jetstream().delete_stream(spec.name)
        for nc in ncs:
            await nc.close()


async def test_the_history_of_p_survives_updates_and_only_a_stream_with_events_records_it(
    log: EventLog, spec: StreamSpec
):
    info = await ensure_stream(log.js, StreamSpec(spec.name, spec.subjects, partitions=2), allow_repartition=True)
    assert HISTORY_KEY not in (info.config.metadata or {})  # empty: nothing to find under P = 4
    await fill(log, ["a", "b"], 1)
    await ensure_stream(log.js, StreamSpec(spec.name, spec.subjects, partitions=P), allow_repartition=True)
    changed = StreamSpec(spec.name, spec.subjects, partitions=P, duplicate_window_s=60.0)
    info = await ensure_stream(log.js, changed)  # another field changes: the record stays
    assert info.config.duplicate_window == 60.0
    assert (info.config.metadata or {})[HISTORY_KEY] == f"2,{P}"
    await ensure_stream(log.js, StreamSpec(spec.name, spec.subjects, partitions=2), allow_repartition=True)
    fresh = EventLog(log.nc, spec.name, log.prefix)
    assert await fresh.layout() == 2 and fresh.history == (P, 2)


@pytest.mark.parametrize("before", [P, 0])
async def test_the_auditor_reads_a_table_under_every_p_it_had(
    nats_client: object, stream_spec: StreamSpec, before: int
):
    from socai.audit.export import EventFilter, read_stream

    spec = StreamSpec(stream_spec.name, stream_spec.subjects, partitions=before)
    old = EventLog(nats_client, spec.name, spec.subjects[0].removesuffix(".>"))  # type: ignore[arg-type]
    await ensure_stream(old.js, spec)
    try:
        tables = moved(before, P * 2, 2)
        last = await fill(old, tables, 2)
        new = await repartition(old, spec, P * 2)
        await new.append(ev(tables[0], f"{tables[0]}-h", 3), last[tables[0]])
        audited = [raw async for raw in read_stream(new, EventFilter(tables=frozenset({tables[0]})))]
        assert [(raw.table_id, raw.message.seq) for raw in audited if raw.message] == [
            (tables[0], n) for n in (1, 2, 3)
        ]
        everything = [raw async for raw in read_stream(new)]
        assert len(everything) == 5
        # A reader that keeps up reads on from the last sequence it saw, under every subject.
        middle = sorted(raw.stream_seq for raw in everything)[2]
        later = [raw async for raw in read_stream(new, after_seq=middle)]
        assert sorted(raw.stream_seq for raw in later) == sorted(
            r.stream_seq for r in everything if r.stream_seq > middle
        )
    finally:
        await old.js.delete_stream(spec.name)
