"""A deep, plain record of a rules value, for the tests that a refused event changes nothing.

``copy.deepcopy`` serves the interpreted build only: under the compiled core (``make native``)
the frozen dataclasses and plain classes are mypyc native classes, whose copy goes through
``__setstate__`` (refused by a frozen class) or ``__init__`` (which wants its arguments). This
walks the value instead, on either build: every field of a state, a dataclass or a slotted
class, every item of a container, so a change anywhere inside shows as a difference."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from socai.rules.base import GameState

_ATOMS = (str, bytes, int, float, bool, type(None), Enum)


def snapshot(value: object) -> Any:
    """``value`` as nested tuples of plain values: equal snapshots mean equal contents."""
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(snapshot(item) for item in value))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, frozenset(snapshot(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((snapshot(k), snapshot(v)) for k, v in value.items()))
    names = _field_names(value)
    if names is None:
        return ("opaque", type(value).__qualname__, repr(value))
    return (type(value).__qualname__, tuple((name, snapshot(getattr(value, name))) for name in names))


def _field_names(value: object) -> tuple[str, ...] | None:
    if isinstance(value, GameState):
        return value.FIELDS
    if dataclasses.is_dataclass(value):
        return tuple(field.name for field in dataclasses.fields(value))
    names: list[str] = []
    for cls in type(value).__mro__:
        for attrs in ("__slots__", "__mypyc_attrs__"):
            declared = cls.__dict__.get(attrs, ())
            names += [declared] if isinstance(declared, str) else [n for n in declared if not n.startswith("__")]
    if hasattr(value, "__dict__"):
        names += list(vars(value))
    return tuple(dict.fromkeys(names)) if names else None
