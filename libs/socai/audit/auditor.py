"""The audit itself: verify every hand of an event log, then reconcile with the ledger.

``verify(raw_events)`` groups the events by hand (keeping their order), replays each hand
through ``socai.settle.replay`` (commitment, every card and die, the rules engine) and
fills an ``AuditReport``; a hand that does not replay is a mismatch with the replay's
reason and message. With ``allow_open`` a table's last hand may still be in play: it is
replayed as far as it goes (``replay_open``: every event so far legal and consistent, its
cards checked against the seed once it ends; in a hand that writes its face-down cards by
position, the events after the first hidden card checked in form only, their rules once
the seed is revealed) and reported open only when all of that holds; a bad event in it is
a finding like any other. An open hand shows only what a spectator sees: the log holds no
face-down card of it (``socai.events.hidden``). ``reconcile(audit, ledger)`` then looks up each hand's transaction by
its idempotency key ``settle:{hand_id}`` (or the retry key it was settled under after a
refusal, ``socai.settle.keys``) and compares its entries with the replay, sums
the entries per account on both sides, for tables whose whole history is in the input
checks each escrow's balance against buy-ins, cash-outs and hands, and asks whether the
journal agrees with itself. The ledger is a ``socai.audit.ledger_source.LedgerSource``:
the live service or an exported journal, read by the same comparisons.

Read from the stream (``seals`` given), a hand is the table's only as far as its seal says
(``socai.events.seal``): its HandEnded's seal must verify with one of the table's public
keys, and only the messages on the hand chain it covers are replayed. Every other message
on the hand's subject is a finding (``NOT_THE_TABLES``, naming table, hand, stream sequence
and why); a hand with no valid seal or chain is one (``HAND_UNSEALED``,
``HAND_SEAL_INVALID``, ``CHAIN_BROKEN``) and is not replayed; a broken chain is named at
the message to blame (``explain_break``). A table's own facts are checked the same way
against their facts seals (``_sealed_facts``). A JSONL export carries no headers, so a file
audit checks no seals (the report's ``Proof`` says what was and was not checked).

Completeness (``check_gaps``, ``check_journal_hands``): each table's hands and facts run
without a gap, and every hand a journal settles is in the events as far as their period
says it must be (``HAND_MISSING``, ``FACT_MISSING``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from socai import accounts
from socai.audit.export import RawEvent
from socai.audit.journal import JournalFile, check_pages
from socai.audit.ledger_source import LedgerSource, LiveLedger, hand_of_key
from socai.audit.report import AuditReport, Mismatch
from socai.events import seal
from socai.events.model import subject as canonical_subject
from socai.infra import collector
from socai.rules import base, registry
from socai.settle.keys import Found, settlement_key
from socai.settle.replay import (
    MISSING_END,
    OUT_OF_ORDER,
    OpenHand,
    ReplayError,
    ReplayResult,
    diff_entries,
    replay,
    replay_open,
)

SETTLEMENT_KIND: Final = "settlement"
LEDGER_CALLS_IN_FLIGHT: Final = 32

# Reasons of reconciliation mismatches (replay mismatches use socai.settle.replay.REASONS).
LEDGER_MISSING: Final = "LEDGER_MISSING"
LEDGER_MISMATCH: Final = "LEDGER_MISMATCH"
LEDGER_UNEXPECTED: Final = "LEDGER_UNEXPECTED"
ACCOUNT_TOTAL: Final = "ACCOUNT_TOTAL"
ESCROW_BALANCE: Final = "ESCROW_BALANCE"
# The journal contradicts itself: a balance after that does not follow, a transaction that
# does not sum to 0, a gap in journal_seq (an exported journal edited or cut).
JOURNAL_MISMATCH: Final = "JOURNAL_MISMATCH"
# Reasons of cross-hand mismatches: a hand's dealer (or banker) is not the one the rules
# choose after the previous hand; a carried pot does not continue.
DEALER_MISMATCH: Final = "DEALER_MISMATCH"
POT_CARRY_MISMATCH: Final = "POT_CARRY_MISMATCH"
# A message on a sealed hand's subject that is not on its chain (a stranger's).
NOT_THE_TABLES: Final = "NOT_THE_TABLES"
# A journal export whose page seals do not prove it whole: a transaction changed, left out or
# added, a page missing or cut off, a seal by another key (socai.audit.journal.check_pages).
JOURNAL_SEAL_INVALID: Final = "JOURNAL_SEAL_INVALID"
# A table's facts whose seals name a key the audit was not given or do not verify.
FACTS_SEAL_INVALID: Final = "FACTS_SEAL_INVALID"
# Completeness: a table's hand or fact that is not in the input though the rest of it says
# it exists (a gap in hand numbers or the facts' seq; a journal transaction of a hand the
# events do not hold).
HAND_MISSING: Final = "HAND_MISSING"
FACT_MISSING: Final = "FACT_MISSING"


@dataclass(frozen=True)
class Seals:
    """How the audit tells the table's messages from a stranger's: the table's public keys,
    the subject prefix the chain is computed over, and the legacy cutoff (hands whose first
    message is below this stream sequence and carries no ``Socai-Prev`` are replayed
    unsealed; 0: none)."""

    verifier: seal.SealVerifier
    prefix: str = "socai.events"
    legacy_before_seq: int = 0


@dataclass
class TableFacts:
    """What a table's own facts say about money: buy-ins and cash-outs per player."""

    opened: bool = False
    buy_ins_gold: dict[str, int] = field(default_factory=dict)
    cash_outs_gold: dict[str, int] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)  # the facts' own seq, in input order
    facts_id: str = ""  # the facts' hand id ({table}-t)


@dataclass
class Audit:
    report: AuditReport
    results: list[ReplayResult] = field(default_factory=list)
    facts: dict[str, TableFacts] = field(default_factory=dict)
    failed_tables: set[str] = field(default_factory=set)
    open_tables: set[str] = field(default_factory=set)
    open_results: list[OpenHand] = field(default_factory=list)  # the open hands, verified as far as they go
    complete: bool = True  # the input is the whole log (no filter): escrow balances can be checked
    # Every hand's stored messages in input order (the hand views show hands that did not
    # replay too), and what the reconciled ledger holds for each replayed hand.
    hands: dict[tuple[str, str], list[RawEvent]] = field(default_factory=dict)
    found: dict[str, Found] = field(default_factory=dict)


@collector.tuned()
def verify(
    raws: Iterable[RawEvent],
    *,
    source: str,
    allow_open: bool = False,
    complete: bool = True,
    seals: Seals | None = None,
) -> Audit:
    """Replay every hand of ``raws``. With ``allow_open`` a table's last hand may lack its
    HandEnded (a live log): it is verified as far as it goes and listed open when sound;
    any other hand without one is a MISSING_END mismatch. With ``seals``, messages read from
    the stream are grouped by their subject and each hand is only its sealed chain (see the
    module docstring).

    The collector runs with a service's thresholds meanwhile (``collector.tuned``): an audit
    keeps what it verified, and the default's full collections rescanning it cost a quarter
    of an audit's time."""
    report = AuditReport(source=source)
    audit = Audit(report, complete=complete)
    hands = audit.hands
    last_hand: dict[str, tuple[str, str]] = {}
    facts_of: dict[tuple[str, str], list[RawEvent]] = {}
    if seals is not None:
        report.proof.table_key_ids = sorted(seals.verifier.public_keys)
    for raw in raws:
        report.events += 1
        report.proof.note_stream_seq(raw.stream_seq)
        if seals is not None and raw.payload:
            report.proof.hand_seals = "checked"
        if raw.is_table_fact:
            report.table_facts += 1
            facts_of.setdefault(_subject_key(raw) if raw.payload else (raw.table_id, raw.hand_id), []).append(raw)
            continue
        # From the stream, a message belongs to the hand whose subject it is on, whatever
        # it says of itself.
        key = _subject_key(raw) if seals is not None and raw.payload else (raw.table_id, raw.hand_id)
        if not key[1]:
            report.mismatch("BAD_EVENT", raw.error or "an event of no hand", table_id=raw.table_id)
            continue
        hands.setdefault(key, []).append(raw)
        last_hand[key[0]] = key
    for key, stored_facts in facts_of.items():
        table_facts = audit.facts.setdefault(key[0], TableFacts())
        for raw in _sealed_facts(audit, seals, key, stored_facts):
            _note_fact(table_facts, raw)
    for key, stored in hands.items():
        table_id, hand_id = key
        items = stored
        if seals is not None and any(r.payload for r in stored):
            chained = _sealed_chain(report, seals, key, stored)
            if chained is not None:
                items = chained
            elif _has_end(stored):
                audit.failed_tables.add(table_id)  # the reason is reported
                continue
            # else no HandEnded yet: an open hand, or MISSING_END, as the replay says below
        broken = next((r for r in items if r.decoded is None), None)
        if broken is not None:
            report.mismatch("BAD_EVENT", broken.error, hand_id=hand_id, table_id=table_id)
            audit.failed_tables.add(table_id)
            continue
        try:
            result = replay([r.decoded for r in items])
        except ReplayError as exc:
            if exc.code == MISSING_END and allow_open and last_hand.get(table_id) == key:
                problem = _verify_open(audit, [r.decoded for r in items])
                if problem is None:
                    report.open_hands.append(hand_id)
                    if not audit.open_results[-1].fully_folded:
                        report.open_hands_hidden.append(hand_id)
                    audit.open_tables.add(table_id)
                    continue
                exc = problem  # what is wrong inside the open hand
            report.mismatch(exc.code, exc.message, hand_id=hand_id, table_id=table_id)
            audit.failed_tables.add(table_id)
            continue
        audit.results.append(result)
        report.add_hand(result)
    check_continuity(audit)
    check_gaps(audit)
    # An open hand is listed open only when nothing about it is wrong, its start included.
    named = {m.hand_id for m in report.mismatches}
    report.open_hands = [hand_id for hand_id in report.open_hands if hand_id not in named]
    report.open_hands_hidden = [hand_id for hand_id in report.open_hands_hidden if hand_id not in named]
    return audit


def _verify_open(audit: Audit, events: list[Any]) -> ReplayError | None:
    """Verify an open hand as far as it goes; the problem found, None when it is sound."""
    try:
        audit.open_results.append(replay_open(events))
    except ReplayError as exc:
        return exc
    return None


def _subject_key(raw: RawEvent) -> tuple[str, str]:
    parts = raw.subject.rsplit(".", 2)
    return (parts[1], parts[2]) if len(parts) == 3 else (raw.table_id, raw.hand_id)


def _has_end(items: list[RawEvent]) -> bool:
    return any(
        (r.message is not None and r.message.WhichOneof("body") == "hand_ended")
        or any(k == seal.SEAL_HEADER for k, _ in r.chain_headers)
        for r in items
    )


def _sealed_chain(
    report: AuditReport, seals: Seals, key: tuple[str, str], items: list[RawEvent]
) -> list[RawEvent] | None:
    """The hand's messages on its sealed chain, reporting every other one; None (after
    reporting why, unless the hand simply has no end yet) when no sealed chain stands."""
    table_id, hand_id = key
    first = items[0]
    if (
        seals.legacy_before_seq
        and first.stream_seq < seals.legacy_before_seq
        and not any(k == seal.PREV_HEADER for k, _ in first.chain_headers)
    ):
        return items  # written before hand seals: audited as before
    messages = [seal.Message(r.stream_seq, r.payload, dict(r.chain_headers)) for r in items]
    ends = [
        i
        for i, r in enumerate(items)
        if seal.SEAL_HEADER in messages[i].headers
        or (r.message is not None and r.message.WhichOneof("body") == "hand_ended")
    ]
    if not ends:
        return None  # no HandEnded: an open hand (or MISSING_END, reported by the caller's rules)
    subject = canonical_subject(table_id, hand_id, seals.prefix)
    verdict = seal.authenticate(subject, messages, seals.verifier, ends)
    if not verdict.ok:
        detail = verdict.detail
        if verdict.reason == seal.CHAIN_BROKEN:
            detail = explain_break(subject, items, messages) or detail
        report.mismatch(verdict.reason, f"{hand_id}: {detail}", hand_id=hand_id, table_id=table_id)
        return None
    report.proof.hands_sealed[messages[verdict.end].headers.get(seal.SEAL_KEY_HEADER, "")] += 1
    _check_stream_order(report, key, items, verdict.hand)
    for i, why in verdict.strangers:
        r = items[i]
        what = r.message.event_id if r.message is not None else "undecodable bytes"
        report.mismatch(
            NOT_THE_TABLES,
            f"{hand_id}: stream seq {r.stream_seq} ({what}) is not the table's: {why}",
            hand_id=hand_id,
            table_id=table_id,
        )
    return [items[i] for i in verdict.hand]


def _sealed_facts(audit: Audit, seals: Seals | None, key: tuple[str, str], items: list[RawEvent]) -> list[RawEvent]:
    """The table's own facts among ``items`` (every message of a facts subject, in stream
    order), as far as their seals say (``socai.events.seal``: every fact seals the chain up
    to itself). The chain is walked back from the last fact whose seal verifies; it must
    reach the first fact (in a whole log, the chain's start; in a period, the first fact the
    input holds), else the break is reported where it is (``CHAIN_BROKEN``), and any fact
    not on it is a stranger's (``NOT_THE_TABLES``). Facts of a subject that carries no facts
    seal at all were written before facts were sealed: they are counted unsealed and read
    as before; so are facts read without seals (a plain export)."""
    report = audit.report
    if seals is None or not any(r.payload for r in items):
        return items
    table_id, facts_id = key
    messages = [seal.Message(r.stream_seq, r.payload, dict(r.chain_headers)) for r in items]
    sealed = [i for i, m in enumerate(messages) if seal.FACTS_SEAL_HEADER in m.headers]
    if not sealed:
        report.proof.facts_unsealed += len(items)
        return items
    subject = canonical_subject(table_id, facts_id, seals.prefix)
    verifier = seals.verifier.for_facts()
    chains = seal.chain_values(subject, messages)

    def valid(i: int) -> bool:
        chain = chains[i]
        return chain is not None and verifier.reject_reason(subject, chain, messages[i].headers) is None

    end = next((i for i in reversed(sealed) if valid(i)), None)
    if end is None:
        last = sealed[-1]
        chain = chains[last]
        why = "carries no Socai-Prev" if chain is None else verifier.explain(subject, chain, messages[last].headers)
        report.mismatch(
            FACTS_SEAL_INVALID,
            f"{facts_id}: stream seq {messages[last].stream_seq} ({_what(items[last])}): {why}",
            table_id=table_id,
        )
        audit.failed_tables.add(table_id)
        return items
    path = _walk_tail(messages, chains, end)
    start = seal.genesis(subject)
    first_prev = seal.prev_of(messages[path[0]].headers)
    earlier = [i for i in range(len(items)) if items[i].stream_seq < items[path[0]].stream_seq]
    whole = first_prev == start or (not audit.complete and not earlier)
    if not whole:
        detail = explain_break(subject, items, messages, end=end, start=None if audit.complete else messages[0].headers)
        report.mismatch(
            seal.CHAIN_BROKEN,
            f"{facts_id}: {detail or 'the sealed facts chain does not reach the first fact'}",
            table_id=table_id,
        )
        audit.failed_tables.add(table_id)
        return items
    report.proof.facts_sealed += len(path)
    on_path = set(path)
    for i, raw in enumerate(items):
        if i not in on_path:
            report.mismatch(
                NOT_THE_TABLES,
                f"{facts_id}: stream seq {raw.stream_seq} ({_what(raw)}) is not the table's: not on the sealed facts chain",
                table_id=table_id,
            )
    return [items[i] for i in path]


def _walk_tail(messages: list[seal.Message], chains: list[bytes | None], end: int) -> list[int]:
    """The messages linked back from ``end`` by ``Socai-Prev`` (first first), as far as the
    chain goes among ``messages``."""
    by_chain: dict[bytes, int] = {}
    for i, c in enumerate(chains):
        if c is not None:
            by_chain.setdefault(c, i)
    path = [end]
    while len(path) < len(messages):
        prev = seal.prev_of(messages[path[-1]].headers)
        found = by_chain.get(prev) if prev is not None else None
        if found is None:
            break
        path.append(found)
    path.reverse()
    return path


def _check_stream_order(
    report: AuditReport, key: tuple[str, str], items: list[RawEvent], path: tuple[int, ...]
) -> None:
    """The table appends a hand's events one after another, so on the stream each stands
    after the one before it: its stream sequence is higher, and an export lists a subject's
    messages in stream order. A hand whose chain runs against its stream sequences, or a
    file that lists them out of that order, was rearranged after it was written
    (``OUT_OF_ORDER``: the chain still gives the hand's true order, which is what is replayed)."""
    table_id, hand_id = key
    for before, after in itertools.pairwise(items):
        if before.stream_seq and after.stream_seq and after.stream_seq <= before.stream_seq:
            report.mismatch(
                OUT_OF_ORDER,
                f"{hand_id}: stream seq {after.stream_seq} ({_what(after)}) is listed after stream seq "
                f"{before.stream_seq} ({_what(before)}): not the stream's order",
                hand_id=hand_id,
                table_id=table_id,
            )
            return
    for a, b in itertools.pairwise(path):
        if items[b].stream_seq <= items[a].stream_seq:
            report.mismatch(
                OUT_OF_ORDER,
                f"{hand_id}: on the hand's chain {_what(items[b])} follows {_what(items[a])}, but is stored at "
                f"stream seq {items[b].stream_seq}, before {items[a].stream_seq}",
                hand_id=hand_id,
                table_id=table_id,
            )
            return


def _what(raw: RawEvent) -> str:
    return raw.message.event_id if raw.message is not None else f"undecodable bytes at stream seq {raw.stream_seq}"


def explain_break(
    subject: str,
    items: list[RawEvent],
    messages: list[seal.Message],
    *,
    end: int | None = None,
    start: Mapping[str, str] | None = None,
) -> str:
    """Where a broken chain was broken, named at the message to blame rather than at the
    one after it: the chain from the first event forward and the chain from the HandEnded
    back each stop somewhere. A message on neither had its ``Socai-Prev`` header changed;
    with none such, the gap between the two is either events missing (their seq is
    skipped) or the last message of the forward chain changed (its bytes no longer hash to
    the chain value the next one names). "" when the chain is not broken."""
    prevs = [seal.prev_of(m.headers) for m in messages]
    chains = seal.chain_values(subject, messages)
    by_prev: dict[bytes, int] = {}
    for i, p in enumerate(prevs):
        if p is not None:
            by_prev.setdefault(p, i)
    by_chain: dict[bytes, int] = {}
    for i, c in enumerate(chains):
        if c is not None:
            by_chain.setdefault(c, i)
    forward: list[int] = []
    # Forward from the chain's start, or, for a period's facts, from the first one given.
    current: bytes | None = seal.genesis(subject) if start is None else seal.prev_of(start)
    while current is not None and current in by_prev and len(forward) < len(messages):
        forward.append(by_prev[current])
        current = chains[forward[-1]]
    ends = [i for i, m in enumerate(messages) if seal.SEAL_HEADER in m.headers] if end is None else [end]
    backward: list[int] = []
    if ends:
        backward.append(ends[-1])
        while len(backward) < len(messages):
            p = prevs[backward[-1]]
            if p is None or p not in by_chain:
                break
            backward.append(by_chain[p])
    on_either = set(forward) | set(backward)
    if not backward or set(forward) >= set(backward):
        return ""
    changed = [i for i in range(len(messages)) if i not in on_either]
    if changed:
        i = changed[0]
        return (
            f"{seal.CHAIN_BROKEN}: {_what(items[i])} (stream seq {items[i].stream_seq}) was changed after it was "
            f"written: its {seal.PREV_HEADER} header names no message of the hand, and the next message does not "
            "follow it"
        )
    first_back = items[backward[-1]]
    if not forward:
        return (
            f"{seal.CHAIN_BROKEN}: the hand's first event is missing or changed: {_what(first_back)} (stream seq "
            f"{first_back.stream_seq}) follows no message here"
        )
    last_forward = items[forward[-1]]
    a = last_forward.message.seq if last_forward.message is not None else 0
    b = first_back.message.seq if first_back.message is not None else 0
    if a and b and b > a + 1:
        missing = ", ".join(f"{subject.rsplit('.', 1)[-1]}/{n}" for n in range(a + 1, min(b, a + 6)))
        return (
            f"{seal.CHAIN_BROKEN}: {missing}{' …' if b - a > 6 else ''} missing: {_what(last_forward)} (stream seq "
            f"{last_forward.stream_seq}) is followed by {_what(first_back)} (stream seq {first_back.stream_seq}), "
            "which the table chained to another message"
        )
    return (
        f"{seal.CHAIN_BROKEN}: {_what(last_forward)} (stream seq {last_forward.stream_seq}) was changed after it "
        f"was written: its bytes do not hash to the chain value {_what(first_back)} names as the message before it"
    )


GAP_NAMES_MAX: Final = 5  # a gap names its first few missing hands or facts, then "…"


def hand_number(hand_id: str) -> int:
    """``n`` of a hand id ``{table}-h{n}`` (the table service's), 0 for another form."""
    _, sep, number = hand_id.rpartition("-h")
    return int(number) if sep and number.isdigit() and not number.startswith("0") else 0


def _named(prefix: str, numbers: range) -> str:
    shown = ", ".join(f"{prefix}{n}" for n in list(numbers)[:GAP_NAMES_MAX])
    return shown + (" …" if len(numbers) > GAP_NAMES_MAX else "")


def check_gaps(audit: Audit) -> None:
    """Each table's hands and facts run without a gap (``HAND_MISSING``, ``FACT_MISSING``):

    - a table's hands are numbered 1, 2, 3 … (``{table}-h{n}``): between two hands of the
      input every number is there, and when the table's opening (TableOpened) is in the
      input, so is its first hand and every one up to the first the input holds;
    - a table's facts have their own seq 1, 2, 3 …: between two facts of the input every
      seq is there (a removed buy-in leaves its seq out).

    The input may be a period (``--since``/``--until``): what comes before its first hand or
    fact and after its last is not in it, and is not a gap; the journal, when one is given,
    tells more at the period's end (``check_journal_hands``)."""
    report = audit.report
    numbers: dict[str, list[int]] = {}
    for table_id, hand_id in audit.hands:
        n = hand_number(hand_id)
        if n and hand_id.startswith(f"{table_id}-h"):
            numbers.setdefault(table_id, []).append(n)
    for table_id in sorted(set(numbers) | set(audit.facts)):
        have = sorted(set(numbers.get(table_id, ())))
        facts = audit.facts.get(table_id)
        if have and facts is not None and facts.opened and have[0] > 1:
            report.mismatch(
                HAND_MISSING,
                f"{_named(f'{table_id}-h', range(1, have[0]))} missing: the table opens in the input "
                f"({facts.facts_id}/1), and its first hand in it is {table_id}-h{have[0]}",
                hand_id=f"{table_id}-h1",
                table_id=table_id,
            )
        for a, b in itertools.pairwise(have):
            if b > a + 1:
                report.mismatch(
                    HAND_MISSING,
                    f"{_named(f'{table_id}-h', range(a + 1, b))} missing: {table_id}-h{a} is followed by "
                    f"{table_id}-h{b}",
                    hand_id=f"{table_id}-h{a + 1}",
                    table_id=table_id,
                )
        if facts is not None and facts.seqs:
            seqs = sorted(set(facts.seqs))
            if facts.opened and seqs[0] > 1:
                seqs.insert(0, 0)  # TableOpened is seq 1 of its facts
            for a, b in itertools.pairwise(seqs):
                if b > a + 1:
                    report.mismatch(
                        FACT_MISSING,
                        f"{_named(f'{facts.facts_id}/', range(a + 1, b))} missing: "
                        + (f"{facts.facts_id}/{a} is followed by " if a else "the facts start at ")
                        + f"{facts.facts_id}/{b}",
                        table_id=table_id,
                    )


def check_continuity(audit: Audit) -> None:
    """The facts between hands, for every table: each hand's dealer (or banker, or seat
    dealt first) is the one the rules choose (``base.choose_dealer``: the owner in the
    first hand, then from the previous hand's result, stacks and seats); a carried pot
    continues (HandStarted.pot_gold equals the previous hand's carry) and each hand moves
    the pot account by exactly the difference. An open hand's start is checked too (it has
    no settlement yet). Pairs of hands of which one is missing from the input are not
    compared."""
    by_table: dict[str, dict[int, ReplayResult | OpenHand]] = {}
    hands_in_order: list[ReplayResult | OpenHand] = [*audit.results, *audit.open_results]
    for result in hands_in_order:
        by_table.setdefault(result.table_id, {})[result.started.hand_number] = result
    for table_id, hands in by_table.items():
        for number, result in sorted(hands.items()):
            started = result.started
            pot_account = accounts.pot(table_id)
            settlement = result.settlement if isinstance(result, ReplayResult) else None
            moved = settlement.entries().get(pot_account, 0) if settlement is not None else 0
            if settlement is not None and moved != settlement.pot_carry_gold - started.pot_gold:
                audit.report.mismatch(
                    POT_CARRY_MISMATCH,
                    f"{started.hand_id}: the pot carries {settlement.pot_carry_gold} after "
                    f"{started.pot_gold}, but {pot_account} moves {moved:+d}",
                    hand_id=started.hand_id,
                    table_id=table_id,
                )
            before = hands.get(number - 1)
            previous = before if isinstance(before, ReplayResult) else None  # an open hand is a table's last
            if number > 1 and previous is None:
                continue
            module = registry.get(started.game)
            seats = [info.seat for info in started.seats]
            stacks = {info.seat: info.stack_gold for info in started.seats}
            if previous is None:
                expected = base.choose_dealer(module, None, None, seats, started.seats_max, started.owner_seat, stacks)
            else:
                carry = previous.settlement.pot_carry_gold
                if started.pot_gold != carry:
                    audit.report.mismatch(
                        POT_CARRY_MISMATCH,
                        f"{started.hand_id}: starts with a pot of {started.pot_gold}; "
                        f"{previous.hand_id} carried {carry}",
                        hand_id=started.hand_id,
                        table_id=table_id,
                    )
                expected = base.choose_dealer(
                    module,
                    previous.state,
                    previous.started.dealer_seat,
                    seats,
                    started.seats_max,
                    started.owner_seat,
                    stacks,
                )
            if started.dealer_seat != expected:
                audit.report.mismatch(
                    DEALER_MISMATCH,
                    f"{started.hand_id}: the dealer seat is {started.dealer_seat}; the rules choose {expected}",
                    hand_id=started.hand_id,
                    table_id=table_id,
                )


def _note_fact(facts: TableFacts, raw: RawEvent) -> None:
    msg = raw.message
    assert msg is not None
    facts.seqs.append(int(msg.seq))
    facts.facts_id = facts.facts_id or msg.hand_id
    which = msg.WhichOneof("body")
    if which == "table_opened":
        facts.opened = True
    elif which == "player_seated":
        body = msg.player_seated
        facts.buy_ins_gold[body.player_id] = facts.buy_ins_gold.get(body.player_id, 0) + body.buy_in_gold
    elif which == "player_stood_up":
        body_out = msg.player_stood_up
        facts.cash_outs_gold[body_out.player_id] = (
            facts.cash_outs_gold.get(body_out.player_id, 0) + body_out.cash_out_gold
        )


async def reconcile(audit: Audit, ledger: LedgerSource | Any, *, ledger_name: str = "") -> None:
    """Check a ledger against the replayed hands: ``ledger`` is a ``LedgerSource`` (the
    live service or an exported journal) or a LedgerServiceStub (the live service).

    Every finding is added in the order of the audited hands, then of the accounts, never
    in the order answers happen to arrive, so the same input gives the same report byte
    for byte whichever source answers. Raises Unavailable when a live ledger does not answer.
    """

    source = ledger if isinstance(ledger, LedgerSource) else LiveLedger(ledger, ledger_name)
    report = audit.report
    report.ledger = ledger_name or source.name
    gate = asyncio.Semaphore(LEDGER_CALLS_IN_FLIGHT)

    async def one(result: ReplayResult) -> Found:
        async with gate:
            return await source.find(result.hand_id)

    found_all = await asyncio.gather(*(one(r) for r in audit.results))
    ledger_totals: dict[str, int] = {}
    replay_totals: dict[str, int] = {}
    for result, found in zip(audit.results, found_all, strict=True):
        audit.found[result.hand_id] = found
        want = result.settlement.entries()
        if found.transaction is None and want and not source.covers(result.events[-1].occurred_at):
            report.proof.hands_outside_journal += 1  # settled outside the journal's period
            continue
        report.transactions_checked += 1
        _add(replay_totals, want)
        if found.transaction is not None:
            _add(ledger_totals, found.entries)
        else:
            # Counted, not logged: a hand that moves no gold has no transaction, as it should
            # (each such look-up is a NOT_FOUND the ledger answers, not a fault of either side).
            report.hands_without_transaction += 1
        mismatch = compare_settlement(result, found)
        if mismatch is not None:
            report.mismatches.append(mismatch)
    for account in sorted(set(ledger_totals) | set(replay_totals)):
        report.accounts_checked += 1
        a, b = replay_totals.get(account, 0), ledger_totals.get(account, 0)
        if a != b:
            report.mismatch(
                ACCOUNT_TOTAL,
                f"{account}: the hands' transactions total {b:+,} in the ledger, {a:+,} in the replay",
            )
    if audit.complete:
        await _check_escrows(audit, source)
    for problem in await source.journal_problems():
        report.mismatch(JOURNAL_MISMATCH, problem.detail, hand_id=problem.hand_id)


def check_journal_seals(audit: Audit, journal: JournalFile, ledger_keys: Mapping[str, bytes]) -> None:
    """A journal export's page seals (``socai.audit.journal.check_pages``) with the ledger's
    public keys: every problem is a ``JOURNAL_SEAL_INVALID`` finding, with its hand when the
    transaction is a hand's. Without keys the seals are not checked (the proof says so); a
    journal without seals is a finding only when keys were given."""
    proven = audit.report.proof
    txs = journal.transactions
    if txs:
        proven.journal_first_seq, proven.journal_last_seq = int(txs[0].journal_seq), int(txs[-1].journal_seq)
    if not ledger_keys:
        proven.journal_seals = "not checked" if journal.seals else "none in the file"
        return
    proven.ledger_key_ids = sorted(ledger_keys)
    checked = check_pages(journal, ledger_keys, hand_of_key)
    proven.journal_seals = "checked" if journal.seals else "none in the file"
    proven.journal_pages = checked.pages
    proven.journal_transactions_sealed = checked.transactions
    proven.ledger_key_ids = checked.key_ids or proven.ledger_key_ids
    proven.journal_since, proven.journal_until = checked.since, checked.until
    for detail, hand_id in checked.problems:
        audit.report.mismatch(JOURNAL_SEAL_INVALID, detail, hand_id=hand_id, table_id=_table_of(hand_id))


@dataclass(frozen=True)
class Period:
    """What the events input covers: the whole log (``complete``), or hands started in
    ``[since, until)`` (either open)."""

    complete: bool = True
    since: datetime | None = None
    until: datetime | None = None


def check_journal_hands(audit: Audit, journal: Iterable[Any], period: Period) -> None:
    """Every hand the journal settles is in the events, as far as the events' period says it
    must be (``HAND_MISSING``, named by the journal's transaction).

    A ``settle:`` transaction's hand must be in the events when the events are the whole
    log; in a period, when its table is in the events and the hand comes after the table's
    last hand there while its settlement was committed before the period ends (the hand
    started before it was settled, after a hand of the period started). A hand between two
    of the period is a gap ``check_gaps`` names already."""
    report = audit.report
    present: dict[str, set[int]] = {}
    for table_id, hand_id in audit.hands:
        present.setdefault(table_id, set()).add(hand_number(hand_id))
    for tx in journal:
        key = tx.idempotency_key
        hand_id = hand_of_key(key)
        where = f"{key} (journal_seq {tx.journal_seq})"
        if hand_id:
            table_id, n = _table_of(hand_id), hand_number(hand_id)
            have = present.get(table_id)
            if not n or (have is not None and n in have):
                continue
            facts = audit.facts.get(table_id)
            if have is not None and (
                min(have) < n < max(have) or (n < min(have) and facts is not None and facts.opened)
            ):
                continue  # a gap check_gaps names
            at = tx.created_at.ToDatetime(tzinfo=UTC)
            if period.complete:
                why = "the events hold no such hand"
            elif have is not None and n > max(have) and (period.until is None or at < period.until):
                why = (
                    f"committed at {at.isoformat()}, inside the period, after {table_id}-h{max(have)}, the table's "
                    "last hand in the events"
                )
            else:
                continue  # outside the period
            report.mismatch(
                HAND_MISSING,
                f"{hand_id} missing: the journal settles it under {where}, {why}",
                hand_id=hand_id,
                table_id=table_id,
            )


def _table_of(hand_id: str) -> str:
    return hand_id.rsplit("-h", 1)[0] if "-h" in hand_id else ""


def compare_settlement(result: ReplayResult, found: Found) -> Mismatch | None:
    """What is wrong between a replayed hand and what the ledger holds for it, if anything
    (``LEDGER_MISSING``, ``LEDGER_UNEXPECTED``, ``LEDGER_MISMATCH``). The hand view shows
    the same finding."""
    hand_id, table_id = result.hand_id, result.table_id
    want = result.settlement.entries()
    tx = found.transaction
    if tx is None:
        if not want:
            return None
        refused = "".join(f"; {key} was refused ({reason})" for key, reason in found.refused)
        return Mismatch(
            LEDGER_MISSING,
            f"no ledger transaction under {settlement_key(hand_id)}{refused}; the replay moves {_moved(want)} gold",
            hand_id,
            table_id,
        )
    if not want:
        return Mismatch(
            LEDGER_UNEXPECTED,
            f"{found.key} is transaction {tx.transaction_id}, but the replay moves no gold",
            hand_id,
            table_id,
        )
    diffs = diff_entries(want, found.entries, want="replay", have="ledger")
    if tx.kind != SETTLEMENT_KIND or tx.reference != hand_id:
        diffs.append(f"kind {tx.kind!r} reference {tx.reference!r}, expected {SETTLEMENT_KIND!r} {hand_id!r}")
    if not diffs:
        return None
    return Mismatch(
        LEDGER_MISMATCH,
        f"{found.key} (transaction {tx.transaction_id}) differs from the replay: " + "; ".join(diffs),
        hand_id,
        table_id,
    )


async def _check_escrows(audit: Audit, source: LedgerSource) -> None:
    """Each escrow of a table whose whole history was audited holds buy-ins − cash-outs +
    its hands' nets (DESIGN.md: a difference is an alarm, never silently corrected)."""
    report = audit.report
    expected: dict[str, tuple[str, int, int, int]] = {}
    for table_id, facts in audit.facts.items():
        if not facts.opened or table_id in audit.failed_tables or table_id in audit.open_tables:
            continue
        for player in set(facts.buy_ins_gold) | set(facts.cash_outs_gold):
            acct = accounts.escrow(table_id, player)
            expected[acct] = (table_id, facts.buy_ins_gold.get(player, 0), facts.cash_outs_gold.get(player, 0), 0)
    for result in audit.results:
        for acct, amount in result.settlement.entries().items():
            if acct in expected:
                table_id, bought, cashed, hands = expected[acct]
                expected[acct] = (table_id, bought, cashed, hands + amount)
    gate = asyncio.Semaphore(LEDGER_CALLS_IN_FLIGHT)

    async def one(acct: str) -> int:
        async with gate:
            return await source.balance(acct)

    ordered = sorted(expected.items())
    balances = await asyncio.gather(*(one(acct) for acct, _ in ordered))
    for (acct, (table_id, bought, cashed, hands)), balance in zip(ordered, balances, strict=True):
        report.escrows_checked += 1
        want = bought - cashed + hands
        if balance != want:
            report.mismatch(
                ESCROW_BALANCE,
                f"{acct}: the ledger holds {balance:,}; the events say {bought:,} bought in − {cashed:,} cashed out "
                f"{hands:+,} in hands = {want:,}",
                table_id=table_id,
            )


def _add(totals: dict[str, int], entries: Mapping[str, int]) -> None:
    for account, amount in entries.items():
        totals[account] = totals.get(account, 0) + amount


def _moved(entries: Mapping[str, int]) -> int:
    return sum(v for v in entries.values() if v > 0)
