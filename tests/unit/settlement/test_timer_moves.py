"""Each timeout's automatic action recorded as what it did (issue 33): ``TimerExpired.automatic``
holds the move the rules made for the seat (``socai.rules.automatic``); the replay derives it
again and refuses a hand whose record says otherwise; hands written before the field existed
replay exactly as they did."""

from __future__ import annotations

import dataclasses

import pytest

from socai.events.model import Event, TimerExpired
from socai.rules import registry
from socai.rules.automatic import automatic_move
from socai.settle.replay import AUTOMATIC_MISMATCH, ReplayError, replay
from tests.support.synthetic import simulate


def recorded(events: tuple[Event, ...]) -> list[Event]:
    """The hand as the table now writes it: every TimerExpired with the move it made."""
    module = registry.get(events[0].game)
    state = module.initial_state(events[0].body)
    out = [events[0]]
    for e in events[1:]:
        after = module.apply(state, e.body)
        if isinstance(e.body, TimerExpired):
            e = dataclasses.replace(
                e, body=TimerExpired(e.body.seat, e.body.timer, automatic_move(e.game, state, after, e.body).code)
            )
        out.append(e)
        state = after
    return out


@pytest.fixture(scope="module")
def timed_out() -> list[tuple[Event, ...]]:
    sim = simulate(220, registry.available(), seed=12)
    hands = [h.events for h in sim.hands if any(isinstance(e.body, TimerExpired) for e in h.events)]
    assert {h[0].game for h in hands} >= {"holdem", "tienlen", "phom", "maubinh"}
    return hands


def test_a_hand_that_records_its_timers_moves_settles_as_the_one_that_does_not(
    timed_out: list[tuple[Event, ...]],
) -> None:
    codes = set()
    for events in timed_out:
        with_moves = recorded(events)
        codes |= {e.body.automatic.split(" ")[0] for e in with_moves if isinstance(e.body, TimerExpired)}
        assert replay(with_moves).settlement == replay(events).settlement
    assert {"pass", "play", "check", "fold", "discard", "arrange"} <= codes, codes


def test_a_recorded_move_the_rules_did_not_make_is_refused_at_its_event(timed_out: list[tuple[Event, ...]]) -> None:
    events = recorded(next(h for h in timed_out if h[0].game == "tienlen"))
    at = next(i for i, e in enumerate(events) if isinstance(e.body, TimerExpired))
    body = events[at].body
    assert isinstance(body, TimerExpired)
    lie = "pass" if body.automatic != "pass" else "play 3s"
    events[at] = dataclasses.replace(events[at], body=TimerExpired(body.seat, body.timer, lie))
    with pytest.raises(ReplayError) as caught:
        replay(events)
    assert caught.value.code == AUTOMATIC_MISMATCH and caught.value.event_id == events[at].event_id
    assert f"recorded as {lie!r}; the rules make {body.automatic!r}" in caught.value.message
