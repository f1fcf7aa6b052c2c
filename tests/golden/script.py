"""Record a ``scripted`` batch of the golden corpus: the goals the bots almost never reach.

Table batches pay most reason codes; some need a deal or a line of play that random bots
meet once in tens of thousands of hands (an instant win at the deal, a chop of a chop, a
Sâm nobody catches, a special Mậu Binh hand). ``python -m tests.golden script`` hunts for
them: for each goal no recorded hand reaches yet (a reason code, or a Mậu Binh special hand:
``tests.golden.targets``, whose ``TARGETS`` say how: the table's options and seats, the
bots, and where it helps a search over seeds for the deal), it plays whole tables with the
rules engine (``tests.support.simulate.play_table``: fair shuffles from real seeds, moves by
``socai.rules.autoplay``, stacks, dealers and the Gà carried from hand to hand as at the
table service, and a closing hand when a closed table still carries a Gà) until a hand
reaches it, then keeps that table. The kept tables are written as a batch exactly as the
table service would have written them to the log: table facts, then every hand's events,
chained and sealed (``tests.support.simulate.sealed``) with a key made for the batch. What
each hand must settle to is settlement's replay of those messages; the batch's verdict is
the offline audit of its events (no ledger: nothing was posted).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from socai.audit.export import RawEvent, _decode, write_stored_jsonl
from socai.events import seal
from socai.events.model import Event, subject
from socai.rules import base, registry
from socai.settle.replay import replay
from socai_settlement import replayer
from tests.golden import corpus
from tests.golden.record import git_commit, new_seal_key
from tests.golden.targets import TARGETS, UNREACHED, Target, hand_goals, wanted_goals
from tests.support.simulate import SimTable, play_table, sealed, setup_of


def generic_targets(game: str, goals: Iterable[str]) -> list[Target]:
    """A plain hunt for each of ``goals``: the game's generic setup and random bots."""
    return [Target(game, goal) for goal in goals]


def targets_for(game: str, goals: Iterable[str]) -> list[Target]:
    """The hunts for ``goals`` of ``game``: its ``TARGETS``, else a generic hunt."""
    wanted = set(goals)
    special = [t for t in TARGETS.get(game, []) if t.reason in wanted]
    covered = {t.reason for t in special}
    return special + generic_targets(game, sorted(wanted - covered))


def table_goals(table: SimTable) -> set[tuple[str, str]]:
    """(game, goal) for every goal a hand of ``table`` reached (``targets.hand_goals``)."""
    rows = [
        [(t.from_account, t.to_account, t.amount_gold, t.reason, t.detail) for t in h.settlement.transfers]
        for h in table.hands
    ]
    return {
        (table.game, goal)
        for h, hand_rows in zip(table.hands, rows, strict=True)
        for goal in hand_goals(table.game, h.events, hand_rows)
    }


@dataclass
class Hunt:
    """What a hunt found: the tables kept, the goals their hands reach, and how many tables
    each target took (negative: not found within the target's limit)."""

    tables: list[SimTable] = field(default_factory=list)
    paid: set[tuple[str, str]] = field(default_factory=set)  # (game, goal)
    tries: dict[tuple[str, str], int] = field(default_factory=dict)


def hunt(targets: Sequence[Target], *, seed: int, prefix: str = "g", report: bool = True) -> Hunt:
    """Play tables for each target until one of them reaches the target's goal (or the
    target's limit); a kept table counts for every goal its hands reach. With ``report``,
    prints per target how many tables it took and how long."""
    found = Hunt()
    rng = random.Random(seed)
    clock = [datetime(2026, 12, 1, 12, 0, tzinfo=UTC)]
    for target in targets:
        key = (target.game, target.reason)
        if key in found.paid:
            continue
        began = time.monotonic()
        for tries in range(1, target.tables_max + 1):
            table_id = f"{prefix}{len(found.tables) + 1:03d}t{tries}"
            seeds = target.seed_for(rng) if target.seed_for is not None else None
            table = play_table(
                table_id,
                target.game,
                target.hands,
                rng,
                clock,
                target.bot,
                setup=target.setup or setup_of(target.game),
                seed_for=seeds,
                close=target.close,
            )
            paid = table_goals(table)
            if key in paid:
                found.tables.append(table)
                found.paid |= paid
                found.tries[key] = tries
                break
        else:
            found.tries[key] = -target.tables_max
        if report:
            tries_taken = found.tries[key]
            outcome = f"{tries_taken} table(s)" if tries_taken > 0 else f"NOT FOUND in {-tries_taken} tables"
            print(f"{target.game}:{target.reason}: {outcome}, {time.monotonic() - began:.1f} s", flush=True)
    return found


def stored(tables: Sequence[SimTable], signer: seal.HandSigner) -> list[RawEvent]:
    """The tables' messages as the table service would have stored them: each table's facts,
    then its hands in order, each message chained and every HandEnded sealed by ``signer``."""
    out: list[RawEvent] = []
    chains: dict[str, bytes] = {}
    for table in tables:
        for event in (*table.table_events, *(e for h in table.hands for e in h.events)):
            subj = subject(event.table_id, event.hand_id, corpus.PREFIX)
            payload, headers = sealed(subj, event, chains, signer)
            out.append(_decode(len(out) + 1, subj, payload, tuple(headers.items())))
    return out


def missing_goals(root: Path = corpus.BATCHES) -> dict[str, set[str]]:
    """Per game, the goals (``targets.wanted_goals``) no recorded hand reaches yet."""
    seen: dict[str, set[str]] = {}
    for batch in corpus.batches(root):
        lines = batch.expected()
        subjects = corpus.by_subject(batch.raws()) if any(line["game"] == "maubinh" for line in lines) else {}
        for line in lines:
            events: Sequence[Event] = []
            if line["game"] == "maubinh":
                # The replay's events: a hand that logs face-down cards by position has them
                # filled in from its revealed seed.
                events = replay([r.message for r in subjects[line["subject"]] if r.message is not None]).events
            seen.setdefault(line["game"], set()).update(hand_goals(line["game"], events, line["transfers"]))
    out = {}
    for game in registry.available():
        left = wanted_goals(game) - seen.get(game, set())
        if left:
            out[game] = left
    return out


def record(games: Sequence[str] | None, *, seed: int, out_root: Path = corpus.BATCHES) -> Path | None:
    """Hunt the goals still missing (of ``games``, default all) and write them as a batch;
    None when nothing is missing. Raises RuntimeError when no hunt found anything. Prints
    the goals a hunt missed and those left out (``targets.UNREACHED``)."""
    missing = missing_goals(out_root)
    chosen = [g for g in (games or registry.available()) if g in missing]
    if not chosen:
        return None
    targets = [t for game in chosen for t in targets_for(game, sorted(missing[game]))]
    found = hunt(targets, seed=seed)
    not_found = sorted(f"{g}:{r}" for (g, r), tries in found.tries.items() if tries < 0 and (g, r) not in found.paid)
    if not found.tables:
        raise RuntimeError(f"no hunt succeeded: {not_found}")
    private, public = new_seal_key()
    signer = seal.HandSigner(bytes.fromhex(private))
    raws = stored(found.tables, signer)
    now = datetime.now(UTC)
    games_kept = sorted({t.game for t in found.tables})
    name = f"{now:%Y-%m-%d}-{'+'.join(games_kept) if len(games_kept) < 3 else 'mixed'}-scripted-s{seed}"
    target = out_root / name
    if target.exists():
        raise RuntimeError(f"{target} exists: a batch is never rewritten (choose another --seed)")
    target.mkdir(parents=True)
    write_batch(
        target,
        raws,
        public,
        found,
        seed=seed,
        at=now,
        command=" ".join(["python -m tests.golden script", *(games or ()), f"--seed {seed}"]),
    )
    if not_found:
        print(f"not found (try another --seed or a better Target): {', '.join(not_found)}")
    asked = games or registry.available()
    left_out = {goal: why for goal, why in UNREACHED.items() if goal.split(":", 1)[0] in asked}
    for goal, why in left_out.items():
        print(f"left out, no scripted run reaches it: {goal}: {why}")
    return target


def write_batch(
    target: Path, raws: list[RawEvent], public: str, found: Hunt, *, seed: int, at: datetime, command: str
) -> None:
    keys = {seal.key_id(bytes.fromhex(public)): bytes.fromhex(public)}
    subjects = corpus.by_subject(raws)
    ends = [r for r in raws if r.message is not None and r.message.WhichOneof("body") == "hand_ended"]
    lines = [
        {"hand_id": r.hand_id, "table_id": r.table_id, "subject": r.subject, "end_stream_seq": r.stream_seq}
        for r in ends
    ]
    replayed = replayer.replay_payloads(
        [corpus.hand_input(line, subjects[line["subject"]]) for line in lines], replayer.seal_policy(keys)
    )
    expected = []
    for line, got in zip(lines, replayed, strict=True):
        if got.settled is None:
            raise RuntimeError(
                f"{line['hand_id']}: does not settle: {got.error_code} {got.error_message} {got.crashed}"
            )
        started = next(
            r.message.hand_started
            for r in subjects[line["subject"]]
            if r.message is not None and r.message.WhichOneof("body") == "hand_started"
        )
        version = started.rules_version or base.LEGACY_RULES_VERSION
        expected.append(
            corpus.expectation(
                got.settled, subject=line["subject"], end_stream_seq=got.end_stream_seq, rules_version=version
            )
        )
    corpus.write_gzip_text(target / "events.jsonl.gz", lambda out: write_stored_jsonl(raws, out))
    corpus.write_lines(target / "expected.jsonl.gz", expected)
    games = sorted({row["game"] for row in expected})
    manifest = {
        "format": corpus.FORMAT,
        "kind": "scripted",
        "games": games,
        "rules_versions": {g: sorted({row["rules_version"] for row in expected if row["game"] == g}) for g in games},
        "hands": len(expected),
        "recorded_at": at.isoformat(timespec="seconds"),
        "code": git_commit(),
        "command": command,
        "seal_public_keys": {k: v.hex() for k, v in keys.items()},
        "reasons": sorted({row[3] for line in expected for row in line["transfers"]}),
        "hunted": {f"{g}:{r}": tries for (g, r), tries in sorted(found.tries.items())},
    }
    (target / "manifest.json").write_text(corpus.dumps(manifest) + "\n", encoding="utf-8")
    batch = corpus.Batch(target)
    verdict = corpus.audit_verdict(batch, batch.raws())
    if '"ok": true' not in verdict:
        raise RuntimeError(f"the offline audit of the scripted batch is not clean:\n{verdict[:4000]}")
    (target / "verdict.json").write_text(verdict, encoding="utf-8")
    outcome = corpus.check_batch(batch)
    if not outcome.ok:
        raise RuntimeError(f"the batch does not check: {outcome.differences or outcome.verdict_differs}")
