"""NATS: connect with reconnects, provision the event stream, publish with guarantees.

Stream ``SOCAI_EVENTS`` (subjects ``socai.events.>``):
- file storage, limits retention with no limits (the event log is the audit trail: it is
  never aged out), ``deny_delete`` and ``deny_purge`` so no client can rewrite history;
- a duplicate window of 10 minutes: a publish retried with the same ``Nats-Msg-Id``
  (``event_id``) within it is stored once (a writer retrying after a lost ack);
- optimistic concurrency per hand: every publish carries
  ``Nats-Expected-Last-Subject-Sequence``, so a second writer of the same hand is rejected.

Durability (sync policy): the embedded nats-server runs with ``sync_interval: always``
(``socai_cli.embedded``) and deploy/ sets the same: JetStream fsyncs every message before
it acks it. An acknowledged event then survives a power loss or kernel crash, not only a
process crash; money depends on these events, and the table service answers a player only
after the ack. The cost is an fsync per publish: a few hundred microseconds to a few
milliseconds of ack latency and a lower single-writer ceiling (measured by the
``table.act_p99_ms_50_tables`` benchmark). In a 3-replica cluster the default (fsync every
2 minutes) would be defensible because a quorum holds each message in memory on three
machines; we keep ``always`` there too, because a correlated power loss of a rack must not
lose acknowledged money movements.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import APIError, BadRequestError, NotFoundError

from socai import errors
from socai.infra.logging import get_logger
from socai.infra.nats_auth import shown_url
from socai.infra.nats_liveness import harden
from socai.infra.partitions import (
    HISTORY_KEY,
    partitioned_stream_config,
    partitions_history,
    partitions_of,
    with_partitions_history,
)

log = get_logger("socai.nats")

DUPLICATE_WINDOW_S = 600.0
WRONG_LAST_SEQUENCE_CODE = 10071  # JSStreamWrongLastSequenceErrF


@dataclass(frozen=True)
class StreamSpec:
    name: str = "SOCAI_EVENTS"
    subjects: tuple[str, ...] = ("socai.events.>",)
    duplicate_window_s: float = DUPLICATE_WINDOW_S
    replicas: int = 1
    description: str = "socai event log: every accepted table and hand fact"
    # P, the event log's partitions (socai.infra.partitions); 0: not partitioned
    partitions: int = 0

    def config(self) -> js_api.StreamConfig:
        config = self._config()
        if self.partitions:
            prefix = self.subjects[0].removesuffix(".>")
            config = partitioned_stream_config(config, prefix, self.partitions)
        return config

    def _config(self) -> js_api.StreamConfig:
        return js_api.StreamConfig(
            name=self.name,
            description=self.description,
            subjects=list(self.subjects),
            retention=js_api.RetentionPolicy.LIMITS,
            storage=js_api.StorageType.FILE,
            max_msgs=-1,
            max_bytes=-1,
            max_age=0,
            max_msg_size=1024 * 1024,
            discard=js_api.DiscardPolicy.NEW,
            duplicate_window=self.duplicate_window_s,
            num_replicas=self.replicas,
            deny_delete=True,
            deny_purge=True,
            allow_direct=True,
        )


def events_stream_spec(
    name: str = "SOCAI_EVENTS", prefix: str = "socai.events", replicas: int = 1, partitions: int = 0
) -> StreamSpec:
    """The event log: every table's events, ``<prefix>.<table>.<hand>``, stored as
    ``<prefix>.<k>.<table>.<hand>`` with P ≥ 1 ``partitions`` (``socai.infra.partitions``)."""
    return StreamSpec(name=name, subjects=(f"{prefix}.>",), replicas=replicas, partitions=partitions)


def ledger_stream_spec(name: str = "SOCAI_LEDGER", prefix: str = "socai.ledger", replicas: int = 1) -> StreamSpec:
    """The ledger's outbox stream: every committed transaction, in commit order.

    Provisioned by ``socai migrate`` / ``socai up`` (the deploy/ migration job, whose NATS
    user may create it) and, when it is missing, by the ledger's outbox relay itself
    (development and tests). Same durability as the event log: file storage, never aged
    out, no deletes or purges, a 10-minute duplicate window.
    """
    return StreamSpec(
        name=name,
        subjects=(f"{prefix}.>",),
        replicas=replicas,
        description="socai ledger: every committed transaction, in commit order",
    )


def posted_subject(prefix: str, account_kind: str) -> str:
    """``<prefix>.posted.<account kind>``: where the ledger publishes a transaction."""
    return f"{prefix}.posted.{account_kind}"


async def connect(url: str, name: str, **options: Any) -> NatsClient:
    """Connect with unlimited reconnects (2 s apart) and logged state changes; the client is
    hardened against a late PONG (``socai.infra.nats_liveness.harden``: without it, a flush
    that timed out while nats-server was paused kills the client's read loop for good when
    the server answers). A service also runs a ``ConnectionWatch`` beside its client.

    Raises Unavailable("NATS_UNAVAILABLE") when the first connection cannot be made. The URL
    is logged and reported without its password.
    """
    shown = shown_url(url)

    async def on_disconnect() -> None:
        log.info("nats_disconnected", url=shown)

    async def on_reconnect() -> None:
        log.info("nats_reconnected", url=shown)

    async def on_error(exc: Exception) -> None:
        log.warning("nats_error", error=str(exc))

    try:
        nc = await nats.connect(
            url,
            name=name,
            max_reconnect_attempts=options.pop("max_reconnect_attempts", -1),
            reconnect_time_wait=options.pop("reconnect_time_wait", 2),
            connect_timeout=options.pop("connect_timeout", 5),
            allow_reconnect=True,
            disconnected_cb=on_disconnect,
            reconnected_cb=on_reconnect,
            error_cb=on_error,
            **options,
        )
    except Exception as exc:
        raise errors.Unavailable("NATS_UNAVAILABLE", f"cannot connect to NATS at {shown}: {exc}") from exc
    harden(nc)
    return nc


_MUTABLE = (
    "description",
    "subjects",
    "max_msgs",
    "max_bytes",
    "max_age",
    "max_msg_size",
    "discard",
    "duplicate_window",
    "num_replicas",
    "deny_delete",
    "deny_purge",
    "allow_direct",
)


async def ensure_stream(
    js: JetStreamContext, spec: StreamSpec, *, allow_repartition: bool = False
) -> js_api.StreamInfo:
    """Create the stream, or bring an existing one to ``spec`` without touching its data.

    Idempotent: calling it again with the same spec changes nothing. Storage type and
    retention cannot change on an existing stream; a mismatch raises
    PreconditionFailed("STREAM_INCOMPATIBLE") instead of recreating (and losing) the log.
    The partitioning of an existing stream changes only with ``allow_repartition`` (the
    documented migration: hands drained, settlement lag 0): otherwise a different P raises
    PreconditionFailed("STREAM_PARTITIONS_DIFFER"). A change of P on a stream that holds
    events records the P's it had in the stream's metadata (``socai.infra.partitions``:
    readers find a table's messages under each of them); an update keeps that record.
    """
    wanted = spec.config()
    try:
        info = await js.stream_info(spec.name)
    except NotFoundError:
        info = await js.add_stream(wanted)
        log.info("stream_created", stream=spec.name, subjects=list(spec.subjects))
        return info
    have = info.config
    if have.storage != wanted.storage or have.retention != wanted.retention:
        raise errors.PreconditionFailed(
            "STREAM_INCOMPATIBLE",
            f"stream {spec.name} has storage={have.storage} retention={have.retention}; "
            f"wanted {wanted.storage}/{wanted.retention}; migrate it by hand",
        )
    _check_partitioning(spec, have, allow_repartition)
    changed = [f for f in _MUTABLE if _norm(getattr(have, f)) != _norm(getattr(wanted, f))]
    recorded = (have.metadata or {}).get(HISTORY_KEY)
    if recorded is not None:
        # An update replaces the whole configuration: without this the record would be lost.
        wanted = dataclasses.replace(wanted, metadata={**(wanted.metadata or {}), HISTORY_KEY: recorded})
    if allow_repartition and _transform(have) != _transform(wanted):
        changed.append("subject_transform")
        if info.state.messages or recorded is not None:
            prefix = spec.subjects[0].removesuffix(".>")
            history = partitions_history(have, prefix)
            new = partitions_of(wanted, prefix) or 0
            wanted = with_partitions_history(wanted, (*(p for p in history if p != new), new))
            changed.append("metadata")
    if changed:
        try:
            info = await js.update_stream(wanted)
        except BadRequestError as exc:
            raise errors.PreconditionFailed("STREAM_INCOMPATIBLE", f"cannot update {spec.name}: {exc}") from exc
        log.info("stream_updated", stream=spec.name, fields=changed)
    return info


def _transform(config: js_api.StreamConfig) -> tuple[str, str] | None:
    t = config.subject_transform
    return None if t is None else (t.src or "", t.dest or "")


def _check_partitioning(spec: StreamSpec, have: js_api.StreamConfig, allow_repartition: bool) -> None:
    if not spec.subjects or allow_repartition:
        return
    prefix = spec.subjects[0].removesuffix(".>")
    current = partitions_of(have, prefix) if have.subject_transform is not None else None
    if (current or 0) != spec.partitions:
        raise errors.PreconditionFailed(
            "STREAM_PARTITIONS_DIFFER",
            f"stream {spec.name} has {current or 0} partitions, the settings say {spec.partitions}; changing P is "
            "a migration (deploy/README.md, 'Scale-out'): socai migrate --repartition",
        )


def _norm(value: Any) -> Any:
    if isinstance(value, list):
        return sorted(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


async def publish(
    js: JetStreamContext,
    subject: str,
    payload: bytes,
    *,
    msg_id: str,
    expected_last_subject_seq: int | None = None,
    stream: str | None = None,
    timeout_s: float = 5.0,
    headers: dict[str, str] | None = None,
) -> js_api.PubAck:
    """Publish with ``Nats-Msg-Id`` and (optionally) the expected last subject sequence.

    Raises Conflict("WRONG_LAST_SEQUENCE") when another writer got there first (nothing is
    stored) and Unavailable("NATS_UNAVAILABLE") when no ack arrives in time (the caller may
    retry with the same msg_id: the duplicate window makes that safe).
    """
    headers = {**(headers or {}), "Nats-Msg-Id": msg_id}
    if expected_last_subject_seq is not None:
        headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_last_subject_seq)
    try:
        return await js.publish(subject, payload, timeout=timeout_s, stream=stream, headers=headers)
    except APIError as exc:
        if getattr(exc, "err_code", None) == WRONG_LAST_SEQUENCE_CODE:
            raise errors.Conflict("WRONG_LAST_SEQUENCE", f"{subject}: {exc.description}") from exc
        raise errors.Unavailable("NATS_UNAVAILABLE", f"publish to {subject} failed: {exc}") from exc
    except TimeoutError as exc:
        raise errors.Unavailable("NATS_UNAVAILABLE", f"no ack for {subject} within {timeout_s}s") from exc
    except Exception as exc:
        # Every failure to get an answer (no responder, no response from the stream while
        # JetStream starts after a restart, a connection closed or reconnecting) is the same
        # outage to the caller: its append may or may not be stored, and it re-reads the log.
        # Imported here: the classification lives with the gRPC mapping, which the many
        # users of this module that never fail a publish need not import.
        from socai.infra.grpc_errors import nats_unavailable

        if nats_unavailable(exc) is not None:
            raise errors.Unavailable("NATS_UNAVAILABLE", f"publish to {subject} failed: {exc!r}") from exc
        raise
