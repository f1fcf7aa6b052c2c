"""The auditor's desk without services (issue 20): the journal file and its check, the
offline ledger source, the hand view and the static site (escaping, findings first)."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

from socai.audit import handview, html
from socai.audit.auditor import reconcile, verify
from socai.audit.export import RawEvent
from socai.audit.journal import CsvWriter, read_journal, write_jsonl
from socai.audit.ledger_source import JournalLedger, check_journal
from socai.events import codec
from socai.gen.ledger.v1 import ledger_pb2
from tests.support.synthetic import Simulation, simulate
from tests.unit.audit.ledger_journal import journal_of


def audited(sim: Simulation, txs: list[ledger_pb2.Transaction]):  # type: ignore[no-untyped-def]
    audit = verify([RawEvent(0, "", codec.to_proto(e)) for e in sim.events()], source="sim")
    asyncio.run(reconcile(audit, JournalLedger(txs, "journal sim")))
    return audit


def test_a_journal_file_reads_back_the_same_in_both_formats(tmp_path: Path) -> None:
    txs = journal_of(simulate(6, ("holdem", "tienlen"), seed=1, hands_per_table=3))
    for name, write in (
        ("j.jsonl", lambda out: write_jsonl(txs, out)),
        ("j.csv", lambda out: CsvWriter(out).write(txs)),
    ):
        path = tmp_path / name
        with path.open("w", encoding="utf-8", newline="") as out:
            assert write(out) == len(txs)
        assert list(read_journal(path)) == txs, name


def test_the_offline_ledger_agrees_with_the_replay_and_escrows() -> None:
    sim = simulate(8, ("holdem", "xito", "taixiu"), seed=2, hands_per_table=3)
    audit = audited(sim, journal_of(sim))
    assert audit.report.ok, audit.report.render()
    assert audit.report.ledger == "journal sim"
    assert audit.report.transactions_checked == len(sim.hands)
    assert audit.report.escrows_checked == sum(len(t.seats) for t in sim.tables)


def test_an_edited_or_removed_journal_transaction_is_named_with_its_hand() -> None:
    sim = simulate(6, ("holdem",), seed=3, hands_per_table=3)
    txs = journal_of(sim)
    assert check_journal(txs) == []
    settles = [t for t in txs if t.kind == "settlement"]
    edited, removed = settles[0], settles[1]
    edited.entries[0].amount_gold += 5
    txs.remove(removed)
    problems = check_journal(txs)
    by_hand = {p.hand_id for p in problems}
    assert edited.reference in by_hand
    assert any(f"settle:{edited.reference}" in p.detail and "entries sum to +5" in p.detail for p in problems)
    assert any(
        f"journal_seq {removed.journal_seq + 1} follows {removed.journal_seq - 1}: a gap" in p.detail for p in problems
    )
    audit = audited(sim, txs)
    found = {(m.hand_id, m.reason) for m in audit.report.mismatches}
    assert (edited.reference, "LEDGER_MISMATCH") in found and (edited.reference, "JOURNAL_MISMATCH") in found
    assert (removed.reference, "LEDGER_MISSING") in found


def test_the_hand_view_marks_face_down_cards_and_names_each_rule() -> None:
    sim = simulate(4, ("holdem", "tienlen"), seed=4, hands_per_table=2)
    audit = audited(sim, journal_of(sim))
    views = {v.hand_id: v for v in handview.views(audit)}
    assert set(views) == {hd.hand_id for hd in sim.hands}
    holdem = next(v for v in views.values() if v.game == "holdem")
    hole = [c for r in holdem.timeline for c in r.cards if c.to != handview.BOARD]
    board = [c for r in holdem.timeline for c in r.cards if c.to == handview.BOARD]
    assert hole and not any(c.face_up for c in hole) and board and all(c.face_up for c in board)
    assert holdem.seed_ok is True and holdem.ledger_transaction_id
    assert all(line.rule for v in views.values() for line in v.lines)
    text = handview.render_text(holdem)
    assert f"({hole[0].card})>{hole[0].to}" in text and "the commitment holds" in text


def test_the_site_escapes_what_the_input_says_and_lists_findings_first(tmp_path: Path) -> None:
    sim = simulate(3, ("holdem",), seed=5, hands_per_table=2)
    audit = audited(sim, journal_of(sim))
    evil = '<script>alert("x")</script>/../../etc'
    audit.report.mismatch("BAD_EVENT", f"line 3: {evil}", hand_id=evil, table_id=evil)
    pages = html.write_site(audit, tmp_path / "site", dead_letters=[(sim.hands[1].hand_id, "LEDGER_REJECTED", evil)])
    assert pages == len(sim.hands)
    index = (tmp_path / "site" / "index.html").read_text()
    assert "<script>alert" not in index and "&lt;script&gt;alert(&quot;x&quot;)" in index
    assert index.index('id="mismatches"') < index.index('id="dead-letters"') < index.index('id="games"')
    assert (
        f'<td><a href="hands/{sim.hands[1].hand_id}.html">{sim.hands[1].hand_id}</a></td><td>LEDGER_REJECTED</td>'
        in index
    )
    assert html.page_name(evil).startswith("hand-") and "/" not in html.page_name(evil)
    listing = (tmp_path / "site" / "hands.html").read_text()
    assert '<script src="search.js"></script>' in listing
    assert not any("http" in p.read_text() for p in (tmp_path / "site").rglob("*.html"))
    page = (tmp_path / "site" / "hands" / f"{sim.hands[0].hand_id}.html").read_text()
    assert 'class="card down"' in page and 'data-balance-after="' in page


def test_render_stays_the_same_for_the_same_input() -> None:
    sim = simulate(3, ("taixiu",), seed=6, hands_per_table=2)
    first = audited(sim, journal_of(sim)).report.verdict_text()
    second = audited(sim, journal_of(sim)).report.verdict_text()
    assert first == second and '"ok": true' in first
    buf = io.StringIO()
    assert write_jsonl(journal_of(sim), buf) == len(journal_of(sim))


def test_a_penalty_line_says_which_plays_caused_it_in_the_terminal_and_on_the_page(tmp_path: Path) -> None:
    sim = simulate(30, ("tienlen",), seed=8, hands_per_table=2)
    audit = audited(sim, journal_of(sim))
    caused = [(v, line) for v in handview.views(audit) for line in v.lines if line.detail]
    assert caused, "the bots chopped in 60 hands"
    assert all("; play" in line.detail for _, line in caused)  # only plays make a detail
    view, line = caused[0]
    assert line.penalty
    assert f"caused by {line.detail}" in handview.render_text(view)
    html.write_site(audit, tmp_path)
    pages = [re.sub(r"<[^>]+>", "", p.read_text()) for p in tmp_path.rglob("*.html")]  # the text a reader sees
    assert any(f"caused by {line.detail}" in text for text in pages)
