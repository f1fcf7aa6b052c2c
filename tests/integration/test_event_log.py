"""The event log on a real JetStream: ordered appends, retries, a second writer, reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from socai import errors
from socai.events.log import EventLog
from socai.events.model import Event, Passed, PlayerLeft
from socai.infra.nats import StreamSpec, ensure_stream

pytestmark = pytest.mark.integration
AT = datetime(2026, 11, 29, tzinfo=UTC)


@pytest.fixture
async def log(nats_client: object, stream_spec: StreamSpec) -> AsyncIterator[EventLog]:
    prefix = stream_spec.subjects[0].removesuffix(".>")
    event_log = EventLog(nats_client, stream_spec.name, prefix)  # type: ignore[arg-type]
    await ensure_stream(event_log.js, stream_spec)
    yield event_log
    await event_log.js.delete_stream(stream_spec.name)


def ev(hand: str, seq: int, seat: int = 0) -> Event:
    return Event("t1", hand, seq, "tienlen", AT, Passed(seat))


async def test_appends_are_read_back_in_order_per_hand(log: EventLog):
    last = {"h1": 0, "h2": 0}
    for seq in range(1, 301):  # more than one direct-get batch
        for hand in ("h1", "h2"):
            last[hand] = await log.append(ev(hand, seq, seq % 4), last[hand])
    stored = await log.read_hand("t1", "h1")
    assert [s.event.seq for s in stored] == list(range(1, 301))
    assert all(s.event.hand_id == "h1" for s in stored)
    assert [s.stream_seq for s in stored] == sorted(s.stream_seq for s in stored)
    assert await log.read_hand("t1", "nothing") == []


async def test_a_retry_after_a_lost_ack_returns_the_stored_sequence(log: EventLog):
    first = await log.append(ev("h3", 1), 0)
    again = await log.append(ev("h3", 1), 0)  # the writer never saw the first ack
    assert again == first
    assert len(await log.read_hand("t1", "h3")) == 1


async def test_a_second_writer_of_the_same_hand_is_refused(log: EventLog):
    s1 = await log.append(ev("h4", 1), 0)
    await log.append(ev("h4", 2), s1)
    other = Event("t1", "h4", 2, "tienlen", AT, PlayerLeft(3))
    with pytest.raises(errors.Conflict):
        await log.append(other, s1)
    stored = await log.read_hand("t1", "h4")
    assert [type(s.event.body) for s in stored] == [Passed, Passed]


async def test_reading_a_range_on_a_closed_connection_is_unavailable_not_a_client_error(nats_url: str):
    """The one reader of log ranges (``direct_get``: a table's rebuild, the auditor's
    export, settlement's outstanding scan) answers a connection that is gone as every other
    NATS outage: Unavailable NATS_UNAVAILABLE, which its callers retry or report."""
    from socai.events.log import direct_get
    from socai.infra.nats import connect

    nc = await connect(nats_url, name="socai-test-closed")
    await nc.close()
    with pytest.raises(errors.Unavailable) as caught:
        async for _ in direct_get(nc, "ANY", "socai.events.>"):
            pass
    assert caught.value.code == "NATS_UNAVAILABLE"
