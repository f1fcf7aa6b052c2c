"""``socai demo`` — the main job behind ``make run``.

Brings up the whole stack (embedded NATS and PostgreSQL unless URLs are configured, then
the ledger, table and settlement services as their own processes), lets bots play hands of
every game in the rules registry through the table service's gRPC API, waits until every
finished hand is settled and every leaving player is cashed out, audits the event log
against the ledger, and prints a summary: hands per game, gold moved, fees, penalties by
reason, the trial balance (0) and the audit verdict. Exit status 0 only when all of that
holds. Every game added to the registry later joins without a change here.

``--table-instances N`` and ``--settlement-instances M`` run that many processes of each, as
``socai up`` does: the bots dial every table instance (round robin), and a call that reaches
an instance not running its table is forwarded to the one that does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from socai import errors
from socai.infra.config import Settings

SETTLE_TIMEOUT_S = 120.0
CASHOUT_TIMEOUT_S = 60.0
DEMO_HEARTBEAT_TIMEOUT_S = 2.0


def add_commands(sub: Any, command: Any) -> None:
    p = sub.add_parser("demo", help="the main job: stack up, bots play every game, settle, audit, summary")
    p.add_argument("--tables-per-game", type=int, default=2, help="tables per game (default 2)")
    p.add_argument("--hands", type=int, default=8, help="hands per table (default 8)")
    p.add_argument("--games", default="all", help="comma-separated game ids, or 'all' (default)")
    p.add_argument("--timeout-rate", type=float, default=0.03, help="chance a bot lets its timer run out")
    p.add_argument("--leave-rate", type=float, default=0.01, help="chance a bot leaves mid-hand")
    p.add_argument(
        "--disconnect-rate",
        type=float,
        default=0.02,
        help="chance a bot goes silent at a decision (disconnected by the table, reconnects later)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the bots' choices")
    p.add_argument(
        "--table-instances",
        type=int,
        default=1,
        choices=range(1, 17),
        metavar="N",
        help="table-service processes sharing the tables through leases; the bots dial all of them (default 1)",
    )
    p.add_argument(
        "--settlement-instances",
        type=int,
        default=1,
        choices=range(1, 17),
        metavar="M",
        help="settlement processes sharing the work through leases (default 1)",
    )
    command("demo")(cmd_demo)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from rich.console import Console

    from socai_cli.stack import Stack

    console = Console()
    if "SOCAI_HEARTBEAT_TIMEOUT_S" not in os.environ:
        # Bots that go silent are disconnected within the demo's few seconds per hand.
        settings = replace(settings, heartbeat_timeout_s=DEMO_HEARTBEAT_TIMEOUT_S)
    stack = Stack(settings, instances={"table": args.table_instances, "settlement": args.settlement_instances})
    try:
        with console.status("starting NATS, PostgreSQL and the services…"):
            started = stack.start()
        running = stack.resolved_settings()
        console.print(f"[bold]socai is up[/]: services {', '.join(started)}; NATS {stack.nats_url}")
        missing = {"ledger", "table", "settlement"} - {name.split("-")[0] for name in started}
        if missing:
            console.print(f"[red]cannot run the demo without: {', '.join(sorted(missing))}[/]")
            return 2
        return asyncio.run(_demo(args, running, console))
    except errors.SocaiError as exc:
        console.print(f"[red]socai demo: {exc.code}: {exc.message}[/]")
        return 2
    finally:
        with console.status("stopping…"):
            stack.stop()


async def _demo(args: argparse.Namespace, settings: Settings, console: Any) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from socai_table.cli import parse_games
    from socai_table.simulate import SimConfig, Simulator

    games = parse_games(args.games)
    config = SimConfig(
        tables=args.tables_per_game * len(games),
        hands=args.hands,
        games=games,
        timeout_rate=args.timeout_rate,
        leave_rate=args.leave_rate,
        disconnect_rate=args.disconnect_rate,
        seed=args.seed,
    )
    columns = (TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        play = progress.add_task("playing hands", total=config.tables * config.hands)
        sim = Simulator(settings, config, on_hand=lambda game: progress.advance(play))
        try:
            result = await sim.run()
        finally:
            await sim.close()
        progress.update(play, completed=config.tables * config.hands)
        tables = [t.table_id for t in result.tables]
        ended = await _ended_hands(settings, tables)
        settle = progress.add_task("settling hands", total=len(ended))
        unsettled = await _wait_settled(settings, ended, lambda n: progress.update(settle, completed=n))
        cash = progress.add_task("cashing out players", total=None)
        open_escrows = await _wait_cashed_out(settings, tables)
        progress.update(cash, total=1, completed=1)
    report, trial_total = await _audit(settings)
    # Plain print: the report is a fixed-width table that must not be re-wrapped.
    print()
    print(report.render(), end="")
    print(f"trial balance: {trial_total:,} gold (the sum of every account; must be 0)", flush=True)
    problems = list(result.problems)  # tables where no hand started for a while (FROZEN …)
    if unsettled:
        problems.append(f"{len(unsettled)} hands not settled: {', '.join(unsettled[:5])}")
    if open_escrows:
        problems.append(f"{len(open_escrows)} escrows not cashed out: {', '.join(open_escrows[:5])}")
    if trial_total != 0:
        problems.append("the trial balance is not 0")
    if not report.ok:
        problems.append("the audit found mismatches")
    console.print(
        f"bots played {len(ended)} hands on {len(result.tables)} tables in {result.elapsed_s:.1f}s; "
        f"{len(ended) - len(unsettled)} settled, {report.hands_verified} audited"
    )
    if problems:
        for problem in problems:
            console.print(f"[red]PROBLEM[/]: {problem}")
        return 1
    console.print("[green]trial balance 0, audit clean[/]")
    return 0


async def _ended_hands(settings: Settings, tables: Sequence[str]) -> list[str]:
    """Every hand of ``tables`` that has a HandEnded in the event log."""
    from socai.events.log import EventLog
    from socai.events.model import HandEnded
    from socai.infra.nats import connect

    nc = await connect(settings.nats_url_for("auditor"), name="socai-demo")
    try:
        log = EventLog(nc, settings.events_stream, settings.events_prefix)
        ended = []
        for table_id in tables:
            async for stored in log.read(f"{settings.events_prefix}.{table_id}.*"):
                if isinstance(stored.event.body, HandEnded):
                    ended.append(stored.event.hand_id)
        return ended
    finally:
        await nc.close()


async def _wait_settled(settings: Settings, hands: Sequence[str], progress: Any) -> list[str]:
    import grpc

    from socai.gen.settlement.v1 import settlement_pb2 as spb
    from socai.gen.settlement.v1 import settlement_pb2_grpc as sgrpc
    from socai.infra.grpc_client import channel

    left = list(hands)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    async with channel(settings.settlement_addr, settings.token_of("operator")) as ch:
        stub = sgrpc.SettlementServiceStub(ch)
        while left and time.monotonic() < deadline:
            still = []
            for hand_id in left:
                try:
                    await stub.GetSettlement(spb.GetSettlementRequest(hand_id=hand_id))
                except grpc.aio.AioRpcError as exc:
                    if exc.code() != grpc.StatusCode.NOT_FOUND:
                        raise
                    still.append(hand_id)
            left = still
            progress(len(hands) - len(left))
            if left:
                await asyncio.sleep(0.25)
    return left


async def _wait_cashed_out(settings: Settings, tables: Sequence[str]) -> list[str]:
    """Escrow accounts of ``tables`` that still hold gold when the wait runs out."""
    from socai.gen.ledger.v1 import ledger_pb2 as lpb
    from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
    from socai.infra.grpc_client import channel

    deadline = time.monotonic() + CASHOUT_TIMEOUT_S
    async with channel(settings.ledger_addr, settings.token_of("operator")) as ch:
        stub = lgrpc.LedgerServiceStub(ch)
        while True:
            holding = []
            for table_id in tables:
                token = ""
                while True:
                    page = await stub.ListAccounts(
                        lpb.ListAccountsRequest(id_prefix=f"escrow:{table_id}:", page_size=1000, page_token=token)
                    )
                    holding += [a.account_id for a in page.accounts if a.balance_gold != 0]
                    token = page.next_page_token
                    if not token:
                        break
            if not holding or time.monotonic() > deadline:
                return holding
            await asyncio.sleep(0.25)


async def _audit(settings: Settings) -> tuple[Any, int]:
    from socai.audit.auditor import reconcile, verify
    from socai.audit.export import read_stream
    from socai.events.log import EventLog
    from socai.gen.ledger.v1 import ledger_pb2 as lpb
    from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
    from socai.infra.grpc_client import channel
    from socai.infra.nats import connect

    nc = await connect(settings.nats_url_for("auditor"), name="socai-demo-audit")
    try:
        log = EventLog(nc, settings.events_stream, settings.events_prefix)
        raws = [r async for r in read_stream(log)]
    finally:
        await nc.close()
    audit = verify(raws, source=f"stream {settings.events_stream}", allow_open=True)
    async with channel(settings.ledger_addr, settings.token_of("auditor")) as ch:
        stub = lgrpc.LedgerServiceStub(ch)
        await reconcile(audit, stub, ledger_name=settings.ledger_addr)
        trial = await stub.TrialBalance(lpb.TrialBalanceRequest())
    return audit.report, int(trial.total_gold)
