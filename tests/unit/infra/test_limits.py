"""The limits' arithmetic (``socai.infra.limits``) and the bound on queued stream events
(``socai_table.views.WatchBudget``), on a clock of the test's own."""

from __future__ import annotations

import asyncio

import pytest

from socai import errors
from socai.gen.events.v1 import events_pb2
from socai.infra import limits
from socai.infra.config import Limits, Settings
from socai_table.views import MEMORY_FULL, QUEUE_FULL, WATCH_QUEUE_MAX, WatchBudget, Watcher


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_rate_lets_a_burst_through_then_one_call_per_token():
    clock = Clock()
    rate = limits.RateLimiter("svc", "SOCAI_LIMIT_X", 5.0, clock=clock)  # burst: 10
    for _ in range(10):
        rate.admit("mallory")
    with pytest.raises(errors.ResourceExhausted) as refused:
        rate.admit("mallory")
    assert refused.value.code == "RATE_LIMITED"
    assert refused.value.details == {"limit": "SOCAI_LIMIT_X", "max": "5", "retry_after_ms": "200"}
    rate.admit("alice")  # each key its own bucket
    clock.now += 0.2
    rate.admit("mallory")  # one token back after 1/5 s
    with pytest.raises(errors.ResourceExhausted):
        rate.admit("mallory")


def test_a_refused_call_is_counted_by_its_setting():
    rate = limits.RateLimiter("svc", "SOCAI_LIMIT_COUNTED", 1.0, burst=1.0, clock=Clock())
    before = limits.REFUSALS.labels("svc", "SOCAI_LIMIT_COUNTED")._value.get()
    rate.admit("k")
    for _ in range(3):
        with pytest.raises(errors.ResourceExhausted):
            rate.admit("k")
    assert limits.REFUSALS.labels("svc", "SOCAI_LIMIT_COUNTED")._value.get() == before + 3


def test_zero_turns_a_limit_off():
    rate = limits.RateLimiter("svc", "SOCAI_LIMIT_X", 0.0, clock=Clock())
    for _ in range(10_000):
        rate.admit("k")
    assert len(rate) == 0
    slots = limits.Slots("svc", "SOCAI_LIMIT_Y", 0)
    for _ in range(1000):
        slots.acquire("k")
    assert slots.held("k") == 1000


def test_idle_buckets_are_forgotten_when_the_keys_are_at_their_bound(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(limits, "KEYS_MAX", 3)
    clock = Clock()
    rate = limits.RateLimiter("svc", "SOCAI_LIMIT_X", 1.0, clock=clock)
    for key in ("a", "b", "c"):
        rate.admit(key)
    with pytest.raises(errors.ResourceExhausted):  # no room, nobody idle yet
        rate.admit("d")
    clock.now += 5.0  # every bucket full again: idle
    rate.admit("d")
    assert len(rate) == 1


def test_slots_refuse_the_one_over_and_give_places_back():
    slots = limits.Slots("svc", "SOCAI_LIMIT_STREAMS", 2)
    slots.acquire("p")
    slots.acquire("p")
    with pytest.raises(errors.ResourceExhausted) as refused:
        slots.acquire("p")
    assert refused.value.code == "TOO_MANY_STREAMS"
    assert refused.value.details == {"limit": "SOCAI_LIMIT_STREAMS", "max": "2", "open": "2"}
    slots.acquire("q")
    slots.release("p")
    slots.acquire("p")
    for _ in range(2):
        slots.release("p")
    assert slots.held("p") == 0
    with pytest.raises(AssertionError):
        slots.release("p")  # an invariant: never more releases than holds


def test_the_limits_come_from_the_environment_and_go_back_to_it():
    env = {"SOCAI_LIMIT_PLAYER_STREAMS": "4", "SOCAI_LIMIT_CALLER_CALLS_PER_S": "2.5", "SOCAI_LIMIT_OWNER_TABLES": "0"}
    settings = Settings.from_env(env)
    assert settings.limits == Limits(player_streams=4, caller_calls_per_s=2.5, owner_tables=0)
    assert Settings.from_env(settings.as_env()).limits == settings.limits
    assert Settings.from_env({}).limits == Limits()


@pytest.mark.parametrize("value", ["-1", "many", "nan"])
def test_a_malformed_limit_is_refused_naming_its_variable(value: str):
    with pytest.raises(ValueError, match="SOCAI_LIMIT_PLAYER_STREAMS"):
        Limits.from_env({"SOCAI_LIMIT_PLAYER_STREAMS": value})


def _watcher() -> Watcher:
    return Watcher(None, asyncio.Queue(maxsize=WATCH_QUEUE_MAX))


def _event(seq: int) -> events_pb2.Event:
    return events_pb2.Event(seq=seq)


async def test_at_the_bound_the_stream_furthest_behind_is_ended_and_its_events_freed():
    budget = WatchBudget(10)
    slow, slower, reader = _watcher(), _watcher(), _watcher()
    for watcher in (slow, slower, reader):
        budget.add(watcher)
    for seq in range(1, 5):
        slow.offer(_event(seq))
    for seq in range(1, 7):
        slower.offer(_event(seq))
    assert budget.queued == 10
    reader.offer(_event(1))  # over the bound: the one with the most waiting goes
    assert slower.ended_by == MEMORY_FULL and slower.waiting == 0
    assert await slower.next() is None  # its stream sees the end at once
    assert budget.queued == 5 and reader.waiting == 1 and slow.waiting == 4
    assert (await reader.next()) == _event(1) and budget.queued == 4
    # a stream that is itself the furthest behind is the one ended
    for seq in range(5, 11):
        slow.offer(_event(seq))
    assert budget.queued == 10 and not slow.ended_by
    slow.offer(_event(11))
    assert slow.ended_by == MEMORY_FULL and budget.queued == 0
    slower.offer(_event(9))  # an ended stream takes nothing more
    assert slower.waiting == 0
    budget.remove(reader)
    assert len(budget) == 2 and budget.queued == 0


async def test_one_stream_still_ends_at_its_own_queue_bound():
    budget = WatchBudget(0)  # no bound on all of them together
    watcher = _watcher()
    budget.add(watcher)
    for seq in range(WATCH_QUEUE_MAX + 1):
        watcher.offer(_event(seq))
    assert watcher.ended_by == QUEUE_FULL and budget.queued == 0
    assert await watcher.next() is None
