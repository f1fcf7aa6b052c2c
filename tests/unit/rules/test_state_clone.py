"""Every game's state is a kit ``@game_state``: frozen, slotted, its fields listed once, and
derived only through the kit (``derive``, ``draft``/``freeze``), which copies every field:
a field added to a state can never silently reset in the next state."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from socai.rules import registry
from socai.rules.base import GameState, freeze, game_state
from tests.support.synthetic import simulate


@pytest.mark.parametrize("game", registry.available())
def test_every_state_of_a_hand_is_a_frozen_kit_state_and_derives_every_field(game: str) -> None:
    rules = registry.get(game)
    sim = simulate(6, (game,), seed=5)
    checked = 0
    for hand in sim.hands:
        state = None
        for event in hand.events:
            state = rules.initial_state(event.body) if state is None else rules.apply(state, event.body)
            assert isinstance(state, GameState), f"{game} keeps its state in a {type(state).__name__}"
            assert not hasattr(state, "__dict__")
            with pytest.raises(dataclasses.FrozenInstanceError):
                state.__setattr__(state.FIELDS[0], None)
            derived = state.derive()
            drafted = freeze(state.draft())
            for name in state.FIELDS:
                assert getattr(derived, name) is getattr(state, name), name
                assert getattr(drafted, name) is getattr(state, name), name
            assert type(derived) is type(state) is type(drafted)
            checked += 1
    assert checked > 0


@game_state
class Sample(GameState):
    phase: str
    stacks: tuple[int, ...]
    folded: frozenset[int] = frozenset()


def test_derive_changes_only_the_named_fields_and_leaves_the_old_state_alone() -> None:
    old = Sample.create(phase="betting", stacks=(10, 20))
    new = old.derive(phase="over")
    assert (new.phase, new.stacks, new.folded) == ("over", (10, 20), frozenset())
    assert old.phase == "betting"
    assert new != old and new == old.derive(phase="over")


def test_a_draft_is_mutable_until_frozen_and_freezing_does_not_copy() -> None:
    old = Sample.create(phase="betting", stacks=(10, 20))
    draft = old.draft()
    draft.phase = "over"
    state = freeze(draft)
    assert state is draft and state.phase == "over" and old.phase == "betting"
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.phase = "betting"


def test_create_needs_every_field_without_a_default_and_knows_no_others() -> None:
    with pytest.raises(TypeError):
        Sample.create(phase="betting")
    with pytest.raises(TypeError):
        Sample.create(phase="betting", stacks=(), colour="red")
    with pytest.raises(TypeError):
        Sample.create(phase="betting", stacks=()).derive(colour="red")


def test_states_copy_and_deepcopy_to_equal_states() -> None:
    state = Sample.create(phase="betting", stacks=(10, 20), folded=frozenset({1}))
    assert copy.copy(state) == state == copy.deepcopy(state)
    assert Sample.FIELDS == ("phase", "stacks", "folded")


@game_state
class Counted(GameState):
    n: int
    o: int = 0


def test_a_field_may_have_any_public_name_even_that_of_the_generated_codes_locals() -> None:
    state = Counted.create(n=3)
    assert (state.n, state.o) == (3, 0)
    assert state.derive(n=4).n == 4 and state.derive(o=1).n == 3
    assert freeze(state.draft()) == state == Counted.create(n=3)
