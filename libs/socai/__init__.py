"""socai's shared library: the pure core (cards, money, fairness, the rules, the events and
their replay) and the infrastructure the services share."""

from __future__ import annotations


def core_build() -> str:
    """``"compiled"`` when the rules and the modules under them run as mypyc extension
    modules (``make native`` builds them into ``var/native``, which a process puts first on
    its path), else ``"interpreted"``. Both builds give byte-identical settlements and
    events (``tests/unit/rules/test_native_build.py``)."""
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
