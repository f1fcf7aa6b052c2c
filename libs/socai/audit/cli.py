"""``socai events export`` and ``socai audit``.

    socai events export [--out FILE] [--table T]... [--game G]... [--since ISO] [--until ISO]
    socai audit [--file FILE] [--ledger ADDR | --no-ledger] [--table T]... [--game G]...
                [--since ISO] [--until ISO] [--allow-open] [--json REPORT]

``audit`` reads the stream (default) or a JSONL export (``--file``), verifies every hand and
prints the report; it reconciles with the ledger (``--ledger``, default the configured
ledger address when reading the stream, none when reading a file) and exits 1 on any
mismatch, 0 when clean, 2 when it cannot run (NATS or the ledger unreachable, bad flags).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from socai.audit.auditor import reconcile, verify
from socai.audit.export import EventFilter, RawEvent, read_jsonl, read_stream, write_jsonl
from socai.infra.config import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def add_commands(subparsers: Any, command: Callable[[str], Callable[[Handler], Handler]]) -> None:
    events = subparsers.add_parser("events", help="the event log: export it as JSONL")
    events_sub = events.add_subparsers(dest="events_command", required=True)
    export = events_sub.add_parser("export", help="write events as JSONL (protobuf JSON mapping)")
    export.add_argument("--out", default="-", help="output file (default: standard output)")
    _filters(export)
    _stream_flags(export)
    command("events")(cmd_events)

    audit = subparsers.add_parser("audit", help="verify every hand and reconcile with the ledger")
    audit.add_argument("--file", help="read a JSONL export instead of the stream")
    audit.add_argument("--ledger", help="ledger gRPC address to reconcile with (default: the configured one)")
    audit.add_argument("--no-ledger", action="store_true", help="skip the reconciliation with the ledger")
    audit.add_argument("--allow-open", action="store_true", help="a table's last hand may still be in play (live log)")
    audit.add_argument("--json", dest="json_out", help="also write the report as JSON to this file")
    _filters(audit)
    _stream_flags(audit)
    command("audit")(cmd_audit)


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", action="append", default=[], help="only this table (repeatable)")
    parser.add_argument("--game", action="append", default=[], help="only this game (repeatable)")
    parser.add_argument("--since", type=_when, help="hands started at or after (ISO 8601, UTC if no zone)")
    parser.add_argument("--until", type=_when, help="hands started before (ISO 8601)")


def _stream_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nats-url", help="NATS (default: SOCAI_NATS_URL or the embedded one)")
    parser.add_argument("--stream", help="stream name (default: SOCAI_EVENTS_STREAM)")
    parser.add_argument("--prefix", help="subject prefix (default: SOCAI_EVENTS_PREFIX)")


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

    nc = await connect(args.nats_url or settings.effective_nats_url, name="socai-audit", max_reconnect_attempts=2)
    return EventLog(nc, args.stream or settings.events_stream, args.prefix or settings.events_prefix)


def cmd_events(args: argparse.Namespace, settings: Settings) -> int:
    raws = asyncio.run(_read_stream(args, settings, _filter(args)))
    if args.out == "-":
        count = write_jsonl(raws, sys.stdout)
    else:
        with Path(args.out).open("w", encoding="utf-8") as out:
            count = write_jsonl(raws, out)
    print(f"exported {count} events", file=sys.stderr)
    return 0


async def _read_stream(args: argparse.Namespace, settings: Settings, flt: EventFilter) -> list[RawEvent]:
    event_log = await _open_log(args, settings)
    try:
        return [r async for r in read_stream(event_log, flt)]
    finally:
        await event_log.nc.close()


def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    flt = _filter(args)
    if args.file:
        raws = [r for r in read_jsonl(args.file) if flt.keep_raw(r)]
        source = f"file {args.file}"
        ledger_addr = args.ledger or ""
    else:
        raws = asyncio.run(_read_stream(args, settings, flt))
        stream = args.stream or settings.events_stream
        source = f"stream {stream} ({args.prefix or settings.events_prefix}.>)"
        ledger_addr = args.ledger or settings.ledger_addr
    if args.no_ledger:
        ledger_addr = ""
    audit = verify(raws, source=source, allow_open=args.allow_open, complete=flt.is_everything)
    if ledger_addr:
        asyncio.run(_reconcile(audit, ledger_addr, settings))
    sys.stdout.write(audit.report.render())
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(audit.report.as_json(), indent=2) + "\n", encoding="utf-8")
    return 0 if audit.report.ok else 1


async def _reconcile(audit: Any, address: str, settings: Settings) -> None:
    from socai.gen.ledger.v1 import ledger_pb2_grpc
    from socai.infra.grpc_client import channel

    async with channel(address, settings.token_of("auditor")) as ch:
        await reconcile(audit, ledger_pb2_grpc.LedgerServiceStub(ch), ledger_name=address)
