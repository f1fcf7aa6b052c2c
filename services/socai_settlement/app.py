"""Wiring: ``build_app(settings, config) -> App`` creates the pools, clients and servers.

Nothing here runs at import. The process shape is ``socai.infra.service.run``: it serves
the metrics port, builds the app, calls ``App.start`` (the gRPC server, the partition
workers — one ``Pipeline`` per leased partition, ``partitions`` — and the lag watcher),
waits for SIGTERM, then calls
``App.stop``: health NOT_SERVING, in-flight calls finish, no new batch is taken and the current one finishes
(or is cancelled after ``grace_s``), every partition at once; what a pipeline still holds is
given back (a nak, recorded as given back: no count towards its hand's poison limit), the
leases are released, and everything closes in reverse order. An unexpected error in the pipeline is logged and it restarts
after a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NatsClient

from socai.events.log import EventLog
from socai.gen.ledger.v1 import ledger_pb2_grpc
from socai.gen.settlement.v1 import settlement_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.grpc_server import GrpcServer, build_server, caller_limiter
from socai.infra.logging import get_logger
from socai.infra.nats import connect
from socai.infra.nats_liveness import ConnectionWatch
from socai_settlement import metrics
from socai_settlement.config import SettlementConfig, lease_config
from socai_settlement.lag import LagWatch
from socai_settlement.pipeline import Pipeline
from socai_settlement.poster import LedgerPoster
from socai_settlement.sealed_replay import Replayer, seal_policy
from socai_settlement.server import SERVICE_NAME, SettlementServicer, access_policy
from socai_settlement.settler import Settler
from socai_settlement.store import Store
from socai_settlement.workers import PartitionWorkers, instance_id

log = get_logger("socai.settlement")

RESTART_PAUSE_S = 1.0


@dataclass
class App:
    settings: Settings
    config: SettlementConfig
    nc: NatsClient
    ledger_channel: Any
    store: Store
    event_log: EventLog
    poster: LedgerPoster
    settler: Settler
    workers: PartitionWorkers
    lag: LagWatch
    grpc: GrpcServer
    nats_watch: ConnectionWatch
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def pipeline(self) -> Pipeline:
        """The one pipeline this instance runs (an unpartitioned stream, or one partition held)."""
        running = list(self.workers.running.values())
        if len(running) != 1:
            raise RuntimeError(f"{len(running)} pipelines run here, not one")
        return running[0].pipeline

    @property
    def address(self) -> str:
        """``host:port`` the gRPC server listens on (the port resolved when it was 0)."""
        host = self.settings.listen_address(self.settings.settlement_addr).rsplit(":", 1)[0]
        return f"{host}:{self.grpc.port}"

    async def start(self) -> None:
        """Serve gRPC (health SERVING at once: reads are answered even while the ledger is
        down) and start consuming.

        The durable consumer is created by the pipeline, which retries until the
        stream exists: in a deployment the migration job provisions it, and the settlement
        NATS user may not create or change streams. Starting twice starts nothing new.
        """
        if self._tasks:
            return
        await self.settler.replayer.start()
        self.nats_watch.start()
        await self.grpc.server.start()
        await self.grpc.set_serving(True)
        self._tasks = [
            asyncio.create_task(self._supervise(), name="settlement-consumer"),
            asyncio.create_task(self.lag.run(self._stop), name="settlement-lag"),
            asyncio.create_task(self._watch_dead_letters(), name="settlement-dead-letters"),
        ]
        log.info(
            "settlement_started",
            address=self.address,
            durable=self.config.durable,
            stream=self.settings.events_stream,
            ledger=self.settings.ledger_addr,
        )

    async def _watch_dead_letters(self) -> None:
        """Keep ``socai_settlement_dead_letters_open`` current (the alert's series: a
        counter only says how many ever happened, not how many still wait)."""
        while not self._stop.is_set():
            try:
                _, open_dead = await self.store.counts()
                metrics.DEAD_LETTERS_OPEN.set(open_dead)
            except Exception as exc:
                log.debug("dead_letter_count_unavailable", error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.config.lag_interval_s)

    async def _supervise(self) -> None:
        while not self._stop.is_set():
            try:
                await self.workers.run(self._stop)
            except asyncio.CancelledError:
                raise
            except Exception:
                # NATS away at start (no stream info, no lease bucket): try again.
                log.exception("consumer_crashed", restart_in_s=RESTART_PAUSE_S)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), RESTART_PAUSE_S)

    async def stop(self, grace_s: float = 10.0) -> None:
        """Graceful: NOT_SERVING, in-flight calls finish, the batch in hand is committed (or
        cancelled after ``grace_s``: its messages come back by redelivery), then close."""
        with contextlib.suppress(Exception):
            await self.grpc.set_serving(False)
        await self.grpc.server.stop(min(grace_s, 5.0))
        self._stop.set()
        if self._tasks:
            _, still = await asyncio.wait(self._tasks, timeout=grace_s)
            for task in still:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.settler.replayer.close()
        await self.nats_watch.stop()
        with contextlib.suppress(Exception):
            await self.nc.close()
        await self.ledger_channel.close()
        await self.store.close()
        log.info("settlement_stopped")


async def build_app(settings: Settings, config: SettlementConfig | None = None) -> App:
    """Connect to NATS, create the PostgreSQL pool, open the ledger channel, build the
    gRPC server.

    Raises Unavailable("NATS_UNAVAILABLE") when NATS cannot be reached and
    Unavailable("PORT_IN_USE") when the gRPC address is taken. The ledger need not be up.
    """

    cfg = config or SettlementConfig.from_env()
    nc = await connect(settings.nats_url_for("settlement"), name="socai-settlement")
    ledger_channel = channel(settings.ledger_addr, settings.token_of("settlement"))
    store = await Store.open(settings.effective_database_url)
    event_log = EventLog(nc, settings.events_stream, settings.events_prefix)
    poster = LedgerPoster(
        ledger_pb2_grpc.LedgerServiceStub(ledger_channel),
        batch_max=cfg.post_batch_max,
        deadline_s=cfg.ledger_deadline_s,
        backoff_initial_s=cfg.backoff_initial_s,
        backoff_max_s=cfg.backoff_max_s,
    )
    settler = Settler(
        event_log,
        store,
        poster,
        replayer=Replayer(
            cfg.replay_workers, seal_policy(settings.hand_seal_public_keys(), settings.seal_legacy_before_seq)
        ),
        backoff_initial_s=cfg.backoff_initial_s,
        backoff_max_s=cfg.backoff_max_s,
    )
    workers = PartitionWorkers(
        nc,
        settler,
        cfg,
        event_log,
        lease_config(settings, cfg),
        instance=cfg.instance_id or instance_id(),
        lease_metrics=metrics.LEASES,
    )
    lag = LagWatch(event_log, cfg.durable, cfg.lag_interval_s)
    servicer = SettlementServicer(store, event_log, settler)
    grpc_server = build_server(
        service="settlement",
        address=settings.listen_address(settings.settlement_addr),
        registrations=[lambda s: pb_grpc.add_SettlementServiceServicer_to_server(servicer, s)],
        service_names=[SERVICE_NAME],
        policy=access_policy(dict(settings.tokens)),
        caller_rate=caller_limiter("settlement", settings.limits.caller_calls_per_s),
    )
    return App(
        settings=settings,
        config=cfg,
        nc=nc,
        ledger_channel=ledger_channel,
        store=store,
        event_log=event_log,
        poster=poster,
        settler=settler,
        workers=workers,
        lag=lag,
        grpc=grpc_server,
        nats_watch=ConnectionWatch(nc, "settlement"),
    )
