"""The golden corpus: recorded hands and what each must settle to, for as long as socai runs.

A corpus batch is one recording, a folder under ``tests/golden/batches/``:

- ``manifest.json``: what was recorded, how (``kind``: ``table`` — bots through the real
  table service, settled by the real settlement service and ledger; ``scripted`` — hands
  built from chosen seeds and moves for reasons the bots rarely reach, chained and sealed
  as the table service does; ``engine`` — hands dealt from chosen decks, below), when, by
  which command, under which rules versions, and the hand-seal public keys that verify its
  hands;
- ``events.jsonl.gz`` (``table`` and ``scripted`` batches): every message of the
  recording's event log exactly as stored (``socai events export --format stored``: bytes,
  stream sequence, subject, chain and seal headers), table facts included;
- ``hands.jsonl.gz`` (``engine`` batches): one line per hand, its subject and events in
  the protobuf JSON mapping (``socai.events.codec.to_json``), every card in the clear, and
  on a table's first hand the table's facts;
- ``journal.jsonl.gz`` (``table`` batches): the ledger's journal of the recording
  (``socai ledger export``): deposits, buy-ins, every hand's settlement, cash-outs;
- ``expected.jsonl.gz``: one line per hand, what it settled to when recorded
  (``expectation``): the transfers with reason and detail, each seat's net, shortfalls,
  fees, the carried pot, penalties, the ledger posting (idempotency key, entries and the
  exact ``TransactionInput`` settlement sends), and the rule each reason cited then
  (``rules``: what the game's ``REASONS`` said when the hand was recorded; a rule's wording
  may be improved later, so it is kept as the record's own and not compared);
- ``verdict.json`` (``table`` and ``scripted`` batches): ``socai audit --events
  events.jsonl.gz --journal journal.jsonl.gz --seal-public-key …`` of the batch when
  recorded (``AuditReport.verdict``).

The rule of change: a recorded hand's result never changes. ``check_batch`` replays every
hand through settlement's own replay path and audits the batch offline from its files, and
both must agree with the recording byte for byte.

An ``engine`` batch holds hands dealt from a chosen deck instead of their seed's shuffle
(``tests.golden.targets.ENGINE_TARGETS``: deals too rare for any seed search), played by
bots among the engine's legal moves at whole simulated tables. No seed deals those cards, so
nothing proves the deal fair and no table could have dealt it: such a batch pins the rules
engine's result of the deal and the moves, and nothing about fairness. ``check_batch``
folds each hand through ``engine_replay`` (settlement's replay less its check of the cards
against the seed) and compares the same expectation fields; instead of an audit verdict it
checks what the audit checks between a table's hands (each dealer the one the rules
choose, a carried pot continuing) and each seat's stack (its buy-in, then its stack plus
its net). Its lines' ``end_stream_seq`` is 0: no stream stored them. A rules change bumps the game's
``RULES_VERSION`` and keeps the old behaviour for hands recorded under the old version;
new hands are recorded for the new one (``python -m tests.golden record``), appended as a
new batch; nothing rewrites a batch.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, Any, Final

from socai.audit.auditor import Audit, Seals, check_continuity, reconcile, verify
from socai.audit.export import RawEvent, read_jsonl
from socai.audit.journal import read_journal
from socai.audit.ledger_source import JournalLedger
from socai.audit.report import AuditReport
from socai.events import codec, hidden, seal
from socai.events.model import Event, HandStarted, PlayerSeated
from socai.events.model import subject as canonical_subject
from socai.rules import registry
from socai.settle import replay as settle_replay
from socai.settle.replay import ReplayError, ReplayResult
from socai_settlement import sealed_replay
from socai_settlement.convert import SettledHand, settled_hand

FORMAT: Final = 1
ROOT: Final = Path(__file__).parent
BATCHES: Final = ROOT / "batches"
PREFIX: Final = "socai.events"  # the recordings' subject prefix (the default)
ENGINE: Final = "engine"
KINDS: Final = ("table", "scripted", ENGINE)
# What an engine batch's manifest says of its audit (the module docstring).
ENGINE_AUDIT: Final = (
    "none: the hands are dealt from chosen decks, not from their seeds' shuffles, so the auditor "
    "would rightly call every card a DEAL_MISMATCH; the batch pins only the rules engine's result"
)
NOT_COMPARED: Final = frozenset({"rules"})  # the wording a reason cited when recorded (the module docstring)


@dataclass(frozen=True)
class Batch:
    """One recording (the module docstring)."""

    path: Path

    @cached_property
    def manifest(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.path / "manifest.json").read_text(encoding="utf-8"))
        return data

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl.gz"

    @property
    def journal_path(self) -> Path | None:
        path = self.path / "journal.jsonl.gz"
        return path if path.is_file() else None

    def raws(self) -> list[RawEvent]:
        return list(read_jsonl(self.events_path))

    def hands(self) -> list[dict[str, Any]]:
        """An ``engine`` batch's ``hands.jsonl`` lines (none for another kind)."""
        if self.kind != ENGINE:
            return []
        return list(read_lines(self.path / "hands.jsonl.gz"))

    def expected(self) -> list[dict[str, Any]]:
        return list(read_lines(self.path / "expected.jsonl.gz"))

    def verdict_text(self) -> str:
        return (self.path / "verdict.json").read_text(encoding="utf-8")

    def public_keys(self) -> dict[str, bytes]:
        keys: Mapping[str, str] = self.manifest["seal_public_keys"]
        return seal.parse_public_keys(keys.values())


def batches(root: Path = BATCHES) -> list[Batch]:
    """Every batch of the corpus, in name order (names start with the recording date)."""
    if not root.is_dir():
        return []
    return [Batch(p) for p in sorted(root.iterdir()) if (p / "manifest.json").is_file()]


# --- files ----------------------------------------------------------------------------------


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def write_lines(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write ``rows`` one JSON object a line, gzip-compressed; returns how many. The gzip
    header carries no file name or time, so the same rows make the same bytes."""
    count = 0
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped:
        for row in rows:
            zipped.write((dumps(row) + "\n").encode("utf-8"))
            count += 1
    return count


def write_gzip_text(path: Path, write: Any) -> int:
    """``write(handle)`` into a gzip text file with a reproducible header; returns its result."""
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped:
        import io

        text: IO[str] = io.TextIOWrapper(zipped, encoding="utf-8", newline="\n")
        result = write(text)
        text.flush()
        text.detach()
    return int(result)


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


# --- what a hand settles to ------------------------------------------------------------------


def expectation(hand: SettledHand, *, subject: str, end_stream_seq: int, rules_version: int) -> dict[str, Any]:
    """A hand's ``expected.jsonl`` line from its settlement (``SettledHand``, as settlement's
    replay builds it): everything ``check_batch`` compares."""
    module = registry.get(hand.game)
    reasons = sorted({row[3] for row in hand.transfers})
    return {
        "hand_id": hand.hand_id,
        "table_id": hand.table_id,
        "game": hand.game,
        "rules_version": rules_version,
        "subject": subject,
        "end_stream_seq": end_stream_seq,
        "transfers": [list(row) if len(row) == 5 else [*row, ""] for row in hand.transfers],
        "rules": {reason: module.REASONS[reason].rule for reason in reasons},
        "seats": [list(row) for row in hand.seats],
        "shortfalls": [list(row) for row in hand.shortfalls],
        "fees_gold": hand.fees_gold,
        "pot_carry_gold": hand.pot_carry_gold,
        "penalties_gold": dict(sorted(hand.penalties_gold.items())),
        "ledger": _ledger_part(hand),
    }


def _ledger_part(hand: SettledHand) -> dict[str, Any] | None:
    if not hand.transaction:
        return None  # no gold moved: nothing is posted
    from socai.gen.ledger.v1 import ledger_pb2

    tx = ledger_pb2.TransactionInput.FromString(hand.transaction)
    return {
        "key": tx.idempotency_key,
        "entries": [[e.account_id, e.amount_gold] for e in tx.entries],
        "transaction": base64.b64encode(hand.transaction).decode("ascii"),
    }


# --- replaying a batch --------------------------------------------------------------------------


def by_subject(raws: Iterable[RawEvent]) -> dict[str, list[RawEvent]]:
    out: dict[str, list[RawEvent]] = defaultdict(list)
    for raw in raws:
        out[raw.subject].append(raw)
    return out


def hand_input(line: Mapping[str, Any], messages: Sequence[RawEvent]) -> sealed_replay.HandInput:
    """Settlement's input for one recorded hand: every message of its subject, as stored."""
    return sealed_replay.HandInput(
        line["hand_id"],
        canonical_subject(line["table_id"], line["hand_id"], PREFIX),
        int(line["end_stream_seq"]),
        tuple(
            sealed_replay.EventBytes(0, line["hand_id"], line["table_id"], r.payload, r.stream_seq, r.chain_headers)
            for r in messages
        ),
    )


@dataclass
class Outcome:
    """What ``check_batch`` found: each hand that differs (hand → the first differences), the
    audit's verdict when it differs, and the reasons each game's hands paid."""

    batch: str
    hands: int = 0
    differences: dict[str, list[str]] = field(default_factory=dict)
    verdict_differs: str = ""
    reasons: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    @property
    def ok(self) -> bool:
        return not self.differences and not self.verdict_differs


def replay_batch(batch: Batch) -> tuple[list[dict[str, Any]], list[sealed_replay.Replayed], list[RawEvent]]:
    """Every hand of ``batch`` through settlement's replay (authenticate the sealed chain,
    decode, replay, build the posting), in one call as a replay worker gets them."""
    raws = batch.raws()
    subjects = by_subject(raws)
    lines = batch.expected()
    inputs = [hand_input(line, subjects.get(line["subject"], [])) for line in lines]
    policy = sealed_replay.seal_policy(batch.public_keys())
    return lines, sealed_replay.replay_payloads(inputs, policy), raws


def check_batch(batch: Batch) -> Outcome:
    """Replay and audit ``batch``; compare with what it recorded (the module docstring)."""
    if batch.kind == ENGINE:
        return check_engine_batch(batch)
    outcome = Outcome(batch.name)
    lines, replayed, raws = replay_batch(batch)
    outcome.hands = len(lines)
    for line, got in zip(lines, replayed, strict=True):
        diffs = compare(line, got)
        if diffs:
            outcome.differences[line["hand_id"]] = diffs
        for row in line["transfers"]:
            outcome.reasons[line["game"]][row[3]] += 1
    verdict = audit_verdict(batch, raws)
    if verdict != batch.verdict_text():
        outcome.verdict_differs = first_line_difference(batch.verdict_text(), verdict)
    return outcome


def compare(line: Mapping[str, Any], got: sealed_replay.Replayed) -> list[str]:
    """How ``got`` differs from the recorded ``line`` (empty: not at all)."""
    if got.error_code or got.crashed or got.settled is None:
        why = got.crashed or f"{got.error_code}: {got.error_message}"
        return [f"does not settle any more: {why}"]
    diffs: list[str] = []
    if got.strangers:
        diffs.append(f"messages not the table's: {got.strangers}")
    rules_version = int(line["rules_version"])
    now = expectation(
        got.settled, subject=line["subject"], end_stream_seq=got.end_stream_seq, rules_version=rules_version
    )
    for key in sorted((set(line) | set(now)) - NOT_COMPARED):
        if line.get(key) != now.get(key):
            diffs.append(f"{key}: recorded {dumps(line.get(key))[:300]}, now {dumps(now.get(key))[:300]}")
    return diffs


def audit_verdict(batch: Batch, raws: Sequence[RawEvent]) -> str:
    """``socai audit`` of the batch's files, offline: the events as stored with the batch's
    seal keys, reconciled with its journal when it has one."""
    seals = Seals(seal.SealVerifier(batch.public_keys()), PREFIX)
    audit = verify(raws, source=f"file {batch.events_path}", seals=seals)
    journal = batch.journal_path
    if journal is not None:
        asyncio.run(reconcile(audit, JournalLedger(read_journal(journal), f"journal {journal}")))
    return audit.report.verdict_text()


def first_line_difference(want: str, have: str) -> str:
    for number, (a, b) in enumerate(zip(want.splitlines(), have.splitlines(), strict=False), start=1):
        if a != b:
            return f"line {number}: recorded {a.strip()!r}, now {b.strip()!r}"
    return f"recorded {len(want.splitlines())} lines, now {len(have.splitlines())}"


# --- engine batches ---------------------------------------------------------------------------


def hand_events(hand: Mapping[str, Any]) -> list[Event]:
    """The events of one ``hands.jsonl`` line."""
    return [codec.from_json(e) for e in hand["events"]]


def engine_replay(events: Sequence[Event]) -> ReplayResult:
    """One hand of an ``engine`` batch as settlement's replay (``socai.settle.replay.replay``)
    settles it, less the check a chosen deck must fail: the dealt cards against the revealed
    seed's shuffle (its check 6). Every other check runs, through replay's own steps: the
    envelopes, the sequence, the rules version, one HandEnded last, the revealed seed against
    the commitment, every card written (an engine hand is logged in the clear: no seed could
    fill in a face-down card), and the fold through the game's rules module to its
    settlement. Raises ReplayError as replay does. Kept here, in the tests: the library has
    no replay that skips fairness, and must not."""
    evs, module, first, hand_id = settle_replay._opening(events)
    started = first.body
    assert isinstance(started, HandStarted)
    end = settle_replay._check_end(evs, hand_id)
    settle_replay._check_seed(started, first, end, hand_id)
    if started.face_down_by_position:
        raise ReplayError(
            hidden.CARD_FORMAT,
            f"{first.event_id}: logs face-down cards by position; no seed deals a chosen deck's cards to fill them in",
            hand_id=hand_id,
            event_id=first.event_id,
        )
    dealt = settle_replay._read_cards(evs, None, hand_id)  # the form only: every card written
    if started.closing:
        state, settlement = None, settle_replay._closing(dealt, hand_id)
    else:
        state, settlement = settle_replay._fold(module, dealt, hand_id)
    assert settlement is not None  # _fold settles unless told not to
    return ReplayResult(started, tuple(dealt), settlement, 0, 0, state)


def _engine_replayed(hand: Mapping[str, Any]) -> tuple[sealed_replay.Replayed, ReplayResult | None]:
    """``engine_replay`` of one ``hands.jsonl`` line as settlement reports a replay
    (``sealed_replay.replay_here``), and its result when it settles."""
    try:
        result = engine_replay(hand_events(hand))
    except ReplayError as exc:
        return sealed_replay.Replayed(hand["hand_id"], error_code=exc.code, error_message=exc.message), None
    except Exception as exc:  # a bug in the engine: reported as a difference, as settlement dead-letters it
        return sealed_replay.Replayed(hand["hand_id"], crashed=f"{type(exc).__name__}: {exc}"), None
    return sealed_replay.Replayed(hand["hand_id"], settled=settled_hand(result)), result


def check_engine_batch(batch: Batch) -> Outcome:
    """Fold every hand of an ``engine`` batch through ``engine_replay`` and compare it with
    what it recorded; check the facts between its hands (``engine_continuity``)."""
    outcome = Outcome(batch.name)
    hands = batch.hands()
    by_id = {h["hand_id"]: h for h in hands}
    lines = batch.expected()
    outcome.hands = len(lines)
    results: dict[str, ReplayResult] = {}
    for line in lines:
        hand = by_id.get(line["hand_id"])
        if hand is None:
            outcome.differences[line["hand_id"]] = ["not in hands.jsonl.gz"]
            continue
        got, result = _engine_replayed(hand)
        diffs = compare(line, got)
        if diffs:
            outcome.differences[line["hand_id"]] = diffs
        if result is not None:
            results[line["hand_id"]] = result
        for row in line["transfers"]:
            outcome.reasons[line["game"]][row[3]] += 1
    for extra in sorted(set(by_id) - {line["hand_id"] for line in lines}):
        outcome.differences[extra] = ["in hands.jsonl.gz but not in expected.jsonl.gz"]
    for hand_id, why in engine_continuity(hands, results):
        outcome.differences.setdefault(hand_id, []).append(why)
    return outcome


STACK_MISMATCH: Final = "STACK_MISMATCH"


def engine_continuity(hands: Sequence[Mapping[str, Any]], results: Mapping[str, ReplayResult]) -> list[tuple[str, str]]:
    """(hand, what is wrong) for each fact between an engine batch's hands that does not
    hold: what the audit checks between a table's hands (``auditor.check_continuity``: each
    dealer the one the rules choose, a carried pot continuing), and each seat's stack at
    HandStarted: the buy-in its PlayerSeated brought to a table's first hand, then its
    stack plus its net of the hand before (``STACK_MISMATCH``). Hands in file order, each
    table's facts on its first hand; a hand that did not settle is not compared, nor are
    the stacks of its table's later hands (they depend on its nets)."""
    audit = Audit(
        AuditReport("engine batch"), results=[results[h["hand_id"]] for h in hands if h["hand_id"] in results]
    )
    check_continuity(audit)
    out = [(m.hand_id, f"{m.reason}: {m.detail}") for m in audit.report.mismatches]
    stacks: dict[str, dict[int, int]] = {}  # table → seat → chips
    unknown: set[str] = set()  # tables with a hand that did not settle
    for hand in hands:
        table = stacks.setdefault(hand["table_id"], {})
        for fact in hand["table_events"]:
            body = codec.from_json(fact).body
            if isinstance(body, PlayerSeated):
                table[body.seat] = table.get(body.seat, 0) + body.buy_in_gold
        result = results.get(hand["hand_id"])
        if result is None:
            unknown.add(hand["table_id"])
        if result is None or hand["table_id"] in unknown:
            continue
        for info in result.started.seats:
            if table.get(info.seat) != info.stack_gold:
                out.append(
                    (
                        hand["hand_id"],
                        f"{STACK_MISMATCH}: seat {info.seat} starts with {info.stack_gold}; "
                        f"the table's facts and hands leave it {table.get(info.seat)}",
                    )
                )
            table[info.seat] = info.stack_gold + result.settlement.nets.get(info.seat, 0)
    return out


def coverage(outcomes: Iterable[Outcome]) -> dict[str, tuple[set[str], set[str]]]:
    """Per game of the registry: (the reason codes the corpus's hands pay, the reasons its
    module declares)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for outcome in outcomes:
        for game, counts in outcome.reasons.items():
            seen[game] |= set(counts)
    return {game: (seen[game], set(registry.get(game).REASONS)) for game in registry.available()}


def coverage_lines(cov: Mapping[str, tuple[set[str], set[str]]], hands: Mapping[str, int]) -> list[str]:
    out = []
    for game, (seen, declared) in sorted(cov.items()):
        missing = sorted(declared - seen)
        line = f"golden {game:<13} {hands.get(game, 0):>5} hands  reasons {len(declared & seen)}/{len(declared)}"
        out.append(line + (f"  missing: {', '.join(missing)}" if missing else ""))
    return out
