"""The ledger service's own knobs (the shared ones are ``socai.infra.config.Settings``).

| variable | default | meaning |
|---|---|---|
| ``SOCAI_LEDGER_OUTBOX_MAX_LAG`` | 10000 | committed transactions the outbox relay may be behind before new postings wait for it (0: no bound) |
| ``SOCAI_LEDGER_OUTBOX_WAIT_S`` | 2 | how long a posting waits for the relay past that bound before it is refused (UNAVAILABLE, ``OUTBOX_BACKLOG``) |
| ``SOCAI_LEDGER_WRITE_PIPELINE`` | 2 | write batches in flight at once, each on its own connection (1..4; 1: one at a time; ``batcher``) |

Sizing the bound: the lag it allows is also how long postings go on while NATS is down
(10,000 transactions: about 5 minutes at the soak's ~30 postings a second, a few seconds
at full speed) and how long a consumer of ``SOCAI_LEDGER`` may trail the journal (the
relay publishes ~1,000–3,000 a second here). docs/use/ledger.md, "Outbox", says what happens
past it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

OUTBOX_MAX_LAG: Final = 10_000
OUTBOX_WAIT_S: Final = 2.0
PIPELINE: Final = 2  # write batches in flight at once (socai_ledger.batcher, "Two batches in flight")
PIPELINE_MAX: Final = 4
OUTBOX_WAIT_MAX_S: Final = 60.0  # a posting must hear back before its caller's deadline, not hang


@dataclass(frozen=True)
class LedgerConfig:
    """Immutable; ``from_env`` starts from these defaults, so a config built in code and one
    read from an empty environment are the same."""

    outbox_max_lag: int = OUTBOX_MAX_LAG
    outbox_wait_s: float = OUTBOX_WAIT_S
    write_pipeline: int = PIPELINE

    def __post_init__(self) -> None:
        if not 1 <= self.write_pipeline <= PIPELINE_MAX:
            raise ValueError(f"write_pipeline must be in 1..{PIPELINE_MAX}")
        if self.outbox_max_lag < 0:
            raise ValueError("outbox_max_lag must be 0 (no bound) or more")
        if not 0 < self.outbox_wait_s <= OUTBOX_WAIT_MAX_S:
            raise ValueError(f"outbox_wait_s must be in (0, {OUTBOX_WAIT_MAX_S}]")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LedgerConfig:
        e = os.environ if env is None else env
        d = cls()
        return replace(
            d,
            outbox_max_lag=int(e.get("SOCAI_LEDGER_OUTBOX_MAX_LAG", d.outbox_max_lag)),
            outbox_wait_s=float(e.get("SOCAI_LEDGER_OUTBOX_WAIT_S", d.outbox_wait_s)),
            write_pipeline=int(e.get("SOCAI_LEDGER_WRITE_PIPELINE", d.write_pipeline)),
        )
