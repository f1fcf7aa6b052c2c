"""``socai simulate``: bots playing through the table service (see socai_table.simulate);
``socai table quarantine``: the messages a table's rebuild would not apply;
``socai table close``: an operator closes a table (``CloseTable``).

    socai table quarantine list [--table T] [--all]     unresolved (or all) records, as JSON
    socai table quarantine resolve STREAM_SEQ --note TEXT   acknowledge one (an operator)
    socai table close TABLE_ID --reason TEXT [--wait-s 60]  close it; wait until it is CLOSED

The records live in the table service's schema (``SOCAI_DATABASE_URL``, the embedded
server otherwise). Exit status of ``resolve``: 1 when there is no such unresolved record.
``close`` calls the table service (``SOCAI_TABLE_ADDR``) with the operator's token and
prints the table as JSON; exit status 1 when it is still closing after ``--wait-s``
(a hand in play finishes first; 0 returns at once).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from socai.infra.config import Settings
from socai.rules import registry


def add_commands(sub: Any, command: Any) -> None:
    p = sub.add_parser("simulate", help="bots play random legal moves through the table service")
    p.add_argument("--tables", type=int, default=3, help="tables to open (default 3)")
    p.add_argument("--hands", type=int, default=5, help="hands per table (default 5)")
    p.add_argument("--games", default="all", help="comma-separated game ids, or 'all' available games")
    p.add_argument("--stake", type=int, default=100, help="table stake in gold (default 100)")
    p.add_argument("--players", type=int, default=0, help="bots per table (default: per game)")
    p.add_argument("--timeout-rate", type=float, default=0.02, help="chance a bot lets its timer run out")
    p.add_argument("--leave-rate", type=float, default=0.0, help="chance a bot leaves mid-hand")
    p.add_argument(
        "--disconnect-rate",
        type=float,
        default=0.0,
        help="chance a bot goes silent at a decision (the table disconnects it; it reconnects later)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the bots' choices (not of the cards)")
    p.add_argument(
        "--frozen-after-s",
        type=float,
        default=30.0,
        help="a table where no hand started for this long is frozen: reported, and the exit status is 1 (default 30)",
    )
    command("simulate")(cmd_simulate)
    table = sub.add_parser("table", help="close a table; table service records (quarantined messages)")
    tsub = table.add_subparsers(dest="table_command", required=True)
    quarantine = tsub.add_parser("quarantine", help="messages a table's rebuild did not apply")
    qsub = quarantine.add_subparsers(dest="quarantine_command", required=True)
    listing = qsub.add_parser("list", help="quarantined messages, oldest first (JSON)")
    listing.add_argument("--table", default="", help="one table only")
    listing.add_argument("--all", action="store_true", help="resolved ones too")
    resolve = qsub.add_parser("resolve", help="acknowledge a quarantined message")
    resolve.add_argument("stream_seq", type=int)
    resolve.add_argument("--note", required=True, help="what was decided (kept with the record)")
    close = tsub.add_parser("close", help="close a table: chips returned, a carried Gà shared, no more hands")
    close.add_argument("table_id")
    close.add_argument("--reason", required=True, help="why (kept with the close)")
    close.add_argument(
        "--wait-s", type=float, default=60.0, help="wait this long for the close to complete (default 60; 0: no wait)"
    )
    command("table")(cmd_table)


def cmd_table(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from socai_table.store import TableStore

    if args.table_command == "close":
        return asyncio.run(close_table(settings, args.table_id, args.reason, args.wait_s))

    async def main() -> int:
        store = await TableStore.open(settings.effective_database_url, max_size=1)
        try:
            if args.quarantine_command == "list":
                rows = await store.quarantined(args.table, include_resolved=args.all)
                print(json.dumps(rows, indent=2, default=str))
                return 0
            done = await store.resolve_quarantined(args.stream_seq, args.note)
            print("resolved" if done else f"no unresolved quarantined message at stream sequence {args.stream_seq}")
            return 0 if done else 1
        finally:
            await store.close()

    return asyncio.run(main())


CLOSE_POLL_S = 0.25


async def close_table(settings: Settings, table_id: str, reason: str, wait_s: float) -> int:
    """``socai table close``: CloseTable, then GetTable until the table is CLOSED."""
    import json
    import time

    import grpc
    from google.protobuf import json_format

    from socai.gen.table.v1 import table_pb2 as pb
    from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
    from socai.infra.grpc_client import channel
    from socai.infra.grpc_errors import from_rpc_error

    async with channel(settings.table_addr, settings.token_of("operator")) as ch:
        stub = pb_grpc.TableServiceStub(ch)
        try:
            table = (await stub.CloseTable(pb.CloseTableRequest(table_id=table_id, reason=reason))).table
            deadline = time.monotonic() + wait_s
            while table.status != pb.TABLE_STATUS_CLOSED and time.monotonic() < deadline:
                await asyncio.sleep(CLOSE_POLL_S)
                table = (await stub.GetTable(pb.GetTableRequest(table_id=table_id))).table
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc
    print(json.dumps(json_format.MessageToDict(table, preserving_proto_field_name=True), indent=2))
    closed = table.status == pb.TABLE_STATUS_CLOSED
    return 0 if closed or wait_s <= 0 else 1


def parse_games(text: str) -> tuple[str, ...]:
    if text in ("", "all"):
        return registry.available()
    games = tuple(g.strip() for g in text.split(",") if g.strip())
    for game in games:
        registry.get(game)  # raises a clear error for an unknown or unavailable game
    return games


def cmd_simulate(args: argparse.Namespace, settings: Settings) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from socai_table.simulate import SimConfig, Simulator

    config = SimConfig(
        tables=args.tables,
        hands=args.hands,
        games=parse_games(args.games),
        stake_gold=args.stake,
        players=args.players,
        timeout_rate=args.timeout_rate,
        leave_rate=args.leave_rate,
        disconnect_rate=args.disconnect_rate,
        seed=args.seed,
        frozen_after_s=args.frozen_after_s,
    )
    total = config.tables * config.hands
    with Progress(
        TextColumn("[bold]hands"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=False
    ) as progress:
        task = progress.add_task("hands", total=total)

        async def main() -> Any:
            sim = Simulator(settings, config, on_hand=lambda game: progress.advance(task))
            try:
                return await sim.run()
            finally:
                await sim.close()

        result = asyncio.run(main())
    print(f"played {result.hands} hands on {len(result.tables)} tables in {result.elapsed_s:.1f}s")
    for game, hands in result.by_game().items():
        print(f"  {game:<14} {hands:>6} hands")
    silences = sum(t.silences for t in result.tables)
    if silences:
        print(f"  {silences} bots went silent (disconnected), {sum(t.reconnects for t in result.tables)} reconnected")
    actions = sum(t.actions for t in result.tables)
    rejected = sum(sum(t.rejected.values()) for t in result.tables)
    print(f"  actions accepted {actions}, rejected {rejected} (races with timers are expected)")
    reopened = sum(t.streams_reopened for t in result.tables)
    retries = sum(t.retries for t in result.tables)
    if reopened or retries:
        print(f"  the table service went away: {retries} calls retried, {reopened} WatchTable streams opened again")
    early = [t.table_id for t in result.tables if t.ended_early]
    if early:
        print(f"  {len(early)} tables ended early (too few bots left with chips): {', '.join(early)}")
    for line in result.problems:
        print(line)
    return 1 if result.problems else 0
