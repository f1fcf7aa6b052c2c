"""Play a whole hand through a rules module, the way the table's game loop does.

Used by property tests, benchmarks and bots. It is pure given ``choose``: the dealing
comes from the seed (``socai.fairness``), decisions from ``choose``. The table service
drives the same ``pending``/``apply`` steps, with real players and timers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from socai import cards, fairness
from socai.errors import check
from socai.events.model import Body, CardsDealt, DealtCard, DiceRolled, HandEnded, HandStarted, TimerExpired

MAX_STEPS = 10_000

# choose(state, seat, candidates) -> the chosen body, or None to let the seat's timer run out.
Chooser = Callable[[Any, int, Sequence[Body]], Body | None]


def play_hand(
    module: ModuleType,
    started: HandStarted,
    seed: bytes,
    choose: Chooser,
) -> tuple[list[Body], Any]:
    """Play ``started`` to the end; returns (every body applied, HandStarted first and
    HandEnded last; the final state)."""
    deck = fairness.shuffle(seed, cards.deck(started.game)) if module.SPEC.deck else []
    next_card = 0
    state = module.initial_state(started)
    bodies: list[Body] = [started]
    for _ in range(MAX_STEPS):
        pending = module.pending(state)
        if pending.finished:
            break
        body: Body | None
        if pending.deal:
            dealt = []
            for slot in pending.deal:
                dealt.append(DealtCard(slot.seat, deck[next_card], slot.face_up))
                next_card += 1
            body = CardsDealt(tuple(dealt))
        elif pending.roll_dice:
            body = DiceRolled(fairness.roll_dice(seed))
        else:
            check(len(pending.to_act) > 0, "a pending hand must wait for someone")
            seat = pending.to_act[0]
            body = None
            if seat >= 0:
                body = choose(state, seat, module.candidate_actions(state, seat))
            if body is None:
                body = TimerExpired(seat, pending.timer)
        state = module.apply(state, body)
        bodies.append(body)
    else:
        raise AssertionError("hand did not finish within MAX_STEPS")
    end = HandEnded(seed.hex())
    state = module.apply(state, end)
    bodies.append(end)
    return bodies, state


def replay(module: ModuleType, bodies: Sequence[Body]) -> Any:
    """Fold ``bodies`` (HandStarted first) through ``module``; returns the final state."""
    first = bodies[0]
    check(isinstance(first, HandStarted), "a hand starts with HandStarted")
    state = module.initial_state(first)
    for body in bodies[1:]:
        state = module.apply(state, body)
    return state
