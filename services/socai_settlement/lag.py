"""How far settlement is behind the event stream, as metrics.

``socai_settlement_lag_messages`` is what the durable consumers have not acked yet,
delivered or not (every partition's: ``num_pending + num_ack_pending``),
``socai_settlement_partition_lag_messages{partition}`` the same per partition, and
``socai_settlement_pending_messages`` what the server has not delivered yet. Every instance
measures every partition, held or not: the lag of a partition nobody holds grows.
"""

from __future__ import annotations

import asyncio
import contextlib

from socai.events.log import EventLog
from socai.infra.logging import get_logger
from socai_settlement import metrics
from socai_settlement.durables import durable_of

log = get_logger("socai.settlement.lag")


class LagWatch:
    """The lag of settlement's durables (``base`` or ``base-p<k>``), measured every ``interval_s``."""

    def __init__(self, event_log: EventLog, base: str, interval_s: float) -> None:
        self.event_log = event_log
        self.base = base
        self.interval_s = interval_s

    async def partition_lags(self) -> dict[int, tuple[int, int]]:
        """Per partition: (messages not acked yet, messages not delivered yet)."""
        p = await self.event_log.layout()
        js, stream = self.event_log.js, self.event_log.stream
        out = {}
        for k in range(max(p, 1)):
            info = await js.consumer_info(stream, durable_of(self.base, p, k))
            pending = int(info.num_pending or 0)
            out[k] = (pending + int(info.num_ack_pending or 0), pending)
        return out

    async def measure(self) -> tuple[int, int]:
        """(messages not acked yet, messages not delivered yet), over every partition."""
        lags = await self.partition_lags()
        for k, (lag, _) in lags.items():
            metrics.PARTITION_LAG.labels(str(k)).set(lag)
        return sum(v[0] for v in lags.values()), sum(v[1] for v in lags.values())

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the metrics current until ``stop`` is set; a failed measure (NATS away, the
        consumer not created yet) leaves them as they were."""
        while not stop.is_set():
            try:
                lag, pending = await self.measure()
                metrics.LAG.set(lag)
                metrics.PENDING.set(pending)
            except Exception as exc:
                log.debug("lag_unavailable", error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval_s)
