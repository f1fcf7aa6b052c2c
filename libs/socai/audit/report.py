"""The audit report: per game totals, then every mismatch with the hand and what differs."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from socai.settle.replay import ReplayResult, gold_moved, penalties


@dataclass
class GameTotals:
    hands: int = 0
    gold_moved: int = 0
    fees_gold: int = 0
    penalties_gold: Counter[str] = field(default_factory=Counter)
    cards_verified: int = 0
    dice_verified: int = 0

    def add(self, result: ReplayResult) -> None:
        s = result.settlement
        self.hands += 1
        self.gold_moved += gold_moved(s)
        self.fees_gold += s.fees_gold()
        self.penalties_gold.update(penalties(s))
        self.cards_verified += result.cards_verified
        self.dice_verified += result.dice_verified


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One thing that does not add up. ``hand_id`` is empty for account-level findings."""

    reason: str
    detail: str
    hand_id: str = ""
    table_id: str = ""


@dataclass
class Proof:
    """What the audit could prove about its inputs being genuine, beside what it found in
    them: whether the hand seals were checked and with which keys, how many hands and table
    facts a seal covers, whether the journal's page seals were checked, and the periods the
    inputs cover. Not part of ``AuditReport.verdict`` (the verdict an audit of the stream
    and one of a plain export must agree on byte for byte); the signed verdict carries it
    (``socai.audit.proof``)."""

    hand_seals: str = "not checked"  # "checked" | "not checked" (a plain JSONL export carries none)
    table_key_ids: list[str] = field(default_factory=list)  # the table's keys the audit was given
    hands_sealed: Counter[str] = field(default_factory=Counter)  # key id -> hands whose seal verified
    facts_sealed: int = 0  # table facts on a chain a valid facts seal covers
    facts_unsealed: int = 0  # table facts no seal covers (written before facts were sealed)
    journal_seals: str = "no journal"  # "checked" | "not checked" | "none in the file" | "no journal"
    ledger_key_ids: list[str] = field(default_factory=list)
    journal_pages: int = 0
    journal_transactions_sealed: int = 0
    journal_first_seq: int = 0
    journal_last_seq: int = 0
    hands_outside_journal: int = 0  # hands whose transaction a journal of a period need not hold
    journal_since: str = ""  # the period the ledger's page seals name ("" open)
    journal_until: str = ""
    events_since: str = ""  # the period the events export names (its header or the flags)
    events_until: str = ""
    stream_first_seq: int = 0  # the stream sequences of the messages read (0: a plain export)
    stream_last_seq: int = 0

    def note_stream_seq(self, seq: int) -> None:
        if seq:
            self.stream_first_seq = min(self.stream_first_seq or seq, seq)
            self.stream_last_seq = max(self.stream_last_seq, seq)

    def as_json(self) -> dict[str, Any]:
        return {
            "hand_seals": self.hand_seals,
            "table_key_ids": sorted(self.table_key_ids),
            "hands_sealed": dict(sorted(self.hands_sealed.items())),
            "facts_sealed": self.facts_sealed,
            "facts_unsealed": self.facts_unsealed,
            "journal_seals": self.journal_seals,
            "ledger_key_ids": sorted(self.ledger_key_ids),
            "journal_pages": self.journal_pages,
            "journal_transactions_sealed": self.journal_transactions_sealed,
            "journal_seq": [self.journal_first_seq, self.journal_last_seq],
            "journal_period": [self.journal_since, self.journal_until],
            "hands_outside_journal": self.hands_outside_journal,
            "events_period": [self.events_since, self.events_until],
            "stream_seq": [self.stream_first_seq, self.stream_last_seq],
        }

    def lines(self) -> list[str]:
        sealed = sum(self.hands_sealed.values())
        keys = ", ".join(f"{k} ({n:,} hands)" for k, n in sorted(self.hands_sealed.items())) or "-"
        out = [
            f"hand seals: {self.hand_seals}"
            + (f"; {sealed:,} hands sealed, by key id {keys}" if self.hand_seals == "checked" else "")
            + (
                f"; table facts: {self.facts_sealed:,} sealed, {self.facts_unsealed:,} unsealed"
                if self.facts_sealed or self.facts_unsealed
                else ""
            )
        ]
        if self.journal_seals != "no journal":
            out.append(
                f"journal page seals: {self.journal_seals}"
                + (
                    f"; {self.journal_pages:,} pages, {self.journal_transactions_sealed:,} transactions, key id "
                    f"{', '.join(self.ledger_key_ids) or '-'}"
                    if self.journal_seals == "checked"
                    else ""
                )
                + (
                    f"; journal_seq {self.journal_first_seq:,}–{self.journal_last_seq:,}"
                    if self.journal_last_seq
                    else ""
                )
                + (
                    f"; {self.hands_outside_journal:,} hands ended outside its period (not looked up)"
                    if self.hands_outside_journal
                    else ""
                )
            )
        return out


@dataclass
class AuditReport:
    source: str
    ledger: str = ""  # the ledger reconciled against, "" when none
    events: int = 0
    table_facts: int = 0
    games: dict[str, GameTotals] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)
    open_hands: list[str] = field(default_factory=list)
    # Those of the open hands whose face-down cards the log hides (socai.events.hidden):
    # checked in form after their first hidden card; the rules check their plays at the end.
    open_hands_hidden: list[str] = field(default_factory=list)
    transactions_checked: int = 0
    # Of the hands looked up in the ledger, those it holds no transaction for: the hands that
    # move no gold (as it should be) and the LEDGER_MISSING ones (listed as mismatches).
    hands_without_transaction: int = 0
    accounts_checked: int = 0
    escrows_checked: int = 0
    proof: Proof = field(default_factory=Proof)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def hands_verified(self) -> int:
        return sum(g.hands for g in self.games.values())

    def add_hand(self, result: ReplayResult) -> None:
        self.games.setdefault(result.game, GameTotals()).add(result)

    def mismatch(self, reason: str, detail: str, *, hand_id: str = "", table_id: str = "") -> None:
        self.mismatches.append(Mismatch(reason, detail, hand_id, table_id))

    # --- output -------------------------------------------------------------------------

    def render(self) -> str:
        lines = [f"socai audit: {self.source}" + (f"; ledger {self.ledger}" if self.ledger else "; no ledger")]
        cards = sum(g.cards_verified for g in self.games.values())
        dice = sum(g.dice_verified for g in self.games.values())
        lines.append(
            f"events {self.events:,} (table facts {self.table_facts:,}); hands verified {self.hands_verified:,}; "
            f"cards checked against the seed {cards:,}; dice {dice:,}"
        )
        lines.append("")
        header = f"{'game':<14}{'hands':>8}{'gold moved':>16}{'fees':>12}  penalties"
        lines += [header, "-" * len(header)]
        for game in sorted(self.games):
            g = self.games[game]
            pens = ", ".join(f"{r} {v:,}" for r, v in sorted(g.penalties_gold.items())) or "-"
            lines.append(f"{game:<14}{g.hands:>8,}{g.gold_moved:>16,}{g.fees_gold:>12,}  {pens}")
        total_pens: Counter[str] = Counter()
        for g in self.games.values():
            total_pens.update(g.penalties_gold)
        lines.append(
            f"{'total':<14}{self.hands_verified:>8,}{sum(g.gold_moved for g in self.games.values()):>16,}"
            f"{sum(g.fees_gold for g in self.games.values()):>12,}  "
            + (", ".join(f"{r} {v:,}" for r, v in sorted(total_pens.items())) or "-")
        )
        lines.append("")
        if self.ledger:
            missing = sum(1 for m in self.mismatches if m.reason == "LEDGER_MISSING")
            lines.append(
                f"ledger: {self.transactions_checked:,} hand transactions checked by idempotency key, "
                f"{self.accounts_checked:,} account totals, {self.escrows_checked:,} escrow balances"
            )
            lines.append(
                f"        {self.hands_without_transaction:,} hands have no transaction: "
                f"{self.hands_without_transaction - missing:,} move no gold, {missing:,} missing (LEDGER_MISSING)"
            )
        else:
            lines.append("ledger: not reconciled (no ledger given)")
        lines += self.proof.lines()
        hidden = set(self.open_hands_hidden)
        clear = [h for h in self.open_hands if h not in hidden]
        if clear:
            lines.append(f"open hands (not ended yet; every event so far verified): {', '.join(clear)}")
        if hidden:
            lines.append(
                "open hands (not ended yet; face-down cards hidden until the seed is revealed: envelopes, "
                "sequence, start, face-up cards and the form of every event verified, the plays against the "
                f"rules once it ends): {', '.join(self.open_hands_hidden)}"
            )
        if self.ok:
            lines.append("mismatches: none; the audit is clean")
        else:
            lines.append(f"MISMATCHES: {len(self.mismatches)}")
            for m in self.mismatches:
                where = m.hand_id or "-"
                lines.append(f"  {where:<20} {m.reason:<18} {m.detail}")
        return "\n".join(lines) + "\n"

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ledger": self.ledger,
            "ok": self.ok,
            "events": self.events,
            "table_facts": self.table_facts,
            "games": {
                game: {
                    "hands": g.hands,
                    "gold_moved": g.gold_moved,
                    "fees_gold": g.fees_gold,
                    "penalties_gold": dict(sorted(g.penalties_gold.items())),
                    "cards_verified": g.cards_verified,
                    "dice_verified": g.dice_verified,
                }
                for game, g in sorted(self.games.items())
            },
            "open_hands": self.open_hands,
            # Only when there are some: the verdict of a log without such hands keeps its bytes.
            **({"open_hands_hidden": self.open_hands_hidden} if self.open_hands_hidden else {}),
            "transactions_checked": self.transactions_checked,
            "hands_without_transaction": self.hands_without_transaction,
            "accounts_checked": self.accounts_checked,
            "escrows_checked": self.escrows_checked,
            "mismatches": [
                {"hand_id": m.hand_id, "table_id": m.table_id, "reason": m.reason, "detail": m.detail}
                for m in self.mismatches
            ],
            "proof": self.proof.as_json(),
        }

    def verdict(self) -> dict[str, Any]:
        """The report without the names of its inputs (``source``, ``ledger``) and what it
        could prove about them (``proof``): what an audit of the stream and the live ledger
        and one of their exports must agree on, byte for byte once written with
        ``verdict_text`` (the golden corpus keeps every recorded one)."""
        out = self.as_json()
        del out["source"], out["ledger"], out["proof"]
        return out

    def verdict_text(self) -> str:
        return json.dumps(self.verdict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
