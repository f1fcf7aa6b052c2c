"""How a hand of the three-card games is played, shared by their modules.

``threecard`` says what a hand is worth; this module says how a hand goes:

- the Liêng family (``lieng``, RULES.md §5, and ``lieng_sanh``, §12): an ante from every
  player, three cards face down to each, one (Liêng) or three (Liêng Sảnh) betting rounds of
  the kit's ``betting`` with raises of k × S for k from 1 to ``raise_max_stakes`` (LI-4,
  LS-3), folding, all-in calls and side pots (``pots``), disconnect and leaving as a fold at
  once with the chips forfeited (LI-5, §12.5), then the showdown. ``LiengFamily`` is one
  game of the family: its SPEC, value function and whether the Sáp bonus is paid
  (§12.4, LS-5, LS-9, LS-12);
- the Ba Cây flip (``bacay_ga``, §7, and ``bacay_chuong``, §8): three cards face down to
  every seat, then every seat squeezes and flips at once under one timer (15 s, 7 s in fast
  mode, GEN-5) with ``Declared(seat, "flip")``; a seat whose timer runs out is flipped for it;
  ``visible`` keeps a seat's cards hidden from the others until it flips (``flip_visible``).

The game modules keep the contract (``SPEC``, ``Options``, ``REASONS``, ``apply``, …) and
call in here; nothing here is a game on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from socai.cards import Card
from socai.errors import RuleViolation
from socai.events.model import (
    HIDDEN_CARD,
    ActionKind,
    BetAction,
    Body,
    CardsDealt,
    DealtCard,
    Declared,
    HandStarted,
    TimerExpired,
)
from socai.rules import betting, pots
from socai.rules.base import (
    COUNTERCLOCKWISE,
    POT_REASONS,
    DealSlot,
    Facing,
    GameSpec,
    GameState,
    LegalAction,
    Obligation,
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
    pay_obligations,
    played_rules_version,
    resolve_options,
    seat_or_owner,
    seats_after,
    seats_in_order,
    validate_start,
)
from socai.rules.three_card import threecard
from socai.rules.three_card.threecard import BaCayValue, ThreeCardValue

CARDS_PER_SEAT: Final = threecard.CARDS_PER_HAND
# A table of the three-card games seats at most 9 (RULES.md 5.1, 7.1, 8.1, LS-10).
SEATS_MAX: Final = 9
TURN_TIMER: Final = betting.TURN_TIMER
FLIP_TIMER: Final = "flip"
FLIP: Final = "flip"  # Declared.declaration of a flip (lật bài)

# Phases of a hand.
WAGERING: Final = "wagering"  # Ba Cây Chương's betting window (WagerPlaced)
DEALING: Final = betting.DEALING  # the table must deal pending(state).deal
BETTING: Final = betting.BETTING  # a Liêng betting round waits for ``to_act``
FLIPPING: Final = "flipping"  # Ba Cây: every seat still to flip acts under one timer
PLAY_OVER: Final = betting.PLAY_OVER  # the result is decided; only HandEnded is expected
ENDED: Final = betting.ENDED  # HandEnded applied; settle() may run

# The reasons of a Liêng-family settlement (5.4, 12.4).
ANTE: Final = "ante"
DISCONNECT_FORFEIT: Final = "disconnect_forfeit"
SAP_BONUS: Final = "sap_bonus"
LIENG_REASONS: Final[Mapping[str, Reason]] = {
    **POT_REASONS,
    ANTE: Reason(False, "5.1, LS-2: each player's ante, won with the main pot (the rest of the pot is 'pot')"),
    DISCONNECT_FORFEIT: Reason(
        False, "LI-5, 12.5: a player who disconnects or leaves folds; all they bet goes to the showdown winner"
    ),
}
LIENG_SANH_REASONS: Final[Mapping[str, Reason]] = {
    **LIENG_REASONS,
    SAP_BONUS: Reason(True, "12.4, LS-5, LS-9, LS-12: 5 x S to the best Sap dealt from every other player dealt in"),
}


def deal_three_face_down(order: Sequence[int]) -> tuple[DealSlot, ...]:
    """Three cards face down to each seat, one at a time round the table from ``order[0]``."""
    return _three_face_down(tuple(order))


@lru_cache(maxsize=256)
def _three_face_down(order: tuple[int, ...]) -> tuple[DealSlot, ...]:
    # Kept per seat order (immutable slots): every replayed deal asks for them.
    return tuple(DealSlot(seat, False) for _ in range(CARDS_PER_SEAT) for seat in order)


def check_deal(
    body: CardsDealt, due: Sequence[DealSlot], deck_cards: frozenset[Card], game_name: str
) -> dict[int, tuple[Card, ...]]:
    """The cards of a deal, by seat, after checking them against ``due``.

    Raises RuleViolation: WRONG_DEAL (other slots than ``due``), BAD_CARD (a card not in the
    game's deck), DUPLICATE_CARD."""
    if [(d.seat, d.face_up) for d in body.cards] != [(s.seat, s.face_up) for s in due]:
        got = tuple(DealSlot(d.seat, d.face_up) for d in body.cards)
        raise RuleViolation("WRONG_DEAL", f"expected slots {tuple(due)}, got {got}")
    seen: set[Card] = set()
    hands: dict[int, tuple[Card, ...]] = {}
    for d in body.cards:
        card = d.card
        if type(card) is not Card or card not in deck_cards:
            raise RuleViolation("BAD_CARD", f"{card} is not in the {game_name} deck")
        if card in seen:
            raise RuleViolation("DUPLICATE_CARD", f"{card} was dealt twice")
        seen.add(card)
        hands[d.seat] = (*hands.get(d.seat, ()), card)
    return hands


def flip_visible(body: Body, viewer_seat: int, flipped: frozenset[int]) -> Body | None:
    """Ba Cây's squeeze-and-flip view: a seat's face-down cards are hidden from the others
    until that seat has flipped (``flipped``, from the table's current state); the seat
    always sees its own. Everything else is public (the kit's default ``visible``)."""
    if type(body) is CardsDealt and any(
        not c.face_up and c.seat != viewer_seat and c.seat not in flipped for c in body.cards
    ):
        return CardsDealt(
            tuple(
                c if c.face_up or c.seat == viewer_seat or c.seat in flipped else DealtCard(c.seat, HIDDEN_CARD, False)
                for c in body.cards
            )
        )
    return body


# --- the Liêng family ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiengFamily:
    """One game of the Liêng family: how many betting rounds, whose hand values, whether the
    best Sáp dealt takes a bonus from every other player dealt in."""

    spec: GameSpec
    options_type: type
    option_defaults: Mapping[int, Mapping[str, str]]
    rounds: int
    value: Callable[[Sequence[Card]], ThreeCardValue]
    deck_cards: frozenset[Card]
    sap_bonus: bool


@game_state
class LiengState(GameState):
    """One hand of Liêng or Liêng Sảnh. Never mutated: ``apply`` returns a new state.

    ``order`` lists the dealt seats counterclockwise from the first to act
    (``HandStarted.dealer_seat``: the table owner, then the previous winner; LI-4, LS-4).
    ``put_in_gold`` is each seat's total in the pot this hand, ante included;
    ``round_put_in_gold`` its part in the current betting round. ``forfeited`` are the seats
    that disconnected or left mid-hand (folded at once, LI-5, 12.5). ``rules_version`` is
    the version the hand is played and settled under.
    """

    started: HandStarted
    rules_version: int
    options: Any
    rounds: int
    order: tuple[int, ...]
    stacks_gold: Mapping[int, int]
    hands: Mapping[int, tuple[Card, ...]]
    put_in_gold: Mapping[int, int]
    round_put_in_gold: Mapping[int, int]
    folded: frozenset[int] = frozenset()
    forfeited: frozenset[int] = frozenset()
    acted: frozenset[int] = frozenset()
    disconnected: frozenset[int] = frozenset()
    phase: str = DEALING
    betting_round: int = 0
    round_order: tuple[int, ...] = ()
    to_act: int | None = None
    deck_seed: str = ""


def ante_gold(started: HandStarted, options: Any) -> int:
    """The ante every player puts in before the deal: ``ante_stakes`` × S (5.1, LS-2)."""
    return int(started.stake_gold * options.ante_stakes)


def lieng_initial_state(game: LiengFamily, started: HandStarted) -> LiengState:
    """The state before the deal, every ante in the pot.

    Raises RuleViolation with the kit's codes (``base.validate_start``): WRONG_GAME,
    BAD_SEAT_COUNT (2..9), BAD_SEATS, BAD_STACK (a stack below the ante), BAD_STAKE, BAD_FEE,
    BAD_DEALER (the first to act is a seat in the hand), BAD_OWNER, UNKNOWN_RULES_VERSION,
    BAD_OPTION.
    """
    options: Any = parse_options(game.options_type, resolve_options(game.option_defaults, started))
    ante = ante_gold(started, options)
    validate_start(game.spec, started, stack_min_gold=max(1, ante), seats_max_max=SEATS_MAX)
    order = tuple(
        seats_in_order([i.seat for i in started.seats], started.dealer_seat, started.seats_max, COUNTERCLOCKWISE)
    )
    return LiengState.create(
        started=started,
        rules_version=played_rules_version(started),
        options=options,
        rounds=game.rounds,
        order=order,
        stacks_gold={i.seat: i.stack_gold for i in started.seats},
        hands={s: () for s in order},
        put_in_gold=dict.fromkeys(order, ante),
        round_put_in_gold=dict.fromkeys(order, 0),
    )


def sizing(state: LiengState) -> betting.Sizing:
    """Bets and raises of k × S above the call, k from 1 to ``raise_max_stakes`` (LI-4, LS-3,
    LS-11); no voluntary all-in: a short stack calls all-in instead."""
    stake = state.started.stake_gold
    return betting.Sizing(stake, stake * state.options.raise_max_stakes, step_gold=stake)


def _to_call(state: LiengState, seat: int) -> int:
    return betting.to_call(state.round_put_in_gold, seat)


def _start_round(new: LiengState, betting_round: int) -> None:
    """Open betting round ``betting_round`` in ``new`` (a draft), or end the play when
    there is nobody left to bet against."""
    live = betting.live(new)
    betting.reset_round(new, betting_round)
    # LS-4: each round starts with the first active player from the same position.
    new.round_order = tuple(live)
    if len(live) <= 1 or betting.with_chips(new, live) <= 1:
        new.phase = PLAY_OVER  # nobody left to bet against: straight to the showdown
        return
    new.phase = BETTING
    betting.next_turn(new, None, _waiting, _close_round)


def _close_round(new: LiengState) -> None:
    if betting.live_count(new) <= 1 or new.betting_round >= new.rounds:
        new.phase = PLAY_OVER
        new.to_act = None
        return
    _start_round(new, new.betting_round + 1)


def _waiting(state: LiengState) -> list[int]:
    return betting.waiting(
        state.round_order,
        state.round_put_in_gold,
        state.acted,
        state.folded,
        {s: betting.remaining(state, s) for s in state.round_order},
    )


def _apply_deal(game: LiengFamily, state: LiengState, body: CardsDealt) -> LiengState:
    if state.phase != DEALING:
        raise RuleViolation("WRONG_DEAL", "no cards are due now")
    dealt = check_deal(body, deal_three_face_down(betting.live(state)), game.deck_cards, game.spec.name)
    new = state.draft()
    new.hands = {**state.hands, **dealt}
    _start_round(new, 1)
    return freeze(new)


def _apply_bet(state: LiengState, action: BetAction) -> LiengState:
    seat, amount = action.seat, action.amount_gold
    betting.check_turn(state, seat)
    kind = betting.action_kind(action.kind)
    if type(amount) is not int or amount < 0:
        raise RuleViolation("BAD_AMOUNT", "a negative amount")
    if kind == ActionKind.FOLD:
        if amount != 0:
            raise RuleViolation("BAD_AMOUNT", "a fold adds nothing")
        return betting.fold(state, seat, _waiting, _close_round)
    betting.check_action(sizing(state), kind, amount, _to_call(state, seat), betting.remaining(state, seat))
    return betting.put_in(state, seat, amount, _waiting, _close_round)


def _apply_timer(state: LiengState, body: TimerExpired) -> LiengState:
    """GEN-5: a turn timeout checks ("Chuyển" in Liêng Sảnh) when free, otherwise folds."""
    if body.timer != TURN_TIMER:
        raise RuleViolation("WRONG_TIMER", f"this game has no {body.timer!r} timer")
    betting.check_turn(state, body.seat)
    if betting.timeout_checks(_to_call(state, body.seat)):
        return betting.put_in(state, body.seat, 0, _waiting, _close_round)
    return betting.fold(state, body.seat, _waiting, _close_round)


def _forfeit(state: LiengState, seat: int) -> LiengState:
    """LI-5, 12.5, GEN-6: a player who disconnects or leaves is folded at once, in or out of
    turn, and forfeits everything already in the pot."""
    betting.known_seat(state, seat)
    if state.phase in (PLAY_OVER, ENDED) or seat in state.folded:
        return state
    new = state.draft()
    new.folded = state.folded | {seat}
    new.forfeited = state.forfeited | {seat}
    if state.phase == BETTING and state.to_act == seat:
        betting.next_turn(new, seat, _waiting, _close_round)
    else:
        betting.next_turn(new, None, _waiting, _close_round)
    return freeze(new)


def lieng_apply(game: LiengFamily, state: LiengState, body: Body) -> LiengState:
    """The state after ``body``; ``state`` itself is never changed.

    Raises RuleViolation with a stable code (HAND_FINISHED, UNKNOWN_SEAT, SEAT_FOLDED,
    NOT_YOUR_TURN, the betting codes of ``betting.check_action``, WRONG_DEAL, BAD_CARD,
    DUPLICATE_CARD, WRONG_TIMER, HAND_NOT_OVER, UNEXPECTED_EVENT).
    """
    if state.phase == ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    if isinstance(body, CardsDealt):
        return _apply_deal(game, state, body)
    if isinstance(body, BetAction):
        return _apply_bet(state, body)
    if isinstance(body, TimerExpired):
        return _apply_timer(state, body)
    # A disconnect is leaving (LI-5, 12.5), then reconnect, HandEnded, bodies it never has.
    return common_event(
        state,
        body,
        game_name=game.spec.name,
        seats=state.stacks_gold,
        over=state.phase == PLAY_OVER,
        leave=_forfeit,
        end=hand_ended,
        disconnect_leaves=True,
    )


def lieng_pending(state: LiengState) -> Pending:
    if state.phase in (PLAY_OVER, ENDED):
        return Pending(finished=True)
    if state.phase == DEALING:
        return Pending(deal=deal_three_face_down(betting.live(state)))
    return betting.turn_pending(state, state.options.turn_timeout_s)


def lieng_legal_actions(state: LiengState, seat: int) -> tuple[LegalAction, ...]:
    """The moves of ``seat`` now (empty unless it is its turn): check ("Chuyển") or call
    ("Theo", "Cân"), bet or raise ("Tố") by k × S, all-in when the call takes everything,
    fold ("Bỏ", "Úp bỏ")."""
    if state.phase != BETTING or state.to_act != seat:
        return ()
    return betting.legal_actions(sizing(state), _to_call(state, seat), betting.remaining(state, seat))


def held(state: Any, seat: int) -> tuple[Card, ...]:
    """The three cards dealt to ``seat`` (Liêng, Liêng Sảnh, 3 Cây Gà, Ba Cây Chương)."""
    cards: tuple[Card, ...] = state.hands.get(seat, ())
    return cards


def lieng_facing(state: LiengState, seat: int) -> Facing:
    """The bet ``seat`` must match when it is its turn (``bet``, what calling adds)."""
    return bet_facing(lieng_legal_actions(state, seat))


def flip_facing(state: Any, seat: int) -> Facing:
    """``flip`` while ``seat`` has still to flip."""
    if flip_legal_actions(state, seat):
        return Facing("flip", text="turn your three cards face up")
    return Facing()


def lieng_candidate_actions(state: LiengState, seat: int) -> list[Body]:
    """A small finite set of legal BetActions: check or call, fold, and bets or raises of
    1 × S, 2 × S and the most allowed above the call."""
    stake = state.started.stake_gold
    return betting.candidate_bets(
        seat,
        lieng_legal_actions(state, seat),
        lambda action: (action.min_gold, action.min_gold + stake, action.max_gold),
    )


def values_of(game: LiengFamily, state: LiengState, seats: Sequence[int]) -> dict[int, ThreeCardValue]:
    """The hand values of ``seats`` that were dealt their cards."""
    return {s: game.value(state.hands[s]) for s in seats if len(state.hands[s]) == CARDS_PER_SEAT}


def lieng_winner(game: LiengFamily, state: LiengState) -> int:
    """The seat that won the hand (the main pot): the last seat standing, or the best hand
    at showdown. Raises RuleViolation("HAND_NOT_OVER") before that."""
    if state.phase not in (PLAY_OVER, ENDED):
        raise RuleViolation("HAND_NOT_OVER", "the hand has no winner yet")
    live = betting.live(state)
    if len(live) == 1:
        return live[0]
    return threecard.winner(values_of(game, state, live))


def sap_bonus_seat(game: LiengFamily, state: LiengState) -> int | None:
    """Liêng Sảnh (12.4, LS-5, LS-12): the seat dealt the best Sáp, folded or not, or None."""
    if not game.sap_bonus:
        return None
    values = values_of(game, state, state.order)
    return threecard.sap_bonus_seat(values) if values else None  # type: ignore[arg-type]


# The first rules version of Liêng and Liêng Sảnh in which a leaver forfeits all it put in
# to the showdown winner (``_award``).
LEAVER_FORFEITS_ALL_FROM: Final = 2


def lieng_settle(game: LiengFamily, state: LiengState) -> Settlement:
    """The hand's transfers: each pot (antes, calls and raises) to its best eligible hand or
    the last player left (5.4, 12.4, LI-6), unmatched chips of the players still in back;
    everything a seat that disconnected or left had put in to the showdown winner as
    ``disconnect_forfeit`` (LI-5, 12.5; ``_award``); in Liêng Sảnh the Sáp bonus from every
    other player dealt in, capped at what each has left (GEN-4); then the fee on each net
    win (GEN-1).

    Raises RuleViolation("HAND_NOT_OVER") before HandEnded.
    """
    if state.phase != ENDED:
        raise RuleViolation("HAND_NOT_OVER", "settle needs a finished hand")
    started = state.started
    builder = SettlementBuilder(
        game.spec.game_id, started.table_id, started.hand_id, {i.seat: i.player_id for i in started.seats}
    )
    payout_order = seats_after(state.order, started.dealer_seat, started.seats_max, COUNTERCLOCKWISE)
    values = values_of(game, state, state.order)

    def best(eligible: tuple[int, ...]) -> list[int]:
        return [threecard.winner({s: values[s] for s in eligible})]

    _award(game, state, builder, best, payout_order)
    # Every seat's first ante_gold lost, a leaver's aside, is its ante, which always lies in
    # the main pot (a stack covers it).
    ante = ante_gold(started, state.options)
    antes = {builder.account(s): ante for s in state.order if s not in state.forfeited}
    builder.transfers = pots.relabel_losses(builder.transfers, antes, ANTE, ("pot",))
    bonus_seat = sap_bonus_seat(game, state)
    if bonus_seat is not None:
        bonus = started.stake_gold * state.options.sap_bonus_stakes
        owed = [Obligation(s, bonus_seat, bonus, SAP_BONUS) for s in payout_order if s != bonus_seat]
        pay_obligations(builder, owed, state.stacks_gold, payout_order)
    builder.charge_fees(started.fee_bps, payout_order)
    return check_settlement(builder.build(), state.stacks_gold)


def _award(
    game: LiengFamily,
    state: LiengState,
    builder: SettlementBuilder,
    best: Callable[[tuple[int, ...]], Sequence[int]],
    payout_order: Sequence[int],
) -> None:
    """The pots, and what the seats that disconnected or left had put in (LI-5, 5.4, 12.4,
    12.5): they forfeit all of it, which the showdown winner takes (the best hand still in,
    or the last player left: the winner of the main pot, which every leaver was in).
    Neither "uncalled" nor the all-in limit of 3.3 gives a leaver's chips back or to
    another pot's winner; the limit protects only what the players still in put in beyond
    an all-in winner's stack: the pots are built from their chips alone.

    Version 1, kept for the hands recorded under it, built the pots from every seat's chips:
    a leaver's chips that no player still in had matched came back to it as ``uncalled``,
    and those above an all-in winner's stack went to a side pot's winner; the leaver's
    losses were labelled ``disconnect_forfeit`` afterwards (``pots.relabel_losses``).
    """
    live = betting.live(state)
    if state.rules_version < LEAVER_FORFEITS_ALL_FROM:
        pots.award_pots(builder, pots.build_pots(state.put_in_gold, live), best, payout_order)
        forfeit = {builder.account(s): state.put_in_gold[s] for s in state.forfeited}
        builder.transfers = pots.relabel_losses(builder.transfers, forfeit, DISCONNECT_FORFEIT, ("pot", "side_pot"))
        return
    staying = {s: put for s, put in state.put_in_gold.items() if s not in state.forfeited}
    pots.award_pots(builder, pots.build_pots(staying, live), best, payout_order)
    winner = lieng_winner(game, state)
    for seat in payout_order:
        if seat in state.forfeited:
            builder.pay_seat(seat, winner, state.put_in_gold[seat], DISCONNECT_FORFEIT)


def lieng_next_hand_dealer(
    game: LiengFamily,
    previous_state: LiengState | None,
    participants: Sequence[int],
    owner_seat: int,
) -> int:
    """The first to act in the next hand (LI-4, LS-4): the table owner in the first hand,
    then the previous hand's winner; when that seat no longer plays, the owner, else the
    first participating seat."""
    champion = None
    if previous_state is not None and previous_state.phase in (PLAY_OVER, ENDED):
        champion = lieng_winner(game, previous_state)
    return seat_or_owner(champion, participants, owner_seat)


__all__ = [
    "CARDS_PER_SEAT",
    "DEALING",
    "ENDED",
    "FLIP",
    "FLIPPING",
    "FLIP_TIMER",
    "PLAY_OVER",
    "SEATS_MAX",
    "TURN_TIMER",
    "WAGERING",
    "LiengFamily",
    "LiengState",
    "check_deal",
    "deal_three_face_down",
    "flip_visible",
]


# --- the Ba Cây flip -------------------------------------------------------------------------
# Both Ba Cây states have the fields ``order``, ``hands``, ``flipped``, ``out`` (seats that
# disconnected or left: their cards do not count, GA-6, CH-5, CH-7) and ``phase``.

FLIP_TIMEOUT_S: Final = 15  # 7.1, 8.1: 15 s to squeeze or flip
FAST_FLIP_TIMEOUT_S: Final = 7  # 7 s in fast mode


def flip_timeout_s(fast_mode: bool) -> int:
    """GEN-5: 15 s to squeeze or flip, 7 s in fast mode (7.1, 8.1)."""
    return FAST_FLIP_TIMEOUT_S if fast_mode else FLIP_TIMEOUT_S


def still_to_flip(state: Any) -> tuple[int, ...]:
    """The seats that have not flipped yet and still take part, in dealing order."""
    return tuple(s for s in state.order if s not in state.flipped and s not in state.out)


def after_flip_change(new: Any) -> None:
    """End the flipping (the timer ends early, 7.1) once nobody is left to flip."""
    if new.phase == FLIPPING and not still_to_flip(new):
        new.phase = PLAY_OVER


def check_flip(state: Any, seat: int) -> None:
    """A flip of ``seat`` now, by its ``Declared(seat, "flip")`` or its timer.

    Raises RuleViolation: HAND_FINISHED (the result is decided), UNKNOWN_SEAT, SEAT_LEFT
    (the seat disconnected or left: its cards no longer count), NOT_YOUR_TURN (no flipping
    now), ALREADY_ACTED (the seat has flipped)."""
    if state.phase == PLAY_OVER:
        raise RuleViolation("HAND_FINISHED", "the hand's result is already decided")
    if seat not in state.hands:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat} is not in this hand", seat=seat)
    if seat in state.out:
        raise RuleViolation("SEAT_LEFT", f"seat {seat} has left the hand", seat=seat)
    if state.phase != FLIPPING:
        raise RuleViolation("NOT_YOUR_TURN", "no cards are being flipped now", seat=seat)
    if seat in state.flipped:
        raise RuleViolation("ALREADY_ACTED", f"seat {seat} has flipped", seat=seat)


def flip(state: Any, seat: int) -> Any:
    """The state after ``seat`` flips, by its ``Declared(seat, "flip")`` or its timer
    (7.1, 8.1), with the checks of ``check_flip``."""
    check_flip(state, seat)
    return state.derive(flipped=state.flipped | {seat})


def apply_flip_declared(state: Any, body: Declared, game_name: str) -> Any:
    """A ``Declared`` in a Ba Cây game: only the flip. Raises RuleViolation:
    BAD_DECLARATION for any other declaration, and those of ``check_flip``."""
    if body.declaration != FLIP:
        raise RuleViolation("BAD_DECLARATION", f"{game_name} has only {FLIP!r}, not {body.declaration!r}")
    # ``flip``, written out: every seat's flip of every replayed hand comes here.
    seat = body.seat
    check_flip(state, seat)
    return state.derive(flipped=state.flipped | {seat})


def deal_to_flip(state: Any, body: CardsDealt, deck_cards: frozenset[Card], game_name: str) -> Any:
    """The state after the deal of three cards face down to every seat in ``order``, with
    the flipping open. Raises RuleViolation: WRONG_DEAL (no deal is due, or other slots),
    BAD_CARD, DUPLICATE_CARD."""
    if state.phase != DEALING:
        raise RuleViolation("WRONG_DEAL", "no cards are due now")
    dealt = check_deal(body, deal_three_face_down(state.order), deck_cards, game_name)
    return state.derive(hands={**state.hands, **dealt}, phase=FLIPPING)


def flip_pending(state: Any) -> Pending:
    """The seats still to flip, on one flip timer (15 s, 7 s with ``fast_mode``)."""
    return Pending(to_act=still_to_flip(state), timer=FLIP_TIMER, timeout_s=flip_timeout_s(state.options.fast_mode))


def flip_legal_actions(state: Any, seat: int) -> tuple[LegalAction, ...]:
    """``declare:flip`` while ``seat`` has cards to flip, else nothing."""
    if state.phase == FLIPPING and seat in still_to_flip(state):
        return (LegalAction(f"declare:{FLIP}"),)
    return ()


def counting_values(state: Any) -> dict[int, BaCayValue]:
    """The Ba Cây hands that count, in dealing order: dealt, and their seat not
    disconnected or left (GA-6, CH-5, CH-7)."""
    hands = state.hands
    return {
        s: threecard.bacay_value(hands[s])
        for s in state.order
        if s not in state.out and len(hands[s]) == CARDS_PER_SEAT
    }
