"""mkdocs hooks (mkdocs.yml ``hooks:``): pages of the docs site whose text lives elsewhere,
and an anchor for every rule id.

deploy/README.md is the operators' runbook, kept beside the manifests, scripts and alert
rules it describes, where an operator working in deploy/ reads it; the site shows the same
file as a page of "Run it" (starting, scale-out, backups, upgrades, key rotation, alerts),
not a copy that could drift from it.

The code cites the rules by id (``TL-6``, ``GEN-4``); each rule of docs/rules/index.md
starts with its id in bold (``**TL-6 Chặt đè …**``, or a list item ``- **CH-7 …**``), and the
site gives it the anchor ``#tl-6``, so ``rules/index.md#tl-6`` is the rule itself.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
# page of the site -> the file it shows
GENERATED: dict[str, Path] = {"run/deploy.md": ROOT / "deploy" / "README.md"}


RULES_PAGE = "rules/index.md"
# A rule's id where the rule starts: bold, at the start of a line or of a list item.
RULE_START = re.compile(r"^(?P<lead>[ \t]*(?:- )?)\*\*(?P<id>[A-Z]{2,4}-[0-9]+[a-z]?)\b", re.M)


def rule_anchor(rule_id: str) -> str:
    return rule_id.lower()


def anchored(markdown: str) -> str:
    """``markdown`` with an anchor before the start of each rule."""
    return RULE_START.sub(lambda m: f'{m["lead"]}<a id="{rule_anchor(m["id"])}"></a>**{m["id"]}', markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return anchored(markdown) if page.file.src_uri == RULES_PAGE else markdown


def on_files(files: Files, config: Any) -> Files:
    for uri, source in GENERATED.items():
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    return files
