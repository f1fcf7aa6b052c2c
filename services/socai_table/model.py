"""The table service's domain: table configuration and seats (no protobuf here)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from socai import errors
from socai.money import FEE_BPS_MAX, is_gold
from socai.rules import registry
from socai.rules.base import parse_options

TABLE_ID = re.compile(r"[A-Za-z0-9]{1,32}")
SEATS_LIMIT = 200  # Tài Xỉu tables are large; card games keep their own maximum
TURN_TIMEOUT_DEFAULT_S = 15
TURN_TIMEOUT_MAX_S = 600
BETWEEN_HANDS_DEFAULT_MS = 1000


@dataclass(frozen=True)
class TableConfig:
    game: str
    stake_gold: int
    fee_bps: int
    seats_max: int
    options: dict[str, str] = field(default_factory=dict)
    buy_in_min_gold: int = 0
    buy_in_max_gold: int = 0
    auto_start_players: int = 0
    turn_timeout_s: int = 0
    owner_player_id: str = ""
    between_hands_ms: int = 0

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
        if self.stake_gold <= 0:
            raise errors.InvalidArgument("BAD_STAKE", "stake_gold must be positive")
        fee_bps = self.fee_bps or spec.default_fee_bps
        if not 0 <= fee_bps <= FEE_BPS_MAX // 10:
            raise errors.InvalidArgument("BAD_FEE", "fee_bps must be 0..1000 (10 %)")
        seats_max = self.seats_max or spec.players_max
        if not spec.players_min <= seats_max <= min(spec.players_max, SEATS_LIMIT):
            raise errors.InvalidArgument(
                "BAD_SEATS", f"{self.game} seats {spec.players_min}..{spec.players_max} players, not {seats_max}"
            )
        parse_options(module.Options, self.options)
        buy_in_min = self.buy_in_min_gold or self.stake_gold
        buy_in_max = self.buy_in_max_gold or max(buy_in_min, 100 * self.stake_gold)
        if buy_in_min > buy_in_max:
            raise errors.InvalidArgument("BAD_BUY_IN", "buy_in_min_gold exceeds buy_in_max_gold")
        if not 0 <= self.turn_timeout_s <= TURN_TIMEOUT_MAX_S:
            raise errors.InvalidArgument("BAD_TIMEOUT", f"turn_timeout_s must be 0..{TURN_TIMEOUT_MAX_S}")
        if not 0 <= self.auto_start_players <= seats_max:
            raise errors.InvalidArgument("BAD_AUTO_START", "auto_start_players exceeds the seats")
        if not 0 <= self.between_hands_ms <= 60_000:
            raise errors.InvalidArgument("BAD_DELAY", "between_hands_ms must be 0..60000")
        return TableConfig(
            game=self.game,
            stake_gold=self.stake_gold,
            fee_bps=fee_bps,
            seats_max=seats_max,
            options=dict(sorted(self.options.items())),
            buy_in_min_gold=buy_in_min,
            buy_in_max_gold=buy_in_max,
            auto_start_players=self.auto_start_players,
            turn_timeout_s=self.turn_timeout_s,  # 0: the game's own turn timer
            owner_player_id=self.owner_player_id,
            between_hands_ms=self.between_hands_ms or BETWEEN_HANDS_DEFAULT_MS,
        )


@dataclass
class Seat:
    """A seated player and the chips the table knows they hold (their escrow)."""

    seat: int
    player_id: str
    stack_gold: int
    guild_id: str = ""
    connected: bool = True
    leaving: bool = False
    last_hand_id: str = ""
    last_heartbeat: float = 0.0  # monotonic seconds; 0 = the player never sent one


def hand_id_of(table_id: str, number: int) -> str:
    """``{table_id}-h{n}``: unique in the stream, and deterministic so a restart re-uses it."""
    return f"{table_id}-h{number}"


def facts_id_of(table_id: str) -> str:
    """The ``hand_id`` of the table's own facts (opened, seated, stood up)."""
    return f"{table_id}-t"
