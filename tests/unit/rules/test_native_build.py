"""The compiled core (``make native``, ``libs/build_native.py``) against the interpreted one.

The differential test builds the core with mypyc into a temporary folder, then settles the
golden corpus and self-plays every game on each build in a child process
(``tests.support.native_diff``) and requires the same bytes: every replayed hand's posting
and stored row, every self-played hand's events and settlement. It is heavy (a build from
nothing takes about 2 minutes on 2 cores): make test-heavy runs it on the var/native that
``make native`` has just built (the build script then finds nothing to redo)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import socai
from socai.rules import registry
from tests.support.snapshot import snapshot
from tests.support.synthetic import simulate

ROOT = Path(__file__).resolve().parents[3]


def _build_script() -> ModuleType:
    """``libs/build_native.py``, loaded from its file (libs/ is not put on the path: under
    make test-heavy's compiled run it would shadow var/native)."""
    spec = importlib.util.spec_from_file_location("build_native", ROOT / "libs" / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SELFPLAY_HANDS = 150


def _digests(pythonpath: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    command = [sys.executable, "-m", "tests.support.native_diff", str(SELFPLAY_HANDS)]
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=600)
    digests: dict[str, object] = json.loads(out.stdout)
    return digests


@pytest.fixture(scope="module")
def native_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled core: make test-heavy has just built var/native (make native) and names
    it, and the build script then finds nothing to redo; otherwise a build of its own."""
    target = Path(os.environ.get("SOCAI_NATIVE_BUILD") or tmp_path_factory.mktemp("native")).resolve()
    built = subprocess.run(
        [sys.executable, str(ROOT / "libs" / "build_native.py"), str(target)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    return target


@pytest.mark.heavy
def test_the_compiled_core_settles_the_corpus_and_self_play_byte_for_byte_as_the_interpreted(
    native_build: Path,
) -> None:
    target = native_build
    compiled = _digests(f"{target}{os.pathsep}{ROOT}")
    interpreted = _digests(str(ROOT))
    assert (compiled.pop("core"), interpreted.pop("core")) == ("compiled", "interpreted")
    assert any(key.startswith("corpus/") for key in interpreted)
    assert {key for key in interpreted if key.startswith("selfplay/")} == {
        f"selfplay/{game}" for game in registry.available()
    }
    assert compiled == interpreted


@pytest.mark.heavy
def test_the_rules_benchmarks_report_the_compiled_core_beside_the_interpreted(
    native_build: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench", "--quick", "--out", str(tmp_path), "bench_rules_selfplay"],
        cwd=ROOT,
        env={**os.environ, "SOCAI_NATIVE_BUILD": str(native_build)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["failed"] == [] and len(report["results"]) == 2 * len(registry.available()) - 1
    for result in report["results"]:
        assert result["params"]["core"] == "compiled", result["name"]
        assert result["value"] > 0 and result["peers"]["interpreted"] > 0, result["name"]


def test_a_benchmark_run_against_a_build_that_is_not_compiled_fails_rather_than_mislabel(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench", "--quick", "--out", str(tmp_path), "bench_rules_selfplay"],
        cwd=ROOT,
        env={**os.environ, "SOCAI_NATIVE_BUILD": str(tmp_path / "no-build-here")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["results"] == [] and report["failed"], done.stdout[-2000:]
    assert "does not hold a compiled core" in done.stdout + done.stderr


def test_the_build_compiles_the_kit_every_family_module_and_no_alias() -> None:
    package = ROOT / "libs" / "socai"
    modules = set(_build_script().compiled_modules(package))
    assert {"socai/cards.py", "socai/money.py", "socai/fairness.py", "socai/rules/base.py"} <= modules
    family = {str(p.relative_to(package.parent)) for p in (package / "rules").glob("*/*.py") if p.name != "__init__.py"}
    assert family and family <= modules
    # socai.rules.phom is an alias of socai.rules.rummy.phom: nothing of its own to compile.
    assert "socai/rules/phom.py" not in modules and "socai/rules/rummy/phom.py" in modules
    assert "socai/settle/replay.py" in modules
    assert not any(m.startswith(("socai/infra/", "socai/events/", "socai/settle/keys")) for m in modules)


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
