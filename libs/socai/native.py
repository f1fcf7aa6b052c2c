"""Which core a process runs: the compiled one, or the interpreted one.

``make install`` (and ``make native``) compiles the pure core with mypyc
(``libs/build_native.py``): the modules that ``compiled_modules`` lists become C extension
modules beside their sources, and the build writes ``MANIFEST`` with the sha256 of each
source it compiled. Python imports an extension module ahead of the ``.py`` beside it, so an
edited source would be shadowed by its older build; ``import socai`` therefore calls
``select`` first, which compares the sources with the manifest (32 files, ~1.5 ms) and
runs the compiled core only when every module is built from the sources as they are now.
All or nothing: the compiled modules call each other natively, so one source newer than its
build makes every module of the list load from its source (a meta path finder ahead of the
others), with a warning that names the file and ``make native``.

``SOCAI_CORE`` chooses: ``auto`` (or unset) the compiled core when it is fresh, else the
interpreted one; ``interpreted`` always the sources (make test-heavy runs the core's suites
so, and the benchmarks measure the interpreted core beside the compiled one); ``compiled``
the compiled core or an ImportError, for a process that must not run the other one
unnoticed. ``socai.core_build()`` says which core runs.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent
MANIFEST_NAME = "_native.json"
ENV = "SOCAI_CORE"
CHOICES = ("auto", "compiled", "interpreted")
# The one suffix a build writes: this interpreter's (e.g. ".cpython-311-x86_64-linux-gnu.so").
EXTENSION_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]

TOP_LEVEL = ("cards.py", "money.py", "errors.py", "accounts.py", "fairness.py")
LAST = ("events/hidden.py", "settle/replay.py")
ALIAS_MARK = "sys.modules[__name__] = "

FRESH, STALE, ABSENT = "fresh", "stale", "absent"


def compiled_modules(package: Path = PACKAGE) -> list[str]:
    """The modules compiled, as paths relative to the package's parent (``socai/cards.py``):
    ``cards``, ``money``, ``errors``, ``accounts``, ``fairness``, every module of
    ``socai.rules`` but the flat-name aliases (``socai.rules.phom`` and the like put their
    family's module in their place in ``sys.modules``: nothing to compile), and the replay
    with the hidden-card reader it runs on every event (``events.hidden``)."""
    paths = [package / name for name in TOP_LEVEL]
    for path in sorted((package / "rules").rglob("*.py")):
        if path.name == "__init__.py" or ALIAS_MARK in path.read_text(encoding="utf-8"):
            continue
        paths.append(path)
    paths += [package / name for name in LAST]
    return [path.relative_to(package.parent).as_posix() for path in paths]


def module_name(relative: str) -> str:
    """``socai/rules/base.py`` -> ``socai.rules.base``."""
    return relative.removesuffix(".py").replace("/", ".")


def extensions_of(relative: str) -> tuple[str, str]:
    """The two files a separately compiled module builds: the shim Python imports and the
    module's own library (``socai/cards<suffix>``, ``socai/cards__mypyc<suffix>``)."""
    stem = relative.removesuffix(".py")
    return stem + EXTENSION_SUFFIX, stem + "__mypyc" + EXTENSION_SUFFIX


def digests(relatives: Sequence[str], package: Path = PACKAGE) -> dict[str, str]:
    """The sha256 of each source, by its relative path."""
    root = package.parent
    return {relative: hashlib.sha256((root / relative).read_bytes()).hexdigest() for relative in relatives}


def manifest(relatives: Sequence[str], package: Path = PACKAGE) -> dict[str, object]:
    """What a build records: the interpreter's extension suffix and each source's sha256."""
    return {"suffix": EXTENSION_SUFFIX, "modules": digests(relatives, package)}


def state(package: Path = PACKAGE) -> tuple[str, str]:
    """(``FRESH``, "") when every module of the manifest is built from its source as it is
    now; (``STALE``, why) when a build or a part of one is there but not all of it matches;
    (``ABSENT``, "") when there is no build."""
    root = package.parent
    try:
        recorded = json.loads((package / MANIFEST_NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        recorded = None
    except (OSError, ValueError) as e:
        return STALE, f"{MANIFEST_NAME} is unreadable ({e})"
    if recorded is None:
        if any((root / ext).exists() for relative in compiled_modules(package) for ext in extensions_of(relative)):
            return STALE, f"extension modules without {MANIFEST_NAME} (a build that did not finish)"
        return ABSENT, ""
    if not isinstance(recorded, dict) or recorded.get("suffix") != EXTENSION_SUFFIX:
        return STALE, f"built for another interpreter ({recorded.get('suffix') if isinstance(recorded, dict) else '?'})"
    modules = recorded.get("modules")
    if not isinstance(modules, dict) or sorted(modules) != sorted(compiled_modules(package)):
        return STALE, "the modules to compile changed since the build"
    for relative, digest in modules.items():
        try:
            now = hashlib.sha256((root / relative).read_bytes()).hexdigest()
        except OSError:
            return STALE, f"{relative} is gone"
        if now != digest:
            return STALE, f"{relative} changed since the build"
        if not all((root / ext).exists() for ext in extensions_of(relative)):
            return STALE, f"{relative}'s extension module is missing"
    return FRESH, ""


class _FromSource:
    """A meta path finder: loads the named modules from their ``.py`` sources, ahead of the
    extension modules beside them. (Not an ``importlib.abc.MetaPathFinder``: importing that
    brings in ``importlib.resources``, ``tempfile`` and ``random``, ~13 ms, in every process.)"""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = sources

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        source = self.sources.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, source)


def select(package: Path = PACKAGE) -> str:
    """Choose this process's core before any module of it is imported (``socai/__init__``
    calls it); returns ``"compiled"`` or ``"interpreted"``. Raises ImportError for
    ``SOCAI_CORE=compiled`` without a fresh build, ValueError for an unknown choice."""
    choice = os.environ.get(ENV, "") or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{ENV}={choice!r}: expected one of {', '.join(CHOICES)}")
    found, why = state(package)
    if choice == "compiled" and found != FRESH:
        detail = why or "there is no build"
        raise ImportError(f"{ENV}=compiled, but the compiled core cannot run: {detail}; run make native")
    if found == FRESH and choice != "interpreted":
        return "compiled"
    if found != ABSENT:
        root = package.parent
        sources = {module_name(r): root / r for r in compiled_modules(package)}
        if not any(isinstance(f, _FromSource) for f in sys.meta_path):
            sys.meta_path.insert(0, _FromSource(sources))
        if found == STALE and choice == "auto":
            warnings.warn(
                f"socai runs its interpreted core: the compiled one is stale ({why}); make native rebuilds it",
                RuntimeWarning,
                stacklevel=2,
            )
    return "interpreted"
