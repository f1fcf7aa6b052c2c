"""Replay one hand from its events: the single code path of settlement and the auditor.

``replay(events)`` checks, in this order, and raises ``ReplayError`` at the first problem:

1. every envelope names the same table, hand and game, and HandStarted agrees with them
   (``ENVELOPE_MISMATCH``); the game's rules exist (``UNKNOWN_GAME``);
2. there is a HandStarted (``NOT_STARTED``); seq runs 1, 2, 3 … in the order given, with no
   gap (``SEQ_GAP``: missing or repeated) and no swap (``OUT_OF_ORDER``); seq 1 is the one
   HandStarted (``NOT_STARTED``);
3. exactly one HandEnded (``MISSING_END``, ``DUPLICATE_END``), and it is the last event
   (``ILLEGAL_EVENT``);
4. the revealed seed is 64 hex digits whose sha256 is HandStarted's commitment
   (``BAD_SEED``);
5. every card is written in the hand's form (``socai.events.hidden``): in a hand with
   ``face_down_by_position`` a face-down card is blank and an arrangement given by deck
   positions (``CARD_IN_CLEAR`` when one is written, ``CARD_FORMAT`` when a face-up card is
   missing or a position is not the seat's face-down card), in a hand logged before every
   card is written (``CARD_FORMAT``); each hidden card is then filled in from the shuffled
   deck, so the checks below and the rules engine see the same events as for a hand
   logged in the clear, and the settlement is the same;
6. every dealt card is the next card of ``fairness.shuffle(seed, cards.deck(game))``
   (``DEAL_MISMATCH``), every roll is ``fairness.roll_dice(seed)`` (``DICE_MISMATCH``);
7. the events fold through the game's rules module and settle (``ILLEGAL_EVENT`` with the
   engine's own code in the message; ``ENGINE_INVARIANT`` if the engine reports a bug); a
   ``TimerExpired`` that records the move the table made for the seat must record the one
   the rules make (``AUTOMATIC_MISMATCH``; ``socai.rules.automatic``), one written before
   moves were recorded replays as it always did.

``replay_open(events)`` verifies a hand that has not ended yet as far as it goes (``socai
audit --allow-open``): checks 1 and 2 without requiring the end, the form of 5, of 4 and 6
what can be known before the seed is revealed, and 7 up to the first hidden card (in a
hand logged in the clear, every event).

A closing hand (``HandStarted.closing``, written by the table service when an operator
closes a table holding a carried pot) is HandStarted then HandEnded and nothing else
(``ILLEGAL_EVENT`` otherwise): it is settled by the game's closing rule
(``closing_settlement``: 3 Cây Gà's ``closing_pot_settlement`` returns the Gà to the seats
of the HandStarted), so settlement posts it and the auditor re-derives it like any hand.

A message names the event (``event_id``) and what differs, e.g.
``h7/5: dealt Kd to seat 2, the seed deals Qs``. Events may be domain ``Event``s,
protobuf ``Event`` messages, JSON dicts (the protobuf JSON mapping of an export) or
``Stored`` records of the event log; an event that does not decode is ``BAD_EVENT``.

Pure: no I/O, no clock. Settlement, ``socai audit`` and ``ReplayHand`` all call this.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, Protocol

from socai import cards, fairness
from socai.errors import InvalidArgument, NotFound, PreconditionFailed, RuleViolation
from socai.errors import check as errors_check
from socai.events import codec, hidden
from socai.events.model import (
    COMMUNITY,
    HIDDEN_CARD,
    BetAction,
    CardsDealt,
    DiceRolled,
    Event,
    HandEnded,
    HandStarted,
    TimerExpired,
    WagerPlaced,
)
from socai.gen.events.v1 import events_pb2
from socai.rules import registry
from socai.rules.automatic import automatic_move
from socai.rules.base import Settlement, played_rules_version, version_defaults

# Stable reason codes (dead letters, audit reports and gRPC ErrorInfo reasons).
BAD_EVENT: Final = "BAD_EVENT"
ENVELOPE_MISMATCH: Final = "ENVELOPE_MISMATCH"
UNKNOWN_GAME: Final = "UNKNOWN_GAME"
NOT_STARTED: Final = "NOT_STARTED"
SEQ_GAP: Final = "SEQ_GAP"
OUT_OF_ORDER: Final = "OUT_OF_ORDER"
MISSING_END: Final = "MISSING_END"
DUPLICATE_END: Final = "DUPLICATE_END"
BAD_SEED: Final = "BAD_SEED"
DEAL_MISMATCH: Final = "DEAL_MISMATCH"
DICE_MISMATCH: Final = "DICE_MISMATCH"
ILLEGAL_EVENT: Final = "ILLEGAL_EVENT"
ENGINE_INVARIANT: Final = "ENGINE_INVARIANT"
UNKNOWN_RULES_VERSION: Final = "UNKNOWN_RULES_VERSION"
AUTOMATIC_MISMATCH: Final = "AUTOMATIC_MISMATCH"
CARD_IN_CLEAR: Final = hidden.CARD_IN_CLEAR
CARD_FORMAT: Final = hidden.CARD_FORMAT
REASONS: Final = (
    BAD_EVENT,
    ENVELOPE_MISMATCH,
    UNKNOWN_GAME,
    NOT_STARTED,
    SEQ_GAP,
    OUT_OF_ORDER,
    MISSING_END,
    DUPLICATE_END,
    BAD_SEED,
    DEAL_MISMATCH,
    DICE_MISMATCH,
    ILLEGAL_EVENT,
    ENGINE_INVARIANT,
    UNKNOWN_RULES_VERSION,
    CARD_IN_CLEAR,
    CARD_FORMAT,
    AUTOMATIC_MISMATCH,
)
EVENTS_PER_HAND_MAX: Final = 10_000  # the same bound as autoplay.MAX_STEPS: a limit on everything


class ReplayError(PreconditionFailed):
    """A hand that cannot be settled: ``code`` is one of ``REASONS``, ``message`` names the
    event and what differs; ``hand_id`` and ``event_id`` (when one event is to blame) are
    kept for reports and dead letters."""

    def __init__(self, code: str, message: str, *, hand_id: str = "", event_id: str = "") -> None:
        details = {"hand_id": hand_id} if hand_id else {}
        if event_id:
            details["event_id"] = event_id
        super().__init__(code, message, **details)
        self.hand_id = hand_id
        self.event_id = event_id


class _Started(Protocol):
    @property
    def started(self) -> HandStarted: ...


class _OfAHand:
    """``hand_id``, ``table_id`` and ``game`` of a result, from its HandStarted.

    The field itself is each dataclass's own (a protocol types ``self``): a field declared in
    the mixin would be inherited by the dataclasses, which mypyc compiles out of order."""

    __slots__ = ()

    @property
    def hand_id(self: _Started) -> str:
        return self.started.hand_id

    @property
    def table_id(self: _Started) -> str:
        return self.started.table_id

    @property
    def game(self: _Started) -> str:
        return self.started.game


@dataclass(frozen=True, slots=True, init=False)
class ReplayResult(_OfAHand):
    """A verified hand: its settlement and what was checked on the way. ``events`` are the
    hand's events as the rules engine folded them: every card filled in from the seed."""

    started: HandStarted
    events: tuple[Event, ...]
    settlement: Settlement
    cards_verified: int
    dice_verified: int
    state: Any = None  # the rules engine's final state (the next hand's dealer derives from it)

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(
        self,
        started: HandStarted,
        events: tuple[Event, ...],
        settlement: Settlement,
        cards_verified: int,
        dice_verified: int,
        state: Any = None,
    ) -> None:
        object.__setattr__(self, "started", started)
        object.__setattr__(self, "events", events)
        object.__setattr__(self, "settlement", settlement)
        object.__setattr__(self, "cards_verified", cards_verified)
        object.__setattr__(self, "dice_verified", dice_verified)
        object.__setattr__(self, "state", state)


# --- decoding ---------------------------------------------------------------------------


def to_event(item: object) -> Event:
    """One event from any of the accepted forms; raises ReplayError("BAD_EVENT")."""
    if isinstance(item, Event):
        return item
    try:
        # Settlement's form first: asking a protobuf message for a field it lacks
        # (``getattr(item, "event", None)``) raises inside protobuf and costs ~0.6 µs.
        if isinstance(item, events_pb2.Event):
            return codec.from_proto(item)
        inner = getattr(item, "event", None)  # socai.events.log.Stored
        if isinstance(inner, Event):
            return inner
        if isinstance(item, Mapping):
            return codec.from_json(item)
    except InvalidArgument as exc:
        where = _raw_event_id(item)
        hand = where.split("/", 1)[0] if where else ""
        raise ReplayError(BAD_EVENT, f"{where or 'an event'}: {exc.message}", hand_id=hand, event_id=where) from exc
    raise ReplayError(BAD_EVENT, f"not an event: {type(item).__name__}")


def _raw_event_id(item: object) -> str:
    if isinstance(item, events_pb2.Event):
        return item.event_id or f"{item.hand_id}/{item.seq}"
    if isinstance(item, Mapping):
        raw = item.get("event_id") or f"{item.get('hand_id', '?')}/{item.get('seq', '?')}"
        return str(raw)
    return ""


# --- the checks -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenHand(_OfAHand):
    """A hand without its HandEnded, sound as far as it goes (``replay_open``). ``events``
    are as stored: a face-down card of a hand with ``face_down_by_position`` is unknown."""

    started: HandStarted
    events: tuple[Event, ...]
    cards_seen: int  # face-up or written cards checked to be of the game's deck, each dealt once
    dice_seen: int
    state: Any = None  # the rules engine's state after the last event it folded
    # How many events (from HandStarted on) were folded through the rules engine: all of
    # them in a hand logged in the clear; in a hand with face_down_by_position those before
    # the first hidden card (the engine needs the cards, which the seed will reveal).
    folded: int = 0

    @property
    def fully_folded(self) -> bool:
        return self.folded == len(self.events)


def replay(events: Iterable[object]) -> ReplayResult:
    """Verify and settle one hand's events (in stream order). Raises ReplayError."""
    evs, module, first, hand_id = _opening(events)
    started = first.body
    assert isinstance(started, HandStarted)
    end = _check_end(evs, hand_id)
    seed = _check_seed(started, first, end, hand_id)
    game = started.game
    deck = fairness.shuffle(seed, cards.deck(game)) if game in cards.GAME_DECKS and _deals(evs) else []
    dealt = _read_cards(evs, deck, hand_id)  # every card, as the rules engine needs them
    cards_verified, dice_verified = _check_fairness(dealt, deck, seed, hand_id)
    settlement: Settlement | None
    if started.closing:
        state, settlement = None, _closing(dealt, hand_id)
    else:
        state, settlement = _fold(module, dealt, hand_id)
    assert settlement is not None  # _fold settles unless told not to
    return ReplayResult(started, tuple(dealt), settlement, cards_verified, dice_verified, state)


def replay_open(events: Iterable[object]) -> OpenHand:
    """Verify a hand that has not ended yet, as far as it goes. Raises ReplayError.

    Everything ``replay`` checks that does not need the end: the envelopes, the sequence,
    HandStarted and the rules version, the form of every card (``CARD_IN_CLEAR``,
    ``CARD_FORMAT``), and the events folded through the rules engine (``ILLEGAL_EVENT``,
    ``ENGINE_INVARIANT``) without requiring the hand to be over. The seed is revealed by
    HandEnded only, so cards and dice cannot be checked against the shuffle yet; what can
    be is: the commitment is a SHA-256 in hex (``BAD_SEED``), every written card is of the
    game's deck and dealt once, no more cards than the deck holds (``DEAL_MISMATCH``), and
    dice are rolled only in a game of dice, three of them, 1 to 6, the same at every roll
    of the hand (``DICE_MISMATCH``).

    A hand logged in the clear is folded to its last event: every event of a hand that
    passes is legal, its cards are checked against the seed once it ends. A hand with
    ``face_down_by_position`` is folded up to its first hidden card only (``folded``):
    whether a play is legal depends on the cards in the seat's hand, which nobody but the
    table knows until the seed is revealed. Of the rest, the form is checked here (a
    face-down card blank, an arrangement naming the seat's own face-down cards by
    position) and the rules at the end.

    The events must not hold a HandEnded (such a hand is ``replay``'s).
    """
    evs, module, first, hand_id = _opening(events)
    started = first.body
    assert isinstance(started, HandStarted)
    errors_check(not any(isinstance(e.body, HandEnded) for e in evs), "replay_open is for hands without a HandEnded")
    if _COMMITMENT.fullmatch(started.deck_commitment or "") is None:
        raise ReplayError(
            BAD_SEED,
            f"{first.event_id}: the commitment {_short(started.deck_commitment)!r} is not a SHA-256 "
            "(64 hex digits): no seed can ever match it",
            hand_id=hand_id,
            event_id=first.event_id,
        )
    _read_cards(evs, None, hand_id)
    cards_seen, dice_seen = _check_open_fairness(evs, hand_id)
    if started.closing:  # a closing hand holds HandStarted and HandEnded, nothing between
        if len(evs) > 1:
            extra = evs[1]
            raise ReplayError(
                ILLEGAL_EVENT,
                f"{extra.event_id}: {describe(extra.body)} in a closing hand (only HandStarted and HandEnded)",
                hand_id=hand_id,
                event_id=extra.event_id,
            )
        return OpenHand(started, tuple(evs), cards_seen, dice_seen, None, len(evs))
    folded = next((i for i, e in enumerate(evs) if hidden.hidden_in(e)), len(evs))
    state, _ = _fold(module, evs[:folded], hand_id, settle=False)
    return OpenHand(started, tuple(evs), cards_seen, dice_seen, state, folded)


def _opening(events: Iterable[object]) -> tuple[list[Event], ModuleType, Event, str]:
    """The checks of every hand, ended or not, up to its end: (the events, the game's
    rules, the HandStarted event, the hand id). Raises ReplayError."""
    evs = [to_event(e) for e in events]
    if not evs:
        raise ReplayError(NOT_STARTED, "no events: a hand starts with HandStarted")
    if len(evs) > EVENTS_PER_HAND_MAX:
        raise ReplayError(
            ILLEGAL_EVENT, f"{evs[0].hand_id}: {len(evs)} events; a hand has at most {EVENTS_PER_HAND_MAX}"
        )
    started_at = next((i for i, e in enumerate(evs) if isinstance(e.body, HandStarted)), None)
    hand_id = evs[0].hand_id if started_at is None else evs[started_at].hand_id
    _check_envelopes(evs, started_at, hand_id)
    if started_at is None:
        raise ReplayError(
            NOT_STARTED,
            f"{hand_id}: no HandStarted; the first event is {evs[0].event_id} ({describe(evs[0].body)})",
            hand_id=hand_id,
            event_id=evs[0].event_id,
        )
    module = _module(evs[started_at], hand_id)
    _check_sequence(evs, hand_id)
    first = evs[0]
    if not isinstance(first.body, HandStarted):
        raise ReplayError(
            NOT_STARTED,
            f"{first.event_id}: the hand starts with {describe(first.body)}, not HandStarted",
            hand_id=hand_id,
            event_id=first.event_id,
        )
    for e in evs[1:]:
        if isinstance(e.body, HandStarted):
            raise ReplayError(
                ILLEGAL_EVENT,
                f"{e.event_id}: a second HandStarted (the hand started at {first.event_id})",
                hand_id=hand_id,
                event_id=e.event_id,
            )
    _check_rules_version(module, first, hand_id)
    return evs, module, first, hand_id


def _check_rules_version(module: ModuleType, first: Event, hand_id: str) -> None:
    """A hand replays only under the rules it was played with: a rules version this engine
    does not know is refused, never replayed under other rules (UNKNOWN_RULES_VERSION)."""
    started = first.body
    assert isinstance(started, HandStarted)
    version = played_rules_version(started)
    known = version_defaults(module)
    if version not in known:
        raise ReplayError(
            UNKNOWN_RULES_VERSION,
            f"{first.event_id}: {started.game} rules version {version} is not known to this engine "
            f"(it knows {', '.join(str(v) for v in sorted(known))}); replay the hand with the engine it was played on",
            hand_id=hand_id,
            event_id=first.event_id,
        )


def replay_hand(events: Iterable[object]) -> Settlement:
    """The settlement of one hand's events (DESIGN.md "Public Python API").

    Accepts domain Events, protobuf Events, JSON dicts (the export format) or event-log
    records, in stream order. Raises ReplayError (``.code`` in ``REASONS``) when the hand
    cannot be settled: a gap, a missing or forged end, a wrong seed, a card or die the seed
    does not deal, or an event the rules refuse.
    """
    return replay(events).settlement


def _check_envelopes(evs: Sequence[Event], started_at: int | None, hand_id: str) -> None:
    ref = evs[started_at if started_at is not None else 0]
    envelope = (ref.table_id, ref.hand_id, ref.game)
    for e in evs:
        if (e.table_id, e.hand_id, e.game) == envelope:
            continue  # the usual case; which field differs is looked up only for the error
        for name in ("table_id", "hand_id", "game"):
            have, want = getattr(e, name), getattr(ref, name)
            if have != want:
                raise ReplayError(
                    ENVELOPE_MISMATCH,
                    f"{e.event_id}: {name} is {have!r}, the hand's is {want!r}",
                    hand_id=hand_id,
                    event_id=e.event_id,
                )
    if started_at is not None:
        body = ref.body
        assert isinstance(body, HandStarted)
        for name in ("table_id", "hand_id", "game"):
            have, want = getattr(body, name), getattr(ref, name)
            if have != want:
                raise ReplayError(
                    ENVELOPE_MISMATCH,
                    f"{ref.event_id}: HandStarted.{name} is {have!r}, the envelope's is {want!r}",
                    hand_id=hand_id,
                    event_id=ref.event_id,
                )


def _module(started: Event, hand_id: str) -> ModuleType:
    try:
        return registry.get(started.game)
    except (InvalidArgument, NotFound) as exc:
        raise ReplayError(
            UNKNOWN_GAME, f"{started.event_id}: {exc.message}", hand_id=hand_id, event_id=started.event_id
        ) from exc


def _check_sequence(evs: Sequence[Event], hand_id: str) -> None:
    for i, e in enumerate(evs, start=1):  # the usual case: 1, 2, 3 … in order (no gap, repeat or swap)
        if e.seq != i:
            break
    else:
        return
    seen: dict[int, str] = {}
    for e in evs:
        if e.seq in seen:
            raise ReplayError(SEQ_GAP, f"{e.event_id} appears twice", hand_id=hand_id, event_id=e.event_id)
        seen[e.seq] = e.event_id
    missing = [seq for seq in range(1, len(evs) + 1) if seq not in seen]
    if missing:
        seq = missing[0]
        before = seen.get(seq - 1)
        after = min((s for s in seen if s > seq), default=None)
        context = f" ({before} is followed by {hand_id}/{after})" if before and after else ""
        raise ReplayError(SEQ_GAP, f"{hand_id}/{seq} is missing{context}", hand_id=hand_id, event_id=f"{hand_id}/{seq}")
    for i, e in enumerate(evs, start=1):
        if e.seq != i:
            expected = seen[i]
            raise ReplayError(
                OUT_OF_ORDER,
                f"{e.event_id} ({describe(e.body)}) comes where {expected} belongs: events are out of order",
                hand_id=hand_id,
                event_id=e.event_id,
            )


def _check_end(evs: Sequence[Event], hand_id: str) -> Event:
    ends = [e for e in evs if isinstance(e.body, HandEnded)]
    if not ends:
        last = evs[-1]
        raise ReplayError(
            MISSING_END,
            f"{hand_id}: no HandEnded after {last.event_id} ({describe(last.body)}); the hand has not ended",
            hand_id=hand_id,
        )
    if len(ends) > 1:
        raise ReplayError(
            DUPLICATE_END,
            f"{ends[1].event_id}: a second HandEnded (the first is {ends[0].event_id})",
            hand_id=hand_id,
            event_id=ends[1].event_id,
        )
    end = ends[0]
    if end is not evs[-1]:
        after = evs[evs.index(end) + 1]
        raise ReplayError(
            ILLEGAL_EVENT,
            f"{after.event_id}: {describe(after.body)} after HandEnded ({end.event_id})",
            hand_id=hand_id,
            event_id=after.event_id,
        )
    return end


def _check_seed(started: HandStarted, first: Event, end: Event, hand_id: str) -> bytes:
    body = end.body
    assert isinstance(body, HandEnded)
    try:
        seed = fairness.seed_from_hex(body.deck_seed)
    except InvalidArgument as exc:
        raise ReplayError(
            BAD_SEED, f"{end.event_id}: the revealed {exc.message}", hand_id=hand_id, event_id=end.event_id
        ) from exc
    if not fairness.verify_commitment(seed, started.deck_commitment):
        raise ReplayError(
            BAD_SEED,
            f"{end.event_id}: the revealed seed {_short(body.deck_seed)} hashes to "
            f"{_short(fairness.commitment(seed))}, not the commitment {_short(started.deck_commitment)} "
            f"of {first.event_id}",
            hand_id=hand_id,
            event_id=end.event_id,
        )
    return seed


def _mismatch(code: str, e: Event, hand_id: str, detail: str) -> ReplayError:
    """A card or die of event ``e`` that the hand's seed (or deck) does not allow."""
    return ReplayError(code, f"{e.event_id}: {detail}", hand_id=hand_id, event_id=e.event_id)


def _read_cards(evs: Sequence[Event], deck: Sequence[cards.Card] | None, hand_id: str) -> Sequence[Event]:
    """The events with every hidden card filled in from ``deck`` (None: the form checked
    only), ``socai.events.hidden``. Raises ReplayError (CARD_IN_CLEAR, CARD_FORMAT)."""
    try:
        return hidden.reveal(evs, deck)
    except InvalidArgument as exc:
        raise ReplayError(exc.code, exc.message, hand_id=hand_id, event_id=exc.details.get("event_id", "")) from exc


def _check_fairness(evs: Sequence[Event], deck: Sequence[cards.Card], seed: bytes, hand_id: str) -> tuple[int, int]:
    game = evs[0].game
    has_deck = game in cards.GAME_DECKS
    dice: tuple[int, ...] | None = None
    dealt = rolled = 0
    for e in evs:
        body = e.body
        if isinstance(body, CardsDealt):
            if not has_deck:
                raise _mismatch(DEAL_MISMATCH, e, hand_id, f"{game} is played without cards")
            for d in body.cards:
                if dealt >= len(deck):
                    raise _mismatch(
                        DEAL_MISMATCH,
                        e,
                        hand_id,
                        f"deals card {dealt + 1} to {_to(d.seat)}; the {game} deck has {len(deck)}",
                    )
                if d.card != deck[dealt]:
                    raise _mismatch(
                        DEAL_MISMATCH, e, hand_id, f"dealt {d.card} to {_to(d.seat)}, the seed deals {deck[dealt]}"
                    )
                dealt += 1
        elif isinstance(body, DiceRolled):
            if has_deck:
                raise _mismatch(DICE_MISMATCH, e, hand_id, f"{game} is played without dice")
            if dice is None:
                dice = fairness.roll_dice(seed)
            if tuple(body.dice) != dice:
                raise _mismatch(DICE_MISMATCH, e, hand_id, f"rolled {_dice(body.dice)}, the seed rolls {_dice(dice)}")
            rolled += len(body.dice)
    return dealt, rolled


_COMMITMENT: Final = re.compile(r"[0-9a-fA-F]{64}", re.ASCII)  # sha256 hex, as fairness.commitment writes it
DIE_FACES: Final = range(1, 7)
DICE_PER_ROLL: Final = 3


def _check_open_fairness(evs: Sequence[Event], hand_id: str) -> tuple[int, int]:
    """What the cards and dice of a hand whose seed is not revealed yet can be checked for:
    (cards seen, dice seen). Raises ReplayError."""
    game = evs[0].game
    has_deck = game in cards.GAME_DECKS
    deck = set(cards.deck(game)) if has_deck else set()
    dealt: dict[object, str] = {}
    hidden_seen = 0
    roll: tuple[int, ...] | None = None
    dice_seen = 0
    for e in evs:
        body = e.body
        if isinstance(body, CardsDealt):
            if not has_deck:
                raise _mismatch(DEAL_MISMATCH, e, hand_id, f"{game} is played without cards")
            for d in body.cards:
                if d.card is HIDDEN_CARD:  # face down, by position: the seed will say which
                    hidden_seen += 1
                    if len(dealt) + hidden_seen > len(deck):
                        raise _mismatch(
                            DEAL_MISMATCH,
                            e,
                            hand_id,
                            f"deals card {len(dealt) + hidden_seen} to {_to(d.seat)}; the {game} deck has {len(deck)}",
                        )
                    continue
                if d.card not in deck:
                    raise _mismatch(
                        DEAL_MISMATCH,
                        e,
                        hand_id,
                        f"deals {d.card} to {_to(d.seat)}, a card the {game} deck does not hold",
                    )
                if d.card in dealt:
                    raise _mismatch(
                        DEAL_MISMATCH, e, hand_id, f"deals {d.card} to {_to(d.seat)}, already dealt at {dealt[d.card]}"
                    )
                dealt[d.card] = e.event_id
        elif isinstance(body, DiceRolled):
            if has_deck:
                raise _mismatch(DICE_MISMATCH, e, hand_id, f"{game} is played without dice")
            dice = tuple(body.dice)
            if len(dice) != DICE_PER_ROLL or any(d not in DIE_FACES for d in dice):
                raise _mismatch(
                    DICE_MISMATCH, e, hand_id, f"rolled {_dice(dice)}; a roll is {DICE_PER_ROLL} dice of 1 to 6"
                )
            if roll is not None and dice != roll:
                raise _mismatch(
                    DICE_MISMATCH, e, hand_id, f"rolled {_dice(dice)}, but the hand's seed rolled {_dice(roll)} before"
                )
            roll = dice
            dice_seen += len(dice)
    return len(dealt), dice_seen


def _deals(evs: Sequence[Event]) -> bool:
    return any(isinstance(e.body, CardsDealt) for e in evs)


def _fold(
    module: ModuleType, evs: Sequence[Event], hand_id: str, *, settle: bool = True
) -> tuple[Any, Settlement | None]:
    """The rules engine's state after every event, and (``settle``) the hand's settlement."""
    current = evs[0]
    settlement: Settlement | None = None
    try:
        state = module.initial_state(current.body)
        for current in evs[1:]:
            before, state = state, module.apply(state, current.body)
            if type(current.body) is TimerExpired and current.body.automatic:
                _check_automatic(before, state, current, hand_id)
        if settle:
            if not module.is_finished(state):
                raise RuleViolation("HAND_NOT_OVER", "the rules say the hand is not over")
            settlement = module.settle(state)
    except RuleViolation as exc:
        raise ReplayError(
            ILLEGAL_EVENT,
            f"{current.event_id}: {describe(current.body)}: {exc.code}: {exc.message}",
            hand_id=hand_id,
            event_id=current.event_id,
        ) from exc
    except AssertionError as exc:
        raise ReplayError(
            ENGINE_INVARIANT,
            f"{current.event_id}: {describe(current.body)}: the rules engine broke an invariant: {exc}",
            hand_id=hand_id,
            event_id=current.event_id,
        ) from exc
    return state, settlement


def _check_automatic(before: Any, after: Any, event: Event, hand_id: str) -> None:
    """A ``TimerExpired`` that records the move the table made for the seat must record the
    move the rules make (``socai.rules.automatic``): else the log says one thing happened
    and the hand was settled on another (``AUTOMATIC_MISMATCH``)."""
    body = event.body
    assert isinstance(body, TimerExpired)
    derived = automatic_move(event.game, before, after, body).code
    if derived != body.automatic:
        raise ReplayError(
            AUTOMATIC_MISMATCH,
            f"{event.event_id}: the timer's move is recorded as {body.automatic!r}; the rules make {derived!r}",
            hand_id=hand_id,
            event_id=event.event_id,
        )


CLOSING_RULE: Final = "closing_pot_settlement"  # the game module's hook for a closing hand


def has_closing_rule(game: str) -> bool:
    """Whether ``game`` settles a closing hand (a carried pot returned at a table's close)."""
    return hasattr(registry.get(game), CLOSING_RULE)


def closing_settlement(started: HandStarted) -> Settlement:
    """The settlement of a closing hand: the game's closing rule on the pot the hand
    carries in (``started.pot_gold``) and the seats it names. The table service applies the
    same function to its stacks that settlement posts, so the two cannot disagree.

    Raises RuleViolation("NO_CLOSING_RULE") for a game without one, and what the rule raises.
    """
    rule = getattr(registry.get(started.game), CLOSING_RULE, None)
    if rule is None:
        raise RuleViolation("NO_CLOSING_RULE", f"{started.game} has no closing hand")
    seat_players = {info.seat: info.player_id for info in started.seats}
    settlement: Settlement = rule(started.table_id, started.hand_id, started.pot_gold, seat_players)
    return settlement


def _closing(evs: Sequence[Event], hand_id: str) -> Settlement:
    first = evs[0]
    started = first.body
    assert isinstance(started, HandStarted)
    if len(evs) != 2:
        extra = evs[1]
        raise ReplayError(
            ILLEGAL_EVENT,
            f"{extra.event_id}: {describe(extra.body)} in a closing hand (only HandStarted and HandEnded)",
            hand_id=hand_id,
            event_id=extra.event_id,
        )
    try:
        return closing_settlement(started)
    except RuleViolation as exc:
        raise ReplayError(
            ILLEGAL_EVENT,
            f"{first.event_id}: closing hand: {exc.code}: {exc.message}",
            hand_id=hand_id,
            event_id=first.event_id,
        ) from exc


# --- descriptions -----------------------------------------------------------------------


def describe(body: object) -> str:
    """A short human description of an event body, for messages."""
    name = type(body).__name__
    if isinstance(body, BetAction):
        amount = f" {body.amount_gold}" if body.amount_gold else ""
        return f"{name} seat {body.seat} {body.kind.value}{amount}"
    if isinstance(body, WagerPlaced):
        selection = "-".join(str(v) for v in body.selection)
        return f"{name} seat {body.seat} {body.kind}{' ' + selection if selection else ''} {body.amount_gold}"
    if isinstance(body, CardsDealt):
        return f"{name} " + " ".join(f"{str(d.card) or '??'}>{_to(d.seat)}" for d in body.cards)  # ??: by position
    if isinstance(body, DiceRolled):
        return f"{name} {_dice(body.dice)}"
    seat = getattr(body, "seat", None)
    return f"{name} seat {seat}" if isinstance(seat, int) else name


def _to(seat: int) -> str:
    return "the board" if seat == COMMUNITY else f"seat {seat}"


def _dice(dice: Iterable[int]) -> str:
    return "-".join(str(d) for d in dice)


def _short(text: str) -> str:
    return text if len(text) <= 16 else text[:12] + "…"


# --- comparing settlements ----------------------------------------------------------------


def penalties(settlement: Settlement) -> dict[str, int]:
    """Penalty transfers of a settlement by reason code: the reasons its game declares as
    penalties (``REASONS``, ``registry.penalty_reasons``)."""
    penalty = registry.penalty_reasons(settlement.game)
    return {reason: gold for reason, gold in settlement.by_reason().items() if reason in penalty}


def gold_moved(settlement: Settlement) -> int:
    """The gold that changed accounts: the sum of the positive entries."""
    return sum(v for v in settlement.entries().values() if v > 0)


def diff_entries(expected: Mapping[str, int], actual: Mapping[str, int], *, want: str, have: str) -> list[str]:
    """One line per account whose amount differs, e.g.
    ``escrow:t1:p2: replay -40, ledger -20``."""
    out = []
    for account in sorted(set(expected) | set(actual)):
        a, b = expected.get(account, 0), actual.get(account, 0)
        if a != b:
            out.append(f"{account}: {want} {a:+d}, {have} {b:+d}")
    return out


__all__ = [
    "CLOSING_RULE",
    "REASONS",
    "OpenHand",
    "ReplayError",
    "ReplayResult",
    "closing_settlement",
    "describe",
    "diff_entries",
    "gold_moved",
    "has_closing_rule",
    "penalties",
    "replay",
    "replay_hand",
    "replay_open",
    "to_event",
]
