"""Build the pure core as mypyc extension modules: ``make native`` (``python libs/build_native.py``).

The build is a copy of ``libs/socai`` in ``var/native/socai`` with the modules below compiled
in place beside their sources; a process runs the compiled core when ``var/native`` comes
first on its path (``PYTHONPATH=var/native``), and ``socai.core_build()`` says which it
runs. The checkout itself stays interpreted, so an edit to a rule is never shadowed by a
stale extension module. ``make native`` runs this script each time: it copies the sources
again, and mypyc and setuptools redo only the modules whose C changed (seconds).

Compiled: ``cards``, ``money``, ``errors``, ``accounts``, ``fairness``, every module of
``socai.rules`` but the flat-name aliases (``socai.rules.phom`` and the like put their
family's module in their place in ``sys.modules``: nothing to compile) and the replay
(``settle/replay.py``). Interpreted still: ``events.model`` and ``events.codec`` (a compiled
class keeps only the bare class of a field's type at run time, ``tuple`` for
``tuple[SeatInfo, ...]``, and the codec builds its decoders from the events' type hints).

Each module is compiled separately (``separate=True``): one C file per module, built on
every core at once, about 1.5 minutes on this 2-core machine against 2.8 for one shared
library; a rebuild after one edit recompiles that module's C only.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "libs" / "socai"
TOP_LEVEL = ("cards.py", "money.py", "errors.py", "accounts.py", "fairness.py")
LAST = ("settle/replay.py",)
ALIAS_MARK = "sys.modules[__name__] = "


def compiled_modules(package: Path) -> list[str]:
    """The paths (relative to the package's parent) of the modules to compile."""
    paths = [package / name for name in TOP_LEVEL]
    for path in sorted((package / "rules").rglob("*.py")):
        if path.name == "__init__.py" or ALIAS_MARK in path.read_text(encoding="utf-8"):
            continue
        paths.append(path)
    paths += [package / name for name in LAST]
    return [str(path.relative_to(package.parent)) for path in paths]


def copy_sources(target: Path) -> None:
    """``libs/socai`` into ``target/socai``: the .py files and data, not bytecode nor an
    older build's extension modules of modules no longer compiled."""
    package = target / "socai"
    if package.exists():
        for stale in package.rglob("*.py"):
            if not (SOURCE / stale.relative_to(package)).exists():
                stale.unlink()
    shutil.copytree(SOURCE, package, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))


def build(target: Path, jobs: int) -> list[str]:
    from mypyc.build import mypycify
    from setuptools import Distribution

    copy_sources(target)
    modules = compiled_modules(target / "socai")
    cwd = Path.cwd()
    os.chdir(target)
    try:
        extensions = mypycify(modules, opt_level="3", separate=True, verbose=False)
        dist = Distribution({"name": "socai-native", "ext_modules": extensions})
        dist.script_name = "build_native.py"
        dist.script_args = ["build_ext", "--inplace", f"--parallel={jobs}", "--build-temp=build/temp"]
        dist.parse_command_line()
        dist.run_commands()
    finally:
        os.chdir(cwd)
    return modules


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else ROOT / "var" / "native"
    target.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    modules = build(target.resolve(), os.cpu_count() or 1)
    print(f"build_native: {len(modules)} modules compiled into {target} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
