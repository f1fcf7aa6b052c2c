"""The domain events of a hand: plain frozen dataclasses, no protobuf.

Each body here has a protobuf twin of the same name and field names in
``proto/socai/events/v1/events.proto``; ``socai.events.codec`` converts between the two
generically (cards travel as ``"As"`` strings, enums by name). The rules engine, the
table's game loop, settlement and the auditor all work on these classes.

Events record facts and player decisions. Outcomes (who won, what was chặt, who is thối)
are never events: the rules engine derives them.

Seats are numbered 0..seats_max-1 clockwise around the table. ``COMMUNITY`` (-1) is the
seat of community cards and of table-level timers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from socai.cards import Card, HiddenCard

COMMUNITY = -1


# A card the reader may not see: a face-down card of another seat, as the ``visible`` hook
# shows it, and in the log a face-down card of a hand that writes those by position
# (``HandStarted.face_down_by_position``, ``socai.events.hidden``). The codec decodes ""
# as this card in ``DealtCard.card`` only; anywhere else "" is a bad card.
HIDDEN_CARD: Card = HiddenCard(0, 0)


class ActionKind(StrEnum):
    """A betting decision (Hold'em, Xì Tố, Liêng, Liêng Sảnh, 3 Cây)."""

    CHECK = "check"
    BET = "bet"
    CALL = "call"
    RAISE = "raise"
    FOLD = "fold"
    ALL_IN = "all_in"


# --- bodies common to every game -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeatInfo:
    """A seat dealt into the hand, with the chips (tẩy) its player brings to it."""

    seat: int
    player_id: str
    stack_gold: int
    guild_id: str = ""


@dataclass(frozen=True, slots=True)
class HandStarted:
    """A hand begins. Everything the rules engine needs to replay it is here.

    ``dealer_seat`` is the game's reference seat: the dealer button (Hold'em), the seat dealt
    first (Xì Tố: the owner, then the previous winner), the banker (Ba Cây Chương, Tài Xỉu
    against a player) or the first to play (shedding games). ``owner_seat`` is the table
    owner's seat, or -1. ``pot_gold`` is what the table's pot account carries into the hand
    (3 Cây Gà). ``options`` are the game's named flags as strings (RULES.md [Proposed]
    decisions), parsed and validated by the game's ``Options``: the table records every
    option with its value after defaults (``socai.rules.base.full_options``), and
    ``rules_version`` is the game's ``RULES_VERSION`` the hand was played under (0 in hands
    logged before it was recorded, which replay as version 1), so the hand log alone says
    which rules settle it. ``closing`` marks a table's closing hand (``CloseTable``): no
    cards and no decisions, only the carried ``pot_gold`` returned to the seated players by
    the game's closing rule, then HandEnded (``socai.settle.replay.closing_settlement``).
    ``face_down_by_position`` says how the log writes the cards only their seat may see
    while the hand is in play: by their position in the committed deck (True: every hand
    the table service starts) or in the clear (False: hands logged before), see
    ``socai.events.hidden``.
    """

    table_id: str
    hand_id: str
    game: str
    hand_number: int
    stake_gold: int
    fee_bps: int
    seats_max: int
    seats: tuple[SeatInfo, ...]
    dealer_seat: int
    deck_commitment: str
    owner_seat: int = -1
    pot_gold: int = 0
    options: Mapping[str, str] = field(default_factory=dict)
    rules_version: int = 0
    closing: bool = False
    face_down_by_position: bool = False


@dataclass(frozen=True, slots=True)
class DealtCard:
    seat: int  # COMMUNITY for a board card
    card: Card  # HIDDEN_CARD: face down, in the log of a hand that writes those by position
    face_up: bool


@dataclass(frozen=True, slots=True)
class CardsDealt:
    """Cards taken from the shuffled deck, in deck order (DESIGN.md "Fairness" 5).

    A draw from the stock (Phỏm) is a deal of one card to the drawer.
    """

    cards: tuple[DealtCard, ...]


@dataclass(frozen=True, slots=True)
class DiceRolled:
    """Tài Xỉu's three dice, each ``1 + uniform(6)`` from the hand's seed."""

    dice: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BetAction:
    """A betting decision. ``amount_gold`` is the chips this action adds to the seat's
    commitment (0 for check and fold); the engine checks it against the rules."""

    seat: int
    kind: ActionKind
    amount_gold: int = 0


@dataclass(frozen=True, slots=True)
class WagerPlaced:
    """A wager on an outcome, placed during a betting window (Tài Xỉu; Ba Cây Chương's
    bet against the banker). ``kind`` and ``selection`` are the game's own (TX bet kinds:
    ``tai xiu single pair total double triple any_triple``)."""

    seat: int
    kind: str
    selection: tuple[int, ...]
    amount_gold: int


@dataclass(frozen=True, slots=True)
class TimerExpired:
    """A timer ran out: the seat's turn (``turn``), Mậu Binh's arrangement (``arrange``),
    Ba Cây's flip (``flip``), a betting window (``betting``, seat COMMUNITY). The game's own
    timeout rule decides what follows (RULES.md GEN-5)."""

    seat: int
    timer: str
    # The move the rules made for the seat (``socai.rules.automatic``), recorded by the table
    # and checked by the replay; "" in hands written before it was recorded.
    automatic: str = ""


@dataclass(frozen=True, slots=True)
class PlayerDisconnected:
    seat: int


@dataclass(frozen=True, slots=True)
class PlayerReconnected:
    seat: int


@dataclass(frozen=True, slots=True)
class PlayerLeft:
    """The player left mid-hand (RULES.md GEN-6: the game's leaving rule applies)."""

    seat: int


@dataclass(frozen=True, slots=True)
class HandEnded:
    """The hand is over; reveals the seed so anyone can re-deal it."""

    deck_seed: str


# --- bodies for the shedding, drawing and arranging games ------------------------------


@dataclass(frozen=True, slots=True)
class CardsPlayed:
    """Cards put on the table from a hand: a Tiến Lên / Sâm combination, a Phỏm discard."""

    seat: int
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class Passed:
    """Bỏ lượt: the seat passes in the current round (Tiến Lên, Sâm Lốc)."""

    seat: int


@dataclass(frozen=True, slots=True)
class Declared:
    """A declaration: ``sam`` (báo Sâm), ``no_sam``, ``u`` (Phỏm Ù), ``draw`` (Phỏm bốc: the
    table then deals the seat one card from the stock), ``flip`` (Ba Cây lật bài); reserved:
    ``special``, ``instant_win``, ``bank`` (the games detect those from the cards today)."""

    seat: int
    declaration: str


@dataclass(frozen=True, slots=True)
class Arranged:
    """Mậu Binh: the three chi, back (5 cards), middle (5) and front (3).

    As the log of a hand with ``face_down_by_position`` holds it, the cards are empty and
    the ``*_positions`` give each card's position in the shuffled deck instead
    (``socai.events.hidden``); the rules engine only ever sees the cards."""

    seat: int
    back: tuple[Card, ...]
    middle: tuple[Card, ...]
    front: tuple[Card, ...]
    back_positions: tuple[int, ...] = ()
    middle_positions: tuple[int, ...] = ()
    front_positions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CardTaken:
    """Phỏm ăn: the seat takes the card just discarded by ``from_seat``."""

    seat: int
    from_seat: int
    card: Card


@dataclass(frozen=True, slots=True)
class Meld:
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class MeldsLaid:
    """Phỏm hạ: the seat lays its melds (phỏm) face up."""

    seat: int
    melds: tuple[Meld, ...]


@dataclass(frozen=True, slots=True)
class CardSent:
    """Phỏm gửi: the seat adds a card to another seat's laid meld."""

    seat: int
    to_seat: int
    meld_index: int
    card: Card


Body = (
    HandStarted
    | CardsDealt
    | DiceRolled
    | BetAction
    | WagerPlaced
    | TimerExpired
    | PlayerDisconnected
    | PlayerReconnected
    | PlayerLeft
    | HandEnded
    | CardsPlayed
    | Passed
    | Declared
    | Arranged
    | CardTaken
    | MeldsLaid
    | CardSent
)

BODY_TYPES: tuple[type, ...] = (
    HandStarted,
    CardsDealt,
    DiceRolled,
    BetAction,
    WagerPlaced,
    TimerExpired,
    PlayerDisconnected,
    PlayerReconnected,
    PlayerLeft,
    HandEnded,
    CardsPlayed,
    Passed,
    Declared,
    Arranged,
    CardTaken,
    MeldsLaid,
    CardSent,
)


# --- table-level facts (subject socai.events.{table_id}.table) ------------------------


@dataclass(frozen=True, slots=True)
class TableOpened:
    table_id: str
    game: str
    stake_gold: int
    fee_bps: int
    seats_max: int
    owner_player_id: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    buy_in_min_gold: int = 0
    buy_in_max_gold: int = 0


@dataclass(frozen=True, slots=True)
class PlayerSeated:
    seat: int
    player_id: str
    buy_in_gold: int
    guild_id: str = ""
    ledger_transaction_id: str = ""


@dataclass(frozen=True, slots=True)
class PlayerStoodUp:
    seat: int
    player_id: str
    cash_out_gold: int
    ledger_transaction_id: str = ""


@dataclass(frozen=True, slots=True)
class TableClosed:
    reason: str = ""


TABLE_BODY_TYPES: tuple[type, ...] = (TableOpened, PlayerSeated, PlayerStoodUp, TableClosed)


@dataclass(frozen=True, slots=True)
class Event:
    """The envelope (DESIGN.md "Events"): ``event_id`` is ``{hand_id}/{seq}``, ``seq`` is
    gapless from 1 within a hand."""

    table_id: str
    hand_id: str
    seq: int
    game: str
    occurred_at: datetime
    body: Body | TableOpened | PlayerSeated | PlayerStoodUp | TableClosed

    @property
    def event_id(self) -> str:
        return f"{self.hand_id}/{self.seq}"


def subject(table_id: str, hand_id: str, prefix: str = "socai.events") -> str:
    """The NATS subject of a hand's events: ``socai.events.{table_id}.{hand_id}``."""
    return f"{prefix}.{table_id}.{hand_id}"
