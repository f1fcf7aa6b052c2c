"""The compiled core (``make native``, ``libs/build_native.py``) against the interpreted one.

The differential test builds the core with mypyc into a temporary folder, then settles the
golden corpus and self-plays every game on each build in a child process
(``tests.support.native_diff``) and requires the same bytes: every replayed hand's posting
and stored row, every self-played hand's events and settlement. It is heavy (a build from
nothing takes about 2 minutes on 2 cores): make test-heavy runs it on the var/native that
``make native`` has just built (the build script then finds nothing to redo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import socai
from socai.rules import registry
from tests.support.snapshot import snapshot
from tests.support.synthetic import simulate

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "libs"))
import build_native  # noqa: E402

SELFPLAY_HANDS = 150


def _digests(pythonpath: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    command = [sys.executable, "-m", "tests.support.native_diff", str(SELFPLAY_HANDS)]
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=600)
    digests: dict[str, object] = json.loads(out.stdout)
    return digests


@pytest.mark.heavy
def test_the_compiled_core_settles_the_corpus_and_self_play_byte_for_byte_as_the_interpreted(
    tmp_path: Path,
) -> None:
    # make test-heavy has just built var/native (make native) and names it; otherwise build.
    target = Path(os.environ.get("SOCAI_NATIVE_BUILD") or tmp_path).resolve()
    built = subprocess.run(
        [sys.executable, str(ROOT / "libs" / "build_native.py"), str(target)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    compiled = _digests(f"{target}{os.pathsep}{ROOT}")
    interpreted = _digests(str(ROOT))
    assert (compiled.pop("core"), interpreted.pop("core")) == ("compiled", "interpreted")
    assert any(key.startswith("corpus/") for key in interpreted)
    assert {key for key in interpreted if key.startswith("selfplay/")} == {
        f"selfplay/{game}" for game in registry.available()
    }
    assert compiled == interpreted


def test_the_build_compiles_the_kit_every_family_module_and_no_alias() -> None:
    package = ROOT / "libs" / "socai"
    modules = set(build_native.compiled_modules(package))
    assert {"socai/cards.py", "socai/money.py", "socai/fairness.py", "socai/rules/base.py"} <= modules
    family = {str(p.relative_to(package.parent)) for p in (package / "rules").glob("*/*.py") if p.name != "__init__.py"}
    assert family and family <= modules
    # socai.rules.phom is an alias of socai.rules.rummy.phom: nothing of its own to compile.
    assert "socai/rules/phom.py" not in modules and "socai/rules/rummy/phom.py" in modules
    assert not any(m.startswith(("socai/infra/", "socai/events/", "socai/settle/")) for m in modules)


def test_the_checkout_runs_the_interpreted_core_and_the_cli_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as make test runs it
    out = subprocess.run(
        [sys.executable, "-m", "socai_cli", "--version"], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip().endswith("(interpreted core)"), out.stdout
    # In this process, whichever build it runs (make test-heavy runs these tests compiled too):
    from socai.rules import base

    assert socai.core_build() == ("interpreted" if str(base.__file__).endswith(".py") else "compiled")


def test_a_snapshot_sees_a_change_deep_inside_a_value() -> None:
    hand = simulate(1, ("tienlen",), seed=3).hands[0]
    state = registry.get("tienlen").initial_state(hand.events[0].body)
    before = snapshot(state)
    assert snapshot(state) == before
    inner: list[object] = [1, {"a": [2]}]
    taken = snapshot(inner)
    inner[1]["a"].append(3)  # type: ignore[index]
    assert snapshot(inner) != taken
