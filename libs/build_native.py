"""Build the pure core as mypyc extension modules: ``make native`` (``python libs/build_native.py``);
``make install`` runs it with ``--if-possible``.

The modules ``socai.native.compiled_modules`` lists (``cards``, ``money``, ``errors``,
``accounts``, ``fairness``, every module of ``socai.rules`` but the flat-name aliases, the
hidden-card reader ``events/hidden.py`` and ``settle/replay.py``) are compiled beside their sources in ``libs/socai``, and the build
records each source's sha256 in ``libs/socai/_native.json``. ``import socai`` runs them only
while every source still matches (``socai.native.select``); otherwise the whole core runs
from its sources. Interpreted still: ``events.model`` and ``events.codec`` (a compiled class
keeps only the bare class of a field's type at run time, ``tuple`` for
``tuple[SeatInfo, ...]``, and the codec builds its decoders from the events' type hints).

Nothing to do when the build is fresh (a few milliseconds). Otherwise the manifest goes
first, so that no process runs a half-written build, then mypyc writes the C and setuptools
compiles it (intermediate files in ``var/native``), then the manifest is written with the
digests read before the compile: a source edited during the build leaves it stale. Each
module is compiled separately (``separate=True``): one C file per module, built on every
core at once, about 1.5 minutes on this 2-core machine from nothing; after one edit only
that module's C is compiled again, though mypyc type-checks the whole list (~20 s).

``--if-possible`` (make install, make run, make test): without a C compiler, the Python
headers or mypyc, say so and leave the interpreted core; the code runs the same.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
LIBS = ROOT / "libs"
PACKAGE = LIBS / "socai"
WORK = ROOT / "var" / "native"


def _load_native() -> ModuleType:
    """``socai/native.py`` on its own (standard library only): importing ``socai`` would
    choose a core first, and warn about the stale build this script is about to replace."""
    spec = importlib.util.spec_from_file_location("_socai_native", PACKAGE / "native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


native = _load_native()


def missing_toolchain() -> str:
    """What the build lacks on this machine, or "" when it can run."""
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers (Python.h)"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "no mypyc (pip install mypy)"
    return ""


def remove_build(package: Path | None = None) -> None:
    """The manifest and every extension module under ``package`` (default ``PACKAGE``)."""
    package = package or PACKAGE
    (package / native.MANIFEST_NAME).unlink(missing_ok=True)
    for ext in package.rglob("*" + native.EXTENSION_SUFFIX):
        ext.unlink()


def build(jobs: int) -> list[str]:
    from mypyc.build import mypycify
    from setuptools import Distribution

    modules = native.compiled_modules(PACKAGE)
    recorded = native.manifest(modules, PACKAGE)
    # Unlinked, not overwritten: a running process keeps the libraries it mapped (writing over
    # a mapped library in place can crash it), and new processes see no manifest until the
    # end, so they run the sources meanwhile.
    remove_build()
    WORK.mkdir(parents=True, exist_ok=True)
    cwd = Path.cwd()
    os.chdir(LIBS)
    os.environ["MYPY_CACHE_DIR"] = str(WORK / ".mypy_cache")
    try:
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said):
                extensions = mypycify(
                    modules, opt_level="3", separate=True, verbose=False, target_dir=str(WORK / "build")
                )
        finally:
            # mypy's errors are what a failed compile has to say: printed whether it failed or not.
            _echo_notes(said.getvalue())
        dist = Distribution({"name": "socai-native", "ext_modules": extensions})
        dist.script_name = "build_native.py"
        dist.script_args = ["build_ext", "--inplace", f"--parallel={jobs}", f"--build-temp={WORK / 'build' / 'temp'}"]
        dist.script_args.append(f"--build-lib={WORK / 'build' / 'lib'}")
        dist.parse_command_line()
        dist.run_commands()
    finally:
        os.chdir(cwd)
    manifest = PACKAGE / native.MANIFEST_NAME
    partial = manifest.with_suffix(".partial")
    partial.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(manifest)
    return modules


def _echo_notes(text: str) -> None:
    """mypyc's messages, but its note on each generator passed to ``tuple()``, ``any()`` and
    the like (compiled as a list first: the same result) counted in one line."""
    lists = 0
    for line in text.splitlines():
        if line.endswith("warning: Treating generator comprehension as list"):
            lists += 1
        elif line.strip():
            print(line)
    if lists:
        print(f"build_native: {lists} generator expressions compiled as lists (mypyc's note; same results)")


def main(argv: list[str]) -> int:
    if_possible = "--if-possible" in argv
    if "--remove" in argv:
        remove_build()
        print("build_native: the compiled core removed; socai runs interpreted")
        return 0
    found, why = native.state(PACKAGE)
    if found == native.FRESH and "--force" not in argv:
        print("build_native: the compiled core is up to date")
        return 0
    lacking = missing_toolchain()
    if lacking:
        print(f"build_native: {lacking}: socai runs its interpreted core", file=sys.stderr)
        if found == native.STALE:
            remove_build()
        return 0 if if_possible else 1
    started = time.monotonic()
    reason = why or ("--force" if found == native.FRESH else "no build yet")
    print(f"build_native: compiling the core ({reason})", flush=True)
    try:
        modules = build(os.cpu_count() or 1)
    except (Exception, SystemExit) as e:  # setuptools reports a failed compile as SystemExit
        remove_build()
        print(f"build_native: the build failed ({e!r}): socai runs its interpreted core", file=sys.stderr)
        return 0 if if_possible else 1
    print(f"build_native: {len(modules)} modules compiled beside their sources in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
