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
``HAND_SEAL_INVALID``, ``CHAIN_BROKEN``) and is not replayed. A JSONL export carries no
headers, so a file audit checks no seals (the report says so).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from socai import accounts
from socai.audit.export import RawEvent
from socai.audit.ledger_source import LedgerSource, LiveLedger
from socai.audit.report import AuditReport, Mismatch
from socai.events import seal
from socai.events.model import subject as canonical_subject
from socai.rules import base, registry
from socai.settle.keys import Found, settlement_key
from socai.settle.replay import (
    MISSING_END,
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
    module docstring)."""
    report = AuditReport(source=source)
    audit = Audit(report, complete=complete)
    hands = audit.hands
    last_hand: dict[str, tuple[str, str]] = {}
    for raw in raws:
        report.events += 1
        if raw.is_table_fact:
            report.table_facts += 1
            _note_fact(audit.facts.setdefault(raw.table_id, TableFacts()), raw)
            continue
        # From the stream, a message belongs to the hand whose subject it is on, whatever
        # it says of itself.
        key = _subject_key(raw) if seals is not None and raw.payload else (raw.table_id, raw.hand_id)
        if not key[1]:
            report.mismatch("BAD_EVENT", raw.error or "an event of no hand", table_id=raw.table_id)
            continue
        hands.setdefault(key, []).append(raw)
        last_hand[key[0]] = key
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
        broken = next((r for r in items if r.message is None), None)
        if broken is not None:
            report.mismatch("BAD_EVENT", broken.error, hand_id=hand_id, table_id=table_id)
            audit.failed_tables.add(table_id)
            continue
        try:
            result = replay([r.message for r in items])
        except ReplayError as exc:
            if exc.code == MISSING_END and allow_open and last_hand.get(table_id) == key:
                problem = _verify_open(audit, [r.message for r in items])
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
        report.mismatch(verdict.reason, f"{hand_id}: {verdict.detail}", hand_id=hand_id, table_id=table_id)
        return None
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
        report.transactions_checked += 1
        want = result.settlement.entries()
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
