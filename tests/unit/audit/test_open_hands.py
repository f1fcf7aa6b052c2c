"""``socai audit --allow-open``: a table's last hand may still be in play, and it is checked as
far as it goes (issue 17, defect 7: it used to be skipped, so a bad event inside it passed).

Each test cuts a hand of the real export (``fixtures/hands.jsonl``) where play might stand
when the audit runs, edits it the way a forger would, and asserts what the audit says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from socai.audit.auditor import Audit, verify
from socai.audit.export import read_jsonl

FIXTURE = Path(__file__).parent / "fixtures" / "hands.jsonl"
Line = dict[str, Any]


def export() -> list[Line]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def open_at(hand_id: str, last_seq: int) -> list[Line]:
    """The export with ``hand_id`` (a table's last hand) in play: its events after
    ``last_seq`` not written yet, HandEnded among them."""
    return [x for x in export() if x["hand_id"] != hand_id or int(x["seq"]) <= last_seq]


def find(lines: list[Line], event_id: str) -> Line:
    return next(x for x in lines if x["event_id"] == event_id)


def audited(tmp_path: Path, lines: list[Line]) -> Audit:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return verify(list(read_jsonl(path)), source="test", allow_open=True)


def findings(audit: Audit) -> list[tuple[str, str]]:
    return [(m.hand_id, m.reason) for m in audit.report.mismatches]


def test_an_open_hand_is_replayed_as_far_as_it_goes_and_listed_open(tmp_path: Path) -> None:
    lines = open_at("t0002-h2", 8)  # Xì Tố after the third street's cards
    audit = audited(tmp_path, lines)
    assert audit.report.ok, audit.report.render()
    assert audit.report.open_hands == ["t0002-h2"]
    (hand,) = audit.open_results
    assert hand.hand_id == "t0002-h2" and len(hand.events) == 8
    dealt = sum(len(find(lines, f"t0002-h2/{seq}")["cards_dealt"]["cards"]) for seq in (2, 5, 8))
    assert hand.cards_seen == dealt  # each of the deck, once
    assert "open hands (not ended yet; every event so far verified): t0002-h2" in audit.report.render()
    assert audit.report.hands_verified == 5  # the five ended hands are settled as before


def test_an_illegal_bet_in_an_open_hand_is_a_finding_and_the_hand_is_not_open(tmp_path: Path) -> None:
    lines = open_at("t0002-h2", 13)
    find(lines, "t0002-h2/13")["bet_action"]["amount_gold"] = "40"  # a call of 50 turned into 40
    audit = audited(tmp_path, lines)
    assert findings(audit) == [("t0002-h2", "ILLEGAL_EVENT")]
    assert audit.report.mismatches[0].detail.startswith("t0002-h2/13: BetAction seat 3 call 40")
    assert audit.report.open_hands == []


def test_a_card_dealt_twice_in_an_open_hand_is_a_deal_mismatch(tmp_path: Path) -> None:
    lines = open_at("t0002-h2", 13)
    find(lines, "t0002-h2/11")["cards_dealt"]["cards"][1]["card"] = "9c"  # seat 3's first card again
    audit = audited(tmp_path, lines)
    assert findings(audit) == [("t0002-h2", "DEAL_MISMATCH")]
    assert audit.report.mismatches[0].detail == "t0002-h2/11: deals 9c to seat 2, already dealt at t0002-h2/2"
    assert audit.report.open_hands == []


def test_a_card_the_games_deck_does_not_hold_is_a_deal_mismatch(tmp_path: Path) -> None:
    lines = open_at("t0002-h2", 13)
    find(lines, "t0002-h2/11")["cards_dealt"]["cards"][1]["card"] = "2d"  # Xì Tố plays 8 to ace
    audit = audited(tmp_path, lines)
    assert findings(audit) == [("t0002-h2", "DEAL_MISMATCH")]
    assert "a card the xito deck does not hold" in audit.report.mismatches[0].detail


def test_a_commitment_no_seed_can_match_is_a_bad_seed_before_the_seed_is_revealed(tmp_path: Path) -> None:
    lines = open_at("t0002-h2", 5)
    find(lines, "t0002-h2/1")["hand_started"]["deck_commitment"] = "not a hash"
    audit = audited(tmp_path, lines)
    assert findings(audit) == [("t0002-h2", "BAD_SEED")]
    assert audit.report.open_hands == []


def test_an_open_hand_of_dice_checks_its_roll_as_far_as_it_can(tmp_path: Path) -> None:
    audit = audited(tmp_path, open_at("t0003-h2", 21))  # Tài Xỉu, rolled but not yet ended
    assert audit.report.ok, audit.report.render()
    assert audit.report.open_hands == ["t0003-h2"] and audit.open_results[0].dice_seen == 3
    lines = open_at("t0003-h2", 21)
    second_roll = {
        **find(lines, "t0003-h2/21"),
        "event_id": "t0003-h2/22",
        "seq": "22",
        "dice_rolled": {"dice": [6, 6, 6]},
    }
    lines.append(second_roll)
    audit = audited(tmp_path, lines)
    assert findings(audit) == [("t0003-h2", "DICE_MISMATCH")]
    assert audit.report.mismatches[0].detail == "t0003-h2/22: rolled 6-6-6, but the hand's seed rolled 2-5-4 before"


def test_an_open_hand_dealt_by_the_wrong_seat_is_not_listed_open(tmp_path: Path) -> None:
    lines = open_at("t0002-h2", 4)
    find(lines, "t0002-h2/1")["hand_started"]["dealer_seat"] = 2  # the rules choose seat 3 after t0002-h1
    audit = audited(tmp_path, lines)
    assert ("t0002-h2", "DEALER_MISMATCH") in findings(audit) or ("t0002-h2", "ILLEGAL_EVENT") in findings(audit)
    assert audit.report.open_hands == []
