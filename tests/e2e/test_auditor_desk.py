"""End to end, the auditor's desk (issue 20): hands settle through the real ledger; then the
event log and the journal are exported (``socai events export``, ``socai ledger export``)
and audited offline, to the same verdict byte for byte as the live audit; tampered exports
are named with the hand and the reason."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from socai.audit.journal import CSV_COLUMNS, read_journal
from socai.infra.nats import connect
from tests.support.e2e import settled_simulation, socai
from tests.support.isolated import fresh_database, new_stream_spec
from tests.support.settlement import Harness
from tests.support.synthetic import Simulation

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
async def settled(nats_url: str, pg_admin_url: str) -> AsyncIterator[tuple[Harness, Simulation]]:
    """Settled once for the module: both tests only read (exports, audits) and write their
    files under their own tmp_path."""
    with fresh_database(pg_admin_url, migrated=True) as database_url:
        nc = await connect(nats_url, name="socai-test")
        try:
            async with settled_simulation(
                nats_url,
                database_url,
                new_stream_spec(),
                nc,
                hands=24,
                games=("holdem", "xito", "taixiu", "tienlen"),
                seed=20,
                hands_per_table=4,
            ) as (h, sim):
                yield h, sim
        finally:
            await nc.close()


def findings(stdout: str) -> list[tuple[str, str, str]]:
    """(hand, reason, detail) of every mismatch line of a rendered report."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("  ") and len(line.split(maxsplit=2)) == 3:
            hand, reason, detail = line.split(maxsplit=2)
            if reason.isupper():
                out.append((hand, reason, detail))
    return out


async def test_the_offline_audit_of_both_exports_gives_the_live_verdict_and_names_tampering(
    settled: tuple[Harness, Simulation], tmp_path: Path
) -> None:
    h, sim = settled
    events, journal, journal_csv = tmp_path / "events.jsonl", tmp_path / "journal.jsonl", tmp_path / "journal.csv"
    done = await socai(h.settings, "events", "export", "--out", str(events))
    assert done.returncode == 0, done.stderr
    done = await socai(h.settings, "ledger", "export", "--out", str(journal))
    assert done.returncode == 0, done.stderr
    done = await socai(h.settings, "ledger", "export", "--format", "csv", "--out", str(journal_csv))
    assert done.returncode == 0, done.stderr

    # The journal export is the ledger's journal: every hand's transaction under its key,
    # in journal order, entries with their balances after.
    txs = list(read_journal(journal))
    assert [t.journal_seq for t in txs] == list(range(1, len(txs) + 1))
    assert done.stderr.strip().endswith(f"exported {len(txs)} transactions")
    by_key = {t.idempotency_key: t for t in txs}
    for hand in sim.hands:
        tx = by_key.get(f"settle:{hand.hand_id}")
        want = hand.settlement.entries()
        assert (tx is None) == (not want), hand.hand_id
        if tx is not None:
            assert {e.account_id: e.amount_gold for e in tx.entries} == want
            posted = await h.transaction(f"settle:{hand.hand_id}")
            assert [(e.account_id, e.balance_after_gold) for e in tx.entries] == [
                (e.account_id, e.balance_after_gold) for e in posted.entries
            ]
    assert [(t.transaction_id, list(t.entries)) for t in read_journal(journal_csv)] == [
        (t.transaction_id, list(t.entries)) for t in txs
    ]
    assert journal_csv.read_text().splitlines()[0] == ",".join(CSV_COLUMNS)
    first = json.loads(journal.read_text().splitlines()[0])
    assert set(first) >= {"transaction_id", "idempotency_key", "entries", "journal_seq", "created_at"}
    assert "balance_after_gold" in first["entries"][0]

    live = await socai(h.settings, "audit", "--verdict", str(tmp_path / "live.json"))
    assert live.returncode == 0, live.stdout + live.stderr
    assert "mismatches: none; the audit is clean" in live.stdout
    for which in (journal, journal_csv):
        offline = await socai(
            h.settings,
            "audit",
            "--events",
            str(events),
            "--journal",
            str(which),
            "--verdict",
            str(tmp_path / "offline.json"),
        )
        assert offline.returncode == 0, offline.stdout + offline.stderr
        assert f"ledger journal {which}" in offline.stdout
        assert (tmp_path / "offline.json").read_bytes() == (tmp_path / "live.json").read_bytes()
    verdict = json.loads((tmp_path / "live.json").read_text())
    assert verdict["transactions_checked"] == len(sim.hands)
    assert verdict["escrows_checked"] == sum(len(t.seats) for t in sim.tables)

    # Tamper with each file once; the offline audit names the hand and the reason.
    rows = [json.loads(x) for x in events.read_text().splitlines()]
    wagered = next(
        hd
        for hd in sim.hands
        if hd.game == "taixiu"
        and hd.settlement.entries()
        and any("wager_placed" in r for r in rows if r.get("hand_id") == hd.hand_id)
    )
    wager = next(r for r in rows if r.get("hand_id") == wagered.hand_id and "wager_placed" in r)
    wager["wager_placed"]["amount_gold"] = str(int(wager["wager_placed"]["amount_gold"]) + 10)
    cut = next(hd for hd in sim.hands if hd.game == "holdem" and len(hd.events) > 4)
    removed = next(r for r in rows if r.get("hand_id") == cut.hand_id and int(r["seq"]) == 3)
    rows.remove(removed)
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join(json.dumps(r) + "\n" for r in rows))

    lines = journal.read_text().splitlines()
    edited_hand = next(hd for hd in sim.hands if hd.game == "tienlen" and hd.settlement.entries())
    at = next(i for i, x in enumerate(lines) if json.loads(x)["idempotency_key"] == f"settle:{edited_hand.hand_id}")
    tx_json = json.loads(lines[at])
    tx_json["entries"][0]["amount_gold"] = str(int(tx_json["entries"][0]["amount_gold"]) + 1)
    lines[at] = json.dumps(tx_json)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")

    site = tmp_path / "site"
    caught = await socai(h.settings, "audit", "--events", str(forged), "--journal", str(edited), "--html", str(site))
    assert caught.returncode == 1, caught.stdout
    found = findings(caught.stdout)
    reasons = {(hand, reason) for hand, reason, _ in found}
    assert (wagered.hand_id, "LEDGER_MISMATCH") in reasons
    assert (cut.hand_id, "SEQ_GAP") in reasons
    assert (edited_hand.hand_id, "LEDGER_MISMATCH") in reasons
    assert (edited_hand.hand_id, "JOURNAL_MISMATCH") in reasons
    gap = next(d for hand, reason, d in found if hand == cut.hand_id and reason == "SEQ_GAP")
    assert gap.startswith(f"{cut.hand_id}/3 is missing")
    broken = [d for hand, reason, d in found if hand == edited_hand.hand_id and reason == "JOURNAL_MISMATCH"]
    assert any("entries sum to +1" in d for d in broken), broken
    # Nothing else is blamed on a hand that was not touched.
    touched = {wagered.hand_id, cut.hand_id, edited_hand.hand_id, "-"}
    assert {hand for hand, _, _ in found} <= touched, found

    # The site's overview lists the same findings first, each with its hand.
    overview = (site / "index.html").read_text()
    assert 'id="verdict" class="bad" data-ok="false"' in overview
    listed = set(re.findall(r'<tr class="bad" data-hand="([^"]*)" data-reason="([A-Z_]+)"', overview))
    assert {(hand, reason) for hand, reason, _ in found if hand != "-"} <= listed
    assert (cut.hand_id, "SEQ_GAP") in listed and (edited_hand.hand_id, "JOURNAL_MISMATCH") in listed
    assert overview.index('id="mismatches"') < overview.index('id="games"')


async def test_audit_hand_prints_the_same_hand_live_and_from_the_exports(
    settled: tuple[Harness, Simulation], tmp_path: Path
) -> None:
    h, sim = settled
    events, journal = tmp_path / "events.jsonl", tmp_path / "journal.csv"
    assert (await socai(h.settings, "events", "export", "--out", str(events))).returncode == 0
    assert (await socai(h.settings, "ledger", "export", "--format", "csv", "--out", str(journal))).returncode == 0
    hand = next(
        hd for hd in sim.hands if hd.game == "tienlen" and any(t.reason != "fee" for t in hd.settlement.transfers)
    )
    live = await socai(h.settings, "audit", "hand", hand.hand_id)
    offline = await socai(h.settings, "audit", "hand", hand.hand_id, "--events", str(events), "--journal", str(journal))
    assert live.returncode == 0, live.stdout + live.stderr
    assert offline.stdout == live.stdout
    text = live.stdout
    posted = await h.transaction(f"settle:{hand.hand_id}")
    assert f"settle:{hand.hand_id}  transaction {posted.transaction_id}" in text
    for entry in posted.entries:
        assert re.search(
            rf"{re.escape(entry.account_id)}\s+{re.escape(f'{entry.amount_gold:+,}')}\s+balance after\s+"
            rf"{entry.balance_after_gold:,}\s",
            text,
        ), entry.account_id
    module_reasons = {t.reason for t in hand.settlement.transfers}
    for reason in module_reasons:
        assert re.search(rf"\s{re.escape(reason)}( penalty)?  \(RULES\.md [^?]", text), reason
    assert "OK         sha256(seed) = " in text and "the commitment holds" in text
    assert "(" in next(x for x in text.splitlines() if " dealt " in x)  # face-down cards are marked
    assert "findings: none" in text

    missing = await socai(h.settings, "audit", "hand", "t9999-h1", "--events", str(events), "--journal", str(journal))
    assert missing.returncode == 2 and "HAND_NOT_FOUND" in missing.stderr


async def test_a_stored_export_and_a_sealed_period_of_the_journal_prove_themselves_offline(
    settled: tuple[Harness, Simulation], tmp_path: Path
) -> None:
    """The whole chain an outside auditor follows: the deployment's keys file, a stored
    events export, the journal of a period with the ledger's page seals, an offline audit
    that checks every seal and a signed verdict that holds only for those very files."""
    h, _ = settled
    keys, events = tmp_path / "keys.json", tmp_path / "events.stored.jsonl.gz"
    whole, period = tmp_path / "journal.jsonl", tmp_path / "period.jsonl"
    assert (await socai(h.settings, "audit", "keys", "--out", str(keys))).returncode == 0
    done = await socai(h.settings, "events", "export", "--format", "stored", "--out", str(tmp_path / "e.jsonl"))
    assert done.returncode == 0, done.stderr
    events.write_bytes(gzip.compress((tmp_path / "e.jsonl").read_bytes()))
    assert (await socai(h.settings, "ledger", "export", "--out", str(whole))).returncode == 0
    txs = list(read_journal(whole))
    middle = txs[len(txs) // 2].created_at.ToJsonString()
    done = await socai(h.settings, "ledger", "export", "--since", middle, "--out", str(period))
    assert done.returncode == 0 and "page seals" in done.stderr, done.stderr
    part = list(read_journal(period))
    assert part and part[0].journal_seq > 1 and part == [t for t in txs if t.journal_seq >= part[0].journal_seq]

    key = tmp_path / "auditor.key"
    made = await socai(h.settings, "audit", "keygen", "--out", str(key))
    public = made.stdout.split()[-1]
    verdict = tmp_path / "verdict.json"
    args = ["--events", str(events), "--journal", str(period), "--keys", str(keys)]
    audited = await socai(h.settings, "audit", *args, "--sign", str(key), "--verdict", str(verdict))
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert "hand seals: checked" in audited.stdout and "journal page seals: checked" in audited.stdout
    signed = json.loads(verdict.read_text())
    assert signed["proof"]["journal_seals"] == "checked" and signed["proof"]["hand_seals"] == "checked"
    check = [str(verdict), "--public-key", public, "--events", str(events), "--journal", str(period)]
    held = await socai(h.settings, "audit", "verify-verdict", *check)
    assert held.returncode == 0, held.stdout + held.stderr
    # The journal with one transaction's metadata changed: the ledger's seal names it, and the
    # verdict no longer belongs to the file.
    lines = period.read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if '"idempotency_key":"settle:' in x)
    tx = json.loads(lines[at])
    tx["metadata"]["reasons"] = "none"
    lines[at] = json.dumps(tx, separators=(",", ":"))
    period.write_text("\n".join(lines) + "\n")
    caught = await socai(h.settings, "audit", *args)
    assert caught.returncode == 1
    assert (tx["reference"], "JOURNAL_SEAL_INVALID") in {(hand, reason) for hand, reason, _ in findings(caught.stdout)}
    refused = await socai(h.settings, "audit", "verify-verdict", *check)
    assert refused.returncode == 1 and "not the file that was audited" in refused.stdout
