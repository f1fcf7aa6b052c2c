"""The betting round of the pot games, written once (Xì Tố now; Liêng, Liêng Sảnh and the
Ba Cây games next).

A round is a few plain values the game keeps in its state: ``order`` (the seats in
betting order, from the opener, in the game's direction), each seat's chips put in this
round (``round_put_in``), the seats that acted since the last raise (``acted``), and the
seat to act. What the game adds around it: who opens (Xì Tố's card ranking, Liêng's
previous winner), the bet sizes of the round (``Sizing``), the forced bet or ante, and
the pots at the end (``socai.rules.pots``: main pot and side pots from each seat's total).

Amounts are always the chips an action *adds* (``BetAction.amount_gold``). The rules every
game shares:

- check (``CHECK``, Liêng Sảnh's "Chuyển"): only when the seat owes nothing; a round of
  checks all the way round closes the round with nobody adding;
- call: exactly what the seat owes, or everything it has left when that is less (a
  short stack's call is always allowed, XT-10, LI-4, LS-3); as ``ALL_IN`` too;
- bet (nobody has bet) and raise: the call plus an increment of ``Sizing.min_gold`` to
  ``Sizing.max_gold`` in steps of ``Sizing.step_gold`` (k × S raises with a cap: Liêng
  LI-4 and Liêng Sảnh LS-3, k 1..30); a bet or raise of everything left is a voluntary
  all-in, allowed only with ``Sizing.all_in`` (Xì Tố's Tẩy Max, XT-10);
- every raise reopens the round (raises are unlimited, XT-11, LI-4, LS-3);
- fold at any turn; a timeout checks when a check is free, otherwise folds (GEN-5); a
  seat that leaves folds at once, in or out of turn, its chips staying in (GEN-6).

The round ends when every seat that is neither folded nor all-in has acted since the last
raise and matched the highest contribution (``waiting`` is empty).

The second half of this module is the hand around the rounds, for a state that keeps the
round's values under the same names (``BettingHand``: Xì Tố's and the Liêng family's):
whose turn it is (``check_turn``, ``next_turn``), putting chips in and folding, and what
the hand waits for. The game passes in what differs: when a round is over (its
``waiting``) and what follows it (its ``close_round``: the next card, the next round or
the showdown).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, Self, TypeVar

from socai.errors import RuleViolation, check
from socai.events.model import ActionKind, BetAction, Body
from socai.rules import base
from socai.rules.base import LegalAction, Pending, freeze

CHECK: Final = ActionKind.CHECK
BET: Final = ActionKind.BET
CALL: Final = ActionKind.CALL
RAISE: Final = ActionKind.RAISE
FOLD: Final = ActionKind.FOLD
ALL_IN: Final = ActionKind.ALL_IN

TURN_TIMER: Final = "turn"

# Phases of a betting hand.
DEALING: Final = "dealing"  # the table must deal pending(state).deal
BETTING: Final = "betting"  # a betting round waits for ``to_act``
PLAY_OVER: Final[str] = base.PLAY_OVER  # the result is decided; only HandEnded is expected
ENDED: Final[str] = base.ENDED  # HandEnded applied; settle() may run


@dataclass(frozen=True, slots=True, init=False)
class Sizing:
    """The bets and raises of one round, as increments above the call.

    ``min_gold``..``max_gold`` (None: no cap but the stack), in multiples of ``step_gold``
    (1: free amounts; S: k × S). ``all_in``: a voluntary bet or raise of everything left is
    allowed (beyond the cap). Without it a bet must leave the seat at least one chip.
    """

    min_gold: int
    max_gold: int | None
    step_gold: int = 1
    all_in: bool = False

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, min_gold: int, max_gold: int | None, step_gold: int = 1, all_in: bool = False) -> None:
        object.__setattr__(self, "min_gold", min_gold)
        object.__setattr__(self, "max_gold", max_gold)
        object.__setattr__(self, "step_gold", step_gold)
        object.__setattr__(self, "all_in", all_in)


# Each ActionKind by its value: ``ActionKind(value)`` runs Enum's interpreted ``__call__``
# (about 1 µs), and the bots' candidates name a kind for every legal action of every turn.
_ACTION_KINDS: Final[dict[object, ActionKind]] = {kind.value: kind for kind in ActionKind}


def action_kind(kind: object) -> ActionKind:
    """``kind`` as an ActionKind; RuleViolation("BAD_BET_KIND") for anything else."""
    if type(kind) is ActionKind:
        return kind
    try:
        found = _ACTION_KINDS.get(kind)
    except TypeError:  # unhashable: no kind's value
        found = None
    if found is None:
        raise RuleViolation("BAD_BET_KIND", f"unknown action {kind!r}")
    return found


def to_call(round_put_in: Mapping[int, int], seat: int) -> int:
    """What ``seat`` owes to match the highest contribution of the round."""
    return max(round_put_in.values()) - round_put_in[seat]


def wager_bounds(sizing: Sizing | None, owed: int, remaining: int) -> tuple[int, int] | None:
    """The smallest and largest legal BET/RAISE (chips added, the call included), or None
    when the seat cannot bet or raise (no sizing this round, or too few chips)."""
    if sizing is None or sizing.min_gold <= 0:
        return None
    if sizing.all_in and sizing.max_gold is None:
        top = remaining
    else:
        # Without a voluntary all-in the seat keeps at least one chip back.
        room = remaining - owed - (0 if sizing.all_in else 1)
        cap = room if sizing.max_gold is None else min(sizing.max_gold, room)
        cap -= cap % sizing.step_gold if sizing.step_gold > 1 else 0
        top = owed + cap
        if sizing.all_in and remaining > top:
            top = remaining
    low = owed + sizing.min_gold
    return (low, top) if top >= low else None


def check_wager(sizing: Sizing | None, kind: ActionKind, amount: int, owed: int, remaining: int) -> None:
    """A BET or RAISE of ``amount`` chips (the call included) against ``sizing``.

    Raises RuleViolation: BAD_BET_KIND (no bets this round), BET_TOO_SMALL /
    RAISE_TOO_SMALL, BET_ABOVE_STACK, BET_TOO_LARGE / RAISE_TOO_LARGE, BAD_AMOUNT (not a
    multiple of the step), ALL_IN_NOT_ALLOWED (everything left without ``Sizing.all_in``).
    """
    if sizing is None or sizing.min_gold <= 0:
        raise RuleViolation("BAD_BET_KIND", "this round has no bets or raises")
    increment = amount - owed
    if increment < sizing.min_gold:
        code = "BET_TOO_SMALL" if kind == BET else "RAISE_TOO_SMALL"
        raise RuleViolation(code, f"{kind.value} of {increment} above the call; least {sizing.min_gold}")
    if amount > remaining:
        raise RuleViolation("BET_ABOVE_STACK", f"{amount} is more than the {remaining} chips left")
    all_in = amount == remaining
    if sizing.max_gold is not None and increment > sizing.max_gold and not (all_in and sizing.all_in):
        code = "BET_TOO_LARGE" if kind == BET else "RAISE_TOO_LARGE"
        raise RuleViolation(code, f"{kind.value} of {increment} above the call; most {sizing.max_gold}")
    if sizing.step_gold > 1 and increment % sizing.step_gold and not (all_in and sizing.all_in):
        raise RuleViolation("BAD_AMOUNT", f"a {kind.value} is a multiple of {sizing.step_gold} above the call")
    if all_in and not sizing.all_in:
        raise RuleViolation("ALL_IN_NOT_ALLOWED", "a voluntary all-in is not allowed now")


def check_action(sizing: Sizing | None, kind: ActionKind, amount: int, owed: int, remaining: int) -> int:
    """The chips a CHECK, CALL, BET, RAISE or ALL_IN adds, or RuleViolation (BAD_BET_KIND,
    BAD_AMOUNT, ALL_IN_NOT_ALLOWED and those of ``check_wager``). FOLD is the game's."""
    if kind == CHECK:
        if owed != 0:
            raise RuleViolation("BAD_BET_KIND", f"cannot check facing {owed}")
        if amount != 0:
            raise RuleViolation("BAD_AMOUNT", "a check adds nothing")
    elif kind == CALL:
        if owed == 0:
            raise RuleViolation("BAD_BET_KIND", "nothing to call: check or bet")
        if amount != min(owed, remaining):
            raise RuleViolation("BAD_AMOUNT", f"the call is {min(owed, remaining)}")
    elif kind == BET:
        if owed != 0:
            raise RuleViolation("BAD_BET_KIND", "there is a bet already: call or raise")
        check_wager(sizing, kind, amount, owed, remaining)
    elif kind == RAISE:
        if owed == 0:
            raise RuleViolation("BAD_BET_KIND", "nothing to raise: bet")
        check_wager(sizing, kind, amount, owed, remaining)
    elif kind == ALL_IN:
        if amount != remaining:
            raise RuleViolation("BAD_AMOUNT", f"all-in is all {remaining} chips left")
        if remaining > owed and not (sizing is not None and sizing.all_in):
            raise RuleViolation("ALL_IN_NOT_ALLOWED", "a voluntary all-in is not allowed now")
    else:
        raise RuleViolation("BAD_BET_KIND", f"{kind.value} is not a betting action here")
    return amount


def legal_actions(sizing: Sizing | None, owed: int, remaining: int) -> tuple[LegalAction, ...]:
    """The moves of a seat whose turn it is: check or call, bet or raise with the bounds of
    ``wager_bounds``, all-in when the call takes everything or ``Sizing.all_in``, fold."""
    actions = []
    if owed == 0:
        actions.append(LegalAction(CHECK.value))
    else:
        call = min(owed, remaining)
        actions.append(LegalAction(CALL.value, call, call))
    bounds = wager_bounds(sizing, owed, remaining)
    if bounds is not None:
        step = sizing.step_gold if sizing is not None else 0
        actions.append(LegalAction((BET if owed == 0 else RAISE).value, bounds[0], bounds[1], step))
    if remaining <= owed or (sizing is not None and sizing.all_in and remaining > owed):
        actions.append(LegalAction(ALL_IN.value, remaining, remaining))
    actions.append(LegalAction(FOLD.value))
    return tuple(actions)


def after_put_in(
    round_put_in: Mapping[int, int], acted: frozenset[int], seat: int, amount: int, raises_reopen: bool = True
) -> tuple[dict[int, int], frozenset[int]]:
    """The round after ``seat`` adds ``amount``: its contributions, and who has acted (a
    raise reopens the round: everyone else must answer it; not so for a forced bet)."""
    highest = max(round_put_in.values())
    new_put_in = {**round_put_in, seat: round_put_in[seat] + amount}
    raised = raises_reopen and new_put_in[seat] > highest
    return new_put_in, frozenset((seat,)) if raised else acted | {seat}


def waiting(
    order: Sequence[int],
    round_put_in: Mapping[int, int],
    acted: Collection[int],
    folded: Collection[int],
    remaining: Mapping[int, int],
    answers_raises: bool = True,
) -> list[int]:
    """Seats that still owe a decision this round, in betting order: not folded, not
    all-in (``remaining`` 0), and not acted since the last raise or (with
    ``answers_raises``) below the highest contribution."""
    highest = max(round_put_in.values())
    out = []
    for s in order:
        if s in folded or remaining[s] == 0:
            continue
        if s not in acted or (answers_raises and round_put_in[s] < highest):
            out.append(s)
    return out


def next_seat(order: Sequence[int], owing: Sequence[int], after: int | None, current: int | None) -> int:
    """Who acts next among ``owing`` (non-empty, ``waiting``): after ``after`` in ``order``,
    or with ``after`` None the current seat when it still owes, else the first."""
    if after is None:
        return current if current is not None and current in owing else owing[0]
    start = order.index(after)
    return next(s for s in (*order[start + 1 :], *order[: start + 1]) if s in owing)


def timeout_checks(owed: int, check_allowed: bool = True) -> bool:
    """GEN-5: a turn timeout checks when a check is free (and the round allows one),
    otherwise the seat folds."""
    return check_allowed and owed == 0


# --- the hand around the rounds ------------------------------------------------------------


class BettingHand(Protocol):
    """The fields a betting game's state keeps (a ``base.game_state`` class).

    ``order`` lists the dealt seats in the game's direction; ``put_in_gold`` is each seat's
    total in the pot this hand, ``round_put_in_gold`` its part in the current round;
    ``acted`` the seats that acted since the last raise of the round; ``round_order`` the
    round's betting order, from its opener.
    """

    order: tuple[int, ...]
    stacks_gold: Mapping[int, int]
    put_in_gold: Mapping[int, int]
    round_put_in_gold: Mapping[int, int]
    folded: frozenset[int]
    acted: frozenset[int]
    phase: str
    betting_round: int
    round_order: tuple[int, ...]
    to_act: int | None

    def draft(self) -> Self: ...


H = TypeVar("H", bound=BettingHand)


def remaining(hand: BettingHand, seat: int) -> int:
    """The chips ``seat`` has left behind what it put in this hand."""
    return hand.stacks_gold[seat] - hand.put_in_gold[seat]


def live(hand: BettingHand) -> list[int]:
    """The seats that have not folded, in ``order``."""
    folded = hand.folded
    return [s for s in hand.order if s not in folded]


def live_count(hand: BettingHand) -> int:
    """``len(live(hand))``: only seats of the hand ever fold (``known_seat`` first)."""
    return len(hand.order) - len(hand.folded)


def with_chips(hand: BettingHand, seats: Iterable[int]) -> int:
    """How many of ``seats`` have chips left to bet (not all-in)."""
    stacks = hand.stacks_gold
    put_in_gold = hand.put_in_gold
    return sum(1 for s in seats if stacks[s] > put_in_gold[s])


def reset_round(new: BettingHand, betting_round: int) -> None:
    """Make ``new`` (a draft) betting round ``betting_round`` with nothing put in, nobody
    acted and nobody to act yet; the game then picks the opener."""
    new.betting_round = betting_round
    new.round_put_in_gold = dict.fromkeys(new.order, 0)
    new.acted = frozenset()
    new.to_act = None


def known_seat(hand: BettingHand, seat: int) -> None:
    """Raises RuleViolation("UNKNOWN_SEAT") for a seat not dealt into the hand."""
    if seat not in hand.stacks_gold:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat} is not in this hand", seat=seat)


def check_turn(hand: BettingHand, seat: int) -> None:
    """A decision of ``seat`` now. Raises RuleViolation: HAND_FINISHED (the result is
    decided), UNKNOWN_SEAT, SEAT_FOLDED, NOT_YOUR_TURN."""
    if hand.phase == PLAY_OVER:
        raise RuleViolation("HAND_FINISHED", "the hand's result is already decided")
    known_seat(hand, seat)
    if seat in hand.folded:
        raise RuleViolation("SEAT_FOLDED", f"seat {seat} has folded", seat=seat)
    if hand.phase != BETTING or hand.to_act != seat:
        raise RuleViolation("NOT_YOUR_TURN", f"seat {seat} is not to act", seat=seat)


def next_turn(new: H, after: int | None, owing: Callable[[H], list[int]], close_round: Callable[[H], None]) -> None:
    """Hand the turn on after ``after`` acted (None: keep the current seat if it still
    owes a decision), or close the round (``close_round``) when nobody owes one
    (``owing``, the game's ``waiting``), or end the play when one seat is left. Changes
    ``new``, a draft not yet returned."""
    # ``live_count``, written out: this runs after every action of every replayed hand.
    if len(new.order) - len(new.folded) <= 1:
        new.phase = PLAY_OVER
        new.to_act = None
        return
    if new.phase != BETTING:
        return
    waiting_seats = owing(new)
    if not waiting_seats:
        close_round(new)
        return
    new.to_act = next_seat(new.round_order, waiting_seats, after, new.to_act)


def put_in(
    state: H,
    seat: int,
    amount: int,
    owing: Callable[[H], list[int]],
    close_round: Callable[[H], None],
    raises_reopen: bool = True,
) -> H:
    """The hand after ``seat`` adds ``amount`` chips (checked by the caller), the turn
    handed on by ``next_turn`` with the game's ``owing`` and ``close_round``.
    ``raises_reopen`` as in ``after_put_in``."""
    put_in_gold = {**state.put_in_gold, seat: state.put_in_gold[seat] + amount}
    check(put_in_gold[seat] <= state.stacks_gold[seat], "a seat put in more than its stack")
    round_put_in, acted = after_put_in(state.round_put_in_gold, state.acted, seat, amount, raises_reopen)
    new = state.draft()
    new.put_in_gold = put_in_gold
    new.round_put_in_gold = round_put_in
    new.acted = acted
    next_turn(new, seat, owing, close_round)
    return freeze(new)  # type: ignore[type-var]  # a BettingHand is a GameState


def fold(state: H, seat: int, owing: Callable[[H], list[int]], close_round: Callable[[H], None]) -> H:
    """The hand after ``seat`` folds in turn, the turn handed on as by ``put_in``."""
    new = state.draft()
    new.folded = state.folded | {seat}
    new.acted = state.acted | {seat}
    next_turn(new, seat, owing, close_round)
    return freeze(new)  # type: ignore[type-var]  # a BettingHand is a GameState


def turn_pending(hand: BettingHand, timeout_s: int) -> Pending:
    """What a hand in a betting round waits for: the seat to act, on the turn timer."""
    to_act = hand.to_act
    check(to_act is not None, "a betting hand has a seat to act")
    return Pending(to_act=(to_act,) if to_act is not None else (), timer=TURN_TIMER, timeout_s=timeout_s)


def candidate_bets(
    seat: int, legal: Iterable[LegalAction], wager_amounts: Callable[[LegalAction], Iterable[int]]
) -> list[Body]:
    """A small finite set of the BetActions ``legal`` allows (bots, property tests): check
    or call, fold, all-in unless it is the call, and the amounts ``wager_amounts`` names
    for a bet or raise that lie within its bounds, each once, smallest first."""
    legal = tuple(legal)
    out: list[Body] = []
    calls = {a.min_gold for a in legal if a.kind == CALL.value}
    for action in legal:
        kind = action_kind(action.kind)
        if kind in (CHECK, FOLD):
            out.append(BetAction(seat, kind, 0))
        elif kind == CALL:
            out.append(BetAction(seat, kind, action.min_gold))
        elif kind == ALL_IN:
            if action.min_gold not in calls:  # a short call is already offered as CALL
                out.append(BetAction(seat, kind, action.min_gold))
        else:
            for amount in sorted(set(wager_amounts(action))):
                if action.min_gold <= amount <= action.max_gold:
                    out.append(BetAction(seat, kind, amount))
    return out
