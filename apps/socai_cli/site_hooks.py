"""mkdocs hooks (mkdocs.yml ``hooks:``): pages of the docs site whose text lives elsewhere.

deploy/README.md is the operators' runbook, kept beside the manifests, scripts and alert
rules it describes, where an operator working in deploy/ reads it; the site shows the same
file as a page of "Run it" (starting, scale-out, backups, upgrades, key rotation, alerts),
not a copy that could drift from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
# page of the site -> the file it shows
GENERATED: dict[str, Path] = {"run/deploy.md": ROOT / "deploy" / "README.md"}


def on_files(files: Files, config: Any) -> Files:
    for uri, source in GENERATED.items():
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    return files
