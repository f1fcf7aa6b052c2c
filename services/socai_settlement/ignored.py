"""Messages acked with no effect, counted and logged without flooding the log.

Bytes that are not an Event on a hand already settled, a second HandEnded of a hand, a
hand's event after its settlement, a message on a hand's subject that is not on the
table's sealed hand chain (``socai.events.seal``: a stranger's): each is counted in
``socai_settlement_ignored_messages_total{kind}`` and logged with its stream sequence.
"""

from __future__ import annotations

import time
from typing import Any, Final

from socai.infra.logging import get_logger
from socai_settlement import metrics

log = get_logger("socai.settlement.ignored")

LOG_EVERY_S: Final = 60.0  # one line per kind of ignored message at most this often
# The kinds (the metric's label).
NOT_AN_EVENT: Final = "not_an_event"  # bytes that are not an Event, on a hand already settled
DUPLICATE_HAND_ENDED: Final = "duplicate_hand_ended"  # a second HandEnded of a hand (another stream seq)
EVENT_AFTER_SETTLEMENT: Final = "event_after_settlement"  # a hand's event after its settlement
NOT_THE_TABLES: Final = "not_the_tables"  # on a settled hand's subject, not on its sealed chain


class IgnoredMessages:
    """Messages acked with no effect: counted by kind, and logged with their stream
    sequence — the first of each kind at once, then at most one line per kind every
    ``log_every_s`` with how many came since, so that a flood of them (a misbehaving
    publisher) is seen without flooding the log."""

    def __init__(self, log_every_s: float = LOG_EVERY_S) -> None:
        self.log_every_s = log_every_s
        self._logged_at: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def add(self, kind: str, stream_seq: int, **context: Any) -> None:
        metrics.IGNORED.labels(kind).inc()
        count = self._since[kind] = self._since.get(kind, 0) + 1
        now = time.monotonic()
        last = self._logged_at.get(kind)
        if last is not None and now - last < self.log_every_s:
            return
        self._logged_at[kind] = now
        self._since[kind] = 0
        log.warning("message_ignored", kind=kind, stream_seq=stream_seq, count=count, **context)
