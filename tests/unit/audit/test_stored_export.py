"""The ``stored`` export (``socai events export --format stored``): messages as the stream
stores them, so that an offline audit checks every hand's chain and seal as it does live."""

from __future__ import annotations

import base64
import gzip
import io
import json
import sys
from pathlib import Path

import pytest

from socai.audit.auditor import Seals, verify
from socai.audit.export import RawEvent, _decode, read_jsonl, write_jsonl, write_stored_jsonl
from socai.events import seal
from socai.events.model import subject
from socai.infra.config import Settings
from socai.infra.logging import configure
from socai_cli.main import main
from tests.support.synthetic import sealed, simulate

DEV_PUBLIC = seal.public_key_of(Settings().hand_seal_private_key()).hex()


def stored_raws(hands: int = 6) -> list[RawEvent]:
    """Simulated hands (two games) as the stream would hold them: chained, sealed, numbered."""
    sim = simulate(hands, ("holdem", "tienlen"), seed=3)
    out: list[RawEvent] = []
    chains: dict[str, bytes] = {}
    for event in sim.events():
        subj = subject(event.table_id, event.hand_id, "socai.events")
        payload, headers = sealed(subj, event, chains)
        out.append(_decode(len(out) + 1, subj, payload, tuple(headers.items())))
    return out


def write_stored(tmp_path: Path, raws: list[RawEvent], name: str = "events.jsonl") -> Path:
    path = tmp_path / name
    with path.open("w", encoding="utf-8") as out:
        assert write_stored_jsonl(raws, out) == len(raws)
    return path


def audit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["audit", *args])
    captured = capsys.readouterr()
    configure(fmt="console", level="warning", stream=sys.__stderr__)  # main pointed logs at the capture
    return status, captured.out, captured.err


def test_a_stored_line_reads_back_as_the_message_read_from_the_stream(tmp_path: Path) -> None:
    raws = stored_raws()
    back = list(read_jsonl(write_stored(tmp_path, raws)))
    assert [(r.stream_seq, r.subject, r.payload, r.chain_headers) for r in back] == [
        (r.stream_seq, r.subject, r.payload, r.chain_headers) for r in raws
    ]
    assert [r.message for r in back] == [r.message for r in raws]


def test_a_gzip_compressed_export_reads_the_same(tmp_path: Path) -> None:
    raws = stored_raws()
    plain = write_stored(tmp_path, raws)
    zipped = tmp_path / "events.jsonl.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    assert [r.payload for r in read_jsonl(zipped)] == [r.payload for r in raws]


def test_the_offline_audit_of_a_stored_export_checks_the_seals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_stored(tmp_path, stored_raws())
    status, out, err = audit(["--events", str(path), "--seal-public-key", DEV_PUBLIC], capsys)
    assert status == 0, out
    assert "carries no hand seals" not in err
    # The same file under another table's key: every hand's seal is refused, none replayed.
    other = seal.public_key_of(bytes(range(32))).hex()
    status, out, _ = audit(["--events", str(path), "--seal-public-key", other], capsys)
    assert status == 1
    assert "HAND_SEAL_INVALID" in out


def test_a_changed_byte_in_a_stored_export_is_a_broken_chain(tmp_path: Path) -> None:
    raws = stored_raws()
    path = write_stored(tmp_path, raws)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    # An event of a hand (the table's own facts, on {table}-t, carry no chain).
    victim = next(
        i
        for i, line in enumerate(lines)
        if not line["subject"].endswith("-t") and "Socai-Hand-Seal" not in line["headers"]
    )
    data = bytearray(base64.b64decode(lines[victim]["data"]))
    data[-1] ^= 0x01
    lines[victim]["data"] = base64.b64encode(bytes(data)).decode()
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    seals = Seals(seal.SealVerifier(seal.parse_public_keys([DEV_PUBLIC])))
    report = verify(read_jsonl(path), source="test", seals=seals).report
    assert not report.ok
    assert {m.reason for m in report.mismatches} & {"CHAIN_BROKEN", "HAND_SEAL_INVALID", "NOT_THE_TABLES"}


def test_a_stored_export_without_a_named_key_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOCAI_TABLE_SEAL_PUBLIC_KEYS", raising=False)
    path = write_stored(tmp_path, stored_raws())
    status, _, err = audit(["--events", str(path)], capsys)
    assert status == 2
    assert "SEAL_KEYS_MISSING" in err


def test_a_plain_jsonl_export_still_audits_without_seals_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plain.jsonl"
    buffer = io.StringIO()
    write_jsonl(stored_raws(), buffer)
    path.write_text(buffer.getvalue())
    status, out, err = audit(["--events", str(path)], capsys)
    assert status == 0, out
    assert "carries no hand seals" in err


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ({"stream_seq": "1", "subject": "s", "headers": {}, "data": ""}, "needs stream_seq"),
        ({"stream_seq": 1, "subject": "s", "headers": {"Socai-Prev": 7}, "data": ""}, "headers must map"),
        ({"stream_seq": 1, "subject": "s", "headers": {}, "data": "not base64!"}, "not base64"),
    ],
)
def test_a_malformed_stored_line_is_reported_not_fatal(tmp_path: Path, line: dict, why: str) -> None:  # type: ignore[type-arg]
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (raw,) = read_jsonl(path)
    assert raw.message is None and why in raw.error
