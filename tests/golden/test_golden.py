"""The golden corpus (tests/golden/README.md): every recorded hand settles, forever, exactly as
it did when it was recorded, through settlement's replay and through the offline audit.

A failure here means a change moved a recorded hand's result — by one gold, one reason, one
detail or one ledger entry — or the audit's verdict on a recorded log. That is never allowed:
a rules change bumps the game's RULES_VERSION and keeps the old behaviour for the hands
recorded under the old one.
"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.golden import corpus

BATCHES = corpus.batches()


def test_the_corpus_holds_every_game() -> None:
    games = {game for batch in BATCHES for game in batch.manifest["games"]}
    from socai.rules import registry

    assert games >= set(registry.available())


@pytest.mark.parametrize("batch", BATCHES, ids=[b.name for b in BATCHES])
def test_every_recorded_hand_settles_as_recorded(batch: corpus.Batch) -> None:
    outcome = corpus.check_batch(batch)
    shown = {hand: diffs[:3] for hand, diffs in list(outcome.differences.items())[:5]}
    assert not outcome.differences, f"{len(outcome.differences)} of {outcome.hands} hands differ: {shown}"
    assert not outcome.verdict_differs, f"the offline audit's verdict differs: {outcome.verdict_differs}"
    assert outcome.hands == batch.manifest["hands"]


def test_every_reason_of_every_game_is_paid_by_some_recorded_hand(capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = []
    hands: Counter[str] = Counter()
    for batch in BATCHES:
        outcome = corpus.Outcome(batch.name)
        for line in batch.expected():
            hands[line["game"]] += 1
            for row in line["transfers"]:
                outcome.reasons[line["game"]][row[3]] += 1
        outcomes.append(outcome)
    cov = corpus.coverage(outcomes)
    lines = corpus.coverage_lines(cov, hands)
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    missing = {game: sorted(declared - seen) for game, (seen, declared) in cov.items() if declared - seen}
    assert not missing, f"reasons no recorded hand pays: {missing}"


# --- the check can fail -------------------------------------------------------------------------


def _copy(batch: corpus.Batch, tmp_path: Path) -> corpus.Batch:
    target = tmp_path / batch.name
    shutil.copytree(batch.path, target)
    return corpus.Batch(target)


def _rewrite(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    rows = list(corpus.read_lines(path))
    change(rows)
    corpus.write_lines(path, rows)


def _table_batch() -> corpus.Batch:
    found = next((b for b in BATCHES if b.kind == "table" and b.manifest["games"] != ["taixiu"]), None)
    if found is None:
        pytest.fail("the corpus has no table batch of a card game")
    return found


def test_one_gold_moved_in_a_recorded_result_is_caught(tmp_path: Path) -> None:
    batch = _copy(_table_batch(), tmp_path)

    def change(rows: list[dict]) -> None:  # type: ignore[type-arg]
        row = next(r for r in rows if r["transfers"])
        row["transfers"][0][2] += 1

    _rewrite(batch.path / "expected.jsonl.gz", change)
    outcome = corpus.check_batch(batch)
    assert len(outcome.differences) == 1
    assert "transfers" in next(iter(outcome.differences.values()))[0]


def test_a_changed_byte_in_a_stored_message_is_caught(tmp_path: Path) -> None:
    batch = _copy(_table_batch(), tmp_path)
    with gzip.open(batch.events_path, "rt", encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle]
    target = next(i for i, line in enumerate(lines) if "Socai-Hand-Seal" in line["headers"])
    payload = bytearray(base64.b64decode(lines[target - 1]["data"]))
    payload[-1] ^= 1
    lines[target - 1]["data"] = base64.b64encode(bytes(payload)).decode()
    corpus.write_lines(batch.events_path, lines)
    outcome = corpus.check_batch(batch)
    assert outcome.differences, "a changed message still settled as recorded"
    assert outcome.verdict_differs, "a changed message did not change the audit's verdict"


# --- engine batches: the check can fail too ---------------------------------------------------------


def _engine_batch(tmp_path: Path) -> corpus.Batch:
    found = next((b for b in BATCHES if b.kind == corpus.ENGINE), None)
    if found is None:
        pytest.fail("the corpus has no engine batch (python -m tests.golden script --engine)")
    return _copy(found, tmp_path)


def test_an_engine_batch_has_no_audit_verdict_and_says_why() -> None:
    engines = [b for b in BATCHES if b.kind == corpus.ENGINE]
    assert engines, "the corpus has no engine batch"
    for batch in engines:
        assert not (batch.path / "verdict.json").exists()
        assert not batch.events_path.exists()
        assert "DEAL_MISMATCH" in batch.manifest["audit"]
        assert batch.manifest["chosen_decks"], "an engine batch without a hand dealt from a chosen deck"


def test_one_gold_moved_in_an_engine_batchs_expected_line_is_caught(tmp_path: Path) -> None:
    batch = _engine_batch(tmp_path)

    def change(rows: list[dict]) -> None:  # type: ignore[type-arg]
        row = next(r for r in rows if r["transfers"])
        row["transfers"][0][2] += 1

    _rewrite(batch.path / "expected.jsonl.gz", change)
    outcome = corpus.check_batch(batch)
    assert len(outcome.differences) == 1
    assert "transfers" in next(iter(outcome.differences.values()))[0]


def test_a_changed_move_in_an_engine_batch_is_caught(tmp_path: Path) -> None:
    batch = _engine_batch(tmp_path)
    changed: list[str] = []

    def change(rows: list[dict]) -> None:  # type: ignore[type-arg]
        # The first hand's deal: its first two cards swap seats, so every later move of those
        # seats plays a card the seat does not hold (or the hand scores otherwise).
        row = rows[0]
        dealt = next(e for e in row["events"] if "cards_dealt" in e)["cards_dealt"]["cards"]
        dealt[0]["card"], dealt[1]["card"] = dealt[1]["card"], dealt[0]["card"]
        changed.append(row["hand_id"])

    _rewrite(batch.path / "hands.jsonl.gz", change)
    outcome = corpus.check_batch(batch)
    assert list(outcome.differences) == changed


def test_a_stack_that_does_not_follow_from_the_hand_before_is_caught(tmp_path: Path) -> None:
    batch = _engine_batch(tmp_path)
    changed: list[str] = []

    def change(rows: list[dict]) -> None:  # type: ignore[type-arg]
        row = next(r for r in rows if not r["table_events"])  # a table's second hand
        started = row["events"][0]["hand_started"]
        started["seats"][0]["stack_gold"] = str(int(started["seats"][0]["stack_gold"]) + 1)
        changed.append(row["hand_id"])

    _rewrite(batch.path / "hands.jsonl.gz", change)
    outcome = corpus.check_batch(batch)
    assert changed[0] in outcome.differences
    assert any(corpus.STACK_MISMATCH in d for d in outcome.differences[changed[0]])
