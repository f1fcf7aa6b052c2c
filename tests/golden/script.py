"""Record a ``scripted`` batch of the golden corpus: the goals the bots almost never reach.

Table batches pay most reason codes; some need a deal or a line of play that random bots
meet once in tens of thousands of hands (an instant win at the deal, a chop of a chop, a
Sâm nobody catches, a special Mậu Binh hand). ``python -m tests.golden script`` hunts for
them: for each goal no recorded hand reaches yet (a reason code, or a Mậu Binh special hand:
``tests.golden.targets``, whose ``TARGETS`` say how: the table's options and seats, the
bots, and where it helps a search over seeds for the deal), it plays whole tables with the
rules engine (``tests.support.synthetic.play_table``: fair shuffles from real seeds, moves by
``socai.rules.autoplay``, stacks, dealers and the Gà carried from hand to hand as at the
table service, and a closing hand when a closed table still carries a Gà) until a hand
reaches it, then keeps that table. The kept tables are written as a batch exactly as the
table service would have written them to the log: table facts, then every hand's events,
chained and sealed (``tests.support.synthetic.sealed``) with a key made for the batch. What
each hand must settle to is settlement's replay of those messages; the batch's verdict is
the offline audit of its events (no ledger: nothing was posted).

A few goals no seed search reaches (``targets.ENGINE_ONLY``: a deal rarer than one in 10⁷).
``python -m tests.golden script --engine`` hunts those with ``targets.ENGINE_TARGETS``, whose
first hand deals a chosen deck instead of its seed's shuffle (``play_table``'s
``deck_for``), everything else as above, and writes an ``engine`` batch: each hand's events
in the protobuf JSON mapping, in the clear, beside what the rules engine settles them to
(``corpus.engine_replay``: settlement's replay less its check of the cards against the
seed). No seed deals those cards, so such a batch has no seal and no audit verdict: the
auditor would rightly call each card a DEAL_MISMATCH.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from socai.audit.export import RawEvent, _decode, write_stored_jsonl
from socai.events import codec, seal
from socai.events.model import Event, subject
from socai.rules import base, registry
from socai.settle.replay import DEAL_MISMATCH, ReplayError, replay
from socai_settlement import sealed_replay
from socai_settlement.convert import settled_hand
from tests.golden import corpus
from tests.golden.record import git_commit, new_seal_key
from tests.golden.targets import (
    ENGINE_ONLY,
    ENGINE_TARGETS,
    TARGETS,
    UNREACHED,
    Target,
    hand_goals,
    wanted_goals,
)
from tests.support.synthetic import SimTable, play_table, sealed, setup_of


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
            decks = target.deck_for(rng) if target.deck_for is not None else None
            table = play_table(
                table_id,
                target.game,
                target.hands,
                rng,
                clock,
                target.bot,
                setup=target.setup or setup_of(target.game),
                seed_for=seeds,
                deck_for=decks,
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
    """Per game, the goals (``targets.wanted_goals``) no recorded hand reaches yet, in a
    batch of any kind."""
    seen: dict[str, set[str]] = {}
    for batch in corpus.batches(root):
        lines = batch.expected()
        maubinh = any(line["game"] == "maubinh" for line in lines)
        engine = {h["subject"]: corpus.hand_events(h) for h in batch.hands()} if batch.kind == corpus.ENGINE else {}
        subjects = corpus.by_subject(batch.raws()) if maubinh and batch.kind != corpus.ENGINE else {}
        for line in lines:
            events: Sequence[Event] = []
            if line["game"] == "maubinh" and batch.kind == corpus.ENGINE:
                events = engine[line["subject"]]  # in the clear
            elif line["game"] == "maubinh":
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


def engine_goals(game: str) -> set[str]:
    """The goals of ``game`` that only an ``engine`` batch reaches (``targets.ENGINE_ONLY``)."""
    return {key.split(":", 1)[1] for key in ENGINE_ONLY if key.split(":", 1)[0] == game}


def record(
    games: Sequence[str] | None, *, seed: int, engine: bool = False, out_root: Path = corpus.BATCHES
) -> Path | None:
    """Hunt the goals still missing (of ``games``, default all) and write them as a batch;
    None when nothing is missing. With ``engine`` only the goals of ``targets.ENGINE_ONLY``
    are hunted, from chosen decks, into an ``engine`` batch (``record_engine``); without it
    they are not. Raises RuntimeError when no hunt found anything. Prints the goals a hunt
    missed and those left out (``targets.ENGINE_ONLY`` without ``engine``,
    ``targets.UNREACHED``)."""
    missing = missing_goals(out_root)
    asked = games or registry.available()
    if engine:
        return record_engine(
            {g: missing[g] & engine_goals(g) for g in asked if g in missing}, seed=seed, out_root=out_root, games=games
        )
    wanted = {g: missing[g] - engine_goals(g) for g in asked if g in missing}
    for game in asked:
        for goal in sorted(missing.get(game, set()) & engine_goals(game)):
            print(f"left for an engine batch (--engine): {game}:{goal}: {ENGINE_ONLY[f'{game}:{goal}']}")
    chosen = [g for g in asked if wanted.get(g)]
    if not chosen:
        return None
    targets = [t for game in chosen for t in targets_for(game, sorted(wanted[game]))]
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
    replayed = sealed_replay.replay_payloads(
        [corpus.hand_input(line, subjects[line["subject"]]) for line in lines], sealed_replay.seal_policy(keys)
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


# --- engine batches ------------------------------------------------------------------------------


def record_engine(
    wanted: dict[str, set[str]], *, seed: int, out_root: Path, games: Sequence[str] | None = None
) -> Path | None:
    """Hunt ``wanted`` (game → goals of ``targets.ENGINE_ONLY`` still missing) with
    ``targets.ENGINE_TARGETS`` and write the tables as an ``engine`` batch; None when
    nothing is wanted. Raises RuntimeError when a hunt fails (every engine target builds
    the deal it needs, so each must succeed)."""
    targets = [t for game, goals in sorted(wanted.items()) for t in ENGINE_TARGETS.get(game, []) if t.reason in goals]
    if not targets:
        return None
    found = hunt(targets, seed=seed, prefix="e")
    not_found = sorted(f"{g}:{r}" for (g, r), tries in found.tries.items() if tries < 0 and (g, r) not in found.paid)
    if not_found:
        raise RuntimeError(f"an engine target did not reach its goal: {not_found}")
    now = datetime.now(UTC)
    games_kept = sorted({t.game for t in found.tables})
    name = f"{now:%Y-%m-%d}-{'+'.join(games_kept) if len(games_kept) < 3 else 'mixed'}-engine-s{seed}"
    target = out_root / name
    if target.exists():
        raise RuntimeError(f"{target} exists: a batch is never rewritten (choose another --seed)")
    target.mkdir(parents=True)
    write_engine_batch(
        target,
        found,
        seed=seed,
        at=now,
        command=" ".join(["python -m tests.golden script --engine", *(games or ()), f"--seed {seed}"]),
    )
    return target


def engine_hands(tables: Sequence[SimTable]) -> list[dict[str, Any]]:
    """The ``hands.jsonl`` lines of ``tables``: per hand its subject and events, and on a
    table's first hand the table's facts (TableOpened, PlayerSeated), in the protobuf JSON
    mapping (``socai.events.codec.to_json``), every card in the clear."""
    out = []
    for table in tables:
        for number, hand in enumerate(table.hands):
            out.append(
                {
                    "hand_id": hand.hand_id,
                    "table_id": hand.table_id,
                    "game": hand.game,
                    "subject": subject(hand.table_id, hand.hand_id, corpus.PREFIX),
                    "table_events": [codec.to_json(e) for e in table.table_events] if number == 0 else [],
                    "events": [codec.to_json(e) for e in hand.events],
                }
            )
    return out


def write_engine_batch(target: Path, found: Hunt, *, seed: int, at: datetime, command: str) -> None:
    """Write ``found``'s tables as an ``engine`` batch in ``target``: ``hands.jsonl.gz``,
    ``expected.jsonl.gz`` (what ``corpus.engine_replay`` settles each hand to, which must be
    what the table settled it to while playing) and ``manifest.json``; then check it.
    Raises RuntimeError when a hand settles otherwise or the batch does not check."""
    hands = engine_hands(found.tables)
    played = {h.hand_id: h for t in found.tables for h in t.hands}
    expected = []
    for hand in hands:
        result = corpus.engine_replay(corpus.hand_events(hand))
        if result.settlement != played[hand["hand_id"]].settlement:
            raise RuntimeError(f"{hand['hand_id']}: the replay settles it otherwise than the table did")
        expected.append(
            corpus.expectation(
                settled_hand(result),
                subject=hand["subject"],
                end_stream_seq=0,
                rules_version=base.played_rules_version(result.started),
            )
        )
    corpus.write_lines(target / "hands.jsonl.gz", hands)
    corpus.write_lines(target / "expected.jsonl.gz", expected)
    games = sorted({row["game"] for row in expected})
    chosen = [h.hand_id for t in found.tables for h in t.hands if not dealt_by_seed(h.events)]
    manifest = {
        "format": corpus.FORMAT,
        "kind": corpus.ENGINE,
        "games": games,
        "rules_versions": {g: sorted({row["rules_version"] for row in expected if row["game"] == g}) for g in games},
        "hands": len(expected),
        "recorded_at": at.isoformat(timespec="seconds"),
        "code": git_commit(),
        "command": command,
        "chosen_decks": chosen,
        "audit": corpus.ENGINE_AUDIT,
        "reasons": sorted({row[3] for line in expected for row in line["transfers"]}),
        "hunted": {f"{g}:{r}": tries for (g, r), tries in sorted(found.tries.items())},
    }
    (target / "manifest.json").write_text(corpus.dumps(manifest) + "\n", encoding="utf-8")
    outcome = corpus.check_batch(corpus.Batch(target))
    if not outcome.ok:
        raise RuntimeError(f"the engine batch does not check: {outcome.differences}")


def dealt_by_seed(events: Sequence[Event]) -> bool:
    """Whether a hand's cards are its revealed seed's shuffle: False when settlement's replay
    finds a card the seed does not deal (DEAL_MISMATCH), a hand dealt from a chosen deck."""
    try:
        replay(events)
    except ReplayError as exc:
        if exc.code == DEAL_MISMATCH:
            return False
        raise
    return True
