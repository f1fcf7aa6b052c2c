"""``socai ledger …``: balances, statements and audits for operators, and cashier deposits.

    socai ledger balance player:42 [--at-transaction ID | --at 2026-11-29T12:00:00Z]
    socai ledger statement player:42 [--limit 20] [--page-token T]
    socai ledger verify                 exit 1 when any balance disagrees with its entries
    socai ledger trial-balance          exit 1 when the balances do not sum to 0
    socai ledger deposit 42 5000 --key ticket-981 [--reference "bank transfer 981"]
    socai ledger deposit house:bank 1000000 --key fund-2026-11   (a transfer from external:cashier)
    socai ledger export [--out journal.jsonl] [--format jsonl|csv] [--since ISO] [--until ISO]
                                        the journal (or a period of it) in commit order
    socai ledger holds [--all]          house:bank's holds for hands in play (--all: released ones too)
    socai ledger release-hold HAND_ID --reason TEXT   release the hold of a hand that will never settle

Every command talks gRPC to ``SOCAI_LEDGER_ADDR`` (``--addr`` overrides). Reads present the
operator's token, ``export`` the auditor's, ``deposit`` the cashier's (``SOCAI_SERVICE_TOKEN``
overrides them). ``export`` writes the file ``socai audit --journal`` reads
(``socai.audit.journal`` describes both formats). Add
``--json`` for machine-readable output (protobuf JSON mapping).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import grpc
from google.protobuf import json_format

from socai import accounts, errors
from socai.audit import journal
from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import from_rpc_error

RPC_TIMEOUT_S = 30.0
EXPORT_PAGE_SIZE = 1000  # ListTransactions' maximum: fewest round trips


def add_commands(sub: Any, command: Any) -> None:
    ledger = sub.add_parser("ledger", help="balances, statements, journal audits and deposits (ledger service)")
    ledger.add_argument("--addr", default=None, help="ledger gRPC address (default SOCAI_LEDGER_ADDR)")
    ledger.add_argument("--json", action="store_true", help="print protobuf JSON")
    cmds = ledger.add_subparsers(dest="ledger_command", required=True)

    p = cmds.add_parser("balance", help="an account's balance, now or as of a transaction or a time")
    p.add_argument("account_id", help="e.g. player:42, house:fees")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--at-transaction", default=None, help="the balance right after this transaction")
    when.add_argument("--at", default=None, help="the balance at this ISO 8601 time (e.g. 2026-11-29T12:00:00Z)")

    p = cmds.add_parser("statement", help="an account's entries, newest first")
    p.add_argument("account_id")
    p.add_argument("--limit", type=int, default=20, help="entries per page (1-1000, default 20)")
    p.add_argument("--page-token", default="", help="next_page_token of the previous page")

    cmds.add_parser("verify", help="recompute every balance from the journal; exit 1 on any mismatch")
    cmds.add_parser("trial-balance", help="the sum of all balances per kind; exit 1 unless it is 0")

    p = cmds.add_parser("deposit", help="credit a player (or fund house:bank) from external:cashier")
    p.add_argument("target", help="a player id (42) or an account id (house:bank)")
    p.add_argument("amount_gold", type=int)
    p.add_argument("--key", required=True, help="idempotency key (a retry with the same key deposits once)")
    p.add_argument("--reference", default="", help="what the deposit is about (ticket, bank reference)")

    p = cmds.add_parser("export", help="the journal in commit order, for an offline audit (socai audit --journal)")
    p.add_argument("--out", default="-", help="output file (default: standard output)")
    p.add_argument("--format", choices=journal.FORMATS, default="jsonl", help="jsonl (one transaction a line) or csv")
    p.add_argument("--since", type=_when, default=None, help="transactions committed at or after (ISO 8601, UTC)")
    p.add_argument("--until", type=_when, default=None, help="transactions committed before (ISO 8601, UTC)")

    p = cmds.add_parser("holds", help="house:bank's holds for hands in play, oldest hand id first")
    p.add_argument("--all", action="store_true", help="released holds too")
    p.add_argument("--limit", type=int, default=100, help="holds per page (1-1000, default 100)")
    p.add_argument("--page-token", default="", help="next_page_token of the previous page")

    p = cmds.add_parser("release-hold", help="release the house:bank hold of a hand that will never settle")
    p.add_argument("hand_id")
    p.add_argument("--reason", required=True, help="why the hand will never settle (kept with the hold)")
    command("ledger")(cmd_ledger)


def _when(text: str) -> datetime:
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from exc
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def cmd_ledger(args: argparse.Namespace, settings: Settings) -> int:
    handler = _HANDLERS[args.ledger_command]
    caller = {"deposit": "cashier", "export": "auditor"}.get(args.ledger_command, "operator")
    address = args.addr or settings.ledger_addr

    async def main() -> int:
        async with channel(address, settings.token_of(caller)) as ch:
            try:
                return await handler(pb_grpc.LedgerServiceStub(ch), args)
            except grpc.aio.AioRpcError as exc:
                raise from_rpc_error(exc) from exc

    return asyncio.run(main())


def _print(args: argparse.Namespace, message: Any, text: str) -> None:
    if args.json:
        print(json_format.MessageToJson(message, preserving_proto_field_name=True))
    else:
        print(text)


async def _balance(stub: Any, args: argparse.Namespace) -> int:
    if args.at_transaction or args.at:
        request = pb.GetBalanceAtRequest(account_id=args.account_id)
        if args.at_transaction:
            request.transaction_id = args.at_transaction
        else:
            request.time.FromDatetime(datetime.fromisoformat(args.at.replace("Z", "+00:00")))
        reply = await stub.GetBalanceAt(request, timeout=RPC_TIMEOUT_S)
        when = f"after {args.at_transaction}" if args.at_transaction else f"at {args.at}"
        _print(args, reply, f"{args.account_id} {when}: {reply.balance_gold} gold (version {reply.account_version})")
        return 0
    account = (await stub.GetAccount(pb.GetAccountRequest(account_id=args.account_id), timeout=RPC_TIMEOUT_S)).account
    held = (
        f", {account.held_gold} held for hands in play, {account.balance_gold - account.held_gold} free"
        if account.held_gold
        else ""
    )
    _print(args, account, f"{account.account_id}: {account.balance_gold} gold{held} (version {account.version})")
    return 0


_HOLD_STATUS = {pb.HOLD_STATUS_OPEN: "open", pb.HOLD_STATUS_FINAL: "final", pb.HOLD_STATUS_RELEASED: "released"}


def _hold_line(h: pb.Hold) -> str:
    since = h.created_at.ToDatetime().isoformat(timespec="seconds")
    by = f" by {h.released_by}" if h.released_by else ""
    why = f": {h.release_reason}" if h.release_reason else ""
    return f"{h.hand_id:<40} {h.amount_gold:>15} {_HOLD_STATUS.get(h.status, '?'):<8} {since}{by}{why}"


async def _holds(stub: Any, args: argparse.Namespace) -> int:
    reply = await stub.ListHolds(
        pb.ListHoldsRequest(
            account_id=accounts.HOUSE_BANK, include_released=args.all, page_size=args.limit, page_token=args.page_token
        ),
        timeout=RPC_TIMEOUT_S,
    )
    lines = [f"{'hand':<40} {'gold':>15} {'status':<8} since (UTC)"]
    lines += [_hold_line(h) for h in reply.holds]
    if reply.next_page_token:
        lines.append(f"more: --page-token {reply.next_page_token}")
    _print(args, reply, "\n".join(lines))
    return 0


async def _release_hold(stub: Any, args: argparse.Namespace) -> int:
    reply = await stub.ReleaseHold(
        pb.ReleaseHoldRequest(account_id=accounts.HOUSE_BANK, hand_id=args.hand_id, reason=args.reason),
        timeout=RPC_TIMEOUT_S,
    )
    _print(args, reply, f"{_hold_line(reply.hold)}\nhouse:bank: {reply.free_gold} gold free")
    return 0


async def _statement(stub: Any, args: argparse.Namespace) -> int:
    reply = await stub.ListEntries(
        pb.ListEntriesRequest(account_id=args.account_id, page_size=args.limit, page_token=args.page_token),
        timeout=RPC_TIMEOUT_S,
    )
    lines = [f"{'journal':>9}  {'time (UTC)':<26}  {'amount':>15}  {'balance after':>15}  transaction"]
    for e in reply.entries:
        at = e.created_at.ToDatetime().isoformat(timespec="milliseconds")
        lines.append(
            f"{e.journal_seq:>9}  {at:<26}  {e.amount_gold:>+15}  {e.balance_after_gold:>15}  {e.transaction_id}"
        )
    if reply.next_page_token:
        lines.append(f"more: --page-token {reply.next_page_token}")
    _print(args, reply, "\n".join(lines))
    return 0


async def _verify(stub: Any, args: argparse.Namespace) -> int:
    reply = await stub.VerifyJournal(pb.VerifyJournalRequest(), timeout=300)
    lines = [
        f"journal {'OK' if reply.ok else 'MISMATCHES'}: {reply.accounts_checked} accounts, "
        f"{reply.entries_checked} entries checked"
    ]
    for m in reply.mismatches:
        lines.append(
            f"  {m.account_id or '-'}: stored {m.stored_balance_gold}, computed {m.computed_balance_gold}: {m.detail}"
        )
    _print(args, reply, "\n".join(lines))
    return 0 if reply.ok else 1


async def _trial_balance(stub: Any, args: argparse.Namespace) -> int:
    reply = await stub.TrialBalance(pb.TrialBalanceRequest(), timeout=RPC_TIMEOUT_S)
    lines = [f"{k.kind:<10} {k.balance_gold:>20} gold  ({k.accounts} accounts)" for k in reply.kinds]
    lines.append(f"{'total':<10} {reply.total_gold:>20} gold  ({'balanced' if reply.total_gold == 0 else 'NOT 0'})")
    _print(args, reply, "\n".join(lines))
    return 0 if reply.total_gold == 0 else 1


async def _deposit(stub: Any, args: argparse.Namespace) -> int:
    if ":" in args.target:
        reply = await stub.Transfer(
            pb.TransferRequest(
                idempotency_key=args.key,
                from_account_id=accounts.EXTERNAL_CASHIER,
                to_account_id=args.target,
                amount_gold=args.amount_gold,
                kind="deposit",
                reference=args.reference,
            ),
            timeout=RPC_TIMEOUT_S,
        )
        target = args.target
    else:
        reply = await stub.Deposit(
            pb.DepositRequest(
                idempotency_key=args.key, player_id=args.target, amount_gold=args.amount_gold, reference=args.reference
            ),
            timeout=RPC_TIMEOUT_S,
        )
        target = accounts.player(args.target)
    result = reply.result
    status = pb.PostStatus.Name(result.status).removeprefix("POST_STATUS_").lower()
    after = next((e.balance_after_gold for e in result.transaction.entries if e.account_id == target), None)
    _print(
        args,
        reply,
        f"{status}: {args.amount_gold} gold to {target} (transaction {result.transaction.transaction_id}, "
        f"balance after {after})",
    )
    return 0


async def _export(stub: Any, args: argparse.Namespace) -> int:
    if args.since is not None and args.until is not None and args.until <= args.since:
        raise errors.InvalidArgument("BAD_PERIOD", "--until must be after --since")
    period = (args.since, args.until)
    if args.out == "-":
        count, sealed = await _write_journal(stub, args.format, sys.stdout, period)
    else:
        # Written next to the target and renamed at the end: an interrupted export never
        # leaves a file that looks like a whole journal.
        target = Path(args.out)
        partial = target.with_name(target.name + ".partial")
        with partial.open("w", encoding="utf-8", newline="") as out:
            count, sealed = await _write_journal(stub, args.format, out, period)
        partial.replace(target)
    note = (
        f", {sealed} page seals"
        if sealed
        else (", unsigned (the ledger has no journal seal key)" if args.format == "jsonl" else "")
    )
    print(f"exported {count} transactions{note}", file=sys.stderr)
    return 0


async def _write_journal(
    stub: Any, fmt: str, out: IO[str], period: tuple[datetime | None, datetime | None]
) -> tuple[int, int]:
    """Every page of ``ListTransactions`` in order (of the period, when one is given), written
    as it arrives (memory stays one page), each followed by the ledger's page seal in JSONL
    (a CSV row has no place for it); returns (transactions, page seals) written."""
    csv_out = journal.CsvWriter(out) if fmt == "csv" else None
    count, sealed, token = 0, 0, ""
    since, until = period
    while True:
        request = pb.ListTransactionsRequest(page_size=EXPORT_PAGE_SIZE, page_token=token)
        if since is not None:
            request.since.FromDatetime(since)
        if until is not None:
            request.until.FromDatetime(until)
        reply = await stub.ListTransactions(request, timeout=RPC_TIMEOUT_S)
        if csv_out:
            count += csv_out.write(reply.transactions)
        else:
            count += journal.write_jsonl(reply.transactions, out, reply.seal if reply.HasField("seal") else None)
            sealed += bool(reply.seal.signature)
        token = reply.next_page_token
        if not token:
            return count, sealed


_HANDLERS: dict[str, Callable[[Any, argparse.Namespace], Awaitable[int]]] = {
    "balance": _balance,
    "statement": _statement,
    "verify": _verify,
    "trial-balance": _trial_balance,
    "deposit": _deposit,
    "export": _export,
    "holds": _holds,
    "release-hold": _release_hold,
}
