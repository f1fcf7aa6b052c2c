"""Game ids → rules modules (DESIGN.md "Rules engine contract").

``GAME_IDS`` lists all eleven games of RULES.md §13 and ``MODULES`` where each game's module
lives (in its family's package: ``poker``, ``three_card``, ``climbing``, ``rummy``,
``chinese_poker``, ``dice``; ``socai.rules.<game_id>``, DESIGN.md's name, is the same module
object). A game is *available* once its module exists; ``get`` imports it on first use, so
importing the registry loads no game.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Final, cast

from socai.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    from socai.rules.base import GameRules
    from socai.rules.chinese_poker import maubinh
    from socai.rules.climbing import samloc, tienlen
    from socai.rules.dice import taixiu
    from socai.rules.poker import holdem, xito
    from socai.rules.rummy import phom
    from socai.rules.three_card import bacay_chuong, bacay_ga, lieng, lieng_sanh

    # mypy checks each game module against the kit's Protocol here: add a new game's line.
    _HOLDEM: GameRules = holdem
    _XITO: GameRules = xito
    _MAUBINH: GameRules = maubinh
    _LIENG: GameRules = lieng
    _LIENG_SANH: GameRules = lieng_sanh
    _BACAY_GA: GameRules = bacay_ga
    _BACAY_CHUONG: GameRules = bacay_chuong
    _TAIXIU: GameRules = taixiu
    _TIENLEN: GameRules = tienlen
    _SAMLOC: GameRules = samloc
    _PHOM: GameRules = phom

GAME_IDS: Final = (
    "holdem",
    "xito",
    "maubinh",
    "lieng",
    "lieng_sanh",
    "bacay_ga",
    "bacay_chuong",
    "taixiu",
    "tienlen",
    "samloc",
    "phom",
)

MODULES: Final = {
    "holdem": "socai.rules.poker.holdem",
    "xito": "socai.rules.poker.xito",
    "maubinh": "socai.rules.chinese_poker.maubinh",
    "lieng": "socai.rules.three_card.lieng",
    "lieng_sanh": "socai.rules.three_card.lieng_sanh",
    "bacay_ga": "socai.rules.three_card.bacay_ga",
    "bacay_chuong": "socai.rules.three_card.bacay_chuong",
    "taixiu": "socai.rules.dice.taixiu",
    "tienlen": "socai.rules.climbing.tienlen",
    "samloc": "socai.rules.climbing.samloc",
    "phom": "socai.rules.rummy.phom",
}

# The names a module must have to be listed as available at all (a module half written is
# not offered to tables). The whole contract is ``base.GameRules``, checked by mypy and by
# tests/unit/test_rules_contract.py.
CONTRACT: Final = (
    "SPEC",
    "Options",
    "initial_state",
    "apply",
    "pending",
    "legal_actions",
    "candidate_actions",
    "is_finished",
    "settle",
    "MOVES",
    "TIMERS",
)


@cache
def get(game_id: str) -> ModuleType:
    """The rules module of ``game_id``.

    Raises InvalidArgument("UNKNOWN_GAME") for an id not in GAME_IDS and
    NotFound("GAME_NOT_AVAILABLE") for a game whose rules are not built yet.
    """
    if game_id not in GAME_IDS:
        raise InvalidArgument("UNKNOWN_GAME", f"unknown game {game_id!r}; known: {', '.join(GAME_IDS)}")
    name = MODULES[game_id]
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise NotFound("GAME_NOT_AVAILABLE", f"the rules of {game_id!r} are not available yet") from exc
    missing = [name for name in CONTRACT if not hasattr(module, name)]
    if missing:
        raise NotFound("GAME_NOT_AVAILABLE", f"{game_id} lacks {', '.join(missing)}")
    return module


def rules(game_id: str) -> GameRules:
    """``get(game_id)`` typed as the kit's ``GameRules`` Protocol."""
    return cast("GameRules", get(game_id))


def penalty_reasons(game_id: str | None = None) -> frozenset[str]:
    """The reason codes that are penalties in ``game_id`` (its ``REASONS``), or in any
    available game when None. Settlement and the audit report count these as penalties."""
    games = (game_id,) if game_id is not None else available()
    out: set[str] = set()
    for game in games:
        reasons = getattr(get(game), "REASONS", {})
        out.update(code for code, reason in reasons.items() if reason.penalty)
    return frozenset(out)


def available() -> tuple[str, ...]:
    """The game ids whose rules modules exist, in GAME_IDS order."""
    found = []
    for game_id in GAME_IDS:
        try:
            get(game_id)
        except NotFound:
            continue
        found.append(game_id)
    return tuple(found)


def warm() -> tuple[str, ...]:
    """Import every available game and run its optional ``warm()`` (a module whose first
    use builds something costly, such as Hold'em's evaluator tables, ~0.4 s, does it
    there). Services call this at start so that no hand waits for it; returns the games."""
    games = available()
    for game_id in games:
        hook = getattr(get(game_id), "warm", None)
        if callable(hook):
            hook()
    return games
