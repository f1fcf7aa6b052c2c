"""Ba Cây Chương (three cards against a banker), RULES.md §8.

A hand, as this module plays it:

1. ``HandStarted``: ``dealer_seat`` is the banker (cầm chương): the room owner in the first
   hand; then the best 10-point hand of the previous hand, banker included, that can cover
   the bank (CH-1, CH-3); else the banker stays; a banker who left, disconnected or can no
   longer cover the bank is replaced by a player drawn at random from the previous hand's
   revealed seed (8.1, 8.5, CH-4; ``next_hand_dealer``).
2. The betting window: every other player places one bet against the banker,
   ``WagerPlaced(seat, "bet", (), amount)``, from ``bet_min_stakes`` × S to
   ``bet_max_stakes`` × S (CH-2) and within their stack. A bet is accepted only while the
   banker's stack still covers the most the bank could owe, 2 × every accepted bet with
   ``ten_point_double`` (CH-2: the worst case, every player scoring 10), else
   BANKER_CAPACITY. A player whose betting timer runs out bets nothing this hand (GEN-5: a
   pass). The window closes when every player has bet or passed.
3. Three cards face down to everyone, the banker first, counterclockwise, from the 36-card
   A–9 deck.
4. Everyone squeezes and flips at once, with ``Declared(seat, "flip")``, within 15 s (7 s
   with ``fast_mode``); a timer that runs out flips for the seat (8.1). Unflipped cards are
   hidden from the others (``visible``).
5. Settlement (8.4): each player against the banker, by ``threecard.player_result``: the
   banker's better hand takes the player's bet (``banker_win``); the player's better hand
   is paid the bet (``banker_loss``), and once more for a player's 10 (``ten_double``,
   CH-1: the banker's own 10 is never doubled). Equal points go to the single best card
   (7.2): there are no draws.

Disconnect and leaving (8.5, CH-4, CH-5, CH-7, GEN-6): a player who disconnects or leaves
takes no further part and loses their bet to the banker (``disconnect_forfeit``); a banker
who does loses to every player still in, paying each their bet (× 2 for a player's 10), and
the betting window closes at once. A disconnected player cannot take the bank (CH-7).
Fee: ``fee_bps`` on each net win (GEN-1, default 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from socai.cards import Card
from socai.cards import deck as canonical_deck
from socai.errors import RuleViolation, check
from socai.events.model import (
    Body,
    CardsDealt,
    Declared,
    HandStarted,
    TimerExpired,
    WagerPlaced,
)
from socai.rules.base import (
    COUNTERCLOCKWISE,
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
    resolve_options,
    seat_or_owner,
    seats_in_order,
    seeded_index,
    validate_start,
)
from socai.rules.three_card import threecard
from socai.rules.three_card import threecard_play as play
from socai.rules.three_card.threecard import BaCayValue

SPEC: Final = GameSpec("bacay_chuong", "Ba Cây Chương", 2, 9, "bacay", direction=COUNTERCLOCKWISE, default_fee_bps=0)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("wager", "declare:flip")
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("betting", "flip")
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"BANKER_CAPACITY": "CH-2", "BET_TOO_SMALL": "CH-2", "BET_TOO_LARGE": "CH-2"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "8.5, CH-4, CH-5, GEN-6: takes no further part; a player loses its bet to the banker, a banker pays every player's bet (x 2 for a 10)"
RULES_VERSION: Final = 1
DECK: Final[frozenset[Card]] = frozenset(canonical_deck("bacay_chuong"))
FLIP_TIMER: Final = play.FLIP_TIMER
BETTING_TIMER: Final = "betting"
BET: Final = "bet"  # WagerPlaced.kind of a bet against the banker
BANKER_DRAW: Final = "bacay_chuong.banker"  # seeded_index label of a random new banker

BANKER_WIN: Final = "banker_win"
BANKER_LOSS: Final = "banker_loss"
TEN_DOUBLE: Final = "ten_double"
DISCONNECT_FORFEIT: Final = "disconnect_forfeit"

REASONS: Final[Mapping[str, Reason]] = MappingProxyType(
    {
        BANKER_WIN: Reason(False, "8.4: the banker outscores a player and takes the player's bet"),
        BANKER_LOSS: Reason(False, "8.4, CH-4: a player outscores the banker (or the banker left) and is paid the bet"),
        TEN_DOUBLE: Reason(False, "8.1 'Dac biet', CH-1: a non-banker's winning 10 is paid twice the bet"),
        DISCONNECT_FORFEIT: Reason(
            False, "8.5, CH-5: a player who disconnects or leaves loses their bet to the banker"
        ),
        "fee": Reason(False, "GEN-1: the table's fee_bps on each net win"),
    }
)


@dataclass(frozen=True, slots=True)
class Options:
    """Ba Cây Chương's flag and [Proposed] limits, defaults as in RULES.md §8.

    - ``ten_point_double``: a non-banker's winning 10 is paid 2 × the bet (CH-1).
    - ``bet_min_stakes`` / ``bet_max_stakes``: a bet's limits in multiples of S (CH-2: the
      minimum is S; the maximum is the table's, 10 × S by default).
    - ``fast_mode``: 7 s to flip instead of 15 s (8.1).
    - ``betting_timeout_s``: the betting window (GEN-5: configurable).
    """

    ten_point_double: bool = True
    bet_min_stakes: int = 1
    bet_max_stakes: int = 10
    fast_mode: bool = False
    betting_timeout_s: int = 15

    def validate(self) -> None:
        """Raises RuleViolation("BAD_OPTION") for a value the rules cannot run with."""
        if not 1 <= self.bet_min_stakes <= self.bet_max_stakes <= 1000:
            raise RuleViolation("BAD_OPTION", "1 <= bet_min_stakes <= bet_max_stakes <= 1000", option="bet_max_stakes")
        if self.betting_timeout_s < 1:
            raise RuleViolation("BAD_OPTION", "betting_timeout_s must be >= 1", option="betting_timeout_s")


OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType(
    {
        1: MappingProxyType(
            {
                "ten_point_double": "true",
                "bet_min_stakes": "1",
                "bet_max_stakes": "10",
                "fast_mode": "false",
                "betting_timeout_s": "15",
            }
        )
    }
)


@game_state
class State(GameState):
    """One hand of Ba Cây Chương. ``order`` is the seats counterclockwise from the banker;
    ``bets_gold`` each player's accepted bet; ``passed`` the players done betting without a
    bet; ``out`` the seats that disconnected or left; ``flipped`` those that flipped."""

    started: HandStarted
    options: Options
    banker: int
    order: tuple[int, ...]
    stacks_gold: Mapping[int, int]
    bets_gold: Mapping[int, int]
    hands: Mapping[int, tuple[Card, ...]]
    passed: frozenset[int] = frozenset()
    flipped: frozenset[int] = frozenset()
    out: frozenset[int] = frozenset()
    disconnected: frozenset[int] = frozenset()
    phase: str = play.WAGERING
    deck_seed: str = ""


def hand_value(cards: Sequence[Card]) -> BaCayValue:
    """The Ba Cây value of three cards of the A–9 deck (8.2 = 7.2), totally ordered;
    ``.points`` 1–10 (10 best), ``.category`` ``points``. Raises RuleViolation("BAD_HAND")."""
    return threecard.bacay_value(cards)


def warm() -> None:
    """Build the three-card lookup tables now (``registry.warm``)."""
    threecard.warm()


def _multiplier(options: Options) -> int:
    return threecard.max_player_win_multiplier(ten_point_double=options.ten_point_double)


def bet_min_gold(stake_gold: int, options: Options) -> int:
    return stake_gold * options.bet_min_stakes


def bet_max_gold(stake_gold: int, options: Options) -> int:
    return stake_gold * options.bet_max_stakes


def can_play(stack_gold: int, stake_gold: int, options: Options) -> bool:
    """A seat plays the next hand when it can place the minimum bet (CH-2)."""
    return stack_gold >= max(1, bet_min_gold(stake_gold, options))


def bank_covers(banker_stack_gold: int, bets_gold: int, options: Options) -> bool:
    """CH-2: the banker's stack covers the most the bank could owe on ``bets_gold`` of bets."""
    return banker_stack_gold >= _multiplier(options) * bets_gold


def may_bank(stack_gold: int, players: int, stake_gold: int, options: Options) -> bool:
    """8.1 eligibility: a banker must be able to pay every other player in full, at least
    their minimum bets in the worst case (CH-2)."""
    return bank_covers(stack_gold, players * bet_min_gold(stake_gold, options), options)


# --- the contract -----------------------------------------------------------------------------


def initial_state(started: HandStarted) -> State:
    """The state of the betting window.

    Raises RuleViolation with the kit's codes (``base.validate_start``): WRONG_GAME,
    BAD_SEAT_COUNT (2..9), BAD_SEATS, BAD_STACK (below the minimum bet), BAD_STAKE, BAD_FEE,
    BAD_DEALER (the banker is not a seat in the hand), BAD_OWNER, UNKNOWN_RULES_VERSION,
    BAD_OPTION.
    """
    options = parse_options(Options, resolve_options(OPTION_DEFAULTS, started))
    validate_start(
        SPEC,
        started,
        stack_min_gold=max(1, bet_min_gold(started.stake_gold, options)),
        seats_max_max=play.SEATS_MAX,
    )
    order = tuple(
        seats_in_order([i.seat for i in started.seats], started.dealer_seat, started.seats_max, COUNTERCLOCKWISE)
    )
    return State.create(
        started=started,
        options=options,
        banker=started.dealer_seat,
        order=order,
        stacks_gold={i.seat: i.stack_gold for i in started.seats},
        bets_gold=dict.fromkeys(order, 0),
        hands={s: () for s in order},
    )


def still_to_bet(state: State) -> tuple[int, ...]:
    """The players who have neither bet nor passed, in order (never the banker)."""
    if state.phase != play.WAGERING:
        return ()
    bets = state.bets_gold
    return tuple(
        s for s in state.order if s != state.banker and s not in state.out and s not in state.passed and bets[s] == 0
    )


def _bet_limits(state: State, seat: int) -> tuple[int, int]:
    """The smallest and largest bet ``seat`` may place now (the largest may be below the
    smallest: no bet fits)."""
    stake = state.started.stake_gold
    options = state.options
    room = state.stacks_gold[state.banker] // _multiplier(options) - sum(state.bets_gold.values())
    top = min(bet_max_gold(stake, options), state.stacks_gold[seat], room)
    return bet_min_gold(stake, options), top


def _apply_wager(state: State, body: WagerPlaced) -> State:
    seat = body.seat
    if state.phase == play.PLAY_OVER:
        raise RuleViolation("HAND_FINISHED", "the hand's result is already decided")
    if seat not in state.stacks_gold:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat!r} is not in this hand", seat=seat)
    if state.phase != play.WAGERING:
        raise RuleViolation("BETTING_CLOSED", "the betting window is closed")
    if seat == state.banker:
        raise RuleViolation("BANKER_CANNOT_BET", "the banker does not bet")
    if seat in state.out:
        raise RuleViolation("SEAT_LEFT", f"seat {seat} has left the hand", seat=seat)
    if seat not in still_to_bet(state):
        raise RuleViolation("TOO_MANY_BETS", "one bet per player and hand (8.3)")
    if body.kind != BET or tuple(body.selection) != ():
        raise RuleViolation("BAD_SELECTION", f"a bet against the banker is kind {BET!r} with no selection")
    amount = body.amount_gold
    if type(amount) is not int or amount < 0:
        raise RuleViolation("BAD_AMOUNT", f"a bet of {amount!r}")
    stake = state.started.stake_gold
    if amount < bet_min_gold(stake, state.options):
        raise RuleViolation("BET_TOO_SMALL", f"the least bet is {bet_min_gold(stake, state.options)}")
    if amount > bet_max_gold(stake, state.options):
        raise RuleViolation("BET_TOO_LARGE", f"the largest bet is {bet_max_gold(stake, state.options)}")
    if amount > state.stacks_gold[seat]:
        raise RuleViolation("BET_ABOVE_STACK", f"{amount} is more than the seat's {state.stacks_gold[seat]}")
    if not bank_covers(state.stacks_gold[state.banker], sum(state.bets_gold.values()) + amount, state.options):
        raise RuleViolation("BANKER_CAPACITY", "the bank cannot cover this bet (CH-2)")
    return _after_change(state.derive(bets_gold={**state.bets_gold, seat: amount}))


def apply(state: State, body: Body) -> State:
    """The state after ``body``; ``state`` itself is never changed.

    Raises RuleViolation: HAND_FINISHED, UNKNOWN_SEAT, BETTING_CLOSED, BANKER_CANNOT_BET,
    SEAT_LEFT, TOO_MANY_BETS, BAD_SELECTION, BAD_AMOUNT, BET_TOO_SMALL, BET_TOO_LARGE,
    BET_ABOVE_STACK, BANKER_CAPACITY, NOT_YOUR_TURN, ALREADY_ACTED, BAD_DECLARATION,
    WRONG_TIMER, SEAT_NOT_BETTING, WRONG_DEAL, BAD_CARD, DUPLICATE_CARD, HAND_NOT_OVER,
    UNEXPECTED_EVENT.
    """
    if state.phase == play.ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    if isinstance(body, WagerPlaced):
        return _apply_wager(state, body)
    if isinstance(body, CardsDealt):
        return _after_change(play.deal_to_flip(state, body, DECK, SPEC.name))
    if isinstance(body, Declared):
        return _after_change(play.apply_flip_declared(state, body, SPEC.name))
    if isinstance(body, TimerExpired):
        return _apply_timer(state, body)
    # A disconnect is leaving (GA-6, CH-5), then reconnect, HandEnded, bodies it never has.
    return common_event(
        state,
        body,
        game_name=SPEC.name,
        seats=state.stacks_gold,
        over=state.phase == play.PLAY_OVER,
        leave=_leave,
        end=hand_ended,
        disconnect_leaves=True,
    )


def _apply_timer(state: State, body: TimerExpired) -> State:
    """The betting timer: the seat passes (no bet this hand, GEN-5). The flip timer: the
    seat's cards are flipped for it (8.1)."""
    if body.timer == BETTING_TIMER:
        if state.phase == play.PLAY_OVER:
            raise RuleViolation("HAND_FINISHED", "the hand's result is already decided")
        if body.seat not in state.stacks_gold:
            raise RuleViolation("UNKNOWN_SEAT", f"seat {body.seat!r} is not in this hand", seat=body.seat)
        if state.phase != play.WAGERING:
            raise RuleViolation("BETTING_CLOSED", "the betting window is closed")
        if body.seat not in still_to_bet(state):
            raise RuleViolation("SEAT_NOT_BETTING", f"seat {body.seat} is not betting")
        return _after_change(state.derive(passed=state.passed | {body.seat}))
    if body.timer == FLIP_TIMER:
        return _after_change(play.flip(state, body.seat))
    raise RuleViolation("WRONG_TIMER", f"Ba Cây Chương has no {body.timer!r} timer")


def _leave(state: State, seat: int) -> State:
    """8.5, CH-4, CH-5, GEN-6: a seat that disconnects or leaves takes no further part; a
    banker who does closes the betting window at once."""
    if state.phase in (play.PLAY_OVER, play.ENDED) or seat in state.out:
        return state
    new = state.derive(out=state.out | {seat})
    if seat == state.banker and new.phase == play.WAGERING:
        new = new.derive(phase=play.DEALING)
    return _after_change(new)


def _after_change(new: State) -> State:
    if new.phase == play.WAGERING and not still_to_bet(new):
        new = new.derive(phase=play.DEALING)
    if new.phase == play.FLIPPING and not play.still_to_flip(new):
        new = new.derive(phase=play.PLAY_OVER)
    return new


def pending(state: State) -> Pending:
    """The betting window (every player still to bet, one timer), the deal, the seats
    still to flip (one timer), or nothing (finished)."""
    if state.phase in (play.PLAY_OVER, play.ENDED):
        return Pending(finished=True)
    if state.phase == play.WAGERING:
        return Pending(to_act=still_to_bet(state), timer=BETTING_TIMER, timeout_s=state.options.betting_timeout_s)
    if state.phase == play.DEALING:
        return Pending(deal=play.deal_three_face_down(state.order))
    return play.flip_pending(state)


def legal_actions(state: State, seat: int) -> tuple[LegalAction, ...]:
    """``wager`` (with the bet limits, when one fits) during the betting window;
    ``declare:flip`` while the seat has cards to flip; else nothing."""
    if seat in still_to_bet(state):
        low, high = _bet_limits(state, seat)
        return (LegalAction("wager", low, high),) if high >= low else ()
    return play.flip_legal_actions(state, seat)


def candidate_actions(state: State, seat: int) -> list[Body]:
    """Bets of the minimum, twice the minimum and the most allowed; or the flip."""
    out: list[Body] = []
    for action in legal_actions(state, seat):
        if action.kind == "wager":
            for amount in sorted({action.min_gold, 2 * action.min_gold, action.max_gold}):
                if action.min_gold <= amount <= action.max_gold:
                    out.append(WagerPlaced(seat, BET, (), amount))
        else:
            out.append(Declared(seat, play.FLIP))
    return out


def held(state: State, seat: int) -> tuple[Card, ...]:
    """The three cards dealt to ``seat``."""
    return play.held(state, seat)


def committed_gold(state: State, seat: int) -> int:
    """The bet ``seat`` placed against the banker this hand."""
    return state.bets_gold.get(seat, 0)


def facing(state: State, seat: int) -> Facing:
    """``wager`` while ``seat`` may still bet against the banker (one bet of
    ``amount_gold`` to ``max_gold``), then ``flip`` while it has still to flip."""
    if seat in still_to_bet(state):
        low, high = _bet_limits(state, seat)
        return Facing("wager", seat=state.banker, amount_gold=low, max_gold=high, text="bet against the banker")
    return play.flip_facing(state, seat)


def legal_moves(state: State, seat: int) -> tuple[MoveSet, ...]:
    """One bet against the banker of any amount from the least to the most allowed (CH-2:
    the bet limits and what the banker can still cover twice over), or the flip."""
    out: list[MoveSet] = []
    for action in legal_actions(state, seat):
        if action.kind == "wager":
            low, high = action.min_gold, action.max_gold
            examples = tuple(c for c in candidate_actions(state, seat) if isinstance(c, WagerPlaced))
            text = f"bet against the banker (kind bet, no selection): any amount from {low} to {high} (CH-2)"
            out.append(MoveSet("wager", text, examples, False, low, high))
        else:
            out.append(MoveSet(action.kind, "turn your three cards face up", (Declared(seat, play.FLIP),)))
    return tuple(out)


def is_finished(state: State) -> bool:
    """True once HandEnded has been applied (settle may run)."""
    return state.phase == play.ENDED


def visible(body: Body, viewer_seat: int, state: State | None) -> Body | None:
    """A player's cards stay hidden from the others until that player flips (8.1)."""
    return play.flip_visible(body, viewer_seat, state.flipped if state is not None else frozenset())


def counting_values(state: State) -> dict[int, BaCayValue]:
    """The hands that count, in order: dealt, and not disconnected or left."""
    return play.counting_values(state)


def settle(state: State) -> Settlement:
    """Each player against the banker (8.4; CH-1, CH-4, CH-5): ``banker_win``,
    ``banker_loss``, ``ten_double``, ``disconnect_forfeit``; then the fee (GEN-1). The
    players pay first, then the banker, whose stack covers every payout (CH-2, checked).

    Raises RuleViolation("HAND_NOT_OVER") before HandEnded.
    """
    if state.phase != play.ENDED:
        raise RuleViolation("HAND_NOT_OVER", "settle needs a finished hand")
    started = state.started
    banker = state.banker
    options = state.options
    check(bank_covers(state.stacks_gold[banker], sum(state.bets_gold.values()), options), "the bank is solvent")
    builder = SettlementBuilder(
        SPEC.game_id, started.table_id, started.hand_id, {i.seat: i.player_id for i in started.seats}
    )
    values = counting_values(state)
    banker_out = banker in state.out or banker not in values
    owed: list[Obligation] = []
    for seat in state.order:
        bet = state.bets_gold[seat]
        if seat == banker or bet == 0:
            continue
        if seat in state.out or seat not in values:
            owed.append(Obligation(seat, banker, bet, DISCONNECT_FORFEIT))
            continue
        if banker_out:
            result = threecard.player_win_multiplier(values[seat], ten_point_double=options.ten_point_double)
        else:
            result = threecard.player_result(values[seat], values[banker], ten_point_double=options.ten_point_double)
        if result < 0:
            owed.append(Obligation(seat, banker, bet, BANKER_WIN))
        else:
            owed.append(Obligation(banker, seat, bet, BANKER_LOSS))
            if result == 2:
                owed.append(Obligation(banker, seat, bet, TEN_DOUBLE))
    players_first = [s for s in state.order if s != banker] + [banker]
    pay_obligations(builder, owed, state.stacks_gold, players_first)
    check(not builder.shortfalls, "the bank covers every payout (CH-2)")
    builder.charge_fees(started.fee_bps, players_first)
    return check_settlement(builder.build(), state.stacks_gold, conserved=False)


def next_hand_dealer(
    previous_state: State | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The banker of the next hand (8.1, CH-1, CH-3, CH-4, CH-7).

    First hand: the room owner (else the first participant). Then, among the previous
    hand's 10-point hands that count (not disconnected, CH-7), banker included, best
    first, the first participant that may bank (``may_bank`` with ``stacks``); else the
    banker stays if it still plays, was not disconnected and may bank; else a banker drawn
    at random (``base.seeded_index`` on the previous hand's revealed seed) among the
    participants that may bank, or among all participants when none may.
    """
    check(len(participants) > 0, "a hand needs participants")
    if previous_state is None or previous_state.phase != play.ENDED:
        return seat_or_owner(None, participants, owner_seat)
    options = previous_state.options
    stake = previous_state.started.stake_gold

    def eligible(seat: int) -> bool:
        return stacks is None or may_bank(stacks.get(seat, 0), len(participants) - 1, stake, options)

    for seat in threecard.tens_best_first(counting_values(previous_state)):
        if seat in participants and eligible(seat):
            return seat
    banker = previous_state.banker
    if banker in participants and banker not in previous_state.out and eligible(banker):
        return banker
    pool = [s for s in sorted(participants) if eligible(s)] or sorted(participants)
    return pool[seeded_index(previous_state.deck_seed, BANKER_DRAW, len(pool))]
