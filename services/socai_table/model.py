"""The table service's domain: table configuration and seats (no protobuf here)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from socai import accounts, errors
from socai.money import INT64_MAX, TABLE_FEE_BPS_MAX, is_gold
from socai.rules import registry
from socai.rules.base import default_fee_bps, parse_options

TABLE_ID = re.compile(r"[A-Za-z0-9]{1,32}")
SEATS_LIMIT = 200  # Tài Xỉu tables are large; card games keep their own maximum
TURN_TIMEOUT_DEFAULT_S = 15
TURN_TIMEOUT_MAX_S = 600
BETWEEN_HANDS_DEFAULT_MS = 1000
# Rules take multiples of the stake (raises up to 30x, Mậu Binh units, Phỏm's 5x …) and the
# default buy-in range is 100x: a stake below int64 / 1000 keeps every derived amount in
# int64, which the events and the ledger carry.
STAKE_MAX_GOLD = INT64_MAX // 1000
OPTIONS_MAX = 32
OPTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
OPTION_VALUE_MAX_CHARS = 64
TURN_TIMER_OPTION = "turn_timeout_s"  # the games' turn-timer option, which the table's override sets


@dataclass(frozen=True)
class TableConfig:
    game: str
    stake_gold: int
    fee_bps: int | None  # None: the game's default for its mode; 0: no fee
    seats_max: int
    options: dict[str, str] = field(default_factory=dict)
    buy_in_min_gold: int = 0
    buy_in_max_gold: int = 0
    auto_start_players: int = 0
    turn_timeout_s: int = 0
    owner_player_id: str = ""
    between_hands_ms: int = 0

    @property
    def fee(self) -> int:
        """The fee of a validated config (``validated`` resolves an unset fee to the game's)."""
        if self.fee_bps is None:
            raise errors.PreconditionFailed("FEE_UNRESOLVED", "the table config was not validated")
        return self.fee_bps

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> TableConfig:
        import json

        raw = json.loads(data) if isinstance(data, str) else data
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def normalized(self) -> TableConfig:
        """Validate against the game's rules and fill defaults.

        Raises InvalidArgument (malformed values) or RuleViolation("BAD_OPTION") (an
        option the game does not know), so a table never runs with settings the rules
        engine cannot honour.
        """
        try:
            module = registry.get(self.game)
        except errors.NotFound as exc:
            raise errors.InvalidArgument("GAME_NOT_AVAILABLE", exc.message) from exc
        spec = module.SPEC
        for name in ("stake_gold", "buy_in_min_gold", "buy_in_max_gold"):
            value = getattr(self, name)
            if not is_gold(value) or value < 0:
                raise errors.InvalidArgument("BAD_AMOUNT", f"{name} must be a non-negative int64")
        if not 0 < self.stake_gold <= STAKE_MAX_GOLD:
            raise errors.InvalidArgument("BAD_STAKE", f"stake_gold must be 1..{STAKE_MAX_GOLD}")
        if self.owner_player_id and not accounts.is_valid_part(self.owner_player_id):
            raise errors.InvalidArgument(
                "BAD_PLAYER_ID", "owner_player_id must be empty or 1-64 of A-Z a-z 0-9 _ . - @"
            )
        _check_options(self.options)
        seats_max = self.seats_max or spec.players_max
        if not spec.players_min <= seats_max <= min(spec.players_max, SEATS_LIMIT):
            raise errors.InvalidArgument(
                "BAD_SEATS", f"{self.game} seats {spec.players_min}..{spec.players_max} players, not {seats_max}"
            )
        if not 0 <= self.turn_timeout_s <= TURN_TIMEOUT_MAX_S:
            raise errors.InvalidArgument("BAD_TIMEOUT", f"turn_timeout_s must be 0..{TURN_TIMEOUT_MAX_S}")
        options = self.options
        if self.turn_timeout_s and TURN_TIMER_OPTION in {f.name for f in fields(module.Options)}:
            # The table's turn timer is the game's turn timer: written into the options, so
            # every HandStarted records the timer actually in force (RULES.md GEN-5).
            given = options.get(TURN_TIMER_OPTION)
            if given is not None and given != str(self.turn_timeout_s):
                raise errors.InvalidArgument(
                    "BAD_TIMEOUT", f"turn_timeout_s {self.turn_timeout_s} and options.turn_timeout_s {given} differ"
                )
            options = {**options, TURN_TIMER_OPTION: str(self.turn_timeout_s)}
        parsed = parse_options(module.Options, options)
        for f in fields(parsed):
            value = getattr(parsed, f.name)
            if type(value) is int and not -INT64_MAX <= value <= INT64_MAX:
                raise errors.InvalidArgument("BAD_OPTION", f"option {f.name} is out of int64 range")
        # An operator's explicit 0 means no fee; only an unset fee takes the game's default
        # for its mode (a p2p Tài Xỉu table 300, not the 500 of a table against the system).
        fee_bps = default_fee_bps(module, self.options) if self.fee_bps is None else self.fee_bps
        if type(fee_bps) is not int or not 0 <= fee_bps <= TABLE_FEE_BPS_MAX:
            raise errors.InvalidArgument("BAD_FEE", f"fee_bps must be 0..{TABLE_FEE_BPS_MAX}")
        buy_in_min = self.buy_in_min_gold or self.stake_gold
        buy_in_max = self.buy_in_max_gold or max(buy_in_min, 100 * self.stake_gold)
        if not (is_gold(buy_in_min) and is_gold(buy_in_max)):
            raise errors.InvalidArgument("BAD_BUY_IN", "the buy-in range must fit in int64")
        if buy_in_min > buy_in_max:
            raise errors.InvalidArgument("BAD_BUY_IN", "buy_in_min_gold exceeds buy_in_max_gold")
        if not 0 <= self.auto_start_players <= seats_max:
            raise errors.InvalidArgument("BAD_AUTO_START", "auto_start_players exceeds the seats")
        if not 0 <= self.between_hands_ms <= 60_000:
            raise errors.InvalidArgument("BAD_DELAY", "between_hands_ms must be 0..60000")
        return TableConfig(
            game=self.game,
            stake_gold=self.stake_gold,
            fee_bps=fee_bps,
            seats_max=seats_max,
            options=dict(sorted(options.items())),
            buy_in_min_gold=buy_in_min,
            buy_in_max_gold=buy_in_max,
            auto_start_players=self.auto_start_players,
            turn_timeout_s=self.turn_timeout_s,  # 0: the game's own turn timer
            owner_player_id=self.owner_player_id,
            between_hands_ms=self.between_hands_ms or BETWEEN_HANDS_DEFAULT_MS,
        )


def _check_options(options: dict[str, str]) -> None:
    """Shape of the operator's options before the game reads them: a bounded number of
    short, printable names and values (a 5,000-digit value or a NUL must be refused here,
    not fail deep in the engine or the event encoder)."""
    if len(options) > OPTIONS_MAX:
        raise errors.InvalidArgument("BAD_OPTION", f"at most {OPTIONS_MAX} options")
    for name, value in options.items():
        if not isinstance(name, str) or not OPTION_NAME.fullmatch(name):
            raise errors.InvalidArgument("BAD_OPTION", "option names are 1-64 of a-z 0-9 _, starting with a letter")
        if not isinstance(value, str) or len(value) > OPTION_VALUE_MAX_CHARS or not value.isprintable():
            raise errors.InvalidArgument(
                "BAD_OPTION", f"option {name}: values are at most {OPTION_VALUE_MAX_CHARS} printable characters"
            )


@dataclass(frozen=True)
class Seat:
    """A seated player and the chips the table knows they hold (their escrow); a value of
    the table's state (``socai_table.core``), replaced, never changed in place."""

    seat: int
    player_id: str
    stack_gold: int
    guild_id: str = ""
    connected: bool = True
    leaving: bool = False
    last_hand_id: str = ""
    join_tx: str = ""  # the ledger transaction of the buy-in that seated the player
    seated_at: int = 0  # the stream sequence of the PlayerSeated that seated the player


def hand_id_of(table_id: str, number: int) -> str:
    """``{table_id}-h{n}``: unique in the stream, and deterministic so a restart re-uses it."""
    return f"{table_id}-h{number}"


def facts_id_of(table_id: str) -> str:
    """The ``hand_id`` of the table's own facts (opened, seated, stood up)."""
    return f"{table_id}-t"


def join_key(player_id: str, client_key: str) -> str:
    """The stored key of a join: the client's key scoped by its player, so a key one
    player used is neither replayed nor refused for another."""
    return f"{player_id}/{client_key}"


def buy_in_key(join_key: str, table_id: str) -> str:
    """The ledger key of a join's buy-in: ``join:{table}:{player}:{digest}``.

    The digest of the (player-scoped) join key keeps the ledger key within its 200
    characters whatever the client's key is, and readable by table and player.
    """
    player, sep, _ = join_key.partition("/")
    digest = hashlib.sha256(join_key.encode()).hexdigest()[:32]
    return f"join:{table_id}:{player}:{digest}" if sep else f"join:{table_id}:{join_key}"
