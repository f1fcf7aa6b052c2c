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
from socai.errors import InvalidArgument, NotFound, RuleViolation
from socai.events import codec, hidden
from socai.events.model import (
    COMMUNITY,
    HIDDEN_CARD,
    CardsDealt,
    CardSent,
    Event,
    HandEnded,
    HandStarted,
    TimerExpired,
)
from socai.rules import base, registry
from socai.rules.automatic import automatic_move
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
    # Shedding games (Tiến Lên, Sâm Lốc): the hand's play number, as settlement details cite
    # plays ("TL-6; plays 4, 5"), and the trick (round) the event belongs to; 0 otherwise.
    play: int = 0
    trick: int = 0
    automatic: str = ""  # for TimerExpired: the move the rules made for the seat (GEN-5)
    played: tuple[str, ...] = ()  # the cards of a play (an automatic one's too)


@dataclass(frozen=True, slots=True)
class SeatRow:
    seat: int
    player_id: str
    stack_gold: int
    net_gold: int | None  # None when the hand did not replay
    account: str
    start_cards: tuple[str, ...] = ()  # dealt to the seat in the hand's first deal
    end_cards: tuple[str, ...] = ()  # what the seat holds when the hand ends (the rules' state)


@dataclass(frozen=True, slots=True)
class OwedLine:
    """An obligation the rules put on a seat (a penalty, a chop …) against what it paid:
    GEN-4 caps what a seat pays at its chips, and shares a shortfall pro rata."""

    seat: int
    player_id: str
    reason: str
    rule: str
    owed_gold: int
    paid_gold: int
    stack_gold: int  # the seat's chips at the start of the hand

    @property
    def short_gold(self) -> int:
        return self.owed_gold - self.paid_gold


@dataclass(frozen=True, slots=True)
class Chi:
    """Mậu Binh: one seat's arrangement, back (chi đầu), middle and front (chi cuối)."""

    seat: int
    player_id: str
    back: tuple[str, ...]
    middle: tuple[str, ...]
    front: tuple[str, ...]
    categories: tuple[str, str, str]  # back, middle, front
    automatic: bool  # arranged by the rules (MB-20), not by the player


@dataclass(frozen=True, slots=True)
class PhomSeat:
    """Phỏm: one seat's melds laid, cards it took, cards it sent (to whose meld) and left."""

    seat: int
    player_id: str
    melds: tuple[tuple[str, ...], ...]
    taken: tuple[str, ...]
    sent: tuple[tuple[str, int, int], ...]  # (card, to seat, meld index)
    left: tuple[str, ...]


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
    owed: tuple[OwedLine, ...] = ()
    chi: tuple[Chi, ...] = ()
    phom: tuple[PhomSeat, ...] = ()
    tricks: int = 0  # Tiến Lên, Sâm Lốc: how many tricks (rounds) were played

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
    notes = _annotations(result) if result is not None else {}
    view: dict[str, Any] = {
        "hand_id": hand_id,
        "table_id": table_id,
        "game": game,
        "timeline": tuple(_row(e, players, notes.get(i)) for i, e in enumerate(events)),
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
                    s.seat,
                    s.player_id,
                    s.stack_gold,
                    nets.get(s.seat) if result else None,
                    accounts.get(s.seat, ""),
                    *_seat_cards(events, s.seat, result.state if result else None),
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
            "owed": _owed(result, reasons),
            "chi": _chi(result, players),
            "phom": _phom(result, players),
            "tricks": max((n.trick for n in notes.values()), default=0),
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


@dataclass(frozen=True, slots=True)
class _Note:
    play: int = 0
    trick: int = 0
    automatic: str = ""
    played: tuple[str, ...] = ()


def _annotations(result: ReplayResult) -> dict[int, _Note]:
    """Event index → what the rules engine made of it, folded again from the replay's
    events: each TimerExpired's automatic move (``socai.rules.automatic``), and in the
    shedding games each play's number and every event's trick."""
    try:
        module = registry.get(result.game)
    except (InvalidArgument, NotFound):
        return {}
    events = result.events
    out: dict[int, _Note] = {}
    if not hasattr(result.state, "plays_made") and not any(type(e.body) is TimerExpired for e in events):
        return out  # no play to number and no timer's move to tell: nothing to fold again
    try:
        state = module.initial_state(events[0].body)
        trick = 0
        for i, e in enumerate(events[1:], start=1):
            after = module.apply(state, e.body)
            play, automatic = 0, ""
            played: tuple[str, ...] = ()
            if isinstance(e.body, TimerExpired):
                move = automatic_move(e.game, state, after, e.body)
                automatic, play, played = move.text, move.play, tuple(str(c) for c in move.cards)
            elif hasattr(after, "plays_made") and after.plays_made > state.plays_made:
                play = after.plays_made
                played = tuple(str(c) for c in after.played_cards[len(state.played_cards) :])
            if play and hasattr(after, "round_plays") and len(after.round_plays) == 1:
                trick += 1  # a lead opens a trick
            if play or automatic or (trick and hasattr(after, "plays_made")):
                out[i] = _Note(play, trick if hasattr(after, "plays_made") else 0, automatic, played)
            state = after
    except (RuleViolation, AssertionError):
        return out  # the replay folded these events; a view never fails where it did not
    return out


def _dealt_to(events: Sequence[Event], seat: int, *, first_deal_only: bool) -> tuple[str, ...]:
    out: list[str] = []
    for e in events[1:]:
        if isinstance(e.body, CardsDealt):
            out += [_card_text(d.card) for d in e.body.cards if d.seat == seat]
        elif first_deal_only and out:
            break
    return tuple(out)


def _seat_cards(events: Sequence[Event], seat: int, state: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The seat's cards at the start (its first deal) and at the end: what the rules'
    state says it holds (``hands``: the cards left in a shedding game, Phỏm's hand after
    its melds, a three-card hand), else every card it was dealt (Hold'em's hole cards)."""
    start = _dealt_to(events, seat, first_deal_only=True)
    held = getattr(state, "hands", None)
    if isinstance(held, Mapping) and seat in held:
        end = tuple(_card_text(getattr(c, "card", c)) for c in held[seat])
    else:
        end = _dealt_to(events, seat, first_deal_only=False)
    return start, end


def _owed(result: ReplayResult, reasons: Mapping[str, Any]) -> tuple[OwedLine, ...]:
    """Per seat and reason of an obligation (a penalty, or one the seat fell short of):
    what the rules said it owes against what it paid (RULES.md GEN-4: a seat pays at most
    its chips; when short, the payees share what it has pro rata)."""
    s = result.settlement
    by_account = {account: seat for seat, account in s.seat_accounts.items()}
    paid: dict[tuple[int, str], int] = {}
    for t in s.transfers:
        seat = by_account.get(t.from_account)
        penalty = t.reason in reasons and reasons[t.reason].penalty
        if seat is not None and (penalty or any(sf.seat == seat and sf.reason == t.reason for sf in s.shortfalls)):
            paid[(seat, t.reason)] = paid.get((seat, t.reason), 0) + t.amount_gold
    short: dict[tuple[int, str], int] = {}
    for sf in s.shortfalls:
        short[(sf.seat, sf.reason)] = short.get((sf.seat, sf.reason), 0) + sf.owed_gold - sf.paid_gold
        paid.setdefault((sf.seat, sf.reason), 0)
    players = {info.seat: (info.player_id, info.stack_gold) for info in result.started.seats}
    return tuple(
        OwedLine(
            seat,
            players.get(seat, ("", 0))[0],
            reason,
            reasons[reason].rule if reason in reasons else "",
            amount + short.get((seat, reason), 0),
            amount,
            players.get(seat, ("", 0))[1],
        )
        for (seat, reason), amount in sorted(paid.items())
    )


def _chi(result: ReplayResult, players: Mapping[int, str]) -> tuple[Chi, ...]:
    arranged = getattr(result.state, "arranged", None)
    if result.game != "maubinh" or not isinstance(arranged, Mapping):
        return ()
    from socai.rules.chinese_poker import maubinh

    def category(cards: Sequence[Card]) -> str:
        try:
            return str(maubinh.hand_value(cards).category)
        except RuleViolation:
            return "?"

    out = []
    for seat in sorted(arranged):
        a = arranged[seat].arrangement
        out.append(
            Chi(
                seat,
                players.get(seat, ""),
                tuple(map(str, a.back)),
                tuple(map(str, a.middle)),
                tuple(map(str, a.front)),
                (category(a.back), category(a.middle), category(a.front)),
                bool(arranged[seat].automatic),
            )
        )
    return tuple(out)


def _phom(result: ReplayResult, players: Mapping[int, str]) -> tuple[PhomSeat, ...]:
    state = result.state
    if result.game != "phom" or not hasattr(state, "laid"):
        return ()
    sent: dict[int, list[tuple[str, int, int]]] = {}
    for e in result.events:
        if isinstance(e.body, CardSent):
            sent.setdefault(e.body.seat, []).append((str(e.body.card), e.body.to_seat, e.body.meld_index))
    return tuple(
        PhomSeat(
            seat,
            players.get(seat, ""),
            tuple(tuple(map(str, meld)) for meld in state.laid.get(seat, ())),
            tuple(sorted(map(str, state.taken.get(seat, ())))),
            tuple(sent.get(seat, ())),
            tuple(map(str, state.hands.get(seat, ()))),
        )
        for seat in state.order
    )


def _row(e: Event, players: Mapping[int, str], note: _Note | None = None) -> TimelineRow:
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
    note = note or _Note()
    if note.automatic:
        text = f"{text}: the rules {note.automatic}" + (f" (play {note.play})" if note.play else "")
    elif note.play:
        text = f"play {note.play}: {text}"
    return TimelineRow(
        e.seq,
        _time(e.occurred_at),
        type(body).__name__,
        seat,
        players.get(seat, "") if seat is not None else "",
        text,
        shown,
        note.play,
        note.trick,
        note.automatic,
        note.played,
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
        if s.start_cards or s.end_cards:
            out.append(
                f"          cards at the start {' '.join(s.start_cards) or '-'}; at the end {' '.join(s.end_cards) or '-'}"
            )
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
    if view.owed:
        out += ["", "owed against paid (RULES.md GEN-4: a seat pays at most its chips; a shortfall is shared pro rata)"]
        for o in view.owed:
            short = f", short {o.short_gold:,}" if o.short_gold else ""
            out.append(
                f"  seat {o.seat} {o.player_id:<20} {o.reason:<22} owed {o.owed_gold:>10,}  paid {o.paid_gold:>10,}{short}"
                f"  (stack {o.stack_gold:,}; RULES.md {o.rule or '?'})"
            )
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
