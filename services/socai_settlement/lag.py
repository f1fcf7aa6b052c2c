"""How far settlement is behind the event stream, as metrics.

``socai_settlement_lag_messages`` is the stream's last sequence minus the durable
consumer's ack floor (what is not settled or acked yet, delivered or not);
``socai_settlement_pending_messages`` what the server has not delivered yet.
"""

from __future__ import annotations

import asyncio
import contextlib

from nats.js import JetStreamContext

from socai.infra.logging import get_logger
from socai_settlement import metrics

log = get_logger("socai.settlement.lag")


class LagWatch:
    """The lag of durable ``durable`` on ``stream``, measured every ``interval_s``."""

    def __init__(self, js: JetStreamContext, stream: str, durable: str, interval_s: float) -> None:
        self.js = js
        self.stream = stream
        self.durable = durable
        self.interval_s = interval_s

    async def measure(self) -> tuple[int, int]:
        """(stream last seq − the consumer's ack floor, messages not yet delivered)."""
        info = await self.js.consumer_info(self.stream, self.durable)
        stream = await self.js.stream_info(self.stream)
        floor = info.ack_floor.stream_seq if info.ack_floor else 0
        return int(stream.state.last_seq) - int(floor or 0), int(info.num_pending or 0)

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
