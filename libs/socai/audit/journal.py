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

**Page seals** (JSONL only). When the ledger has a journal seal key
(``SOCAI_LEDGER_SEAL_KEY``), every page of ``ListTransactions`` comes with a
``JournalPageSeal`` the ledger signed: the period asked for, whether it is the listing's
first page, the journal_seq it continues after and its last one, whether more follows, and
the sha256 of each transaction's deterministic protobuf serialization. The export writes
it after the page's transactions as a line of its own, ``{"journal_page_seal": {…}}`` (the
message in the protobuf JSON mapping, bytes as base64). ``check_pages`` verifies them with
the ledger's public keys, without the ledger: a changed transaction (named by its
journal_seq and key), a missing or added one, a page left out, cut off at either end of
the period or signed by another key, are each a problem. A transaction read back from the
JSON mapping serializes to the same bytes the ledger signed (every field of a Transaction
survives the mapping; ``tests/unit/audit/test_journal_seals.py`` pins it).

``read_journal`` reads either (by the first character: ``{`` is JSONL) into protobuf
``Transaction`` messages, so the offline audit looks at the same objects the live one gets
from ``GetTransaction``; ``read_journal_file`` also keeps the page seals. A line or row
that does not parse raises InvalidArgument ("BAD_JOURNAL") with its line number: a journal
is the evidence, and a reader that skipped what it cannot read would hide exactly what was
tampered with.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from google.protobuf import json_format

from socai import errors
from socai.events import seal
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
SEAL_LINE_KEY: Final = "journal_page_seal"  # a JSONL line {"journal_page_seal": {…}} after its page
SEAL_LINE_MAX_CHARS: Final = 256 * 1024  # a page of 1,000 digests in base64 with room
PAGE_SEAL_LABEL: Final = b"socai/journal-page/v1"


def to_json(tx: ledger_pb2.Transaction) -> dict[str, Any]:
    # Every field written: a balance after of 0 is evidence too, and a reader should not
    # have to know protobuf's rule that zeros are left out.
    return json_format.MessageToDict(tx, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def write_jsonl(
    transactions: Iterable[ledger_pb2.Transaction], out: IO[str], page_seal: ledger_pb2.JournalPageSeal | None = None
) -> int:
    """Write ``transactions`` one a line, then ``page_seal`` (when the page has one); returns
    how many transactions."""
    count = 0
    for tx in transactions:
        out.write(json.dumps(to_json(tx), separators=(",", ":"), ensure_ascii=False) + "\n")
        count += 1
    if page_seal is not None and page_seal.signature:
        line = {SEAL_LINE_KEY: json_format.MessageToDict(page_seal, preserving_proto_field_name=True)}
        out.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
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


@dataclass
class JournalFile:
    """A journal export: its transactions in file order and the page seals it carries, each
    with the index of the first transaction after it (its page is the transactions since
    the seal before)."""

    name: str
    transactions: list[ledger_pb2.Transaction] = field(default_factory=list)
    seals: list[tuple[int, ledger_pb2.JournalPageSeal]] = field(default_factory=list)


def read_journal_file(path: Path | str) -> JournalFile:
    """The whole export, page seals included (``read_journal``'s errors)."""
    out = JournalFile(Path(path).name)
    for item in _read_items(path):
        if isinstance(item, ledger_pb2.JournalPageSeal):
            out.seals.append((len(out.transactions), item))
        else:
            out.transactions.append(item)
    return out


def read_journal(path: Path | str) -> Iterator[ledger_pb2.Transaction]:
    """The transactions of a journal export, in file order (gzip-compressed when the name
    ends in ``.gz``); page seals are skipped (``read_journal_file`` keeps them). Raises
    InvalidArgument ("BAD_FILE") when the file cannot be read, ("BAD_JOURNAL") at a line
    that does not parse."""
    for item in _read_items(path):
        if isinstance(item, ledger_pb2.Transaction):
            yield item


def _read_items(path: Path | str) -> Iterator[ledger_pb2.Transaction | ledger_pb2.JournalPageSeal]:
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


def _read_jsonl(handle: IO[str], source: Path) -> Iterator[ledger_pb2.Transaction | ledger_pb2.JournalPageSeal]:
    for number, line in enumerate(handle, start=1):
        text = line.strip()
        if not text:
            continue
        if len(text) > LINE_MAX_CHARS:
            raise _bad(source, number, f"longer than {LINE_MAX_CHARS} characters")
        if text.startswith('{"' + SEAL_LINE_KEY + '"'):
            yield _seal_line(text, source, number)
            continue
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


def _seal_line(text: str, source: Path, number: int) -> ledger_pb2.JournalPageSeal:
    if len(text) > SEAL_LINE_MAX_CHARS:
        raise _bad(source, number, f"a page seal longer than {SEAL_LINE_MAX_CHARS} characters")
    try:
        obj = json.loads(text)
        if not isinstance(obj, dict) or set(obj) != {SEAL_LINE_KEY}:
            raise ValueError(f"a page seal line holds {SEAL_LINE_KEY} alone")
        page = ledger_pb2.JournalPageSeal()
        json_format.ParseDict(obj[SEAL_LINE_KEY], page)
    except (ValueError, json_format.ParseError) as exc:
        raise _bad(source, number, f"not a page seal: {errors.truncate(str(exc), 200)}") from exc
    return page


# --- page seals -----------------------------------------------------------------------------


def transaction_digest(tx: ledger_pb2.Transaction) -> bytes:
    """sha256 of the transaction's deterministic protobuf serialization."""
    return hashlib.sha256(tx.SerializeToString(deterministic=True)).digest()


def _signed_bytes(page: ledger_pb2.JournalPageSeal) -> bytes:
    unsigned = ledger_pb2.JournalPageSeal()
    unsigned.CopyFrom(page)
    unsigned.signature = b""
    return PAGE_SEAL_LABEL + b"\x00" + unsigned.SerializeToString(deterministic=True)


class JournalSigner:
    """The ledger's signature over pages of the journal (``ListTransactions``)."""

    def __init__(self, private_key: bytes) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(private_key)
        self.public_key = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_id = seal.key_id(self.public_key)

    def seal(
        self,
        transactions: Sequence[ledger_pb2.Transaction],
        *,
        since: datetime | None,
        until: datetime | None,
        first: bool,
        after_seq: int,
        more: bool,
    ) -> ledger_pb2.JournalPageSeal:
        page = ledger_pb2.JournalPageSeal(
            first=first,
            after_seq=after_seq,
            last_seq=transactions[-1].journal_seq if transactions else after_seq,
            more=more,
            transaction_digests=[transaction_digest(tx) for tx in transactions],
            key_id=self.key_id,
        )
        if since is not None:
            page.since.FromDatetime(since)
        if until is not None:
            page.until.FromDatetime(until)
        page.signature = self._key.sign(_signed_bytes(page))
        return page


@dataclass
class PagesChecked:
    """What ``check_pages`` found: how many pages and transactions its seals cover, the key
    ids that signed them, the period they name, and every problem (each with the hand of the
    transaction when there is one)."""

    pages: int = 0
    transactions: int = 0
    key_ids: list[str] = field(default_factory=list)
    since: str = ""
    until: str = ""
    problems: list[tuple[str, str]] = field(default_factory=list)  # (detail, hand id)


def check_pages(journal: JournalFile, public_keys: Mapping[str, bytes], hand_of: Any) -> PagesChecked:
    """Verify a journal export's page seals with the ledger's public keys (key id → raw key).

    Every transaction must be on a page whose seal verifies and lists its digest at its
    journal_seq; pages follow each other (each continues after the one before, the first is
    marked first, the last says nothing follows) and all name the same period. ``hand_of``
    maps an idempotency key to its hand (for the report). A file without seals is one
    problem (the caller asks only when it holds the ledger's keys)."""
    out = PagesChecked()
    keys = {kid: Ed25519PublicKey.from_public_bytes(raw) for kid, raw in public_keys.items()}
    txs = journal.transactions
    if not journal.seals:
        out.problems.append((f"{journal.name}: the journal carries no page seal (exported without the ledger's)", ""))
        return out

    def problem(detail: str, tx: ledger_pb2.Transaction | None = None) -> None:
        out.problems.append((detail, hand_of(tx.idempotency_key) if tx is not None else ""))

    start = 0
    previous: ledger_pb2.JournalPageSeal | None = None
    period = (journal.seals[0][1].since, journal.seals[0][1].until)
    out.since = _stamp(period[0]) if journal.seals[0][1].HasField("since") else ""
    out.until = _stamp(period[1]) if journal.seals[0][1].HasField("until") else ""
    for end, page in journal.seals:
        where = f"page after journal_seq {page.after_seq}"
        key = keys.get(page.key_id)
        try:
            if key is None:
                raise InvalidSignature
            key.verify(page.signature, _signed_bytes(page))
        except InvalidSignature:
            held = ", ".join(sorted(keys)) or "none"
            problem(
                f"{where}: its seal (key id {page.key_id or '(none named)'}) does not verify with the ledger's "
                f"keys ({held})"
            )
            start = end
            previous = page
            continue
        out.pages += 1
        if page.key_id not in out.key_ids:
            out.key_ids.append(page.key_id)
        if (page.since, page.until) != period:
            problem(f"{where}: names another period than the first page")
        if previous is None and not page.first:
            problem(f"{where}: the first page of the file is not the listing's first: pages before it are missing")
        if previous is not None and (page.first or page.after_seq != previous.last_seq):
            problem(f"{where}: does not continue the page before (which ends at {previous.last_seq})")
        digests = list(page.transaction_digests)
        if page.last_seq - page.after_seq == len(digests):
            signed = {page.after_seq + 1 + i: digest for i, digest in enumerate(digests)}
        else:
            # Not a run of consecutive journal_seq (a commit clock that stepped back inside a
            # period): the digests follow the page's transactions in order.
            signed = {int(tx.journal_seq): d for tx, d in zip(txs[start:end], digests, strict=False)}
            if len(digests) != end - start:
                problem(f"{where}: the ledger signed {len(digests)} transactions, the file holds {end - start}")
        seen: set[int] = set()
        for tx in txs[start:end]:
            digest = signed.get(tx.journal_seq)
            if digest is None:
                problem(f"{tx.idempotency_key} (journal_seq {tx.journal_seq}): not on the page the ledger signed", tx)
            elif tx.journal_seq in seen:
                problem(f"{tx.idempotency_key} (journal_seq {tx.journal_seq}): written twice", tx)
            elif transaction_digest(tx) != digest:
                problem(
                    f"{tx.idempotency_key} (journal_seq {tx.journal_seq}): not the transaction the ledger signed "
                    "(changed after it was exported)",
                    tx,
                )
            else:
                out.transactions += 1
            seen.add(tx.journal_seq)
        for seq in sorted(set(signed) - seen):
            problem(f"journal_seq {seq}: the ledger signed it on the {where}; the file leaves it out")
        start = end
        previous = page
    for tx in txs[start:]:
        problem(f"{tx.idempotency_key} (journal_seq {tx.journal_seq}): after the last page seal, signed by no one", tx)
    if previous is not None and previous.more:
        problem(f"the last page (ending at journal_seq {previous.last_seq}) says more follows: the file is cut short")
    return out


def _stamp(ts: Any) -> str:
    return str(ts.ToJsonString())
