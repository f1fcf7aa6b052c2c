"""Every target the Makefile declares has a rule, and the ones that only install do install."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _phony() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    line = next(x for x in text.splitlines() if x.startswith(".PHONY:"))
    return line.split(":", 1)[1].split()


def test_every_declared_target_has_a_rule() -> None:
    text = (ROOT / "Makefile").read_text()
    rules = set(re.findall(r"^([a-z][a-z-]*):", text, flags=re.MULTILINE))
    missing = [t for t in _phony() if t not in rules]
    assert not missing, f"declared in .PHONY without a rule: {missing}"


def test_every_declared_target_does_something() -> None:
    # `make -n` prints what a target would run; a target with no recipe and nothing to
    # build prints "Nothing to be done". `-W pyproject.toml` treats the dependency list as
    # changed, so the install targets show their pip commands even on an installed venv.
    for target in _phony():
        out = subprocess.run(
            ["make", "-n", "-W", "pyproject.toml", target], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert out.returncode == 0, (target, out.stderr)
        assert "Nothing to be done" not in out.stdout + out.stderr, target
        assert out.stdout.strip(), f"make {target} does nothing"
