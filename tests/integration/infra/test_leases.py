"""Leases on a real nats-server: one holder per partition, fencing tokens, rebalancing."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from nats import errors as nats_errors
from nats.aio.client import Client as NatsClient
from prometheus_client import CollectorRegistry

from socai import errors
from socai.infra.leases import (
    BucketView,
    Lease,
    LeaseConfig,
    LeaseManager,
    LeaseMetrics,
    LeaseStore,
    ensure_lease_bucket,
    lease_clock,
    partition_key,
)
from socai.infra.nats import connect
from tests.integration.infra.lease_support import Recorder, holders_now, wait_until

# Serial: with a 2 s TTL and renewals every 0.4 s, a starved event loop would lose leases.
pytestmark = [pytest.mark.integration, pytest.mark.serial]


@pytest.fixture
async def clients(nats_url: str) -> AsyncIterator[list[NatsClient]]:
    """Four NATS connections, one per would-be instance (closing one cuts that instance off)."""
    opened = [await connect(nats_url, name=f"lease-test-{i}") for i in range(4)]
    yield opened
    for nc in opened:
        with contextlib.suppress(Exception):
            await nc.close()


async def test_the_bucket_is_created_once_and_a_different_ttl_is_refused(
    clients: list[NatsClient], lease_config: LeaseConfig
):
    js = clients[0].jetstream()
    first, again = await asyncio.gather(ensure_lease_bucket(js, lease_config), ensure_lease_bucket(js, lease_config))
    assert (await first.status()).ttl == lease_config.ttl_s
    assert (await again.status()).history == 1
    with pytest.raises(errors.PreconditionFailed) as raised:
        await ensure_lease_bucket(js, dataclasses.replace(lease_config, ttl_s=5.0))
    assert raised.value.code == "LEASE_BUCKET_INCOMPATIBLE"


async def test_acquire_renew_release_with_tokens_that_only_grow(clients: list[NatsClient], lease_config: LeaseConfig):
    kv = await ensure_lease_bucket(clients[0].jetstream(), lease_config)
    a = LeaseStore(kv, lease_config, "a")
    b = LeaseStore(kv, lease_config, "b")
    lease_a = await a.acquire(0)
    assert lease_a is not None
    assert await b.acquire(0) is None  # held
    assert await a.renew(lease_a)
    assert lease_a.revision > lease_a.token  # a renewal moves the revision, not the token
    await a.release(lease_a)
    assert not lease_a.is_valid()
    lease_b = await b.acquire(0)  # at once: a release needs no TTL to pass
    assert lease_b is not None and lease_b.token > lease_a.revision
    assert not await a.renew(lease_a)
    with pytest.raises(errors.PreconditionFailed) as raised:
        lease_a.check()
    assert raised.value.code == "LEASE_LOST"


async def test_a_renewal_after_someone_else_took_over_fails_and_the_lease_is_lost(
    clients: list[NatsClient], lease_config: LeaseConfig
):
    kv = await ensure_lease_bucket(clients[0].jetstream(), lease_config)
    a = LeaseStore(kv, lease_config, "a")
    b = LeaseStore(kv, lease_config, "b")
    lease_a = await a.acquire(1)
    assert lease_a is not None
    # a stops renewing; the key expires on the server a TTL after a's write.
    lease_b = None
    while lease_b is None:
        lease_b = await b.acquire(1)
        await asyncio.sleep(0.05)
    # By a's own clock the lease ran out before b could create the key.
    assert lease_a.valid_until <= lease_b.acquired_at
    assert not await a.renew(lease_a)
    assert lease_a.lost_reason == "expired"
    assert lease_b.token > lease_a.token


async def _stop_all(managers: dict[str, LeaseManager]) -> None:
    for manager in managers.values():
        with contextlib.suppress(Exception):
            await manager.stop()


def _manager(
    name: str,
    nc: NatsClient,
    config: LeaseConfig,
    partitions: int,
    recorder: Recorder,
    registry: CollectorRegistry | None = None,
) -> LeaseManager:
    holder: list[LeaseManager] = []
    on_acquired, on_lost = recorder.callbacks(name, lambda: holder[0])
    manager = LeaseManager(
        nc.jetstream(),
        config,
        name,
        partitions,
        on_acquired,  # type: ignore[arg-type]
        on_lost,  # type: ignore[arg-type]
        metrics=LeaseMetrics("socai_test", registry) if registry is not None else None,
    )
    holder.append(manager)
    return manager


class Sampler:
    """Looks at every manager's beliefs every few milliseconds: never two at once."""

    def __init__(self, managers: dict[str, LeaseManager]) -> None:
        self.managers = managers
        self.samples = 0
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            for partition, believers in holders_now(self.managers).items():
                assert len(believers) <= 1, f"partition {partition} held by {believers}"
            self.samples += 1
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self.task.done() and not self.task.cancelled():
            self.task.result()  # raises the sampler's AssertionError, if any
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def _fair(managers: dict[str, LeaseManager], partitions: int) -> bool:
    counts = [len(m.held()) for m in managers.values()]
    held = holders_now(managers)
    return sorted(held) == list(range(partitions)) and max(counts) - min(counts) <= 1


@pytest.mark.parametrize("instances", [2, 3])
async def test_instances_racing_for_partitions_never_both_hold_one(
    clients: list[NatsClient], lease_config: LeaseConfig, instances: int
):
    partitions = 6
    recorder = Recorder()
    managers = {f"i{n}": _manager(f"i{n}", clients[n], lease_config, partitions, recorder) for n in range(instances)}
    sampler = Sampler(managers)
    try:
        await asyncio.gather(*(m.start() for m in managers.values()))
        await wait_until(lambda: _fair(managers, partitions), "a fair split")

        # One instance is cut off from NATS: it stops believing by its own clock, and the
        # others take its partitions once its keys expired on the server.
        cut = managers.pop("i0")
        await clients[0].close()
        await wait_until(lambda: not cut.held(), "the cut-off instance to give up")
        await wait_until(lambda: _fair(managers, partitions), "the others to share its partitions")
        managers["i0"] = cut  # still sampled: it must not believe again
        await asyncio.sleep(lease_config.renew_every * 3)  # a few more rounds under the sampler
        await sampler.stop()
    finally:
        await sampler.stop()
        await _stop_all(managers)
    assert sampler.samples > 0
    recorder.check_one_holder_at_a_time()
    recorder.check_callbacks_alternate()
    taken_from_i0 = [w for w in recorder.windows if w.holder == "i0"]
    assert taken_from_i0 and all(w.lease.lost for w in taken_from_i0)
    # Every partition i0 held went to someone else, with a larger token.
    for window in taken_from_i0:
        later = [w for w in recorder.windows if w.partition == window.partition and w.start > window.start]
        assert later and all(w.token > window.token for w in later)


async def test_joins_and_leaves_rebalance_to_a_fair_split(clients: list[NatsClient], lease_config: LeaseConfig):
    partitions = 8
    recorder = Recorder()
    registry = CollectorRegistry()
    a = _manager("a", clients[0], lease_config, partitions, recorder, registry)
    b = _manager("b", clients[1], lease_config, partitions, recorder)
    c = _manager("c", clients[2], lease_config, partitions, recorder)
    managers = {"a": a}
    sampler = Sampler(managers)
    try:
        await a.start()
        await wait_until(lambda: len(a.held()) == partitions, "a alone to hold every partition")

        await b.start()
        managers["b"] = b
        await wait_until(lambda: _fair(managers, partitions), "a and b to hold 4 each")
        assert sorted(len(m.held()) for m in managers.values()) == [4, 4]

        await c.start()
        managers["c"] = c
        await wait_until(lambda: _fair(managers, partitions), "a, b and c to hold 3, 3, 2")
        assert sorted(len(m.held()) for m in managers.values()) == [2, 3, 3]

        await b.stop()  # a graceful leave: its partitions move without waiting for a TTL
        del managers["b"]
        await wait_until(lambda: _fair(managers, partitions), "a and c to hold 4 each")
        assert not b.held()
        await sampler.stop()
    finally:
        await sampler.stop()
        await _stop_all({"a": a, "b": b, "c": c})
    recorder.check_one_holder_at_a_time()
    recorder.check_callbacks_alternate()
    lost_by_b = Counter(kind for kind, holder, _, _ in recorder.events if holder == "b")
    assert lost_by_b["acquired"] == lost_by_b["lost"] > 0
    handovers = registry.get_sample_value("socai_test_lease_handovers_total")
    assert handovers == sum(1 for kind, holder, _, _ in recorder.events if kind == "acquired" and holder == "a")
    assert registry.get_sample_value("socai_test_leases_lost_total", {"reason": "released"}) is not None


async def test_a_lease_valid_by_the_clock_is_checked_before_each_side_effect(
    clients: list[NatsClient], lease_config: LeaseConfig
):
    recorder = Recorder()
    manager = _manager("solo", clients[0], lease_config, 1, recorder)
    try:
        await manager.start()
        await wait_until(lambda: manager.lease(0) is not None, "the lease")
        lease = manager.lease(0)
        assert lease is not None
        lease.check()
        assert lease.valid_until > lease_clock()
        assert lease.fence_token == recorder.windows[0].token
    finally:
        await manager.stop()
    with pytest.raises(errors.PreconditionFailed):
        lease.check()


async def test_the_snapshot_watchers_do_not_pile_up_on_the_server(clients: list[NatsClient], lease_config: LeaseConfig):
    # Each rebalance round reads the bucket through an ephemeral consumer; without a short
    # inactivity threshold the server kept every one for minutes (~150 per instance).
    js = clients[0].jetstream()
    manager = LeaseManager(js, lease_config, "w", 4)
    await manager.start()
    await wait_until(lambda: len(manager.held()) == 4, "four partitions held")
    await asyncio.sleep(lease_config.renew_every * 5)  # several rounds, several watchers
    await manager.stop()
    stream = f"KV_{lease_config.bucket}"

    async def no_consumer_left() -> bool:
        return (await js.stream_info(stream)).state.consumer_count == 0

    deadline = asyncio.get_running_loop().time() + 60  # a deadline, not a measure
    while not await no_consumer_left():
        assert asyncio.get_running_loop().time() < deadline, "watcher consumers are left on the server"
        await asyncio.sleep(0.2)


async def test_a_stop_releases_its_partitions_concurrently(clients: list[NatsClient], lease_config: LeaseConfig):
    """A graceful stop awaits every partition's ``on_lost`` (a consumer draining its batch)
    at once, not one after another: the handover after SIGTERM is about one partition's
    drain, not the sum of them. Each callback waits until every other one has started, so
    a stop that released the partitions one at a time would never finish."""
    partitions = 4
    started: set[int] = set()
    alone: list[int] = []  # callbacks that gave up waiting for the others
    everyone_in = asyncio.Event()

    async def on_lost(partition: int) -> None:
        started.add(partition)
        if len(started) == partitions:
            everyone_in.set()
        try:
            await asyncio.wait_for(everyone_in.wait(), 20)  # a deadline: only run one by one reaches it
        except TimeoutError:
            alone.append(partition)

    manager = LeaseManager(clients[0].jetstream(), lease_config, "draining", partitions, on_lost=on_lost)
    await manager.start()
    await wait_until(lambda: len(manager.held()) == partitions, "every partition held")
    await manager.stop()
    assert started == set(range(partitions))
    assert alone == []
    # Every key was released after its callback: another instance takes them at once.
    kv = await ensure_lease_bucket(clients[1].jetstream(), lease_config)
    other = LeaseStore(kv, lease_config, "next")
    taken = [await other.acquire(p) for p in range(partitions)]
    assert all(lease is not None for lease in taken)


async def test_a_stop_frees_keys_whose_last_write_it_never_saw(clients: list[NatsClient], lease_config: LeaseConfig):
    """A stop cancels the lease loops mid-call: a renewal can land on the server without its
    answer (the key names us at a revision the lease never saw), an acquire can create a key
    no lease records. The stop still frees both, so the next holder takes them at once rather
    than a TTL later (a rolling restart once left a table 7 s without a holder this way)."""
    manager = LeaseManager(clients[0].jetstream(), lease_config, "stopping", 2)
    await manager.start()
    await wait_until(lambda: len(manager.held()) == 2, "both partitions held")
    kv = await ensure_lease_bucket(clients[1].jetstream(), lease_config)
    lease = manager.lease(0)
    assert lease is not None
    await kv.update(partition_key(0), b"stopping", last=lease.revision)  # a renewal whose answer was lost
    await kv.create(partition_key(7), b"stopping")  # an acquire cancelled after the server created the key
    await manager.stop()
    other = LeaseStore(kv, lease_config, "next")
    assert [await other.acquire(p) is not None for p in (0, 1, 7)] == [True, True, True]


async def test_a_stop_frees_its_own_partitions_by_key_when_the_buckets_snapshot_misses_them(
    clients: list[NatsClient], lease_config: LeaseConfig
):
    """A stop looks each of its own partitions' keys up rather than trusting the bucket's
    snapshot alone: nats-py's watcher can say it has read everything before a loaded server's
    messages arrive, or not answer within its wait, and the key it misses then blocks the next
    holder for a TTL. Its snapshot here sees nothing; a leave that fails is logged."""
    from structlog.testing import capture_logs

    manager = LeaseManager(clients[0].jetstream(), lease_config, "stopping", 2)
    await manager.start()
    await wait_until(lambda: len(manager.held()) == 2, "both partitions held")
    kv = await ensure_lease_bucket(clients[1].jetstream(), lease_config)
    for partition in (0, 1):  # renewals whose answers were lost: the leases' own release misses both
        lease = manager.lease(partition)
        assert lease is not None
        await kv.update(partition_key(partition), b"stopping", last=lease.revision)

    async def blind_snapshot(update_timeout: float | None = None) -> BucketView:
        raise nats_errors.TimeoutError

    manager.store.snapshot = blind_snapshot  # type: ignore[method-assign]
    with capture_logs() as logs:
        await manager.stop()
    assert [e["error"] for e in logs if e["event"] == "lease_leave_failed"] == ["TimeoutError()"]
    other = LeaseStore(kv, lease_config, "next")
    assert [await other.acquire(p) is not None for p in (0, 1)] == [True, True]


async def test_a_stop_between_a_rounds_acquires_and_their_callbacks_calls_no_on_lost(
    clients: list[NatsClient], lease_config: LeaseConfig
):
    """The callbacks alternate even when a stop cancels a round after it took partition 0
    and while it still takes partition 1 (their ``on_acquired`` run once all are taken):
    partition 0 was never started, so it gets no ``on_lost``; its key is released all the
    same, so the next holder takes it at once."""
    events: list[tuple[str, int]] = []

    async def on_acquired(partition: int, token: int) -> None:
        events.append(("acquired", partition))

    async def on_lost(partition: int) -> None:
        events.append(("lost", partition))

    manager = LeaseManager(
        clients[0].jetstream(), lease_config, "cut-short", 2, on_acquired=on_acquired, on_lost=on_lost
    )
    await manager.start()  # the rounds are scheduled, not yet run
    store = manager.store
    real_acquire = store.acquire
    second_acquire_waiting = asyncio.Event()

    async def acquire(partition: int) -> Lease | None:
        if partition == 0:
            return await real_acquire(partition)
        second_acquire_waiting.set()
        await asyncio.Event().wait()  # held until the stop cancels the round
        raise AssertionError("unreachable")

    store.acquire = acquire  # type: ignore[method-assign]
    await asyncio.wait_for(second_acquire_waiting.wait(), 10)
    assert manager.held() == {0}
    await manager.stop()
    assert events == []
    kv = await ensure_lease_bucket(clients[1].jetstream(), lease_config)
    other = LeaseStore(kv, lease_config, "next")
    assert await other.acquire(0) is not None


async def test_a_start_that_fails_on_an_outage_is_retried_and_logged_as_a_warning(
    clients: list[NatsClient], lease_config: LeaseConfig
):
    """A partition whose start fails is released and taken again at a later round. When
    the cause is a dependency's outage (the database restarting while the partition's
    tables load: the nemesis hour) that is a warning, not an error; a fault of its own is an
    error."""
    import logging

    import structlog
    from structlog.testing import capture_logs

    failures: list[BaseException] = [errors.Unavailable("DATABASE_UNAVAILABLE", "restarting"), KeyError("bug")]

    async def on_acquired(partition: int, token: int) -> None:
        if failures:
            raise failures.pop(0)

    manager = LeaseManager(clients[0].jetstream(), lease_config, "flaky", 1, on_acquired=on_acquired)
    previous = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with capture_logs() as logs:
            await manager.start()
            await wait_until(lambda: manager.held() == frozenset({0}), "the partition held after two failed starts")
    finally:
        structlog.configure(wrapper_class=previous)
        await manager.stop()
    failed = [(e["log_level"], e["error"][:11]) for e in logs if e["event"] == "lease_on_acquired_failed"]
    assert failed == [("warning", "Unavailable"), ("error", "KeyError('b")]
