"""Generate the Python code of proto/ into libs/socai/gen (``make proto``).

protoc derives Python imports from proto paths (``socai/events/v1/events.proto`` →
``socai.events.v1``); the generated tree is moved under ``socai.gen`` and its imports are
rewritten to match, so generated and hand-written code never share a package. The output is
deterministic for the pinned grpcio-tools and mypy-protobuf, and committed;
``tests/unit/test_protogen.py`` fails when it is stale.

Usage: ``python -m socai.infra.protogen [--check]``.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROTO_DIR = ROOT / "proto"
GEN_DIR = ROOT / "libs" / "socai" / "gen"
_IMPORT = re.compile(r"^(from|import) socai\.(?!gen\.)", re.MULTILINE)


def generate(out_dir: Path) -> None:
    """Write the generated package (with ``__init__.py`` files) into ``out_dir``."""
    from grpc_tools import protoc  # dev dependency; imported only here

    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    plugin = Path(sys.executable).parent / "protoc-gen-mypy"
    plugin_grpc = Path(sys.executable).parent / "protoc-gen-mypy_grpc"
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "protoc",
            f"-I{PROTO_DIR}",
            f"-I{include}",
            f"--python_out={tmp}",
            f"--grpc_python_out={tmp}",
            f"--plugin=protoc-gen-mypy={plugin}",
            f"--plugin=protoc-gen-mypy_grpc={plugin_grpc}",
            f"--mypy_out={tmp}",
            f"--mypy_grpc_out={tmp}",
            *protos,
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        src = Path(tmp) / "socai"
        out_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(src.rglob("*")):
            if path.is_dir():
                continue
            target = out_dir / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            text = _IMPORT.sub(lambda m: f"{m.group(1)} socai.gen.", path.read_text())
            target.write_text(text)
    for directory in [out_dir, *sorted(p for p in out_dir.rglob("*") if p.is_dir())]:
        init = directory / "__init__.py"
        if not init.exists():
            init.write_text("")
    (out_dir / "README.md").write_text("Generated from proto/ by `make proto` (socai.infra.protogen). Do not edit.\n")


def diff(a: Path, b: Path) -> list[str]:
    """Relative paths that differ between two generated trees."""
    out = []
    names_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    names_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    for name in sorted(names_a ^ names_b):
        out.append(str(name))
    for name in sorted(names_a & names_b):
        if not filecmp.cmp(a / name, b / name, shallow=False):
            out.append(str(name))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m socai.infra.protogen")
    parser.add_argument("--check", action="store_true", help="fail if libs/socai/gen is stale")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp))
            stale = diff(Path(tmp), GEN_DIR)
        if stale:
            print("libs/socai/gen is stale; run `make proto`:", *stale, sep="\n  ")
            return 1
        print("libs/socai/gen is up to date")
        return 0
    shutil.rmtree(GEN_DIR, ignore_errors=True)
    generate(GEN_DIR)
    print(f"generated {GEN_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
