"""The events stream partitions by table on a real nats-server, exactly as ``partition_of``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import APIError

from socai.infra.nats import WRONG_LAST_SEQUENCE_CODE, StreamSpec
from socai.infra.partitions import partition_of, partitioned_stream_config, partitions_of, stored_subject

pytestmark = pytest.mark.integration


@pytest.fixture
async def js(nats_client: object, stream_spec: StreamSpec) -> AsyncIterator[JetStreamContext]:
    context = nats_client.jetstream()  # type: ignore[attr-defined]
    yield context
    try:
        await context.delete_stream(stream_spec.name)
    except Exception:
        pass


def prefix_of(spec: StreamSpec) -> str:
    return spec.subjects[0].removesuffix(".>")


async def partitioned(js: JetStreamContext, spec: StreamSpec, partitions: int) -> js_api.StreamInfo:
    return await js.add_stream(partitioned_stream_config(spec.config(), prefix_of(spec), partitions))


async def test_the_server_puts_every_table_in_the_partition_python_computes(
    js: JetStreamContext, stream_spec: StreamSpec
):
    prefix = prefix_of(stream_spec)
    info = await partitioned(js, stream_spec, 7)
    assert partitions_of(info.config, prefix) == 7
    tables = [uuid.uuid4().hex[:12] for _ in range(300)] + [f"table-{i}" for i in range(100)] + ["bàn-1", "T_Ü"]
    for table in tables:
        ack = await js.publish(f"{prefix}.{table}.h1", b"event")
        stored = await js.get_msg(stream_spec.name, seq=ack.seq)
        assert stored.subject == stored_subject(prefix, table, "h1", 7), table


async def test_a_second_writer_of_a_hand_is_still_refused_through_the_transform(
    js: JetStreamContext, stream_spec: StreamSpec
):
    prefix = prefix_of(stream_spec)
    await partitioned(js, stream_spec, 4)
    first = await js.publish(f"{prefix}.t1.h1", b"deal", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    with pytest.raises(APIError) as raised:
        await js.publish(f"{prefix}.t1.h1", b"deal again", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    assert raised.value.err_code == WRONG_LAST_SEQUENCE_CODE
    # The expected sequence is the stored (partitioned) subject's: the right writer goes on.
    await js.publish(f"{prefix}.t1.h1", b"bet", headers={"Nats-Expected-Last-Subject-Sequence": str(first.seq)})


async def test_a_partition_consumer_sees_only_its_tables_in_order(js: JetStreamContext, stream_spec: StreamSpec):
    prefix = prefix_of(stream_spec)
    await partitioned(js, stream_spec, 3)
    published: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for i in range(60):
        table = f"tbl-{i % 9}"
        body = f"{table}/{i}".encode()
        await js.publish(f"{prefix}.{table}.h{i}", body)
        published[partition_of(table, 3)].append(body)
    for k in range(3):
        sub = await js.pull_subscribe(f"{prefix}.{k}.*.*", durable=f"p{k}", stream=stream_spec.name)
        got: list[bytes] = []
        while len(got) < len(published[k]):
            got += [m.data for m in await sub.fetch(100, timeout=10)]
        assert got == published[k]


async def test_changing_p_moves_only_what_is_published_afterwards(js: JetStreamContext, stream_spec: StreamSpec):
    prefix = prefix_of(stream_spec)
    info = await partitioned(js, stream_spec, 4)
    before = await js.publish(f"{prefix}.abc.h1", b"e")
    info = await js.update_stream(partitioned_stream_config(info.config, prefix, 5))
    assert partitions_of(info.config, prefix) == 5
    after = await js.publish(f"{prefix}.abc.h2", b"e")
    assert (await js.get_msg(stream_spec.name, seq=before.seq)).subject == stored_subject(prefix, "abc", "h1", 4)
    assert (await js.get_msg(stream_spec.name, seq=after.seq)).subject == stored_subject(prefix, "abc", "h2", 5)
