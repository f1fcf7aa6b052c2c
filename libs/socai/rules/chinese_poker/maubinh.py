"""Mậu Binh (13-card Chinese poker, "binh"), RULES.md §11 with MB-1 to MB-24, game id ``maubinh``.

A hand, as this module plays it:

1. ``HandStarted``: 2 to 4 seats (MB-21). There is no dealer role (11.1); ``dealer_seat``
   is only the reference seat of the deal and of odd chips (the kit's rotation).
2. One ``CardsDealt`` of 13 face-down cards to every seat, one card at a time
   counterclockwise from ``dealer_seat`` (DESIGN.md "Fairness" 5).
3. The arranging window (11.1, GEN-5: 90 s, option ``arrange_timeout_s``): no turn order,
   every seat arranges at once. ``pending`` names every seat still to arrange in ``to_act``
   on one timer, ``arrange`` (as Tài Xỉu's betting window). A seat sends one ``Arranged``
   (back 5 = chi đầu, middle 5 = chi giữa, front 3 = chi cuối).

   - **One arrangement per seat, final.** A second ``Arranged`` from the same seat is
     ALREADY_ACTED: the source's "Done" button ends the seat's arranging (MB-5), and a
     final first answer is what lets the comparison start as soon as everyone is done. A
     client keeps its draft on screen and sends it once.
   - A fouled arrangement (ngược chi) is rejected with ILLEGAL_MOVE: "the client's Done
     button rejects invalid arrangements" (MB-5). Option ``accept_fouled`` lets a client
     send its on-screen arrangement as it is at the deadline (MB-5's second sentence); it
     then loses as ngược chi.
   - ``TimerExpired(seat, "arrange")`` (the window ran out for that seat) and
     ``TimerExpired(COMMUNITY, "arrange")`` (the table's window closed for everybody still
     arranging) arrange those seats automatically with ``suggest_arrangement`` (MB-20). The
     automatic arrangement is derived here, never recorded as an event: it is a pure
     function of the dealt cards, so a change to the arranger needs a new RULES_VERSION.
   - Disconnect (MB-20, GEN-6): a disconnected seat that has not arranged stops holding
     the hand up. It leaves ``to_act``; it may still arrange (or reconnect and arrange)
     while the window is open; it is arranged automatically when the window closes or when
     every connected seat has arranged, whichever comes first. No extra penalty.
   - ``PlayerLeft``: the same, for good (GEN-6): the leaver is arranged automatically at
     the comparison and its hand is compared and settled like any other.
   - Special hands need no declaration: the engine finds them in the dealt cards (MB-10),
     whatever the arrangement; a ``Declared`` is UNEXPECTED_EVENT.

4. The comparison, at once when no seat is left to arrange (11.1: "when time is up, or when
   everyone has finished arranging"): special hands first, then chi by chi, pair by pair
   (``maubinh_hands.table_result``). Only ``HandEnded`` follows.

Secrecy: until the comparison another seat's ``Arranged`` is shown with its 13 cards
blanked (``HIDDEN_CARD``, encoded ``""``), so a viewer sees *that* the seat arranged, not
how (``visible``). Dealt cards are hidden by the kit's default.

Settlement (11.5, MB-17, MB-18, GEN-4), in gold = units × S: every pair's result is paid
by the pair's loser to its winner, one transfer per component with its own reason
(``REASONS``): each chi won (``chi_back``, ``chi_middle``, ``chi_front``: the winning chi's
units, MB-1 to MB-3; a drawn chi pays nothing, MB-16), the xử bắn doubling (``shoot``), the
Home Run's extra (``home_run``, MB-6, MB-7, MB-24), a special hand's multiple
(``special_hand``, 11.3, MB-8, MB-9), a fouled hand's three lost chi (``foul``, MB-5). The
result is net (11.5 step 4): the cap of GEN-4 applies to each seat's *net* loss. A seat
whose net loss exceeds its chips pays exactly its chips, and what the net losers pay is
shared by the net winners pro rata to their net wins, the odd gold one at a time to the
winners in playing order (GEN-4, HE-6, DESIGN.md "Money"): each winner hands back the rest
of its win in ``gen4_cap`` transfers and a ``Shortfall`` is recorded. Then the commission:
``fee_bps`` (default 500, MB-17 and RULES.md 0.6) of each positive net, to ``house:fees``
(reason ``fee``).

Rules versions (``HandStarted.rules_version``; 0 is version 1). Version 2 is the above.
Version 1, kept for the hands recorded under it, shared the *shortfall* pro rata instead
of the amount paid, so its odd gold was a loss to the first winners and the others kept
the fractions. S = 1, net units {0: 3, 1: 1, 2: 12, 3: -16}, seat 3 holding 12, playing
order 2, 1, 0: version 1 pays {0: 3, 1: 1, 2: 8}, version 2 {0: 2, 1: 0, 2: 10}.
``_winners_keep`` is the one place the two differ.

The kit's ``pay_obligations`` caps each payer's *gross* payments in a fixed payer order,
counting receipts only once paid; with pairwise results netted per seat (and cycles among
three or four seats) that would cap seats whose net loss they can cover. This module caps
the net instead (``_cap_net_losses``).

Public API (DESIGN.md): ``hand_value`` (one chi of 3 or 5 cards), ``special_hand``,
``is_valid_arrangement``, and ``suggest_arrangement`` (the hint button, timeouts, bots),
all from ``socai.rules.chinese_poker.maubinh_hands``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Final

from socai.cards import Card
from socai.errors import RuleViolation, check
from socai.events.model import (
    COMMUNITY,
    HIDDEN_CARD,
    Arranged,
    Body,
    CardsDealt,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    TimerExpired,
)
from socai.money import INT64_MAX, pro_rata
from socai.rules.base import (
    COUNTERCLOCKWISE,
    DealSlot,
    Facing,
    GameSpec,
    GameState,
    LegalAction,
    MoveSet,
    Pending,
    Reason,
    Settlement,
    SettlementBuilder,
    Shortfall,
    check_settlement,
    common_event,
    game_state,
    hand_ended,
    match_flows,
    parse_options,
    per_state,
    played_rules_version,
    resolve_options,
    seats_after,
    seats_in_order,
    validate_start,
)
from socai.rules.base import visible as default_visible
from socai.rules.chinese_poker import maubinh_hands
from socai.rules.chinese_poker.maubinh_hands import (
    BACK,
    FRONT,
    KIND_FOUL,
    KIND_SPECIAL,
    MIDDLE,
    Arrangement,
    HandOptions,
    PlayedHand,
    Suggestion,
    TableResult,
    baseline_arrangement,
    compared,
    hand_value,
    is_fouled,
    is_valid_arrangement,
    played_arrangement,
    special_hand,
    suggest_arrangement,
)

__all__ = [
    "MOVES",
    "OPTION_DEFAULTS",
    "REASONS",
    "RULES_VERSION",
    "SPEC",
    "TIMERS",
    "Options",
    "State",
    "apply",
    "auto_arranged",
    "candidate_actions",
    "comparison",
    "hand_value",
    "initial_state",
    "is_finished",
    "is_valid_arrangement",
    "legal_actions",
    "pending",
    "settle",
    "special_hand",
    "suggest_arrangement",
    "visible",
    "warm",
]

SPEC: Final = GameSpec(
    game_id="maubinh",
    name="Mậu Binh",
    players_min=maubinh_hands.PLAYERS_MIN,  # MB-21: 2-4
    players_max=maubinh_hands.PLAYERS_MAX,
    deck="standard",
    direction=COUNTERCLOCKWISE,  # no turn order (11.1); only the deal and odd chips use it
    default_fee_bps=500,  # MB-17 / RULES.md 0.6: the winner's 5 % commission
)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("arrange",)
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("arrange",)
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"BAD_ARRANGEMENT": "11.1, MB-5", "ALREADY_ACTED": "MB-5"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = (
    "MB-20, GEN-6: the leaver's 13 cards are arranged for it (the suggested arrangement) and compared as any other"
)

# Bump when a rule, an Options default or the automatic arranger changes (OPTION_DEFAULTS
# keeps every version's defaults). Version 2: GEN-4's cap shares the amount paid pro rata,
# not the shortfall (``_winners_keep``).
RULES_VERSION: Final = 2
CARDS_PER_SEAT: Final = maubinh_hands.CARDS_PER_HAND
ARRANGE_TIMER: Final = "arrange"
ARRANGE: Final = "arrange"  # the LegalAction kind
ARRANGE_TIMEOUT_S_MAX: Final = 600
# A limit on the stake: the largest result of one seat (four of a kind and straight flushes
# swept by a Home Run at the highest multiplier, three times) times S must fit int64 gold.
UNITS_MAX: Final = 4096

# Phases of a hand.
DEALING: Final = "dealing"
ARRANGING: Final = "arranging"
COMPARED: Final = "compared"  # the result is decided; only HandEnded is expected
ENDED: Final = "ended"

_HIDDEN_ARRANGEMENT: Final = ((HIDDEN_CARD,) * 5, (HIDDEN_CARD,) * 5, (HIDDEN_CARD,) * 3)


@dataclass(frozen=True, slots=True)
class Options:
    """Mậu Binh's [Proposed MB-n] decisions as named flags (RULES.md §11.8, §13, §14).

    - ``wheel_second_highest`` (MB-4): A-2-3-4-5 ranks just below 10-J-Q-K-A; else lowest.
    - ``home_run_multiplier`` (MB-6): each Home Run victim pays this multiple of the pair's
      base total (4: the xử bắn doubling doubled again); 2..16.
    - ``home_run_extra_units`` (MB-6's literal "+2" reading): units each victim pays on top;
      0..100 (the alternative is multiplier 2 with 2 extra units).
    - ``arrange_timeout_s`` (11.1, GEN-5): the arranging window, 90 s.
    - ``accept_fouled`` (MB-5): accept a fouled ``Arranged`` (the on-screen arrangement at
      the deadline) and settle it as ngược chi; by default the Done button rejects it.
    """

    wheel_second_highest: bool = True
    home_run_multiplier: int = 4
    home_run_extra_units: int = 0
    arrange_timeout_s: int = 90
    accept_fouled: bool = False

    def validate(self) -> None:
        """Raises RuleViolation("BAD_OPTION") for a value the rules cannot run with."""
        if not 2 <= self.home_run_multiplier <= 16:
            raise RuleViolation("BAD_OPTION", "home_run_multiplier must be 2..16", option="home_run_multiplier")
        if not 0 <= self.home_run_extra_units <= 100:
            raise RuleViolation("BAD_OPTION", "home_run_extra_units must be 0..100", option="home_run_extra_units")
        if not 1 <= self.arrange_timeout_s <= ARRANGE_TIMEOUT_S_MAX:
            raise RuleViolation(
                "BAD_OPTION", f"arrange_timeout_s must be 1..{ARRANGE_TIMEOUT_S_MAX}", option="arrange_timeout_s"
            )

    def hand_options(self) -> HandOptions:
        return HandOptions(self.wheel_second_highest, self.home_run_multiplier, self.home_run_extra_units)


_DEFAULTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "wheel_second_highest": "true",
        "home_run_multiplier": "4",
        "home_run_extra_units": "0",
        "arrange_timeout_s": "90",
        "accept_fouled": "false",
    }
)
# Version 2 changed a rule, not a default.
OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType({1: _DEFAULTS, 2: _DEFAULTS})

# Every settlement reason code Mậu Binh emits, with its rule.
REASONS: Final[Mapping[str, Reason]] = MappingProxyType(
    {
        "chi_back": Reason(False, "11.2 / 11.5 / MB-2 / MB-3: chi đầu won: 1, Tứ Quý 4, Sảnh Đồng Chất 5 × S"),
        "chi_middle": Reason(False, "11.2 / 11.5 / MB-2 / MB-3: chi giữa won: 1, Cù Lũ 2, Tứ Quý 8, Sảnh Đồng Chất 10"),
        "chi_front": Reason(False, "11.2 / 11.5 / MB-1 / MB-14: chi cuối won: 1, Sám Cô 3 × S"),
        "shoot": Reason(False, "11.5 xử bắn: all three chi won from one opponent double the pair's total"),
        "home_run": Reason(False, "11.5 / MB-6 / MB-7 / MB-24: all three others shot: 4 × the pair's base total"),
        "special_hand": Reason(False, "11.3 / MB-8 / MB-9 / MB-10: a special hand's multiple, won outright"),
        "foul": Reason(True, "MB-5: ngược chi loses all three chi to every valid hand (and is shot)"),
        "gen4_cap": Reason(False, "GEN-4: a net loss is capped at the chips; net winners share what was paid pro rata"),
        "fee": Reason(False, "MB-17 / 0.6 / GEN-1: fee_bps (5 %) commission on each positive net result"),
    }
)

_CHI_REASONS: Final = {BACK: "chi_back", MIDDLE: "chi_middle", FRONT: "chi_front"}


# --- state ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class SeatArrangement:
    """A seat's arrangement and how it came: sent by the player, or automatic (MB-20)."""

    arrangement: Arrangement
    automatic: bool

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, arrangement: Arrangement, automatic: bool) -> None:
        object.__setattr__(self, "arrangement", arrangement)
        object.__setattr__(self, "automatic", automatic)


@game_state
class State(GameState):
    """One hand of Mậu Binh. Never mutated: ``apply`` returns a new State.

    ``order`` lists the seats counterclockwise from ``dealer_seat`` (the deal, and odd
    chips after it). ``hands`` are the 13 dealt cards of each seat; ``arranged`` each
    seat's arrangement once made. ``left`` seats have left the table (GEN-6).
    ``rules_version`` is the version the hand is played and settled under.
    """

    started: HandStarted
    rules_version: int
    options: Options
    hand_options: HandOptions
    order: tuple[int, ...]
    stacks_gold: Mapping[int, int]
    hands: Mapping[int, tuple[Card, ...]]
    arranged: Mapping[int, SeatArrangement]
    disconnected: frozenset[int] = frozenset()
    left: frozenset[int] = frozenset()
    phase: str = DEALING
    deck_seed: str = ""


# --- the contract -----------------------------------------------------------------------


def initial_state(started: HandStarted) -> State:
    """The state before the deal.

    Raises RuleViolation with the kit's codes (``base.validate_start``): WRONG_GAME,
    BAD_SEAT_COUNT (2..4, MB-21), BAD_SEATS, BAD_STACK, BAD_STAKE (also a stake whose
    largest result would not fit int64 gold), BAD_FEE, BAD_DEALER, BAD_OWNER,
    UNKNOWN_RULES_VERSION, BAD_OPTION.
    """
    validate_start(SPEC, started)
    if started.stake_gold > INT64_MAX // UNITS_MAX:
        raise RuleViolation("BAD_STAKE", f"the stake must be at most {INT64_MAX // UNITS_MAX}")
    options = parse_options(Options, resolve_options(OPTION_DEFAULTS, started))
    seats = [info.seat for info in started.seats]
    order = tuple(seats_in_order(seats, started.dealer_seat, started.seats_max, COUNTERCLOCKWISE))
    return State.create(
        started=started,
        rules_version=played_rules_version(started),
        options=options,
        hand_options=options.hand_options(),
        order=order,
        stacks_gold={info.seat: info.stack_gold for info in started.seats},
        hands={},
        arranged={},
    )


def apply(state: State, body: Body) -> State:
    """The state after ``body``; ``state`` itself is never changed.

    Raises RuleViolation with a stable code, the state then unchanged: HAND_FINISHED after
    HandEnded; for CardsDealt WRONG_DEAL, BAD_CARD, DUPLICATE_CARD; for Arranged
    NOT_YOUR_TURN (no window open), UNKNOWN_SEAT, SEAT_LEFT, ALREADY_ACTED,
    BAD_ARRANGEMENT (not 5 + 5 + 3 distinct cards), NOT_HOLDING, ILLEGAL_MOVE (fouled,
    MB-5); for TimerExpired WRONG_TIMER, UNKNOWN_SEAT, ALREADY_ACTED; UNKNOWN_SEAT and
    SEAT_LEFT for a disconnect or leave; HAND_NOT_OVER for HandEnded before the
    comparison; UNEXPECTED_EVENT for a body Mậu Binh never has.
    """
    if state.phase == ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    if isinstance(body, CardsDealt):
        return _close_if_done(_apply_deal(state, body))
    if isinstance(body, Arranged):
        return _close_if_done(_apply_arranged(state, body))
    if isinstance(body, TimerExpired):
        return _close_if_done(_apply_timer(state, body))
    # Disconnect, reconnect, leave, HandEnded and bodies Mậu Binh never has.
    new = common_event(
        state,
        body,
        game_name=SPEC.name,
        seats=state.stacks_gold,
        over=state.phase == COMPARED,
        leave=_apply_left,
        end=hand_ended,
    )
    return _close_if_done(new) if isinstance(body, PlayerDisconnected | PlayerLeft) else new


def pending(state: State) -> Pending:
    """The deal; then every seat still to arrange (connected, not left), on the one
    ``arrange`` timer; then finished (HandEnded comes next)."""
    if state.phase == DEALING:
        return Pending(deal=_deal_slots(state))
    if state.phase == ARRANGING:
        to_act = _waiting(state)
        check(len(to_act) > 0, "an open arranging window waits for someone")
        return Pending(to_act=to_act, timer=ARRANGE_TIMER, timeout_s=state.options.arrange_timeout_s)
    return Pending(finished=True)


def legal_actions(state: State, seat: int) -> tuple[LegalAction, ...]:
    """``arrange`` while the seat may still arrange (window open, not arranged, not left)."""
    return (LegalAction(ARRANGE),) if _may_arrange(state, seat) else ()


def candidate_actions(state: State, seat: int) -> list[Body]:
    """A few valid arrangements for bots and the hint button: ``suggest_arrangement``'s
    first, then the simplest one (``baseline_arrangement``: the best five in back, the best
    five left in the middle) and the cards in plain rank order, each when valid and
    different. Empty when the seat may not arrange."""
    return list(_candidates(state, seat))


@per_state
def _candidates(state: State, seat: int) -> tuple[Body, ...]:
    """``candidate_actions``, kept per state (``base.per_state``): the table asks for
    every view of a seat to arrange, the bot and the timer again."""
    if not _may_arrange(state, seat):
        return ()
    cards = state.hands[seat]
    wheel = state.options.wheel_second_highest
    suggestion = _suggested(_key(cards), wheel)
    found = [suggestion.arrangement, baseline_arrangement(cards, wheel)]
    ranked = sorted(cards, key=lambda c: (-c.rank, c.suit))
    found.append(Arrangement(tuple(ranked[10:]), tuple(ranked[5:10]), tuple(ranked[:5])))
    out: list[Body] = []
    seen: set[tuple[frozenset[Card], frozenset[Card]]] = set()
    for a in found:
        shape = (frozenset(a.back), frozenset(a.middle))
        if shape in seen or not is_valid_arrangement(a.front, a.middle, a.back, wheel):
            continue
        seen.add(shape)
        out.append(Arranged(seat, a.back, a.middle, a.front))
    return tuple(out)


def held(state: State, seat: int) -> tuple[Card, ...]:
    """The 13 cards dealt to ``seat`` (an arrangement only orders them)."""
    return state.hands.get(seat, ())


def facing(state: State, seat: int) -> Facing:
    """``arrange`` while the window is open and ``seat`` has still to arrange."""
    if _may_arrange(state, seat):
        return Facing("arrange", text="arrange your 13 cards: back 5, middle 5, front 3 (11.1)")
    return Facing()


def legal_moves(state: State, seat: int) -> tuple[MoveSet, ...]:
    """One arrangement, described: any split of the seat's 13 cards into back (5),
    middle (5) and front (3) with back ≥ middle ≥ front (MB-5; with ``accept_fouled`` a
    fouled one too), sent once. The examples are ``candidate_actions``: the suggestion
    first."""
    if not _may_arrange(state, seat):
        return ()
    if state.options.accept_fouled:
        text = "arrange your 13 cards as back (5), middle (5) and front (3); a fouled one is accepted and loses (MB-5)"
    else:
        text = "arrange your 13 cards as back (5), middle (5) and front (3) with back >= middle >= front (MB-5)"
    return (MoveSet(ARRANGE, text + "; one arrangement only", tuple(candidate_actions(state, seat)), complete=False),)


def is_finished(state: State) -> bool:
    """True once HandEnded has been applied (settle may run)."""
    return state.phase == ENDED


def settle(state: State) -> Settlement:
    """The hand's transfers (11.5, MB-17, GEN-4): see the module docstring.

    Raises RuleViolation("HAND_NOT_OVER") before HandEnded.
    """
    if state.phase != ENDED:
        raise RuleViolation("HAND_NOT_OVER", "settle needs a finished hand")
    started = state.started
    stake = started.stake_gold
    builder = SettlementBuilder(
        SPEC.game_id, started.table_id, started.hand_id, {info.seat: info.player_id for info in started.seats}
    )
    seats, _, result = _compare(state)
    for pair in result.pairs:
        a, b = seats[pair.seat_a], seats[pair.seat_b]
        for units, reason in _components(pair):
            if units > 0:
                builder.pay_seat(b, a, units * stake, reason)
            elif units < 0:
                builder.pay_seat(a, b, -units * stake, reason)
    order = seats_after(state.order, started.dealer_seat, started.seats_max, COUNTERCLOCKWISE)
    _cap_net_losses(builder, state.stacks_gold, order, state.rules_version)
    builder.charge_fees(started.fee_bps, order)
    return check_settlement(builder.build(), state.stacks_gold)


# --- hooks --------------------------------------------------------------------------------


def visible(body: Body, viewer_seat: int, state: object) -> Body | None:
    """``body`` as ``viewer_seat`` may see it while the hand is in play: another seat's
    ``Arranged`` has its cards blanked until the comparison (issue 13: arrangements are
    secret), so the viewer sees that the seat arranged but not how; everything else as
    the kit's default (other seats' dealt cards hidden)."""
    if type(body) is Arranged and body.seat != viewer_seat:
        compared = isinstance(state, State) and state.phase in (COMPARED, ENDED)
        if not compared:
            back, middle, front = _HIDDEN_ARRANGEMENT
            return Arranged(body.seat, back, middle, front)
        return body
    return default_visible(body, viewer_seat, state)


def warm() -> None:
    """Build the arranger's tables now (``maubinh_hands.warm``), not on the first hand."""
    maubinh_hands.warm()


# --- queries (UI, tests, the auditor) -------------------------------------------------------


def comparison(state: State) -> tuple[tuple[int, ...], tuple[PlayedHand, ...], TableResult]:
    """The seats in order, their played hands and the table result in units (before the
    stake, the cap and the fee). Raises RuleViolation("HAND_NOT_OVER") before the
    comparison."""
    if state.phase not in (COMPARED, ENDED):
        raise RuleViolation("HAND_NOT_OVER", "the hands are compared when arranging is over")
    return _compare(state)


def auto_arranged(state: State) -> frozenset[int]:
    """The seats arranged automatically (timeout, disconnect or leaving; MB-20)."""
    return frozenset(seat for seat, a in state.arranged.items() if a.automatic)


# --- internals --------------------------------------------------------------------------------


def _key(cards: Sequence[Card]) -> tuple[Card, ...]:
    return tuple(sorted(cards, key=lambda c: (c.rank, c.suit)))


@lru_cache(maxsize=256)
def _suggested(cards: tuple[Card, ...], wheel_second_highest: bool) -> Suggestion:
    """``suggest_arrangement`` of a seat's cards (about 0.5 ms of CPU), remembered for the hands in
    play: the table asks ``candidate_actions`` for every view of a seat to arrange, and the
    seat's timeout and the hand's settlement ask again. Pure, so safe; small, so a replay of
    many hands (settlement, the audit, benchmarks) measures the arranger, not the cache."""
    return suggest_arrangement(cards, HandOptions(wheel_second_highest=wheel_second_highest))


def _compare(state: State) -> tuple[tuple[int, ...], tuple[PlayedHand, ...], TableResult]:
    seats = tuple(sorted(state.arranged))
    options = state.hand_options
    hands = tuple(played_arrangement(state.arranged[s].arrangement, options) for s in seats)
    return seats, hands, compared(hands, options)


def _components(pair: maubinh_hands.PairResult) -> list[tuple[int, str]]:
    """A pair's result split by reason, in units, from seat a's view (positive: b pays)."""
    if pair.kind == KIND_SPECIAL:
        return [(pair.special_units, "special_hand")]
    if pair.kind == KIND_FOUL:
        chi = [(pair.base_units, "foul")]
    else:
        chi = [(units, _CHI_REASONS[pos]) for units, pos in zip(pair.chi_units, (BACK, MIDDLE, FRONT), strict=True)]
    return [*chi, (pair.shoot_units, "shoot"), (pair.home_run_units, "home_run")]


def _cap_net_losses(
    builder: SettlementBuilder, stacks_gold: Mapping[int, int], order: Sequence[int], rules_version: int
) -> None:
    """GEN-4 on net settlement (11.5 step 4): a seat whose net loss exceeds its chips pays
    exactly its chips; each net winner keeps its share of what was paid
    (``_winners_keep``) and gives back the rest of its win as ``gen4_cap`` transfers to the
    short seats, and a ``Shortfall`` per short seat records what it owed and paid."""
    nets = {seat: builder.net_of(seat) for seat in order}
    short = [(seat, -nets[seat] - stacks_gold[seat]) for seat in order if -nets[seat] > stacks_gold[seat]]
    if not short:
        return
    deficit = sum(amount for _, amount in short)
    winners = [(seat, nets[seat]) for seat in order if nets[seat] > 0]
    check(sum(gain for _, gain in winners) >= deficit, "the net winners cannot bear the shortfall")
    kept = _winners_keep(winners, deficit, rules_version)
    flows = match_flows(
        [(builder.account(seat), gain - kept[seat]) for seat, gain in winners],
        [(builder.account(seat), amount) for seat, amount in short],
    )
    builder.pay_flows(flows, "gen4_cap")
    for seat, _ in short:
        builder.shortfalls.append(Shortfall(seat, -nets[seat], stacks_gold[seat], "gen4_cap"))


# The first rules version whose GEN-4 cap shares the amount paid (``_winners_keep``).
SHARES_WHAT_WAS_PAID_FROM: Final = 2


def _winners_keep(winners: Sequence[tuple[int, int]], deficit: int, rules_version: int) -> dict[int, int]:
    """What each net winner keeps of its net win when the losers pay ``deficit`` less than
    the winners won (``winners``: seat and net win, in playing order).

    GEN-4: "the capped amount is shared pro rata to what each was owed": the amount paid
    is split with ``money.pro_rata``, whose odd gold goes one unit at a time to the first
    winners in playing order (HE-6). Version 1 split the *deficit* that way instead, which
    rounds the other way: the first winners bore the odd gold of the deficit, and every
    other winner kept the fraction of a gold its exact share lacked.
    """
    if rules_version < SHARES_WHAT_WAS_PAID_FROM:
        given_back = pro_rata(deficit, winners)
        return {seat: gain - given_back[seat] for seat, gain in winners}
    return pro_rata(sum(gain for _, gain in winners) - deficit, winners)


def _deal_slots(state: State) -> tuple[DealSlot, ...]:
    return tuple(DealSlot(seat, False) for _ in range(CARDS_PER_SEAT) for seat in state.order)


def _apply_deal(state: State, body: CardsDealt) -> State:
    if state.phase != DEALING:
        raise RuleViolation("WRONG_DEAL", "no cards are due now")
    # ``_deal_slots`` compared seat by seat without building its DealSlots (every replay checks a deal).
    if [d.seat for d in body.cards] != list(state.order) * CARDS_PER_SEAT or any(d.face_up for d in body.cards):
        raise RuleViolation("WRONG_DEAL", f"13 face-down cards to each of {state.order}, one at a time")
    seen: set[Card] = set()
    hands: dict[int, list[Card]] = {seat: [] for seat in state.order}
    for d in body.cards:
        card = d.card
        if type(card) is not Card:
            raise RuleViolation("BAD_CARD", f"{card!r} is not a card of the deck")
        if card in seen:
            raise RuleViolation("DUPLICATE_CARD", f"{card} was dealt twice")
        seen.add(card)
        hands[d.seat].append(card)
    return state.derive(hands={seat: tuple(cards) for seat, cards in hands.items()}, phase=ARRANGING)


def _may_arrange(state: State, seat: int) -> bool:
    return (
        state.phase == ARRANGING and seat in state.stacks_gold and seat not in state.arranged and seat not in state.left
    )


def _waiting(state: State) -> tuple[int, ...]:
    """The seats the window waits for: not arranged, connected, not left, in deal order."""
    away = state.disconnected | state.left
    return tuple(s for s in state.order if s not in state.arranged and s not in away)


def _with(state: State, seat: int, arrangement: Arrangement, automatic: bool) -> State:
    arranged = dict(state.arranged)
    arranged[seat] = SeatArrangement(arrangement, automatic)
    return state.derive(arranged=arranged)


def _automatic(state: State, seat: int) -> State:
    """The seat arranged by ``suggest_arrangement`` (MB-20)."""
    suggestion = _suggested(_key(state.hands[seat]), state.options.wheel_second_highest)
    return _with(state, seat, suggestion.arrangement, automatic=True)


def _known_seat(state: State, seat: object) -> int:
    if type(seat) is not int or seat not in state.stacks_gold:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat!r} is not in this hand", seat=seat)
    return seat


def _apply_arranged(state: State, body: Arranged) -> State:
    if state.phase != ARRANGING:
        raise RuleViolation("NOT_YOUR_TURN", "no arranging window is open")
    seat = _known_seat(state, body.seat)
    if seat in state.left:
        raise RuleViolation("SEAT_LEFT", f"seat {seat} has left the hand")
    if seat in state.arranged:
        raise RuleViolation("ALREADY_ACTED", f"seat {seat} has already arranged (one arrangement per seat)")
    back, middle, front = tuple(body.back), tuple(body.middle), tuple(body.front)
    chi = (*back, *middle, *front)
    if (
        len(back) != 5
        or len(middle) != 5
        or len(front) != 3
        or not all(type(c) is Card for c in chi)
        or len(set(chi)) != CARDS_PER_SEAT
    ):
        raise RuleViolation("BAD_ARRANGEMENT", "an arrangement is back 5, middle 5 and front 3 distinct cards")
    if set(chi) != set(state.hands[seat]):
        raise RuleViolation("NOT_HOLDING", f"seat {seat} must arrange exactly the 13 cards it was dealt")
    arrangement = Arrangement(front, middle, back)
    if not state.options.accept_fouled and is_fouled(arrangement, state.options.wheel_second_highest):
        raise RuleViolation("ILLEGAL_MOVE", "ngược chi: the back must be >= the middle >= the front (MB-5)")
    return _with(state, seat, arrangement, automatic=False)


def _apply_timer(state: State, body: TimerExpired) -> State:
    if body.timer != ARRANGE_TIMER or state.phase != ARRANGING:
        raise RuleViolation(
            "WRONG_TIMER", f"Mậu Binh runs only the arrange timer, while arranging (not {body.timer!r})"
        )
    if body.seat == COMMUNITY:
        # The window closed for everybody: every seat still to arrange, connected or not.
        new = state
        for seat in state.order:
            if seat not in new.arranged:
                new = _automatic(new, seat)
        return new
    seat = _known_seat(state, body.seat)
    if seat in state.arranged:
        raise RuleViolation("ALREADY_ACTED", f"seat {seat} has already arranged")
    return _automatic(state, seat)


def _apply_left(state: State, seat: int) -> State:
    if seat in state.left:
        raise RuleViolation("SEAT_LEFT", f"seat {seat} has already left")
    return state.derive(left=state.left | {seat})


def _close_if_done(state: State) -> State:
    """Compare once nobody is left to wait for: every seat not yet arranged (disconnected
    or left) is then arranged automatically (MB-20)."""
    if state.phase != ARRANGING or _waiting(state):
        return state
    new = state
    for seat in state.order:
        if seat not in new.arranged:
            new = _automatic(new, seat)
    return new.derive(phase=COMPARED)
