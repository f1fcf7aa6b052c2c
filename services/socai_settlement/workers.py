"""Settlement scaled out: one pipeline per partition of the event log this instance leases.

A table's hands must reach the ledger in play order, so each partition of the event log
(``socai.infra.partitions``) is consumed by one durable and, at any moment, by at most one
instance: the holder of the partition's lease (``socai.infra.leases``, a JetStream KV
bucket). Every instance runs a ``LeaseManager`` over the same P partitions; when it acquires
partition k it starts a ``Pipeline`` on k's durable, when it loses k it stops that pipeline
before anything else can happen (the manager awaits ``on_lost``), and before each chunk is
posted the pipeline checks that the lease is still valid by this instance's own clock. That
check alone leaves a gap (a pause between the check and the post), so every post also
carries the lease's token as a ledger fence (``PostTransactions.fence``): a new holder
first claims its token in the ledger, and from then on the ledger refuses the old holder's
posts whole (FENCED), in the same database transaction that would have applied them. No
pull request of a holder outlives its lease by its clock, and a stopping pipeline gives back
(a nak, recorded as given back) what it holds and what it was delivered and never handled.
A new holder starts at the durable's ack floor and first settles, from the stream, whatever
earlier holders left unacknowledged (``outstanding.StartupRecovery``), so the partition's hands
stay in order across every handover, and the deliveries a handover ended never count
towards a hand's poison limit. The partitions given up together (a stop, a rebalance) are
stopped concurrently (``LeaseManager``).

An unpartitioned stream (P = 0, the default) is one partition: the durable ``settlement``
on every event, leased like the others, so a second instance is a hot standby rather than a
second consumer that would break the order.

Durables: ``settlement`` (P = 0) or ``settlement-p<k>`` filtered on ``<prefix>.<k>.*.*``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Final

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from socai import errors
from socai.events.log import EventLog
from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.leases import LeaseConfig, LeaseManager, LeaseMetrics
from socai.infra.logging import get_logger
from socai_settlement import metrics
from socai_settlement.config import SettlementConfig
from socai_settlement.durables import durable_of, filter_of
from socai_settlement.pipeline import Pipeline
from socai_settlement.settler import Settler

log = get_logger("socai.settlement.workers")

FENCE_SCOPE: Final = "settlement"
RESTART_PAUSE_S: Final = 1.0
STOP_GRACE_S: Final = 10.0


def instance_id() -> str:
    """Unique per process start (a reused id would let two processes share one's leases)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass
class _Running:
    pipeline: Pipeline
    stop: asyncio.Event
    task: asyncio.Task[None]


@dataclass
class PartitionWorkers:
    """Holds leases on some partitions and runs a pipeline on each (see the module docstring)."""

    nc: NatsClient
    settler: Settler
    config: SettlementConfig
    event_log: EventLog
    lease_config: LeaseConfig
    instance: str = field(default_factory=instance_id)
    lease_metrics: LeaseMetrics | None = None
    partitions: int = -1  # P as the stream says, once known
    manager: LeaseManager | None = None
    running: dict[int, _Running] = field(default_factory=dict)

    @property
    def js(self) -> JetStreamContext:
        return self.event_log.js

    def held(self) -> frozenset[int]:
        return frozenset(self.running)

    async def run(self, stop: asyncio.Event) -> None:
        """Lease and consume until ``stop``; then stop every pipeline and release the leases."""
        self.partitions = await self.event_log.layout()
        manager = LeaseManager(
            self.js,
            self.lease_config,
            self.instance,
            max(self.partitions, 1),
            self._acquired,
            self._lost,
            self.lease_metrics,
        )
        await manager.start()
        self.manager = manager
        log.info("settlement_leasing", instance=self.instance, partitions=self.partitions)
        try:
            await stop.wait()
        finally:
            await manager.stop()  # awaits _lost for every partition held

    def _lease_check(self, partition: int) -> None:
        lease = self.manager.lease(partition) if self.manager is not None else None
        if lease is None:
            raise errors.PreconditionFailed("LEASE_LOST", f"partition {partition} is no longer leased here")
        lease.check()

    def _lease_left_s(self, partition: int) -> float:
        """Seconds the lease on ``partition`` stays valid by this instance's clock (0: lost)."""
        lease = self.manager.lease(partition) if self.manager is not None else None
        return 0.0 if lease is None else max(0.0, lease.valid_until - lease.clock())

    async def _acquired(self, partition: int, token: int) -> None:
        p = self.partitions
        config = dataclasses.replace(self.config, durable=durable_of(self.config.durable, p, partition))
        # Every post of the pipeline carries the lease's token (each post advances the
        # ledger's fence), so a paused previous holder is refused (FENCED).
        fence = ledger_pb2.Fence(scope=FENCE_SCOPE, partition=partition, token=token)
        pipeline = Pipeline(
            self.nc,
            self.settler,
            config,
            stream=self.event_log.stream,
            prefix=self.event_log.prefix,
            filter_subject=filter_of(self.event_log.prefix, p, partition),
            lease_check=lambda: self._lease_check(partition),
            lease_left_s=lambda: self._lease_left_s(partition),
            fence=fence,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(self._supervise(partition, pipeline, stop, fence), name=f"settlement-p{partition}")
        self.running[partition] = _Running(pipeline, stop, task)
        metrics.PARTITIONS.set(len(self.running))
        log.info("partition_started", partition=partition, durable=config.durable, token=token)

    async def _lost(self, partition: int) -> None:
        running = self.running.pop(partition, None)
        metrics.PARTITIONS.set(len(self.running))
        if running is None:
            return
        running.stop.set()
        done, _ = await asyncio.wait({running.task}, timeout=STOP_GRACE_S)
        if not done:
            # What it held comes back by redelivery to the next holder.
            running.task.cancel()
            with contextlib.suppress(BaseException):
                await running.task
        # What the server delivered and the pipeline never handled is given back too (a nak,
        # recorded as given back), so the next holder gets it at once, in order, and its
        # hands' poison counts do not move.
        with contextlib.suppress(Exception):
            await running.pipeline.close()
        log.info("partition_stopped", partition=partition)

    async def _supervise(
        self, partition: int, pipeline: Pipeline, stop: asyncio.Event, fence: ledger_pb2.Fence
    ) -> None:
        # The claim records the lease's token in the ledger at once, so a paused previous
        # holder is refused (FENCED) even before this one has anything to post; it runs beside
        # the pipeline, which must not wait for the ledger (non-events are dead-lettered and
        # table facts acked while the ledger is down).
        claim = asyncio.create_task(self._claim(partition, fence), name=f"settlement-claim-p{partition}")
        try:
            await self._run(partition, pipeline, stop)
        finally:
            claim.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await claim

    async def _claim(self, partition: int, fence: ledger_pb2.Fence) -> None:
        try:
            await self.settler.poster.claim(fence)
            log.info("partition_claimed", partition=partition, token=fence.token)
        except errors.PreconditionFailed as exc:
            log.warning("partition_claim_fenced", partition=partition, token=fence.token, error=exc.message)

    async def _run(self, partition: int, pipeline: Pipeline, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await pipeline.run(stop)
            except asyncio.CancelledError:
                raise
            except errors.PreconditionFailed as exc:
                if exc.code != "LEASE_LOST":
                    log.exception("pipeline_crashed", partition=partition, restart_in_s=RESTART_PAUSE_S)
                else:
                    # The lease manager calls _lost, which stops this loop; until then, wait.
                    log.warning("pipeline_lease_lost", partition=partition)
            except Exception:
                log.exception("pipeline_crashed", partition=partition, restart_in_s=RESTART_PAUSE_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RESTART_PAUSE_S)
