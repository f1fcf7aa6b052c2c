"""The event stream on a real nats-server: provisioning, deduplication, optimistic concurrency."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from nats.js import JetStreamContext

from socai import errors
from socai.infra.nats import StreamSpec, ensure_stream, publish

pytestmark = pytest.mark.integration


@pytest.fixture
async def js(nats_client: object, stream_spec: StreamSpec) -> AsyncIterator[JetStreamContext]:
    context = nats_client.jetstream()  # type: ignore[attr-defined]
    yield context
    try:
        await context.delete_stream(stream_spec.name)
    except Exception:
        pass


def subject_of(spec: StreamSpec, hand: str) -> str:
    return spec.subjects[0].replace(">", f"table1.{hand}")


async def test_provisioning_is_idempotent_and_keeps_existing_data(js: JetStreamContext, stream_spec: StreamSpec):
    first = await ensure_stream(js, stream_spec)
    assert first.config.storage == "file"
    assert first.config.deny_delete and first.config.deny_purge
    subject = subject_of(stream_spec, "h1")
    for seq in (1, 2, 3):
        await publish(js, subject, b"event", msg_id=f"h1/{seq}")

    again = await ensure_stream(js, stream_spec)
    assert again.state.messages == 3
    assert again.config.duplicate_window == first.config.duplicate_window

    # A changed mutable setting is applied in place, still keeping the data.
    changed = await ensure_stream(js, replace(stream_spec, duplicate_window_s=300.0))
    assert changed.state.messages == 3
    assert changed.config.duplicate_window == 300.0


async def test_an_event_published_twice_with_the_same_msg_id_is_stored_once(
    js: JetStreamContext, stream_spec: StreamSpec
):
    await ensure_stream(js, stream_spec)
    subject = subject_of(stream_spec, "h2")
    first = await publish(js, subject, b"bet 100", msg_id="h2/1", expected_last_subject_seq=0)
    retry = await publish(js, subject, b"bet 100", msg_id="h2/1")
    assert not first.duplicate
    assert retry.duplicate
    assert retry.seq == first.seq
    info = await js.stream_info(stream_spec.name)
    assert info.state.messages == 1


async def test_a_stale_expected_last_subject_sequence_is_rejected_and_stores_nothing(
    js: JetStreamContext, stream_spec: StreamSpec
):
    await ensure_stream(js, stream_spec)
    subject = subject_of(stream_spec, "h3")
    a1 = await publish(js, subject, b"e1", msg_id="h3/1", expected_last_subject_seq=0)
    await publish(js, subject, b"e2", msg_id="h3/2", expected_last_subject_seq=a1.seq)

    # A second writer still believes the hand is at event 1.
    with pytest.raises(errors.Conflict) as caught:
        await publish(js, subject, b"e2-other", msg_id="h3/2-other", expected_last_subject_seq=a1.seq)
    assert caught.value.code == "WRONG_LAST_SEQUENCE"
    info = await js.stream_info(stream_spec.name)
    assert info.state.messages == 2
    last = await js.get_last_msg(stream_spec.name, subject)
    assert last.data == b"e2"


async def test_an_incompatible_existing_stream_is_refused_not_recreated(js: JetStreamContext, stream_spec: StreamSpec):
    from nats.js import api

    memory = api.StreamConfig(
        name=stream_spec.name, subjects=list(stream_spec.subjects), storage=api.StorageType.MEMORY
    )
    await js.add_stream(memory)
    with pytest.raises(errors.PreconditionFailed) as caught:
        await ensure_stream(js, stream_spec)
    assert caught.value.code == "STREAM_INCOMPATIBLE"


async def test_a_publish_no_stream_answers_is_unavailable_not_a_raw_client_error(
    js: JetStreamContext, stream_spec: StreamSpec
):
    """What JetStream answers while it starts after a restart (the nemesis hour: five hand
    starts failed with nats-py's "no response from stream", escaped as a crash and left the
    table believing nothing was written): no stream takes the subject. Every caller treats
    that as the outage it is (Unavailable: the append may be stored, re-read the log)."""
    await ensure_stream(js, stream_spec)
    with pytest.raises(errors.Unavailable) as caught:
        await publish(js, "nobody.listens.here", b"e1", msg_id="x/1", timeout_s=1.0)
    assert caught.value.code == "NATS_UNAVAILABLE"
    assert "NoStreamResponseError" in caught.value.message


async def test_socai_status_names_the_event_stream_s_last_sequence(
    nats_url: str, js: JetStreamContext, stream_spec: StreamSpec
):
    """What a rotation of the player-token key reads off (deploy/README.md: the last
    sequence the old key may have signed)."""
    from socai.infra.config import Settings
    from socai_cli.main import _nats_status

    await ensure_stream(js, stream_spec)
    for n in (1, 2, 3):
        await publish(js, subject_of(stream_spec, "h9"), b"e", msg_id=f"h9/{n}")
    settings = Settings(events_stream=stream_spec.name)
    ok, detail = await _nats_status(nats_url, settings)
    assert ok and detail.endswith(f"stream {stream_spec.name}: 3 events, last sequence 3"), detail
