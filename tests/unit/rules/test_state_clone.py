"""The engines' private ``_clone`` copies every field of their state: a field added to the
state and forgotten there would silently reset in the next state."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest

from socai.audit.simulate import simulate
from socai.rules import holdem, registry, xito


def _fields(state: object) -> list[str]:
    """A dataclass's fields, or a slotted class's slots."""
    if dataclasses.is_dataclass(state):
        return [f.name for f in dataclasses.fields(state)]
    names = [name for cls in type(state).__mro__ for name in getattr(cls, "__slots__", ())]
    assert names, f"{type(state).__name__} declares neither fields nor slots"
    return names


@pytest.mark.parametrize("module", [holdem, xito], ids=["holdem", "xito"])
def test_clone_copies_every_field_of_every_state_of_a_hand(module: ModuleType) -> None:
    game = module.__name__.rsplit(".", 1)[-1]
    rules = registry.get(game)
    sim = simulate(6, (game,), seed=5)
    checked = 0
    for hand in sim.hands:
        state = None
        for event in hand.events:
            if state is None:
                state = rules.initial_state(event.body)
                continue
            state = rules.apply(state, event.body)
            clone = module._clone(state)
            assert clone is not state
            for name in _fields(state):
                assert getattr(clone, name) is getattr(state, name), name
            checked += 1
    assert checked > 0
