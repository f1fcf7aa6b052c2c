"""A table's own facts, chained and sealed as the table service writes them (issue 33), in a
stored export: the offline audit proves them the table's and whole — a removed buy-in, a
changed fact, a stranger's fact or another key is caught at the fact — and reads facts
written before facts were sealed as before."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from socai.audit.auditor import Seals, verify
from socai.audit.export import RawEvent, _decode, read_jsonl, write_stored_jsonl
from socai.events import codec, seal
from socai.events.model import TABLE_BODY_TYPES, subject
from tests.support.synthetic import DEV_SIGNER, sealed, simulate

KEYS = {DEV_SIGNER.key_id: DEV_SIGNER.public_key}


def stored(*, facts_sealed: bool = True) -> list[RawEvent]:
    sim = simulate(6, ("holdem",), seed=3, hands_per_table=3)
    out: list[RawEvent] = []
    chains: dict[str, bytes] = {}
    for event in sim.events():
        subj = subject(event.table_id, event.hand_id, "socai.events")
        if isinstance(event.body, TABLE_BODY_TYPES):
            payload = codec.encode(event)
            prev = chains.get(subj) or seal.genesis(subj)
            chains[subj] = seal.link(prev, subj, payload)
            headers = {seal.PREV_HEADER: prev.hex()}
            if facts_sealed:
                headers |= DEV_SIGNER.facts_headers(subj, chains[subj])
        else:
            payload, headers = sealed(subj, event, chains)
        out.append(_decode(len(out) + 1, subj, payload, tuple(headers.items())))
    return out


def audit_of(raws: list[RawEvent], tmp_path: Path, *, keys: dict[str, bytes] = KEYS, complete: bool = True):  # type: ignore[no-untyped-def]
    path = tmp_path / "events.jsonl"
    with path.open("w") as out:
        write_stored_jsonl(raws, out)
    return verify(read_jsonl(path), source="t", seals=Seals(seal.SealVerifier(keys)), complete=complete).report


def facts_lines(raws: list[RawEvent]) -> list[int]:
    return [i for i, r in enumerate(raws) if r.is_table_fact]


def test_sealed_facts_audit_clean_and_are_counted(tmp_path: Path) -> None:
    raws = stored()
    report = audit_of(raws, tmp_path)
    assert report.ok, report.render()
    assert report.proof.facts_sealed == len(facts_lines(raws)) and report.proof.facts_unsealed == 0
    assert f"table facts: {len(facts_lines(raws))} sealed, 0 unsealed" in report.render()


def test_facts_written_before_facts_were_sealed_are_read_as_before(tmp_path: Path) -> None:
    raws = stored(facts_sealed=False)
    report = audit_of(raws, tmp_path)
    assert report.ok, report.render()
    assert report.proof.facts_unsealed == len(facts_lines(raws)) and report.proof.facts_sealed == 0


def test_a_removed_buy_in_breaks_the_facts_chain_at_it(tmp_path: Path) -> None:
    raws = stored()
    table = raws[facts_lines(raws)[0]].table_id
    seated = [
        i
        for i in facts_lines(raws)
        if raws[i].table_id == table and raws[i].message.WhichOneof("body") == "player_seated"
    ]  # type: ignore[union-attr]
    victim = raws[seated[0]]
    report = audit_of([r for r in raws if r is not victim], tmp_path)
    reasons = {(m.reason, m.table_id) for m in report.mismatches}
    assert ("CHAIN_BROKEN", table) in reasons and ("FACT_MISSING", table) in reasons, report.render()
    broken = next(m for m in report.mismatches if m.reason == "CHAIN_BROKEN")
    assert f"{victim.message.event_id} missing" in broken.detail, broken.detail  # type: ignore[union-attr]


def test_a_changed_fact_is_named(tmp_path: Path) -> None:
    raws = stored()
    path = tmp_path / "events.jsonl"
    with path.open("w") as out:
        write_stored_jsonl(raws, out)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    victim = next(
        i
        for i, line in enumerate(lines)
        if line["subject"].endswith("-t") and i > 0 and lines[i + 1]["subject"] == line["subject"]
    )
    data = bytearray(base64.b64decode(lines[victim]["data"]))
    data[-1] ^= 1
    lines[victim]["data"] = base64.b64encode(bytes(data)).decode()
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = verify(read_jsonl(path), source="t", seals=Seals(seal.SealVerifier(KEYS))).report
    broken = [m for m in report.mismatches if m.reason == "CHAIN_BROKEN"]
    assert broken and "was changed after it was written" in broken[0].detail, report.render()


def test_a_strangers_fact_and_another_key_are_caught(tmp_path: Path) -> None:
    raws = stored()
    facts = facts_lines(raws)
    last = raws[facts[-1]]
    # A stranger appends a buy-in on the facts chain (the headers are public) with no valid seal.
    forged_payload = raws[facts[1]].payload
    chain_of_last = seal.chain_value(last.subject, last.payload, dict(last.chain_headers))
    assert chain_of_last is not None
    forged = _decode(10_000, last.subject, forged_payload, ((seal.PREV_HEADER, chain_of_last.hex()),))
    tables_facts = [i for i in facts if raws[i].subject == last.subject]
    report = audit_of([*raws[: tables_facts[-1] + 1], forged, *raws[tables_facts[-1] + 1 :]], tmp_path)
    assert [m.reason for m in report.mismatches] == ["NOT_THE_TABLES"], report.render()
    other = seal.HandSigner(seal.derive_private_key("someone-else"))
    report = audit_of(raws, tmp_path, keys={other.key_id: other.public_key})
    invalid = [m for m in report.mismatches if m.reason == "FACTS_SEAL_INVALID"]
    assert (
        invalid
        and f"sealed with key id {DEV_SIGNER.key_id}, not one of the keys given ({other.key_id})" in invalid[0].detail
    )


def test_the_facts_of_a_period_need_not_reach_back_to_the_tables_opening(tmp_path: Path) -> None:
    raws = stored()
    first_fact = facts_lines(raws)[0]
    cut = [r for i, r in enumerate(raws) if i != first_fact]  # the TableOpened is before the period
    assert audit_of(cut, tmp_path, complete=False).ok
    assert not audit_of(cut, tmp_path, complete=True).ok
