"""``socai audit --file`` on a JSONL export: the report, the mismatches, the exit status."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from socai.audit.auditor import verify
from socai.audit.export import read_jsonl
from socai.infra.logging import configure
from socai_cli.main import main

FIXTURE = Path(__file__).parent / "fixtures" / "hands.jsonl"


def lines() -> list[dict]:
    return [json.loads(x) for x in FIXTURE.read_text().splitlines()]


def write(tmp_path: Path, rows: list[dict], name: str = "export.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def audit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["audit", *args])
    out = capsys.readouterr().out
    configure(fmt="console", level="warning", stream=sys.__stderr__)  # main pointed logs at the capture
    return status, out


def test_a_clean_export_prints_totals_per_game_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = audit(["--file", str(FIXTURE)], capsys)
    assert status == 0, out
    assert "events 101 (table facts 14); hands verified 6; cards checked against the seed 36; dice 6" in out
    rows = {
        line.split()[0]: line.split()[1:4]
        for line in out.splitlines()
        if line.split()[:1] in (["holdem"], ["xito"], ["taixiu"], ["total"])
    }
    assert rows["holdem"][0] == "2" and rows["xito"][0] == "2" and rows["taixiu"][0] == "2"
    assert rows["total"] == ["6", "12,425", "302"]
    assert "ledger: not reconciled (no ledger given)" in out
    assert out.rstrip().endswith("mismatches: none; the audit is clean")


def test_every_tampered_hand_is_listed_with_what_differs_and_the_exit_is_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = lines()
    for r in rows:
        if r["event_id"] == "t0001-h1/2":
            r["cards_dealt"]["cards"][2]["card"] = "Ks"
        if r["event_id"] == "t0003-h2/21":
            r["dice_rolled"]["dice"] = [6, 6, 6]
    rows = [r for r in rows if r["event_id"] != "t0002-h2/6"]
    status, out = audit(["--file", str(write(tmp_path, rows))], capsys)
    assert status == 1
    assert "MISMATCHES: 3" in out
    listed = [line.split(maxsplit=2) for line in out.splitlines() if line.startswith("  ")]
    assert listed == [
        ["t0001-h1", "DEAL_MISMATCH", "t0001-h1/2: dealt Ks to seat 4, the seed deals Qd"],
        ["t0002-h2", "SEQ_GAP", "t0002-h2/6 is missing (t0002-h2/5 is followed by t0002-h2/7)"],
        ["t0003-h2", "DICE_MISMATCH", "t0003-h2/21: rolled 6-6-6, the seed rolls 2-5-4"],
    ]
    # The three good hands are still counted.
    assert "hands verified 3" in out


def test_a_line_that_is_not_json_is_a_bad_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, lines())
    path.write_text(path.read_text() + "{not json\n")
    status, out = audit(["--file", str(path)], capsys)
    assert status == 1
    assert "BAD_EVENT" in out and "line 102: not JSON" in out


def test_an_unfinished_last_hand_is_allowed_only_with_allow_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, [r for r in lines() if r["event_id"] != "t0002-h2/14"])
    status, out = audit(["--file", str(path)], capsys)
    assert status == 1 and "MISSING_END" in out
    status, out = audit(["--file", str(path), "--allow-open"], capsys)
    assert status == 0, out
    assert "open hands (not ended yet; every event so far verified): t0002-h2" in out


def test_an_unfinished_hand_that_is_not_the_last_is_never_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, [r for r in lines() if r["event_id"] != "t0002-h1/4"])
    status, out = audit(["--file", str(path), "--allow-open"], capsys)
    assert status == 1
    assert "t0002-h1 " in out and "MISSING_END" in out


def test_filters_select_whole_hands_by_game_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = audit(["--file", str(FIXTURE), "--game", "xito"], capsys)
    assert status == 0 and "hands verified 2" in out and "holdem" not in out
    status, out = audit(["--file", str(FIXTURE), "--table", "t0003"], capsys)
    assert status == 0 and "hands verified 2" in out and "taixiu" in out


def test_time_filters_keep_hands_started_in_the_window(capsys: pytest.CaptureFixture[str]) -> None:
    starts = sorted(r["occurred_at"] for r in lines() if "hand_started" in r)
    status, out = audit(["--file", str(FIXTURE), "--since", starts[2], "--until", starts[4]], capsys)
    assert status == 0, out
    assert "hands verified 2" in out


def test_the_report_is_also_written_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    status, _ = audit(["--file", str(FIXTURE), "--json", str(report)], capsys)
    assert status == 0
    data = json.loads(report.read_text())
    assert data["ok"] is True
    assert {g: v["hands"] for g, v in data["games"].items()} == {"holdem": 2, "taixiu": 2, "xito": 2}
    assert (
        data["games"]["holdem"]["fees_gold"] + data["games"]["xito"]["fees_gold"] + data["games"]["taixiu"]["fees_gold"]
        == 302
    )


def test_a_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["audit", "--file", str(tmp_path / "nope.jsonl")])
    err = capsys.readouterr().err
    configure(fmt="console", level="warning", stream=sys.__stderr__)
    assert status == 2
    assert "BAD_FILE" in err


def test_verify_counts_the_table_facts_and_their_buy_ins() -> None:
    audit_ = verify(read_jsonl(FIXTURE), source="fixture")
    assert audit_.report.table_facts == 14
    assert audit_.facts["t0001"].opened
    assert audit_.facts["t0001"].buy_ins_gold == {"t0001p0": 4000, "t0001p1": 4000, "t0001p3": 4000, "t0001p4": 4000}


def test_the_fast_json_reader_builds_exactly_what_parse_dict_builds() -> None:
    from google.protobuf import json_format

    from socai.audit.export import parse_event_json
    from socai.gen.events.v1 import events_pb2

    for row in lines():
        want, got = events_pb2.Event(), events_pb2.Event()
        json_format.ParseDict(row, want)
        parse_event_json(row, got)
        assert got == want, row["event_id"]
    # What it does not know it hands to ParseDict: camelCase names, nanoseconds, bad values.
    odd = {"eventId": "h/1", "seq": 1, "occurredAt": "2026-11-29T12:00:00.123456789Z"}
    want, got = events_pb2.Event(), events_pb2.Event()
    json_format.ParseDict(odd, want)
    parse_event_json(odd, got)
    assert got == want
    with pytest.raises(json_format.ParseError):
        parse_event_json({"seq": "one"}, events_pb2.Event())
    with pytest.raises(json_format.ParseError):
        parse_event_json({"no_such_field": 1}, events_pb2.Event())


@pytest.mark.parametrize(
    "at",
    [
        "2026-11-29T12:00:00Z",
        "2026-11-29T12:00:00.1Z",
        "2026-11-29T12:00:00.006Z",
        "2026-11-29T23:59:59.999999Z",
        "1969-12-31T23:59:59.5Z",
        "1970-01-01T00:00:00Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999Z",
        "2024-02-29T00:00:00.000001Z",
    ],
)
def test_the_fast_json_reader_reads_a_time_as_parse_dict_does(at: str) -> None:
    from google.protobuf import json_format

    from socai.audit.export import parse_event_json
    from socai.gen.events.v1 import events_pb2

    want, got = events_pb2.Event(), events_pb2.Event()
    json_format.ParseDict({"occurred_at": at}, want)
    parse_event_json({"occurred_at": at}, got)
    assert (got.occurred_at.seconds, got.occurred_at.nanos) == (want.occurred_at.seconds, want.occurred_at.nanos)
