"""Phỏm / Tá Lả on the game kit (RULES.md §6 with §0, PH-1 … PH-19).

The card logic (melds, the best arrangement, taking, discarding, sending, Ù, the payment
table) is ``socai.rules.rummy.phom_melds``; this module is the hand: events, turns, what the
table deals, and settlement through the kit's obligations (GEN-4 cap).

A hand, as this module plays it:

1. The deal (PH-1): one card at a time, face down, counterclockwise (GEN-2) from
   ``HandStarted.dealer_seat``, the first player (the table owner in the first hand, then
   the previous hand's winner: ``next_hand_dealer``), nine rounds, then a tenth card to
   the first player. The rest of the 52 cards is the stock (nọc).
2. The first player discards (``CardsPlayed`` with one card). Each later turn is: take the
   previous discard (ăn, ``CardTaken``) when it makes a Phỏm with the taker's own cards
   (§6.1, PH-13), or draw (``Declared(seat, "draw")``, PH-9), after which ``pending``
   asks the table to deal that seat one card face down from the shuffled deck (the next
   card, so the audit re-derives every drawn card from the seed); then discard one card.
   A taken card may never be discarded, and every card taken must still fit a Phỏm with
   the rest (``phom_melds.can_discard``). A take must leave a card to throw, except, from
   rules version 2, a take that puts all 10 cards in Phỏm: that seat's only move is its Ù
   tròn (``Version``).
3. Turns (PH-8): a seat's kept discards are its pile; a discard that is taken leaves the
   pile. The turn goes counterclockwise to the next seat in play whose pile holds fewer
   than 4 cards, so a seat whose card was taken plays again (tái). The turn that brings a
   pile to 4 is a final turn: after the take or draw the seat lays its melds
   (``MeldsLaid``, possibly none, which is móm unless it laid on an earlier final turn),
   may send junk to other seats' laid melds (``CardSent``), and then discards. A taken
   card must be in a laid meld (PH-13). From rules version 2 the seat lays every Phỏm it
   holds: a lay-down that keeps a Phỏm beside a card to throw is BAD_MELD (§6.1 "lay down
   all their Phỏm, then send junk"). Play ends when every seat in play has 4 cards in its
   pile.
4. Ù (§6.2, PH-4, PH-5, PH-12, PH-17): a seat holding 10 cards (after its take or draw,
   or the first player before the first discard) that are all in Phỏm, or all but one
   card that is not a taken card, may ``Declared(seat, "u")``; the hand ends at once.
   ``phom_melds.find_u`` decides tròn and K. Ù đền (PH-7, PH-18): the latest chốt-taker,
   or the seat whose three discards in a row were taken, pays everyone's share. A Ù on a
   tái turn is the same rule ("tái gửi ù đền" is the Ù đền of a Ù that comes on a tái).
5. Settlement (§6.4): take payments as incurred (1 ×, 2 ×, k × S, chốt 5 × S, PH-6,
   PH-19), then the Ù payments, or the placement payments by junk points (PH-2, PH-3) with
   móm at 4 × S (PH-11) to the first-place seat (PH-15). Every payment is an ``Obligation``
   paid with the GEN-4 cap, in playing order; then the table's fee (GEN-1, default 0).

Disconnect and leaving (§6.5, PH-14, GEN-6): ``PlayerLeft``, and ``PlayerDisconnected``
under ``disconnect_forfeits`` (the default), make the seat lose at once: it owes 5 × S to
each seat still in play, its cards leave play (``dead``), and the rest play on and are
ranked for the number left. Take payments already incurred stand, both ways. When one
seat is left, play is over. With ``disconnect_forfeits`` off a disconnected seat stays
and its timer plays for it.

Timers (GEN-5): ``TimerExpired(seat, "turn")`` plays the seat's turn step for it: declares
Ù when it can, else draws, lays the best melds (``phom_melds.best_lay_down``, under the
hand's rules version: the move is derived again at replay, so it is part of the result),
or discards the highest-scoring junk card.

Rules versions (``RULES_VERSION``, ``Version``): a hand replays under the version its
HandStarted records (0 is 1); ``State.version`` carries what that version decides, and
the few functions that differ branch on it there: ``_apply_lay``, ``_best_lay``, ``_takeable``.

What a seat sees (``visible``): the kit's default already hides another seat's face-down
cards, which is every dealt and drawn card; discards, takes, melds and sends are public,
and the stock's order is never in any event. Nothing else is secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Final

from socai.cards import Card
from socai.cards import deck as canonical_deck
from socai.errors import RuleViolation, broken, check
from socai.events.model import (
    Body,
    CardsDealt,
    CardSent,
    CardsPlayed,
    CardTaken,
    Declared,
    HandStarted,
    Meld,
    MeldsLaid,
    PlayerDisconnected,
    TimerExpired,
)
from socai.rules import base
from socai.rules.base import (
    COUNTERCLOCKWISE,
    DealSlot,
    Facing,
    GameSpec,
    GameState,
    LegalAction,
    MoveSet,
    Obligation,
    Pending,
    Reason,
    Settlement,
    SettlementBuilder,
    check_settlement,
    common_event,
    game_state,
    hand_ended,
    parse_options,
    pay_obligations,
    per_state,
    played_rules_version,
    resolve_options,
    seat_or_owner,
    seats_in_order,
    validate_start,
)
from socai.rules.rummy import phom_melds
from socai.rules.rummy.phom_melds import (
    Discard,
    PlayerResult,
    UWin,
    best_arrangement,
    best_lay_down,
    can_discard,
    card_order,
    card_points,
    find_u,
    is_meld,
    is_u_khan,
    junk_points,
    meld_left_to_lay,
)

SPEC: Final = GameSpec("phom", "Phỏm", 2, 4, "standard", direction=COUNTERCLOCKWISE, default_fee_bps=0)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("take", "declare:draw", "play", "lay", "send", "declare:u", "declare:u_khan")
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("turn",)
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"BAD_MELD": "6.2, PH-13"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "6.5, PH-14, GEN-6: the loser at once: pays 5 x S to each player left (its whole settlement), besides what its taken cards already cost"

DECK: Final[frozenset[Card]] = frozenset(canonical_deck("phom"))
CARDS_EACH: Final = 9  # PH-1: 9 each, 10 to the first player
FIRST_PLAYER_CARDS: Final = 10
PILE_FULL: Final = 4  # PH-8: the hand ends when every pile holds 4 discards
SEATS_MAX: Final = 4
# Bump when a rule or an Options default changes (OPTION_DEFAULTS and VERSIONS keep every
# version's): a hand replays under the version it was played with.
RULES_VERSION: Final = 2
TURN_TIMER: Final = "turn"

DRAW: Final = "draw"  # Declared: draw from the stock (bốc, PH-9)
U: Final = "u"  # Declared: Ù
U_KHAN: Final = "u_khan"  # Declared: Ù khan (PH-16, only with the option)

# Phases of a hand.
DEALING: Final = "dealing"  # the initial deal is due
TAKE_OR_DRAW: Final = "take_or_draw"  # ``to_act`` takes the previous discard or draws
DRAWING: Final = "drawing"  # the table deals ``to_act`` one card from the stock
DISCARD: Final = "discard"  # ``to_act`` discards (or declares Ù)
LAY: Final = "lay"  # final turn: ``to_act`` lays its melds (or declares Ù)
SEND: Final = "send"  # final turn: ``to_act`` sends junk, then discards
PLAY_OVER: Final = "play_over"  # the result is decided; only HandEnded is expected
ENDED: Final = "ended"  # HandEnded applied; settle() may run


@dataclass(frozen=True, slots=True)
class Options:
    """Phỏm's table rules and [Proposed PH-n] decisions, defaults as in RULES.md §6.

    - ``one_taken_per_meld``: at most one taken card in each Phỏm (PH-13's optional flag).
    - ``u_khan``: Ù khan (§6.6, PH-16): a dealt hand with no two cards that could share a
      Phỏm may be declared before the seat's first take or draw; 5 × S from each other
      seat with 9 cards, 10 × S with 10. Off by default ("not yet applied").
    - ``disconnect_forfeits``: a disconnect is a loss at once, 5 × S to each seat in play
      (§6.5, PH-14); off, a disconnected seat stays and its timer plays for it.
    - ``turn_timeout_s``: the turn timer (GEN-5: configurable, not in the source).
    """

    one_taken_per_meld: bool = False
    u_khan: bool = False
    disconnect_forfeits: bool = True
    turn_timeout_s: int = 20

    def validate(self) -> None:
        """Raises RuleViolation("BAD_OPTION") for a value the rules cannot run with."""
        if self.turn_timeout_s < 1:
            raise RuleViolation("BAD_OPTION", "turn_timeout_s must be >= 1", option="turn_timeout_s")


# Version 2 changed rules (``Version``), not option defaults.
_OPTION_DEFAULTS_V1: Final[Mapping[str, str]] = MappingProxyType(
    {
        "one_taken_per_meld": "false",
        "u_khan": "false",
        "disconnect_forfeits": "true",
        "turn_timeout_s": "20",
    }
)
OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType(
    {1: _OPTION_DEFAULTS_V1, 2: _OPTION_DEFAULTS_V1}
)


@dataclass(frozen=True, slots=True)
class Version:
    """What a Phỏm rules version decides (``HandStarted.rules_version``, 0 read as 1): the
    one place where the versions differ; ``State.version`` carries it through the hand.

    - ``lay_every_meld`` (version 2, §6.1 last turn: "lay down all their Phỏm, then send
      junk"; junk is what is in no Phỏm, §6.2): a lay-down that leaves a Phỏm among the
      cards kept is BAD_MELD (``phom_melds.meld_left_to_lay``), and the lay-down of the
      timer and the bots is the best of those that leave none
      (``best_lay_down(lay_every_meld=True)``). Version 1 accepts any melds that leave a
      card, and its best lay-down may keep a Phỏm to send its cards one by one.
    - ``take_into_u_tron`` (version 2, §6.1 step 2, PH-13, PH-4, PH-12): a take that puts
      all 10 cards in Phỏm with every taken card inside one is a legal take, and the seat
      then declares its Ù tròn (nothing else is legal). Version 1 refuses every take
      that leaves no card to throw.
    """

    number: int
    lay_every_meld: bool
    take_into_u_tron: bool


VERSIONS: Final[Mapping[int, Version]] = MappingProxyType(
    {
        1: Version(1, lay_every_meld=False, take_into_u_tron=False),
        2: Version(2, lay_every_meld=True, take_into_u_tron=True),
    }
)

# Every settlement reason code Phỏm emits, with the rule it applies (phom_melds.REASONS).
REASONS: Final[Mapping[str, Reason]] = MappingProxyType(
    {
        **{code: Reason(True, rule) for code, rule in phom_melds.REASONS.items()},
        "fee": Reason(False, "GEN-1: the table's fee_bps on each net win"),
    }
)


@dataclass(frozen=True, slots=True, init=False)
class DiscardRecord:
    """One discard of the hand, in order: who threw which card, who took it, and whether
    it brought the discarder's pile to 4 (``final``: a take of it is ăn chốt, PH-19)."""

    seat: int
    card: Card
    final: bool
    taken_by: int | None = None

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, seat: int, card: Card, final: bool, taken_by: int | None = None) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "card", card)
        object.__setattr__(self, "final", final)
        object.__setattr__(self, "taken_by", taken_by)


@game_state
class State(GameState):
    """One hand of Phỏm. Never mutated: ``apply`` returns a new State.

    ``version`` is what the hand's rules version decides (``Version``). ``order`` is the
    seats counterclockwise from the first player. ``hands`` the cards each seat holds;
    ``taken`` the taken cards it still holds (they must be laid, PH-13);
    ``piles`` its kept discards (PH-8); ``laid`` its laid melds, sent cards included;
    ``lay_order`` the seats in the order they first laid down (PH-3); ``drew`` the seats
    that drew from the stock (PH-5); ``out`` the seats that lost by leaving or
    disconnecting (PH-14), whose cards are in ``dead``. ``acquired``: ``to_act`` has taken
    or drawn this turn. ``dealt_mask``: the cards dealt so far as bits of ``Card.index``,
    which are the cards held, in piles, laid and dead (no card leaves play): a deal's
    duplicate check reads it instead of gathering those cards.
    """

    started: HandStarted
    options: Options
    version: Version
    order: tuple[int, ...]
    stacks_gold: Mapping[int, int]
    hands: Mapping[int, tuple[Card, ...]]
    taken: Mapping[int, frozenset[Card]]
    piles: Mapping[int, tuple[Card, ...]]
    laid: Mapping[int, tuple[tuple[Card, ...], ...]]
    discards: tuple[DiscardRecord, ...] = ()
    lay_order: tuple[int, ...] = ()
    drew: frozenset[int] = frozenset()
    out: frozenset[int] = frozenset()
    dead: tuple[Card, ...] = ()
    stock_left: int = 0
    dealt_cards: int = 0
    dealt_mask: int = 0
    phase: str = DEALING
    to_act: int | None = None
    acquired: bool = False
    obligations: tuple[Obligation, ...] = ()
    u: UWin | None = None
    u_khan: int | None = None
    disconnected: frozenset[int] = frozenset()
    deck_seed: str = ""


# --- the contract -----------------------------------------------------------------------


def initial_state(started: HandStarted) -> State:
    """The state before any card is dealt.

    Raises RuleViolation with the kit's codes (``base.validate_start``): WRONG_GAME,
    BAD_SEAT_COUNT (2..4), BAD_SEATS, BAD_STACK, BAD_STAKE, BAD_FEE, BAD_DEALER (the first
    player is a seat in the hand), BAD_OWNER, UNKNOWN_RULES_VERSION, BAD_OPTION.
    """
    validate_start(SPEC, started, seats_max_max=SEATS_MAX)
    options = parse_options(Options, resolve_options(OPTION_DEFAULTS, started))
    version = VERSIONS[played_rules_version(started)]
    seats = [info.seat for info in started.seats]
    order = tuple(seats_in_order(seats, started.dealer_seat, started.seats_max, COUNTERCLOCKWISE))
    return State.create(
        started=started,
        options=options,
        version=version,
        order=order,
        stacks_gold={info.seat: info.stack_gold for info in started.seats},
        hands={s: () for s in order},
        taken={s: frozenset() for s in order},
        piles={s: () for s in order},
        laid={s: () for s in order},
        stock_left=len(DECK),
    )


def apply(state: State, body: Body) -> State:
    """The state after ``body``; ``state`` itself is never changed.

    Raises RuleViolation with a stable code: HAND_FINISHED, UNKNOWN_SEAT, SEAT_LEFT,
    NOT_YOUR_TURN, WRONG_DEAL, BAD_CARD, DUPLICATE_CARD, NOT_HOLDING, ILLEGAL_MOVE,
    BAD_MELD, BAD_DECLARATION, WRONG_TIMER, HAND_NOT_OVER, UNEXPECTED_EVENT.
    """
    if state.phase == ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    if isinstance(body, CardsDealt):
        return _apply_deal(state, body)
    if isinstance(body, Declared):
        return _apply_declared(state, body)
    if isinstance(body, CardTaken):
        return _apply_take(state, body)
    if isinstance(body, CardsPlayed):
        return _apply_discard(state, body)
    if isinstance(body, MeldsLaid):
        return _apply_lay(state, body)
    if isinstance(body, CardSent):
        return _apply_send(state, body)
    if isinstance(body, TimerExpired):
        return _apply_timer(state, body)
    if isinstance(body, PlayerDisconnected) and state.options.disconnect_forfeits:
        _known_seat(state, body.seat)
        state = state.derive(disconnected=state.disconnected | {body.seat})
        return _forfeit(state, body.seat)
    return common_event(
        state,
        body,
        game_name=SPEC.name,
        seats=state.stacks_gold,
        over=state.phase == PLAY_OVER,
        leave=_forfeit,
        end=hand_ended,
    )


def pending(state: State) -> Pending:
    """What the hand waits for: the deal, one drawn card, a seat's decision, or nothing."""
    if state.phase in (PLAY_OVER, ENDED):
        return _FINISHED
    if state.phase == DEALING:
        return _dealing(tuple(_live(state)))
    seat = state.to_act
    if seat is None:  # ``check`` in a form mypy narrows on
        broken("a hand in play has a seat to act")
    if state.phase == DRAWING:
        return _drawing(seat)
    return _waiting(seat, state.options.turn_timeout_s)


# ``pending`` is asked before and after every event (~50 times a hand) and has a handful of
# answers, all immutable: each is built once.
_FINISHED: Final = Pending(finished=True)


@lru_cache(maxsize=64)
def _dealing(live: tuple[int, ...]) -> Pending:
    return Pending(deal=_deal_slots_of(live))


@lru_cache(maxsize=64)
def _drawing(seat: int) -> Pending:
    return Pending(deal=(DealSlot(seat, False),))


@lru_cache(maxsize=1024)
def _waiting(seat: int, timeout_s: int) -> Pending:
    return Pending(to_act=(seat,), timer=TURN_TIMER, timeout_s=timeout_s)


def is_finished(state: State) -> bool:
    """True once HandEnded has been applied (settle may run)."""
    return state.phase == ENDED


@per_state
def legal_actions(state: State, seat: int) -> tuple[LegalAction, ...]:
    """The kinds of move ``seat`` may make now: ``take``, ``declare:draw``, ``declare:u``,
    ``declare:u_khan``, ``lay``, ``send``, ``play`` (discard). Empty unless it is its turn."""
    if state.to_act != seat or state.phase not in (TAKE_OR_DRAW, DISCARD, LAY, SEND):
        return ()
    out = []
    if _u_khan_allowed(state, seat):
        out.append(LegalAction(f"declare:{U_KHAN}"))
    if state.phase == TAKE_OR_DRAW:
        if _takeable(state, seat) is not None:
            out.append(LegalAction("take"))
        if state.stock_left > 0:
            out.append(LegalAction(f"declare:{DRAW}"))
        return tuple(out)
    if state.phase in (DISCARD, LAY) and _u_of(state, seat) is not None:
        out.append(LegalAction(f"declare:{U}"))
        if not _throwable(state, seat):
            return tuple(out)  # a take into Ù tròn bound every card: the Ù is the only move
    if state.phase == LAY:
        out.append(LegalAction("lay"))
    elif state.phase == SEND:
        if _possible_sends(state, seat):
            out.append(LegalAction("send"))
        out.append(LegalAction("play"))
    else:
        out.append(LegalAction("play"))
    return tuple(out)


def candidate_actions(state: State, seat: int) -> list[Body]:
    """A small set of legal moves for ``seat`` (bots, property tests): Ù alone when the
    seat can Ù; the take and the draw; the junk cards of the best arrangement to discard;
    the best lay-down; each card that can be sent and the highest junk to throw."""
    return list(_candidates(state, seat))


@per_state
def _candidates(state: State, seat: int) -> tuple[Body, ...]:
    """``candidate_actions``, kept per state (``base.per_state``): the table asks for
    every view of the seat to act, the bot and the timer again."""
    if state.to_act != seat or state.phase not in (TAKE_OR_DRAW, DISCARD, LAY, SEND):
        return ()
    if _u_khan_allowed(state, seat):
        return (Declared(seat, U_KHAN),)
    if state.phase == TAKE_OR_DRAW:
        out: list[Body] = []
        previous = _takeable(state, seat)
        if previous is not None:
            out.append(CardTaken(seat, previous.seat, previous.card))
        if state.stock_left > 0:
            out.append(Declared(seat, DRAW))
        return tuple(out)
    if _u_of(state, seat) is not None:
        return (Declared(seat, U),)
    if state.phase == LAY:
        return (_best_lay(state, seat),)
    if state.phase == SEND:
        sends = _possible_sends(state, seat)
        held = state.hands[seat]
        if sends and len(held) > 1:
            return (*sends, CardsPlayed(seat, (_highest(held),)))
        return (CardsPlayed(seat, (_highest(held),)),)
    return tuple(CardsPlayed(seat, (card,)) for card in _junk_discards(state, seat))


def held(state: State, seat: int) -> tuple[Card, ...]:
    """The cards ``seat`` holds (taken cards included; laid ones are in its melds)."""
    return state.hands.get(seat, ())


def facing(state: State, seat: int) -> Facing:
    """The previous discard and who threw it, with whether ``seat`` may take it now (only
    into a Phỏm it completes, PH-13); nothing before the first discard."""
    if state.phase in (PLAY_OVER, ENDED, DEALING) or not state.discards:
        return Facing()
    last = state.discards[-1]
    if last.taken_by is not None:
        return Facing()
    takeable = _takeable(state, seat) is not None
    verb = "you may take it into a Phỏm" if takeable else "you may not take it"
    return Facing("discard", seat=last.seat, cards=(last.card,), takeable=takeable, text=f"{last.card}: {verb}")


@per_state
def legal_moves(state: State, seat: int) -> tuple[MoveSet, ...]:
    """Every legal move of ``seat``: the take, the draw, Ù, each discard, each send are
    listed; a lay-down (any set of Phỏm of the seat's cards) is described, with the
    lay-down that scores least as its example. Kept per state (``base.per_state``): the
    table asks for the view of the seat to act and again for ``GetTableState``."""
    out: list[MoveSet] = []
    for action in legal_actions(state, seat):
        kind = action.kind
        if kind == "take":
            previous = _takeable(state, seat)
            if previous is None:  # ``check`` in a form mypy narrows on
                broken("a take is offered only when the discard may be taken")
            text = f"take {previous.card} from seat {previous.seat}: it must stay in a Phỏm (PH-13)"
            out.append(MoveSet(kind, text, (CardTaken(seat, previous.seat, previous.card),)))
        elif kind.startswith("declare:"):
            declaration = kind.removeprefix("declare:")
            out.append(MoveSet(kind, base.MOVE_KINDS[kind][1], (Declared(seat, declaration),)))
        elif kind == "lay":
            text = (
                "lay down any Phỏm of your cards (three or more of one rank, or three or more in sequence in "
                "one suit), each card in one Phỏm, every taken card laid"
                + (", at most one taken card in each" if state.options.one_taken_per_meld else "")
                + ", and at least one card left to discard"
            )
            out.append(MoveSet(kind, text, (_best_lay(state, seat),), complete=False))
        elif kind == "send":
            out.append(
                MoveSet(kind, "send one of these cards to another seat's laid Phỏm", tuple(_every_send(state, seat)))
            )
        else:
            hand, taken = state.hands[seat], state.taken[seat]
            per_meld = state.options.one_taken_per_meld
            discards = [c for c in hand if c not in taken and _discardable(hand, c, taken, per_meld)]
            text = "discard one card: any card you hold but a taken one, every taken card still in a Phỏm (PH-13)"
            out.append(MoveSet(kind, text, tuple(CardsPlayed(seat, (c,)) for c in discards)))
    return tuple(out)


def _every_send(state: State, seat: int) -> list[Body]:
    """Every CardSent ``seat`` may make: each held card to each laid Phỏm of another seat
    it fits (not the last card, which is the final discard)."""
    hand = state.hands[seat]
    if len(hand) <= 1:
        return []
    targets = _laid_by_others(state, seat)
    return [
        CardSent(seat, to_seat, index, card)
        for card in sorted(hand, key=card_order)
        for to_seat, index, meld in targets
        if phom_melds.can_send(card, meld)
    ]


def settle(state: State) -> Settlement:
    """The hand's transfers: every obligation in the order incurred (take payments,
    disconnects, then Ù or placement and móm), each capped at the payer's chips (GEN-4),
    then the fee on each net win (GEN-1).

    Raises RuleViolation("HAND_NOT_OVER") before HandEnded.
    """
    if state.phase != ENDED:
        raise RuleViolation("HAND_NOT_OVER", "settle needs a finished hand")
    started = state.started
    builder = SettlementBuilder(
        SPEC.game_id, started.table_id, started.hand_id, {info.seat: info.player_id for info in started.seats}
    )
    pay_obligations(builder, state.obligations, state.stacks_gold, state.order)
    builder.charge_fees(started.fee_bps, list(state.order))
    return check_settlement(builder.build(), state.stacks_gold, conserved=False)


def visible(body: Body, viewer_seat: int, state: object) -> Body | None:
    """What ``viewer_seat`` sees of ``body``: the kit's default, which hides every card
    dealt face down to another seat, the initial deal and each draw from the stock. Every
    other Phỏm event is public (discards, takes, melds, sends, declarations); the stock's
    order appears in no event."""
    return base.visible(body, viewer_seat, state)


def winner(state: State) -> int | None:
    """The hand's winner once play is over: the Ù seat, else the first-placed seat; None
    when nobody is left in play."""
    if state.phase not in (PLAY_OVER, ENDED):
        raise RuleViolation("HAND_NOT_OVER", "the hand has no winner yet")
    if state.u is not None:
        return state.u.seat
    if state.u_khan is not None:
        return state.u_khan
    live = _live(state)
    if len(live) == 1:
        return live[0]
    if not live:
        return None
    return phom_melds.rank_players(_results(state))[0].seat


def next_hand_dealer(
    previous_state: State | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The first player of the next hand (PH-1): the table owner in the first hand, then
    the previous hand's winner; when that seat no longer plays, the owner, else the first
    participating seat."""
    champion = None
    if previous_state is not None and previous_state.phase in (PLAY_OVER, ENDED):
        champion = winner(previous_state)
    return seat_or_owner(champion, participants, owner_seat)


# --- helpers ----------------------------------------------------------------------------

# The card questions of a turn (can this be taken, is this Ù, which cards are junk) are
# asked by ``candidate_actions`` and again by ``apply`` for the same cards: each answer is
# a pure function of its arguments, kept in a bounded cache (no state, no I/O).
_CACHE_SIZE: Final = 4096


@lru_cache(maxsize=_CACHE_SIZE)
def _arranged(hand: tuple[Card, ...], taken: frozenset[Card], per_meld: bool) -> phom_melds.Arrangement | None:
    return best_arrangement(hand, taken, one_taken_per_meld=per_meld)


@lru_cache(maxsize=_CACHE_SIZE)
def _u_cached(hand: tuple[Card, ...], taken: frozenset[Card], drew: bool, per_meld: bool) -> phom_melds.U | None:
    if phom_melds.loose_cards(hand) > 1:
        return None  # two cards that fit no Phỏm at all: never Ù
    return find_u(hand, taken, drew_from_stock=drew, one_taken_per_meld=per_meld)


@lru_cache(maxsize=_CACHE_SIZE)
def _discardable(hand: tuple[Card, ...], card: Card, taken: frozenset[Card], per_meld: bool) -> bool:
    if not taken:
        return card in hand
    return can_discard(hand, card, taken, one_taken_per_meld=per_meld)


def _known_seat(state: State, seat: int) -> None:
    if seat not in state.stacks_gold:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat} is not in this hand", seat=seat)


def _live(state: State) -> list[int]:
    return [s for s in state.order if s not in state.out]


def _check_turn(state: State, seat: int, phases: tuple[str, ...]) -> None:
    if state.phase == PLAY_OVER:
        raise RuleViolation("HAND_FINISHED", "the hand's result is already decided")
    _known_seat(state, seat)
    if seat in state.out:
        raise RuleViolation("SEAT_LEFT", f"seat {seat} has left the hand", seat=seat)
    if state.to_act != seat:
        raise RuleViolation("NOT_YOUR_TURN", f"seat {seat} is not to act", seat=seat)
    if state.phase not in phases:
        raise RuleViolation("ILLEGAL_MOVE", f"not allowed now ({state.phase})", seat=seat)


def _stake(state: State) -> int:
    return state.started.stake_gold


def _owe(payments: Sequence[phom_melds.Payment], stake: int) -> tuple[Obligation, ...]:
    return tuple(Obligation(p.payer, p.payee, p.amount_stakes * stake, p.reason) for p in payments)


def _as_discards(records: Sequence[DiscardRecord]) -> list[Discard]:
    return [Discard(r.seat, r.taken_by, r.final) for r in records]


def _takeable(state: State, seat: int) -> DiscardRecord | None:
    """The previous discard, if ``seat`` may take it now (§6.1, PH-13)."""
    if state.phase != TAKE_OR_DRAW or not state.discards:
        return None
    last = state.discards[-1]
    if last.taken_by is not None or last.seat == seat:
        return None
    into_u_tron = state.version.take_into_u_tron and not state.laid[seat]
    taken, per_meld = state.taken[seat], state.options.one_taken_per_meld
    return last if _may_take(state.hands[seat], last.card, taken, per_meld, into_u_tron) else None


@lru_cache(maxsize=_CACHE_SIZE)
def _may_take(hand: tuple[Card, ...], card: Card, taken: frozenset[Card], per_meld: bool, into_u_tron: bool) -> bool:
    """``card`` makes a Phỏm with the cards held while every earlier taken card stays in
    one (``phom_melds.can_take``), and a card is still free to throw after the take: a
    take that would bind every card to the taken ones is no legal turn, unless
    ``into_u_tron`` (version 2, a seat that has not laid down) and those are 10 cards all
    in Phỏm: Ù tròn, which the seat then declares (PH-4)."""
    after, after_taken = (*hand, card), taken | {card}
    arrangement = _arranged(after, after_taken, per_meld)
    if arrangement is None:
        return False
    if arrangement.junk:
        return True
    free = [c for c in after if c not in after_taken]
    if any(can_discard(after, c, after_taken, one_taken_per_meld=per_meld) for c in free):
        return True
    return into_u_tron and len(after) == FIRST_PLAYER_CARDS


def _u_of(state: State, seat: int) -> phom_melds.U | None:
    """The Ù ``seat`` holds now: 10 cards held, nothing laid yet, after its take or draw
    (or the first player before the first discard)."""
    hand = state.hands[seat]
    if len(hand) != FIRST_PLAYER_CARDS or state.laid[seat] or state.phase not in (DISCARD, LAY):
        return None
    return _u_cached(hand, state.taken[seat], seat in state.drew, state.options.one_taken_per_meld)


def _u_khan_allowed(state: State, seat: int) -> bool:
    """Ù khan (PH-16, optional): before the seat's first take or draw (the first player
    before its first discard), with a hand where no two cards could share a Phỏm."""
    if not state.options.u_khan or state.to_act != seat or state.acquired:
        return False
    if any(r.seat == seat for r in state.discards) or seat in state.drew:
        return False
    if any(r.taken_by == seat for r in state.discards):
        return False
    first_turn = state.phase == TAKE_OR_DRAW or (state.phase == DISCARD and not state.discards)
    return first_turn and is_u_khan(state.hands[seat])


def _throwable(state: State, seat: int) -> bool:
    """Whether ``seat`` holds a card it may throw (or keep out of its lay-down): false only
    after a take into Ù tròn (``Version.take_into_u_tron``), where every card is taken or
    holds a taken card in its Phỏm."""
    hand, taken, per_meld = state.hands[seat], state.taken[seat], state.options.one_taken_per_meld
    return any(_discardable(hand, c, taken, per_meld) for c in hand if c not in taken)


def _junk_discards(state: State, seat: int) -> list[Card]:
    """The cards the seat may discard that the best arrangement leaves as junk, highest
    points first; every legal discard when the arrangement has no junk."""
    hand = state.hands[seat]
    taken = state.taken[seat]
    per_meld = state.options.one_taken_per_meld
    arrangement = _arranged(hand, taken, per_meld)
    junk = list(arrangement.junk) if arrangement is not None else []
    cards = junk or [c for c in hand if c not in taken and _discardable(hand, c, taken, per_meld)]
    check(len(cards) > 0, "a seat to discard has a legal discard")
    return sorted(cards, key=lambda c: (-card_points(c), card_order(c)))


def _highest(cards: Sequence[Card]) -> Card:
    return max(cards, key=lambda c: (card_points(c), card_order(c)))


def _laid_by_others(state: State, seat: int) -> list[tuple[int, int, tuple[Card, ...]]]:
    """Other seats' laid melds as (seat, index, cards)."""
    return [(s, i, meld) for s in state.order if s != seat for i, meld in enumerate(state.laid[s])]


def _possible_sends(state: State, seat: int) -> list[Body]:
    """One CardSent for each held card that fits another seat's laid meld (first fit)."""
    targets = _laid_by_others(state, seat)
    out: list[Body] = []
    if len(state.hands[seat]) <= 1:
        return out  # the last card is the final discard
    for card in sorted(state.hands[seat], key=card_order):
        for to_seat, index, meld in targets:
            if phom_melds.can_send(card, meld):
                out.append(CardSent(seat, to_seat, index, card))
                break
    return out


@per_state
def _best_lay(state: State, seat: int) -> MeldsLaid:
    """The lay-down that scores least (``phom_melds.best_lay_down``); no melds if none.
    Version 2 lays every Phỏm and leaves a card to throw (``Version.lay_every_meld``).
    Kept per state (``base.per_state``): the candidates, the listed moves and the timer
    ask for the same lay-down, about a millisecond each."""
    hand = state.hands[seat]
    laid = best_lay_down(
        hand,
        state.taken[seat],
        [m for _, _, m in _laid_by_others(state, seat)],
        one_taken_per_meld=state.options.one_taken_per_meld,
        lay_every_meld=state.version.lay_every_meld,
    )
    if laid is None:  # ``check`` in a form mypy narrows on
        broken("the taken cards of a seat can always be laid")
    melds = laid.melds
    if state.version.lay_every_meld:
        return MeldsLaid(seat, tuple(Meld(tuple(m)) for m in melds))
    if sum(len(m) for m in melds) >= len(hand):
        # Every card in melds leaves nothing to discard (a Ù is declared before; on a tái
        # turn there is no Ù): keep the highest free card out and lay the rest's melds.
        taken = state.taken[seat]
        per_meld = state.options.one_taken_per_meld
        for card in sorted(hand, key=lambda c: (-card_points(c), card_order(c))):
            if card in taken:
                continue
            rest = [c for c in hand if c != card]
            arrangement = best_arrangement(rest, taken, one_taken_per_meld=per_meld)
            if arrangement is not None:
                melds = arrangement.melds
                break
        else:
            broken("a seat laying down keeps no card")
    return MeldsLaid(seat, tuple(Meld(tuple(m)) for m in melds))


def _next_turn(new: State, after: int) -> None:
    """Give the turn to the next seat in play after ``after`` whose pile holds fewer than
    4 cards (PH-8), or end the play. Changes ``new``, a draft."""
    live = _live(new)
    waiting = [s for s in live if len(new.piles[s]) < PILE_FULL]
    new.acquired = False
    if len(live) <= 1 or not waiting:
        new.phase = PLAY_OVER
        new.to_act = None
        _finish(new)
        return
    order = new.order
    start = order.index(after)
    for i in range(1, len(order) + 1):
        s = order[(start + i) % len(order)]
        if s in waiting:
            new.to_act = s
            break
    new.phase = TAKE_OR_DRAW


def _finish(new: State) -> None:
    """Add the placement and móm payments once play is over without a Ù (§6.4, PH-11)."""
    if new.u is not None or new.u_khan is not None:
        return
    live = _live(new)
    if len(live) < 2:
        return
    new.obligations = (*new.obligations, *_owe(phom_melds.placement_payments(_results(new)), _stake(new)))


def _results(state: State) -> list[PlayerResult]:
    lay_order = {s: i for i, s in enumerate(state.lay_order)}
    live = _live(state)
    # A seat that never laid down (play ended by a forfeit before its final turn) ranks
    # after those that did, in playing order.
    late = [s for s in live if s not in lay_order]
    for i, s in enumerate(late):
        lay_order[s] = len(state.order) + i
    return [PlayerResult(s, junk_points(state.hands[s]), not state.laid[s], lay_order[s]) for s in live]


# --- applying events ----------------------------------------------------------------------


@lru_cache(maxsize=64)
def _deal_slots_of(live: tuple[int, ...]) -> tuple[DealSlot, ...]:
    """PH-1: nine rounds of one card each from the first player, then its tenth card."""
    slots = [DealSlot(s, False) for _ in range(CARDS_EACH) for s in live]
    return (*slots, DealSlot(live[0], False))


def _check_cards(state: State, cards: Sequence[Card]) -> int:
    """``state.dealt_mask`` with ``cards`` added, after checking each is a card of the deck
    not dealt before."""
    seen = state.dealt_mask
    for card in cards:
        if type(card) is not Card or card not in DECK:
            raise RuleViolation("BAD_CARD", f"{card} is not in the deck")
        bit = 1 << card.index
        if seen & bit:
            raise RuleViolation("DUPLICATE_CARD", f"{card} was dealt twice")
        seen |= bit
    return seen


def _apply_deal(state: State, body: CardsDealt) -> State:
    if state.phase not in (DEALING, DRAWING):
        raise RuleViolation("WRONG_DEAL", "no cards are due now")
    due = pending(state).deal
    if len(body.cards) != len(due) or any(
        d.seat != slot.seat or d.face_up != slot.face_up for d, slot in zip(body.cards, due, strict=False)
    ):
        got = tuple(DealSlot(d.seat, d.face_up) for d in body.cards)
        raise RuleViolation("WRONG_DEAL", f"expected slots {due}, got {got}")
    cards = [d.card for d in body.cards]
    dealt_mask = _check_cards(state, cards)
    added: dict[int, list[Card]] = {}
    for d in body.cards:
        added.setdefault(d.seat, []).append(d.card)
    new = state.draft()
    # Only the seats dealt to change (one seat for a draw), in the same order of seats.
    new.hands = {**state.hands, **{s: (*state.hands[s], *dealt) for s, dealt in added.items()}}
    new.stock_left = state.stock_left - len(cards)
    new.dealt_cards = state.dealt_cards + len(cards)
    new.dealt_mask = dealt_mask
    seat = state.to_act
    if state.phase == DEALING:
        new.to_act = _live(state)[0]
        new.phase = DISCARD
    elif seat is not None:
        new.drew = state.drew | {seat}
        new.acquired = True
        new.phase = LAY if len(state.piles[seat]) == PILE_FULL - 1 else DISCARD
    return base.freeze(new)


def _apply_declared(state: State, body: Declared) -> State:
    seat = body.seat
    if body.declaration == DRAW:
        _check_turn(state, seat, (TAKE_OR_DRAW,))
        if state.stock_left <= 0:
            raise RuleViolation("ILLEGAL_MOVE", "the stock is empty")
        return state.derive(phase=DRAWING)
    if body.declaration == U:
        _check_turn(state, seat, (DISCARD, LAY))
        u = _u_of(state, seat)
        if u is None:
            raise RuleViolation("BAD_DECLARATION", "the hand is not Ù: it has junk", seat=seat)
        win = UWin(seat, u.tron, u.kings)
        payments = phom_melds.u_payments(seat, _live(state), u.tron, u.kings, _as_discards(state.discards))
        return state.derive(
            u=win,
            phase=PLAY_OVER,
            to_act=None,
            obligations=(*state.obligations, *_owe(payments, _stake(state))),
        )
    if body.declaration == U_KHAN:
        _check_turn(state, seat, (TAKE_OR_DRAW, DISCARD))
        if not _u_khan_allowed(state, seat):
            raise RuleViolation("BAD_DECLARATION", "Ù khan is off, too late, or the hand is not khan", seat=seat)
        payments = phom_melds.u_khan_payments(seat, _live(state), len(state.hands[seat]))
        return state.derive(
            u_khan=seat,
            phase=PLAY_OVER,
            to_act=None,
            obligations=(*state.obligations, *_owe(payments, _stake(state))),
        )
    _check_turn(state, seat, (TAKE_OR_DRAW, DISCARD, LAY, SEND))
    raise RuleViolation("BAD_DECLARATION", f"Phỏm has no declaration {body.declaration!r}", seat=seat)


def _apply_take(state: State, body: CardTaken) -> State:
    seat = body.seat
    _check_turn(state, seat, (TAKE_OR_DRAW,))
    if not state.discards or state.discards[-1].taken_by is not None:
        raise RuleViolation("ILLEGAL_MOVE", "there is no discard to take", seat=seat)
    last = state.discards[-1]
    if (last.seat, last.card) != (body.from_seat, body.card):
        raise RuleViolation("ILLEGAL_MOVE", f"only the previous discard, {last.card} of seat {last.seat}, can be taken")
    if _takeable(state, seat) is None:
        raise RuleViolation("BAD_MELD", f"{body.card} makes no Phỏm with the cards held (PH-13)", seat=seat)
    record = DiscardRecord(last.seat, last.card, last.final, taken_by=seat)
    discards = (*state.discards[:-1], record)
    pile = state.piles[last.seat]
    check(bool(pile) and pile[-1] == last.card, "the previous discard tops its discarder's pile")
    payment = phom_melds.take_payments(_as_discards(discards))[-1]
    new = state.draft()
    new.discards = discards
    new.piles = {**state.piles, last.seat: pile[:-1]}
    new.hands = {**state.hands, seat: (*state.hands[seat], body.card)}
    new.taken = {**state.taken, seat: state.taken[seat] | {body.card}}
    new.obligations = (*state.obligations, *_owe([payment], _stake(state)))
    new.acquired = True
    new.phase = LAY if len(state.piles[seat]) == PILE_FULL - 1 else DISCARD
    return base.freeze(new)


def _position(hand: tuple[Card, ...], card: Card) -> int | None:
    """Where ``card`` is in ``hand``, or None: a hand holds each card once (every deal is
    checked for duplicates), so the hand without it is the hand around that place. One
    pass that compares by identity first, where a membership test and a filter were two
    passes of dataclass comparisons."""
    try:
        return hand.index(card)
    except ValueError:
        return None


def _apply_discard(state: State, body: CardsPlayed) -> State:
    seat = body.seat
    _check_turn(state, seat, (DISCARD, SEND))
    if len(body.cards) != 1:
        raise RuleViolation("ILLEGAL_MOVE", "a Phỏm discard is one card", seat=seat)
    card = body.cards[0]
    hand = state.hands[seat]
    at = _position(hand, card)
    if at is None:
        raise RuleViolation("NOT_HOLDING", f"seat {seat} does not hold {card}", seat=seat)
    taken = state.taken[seat]
    if card in taken:
        raise RuleViolation("ILLEGAL_MOVE", f"{card} was taken and must stay in a Phỏm (PH-13)", seat=seat)
    if taken and not _discardable(hand, card, taken, state.options.one_taken_per_meld):
        raise RuleViolation("ILLEGAL_MOVE", "the taken cards could no longer all be melded (PH-13)", seat=seat)
    final = len(state.piles[seat]) == PILE_FULL - 1
    new = state.draft()
    new.hands = {**state.hands, seat: hand[:at] + hand[at + 1 :]}
    new.piles = {**state.piles, seat: (*state.piles[seat], card)}
    new.discards = (*state.discards, DiscardRecord(seat, card, final))
    _next_turn(new, seat)
    return base.freeze(new)


def _apply_lay(state: State, body: MeldsLaid) -> State:
    seat = body.seat
    _check_turn(state, seat, (LAY,))
    hand = state.hands[seat]
    held = set(hand)
    used: set[Card] = set()
    melds: list[tuple[Card, ...]] = []
    taken = state.taken[seat]
    for meld in body.melds:
        cards = tuple(sorted(meld.cards, key=card_order))
        if not is_meld(cards):
            raise RuleViolation("BAD_MELD", f"{' '.join(map(str, cards))} is not a Phỏm", seat=seat)
        for card in cards:
            if card not in held:
                raise RuleViolation("NOT_HOLDING", f"seat {seat} does not hold {card}", seat=seat)
            if card in used:
                raise RuleViolation("BAD_MELD", f"{card} is in two melds", seat=seat)
            used.add(card)
        if state.options.one_taken_per_meld and len(taken & set(cards)) > 1:
            raise RuleViolation("BAD_MELD", "at most one taken card in each Phỏm (PH-13 flag)", seat=seat)
        melds.append(cards)
    if not taken <= used:
        raise RuleViolation("BAD_MELD", "every taken card must be laid in a Phỏm (PH-13)", seat=seat)
    if len(used) >= len(hand):
        raise RuleViolation("BAD_MELD", "a card must be left to discard (all melded is Ù: declare it)", seat=seat)
    if state.version.lay_every_meld:
        left = meld_left_to_lay([c for c in hand if c not in used])
        if left is not None:
            raise RuleViolation(
                "BAD_MELD",
                f"{' '.join(map(str, left))} is a Phỏm: lay down every Phỏm before sending or keeping junk (§6.1)",
                seat=seat,
            )
    new = state.draft()
    new.hands = {**state.hands, seat: tuple(c for c in hand if c not in used)}
    new.taken = {**state.taken, seat: frozenset()}
    new.laid = {**state.laid, seat: (*state.laid[seat], *melds)}
    if seat not in state.lay_order:
        new.lay_order = (*state.lay_order, seat)
    new.phase = SEND
    return base.freeze(new)


def _apply_send(state: State, body: CardSent) -> State:
    seat = body.seat
    _check_turn(state, seat, (SEND,))
    hand = state.hands[seat]
    at = _position(hand, body.card)
    if at is None:
        raise RuleViolation("NOT_HOLDING", f"seat {seat} does not hold {body.card}", seat=seat)
    if len(hand) <= 1:
        raise RuleViolation("ILLEGAL_MOVE", "the last card is the final discard", seat=seat)
    if body.to_seat == seat or body.to_seat not in state.laid:
        raise RuleViolation("ILLEGAL_MOVE", "cards are sent to another seat's laid Phỏm", seat=seat)
    melds = state.laid[body.to_seat]
    if not 0 <= body.meld_index < len(melds):
        raise RuleViolation("BAD_MELD", f"seat {body.to_seat} has no meld {body.meld_index}", seat=seat)
    meld = melds[body.meld_index]
    if not phom_melds.can_send(body.card, meld):
        raise RuleViolation("BAD_MELD", f"{body.card} does not fit that Phỏm", seat=seat)
    extended = tuple(sorted((*meld, body.card), key=card_order))
    new_melds = (*melds[: body.meld_index], extended, *melds[body.meld_index + 1 :])
    return state.derive(
        hands={**state.hands, seat: hand[:at] + hand[at + 1 :]},
        laid={**state.laid, body.to_seat: new_melds},
    )


def _apply_timer(state: State, body: TimerExpired) -> State:
    """GEN-5: the timer plays the seat's step: Ù if it can, else draw, lay the best
    melds, or throw the highest junk card."""
    if body.timer != TURN_TIMER:
        raise RuleViolation("WRONG_TIMER", f"Phỏm has no {body.timer!r} timer")
    seat = body.seat
    _check_turn(state, seat, (TAKE_OR_DRAW, DISCARD, LAY, SEND))
    if state.phase == TAKE_OR_DRAW:
        if state.stock_left > 0:
            return state.derive(phase=DRAWING)
        previous = _takeable(state, seat)
        check(previous is not None, "a seat with an empty stock can take")
        return _apply_take(state, CardTaken(seat, previous.seat, previous.card))  # type: ignore[union-attr]
    if _u_of(state, seat) is not None:
        return _apply_declared(state, Declared(seat, U))
    if state.phase == LAY:
        return _apply_lay(state, _best_lay(state, seat))
    if state.phase == SEND:
        return _apply_discard(state, CardsPlayed(seat, (_highest(state.hands[seat]),)))
    return _apply_discard(state, CardsPlayed(seat, (_junk_discards(state, seat)[0],)))


def _forfeit(state: State, seat: int) -> State:
    """Leaving, or a disconnect under ``disconnect_forfeits`` (§6.5, PH-14, GEN-6): the
    seat owes 5 × S to each seat still in play, its cards leave play, and the rest play
    on; once one seat is left, play is over. Nothing changes once play is over."""
    _known_seat(state, seat)
    if seat in state.out or state.phase == PLAY_OVER:
        return state
    remaining = [s for s in _live(state) if s != seat]
    payments = phom_melds.disconnect_payments(seat, remaining)
    new = state.draft()
    new.out = state.out | {seat}
    new.dead = (*state.dead, *state.hands[seat], *(c for m in state.laid[seat] for c in m))
    new.hands = {**state.hands, seat: ()}
    new.taken = {**state.taken, seat: frozenset()}
    new.laid = {**state.laid, seat: ()}
    new.obligations = (*state.obligations, *_owe(payments, _stake(state)))
    if state.phase == DEALING:
        if len(remaining) <= 1:
            new.phase = PLAY_OVER
        return base.freeze(new)
    if state.to_act == seat:
        # Its turn passes on; a card it asked for (DRAWING) is never dealt.
        _next_turn(new, seat)
    elif len(remaining) <= 1 or all(len(new.piles[s]) >= PILE_FULL for s in remaining):
        new.phase = PLAY_OVER
        new.to_act = None
        _finish(new)
    return base.freeze(new)


def hand_cards(state: State) -> int:
    """Every card accounted for: held, in piles, laid (sent cards included), out of play,
    and the stock; 52 once the deal is done."""
    held = sum(len(h) for h in state.hands.values())
    piles = sum(len(p) for p in state.piles.values())
    laid = sum(len(m) for melds in state.laid.values() for m in melds)
    return held + piles + laid + len(state.dead) + state.stock_left


__all__ = [
    "DECK",
    "MOVES",
    "OPTION_DEFAULTS",
    "REASONS",
    "RULES_VERSION",
    "SPEC",
    "TIMERS",
    "DiscardRecord",
    "Options",
    "State",
    "apply",
    "candidate_actions",
    "hand_cards",
    "initial_state",
    "is_finished",
    "legal_actions",
    "next_hand_dealer",
    "pending",
    "settle",
    "visible",
    "winner",
]
