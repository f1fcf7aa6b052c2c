"""``socai events export`` and ``socai audit``.

    socai events export [--out FILE] [--format jsonl|stored|phh] [--table T]... [--game G]... [--since ISO] [--until ISO]
    socai audit [--events FILE] [--journal FILE | --ledger ADDR | --no-ledger] [--table T]... [--game G]...
                [--since ISO] [--until ISO] [--allow-open] [--keys FILE] [--seal-public-key HEX]...
                [--json REPORT] [--verdict FILE [--sign KEY_FILE]] [--html DIR]
    socai audit hand HAND_ID [the same input flags]
    socai audit verify-verdict FILE [--public-key HEX]... [--events FILE] [--journal FILE]
    socai audit keygen --out KEY_FILE
    socai audit keys [--out FILE]

``audit`` reads the stream (default) or an export (``--events``, also ``--file``; either form
of ``socai.audit.export``, gzip-compressed when it ends in ``.gz``),
verifies every hand and prints the report; it reconciles with the ledger (``--ledger``,
default the configured ledger address when reading the stream, none when reading a file)
or with a journal export (``--journal``: the same checks, ``socai.audit.ledger_source``),
and exits 1 on any mismatch, 0 when clean, 2 when it cannot run (NATS or the ledger
unreachable, a missing or unreadable file, bad flags, no seal public key). Reading the stream
or a ``stored`` export, only what the table service sealed is its hands
(``socai.audit.auditor``): the table's public keys come from ``--seal-public-key`` or
``SOCAI_TABLE_SEAL_PUBLIC_KEYS`` or a keys file (``--keys``; for a file, one of them must
name them); a journal export's page seals are checked with the ledger's keys from a keys
file or ``SOCAI_LEDGER_SEAL_PUBLIC_KEYS`` (``socai.audit.proof``, ``socai.audit.journal``).
``--sign`` writes the verdict signed with the auditor's key; ``verify-verdict`` checks one.
``--html`` also writes the auditor's site (``socai.audit.html``); ``audit hand`` prints one
hand (``socai.audit.handview``) and exits 1 when anything about it does not add up.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from socai import errors
from socai.audit import proof
from socai.audit.auditor import Audit, Period, Seals, check_journal_hands, check_journal_seals, reconcile, verify
from socai.audit.export import (
    EventFilter,
    ExportHeader,
    RawEvent,
    has_stored,
    read_header,
    read_jsonl,
    read_stream,
    write_jsonl,
    write_stored_jsonl,
)
from socai.audit.journal import read_journal_file
from socai.audit.ledger_source import JournalLedger
from socai.infra.config import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def add_commands(subparsers: Any, command: Callable[[str], Callable[[Handler], Handler]]) -> None:
    events = subparsers.add_parser("events", help="the event log: export it as JSONL")
    events_sub = events.add_subparsers(dest="events_command", required=True)
    export = events_sub.add_parser(
        "export", help="write events as JSONL (protobuf JSON mapping or as stored) or Hold'em as PHH"
    )
    export.add_argument("--out", default="-", help="output file (default: standard output)")
    export.add_argument(
        "--format",
        choices=("jsonl", "stored", "phh"),
        default="jsonl",
        help="jsonl: every event (protobuf JSON mapping); stored: every message as stored, with its bytes, "
        "stream sequence, subject and hand-chain headers (an audit of it checks the hand seals); "
        "phh: every verified Hold'em hand as Poker Hand History (.phhs)",
    )
    _filters(export)
    _stream_flags(export)
    command("events")(cmd_events)

    audit = subparsers.add_parser("audit", help="verify every hand and reconcile with the ledger")
    _inputs(audit)
    audit.add_argument("--json", dest="json_out", help="also write the report as JSON to this file")
    audit.add_argument(
        "--verdict", dest="verdict_out", help="also write the verdict (the JSON report without its inputs' names)"
    )
    audit.add_argument(
        "--sign",
        metavar="KEY_FILE",
        help="with --verdict: write the verdict signed with this auditor key (socai audit keygen), naming the "
        "sha256 of every input and what was proven about them",
    )
    audit.add_argument("--html", dest="html_dir", help="also write the auditor's site (static HTML) to this folder")
    audit.add_argument(
        "--settlement", help="with --html: list this settlement service's dead letters on the overview (gRPC address)"
    )
    audit_sub = audit.add_subparsers(dest="audit_command", metavar="{hand,verify-verdict,keygen,keys}")
    hand = audit_sub.add_parser("hand", help="one hand: timeline, seed, settlement and ledger, for a terminal")
    hand.add_argument("hand_id")
    _inputs(hand, suppress=True)
    check = audit_sub.add_parser(
        "verify-verdict", help="check a signed verdict (and that the files are the audited ones)"
    )
    check.add_argument("verdict_file")
    check.add_argument(
        "--public-key", action="append", default=[], help="the auditor's public key, 64 hex digits (repeatable)"
    )
    check.add_argument(
        "--events", dest="check_events", help="the events export the verdict names: its sha256 must match"
    )
    check.add_argument("--journal", dest="check_journal", help="the journal export the verdict names")
    keygen = audit_sub.add_parser("keygen", help="a new auditor signing key (for --sign)")
    keygen.add_argument("--out", required=True, help="the private key file to create (never overwritten)")
    keys = audit_sub.add_parser("keys", help="write this deployment's public keys as a keys file (for --keys)")
    keys.add_argument("--out", default="-", help="output file (default: standard output)")
    command("audit")(cmd_audit)


def _inputs(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """Where the events and the ledger come from. On ``audit hand`` the same flags may come
    after the hand id; their defaults are suppressed there, so a flag given before
    ``hand`` is not reset by the subcommand's default."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--file", "--events", dest="file", default=default(None), help="read a JSONL event export instead of the stream"
    )
    parser.add_argument(
        "--journal",
        default=default(None),
        help="reconcile with a journal export (socai ledger export) instead of a live ledger",
    )
    parser.add_argument(
        "--ledger", default=default(None), help="ledger gRPC address to reconcile with (default: the configured one)"
    )
    parser.add_argument(
        "--no-ledger", action="store_true", default=default(False), help="skip the reconciliation with the ledger"
    )
    parser.add_argument(
        "--seal-public-key",
        action="append",
        default=argparse.SUPPRESS if suppress else [],
        help="the table service's hand-seal public key, 64 hex digits (repeatable during a rotation; "
        "default: SOCAI_TABLE_SEAL_PUBLIC_KEYS)",
    )
    parser.add_argument(
        "--keys",
        default=default(None),
        help="a keys file (socai audit keys) naming the table's hand-seal and the ledger's journal-seal "
        "public keys, or the table's keys as hex separated by commas",
    )
    parser.add_argument(
        "--allow-open",
        action="store_true",
        default=default(False),
        help="a table's last hand may still be in play (live log)",
    )
    _filters(parser, suppress=suppress)
    _stream_flags(parser, suppress=suppress)


def _filters(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    none: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--table", action="append", default=argparse.SUPPRESS if suppress else [], help="only this table (repeatable)"
    )
    parser.add_argument(
        "--game", action="append", default=argparse.SUPPRESS if suppress else [], help="only this game (repeatable)"
    )
    parser.add_argument(
        "--since", type=_when, default=none, help="hands started at or after (ISO 8601, UTC if no zone)"
    )
    parser.add_argument("--until", type=_when, default=none, help="hands started before (ISO 8601)")


def _stream_flags(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    none: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument("--nats-url", default=none, help="NATS (default: SOCAI_NATS_URL or the embedded one)")
    parser.add_argument("--stream", default=none, help="stream name (default: SOCAI_EVENTS_STREAM)")
    parser.add_argument("--prefix", default=none, help="subject prefix (default: SOCAI_EVENTS_PREFIX)")


def _when(text: str) -> datetime:
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from exc
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _filter(args: argparse.Namespace) -> EventFilter:
    return EventFilter(tables=frozenset(args.table), games=frozenset(args.game), since=args.since, until=args.until)


async def _open_log(args: argparse.Namespace, settings: Settings) -> Any:
    from socai.events.log import EventLog
    from socai.infra.nats import connect

    nc = await connect(args.nats_url or settings.nats_url_for("auditor"), name="socai-audit", max_reconnect_attempts=2)
    return EventLog(nc, args.stream or settings.events_stream, args.prefix or settings.events_prefix)


def cmd_events(args: argparse.Namespace, settings: Settings) -> int:
    flt = _filter(args)
    raws = asyncio.run(_read_stream(args, settings, flt))
    write: Callable[[IO[str]], int]
    if args.format == "stored":
        header = ExportHeader.of(
            flt,
            stream=args.stream or settings.events_stream,
            prefix=args.prefix or settings.events_prefix,
            exported_at=datetime.now(UTC),
        )
        write = functools.partial(write_stored_jsonl, raws, header=header)
    else:
        write = functools.partial(_write_phh if args.format == "phh" else write_jsonl, raws)
    if args.out == "-":
        count = write(sys.stdout)
    else:
        with Path(args.out).open("w", encoding="utf-8") as out:
            count = write(out)
    print(f"exported {count} {'hands' if args.format == 'phh' else 'events'}", file=sys.stderr)
    return 0


def _write_phh(raws: list[RawEvent], out: IO[str]) -> int:
    """The Hold'em hands that verify, as PHH; a hand that does not verify (the audit names
    it) or that PHH cannot express is left out and named on standard error."""
    from socai.audit import phh

    audit = verify(raws, source="export", allow_open=True, complete=False)
    written, skipped = phh.write_phhs(audit.results, out)
    for m in audit.report.mismatches:
        if m.hand_id and any(
            r.message is not None and r.message.game == phh.GAME for r in audit.hands.get((m.table_id, m.hand_id), ())
        ):
            print(f"left out {m.hand_id}: it does not verify ({m.reason})", file=sys.stderr)
    for hand in skipped:
        print(f"left out {hand.hand_id}: {hand.reason}", file=sys.stderr)
    return written


async def _read_stream(args: argparse.Namespace, settings: Settings, flt: EventFilter) -> list[RawEvent]:
    event_log = await _open_log(args, settings)
    try:
        return [r async for r in read_stream(event_log, flt)]
    finally:
        await event_log.nc.close()


def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    sub = getattr(args, "audit_command", None)
    if sub == "hand":
        return cmd_audit_hand(args, settings)
    if sub == "verify-verdict":
        return cmd_verify_verdict(args)
    if sub == "keygen":
        return cmd_keygen(args)
    if sub == "keys":
        return cmd_keys(args, settings)
    if args.sign and not args.verdict_out:
        raise errors.InvalidArgument("BAD_FLAGS", "--sign writes the signed verdict to --verdict FILE: give both")
    signing_key = proof.read_private_key(args.sign) if args.sign else None  # before the work: a bad key stops it
    audit = run_audit(args, settings, _filter(args))
    sys.stdout.write(audit.report.render())
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(audit.report.as_json(), indent=2) + "\n", encoding="utf-8")
    signed: dict[str, Any] | None = None
    if args.verdict_out:
        if signing_key is not None:
            inputs = [proof.file_input("events", args.file)] if args.file else []
            inputs += [proof.file_input("journal", args.journal)] if args.journal else []
            audited_at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            signed = proof.signed_verdict(audit.report, inputs, signing_key, audited_at=audited_at)
            Path(args.verdict_out).write_text(proof.verdict_json(signed), encoding="utf-8")
            print(f"signed the verdict with key id {signed['signed_by']['key_id']}", file=sys.stderr)
        else:
            Path(args.verdict_out).write_text(audit.report.verdict_text(), encoding="utf-8")
    if args.html_dir:
        import socai.audit.html as html

        dead = asyncio.run(_dead_letters(args.settlement, settings)) if args.settlement else []
        pages = html.write_site(audit, Path(args.html_dir), dead_letters=dead, signed_verdict=signed)
        print(f"wrote {pages} hand pages and the overview to {args.html_dir}/index.html", file=sys.stderr)
    return 0 if audit.report.ok else 1


def cmd_verify_verdict(args: argparse.Namespace) -> int:
    """Exit 0 when the signed verdict holds (signature, signer, inputs), 1 when it does not;
    the verdict's own finding (clean or not) is printed, not the exit status."""
    from socai.events import seal

    doc = proof.read_verdict(args.verdict_file)
    try:
        trusted = seal.parse_public_keys(args.public_key) if args.public_key else None
    except ValueError as exc:
        raise errors.InvalidArgument("BAD_SEAL_KEY", f"--public-key: {exc}") from exc
    inputs = [proof.file_input("events", args.check_events)] if args.check_events else []
    inputs += [proof.file_input("journal", args.check_journal)] if args.check_journal else []
    for path in (args.check_events, args.check_journal):
        if path and not Path(path).is_file():
            raise errors.InvalidArgument("BAD_FILE", f"cannot read {path}: no such file")
    check = proof.verify_verdict(doc, trusted=trusted, inputs=inputs)
    for note in check.notes:
        print(f"note: {note}", file=sys.stderr)
    if not check.ok:
        print(f"the verdict does NOT hold: {len(check.problems)} problem(s)")
        for problem in check.problems:
            print(f"  {problem}")
        return 1
    state = "clean" if check.ok_verdict else "NOT clean (it lists mismatches)"
    print(f"the verdict holds: signed by key id {check.key_id}; the audit it records is {state}")
    for item in doc.get("inputs", []):
        print(f"  {item.get('role')}: {item.get('name')} sha256 {item.get('sha256')}")
    return 0


def cmd_keygen(args: argparse.Namespace) -> int:
    from socai.events import seal

    target = Path(args.out)
    if target.exists():
        raise errors.Conflict("FILE_EXISTS", f"{target} exists: a signing key is never overwritten")
    private = proof.new_private_key()
    proof.write_private_key(target, private)
    public = proof.public_key_of(private)
    print(f"auditor public key {public.hex()}")
    print(f"# key id {seal.key_id(public)}; the private key is in {target} (mode 600)", file=sys.stderr)
    return 0


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    table = list(settings.hand_seal_public_keys().values())
    ledger = list(settings.journal_seal_public_keys().values())
    text = json.dumps(proof.keys_document(table, ledger), indent=2) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


def cmd_audit_hand(args: argparse.Namespace, settings: Settings) -> int:
    from socai.audit import handview

    hand_id: str = args.hand_id
    # Hand ids are {table}-h{n}: reading only the table's subjects finds the hand at once.
    table_id = hand_id.rsplit("-h", 1)[0]
    flt = EventFilter(tables=frozenset(args.table or [table_id]))
    audit = run_audit(args, settings, flt, keep=lambda raw: raw.hand_id == hand_id or raw.is_table_fact)
    view = next((v for v in handview.views(audit) if v.hand_id == hand_id), None)
    if view is None:
        raise errors.NotFound("HAND_NOT_FOUND", f"no events of hand {hand_id} in {audit.report.source}")
    sys.stdout.write(handview.render_text(view))
    return 0 if view.ok else 1


def run_audit(
    args: argparse.Namespace, settings: Settings, flt: EventFilter, keep: Callable[[RawEvent], bool] | None = None
) -> Audit:
    """Read the events (a file or the stream), verify them, and reconcile with the ledger
    the flags name: a journal export (``--journal``), a live ledger (``--ledger``, or the
    configured one when reading the stream), or none."""
    if args.journal and (args.ledger or args.no_ledger):
        raise errors.InvalidArgument("BAD_FLAGS", "give --journal or --ledger / --no-ledger, not both")
    seals: Seals | None = None
    keys = proof.read_keys(args.keys) if getattr(args, "keys", None) else None
    header: ExportHeader | None = None
    if args.file:
        header = read_header(args.file)
        raws = [r for r in read_jsonl(args.file) if flt.keep_raw(r)]
        source = f"file {args.file}"
        ledger_addr = args.ledger or ""
        if has_stored(raws):
            # Messages as stored carry their chain and seal headers: checked as on the stream,
            # with keys the auditor names (never the development key by default: a file may
            # come from any deployment).
            seals = _seals(args, settings, explicit=True, keys=keys)
        else:
            print(
                "note: this export (--format jsonl) carries no hand seals; export with --format stored, "
                "or audit the stream, to check them",
                file=sys.stderr,
            )
    else:
        seals = _seals(args, settings, keys=keys)
        raws = asyncio.run(_read_stream(args, settings, flt))
        stream = args.stream or settings.events_stream
        source = f"stream {stream} ({args.prefix or settings.events_prefix}.>)"
        ledger_addr = args.ledger or settings.ledger_addr
    if keep is not None:
        raws = [r for r in raws if keep(r)]
    if args.no_ledger or args.journal:
        ledger_addr = ""
    complete = flt.is_everything and keep is None and (header is None or header.is_everything)
    period = Period(
        complete,
        since=_later(flt.since, _when(header.since) if header is not None and header.since else None),
        until=_earlier(flt.until, _when(header.until) if header is not None and header.until else None),
    )
    audit = verify(raws, source=source, allow_open=args.allow_open, complete=complete, seals=seals)
    proven = audit.report.proof
    proven.events_since = period.since.isoformat() if period.since else ""
    proven.events_until = period.until.isoformat() if period.until else ""
    if args.journal:
        journal_file = read_journal_file(args.journal)
        first = journal_file.seals[0][1] if journal_file.seals else None
        journal = JournalLedger(
            journal_file.transactions,
            f"journal {args.journal}",
            since=first.since.ToDatetime(tzinfo=UTC) if first is not None and first.HasField("since") else None,
            until=first.until.ToDatetime(tzinfo=UTC) if first is not None and first.HasField("until") else None,
        )
        # An escrow's balance in a journal of a period is not the balance the whole log adds up to.
        audit.complete = audit.complete and journal.whole
        asyncio.run(reconcile(audit, journal))
        check_journal_hands(audit, journal.transactions, period)
        ledger_keys = dict(keys.ledger) if keys is not None and keys.ledger else _ledger_keys(settings)
        check_journal_seals(audit, journal_file, ledger_keys)
        if journal_file.seals and not ledger_keys:
            print(
                "note: the journal's page seals were not checked: name the ledger's public key with --keys "
                "(a keys file) or SOCAI_LEDGER_SEAL_PUBLIC_KEYS",
                file=sys.stderr,
            )
    elif ledger_addr:
        asyncio.run(_reconcile(audit, ledger_addr, settings))
    return audit


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    return max(a, b) if a is not None and b is not None else (a or b)


def _earlier(a: datetime | None, b: datetime | None) -> datetime | None:
    return min(a, b) if a is not None and b is not None else (a or b)


def _ledger_keys(settings: Settings) -> dict[str, bytes]:
    """The ledger's journal-seal public keys named in the environment (never the development
    one derived for a file: a file may come from any deployment)."""
    if not settings.ledger_seal_public_keys:
        return {}
    return settings.journal_seal_public_keys()


def _seals(
    args: argparse.Namespace, settings: Settings, *, explicit: bool = False, keys: proof.Keys | None = None
) -> Seals:
    """The table's hand-seal public keys: ``--seal-public-key`` and ``--keys``, else the
    settings'. Raises InvalidArgument("BAD_SEAL_KEY") for a malformed key,
    PreconditionFailed("SEAL_KEYS_MISSING") outside development mode without any, and, with
    ``explicit`` (a stored file), whenever none is named."""
    from socai.events import seal

    given = getattr(args, "seal_public_key", None) or []
    named = dict(keys.table) if keys is not None else {}
    if named and not given:
        prefix = args.prefix or settings.events_prefix
        return Seals(seal.SealVerifier(named), prefix, settings.seal_legacy_before_seq)
    if given:
        try:
            table_keys = seal.parse_public_keys(given) | named
        except ValueError as exc:
            raise errors.InvalidArgument("BAD_SEAL_KEY", f"--seal-public-key: {exc}") from exc
    elif explicit and not settings.table_seal_public_keys:
        raise errors.PreconditionFailed(
            "SEAL_KEYS_MISSING",
            "the file holds sealed hands: name the table's hand-seal public key(s) with --keys, --seal-public-key "
            "or SOCAI_TABLE_SEAL_PUBLIC_KEYS",
        )
    else:
        table_keys = settings.hand_seal_public_keys()
    prefix = args.prefix or settings.events_prefix
    return Seals(seal.SealVerifier(table_keys), prefix, settings.seal_legacy_before_seq)


DEAD_LETTERS_MAX = 10_000  # the overview lists them; more than this is a different problem
RPC_DEADLINE_S = 30.0


async def _dead_letters(address: str, settings: Settings) -> list[tuple[str, str, str]]:
    """(hand, reason, detail) of the settlement service's dead letters, as the auditor.
    Raises Unavailable("SETTLEMENT_UNAVAILABLE") when it does not answer."""
    import grpc

    from socai.gen.settlement.v1 import settlement_pb2, settlement_pb2_grpc
    from socai.infra.grpc_client import channel

    out: list[tuple[str, str, str]] = []
    async with channel(address, settings.token_of("auditor")) as ch:
        stub = settlement_pb2_grpc.SettlementServiceStub(ch)
        token = ""
        while len(out) < DEAD_LETTERS_MAX:
            try:
                reply = await stub.ListDeadLetters(
                    settlement_pb2.ListDeadLettersRequest(page_size=1000, page_token=token), timeout=RPC_DEADLINE_S
                )
            except grpc.aio.AioRpcError as exc:
                raise errors.Unavailable(
                    "SETTLEMENT_UNAVAILABLE", f"settlement ListDeadLetters: {exc.code().name}: {exc.details()}"
                ) from exc
            out += [(d.hand_id, d.reason, d.detail) for d in reply.dead_letters]
            token = reply.next_page_token
            if not token:
                break
    return out[:DEAD_LETTERS_MAX]


async def _reconcile(audit: Any, address: str, settings: Settings) -> None:
    from socai.gen.ledger.v1 import ledger_pb2_grpc
    from socai.infra.grpc_client import channel

    async with channel(address, settings.token_of("auditor")) as ch:
        await reconcile(audit, ledger_pb2_grpc.LedgerServiceStub(ch), ledger_name=address)
