"""What must hold after every fault, read from the stack's own sources of truth.

- the event stream (HandEnded per hand, undecodable messages),
- the settlement records and dead letters and the ledger's ``settle:`` transactions
  (PostgreSQL, read as the superuser: one applied transaction per hand at most, every
  finished hand settled),
- the ledger through gRPC as the auditor (``TrialBalance`` 0, ``VerifyJournal`` clean),
- ``socai audit`` as its own process (exit 0, or mismatches only on hands the harness
  tampered with),
- the table service's cash-outs (no ``alarm`` row) and ``socai_table_escrow_mismatch_total``.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import psycopg

from socai.audit.export import read_stream
from socai.events.log import EventLog
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.infra.grpc_client import channel
from socai.infra.nats import connect
from socai.infra.nats_auth import TEST_HARNESS
from socai_table.ownership import WRITER_HEADER
from tests.chaos.bots import hand_number
from tests.chaos.stack import ProcessStack, metric_sum

RETRYABLE = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


@dataclass
class StreamScan:
    last_seq: int = 0
    ended: dict[str, str] = field(default_factory=dict)  # hand id -> table id
    hand_ended_messages: Counter[str] = field(default_factory=Counter)
    undecodable: int = 0


async def scan_stream(stack: ProcessStack) -> StreamScan:
    """What the stream holds now (HandEnded per hand, undecodable messages), read on from
    the stack's last scan (``ProcessStack.scanned``): an hour's stream holds ~2 M messages,
    which a full read takes minutes to go through, and ``wait_settled`` scans every half
    second after every fault. A copy: callers keep theirs while later scans go on."""
    assert stack.settings is not None
    s = stack.settings
    before: StreamScan = stack.scanned or StreamScan()
    scan = StreamScan(before.last_seq, dict(before.ended), Counter(before.hand_ended_messages), before.undecodable)
    nc = await connect(s.nats_url_for(TEST_HARNESS), name="socai-chaos-scan")
    try:
        log = EventLog(nc, s.events_stream, s.events_prefix)
        # Up to the stream's end now: a partitioned stream is read subject by subject, and a
        # message stored meanwhile on a subject already read must wait for the next scan.
        upto = (await nc.jetstream().stream_info(s.events_stream)).state.last_seq
        async for raw in read_stream(log, after_seq=before.last_seq):
            if raw.stream_seq > upto:
                continue
            if raw.message is None:
                scan.undecodable += 1
                continue
            if raw.message.WhichOneof("body") == "hand_ended":
                scan.ended[raw.hand_id] = raw.table_id
                scan.hand_ended_messages[raw.hand_id] += 1
        scan.last_seq = max(before.last_seq, upto)
    finally:
        await nc.close()
    stack.scanned = scan  # only a scan that read to its end: a failed one is read again
    return StreamScan(scan.last_seq, dict(scan.ended), Counter(scan.hand_ended_messages), scan.undecodable)


@dataclass
class Books:
    settled: set[str]
    dead_letters: dict[str, str]  # open ones: hand id -> reason
    settle_keys: Counter[str]  # hand id -> applied settle: transactions
    cashout_alarms: list[str]
    cashouts_pending: int


def _hand_of_key(key: str) -> str:
    return key.removeprefix("settle:").split(":retry", 1)[0]


async def read_books(stack: ProcessStack) -> Books:
    assert stack.stack is not None and stack.stack.postgres is not None
    async with await psycopg.AsyncConnection.connect(stack.stack.postgres.url, connect_timeout=5) as conn:
        settled = {
            r[0] for r in await (await conn.execute("select hand_id from socai_settlement.settlements")).fetchall()
        }
        dead = {
            r[0]: r[1]
            for r in await (
                await conn.execute(
                    "select hand_id, reason from socai_settlement.dead_letters where resolved_at is null"
                )
            ).fetchall()
        }
        keys: Counter[str] = Counter()
        for (key,) in await (
            await conn.execute(
                "select idempotency_key from socai_ledger.transactions where idempotency_key like 'settle:%' and status = 'applied'"
            )
        ).fetchall():
            keys[_hand_of_key(key)] += 1
        alarms = [
            f"{r[0]}/{r[1]}: {r[2]}"
            for r in await (
                await conn.execute(
                    "select table_id, player_id, detail from socai_table.cashouts where status = 'alarm'"
                )
            ).fetchall()
        ]
        pending = (
            await (await conn.execute("select count(*) from socai_table.cashouts where status = 'pending'")).fetchone()
        )[0]  # type: ignore[index]
    return Books(settled, dead, keys, alarms, int(pending))


async def ledger_verdict(
    stack: ProcessStack, notes: list[str] | None = None, patience_s: float = 60.0
) -> dict[str, object]:
    """TrialBalance and VerifyJournal, as the auditor. A call failing with INTERNAL or
    UNAVAILABLE is retried for ``patience_s`` (after a PostgreSQL restart the ledger answers
    INTERNAL once per stale pooled connection: issue 17 defect 4), each failure noted."""
    assert stack.settings is not None
    failures: Counter[str] = Counter()
    started = time.monotonic()

    async def call(method: str, request: object, timeout_s: float) -> Any:
        while True:
            try:
                return await getattr(stub, method)(request, timeout=timeout_s)
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in RETRYABLE or time.monotonic() - started > patience_s:
                    raise
                failures[f"{method}:{exc.code().name}"] += 1
                await asyncio.sleep(0.5)

    async with channel(stack.settings.ledger_addr, stack.settings.token_of("auditor")) as ch:
        stub = lgrpc.LedgerServiceStub(ch)
        trial = await call("TrialBalance", lpb.TrialBalanceRequest(), 60)
        verify = await call("VerifyJournal", lpb.VerifyJournalRequest(), 120)
    if failures and notes is not None:
        notes.append(f"ledger answered the auditor with errors before a result: {dict(failures)}")
    return {
        "trial_balance_gold": int(trial.total_gold),
        "verify_ok": bool(verify.ok),
        "verify_mismatches": len(verify.mismatches),
        "accounts_checked": int(verify.accounts_checked),
        "entries_checked": int(verify.entries_checked),
        "failed_calls": dict(failures),
    }


# Runs its arguments as the one child of a small process, then prints that child's peak RSS
# (RUSAGE_CHILDREN of a process with no other child is that child's).
_MEASURED = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
    "print('audit_max_rss_kib', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(done.returncode)"
)


def run_audit(stack: ProcessStack, out: Path, until: datetime | None = None) -> dict[str, object]:
    """``socai audit --allow-open`` as its own process; its exit status, mismatches and peak
    RSS (the audit holds what it verifies in memory: the report says what a log costs)."""
    env = stack.service_env("ledger")
    env.pop("SOCAI_DATABASE_URL", None)
    cmd = [sys.executable, "-c", _MEASURED, sys.executable, "-m", "socai_cli.main", "audit", "--allow-open"]
    cmd += ["--json", str(out)]
    if until is not None:
        cmd += ["--until", until.isoformat()]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    peak = re.search(r"^audit_max_rss_kib (\d+)$", done.stderr, re.MULTILINE)
    mismatches: list[dict[str, object]] = []
    hands = 0
    try:
        report = json.loads(out.read_text())
        mismatches = list(report.get("mismatches", []))
        hands = sum(int(g.get("hands", 0)) for g in report.get("games", {}).values())
    except (OSError, ValueError):
        pass
    return {
        "exit_status": done.returncode,
        "hands_verified": hands,
        "rss_peak_mb": round(int(peak.group(1)) / 1024) if peak else None,
        "mismatches": mismatches,
        "output_tail": (done.stdout + done.stderr)[-1500:] if done.returncode else "",
    }


async def wait_settled(
    stack: ProcessStack, upto: dict[str, int], timeout_s: float
) -> tuple[float | None, StreamScan, Books]:
    """Wait until every finished hand numbered at most ``upto[table]`` is settled or
    dead-lettered; the seconds it took (None on time-out) and the last reads."""
    started = asyncio.get_running_loop().time()
    while True:
        # The books first: a hand settled after the scan would look like one without a HandEnded.
        books = await read_books(stack)
        scan = await scan_stream(stack)
        waiting = [
            h
            for h, t in scan.ended.items()
            if hand_number(h) <= upto.get(t, 0) and h not in books.settled and h not in books.dead_letters
        ]
        took = asyncio.get_running_loop().time() - started
        if not waiting:
            return took, scan, books
        if took > timeout_s:
            return None, scan, books
        await asyncio.sleep(0.5)


def money_problems(scan: StreamScan, books: Books, upto: dict[str, int], tampered: set[str]) -> list[str]:
    """Exactly once: no hand posted twice, no settlement without a HandEnded, every
    finished hand (up to ``upto``) settled, no dead letter but on tampered hands."""
    problems = []
    doubled = sorted(h for h, n in books.settle_keys.items() if n > 1)
    if doubled:
        problems.append(f"{len(doubled)} hands posted more than once: {doubled[:5]}")
    phantom = sorted(books.settled - set(scan.ended))
    if phantom:
        problems.append(f"{len(phantom)} settlements without a HandEnded: {phantom[:5]}")
    unposted = sorted(h for h in books.settle_keys if h not in scan.ended)
    if unposted:
        problems.append(f"{len(unposted)} ledger settle: transactions without a HandEnded: {unposted[:5]}")
    missing = sorted(
        h
        for h, t in scan.ended.items()
        if hand_number(h) <= upto.get(t, 0) and h not in books.settled and h not in tampered
    )
    if missing:
        problems.append(f"{len(missing)} finished hands not settled: {missing[:5]}")
    dead = {h: r for h, r in books.dead_letters.items() if h not in tampered}
    if dead:
        problems.append(f"{len(dead)} dead letters: {sorted(dead.items())[:5]}")
    if books.cashout_alarms:
        problems.append(f"escrow mismatch on cash-out: {books.cashout_alarms[:5]}")
    return problems


def escrow_mismatch_metric(stack: ProcessStack) -> float:
    return metric_sum(stack.metrics("table"), "socai_table_escrow_mismatch_total")


async def tenure_problems(stack: ProcessStack, table_ids: list[str]) -> list[str]:
    """One writer at a time: on each table's subjects, in stream order, the lease token in
    every event's ``Socai-Table-Writer`` header never goes back (a later tenure never sees
    an earlier one write after it). The stream's expected last subject sequence already
    keeps each subject consistent; this checks that no two instances took turns writing
    one table."""
    assert stack.settings is not None
    s = stack.settings
    nc = await connect(s.nats_url_for(TEST_HARNESS), name="socai-chaos-tenures")
    problems: list[str] = []
    try:
        log = EventLog(nc, s.events_stream, s.events_prefix)
        for table_id in table_ids:
            highest = (0, "", 0)  # token, writer, stream seq
            async for raw in log.read_raw(f"{s.events_prefix}.{table_id}.*"):
                writer = raw.headers.get(WRITER_HEADER, "")
                instance, _, token_text = writer.rpartition("/")
                if not token_text.isdigit():
                    continue  # not the table service's (a fault's foreign message)
                token = int(token_text)
                if token < highest[0]:
                    problems.append(
                        f"{table_id}: {instance} wrote seq {raw.stream_seq} under token {token} after "
                        f"{highest[1]} wrote seq {highest[2]} under token {highest[0]}"
                    )
                elif token > highest[0]:
                    highest = (token, instance, raw.stream_seq)
    finally:
        await nc.close()
    return problems


@dataclass
class Timeline:
    """Each table's events as the stream holds them: (occurred_at as seconds since the
    epoch, event body name), in order. The table stamps ``occurred_at`` when it writes the
    event, with the clock of the machine every process of the stack shares."""

    events: dict[str, list[tuple[float, str]]] = field(default_factory=dict)

    def times(self, table_id: str) -> list[float]:
        return [t for t, _ in self.events.get(table_id, ())]

    def gaps_over(self, table_id: str, start: float, end: float) -> float:
        """The longest time ``table_id`` went without an event over [``start``, ``end``]
        (epoch seconds): the gaps between its events that overlap the window, the one
        from its last event before ``end`` to ``end`` included (still out at the end)."""
        return longest_gap(self.times(table_id), start, end)

    def first_after(self, table_id: str, moment: float) -> float | None:
        """When ``table_id``'s first event after ``moment`` was written (None: none yet)."""
        return next((t for t in self.times(table_id) if t > moment), None)


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch without an event in sorted ``times`` that overlaps [start, end],
    clipped to it; the stretch from the last event to ``end`` counts (still out at the end),
    and so does the one from ``start`` to the first event."""
    longest = 0.0
    previous: float | None = None
    for t in times:
        if t > end:
            if previous is not None and previous <= end:
                longest = max(longest, end - max(previous, start))
            elif previous is None:
                longest = max(longest, end - start)
            return longest
        if t >= start:
            longest = max(longest, t - max(previous if previous is not None else start, start))
        previous = t
    if previous is None:
        return max(0.0, end - start)
    return max(longest, end - max(previous, start))


async def read_timeline(log: EventLog, table_ids: list[str]) -> Timeline:
    """The events of ``table_ids`` with their ``occurred_at`` (see ``Timeline``), in one pass
    over the stream."""
    wanted = set(table_ids)
    timeline = Timeline(events={t: [] for t in table_ids})
    async for raw in read_stream(log):
        if raw.message is not None and raw.message.table_id in wanted:
            at = raw.message.occurred_at
            timeline.events[raw.message.table_id].append(
                (at.seconds + at.nanos / 1e9, str(raw.message.WhichOneof("body")))
            )
    for events in timeline.events.values():
        events.sort()
    return timeline
