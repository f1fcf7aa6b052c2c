"""The game kit: what every game module shares, written once.

Every game module (``socai.rules.poker.holdem``, ``socai.rules.poker.xito`` …) has the same shape,
checked by mypy through the ``GameRules`` Protocol (``socai.rules.registry.rules``)::

    SPEC: GameSpec
    RULES_VERSION: int                       # bump when a rule or an Options default changes
    OPTION_DEFAULTS: {version: {name: text}} # every option's default under each version
    REASONS: {code: Reason}                  # every settlement reason code it can emit
    Options                                  # frozen dataclass of the game's named flags
    initial_state(hand_started) -> State     # raises RuleViolation for a bad start
    apply(state, body) -> State              # never mutates ``state``; raises RuleViolation
    pending(state) -> Pending                # what the hand waits for next
    legal_actions(state, seat) -> tuple[LegalAction, ...]
    candidate_actions(state, seat) -> list[Body]   # a finite set of legal moves (bots, tests)
    is_finished(state) -> bool
    settle(state) -> Settlement              # only when finished
    MOVES, TIMERS                            # the MOVE_KINDS it offers, the Pending.timer names it runs
    hand_value(cards) -> value               # games that compare hands

and may define these hooks (the kit's defaults apply otherwise):

    next_hand_dealer(previous_state, previous_dealer, participants, seats_max, owner_seat,
                     stacks=None) -> int     # default ``next_hand_dealer`` below
    visible(body, viewer_seat, state) -> Body | None   # default ``visible`` below
    can_play(stack_gold, stake_gold, options) -> bool   # default: any chips at all
    players_min_with(options) -> int         # the fewest players dealt in; default SPEC.players_min
    default_fee_bps(options) -> int          # default: SPEC.default_fee_bps
    house_exposure_gold(state) -> int        # what house:bank may lose; default 0 (``house_exposure``)
    held(state, seat) -> cards               # what the seat holds now; default none (``held_cards``)
    facing(state, seat) -> Facing            # what the seat must beat or answer; default nothing
    legal_moves(state, seat) -> MoveSets     # default: one per legal_actions entry (``legal_moves``)
    committed_gold(state, seat) -> int       # what leaving now forfeits; default 0 (``forfeit``)
    LEAVE_RULE, REFUSAL_RULES                # the rule a forfeit / a refusal cites (default GEN-6 / its section)
    closing_pot_settlement(table_id, hand_id, pot_gold, seat_players) -> Settlement
                                             # a pot carried when the table closes (Ba Cây Gà)
    warm()                                   # build lookup tables ahead of the first hand

The kit (this module, ``betting`` and ``pots``):

- one state style: ``@game_state`` classes, frozen and slotted, the field list written once
  (the annotations); ``state.derive(field=value, …)`` is the one way to make a new state,
  ``state.draft()`` … ``freeze(draft)`` the same for code that changes several fields in
  steps;
- ``validate_start``: a HandStarted against SPEC (seat count, seats and players unique,
  stacks, stake, fee range, dealer and owner seats), with the codes of ``RULE_CODES``;
- ``RULE_CODES``: the one documented set of RuleViolation codes of every game;
- ``common_event``: the default handling of disconnect / reconnect / leave / HandEnded /
  bodies a game never has (``hand_ended``: the kit's ``ENDED`` phase, the seed recorded);
- ``check_settlement``: the invariants every settlement keeps (GEN-4's floor, gold
  conserved), checked always;
- ``next_hand_dealer`` / ``choose_dealer``: who deals (or banks) the next hand;
  ``seat_or_owner``: the previous winner while it plays, else the owner;
- ``next_system_event``: the deal, dice roll or HandEnded a hand waits for;
- ``visible``: what a seat may see of an event (face-down cards of other seats hidden);
- obligations and ``pay_obligations``: penalties paid once, capped by RULES.md GEN-4. A
  game with penalties or bonuses keeps ``obligations: tuple[Obligation, ...] = ()`` in its
  state (appending as they are incurred), declares each reason in ``REASONS`` with
  ``penalty=True`` and the rule, and calls ``pay_obligations`` in ``settle``;
- ``resolve_options``/``full_options``: the hand log records every option after defaults
  and the rules version it was played under; ``played_rules_version`` reads that version
  back (a game whose rules changed keeps it in its state and branches on it, once).

The engine is pure: no I/O, no clock, no randomness. ``state = apply(state, event)`` is
the only way state changes, and a rejected event leaves the caller's state untouched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import FrozenInstanceError, dataclass
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any, ClassVar, Final, Generic, Protocol, Self, TypeVar, cast

from mypy_extensions import mypyc_attr

from socai import accounts, fairness
from socai.errors import RuleViolation, broken, check
from socai.events.model import (
    HIDDEN_CARD,
    ActionKind,
    Arranged,
    BetAction,
    Body,
    CardsDealt,
    CardSent,
    CardsPlayed,
    CardTaken,
    DealtCard,
    Declared,
    DiceRolled,
    Event,
    HandEnded,
    HandStarted,
    MeldsLaid,
    Passed,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    WagerPlaced,
)
from socai.money import INT64_MAX, TABLE_FEE_BPS_MAX, fee, is_gold, pro_rata

CLOCKWISE: Final = "clockwise"
COUNTERCLOCKWISE: Final = "counterclockwise"

# The last phases of every game's state (each game names its earlier ones).
PLAY_OVER: Final = "play_over"  # the result is decided; only HandEnded is expected
ENDED: Final = "ended"  # HandEnded applied; settle() may run


@dataclass(frozen=True, slots=True)
class GameSpec:
    """Static facts about a game: ids, player counts, deck, direction, default fee."""

    game_id: str
    name: str
    players_min: int
    players_max: int
    deck: str | None  # a ``socai.cards.GAME_DECKS`` kind, None for dice
    direction: str = COUNTERCLOCKWISE
    default_fee_bps: int = 0


# --- what the hand waits for ------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class DealSlot:
    """One card the table must deal next: to ``seat`` (COMMUNITY for the board)."""

    seat: int
    face_up: bool

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, seat: int, face_up: bool) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "face_up", face_up)


@dataclass(frozen=True, slots=True, init=False)
class Pending:
    """What the hand needs next, for the table's game loop.

    Exactly one of these holds: the hand is finished; ``deal`` is non-empty (the table deals
    those cards, in that order, from the shuffled deck); ``roll_dice`` (the table rolls from
    the seed); or the hand waits for decisions from ``to_act`` until ``timer`` runs out after
    ``timeout_s`` seconds, when the table records ``TimerExpired`` for each seat still owing
    one (seat COMMUNITY for a table-level timer such as Tài Xỉu's betting window).
    """

    finished: bool = False
    deal: tuple[DealSlot, ...] = ()
    roll_dice: bool = False
    to_act: tuple[int, ...] = ()
    timer: str = ""
    timeout_s: int = 0

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(
        self,
        finished: bool = False,
        deal: tuple[DealSlot, ...] = (),
        roll_dice: bool = False,
        to_act: tuple[int, ...] = (),
        timer: str = "",
        timeout_s: int = 0,
    ) -> None:
        object.__setattr__(self, "finished", finished)
        object.__setattr__(self, "deal", deal)
        object.__setattr__(self, "roll_dice", roll_dice)
        object.__setattr__(self, "to_act", to_act)
        object.__setattr__(self, "timer", timer)
        object.__setattr__(self, "timeout_s", timeout_s)


@dataclass(frozen=True, slots=True, init=False)
class LegalAction:
    """One kind of move a seat may make now, with the amounts allowed (inclusive).

    ``kind`` is an ``ActionKind`` value for betting games, or the game's own move name
    (``play``, ``pass``, ``wager``, ``arrange``, ``declare:sam`` …).
    """

    kind: str
    min_gold: int = 0
    max_gold: int = 0
    # A bet or raise of more than ``min_gold`` is ``min_gold`` plus a multiple of this, or
    # exactly ``max_gold`` (an all-in above the last step); 0 or 1: any amount in between.
    step_gold: int = 0

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, kind: str, min_gold: int = 0, max_gold: int = 0, step_gold: int = 0) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "min_gold", min_gold)
        object.__setattr__(self, "max_gold", max_gold)
        object.__setattr__(self, "step_gold", step_gold)


# --- options ----------------------------------------------------------------------------

OptionsT = TypeVar("OptionsT")
OPTION_TYPES: Final = ("bool", "int", "str")
# Plain ASCII decimal: int() alone would also take "1_000", " 5 " and non-ASCII digits.
_DECIMAL = re.compile(r"-?[0-9]+", re.ASCII)  # used with fullmatch


def parse_options(cls: type[OptionsT], raw: Mapping[str, object]) -> OptionsT:
    """Build a game's frozen ``Options`` dataclass from HandStarted's string map.

    Unknown names and values that do not parse raise RuleViolation("BAD_OPTION"), so a
    table can never run with a flag the engine does not understand. Bools are
    ``true``/``false``; ints are plain decimal (``-`` allowed, nothing else). Fields must be
    typed ``bool``, ``int`` or ``str``.
    """
    key: tuple[object, ...] = (cls, *raw.items())
    try:
        known = _PARSED.get(key)
    except TypeError:  # a value that is no string (BAD_OPTION below) and cannot be hashed
        return _parse_options(cls, raw)
    if known is not None:
        return cast(OptionsT, known)
    options = _parse_options(cls, raw)
    if len(_PARSED) < PARSED_MAX:
        _PARSED[key] = options
    return options


# Every hand parses its HandStarted's options, and a table's hands (and so a replayed batch's)
# share them: each record parsed is kept by its class and the map's items, in their order
# (records are frozen; a map that fails to parse is not kept). Parsing each time was 8 % of
# a Xì Tố replay on the compiled core (py-spy --native over the hands `rules.xito.replay` times).
_PARSED: Final[dict[tuple[object, ...], object]] = {}
PARSED_MAX: Final = 1024


def _parse_options(cls: type[OptionsT], raw: Mapping[str, object]) -> OptionsT:
    check(dataclasses.is_dataclass(cls), "options must be a dataclass")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for name, text in raw.items():
        f = fields.get(name)
        if f is None:
            raise RuleViolation("BAD_OPTION", f"unknown option {name!r}", option=name)
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        check(kind in OPTION_TYPES, f"option {name} of {cls.__name__} has type {kind}, not bool/int/str")
        if not isinstance(text, str):
            raise RuleViolation("BAD_OPTION", f"option {name}={text!r} is not a string", option=name)
        if kind == "bool" and text in ("true", "false"):
            values[name] = text == "true"
        elif kind == "int" and _DECIMAL.fullmatch(text):
            values[name] = int(text, 10)
        elif kind == "str":
            values[name] = text
        else:
            raise RuleViolation("BAD_OPTION", f"option {name}={text!r} is not a {kind}", option=name)
    options = cls(**values)
    validate = getattr(options, "validate", None)
    if validate is not None:
        validate()
    return options


def options_to_strings(options: object) -> dict[str, str]:
    """The inverse of ``parse_options``: every field as a string, for HandStarted."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(options):  # type: ignore[arg-type]
        value = getattr(options, f.name)
        out[f.name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


# --- seating ----------------------------------------------------------------------------


def seats_in_order(seats: Iterable[int], start: int, seats_max: int, direction: str) -> list[int]:
    """``seats`` ordered around the table from ``start`` (included if seated) in ``direction``.

    Seats are numbered clockwise, so clockwise is increasing seat numbers modulo
    ``seats_max`` and counterclockwise decreasing.
    """
    if direction not in (CLOCKWISE, COUNTERCLOCKWISE):  # formats the message only on failure
        broken(f"unknown direction {direction!r}")
    step = 1 if direction == CLOCKWISE else -1
    wanted = set(seats)
    order = []
    for i in range(seats_max):
        s = (start + step * i) % seats_max
        if s in wanted:
            order.append(s)
    check(len(order) == len(wanted), "a seat number is outside the table")
    return order


def seats_after(seats: Iterable[int], start: int, seats_max: int, direction: str) -> list[int]:
    """Like ``seats_in_order`` but starting with the first seat *after* ``start``;
    ``start`` itself, if seated, comes last (the dealer last, DESIGN.md "Money")."""
    if direction not in (CLOCKWISE, COUNTERCLOCKWISE):  # formats the message only on failure
        broken(f"unknown direction {direction!r}")
    step = 1 if direction == CLOCKWISE else -1
    return seats_in_order(seats, (start + step) % seats_max, seats_max, direction)


# --- settlement -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Transfer:
    """Gold moving from one ledger account to another, with a stable reason code, and,
    where the rules know more than the reason, what caused it (``detail``: the rule and the
    hand's plays of a chop, say), so the player who paid can be shown why."""

    from_account: str
    to_account: str
    amount_gold: int
    reason: str
    detail: str = ""

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, from_account: str, to_account: str, amount_gold: int, reason: str, detail: str = "") -> None:
        object.__setattr__(self, "from_account", from_account)
        object.__setattr__(self, "to_account", to_account)
        object.__setattr__(self, "amount_gold", amount_gold)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "detail", detail)


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A payer could not cover what the rules say it owes (RULES.md GEN-4)."""

    seat: int
    owed_gold: int
    paid_gold: int
    reason: str


@dataclass(frozen=True, init=False)
class Settlement:
    """A hand's result: balanced transfers plus each seat's net, fees and shortfalls.

    Balanced by construction (every transfer debits one account and credits another);
    ``nets`` is each dealt seat's net after fees (0 included), which is how much its
    stack changes.
    """

    game: str
    table_id: str
    hand_id: str
    transfers: tuple[Transfer, ...]
    nets: Mapping[int, int]
    seat_accounts: Mapping[int, str]
    shortfalls: tuple[Shortfall, ...] = ()
    pot_carry_gold: int = 0  # what the table's pot account holds after the hand

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(
        self,
        game: str,
        table_id: str,
        hand_id: str,
        transfers: tuple[Transfer, ...],
        nets: Mapping[int, int],
        seat_accounts: Mapping[int, str],
        shortfalls: tuple[Shortfall, ...] = (),
        pot_carry_gold: int = 0,
    ) -> None:
        object.__setattr__(self, "game", game)
        object.__setattr__(self, "table_id", table_id)
        object.__setattr__(self, "hand_id", hand_id)
        object.__setattr__(self, "transfers", transfers)
        object.__setattr__(self, "nets", nets)
        object.__setattr__(self, "seat_accounts", seat_accounts)
        object.__setattr__(self, "shortfalls", shortfalls)
        object.__setattr__(self, "pot_carry_gold", pot_carry_gold)

    def entries(self) -> dict[str, int]:
        """Net signed amount per account (credits positive), zeros left out; sums to 0."""
        totals: dict[str, int] = defaultdict(int)
        for t in self.transfers:
            totals[t.from_account] -= t.amount_gold
            totals[t.to_account] += t.amount_gold
        result = {a: v for a, v in sorted(totals.items()) if v != 0}
        check(sum(result.values()) == 0, "settlement entries do not balance")
        return result

    def fees_gold(self) -> int:
        return sum(t.amount_gold for t in self.transfers if t.to_account == accounts.HOUSE_FEES)

    def by_reason(self) -> dict[str, int]:
        totals: dict[str, int] = defaultdict(int)
        for t in self.transfers:
            totals[t.reason] += t.amount_gold
        return dict(sorted(totals.items()))


class SettlementBuilder:
    """Collects transfers for one hand and builds a checked ``Settlement``.

    Seats are mapped to escrow accounts ``escrow:{table_id}:{player_id}`` once, and each
    account's running net is kept as transfers are added: settlement sits on the replay
    hot path (every hand of every audit), so nothing here is quadratic.
    """

    def __init__(
        self,
        game: str,
        table_id: str,
        hand_id: str,
        seat_players: Mapping[int, str],
        pot_carry_gold: int = 0,
    ) -> None:
        self.game = game
        self.table_id = table_id
        self.hand_id = hand_id
        self.seat_players = seat_players
        self.transfers: list[Transfer] = []
        self.shortfalls: list[Shortfall] = []
        self.pot_carry_gold = pot_carry_gold
        self._accounts = {seat: accounts.escrow(table_id, player) for seat, player in seat_players.items()}
        self._nets: dict[str, int] = defaultdict(int)

    def account(self, seat: int) -> str:
        return self._accounts[seat]

    @property
    def escrow_of(self) -> Mapping[int, str]:
        """Each seat's escrow account (read-only), for callers that look up many."""
        return self._accounts

    def pay(self, from_account: str, to_account: str, amount_gold: object, reason: str, detail: str = "") -> None:
        # ``object``, so that the compiled core sees a bool as a bool (see money.fee).
        if type(amount_gold) is not int or amount_gold < 0:
            # The message is formatted only when the check fails: pay runs for every
            # transfer of every replayed hand.
            broken(f"transfer of {amount_gold!r}")
        check(from_account != to_account, "transfer to the same account")
        if amount_gold:
            self.transfers.append(Transfer(from_account, to_account, amount_gold, reason, detail))
            nets = self._nets
            nets[from_account] -= amount_gold
            nets[to_account] += amount_gold

    def pay_flows(self, flows: Iterable[tuple[str, str, int]], reason: str) -> None:
        """``pay`` each (from_account, to_account, amount_gold) of ``flows``, in order."""
        transfers = self.transfers
        nets = self._nets
        for from_account, to_account, amount_gold in flows:
            if type(amount_gold) is not int or amount_gold <= 0 or from_account == to_account:
                # ``pay`` raises for a broken invariant (and records nothing for 0).
                self.pay(from_account, to_account, amount_gold, reason)
                continue
            transfers.append(Transfer(from_account, to_account, amount_gold, reason))
            nets[from_account] -= amount_gold
            nets[to_account] += amount_gold

    def pay_seat(self, from_seat: int, to_seat: int, amount_gold: object, reason: str) -> None:
        self.pay(self._accounts[from_seat], self._accounts[to_seat], amount_gold, reason)

    def net_of(self, seat: int) -> int:
        return self._nets.get(self._accounts[seat], 0)

    def charge_fees(self, fee_bps: int, seats: Sequence[int], reason: str = "fee") -> dict[int, int]:
        """Charge ``fee_bps`` on each seat's net positive result so far (RULES.md GEN-1).

        Each seat is charged once: a seat listed twice would pay a second fee on its
        already reduced net.
        """
        check(len(set(seats)) == len(seats), "a seat is listed twice for fees")
        charged = {}
        for seat in seats:
            amount = fee(self.net_of(seat), fee_bps)
            if amount:
                self.pay(self._accounts[seat], accounts.HOUSE_FEES, amount, reason)
                charged[seat] = amount
        return charged

    def build(self) -> Settlement:
        seats = sorted(self.seat_players)
        accounts_of = self._accounts
        seat_accounts = {seat: accounts_of[seat] for seat in seats}
        # Two seats on one escrow would each be credited with the other's transfers.
        check(len(set(seat_accounts.values())) == len(seat_accounts), "two seats share one escrow account")
        net_of = self._nets.get
        nets = {seat: net_of(account, 0) for seat, account in seat_accounts.items()}
        settlement = Settlement(
            game=self.game,
            table_id=self.table_id,
            hand_id=self.hand_id,
            transfers=tuple(self.transfers),
            nets=nets,
            seat_accounts=seat_accounts,
            shortfalls=tuple(self.shortfalls),
            pot_carry_gold=self.pot_carry_gold,
        )
        # Every transfer debits one account and credits another: the running nets of all
        # accounts always sum to zero. Checked anyway (TIGER_STYLE: invariants always on).
        check(sum(self._nets.values()) == 0, "settlement transfers do not balance")
        return settlement


def check_settlement(settlement: Settlement, stacks_gold: Mapping[int, int], conserved: bool = True) -> Settlement:
    """``settlement`` after checking, always, that no seat lost more than it brought
    (GEN-4) and, with ``conserved`` (a game whose gold moves only between the seats and
    the fee account), that the seats' nets and the fees sum to zero."""
    for seat, net in settlement.nets.items():
        check(net >= -stacks_gold[seat], "a seat lost more than it brought (GEN-4)")
    if conserved:
        check(sum(settlement.nets.values()) + settlement.fees_gold() == 0, "gold is conserved")
    return settlement


def match_flows(payers: Sequence[tuple[str, int]], receivers: Sequence[tuple[str, int]]) -> list[tuple[str, str, int]]:
    """Turn what each payer owes and each receiver is due into transfers, greedily in order.

    Both sides must total the same and no amount may be negative; the result is
    deterministic for the given orders. Where the greedy order matches an account with
    itself (it stands on both sides), no transfer is written for that part.
    """
    owed_each = [amount for _, amount in payers]
    due_each = [amount for _, amount in receivers]
    check(min(owed_each, default=0) >= 0 and min(due_each, default=0) >= 0, "negative flow")
    check(sum(owed_each) == sum(due_each), "flows do not balance")
    out = []
    due_accounts = [acct for acct, amount in receivers if amount > 0]
    due_gold = [amount for amount in due_each if amount > 0]
    if len(due_gold) == 1:
        # One receiver (a pot with one winner): every payer pays it all it owes.
        receiver = due_accounts[0]
        return [(payer, receiver, owed) for payer, owed in payers if owed > 0 and payer != receiver]
    # The two sides balance (checked above), so the receivers never run out before the
    # payers do: no check per step.
    i = 0
    for payer, owed in payers:
        left = owed
        while left > 0:
            due = due_gold[i]
            take = left if left < due else due
            if payer != due_accounts[i]:
                out.append((payer, due_accounts[i], take))
            left -= take
            due_gold[i] = due - take
            if due == take:
                i += 1
    return out


# --- the one set of RuleViolation codes -----------------------------------------------

RULE_CODES: Final[Mapping[str, str]] = MappingProxyType(
    {
        # A hand that cannot start (``validate_start``, ``resolve_options``).
        "WRONG_GAME": "HandStarted names another game",
        "BAD_SEAT_COUNT": "fewer or more players than the game allows",
        "BAD_SEATS": "a seat off the table or repeated, a player or id repeated or malformed, a bad seats_max",
        "BAD_STACK": "a stack that is not a positive int (or below the game's minimum)",
        "BAD_STAKE": "a stake the game cannot play with",
        "BAD_FEE": "fee_bps outside 0..TABLE_FEE_BPS_MAX (GEN-1)",
        "BAD_DEALER": "the dealer / first / banker seat is not one the game accepts",
        "BAD_OWNER": "owner_seat is neither -1 nor a seat in the hand",
        "BAD_OPTION": "an option the game does not know, or a value it cannot run with",
        "UNKNOWN_RULES_VERSION": "the hand was played under a rules version this engine does not know",
        # Events that do not fit the hand.
        "UNEXPECTED_EVENT": "a body this game never has, or a second HandStarted",
        "HAND_FINISHED": "play is over (or the hand ended): nothing more may happen",
        "HAND_NOT_OVER": "HandEnded or settle before the hand's result is decided",
        "UNKNOWN_SEAT": "the seat is not dealt into this hand",
        "SEAT_FOLDED": "the seat has folded",
        "SEAT_LEFT": "the seat has left the hand",
        "NOT_YOUR_TURN": "another seat (or nobody) is to act",
        "ALREADY_ACTED": "the seat already made this (simultaneous) decision",
        "WRONG_TIMER": "a timer this game or phase does not run",
        "WRONG_DEAL": "cards dealt when none are due, or to the wrong seats",
        "BAD_CARD": "a card that is not in the game's deck",
        "DUPLICATE_CARD": "a card dealt or played twice",
        "NOT_HOLDING": "the seat does not hold that card",
        "BAD_DICE": "dice that are not three faces 1..6",
        "DICE_NOT_ROLLED": "the dice are needed and not rolled yet",
        "DICE_ALREADY_ROLLED": "the dice of the hand are already rolled",
        # Betting (``socai.rules.betting``) and wagers.
        "BAD_BET_KIND": "an action that is not allowed now (check facing a bet, raise with no bet …)",
        "BAD_AMOUNT": "an amount that is not the one the action needs",
        "CANNOT_CHECK": "a check facing a bet",
        "NOTHING_TO_CALL": "a call with no bet to call",
        "WRONG_CALL_AMOUNT": "a call of another amount than what is owed",
        "BET_TOO_SMALL": "a bet below the minimum",
        "BET_TOO_LARGE": "a bet above the cap",
        "RAISE_TOO_SMALL": "a raise below the minimum",
        "RAISE_TOO_LARGE": "a raise above the cap",
        "RAISE_NOT_ALLOWED": "the betting was not reopened: call or fold",
        "ALL_IN_NOT_ALLOWED": "a voluntary all-in the game does not allow now",
        "BET_ABOVE_STACK": "more chips than the seat has",
        "ABOVE_MAX_COMMITMENT": "more than could ever be called (Hold'em HE-3)",
        "BETTING_CLOSED": "the betting window is closed (or the seat is done betting)",
        "BETTING_OPEN": "the betting window is still open",
        "SEAT_NOT_BETTING": "the seat is not betting",
        "BANKER_CANNOT_BET": "the banker does not bet",
        "BANKER_CAPACITY": "the banker cannot cover the bet (TX-7, CH-2)",
        "TOO_MANY_BETS": "more bets than the per-seat limit",
        "BAD_SELECTION": "a wager selection of the wrong shape",
        # Playing, arranging and declaring (shedding, drawing and arranging games).
        "ILLEGAL_MOVE": "a move the rules do not allow (the game's message says which rule)",
        "BAD_COMBINATION": "the cards form no combination the game knows",
        "CANNOT_BEAT": "the play does not beat the cards on the table",
        "CANNOT_PASS": "passing is not allowed now",
        "BAD_ARRANGEMENT": "an arrangement of the wrong shape",
        "BAD_DECLARATION": "a declaration the game does not allow now",
        "BAD_MELD": "cards that do not form a meld",
        # Queries.
        "BAD_HAND": "hand_value of cards that are not a hand of the game",
        "NO_WINNER": "the result shows no winner",
    }
)


# Where RULES.md has each game's rules: its chapter (``holdem`` is §1 …). A refusal cites the
# chapter's section its code belongs to (``RULE_SECTIONS``), or a game's own rule where the
# game names one (its module's ``REFUSAL_RULES``): ``refusal_rule``.
RULES_CHAPTERS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "holdem": "1",
        "taixiu": "2",
        "xito": "3",
        "samloc": "4",
        "lieng": "5",
        "phom": "6",
        "bacay_ga": "7",
        "bacay_chuong": "8",
        "tienlen": "9",
        "maubinh": "11",
        "lieng_sanh": "12",
    }
)

# The section of a game's chapter (1 deck, players, deal and order; 2 combinations and
# ranking; 3 betting; 5 disconnect and leaving) or the general rule (GEN-n, §0) each code
# of ``RULE_CODES`` refuses by.
RULE_SECTIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        **dict.fromkeys(
            (
                "WRONG_GAME",
                "BAD_SEAT_COUNT",
                "BAD_SEATS",
                "BAD_STACK",
                "BAD_STAKE",
                "BAD_DEALER",
                "BAD_OWNER",
                "UNEXPECTED_EVENT",
                "HAND_FINISHED",
                "HAND_NOT_OVER",
                "UNKNOWN_SEAT",
                "NOT_YOUR_TURN",
                "ALREADY_ACTED",
                "WRONG_DEAL",
                "BAD_CARD",
                "DUPLICATE_CARD",
                "NOT_HOLDING",
                "DICE_NOT_ROLLED",
                "DICE_ALREADY_ROLLED",
                "BAD_DICE",
                "ILLEGAL_MOVE",
                "CANNOT_PASS",
                "BAD_ARRANGEMENT",
            ),
            ".1",
        ),
        **dict.fromkeys(("BAD_COMBINATION", "CANNOT_BEAT", "BAD_MELD", "BAD_HAND", "NO_WINNER"), ".2"),
        **dict.fromkeys(
            (
                "BAD_BET_KIND",
                "BAD_AMOUNT",
                "CANNOT_CHECK",
                "NOTHING_TO_CALL",
                "WRONG_CALL_AMOUNT",
                "BET_TOO_SMALL",
                "BET_TOO_LARGE",
                "RAISE_TOO_SMALL",
                "RAISE_TOO_LARGE",
                "RAISE_NOT_ALLOWED",
                "ALL_IN_NOT_ALLOWED",
                "BET_ABOVE_STACK",
                "ABOVE_MAX_COMMITMENT",
                "BETTING_CLOSED",
                "BETTING_OPEN",
                "SEAT_NOT_BETTING",
                "BANKER_CANNOT_BET",
                "BANKER_CAPACITY",
                "TOO_MANY_BETS",
                "BAD_SELECTION",
                "SEAT_FOLDED",
                "BAD_DECLARATION",
            ),
            ".3",
        ),
        "SEAT_LEFT": ".5",
        "WRONG_TIMER": "GEN-5",
        "BAD_FEE": "GEN-1",
        "BAD_OPTION": ".7",
        "UNKNOWN_RULES_VERSION": "0.7",
    }
)


def refusal_rule(module: Any, code: str) -> str:
    """The RULES.md rule a refusal of ``code`` by the game of ``module`` cites: the game's
    own (``REFUSAL_RULES``) where it names one, else its chapter's section for the code
    (``RULE_SECTIONS``: §9.2 for a Tiến Lên play that does not beat), else a general rule."""
    own: Mapping[str, str] = getattr(module, "REFUSAL_RULES", {})
    if code in own:
        return own[code]
    section = RULE_SECTIONS.get(code, "")
    if section.startswith("."):
        chapter = RULES_CHAPTERS.get(module.SPEC.game_id, "")
        return f"{chapter}{section}" if chapter else ""
    return section


# --- one state style ----------------------------------------------------------------------

_KEEP: Final = object()
S = TypeVar("S", bound="GameState")
T_rec = TypeVar("T_rec")


# Not a native (compiled) class under mypyc: ``game_state`` makes its subclasses with
# ``type()`` and ``freeze`` assigns ``__class__``, which only Python classes allow.
@mypyc_attr(native_class=False)
class GameState:
    """The base of every game's state: frozen and slotted, made with ``@game_state``.

    The subclass lists its fields once, as annotations (with optional defaults); the
    decorator makes them slots and writes, once per class, the code that derives a new
    state. A state is never changed after ``apply`` returns it:

    - ``state.derive(name=value, …)`` is the new state with those fields changed;
    - ``state.draft()`` is a mutable copy for code that changes fields in several steps
      (the hot path of a replay), and ``freeze(draft)`` makes it a state (no copy);
    - ``State.create(name=value, …)`` is a first state (fields with defaults may be
      left out).

    Equality compares every field (a class may define its own ``__eq__``).
    """

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}: derive a new state")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild a state from its field values.
        return (_rebuild_state, (type(self), tuple(getattr(self, name) for name in self.FIELDS)))

    @classmethod
    def create(cls, **fields: Any) -> Self:
        """A state with every field given (fields with defaults may be left out)."""
        raise NotImplementedError  # written by ``game_state``

    def derive(self, **changes: Any) -> Self:
        """A new state equal to this one but for ``changes``."""
        raise NotImplementedError  # written by ``game_state``

    def draft(self) -> Self:
        """A mutable copy sharing every field value; ``freeze`` it before returning it.

        Containers are shared: replace a list or dict with a copy before changing it."""
        raise NotImplementedError  # written by ``game_state``


def _rebuild_state(cls: type[S], values: tuple[Any, ...]) -> S:
    return cls.create(**dict(zip(cls.FIELDS, values, strict=True)))


def freeze(draft: S) -> S:
    """The draft as a frozen state (the same object: no copy)."""
    object.__setattr__(draft, "__class__", type(draft)._frozen)  # type: ignore[attr-defined]
    return draft


def game_state(cls: type[S]) -> type[S]:
    """Class decorator: a ``GameState`` subclass with its annotations as frozen slots and
    the ``create``/``derive``/``draft`` of ``GameState`` written for its fields.

    The draft is a subclass with the same layout and plain attribute stores (CPython's
    fastest path); ``freeze`` turns it into a state by assigning ``__class__``, which the
    identical layouts allow: no copy, no call per field. Measured on Hold'em's replay, a
    generic loop over the fields (or a dataclass ``__init__``) was ~40 % slower."""
    check(issubclass(cls, GameState), f"{cls.__name__} must subclass GameState")
    annotations = inspect.get_annotations(cls)
    fields = tuple(
        name
        for name, hint in annotations.items()
        # Dunder names are not fields: a class compiled by mypyc declares ``__hash__``.
        if not name.startswith("__") and not str(hint).startswith(("ClassVar", "typing.ClassVar"))
    )
    for name in fields:
        check(name.isidentifier() and not name.startswith("_"), f"bad field name {name!r}")
    defaults = {name: cls.__dict__[name] for name in fields if name in cls.__dict__}
    body = {k: v for k, v in cls.__dict__.items() if k not in fields and k not in ("__dict__", "__weakref__")}
    body["__slots__"] = fields
    body["FIELDS"] = fields
    frozen = cast("type[S]", type(cls.__name__, cls.__bases__, body))
    frozen.__qualname__ = cls.__qualname__
    # Both halves of the setattr slot are the generic ones, or CPython calls through Python.
    plain = {"__slots__": (), "__setattr__": object.__setattr__, "__delattr__": object.__delattr__}
    draft_cls = type(f"{cls.__name__}Draft", (frozen,), plain)
    type.__setattr__(frozen, "_frozen", frozen)
    create, derive, draft, values = _compile_state_code(cls.__name__, fields, defaults, draft_cls, frozen)
    type.__setattr__(frozen, "create", classmethod(create))
    type.__setattr__(frozen, "derive", derive)
    type.__setattr__(frozen, "draft", draft)
    if "__eq__" not in cls.__dict__:

        def __eq__(self: Any, other: object) -> bool:
            if type(other) is not type(self):
                return NotImplemented
            equal: bool = values(self) == values(other)
            return equal

        type.__setattr__(frozen, "__eq__", __eq__)
        type.__setattr__(frozen, "__hash__", None)
    if "__repr__" not in cls.__dict__:

        def __repr__(self: Any) -> str:
            return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in fields)})"

        type.__setattr__(frozen, "__repr__", __repr__)
    return frozen


def _compile_state_code(
    name: str, fields: tuple[str, ...], defaults: Mapping[str, Any], draft_cls: type, frozen: type
) -> tuple[Any, ...]:
    """``create``, ``derive``, ``draft`` and the field-values getter of a state class,
    written out field by field from a fixed template (the pattern of ``dataclasses``
    itself and of ``socai.events.codec``'s decoders). The only ``exec`` of the pure core
    (tests/unit/test_rules_purity.py allows it here and nowhere else): its input is the
    class's own field names, each checked to be a plain identifier; no data, no I/O."""
    for field_name in fields:
        check(field_name.isidentifier() and not field_name.startswith("_"), f"bad field name {field_name!r}")
    namespace: dict[str, Any] = {"_new": partial(object.__new__, draft_cls), "_KEEP": _KEEP, "_cls": frozen}
    namespace.update({f"_d_{n}": value for n, value in defaults.items()})
    params = ", ".join(f"{n}=_d_{n}" if n in defaults else n for n in fields)
    # The new object is ``_o``: a field's name never starts with "_", so no field shadows it.
    lines = [f"def create(cls, *, {params}):", "    _o = _new()"]
    lines += [f"    _o.{n} = {n}" for n in fields]
    lines += ["    _o.__class__ = _cls", "    return _o", ""]
    lines += [f"def derive(self, *, {', '.join(f'{n}=_KEEP' for n in fields)}):", "    _o = _new()"]
    lines += [f"    _o.{n} = self.{n} if {n} is _KEEP else {n}" for n in fields]
    lines += ["    _o.__class__ = _cls", "    return _o", ""]
    lines += ["def draft(self):", "    _o = _new()"]
    lines += [f"    _o.{n} = self.{n}" for n in fields]
    lines += ["    return _o", ""]
    lines += ["def values(self):", f"    return ({''.join(f'self.{n}, ' for n in fields)})", ""]
    exec(compile("\n".join(lines), f"<game_state {name}>", "exec"), namespace)
    return namespace["create"], namespace["derive"], namespace["draft"], namespace["values"]


# --- answers kept per state ---------------------------------------------------------------

# How many (state, seat) answers ``per_state`` keeps per function: the table service asks for
# the moves of the state it holds once per view (every player's and spectator's), and the
# bots and the timer ask again before the next event; a few states back is enough.
STATE_MEMO_MAX: Final = 16
R = TypeVar("R")


class PerState(Generic[S, R]):
    """``uncached(state, seat)`` remembered for the last STATE_MEMO_MAX (state, seat)
    pairs, by the state's identity (``per_state``)."""

    __slots__ = ("memo", "uncached")

    def __init__(self, uncached: Callable[[S, int], R]) -> None:
        self.uncached = uncached
        self.memo: dict[tuple[int, int], tuple[S, R]] = {}

    def __call__(self, state: S, seat: int) -> R:
        memo = self.memo
        key = (id(state), seat)
        found = memo.get(key)
        if found is not None and found[0] is state:
            return found[1]
        answer = self.uncached(state, seat)
        if len(memo) >= STATE_MEMO_MAX:
            try:
                del memo[next(iter(memo))]  # the oldest (dicts keep insertion order)
            except (KeyError, StopIteration, RuntimeError):  # another thread was first
                pass
        memo[key] = (state, answer)
        return answer


def per_state(fn: Callable[[S, int], R]) -> PerState[S, R]:
    """``fn(state, seat)`` remembered for the last STATE_MEMO_MAX (state, seat) pairs, by
    the state's identity: a state never changes once ``apply`` returns it, so an answer
    about it stays true, and the memo holds the state itself so that its id is not reused
    while remembered. For what a client or bot asks about the state in hand (its legal
    and candidate moves, a hand's legal plays); ``fn`` must be pure and return an
    immutable value (a tuple, never a list). ``.uncached`` is ``fn`` itself.
    """
    return PerState(fn)


class PerRecord(Generic[T_rec, R]):
    """``uncached(record)`` remembered by the record's identity (``per_record``)."""

    __slots__ = ("memo", "uncached")

    def __init__(self, uncached: Callable[[T_rec], R]) -> None:
        self.uncached = uncached
        self.memo: dict[int, tuple[T_rec, R]] = {}

    def __call__(self, record: T_rec) -> R:
        found = self.memo.get(id(record))
        if found is not None and found[0] is record:
            return found[1]
        answer = self.uncached(record)
        if len(self.memo) < RECORD_MEMO_MAX:
            self.memo[id(record)] = (record, answer)
        return answer


# How many records ``per_record`` keeps per function: a process sees the options of a few
# tables' maps (``parse_options`` keeps one record per map); a full memo adds nothing more.
RECORD_MEMO_MAX: Final = 256


def per_record(fn: Callable[[T_rec], R]) -> PerRecord[T_rec, R]:
    """``fn(record)`` remembered by the identity of ``record``, a frozen record such as a
    game's parsed ``Options`` (``parse_options`` returns the one record it keeps for a map,
    so every hand of a table passes the same object). The memo holds the record, so its id
    is not reused while remembered; ``fn`` must be pure and return an immutable value (a
    game's variant of the rules, built once per options instead of once per hand).
    ``.uncached`` is ``fn`` itself."""
    return PerRecord(fn)


# --- starting a hand ----------------------------------------------------------------------


@lru_cache(maxsize=65536)
def _valid_id(text: object) -> bool:
    return isinstance(text, str) and accounts.is_valid_part(text)


def validate_start(
    spec: GameSpec,
    started: HandStarted,
    *,
    players_min: int | None = None,
    stake_min_gold: int = 1,
    stack_min_gold: int = 1,
    dealer_seated: bool | None = True,
    seats_max_max: int | None = None,
) -> None:
    """Check ``started`` against the game: raises RuleViolation, in this order,

    WRONG_GAME; BAD_SEAT_COUNT (not ``players_min``..``SPEC.players_max`` seats); BAD_SEATS
    (``seats_max`` not ``SPEC.players_min``..``seats_max_max``, a seat off the table or
    repeated, a player id or guild id repeated or unable to name an account, a bad
    table id); BAD_STACK (a stack that is not an int of at least ``stack_min_gold``);
    BAD_STAKE (below ``stake_min_gold``); BAD_FEE (outside 0..TABLE_FEE_BPS_MAX, GEN-1);
    BAD_DEALER (``dealer_seat`` not a seat in the hand, or with ``dealer_seated=False`` not
    a seat of the table; None: not checked); BAD_OWNER (``owner_seat`` neither -1 nor a seat in the hand).
    """
    if started.game != spec.game_id:
        raise RuleViolation("WRONG_GAME", f"{started.game!r} is not {spec.game_id}")
    seats = started.seats
    low = spec.players_min if players_min is None else players_min
    if not low <= len(seats) <= spec.players_max:
        raise RuleViolation("BAD_SEAT_COUNT", f"{spec.name} is played by {low} to {spec.players_max}, not {len(seats)}")
    seats_max = started.seats_max
    top = spec.players_max if seats_max_max is None else seats_max_max
    if type(seats_max) is not int or not spec.players_min <= seats_max <= top:
        raise RuleViolation("BAD_SEATS", f"seats_max {seats_max!r} is not {spec.players_min}..{top}")
    numbers: set[int] = set()
    players: set[str] = set()
    for info in seats:
        seat = info.seat
        if type(seat) is not int or not 0 <= seat < seats_max or seat in numbers:
            raise RuleViolation("BAD_SEATS", f"seat {seat!r} is off the table or repeated")
        player = info.player_id
        if player in players or not _valid_id(player):
            raise RuleViolation("BAD_SEATS", f"player id {player!r} is repeated or invalid")
        if info.guild_id and not _valid_id(info.guild_id):
            raise RuleViolation("BAD_SEATS", f"guild id {info.guild_id!r} cannot name a guild account")
        stack = info.stack_gold
        if type(stack) is not int or not stack_min_gold <= stack <= INT64_MAX:
            raise RuleViolation("BAD_STACK", f"seat {seat} brings {stack!r}; at least {stack_min_gold}")
        numbers.add(seat)
        players.add(player)
    if not _valid_id(started.table_id):
        raise RuleViolation("BAD_SEATS", f"table id {started.table_id!r} cannot name an escrow account")
    if not is_gold(started.stake_gold) or started.stake_gold < stake_min_gold:
        raise RuleViolation("BAD_STAKE", f"the stake must be at least {stake_min_gold}")
    if type(started.fee_bps) is not int or not 0 <= started.fee_bps <= TABLE_FEE_BPS_MAX:
        raise RuleViolation("BAD_FEE", f"fee_bps is 0..{TABLE_FEE_BPS_MAX}")
    dealer = started.dealer_seat
    if dealer_seated:
        if dealer not in numbers:
            raise RuleViolation("BAD_DEALER", f"dealer seat {dealer!r} is not a seat in the hand")
    elif dealer_seated is False and (type(dealer) is not int or not 0 <= dealer < seats_max):
        raise RuleViolation("BAD_DEALER", f"dealer seat {dealer!r} is not at the table")
    if started.owner_seat != -1 and started.owner_seat not in numbers:
        raise RuleViolation("BAD_OWNER", f"owner seat {started.owner_seat!r} is neither -1 nor a seat in the hand")


# --- options after defaults, rules versions ---------------------------------------------

# Hands logged before HandStarted carried ``rules_version`` replay as version 1.
LEGACY_RULES_VERSION: Final = 1


def option_defaults(options_cls: type) -> dict[str, str]:
    """Every option of ``options_cls`` with its default, as HandStarted's strings."""
    return options_to_strings(options_cls())


def rules_version(module: Any) -> int:
    """The module's ``RULES_VERSION`` (a module not yet on the kit is at version 1)."""
    return int(getattr(module, "RULES_VERSION", LEGACY_RULES_VERSION))


def version_defaults(module: Any) -> Mapping[int, Mapping[str, str]]:
    """The module's ``OPTION_DEFAULTS`` (a module not yet on the kit: its current defaults
    as version 1)."""
    declared: Mapping[int, Mapping[str, str]] | None = getattr(module, "OPTION_DEFAULTS", None)
    if declared is None:
        return {LEGACY_RULES_VERSION: option_defaults(module.Options)}
    return declared


def played_rules_version(started: HandStarted) -> int:
    """The rules version the hand was played under: ``started.rules_version``, or version 1
    for a hand logged before HandStarted carried one (0). A game whose rules differ between
    versions keeps this in its state and branches on it (Phỏm's ``Version``)."""
    return started.rules_version or LEGACY_RULES_VERSION


def resolve_options(defaults_by_version: Mapping[int, Mapping[str, str]], started: HandStarted) -> dict[str, str]:
    """``started.options`` with every option the hand does not state set to its default
    *under the rules version the hand was played with* (a game's ``OPTION_DEFAULTS``), so a
    default changed in code later never changes the replay of an old hand.

    Raises RuleViolation("UNKNOWN_RULES_VERSION") for a version the game does not know.
    """
    version = played_rules_version(started)
    defaults = defaults_by_version.get(version)
    if defaults is None:
        known = ", ".join(str(v) for v in sorted(defaults_by_version))
        raise RuleViolation(
            "UNKNOWN_RULES_VERSION",
            f"{started.game} hand {started.hand_id} was played under rules version {version}; "
            f"this engine knows {known}: replay it with the engine of that version",
        )
    return {**defaults, **started.options}


def full_options(module: Any, raw: Mapping[str, str]) -> dict[str, str]:
    """What the table writes into HandStarted.options: every option of the game after
    defaults (the current rules version's), validated. Raises RuleViolation("BAD_OPTION")."""
    return options_to_strings(table_options(module, raw))


def table_options(module: Any, raw: Mapping[str, str]) -> Any:
    """A table's ``raw`` options (strings) over the current rules version's defaults,
    parsed into the game's ``Options``. Raises RuleViolation("BAD_OPTION")."""
    return parse_options(module.Options, {**version_defaults(module)[rules_version(module)], **raw})


def default_fee_bps(module: Any, options: Mapping[str, str]) -> int:
    """The fee of a table whose operator set none: the game's, by mode where it has modes
    (Tài Xỉu: 500 against the system, 300 against players, RULES.md 0.6 and GEN-1). An
    operator's explicit 0 means no fee and is never replaced by this."""
    hook = getattr(module, "default_fee_bps", None)
    if callable(hook):
        value = hook(table_options(module, options))
        check(type(value) is int and 0 <= value <= TABLE_FEE_BPS_MAX, f"default fee {value!r}")
        return int(value)
    return int(module.SPEC.default_fee_bps)


# --- who deals next, who may play -------------------------------------------------------


def next_hand_dealer(
    previous_state: object | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
    direction: str = CLOCKWISE,
) -> int:
    """The default reference seat of the next hand: the owner (or, without one, the first
    participant) in the first hand; then the seat after the previous dealer in
    ``direction`` that takes part (RULES.md HE-9), the previous dealer itself only when it
    is the sole participant."""
    check(len(participants) > 0, "a hand needs participants")
    if previous_dealer is None or previous_state is None:
        return seat_or_owner(None, participants, owner_seat)
    return seats_after(participants, previous_dealer, seats_max, direction)[0]


def seat_or_owner(seat: int | None, participants: Sequence[int], owner_seat: int) -> int:
    """``seat`` (a previous hand's winner, who deals or acts first next: RULES.md 3.1,
    LI-4, LS-4, PH-1) when it takes part; else the table owner when it does; else the
    first participant."""
    if seat is not None and seat in participants:
        return seat
    return owner_seat if owner_seat in participants else participants[0]


def choose_dealer(
    module: Any,
    previous_state: object | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The next hand's reference seat (dealer, first dealt, banker) for the table service,
    the simulator and the auditor: the module's ``next_hand_dealer`` hook, else the default
    ``next_hand_dealer`` in the game's direction."""
    hook = getattr(module, "next_hand_dealer", None)
    if hook is not None:
        return int(hook(previous_state, previous_dealer, tuple(participants), seats_max, owner_seat, stacks))
    return next_hand_dealer(
        previous_state, previous_dealer, participants, seats_max, owner_seat, stacks, module.SPEC.direction
    )


def can_play(module: Any, stack_gold: int, stake_gold: int, options: Mapping[str, str]) -> bool:
    """Whether a seat with ``stack_gold`` may be dealt into the next hand: the module's
    ``can_play(stack_gold, stake_gold, options)`` hook (a minimum stack: ante, Gà pay-in,
    banker capacity), else any chips at all."""
    hook = getattr(module, "can_play", None)
    if hook is None:
        return stack_gold > 0
    parsed = table_options(module, options)
    return bool(hook(stack_gold, stake_gold, parsed))


def house_exposure(module: Any, state: object) -> int:
    """The most the house bank (``house:bank``) can lose on the bets ``state`` has accepted:
    the module's ``house_exposure_gold(state)`` hook (Tài Xỉu against the system), else 0 —
    no other game pays from the house. The table holds this much in the ledger before it
    accepts an action that raises it."""
    hook = getattr(module, "house_exposure_gold", None)
    if hook is None:
        return 0
    exposure = hook(state)
    check(type(exposure) is int and exposure >= 0, f"house exposure {exposure!r}")
    return int(exposure)


def players_min(module: Any, options: Mapping[str, str]) -> int:
    """The fewest players a hand with ``options`` (a table's, as strings) is dealt to: the
    module's ``players_min_with(options)`` hook (Tài Xỉu between players: the banker and a
    bettor), else ``SPEC.players_min``. The table starts no hand with fewer; the game's
    ``initial_state`` refuses one (BAD_SEAT_COUNT)."""
    hook = getattr(module, "players_min_with", None)
    if hook is None:
        return int(module.SPEC.players_min)
    parsed = table_options(module, options)
    return int(hook(parsed))


def participants(module: Any, stacks: Mapping[int, int], stake_gold: int, options: Mapping[str, str]) -> list[int]:
    """The seats (sorted) whose stacks let them play the next hand (``can_play``)."""
    return sorted(seat for seat, stack in stacks.items() if can_play(module, stack, stake_gold, options))


def seeded_index(seed_hex: str, label: str, count: int) -> int:
    """A choice among ``count`` between hands (a new banker drawn at random), from the
    previous hand's *revealed* seed, so replay and the audit can recompute it: ``uniform``
    of DESIGN.md "Fairness" (the first of a fair shuffle of ``range(count)``) keyed by
    ``sha256(seed + label)``, so that each kind of choice draws its own stream."""
    check(count > 0, "a choice among nobody")
    seed = hashlib.sha256(fairness.seed_from_hex(seed_hex) + label.encode()).digest()
    return fairness.shuffle(seed, list(range(count)))[0]


# --- the hand loop --------------------------------------------------------------------------


def next_system_event(module: Any, state: object, deck: Sequence[Any], next_card: int, seed: bytes) -> Body | None:
    """The event the hand needs that no player decides: the next cards (from ``deck``, the
    fair shuffle, starting at ``next_card``), the dice (from ``seed``), or HandEnded
    (revealing ``seed``) once play is over; None while it waits for a decision.

    Pure: the table service's game loop and ``autoplay.play_hand`` both call it."""
    return system_event(module.pending(state), deck, next_card, seed)


def system_event(pending: Pending, deck: Sequence[Any], next_card: int, seed: bytes) -> Body | None:
    """``next_system_event`` for a ``pending`` already asked of the module."""
    if pending.finished:
        return HandEnded(seed.hex())
    if pending.deal:
        slots = pending.deal
        check(next_card + len(slots) <= len(deck), "the deck has run out")
        return CardsDealt(
            tuple([DealtCard(slot.seat, deck[next_card + i], slot.face_up) for i, slot in enumerate(slots)])
        )
    if pending.roll_dice:
        return DiceRolled(fairness.roll_dice(seed))
    return None


def visible(body: Body, viewer_seat: int, state: object) -> Body | None:
    """The default of the ``visible`` hook: ``body`` as ``viewer_seat`` may see it while
    the hand is in play. Face-down cards dealt to other seats show as ``HIDDEN_CARD``
    (encoded as ``""``); everything else is public. A game hides more (Mậu Binh's
    ``Arranged``, Ba Cây's unflipped cards) with its own hook, returning a redacted body
    or None for an event the viewer must not see at all."""
    if type(body) is CardsDealt:
        cards = body.cards
        if any(not c.face_up and c.seat != viewer_seat for c in cards):
            return CardsDealt(
                tuple(
                    [c if c.face_up or c.seat == viewer_seat else DealtCard(c.seat, HIDDEN_CARD, False) for c in cards]
                )
            )
    return body


def visible_to(module: Any, body: Body, viewer_seat: int, state: object) -> Body | None:
    """``module.visible`` when the game has the hook, else the default ``visible``."""
    hook = getattr(module, "visible", None)
    result: Body | None = (hook or visible)(body, viewer_seat, state)
    return result


def visible_event(module: Any, event: Event, viewer_seat: int, state: object, hand_over: bool) -> Event | None:
    """``event`` as ``viewer_seat`` may see it (``visible_to``), for the table's
    GetTableState and WatchTable: once the hand is over every event is public (the
    revealed seed re-deals every card anyway); None for an event the viewer may not see."""
    if hand_over:
        return event
    body = visible_to(module, event.body, viewer_seat, state)  # type: ignore[arg-type]
    if body is None:
        return None
    return event if body is event.body else dataclasses.replace(event, body=body)


# --- what a seat holds, faces and may do now (the client API) -----------------------------

# Every kind of move a seat can make, the PlayerAction field that carries it (the table's
# proto) and what it is. ``LegalAction.kind`` and ``MoveSet.kind`` use only these; a test
# checks every game against this list, so a client's vocabulary is written here, once.
MOVE_KINDS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "check": ("bet", "BetAction CHECK: add nothing (only when nothing is owed)"),
        "call": ("bet", "BetAction CALL: add exactly what is owed (or everything left when that is less)"),
        "bet": ("bet", "BetAction BET: the first chips of a round; amount_gold is what the seat adds"),
        "raise": ("bet", "BetAction RAISE: the call plus more; amount_gold is what the seat adds, the call included"),
        "fold": ("bet", "BetAction FOLD: give up the hand; what is in the pot stays there"),
        "all_in": ("bet", "BetAction ALL_IN: everything the seat has left"),
        "wager": ("wager", "WagerPlaced: a bet on an outcome (Tài Xỉu) or against the banker (Ba Cây Chương)"),
        "play": ("play", "CardsPlayed: play a combination (shedding games) or discard one card (Phỏm)"),
        "pass": ("pass_turn", "Passed: do not play this round (shedding games)"),
        "arrange": ("arrange", "Arranged: the seat's 13 cards as back (5), middle (5) and front (3) chi (Mậu Binh)"),
        "take": ("take", "CardTaken: take the previous discard into a Phỏm (Phỏm)"),
        "lay": ("lay", "MeldsLaid: lay down the seat's Phỏm (Phỏm, final turn)"),
        "send": ("send", "CardSent: add a card to another seat's laid Phỏm (Phỏm, after laying down)"),
        "declare:draw": ("declare", "Declared draw: draw a card from the stock (Phỏm)"),
        "declare:u": ("declare", "Declared u: Ù, every card in Phỏm (Phỏm)"),
        "declare:u_khan": (
            "declare",
            "Declared u_khan: Ù khan, a dealt hand where no two cards could share a Phỏm (Phỏm, PH-16 option)",
        ),
        "declare:sam": ("declare", "Declared sam: báo Sâm, the seat will go out first (Sâm Lốc, SL-9)"),
        "declare:no_sam": ("declare", "Declared no_sam: no báo Sâm this hand (Sâm Lốc, SL-9)"),
        "declare:flip": ("declare", "Declared flip: turn the seat's three cards face up (3 Cây Gà, Ba Cây Chương)"),
    }
)

# What ``Facing.kind`` can be: what a seat must beat or answer now.
FACING_KINDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "": "nothing to beat or answer",
        "bet": "chips to match: amount_gold is what calling adds (0: nothing owed, checking is free)",
        "lead": "the seat starts a new round: any combination it holds (shedding games)",
        "trick": "the combination to beat: cards, its combination kind, and the seat that played it",
        "discard": "the previous discard (cards) and its seat; takeable says whether this seat may take it (Phỏm)",
        "arrange": "the arrangement window is open: the seat arranges its 13 cards (Mậu Binh)",
        "flip": "the flip window is open (3 Cây Gà, Ba Cây Chương)",
        "wager": "the betting window is open; amount_gold..max_gold is what one bet may be",
        "declare": "a declaration window is open (Sâm Lốc's báo Sâm)",
    }
)


@dataclass(frozen=True, slots=True)
class Facing:
    """What a seat must beat or answer now, so that a client need not fold it out of the
    events: the trick on the table, the discard that may be taken, the bet to call, a
    window that is open (``FACING_KINDS``). ``seat`` is who put it there (-1: nobody, the
    table); ``cards`` its cards; ``combination`` a trick's combination kind (``single``,
    ``pair`` …); ``amount_gold`` (and ``max_gold``) the chips it is about."""

    kind: str = ""
    seat: int = -1
    cards: tuple[Any, ...] = ()
    combination: str = ""
    amount_gold: int = 0
    max_gold: int = 0
    takeable: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class MoveSet:
    """The legal moves of one kind (``MOVE_KINDS``) a seat may make now.

    ``complete``: ``moves`` lists every legal move of the kind, ready to send. Otherwise
    there are too many to list (any bet in a range, any 3/5/5 arrangement): ``text`` says
    exactly which are legal, ``moves`` holds a few of them, and for amounts ``min_gold``,
    ``max_gold`` and ``step_gold`` (as ``LegalAction``'s) bound them. ``refusal`` tells
    whether any other move would be accepted, without playing it."""

    kind: str
    text: str
    moves: tuple[Body, ...] = ()
    complete: bool = True
    min_gold: int = 0
    max_gold: int = 0
    step_gold: int = 0


def move_kind(body: Body) -> str:
    """The ``MOVE_KINDS`` kind of a player's move (``""`` for a body no player sends)."""
    if isinstance(body, BetAction):
        return ActionKind(body.kind).value
    if isinstance(body, Declared):
        return f"declare:{body.declaration}"
    return _KIND_OF_BODY.get(type(body), "")


_KIND_OF_BODY: Final[Mapping[type, str]] = MappingProxyType(
    {
        WagerPlaced: "wager",
        CardsPlayed: "play",
        Passed: "pass",
        Arranged: "arrange",
        CardTaken: "take",
        MeldsLaid: "lay",
        CardSent: "send",
    }
)


def bet_facing(legal: Iterable[LegalAction]) -> Facing:
    """A betting game's ``Facing`` from the seat's ``legal_actions``: the call it owes
    (``bet`` with ``amount_gold``), or ``bet`` 0 when it may check; nothing off its turn."""
    kinds = {str(a.kind): a for a in legal}
    call = kinds.get("call")
    if call is not None:
        return Facing("bet", amount_gold=call.min_gold, text=f"call {call.min_gold}")
    if "check" in kinds:
        return Facing("bet", text="nothing to call")
    return Facing()


def held_cards(module: Any, state: object, seat: int) -> tuple[Any, ...]:
    """The cards ``seat`` holds now, face up or down (the module's ``held`` hook; none in a
    game without cards or for a seat not dealt in). The table shows a player only their
    own: they come from the hand in memory, never from the log."""
    hook = getattr(module, "held", None)
    if hook is None:
        return ()
    return tuple(hook(state, seat))


def facing(module: Any, state: object, seat: int) -> Facing:
    """What ``seat`` must beat or answer now (the module's ``facing`` hook; nothing by
    default)."""
    hook = getattr(module, "facing", None)
    result: Facing = hook(state, seat) if hook is not None else Facing()
    return result


def legal_moves(module: Any, state: object, seat: int) -> tuple[MoveSet, ...]:
    """Every legal move of ``seat`` now, by kind: listed where they can be listed, else
    described exactly (``MoveSet``). Empty when the seat has no decision to make.

    The module's ``legal_moves`` hook where it has one (the games whose moves are cards),
    else one ``MoveSet`` per ``legal_actions`` entry: a check, call, fold or all-in is one
    move; a bet or raise in a range is described by its bounds; a declaration or a pass is
    one move."""
    hook = getattr(module, "legal_moves", None)
    if hook is not None:
        return tuple(hook(state, seat))
    return tuple(amount_moves(seat, module.legal_actions(state, seat), module.candidate_actions(state, seat)))


def amount_moves(seat: int, legal: Iterable[LegalAction], candidates: Sequence[Body]) -> list[MoveSet]:
    """``legal_moves``'s default: a ``MoveSet`` for each of ``legal``, with ``candidates``
    (the game's sample) as the examples of a kind that cannot be listed."""
    out = []
    for action in legal:
        kind = str(action.kind)  # an ActionKind (a StrEnum) or the game's own move name
        low, high = action.min_gold, action.max_gold
        if kind in ("check", "fold"):
            out.append(MoveSet(kind, f"{kind}: add nothing", (BetAction(seat, ActionKind(kind), 0),)))
        elif kind in ("call", "all_in") or (kind in ("bet", "raise") and low == high):
            words = {"call": "call", "all_in": "all-in", "bet": "bet", "raise": "raise"}[kind]
            move = BetAction(seat, ActionKind(kind), low)
            out.append(MoveSet(kind, f"{words}: add {low}", (move,), True, low, high))
        elif kind in ("bet", "raise"):
            step = action.step_gold if action.step_gold > 1 else 1
            text = f"{kind}: add any amount from {low} to {high}"
            if step > 1:
                text = f"{kind}: add {low} plus any multiple of {step} up to {high}, or exactly {high}"
            examples = tuple(c for c in candidates if move_kind(c) == kind)
            out.append(MoveSet(kind, text, examples, False, low, high, step))
        elif kind.startswith("declare:"):
            declaration = kind.removeprefix("declare:")
            text = MOVE_KINDS[kind][1] if kind in MOVE_KINDS else f"declare {declaration}"
            out.append(MoveSet(kind, text, (Declared(seat, declaration),)))
        elif kind == "pass":
            out.append(MoveSet(kind, "pass: play nothing this round", (Passed(seat),)))
        else:
            examples = tuple(c for c in candidates if move_kind(c) == kind)
            text = MOVE_KINDS[kind][1] if kind in MOVE_KINDS else kind
            out.append(MoveSet(kind, text, examples, False, low, high, action.step_gold))
    return out


@dataclass(frozen=True, slots=True)
class Forfeit:
    """What leaving a hand in play costs ``seat`` by its game's rule: the chips it has
    already put in (``committed_gold``: lost with the hand where the leaver forfeits what
    it put in) and the rule (the module's ``LEAVE_RULE``)."""

    committed_gold: int
    rule: str


def forfeit(module: Any, state: object, seat: int) -> Forfeit:
    """``Forfeit`` of ``seat`` leaving now: the module's ``committed_gold(state, seat)``
    hook (0 without one) and its ``LEAVE_RULE``."""
    hook = getattr(module, "committed_gold", None)
    committed = int(hook(state, seat)) if hook is not None else 0
    return Forfeit(committed, str(getattr(module, "LEAVE_RULE", "GEN-6")))


def refusal(module: Any, state: object, body: Body) -> RuleViolation | None:
    """Whether the rules would accept ``body`` now, without playing it: None when they
    would, else the RuleViolation ``apply`` raises (its code and message). ``apply`` never
    changes ``state``, so this is the very check the table makes before it writes."""
    try:
        module.apply(state, body)
    except RuleViolation as exc:
        return exc
    return None


# --- events every game handles alike ------------------------------------------------------


def common_event(
    state: S,
    body: Body,
    *,
    game_name: str,
    seats: Collection[int],
    over: bool,
    leave: Callable[[S, int], S] | None = None,
    end: Callable[[S, HandEnded], S] | None = None,
    disconnect_leaves: bool = False,
) -> S:
    """The default handling of the bodies every game shares, for a state with a
    ``disconnected: frozenset[int]`` field (and ``deck_seed: str`` unless ``end`` is given):

    - PlayerDisconnected / PlayerReconnected: the seat is marked / unmarked in
      ``disconnected``; the game's timeout rule then acts for it (GEN-5, GEN-6), or with
      ``disconnect_leaves`` (games whose rules treat a disconnect as leaving: LI-5, 12.5,
      GA-6, CH-5) the marked state goes on to ``leave(state, seat)`` at once;
    - PlayerLeft: ``leave(state, seat)``, the game's leaving rule (GEN-6: where a game's
      source gives one rule for leaving and disconnecting, it applies to both); without
      ``leave``, a leaver is a seat disconnected for good;
    - HandEnded: only once play is ``over`` (else HAND_NOT_OVER); ``end(state, body)``, or
      the state with ``deck_seed`` recorded;
    - anything else (a body the game never has, a second HandStarted): UNEXPECTED_EVENT.

    UNKNOWN_SEAT for a seat not in ``seats``. Games call it last in their ``apply``."""
    if isinstance(body, PlayerDisconnected | PlayerReconnected | PlayerLeft):
        seat = body.seat
        if seat not in seats:
            raise RuleViolation("UNKNOWN_SEAT", f"seat {seat!r} is not in this hand", seat=seat)
        if isinstance(body, PlayerLeft) and leave is not None:
            return leave(state, seat)
        away: frozenset[int] = state.disconnected  # type: ignore[attr-defined]
        marked = state.derive(disconnected=away - {seat} if isinstance(body, PlayerReconnected) else away | {seat})
        if disconnect_leaves and leave is not None and isinstance(body, PlayerDisconnected):
            return leave(marked, seat)
        return marked
    if isinstance(body, HandEnded):
        if not over:
            raise RuleViolation("HAND_NOT_OVER", "HandEnded before the hand's result is decided")
        return end(state, body) if end is not None else state.derive(deck_seed=body.deck_seed)
    raise unexpected(game_name, body)


def hand_ended(state: S, body: HandEnded) -> S:
    """HandEnded for a state with ``phase`` and ``deck_seed`` fields (``common_event``'s
    ``end``): the phase ENDED, the revealed seed recorded."""
    return state.derive(phase=ENDED, deck_seed=body.deck_seed)


def unexpected(game_name: str, body: object) -> RuleViolation:
    """The RuleViolation for a body the game never has (or a second HandStarted)."""
    if isinstance(body, HandStarted):
        return RuleViolation("UNEXPECTED_EVENT", "the hand has already started")
    return RuleViolation("UNEXPECTED_EVENT", f"{game_name} has no {type(body).__name__}")


# --- reasons and obligations --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reason:
    """A settlement reason code a game emits: whether it is a penalty (reported as such by
    settlement and the auditor) and the RULES.md rule it implements."""

    penalty: bool
    rule: str


@dataclass(frozen=True, slots=True, init=False)
class Obligation:
    """A payment the rules impose besides the pots (a penalty, a bonus): ``payer`` owes
    ``amount_gold`` to ``payee`` (a seat number, or a ledger account name such as the
    table's pot) for ``reason``. Games keep them in their state, in the order incurred;
    ``detail`` says what caused it (carried to the transfer that pays it)."""

    payer: int
    payee: int | str
    amount_gold: int
    reason: str
    detail: str = ""

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, payer: int, payee: int | str, amount_gold: int, reason: str, detail: str = "") -> None:
        object.__setattr__(self, "payer", payer)
        object.__setattr__(self, "payee", payee)
        object.__setattr__(self, "amount_gold", amount_gold)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "detail", detail)


def pay_obligations(
    builder: SettlementBuilder,
    obligations: Sequence[Obligation],
    stacks_gold: Mapping[int, int],
    order: Sequence[int],
) -> None:
    """Pay ``obligations`` with RULES.md GEN-4's cap: nobody pays more than their chips at
    the table (``stacks_gold`` at the start of the hand plus their net so far in
    ``builder``). A payer short of what they owe pays what they have, shared pro rata to
    what each payee was owed (``money.pro_rata``, remainders in ``order``, the game's
    playing order), and a ``Shortfall`` per short obligation is recorded.

    Payers are settled in ``order``; a payee's receipts count toward what it can pay
    only once it has been paid, so the order of ``order`` matters and is the game's."""
    by_payer: dict[int, list[Obligation]] = defaultdict(list)
    for ob in obligations:
        if not (type(ob.amount_gold) is int and ob.amount_gold >= 0):  # formats the message only on failure
            broken(f"obligation of {ob.amount_gold!r}")
        if ob.payer not in stacks_gold:  # formats the message only on failure
            broken(f"obligation of seat {ob.payer}, not in the hand")
        by_payer[ob.payer].append(ob)
    rank = {seat: i for i, seat in enumerate(order)}
    for payer in sorted(by_payer, key=lambda s: rank.get(s, len(rank) + s)):
        owed = by_payer[payer]
        total = sum(ob.amount_gold for ob in owed)
        can_pay = max(0, stacks_gold[payer] + builder.net_of(payer))
        shares = pro_rata(min(total, can_pay), [(i, ob.amount_gold) for i, ob in enumerate(owed)])
        for i, ob in enumerate(owed):
            paid = shares[i]
            to = builder.account(ob.payee) if isinstance(ob.payee, int) else ob.payee
            builder.pay(builder.account(payer), to, paid, ob.reason, ob.detail)
            if paid < ob.amount_gold:
                builder.shortfalls.append(Shortfall(payer, ob.amount_gold, paid, ob.reason))


# --- the contract, for mypy ----------------------------------------------------------------


class GameRules(Protocol):
    """The shape of every game module (``registry.rules`` returns one); mypy checks it."""

    SPEC: GameSpec
    RULES_VERSION: int
    OPTION_DEFAULTS: Mapping[int, Mapping[str, str]]
    REASONS: Mapping[str, Reason]

    @property
    def MOVES(self) -> tuple[str, ...]: ...  # the MOVE_KINDS it offers (its API page, self-play's checks)

    @property
    def TIMERS(self) -> tuple[str, ...]: ...  # the Pending.timer names it runs

    @property
    def Options(self) -> type: ...

    def initial_state(self, started: HandStarted, /) -> Any: ...

    def apply(self, state: Any, body: Body, /) -> Any: ...

    def pending(self, state: Any, /) -> Pending: ...

    def legal_actions(self, state: Any, seat: int, /) -> tuple[LegalAction, ...]: ...

    def candidate_actions(self, state: Any, seat: int, /) -> Sequence[Body]: ...

    def is_finished(self, state: Any, /) -> bool: ...

    def settle(self, state: Any, /) -> Settlement: ...


def is_penalty(module: Any, reason: str) -> bool:
    """Whether ``reason`` is a penalty in the game of ``module`` (its ``REASONS``)."""
    declared: Reason | None = module.REASONS.get(reason)
    return declared is not None and declared.penalty


# Reasons every pot game shares (``pots.award_pots``, ``SettlementBuilder.charge_fees``).
# Chips no live player matched go back to whoever put them in, which moves no gold and so
# is no transfer: no reason is declared for it (the golden corpus found none ever paid).
POT_REASONS: Final[Mapping[str, Reason]] = MappingProxyType(
    {
        "pot": Reason(False, "the main pot to the best hand (or the last player left)"),
        "side_pot": Reason(False, "a side pot to the best eligible hand (all-in, Hold'em 1.3 / Xì Tố 3.3)"),
        "fee": Reason(False, "GEN-1: the table's fee_bps on each net win"),
    }
)

__all__ = [
    "CLOCKWISE",
    "COUNTERCLOCKWISE",
    "FACING_KINDS",
    "LEGACY_RULES_VERSION",
    "MOVE_KINDS",
    "POT_REASONS",
    "RULES_CHAPTERS",
    "RULE_CODES",
    "RULE_SECTIONS",
    "DealSlot",
    "Facing",
    "Forfeit",
    "GameRules",
    "GameSpec",
    "GameState",
    "LegalAction",
    "MoveSet",
    "Obligation",
    "Pending",
    "PerState",
    "Reason",
    "Settlement",
    "SettlementBuilder",
    "Shortfall",
    "Transfer",
    "amount_moves",
    "bet_facing",
    "can_play",
    "choose_dealer",
    "common_event",
    "default_fee_bps",
    "facing",
    "forfeit",
    "freeze",
    "full_options",
    "game_state",
    "held_cards",
    "house_exposure",
    "is_penalty",
    "legal_moves",
    "match_flows",
    "move_kind",
    "next_hand_dealer",
    "next_system_event",
    "option_defaults",
    "options_to_strings",
    "parse_options",
    "participants",
    "pay_obligations",
    "per_record",
    "per_state",
    "played_rules_version",
    "players_min",
    "refusal",
    "refusal_rule",
    "resolve_options",
    "rules_version",
    "seats_after",
    "seats_in_order",
    "seeded_index",
    "system_event",
    "unexpected",
    "validate_start",
    "version_defaults",
    "visible",
    "visible_event",
    "visible_to",
]
