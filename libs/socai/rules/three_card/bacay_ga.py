"""3 Cây Gà ("nhất ăn tất", winner takes all, with a Gà pot), RULES.md §7.

A hand, as this module plays it:

1. ``HandStarted``: ``pot_gold`` is the Gà the table's pot account ``pot:{table}`` carries
   into the hand. When it is 0 a new Gà opens and every player contributes
   ``ga_stakes`` × S to it ("góp gà", GA-1); while a Gà is running nobody contributes again
   (GA-2). Every player also bets ``hand_bet_stakes`` × S on the hand (GA-1). A stack must
   cover both (``can_play``; BAD_STACK otherwise): "a player who cannot pay the Gà
   contribution cannot continue" (7.1).
2. Three cards face down to every player from the 36-card A–9 deck, counterclockwise from
   ``dealer_seat`` (the room owner in the first hand, then the kit's rotation).
3. No turns, no betting rounds: every player squeezes and flips at once, with
   ``Declared(seat, "flip")``, within 15 s (7 s with ``fast_mode``); a player whose timer
   runs out is flipped for them; the timer ends early once everyone has flipped (7.1).
   Until a player flips, the others do not see their cards (``visible``).
4. Settlement (7.4): the best hand (points 1–10, 10 best; equal points by the single best
   card, A♦ on top: 7.2, GA-3, ``threecard.bacay_value``) takes every other player's hand
   bet (reason ``hand_bet``). If anyone scored 10, the best 10 takes the whole Gà — what the
   pot carried in plus this hand's contributions — (reason ``ga_pot``) and a new Gà opens
   next hand. Otherwise the Gà carries over (``Settlement.pot_carry_gold``), unless only one
   player of the hand can still pay (stack ≥ the hand bet plus the Gà contribution
   afterwards): that player takes the Gà (7.1, 7.4; reason ``ga_last_payer``).

Disconnect and leaving (7.5, GA-4, GA-6, GEN-6): the player takes no further part; their
cards do not count for the hand or for the Gà; their hand bet goes to the hand's winner
(reason ``disconnect_forfeit``) and their Gà contribution stays in the Gà. Reconnecting does
not bring them back into the hand.

Money held between hands: the Gà lives in the ledger account ``pot:{table}``; every
movement is a transfer of a settlement (contributions in, the won Gà out), and
``pot_carry_gold`` is what it holds after the hand; the auditor checks that each hand starts
with the previous hand's carry. A Gà left when the table closes (or stays empty, or the
service stops for good) is returned by ``closing_pot_settlement``: in equal shares to the
players seated at the close, odd chips in seat order (reason ``ga_pot_returned``); with
nobody seated it stays in ``pot:{table}`` until a player sits again. A service restart
changes nothing: the carry is in the hand log and the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from socai import accounts
from socai.cards import Card
from socai.cards import deck as canonical_deck
from socai.errors import RuleViolation, check
from socai.events.model import Body, CardsDealt, Declared, HandStarted, TimerExpired
from socai.money import split_evenly
from socai.rules.base import (
    COUNTERCLOCKWISE,
    Facing,
    GameSpec,
    GameState,
    LegalAction,
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
    seats_after,
    seats_in_order,
    validate_start,
)
from socai.rules.three_card import threecard
from socai.rules.three_card import threecard_play as play
from socai.rules.three_card.threecard import BaCayValue

SPEC: Final = GameSpec("bacay_ga", "3 Cây Gà", 2, 9, "bacay", direction=COUNTERCLOCKWISE, default_fee_bps=0)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("declare:flip",)
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("flip",)
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "7.5, GA-4, GEN-6: takes no further part; its hand bet goes to the hand's winner, its Gà contribution stays in the Gà pot"
RULES_VERSION: Final = 1
DECK: Final[frozenset[Card]] = frozenset(canonical_deck("bacay_ga"))
FLIP_TIMER: Final = play.FLIP_TIMER

HAND_BET: Final = "hand_bet"
GA_CONTRIBUTION: Final = "ga_contribution"
GA_POT: Final = "ga_pot"
GA_LAST_PAYER: Final = "ga_last_payer"
GA_POT_RETURNED: Final = "ga_pot_returned"
DISCONNECT_FORFEIT: Final = "disconnect_forfeit"

REASONS: Final[Mapping[str, Reason]] = MappingProxyType(
    {
        HAND_BET: Reason(False, "7.4, GA-1: every other player pays the best hand their hand bet (nhất ăn tất)"),
        GA_CONTRIBUTION: Reason(False, "7.1, GA-1, GA-2: each player pays into a new Gà (góp gà)"),
        GA_POT: Reason(False, "7.4: the whole Gà to the best 10-point hand"),
        GA_LAST_PAYER: Reason(False, "7.1, 7.4: only one player can still pay, and takes the Gà"),
        GA_POT_RETURNED: Reason(False, "7.4 (decision): a Gà left on a closing table, shared by the players seated"),
        DISCONNECT_FORFEIT: Reason(False, "7.5, GA-4, GA-6: a disconnected player's hand bet goes to the winner"),
        "fee": Reason(False, "GEN-1: the table's fee_bps on each net win"),
    }
)


@dataclass(frozen=True, slots=True)
class Options:
    """3 Cây Gà's [Proposed] amounts and table modes, defaults as in RULES.md §7.

    - ``hand_bet_stakes``: each player's bet on every hand, in multiples of S (GA-1: 1).
    - ``ga_stakes``: each player's contribution to a new Gà, in multiples of S (GA-1: 1).
    - ``fast_mode``: 7 s to flip instead of 15 s (7.1).
    """

    hand_bet_stakes: int = 1
    ga_stakes: int = 1
    fast_mode: bool = False

    def validate(self) -> None:
        """Raises RuleViolation("BAD_OPTION") for a value the rules cannot run with."""
        if not 1 <= self.hand_bet_stakes <= 100:
            raise RuleViolation("BAD_OPTION", "hand_bet_stakes must be 1..100", option="hand_bet_stakes")
        if not 0 <= self.ga_stakes <= 100:
            raise RuleViolation("BAD_OPTION", "ga_stakes must be 0..100", option="ga_stakes")


OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType(
    {1: MappingProxyType({"hand_bet_stakes": "1", "ga_stakes": "1", "fast_mode": "false"})}
)


@game_state
class State(GameState):
    """One hand of 3 Cây Gà. ``order`` is the seats counterclockwise from the dealer;
    ``out`` the seats that disconnected or left (GA-6); ``flipped`` those that flipped."""

    started: HandStarted
    options: Options
    order: tuple[int, ...]
    stacks_gold: Mapping[int, int]
    hands: Mapping[int, tuple[Card, ...]]
    flipped: frozenset[int] = frozenset()
    out: frozenset[int] = frozenset()
    disconnected: frozenset[int] = frozenset()
    phase: str = play.DEALING
    deck_seed: str = ""


def hand_value(cards: Sequence[Card]) -> BaCayValue:
    """The 3 Cây value of three cards of the A–9 deck (7.2, GA-3), totally ordered;
    ``.points`` 1–10 (10 best), ``.category`` ``points``. Raises RuleViolation("BAD_HAND")."""
    return threecard.bacay_value(cards)


def warm() -> None:
    """Build the three-card lookup tables now (``registry.warm``)."""
    threecard.warm()


def hand_bet_gold(stake_gold: int, options: Options) -> int:
    return stake_gold * options.hand_bet_stakes


def ga_gold(stake_gold: int, options: Options) -> int:
    return stake_gold * options.ga_stakes


def _needed_gold(stake_gold: int, options: Options) -> int:
    """What a player must have to play a hand: the hand bet and a Gà contribution (7.1)."""
    return max(1, hand_bet_gold(stake_gold, options) + ga_gold(stake_gold, options))


def can_play(stack_gold: int, stake_gold: int, options: Options) -> bool:
    """A seat plays the next hand when it can pay the hand bet and a Gà contribution (7.1)."""
    return stack_gold >= _needed_gold(stake_gold, options)


# --- the contract -----------------------------------------------------------------------------


def initial_state(started: HandStarted) -> State:
    """The state before the deal.

    Raises RuleViolation with the kit's codes (``base.validate_start``): WRONG_GAME,
    BAD_SEAT_COUNT (2..9), BAD_SEATS, BAD_STACK (below the hand bet plus the Gà
    contribution), BAD_STAKE (also a negative ``pot_gold``), BAD_FEE, BAD_DEALER, BAD_OWNER,
    UNKNOWN_RULES_VERSION, BAD_OPTION.
    """
    options = parse_options(Options, resolve_options(OPTION_DEFAULTS, started))
    validate_start(
        SPEC, started, stack_min_gold=_needed_gold(started.stake_gold, options), seats_max_max=play.SEATS_MAX
    )
    if type(started.pot_gold) is not int or started.pot_gold < 0:
        raise RuleViolation("BAD_STAKE", f"the Gà carried in is {started.pot_gold!r}")
    order = tuple(
        seats_in_order([i.seat for i in started.seats], started.dealer_seat, started.seats_max, COUNTERCLOCKWISE)
    )
    return State.create(
        started=started,
        options=options,
        order=order,
        stacks_gold={i.seat: i.stack_gold for i in started.seats},
        hands={s: () for s in order},
    )


def apply(state: State, body: Body) -> State:
    """The state after ``body``; ``state`` itself is never changed.

    Raises RuleViolation: HAND_FINISHED, UNKNOWN_SEAT, SEAT_LEFT, NOT_YOUR_TURN,
    ALREADY_ACTED, BAD_DECLARATION, WRONG_TIMER, WRONG_DEAL, BAD_CARD, DUPLICATE_CARD,
    HAND_NOT_OVER, UNEXPECTED_EVENT.
    """
    if state.phase == play.ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    if isinstance(body, CardsDealt):
        return _after_change(play.deal_to_flip(state, body, DECK, SPEC.name))
    if isinstance(body, Declared):
        return _after_change(play.apply_flip_declared(state, body, SPEC.name))
    if isinstance(body, TimerExpired):
        if body.timer != FLIP_TIMER:
            raise RuleViolation("WRONG_TIMER", f"3 Cây Gà has only the {FLIP_TIMER!r} timer, not {body.timer!r}")
        return _after_change(play.flip(state, body.seat))  # the timer flips for the seat (7.1)
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


def _leave(state: State, seat: int) -> State:
    """7.5, GA-6, GEN-6: a player who disconnects or leaves takes no further part."""
    if state.phase in (play.PLAY_OVER, play.ENDED) or seat in state.out:
        return state
    return _after_change(state.derive(out=state.out | {seat}))


def _after_change(new: State) -> State:
    if new.phase == play.FLIPPING and not play.still_to_flip(new):
        return new.derive(phase=play.PLAY_OVER)
    if new.phase == play.DEALING and len(new.out) == len(new.order):
        return new.derive(phase=play.PLAY_OVER)  # nobody left to deal to
    return new


def pending(state: State) -> Pending:
    """The deal, the seats still to flip (one timer for all), or nothing (finished)."""
    if state.phase in (play.PLAY_OVER, play.ENDED):
        return Pending(finished=True)
    if state.phase == play.DEALING:
        return Pending(deal=play.deal_three_face_down(state.order))
    return play.flip_pending(state)


def legal_actions(state: State, seat: int) -> tuple[LegalAction, ...]:
    """``declare:flip`` while ``seat`` has cards to flip, else nothing."""
    return play.flip_legal_actions(state, seat)


def candidate_actions(state: State, seat: int) -> list[Body]:
    """The flip, when ``seat`` may flip."""
    return [Declared(seat, play.FLIP)] if legal_actions(state, seat) else []


def held(state: State, seat: int) -> tuple[Card, ...]:
    """The three cards dealt to ``seat``."""
    return play.held(state, seat)


def facing(state: State, seat: int) -> Facing:
    """``flip`` while ``seat`` has still to flip."""
    return play.flip_facing(state, seat)


def is_finished(state: State) -> bool:
    """True once HandEnded has been applied (settle may run)."""
    return state.phase == play.ENDED


def visible(body: Body, viewer_seat: int, state: State | None) -> Body | None:
    """A player's cards stay hidden from the others until that player flips (7.1)."""
    return play.flip_visible(body, viewer_seat, state.flipped if state is not None else frozenset())


def counting_values(state: State) -> dict[int, BaCayValue]:
    """The hands that count, in dealing order: dealt, and not disconnected or left (GA-6)."""
    return play.counting_values(state)


def hand_winner(state: State) -> int | None:
    """The best hand among those that count (7.2), or None when none counts."""
    values = counting_values(state)
    return threecard.winner(values) if values else None


def settle(state: State) -> Settlement:
    """The hand's transfers, in this order: the Gà contributions when a new Gà opens
    (``ga_contribution``), every other player's hand bet to the best hand (``hand_bet``, or
    ``disconnect_forfeit`` for a player who left), the Gà to the best 10 (``ga_pot``) or to
    the only player who can still pay (``ga_last_payer``), then the fee (GEN-1).
    ``pot_carry_gold`` is what ``pot:{table}`` holds afterwards.

    Raises RuleViolation("HAND_NOT_OVER") before HandEnded.
    """
    if state.phase != play.ENDED:
        raise RuleViolation("HAND_NOT_OVER", "settle needs a finished hand")
    started = state.started
    stake = started.stake_gold
    builder = SettlementBuilder(
        SPEC.game_id, started.table_id, started.hand_id, {i.seat: i.player_id for i in started.seats}
    )
    order = seats_after(state.order, started.dealer_seat, started.seats_max, COUNTERCLOCKWISE)
    pot_account = accounts.pot(started.table_id)
    pot_gold = started.pot_gold
    if pot_gold == 0:
        owed = [Obligation(s, pot_account, ga_gold(stake, state.options), GA_CONTRIBUTION) for s in order]
        before = _pot_receipts(builder, pot_account)
        pay_obligations(builder, owed, state.stacks_gold, order)
        pot_gold += _pot_receipts(builder, pot_account) - before
    best = hand_winner(state)
    if best is not None:
        bet = hand_bet_gold(stake, state.options)
        bets = [
            Obligation(s, best, bet, DISCONNECT_FORFEIT if s in state.out else HAND_BET) for s in order if s != best
        ]
        pay_obligations(builder, bets, state.stacks_gold, order)
    ga_winner = threecard.ga_pot_winner(counting_values(state))
    if ga_winner is not None:
        builder.pay(pot_account, builder.account(ga_winner), pot_gold, GA_POT)
        pot_gold = 0
    elif pot_gold > 0:
        needed = _needed_gold(stake, state.options)
        # A player who disconnected is still seated and may pay next hand: only chips count.
        payers = [s for s in order if state.stacks_gold[s] + builder.net_of(s) >= needed]
        if len(payers) == 1 and len(state.order) > 1:
            builder.pay(pot_account, builder.account(payers[0]), pot_gold, GA_LAST_PAYER)
            pot_gold = 0
    builder.charge_fees(started.fee_bps, order)
    builder.pot_carry_gold = pot_gold
    settlement = check_settlement(builder.build(), state.stacks_gold, conserved=False)
    moved = settlement.entries().get(pot_account, 0)
    check(moved == pot_gold - started.pot_gold, "the Gà account moves by the change of the carry")
    return settlement


def _pot_receipts(builder: SettlementBuilder, pot_account: str) -> int:
    return sum(t.amount_gold for t in builder.transfers if t.to_account == pot_account)


def closing_pot_settlement(table_id: str, hand_id: str, pot_gold: int, seat_players: Mapping[int, str]) -> Settlement:
    """The Gà left in ``pot:{table}`` when the table closes (a decision; RULES.md is silent):
    shared equally by the players seated at the close (``seat_players``), the odd chips one
    each in seat order (DESIGN.md "Money"); reason ``ga_pot_returned``, and nothing is left
    to carry. With nobody seated the Gà stays in the account (an empty Settlement that
    carries it) until a player sits down again.

    Raises RuleViolation("BAD_STAKE") for a negative or non-int ``pot_gold``.
    """
    if type(pot_gold) is not int or pot_gold < 0:
        raise RuleViolation("BAD_STAKE", f"a Gà of {pot_gold!r}")
    builder = SettlementBuilder(SPEC.game_id, table_id, hand_id, seat_players, pot_carry_gold=pot_gold)
    if not seat_players or pot_gold == 0:
        return builder.build()
    pot_account = accounts.pot(table_id)
    for seat, share in split_evenly(pot_gold, sorted(seat_players)).items():
        builder.pay(pot_account, builder.account(seat), share, GA_POT_RETURNED)
    builder.pot_carry_gold = 0
    return builder.build()
