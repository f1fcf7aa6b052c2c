"""The faults, and the run that injects them one after another under bot load.

Each fault is injected while the bots play, the stack is given back what it lost (a killed
service is started again at once, a stopped one continued, NATS or PostgreSQL started on the
same data), and then the checks of ``checks.py`` must hold. The recovery time of a fault is
measured from the moment it was injected until every table with two or more players has
started a new hand *and* every hand finished before the restore is settled; its parts are
reported too (how long until the process served again, until the tables moved, until
settlement caught up).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, NotFoundError

from socai.client import TableError
from socai.events.log import EventLog
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.infra.grpc_client import channel
from socai.infra.nats import connect
from socai.infra.nats_auth import TEST_HARNESS
from tests.chaos.bots import Bots
from tests.chaos.checks import (
    escrow_mismatch_metric,
    ledger_verdict,
    money_problems,
    read_books,
    run_audit,
    scan_stream,
    tenure_problems,
    wait_settled,
)
from tests.chaos.stack import ProcessStack, metric_sum


@dataclass(frozen=True)
class ChaosOptions:
    root: Path
    tables: int = 6
    games: tuple[str, ...] = ()  # () = every game in the rules registry
    faults: tuple[str, ...] = ()
    warmup_s: float = 8.0
    outage_s: float = 6.0  # NATS / PostgreSQL down this long (longer than a publish timeout)
    stop_s: float = 12.0  # SIGSTOP this long (past the RPC deadlines and turn timers)
    stop_settlement_s: float = 35.0  # past settlement's ack_wait (30 s)
    resume_timeout_s: float = 60.0
    settle_timeout_s: float = 90.0
    audit_every_fault: bool = True
    seed: int | None = 17
    # Processes per service at start (scale-out: {"table": 2, "settlement": 2}) and the
    # environment of every service (SOCAI_EVENT_PARTITIONS, the lease TTLs …).
    instances: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


# Faults that fail on today's code (issue 17 defect 1); `--with-known-defects` adds them.
KNOWN_DEFECTS = ("foreign_messages",)


@dataclass
class Ctx:
    stack: ProcessStack
    bots: Bots
    options: ChaosOptions
    tampered: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    # fault -> service -> seconds from the SIGKILL until every partition had a live holder
    handovers: dict[str, dict[str, float | None]] = field(default_factory=dict)


FaultFn = Callable[[Ctx], Awaitable[float]]  # injects and restores; returns the restore time (s)


# ---- the faults -----------------------------------------------------------------------


def _kill(name: str) -> FaultFn:
    async def fault(ctx: Ctx) -> float:
        return await ctx.stack.kill_and_restart(name)

    fault.__doc__ = f"SIGKILL the {name} service and start it again at once"
    return fault


def _stop(name: str, attr: str = "stop_s") -> FaultFn:
    async def fault(ctx: Ctx) -> float:
        seconds = getattr(ctx.options, attr)
        ctx.stack.pause(name)
        await asyncio.sleep(seconds)
        ctx.stack.resume(name)
        return seconds

    fault.__doc__ = f"SIGSTOP the {name} service past its timeouts, then SIGCONT"
    return fault


LEASE_BUCKETS = {"table": "table_leases_{stream}", "settlement": "settlement_leases_{stream}"}
HANDOVER_TIMEOUT_S = 90.0
DUPLICATE_MARGIN_S = 10.0  # a republished message this much younger than the window: surely inside it


async def holders(ctx: Ctx, js: JetStreamContext) -> dict[str, dict[int, str]]:
    """Each scaled-out service's partition holders as its lease bucket says now."""
    s = ctx.stack.settings
    assert s is not None
    partitions = max(1, int(ctx.options.env.get("SOCAI_EVENT_PARTITIONS", "0") or 0))
    out: dict[str, dict[int, str]] = {}
    for service, bucket in LEASE_BUCKETS.items():
        kv = await js.key_value(bucket.format(stream=s.events_stream))
        held: dict[int, str] = {}
        for k in range(partitions):
            with contextlib.suppress(KeyNotFoundError):
                held[k] = ((await kv.get(f"partition.{k}")).value or b"").decode()
        out[service] = held
    return out


async def watch_handover(ctx: Ctx, live: dict[str, set[str]], began: float) -> dict[str, float | None]:
    """Seconds from ``began`` (the SIGKILL) until every partition of each service is held
    by one of ``live[service]`` (the instance ids that run; the caller adds a restarted one
    once it serves, since its id is the dead one's). None: not within HANDOVER_TIMEOUT_S."""
    s = ctx.stack.settings
    assert s is not None
    partitions = max(1, int(ctx.options.env.get("SOCAI_EVENT_PARTITIONS", "0") or 0))
    done: dict[str, float | None] = {}
    nc = await connect(s.nats_url_for(TEST_HARNESS), name="socai-chaos-leases")
    try:
        js = nc.jetstream()
        while len(done) < len(live) and time.monotonic() - began < HANDOVER_TIMEOUT_S:
            with contextlib.suppress(Exception):  # NATS is not what this fault hurts; ask again
                for service, held in (await holders(ctx, js)).items():
                    if service not in done and len(held) == partitions and set(held.values()) <= live[service]:
                        done[service] = round(time.monotonic() - began, 2)
            await asyncio.sleep(0.05)
    finally:
        await nc.close()
    return {service: done.get(service) for service in live}


async def _kill_instances(ctx: Ctx, name: str, kill: tuple[str, str], start: tuple[str, str]) -> float:
    """SIGKILL ``kill`` (a table and a settlement instance), start ``start``, and record the
    handover time of each service (``ctx.handovers[name]``); the seconds until both serve."""
    began = time.monotonic()
    for victim in kill:
        await ctx.stack.stop_service(victim, signal.SIGKILL)
    live = {
        service: {n for n in ctx.stack.procs if n.split("-")[0] == service and n not in kill}
        for service in LEASE_BUCKETS
    }
    watcher = asyncio.create_task(watch_handover(ctx, live, began))
    for newcomer in start:
        await ctx.stack.start_service(newcomer)
        live[newcomer.split("-")[0]].add(newcomer)  # its id may be the dead one's (adopt_own)
    restored = time.monotonic() - began
    ctx.handovers[name] = await watcher
    return restored


async def scaleout_kill_first(ctx: Ctx) -> float:
    """SIGKILL the first table and settlement instances; their partitions move to the
    second ones after the lease TTL; then start them again (they take their share back)"""
    return await _kill_instances(ctx, "scaleout_kill_first", ("table", "settlement"), ("table", "settlement"))


async def scaleout_kill_second(ctx: Ctx) -> float:
    """SIGKILL the second table and settlement instances for good, and start a third of
    each: the partitions end shared by the first and the third"""
    return await _kill_instances(ctx, "scaleout_kill_second", ("table-1", "settlement-1"), ("table-2", "settlement-2"))


async def nats_sigterm(ctx: Ctx) -> float:
    """nats-server stopped with SIGTERM, down for the outage, started on the same store"""
    return await ctx.stack.restart_nats(signal.SIGTERM, ctx.options.outage_s)


async def nats_sigkill(ctx: Ctx) -> float:
    """nats-server killed with SIGKILL, down for the outage, started on the same store"""
    return await ctx.stack.restart_nats(signal.SIGKILL, ctx.options.outage_s)


async def postgres_fast(ctx: Ctx) -> float:
    """PostgreSQL fast shutdown (SIGINT), down for the outage, started on the same data"""
    return await ctx.stack.restart_postgres("fast", ctx.options.outage_s)


async def postgres_immediate(ctx: Ctx) -> float:
    """PostgreSQL immediate shutdown (SIGQUIT: crash recovery at start), down for the outage"""
    return await ctx.stack.restart_postgres("immediate", ctx.options.outage_s)


async def duplicate_messages(ctx: Ctx) -> float:
    """every table's latest event and its last HandEnded published again with their own
    Nats-Msg-Id: the stream must drop them (duplicate window) and nothing may change.

    Only messages stored within the stream's duplicate window are sent again: that is a
    writer's retry after a lost acknowledgement, which JetStream deduplicates; an older
    copy is a stranger's message, which no retry produces and which the table's rebuild
    quarantines and the audit names (a table idle for longer than the window, a frozen
    one, has only such old messages)."""
    s = ctx.stack.settings
    assert s is not None
    nc = await connect(s.nats_url_for(TEST_HARNESS), name="socai-chaos-dup")
    try:
        js = nc.jetstream()
        log = EventLog(nc, s.events_stream, s.events_prefix)
        await log.layout()  # a partitioned stream stores a table's subjects under its partition

        async def last_of(subject: str) -> Any:
            for stored_as in log.filters(subject):
                with contextlib.suppress(NotFoundError):
                    return await js.get_last_msg(s.events_stream, stored_as)
            return None

        info = await js.stream_info(s.events_stream)
        before = info.state.last_seq
        window_s = float(info.config.duplicate_window or 0) - DUPLICATE_MARGIN_S
        stored = 0
        scan = await scan_stream(ctx.stack)
        subjects = [f"{s.events_prefix}.{table_id}.*" for table_id in ctx.bots.loads] + [
            f"{s.events_prefix}.{table_id}.{hand_id}"
            for hand_id, table_id in list(scan.ended.items())[-len(ctx.bots.loads) :]
        ]
        for subject in subjects:
            msg = await last_of(subject)
            if msg is None or msg.time is None or (datetime.now(UTC) - msg.time).total_seconds() > window_s:
                continue
            headers = {k: v for k, v in (msg.headers or {}).items() if not k.startswith("Nats-Expected")}
            ack = await js.publish(str(msg.subject), bytes(msg.data or b""), stream=s.events_stream, headers=headers)
            if not ack.duplicate:
                stored += 1
        after = (await js.stream_info(s.events_stream)).state.last_seq
    finally:
        await nc.close()
    if stored:
        ctx.notes.append(
            f"duplicate_messages: {stored} duplicates were stored as new messages (seq {before} -> {after})"
        )
    return 0.0


async def foreign_messages(ctx: Ctx) -> float:
    """foreign messages on the event stream (issue 17 defect 1): garbage bytes on one
    table's current hand, a copy of an earlier event appended to another table's current
    hand, a second HandEnded (no Msg-Id) on a third table's finished hand; then the table
    service is SIGKILLed and must rebuild every table and carry on"""
    s = ctx.stack.settings
    assert s is not None
    tables = list(ctx.bots.loads.values())
    nc = await connect(s.nats_url_for(TEST_HARNESS), name="socai-chaos-foreign")
    try:
        js = nc.jetstream()
        if len(tables) >= 1:
            t = tables[0]
            hand = f"{t.table_id}-h{max(t.hand, 1)}"
            await js.publish(f"{s.events_prefix}.{t.table_id}.{hand}", b"\x00not an event\xff", stream=s.events_stream)
            ctx.tampered.add(hand)
        if len(tables) >= 2:
            t = tables[1]
            hand = f"{t.table_id}-h{max(t.hand, 1)}"
            first = await js.get_msg(
                s.events_stream, subject=f"{s.events_prefix}.{t.table_id}.{hand}", seq=1, next=True
            )
            await js.publish(f"{s.events_prefix}.{t.table_id}.{hand}", bytes(first.data or b""), stream=s.events_stream)
            ctx.tampered.add(hand)
        if len(tables) >= 3:
            t = tables[2]
            hand = f"{t.table_id}-h{max(t.hand - 2, 1)}"
            msg = await js.get_last_msg(s.events_stream, f"{s.events_prefix}.{t.table_id}.{hand}")
            await js.publish(f"{s.events_prefix}.{t.table_id}.{hand}", bytes(msg.data or b""), stream=s.events_stream)
            ctx.tampered.add(hand)
    finally:
        await nc.close()
    return await ctx.stack.kill_and_restart("table")


FAULTS: dict[str, FaultFn] = {
    "kill_ledger": _kill("ledger"),
    "kill_table": _kill("table"),
    "kill_settlement": _kill("settlement"),
    "nats_sigterm": nats_sigterm,
    "nats_sigkill": nats_sigkill,
    "postgres_fast": postgres_fast,
    "postgres_immediate": postgres_immediate,
    "duplicate_messages": duplicate_messages,
    "stop_ledger": _stop("ledger"),
    "stop_table": _stop("table"),
    "stop_settlement": _stop("settlement", "stop_settlement_s"),
    "foreign_messages": foreign_messages,
    "scaleout_kill_first": scaleout_kill_first,
    "scaleout_kill_second": scaleout_kill_second,
}
SCALEOUT_FAULTS = ("scaleout_kill_first", "scaleout_kill_second")
DEFAULT_FAULTS = tuple(name for name in FAULTS if name not in KNOWN_DEFECTS and name not in SCALEOUT_FAULTS)
SHORT_FAULTS = (
    "kill_table",
    "kill_settlement",
    "kill_ledger",
    "nats_sigkill",
    "postgres_immediate",
    "duplicate_messages",
)


# ---- the run --------------------------------------------------------------------------


async def wait_tables_resumed(bots: Bots, baseline: dict[str, int], timeout_s: float) -> tuple[float | None, list[str]]:
    """Wait until every table with two or more players has started a hand after its
    ``baseline`` number; the seconds it took (None on time-out) and the frozen tables."""
    started = time.monotonic()
    while True:
        frozen = [t for t, load in bots.loads.items() if load.seated >= 2 and load.hand <= baseline[t]]
        if not frozen:
            return time.monotonic() - started, []
        if time.monotonic() - started > timeout_s:
            return None, frozen
        await asyncio.sleep(0.2)


async def check_after(ctx: Ctx, name: str, injected_at: float, restored_at: float) -> dict[str, Any]:
    stack, bots, o = ctx.stack, ctx.bots, ctx.options
    baseline = {t: load.hand for t, load in bots.loads.items()}
    cutoff = datetime.now(UTC)
    result: dict[str, Any] = {"fault": name, "restore_s": round(restored_at - injected_at, 2)}
    problems: list[str] = []
    exited = stack.exited()
    if exited:
        problems.append(f"services exited: {exited}")
        for service in exited:
            result.setdefault("exit_logs", {})[service] = stack.tail(service, 1500)
    resumed_s, frozen = await wait_tables_resumed(bots, baseline, o.resume_timeout_s)
    result["tables_resumed_s"] = None if resumed_s is None else round(resumed_s, 2)
    if frozen:
        problems.append(
            f"{len(frozen)} of {len(bots.loads)} tables frozen {o.resume_timeout_s:.0f}s after the restore: {frozen[:8]}"
        )
        result["frozen"] = {t: {"hand": bots.loads[t].hand, "seated": bots.loads[t].seated} for t in frozen}
    # Every hand started before the restore has ended now (on tables that moved): settle them.
    upto = {t: baseline[t] for t in bots.loads if t not in frozen}
    settled_s, scan, books = await wait_settled(stack, upto, o.settle_timeout_s)
    result["settled_s"] = None if settled_s is None else round(settled_s, 2)
    # Both waits run one after the other: recovered when the later of the two was met.
    recovered = resumed_s is not None and settled_s is not None
    result["recovery_s"] = round(time.monotonic() - injected_at, 2) if recovered else None
    problems += money_problems(scan, books, upto, ctx.tampered)
    result["hands_ended"] = len(scan.ended)
    result["hands_settled"] = len(books.settled)
    result["undecodable_messages"] = scan.undecodable
    ledger = await ledger_verdict(stack, ctx.notes)
    result["ledger"] = ledger
    if ledger["trial_balance_gold"] != 0:
        problems.append(f"trial balance {ledger['trial_balance_gold']}")
    if not ledger["verify_ok"]:
        problems.append(f"VerifyJournal: {ledger['verify_mismatches']} mismatches")
    mismatch_metric = escrow_mismatch_metric(stack)
    result["escrow_mismatch_metric"] = mismatch_metric
    if mismatch_metric:
        problems.append(f"socai_table_escrow_mismatch_total = {mismatch_metric}")
    if o.audit_every_fault:
        audit = await asyncio.to_thread(run_audit, stack, o.root / f"audit-{name}.json", cutoff)
        unexpected = [m for m in audit["mismatches"] if m.get("hand_id") not in ctx.tampered]  # type: ignore[union-attr]
        result["audit"] = {
            "exit_status": audit["exit_status"],
            "hands_verified": audit["hands_verified"],
            "mismatches": len(audit["mismatches"]),  # type: ignore[arg-type]
            "unexpected": unexpected[:10],
        }
        if unexpected or (audit["exit_status"] != 0 and not audit["mismatches"]):
            problems.append(
                f"socai audit: exit {audit['exit_status']}, {len(unexpected)} unexpected mismatches {audit['output_tail']}"
            )
    settlement_metrics = stack.metrics("settlement")
    result["settlement_ignored_messages"] = metric_sum(settlement_metrics, "socai_settlement_ignored_messages_total")
    result["problems"] = problems
    result["ok"] = not problems
    return result


async def run_chaos(options: ChaosOptions, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Start a private stack, put bots on it, inject every fault of ``options.faults`` in
    turn with the checks after each, finish with a full audit; write and return the report."""
    root = options.root
    stack = ProcessStack(root / "stack", extra_env=dict(options.env), instances=dict(options.instances))
    report: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in options.__dict__.items()},
        "faults": [],
    }
    began = time.monotonic()
    bots: Bots | None = None
    try:
        await stack.start()
        assert stack.settings is not None
        bots = Bots(stack.settings, options.tables, games=options.games, seed=options.seed)
        await bots.open_tables()
        report["games"] = sorted({load.game for load in bots.loads.values()})
        bots.start()
        log(f"stack up under {stack.root}; {options.tables} tables of {', '.join(report['games'])}; warming up")
        await asyncio.sleep(options.warmup_s)
        ctx = Ctx(stack, bots, options)
        for name in options.faults:
            fault = FAULTS[name]
            log(f"fault {name}: {fault.__doc__}")
            errors_before = Counter(bots.summary()["errors"])  # type: ignore[arg-type]
            injected = time.monotonic()
            try:
                await fault(ctx)
                restored = time.monotonic()
                result = await check_after(ctx, name, injected, restored)
                if name in ctx.handovers:
                    result["handover_s"] = ctx.handovers[name]
                    if None in ctx.handovers[name].values():
                        result["problems"].append(
                            f"a partition had no live holder {HANDOVER_TIMEOUT_S:.0f} s after the kill"
                        )
                        result["ok"] = False
                # What the bots (the stack's clients) were told while it recovered.
                result["client_errors"] = dict(Counter(bots.summary()["errors"]) - errors_before)  # type: ignore[arg-type]
            except Exception as exc:
                result = {
                    "fault": name,
                    "ok": False,
                    "problems": [f"harness error: {exc!r}"],
                    "traceback": traceback.format_exc(),
                }
            result["description"] = fault.__doc__
            result["notes"] = list(ctx.notes) + stack.incidents
            ctx.notes.clear()
            stack.incidents.clear()
            report["faults"].append(result)
            log(
                f"  -> {'ok' if result['ok'] else 'FAILED'}: recovery {result.get('recovery_s')} s "
                f"(restore {result.get('restore_s')}, tables {result.get('tables_resumed_s')}, settled {result.get('settled_s')})"
                + ("".join(f"\n     problem: {p}" for p in result["problems"]))
            )
            # A service that died and would not come back ends the run: nothing after it means anything.
            for service, rc in stack.exited().items():
                try:
                    await stack.start_service(service)
                    log(f"  restarted {service} (it had exited with {rc})")
                except RuntimeError as exc:
                    report["aborted"] = f"{service} exited ({rc}) and does not start again: {str(exc)[-800:]}"
                    log(f"  ABORT: {report['aborted']}")
                    raise _Abort from exc
        # The end: every bot leaves, every hand settles, every player is cashed out; full audit.
        report["final"] = await final_checks(ctx)
    except _Abort:
        pass
    finally:
        if bots is not None:
            report["bots"] = bots.summary()
            await bots.stop(leave=False)
        await stack.stop()
    report["elapsed_s"] = round(time.monotonic() - began, 1)
    report["ok"] = (
        bool(report["faults"]) and all(f["ok"] for f in report["faults"]) and report.get("final", {}).get("ok", False)
    )
    report["recovery_s"] = {f["fault"]: f.get("recovery_s") for f in report["faults"]}
    report["handover_s"] = {f["fault"]: f["handover_s"] for f in report["faults"] if "handover_s" in f}
    root.mkdir(parents=True, exist_ok=True)
    (root / "report.json").write_text(json.dumps(report, indent=2, default=str))
    return report


class _Abort(Exception):
    pass


async def final_checks(ctx: Ctx) -> dict[str, Any]:
    """Bots stop and leave; wait for every hand to settle and every cash-out; then the full
    audit (escrow balances included), the trial balance and VerifyJournal."""
    stack, bots, o = ctx.stack, ctx.bots, ctx.options
    bots.stopping.set()
    for task in bots._tasks:
        task.cancel()
    await asyncio.gather(*bots._tasks, return_exceptions=True)
    bots._tasks.clear()
    await asyncio.gather(*(bots._leave(load) for load in bots.loads.values()))
    problems: list[str] = []
    # Hands end by timeouts once nobody acts; wait until no table has a hand in play.
    upto = {t: 10**9 for t in bots.loads}
    settled_s, scan, books = await wait_settled(stack, upto, o.settle_timeout_s)
    deadline = time.monotonic() + 60
    while books.cashouts_pending and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        books = await read_books(stack)
    if books.cashouts_pending:
        problems.append(f"{books.cashouts_pending} cash-outs still pending 60 s after the bots left")
    problems += await leave_problems(stack, bots)
    problems += await tenure_problems(stack, list(bots.loads))
    problems += money_problems(scan, books, upto, ctx.tampered)
    ledger = await ledger_verdict(stack, ctx.notes)
    if ledger["trial_balance_gold"] != 0 or not ledger["verify_ok"]:
        problems.append(f"ledger: {ledger}")
    audit = await asyncio.to_thread(run_audit, stack, o.root / "audit-final.json")
    unexpected = [m for m in audit["mismatches"] if m.get("hand_id") not in ctx.tampered]  # type: ignore[union-attr]
    if unexpected or (audit["exit_status"] != 0 and not audit["mismatches"]):
        problems.append(
            f"socai audit: exit {audit['exit_status']}, unexpected mismatches {unexpected[:10]} {audit['output_tail']}"
        )
    return {
        "hands_ended": len(scan.ended),
        "hands_settled": len(books.settled),
        "settled_s": settled_s,
        "ledger": ledger,
        "audit": {
            "exit_status": audit["exit_status"],
            "hands_verified": audit["hands_verified"],
            "mismatches": len(audit["mismatches"]),
            "rss_peak_mb": audit["rss_peak_mb"],
        },  # type: ignore[arg-type]
        "problems": problems,
        "ok": not problems,
    }


async def leave_problems(stack: ProcessStack, bots: Bots) -> list[str]:
    """Every bot that asked to leave got through and cashed out: no LeaveTable refused for
    good, no bot still seated, and no bot's escrow holding gold (read from the ledger)."""
    assert stack.settings is not None
    problems: list[str] = []
    refused = {f"{t}/{p}": why for t, load in bots.loads.items() for p, why in load.leave_refused.items()}
    if refused:
        problems.append(f"{len(refused)} LeaveTable calls never got through: {sorted(refused.items())[:5]}")
    seated: list[str] = []
    for table_id, load in bots.loads.items():
        try:
            table = await bots.tables.table(table_id)
        except TableError as exc:
            problems.append(f"{table_id}: GetTable failed after the bots left: {exc.status.name}")
            continue
        seated += [f"{table_id}/{s.player_id}" for s in table.seats if s.player_id in load.players]
    if seated:
        problems.append(f"{len(seated)} bots still seated after they asked to leave: {seated[:5]}")
    async with channel(stack.settings.ledger_addr, stack.settings.token_of("auditor")) as ch:
        ledger = lgrpc.LedgerServiceStub(ch)
        holding: list[str] = []
        for table_id in bots.loads:
            page = await ledger.ListAccounts(
                lpb.ListAccountsRequest(id_prefix=f"escrow:{table_id}:", page_size=1000), timeout=30
            )
            holding += [f"{a.account_id}={a.balance_gold}" for a in page.accounts if a.balance_gold != 0]
    if holding:
        problems.append(f"{len(holding)} escrows not cashed out: {holding[:5]}")
    return problems
