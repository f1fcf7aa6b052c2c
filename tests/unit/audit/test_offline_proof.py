"""Exports that prove themselves (issue 33): a ``stored`` events export and a sealed journal
export are checked offline with the keys the auditor names; tampering with a header, a byte,
a message's place or a seal is caught at the message it touched; the signed verdict fails
after any change to its inputs or to itself."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from socai.audit import proof
from socai.audit.auditor import Seals, verify
from socai.audit.export import EventFilter, ExportHeader, read_jsonl, write_stored_jsonl
from socai.audit.journal import JournalSigner, read_journal_file, write_jsonl
from socai.events import seal
from tests.support.synthetic import simulate
from tests.unit.audit.ledger_journal import journal_of
from tests.unit.audit.test_stored_export import DEV_PUBLIC, audit, stored_raws, write_stored

SCHEMAS = Path(proof.__file__).parent / "schemas"
DEV_KEYS = seal.parse_public_keys([DEV_PUBLIC])


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def rewrite(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def findings(path: Path) -> list[tuple[str, str, str]]:
    report = verify(read_jsonl(path), source="test", seals=Seals(seal.SealVerifier(DEV_KEYS))).report
    return [(m.hand_id, m.reason, m.detail) for m in report.mismatches]


def event_id(line: dict[str, Any]) -> str:
    from socai.gen.events.v1 import events_pb2

    return str(events_pb2.Event.FromString(base64.b64decode(line["data"])).event_id)


def middle_of_a_hand(lines: list[dict[str, Any]]) -> int:
    """A line in the middle of a hand: neither its first event nor its HandEnded."""
    for i in range(1, len(lines) - 1):
        subject = lines[i]["subject"]
        if (
            not subject.endswith("-t")
            and lines[i - 1]["subject"] == subject == lines[i + 1]["subject"]
            and "Socai-Hand-Seal" not in lines[i + 1]["headers"]
        ):
            return i
    raise AssertionError("no hand of three events or more")


# --- the events export --------------------------------------------------------------------------


def test_a_stored_export_has_a_versioned_header_and_every_line_follows_the_schema(tmp_path: Path) -> None:
    raws = stored_raws()
    header = ExportHeader.of(EventFilter(), stream="SOCAI_EVENTS", prefix="socai.events", exported_at=datetime.now(UTC))
    path = tmp_path / "events.jsonl"
    with path.open("w") as out:
        write_stored_jsonl(raws, out, header)
    validator = jsonschema.Draft202012Validator(schema("events-stored.v1.schema.json"))
    lines = lines_of(path)
    assert lines[0]["format"] == "socai.events.stored" and lines[0]["version"] == 1
    for line in lines:
        validator.validate(line)
    assert [r.payload for r in read_jsonl(path)] == [r.payload for r in raws]


def test_a_header_of_a_later_version_is_refused_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_stored(tmp_path, stored_raws())
    lines = lines_of(path)
    rewrite(path, [{"format": "socai.events.stored", "version": 2}, *lines])
    status, _, err = audit(["--events", str(path), "--seal-public-key", DEV_PUBLIC], capsys)
    assert status == 2
    assert "BAD_FILE" in err and "version 2" in err


def test_a_changed_byte_is_reported_at_the_event_that_was_changed(tmp_path: Path) -> None:
    path = write_stored(tmp_path, stored_raws())
    lines = lines_of(path)
    victim = middle_of_a_hand(lines)
    data = bytearray(base64.b64decode(lines[victim]["data"]))
    data[-1] ^= 0x01
    changed = event_id(lines[victim])  # before the change: the byte flipped is in the body
    lines[victim]["data"] = base64.b64encode(bytes(data)).decode()
    rewrite(path, lines)
    (_hand, reason, detail), *_ = findings(path)
    assert reason == "CHAIN_BROKEN"
    assert f"{changed} (stream seq {lines[victim]['stream_seq']}) was changed" in detail, detail


def test_a_changed_chain_header_is_reported_at_its_message(tmp_path: Path) -> None:
    path = write_stored(tmp_path, stored_raws())
    lines = lines_of(path)
    victim = middle_of_a_hand(lines)
    prev = lines[victim]["headers"]["Socai-Prev"]
    lines[victim]["headers"]["Socai-Prev"] = prev[:-1] + ("0" if prev[-1] != "0" else "1")
    rewrite(path, lines)
    (_, reason, detail), *_ = findings(path)
    assert reason == "CHAIN_BROKEN"
    assert f"{event_id(lines[victim])} (stream seq {lines[victim]['stream_seq']}) was changed" in detail, detail
    assert "Socai-Prev header" in detail


def test_a_removed_message_is_named_as_missing(tmp_path: Path) -> None:
    path = write_stored(tmp_path, stored_raws())
    lines = lines_of(path)
    victim = middle_of_a_hand(lines)
    gone = event_id(lines[victim])
    del lines[victim]
    rewrite(path, lines)
    (_, reason, detail), *_ = findings(path)
    assert reason == "CHAIN_BROKEN"
    assert f"{gone} missing" in detail, detail


def test_two_messages_listed_out_of_stream_order_are_caught(tmp_path: Path) -> None:
    path = write_stored(tmp_path, stored_raws())
    lines = lines_of(path)
    victim = middle_of_a_hand(lines)
    lines[victim], lines[victim + 1] = lines[victim + 1], lines[victim]
    rewrite(path, lines)
    reasons = {reason for _, reason, _ in findings(path)}
    assert reasons == {"OUT_OF_ORDER"}
    # Swapping the messages but not their stream sequences: the chain runs backwards in the stream.
    lines[victim]["stream_seq"], lines[victim + 1]["stream_seq"] = (
        lines[victim + 1]["stream_seq"],
        lines[victim]["stream_seq"],
    )
    rewrite(path, lines)
    ((_, reason, detail),) = findings(path)
    assert reason == "OUT_OF_ORDER" and "on the hand's chain" in detail


def test_a_seal_moved_to_another_hand_is_refused_naming_the_key_id(tmp_path: Path) -> None:
    path = write_stored(tmp_path, stored_raws())
    lines = lines_of(path)
    ends = [i for i, line in enumerate(lines) if "Socai-Hand-Seal" in line["headers"]]
    a, b = ends[0], ends[1]
    lines[a]["headers"]["Socai-Hand-Seal"], lines[b]["headers"]["Socai-Hand-Seal"] = (
        lines[b]["headers"]["Socai-Hand-Seal"],
        lines[a]["headers"]["Socai-Hand-Seal"],
    )
    rewrite(path, lines)
    found = findings(path)
    assert {reason for _, reason, _ in found} == {"HAND_SEAL_INVALID"} and len(found) == 2
    key_id = seal.key_id(bytes.fromhex(DEV_PUBLIC))
    assert all(f"the seal of key id {key_id} does not verify" in detail for _, _, detail in found), found


def test_findings_name_the_key_id_found_and_the_ones_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_stored(tmp_path, stored_raws())
    other = seal.public_key_of(bytes(range(32)))
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(proof.keys_document([other], [])))
    status, out, _ = audit(["--events", str(path), "--keys", str(keys)], capsys)
    assert status == 1
    table_id = seal.key_id(bytes.fromhex(DEV_PUBLIC))
    assert f"sealed with key id {table_id}, not one of the keys given ({seal.key_id(other)})" in out


def test_keys_name_the_table_and_the_ledger_and_the_report_says_what_was_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_stored(tmp_path, stored_raws())
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(proof.keys_document([bytes.fromhex(DEV_PUBLIC)], [])))
    jsonschema.validate(json.loads(keys.read_text()), schema("keys.v1.schema.json"))
    status, out, _ = audit(["--events", str(path), "--keys", str(keys)], capsys)
    assert status == 0, out
    key_id = seal.key_id(bytes.fromhex(DEV_PUBLIC))
    assert re.search(rf"hand seals: checked; \d+ hands sealed, by key id {key_id} \(\d+ hands\)", out), out


# --- the journal export --------------------------------------------------------------------------

LEDGER_KEY = bytes(range(1, 33))


def sealed_journal(tmp_path: Path, page_size: int = 4) -> tuple[Path, list[Any]]:
    """A journal export as ``socai ledger export`` writes it from a ledger that signs its pages."""
    txs = journal_of(simulate(8, ("holdem", "tienlen"), seed=5))
    signer = JournalSigner(LEDGER_KEY)
    path = tmp_path / "journal.jsonl"
    with path.open("w") as out:
        for start in range(0, len(txs), page_size):
            page = txs[start : start + page_size]
            more = start + page_size < len(txs)
            page_seal = signer.seal(page, since=None, until=None, first=start == 0, after_seq=start, more=more)
            write_jsonl(page, out, page_seal)
    return path, txs


def ledger_keys() -> dict[str, bytes]:
    public = JournalSigner(LEDGER_KEY).public_key
    return {seal.key_id(public): public}


def page_problems(path: Path) -> list[str]:
    from socai.audit.journal import check_pages
    from socai.audit.ledger_source import hand_of_key

    checked = check_pages(read_journal_file(path), ledger_keys(), hand_of_key)
    return [detail for detail, _ in checked.problems]


def test_a_sealed_journal_follows_the_schema_and_verifies_offline(tmp_path: Path) -> None:
    path, txs = sealed_journal(tmp_path)
    validator = jsonschema.Draft202012Validator(schema("journal.v1.schema.json"))
    for line in lines_of(path):
        validator.validate(line)
    assert page_problems(path) == []
    assert list(read_journal_file(path).transactions) == txs


def test_a_changed_transaction_in_the_journal_is_named(tmp_path: Path) -> None:
    path, _ = sealed_journal(tmp_path)
    lines = lines_of(path)
    at = next(i for i, line in enumerate(lines) if line.get("idempotency_key", "").startswith("settle:"))
    lines[at]["metadata"] = {"note": "edited"}  # balances untouched: only the seal can tell
    rewrite(path, lines)
    (problem,) = page_problems(path)
    assert problem.startswith(f"{lines[at]['idempotency_key']} (journal_seq {lines[at]['journal_seq']})")
    assert "not the transaction the ledger signed" in problem


def test_a_transaction_left_out_or_a_page_cut_off_is_caught(tmp_path: Path) -> None:
    path, _ = sealed_journal(tmp_path)
    lines = lines_of(path)
    at = next(i for i, line in enumerate(lines) if line.get("journal_seq") == "6")
    rewrite(path, lines[:at] + lines[at + 1 :])
    assert page_problems(path) == [
        "journal_seq 6: the ledger signed it on the page after journal_seq 4; the file leaves it out"
    ]
    seals = [i for i, line in enumerate(lines) if "journal_page_seal" in line]
    rewrite(path, lines[: seals[-2] + 1])  # the last page left out
    assert any("says more follows" in p for p in page_problems(path))
    rewrite(path, lines[seals[0] + 1 :])  # the first page left out
    assert any("pages before it are missing" in p for p in page_problems(path))


def test_a_journal_signed_by_another_key_is_refused(tmp_path: Path) -> None:
    _path, txs = sealed_journal(tmp_path)
    forged = tmp_path / "forged.jsonl"
    with forged.open("w") as out:
        write_jsonl(
            txs, out, JournalSigner(bytes(32)).seal(txs, since=None, until=None, first=True, after_seq=0, more=False)
        )
    (problem,) = page_problems(forged)
    assert "does not verify with the ledger's keys" in problem


def test_the_audit_checks_journal_seals_with_the_keys_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from socai.audit.export import write_jsonl as write_events

    sim = simulate(8, ("holdem", "tienlen"), seed=5)
    events = tmp_path / "events.jsonl"
    with events.open("w") as out:
        write_events(sim.events(), out)
    path, _ = sealed_journal(tmp_path)
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(proof.keys_document([], ledger_keys().values())))
    status, out, err = audit(["--events", str(events), "--journal", str(path), "--keys", str(keys)], capsys)
    assert status == 0, out
    assert "journal page seals: checked" in out
    # Without the ledger's key the seals are not checked, and the audit says so.
    status, out, err = audit(["--events", str(events), "--journal", str(path)], capsys)
    assert status == 0, out
    assert "page seals were not checked" in err and "journal page seals: not checked" in out
    lines = lines_of(path)
    at = next(i for i, line in enumerate(lines) if line.get("idempotency_key", "").startswith("settle:"))
    lines[at]["reference"] = "another hand"
    rewrite(path, lines)
    status, out, _ = audit(["--events", str(events), "--journal", str(path), "--keys", str(keys)], capsys)
    assert status == 1 and "JOURNAL_SEAL_INVALID" in out


# --- the signed verdict ----------------------------------------------------------------------------


def signed_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path, Path, str]:
    events = write_stored(tmp_path, stored_raws())
    key = tmp_path / "auditor.key"
    status, out, _ = audit(["keygen", "--out", str(key)], capsys)
    assert status == 0
    public = out.split()[-1]
    verdict = tmp_path / "verdict.json"
    status, out, _ = audit(
        ["--events", str(events), "--seal-public-key", DEV_PUBLIC, "--sign", str(key), "--verdict", str(verdict)],
        capsys,
    )
    assert status == 0, out
    return events, key, verdict, public


def test_a_signed_verdict_names_its_inputs_and_what_was_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events, key, verdict, public = signed_run(tmp_path, capsys)
    assert (key.stat().st_mode & 0o777) == 0o600
    doc = json.loads(verdict.read_text())
    jsonschema.validate(doc, schema("verdict.v2.schema.json"))
    assert doc["inputs"] == [proof.file_input("events", events).as_json()]
    assert doc["proof"]["hand_seals"] == "checked"
    assert doc["proof"]["table_key_ids"] == [seal.key_id(bytes.fromhex(DEV_PUBLIC))]
    assert doc["signed_by"]["public_key"] == public
    status, out, _ = audit(["verify-verdict", str(verdict), "--public-key", public, "--events", str(events)], capsys)
    assert status == 0, out
    assert "the verdict holds" in out


def test_the_signature_fails_after_any_change_to_the_verdict_or_its_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events, _, verdict, public = signed_run(tmp_path, capsys)
    original = events.read_bytes()
    events.write_bytes(original[:-2] + bytes([original[-2] ^ 1]) + original[-1:])
    status, out, _ = audit(["verify-verdict", str(verdict), "--public-key", public, "--events", str(events)], capsys)
    assert status == 1 and "not the file that was audited" in out
    events.write_bytes(original)
    doc = json.loads(verdict.read_text())
    doc["verdict"]["events"] += 1
    verdict.write_text(json.dumps(doc))
    status, out, _ = audit(["verify-verdict", str(verdict), "--public-key", public], capsys)
    assert status == 1 and "the signature does not verify" in out
    # A verdict re-signed by someone else is refused by a reader who trusts the auditor's key.
    forger = proof.new_private_key()
    report = verify(read_jsonl(events), source="x", seals=Seals(seal.SealVerifier(DEV_KEYS))).report
    forged = proof.signed_verdict(
        report, [proof.file_input("events", events)], forger, audited_at="2026-01-01T00:00:00Z"
    )
    verdict.write_text(proof.verdict_json(forged))
    status, out, _ = audit(["verify-verdict", str(verdict), "--public-key", public], capsys)
    assert status == 1 and "not one of the keys given" in out


def test_sign_without_a_verdict_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = write_stored(tmp_path, stored_raws())
    status, _, err = audit(["--events", str(events), "--seal-public-key", DEV_PUBLIC, "--sign", "k"], capsys)
    assert status == 2 and "BAD_FLAGS" in err


def test_audit_keys_writes_the_deployments_public_keys_as_a_keys_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from socai.infra.config import Settings

    out = tmp_path / "keys.json"
    status, _, _ = audit(["keys", "--out", str(out)], capsys)
    assert status == 0
    jsonschema.validate(json.loads(out.read_text()), schema("keys.v1.schema.json"))
    keys = proof.read_keys(str(out))
    assert dict(keys.table) == Settings().hand_seal_public_keys()
    assert dict(keys.ledger) == Settings().journal_seal_public_keys()
