"""The guard of ``socai.infra.nats_pull``: the nats-py internals its fast path uses exist with
the shape it uses, and on the pinned nats-py a real nats-server's messages come through the
raw frames, not nats-py's ``Msg`` objects. When an upgrade changes one of them, these tests
fail, instead of settlement quietly running on the slow path."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError
from nats.js import JetStreamContext
from nats.js import api as js_api
from structlog.testing import capture_logs

from socai.infra.nats import StreamSpec, ensure_stream
from socai.infra.nats_pull import PROCESS_MSG_PARAMETERS, Delivery, Pull, ack_fields, nats_py_version
from tests.support.settlement import wait_for

pytestmark = pytest.mark.integration

DURABLE = "guard"
MESSAGES = 20


@pytest.fixture
async def js(nats_client: NatsClient, stream_spec: StreamSpec) -> AsyncIterator[JetStreamContext]:
    context = nats_client.jetstream()
    await ensure_stream(context, stream_spec)
    await context.add_consumer(
        stream_spec.name,
        js_api.ConsumerConfig(
            durable_name=DURABLE,
            ack_policy=js_api.AckPolicy.EXPLICIT,
            deliver_policy=js_api.DeliverPolicy.ALL,
            ack_wait=30,
        ),
    )
    subject = stream_spec.subjects[0].replace(">", "table1.hand1")
    for n in range(1, MESSAGES + 1):
        await context.publish(subject, f"event {n}".encode())
    yield context
    await context.delete_stream(stream_spec.name)


async def fetch_all(pull: Pull, count: int) -> list[Delivery]:
    got: list[Delivery] = []
    for _ in range(20):
        got += await pull.fetch(count - len(got), 2.0)
        if len(got) >= count:
            break
    return got


# --- the internals, one by one ---------------------------------------------------------------


def test_the_client_s_per_message_hook_has_the_shape_the_tap_replaces() -> None:
    hook = NatsClient._process_msg
    assert inspect.iscoroutinefunction(hook)
    assert tuple(inspect.signature(hook).parameters) == ("self", *PROCESS_MSG_PARAMETERS)


def test_the_protocol_parser_calls_the_hook_on_the_client_instance() -> None:
    from nats.protocol import parser

    # Looked up on the instance at each message (so replacing it there takes effect),
    # with the arguments in the order the tap's ``process_msg`` takes them.
    assert "self.nc._process_msg(sid, subject, reply, payload, hdr)" in inspect.getsource(parser)


async def test_a_subscription_s_id_is_the_sid_the_client_routes_by(nats_client: NatsClient) -> None:
    sub = await nats_client.subscribe(nats_client.new_inbox())
    try:
        assert isinstance(sub._id, int)
        assert nats_client._subs[sub._id] is sub
    finally:
        await sub.unsubscribe()


def test_msg_metadata_parses_the_ack_subject_forms_the_fast_form_does_not() -> None:
    newer = "$JS.ACK.hub.AHASH.SOCAI_EVENTS.settlement.2.77.70.1700000000000000000.5.tok"
    parsed = Msg.Metadata._from_reply(newer)
    assert (parsed.num_delivered, parsed.sequence.stream) == (2, 77)


def test_ack_fields_reads_the_delivery_count_and_stream_sequence() -> None:
    assert ack_fields("$JS.ACK.SOCAI_EVENTS.settlement.3.42.40.1700000000000000000.0") == (3, 42)
    # the newer form: domain and account hash after $JS.ACK, and a random token at the end
    newer = "$JS.ACK.hub.AHASH.SOCAI_EVENTS.settlement.2.77.70.1700000000000000000.5.tok"
    assert ack_fields(newer) == (2, 77)


def test_a_reply_that_is_not_a_jetstream_ack_subject_is_refused() -> None:
    with pytest.raises(NotJSMessageError):
        ack_fields("_INBOX.abc.def")


# --- the fast path on a real server ----------------------------------------------------------


async def test_on_the_pinned_nats_py_messages_come_through_the_raw_frames(
    nats_client: NatsClient, js: JetStreamContext, stream_spec: StreamSpec
) -> None:
    pull = Pull(nats_client, stream_spec.name, DURABLE)
    with capture_logs() as logs:
        await pull.start()
    try:
        assert pull.fast_path, f"nats-py {nats_py_version()}: the raw-frame tap was refused"
        assert not [entry for entry in logs if entry["event"] == "nats_pull_slow_path"]
        got = await fetch_all(pull, MESSAGES)
        assert [m.stream_seq for m in got] == list(range(1, MESSAGES + 1))
        assert [m.data for m in got] == [f"event {n}".encode() for n in range(1, MESSAGES + 1)]
        assert all(m.num_delivered == 1 for m in got)
        assert (pull.frames_read, pull.msgs_read) == (MESSAGES, 0)

        # Acks and naks from a raw delivery reach the server: the nak'd message comes again.
        for m in got[1:]:
            await m.ack()
        await got[0].nak()
        again = await fetch_all(pull, 1)
        assert [(m.stream_seq, m.num_delivered) for m in again] == [(1, 2)]
        await again[0].ack()

        # The server applies an ack in the consumer's own time, after the client's flush.
        async def all_acked() -> bool:
            return (await js.consumer_info(stream_spec.name, DURABLE)).num_ack_pending == 0

        await wait_for(all_acked, 10, "the server to apply the acks")
        assert pull.frames_read == MESSAGES + 1
    finally:
        await pull.close()


async def test_other_subscriptions_of_the_same_client_still_get_msg_objects(
    nats_client: NatsClient, js: JetStreamContext, stream_spec: StreamSpec
) -> None:
    pull = Pull(nats_client, stream_spec.name, DURABLE)
    await pull.start()
    other = await nats_client.subscribe("guard.other")
    try:
        await nats_client.publish("guard.other", b"plain")
        msg = await other.next_msg(timeout=5)
        assert isinstance(msg, Msg) and msg.data == b"plain"
    finally:
        await other.unsubscribe()
        await pull.close()


async def test_when_the_hook_changed_the_pull_says_so_and_still_works(
    nats_url: str, js: JetStreamContext, stream_spec: StreamSpec
) -> None:
    nc = await nats.connect(nats_url, name="socai-test-slow-path")
    try:
        original = nc._process_msg

        async def changed(sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes, extra: int = 0) -> None:
            await original(sid, subject, reply, data, headers)

        nc._process_msg = changed  # type: ignore[method-assign]  # a future nats-py's shape
        pull = Pull(nc, stream_spec.name, DURABLE)
        with capture_logs() as logs:
            await pull.start()
        try:
            assert not pull.fast_path
            warnings = [entry for entry in logs if entry["event"] == "nats_pull_slow_path"]
            assert warnings and warnings[0]["log_level"] == "warning"
            assert warnings[0]["nats_py"] == nats_py_version() != "unknown"
            got = await fetch_all(pull, MESSAGES)
            assert [m.stream_seq for m in got] == list(range(1, MESSAGES + 1))
            assert (pull.frames_read, pull.msgs_read) == (0, MESSAGES)
        finally:
            await pull.close()
    finally:
        await nc.close()
