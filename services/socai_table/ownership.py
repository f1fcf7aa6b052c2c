"""Which tables this instance runs: leases on the table partitions, and who runs the others.

Several table-service instances share the tables. A table belongs to partition
``partition_of(table_id, P)`` (``socai.infra.partitions``; P is the event log's, 1 when the
log is not partitioned), and an instance runs the tables of the partitions whose lease it
holds (``socai.infra.leases``, KV bucket ``table_leases_<events stream>``). Every instance
runs a ``LeaseManager`` over the same P partitions:

- on acquiring partition k it loads the tables of k from the store and rebuilds each from
  the stream (``TableManager.load``), so the hand in play goes on with the same seed;
- on losing k it stops their timers and drops them from memory (``TableManager.drop``)
  before the key is released;
- before every append a table asks ``fence``: the lease must still be valid by this
  instance's own clock, else the append is refused (UNAVAILABLE ``TABLE_NOT_HELD``). The
  event log's expected last subject sequence refuses what slips between the check and the
  write (a second writer of a hand). Each event carries its writer and lease token
  (``Socai-Table-Writer: <instance>/<token>``), so the stream shows which tenure wrote it.

**Routing.** An instance publishes its gRPC address as the value of its ``member.<id>`` key.
The owner of a table is found as a gateway could find it too: k = partition_of(table, P),
the holder's id is the value of ``partition.<k>``, its address the value of
``member.<holder>``. A request for a table this instance does not hold is forwarded there
(``socai_table.forward``); with no holder (a partition between holders, for about a lease
TTL after its holder died) the answer is UNAVAILABLE ``TABLE_OWNER_UNKNOWN`` with a retry
hint.

**Settings** (``from_env``):

| variable | default | meaning |
|---|---|---|
| ``SOCAI_TABLE_LEASE_BUCKET`` | ``table_leases_<events stream>`` | the KV bucket of the table partitions' leases |
| ``SOCAI_TABLE_LEASE_TTL_S`` | 10 | a lease's TTL: a dead instance's tables move about this long after it died |
| ``SOCAI_INSTANCE_ID`` | ``SOCAI_TABLE_INSTANCE`` (``table-0``) | this instance's id among the holders |
| ``SOCAI_TABLE_ADVERTISE_ADDR`` | the listen address | the address other instances forward to |

The id must be unique among live instances and is best stable across restarts (a
StatefulSet pod's name): a restarted instance then takes its own partitions back at once
(``adopt_own``) instead of waiting a TTL for its old keys to expire.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Final

import nats.errors
from nats.js import JetStreamContext

from socai import errors
from socai.infra.config import Settings
from socai.infra.leases import LeaseConfig, LeaseManager, LeaseMetrics
from socai.infra.logging import get_logger
from socai.infra.partitions import partition_of

log = get_logger("socai.table.ownership")

WRITER_HEADER: Final = "Socai-Table-Writer"  # <instance>/<lease token> on every appended event
RETRY_AFTER_MS: Final = 500  # the hint given with TABLE_OWNER_UNKNOWN / TABLE_NOT_HELD
LOOKUP_CACHE_S: Final = 1.0  # how long an owner found in the bucket is trusted without asking again
LOOKUP_CACHE_MAX: Final = 4096
WILDCARD_HOSTS: Final = ("0.0.0.0", "[::]", "::", "")


@dataclass(frozen=True)
class OwnershipSettings:
    lease_bucket: str = ""  # empty: table_leases_<events stream>
    lease_ttl_s: float = 10.0
    instance_id: str = ""  # empty: SOCAI_TABLE_INSTANCE
    advertise_addr: str = ""  # empty: the listen address (a wildcard host becomes this host's name)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OwnershipSettings:
        e = os.environ if env is None else env
        d = cls()
        return replace(
            d,
            lease_bucket=e.get("SOCAI_TABLE_LEASE_BUCKET", d.lease_bucket),
            lease_ttl_s=float(e.get("SOCAI_TABLE_LEASE_TTL_S", d.lease_ttl_s)),
            instance_id=e.get("SOCAI_INSTANCE_ID", d.instance_id),
            advertise_addr=e.get("SOCAI_TABLE_ADVERTISE_ADDR", d.advertise_addr),
        )


def lease_config(settings: Settings, own: OwnershipSettings) -> LeaseConfig:
    """The lease bucket of the table partitions, as the service and ``socai migrate`` create it."""
    return LeaseConfig(
        own.lease_bucket or f"table_leases_{settings.events_stream}",
        ttl_s=own.lease_ttl_s,
        replicas=settings.stream_replicas,
    )


def advertised(listen_address: str) -> str:
    """The address others dial for a server listening at ``listen_address``: a wildcard
    host (``0.0.0.0:50052``) is replaced by this host's name."""
    host, _, port = listen_address.rpartition(":")
    if host in WILDCARD_HOSTS:
        return f"{socket.gethostname()}:{port}"
    return listen_address


@dataclass(frozen=True)
class Owner:
    instance: str
    address: str


def owner_unknown(table_id: str, partition: int) -> errors.Unavailable:
    return errors.Unavailable(
        "TABLE_OWNER_UNKNOWN",
        f"no instance holds table {table_id}'s partition {partition} right now; retry in {RETRY_AFTER_MS} ms",
        partition=partition,
        retry_after_ms=RETRY_AFTER_MS,
    )


class Ownership:
    """This instance's leases on the table partitions (see the module docstring).

    ``on_acquired(select)`` / ``on_lost(select)`` receive a predicate on table ids: the
    tables of the partition that changed hands.
    """

    def __init__(
        self,
        js: JetStreamContext,
        config: LeaseConfig,
        instance_id: str,
        address: str,
        partitions: int,
        on_acquired: Callable[[Callable[[str], bool]], Awaitable[None]],
        on_lost: Callable[[Callable[[str], bool]], Awaitable[None]],
        metrics: LeaseMetrics | None = None,
    ) -> None:
        self.instance_id = instance_id
        self.address = address
        self.partitions = max(partitions, 1)
        self._on_acquired = on_acquired
        self._on_lost = on_lost
        self._owners: dict[int, tuple[float, Owner | None]] = {}
        self.leases = LeaseManager(
            js,
            config,
            instance_id,
            self.partitions,
            self._acquired,
            self._lost,
            metrics,
            member_value=address.encode(),
            adopt_own=True,
        )

    def partition_of(self, table_id: str) -> int:
        return partition_of(table_id, self.partitions)

    def holds(self, table_id: str) -> bool:
        return self.leases.lease(self.partition_of(table_id)) is not None

    def fence(self, table_id: str) -> int:
        """The lease token to write with ``table_id``'s next event. Raises
        Unavailable("TABLE_NOT_HELD") when this instance no longer holds the table's lease."""
        partition = self.partition_of(table_id)
        lease = self.leases.lease(partition)
        if lease is None:
            raise errors.Unavailable(
                "TABLE_NOT_HELD",
                f"this instance no longer holds table {table_id}'s partition {partition}; retry in {RETRY_AFTER_MS} ms",
                partition=partition,
                retry_after_ms=RETRY_AFTER_MS,
            )
        return lease.fence_token

    async def start(self, wait_s: float) -> None:
        """Start leasing; wait up to ``wait_s`` for the first round (the tables this instance
        should hold and could take are loaded when it returns)."""
        await self.leases.start()
        try:
            await asyncio.wait_for(self.leases.first_round.wait(), wait_s)
        except TimeoutError:
            log.warning("ownership_first_round_slow", instance=self.instance_id, waited_s=wait_s)
        log.info(
            "table_leasing",
            instance=self.instance_id,
            address=self.address,
            partitions=self.partitions,
            held=sorted(self.leases.held()),
        )

    async def stop(self) -> None:
        """Drop every table and release every lease, so other instances take them at once."""
        await self.leases.stop()

    async def owner(self, table_id: str, fresh: bool = False) -> Owner | None:
        """The instance holding ``table_id``'s partition and its address, as the lease bucket
        says (cached for ``LOOKUP_CACHE_S`` unless ``fresh``); None while nobody holds it.
        Raises Unavailable("NATS_UNAVAILABLE") when the bucket does not answer."""
        partition = self.partition_of(table_id)
        now = time.monotonic()
        cached = self._owners.get(partition)
        if not fresh and cached is not None and now - cached[0] < LOOKUP_CACHE_S:
            return cached[1]
        store = self.leases.store
        found: Owner | None = None
        try:
            holder = await store.holder(partition)
            if holder is not None:
                value = await store.member(holder)
                if value:
                    found = Owner(holder, value.decode())
        except (nats.errors.Error, TimeoutError) as exc:
            # NATS slow or away: the caller retries (forwarding needs the bucket's answer).
            raise errors.Unavailable(
                "NATS_UNAVAILABLE",
                f"cannot look up who holds table {table_id}'s partition {partition}: {exc}; retry in {RETRY_AFTER_MS} ms",
                partition=partition,
                retry_after_ms=RETRY_AFTER_MS,
            ) from exc
        if len(self._owners) >= LOOKUP_CACHE_MAX:
            self._owners.clear()
        self._owners[partition] = (now, found)
        return found

    def forget(self, table_id: str) -> None:
        """Stop trusting the cached owner of ``table_id`` (a forward to it failed)."""
        self._owners.pop(self.partition_of(table_id), None)

    async def _acquired(self, partition: int, token: int) -> None:
        self._owners.pop(partition, None)
        log.info("table_partition_acquired", partition=partition, token=token)
        await self._on_acquired(lambda table_id: self.partition_of(table_id) == partition)

    async def _lost(self, partition: int) -> None:
        self._owners.pop(partition, None)
        log.info("table_partition_lost", partition=partition)
        await self._on_lost(lambda table_id: self.partition_of(table_id) == partition)
