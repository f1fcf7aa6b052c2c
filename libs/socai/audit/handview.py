"""One hand as an auditor reads it: seats, the timeline, the seed, the money.

``build`` assembles a ``HandView`` from what the audit already computed — the hand's
events, its replay (``socai.settle.replay``: the one settlement), the ledger transaction
the reconciliation found and every finding about the hand — and computes nothing of its
own about money. ``render_text`` prints it for ``socai audit hand``; ``socai.audit.html``
renders the same view as a page, so the terminal and the browser cannot disagree.

Cards: an auditor sees every card once HandEnded reveals the seed that dealt them (a hand
that writes its face-down cards by position, ``socai.events.hidden``, has them filled in
from that seed); a card dealt face down is marked as such, because at that moment only its
seat could see it. A hand still in play is shown as a spectator sees it (the game's
``visible`` hook, no seat): every face-down card unknown (``??``), whatever the log holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from socai import cards, fairness
from socai.audit.auditor import Audit
from socai.audit.report import Mismatch
from socai.cards import Card
from socai.errors import InvalidArgument, NotFound
from socai.events import codec, hidden
from socai.events.model import (
    COMMUNITY,
    HIDDEN_CARD,
    CardsDealt,
    Event,
    HandEnded,
    HandStarted,
)
from socai.rules import base, registry
from socai.settle.keys import Found
from socai.settle.replay import ReplayResult, describe, gold_moved

TIME_FORMAT: Final = "%Y-%m-%d %H:%M:%S.%f"
BOARD: Final = "board"
UNKNOWN_CARD: Final = "??"  # a card the reader cannot know yet (face down, seed not revealed)
SPECTATOR: Final = COMMUNITY - 1  # no seat: the viewer who sees no hidden card (socai_table.views)
# Bodies whose every field ``replay.describe`` already says.
_DESCRIBED: Final = frozenset({"BetAction", "WagerPlaced", "CardsDealt", "DiceRolled"})


@dataclass(frozen=True, slots=True)
class ShownCard:
    card: str
    to: str  # "seat 2" or "board"
    face_up: bool


@dataclass(frozen=True, slots=True)
class TimelineRow:
    seq: int
    at: str  # UTC, to the microsecond
    kind: str  # the event's type, e.g. BetAction
    seat: int | None
    player_id: str
    text: str
    cards: tuple[ShownCard, ...] = ()


@dataclass(frozen=True, slots=True)
class SeatRow:
    seat: int
    player_id: str
    stack_gold: int
    net_gold: int | None  # None when the hand did not replay
    account: str


@dataclass(frozen=True, slots=True)
class SettlementLine:
    from_account: str
    to_account: str
    amount_gold: int
    reason: str
    rule: str  # the RULES.md rule the game's REASONS name for this reason code
    penalty: bool
    detail: str = ""  # what caused it, when the rules say (the plays of a chop)


@dataclass(frozen=True, slots=True)
class LedgerLine:
    account_id: str
    amount_gold: int
    balance_after_gold: int
    account_version: int


@dataclass(frozen=True)
class HandView:
    hand_id: str
    table_id: str
    game: str
    hand_number: int = 0
    started_at: str = ""
    ended_at: str = ""
    stake_gold: int = 0
    fee_bps: int = 0
    dealer_seat: int | None = None
    seats: tuple[SeatRow, ...] = ()
    timeline: tuple[TimelineRow, ...] = ()
    commitment: str = ""
    seed: str = ""
    seed_check: str = ""  # what the commitment check found, in words
    seed_ok: bool | None = None  # None: no seed revealed yet
    cards_verified: int = 0
    dice_verified: int = 0
    replayed: bool = False
    lines: tuple[SettlementLine, ...] = ()
    fees_gold: int = 0
    moved_gold: int = 0
    entries: Mapping[str, int] = field(default_factory=dict)
    ledger_key: str = ""
    ledger_transaction_id: str = ""
    ledger_journal_seq: int = 0
    ledger_at: str = ""
    ledger_lines: tuple[LedgerLine, ...] = ()
    ledger_checked: bool = False  # a ledger (live or exported) was reconciled
    findings: tuple[Mismatch, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def players(self) -> tuple[str, ...]:
        return tuple(s.player_id for s in self.seats)


def _time(at: datetime) -> str:
    return at.strftime(TIME_FORMAT)


def events_of(messages: Iterable[Any]) -> list[Event]:
    """Domain events of a hand's stored messages, skipping what does not decode (the
    audit reports that as BAD_EVENT; the view shows what it can)."""
    out = []
    for msg in messages:
        try:
            out.append(codec.from_proto(msg))
        except InvalidArgument:
            continue
    return out


def readable(events: Sequence[Event]) -> list[Event]:
    """The events of a hand that did not replay, as an auditor may read them.

    Ended, with a seed that proves its commitment: every card, those written by position
    filled in from the seed (as the replay does). Still in play (no HandEnded): what a
    spectator sees, every face-down card unknown, whether the log wrote it or not (a hand
    logged before face-down cards were hidden). Otherwise as the log holds them.
    """
    started = events[0].body if events else None
    if not isinstance(started, HandStarted):
        return list(events)
    end = next((e.body for e in events if isinstance(e.body, HandEnded)), None)
    if end is None:
        return _as_spectator(started.game, events)
    try:
        seed = fairness.seed_from_hex(end.deck_seed)
    except InvalidArgument:
        return list(events)
    if not fairness.verify_commitment(seed, started.deck_commitment) or started.game not in cards.GAME_DECKS:
        return list(events)
    try:
        return list(hidden.reveal(events, fairness.shuffle(seed, cards.deck(started.game))))
    except InvalidArgument:
        return list(events)  # its finding says what is wrong with its cards


def _as_spectator(game: str, events: Sequence[Event]) -> list[Event]:
    try:
        module = registry.get(game)
    except (InvalidArgument, NotFound):
        return list(events)
    out = []
    for e in events:
        body = base.visible_to(module, e.body, SPECTATOR, None)  # type: ignore[arg-type]
        if body is not None:  # an event a spectator may not see at all is left out
            out.append(e if body is e.body else dataclasses.replace(e, body=body))
    return out


def build(
    hand_id: str,
    table_id: str,
    events: Sequence[Event],
    result: ReplayResult | None,
    found: Found | None,
    findings: Iterable[Mismatch],
    *,
    ledger_checked: bool,
) -> HandView:
    """The view of one hand. ``result`` is its replay (None when it did not replay),
    ``found`` what the ledger holds for it (None when no ledger was reconciled)."""
    if result is not None:
        events = result.events
    started = next((e.body for e in events if isinstance(e.body, HandStarted)), None)
    ended = next((e for e in events if isinstance(e.body, HandEnded)), None)
    game = started.game if started else (events[0].game if events else "")
    players = {s.seat: s.player_id for s in started.seats} if started else {}
    view: dict[str, Any] = {
        "hand_id": hand_id,
        "table_id": table_id,
        "game": game,
        "timeline": tuple(_row(e, players) for e in events),
        "findings": tuple(findings),
        "ledger_checked": ledger_checked,
    }
    if events:
        view["started_at"] = _time(events[0].occurred_at)
        view["ended_at"] = _time(events[-1].occurred_at) if ended is not None else ""
    if started is not None:
        nets = result.settlement.nets if result else {}
        accounts = result.settlement.seat_accounts if result else {}
        view |= {
            "hand_number": started.hand_number,
            "stake_gold": started.stake_gold,
            "fee_bps": started.fee_bps,
            "dealer_seat": started.dealer_seat,
            "commitment": started.deck_commitment,
            "seats": tuple(
                SeatRow(
                    s.seat, s.player_id, s.stack_gold, nets.get(s.seat) if result else None, accounts.get(s.seat, "")
                )
                for s in started.seats
            ),
        }
    if ended is not None:
        assert isinstance(ended.body, HandEnded)
        view |= _seed(ended.body.deck_seed, started.deck_commitment if started else "")
    if result is not None:
        s = result.settlement
        reasons = getattr(registry.get(s.game), "REASONS", {})
        view |= {
            "replayed": True,
            "cards_verified": result.cards_verified,
            "dice_verified": result.dice_verified,
            "lines": tuple(
                SettlementLine(
                    t.from_account,
                    t.to_account,
                    t.amount_gold,
                    t.reason,
                    reasons[t.reason].rule if t.reason in reasons else "",
                    bool(reasons[t.reason].penalty) if t.reason in reasons else False,
                    t.detail,
                )
                for t in s.transfers
            ),
            "fees_gold": s.fees_gold(),
            "moved_gold": gold_moved(s),
            "entries": s.entries(),
        }
    if found is not None and found.transaction is not None:
        tx = found.transaction
        view |= {
            "ledger_key": found.key,
            "ledger_transaction_id": tx.transaction_id,
            "ledger_journal_seq": int(tx.journal_seq),
            "ledger_at": _time(tx.created_at.ToDatetime()),
            "ledger_lines": tuple(
                LedgerLine(e.account_id, int(e.amount_gold), int(e.balance_after_gold), int(e.account_version))
                for e in tx.entries
            ),
        }
    return HandView(**view)


def _seed(seed_hex: str, commitment: str) -> dict[str, Any]:
    try:
        seed = fairness.seed_from_hex(seed_hex)
    except InvalidArgument as exc:
        return {"seed": seed_hex, "seed_ok": False, "seed_check": f"the revealed {exc.message}"}
    digest = fairness.commitment(seed)
    if fairness.verify_commitment(seed, commitment):
        return {"seed": seed_hex, "seed_ok": True, "seed_check": f"sha256(seed) = {digest}: the commitment holds"}
    return {
        "seed": seed_hex,
        "seed_ok": False,
        "seed_check": f"sha256(seed) = {digest}, not the commitment {commitment}: the deck is not proven",
    }


def _row(e: Event, players: Mapping[int, str]) -> TimelineRow:
    body = e.body
    seat = getattr(body, "seat", None)
    seat = seat if isinstance(seat, int) and seat != COMMUNITY else None
    shown: tuple[ShownCard, ...] = ()
    if isinstance(body, CardsDealt):
        shown = tuple(
            ShownCard(_card_text(d.card), BOARD if d.seat == COMMUNITY else f"seat {d.seat}", d.face_up)
            for d in body.cards
        )
        text = "dealt " + " ".join(_shown(c) for c in shown)
    elif isinstance(body, HandStarted):
        text = (
            f"hand {body.hand_number} of {body.game}, stake {body.stake_gold:,}, fee {body.fee_bps} bps, "
            f"dealer seat {body.dealer_seat}, {len(body.seats)} seats"
            + (f", pot {body.pot_gold:,}" if body.pot_gold else "")
        )
    elif isinstance(body, HandEnded):
        text = f"ended; seed revealed {body.deck_seed}"
    else:
        text = describe(body)
        extra = _fields(body)
        if extra:
            text = f"{text}: {extra}"
    return TimelineRow(
        e.seq,
        _time(e.occurred_at),
        type(body).__name__,
        seat,
        players.get(seat, "") if seat is not None else "",
        text,
        shown,
    )


def _card_text(card: Card) -> str:
    return UNKNOWN_CARD if card is HIDDEN_CARD else str(card)


def _shown(card: ShownCard) -> str:
    """``Ks>seat 2`` face up, ``(Ks)>seat 2`` face down."""
    face = card.card if card.face_up else f"({card.card})"
    return f"{face}>{card.to}"


def _fields(body: object) -> str:
    """The fields ``describe`` leaves out (cards played, melds, a declaration …)."""
    if not dataclasses.is_dataclass(body):
        return ""
    parts = []
    for f in dataclasses.fields(body):
        if f.name == "seat" or type(body).__name__ in _DESCRIBED:
            continue
        value = getattr(body, f.name)
        if f.name.endswith("_positions") and not value:
            continue  # the log's form of an arrangement (socai.events.hidden), when it has one
        parts.append(f"{f.name} {_value(value)}")
    return ", ".join(parts)


def _value(value: object) -> str:
    if isinstance(value, Card):
        return _card_text(value)
    if isinstance(value, tuple):
        return " ".join(_value(v) for v in value) or "-"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "[" + " ".join(_value(getattr(value, f.name)) for f in dataclasses.fields(value)) + "]"
    return str(value)


# --- the terminal ---------------------------------------------------------------------------


def render_text(view: HandView) -> str:
    """The hand for a terminal: header, seats, timeline, seed, settlement, ledger, findings."""
    out: list[str] = []
    status = "clean" if view.ok else f"{len(view.findings)} FINDING(S)"
    out.append(f"hand {view.hand_id}  table {view.table_id}  {view.game}  #{view.hand_number}  [{status}]")
    out.append(
        f"started {view.started_at or '-'} UTC, ended {view.ended_at or 'not yet'}; stake {view.stake_gold:,}, "
        f"fee {view.fee_bps} bps, dealer seat {view.dealer_seat if view.dealer_seat is not None else '-'}"
    )
    out += ["", "seats"]
    for s in view.seats:
        net = f"{s.net_gold:+,}" if s.net_gold is not None else "?"
        out.append(f"  seat {s.seat:<2} {s.player_id:<24} stack {s.stack_gold:>12,}  net {net:>10}  {s.account}")
    out += [
        "",
        f"timeline (UTC; (Xx) = dealt face down, seen only by its seat until the seed was revealed; "
        f"{UNKNOWN_CARD} = not known before the seed is revealed)",
    ]
    for r in view.timeline:
        who = f"seat {r.seat} {r.player_id}" if r.seat is not None else ""
        out.append(f"  {r.seq:>3}  {r.at}  {who:<22} {r.text}")
    out += ["", "seed"]
    out.append(f"  commitment {view.commitment or '-'}")
    out.append(f"  revealed   {view.seed or '- (the hand has not ended)'}")
    if view.seed_check:
        out.append(f"  {'OK ' if view.seed_ok else 'BAD'}        {view.seed_check}")
    if view.replayed:
        out.append(f"  every dealt card ({view.cards_verified}) and die ({view.dice_verified}) is the seed's")
    out += ["", "settlement (the replay through the rules engine)"]
    if not view.replayed:
        out.append("  - the hand did not replay (see the findings)")
    for line in view.lines:
        tag = " penalty" if line.penalty else ""
        out.append(
            f"  {line.from_account:<28} -> {line.to_account:<28} {line.amount_gold:>10,}  {line.reason}{tag}"
            f"  (RULES.md {line.rule or '?'})" + (f"  caused by {line.detail}" if line.detail else "")
        )
    if view.replayed:
        out.append(f"  gold moved {view.moved_gold:,}, fees {view.fees_gold:,}")
    out += ["", "ledger"]
    if not view.ledger_checked:
        out.append("  not reconciled (no ledger given)")
    elif not view.ledger_transaction_id:
        out.append("  no transaction for this hand")
    else:
        out.append(
            f"  {view.ledger_key}  transaction {view.ledger_transaction_id}  journal_seq {view.ledger_journal_seq}  "
            f"at {view.ledger_at}"
        )
        for e in view.ledger_lines:
            out.append(
                f"  {e.account_id:<32} {e.amount_gold:>+12,}  balance after {e.balance_after_gold:>14,}  "
                f"(version {e.account_version})"
            )
    out += [""]
    if view.ok:
        out.append("findings: none")
    else:
        out.append("FINDINGS")
        for m in view.findings:
            out.append(f"  {m.reason:<18} {m.detail}")
    return "\n".join(out) + "\n"


def views(audit: Audit) -> Iterator[HandView]:
    """Every hand of an audit, in the order of the input, each with its findings."""
    results = {r.hand_id: r for r in audit.results}
    findings: dict[str, list[Mismatch]] = {}
    for m in audit.report.mismatches:
        if m.hand_id:
            findings.setdefault(m.hand_id, []).append(m)
    checked = bool(audit.report.ledger)
    for (table_id, hand_id), raws in audit.hands.items():
        result = results.get(hand_id)
        events = () if result is not None else readable(events_of(r.message for r in raws if r.message is not None))
        yield build(
            hand_id,
            table_id,
            events,
            result,
            audit.found.get(hand_id),
            findings.get(hand_id, ()),
            ledger_checked=checked,
        )
