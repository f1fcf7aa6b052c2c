"""The committed generated code matches proto/ (run `make proto` after changing a .proto)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from socai.infra.protogen import GEN_DIR, diff, generate


def test_generated_code_is_up_to_date():
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        stale = diff(Path(tmp), GEN_DIR)
    assert stale == [], f"libs/socai/gen is stale, run `make proto`: {stale}"


def test_generated_imports_point_into_socai_gen():
    for path in GEN_DIR.rglob("*.py"):
        text = path.read_text()
        assert "from socai.events" not in text and "from socai.ledger" not in text, path
