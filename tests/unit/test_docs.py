"""The way in stays short and inside the repository: README.md is the front door (at most
~250 lines: what socai is, the picture, the two commands, where to read next), the rest is
the docs site (mkdocs.yml, built with --strict by make test), and nothing points outside
the repository."""

from __future__ import annotations

import re
from pathlib import Path

from socai_cli.site_hooks import GENERATED, RULE_START, rule_anchor

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_is_a_front_door_not_a_manual() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the details to docs/"
    text = "\n".join(lines)
    for command in ("make run", "make test", "SOCAI_NATS_URL", "SOCAI_DATABASE_URL", "socai audit", "TableService"):
        assert command in text, command


def test_no_page_points_outside_the_repository() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *GENERATED.values()]
    for page in pages:
        text = page.read_text()
        assert "../shared/" not in text, f"{page.relative_to(ROOT)} points outside the repository"


def test_every_page_of_the_site_is_in_its_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    in_nav = set(re.findall(r"(?:^|: |- )([\w/.-]+\.md)\s*$", config, re.M))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")} | set(GENERATED)
    assert pages - in_nav == set(), "pages the nav leaves out"
    assert in_nav - pages == set(), "nav entries without their page"


def test_every_rule_id_the_code_cites_is_a_rule_a_reader_can_open_on_the_site() -> None:
    """The code cites the rules by id (hundreds of times); each must start a rule of the
    Rules page, where the site anchors it (``rules/index.md#tl-6``)."""
    rules = (ROOT / "docs" / "rules" / "index.md").read_text()
    anchored = {m["id"] for m in RULE_START.finditer(rules)}
    assert rule_anchor("TL-6") == "tl-6" and "TL-6" in anchored and "CH-7" in anchored  # a list item's too
    prefixes = "|".join(sorted({rule.split("-")[0] for rule in anchored}))
    cited_at: dict[str, str] = {}
    for path in sorted(p for top in ("libs", "services", "apps") for p in (ROOT / top).rglob("*.py")):
        if "/gen/" in str(path):
            continue
        for m in re.finditer(rf"\b(?:{prefixes})-[0-9]+[a-z]?\b", path.read_text()):
            cited_at.setdefault(m[0], str(path.relative_to(ROOT)))
    assert len(cited_at) > 100
    missing = {rule: where for rule, where in cited_at.items() if rule not in anchored}
    assert missing == {}, "rule ids cited that start no rule on the Rules page"


# How a history of measurements or of the code reads: what changed and when is CHANGELOG.md's
# (by version) and git's; the pages say what is, with today's figures and their command.
HISTORY = re.compile(
    r"\b(?:earlier|previous|older) (?:bench(?:mark)? |measurement |nemesis |chaos )?runs?\b(?! (?:are|is) in CHANGELOG)"
    r"|\b(?:run|measurement) #[0-9]+|\(run [0-9]+\)|\bearlier code\b|\bbefore the fix\b|\bthe meaning changed\b"
    r"|\bused to (?:be|give|take|cost|run|measure)\b",
    re.I,
)


def test_the_readme_the_docs_and_the_code_cite_no_earlier_run_and_tell_no_history() -> None:
    assert HISTORY.search("as the previous run showed") and HISTORY.search("(run 3)")
    assert not HISTORY.search("Earlier runs are in CHANGELOG.md.")
    code = [
        p
        for top in ("libs", "services", "apps", "proto", "deploy")
        for p in sorted((ROOT / top).rglob("*"))
        if p.suffix in {".py", ".proto", ".md", ".yaml", ".sql"} and "gen" not in p.relative_to(ROOT).parts
    ]
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *code]
    found = {
        f"{page.relative_to(ROOT)}: {m[0]}"
        for page in pages
        if "rules" not in page.relative_to(ROOT).parts  # the game rules' own words
        for m in HISTORY.finditer(page.read_text())
    }
    assert found == set()
