"""The ledger's journal as a file: ``socai ledger export`` writes it, ``socai audit --journal`` reads it.

Two formats, both in journal order (``journal_seq`` ascending, every applied transaction of
the journal, nothing else):

- **JSONL** (default): one ``socai.ledger.v1.Transaction`` a line in the protobuf JSON
  mapping with proto field names and every field written, zeros included (int64 values
  are JSON strings, times RFC 3339 in UTC), e.g.
  ``{"transaction_id": "…", "idempotency_key": "settle:t1-h3", "kind": "settlement",
  "reference": "t1-h3", "entries": [{"transaction_id": "…", "account_id": "escrow:t1:p2",
  "amount_gold": "-40", "balance_after_gold": "960", "account_version": "3",
  "created_at": "…", "journal_seq": "17"}, …], "metadata": {"table_id": "t1"},
  "created_at": "2026-11-29T12:00:00.123456Z", "journal_seq": "17"}``.
- **CSV**: a header line, then one row per entry with its transaction's fields repeated:
  ``CSV_COLUMNS``; ``metadata`` is a JSON object in one cell, amounts plain integers.

``read_journal`` reads either (by the first character: ``{`` is JSONL) into protobuf
``Transaction`` messages, so the offline audit looks at the same objects the live one gets
from ``GetTransaction``. A line or row that does not parse raises InvalidArgument
("BAD_JOURNAL") with its line number: a journal is the evidence, and a reader that skipped
what it cannot read would hide exactly what was tampered with.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from google.protobuf import json_format

from socai import errors
from socai.gen.ledger.v1 import ledger_pb2

FORMATS: Final = ("jsonl", "csv")
CSV_COLUMNS: Final = (
    "journal_seq",
    "transaction_id",
    "idempotency_key",
    "kind",
    "reference",
    "created_at",
    "metadata",
    "account_id",
    "amount_gold",
    "balance_after_gold",
    "account_version",
)
LINE_MAX_CHARS: Final = 1024 * 1024  # 256 entries and 64 metadata keys fit many times over


def to_json(tx: ledger_pb2.Transaction) -> dict[str, Any]:
    # Every field written: a balance after of 0 is evidence too, and a reader should not
    # have to know protobuf's rule that zeros are left out.
    return json_format.MessageToDict(tx, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def write_jsonl(transactions: Iterable[ledger_pb2.Transaction], out: IO[str]) -> int:
    count = 0
    for tx in transactions:
        out.write(json.dumps(to_json(tx), separators=(",", ":"), ensure_ascii=False) + "\n")
        count += 1
    return count


class CsvWriter:
    """Rows of entries, the header first (``CSV_COLUMNS``)."""

    def __init__(self, out: IO[str]) -> None:
        self._writer = csv.writer(out, lineterminator="\n")
        self._writer.writerow(CSV_COLUMNS)

    def write(self, transactions: Iterable[ledger_pb2.Transaction]) -> int:
        count = 0
        for tx in transactions:
            at = tx.created_at.ToJsonString()
            metadata = json.dumps(dict(sorted(tx.metadata.items())), separators=(",", ":"), ensure_ascii=False)
            for e in tx.entries:
                self._writer.writerow(
                    (
                        tx.journal_seq,
                        tx.transaction_id,
                        tx.idempotency_key,
                        tx.kind,
                        tx.reference,
                        at,
                        metadata,
                        e.account_id,
                        e.amount_gold,
                        e.balance_after_gold,
                        e.account_version,
                    )
                )
            count += 1
        return count


def read_journal(path: Path | str) -> Iterator[ledger_pb2.Transaction]:
    """The transactions of a journal export, in file order (gzip-compressed when the name
    ends in ``.gz``). Raises InvalidArgument ("BAD_FILE") when the file cannot be read,
    ("BAD_JOURNAL") at a line that does not parse."""
    source = Path(path)
    if not source.is_file():
        raise errors.InvalidArgument("BAD_FILE", f"cannot read {path}: no such file")
    opened: IO[str]
    if source.suffix == ".gz":
        import gzip

        opened = gzip.open(source, "rt", encoding="utf-8", newline="")  # noqa: SIM115 (closed by the with below)
    else:
        opened = source.open(encoding="utf-8", newline="")
    with opened as handle:
        first = handle.read(1)
        handle.seek(0)
        if first == "{":
            yield from _read_jsonl(handle, source)
        else:
            yield from _read_csv(handle, source)


def _bad(source: Path, line: int, why: str) -> errors.InvalidArgument:
    return errors.InvalidArgument("BAD_JOURNAL", f"{source.name} line {line}: {why}")


def _read_jsonl(handle: IO[str], source: Path) -> Iterator[ledger_pb2.Transaction]:
    for number, line in enumerate(handle, start=1):
        text = line.strip()
        if not text:
            continue
        if len(text) > LINE_MAX_CHARS:
            raise _bad(source, number, f"longer than {LINE_MAX_CHARS} characters")
        tx = ledger_pb2.Transaction()
        try:
            json_format.Parse(text, tx)
        except json_format.ParseError as exc:
            raise _bad(source, number, f"not a Transaction: {errors.truncate(str(exc), 200)}") from exc
        yield tx


def _read_csv(handle: IO[str], source: Path) -> Iterator[ledger_pb2.Transaction]:
    reader = csv.reader(handle)
    header = next(reader, None)
    if header is None:
        return
    if tuple(header) != CSV_COLUMNS:
        raise _bad(source, 1, f"the header is not {','.join(CSV_COLUMNS)}")
    current: ledger_pb2.Transaction | None = None
    for row in reader:
        number = reader.line_num
        if len(row) != len(CSV_COLUMNS):
            raise _bad(source, number, f"{len(row)} cells; a row has {len(CSV_COLUMNS)}")
        cells = dict(zip(CSV_COLUMNS, row, strict=True))
        try:
            seq = int(cells["journal_seq"])
            if current is None or current.journal_seq != seq:
                if current is not None:
                    yield current
                current = ledger_pb2.Transaction(
                    transaction_id=cells["transaction_id"],
                    idempotency_key=cells["idempotency_key"],
                    kind=cells["kind"],
                    reference=cells["reference"],
                    metadata=json.loads(cells["metadata"] or "{}"),
                    journal_seq=seq,
                )
                current.created_at.FromJsonString(cells["created_at"])
            entry = current.entries.add(
                transaction_id=current.transaction_id,
                account_id=cells["account_id"],
                amount_gold=int(cells["amount_gold"]),
                balance_after_gold=int(cells["balance_after_gold"]),
                account_version=int(cells["account_version"]),
                journal_seq=seq,
            )
            entry.created_at.CopyFrom(current.created_at)
        except (ValueError, TypeError) as exc:
            raise _bad(source, number, errors.truncate(str(exc), 200)) from exc
    if current is not None:
        yield current
