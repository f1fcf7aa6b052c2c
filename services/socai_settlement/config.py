"""The settlement service's own knobs (the shared ones are ``socai.infra.config.Settings``).

| variable | default | meaning |
|---|---|---|
| ``SOCAI_SETTLEMENT_DURABLE`` | ``settlement`` | durable consumer name |
| ``SOCAI_SETTLEMENT_FETCH_BATCH`` | 4000 | messages per pull |
| ``SOCAI_SETTLEMENT_POST_BATCH`` | 200 | hands per PostTransactions call (and per store transaction) |
| ``SOCAI_SETTLEMENT_MAX_ACK_PENDING`` | 20000 | the consumer's bound on unacknowledged messages |
| ``SOCAI_SETTLEMENT_ACK_WAIT_S`` | 30 | redelivery after this long without an ack or a progress beat |
| ``SOCAI_SETTLEMENT_MAX_DELIVER`` | -1 (no limit) | the server stops redelivering after this many deliveries |
| ``SOCAI_SETTLEMENT_REPLAY_WORKERS`` | 2 with 2+ CPUs, else 0 | processes that replay hands (0: in the service's own process) |
| ``SOCAI_SETTLEMENT_POISON_AFTER`` | 5 | failed attempts after which a HandEnded is dead-lettered (MAX_DELIVERIES); deliveries given back at a handover or a stop do not count |
| ``SOCAI_SETTLEMENT_LEASE_BUCKET`` | ``settlement_leases_<events stream>`` | the JetStream KV bucket of the partitions' leases |
| ``SOCAI_SETTLEMENT_LEASE_TTL_S`` | 10 | a lease's TTL: a dead instance's partitions move about this long after it died |
| ``SOCAI_INSTANCE_ID`` | host-pid-random | this instance's name among the lease holders (unique per process) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from socai.infra.config import Settings
from socai.infra.leases import LeaseConfig


def default_replay_workers() -> int:
    """Two replay processes beside the service when there is a second core: replay is most
    of a hand's CPU, and with two the replay of a batch is split in halves that use what the
    service, the ledger, PostgreSQL and NATS leave of both cores (one worker drains a backlog
    markedly slower on two cores; docs/use/settlement.md). Never more than two by default:
    ``os.cpu_count`` is the node's, not the container's CPU limit."""
    return 2 if (os.cpu_count() or 1) >= 2 else 0


@dataclass(frozen=True)
class SettlementConfig:
    """Immutable, like ``socai.infra.config.Settings``: each field's default is written once,
    here, and ``from_env`` starts from these defaults, so a config built in code and one read
    from an empty environment are the same."""

    durable: str = "settlement"
    fetch_batch: int = 4000  # bigger pulls, bigger ledger batches (~120 hands, not ~60, in a backlog)
    fetch_timeout_s: float = 1.0
    post_batch_max: int = 200
    replay_workers: int = field(default_factory=default_replay_workers)
    pipeline_depth: int = 2  # replayed chunks waiting for the ledger (a bound on memory and on held messages)
    max_ack_pending: int = 20_000
    ack_wait_s: float = 30.0
    # No limit on the server: it counts every delivery, handovers included, and the poison
    # limit is settlement's own count of failed attempts (``poison_after_deliveries``).
    max_deliver: int = -1
    poison_after_deliveries: int = 5
    ledger_deadline_s: float = 10.0
    backoff_initial_s: float = 0.1
    backoff_max_s: float = 5.0
    cache_events_max: int = 200_000
    lag_interval_s: float = 2.0
    lease_bucket: str = ""  # empty: settlement_leases_<events stream> (leases belong to their stream)
    lease_ttl_s: float = 10.0
    instance_id: str = ""  # empty: host-pid-random, made at start

    def __post_init__(self) -> None:
        if not 1 <= self.fetch_batch <= self.max_ack_pending:
            raise ValueError("fetch_batch must be 1..max_ack_pending")
        if not 1 <= self.post_batch_max <= 1000:
            raise ValueError("post_batch_max must be 1..1000 (the ledger's limit)")
        if not 0 <= self.replay_workers <= 32:
            raise ValueError("replay_workers must be 0..32")
        if self.poison_after_deliveries < 1 or 0 <= self.max_deliver <= self.poison_after_deliveries:
            # A finite server limit must leave a margin: a dead letter can then be written
            # even if the process dies while it holds the message. Handovers use up server
            # deliveries without failing, so the default sets no server limit at all.
            raise ValueError("poison_after_deliveries must be at least 1 and below max_deliver (or max_deliver -1)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SettlementConfig:
        """The defaults above, with what the environment sets (see the module docstring)."""
        e = os.environ if env is None else env
        d = cls()
        return replace(
            d,
            durable=e.get("SOCAI_SETTLEMENT_DURABLE", d.durable),
            fetch_batch=int(e.get("SOCAI_SETTLEMENT_FETCH_BATCH", d.fetch_batch)),
            post_batch_max=int(e.get("SOCAI_SETTLEMENT_POST_BATCH", d.post_batch_max)),
            max_ack_pending=int(e.get("SOCAI_SETTLEMENT_MAX_ACK_PENDING", d.max_ack_pending)),
            ack_wait_s=float(e.get("SOCAI_SETTLEMENT_ACK_WAIT_S", d.ack_wait_s)),
            max_deliver=int(e.get("SOCAI_SETTLEMENT_MAX_DELIVER", d.max_deliver)),
            poison_after_deliveries=int(e.get("SOCAI_SETTLEMENT_POISON_AFTER", d.poison_after_deliveries)),
            replay_workers=int(e.get("SOCAI_SETTLEMENT_REPLAY_WORKERS", d.replay_workers)),
            lease_bucket=e.get("SOCAI_SETTLEMENT_LEASE_BUCKET", d.lease_bucket),
            lease_ttl_s=float(e.get("SOCAI_SETTLEMENT_LEASE_TTL_S", d.lease_ttl_s)),
            instance_id=e.get("SOCAI_INSTANCE_ID", d.instance_id),
        )


def lease_config(settings: Settings, cfg: SettlementConfig) -> LeaseConfig:
    """The lease bucket of the settlement partitions, as the service and ``socai migrate``
    create it."""
    return LeaseConfig(
        cfg.lease_bucket or f"settlement_leases_{settings.events_stream}",
        ttl_s=cfg.lease_ttl_s,
        replicas=settings.stream_replicas,
    )
