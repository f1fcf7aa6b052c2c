"""The rules engine is a functional core (STYLE.md habit 1): no I/O, no clock, no randomness.

Every ``libs/socai/rules/**/*.py`` is read with ``ast``, together with every socai module it
imports, directly or not (``socai.money``, ``socai.cards``, ``socai.fairness``, …). None of
them may import infrastructure, the clock, randomness or the operating system, nor call
the clock. The single exception is ``secrets`` inside ``socai.fairness.new_seed``, which
draws the seed the table commits to before a hand.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import socai

LIBS = Path(socai.__file__).parent.parent
RULES_DIR = LIBS / "socai" / "rules"

# Top-level modules the engine (and what it imports) must never import.
FORBIDDEN_MODULES = frozenset(
    {
        "grpc",
        "nats",
        "sqlalchemy",
        "psycopg",
        "psycopg2",
        "asyncio",
        "socket",
        "random",
        "time",
        "os",
        "subprocess",
        "secrets",  # allowed only inside socai.fairness.new_seed
        "uuid",
        "threading",
        "multiprocessing",
        "logging",
        "structlog",
        "pathlib",
        "shutil",
        "tempfile",
        "urllib",
        "http",
        "ssl",
        "signal",
        "sqlite3",
        "socai_ledger",
        "socai_table",
        "socai_settlement",
    }
)
# socai packages that are infrastructure, never part of the pure core.
FORBIDDEN_SOCAI = ("socai.infra", "socai.gen", "socai_cli", "socai.audit", "socai.settle")
# Calls that read the clock, the OS or randomness, or do I/O, by their dotted name.
FORBIDDEN_CALLS = frozenset(
    {
        "datetime.now",
        "datetime.utcnow",
        "datetime.today",
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "date.today",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.perf_counter",
        "os.urandom",
        "uuid.uuid4",
        "open",
        "input",
        "print",
        "breakpoint",
        "exec",
        "eval",
        "__import__",
    }
)
SECRETS_ALLOWED_IN = ("socai.fairness", "new_seed")
# The one ``exec`` of the pure core: the game kit writes each state class's field-copying
# code from the class's own field names (what ``dataclasses`` does), for replay speed.
EXEC_ALLOWED_IN = ("socai.rules.base", "_compile_state_code")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LIBS).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_path(name: str) -> Path | None:
    base = LIBS.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


class PurityChecker(ast.NodeVisitor):
    """Collects the violations of one module and the socai modules it imports."""

    def __init__(self, name: str, is_package: bool) -> None:
        self.name = name
        self.package = name if is_package else name.rpartition(".")[0]
        self.violations: list[str] = []
        self.socai_imports: set[str] = set()
        self.function: list[str] = []

    def _secrets_allowed(self) -> bool:
        module, function = SECRETS_ALLOWED_IN
        return self.name == module and function in self.function

    def _imported(self, module: str, line: int) -> None:
        top = module.split(".")[0]
        if top == "secrets" and self._secrets_allowed():
            return
        if top in FORBIDDEN_MODULES:
            self.violations.append(f"{self.name}:{line} imports {module}")
        if module == "socai" or module.startswith("socai."):
            if module.startswith(FORBIDDEN_SOCAI):
                self.violations.append(f"{self.name}:{line} imports {module}")
            self.socai_imports.add(module)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.function.append(node.name)
        self.generic_visit(node)
        self.function.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._imported(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        self._imported(module, node.lineno)
        for alias in node.names:
            # ``from socai import cards`` imports the module socai.cards.
            if module_path(f"{module}.{alias.name}") is not None:
                self._imported(f"{module}.{alias.name}", node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        exec_allowed = name == "exec" and (self.name, self.function[-1:]) == (EXEC_ALLOWED_IN[0], [EXEC_ALLOWED_IN[1]])
        if name in FORBIDDEN_CALLS and not exec_allowed:
            self.violations.append(f"{self.name}:{node.lineno} calls {name}()")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "secrets" and not self._secrets_allowed():
            self.violations.append(f"{self.name}:{node.lineno} uses secrets")

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        self.violations.append(f"{self.name}:{node.lineno} uses async with")
        self.generic_visit(node)


def check_source(name: str, source: str, is_package: bool = False) -> PurityChecker:
    checker = PurityChecker(name, is_package)
    checker.visit(ast.parse(source))
    return checker


def parent_packages(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


# Chooses which build of the core a process loads (socai/__init__ calls it before any module
# of the core is imported): it reads the build's manifest, the sources and the environment,
# once, and is not part of the core it loads.
LOADER = "socai.native"


def pure_core() -> dict[str, list[str]]:
    """Module name → violations, for every rules module and every socai module they reach."""
    todo = [module_name(p) for p in sorted(RULES_DIR.rglob("*.py"))]
    seen: dict[str, list[str]] = {}
    while todo:
        name = todo.pop()
        if name in seen or name == LOADER:
            continue
        path = module_path(name)
        if path is None:  # a name imported from a module, not a module itself
            continue
        checker = check_source(name, path.read_text(encoding="utf-8"), path.name == "__init__.py")
        seen[name] = checker.violations
        todo.extend(checker.socai_imports)
        todo.extend(parent_packages(name))
    return seen


CORE = pure_core()


def test_the_pure_core_covers_the_rules_and_the_shared_value_modules() -> None:
    rules = {module_name(p) for p in RULES_DIR.rglob("*.py")}
    assert rules <= set(CORE)
    assert {"socai.money", "socai.cards", "socai.fairness", "socai.errors", "socai.accounts"} <= set(CORE)
    assert {"socai.rules.base", "socai.rules.pots", "socai.rules.ranking", "socai.rules.registry"} <= rules
    assert {"socai.rules.poker.holdem", "socai.rules.climbing.shedding", "socai.rules.dice.taixiu"} <= rules


def test_only_the_package_itself_imports_the_loader() -> None:
    sources = sorted((LIBS / "socai").rglob("*.py"))
    importers = [module_name(p) for p in sources if module_name(p) != "socai" and LOADER in _socai_imports(p)]
    assert importers == [] and LOADER in _socai_imports(LIBS / "socai" / "__init__.py")
    assert LOADER not in CORE and "socai" in CORE


def _socai_imports(path: Path) -> list[str]:
    return check_source(module_name(path), path.read_text(encoding="utf-8"), path.name == "__init__.py").socai_imports


@pytest.mark.parametrize("module", sorted(CORE))
def test_module_of_the_pure_core_imports_no_infrastructure_clock_or_randomness(module: str) -> None:
    assert CORE[module] == []


def test_the_shared_value_modules_are_pure_even_if_no_rule_imports_them() -> None:
    for name in ("socai.money", "socai.cards", "socai.fairness", "socai.accounts", "socai.errors"):
        path = module_path(name)
        assert path is not None
        assert check_source(name, path.read_text(encoding="utf-8")).violations == []


def test_exec_is_allowed_only_in_the_kits_state_code_writer() -> None:
    checker = check_source("socai.rules.base", "def elsewhere():\n    exec('x = 1')\n")
    assert checker.violations == ["socai.rules.base:2 calls exec()"]
    assert check_source("socai.rules.base", "def _compile_state_code():\n    exec('x = 1')\n").violations == []
    assert check_source("socai.rules.poker.holdem", "def _compile_state_code():\n    exec('x = 1')\n").violations != []


def test_fairness_imports_secrets_only_inside_new_seed() -> None:
    path = module_path("socai.fairness")
    assert path is not None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all("secrets" not in [a.name for a in n.names] for n in top_level)
    new_seed = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "new_seed")
    assert any(isinstance(n, ast.Import) and n.names[0].name == "secrets" for n in ast.walk(new_seed))


# --- the checker itself catches what it should ---------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "import random",
        "import os.path",
        "from os import path",
        "import grpc",
        "from nats.aio.client import Client",
        "import sqlalchemy as sa",
        "from psycopg import connect",
        "import asyncio",
        "import socket",
        "import time",
        "from time import monotonic",
        "import subprocess",
        "import secrets",
        "from socai.infra import config",
        "from datetime import datetime\nnow = datetime.now()",
        "import datetime\nnow = datetime.datetime.utcnow()",
        "from datetime import date\nday = date.today()",
        "def f():\n    import random\n    return random.random()",
        "def f(path):\n    return open(path).read()",
        "print('hello')",
    ],
)
def test_the_checker_flags(source: str) -> None:
    assert check_source("socai.rules.example", source).violations != []


@pytest.mark.parametrize(
    "source",
    [
        "from datetime import datetime\ndef stamp(at: datetime) -> str:\n    return at.isoformat()",
        "import hashlib, hmac, itertools, functools, math, dataclasses",
        "from collections import Counter",
        "from socai.money import fee",
        "from . import base",
    ],
)
def test_the_checker_lets_pure_code_through(source: str) -> None:
    assert check_source("socai.rules.example", source).violations == []


def test_secrets_is_allowed_only_inside_fairness_new_seed() -> None:
    inside = "def new_seed():\n    import secrets\n    return secrets.token_bytes(32)"
    assert check_source("socai.fairness", inside).violations == []
    assert check_source("socai.rules.example", inside).violations != []
    assert check_source("socai.fairness", "import secrets\ndef new_seed():\n    return 1").violations != []
    elsewhere = "def other():\n    import secrets\n    return secrets.token_bytes(32)"
    assert check_source("socai.fairness", elsewhere).violations != []


def test_relative_imports_are_followed_into_the_socai_package() -> None:
    checker = check_source("socai.rules.example", "from .base import GameSpec\nfrom .. import money")
    assert checker.socai_imports == {"socai", "socai.rules.base", "socai.money"}


# --- and at run time ---------------------------------------------------------------------


def test_loading_every_rules_module_loads_no_infrastructure() -> None:
    code = (
        "import importlib, pathlib, sys\n"
        "import socai.rules\n"
        "root = pathlib.Path(socai.rules.__file__).parent.parent.parent\n"
        "for p in sorted(pathlib.Path(socai.rules.__file__).parent.rglob('*.py')):\n"
        "    parts = p.relative_to(root).with_suffix('').parts\n"
        "    importlib.import_module('.'.join(parts[:-1] if parts[-1] == '__init__' else parts))\n"
        "bad = ('grpc', 'nats', 'sqlalchemy', 'psycopg', 'asyncio', 'structlog', 'socai.infra', 'socai.gen')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in bad or m.startswith(bad)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
