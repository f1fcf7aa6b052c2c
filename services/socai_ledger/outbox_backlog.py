"""The outbox's bound: how far the relay is behind the journal, and the writer's wait on it.

The relay keeps up while postings arrive slower than JetStream stores messages (one fsync
per message); above that rate the outbox grows for as long as the load lasts, and while
NATS is down it grows for as long as the outage lasts. Neither may go on without end, so
the write batcher holds new postings back once the relay is ``max_lag`` transactions
behind (``SOCAI_LEDGER_OUTBOX_MAX_LAG``; 0: no bound):

- the writer writes no batch while the lag is at or over the bound; each waiting posting
  waits at most ``wait_s`` (``SOCAI_LEDGER_OUTBOX_WAIT_S``) for the relay to make room, and
  past it is refused with UNAVAILABLE / ``OUTBOX_BACKLOG`` and a ``retry_after_ms`` hint:
  nothing of it was written, so a retry under the same idempotency key is a first attempt;
- the lag therefore never exceeds the bound by more than one batch (the batch that was
  admitted just under it) on a single replica;
- while the relay publishes nothing at all (NATS down, no relay running) postings flow
  freely up to the bound, as before; past it waiting cannot help, so once the relay has
  published nothing for a whole ``wait_s`` with the lag over the bound, every waiting
  posting is refused at once (``relay_stalled``) instead of each one first waiting its
  full ``wait_s``. The ledger then refuses postings until the relay publishes again: a
  portal whose event bus is down stops moving money after ``max_lag`` transactions rather
  than growing an outbox without end, loudly (``socai_ledger_outbox_refused_total``, a
  warning in the log) and with its journal untouched.

Where the lag comes from. The relay runs on one replica only (the holder of its advisory
lock), but every replica's writer must know the lag. Each batch reads the journal head and
the relay's cursor (``outbox_progress``) under the journal's lock, in the round trip it
makes anyway (``journal_write``), so every replica learns the exact lag at every batch it
writes, for free; the replica running the relay also hears of each published chunk at
once. While a writer holds postings back it reads both again from the database every
``refresh_s`` (two index lookups), so a replica without the relay sees the cursor move.
A replica's view between two of its batches misses what the others wrote meanwhile, so
with several replicas the bound holds within one batch per replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Final

from prometheus_client import Counter, Histogram

from socai import errors
from socai.infra.logging import get_logger
from socai_ledger import outbox_queries

log = get_logger("socai.ledger.outbox")

BACKLOG_REASON: Final = "OUTBOX_BACKLOG"
RETRY_AFTER_MS: Final = 1000
REFRESH_S: Final = 0.25  # how often a holding writer reads the lag from the database
REFRESH_TIMEOUT_S: Final = 2.0  # a database that does not answer must not hold the writer longer

WAIT_SECONDS = Histogram(
    "socai_ledger_outbox_wait_seconds",
    "How long postings held back by the outbox bound waited, until written or refused",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
REFUSED = Counter(
    "socai_ledger_outbox_refused_total",
    "Transactions refused because the outbox relay was too far behind (nothing written)",
    ["reason"],
)
REFUSAL_REASONS: Final = ("wait_expired", "relay_stalled", "stopping")


class OutboxBacklog:
    """The lag the writer sees (journal head − published cursor) and its bound.

    ``observe`` takes what a batch or the relay learnt; both numbers only grow, so stale
    reports are harmless. Not thread-safe: the writer and the relay share one event loop.
    """

    def __init__(self, pool: Any | None, *, max_lag: int, wait_s: float, refresh_s: float = REFRESH_S) -> None:
        errors.check(max_lag >= 0 and wait_s > 0 and refresh_s > 0, "outbox bound limits")
        self.max_lag = max_lag
        self.wait_s = wait_s
        self.refresh_s = refresh_s
        self.head_seq = 0
        self.published_seq = 0
        self._pool = pool
        self._progress = asyncio.Event()
        self._progressed_at = time.monotonic()
        self._over_since: float | None = None
        self._refreshed_at = float("-inf")
        self._refresh_failing = False
        self._stalled_reported = False

    @property
    def enabled(self) -> bool:
        return self.max_lag > 0

    @property
    def lag(self) -> int:
        return max(0, self.head_seq - self.published_seq)

    def observe(self, head_seq: int = 0, published_seq: int = 0) -> None:
        """What a batch (under the journal's lock) or the relay saw: the journal head, the cursor."""
        now = time.monotonic()
        self.head_seq = max(self.head_seq, head_seq)
        if published_seq > self.published_seq:
            self.published_seq = published_seq
            self._progressed_at = now
            self._progress.set()
        if self.over():
            if self._over_since is None:
                self._over_since = now
        else:
            if self._stalled_reported:
                log.info("outbox_backlog_cleared", lag=self.lag, max_lag=self.max_lag)
            self._over_since = None
            self._stalled_reported = False

    def over(self) -> bool:
        """Whether new postings must wait: the relay is ``max_lag`` or more behind."""
        return self.enabled and self.lag >= self.max_lag

    def stalled(self, now: float) -> bool:
        """Over the bound, and the relay has published nothing for a whole wait: waiting
        cannot help (NATS down, or no replica relaying), so postings are refused at once."""
        if self._over_since is None:
            return False
        stalled = now - max(self._over_since, self._progressed_at) >= self.wait_s
        if stalled and not self._stalled_reported:
            self._stalled_reported = True
            log.warning(
                "outbox_backlog_stalled",
                lag=self.lag,
                max_lag=self.max_lag,
                published_seq=self.published_seq,
                detail="the relay publishes nothing; postings are refused until it catches up",
            )
        return stalled

    async def refresh(self) -> None:
        """Read the lag from the database, at most once per ``refresh_s`` (a holding writer
        calls this in its loop). A failure keeps the last values: the writer's own next
        batch finds out whether the database is there."""
        if self._pool is None or time.monotonic() - self._refreshed_at < self.refresh_s:
            return
        self._refreshed_at = time.monotonic()
        try:
            head_seq, published_seq = await asyncio.wait_for(
                outbox_queries.journal_head_and_cursor(self._pool), REFRESH_TIMEOUT_S
            )
        except Exception as exc:
            if not self._refresh_failing:
                log.warning("outbox_lag_unreadable", error=str(exc)[:300])
            self._refresh_failing = True
            return
        self._refresh_failing = False
        self.observe(head_seq, published_seq)

    async def progressed(self, since_seq: int, timeout_s: float) -> None:
        """Return once the published cursor is past ``since_seq`` (at once if it already
        is), or after ``timeout_s``."""
        if self.published_seq > since_seq:
            return
        self._progress.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._progress.wait(), max(0.0, timeout_s))

    def refusal(self, reason: str) -> errors.Unavailable:
        """The error a held-back posting gets: retryable, naming the lag, the bound and a retry hint."""
        if reason == "relay_stalled":
            why = "the outbox relay is publishing nothing (is NATS down?)"
        elif reason == "stopping":
            why = "the ledger is stopping"
        else:
            why = f"the relay did not catch up within {self.wait_s:g} s"
        return errors.Unavailable(
            BACKLOG_REASON,
            f"the ledger outbox is {self.lag:,} transactions behind (bound {self.max_lag:,}) and {why}; "
            "nothing was written: retry with the same idempotency key",
            retry_after_ms=RETRY_AFTER_MS,
            outbox_lag=self.lag,
            max_lag=self.max_lag,
            why=reason,
        )
