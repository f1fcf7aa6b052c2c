"""Tài Xỉu (Sic Bo, big–small dice), RULES.md §2, game id ``taixiu``.

One hand is one round:

1. ``HandStarted``: the seats at the table with their escrow stacks. ``stake_gold``, when
   positive, is the table's minimum bet ("mức cược min của bàn chơi", RULES.md 0.2).
2. A betting window (no turn order, everybody bets at once). Seats place ``WagerPlaced``
   bodies. ``TimerExpired(COMMUNITY, "betting")`` is the table's countdown running out and
   closes the window; ``TimerExpired(seat, "betting")`` says that one seat is done betting
   (a bot that chose nothing), and when every seat is done the window closes too.
3. ``DiceRolled``: three dice 1..6 (the auditor checks them against the seed elsewhere).
4. ``HandEnded`` last; then ``settle``.

Bets (``WagerPlaced.kind`` / ``selection``), "1:N" = net win N × bet with the stake
returned (TX-3):

=============  ===========  =============================================  ==========
kind           selection    wins when                                      pays
=============  ===========  =============================================  ==========
``xiu``        ()           total 4–10 and not a triple                    1:1
``tai``        ()           total 11–17 and not a triple                   1:1
``single``     (n,)         n shows on 1 / 2 / 3 dice                      1:1/1:2/1:3
``pair``       (a, b), a<b  both a and b show (the 15 two-number bets)      1:5
``total``      (t,) 4..17   the total is t (triples too, TX-2)             TX-1 table
``double``     (n,)         at least two dice show n                       1:8
``triple``     (n,)         all three dice show n                          1:150
``any_triple`` ()           all three dice are equal                       1:24
=============  ===========  =============================================  ==========

Bankers: in mode ``system`` the bank is the ledger account ``house:bank``; in mode ``p2p``
the table owner at ``HandStarted.dealer_seat`` banks with their escrow and does not bet.

TX-7 banker capacity (p2p): every accepted bet reserves its largest possible *net* payout,
N × amount at its best outcome, from the banker's unreserved stack; a bet whose reservation
does not fit is rejected (BANKER_CAPACITY). The bettor's own stake is not reserved: a
winning stake simply stays in the bettor's escrow. Reservations are not netted against each
other (a Tài and a Xỉu bet both reserve, though at most one can win): this is RULES.md's
literal "each accepted bet reserves its maximum possible payout", it is what the players
see as the owner's money going down, and it makes "the banker never pays more than their
stack" hold without any cap at settlement.

House capacity (system): the bank is ``house:bank``, whose balance the rules do not know, so
a bet is not refused here; the table asks the ledger to hold the round's worst case against
``house:bank`` before it accepts a bet (docs/use/ledger.md, "Holds"), and the worst case is
this module's to say: ``house_exposure_gold``, the most the bank can lose over every roll of
the three dice, each roll's payouts net of the stakes it takes on the other bets (a Tài and
a Xỉu bet of the same size cost the bank nothing but on a triple, where it wins both).
Unlike TX-7 this nets the bets: the house's bankroll is one account shared by every table,
and the netted figure is exactly what a settlement can debit it, no more.

Settlement (TX-4): per seat, net = profits of winning bets − stakes of losing bets; one
``bet_loss`` transfer (seat → bank, the losing stakes) and one ``bet_win`` transfer (bank →
seat, the profits) per seat; ``bet_results`` gives the per-bet breakdown. Fees: ``fee_bps``
of each player's net positive result, rounded down, to ``house:fees`` (reason ``fee``); in
p2p the banker pays it too on a net-winning round (TX-5). Guild (TX-6): ``guild_bps`` of
the same net result to ``guild:{guild_id}`` (reason ``guild_fee``) for members whose bets
in the round total at least ``guild_threshold_gold``; never the banker.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from socai import accounts
from socai.errors import RuleViolation, broken, check
from socai.events.model import (
    COMMUNITY,
    Body,
    DiceRolled,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    TimerExpired,
    WagerPlaced,
)
from socai.money import fee, is_gold
from socai.rules.base import (
    CLOCKWISE,
    Facing,
    GameSpec,
    GameState,
    LegalAction,
    MoveSet,
    Pending,
    Reason,
    Settlement,
    SettlementBuilder,
    game_state,
    parse_options,
    resolve_options,
    seat_or_owner,
    unexpected,
    validate_start,
)

SPEC: Final = GameSpec(
    game_id="taixiu",
    name="Tài Xỉu",
    players_min=1,
    players_max=200,  # the upper bound of HandStarted.seats_max; the table sets its own (TX-8)
    deck=None,
    direction=CLOCKWISE,  # no turn order; only used to order seats deterministically
    default_fee_bps=500,
)
# The kinds of move the game has (``base.MOVE_KINDS``): the API guide's page of the game.
MOVES: Final = ("wager",)
# The timers its hands run (``Pending.timer``; the API guide's page of the game).
TIMERS: Final = ("betting",)
# The rule a refusal cites where the game names its own (``base.refusal_rule``).
REFUSAL_RULES: Final = {"BANKER_CAPACITY": "TX-7", "BAD_SELECTION": "2.2, TX-10", "BETTING_CLOSED": "TX-8"}
# What leaving a hand in play costs (LeaveTable answers it: ``base.forfeit``).
LEAVE_RULE: Final = "TX-9, GEN-6: the bets already placed stand and are settled with the dice; no more bets"

SYSTEM: Final = "system"
P2P: Final = "p2p"
MODES: Final = (SYSTEM, P2P)
# RULES.md 2.1 / 0.6: 5 % against the system, 3 % against other players.
DEFAULT_FEE_BPS: Final[Mapping[str, int]] = MappingProxyType({SYSTEM: 500, P2P: 300})
# Bump when a rule or an Options default changes (OPTION_DEFAULTS keeps every version's).
RULES_VERSION: Final = 1
GUILD_BPS_MAX: Final = 1000
ODDS_MAX: Final = 10_000  # a limit on the configurable total payouts (TX-1)
BETTING_WINDOW_S_MAX: Final = 3600
MAX_BETS_PER_SEAT: Final = 100  # a limit on everything: confirmed bets per seat per round
DICE_COUNT: Final = 3
DIE_FACES: Final = 6

# Bet kinds, in the order the source lists them.
TAI: Final = "tai"
XIU: Final = "xiu"
SINGLE: Final = "single"
PAIR: Final = "pair"
TOTAL: Final = "total"
DOUBLE: Final = "double"
TRIPLE: Final = "triple"
ANY_TRIPLE: Final = "any_triple"
BET_KINDS: Final = (XIU, TAI, SINGLE, PAIR, TOTAL, DOUBLE, TRIPLE, ANY_TRIPLE)

# Payouts stated by the source (RULES.md 2.2), as the net multiple N of "1:N".
TAI_XIU_ODDS: Final = 1
SINGLE_ODDS_BY_COUNT: Final = (0, 1, 2, 3)  # the number shows on 0 / 1 / 2 / 3 dice
PAIR_ODDS: Final = 5
DOUBLE_ODDS: Final = 8
TRIPLE_ODDS: Final = 150
ANY_TRIPLE_ODDS: Final = 24
XIU_TOTALS: Final = range(4, 11)  # 4..10
TAI_TOTALS: Final = range(11, 18)  # 11..17
TOTALS_OFFERED: Final = range(4, 18)  # TX-10: exactly the 14 totals 4..17
PAIRS: Final = tuple(itertools.combinations(range(1, 7), 2))  # the 15 two-number bets
# The 56 distinct rolls of three dice: every bet is decided by the dice as a multiset
# (counts, total, triple), so the 216 ordered rolls add nothing to a worst case.
ROLLS: Final = tuple(itertools.combinations_with_replacement(range(1, DIE_FACES + 1), DICE_COUNT))

# Guild experience (RULES.md 2.1): a member betting at least this much in one round earns
# the guild this many points; the table owner earns none. Not money; reported only.
GUILD_XP_THRESHOLD_GOLD: Final = 5_000_000
GUILD_XP_POINTS: Final = 5

# Phases of a round.
BETTING: Final = "betting"
ROLLING: Final = "rolling"  # the window is closed; the table rolls the dice
ROLLED: Final = "rolled"  # the dice are known; HandEnded comes next
ENDED: Final = "ended"

TIMER_BETTING: Final = "betting"
WAGER: Final = "wager"


@dataclass(frozen=True, slots=True)
class Options:
    """The [Proposed TX-n] decisions of RULES.md §2.7 as named flags (defaults = RULES.md).

    ``HandStarted.fee_bps`` carries the fee itself (``DEFAULT_FEE_BPS`` per mode).
    """

    mode: str = SYSTEM  # "system" (bank = house:bank) or "p2p" (bank = the owner at dealer_seat)
    guild_bps: int = 100  # TX-6: 1 % of the net win to the guild fund
    guild_threshold_gold: int = 5_000_000  # TX-6: only members betting at least this in the round
    guild_stacks_with_fee: bool = True  # TX-6: in addition to the fee (false: carved out of it)
    banker_pays_fee: bool = True  # TX-5: the p2p banker pays fee_bps on a net-winning round
    triple_loses_tai_xiu: bool = True  # source: a triple makes both Tài and Xỉu lose
    total_bets_win_on_triple: bool = True  # TX-2: 2-2-2 pays the "6" bet
    bet_min_gold: int = 1  # TX-8 (the table's stake_gold, when larger, is the minimum)
    bet_max_gold: int = 0  # TX-8: 0 = no limit
    betting_window_s: int = 30  # TX-8: the countdown
    # TX-1: the Macau Sic Bo payouts of a total bet, net multiple N of "1:N".
    total_odds_4_17: int = 50
    total_odds_5_16: int = 18
    total_odds_6_15: int = 14
    total_odds_7_14: int = 12
    total_odds_8_13: int = 8
    total_odds_9_12: int = 6

    def validate(self) -> None:
        """Raises RuleViolation("BAD_OPTION") for a value outside its range."""
        if self.mode not in MODES:
            raise _bad_option("mode", f"mode must be one of {', '.join(MODES)}")
        if not 0 <= self.guild_bps <= GUILD_BPS_MAX:
            raise _bad_option("guild_bps", f"guild_bps must be 0..{GUILD_BPS_MAX}")
        if self.guild_threshold_gold < 0:
            raise _bad_option("guild_threshold_gold", "guild_threshold_gold must be >= 0")
        if self.bet_min_gold < 1:
            raise _bad_option("bet_min_gold", "bet_min_gold must be >= 1")
        if self.bet_max_gold < 0 or 0 < self.bet_max_gold < self.bet_min_gold:
            raise _bad_option("bet_max_gold", "bet_max_gold must be 0 (no limit) or >= bet_min_gold")
        if not 1 <= self.betting_window_s <= BETTING_WINDOW_S_MAX:
            raise _bad_option("betting_window_s", f"betting_window_s must be 1..{BETTING_WINDOW_S_MAX}")
        for name in _TOTAL_ODDS_FIELDS.values():
            if not 1 <= getattr(self, name) <= ODDS_MAX:
                raise _bad_option(name, f"{name} must be 1..{ODDS_MAX}")


OPTION_DEFAULTS: Final[Mapping[int, Mapping[str, str]]] = MappingProxyType(
    {
        1: MappingProxyType(
            {
                "mode": "system",
                "guild_bps": "100",
                "guild_threshold_gold": "5000000",
                "guild_stacks_with_fee": "true",
                "banker_pays_fee": "true",
                "triple_loses_tai_xiu": "true",
                "total_bets_win_on_triple": "true",
                "bet_min_gold": "1",
                "bet_max_gold": "0",
                "betting_window_s": "30",
                "total_odds_4_17": "50",
                "total_odds_5_16": "18",
                "total_odds_6_15": "14",
                "total_odds_7_14": "12",
                "total_odds_8_13": "8",
                "total_odds_9_12": "6",
            }
        ),
    }
)

# Every settlement reason code Tài Xỉu emits (RULES.md 2.4; no penalties, TX-9).
REASONS: Final[Mapping[str, Reason]] = MappingProxyType(
    {
        "bet_loss": Reason(False, "2.4: a losing bet's stake to the banker"),
        "bet_win": Reason(False, "2.2 / TX-3: a winning bet's profit from the banker"),
        "fee": Reason(False, "2.4 / TX-4 / TX-5: the 5 % (system) or 3 % (p2p) fee on a net win"),
        "guild_fee": Reason(False, "TX-6: 1 % of a member's net win to the guild fund"),
    }
)


def default_fee_bps(options: Options) -> int:
    """The fee of a table whose operator set none (RULES.md 0.6, GEN-1): 500 against the
    system, 300 against other players."""
    return DEFAULT_FEE_BPS[options.mode]


# Each offered total → the Options field holding its payout (TX-1).
_TOTAL_ODDS_FIELDS: Final[Mapping[int, str]] = MappingProxyType(
    {
        4: "total_odds_4_17",
        17: "total_odds_4_17",
        5: "total_odds_5_16",
        16: "total_odds_5_16",
        6: "total_odds_6_15",
        15: "total_odds_6_15",
        7: "total_odds_7_14",
        14: "total_odds_7_14",
        8: "total_odds_8_13",
        13: "total_odds_8_13",
        9: "total_odds_9_12",
        10: "total_odds_9_12",
        11: "total_odds_9_12",
        12: "total_odds_9_12",
    }
)


def _bad_option(name: str, message: str) -> RuleViolation:
    return RuleViolation("BAD_OPTION", message, option=name)


# --- state ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Bet:
    """One confirmed bet. ``reserve_gold`` is its largest possible net payout (TX-7)."""

    seat: int
    kind: str
    selection: tuple[int, ...]
    amount_gold: int
    reserve_gold: int

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, seat: int, kind: str, selection: tuple[int, ...], amount_gold: int, reserve_gold: int) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "selection", selection)
        object.__setattr__(self, "amount_gold", amount_gold)
        object.__setattr__(self, "reserve_gold", reserve_gold)


@dataclass(frozen=True, slots=True, init=False)
class BetResult:
    """How one bet ended: ``odds`` is N of "1:N" when it won, 0 when it lost;
    ``net_gold`` is +N × amount or −amount (TX-3)."""

    bet: Bet
    odds: int
    net_gold: int

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, bet: Bet, odds: int, net_gold: int) -> None:
        object.__setattr__(self, "bet", bet)
        object.__setattr__(self, "odds", odds)
        object.__setattr__(self, "net_gold", net_gold)

    @property
    def won(self) -> bool:
        return self.odds > 0


@dataclass(frozen=True, slots=True, init=False)
class SeatState:
    """A seat in the round. ``done`` means it bets no more (its timer ran out, or it left)."""

    seat: int
    player_id: str
    stack_gold: int
    guild_id: str
    staked_gold: int = 0
    bets_count: int = 0
    done: bool = False
    left: bool = False
    disconnected: bool = False

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(
        self,
        seat: int,
        player_id: str,
        stack_gold: int,
        guild_id: str,
        staked_gold: int = 0,
        bets_count: int = 0,
        done: bool = False,
        left: bool = False,
        disconnected: bool = False,
    ) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "player_id", player_id)
        object.__setattr__(self, "stack_gold", stack_gold)
        object.__setattr__(self, "guild_id", guild_id)
        object.__setattr__(self, "staked_gold", staked_gold)
        object.__setattr__(self, "bets_count", bets_count)
        object.__setattr__(self, "done", done)
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "disconnected", disconnected)


@game_state
class State(GameState):
    """A round of Tài Xỉu. ``banker_seat`` is None when the bank is ``house:bank``."""

    game: str
    table_id: str
    hand_id: str
    fee_bps: int
    options: Options
    bet_min_gold: int
    banker_seat: int | None
    seats: tuple[SeatState, ...]
    bets: tuple[Bet, ...] = ()
    reserved_gold: int = 0  # the accepted bets' largest possible payouts (p2p: from the banker, TX-7)
    # System mode: what house:bank wins (+) or loses (-) on each of ROLLS with the bets so
    # far, kept bet by bet (56 additions) so that ``house_exposure_gold`` costs no replay of
    # the round's bets; empty before the first bet and in p2p.
    house_net_by_roll: tuple[int, ...] = ()
    phase: str = BETTING
    dice: tuple[int, ...] = ()
    deck_seed: str = ""


# --- payouts ----------------------------------------------------------------------------


def is_triple(dice: tuple[int, ...]) -> bool:
    return dice[0] == dice[1] == dice[2]


def total_odds(total: int, options: Options = Options()) -> int:
    """The net multiple N a winning total bet on ``total`` pays (TX-1)."""
    if total not in TOTALS_OFFERED:  # formats the message only on failure
        broken(f"total {total} is not offered")
    odds: int = getattr(options, _TOTAL_ODDS_FIELDS[total])
    return odds


def bet_odds(kind: str, selection: tuple[int, ...], dice: tuple[int, ...], options: Options = Options()) -> int:
    """The net multiple N a bet wins on ``dice`` ("1:N", TX-3), or 0 when it loses.

    ``kind`` and ``selection`` must already be valid (``validate_selection``).
    """
    total = sum(dice)
    triple = is_triple(dice)
    if kind in (TAI, XIU):
        if triple and options.triple_loses_tai_xiu:
            return 0
        return TAI_XIU_ODDS if total in (TAI_TOTALS if kind == TAI else XIU_TOTALS) else 0
    if kind == SINGLE:
        return SINGLE_ODDS_BY_COUNT[dice.count(selection[0])]
    if kind == PAIR:
        return PAIR_ODDS if selection[0] in dice and selection[1] in dice else 0
    if kind == TOTAL:
        if triple and not options.total_bets_win_on_triple:
            return 0
        return total_odds(total, options) if total == selection[0] else 0
    if kind == DOUBLE:
        return DOUBLE_ODDS if dice.count(selection[0]) >= 2 else 0
    if kind == TRIPLE:
        return TRIPLE_ODDS if dice.count(selection[0]) == DICE_COUNT else 0
    if kind != ANY_TRIPLE:  # formats the message only on failure
        broken(f"unknown bet kind {kind!r}")
    return ANY_TRIPLE_ODDS if triple else 0


def max_odds(kind: str, selection: tuple[int, ...], options: Options = Options()) -> int:
    """The largest net multiple a bet can win (its best outcome), used for TX-7."""
    if kind in (TAI, XIU):
        return TAI_XIU_ODDS
    if kind == SINGLE:
        return SINGLE_ODDS_BY_COUNT[DICE_COUNT]
    if kind == PAIR:
        return PAIR_ODDS
    if kind == TOTAL:
        return total_odds(selection[0], options)
    if kind == DOUBLE:
        return DOUBLE_ODDS
    if kind == TRIPLE:
        return TRIPLE_ODDS
    if kind != ANY_TRIPLE:  # formats the message only on failure
        broken(f"unknown bet kind {kind!r}")
    return ANY_TRIPLE_ODDS


def validate_selection(kind: object, selection: object) -> tuple[int, ...]:
    """The bet's selection as a tuple of ints.

    Raises RuleViolation("BAD_BET_KIND") for a kind not in BET_KINDS and
    RuleViolation("BAD_SELECTION") for a selection of the wrong shape or values: ``()`` for
    tai, xiu and any_triple; ``(n,)`` with n in 1..6 for single, double and triple;
    ``(a, b)`` with 1 <= a < b <= 6 for pair; ``(t,)`` with t in 4..17 for total.
    """
    if not isinstance(kind, str) or kind not in BET_KINDS:
        raise RuleViolation("BAD_BET_KIND", f"unknown bet kind {kind!r}; known: {', '.join(BET_KINDS)}")
    if not isinstance(selection, tuple | list) or not all(type(v) is int for v in selection):
        raise RuleViolation("BAD_SELECTION", f"a {kind} selection is a tuple of ints, not {selection!r}")
    chosen = tuple(selection)
    faces = range(1, DIE_FACES + 1)
    if kind in (TAI, XIU, ANY_TRIPLE):
        ok = chosen == ()
        shape = "()"
    elif kind in (SINGLE, DOUBLE, TRIPLE):
        ok = len(chosen) == 1 and chosen[0] in faces
        shape = "(n,) with n in 1..6"
    elif kind == PAIR:
        ok = len(chosen) == 2 and chosen[0] in faces and chosen[1] in faces and chosen[0] < chosen[1]
        shape = "(a, b) with 1 <= a < b <= 6"
    else:
        ok = len(chosen) == 1 and chosen[0] in TOTALS_OFFERED
        shape = "(t,) with t in 4..17"
    if not ok:
        raise RuleViolation("BAD_SELECTION", f"a {kind} selection is {shape}, not {chosen!r}")
    return chosen


# --- the contract -----------------------------------------------------------------------


def players_min_with(options: Options) -> int:
    """Against the system one bettor plays; between players the banker and a bettor."""
    return SPEC.players_min + 1 if options.mode == P2P else SPEC.players_min


def initial_state(hand_started: HandStarted) -> State:
    """The round's state before any bet.

    Raises RuleViolation with the kit's codes (``base.validate_start``): WRONG_GAME,
    UNKNOWN_RULES_VERSION, BAD_OPTION, BAD_SEAT_COUNT (p2p: the banker and a bettor at
    least), BAD_SEATS (seats_max 1..200, duplicate or out-of-range seats, malformed ids),
    BAD_STACK (a stack is gold >= 0), BAD_STAKE (>= 0), BAD_FEE (0..1000, GEN-1),
    BAD_DEALER (p2p: dealer_seat, the banker, is not a seat), BAD_OWNER.
    """
    hs = hand_started
    if hs.game != SPEC.game_id:
        raise RuleViolation("WRONG_GAME", f"{hs.game!r} is not {SPEC.game_id}")
    options = parse_options(Options, resolve_options(OPTION_DEFAULTS, hs))
    p2p = options.mode == P2P
    validate_start(
        SPEC,
        hs,
        players_min=players_min_with(options),
        stake_min_gold=0,
        stack_min_gold=0,
        dealer_seated=True if p2p else None,
    )
    banker_seat: int | None = hs.dealer_seat if p2p else None
    seats = tuple(
        SeatState(
            seat=info.seat,
            player_id=info.player_id,
            stack_gold=info.stack_gold,
            guild_id=info.guild_id,
            done=info.seat == banker_seat,  # the banker does not bet
        )
        for info in sorted(hs.seats, key=lambda i: i.seat)
    )
    return State.create(
        game=hs.game,
        table_id=hs.table_id,
        hand_id=hs.hand_id,
        fee_bps=hs.fee_bps,
        options=options,
        bet_min_gold=max(options.bet_min_gold, hs.stake_gold),
        banker_seat=banker_seat,
        seats=seats,
    )


def apply(state: State, body: Body) -> State:
    """The state after ``body``; ``state`` is never modified.

    Raises RuleViolation with a stable code (the state is then unchanged): HAND_FINISHED
    after HandEnded; UNEXPECTED_EVENT for a body this game never has; for WagerPlaced the
    codes of ``validate_bet``; for TimerExpired WRONG_TIMER, BETTING_CLOSED, UNKNOWN_SEAT,
    SEAT_NOT_BETTING; for DiceRolled BETTING_OPEN, DICE_ALREADY_ROLLED, BAD_DICE; for
    HandEnded DICE_NOT_ROLLED; UNKNOWN_SEAT and SEAT_LEFT for a disconnect or leave.
    """
    if state.phase == ENDED:
        raise RuleViolation("HAND_FINISHED", "the round has ended")
    if isinstance(body, WagerPlaced):
        bet = validate_bet(state, body)
        seat = _seat(state, bet.seat)
        return state.derive(
            seats=_replace_seat(
                state,
                dataclasses.replace(
                    seat, staked_gold=seat.staked_gold + bet.amount_gold, bets_count=seat.bets_count + 1
                ),
            ),
            bets=(*state.bets, bet),
            reserved_gold=state.reserved_gold + bet.reserve_gold,
            house_net_by_roll=_house_net_after(state, bet),
        )
    if isinstance(body, TimerExpired):
        return _apply_timer(state, body)
    if isinstance(body, DiceRolled):
        if state.phase == BETTING:
            raise RuleViolation("BETTING_OPEN", "the dice are rolled after the betting window closes")
        if state.phase != ROLLING:
            raise RuleViolation("DICE_ALREADY_ROLLED", "the dice of this round are already rolled")
        dice = tuple(body.dice)
        if len(dice) != DICE_COUNT or not all(type(d) is int and 1 <= d <= DIE_FACES for d in dice):
            raise RuleViolation("BAD_DICE", f"three dice 1..6, not {body.dice!r}")
        return state.derive(phase=ROLLED, dice=dice)
    if isinstance(body, HandEnded):
        if state.phase != ROLLED:
            raise RuleViolation("DICE_NOT_ROLLED", "the round ends after the dice are rolled")
        return state.derive(phase=ENDED, deck_seed=body.deck_seed)
    if isinstance(body, PlayerDisconnected | PlayerReconnected):
        # TX-9: confirmed bets stand; a disconnected player may still bet if they come back
        # before the window closes.
        seat = _known_seat(state, body.seat)
        changed = dataclasses.replace(seat, disconnected=isinstance(body, PlayerDisconnected))
        return state.derive(seats=_replace_seat(state, changed))
    if isinstance(body, PlayerLeft):
        # TX-9 / GEN-6: confirmed bets stand and are settled normally; a leaver bets no more.
        seat = _known_seat(state, body.seat)
        if seat.left:
            raise RuleViolation("SEAT_LEFT", f"seat {seat.seat} has already left")
        changed = dataclasses.replace(seat, left=True, done=True)
        return _close_if_all_done(state.derive(seats=_replace_seat(state, changed)))
    raise unexpected(SPEC.name, body)


def validate_bet(state: State, body: WagerPlaced) -> Bet:
    """The bet ``body`` would place, or RuleViolation when it is not allowed now.

    Codes: BETTING_CLOSED (window closed, or this seat is done betting), UNKNOWN_SEAT,
    BANKER_CANNOT_BET, SEAT_LEFT, TOO_MANY_BETS, BAD_BET_KIND, BAD_SELECTION, BAD_AMOUNT (not
    an int), BET_TOO_SMALL, BET_TOO_LARGE, BET_ABOVE_STACK (the seat's bets in the round
    would exceed its stack), BANKER_CAPACITY (p2p: the bet's maximum payout exceeds the
    banker's unreserved stack, TX-7). BET_TOO_LARGE also when the round's possible
    payouts would no longer fit int64 gold.
    """
    if state.phase != BETTING:
        raise RuleViolation("BETTING_CLOSED", "the betting window is closed")
    seat = _known_seat(state, body.seat)
    if seat.seat == state.banker_seat:
        raise RuleViolation("BANKER_CANNOT_BET", "the banker does not bet")
    if seat.left:
        raise RuleViolation("SEAT_LEFT", f"seat {seat.seat} has left the table")
    if seat.done:
        raise RuleViolation("BETTING_CLOSED", f"seat {seat.seat} is done betting")
    if seat.bets_count >= MAX_BETS_PER_SEAT:
        raise RuleViolation("TOO_MANY_BETS", f"at most {MAX_BETS_PER_SEAT} bets per seat in a round")
    selection = validate_selection(body.kind, body.selection)
    # Read untyped, as sent: through the field's int type the compiled core (make native)
    # would take True as 1 and refuse a float with a TypeError instead of BAD_AMOUNT.
    amount: object = getattr(body, "amount_gold")  # noqa: B009
    if not is_gold(amount):
        raise RuleViolation("BAD_AMOUNT", f"a bet is an int amount of gold, not {amount!r}")
    if amount < state.bet_min_gold:
        raise RuleViolation("BET_TOO_SMALL", f"the minimum bet is {state.bet_min_gold}")
    bet_max = state.options.bet_max_gold
    if bet_max and amount > bet_max:
        raise RuleViolation("BET_TOO_LARGE", f"the maximum bet is {bet_max}")
    room = seat.stack_gold - seat.staked_gold
    if amount > room:
        raise RuleViolation("BET_ABOVE_STACK", f"seat {seat.seat} has {room} unreserved gold left")
    reserve = max_odds(body.kind, selection, state.options) * amount
    available = banker_available(state)
    if available is not None and reserve > available:
        raise RuleViolation("BANKER_CAPACITY", f"the bet may pay {reserve}; the banker has {available} unreserved")
    if not is_gold(state.reserved_gold + reserve):
        # The round's total possible payout must fit the ledger's int64 (house:bank has no cap).
        raise RuleViolation("BET_TOO_LARGE", "the round's possible payouts would not fit in int64 gold")
    return Bet(seat.seat, body.kind, selection, amount, reserve)


def pending(state: State) -> Pending:
    """While betting: the seats still betting, on the ``betting`` timer; then roll the dice;
    then finished (HandEnded comes next)."""
    if state.phase == BETTING:
        return Pending(to_act=betting_seats(state), timer=TIMER_BETTING, timeout_s=state.options.betting_window_s)
    if state.phase == ROLLING:
        return Pending(roll_dice=True)
    return Pending(finished=True)


def legal_actions(state: State, seat: int) -> tuple[LegalAction, ...]:
    """``wager`` with the amounts allowed now, or nothing.

    ``max_gold`` is the most any bet may be: the seat's unreserved stack, the table maximum
    and, in p2p, the banker's unreserved stack (the 1:1 bets' limit); bets with higher odds
    are limited further by the banker's capacity (``max_bet_gold``).
    """
    high = max_bet_gold(state, seat, TAI, ())
    if high < state.bet_min_gold:
        return ()
    return (LegalAction(WAGER, min_gold=state.bet_min_gold, max_gold=high),)


def candidate_actions(state: State, seat: int) -> list[Body]:
    """A handful of legal bets for bots: one of each kind at the minimum amount.

    The numbers chosen rotate with the count of bets already placed, so a bot that bets
    several times covers different cells. Deterministic for a given state.
    """
    if state.phase != BETTING:
        return []
    n = len(state.bets)
    face = 1 + n % DIE_FACES
    selections: dict[str, tuple[int, ...]] = {
        TAI: (),
        XIU: (),
        SINGLE: (face,),
        PAIR: PAIRS[n % len(PAIRS)],
        TOTAL: (TOTALS_OFFERED[n % len(TOTALS_OFFERED)],),
        DOUBLE: (face,),
        TRIPLE: (face,),
        ANY_TRIPLE: (),
    }
    out: list[Body] = []
    for kind in BET_KINDS:
        body = WagerPlaced(seat, kind, selections[kind], state.bet_min_gold)
        try:
            validate_bet(state, body)
        except RuleViolation:
            continue
        out.append(body)
    return out


# Every bet of the table, as (kind, selection): 50 cells (RULES.md 2.2, TX-10).
CELLS: Final = (
    (XIU, ()),
    (TAI, ()),
    *((SINGLE, (face,)) for face in range(1, DIE_FACES + 1)),
    *((PAIR, pair) for pair in PAIRS),
    *((TOTAL, (total,)) for total in TOTALS_OFFERED),
    *((DOUBLE, (face,)) for face in range(1, DIE_FACES + 1)),
    *((TRIPLE, (face,)) for face in range(1, DIE_FACES + 1)),
    (ANY_TRIPLE, ()),
)


def committed_gold(state: State, seat: int) -> int:
    """What ``seat``'s bets of the round stake."""
    return next((s.staked_gold for s in state.seats if s.seat == seat), 0)


def facing(state: State, seat: int) -> Facing:
    """``wager`` while ``seat`` may still bet: one bet is ``bet_min_gold`` to what its
    unreserved stack (and the table maximum) allows."""
    if seat not in betting_seats(state):
        return Facing()
    high = max_bet_gold(state, seat, TAI, ())
    return Facing("wager", amount_gold=state.bet_min_gold, max_gold=high, text="the betting window is open")


def legal_moves(state: State, seat: int) -> tuple[MoveSet, ...]:
    """One ``wager`` set per cell ``seat`` may bet on now (kind and selection): any amount
    from ``bet_min_gold`` to the cell's own maximum (``max_bet_gold``: the seat's
    unreserved stack, the table maximum, and against a player-banker the banker's capacity
    over the cell's odds, TX-7); the example is the cell at the minimum."""
    if seat not in betting_seats(state):
        return ()
    low = state.bet_min_gold
    # ``max_bet_gold`` for every cell, with the seat's own checks made once: the cells differ
    # only in their odds, hence in what the banker can cover (a view of a 200-seat table
    # computes this for every seat still betting, at every bet).
    tai = max_bet_gold(state, seat, TAI, ())
    if tai < low:
        return ()  # the seat may not bet now, or not even the 1:1 bet fits the banker
    seat_high = seat_available(state, seat)
    if state.options.bet_max_gold:
        seat_high = min(seat_high, state.options.bet_max_gold)
    banker = banker_available(state)
    out = []
    for kind, selection in CELLS:
        high = seat_high if banker is None else min(seat_high, banker // max_odds(kind, selection, state.options))
        if high < low:
            continue
        chosen = f" {' '.join(map(str, selection))}" if selection else ""
        text = f"bet on {kind}{chosen}: any amount from {low} to {high}"
        out.append(MoveSet(WAGER, text, (WagerPlaced(seat, kind, selection, low),), False, low, high))
    return tuple(out)


def is_finished(state: State) -> bool:
    """True once HandEnded has been applied (after the dice)."""
    return state.phase == ENDED


def settle(state: State) -> Settlement:
    """The round's transfers (RULES.md 2.4, TX-4..TX-6).

    Raises RuleViolation("HAND_NOT_OVER") before HandEnded.
    """
    if not is_finished(state):
        raise RuleViolation("HAND_NOT_OVER", "settle needs the dice and HandEnded")
    options = state.options
    builder = SettlementBuilder(
        game=state.game,
        table_id=state.table_id,
        hand_id=state.hand_id,
        seat_players={s.seat: s.player_id for s in state.seats},
    )
    bank = accounts.HOUSE_BANK if state.banker_seat is None else builder.account(state.banker_seat)
    profits: dict[int, int] = {}
    losses: dict[int, int] = {}
    for result in bet_results(state):
        seat = result.bet.seat
        if result.won:
            profits[seat] = profits.get(seat, 0) + result.net_gold
        else:
            losses[seat] = losses.get(seat, 0) - result.net_gold
    players = [s for s in state.seats if s.seat != state.banker_seat]
    for s in players:
        builder.pay(builder.account(s.seat), bank, losses.get(s.seat, 0), "bet_loss")
        builder.pay(bank, builder.account(s.seat), profits.get(s.seat, 0), "bet_win")
    for s in players:
        net = profits.get(s.seat, 0) - losses.get(s.seat, 0)
        check(net >= -s.staked_gold, "a player lost more than they staked")
        house_fee = fee(net, state.fee_bps)
        guild_fee = 0
        if s.guild_id and s.staked_gold >= options.guild_threshold_gold:
            guild_fee = fee(net, options.guild_bps)
            if not options.guild_stacks_with_fee:
                # The guild's share is carved out of the house fee rather than added to it.
                guild_fee = min(guild_fee, house_fee)
                house_fee -= guild_fee
        builder.pay(builder.account(s.seat), accounts.HOUSE_FEES, house_fee, "fee")
        if guild_fee:
            builder.pay(builder.account(s.seat), accounts.guild(s.guild_id), guild_fee, "guild_fee")
    if state.banker_seat is not None:
        banker = _seat(state, state.banker_seat)
        banker_net = sum(losses.values()) - sum(profits.values())
        check(banker_net >= -banker.stack_gold, "the banker paid more than their stack (TX-7)")
        if options.banker_pays_fee:  # TX-5; never a guild contribution (TX-6)
            builder.pay(bank, accounts.HOUSE_FEES, fee(banker_net, state.fee_bps), "fee")
    return builder.build()


# --- queries (UI, bots, tests) ----------------------------------------------------------


def bet_results(state: State) -> tuple[BetResult, ...]:
    """Every confirmed bet with its outcome on the rolled dice (the per-bet breakdown)."""
    if not state.dice:
        raise RuleViolation("DICE_NOT_ROLLED", "bets are decided by the dice")
    out = []
    for bet in state.bets:
        odds = bet_odds(bet.kind, bet.selection, state.dice, state.options)
        out.append(BetResult(bet, odds, odds * bet.amount_gold if odds else -bet.amount_gold))
    return tuple(out)


def banker_available(state: State) -> int | None:
    """p2p: the banker's unreserved stack, the "remaining owner money" players see (TX-7).
    None in system mode, where the bank is ``house:bank``."""
    if state.banker_seat is None:
        return None
    return _seat(state, state.banker_seat).stack_gold - state.reserved_gold


def house_exposure_gold(state: State) -> int:
    """System mode: the most ``house:bank`` can lose on the round's accepted bets, over
    every roll of the three dice — on each roll the profits it pays net of the stakes it
    takes from the bets that lose — or 0 when it loses on no roll. Exactly the largest
    debit of ``house:bank`` that ``settle`` can post for these bets (fees and guild shares
    are paid by the players). 0 in p2p, where the banker is a seat and TX-7's reservations
    (``banker_available``) bound what it pays.

    The table holds this much of ``house:bank`` in the ledger before it accepts a bet, so a
    settlement is never refused for the bank's funds.
    """
    if state.banker_seat is not None or not state.house_net_by_roll:
        return 0
    return max(0, -min(state.house_net_by_roll))


def house_net_per_gold(kind: str, selection: tuple[int, ...], options: Options) -> tuple[int, ...]:
    """What ``house:bank`` wins or loses per gold of one bet on each of ``ROLLS``: +1 (the
    stake) when the bet loses, −N when it wins "1:N"."""
    return _house_net_per_gold(kind, tuple(selection), options)


@functools.lru_cache(maxsize=4096)  # (kind, selection) pairs x the options of the tables in play
def _house_net_per_gold(kind: str, selection: tuple[int, ...], options: Options) -> tuple[int, ...]:
    return tuple(-odds if (odds := bet_odds(kind, selection, roll, options)) else 1 for roll in ROLLS)


def _house_net_after(state: State, bet: Bet) -> tuple[int, ...]:
    if state.banker_seat is not None:
        return ()
    unit = _house_net_per_gold(bet.kind, bet.selection, state.options)
    amount = bet.amount_gold
    before = state.house_net_by_roll or (0,) * len(ROLLS)
    return tuple(net + amount * per_gold for net, per_gold in zip(before, unit, strict=True))


def seat_available(state: State, seat: int) -> int:
    """What ``seat`` may still bet this round: its stack minus its confirmed bets."""
    s = _known_seat(state, seat)
    return s.stack_gold - s.staked_gold


def max_bet_gold(state: State, seat: int, kind: str, selection: tuple[int, ...]) -> int:
    """The largest amount ``seat`` may bet on (kind, selection) now; 0 when it may not bet."""
    try:
        validate_bet(state, WagerPlaced(seat, kind, selection, state.bet_min_gold))
    except RuleViolation:
        return 0
    high = seat_available(state, seat)
    if state.options.bet_max_gold:
        high = min(high, state.options.bet_max_gold)
    available = banker_available(state)
    if available is not None:
        high = min(high, available // max_odds(kind, selection, state.options))
    return high


def betting_seats(state: State) -> tuple[int, ...]:
    """The seats that may still bet (not the banker, not done, not left), in seat order."""
    if state.phase != BETTING:
        return ()
    return tuple(s.seat for s in state.seats if not s.done)


def guild_experience(state: State) -> dict[str, int]:
    """Guild XP earned this round (RULES.md 2.1): GUILD_XP_POINTS per member whose bets
    total at least GUILD_XP_THRESHOLD_GOLD; the table owner (p2p banker) earns none."""
    xp: dict[str, int] = {}
    for s in state.seats:
        if s.guild_id and s.seat != state.banker_seat and s.staked_gold >= GUILD_XP_THRESHOLD_GOLD:
            xp[s.guild_id] = xp.get(s.guild_id, 0) + GUILD_XP_POINTS
    return xp


# --- helpers ----------------------------------------------------------------------------


def _seat(state: State, seat: int) -> SeatState:
    for s in state.seats:
        if s.seat == seat:
            return s
    raise RuleViolation("UNKNOWN_SEAT", f"seat {seat} is not in this round", seat=seat)


def _known_seat(state: State, seat: object) -> SeatState:
    if type(seat) is not int:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat!r} is not a seat number")
    return _seat(state, seat)


def _replace_seat(state: State, changed: SeatState) -> tuple[SeatState, ...]:
    return tuple(changed if s.seat == changed.seat else s for s in state.seats)


def _apply_timer(state: State, body: TimerExpired) -> State:
    if body.timer != TIMER_BETTING:
        raise RuleViolation("WRONG_TIMER", f"Tài Xỉu has only the betting timer, not {body.timer!r}")
    if state.phase != BETTING:
        raise RuleViolation("BETTING_CLOSED", "the betting window is already closed")
    if body.seat == COMMUNITY:
        return state.derive(phase=ROLLING)
    seat = _known_seat(state, body.seat)
    if seat.done:
        raise RuleViolation("SEAT_NOT_BETTING", f"seat {seat.seat} is not betting")
    changed = dataclasses.replace(seat, done=True)
    return _close_if_all_done(state.derive(seats=_replace_seat(state, changed)))


def _close_if_all_done(state: State) -> State:
    if state.phase == BETTING and not betting_seats(state):
        return state.derive(phase=ROLLING)
    return state


def next_hand_dealer(
    previous_state: State | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The banker seat of the next round: always the table owner (RULES.md 2.1, mode
    ``p2p``); against the house the seat is only a reference, the owner or the first seat."""
    return seat_or_owner(None, participants, owner_seat)
