"""Partitions of the event log: which of P partitions a table's events belong to.

Settlement must post a table's hands in play order, so one table's events must always reach
the same single consumer. The events are split by table into P partitions; each partition
has its own durable consumer, and an instance consumes a partition only while it holds that
partition's lease (``socai.infra.leases``).

**The server partitions, Python agrees.** The events stream carries a subject transform
(NATS 2.10+)::

    socai.events.*.*  ->  socai.events.{{partition(P,1)}}.{{wildcard(1)}}.{{wildcard(2)}}

The table service keeps publishing ``socai.events.<table>.<hand>``; JetStream stores the
message as ``socai.events.<k>.<table>.<hand>``, where ``k`` is FNV-1a (32 bit) of the table
id's UTF-8 bytes modulo P. We chose the transform over a partition token that the table
service computes because P then lives in one place, the stream's configuration: every
writer maps a table the same way by construction, and an instance started with a stale P
cannot send a table's hands to a second partition (which would break their order). Python
needs the mapping only to name a stored subject or to check the server; ``partition_of``
reproduces it exactly and a test pins that against the real server for many ids.

Things to know about the transform:

- the partition must be a token of its own: nats-server leaves ``p{{partition(8,1)}}``
  unexpanded (no error), so the stored subject is ``<prefix>.<k>.<table>.<hand>``;
- ``Nats-Expected-Last-Subject-Sequence`` and direct gets by subject apply to the stored
  (transformed) subject: the table's one-writer-per-hand check works unchanged while P does
  not change (after a change, ``EventLog`` names the hand's subjects in every partition as the
  check subject); a reader by subject asks for ``stored_subject(...)``, or
  ``any_partition_subject(...)`` (a wildcard that also finds the hand after P changed);
- a consumer of partition k filters on ``partition_filter(prefix, k)``.

**P is fixed per deployment; changing it is a migration.** Changing P moves most tables to
another partition, so a table's later hands sit in another durable than its earlier ones,
and its facts (``<table>-t``) and hands are stored under more than one subject. The
migration (``socai migrate --repartition``, deploy/README.md "Changing P"): stop new hands;
wait until settlement's lag is 0; update the stream with ``partitioned_stream_config`` (the
transform is mutable); start the services. ``ensure_stream`` records every P the stream has
stored events under in its metadata (``HISTORY_KEY``: ``"0,4,8"``, the current P last), and
readers find a table's messages under each of them (``history_filters``): the literal stored
subject while the table has had one partition, ``<prefix>.*.<table>.<hand>`` once it has had
several, and the unpartitioned ``<prefix>.<table>.<hand>`` when P was ever 0. The lease
bucket keeps working (keys ``partition.<k>`` for k ≥ the new P are simply never used again),
and fence tokens keep growing, since they are KV revisions and a new P does not reset them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from nats.js import api as js_api

from socai import errors

HISTORY_KEY: Final = "socai.partitions_history"  # stream metadata: every P events were stored under
PARTITIONS_MAX: Final = 1024  # a lease, a durable and a consumer task per partition: keep it small
FNV32_OFFSET_BASIS: Final = 0x811C9DC5
FNV32_PRIME: Final = 0x01000193
_U32: Final = 0xFFFFFFFF


def _check_partitions(partitions: int) -> None:
    if not 1 <= partitions <= PARTITIONS_MAX:
        raise errors.InvalidArgument(
            "BAD_PARTITIONS", f"partitions must be between 1 and {PARTITIONS_MAX}, not {partitions}"
        )


def fnv1a_32(data: bytes) -> int:
    """FNV-1a, 32 bit: the hash nats-server's ``partition()`` transform uses."""
    value = FNV32_OFFSET_BASIS
    for byte in data:
        value = ((value ^ byte) * FNV32_PRIME) & _U32
    return value


def partition_of(table_id: str, partitions: int) -> int:
    """The partition (0 … partitions − 1) of a table: FNV-1a 32 of its UTF-8 bytes mod P.

    The same answer in every process, Python version and machine (Python's ``hash`` is
    salted per process) and the same as nats-server's ``{{partition(P,1)}}`` on the table
    token. P is fixed per deployment (module docstring: changing it is a migration).

    Raises InvalidArgument("BAD_PARTITIONS") when P is outside 1 … PARTITIONS_MAX and
    InvalidArgument("BAD_TABLE_ID") for an empty table id.
    """
    _check_partitions(partitions)
    if not table_id:
        raise errors.InvalidArgument("BAD_TABLE_ID", "a table id is needed to find its partition")
    return fnv1a_32(table_id.encode()) % partitions


def subject_transform(prefix: str, partitions: int) -> js_api.SubjectTransform:
    """The events stream's transform: ``<prefix>.<table>.<hand>`` stored as ``<prefix>.<k>.<table>.<hand>``."""
    _check_partitions(partitions)
    return js_api.SubjectTransform(
        src=f"{prefix}.*.*",
        dest=f"{prefix}.{{{{partition({partitions},1)}}}}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}",
    )


def partitioned_stream_config(config: js_api.StreamConfig, prefix: str, partitions: int) -> js_api.StreamConfig:
    """``config`` with the partitioning transform for P partitions (a copy; the transform is
    mutable on an existing stream, which is how P changes during the migration)."""
    return dataclasses.replace(config, subject_transform=subject_transform(prefix, partitions))


_DEST = re.compile(r"^(?P<prefix>.+)\.\{\{partition\((?P<p>\d+),1\)\}\}\.\{\{wildcard\(1\)\}\}\.\{\{wildcard\(2\)\}\}$")


def partitions_of(config: js_api.StreamConfig, prefix: str) -> int | None:
    """P as the stream's transform says, or None when the stream is not partitioned.

    Settlement reads P from the stream rather than from its own settings, so the number of
    leases it competes for always matches what the server writes.

    Raises PreconditionFailed("STREAM_PARTITIONING_UNKNOWN") when the stream has a transform
    that is not ours for ``prefix``.
    """
    transform = config.subject_transform
    if transform is None:
        return None
    match = _DEST.match(transform.dest or "")
    if transform.src != f"{prefix}.*.*" or match is None or match["prefix"] != prefix:
        raise errors.PreconditionFailed(
            "STREAM_PARTITIONING_UNKNOWN",
            f"stream {config.name} has transform {transform.src} -> {transform.dest}, not the partitioning of {prefix}",
        )
    return int(match["p"])


def stored_subject(prefix: str, table_id: str, hand_id: str, partitions: int) -> str:
    """Where the stream stores a hand's events: ``<prefix>.<k>.<table>.<hand>``."""
    return f"{prefix}.{partition_of(table_id, partitions)}.{table_id}.{hand_id}"


def any_partition_subject(prefix: str, table_id: str, hand_id: str) -> str:
    """A filter that finds a hand's stored events whatever P was when it was played."""
    return f"{prefix}.*.{table_id}.{hand_id}"


def partition_filter(prefix: str, partition: int) -> str:
    """The filter subject of partition k's durable consumer: ``<prefix>.<k>.*.*``."""
    if partition < 0 or partition >= PARTITIONS_MAX:
        raise errors.InvalidArgument("BAD_PARTITION", f"no partition {partition}")
    return f"{prefix}.{partition}.*.*"


def partitions_history(config: js_api.StreamConfig, prefix: str) -> tuple[int, ...]:
    """Every P the stream has stored events under (0: unpartitioned), each once, the current
    P last: the recorded history (``HISTORY_KEY``) and the stream's transform. A stream that
    never changed P has one entry.

    Raises PreconditionFailed("STREAM_PARTITIONING_UNKNOWN") for a transform that is not ours
    or a recorded history that does not parse.
    """
    current = partitions_of(config, prefix) or 0
    recorded = (config.metadata or {}).get(HISTORY_KEY, "")
    try:
        earlier = [int(p) for p in recorded.split(",") if p.strip()]
    except ValueError:
        earlier = [-1]
    if any(p != 0 and not 1 <= p <= PARTITIONS_MAX for p in earlier):
        raise errors.PreconditionFailed(
            "STREAM_PARTITIONING_UNKNOWN", f"stream {config.name} records partitions history {recorded!r}"
        )
    return (*dict.fromkeys(p for p in earlier if p != current), current)


def with_partitions_history(config: js_api.StreamConfig, history: tuple[int, ...]) -> js_api.StreamConfig:
    """``config`` (a copy) whose metadata records ``history`` (the current P last). The
    server's own keys (``_nats.*``) are left out: it sets them itself."""
    metadata = {k: v for k, v in (config.metadata or {}).items() if not k.startswith("_nats.")}
    metadata[HISTORY_KEY] = ",".join(str(p) for p in history)
    return dataclasses.replace(config, metadata=metadata)


def history_filters(prefix: str, subject: str, history: tuple[int, ...]) -> list[str]:
    """The stored filters under which canonical subject or filter ``subject``
    (``<prefix>.<table>.<hand>``, ``<prefix>.<table>.*``, ``<prefix>.*.<hand>``) has messages,
    for every P of ``history``: the unpartitioned subject itself when P was ever 0; the
    literal ``<prefix>.<k>.<table>.<hand>`` while every partitioned P gave the table one k,
    ``<prefix>.*.<table>.<hand>`` once it had several (or for any table). ``<prefix>.>`` and
    subjects outside the prefix stay as they are."""
    if not subject.startswith(prefix + "."):
        return [subject]
    rest = subject[len(prefix) + 1 :]
    table = rest.split(".", 1)[0]
    if table == ">":
        return [subject]
    filters = [subject] if 0 in history else []
    partitioned = [p for p in history if p]
    if partitioned:
        ks = {"*"} if table == "*" else {str(partition_of(table, p)) for p in partitioned}
        k = ks.pop() if len(ks) == 1 else "*"
        filters.append(f"{prefix}.{k}.{rest}")
    return filters
