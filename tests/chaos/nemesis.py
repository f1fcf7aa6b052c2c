"""The nemesis: a randomized fault schedule, reproducible from a seed, over a multi-instance
stack under bot load (``make nemesis``).

    python -m tests.chaos.nemesis [--minutes 16] [--seed 29] [--tables 44] [--games all]
        [--table-instances 2] [--settlement-instances 2] [--partitions 4] [--ttl-s 6]
        [--gap-s 30,60] [--pair-chance 0.25] [--kinds nats_pause,table_kill,…] [--out var/nemesis]

The stack is the chaos suite's (``tests.chaos.stack``: nats-server, PostgreSQL and every
service instance a real process) with bots on every table (``tests.chaos.bots``). ``plan``
turns the seed into the schedule: groups of one fault, or two at once (``--pair-chance``,
never two on the same component), each after a quiet gap drawn from ``--gap-s``; the kinds
come in shuffled rounds, so every kind is injected once before any comes twice, and each
fault's duration and target are drawn too. The faults (``KINDS``): nats-server stopped
(SIGSTOP) and continued, restarted (SIGTERM or SIGKILL, down a while), PostgreSQL shut down
(immediate or fast) and started again, a ledger, table or settlement instance SIGKILLed and
started at once, a table instance killed while nats-server is stopped, a settlement
instance or the busiest table instance stopped past its lease and continued, any process
(PostgreSQL with its backends) stopped for a while, a table or settlement instance killed
for good and a new one started in its place, every table's latest events published again,
and a rolling restart (every socai process stopped with SIGTERM and started again, one at a
time in the runbook's upgrade order, ``ROLLING_ORDER``), alone in its group.

What the seed decides: the schedule (the faults, their order, durations, targets and the
gaps) and every table's bots' random draws (``Bots``: a stream per table). What it does not:
the cards (each hand's deck seed comes from the table service's OS CSPRNG: a production
table must never deal from a derivable seed) and the timing of processes, so two runs of one
seed inject the same faults into different hands.

The report (``<out>/report.json`` and ``report.md``): every fault with its injection and
restore times; how long each table was out (its longest time without an event over the
fault and until the next one, from the events' ``occurred_at``), and how long after the
restore its first event came, as p50/p99/max per fault kind; and the end-state checks, each
a problem when it fails: every hand settled once (no double posting, no settlement without a
HandEnded, none missing), no dead letter, trial balance 0 and ``VerifyJournal`` clean,
``socai audit`` clean, every bot out (no one seated, every escrow empty, every cash-out done)
with its wallet = its deposits + the nets of its hands, no table frozen, one writer per table
(the lease tokens along each table's events never go back), no table out longer than the
fault allows (the fault's own time, 1.2 lease TTLs, the slowest rebuild logged, the table's
longest quiet gap outside faults and a margin; a rolling restart's own length is not
counted, since each table only changes hands, twice at most: two leases and rebuilds), no player's call failed past the client's
retries during a rolling restart, every service's RSS under a bound, no service that exited
by itself, no client answered INTERNAL, and no crash or unhandled traceback in any service
log. Exit 1 on any problem.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import random
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import psutil
import psycopg
from nats.js.errors import KeyNotFoundError

from socai.events.log import EventLog
from socai.infra.logging import configure
from socai.infra.nats import connect
from socai.infra.nats_auth import TEST_HARNESS
from socai_cli.stack import instance_name
from tests.chaos.bots import Bots
from tests.chaos.checks import Timeline, read_timeline
from tests.chaos.faults import ChaosOptions, Ctx, duplicate_messages, final_checks, wait_tables_resumed
from tests.chaos.stack import ProcessStack, split_instance

ROLES: Final = ("ledger", "table", "settlement", "nats", "postgres")
# Each kind and the components it hurts: two faults at once never share one.
KIND_CLASSES: Final[dict[str, frozenset[str]]] = {
    "nats_pause": frozenset({"nats"}),
    "nats_restart": frozenset({"nats"}),
    "postgres_restart": frozenset({"postgres"}),
    "ledger_kill": frozenset({"ledger"}),
    "table_kill": frozenset({"table"}),
    "table_kill_nats_pause": frozenset({"table", "nats"}),
    "settlement_kill": frozenset({"settlement"}),
    "settlement_pause": frozenset({"settlement"}),
    "table_pause_busiest": frozenset({"table"}),
    "pause_any": frozenset(),  # the component it stops is drawn with the fault
    "replace_instance": frozenset(),  # a table or a settlement instance, drawn
    "duplicate_messages": frozenset({"stream"}),
    # Every socai process restarted one at a time (SIGTERM, the next once it serves again):
    # what a rolling upgrade does. Alone in its group: it is judged by no client failing.
    "rolling_restart": frozenset(ROLES),
}
# The runbook's upgrade order (deploy/README.md, "Upgrade"): the ledger first (it serves
# both others), then settlement (reads the events), then the tables (write them): readers
# of a new format run before any writer writes it.
ROLLING_ORDER: Final = ("ledger", "settlement", "table")
ALL_KINDS: Final = tuple(KIND_CLASSES)
RESTART_GUESS_S: Final = 5.0  # what a kill's restart adds to the schedule's nominal clock
ROLLING_GUESS_S: Final = 30.0  # what a rolling restart of five processes adds to it
AFTER_MAX_S: Final = 30.0  # a fault's window ends at the next one, or this long after its restore
OUT_MARGIN_S: Final = 5.0  # a loaded machine's slack in the out-of-table check
RSS_MAX_MB: Final = 1024.0  # a socai service's RSS never goes above this
RSS_EVERY_S: Final = 10.0
WATCH_EVERY_S: Final = 2.0
START_PATIENCE_S: Final = 120.0  # a restarted service must serve within this long


@dataclass(frozen=True)
class Profile:
    """How long each kind of fault lasts (seconds, a range the seed draws from)."""

    nats_pause_s: tuple[float, float] = (8.0, 12.0)
    outage_s: tuple[float, float] = (2.0, 8.0)  # NATS or PostgreSQL down
    past_lease_s: tuple[float, float] = (2.0, 6.0)  # a pause past the lease TTL by this much
    pause_any_s: tuple[float, float] = (2.0, 12.0)


SHORT_PROFILE: Final = Profile(
    nats_pause_s=(3.0, 4.0), outage_s=(1.5, 2.5), past_lease_s=(1.0, 2.0), pause_any_s=(1.5, 3.0)
)


@dataclass(frozen=True)
class Planned:
    """One fault of the schedule: its kind, the component it stops (``pause_any``,
    ``replace_instance``), how long it lasts and which of the candidate instances it hits
    (``pick`` modulo their number, at the moment it is injected)."""

    kind: str
    hold_s: float
    pick: int
    role: str = ""

    @property
    def classes(self) -> frozenset[str]:
        return KIND_CLASSES[self.kind] | ({self.role} if self.role else frozenset())

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.role}" if self.role else self.kind


@dataclass(frozen=True)
class Group:
    """Faults injected at once, after ``gap_s`` of quiet following the previous group's restore."""

    gap_s: float
    faults: tuple[Planned, ...]

    @property
    def label(self) -> str:
        return "+".join(sorted(f.label for f in self.faults))


def _draw(kind: str, rng: random.Random, ttl_s: float, profile: Profile) -> Planned:
    pick = rng.randrange(1 << 16)
    if kind == "nats_pause":
        return Planned(kind, round(rng.uniform(*profile.nats_pause_s), 2), pick)
    if kind in ("nats_restart", "postgres_restart"):
        return Planned(kind, round(rng.uniform(*profile.outage_s), 2), pick)
    if kind == "table_kill_nats_pause":
        return Planned(kind, round(rng.uniform(*profile.nats_pause_s), 2), pick)
    if kind in ("settlement_pause", "table_pause_busiest"):
        return Planned(kind, round(ttl_s + rng.uniform(*profile.past_lease_s), 2), pick)
    if kind == "pause_any":
        return Planned(kind, round(rng.uniform(*profile.pause_any_s), 2), pick, rng.choice(ROLES))
    if kind == "replace_instance":
        return Planned(kind, 0.0, pick, rng.choice(("table", "settlement")))
    return Planned(kind, 0.0, pick)


def _nominal_s(group: Group) -> float:
    def restart_s(kind: str) -> float:
        if kind == "rolling_restart":
            return ROLLING_GUESS_S
        return RESTART_GUESS_S if "kill" in kind or "replace" in kind else 0.0

    return max(f.hold_s + restart_s(f.kind) for f in group.faults)


def plan(
    seed: int,
    duration_s: float,
    kinds: tuple[str, ...] = ALL_KINDS,
    gap_s: tuple[float, float] = (30.0, 60.0),
    pair_chance: float = 0.25,
    ttl_s: float = 6.0,
    profile: Profile = Profile(),
    rounds: int = 0,
) -> list[Group]:
    """The schedule of a run of ``duration_s`` seconds (nominal: gaps, holds and a guess of
    each restart), or of exactly ``rounds`` rounds when that is not 0, from ``seed`` alone.
    Kinds come in shuffled rounds (each once per round); with ``pair_chance`` a second fault
    on other components joins the group."""
    if not kinds or any(k not in KIND_CLASSES for k in kinds):
        raise ValueError(f"unknown fault kinds: {[k for k in kinds if k not in KIND_CLASSES] or 'none given'}")
    rng = random.Random(seed)
    groups: list[Group] = []
    bag: list[str] = []
    clock = 0.0
    started_rounds = 0
    while True:
        if not bag:
            if (rounds and started_rounds == rounds) or (not rounds and clock >= duration_s):
                break
            bag = list(kinds)
            rng.shuffle(bag)
            started_rounds += 1
        elif not rounds and clock >= duration_s:
            break
        first = _draw(bag.pop(), rng, ttl_s, profile)
        faults = [first]
        if rng.random() < pair_chance:
            second = _draw(rng.choice(kinds), rng, ttl_s, profile)
            if not (second.classes & first.classes) and "stream" not in second.classes | first.classes:
                faults.append(second)
        group = Group(round(rng.uniform(*gap_s), 2), tuple(faults))
        groups.append(group)
        clock += group.gap_s + _nominal_s(group)
    return groups


# ---- running the faults --------------------------------------------------------------


@dataclass
class Record:
    """What one fault did: when, to whom, and when everything it stopped ran again."""

    kind: str
    label: str
    hold_s: float
    targets: list[str] = field(default_factory=list)
    injected: float = 0.0  # epoch seconds
    restored: float = 0.0
    error: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)  # a rolling restart's, one per process
    client_failures: dict[str, int] = field(default_factory=dict)  # calls failed past retries (rolling)


@dataclass
class Run:
    stack: ProcessStack
    bots: Bots
    options: NemesisOptions
    chaos: Ctx
    retired: set[str] = field(default_factory=set)  # instances killed for good
    busy: set[str] = field(default_factory=set)  # services a fault is killing or restarting now
    paused_pids: set[int] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    rss: list[dict[str, Any]] = field(default_factory=list)

    def live(self, service: str) -> list[str]:
        return sorted(n for n in self.stack.procs if split_instance(n)[0] == service and n not in self.retired)

    def pick(self, service: str, pick: int) -> str:
        live = self.live(service)
        if not live:
            raise RuntimeError(f"no {service} instance runs")
        return live[pick % len(live)]

    def nats_pid(self) -> int:
        assert self.stack.stack is not None and self.stack.stack.nats is not None
        proc = self.stack.stack.nats.proc
        assert proc is not None, "nats-server is not running"
        return proc.pid

    def postgres_pids(self) -> list[int]:
        assert self.stack.stack is not None and self.stack.stack.postgres is not None
        proc = self.stack.stack.postgres.proc
        assert proc is not None, "PostgreSQL is not running"
        try:
            return [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
        except psutil.Error:
            return [proc.pid]

    def stop_pids(self, pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            self.paused_pids.add(pid)

    def continue_pids(self, pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self.paused_pids.discard(pid)

    async def busiest_table(self, pick: int) -> str:
        """The table instance holding the most partitions (the lease bucket says), ties by ``pick``."""
        live = self.live("table")
        counts = dict.fromkeys(live, 0)
        s = self.stack.settings
        assert s is not None
        with contextlib.suppress(Exception):  # NATS may be stopped by the other fault of the group
            nc = await asyncio.wait_for(connect(s.nats_url_for(TEST_HARNESS), name="socai-nemesis-busiest"), 3)
            try:
                kv = await asyncio.wait_for(nc.jetstream().key_value(f"table_leases_{s.events_stream}"), 3)
                for k in range(max(1, self.options.partitions)):
                    with contextlib.suppress(KeyNotFoundError):
                        holder = ((await asyncio.wait_for(kv.get(f"partition.{k}"), 3)).value or b"").decode()
                        if holder in counts:
                            counts[holder] += 1
            finally:
                await nc.close()
        most = max(counts.values(), default=0)
        tied = sorted(n for n, c in counts.items() if c == most)
        return tied[pick % len(tied)]


async def start_until_serving(run: Run, name: str) -> None:
    """Start ``name`` as a supervisor would: again after a pause when it exits at start (a
    service exits when NATS cannot be reached then: the other fault of its group), until it
    serves or ``START_PATIENCE_S`` is over."""
    deadline = time.monotonic() + START_PATIENCE_S
    while True:
        try:
            await run.stack.start_service(name)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await run.stack.stop_service(name, signal.SIGKILL)
            await asyncio.sleep(2.0)


async def _kill_restart(run: Run, f: Planned, rec: Record, service: str) -> None:
    name = run.pick(service, f.pick)
    rec.targets = [name]
    run.busy.add(name)
    try:
        rec.injected = time.time()
        await run.stack.stop_service(name, signal.SIGKILL)
        await start_until_serving(run, name)
    finally:
        run.busy.discard(name)


async def _pause_service(run: Run, name: str, hold_s: float, rec: Record) -> None:
    rec.targets = [name]
    rec.injected = time.time()
    run.stack.pause(name)
    try:
        await asyncio.sleep(hold_s)
    finally:
        run.stack.resume(name)


async def _rolling_restart(run: Run, rec: Record) -> None:
    """Every socai process, one at a time in ``ROLLING_ORDER``: SIGTERM (it drains and
    releases its leases), started again, and the next only once it serves, as a rolling
    upgrade's deployment does with one surge pod."""
    names = [n for service in ROLLING_ORDER for n in run.live(service)]
    rec.targets, rec.injected = names, time.time()
    run.busy |= set(names)
    try:
        for name in names:
            began = time.time()
            await run.stack.stop_service(name, signal.SIGTERM)
            stopped = time.time()
            await start_until_serving(run, name)
            rec.steps.append(
                {"name": name, "stop_s": round(stopped - began, 2), "start_s": round(time.time() - stopped, 2)}
            )
    finally:
        run.busy -= set(names)


async def inject(run: Run, f: Planned) -> Record:
    """Inject ``f`` and restore what it took; the record (``restored`` set when all runs again)."""
    rec = Record(f.kind, f.label, f.hold_s)
    stack = run.stack
    try:
        if f.kind == "nats_pause":
            pid = run.nats_pid()
            rec.targets, rec.injected = ["nats"], time.time()
            run.stop_pids([pid])
            try:
                await asyncio.sleep(f.hold_s)
            finally:
                run.continue_pids([pid])
        elif f.kind == "nats_restart":
            rec.targets, rec.injected = ["nats"], time.time()
            await stack.restart_nats(signal.SIGKILL if f.pick % 2 else signal.SIGTERM, f.hold_s)
        elif f.kind == "postgres_restart":
            rec.targets, rec.injected = ["postgres"], time.time()
            await stack.restart_postgres("immediate" if f.pick % 2 == 0 else "fast", f.hold_s)
        elif f.kind in ("ledger_kill", "table_kill", "settlement_kill"):
            await _kill_restart(run, f, rec, f.kind.removesuffix("_kill"))
        elif f.kind == "table_kill_nats_pause":
            name, pid = run.pick("table", f.pick), run.nats_pid()
            rec.targets, rec.injected = [name, "nats"], time.time()
            run.busy.add(name)
            try:
                run.stop_pids([pid])
                await stack.stop_service(name, signal.SIGKILL)
                await asyncio.sleep(f.hold_s)
                run.continue_pids([pid])
                await start_until_serving(run, name)
            finally:
                run.continue_pids([pid])
                run.busy.discard(name)
        elif f.kind == "settlement_pause":
            await _pause_service(run, run.pick("settlement", f.pick), f.hold_s, rec)
        elif f.kind == "table_pause_busiest":
            await _pause_service(run, await run.busiest_table(f.pick), f.hold_s, rec)
        elif f.kind == "pause_any":
            if f.role in ("nats", "postgres"):
                pids = [run.nats_pid()] if f.role == "nats" else run.postgres_pids()
                rec.targets, rec.injected = [f.role], time.time()
                run.stop_pids(pids)
                try:
                    await asyncio.sleep(f.hold_s)
                finally:
                    run.continue_pids(pids)
            else:
                await _pause_service(run, run.pick(f.role, f.pick), f.hold_s, rec)
        elif f.kind == "replace_instance":
            old = run.pick(f.role, f.pick)
            used = {split_instance(n)[1] for n in stack.procs if split_instance(n)[0] == f.role} | {
                split_instance(n)[1] for n in run.retired if split_instance(n)[0] == f.role
            }
            new = instance_name(f.role, max(used) + 1)
            rec.targets, rec.injected = [old, new], time.time()
            run.busy |= {old, new}
            try:
                await stack.stop_service(old, signal.SIGKILL)
                run.retired.add(old)
                await start_until_serving(run, new)
            finally:
                run.busy -= {old, new}
        elif f.kind == "rolling_restart":
            await _rolling_restart(run, rec)
        elif f.kind == "duplicate_messages":
            rec.targets, rec.injected = ["stream"], time.time()
            await duplicate_messages(run.chaos)
        else:
            raise ValueError(f"unknown fault kind {f.kind}")
    except Exception as exc:
        rec.error = f"{exc!r}"[:1000]
        run.problems.append(f"harness: {f.label} failed: {exc!r}"[:1000])
        run.chaos.notes.append(traceback.format_exc()[-2000:])
    rec.injected = rec.injected or time.time()
    rec.restored = time.time()
    return rec


async def _watch_exits(run: Run, stop: asyncio.Event) -> None:
    """A service that exits by itself is a problem; it is started again so the run goes on."""
    while not stop.is_set():
        for name, rc in run.stack.exited().items():
            if name in run.busy or name in run.retired:
                continue
            run.problems.append(f"{name} exited by itself with status {rc}: {run.stack.tail(name, 600)}")
            run.busy.add(name)
            try:
                await run.stack.stop_service(name, signal.SIGKILL)
                await start_until_serving(run, name)
            except Exception as exc:
                run.problems.append(f"{name} does not start again: {exc!r}"[:800])
            finally:
                run.busy.discard(name)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), WATCH_EVERY_S)


async def _sample_rss(run: Run, stop: asyncio.Event, started: float) -> None:
    while not stop.is_set():
        with contextlib.suppress(Exception):
            run.rss.append({"t_s": round(time.monotonic() - started, 1), "memory_mb": run.stack.memory_mb()})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RSS_EVERY_S)


# ---- the numbers ---------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by the nearest-rank method (the largest for q = 1)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def windows_of(records: list[list[Record]], end: float) -> list[tuple[float, float, float]]:
    """Each group's (injected, restored, window end): the window runs until the next group's
    injection or ``AFTER_MAX_S`` after the restore, whichever comes first (``end`` last)."""
    spans = [(min(r.injected for r in g), max(r.restored for r in g)) for g in records]
    out = []
    for i, (injected, restored) in enumerate(spans):
        following = spans[i + 1][0] if i + 1 < len(spans) else end
        out.append((injected, restored, max(restored, min(following, restored + AFTER_MAX_S))))
    return out


def quiet_gap(times: list[float], windows: list[tuple[float, float, float]], since: float) -> float:
    """The longest time between two events of a table when no fault was on (both events
    after ``since``, the gap overlapping no window): what the game itself makes it wait."""
    longest = 0.0
    for a, b in itertools.pairwise(times):
        if a >= since and not any(a < w_end and b > w_start for w_start, _, w_end in windows):
            longest = max(longest, b - a)
    return longest


def rebuild_s(log_paths: list[Path], start: float, end: float) -> float:
    """The slowest table rebuild (``tables_loaded.slowest_ms``) logged in [start, end]."""
    slowest = 0.0
    for path in log_paths:
        with contextlib.suppress(OSError):
            for line in path.read_text(errors="replace").splitlines():
                if '"tables_loaded"' not in line:
                    continue
                with contextlib.suppress(ValueError, KeyError):
                    entry = json.loads(line)
                    at = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()
                    if start <= at <= end:
                        slowest = max(slowest, float(entry.get("slowest_ms", 0)) / 1000)
    return slowest


def rolling_failures(bots: Bots, records: list[list[Record]], end: float) -> list[str]:
    """A rolling restart must fail no player's call past the client's retries (the docs'
    retry advice: the typed client's ``retry_for_s``): the calls that gave up between its
    start and the end of its window, noted on its record, each a problem."""
    problems = []
    for recs, (_, _, w_end) in zip(records, windows_of(records, end), strict=True):
        for rec in recs:
            if rec.kind != "rolling_restart":
                continue
            rec.client_failures = dict(bots.gave_up_between(rec.injected, w_end))
            if rec.client_failures:
                problems.append(
                    f"rolling restart at {datetime.fromtimestamp(rec.injected, UTC):%H:%M:%S}: calls failed "
                    f"past the client's retries: {rec.client_failures}"
                )
    return problems


def outages(
    timeline: Timeline,
    tables: list[str],
    groups: list[Group],
    records: list[list[Record]],
    end: float,
    since: float,
    ttl_s: float,
    rebuilds: list[float],
) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]], list[str]]:
    """Per group: each table's time out (the longest gap without an event over the window)
    and how long after the restore its first event came; per group label the p50/p99/max of
    both; and the tables out longer than the fault allows (see the module docstring)."""
    windows = windows_of(records, end)
    quiet = {t: quiet_gap(timeline.times(t), windows, since) for t in tables}
    per_group: list[dict[str, Any]] = []
    by_label: dict[str, dict[str, list[float]]] = {}
    late: list[str] = []
    for group, recs, (injected, restored, w_end), rebuild in zip(groups, records, windows, rebuilds, strict=True):
        outs = {t: round(timeline.gaps_over(t, injected, w_end), 2) for t in tables}
        backs = {}
        for t in tables:
            first = timeline.first_after(t, restored)
            backs[t] = (
                round(first - restored, 2) if first is not None and first <= w_end else round(w_end - restored, 2)
            )
        # A rolling restart hands each table over once or twice (its instance stops, then comes
        # back and rebalances), each time within a lease and a rebuild: its whole length is
        # not the time a table may be out, as a kill's is. The two handovers can follow each
        # other with no event between (one gap), so both are allowed.
        rolling = all(r.kind == "rolling_restart" for r in recs)
        fault_s = 0.0 if rolling else restored - injected
        handovers = 2 if rolling else 1
        allowed = {t: fault_s + handovers * (1.2 * ttl_s + rebuild) + quiet[t] + OUT_MARGIN_S for t in tables}
        late += [
            f"{group.label} at {datetime.fromtimestamp(injected, UTC):%H:%M:%S}: table {t} out {outs[t]:.1f} s "
            f"(allowed {allowed[t]:.1f} s)"
            for t in tables
            if outs[t] > allowed[t]
        ]
        per_group.append(
            {
                "label": group.label,
                "faults": [asdict(r) for r in recs],
                "fault_s": round(restored - injected, 2),
                "rebuild_s": round(rebuild, 3),
                "out_s": {"p50": percentile(list(outs.values()), 0.5), "max": max(outs.values(), default=0.0)},
                "back_s": {"p50": percentile(list(backs.values()), 0.5), "max": max(backs.values(), default=0.0)},
                "tables_out_s": outs,
            }
        )
        lists = by_label.setdefault(group.label, {"out": [], "back": []})
        lists["out"] += outs.values()
        lists["back"] += backs.values()
    summary = {
        label: {
            "faults": sum(1 for g in groups if g.label == label),
            "out_p50_s": percentile(v["out"], 0.5),
            "out_p99_s": percentile(v["out"], 0.99),
            "out_max_s": max(v["out"], default=0.0),
            "back_p50_s": percentile(v["back"], 0.5),
            "back_p99_s": percentile(v["back"], 0.99),
            "back_max_s": max(v["back"], default=0.0),
        }
        for label, v in sorted(by_label.items())
    }
    return per_group, summary, late


async def wallet_problems(run: Run) -> tuple[list[str], dict[str, int]]:
    """Every bot's wallet = its deposits + the nets of its settled hands (the entries of the
    ``settle:`` transactions on its escrows), and every escrow of it empty."""
    assert run.stack.stack is not None and run.stack.stack.postgres is not None
    bots = {p for load in run.bots.loads.values() for p in load.players}
    query = """
        with wallet as (
            select substr(account_id, 8) as player, balance_gold from socai_ledger.accounts
            where account_id like 'player:%'),
        deposited as (
            select substr(e.account_id, 8) as player, sum(e.amount_gold) as gold
            from socai_ledger.entries e join socai_ledger.transactions t using (transaction_id)
            where t.kind = 'deposit' and e.account_id like 'player:%' group by 1),
        nets as (
            select split_part(e.account_id, ':', 3) as player, sum(e.amount_gold) as gold
            from socai_ledger.entries e join socai_ledger.transactions t using (transaction_id)
            where t.idempotency_key like 'settle:%' and e.account_id like 'escrow:%' group by 1),
        escrow as (
            select split_part(account_id, ':', 3) as player, sum(balance_gold) as gold
            from socai_ledger.accounts where account_id like 'escrow:%' group by 1)
        select w.player, w.balance_gold, coalesce(d.gold, 0), coalesce(n.gold, 0), coalesce(x.gold, 0)
        from wallet w left join deposited d using (player) left join nets n using (player)
            left join escrow x using (player)
    """
    problems: list[str] = []
    checked = 0
    async with await psycopg.AsyncConnection.connect(run.stack.stack.postgres.url, connect_timeout=10) as conn:
        rows = await (await conn.execute(query)).fetchall()
    for player, wallet, deposited, net, escrow in rows:
        if player not in bots:
            continue
        checked += 1
        if escrow != 0:
            problems.append(f"{player}: {escrow} gold still in escrow")
        if wallet != deposited + net:
            problems.append(f"{player}: wallet {wallet} != deposits {deposited} + nets {net}")
    if checked < len(bots):
        problems.append(f"{len(bots) - checked} bots have no wallet")
    return problems, {"players_checked": checked}


RAW_FAILURES: Final = (
    "Traceback (most recent call last)",
    "Task exception was never retrieved",
    "exception was never retrieved",
    "Exception in callback",
    "Fatal Python error",
)


def log_problems(paths: list[Path]) -> tuple[list[str], dict[str, int]]:
    """Crashes and unhandled tracebacks in the services' logs: a traceback printed outside the
    structured log (nothing caught it), an unretrieved task exception, a critical line, an
    RPC answered INTERNAL (``rpc_failed``). Errors the services logged with their exception
    on purpose are counted by event, not judged (their own checks judge what they caused)."""
    problems: list[str] = []
    logged: dict[str, int] = {}
    for path in paths:
        with contextlib.suppress(OSError):
            lines = path.read_text(errors="replace").splitlines()
            for number, line in enumerate(lines):
                if not line.startswith("{"):
                    if any(marker in line for marker in RAW_FAILURES):
                        context = " | ".join(lines[number : number + 6])[:800]
                        problems.append(f"{path.name}:{number + 1}: {context}")
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                event = str(entry.get("event", ""))
                if entry.get("level") == "critical" or event == "rpc_failed" or "never retrieved" in line:
                    problems.append(f"{path.name}:{number + 1}: {line[:600]}")
                if "exception" in entry:
                    logged[event] = logged.get(event, 0) + 1
    return problems, logged


def rss_summary(samples: list[dict[str, Any]]) -> tuple[dict[str, float], list[str]]:
    peak: dict[str, float] = {}
    for sample in samples:
        for name, mem in sample["memory_mb"].items():
            peak[name] = max(peak.get(name, 0.0), float(mem["rss"]))
    problems = [
        f"{name}: RSS peaked at {mb:.0f} MiB (bound {RSS_MAX_MB:.0f})"
        for name, mb in peak.items()
        if split_instance(name)[0] in ("ledger", "table", "settlement") and mb > RSS_MAX_MB
    ]
    return peak, problems


# ---- the run -------------------------------------------------------------------------


@dataclass(frozen=True)
class NemesisOptions:
    root: Path
    seed: int = 29
    duration_s: float = 16 * 60.0
    tables: int = 44
    games: tuple[str, ...] = ()  # () = every game in the registry
    table_instances: int = 2
    settlement_instances: int = 2
    partitions: int = 4
    ttl_s: float = 6.0
    gap_s: tuple[float, float] = (30.0, 60.0)
    pair_chance: float = 0.25
    kinds: tuple[str, ...] = ALL_KINDS
    profile: Profile = Profile()
    rounds: int = 0  # exactly this many rounds of the kinds instead of ``duration_s``
    env: dict[str, str] = field(default_factory=dict)  # every service's environment, on top
    warmup_s: float = 15.0
    resume_timeout_s: float = 90.0
    settle_timeout_s: float = 180.0


async def run_nemesis(options: NemesisOptions, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Start the stack and the bots, inject the seed's schedule, run the end-state checks;
    write ``report.json`` and ``report.md`` under ``options.root`` and return the report."""
    groups = plan(
        options.seed,
        options.duration_s,
        options.kinds,
        options.gap_s,
        options.pair_chance,
        options.ttl_s,
        options.profile,
        options.rounds,
    )
    env = {
        "SOCAI_EVENT_PARTITIONS": str(options.partitions),
        "SOCAI_TABLE_LEASE_TTL_S": str(options.ttl_s),
        "SOCAI_SETTLEMENT_LEASE_TTL_S": str(options.ttl_s),
        **options.env,
    }
    stack = ProcessStack(
        options.root / "stack",
        log_level="info",
        extra_env=env,
        instances={"table": options.table_instances, "settlement": options.settlement_instances},
        spare_instances=dict(Counter(f.role for g in groups for f in g.faults if f.kind == "replace_instance")),
    )
    report: dict[str, Any] = {
        "seed": options.seed,
        "started_at": datetime.now(UTC).isoformat(),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()},
        "schedule": [{"gap_s": g.gap_s, "faults": [asdict(f) for f in g.faults]} for g in groups],
    }
    began = time.monotonic()
    bots: Bots | None = None
    stop_watch = asyncio.Event()
    watchers: list[asyncio.Task[None]] = []
    run: Run | None = None
    records: list[list[Record]] = []
    try:
        await stack.start()
        assert stack.settings is not None
        bots = Bots(stack.settings, options.tables, games=options.games, seed=options.seed)
        await bots.open_tables()
        bots.start()
        chaos = ChaosOptions(root=options.root, settle_timeout_s=options.settle_timeout_s, env=env)
        run = Run(stack, bots, options, Ctx(stack, bots, chaos))
        watchers = [
            asyncio.create_task(_watch_exits(run, stop_watch)),
            asyncio.create_task(_sample_rss(run, stop_watch, began)),
        ]
        games = sorted({load.game for load in bots.loads.values()})
        span = f"{options.rounds} round(s) of every kind" if options.rounds else f"~{options.duration_s / 60:.0f} min"
        log(
            f"nemesis seed {options.seed}: {len(groups)} fault groups ({span}), "
            f"{options.tables} tables of {len(games)} games; stack under {stack.root}"
        )
        await asyncio.sleep(options.warmup_s)
        steady_since = time.time()
        for i, group in enumerate(groups):
            await asyncio.sleep(group.gap_s)
            log(
                f"[{time.monotonic() - began:7.1f} s] {i + 1}/{len(groups)} {group.label} "
                f"({', '.join(f'{f.hold_s:.1f} s' for f in group.faults)})"
            )
            recs = list(await asyncio.gather(*(inject(run, f) for f in group.faults)))
            records.append(recs)
            for rec in recs:
                if rec.error:
                    log(f"    harness error: {rec.error[:300]}")
        ended = time.time()
        # The stream must have dropped every republished message (its duplicate window).
        run.problems += [n for n in run.chaos.notes if n.startswith("duplicate_messages:")]
        # Everything runs again: every table with players must start a new hand.
        baseline = {t: load.hand for t, load in bots.loads.items()}
        resumed_s, frozen = await wait_tables_resumed(bots, baseline, options.resume_timeout_s)
        if frozen:
            run.problems.append(
                f"{len(frozen)} tables frozen {options.resume_timeout_s:.0f} s after the last fault: {frozen[:8]}"
            )
        report["tables_resumed_s"] = None if resumed_s is None else round(resumed_s, 1)
        stop_watch.set()
        await asyncio.gather(*watchers, return_exceptions=True)
        log("faults done; bots leave; end-state checks")
        final = await final_checks(run.chaos)
        report["final"] = final
        run.problems += final["problems"]
        wallets, wallet_info = await wallet_problems(run)
        run.problems += wallets
        report["wallets"] = wallet_info
        s = stack.settings
        nc = await connect(s.nats_url_for(TEST_HARNESS), name="socai-nemesis-timeline")
        try:
            timeline = await read_timeline(EventLog(nc, s.events_stream, s.events_prefix), list(bots.loads))
        finally:
            await nc.close()
        run.problems += rolling_failures(bots, records, ended)
        table_logs = sorted((stack.root / "log").glob("table*.log"))
        rebuilds = [rebuild_s(table_logs, w[0], w[2]) for w in windows_of(records, ended)]
        per_group, summary, late = outages(
            timeline, list(bots.loads), groups[: len(records)], records, ended, steady_since, options.ttl_s, rebuilds
        )
        report["faults"] = per_group
        report["out_by_kind"] = summary
        run.problems += late
        logs, logged = log_problems(sorted((stack.root / "log").glob("*.log")))
        run.problems += logs
        report["logged_exceptions"] = logged
        peak, rss = rss_summary(run.rss)
        run.problems += rss
        report["rss_peak_mb"] = peak
        internal = {
            k: v
            for k, v in bots.summary()["errors"].items()  # type: ignore[union-attr]
            if k.rsplit(":", 1)[-1] in ("INTERNAL", "UNKNOWN")  # "<call>:<reason or code>"
        }
        if internal:
            run.problems.append(f"clients were answered INTERNAL/UNKNOWN: {internal}")
    except Exception as exc:
        report["aborted"] = f"{exc!r}: {traceback.format_exc()[-2000:]}"
        log(f"ABORT: {exc!r}")
    finally:
        stop_watch.set()
        for task in watchers:
            task.cancel()
        if run is not None:
            run.continue_pids(list(run.paused_pids))
        if bots is not None:
            report["bots"] = bots.summary()
            await bots.stop(leave=False)
        await stack.stop()
    problems = list(run.problems) if run is not None else []
    if "aborted" in report:
        problems.append(f"aborted: {report['aborted'][:500]}")
    report["problems"] = problems
    report["notes"] = list(run.chaos.notes) if run is not None else []
    report["elapsed_s"] = round(time.monotonic() - began, 1)
    report["ok"] = not problems and len(records) == len(groups)
    options.root.mkdir(parents=True, exist_ok=True)
    (options.root / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (options.root / "report.md").write_text(render(report))
    return report


def render(report: dict[str, Any]) -> str:
    """The report's figures as Markdown (the docs quote it)."""
    lines = [
        f"# nemesis, seed {report['seed']}",
        "",
        f"{len(report.get('faults', []))} fault groups in {report['elapsed_s']:.0f} s; "
        f"{'OK' if report['ok'] else 'FAILED'}.",
        "",
        "| fault | n | out p50 / p99 / max (s) | first event after restore p50 / p99 / max (s) |",
        "|---|---|---|---|",
    ]
    for label, v in report.get("out_by_kind", {}).items():
        lines.append(
            f"| {label} | {v['faults']} | {v['out_p50_s']:.1f} / {v['out_p99_s']:.1f} / {v['out_max_s']:.1f} "
            f"| {v['back_p50_s']:.1f} / {v['back_p99_s']:.1f} / {v['back_max_s']:.1f} |"
        )
    final = report.get("final", {})
    ledger = final.get("ledger", {})
    lines += [
        "",
        f"hands ended {final.get('hands_ended')}, settled {final.get('hands_settled')}; trial balance "
        f"{ledger.get('trial_balance_gold')}; VerifyJournal {'clean' if ledger.get('verify_ok') else 'NOT clean'} "
        f"over {ledger.get('entries_checked')} entries; audit exit {final.get('audit', {}).get('exit_status')} "
        f"over {final.get('audit', {}).get('hands_verified')} hands "
        f"(its RSS peak {final.get('audit', {}).get('rss_peak_mb')} MiB); wallets checked "
        f"{report.get('wallets', {}).get('players_checked')}",
        f"RSS peak (MiB): {', '.join(f'{k} {v:.0f}' for k, v in sorted(report.get('rss_peak_mb', {}).items()))}",
        "",
        "## problems",
        "",
        *([f"- {p}" for p in report["problems"]] or ["none"]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.chaos.nemesis", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=16.0, help="how long faults are injected (default 16)")
    p.add_argument("--seed", type=int, default=None, help="the run's seed (default: drawn, and printed)")
    p.add_argument("--tables", type=int, default=44)
    p.add_argument("--games", default="all", help="comma-separated game ids, or all (default)")
    p.add_argument("--table-instances", type=int, default=2)
    p.add_argument("--settlement-instances", type=int, default=2)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--ttl-s", type=float, default=6.0, help="the table and settlement lease TTL (default 6)")
    p.add_argument("--gap-s", default="30,60", help="quiet seconds before each fault group, min,max (default 30,60)")
    p.add_argument("--pair-chance", type=float, default=0.25, help="chance a second fault joins a group (default 0.25)")
    p.add_argument("--kinds", default="", help=f"comma-separated (default all): {','.join(ALL_KINDS)}")
    p.add_argument("--plan-only", action="store_true", help="print the seed's schedule and exit")
    p.add_argument("--out", default="var/nemesis")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    kinds = tuple(k for k in args.kinds.split(",") if k) or ALL_KINDS
    gap = tuple(float(x) for x in args.gap_s.split(","))
    if len(gap) != 2 or not 0 <= gap[0] <= gap[1]:
        p.error("--gap-s is min,max")
    try:
        options = NemesisOptions(
            root=Path(args.out).resolve(),
            seed=seed,
            duration_s=args.minutes * 60,
            tables=args.tables,
            games=() if args.games == "all" else tuple(g for g in args.games.split(",") if g),
            table_instances=args.table_instances,
            settlement_instances=args.settlement_instances,
            partitions=args.partitions,
            ttl_s=args.ttl_s,
            gap_s=(gap[0], gap[1]),
            pair_chance=args.pair_chance,
            kinds=kinds,
        )
        groups = plan(seed, options.duration_s, kinds, options.gap_s, options.pair_chance, options.ttl_s)
    except ValueError as exc:
        p.error(str(exc))
    if args.plan_only:
        for g in groups:
            print(f"+{g.gap_s:5.1f} s  {g.label}  {[f.hold_s for f in g.faults]}")
        return 0
    configure(fmt="console", level="warning")
    report = asyncio.run(run_nemesis(options, log=lambda line: print(line, flush=True)))
    print((options.root / "report.md").read_text())
    print(f"seed {seed}; report: {options.root / 'report.json'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
