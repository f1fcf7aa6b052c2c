"""Settlement's durable consumers on the event log: their names and filters for a P, their
config, and moving them when P changes (``socai migrate --repartition``) or after a restore
(``socai restore``). The operators' tools in ``socai_cli`` call these; only settlement knows
its durables' layout.

Durables: ``settlement`` (P = 0) on every event, or ``settlement-p<k>`` filtered on
``<prefix>.<k>.*.*`` (``socai_settlement.workers``).
"""

from __future__ import annotations

from dataclasses import replace

from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError

from socai import errors
from socai.infra.logging import get_logger
from socai.infra.partitions import partition_filter
from socai_settlement.config import SettlementConfig

log = get_logger("socai.settlement.durables")


def durable_of(base: str, partitions: int, partition: int) -> str:
    return base if partitions == 0 else f"{base}-p{partition}"


def filter_of(prefix: str, partitions: int, partition: int) -> str:
    return f"{prefix}.>" if partitions == 0 else partition_filter(prefix, partition)


def layout(base: str, prefix: str, partitions: int) -> dict[str, str]:
    """Every durable of settlement under ``partitions`` (0: unpartitioned) -> its filter."""
    return {durable_of(base, partitions, k): filter_of(prefix, partitions, k) for k in range(max(partitions, 1))}


def consumer_config(config: SettlementConfig, filter_subject: str, start_seq: int = 0) -> js_api.ConsumerConfig:
    """The durable ``config.durable`` on ``filter_subject``: from the first message, or from
    stream sequence ``start_seq``. (The start is immutable: a pipeline that finds the durable
    with another keeps it as it is and logs ``consumer_config_kept``.)"""
    return js_api.ConsumerConfig(
        durable_name=config.durable,
        name=config.durable,
        description="settlement: replays each finished hand and posts it to the ledger",
        deliver_policy=js_api.DeliverPolicy.BY_START_SEQUENCE if start_seq else js_api.DeliverPolicy.ALL,
        opt_start_seq=start_seq or None,
        ack_policy=js_api.AckPolicy.EXPLICIT,
        ack_wait=config.ack_wait_s,
        max_deliver=config.max_deliver,
        max_ack_pending=config.max_ack_pending,
        filter_subject=filter_subject,
        replay_policy=js_api.ReplayPolicy.INSTANT,
    )


async def consumer(js: JetStreamContext, stream: str, durable: str) -> js_api.ConsumerInfo | None:
    try:
        info: js_api.ConsumerInfo = await js.consumer_info(stream, durable)
    except NotFoundError:
        return None
    return info


async def has_messages(js: JetStreamContext, stream: str, subject: str) -> bool:
    try:
        await js.get_msg(stream, seq=1, next=True, subject=subject)
    except NotFoundError:
        return False
    return True


async def require_drained(js: JetStreamContext, stream: str, durables: dict[str, str]) -> None:
    """Raises PreconditionFailed("SETTLEMENT_LAG_NOT_ZERO") while one of ``durables`` has a
    message it has not acknowledged: those hands would be settled by no durable once the
    layout changes."""
    for durable in durables:
        info = await consumer(js, stream, durable)
        if info is not None and (info.num_pending or info.num_ack_pending):
            raise errors.PreconditionFailed(
                "SETTLEMENT_LAG_NOT_ZERO",
                f"durable {durable} has {info.num_pending} undelivered and {info.num_ack_pending} unacked "
                "messages: stop the tables and wait until settlement's lag is 0 before changing P",
            )


async def relayout(
    js: JetStreamContext,
    stream: str,
    config: SettlementConfig,
    before: dict[str, str],
    after: dict[str, str],
    start_seq: int,
) -> None:
    """Settlement's durables from layout ``before`` to ``after`` (drained: ``require_drained``)
    once the stream holds its messages up to ``start_seq`` - 1: a durable both use (same name
    and filter) keeps its place, which is the change; one ``after`` no longer uses is deleted;
    one it needs whose filter already matches stored messages, from an earlier P, starts at
    ``start_seq``, so no hand is read twice; the others are left to settlement, which creates
    them from the start of their (empty) filter."""
    for durable in before.keys() - after.keys():
        await js.delete_consumer(stream, durable)
        log.info("settlement_durable_deleted", durable=durable)
    for durable, subject in after.items():
        info = await consumer(js, stream, durable)
        if info is not None and info.config.filter_subject == subject and not info.num_pending:
            continue
        if info is None and not await has_messages(js, stream, subject):
            continue
        await restart_at(js, stream, replace(config, durable=durable), subject, start_seq)
        log.info("settlement_durable_started_after", durable=durable, filter=subject, stream_seq=start_seq)


async def restart_at(js: JetStreamContext, stream: str, config: SettlementConfig, subject: str, start_seq: int) -> None:
    """The durable ``config.durable`` again, on ``subject``, from stream sequence ``start_seq``."""
    try:
        await js.delete_consumer(stream, config.durable)
    except NotFoundError:
        pass
    await js.add_consumer(stream, consumer_config(config, subject, start_seq))
