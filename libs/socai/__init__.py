"""socai's shared library: the pure core (cards, money, fairness, the rules, the events and
their replay) and the infrastructure the services share."""

from __future__ import annotations

from socai import native as _native

# Before any module of the core is imported: the compiled core when its build matches the
# sources, else the interpreted one (socai.native).
_native.select()


def core_build() -> str:
    """``"compiled"`` when the rules and the modules under them run as mypyc extension
    modules (``make install`` and ``make native`` build them beside their sources, and
    ``socai.native`` loads them when they match the sources), else ``"interpreted"``. Both
    builds give byte-identical settlements and events
    (``tests/unit/rules/test_native_build.py``)."""
    from socai.rules import base

    return "interpreted" if base.__file__ is None or base.__file__.endswith(".py") else "compiled"


def version() -> str:
    """The installed distribution's version and the core's build, as ``socai --version``
    prints it."""
    from importlib import metadata  # here: it imports random and socket, which the pure core does not

    try:
        number = metadata.version("socai")
    except metadata.PackageNotFoundError:
        number = "unknown"
    return f"socai {number} ({core_build()} core)"
