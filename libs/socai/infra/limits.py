"""Limits on what one caller, player or owner may take of a service.

A service answers every caller from the same CPU, memory and event log. Without limits one
of them takes what the others need: one player opening a thousand ``WatchTable`` streams
that nobody reads (each may hold 2,000 events), one owner creating 300 tables in 1.4 s.
Each limit here refuses the call that would go over it with ``RESOURCE_EXHAUSTED`` and an
ErrorInfo reason — ``RATE_LIMITED`` (with ``retry_after_ms``), ``TOO_MANY_STREAMS``,
``TOO_MANY_TABLES`` — whose metadata name the limit (``limit``: the setting, ``max``: its
value); nothing is done. Refusals are counted in ``socai_limit_refusals_total{service,limit}``.

- ``RateLimiter``: a token bucket per key (a caller, a player, an owner): ``rate`` tokens per
  second up to ``burst``; a call takes one. The buckets are bounded too (``KEYS_MAX``): a full
  bucket (an idle key) is forgotten, since a new one starts full anyway.
- ``Slots``: how many of something each key holds open at once (streams).

The settings are ``socai.infra.config.Limits`` (``SOCAI_LIMIT_*``; 0 turns one off). Every
limit is per instance except the open tables of an owner, which the table service counts in
the directory all instances share.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final

from prometheus_client import Counter

from socai import errors

REFUSALS = Counter(
    "socai_limit_refusals_total",
    "Calls and streams refused by a limit (RESOURCE_EXHAUSTED), by the limit's setting",
    ["service", "limit"],
)

KEYS_MAX: Final = 100_000  # buckets or slot counts kept per limiter
SWEEP_EVERY_S: Final = 1.0  # at most one sweep of idle buckets per second, when full
BURST_S: Final = 2.0  # a rate's burst: two seconds' worth of calls


def refused(
    service: str, reason: str, setting: str, limit: float, message: str, **details: object
) -> errors.ResourceExhausted:
    """The error for a call over ``setting`` (counted), with the limit in its metadata."""
    REFUSALS.labels(service, setting).inc()
    shown = int(limit) if float(limit).is_integer() else limit
    return errors.ResourceExhausted(reason, message, limit=setting, max=shown, **details)


class RateLimiter:
    """A token bucket per key: ``per_s`` calls a second, ``burst`` at once (0: no limit)."""

    def __init__(
        self,
        service: str,
        setting: str,
        per_s: float,
        *,
        burst: float | None = None,
        rate_text: str = "",
        setting_value: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service
        self.setting = setting
        self.per_s = per_s
        self.burst = max(1.0, per_s * BURST_S if burst is None else burst)
        self.rate_text = rate_text or f"{per_s:g} calls per second"
        self.setting_value = per_s if setting_value is None else setting_value
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._swept_at = -math.inf

    @property
    def enabled(self) -> bool:
        return self.per_s > 0

    def admit(self, key: str) -> None:
        """Take one token of ``key``'s bucket. Raises ResourceExhausted("RATE_LIMITED") with
        ``retry_after_ms`` (when the next token is due) when it is empty."""
        if self.per_s <= 0:
            return
        wait_s = self.take(key)
        if wait_s > 0:
            retry_after_ms = max(1, math.ceil(wait_s * 1000))
            raise refused(
                self.service,
                "RATE_LIMITED",
                self.setting,
                self.setting_value,
                f"{key}: more than {self.rate_text} ({self.setting}); retry in {retry_after_ms} ms",
                retry_after_ms=retry_after_ms,
            )

    def take(self, key: str) -> float:
        """Take a token: 0.0 when there was one, else the seconds until there is."""
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= KEYS_MAX and not self._sweep(now):
                return 1.0 / self.per_s  # every bucket busy: no room for another key now
            tokens = self.burst
        else:
            tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.per_s)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.per_s
        self._buckets[key] = (tokens - 1.0, now)
        return 0.0

    def _sweep(self, now: float) -> bool:
        """Forget the buckets that have filled up again (their keys are idle); whether any
        room was made. At most once a second, so a flood of new keys costs no scan each."""
        if now - self._swept_at < SWEEP_EVERY_S:
            return False
        self._swept_at = now
        full = [k for k, (tokens, at) in self._buckets.items() if tokens + (now - at) * self.per_s >= self.burst]
        for key in full:
            del self._buckets[key]
        return bool(full)

    def __len__(self) -> int:
        return len(self._buckets)


class Slots:
    """How many of something (streams) each key holds open, at most ``max_per_key`` (0: no limit)."""

    def __init__(self, service: str, setting: str, max_per_key: int, what: str = "streams") -> None:
        self.service = service
        self.setting = setting
        self.max_per_key = max_per_key
        self.what = what
        self._held: dict[str, int] = {}

    def acquire(self, key: str) -> None:
        """Hold one more for ``key``. Raises ResourceExhausted("TOO_MANY_STREAMS") when
        ``key`` holds ``max_per_key`` already (or when ``KEYS_MAX`` keys hold some)."""
        held = self._held.get(key, 0)
        if self.max_per_key > 0 and (held >= self.max_per_key or (not held and len(self._held) >= KEYS_MAX)):
            raise refused(
                self.service,
                "TOO_MANY_STREAMS",
                self.setting,
                self.max_per_key,
                f"{key} has {held} {self.what} open, the most allowed ({self.setting}); close one first",
                open=held,
            )
        self._held[key] = held + 1

    def release(self, key: str) -> None:
        held = self._held.get(key, 0) - 1
        errors.check(held >= 0, f"{self.setting}: {key} released more than it held")
        if held:
            self._held[key] = held
        else:
            del self._held[key]

    def held(self, key: str) -> int:
        return self._held.get(key, 0)
