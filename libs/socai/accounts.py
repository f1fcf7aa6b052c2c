"""Ledger account ids (DESIGN.md "Accounts"): one place builds and parses them.

| account                        | holds                                   | may go negative |
| ``player:{player_id}``         | wallet, available gold                  | no  |
| ``escrow:{table_id}:{player}`` | chips at a table (tẩy)                  | no  |
| ``house:fees``                 | rake, commission, fees                  | no  |
| ``house:bank``                 | bankroll for games against the house    | no  |
| ``pot:{table_id}``             | money a table carries between hands     | no  |
| ``guild:{guild_id}``           | guild fund                              | no  |
| ``external:cashier``           | the world outside: deposits, withdrawals | yes |
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

from socai.errors import InvalidArgument, shown

HOUSE_FEES: Final = "house:fees"
HOUSE_BANK: Final = "house:bank"
EXTERNAL_CASHIER: Final = "external:cashier"

KINDS: Final = ("player", "escrow", "house", "pot", "guild", "external")
ACCOUNT_ID_MAX_CHARS: Final = 200
# Ids are printable ASCII without spaces; ':' separates parts. NATS subjects use the kind only.
# Patterns are applied with ``fullmatch``: ``$`` alone would also accept a trailing newline.
# A part is never dots alone: ``.`` and ``..`` read as the current and parent directory
# wherever an id becomes a path or a URL segment (exports, the auditor's desk), and no player,
# table or guild is called that.
_PART = r"(?!\.+(?::|\Z))[A-Za-z0-9_.\-@]{1,64}"
_PATTERNS: Final = {
    "player": re.compile(rf"player:{_PART}"),
    "escrow": re.compile(rf"escrow:{_PART}:{_PART}"),
    "house": re.compile(r"house:(fees|bank)"),
    "pot": re.compile(rf"pot:{_PART}"),
    "guild": re.compile(rf"guild:{_PART}"),
    "external": re.compile(r"external:cashier"),
}
_ID_PART = re.compile(_PART)


def player(player_id: str) -> str:
    return f"player:{_part(player_id, 'player_id')}"


@lru_cache(maxsize=65_536)  # pure, and on the settlement hot path (a few calls per hand)
def escrow(table_id: str, player_id: str) -> str:
    return f"escrow:{_part(table_id, 'table_id')}:{_part(player_id, 'player_id')}"


def pot(table_id: str) -> str:
    return f"pot:{_part(table_id, 'table_id')}"


def guild(guild_id: str) -> str:
    return f"guild:{_part(guild_id, 'guild_id')}"


def kind_of(account_id: object) -> str:
    """The kind (``player``, ``escrow``, …) of a well-formed id.

    Raises InvalidArgument("BAD_ACCOUNT_ID") when the id is malformed.
    """
    if not isinstance(account_id, str):
        raise InvalidArgument("BAD_ACCOUNT_ID", f"an account id is a string, not {shown(account_id)}")
    kind = account_id.split(":", 1)[0]
    pattern = _PATTERNS.get(kind)
    if pattern is None or len(account_id) > ACCOUNT_ID_MAX_CHARS or not pattern.fullmatch(account_id):
        raise InvalidArgument("BAD_ACCOUNT_ID", f"not a valid account id: {shown(account_id)}")
    return kind


def may_go_negative(account_id: str) -> bool:
    """Only the outside world (``external:cashier``) may hold a negative balance."""
    return kind_of(account_id) == "external"


def is_valid_part(text: str) -> bool:
    return isinstance(text, str) and _ID_PART.fullmatch(text) is not None


def _part(text: str, what: str) -> str:
    if not is_valid_part(text):
        raise InvalidArgument(
            "BAD_ACCOUNT_ID", f"{what} {shown(text)} must be 1-64 of A-Z a-z 0-9 _ . - @, not dots alone"
        )
    return text
