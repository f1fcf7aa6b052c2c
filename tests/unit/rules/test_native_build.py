"""The compiled core (``make native``, ``libs/build_native.py``, ``socai.native``) against the
interpreted one.

The differential test settles the golden corpus and self-plays every game on each core in a
child process (``tests.support.native_diff``, ``SOCAI_CORE`` choosing the core) and requires
the same bytes: every replayed hand's posting and stored row, every self-played hand's events
and settlement. It is heavy; the build it needs is the checkout's own (``make test`` and
``make test-heavy`` build it first, and the fixture then finds nothing to redo; from nothing
it takes about 1.5 minutes on 2 cores). The guard's tests run on copies of the package."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import socai
from socai import native
from socai.rules import registry
from tests.support.snapshot import snapshot
from tests.support.synthetic import simulate

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "libs" / "socai"


def _build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_native", ROOT / "libs" / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SELFPLAY_HANDS = 150


def _env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _digests(core: str) -> dict[str, object]:
    command = [sys.executable, "-m", "tests.support.native_diff", str(SELFPLAY_HANDS)]
    out = subprocess.run(
        command, cwd=ROOT, env=_env(SOCAI_CORE=core), capture_output=True, text=True, check=True, timeout=600
    )
    digests: dict[str, object] = json.loads(out.stdout)
    return digests


@pytest.fixture(scope="module")
def native_build() -> Path:
    """The checkout's compiled core, built if it is not fresh (make test and make test-heavy
    have just built it: then nothing to do)."""
    built = subprocess.run(
        [sys.executable, str(ROOT / "libs" / "build_native.py")], capture_output=True, text=True, timeout=900
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert native.state(PACKAGE) == (native.FRESH, "")
    return PACKAGE


@pytest.mark.heavy
def test_the_compiled_core_settles_the_corpus_and_self_play_byte_for_byte_as_the_interpreted(
    native_build: Path,
) -> None:
    compiled = _digests("compiled")
    interpreted = _digests("interpreted")
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
        env=_env(SOCAI_CORE=None),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["machine"]["core"] == "compiled"
    assert report["failed"] == [] and len(report["results"]) == 2 * len(registry.available()) - 1
    for result in report["results"]:
        assert result["params"]["core"] == "compiled", result["name"]
        assert result["value"] > 0 and result["peers"]["interpreted"] > 0, result["name"]


def test_the_build_compiles_the_kit_every_family_module_and_no_alias() -> None:
    package = ROOT / "libs" / "socai"
    modules = set(native.compiled_modules(package))
    assert {"socai/cards.py", "socai/money.py", "socai/fairness.py", "socai/rules/base.py"} <= modules
    family = {str(p.relative_to(package.parent)) for p in (package / "rules").glob("*/*.py") if p.name != "__init__.py"}
    assert family and family <= modules
    # socai.rules.phom is an alias of socai.rules.rummy.phom: nothing of its own to compile.
    assert "socai/rules/phom.py" not in modules and "socai/rules/rummy/phom.py" in modules
    assert "socai/settle/replay.py" in modules and "socai/events/hidden.py" in modules
    assert not any(m.startswith(("socai/infra/", "socai/settle/keys")) for m in modules)
    assert not {"socai/events/model.py", "socai/events/codec.py"} & modules  # see libs/build_native.py


def _which_core(pythonpath: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    """A child process on the package under ``pythonpath``: its core, and where two of the
    compiled modules were loaded from."""
    code = (
        "import socai, socai.cards, socai.rules.base as b; "
        "print(socai.core_build(), socai.cards.__file__.endswith('.py'), b.__file__.endswith('.py'))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env=_env(PYTHONPATH=str(pythonpath), **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_edited_source_runs_the_whole_core_interpreted_and_says_why(native_build: Path, tmp_path: Path) -> None:
    shutil.copytree(native_build, tmp_path / "socai", ignore=shutil.ignore_patterns("__pycache__"))
    fresh = _which_core(tmp_path, SOCAI_CORE=None)
    assert (fresh.returncode, fresh.stdout.split()) == (0, ["compiled", "False", "False"]), fresh.stderr
    forced = _which_core(tmp_path, SOCAI_CORE="interpreted")
    assert forced.stdout.split() == ["interpreted", "True", "True"] and "stale" not in forced.stderr

    edited = tmp_path / "socai" / "rules" / "climbing" / "tienlen.py"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    stale = _which_core(tmp_path, SOCAI_CORE=None)
    # All or nothing: cards and base are unchanged, yet they run from their sources too.
    assert (stale.returncode, stale.stdout.split()) == (0, ["interpreted", "True", "True"]), stale.stderr
    assert "socai/rules/climbing/tienlen.py changed since the build" in stale.stderr
    assert "make native" in stale.stderr
    required = _which_core(tmp_path, SOCAI_CORE="compiled")
    assert required.returncode != 0 and "ImportError: SOCAI_CORE=compiled" in required.stderr

    bogus = _which_core(tmp_path, SOCAI_CORE="fast")
    assert bogus.returncode != 0 and "SOCAI_CORE='fast': expected one of auto, compiled, interpreted" in bogus.stderr


def _sources_only(tmp_path: Path) -> Path:
    package = tmp_path / "socai"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "*.so", "_native.json*"))
    return package


def _fake_build(package: Path) -> list[str]:
    modules = native.compiled_modules(package)
    for relative in modules:
        for ext in native.extensions_of(relative):
            (package.parent / ext).touch()
    (package / native.MANIFEST_NAME).write_text(json.dumps(native.manifest(modules, package)))
    return modules


def test_the_build_is_fresh_only_while_every_compiled_source_matches_its_digest(tmp_path: Path) -> None:
    package = _sources_only(tmp_path)
    assert native.state(package) == (native.ABSENT, "")
    modules = _fake_build(package)
    assert native.state(package) == (native.FRESH, "")

    # A module outside the compiled list changes nothing.
    (package / "events" / "codec.py").write_text("# edited\n", encoding="utf-8")
    assert native.state(package) == (native.FRESH, "")

    money = package / "money.py"
    original = money.read_bytes()
    money.write_bytes(original + b"\n")
    assert native.state(package) == (native.STALE, "socai/money.py changed since the build")
    money.write_bytes(original)
    assert native.state(package) == (native.FRESH, "")

    _, library = native.extensions_of("socai/fairness.py")
    (package.parent / library).unlink()
    assert native.state(package) == (native.STALE, "socai/fairness.py's extension module is missing")
    (package.parent / library).touch()

    (package / "rules" / "newgame.py").write_text("X = 1\n", encoding="utf-8")
    assert native.state(package) == (native.STALE, "the modules to compile changed since the build")
    (package / "rules" / "newgame.py").unlink()

    recorded = json.loads((package / native.MANIFEST_NAME).read_text())
    (package / native.MANIFEST_NAME).write_text(json.dumps({**recorded, "suffix": ".cpython-39-x.so"}))
    assert native.state(package)[0] == native.STALE
    (package / native.MANIFEST_NAME).write_text("{not json")
    assert native.state(package)[0] == native.STALE

    # Extension modules left without a manifest: a build that did not finish.
    (package / native.MANIFEST_NAME).unlink()
    assert native.state(package) == (
        native.STALE,
        "extension modules without _native.json (a build that did not finish)",
    )
    assert len(modules) == len(set(modules))


def test_a_machine_without_a_compiler_is_told_so_and_keeps_the_interpreted_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = _build_script()
    assert script.missing_toolchain() == ""  # this machine kind has gcc and the headers
    monkeypatch.setenv("CC", "no-such-cc -O2")
    assert script.missing_toolchain() == "no C compiler (no-such-cc)"


def test_without_a_compiler_make_core_removes_a_stale_build_and_make_native_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _build_script()
    package = _sources_only(tmp_path)
    _fake_build(package)
    monkeypatch.setattr(script, "PACKAGE", package)
    monkeypatch.setenv("CC", "no-such-cc")
    assert script.main(["--if-possible"]) == 0  # fresh: nothing to do, no compiler needed
    assert "up to date" in capsys.readouterr().out

    (package / "cards.py").write_text("# edited\n", encoding="utf-8")
    assert script.main(["--if-possible"]) == 0  # make core: the stale build goes, the sources run
    assert "no C compiler (no-such-cc): socai runs its interpreted core" in capsys.readouterr().err
    assert native.state(package) == (native.ABSENT, "")
    assert not list(package.rglob("*" + native.EXTENSION_SUFFIX))
    assert script.main([]) == 1  # make native: fails, saying why
    assert "no C compiler (no-such-cc)" in capsys.readouterr().err


def test_a_failed_compile_says_what_mypy_refused_and_keeps_the_interpreted_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """mypyc type-checks before it compiles, and its errors are the only account of a failed
    build: a build once fell back to the interpreted core saying only SystemExit(1)."""
    import mypyc.build

    script = _build_script()
    package = _sources_only(tmp_path)
    monkeypatch.setattr(script, "PACKAGE", package)
    monkeypatch.setattr(script, "LIBS", tmp_path)
    monkeypatch.setattr(script, "WORK", tmp_path / "work")
    monkeypatch.setenv("MYPY_CACHE_DIR", str(tmp_path / "cache"))  # the build sets it; restored after
    refused = 'socai/events/codec.py:501: error: Returning Any from function declared to return "bytes"'

    def mypycify(*args: object, **kwargs: object) -> None:
        print(refused)
        raise SystemExit(1)

    monkeypatch.setattr(mypyc.build, "mypycify", mypycify)
    assert script.main(["--if-possible"]) == 0
    said = capsys.readouterr()
    assert refused in said.out.splitlines()
    assert "the build failed (SystemExit(1)): socai runs its interpreted core" in said.err
    assert native.state(package) == (native.ABSENT, "")
    assert script.main([]) == 1  # make native fails, with the same account
    assert refused in capsys.readouterr().out.splitlines()


def test_mypycs_notes_on_generators_are_counted_and_its_other_messages_kept(capsys: pytest.CaptureFixture[str]) -> None:
    note = "socai/rules/base.py:12: warning: Treating generator comprehension as list"
    _build_script()._echo_notes(f"{note}\n{note}\nsocai/cards.py:3: error: something else\n")
    assert capsys.readouterr().out.splitlines() == [
        "socai/cards.py:3: error: something else",
        "build_native: 2 generator expressions compiled as lists (mypyc's note; same results)",
    ]


def test_the_cli_says_which_core_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "socai_cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
        env=_env(SOCAI_CORE="interpreted"),
    )
    assert out.stdout.strip().endswith("(interpreted core)"), out.stdout
    # In this process, whichever core it runs (make test runs the compiled one where it is
    # built, make test-heavy these tests again on the interpreted one):
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
