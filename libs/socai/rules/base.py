"""What every game module shares: the contract, the settlement type, options, seating.

Every game module (``socai.rules.holdem``, ``socai.rules.xito`` …) has the same shape::

    SPEC: GameSpec
    Options                                  # frozen dataclass of the game's named flags
    initial_state(hand_started) -> State     # raises RuleViolation for a bad start
    apply(state, body) -> State              # never mutates ``state``; raises RuleViolation
    pending(state) -> Pending                # what the hand waits for next
    legal_actions(state, seat) -> tuple[LegalAction, ...]
    candidate_actions(state, seat) -> list[Body]   # a finite set of legal moves (bots, tests)
    is_finished(state) -> bool
    settle(state) -> Settlement              # only when finished
    hand_value(cards) -> value               # games that compare hands
    next_hand_dealer(previous_state, previous_dealer, participants, seats_max, owner_seat) -> int
                                             # optional: who deals/banks next (default: the owner,
                                             # then the button moves clockwise, RULES.md HE-9)

The engine is pure: no I/O, no clock, no randomness. ``state = apply(state, event)`` is
the only way state changes, and a rejected event leaves the caller's state untouched.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from socai import accounts
from socai.errors import RuleViolation, check
from socai.money import fee

CLOCKWISE: Final = "clockwise"
COUNTERCLOCKWISE: Final = "counterclockwise"


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


@dataclass(frozen=True, slots=True)
class DealSlot:
    """One card the table must deal next: to ``seat`` (COMMUNITY for the board)."""

    seat: int
    face_up: bool


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class LegalAction:
    """One kind of move a seat may make now, with the amounts allowed (inclusive).

    ``kind`` is an ``ActionKind`` value for betting games, or the game's own move name
    (``play``, ``pass``, ``wager``, ``arrange``, ``declare:sam`` …).
    """

    kind: str
    min_gold: int = 0
    max_gold: int = 0


# --- options ----------------------------------------------------------------------------

OptionsT = TypeVar("OptionsT")
OPTION_TYPES: Final = ("bool", "int", "str")
# Plain ASCII decimal: int() alone would also take "1_000", " 5 " and non-ASCII digits.
_DECIMAL = re.compile(r"-?[0-9]+", re.ASCII)  # used with fullmatch


def parse_options(cls: type[OptionsT], raw: Mapping[str, str]) -> OptionsT:
    """Build a game's frozen ``Options`` dataclass from HandStarted's string map.

    Unknown names and values that do not parse raise RuleViolation("BAD_OPTION"), so a
    table can never run with a flag the engine does not understand. Bools are
    ``true``/``false``; ints are plain decimal (``-`` allowed, nothing else). Fields must be
    typed ``bool``, ``int`` or ``str``.
    """
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
    check(direction in (CLOCKWISE, COUNTERCLOCKWISE), f"unknown direction {direction!r}")
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
    check(direction in (CLOCKWISE, COUNTERCLOCKWISE), f"unknown direction {direction!r}")
    step = 1 if direction == CLOCKWISE else -1
    return seats_in_order(seats, (start + step) % seats_max, seats_max, direction)


# --- settlement -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transfer:
    """Gold moving from one ledger account to another, with a stable reason code."""

    from_account: str
    to_account: str
    amount_gold: int
    reason: str


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A payer could not cover what the rules say it owes (RULES.md GEN-4)."""

    seat: int
    owed_gold: int
    paid_gold: int
    reason: str


@dataclass(frozen=True)
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


# Reason codes that are penalties (reported as such by settlement and the auditor).
PENALTY_REASONS: Final = frozenset(
    {
        "disconnect_forfeit",
        "leave_penalty",
        "thoi_heo",
        "thoi_hang",
        "chat",
        "den",
        "den_bao",
        "sam_failed",
        "sam_blocked",
        "cong",
        "u_den",
        "maubinh_foul",
        "sap_bonus",
        "ga_pot",
    }
)


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

    def pay(self, from_account: str, to_account: str, amount_gold: int, reason: str) -> None:
        if type(amount_gold) is not int or amount_gold < 0:
            # The message is formatted only when the check fails: pay runs for every
            # transfer of every replayed hand.
            check(False, f"transfer of {amount_gold!r}")
        check(from_account != to_account, "transfer to the same account")
        if amount_gold:
            self.transfers.append(Transfer(from_account, to_account, amount_gold, reason))
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

    def pay_seat(self, from_seat: int, to_seat: int, amount_gold: int, reason: str) -> None:
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
