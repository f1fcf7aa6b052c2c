"""``registry.warm`` runs each available game's optional ``warm`` hook (Hold'em builds its
evaluator tables there, so that no hand waits ~0.4 s for them)."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
from socai.rules import registry
from socai.rules.poker import evaluator
assert evaluator._TABLES is None, "built at import"
assert registry.warm() == registry.available()
assert evaluator._TABLES is not None, "not built by registry.warm"
"""


def test_warm_imports_every_available_game_and_builds_the_evaluator_tables() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
