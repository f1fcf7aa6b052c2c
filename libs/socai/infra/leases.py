"""Partition leases on JetStream KV: at most one holder per partition, fenced, rebalanced.

One KV bucket per group of workers (say ``socai_settlement_leases``), created idempotently
with file storage, history 1 and a bucket TTL equal to the lease TTL. It holds two kinds of
keys, both kept alive by rewriting them and gone once nobody rewrites them for a TTL:

- ``partition.<k>``: the instance id of partition k's holder. Acquire is ``create`` (refused
  while the key exists), renew is ``update`` with the last revision (compare-and-set: refused
  if anyone else wrote the key in between), release is ``delete`` with the last revision.
- ``member.<instance>``: an instance's heartbeat; the live members are the keys present. Its
  value is whatever the instance wants others to know (``member_value``; the table service
  puts its gRPC address there, so any instance can find a partition's holder).

**Fencing token.** The KV revision returned by the ``create`` that acquired a lease. Revisions
are the bucket stream's sequence numbers, so a later holder of the same partition always has a
larger token than any earlier one. A holder writes its token with every side effect and the
store refuses a token older than one it has seen (``socai.infra.fence``). The bucket must
never be deleted and recreated: its sequence would start again at 1 and every fence would
refuse the new, smaller tokens (safe, but stuck until an operator resets the fence rows).

**When a holder stops believing.** A holder's lease is valid by its own clock until
``sent + ttl − margin``, where ``sent`` is when it sent its last successful create or update:
the server wrote the key after that moment and expires it no earlier than a TTL after it
wrote it, so the holder stops believing before anyone else can create the key. A renew refused
by compare-and-set ends the lease at once; a renew that cannot get through (NATS down, slow)
is retried until the validity runs out, and then the lease is lost. A lost ``Lease`` never
becomes valid again (a later success of a late renew does not revive it: its consumer may have
stopped already); the instance acquires the partition afresh, with a new token. The margin
covers a step of the server's wall clock (JetStream ages messages by wall time) and the
clock used here is CLOCK_BOOTTIME where there is one, which keeps counting while the machine
is suspended, so a laptop or VM waking up knows its leases are stale.

**Who holds what (rebalancing).** Every instance computes the same assignment from the
live members it sees (``assign``): rendezvous hashing, each partition ranking the members by
a hash of (member, partition), filled in partition order with a quota, so each member gets
⌊P/n⌋ or ⌈P/n⌉ partitions and a join or leave moves few of them. An instance acquires the
free partitions assigned to it, and releases the ones it holds that are assigned to someone
else (stopping its consumer first, then deleting the key) so the new owner can create them.
Views of the membership may briefly differ; that only delays the split, it never breaks the
one-holder rule, which rests on the KV's compare-and-set alone. A member that vanished drops
out when its member key expires, and its leases expire at the same time: the partition moves
about one TTL after the crash.

**A restarted holder (``adopt_own``).** Where an instance's id is stable across restarts and
unique among live processes (a StatefulSet pod's name), a restarted process may take back, in
its first round only, the keys that still name its id: a compare-and-set on the key's
revision, so the new token is larger than the old one and a late renewal of the old life is
refused. Without it a restart waits a TTL for its own old keys to expire. Never use it with
ids that two live processes could share: the second would take the first's leases while the
first still believes in them.

**Callbacks.** ``on_acquired(partition, token)`` and ``on_lost(partition)`` alternate per
partition and are awaited by one loop (keep them short: start or stop a consumer task);
the ``on_acquired`` of the partitions taken in one round run concurrently once all of them
are taken, and so do the ``on_lost`` of several partitions given up together (a stop, a
rebalance, leases lost in one round), so a handover takes the slowest partition's time,
not the sum. A partition gets ``on_lost`` only once its ``on_acquired`` has begun: a stop that
cuts a round short after its acquires releases the keys without a callback. A voluntary
release awaits ``on_lost`` before deleting the key; a lost lease calls ``on_lost`` after the fact, so per-message work must still call ``Lease.check()`` and write the fence
token. Renewals and heartbeats run in their own loop, so a slow callback cannot let leases
lapse.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import nats.errors
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js import errors as js_errors
from nats.js.kv import KeyValue
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from socai import errors
from socai.infra.logging import get_logger
from socai.infra.partitions import PARTITIONS_MAX

log = get_logger("socai.leases")

Clock = Callable[[], float]
OnAcquired = Callable[[int, int], Awaitable[None]]
OnLost = Callable[[int], Awaitable[None]]

_INSTANCE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TTL_MIN_S: Final = 1.0
TTL_MAX_S: Final = 300.0
WRONG_LAST_SEQUENCE_CODES: Final = (10071, 10164)  # JSStreamWrongLastSequence(Constant)Err
RELEASED: Final = "released"  # given up by this instance (rebalance or stop)
TAKEN: Final = "taken"  # a renewal was refused: the key changed under us
EXPIRED: Final = "expired"  # no successful renewal within TTL − margin, by our clock
SNAPSHOT_KEYS_MAX: Final = PARTITIONS_MAX + 4096  # partitions plus members: a bound on one read


_BOOTTIME: Final[int | None] = getattr(time, "CLOCK_BOOTTIME", None)


def lease_clock() -> float:
    """Seconds on a clock that never goes back and keeps counting through a suspend
    (CLOCK_BOOTTIME; the monotonic clock where there is none)."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()


@dataclass(frozen=True)
class LeaseConfig:
    """How a group of workers leases its partitions.

    ``renew_every_s`` (default TTL/5) is both the renew period and the rebalance period;
    ``margin_s`` (default TTL/5) is how long before the server could expire a lease its
    holder stops believing in it. At least two renew attempts must fit in ``ttl − margin``.
    """

    bucket: str
    ttl_s: float = 10.0
    renew_every_s: float | None = None
    margin_s: float | None = None
    replicas: int = 1

    def __post_init__(self) -> None:
        if not TTL_MIN_S <= self.ttl_s <= TTL_MAX_S:
            raise errors.InvalidArgument(
                "BAD_LEASE_TTL", f"lease TTL must be {TTL_MIN_S}–{TTL_MAX_S} s, not {self.ttl_s}"
            )
        if self.margin <= 0 or self.renew_every <= 0 or 2 * self.renew_every > self.ttl_s - self.margin:
            raise errors.InvalidArgument(
                "BAD_LEASE_TIMING",
                f"two renewals every {self.renew_every} s must fit in TTL {self.ttl_s} s minus margin {self.margin} s",
            )

    @property
    def renew_every(self) -> float:
        return self.renew_every_s if self.renew_every_s is not None else self.ttl_s / 5

    @property
    def margin(self) -> float:
        return self.margin_s if self.margin_s is not None else self.ttl_s / 5

    @property
    def valid_for_s(self) -> float:
        """How long a lease stays valid by its holder's clock after a create or update was sent."""
        return self.ttl_s - self.margin


def partition_key(partition: int) -> str:
    return f"partition.{partition}"


def member_key(instance_id: str) -> str:
    return f"member.{instance_id}"


async def ensure_lease_bucket(js: JetStreamContext, config: LeaseConfig) -> KeyValue:
    """The lease bucket, created when missing (file storage, history 1, TTL = lease TTL).

    Idempotent and safe to race: creating a bucket that exists with the same settings is a
    no-op on the server. Raises PreconditionFailed("LEASE_BUCKET_INCOMPATIBLE") when the
    bucket exists with another TTL: holders whose TTL is longer than the server's would
    believe in leases the server already gave away.
    """
    try:
        kv = await js.key_value(config.bucket)
    except js_errors.BucketNotFoundError:
        kv = await js.create_key_value(
            js_api.KeyValueConfig(
                bucket=config.bucket,
                description="socai partition leases and members (socai.infra.leases)",
                history=1,
                ttl=config.ttl_s,
                storage=js_api.StorageType.FILE,
                replicas=config.replicas,
            )
        )
    status = await kv.status()
    if status.ttl is None or not math.isclose(status.ttl, config.ttl_s, abs_tol=1e-3):
        raise errors.PreconditionFailed(
            "LEASE_BUCKET_INCOMPATIBLE",
            f"lease bucket {config.bucket} has TTL {status.ttl} s, this instance expects {config.ttl_s} s",
        )
    return kv


@dataclass(eq=False)
class Lease:
    """A partition this instance holds: its fencing token and its validity by our clock."""

    partition: int
    token: int
    revision: int
    acquired_at: float
    valid_until: float
    clock: Clock
    lost_at: float | None = None
    lost_reason: str = ""  # released, taken or expired
    lost_detail: str = ""

    @property
    def lost(self) -> bool:
        return self.lost_at is not None

    @property
    def fence_token(self) -> int:
        """The token to write with every side effect (``socai.infra.fence``)."""
        return self.token

    def is_valid(self) -> bool:
        return self.lost_at is None and self.clock() < self.valid_until

    def check(self) -> None:
        """Before each side effect. Raises PreconditionFailed("LEASE_LOST") when this lease
        was lost or its validity ran out by our clock."""
        if not self.is_valid():
            raise errors.PreconditionFailed(
                "LEASE_LOST",
                f"the lease on partition {self.partition} (token {self.token}) is no longer held"
                + (f": {self.lost_detail or self.lost_reason}" if self.lost_reason else ": its validity ran out"),
                partition=self.partition,
                token=self.token,
            )

    @property
    def ended_at(self) -> float | None:
        """When this holder stopped believing, by its clock: the loss, or the end of its
        validity if that came first (``check()`` failed from then on)."""
        return None if self.lost_at is None else min(self.lost_at, self.valid_until)

    def _lose(self, reason: str, detail: str = "") -> bool:
        if self.lost_at is not None:
            return False
        self.lost_at = self.clock()
        self.lost_reason = reason
        self.lost_detail = detail
        return True


class LeaseStore:
    """The four operations on one partition's key; no policy (``LeaseManager`` has that)."""

    def __init__(
        self, kv: KeyValue, config: LeaseConfig, holder_id: str, clock: Clock = lease_clock, member_value: bytes = b""
    ) -> None:
        if not _INSTANCE_ID.match(holder_id):
            raise errors.InvalidArgument(
                "BAD_INSTANCE_ID", f"instance ids are 1–64 of [A-Za-z0-9_-], not {holder_id!r}"
            )
        self.kv = kv
        self.config = config
        self.holder_id = holder_id
        self.clock = clock
        self.member_value = member_value

    async def acquire(self, partition: int) -> Lease | None:
        """The lease, or None while someone holds it (or held it less than a TTL ago)."""
        sent = self.clock()
        try:
            revision = await self.kv.create(partition_key(partition), self.holder_id.encode())
        except (js_errors.KeyWrongLastSequenceError, js_errors.KeyNotFoundError):
            # KeyNotFoundError: nats-py's create, refused because the key existed, looks the
            # key up to see whether it was deleted, and it expired in between. Nothing was
            # written either way; the next round tries again.
            return None
        now = self.clock()
        return Lease(partition, revision, revision, now, sent + self.config.valid_for_s, self.clock)

    async def adopt(self, partition: int) -> Lease | None:
        """Take back a lease whose key still names this holder's id (a restart with a stable
        id): compare-and-set on the key's revision. None when the key is gone, names another
        holder, or changed in between."""
        key = partition_key(partition)
        try:
            entry = await self.kv.get(key)
        except js_errors.KeyNotFoundError:
            return None
        if entry.revision is None or (entry.value or b"").decode() != self.holder_id:
            return None
        sent = self.clock()
        try:
            revision = await self.kv.update(key, self.holder_id.encode(), last=entry.revision)
        except js_errors.KeyWrongLastSequenceError:
            return None
        return Lease(partition, revision, revision, self.clock(), sent + self.config.valid_for_s, self.clock)

    async def holder(self, partition: int) -> str | None:
        """The id of ``partition``'s holder as the bucket says now (None: nobody holds it)."""
        try:
            entry = await self.kv.get(partition_key(partition))
        except js_errors.KeyNotFoundError:
            return None
        return (entry.value or b"").decode() or None

    async def member(self, instance_id: str) -> bytes | None:
        """The value a live member published with its heartbeat (None: not a live member)."""
        try:
            entry = await self.kv.get(member_key(instance_id))
        except js_errors.KeyNotFoundError:
            return None
        return entry.value or b""

    async def renew(self, lease: Lease) -> bool:
        """Extend ``lease`` by compare-and-set on its last revision.

        Returns False when the lease is (now) lost: refused by the server, or answered only
        after its validity ran out. Raises the transport's error (NATS unavailable or slow)
        when the outcome is unknown; the caller retries while the lease is still valid.
        """
        if not lease.is_valid():
            lease._lose(EXPIRED, "its validity ran out before it could be renewed")
            return False
        sent = self.clock()
        remaining = lease.valid_until - sent
        try:
            revision = await asyncio.wait_for(
                self.kv.update(partition_key(lease.partition), self.holder_id.encode(), last=lease.revision), remaining
            )
        except js_errors.KeyWrongLastSequenceError:
            lease._lose(TAKEN, "another holder took it, or it expired on the server")
            return False
        except TimeoutError:
            lease._lose(EXPIRED, "no answer to a renewal before its validity ran out")
            return False
        if not lease.is_valid():
            # A late success cannot revive a lease that its user may have seen lapse; the
            # manager releases the key (we still know its revision) and acquires afresh.
            lease.revision = revision
            lease._lose(EXPIRED, "renewed only after its validity ran out")
            return False
        lease.revision = revision
        lease.valid_until = sent + self.config.valid_for_s
        return True

    async def release(self, lease: Lease, reason: str = RELEASED) -> None:
        """Stop believing, then delete the key if it is still ours (compare-and-set), so the
        next holder need not wait for the TTL. A refused delete means it was not ours any more."""
        lease._lose(reason)
        # A renewal sent before the lease was marked lost may land first and move the
        # revision: then the delete is tried once more with the revision it returned.
        for _ in range(2):
            revision = lease.revision
            try:
                await self.kv.delete(partition_key(lease.partition), last=revision)
                return
            except js_errors.APIError as exc:
                if exc.err_code not in WRONG_LAST_SEQUENCE_CODES:
                    raise
            if lease.revision == revision:
                break
        # A renewal whose answer never came (its task cancelled by a stop, or timed out) may
        # still have landed: the key names us at a revision we never saw. Without this the
        # key would hold the partition from the next holder for a whole TTL.
        await self._delete_if_ours(lease.partition)

    async def _delete_if_ours(self, partition: int) -> None:
        """Delete ``partition``'s key if it names this holder, compare-and-set on the revision
        read: a key another holder took in between is left alone."""
        key = partition_key(partition)
        try:
            entry = await self.kv.get(key)
        except js_errors.KeyNotFoundError:
            return
        if entry.revision is None or (entry.value or b"").decode() != self.holder_id:
            return
        try:
            await self.kv.delete(key, last=entry.revision)
        except js_errors.APIError as exc:
            if exc.err_code not in WRONG_LAST_SEQUENCE_CODES:
                raise

    async def heartbeat(self) -> None:
        """Announce this instance as a live member for another TTL (with its member value)."""
        await self.kv.put(member_key(self.holder_id), self.member_value)

    async def leave(self, partitions: Iterable[int] = ()) -> None:
        """Leave the members, and free any partition key still naming us: an acquire whose
        task a stop cancelled after the server created the key left no lease to release.

        ``partitions`` (the holder's own range) are each looked up by key, which no watcher's
        timing can miss; the bucket's snapshot adds any other key naming us."""
        await self.kv.delete(member_key(self.holder_id))
        for partition in sorted(set(partitions)):
            await self._delete_if_ours(partition)
        # A stop is rare and what it frees saves the next holder a whole TTL: its read waits
        # out a loaded server's slow watcher (a TTL per update) where a round's would give up.
        view = await self.snapshot(update_timeout=max(self.config.ttl_s, 2 * self.config.renew_every))
        for partition, holder in sorted(view.holders.items()):
            if holder == self.holder_id:
                await self._delete_if_ours(partition)

    async def snapshot(self, update_timeout: float | None = None) -> BucketView:
        """Every live key of the bucket with its value: the members and partition holders.

        Each update is waited for at most ``update_timeout`` (default two renew periods, so a
        round gives up on a stalled server before its leases are at risk); past it, nats'
        TimeoutError."""
        # The watcher's ephemeral consumer would otherwise outlive it on the server for
        # minutes (one per round per instance piles up); a short inactivity threshold lets the
        # server drop it right after ``stop``.
        watcher = await self.kv.watchall(ignore_deletes=True, inactive_threshold=max(2.0, self.config.renew_every))
        view = BucketView()
        try:
            for _ in range(SNAPSHOT_KEYS_MAX):
                entry = await watcher.updates(timeout=update_timeout or self.config.renew_every * 2)  # type: ignore[no-untyped-call]
                if entry is None:
                    break
                if entry.key.startswith("member."):
                    view.members.add(entry.key.removeprefix("member."))
                elif entry.key.startswith("partition."):
                    with contextlib.suppress(ValueError):
                        view.holders[int(entry.key.removeprefix("partition."))] = (entry.value or b"").decode()
            else:
                raise errors.PreconditionFailed(
                    "LEASE_BUCKET_TOO_BIG", f"more than {SNAPSHOT_KEYS_MAX} keys in lease bucket {self.config.bucket}"
                )
        finally:
            await watcher.stop()  # type: ignore[no-untyped-call]
        return view


@dataclass
class BucketView:
    members: set[str] = field(default_factory=set)
    holders: dict[int, str] = field(default_factory=dict)


def _score(member: str, partition: int) -> int:
    digest = hashlib.blake2b(f"{member}/{partition}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def assign(partitions: int, members: Sequence[str]) -> dict[int, str]:
    """Each partition's owner among ``members``: balanced rendezvous hashing.

    Partitions are taken in order; each goes to the highest-ranked member (by a hash of
    member and partition) that still has room: a member has room below ⌊P/n⌋, and the first
    P mod n members to reach ⌊P/n⌋ have room for one more. So every member gets ⌊P/n⌋ or
    ⌈P/n⌉, the answer depends only on the set of members (every instance computes the same),
    and a member joining or leaving moves few partitions.
    """
    live = sorted(set(members))
    if not live:
        return {}
    floor, extra = divmod(partitions, len(live))
    counts = dict.fromkeys(live, 0)
    owners: dict[int, str] = {}
    for partition in range(partitions):
        for member in sorted(live, key=lambda m: _score(m, partition), reverse=True):
            if counts[member] < floor or (counts[member] == floor and extra > 0):
                if counts[member] == floor:
                    extra -= 1
                counts[member] += 1
                owners[partition] = member
                break
    return owners


class LeaseMetrics:
    """Prometheus metrics of one lease group (``<namespace>_partitions_held`` …).

    Optional: a ``LeaseManager`` without metrics records nothing. ``registry`` is the default
    registry a service's ``/metrics`` serves; tests with several managers in one process give
    each its own ``CollectorRegistry``.
    """

    def __init__(self, namespace: str, registry: CollectorRegistry = REGISTRY) -> None:
        self.held = Gauge(
            f"{namespace}_partitions_held", "Partitions this instance holds a lease on", registry=registry
        )
        self.unheld = Gauge(
            f"{namespace}_partitions_unheld",
            "Partitions nobody held at this instance's last look (alert when the minimum over instances stays above 0)",
            registry=registry,
        )
        self.handovers = Counter(
            f"{namespace}_lease_handovers_total", "Partition leases this instance acquired", registry=registry
        )
        self.lost = Counter(
            f"{namespace}_leases_lost_total",
            "Partition leases this instance stopped holding, by reason (released, taken, expired)",
            ["reason"],
            registry=registry,
        )
        self.errors = Counter(
            f"{namespace}_lease_loop_errors_total",
            "Failed rounds of the lease loops (NATS unavailable …)",
            ["loop"],
            registry=registry,
        )


async def _no_callback(*_: int) -> None:
    return None


class LeaseManager:
    """Holds a fair share of P partitions for one instance, with callbacks on changes.

    ``start()`` creates the bucket if needed and starts two supervised loops: heartbeat and
    renewals, and rebalancing (acquire what is ours and free, release what is someone
    else's). ``stop()`` releases every lease (awaiting ``on_lost`` each) and leaves.
    """

    def __init__(
        self,
        js: JetStreamContext,
        config: LeaseConfig,
        instance_id: str,
        partitions: int,
        on_acquired: OnAcquired = _no_callback,
        on_lost: OnLost = _no_callback,
        metrics: LeaseMetrics | None = None,
        clock: Clock = lease_clock,
        member_value: bytes = b"",
        adopt_own: bool = False,
    ) -> None:
        if not 1 <= partitions <= PARTITIONS_MAX:
            raise errors.InvalidArgument("BAD_PARTITIONS", f"partitions must be 1–{PARTITIONS_MAX}, not {partitions}")
        self.js = js
        self.config = config
        self.instance_id = instance_id
        self.partitions = partitions
        self.on_acquired = on_acquired
        self.on_lost = on_lost
        self.metrics = metrics
        self.clock = clock
        self.member_value = member_value
        self._adopt = adopt_own  # until the first round has run
        self._store: LeaseStore | None = None
        self._leases: dict[int, Lease] = {}
        # Partitions whose ``on_acquired`` has begun: only they get an ``on_lost``. A stop
        # that cancels a round between its acquires and their callbacks releases the keys
        # taken in it without telling the user of partitions it never started.
        self._announced: set[int] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._stopping = False
        # Set once a rebalance round has completed: what this instance should hold and could
        # take at start, it holds (a service may wait for it before serving).
        self.first_round = asyncio.Event()

    @property
    def store(self) -> LeaseStore:
        if self._store is None:
            raise errors.PreconditionFailed("LEASES_NOT_STARTED", "call LeaseManager.start() first")
        return self._store

    def lease(self, partition: int) -> Lease | None:
        """The valid lease on ``partition``, or None."""
        lease = self._leases.get(partition)
        return lease if lease is not None and lease.is_valid() else None

    def held(self) -> frozenset[int]:
        return frozenset(p for p, lease in self._leases.items() if lease.is_valid())

    async def start(self) -> None:
        kv = await ensure_lease_bucket(self.js, self.config)
        self._store = LeaseStore(kv, self.config, self.instance_id, self.clock, self.member_value)
        await self._store.heartbeat()
        self._tasks = [
            asyncio.create_task(self._supervise("renew", self._renew_round), name=f"leases-renew-{self.instance_id}"),
            asyncio.create_task(
                self._supervise("rebalance", self._rebalance_round), name=f"leases-rebalance-{self.instance_id}"
            ),
        ]

    async def stop(self) -> None:
        """Release every lease (``on_lost`` awaited before each delete) and leave the members.

        The partitions are released concurrently: each waits only for its own ``on_lost``
        (a consumer draining its batch), so a stop hands everything over in about the time
        of the slowest partition, not the sum of all."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self._drop_all([(p, RELEASED) for p in sorted(self._leases)])
        if self._store is not None:
            try:
                await self.store.leave(range(self.partitions))
            except Exception as exc:
                # Not fatal: what it could not free expires within a TTL. Said, since the next
                # holder then waits that TTL.
                log.warning("lease_leave_failed", instance=self.instance_id, error=repr(exc))

    async def _supervise(self, name: str, round_: Callable[[], Awaitable[None]]) -> None:
        """Run ``round_`` every renew period forever; a failed round is logged, counted and
        retried after a backoff that never exceeds the renew period (leases depend on it)."""
        failures = 0
        while not self._stopping:
            if name == "rebalance":
                # Cleared before the round, so a loss signalled during it wakes the next one.
                self._wake.clear()
            try:
                await round_()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                log.warning(
                    "lease_loop_failed", loop=name, instance=self.instance_id, error=repr(exc), failures=failures
                )
                if self.metrics is not None:
                    self.metrics.errors.labels(name).inc()
            delay = self.config.renew_every if failures == 0 else min(self.config.renew_every, 0.1 * 2**failures)
            if name == "rebalance":
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
            else:
                await asyncio.sleep(delay)

    async def _renew_round(self) -> None:
        store = self.store
        leases = [lease for lease in self._leases.values() if not lease.lost]
        outcomes = await asyncio.gather(*(store.renew(lease) for lease in leases), return_exceptions=True)
        for lease, outcome in zip(leases, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                # Unknown outcome: the lease stays valid until its time runs out; the next
                # round tries again.
                log.info("lease_renew_failed", partition=lease.partition, error=repr(outcome))
                if not lease.is_valid():
                    lease._lose(EXPIRED, "it could not be renewed before its validity ran out")
            if lease.lost:
                self._wake.set()  # the rebalance loop calls on_lost and may re-acquire
        await store.heartbeat()

    async def _rebalance_round(self) -> None:
        store = self.store
        # Leases lost since the last round: tell the user, and free a key we still own.
        await self._drop_all(
            [(p, lease.lost_reason or EXPIRED) for p, lease in sorted(self._leases.items()) if not lease.is_valid()]
        )
        view = await store.snapshot()
        view.members.add(self.instance_id)
        owners = assign(self.partitions, sorted(view.members))
        mine = {p for p, owner in owners.items() if owner == self.instance_id}
        await self._drop_all([(p, RELEASED) for p in sorted(set(self._leases) - mine)])
        taken: list[Lease] = []
        for partition in sorted(mine - set(self._leases)):
            if partition in view.holders:
                if not (self._adopt and view.holders[partition] == self.instance_id):
                    continue  # held (or its old holder's key has not expired yet)
                acquired = await store.adopt(partition)  # our own previous life's key
            else:
                acquired = await store.acquire(partition)
            if acquired is None:
                continue
            self._leases[partition] = acquired
            log.info("lease_acquired", instance=self.instance_id, partition=partition, token=acquired.token)
            if self.metrics is not None:
                self.metrics.handovers.inc()
            taken.append(acquired)
        # Every lease first, then their callbacks concurrently: a partition's start (a table
        # service rebuilding its tables) does not hold back the next partition's acquire.
        results = await asyncio.gather(*(self._announce(lease) for lease in taken), return_exceptions=True)
        for lease, result in zip(taken, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, Exception):
                # A dependency's outage (the database restarting while the partition's
                # tables load) is retried at the next round: a warning; anything else an error.
                outage = isinstance(result, errors.Unavailable)
                (log.warning if outage else log.error)(
                    "lease_on_acquired_failed", partition=lease.partition, error=repr(result)
                )
                self._announced.discard(lease.partition)
                await store.release(lease, RELEASED)
                self._leases.pop(lease.partition, None)
        held_now = {p for p in view.holders if p < self.partitions} | set(self._leases)
        if self.metrics is not None:
            self.metrics.held.set(len(self.held()))
            self.metrics.unheld.set(self.partitions - len(held_now))
        self._adopt = False
        self.first_round.set()

    async def _announce(self, lease: Lease) -> None:
        self._announced.add(lease.partition)
        await self.on_acquired(lease.partition, lease.token)

    async def _drop_all(self, drops: Sequence[tuple[int, str]]) -> None:
        """``_drop`` (with release) of several (partition, reason) at once: one partition's
        callback does not hold back the others' handover. ``_drop`` never raises for a
        callback's or the release's failure; anything else is logged here."""
        if not drops:
            return
        results = await asyncio.gather(
            *(self._drop(partition, reason, release=True) for partition, reason in drops), return_exceptions=True
        )
        for (partition, _), result in zip(drops, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                log.error("lease_drop_failed", partition=partition, error=repr(result))

    async def _drop(self, partition: int, reason: str, release: bool) -> None:
        """Stop acting on ``partition``: mark the lease lost, await ``on_lost``, then (when
        asked) delete the key if it is still ours so the next holder can create it."""
        lease = self._leases.pop(partition)
        announced = partition in self._announced
        self._announced.discard(partition)
        lease._lose(reason)
        log.info("lease_lost", instance=self.instance_id, partition=partition, token=lease.token, reason=reason)
        if self.metrics is not None:
            self.metrics.lost.labels(reason).inc()
        if announced:
            try:
                await self.on_lost(partition)
            except Exception as exc:
                log.error("lease_on_lost_failed", partition=partition, error=repr(exc))
        if release:
            with contextlib.suppress(nats.errors.Error, js_errors.Error, TimeoutError):
                await self.store.release(lease, reason)
