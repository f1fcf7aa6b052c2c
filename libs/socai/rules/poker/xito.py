"""Xì Tố ("Poker Hồng Kông"): five-card stud with a 28-card deck (RULES.md §3).

A hand, as this module plays it:

1. Card 1 face up, card 2 face down (the hole card, lá tẩy; XT-3), one card at a time to
   every seat counterclockwise from ``HandStarted.dealer_seat`` (the seat dealt first: the
   table owner in the first hand, then the previous winner; see ``first_seat_next_hand``).
2. Betting round 1: a forced bet of ``round1_bet_bps`` of S (5 %). With ``auto_follow_2``
   the engine posts it for everyone at once; otherwise each seat, starting with the highest
   face-up card, confirms it with a ``BetAction(CALL, amount)`` within the turn timer, and
   declining or letting the timer run out is a fold (XT-13).
3. Cards 3, 4 and 5 face up (card 5 face down under ``hidden_5th``), each dealt first to
   the seat ranked first after the previous card, then counterclockwise (XT-4, XT-18); the
   same ranking picks who opens betting rounds 2, 3 and 4 (round 4 uses the ranking after
   card 4 when card 5 is hidden). Folded seats get no more cards; all-in seats still do.
4. Round 2 bets and raises are exactly ``round2_bet_bps`` of S (10 %); rounds 3 and 4
   take free amounts of 1 gold up to ``round3_4_max_bet_stakes`` × S each, or up to all
   chips under ``tay_max`` (XT-8). Raises are unlimited (XT-11). A round ends when every
   seat that is neither folded nor all-in has acted and matched the highest contribution.
5. Showdown after round 4: the best five cards by ``hand_value`` take each pot they are
   eligible for (main pot and side pots, ``socai.rules.pots``); a single player left wins
   everything they matched without a showdown.

Money: the S fractions are integer gold rounded down, ``stake_gold * bps // 10000`` (5 %
of a 30-gold stake is 1 gold). A fraction that rounds to 0 means there is nothing to post:
a zero forced bet skips round 1, and a zero round-2 size leaves round 2 to checks and
folds. The house fee is ``HandStarted.fee_bps`` (0 to 1000) on each seat's net win (GEN-1,
XT-17: default 0).

The betting rounds are the kit's (``socai.rules.betting``): turn order, what is owed, the
sizes of ``_sizing`` (XT-8), raises reopening the round, timeouts; disconnect, leave and
HandEnded go through ``base.common_event``.

Voluntary all-in (XT-10): any bet or raise that would leave the seat with no chips is a
voluntary all-in, allowed only under ``tay_max`` in rounds 3 and 4. Calling with a short
stack, which puts in everything, is always allowed (as ``CALL`` or ``ALL_IN``).

Timers and leaving (XT-14, GEN-5, GEN-6): ``TimerExpired`` for the seat to act checks
when checking is free and folds otherwise (in round 1 it always folds, XT-13); a
disconnected seat is treated the same way when its timer runs out. ``PlayerLeft`` folds the
seat at once, in or out of turn; chips already in the pot are forfeited.

Ties: with distinct cards two showdown hands can never be equal under ``hand_value``
(the deciding card of XT-1 is a different physical card in each hand), so there is never a
split pot. ``_best_seat`` checks this invariant always; if it were ever broken the hand
would stop with an AssertionError (a bug), never split silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from socai.cards import CLUBS, DIAMONDS, HEARTS, SPADES, Card
from socai.cards import deck as canonical_deck
from socai.errors import RuleViolation, check
from socai.events.model import (
    ActionKind,
    BetAction,
    Body,
    CardsDealt,
    DealtCard,
    HandStarted,
    TimerExpired,
)
from socai.money import BPS_DENOMINATOR
from socai.rules import betting, pots, ranking
from socai.rules.base import (
    COUNTERCLOCKWISE,
    POT_REASONS,
    DealSlot,
    Facing,
    GameSpec,
    GameState,
    LegalAction,
    Pending,
    Reason,
    Settlement,
    SettlementBuilder,
    bet_facing,
    check_settlement,
    common_event,
    freeze,
    game_state,
    hand_ended,
    parse_options,
    resolve_options,
    seat_or_owner,
    seats_after,
    seats_in_order,
    validate_start,
)

SPEC: Final = GameSpec("xito", "Xì Tố", 2, 5, "xito", direction=COUNTERCLOCKWISE, default_fee_bps=0)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("check", "call", "bet", "raise", "fold", "all_in")
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("turn",)
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"ALL_IN_NOT_ALLOWED": "XT-10", "BET_TOO_LARGE": "XT-8", "RAISE_TOO_LARGE": "XT-8"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "XT-14, GEN-6: leaving is a fold; the chips already in the pot are forfeited"

# Xì Tố's own suit strength, ♥ > ♦ > ♣ > ♠ (RULES.md 0.5 and XT-1). Never share it with
# another game: Liêng and Ba Cây put ♦ first.
SUIT_STRENGTH: Final[Mapping[int, int]] = {HEARTS: 3, DIAMONDS: 2, CLUBS: 1, SPADES: 0}

DECK: Final[frozenset[Card]] = frozenset(canonical_deck("xito"))
# The deck's cards by index, rank * 4 + suit: an int hashes in C, a Card in Python.
_DECK_INDICES: Final[frozenset[int]] = frozenset(c.rank * 4 + c.suit for c in DECK)
CARDS_PER_SEAT: Final = 5
# A Xì Tố table seats at most this many (RULES.md 3.1 plays 2 to 5; a table may keep
# empty seats).
SEATS_MAX: Final = 9
# Bump when a rule or an Options default changes (OPTION_DEFAULTS keeps every version's).
RULES_VERSION: Final = 1
TURN_TIMER: Final = betting.TURN_TIMER

DEAL_ORDER_COMBO: Final = "combo"
DEAL_ORDER_EXPOSED: Final = "exposed"

# Phases of a hand.
DEALING: Final = betting.DEALING  # the table must deal pending(state).deal
BETTING: Final = betting.BETTING  # waiting for ``to_act``
PLAY_OVER: Final = betting.PLAY_OVER  # the result is decided; only HandEnded is expected
ENDED: Final = betting.ENDED  # HandEnded applied; settle() may run


@dataclass(frozen=True, slots=True)
class Options:
    """Xì Tố's table rules and [Proposed XT-n] decisions, defaults as in RULES.md §3.

    - ``auto_follow_2``: "Tự động theo 2 lá", the engine posts the round-1 bet (XT-13).
    - ``hidden_5th``: "Tẩy lá bài thứ 5", card 5 is dealt face down.
    - ``tay_max``: "Tẩy Max", from card 4 on a seat may bet all its chips (XT-8, XT-10).
    - ``straight_flush_lower_wins``: the LOWER straight flush wins (XT-2).
    - ``deal_order``: ``combo`` ranks seats by the best 2-card combination of the newest
      face-up card with each earlier face-up card (XT-4, XT-18); ``exposed`` by the best
      exposed hand (conventional stud, the alternative XT-4 names).
    - ``round3_4_max_bet_stakes``: cap on each bet or raise in rounds 3-4, in multiples of
      S (XT-8); ignored under ``tay_max``.
    - ``round1_bet_bps``: the forced round-1 bet, basis points of S (5 %).
    - ``round2_bet_bps``: the fixed round-2 bet and raise size, basis points of S (XT-8).
    - ``turn_timeout_s``: the action timer (GEN-5: configurable, not in the source).
    """

    auto_follow_2: bool = False
    hidden_5th: bool = False
    tay_max: bool = False
    straight_flush_lower_wins: bool = True
    deal_order: str = DEAL_ORDER_COMBO
    round3_4_max_bet_stakes: int = 1
    round1_bet_bps: int = 500
    round2_bet_bps: int = 1000
    turn_timeout_s: int = 15

    def validate(self) -> None:
        """Raises RuleViolation("BAD_OPTION") for a value the rules cannot run with."""
        if self.deal_order not in (DEAL_ORDER_COMBO, DEAL_ORDER_EXPOSED):
            raise RuleViolation("BAD_OPTION", f"deal_order {self.deal_order!r}", option="deal_order")
        if self.round3_4_max_bet_stakes < 1:
            raise RuleViolation("BAD_OPTION", "round3_4_max_bet_stakes must be >= 1")
        for name in ("round1_bet_bps", "round2_bet_bps"):
            if not 0 <= getattr(self, name) <= BPS_DENOMINATOR:
                raise RuleViolation("BAD_OPTION", f"{name} must be 0..10000", option=name)
        if self.turn_timeout_s < 1:
            raise RuleViolation("BAD_OPTION", "turn_timeout_s must be >= 1", option="turn_timeout_s")


@game_state
class State(GameState):
    """One hand of Xì Tố. Never mutated: ``apply`` returns a new State.

    ``order`` lists the dealt seats counterclockwise from the first-dealt seat.
    ``put_in_gold`` is each seat's total in the pot this hand, ``round_put_in_gold`` its
    part in the current betting round. ``acted`` are the seats that acted since the last
    raise of this round.
    """

    started: HandStarted
    options: Options
    order: tuple[int, ...]
    stacks_gold: Mapping[int, int]
    hands: Mapping[int, tuple[DealtCard, ...]]
    put_in_gold: Mapping[int, int]
    round_put_in_gold: Mapping[int, int]
    folded: frozenset[int] = frozenset()
    acted: frozenset[int] = frozenset()
    disconnected: frozenset[int] = frozenset()
    phase: str = DEALING
    betting_round: int = 0
    round_order: tuple[int, ...] = ()
    to_act: int | None = None
    deck_seed: str = ""


OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType(
    {
        1: MappingProxyType(
            {
                "auto_follow_2": "false",
                "hidden_5th": "false",
                "tay_max": "false",
                "straight_flush_lower_wins": "true",
                "deal_order": "combo",
                "round3_4_max_bet_stakes": "1",
                "round1_bet_bps": "500",
                "round2_bet_bps": "1000",
                "turn_timeout_s": "15",
            }
        ),
    }
)

# Every settlement reason code Xì Tố emits (RULES.md 3.4: no bonuses, no penalties; a
# leaver's chips stay in the pot, XT-14).
REASONS: Final[Mapping[str, Reason]] = POT_REASONS


# --- hand values -------------------------------------------------------------------------


@dataclass(frozen=True, order=True, slots=True, init=False)
class HandValue:
    """A 5-card Xì Tố hand, totally ordered by ``key`` (category, ranks, deciding suit).

    ``category`` is a ``socai.rules.ranking.CATEGORY_NAMES`` id. Two values are equal only
    when the categories, all five ranks and the deciding card's suit are equal, which two
    hands dealt from one deck never are.
    """

    key: tuple[int, ...]
    category: str = field(compare=False)
    cards: tuple[Card, ...] = field(compare=False)

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, key: tuple[int, ...], category: str, cards: tuple[Card, ...]) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "category", category)
        object.__setattr__(self, "cards", cards)


def hand_value(cards: Sequence[Card], straight_flush_lower_wins: bool = True) -> HandValue:
    """The Xì Tố value of five cards of the 28-card deck (RULES.md 3.2).

    Categories as in poker with full house above flush (XT-15); A is high only and the only
    straights are 8-Q, 9-K and 10-A (XT-5); ranks and kickers compare as D1 (XT-6, XT-12);
    a straight flush ranks LOWER-is-better when ``straight_flush_lower_wins`` (XT-2). Only
    when all five ranks are equal, the suit (♥ > ♦ > ♣ > ♠) of the deciding card decides
    (XT-1, XT-19): the best-suited card of the highest group for hands with a group (pair,
    two pair, trips, full house, quads), else the highest card.

    Raises RuleViolation("BAD_HAND") unless given five distinct cards ranked 8 to A.
    """
    hand = tuple(cards)
    if len(hand) != CARDS_PER_SEAT or len(set(hand)) != CARDS_PER_SEAT or not set(hand) <= DECK:
        raise RuleViolation("BAD_HAND", "a Xì Tố hand is five distinct cards from 8 to A")
    return _value(hand, straight_flush_lower_wins)


def _value(hand: tuple[Card, ...], straight_flush_lower_wins: bool) -> HandValue:
    """``hand_value`` of five distinct cards of DECK, without checking that they are."""
    category, ranks_key = ranking.rank_cards(hand, ranking.WHEEL_NONE)
    # The rank of the largest group, the higher rank between groups of one size: the
    # largest (count, rank) pair. Every showdown of a replayed hand comes here.
    ranks = [c.rank for c in hand]
    top_rank = max(zip(map(ranks.count, ranks), ranks, strict=True))[1]
    deciding_suit = max([SUIT_STRENGTH[c.suit] for c in hand if c.rank == top_rank])
    if category == ranking.STRAIGHT_FLUSH and straight_flush_lower_wins:
        ranks_key = tuple(-r for r in ranks_key)
    return HandValue((category, *ranks_key, deciding_suit), ranking.CATEGORY_NAMES[category], hand)


def _combo_key(newest: Card, earlier: Card) -> tuple[int, int, int, int]:
    """XT-4/XT-18: a pair beats no pair; then the higher rank; then the other card's rank;
    then the suit of the (best-suited) highest-ranked card."""
    # Written out case by case: dealing and opening rank every live seat after each card.
    newest_rank = newest.rank
    earlier_rank = earlier.rank
    if newest_rank == earlier_rank:
        return (1, newest_rank, newest_rank, max(SUIT_STRENGTH[newest.suit], SUIT_STRENGTH[earlier.suit]))
    if newest_rank > earlier_rank:
        return (0, newest_rank, earlier_rank, SUIT_STRENGTH[newest.suit])
    return (0, earlier_rank, newest_rank, SUIT_STRENGTH[earlier.suit])


def _exposed_key(face_up: Sequence[Card]) -> tuple[int, ...]:
    """The conventional stud order of up to four exposed cards: quads, trips, two pair,
    pair, high card; then ranks by group; then the suit of the highest group's best card."""
    counts: dict[int, int] = {}
    for c in face_up:  # a plain dict, as ``ranking.rank_cards`` counts
        counts[c.rank] = counts.get(c.rank, 0) + 1
    groups = sorted([(n, r) for r, n in counts.items()], reverse=True)  # by count, then rank
    shape = tuple([n for n, _ in groups])
    if shape[0] == 4:
        category = ranking.FOUR_OF_A_KIND
    elif shape[0] == 3:
        category = ranking.THREE_OF_A_KIND
    elif shape[:2] == (2, 2):
        category = ranking.TWO_PAIR
    elif shape[0] == 2:
        category = ranking.PAIR
    else:
        category = ranking.HIGH_CARD
    top_rank = groups[0][1]
    suit = max(SUIT_STRENGTH[c.suit] for c in face_up if c.rank == top_rank)
    return (category, *(r for _, r in groups), suit)


def show_key(cards: Sequence[DealtCard], cards_count: int, deal_order: str) -> tuple[int, ...]:
    """A seat's rank for dealing and opening after its first ``cards_count`` cards.

    After card 2 it is the single face-up card (rank, then suit). After card k = 3, 4, 5 it
    is the best combination of card k with each earlier face-up card (``combo``, XT-4) or
    the best exposed hand (``exposed``). Keys of different seats are never equal.
    """
    first = cards[:cards_count]
    face_up = [d.card for d in first if d.face_up]
    check(len(face_up) > 0, "a seat ranked for dealing has a face-up card")
    if cards_count <= 2:
        card = face_up[0]
        return (card.rank, SUIT_STRENGTH[card.suit])
    if deal_order == DEAL_ORDER_EXPOSED:
        return _exposed_key(face_up)
    newest = first[cards_count - 1]
    check(newest.face_up, "the newest card of a combination is face up")
    newest_card = newest.card
    return max([_combo_key(newest_card, d.card) for d in first[: cards_count - 1] if d.face_up])


# --- reading the state ------------------------------------------------------------------


def _cards_each(state: State) -> int:
    hands = state.hands
    folded = state.folded
    return max([len(hands[s]) for s in state.order if s not in folded])


def _forced_bet_gold(state: State) -> int:
    """Round 1: ``round1_bet_bps`` of S, rounded down (5 % of S)."""
    return state.started.stake_gold * state.options.round1_bet_bps // BPS_DENOMINATOR


def _round2_size_gold(state: State) -> int:
    """Round 2: every bet and raise is exactly ``round2_bet_bps`` of S, rounded down (10 %)."""
    return state.started.stake_gold * state.options.round2_bet_bps // BPS_DENOMINATOR


def _round3_4_cap_gold(state: State) -> int:
    """Rounds 3-4 without Tẩy Max: each bet or raise at most ``round3_4_max_bet_stakes`` × S."""
    return state.started.stake_gold * state.options.round3_4_max_bet_stakes


def _to_call(state: State, seat: int) -> int:
    return betting.to_call(state.round_put_in_gold, seat)


def _leader(state: State, cards_count: int, live: list[int]) -> int:
    """The seat of ``live`` (``betting.live(state)``) ranked first after ``cards_count`` cards
    (XT-4, XT-18)."""
    hands = state.hands
    deal_order = state.options.deal_order
    keys = [show_key(hands[s], cards_count, deal_order) for s in live]
    best = max(keys)
    check(keys.count(best) == 1, "dealing ranks never tie")
    return live[keys.index(best)]


def _from(live: list[int], start: int) -> list[int]:
    """``live`` (``betting.live(state)``) counterclockwise from ``start``, one of them.

    ``live`` keeps the counterclockwise order of ``state.order``, so this is a rotation:
    the same list as ``seats_in_order(live, start, seats_max, COUNTERCLOCKWISE)``.
    """
    i = live.index(start)
    return live[i:] + live[:i]


def _may_go_all_in(state: State) -> bool:
    """XT-10: a voluntary all-in only under Tẩy Max, from card 4 on (rounds 3 and 4)."""
    return state.options.tay_max and state.betting_round >= 3


def _sizing(state: State) -> betting.Sizing | None:
    """The bets of the current round (XT-8): round 2 exactly ``round2_bet_bps`` of S
    (none when that rounds to 0); rounds 3-4 free amounts of 1 up to
    ``round3_4_max_bet_stakes`` × S, or any amount up to all chips under Tẩy Max (XT-10).
    Round 1 is the forced bet: no bets or raises."""
    if state.betting_round == 1:
        return None
    if state.betting_round == 2:
        size = _round2_size_gold(state)
        return betting.Sizing(size, size) if size else None
    if _may_go_all_in(state):
        return betting.Sizing(1, None, all_in=True)
    return betting.Sizing(1, _round3_4_cap_gold(state))


def _waiting(state: State) -> list[int]:
    """Seats that still owe a decision this round, in betting order."""
    stacks = state.stacks_gold
    put_in = state.put_in_gold
    # In round 1 a seat owes only the forced bet: matching a raise never comes up.
    return betting.waiting(
        state.round_order,
        state.round_put_in_gold,
        state.acted,
        state.folded,
        {s: stacks[s] - put_in[s] for s in state.round_order},
        answers_raises=state.betting_round != 1,
    )


# --- the contract -----------------------------------------------------------------------


def initial_state(started: HandStarted) -> State:
    """The state before any card is dealt.

    Raises RuleViolation with the kit's codes (``base.validate_start``): WRONG_GAME,
    BAD_SEAT_COUNT (2..5), BAD_SEATS, BAD_STACK, BAD_STAKE, BAD_FEE, BAD_DEALER (the seat
    dealt first is a seat of the table), BAD_OWNER, UNKNOWN_RULES_VERSION, BAD_OPTION.
    """
    validate_start(SPEC, started, dealer_seated=False, seats_max_max=SEATS_MAX)
    seats = [info.seat for info in started.seats]
    options = parse_options(Options, resolve_options(OPTION_DEFAULTS, started))
    order = tuple(seats_in_order(seats, started.dealer_seat, started.seats_max, COUNTERCLOCKWISE))
    return State.create(
        started=started,
        options=options,
        order=order,
        stacks_gold={info.seat: info.stack_gold for info in started.seats},
        hands={s: () for s in order},
        put_in_gold={s: 0 for s in order},
        round_put_in_gold={s: 0 for s in order},
    )


def apply(state: State, body: Body) -> State:
    """The state after ``body``; ``state`` itself is never changed.

    Raises RuleViolation with a stable code (HAND_FINISHED, UNKNOWN_SEAT, SEAT_FOLDED,
    NOT_YOUR_TURN, BAD_BET_KIND, BAD_AMOUNT, BET_TOO_SMALL, BET_TOO_LARGE, RAISE_TOO_SMALL,
    RAISE_TOO_LARGE, BET_ABOVE_STACK, ALL_IN_NOT_ALLOWED, WRONG_DEAL, BAD_CARD,
    DUPLICATE_CARD, WRONG_TIMER, HAND_NOT_OVER, UNEXPECTED_EVENT).
    """
    if state.phase == ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    if isinstance(body, CardsDealt):
        return _apply_deal(state, body)
    if isinstance(body, BetAction):
        return _apply_bet(state, body)
    if isinstance(body, TimerExpired):
        return _apply_timer(state, body)
    # Disconnect, reconnect, leave (a fold, XT-14), HandEnded and bodies Xì Tố never has.
    return common_event(
        state,
        body,
        game_name=SPEC.name,
        seats=state.stacks_gold,
        over=state.phase == PLAY_OVER,
        leave=_apply_left,
        end=hand_ended,
    )


def pending(state: State) -> Pending:
    """What the hand waits for: cards to deal, a seat's decision, or nothing (finished)."""
    if state.phase in (PLAY_OVER, ENDED):
        return Pending(finished=True)
    if state.phase == DEALING:
        return Pending(deal=_deal_slots(state))
    return betting.turn_pending(state, state.options.turn_timeout_s)


def is_finished(state: State) -> bool:
    """True once HandEnded has been applied (settle may run)."""
    return state.phase == ENDED


def legal_actions(state: State, seat: int) -> tuple[LegalAction, ...]:
    """The moves ``seat`` may make now, with amounts (chips added) allowed, inclusive.

    Empty unless it is ``seat``'s turn. A short stack's call appears as CALL (and ALL_IN)
    for everything it has.
    """
    if state.phase != BETTING or state.to_act != seat:
        return ()
    remaining = betting.remaining(state, seat)
    fold = LegalAction(ActionKind.FOLD.value)
    if state.betting_round == 1:
        due = min(_forced_bet_gold(state), remaining)
        actions = [LegalAction(ActionKind.CALL.value, due, due)]
        if due == remaining:
            actions.append(LegalAction(ActionKind.ALL_IN.value, due, due))
        return (*actions, fold)
    return betting.legal_actions(_sizing(state), _to_call(state, seat), remaining)


def held(state: State, seat: int) -> tuple[Card, ...]:
    """Every card dealt to ``seat``, face down and face up, in the order dealt."""
    return tuple(d.card for d in state.hands.get(seat, ()))


def committed_gold(state: State, seat: int) -> int:
    """The chips ``seat`` has put into the pot this hand."""
    return state.put_in_gold.get(seat, 0)


def facing(state: State, seat: int) -> Facing:
    """The bet ``seat`` must match when it is its turn (round 1: the forced bet)."""
    return bet_facing(legal_actions(state, seat))


def candidate_actions(state: State, seat: int) -> list[Body]:
    """A small finite set of legal BetActions for ``seat`` (bots, property tests).

    Bets and raises are offered at their smallest and largest legal sizes and at 10 % and
    50 % of S above the call, when those are legal.
    """

    def wager_amounts(action: LegalAction) -> tuple[int, ...]:
        stake = state.started.stake_gold
        to_call = _to_call(state, seat)
        return (action.min_gold, action.max_gold, to_call + stake // 10, to_call + stake // 2)

    return betting.candidate_bets(seat, legal_actions(state, seat), wager_amounts)


def settle(state: State) -> Settlement:
    """The hand's transfers: each pot to its best eligible hand, unmatched chips back,
    then the fee on each net win (GEN-1). Reasons: ``pot``, ``side_pot``, ``fee``.

    Raises RuleViolation("HAND_NOT_OVER") before HandEnded.
    """
    if state.phase != ENDED:
        raise RuleViolation("HAND_NOT_OVER", "settle needs a finished hand")
    started = state.started
    builder = SettlementBuilder(
        SPEC.game_id, started.table_id, started.hand_id, {info.seat: info.player_id for info in started.seats}
    )
    live = betting.live(state)
    layers = pots.build_pots(state.put_in_gold, live)
    payout_order = seats_after(state.order, started.dealer_seat, started.seats_max, COUNTERCLOCKWISE)
    values: dict[int, HandValue] = {}
    pots.award_pots(builder, layers, lambda eligible: [_best_seat(state, eligible, values)], payout_order)
    builder.charge_fees(started.fee_bps, payout_order)
    return check_settlement(builder.build(), state.stacks_gold)


def winner(state: State) -> int:
    """The seat that won the hand: the last seat standing, or the best hand at showdown
    (which always wins the main pot). Raises RuleViolation("HAND_NOT_OVER") before that."""
    if state.phase not in (PLAY_OVER, ENDED):
        raise RuleViolation("HAND_NOT_OVER", "the hand has no winner yet")
    live = betting.live(state)
    if len(live) == 1:
        return live[0]
    return _best_seat(state, live)


def first_seat_next_hand(result: State | Settlement) -> int:
    """The seat dealt first in the next hand: the previous hand's winner (RULES.md 3.1).

    Given a state, its ``winner``. Given a Settlement, the seat credited with the main pot
    (reason ``pot``), or else the only seat with a positive net. Raises
    RuleViolation("NO_WINNER") when a settlement does not show one (nobody put chips in);
    pass the state then.
    """
    if isinstance(result, State):
        return winner(result)
    for seat, account in sorted(result.seat_accounts.items()):
        if any(t.reason == "pot" and t.to_account == account for t in result.transfers):
            return seat
    positive = [seat for seat, net in result.nets.items() if net > 0]
    if len(positive) == 1:
        return positive[0]
    raise RuleViolation("NO_WINNER", "this settlement does not show the hand's winner")


# --- applying events ----------------------------------------------------------------------

# ``apply`` makes each new State as a draft of the old one (``state.draft()``), changes
# the draft before returning it (``freeze``): nobody else holds it yet, and a State a
# caller holds is never changed. The draft *shares* the dicts, tuples and frozensets of
# the old state: a change replaces one with a new value, never changes it in place.


def _due(state: State) -> list[tuple[int, bool]]:
    """The cards to deal next as (seat, face up), in deal order (``pending(state).deal``)."""
    live = betting.live(state)
    dealt = _cards_each(state)
    if dealt == 0:
        # Cards 1 and 2 (XT-3): one card at a time, from the first-dealt seat on.
        return [(s, True) for s in live] + [(s, False) for s in live]
    card_number = dealt + 1
    face_up = not (card_number == CARDS_PER_SEAT and state.options.hidden_5th)
    # The betting round just closed was opened by the seat ranked first after these same
    # cards (``round_order[0]``, among a superset of the live seats). Unless it has folded
    # since, it still ranks first: no need to rank everyone again. Round 1 has no
    # ``round_order`` when its forced bet was skipped or posted for everyone.
    round_order = state.round_order
    if round_order and state.betting_round + 1 == dealt and round_order[0] not in state.folded:
        first = round_order[0]
    else:
        first = _leader(state, dealt, live)
    return [(s, face_up) for s in _from(live, first)]


def _deal_slots(state: State) -> tuple[DealSlot, ...]:
    return tuple([DealSlot(seat, face_up) for seat, face_up in _due(state)])


def _apply_deal(state: State, body: CardsDealt) -> State:
    if state.phase != DEALING:
        raise RuleViolation("WRONG_DEAL", "no cards are due now")
    due = _due(state)
    cards = body.cards
    if [(d.seat, d.face_up) for d in cards] != due:
        slots = tuple(DealSlot(seat, face_up) for seat, face_up in due)
        got = tuple(DealSlot(d.seat, d.face_up) for d in cards)
        raise RuleViolation("WRONG_DEAL", f"expected slots {slots}, got {got}")
    # Cards by their index, rank * 4 + suit (``_DECK_INDICES``): only a Card equals a card
    # of DECK, and every card in ``hands`` passed these checks.
    seen = {d.card.rank * 4 + d.card.suit for held in state.hands.values() for d in held}
    for d in cards:
        card = d.card
        if type(card) is not Card or (index := card.rank * 4 + card.suit) not in _DECK_INDICES:
            raise RuleViolation("BAD_CARD", f"{card} is not in the 28-card deck")
        if index in seen:
            raise RuleViolation("DUPLICATE_CARD", f"{card} was dealt twice")
        seen.add(index)
    hands = dict(state.hands)
    for d in cards:
        hands[d.seat] = (*hands[d.seat], d)
    new = state.draft()
    new.hands = hands
    _start_round(new, _cards_each(new) - 1)
    return freeze(new)


def _start_round(new: State, betting_round: int) -> None:
    """Open betting round ``betting_round`` (1 after card 2, …, 4 after card 5) in ``new``,
    a State not yet returned (a draft, see ``apply``)."""
    order = new.order
    betting.reset_round(new, betting_round)
    live = betting.live(new)
    if betting_round == 1:
        forced = _forced_bet_gold(new)
        if forced == 0:
            _close_round(new)
            return
        if new.options.auto_follow_2:
            posted = {s: min(forced, betting.remaining(new, s)) for s in live}
            put_in = {s: new.put_in_gold[s] + posted.get(s, 0) for s in order}
            new.put_in_gold = put_in
            new.round_put_in_gold = {s: posted.get(s, 0) for s in order}
            _close_round(new)
            return
    # With a hidden 5th card, round 4 keeps the ranking after card 4 (XT-4).
    ranked_after = betting_round + 1
    if betting_round == 4 and new.options.hidden_5th:
        ranked_after = 4
    opener = _leader(new, ranked_after, live)
    new.round_order = tuple(_from(live, opener))
    if betting_round >= 2 and betting.with_chips(new, live) <= 1:
        _close_round(new)  # nobody left to bet against
        return
    new.phase = BETTING
    betting.next_turn(new, None, _waiting, _close_round)


def _close_round(new: State) -> None:
    if betting.live_count(new) <= 1 or _cards_each(new) >= CARDS_PER_SEAT:
        new.phase = PLAY_OVER
    else:
        new.phase = DEALING
    new.to_act = None


def _apply_bet(state: State, action: BetAction) -> State:
    seat, amount = action.seat, action.amount_gold
    betting.check_turn(state, seat)
    kind = betting.action_kind(action.kind)
    if amount < 0:
        raise RuleViolation("BAD_AMOUNT", "a negative amount")
    remaining = betting.remaining(state, seat)
    if kind == ActionKind.FOLD:
        if amount != 0:
            raise RuleViolation("BAD_AMOUNT", "a fold adds nothing")
        return betting.fold(state, seat, _waiting, _close_round)
    if state.betting_round == 1:
        due = min(_forced_bet_gold(state), remaining)
        if kind == ActionKind.ALL_IN and due == remaining:
            kind = ActionKind.CALL
        if kind != ActionKind.CALL:
            raise RuleViolation("BAD_BET_KIND", "round 1 is the forced bet: CALL it or FOLD (XT-13)")
        if amount != due:
            raise RuleViolation("BAD_AMOUNT", f"the forced bet is {due}")
        return _put_in(state, seat, amount)
    betting.check_action(_sizing(state), kind, amount, _to_call(state, seat), remaining)
    return _put_in(state, seat, amount)


def _put_in(state: State, seat: int, amount: int) -> State:
    # A raise reopens the round: everyone else must answer it (XT-11); not the forced bet.
    return betting.put_in(state, seat, amount, _waiting, _close_round, raises_reopen=state.betting_round >= 2)


def _apply_timer(state: State, body: TimerExpired) -> State:
    """XT-13, XT-14: check when free, otherwise fold; round 1's forced bet is never free."""
    if body.timer != TURN_TIMER:
        raise RuleViolation("WRONG_TIMER", f"Xì Tố has no {body.timer!r} timer")
    betting.check_turn(state, body.seat)
    if betting.timeout_checks(_to_call(state, body.seat), check_allowed=state.betting_round >= 2):
        return _put_in(state, body.seat, 0)
    return betting.fold(state, body.seat, _waiting, _close_round)


def _apply_left(state: State, seat: int) -> State:
    """Leaving is a fold at once; chips in the pot are forfeited (XT-14, GEN-6)."""
    betting.known_seat(state, seat)
    if state.phase == PLAY_OVER or seat in state.folded:
        return state
    new = state.draft()
    new.folded = state.folded | {seat}
    if state.phase == BETTING and state.to_act == seat:
        betting.next_turn(new, seat, _waiting, _close_round)
    else:
        betting.next_turn(new, None, _waiting, _close_round)
    return freeze(new)


def _best_seat(state: State, seats: Sequence[int], values: dict[int, HandValue] | None = None) -> int:
    """The seat with the best five cards among ``seats``; never a tie (see module doc).

    ``values`` keeps each seat's HandValue between calls (one per pot of a hand).
    """
    lower = state.options.straight_flush_lower_wins
    if values is None:
        values = {}
    for s in seats:
        if s in values:
            continue
        cards = state.hands[s]
        check(len(cards) == CARDS_PER_SEAT, "a showdown hand has five cards")
        # ``_apply_deal`` let only distinct cards of DECK into the hands: no need to check
        # them again as ``hand_value`` does.
        values[s] = _value(tuple([d.card for d in cards]), lower)
    best = max(seats, key=values.__getitem__)
    check(sum(1 for s in seats if values[s] == values[best]) == 1, "two Xì Tố hands of distinct cards tied")
    return best


def next_hand_dealer(
    previous_state: State | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The seat dealt first in the next hand (RULES.md 3.1): the table owner in the first
    hand, then the previous hand's winner; when that seat no longer plays, the owner, else
    the first participating seat."""
    champion = None
    if previous_state is not None and previous_state.phase in (PLAY_OVER, ENDED):
        champion = winner(previous_state)
    return seat_or_owner(champion, participants, owner_seat)
