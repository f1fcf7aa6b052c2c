"""Wiring: ``await build_app(settings) -> App`` creates the read pool, the write batcher, the
hold writer, the outbox relay, the outbox's bound and the gRPC server; ``App.start`` /
``App.stop`` run and drain them in order. The ledger's own knobs are ``socai_ledger.config.LedgerConfig``.

The process shape (metrics port, signals) is ``socai.infra.service.run`` (``__main__``).
Nothing here runs at import.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from prometheus_client import Gauge

from socai import accounts
from socai.audit.journal import JournalSigner
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.db_pool import Pool
from socai.infra.grpc_server import GrpcServer, build_server, caller_limiter
from socai.infra.logging import get_logger
from socai_ledger import db, holds, verify
from socai_ledger.batcher import WriteBatcher
from socai_ledger.config import LedgerConfig
from socai_ledger.outbox import OutboxRelay
from socai_ledger.outbox_backlog import OutboxBacklog
from socai_ledger.server import SERVICE_NAME, LedgerServicer, access_policy

log = get_logger("socai.ledger")

TRIAL_BALANCE = Gauge("socai_ledger_trial_balance_gold", "The sum of all balances (must be 0)")
TRIAL_BALANCE_INTERVAL_S: Final = 30.0
# The house bank's free capacity is read this often (holds.BANK_*): a posting moves the balance
# without a hold call, and other replicas answer hold calls too.
BANK_INTERVAL_S: Final = 5.0


@dataclass
class App:
    settings: Settings
    grpc: GrpcServer
    pool: Pool
    batcher: WriteBatcher
    relay: OutboxRelay | None
    hold_writer: holds.HoldWriter
    backlog: OutboxBacklog | None = None
    trial_balance_interval_s: float = TRIAL_BALANCE_INTERVAL_S
    bank_interval_s: float = BANK_INTERVAL_S
    _watch: asyncio.Task[None] | None = field(default=None, repr=False)
    _watch_bank_task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """``host:port`` the gRPC server listens on (the port resolved when it was 0)."""
        host = self.settings.listen_address(self.settings.ledger_addr).rsplit(":", 1)[0]
        return f"{host}:{self.grpc.port}"

    async def start(self) -> None:
        """Open the pool, start the writer and the relay, then serve (health SERVING last).

        Starting the gRPC server is idempotent: a caller that started it already (as
        ``socai.infra.service`` and the test harnesses may) loses nothing.
        """
        await self.pool.open(wait=True, wait_s=30)
        await self.batcher.start()
        await self.hold_writer.start()
        if self.relay is not None:
            await self.relay.start()
        self._watch = asyncio.create_task(self._watch_trial_balance(), name="ledger-trial-balance")
        self._watch_bank_task = asyncio.create_task(self._watch_bank(), name="ledger-bank-capacity")
        await self.grpc.server.start()
        await self.grpc.set_serving(True)
        log.info("ledger_serving", address=self.address, relay=self.relay is not None)

    async def stop(self, grace_s: float = 5.0) -> None:
        """Graceful: NOT_SERVING, stop accepting and let in-flight calls finish (their batches
        commit), flush the batcher, let the relay finish its round, close the pool."""
        with contextlib.suppress(Exception):
            await self.grpc.set_serving(False)
        await self.grpc.server.stop(grace_s)
        await self.batcher.close()
        await self.hold_writer.close()
        if self.relay is not None:
            await self.relay.stop()
        for task in (self._watch, self._watch_bank_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._watch = self._watch_bank_task = None
        await self.pool.close()
        log.info("ledger_stopped")

    async def _watch_trial_balance(self) -> None:
        """Export the trial balance as a gauge (alerted on when it is not 0)."""
        while True:
            try:
                TRIAL_BALANCE.set((await verify.trial_balance(self.pool)).total_gold)
            except Exception as exc:
                log.warning("trial_balance_failed", error=str(exc))
            await asyncio.sleep(self.trial_balance_interval_s)

    async def _watch_bank(self) -> None:
        """Export house:bank's free capacity (balance − held), its holds not released and
        the oldest one's age (alerted on: deploy/k8s/monitoring/alerts.yaml)."""
        while True:
            try:
                balance, held, open_holds, oldest = await holds.bank_figures(self.pool, accounts.HOUSE_BANK)
                holds.observe_bank(balance, held)
                holds.HOLDS_OPEN.set(open_holds)
                age_s = (datetime.now(UTC) - oldest).total_seconds() if oldest is not None else 0.0
                holds.HOLD_OLDEST_SECONDS.set(max(0.0, age_s))
            except Exception as exc:
                log.warning("bank_capacity_failed", error=str(exc))
            await asyncio.sleep(self.bank_interval_s)


async def build_app(
    settings: Settings,
    *,
    relay: bool = True,
    linger_s: float = 0.002,
    max_batch: int | None = None,
    config: LedgerConfig | None = None,
) -> App:
    """The ledger, listening on ``settings.listen_address(settings.ledger_addr)`` (port 0
    picks a free one). ``relay=False`` runs without the outbox relay (the outbox keeps
    filling; another replica's relay publishes it). ``config``: the ledger's own knobs,
    from the environment when None (``LedgerConfig.from_env``)."""
    cfg = config or LedgerConfig.from_env()
    database_url = settings.effective_database_url
    pool = db.create_pool(database_url)
    # Every replica bounds the outbox, the ones without the relay too: they read the lag
    # under the journal's lock at each batch, and from the database while they hold back.
    backlog = (
        OutboxBacklog(pool, max_lag=cfg.outbox_max_lag, wait_s=cfg.outbox_wait_s) if cfg.outbox_max_lag > 0 else None
    )
    outbox = (
        OutboxRelay(
            database_url,
            settings.nats_url_for("ledger"),
            stream=settings.ledger_stream_spec(),
            prefix=settings.ledger_prefix,
        )
        if relay
        else None
    )
    batcher_options: dict[str, Any] = {"linger_s": linger_s, "pipeline": cfg.write_pipeline}
    if max_batch is not None:
        batcher_options["max_batch"] = max_batch
    batcher = WriteBatcher(
        database_url,
        on_commit=outbox.wake if outbox else None,
        backlog=backlog,
        marks=outbox.marks if outbox else None,
        **batcher_options,
    )
    if outbox is not None:
        outbox.yield_to(batcher.busy)
        if backlog is not None:
            outbox.report_to(backlog.observe)
    hold_writer = holds.HoldWriter(pool)
    journal_key = settings.journal_seal_private_key()
    servicer = LedgerServicer(
        pool, batcher, hold_writer, JournalSigner(journal_key) if journal_key is not None else None
    )
    grpc_server = build_server(
        service="ledger",
        address=settings.listen_address(settings.ledger_addr),
        registrations=[lambda s: pb_grpc.add_LedgerServiceServicer_to_server(servicer, s)],
        service_names=[SERVICE_NAME],
        policy=access_policy(settings.tokens),
        caller_rate=caller_limiter("ledger", settings.limits.caller_calls_per_s),
    )
    return App(
        settings=settings,
        grpc=grpc_server,
        pool=pool,
        batcher=batcher,
        relay=outbox,
        hold_writer=hold_writer,
        backlog=backlog,
    )
