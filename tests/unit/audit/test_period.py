"""Completeness (issue 33): each table's hands and facts run without a gap, inside a period
and at its edges, every settled hand in the journal has its hand in the events, and a
journal of a period is read as one (no hand outside it looked up, no escrow compared)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from socai.audit.export import write_jsonl as write_events
from socai.audit.journal import JournalSigner
from socai.audit.journal import write_jsonl as write_journal
from socai.gen.ledger.v1 import ledger_pb2
from socai.settle.keys import settlement_key
from tests.support.synthetic import Simulation, simulate
from tests.unit.audit.ledger_journal import journal_of
from tests.unit.audit.test_stored_export import audit

GAMES = ("holdem", "tienlen")


@pytest.fixture(scope="module")
def sim() -> Simulation:
    return simulate(24, GAMES, seed=11, hands_per_table=6)


def timed_journal(sim: Simulation) -> list[ledger_pb2.Transaction]:
    """``journal_of(sim)`` with the times a ledger would give: a buy-in when its table opens,
    a hand's settlement just after its HandEnded (the tables play one after another)."""
    txs = journal_of(sim)
    ended = {settlement_key(h.hand_id): h.events[-1].occurred_at for h in sim.hands}
    opened = {t.table_id: t.table_events[0].occurred_at for t in sim.tables}
    for tx in txs:
        at = ended.get(tx.idempotency_key) or opened[tx.reference]
        tx.created_at.FromDatetime(at + timedelta(microseconds=500))
        for e in tx.entries:
            e.created_at.CopyFrom(tx.created_at)
    return txs


def files(tmp_path: Path, sim: Simulation, drop: set[str] = frozenset(), drop_facts: set[int] = frozenset()) -> Path:  # type: ignore[assignment]
    """The events export without the hands in ``drop`` and the facts at positions ``drop_facts``."""
    events = [
        e
        for t in sim.tables
        for e in (
            *(f for i, f in enumerate(t.table_events) if (t.table_id, i) not in drop_facts),
            *(e for h in t.hands for e in h.events),
        )
        if e.hand_id not in drop
    ]
    path = tmp_path / "events.jsonl"
    with path.open("w") as out:
        write_events(events, out)
    return path


def journal_file(tmp_path: Path, txs: list[ledger_pb2.Transaction], name: str = "journal.jsonl") -> Path:
    path = tmp_path / name
    with path.open("w") as out:
        write_journal(txs, out)
    return path


def mismatches(out: str) -> list[tuple[str, str, str]]:
    found = []
    for line in out.splitlines():
        parts = line.split(maxsplit=2)
        if line.startswith("  ") and len(parts) == 3 and parts[1].isupper():
            found.append((parts[0], parts[1], parts[2]))
    return found


def test_a_hand_removed_from_the_middle_of_a_table_is_named(
    tmp_path: Path, sim: Simulation, capsys: pytest.CaptureFixture[str]
) -> None:
    table = sim.tables[0]
    gone = table.hands[2].hand_id
    status, out, _ = audit(["--events", str(files(tmp_path, sim, {gone}))], capsys)
    assert status == 1
    assert (gone, "HAND_MISSING") in {(h, r) for h, r, _ in mismatches(out)}, out
    detail = next(d for h, r, d in mismatches(out) if r == "HAND_MISSING")
    assert detail == f"{gone} missing: {table.hands[1].hand_id} is followed by {table.hands[3].hand_id}"


def test_a_tables_last_hand_removed_from_a_whole_export_is_named_by_its_settlement(
    tmp_path: Path, sim: Simulation, capsys: pytest.CaptureFixture[str]
) -> None:
    # No gap in the numbers shows it (it was the table's last): only the journal can.
    hand = next(t.hands[-1] for t in sim.tables if t.hands[-1].settlement.entries())
    events = files(tmp_path, sim, {hand.hand_id})
    journal = journal_file(tmp_path, timed_journal(sim))
    status, out, _ = audit(["--events", str(events), "--journal", str(journal)], capsys)
    assert status == 1
    named = [(h, d) for h, r, d in mismatches(out) if r == "HAND_MISSING"]
    assert named == [
        (
            hand.hand_id,
            f"{hand.hand_id} missing: the journal settles it under {settlement_key(hand.hand_id)} (journal_seq "
            f"{next(t.journal_seq for t in timed_journal(sim) if t.idempotency_key == settlement_key(hand.hand_id))}"
            "), the events hold no such hand",
        )
    ], out


def test_a_hand_removed_at_the_end_of_a_period_is_named_when_the_journal_settled_it_inside(
    tmp_path: Path, sim: Simulation, capsys: pytest.CaptureFixture[str]
) -> None:
    # The period holds the first two tables whole; the second's last hand is cut from the file.
    table = sim.tables[1]
    hand = table.hands[-1]
    assert hand.settlement.entries(), "pick a seed whose table ends with a hand that moves gold"
    until = sim.tables[2].table_events[0].occurred_at
    period = ["--until", until.isoformat()]
    keep = {h.hand_id for t in sim.tables[2:] for h in t.hands}
    events = files(tmp_path, sim, keep | {hand.hand_id})
    journal = journal_file(tmp_path, timed_journal(sim))
    status, out, _ = audit(["--events", str(events), "--journal", str(journal), *period], capsys)
    assert status == 1
    ((h, _, detail),) = [m for m in mismatches(out) if m[1] == "HAND_MISSING"]
    assert h == hand.hand_id and "inside the period" in detail, out
    # The same file with the hand is clean: hands after the period are not asked for.
    events = files(tmp_path, sim, keep)
    status, out, _ = audit(["--events", str(events), "--journal", str(journal), *period], capsys)
    assert "HAND_MISSING" not in out, out


def test_a_removed_buy_in_is_a_gap_in_the_tables_facts(
    tmp_path: Path, sim: Simulation, capsys: pytest.CaptureFixture[str]
) -> None:
    table = next(t for t in sim.tables if len(t.table_events) >= 3)
    index = next(i for i, e in enumerate(table.table_events) if type(e.body).__name__ == "PlayerSeated")
    removed = table.table_events[index]
    status, out, _ = audit(["--events", str(files(tmp_path, sim, drop_facts={(table.table_id, index)}))], capsys)
    assert status == 1
    facts = [d for _, r, d in mismatches(out) if r == "FACT_MISSING"]
    assert facts == [
        f"{removed.event_id} missing: {table.table_id}-t/{removed.seq - 1} is followed by {table.table_id}-t/{removed.seq + 1}"
    ], out


def test_a_journal_of_a_period_looks_up_only_the_hands_settled_in_it(
    tmp_path: Path, sim: Simulation, capsys: pytest.CaptureFixture[str]
) -> None:
    txs = timed_journal(sim)
    since = sim.tables[2].table_events[0].occurred_at
    part = [tx for tx in txs if tx.created_at.ToDatetime().replace(tzinfo=since.tzinfo) >= since]
    signer = JournalSigner(bytes(range(32)))
    page = signer.seal(part, since=since, until=None, first=True, after_seq=part[0].journal_seq - 1, more=False)
    path = tmp_path / "period.jsonl"
    with path.open("w") as out:
        write_journal(part, out, page)
    status, out, _ = audit(["--events", str(files(tmp_path, sim)), "--journal", str(path)], capsys)
    assert status == 0, out
    outside = sum(1 for t in sim.tables[:2] for h in t.hands if h.settlement.entries())
    assert f"{outside} hands ended outside its period (not looked up)" in out
    assert "0 escrow balances" in out  # a journal of a period does not hold the balances the log adds up to
    # The journal's own chain starts at its first transaction: no gap reported before it.
    assert "JOURNAL_MISMATCH" not in out
    assert json.loads(path.read_text().splitlines()[0])["journal_seq"] == str(part[0].journal_seq)
