"""The auditor's site (placeholder, filled in below)."""

from __future__ import annotations

from pathlib import Path

from socai.audit.auditor import Audit


def write_site(audit: Audit, out_dir: Path) -> int:
    raise NotImplementedError
