"""``socai docs api``: the API guide's generated pages, from the code.

    socai docs api [--out docs/api] [--check]

- ``reason-codes.md``: the one catalogue of every reason code a socai service can answer:
  its gRPC status(es), its meaning (``socai.reason_codes`` for the services' codes,
  ``socai.rules.base.RULE_CODES`` for the games' refusals), the services that raise it, and
  for a refusal by the rules the rule it cites in each game. The codes are found by reading
  the source (every ``SocaiError`` raised with a code, ``scan``), so a new code cannot be
  missed: a code without a meaning fails the command (and ``tests/unit/test_reason_codes.py``).
- ``moves.md``: the vocabulary of move kinds, facings and timers, and the games of each;
- one page per game (``<game>.md``): seating and direction of play, card notation, the
  ``Act`` message of every kind of move the game has (JSON and Python), what the game's
  ``Facing`` and timers are, its leaving rule and its reason codes with the rule each cites;
- one reference page per proto file (``reference-<area>.md``), made of the protos' comments
  (``socai_cli.protodocs``): the command fails while any RPC, field, message or enum has none.

With ``--check`` nothing is written: the exit status is 1 when a page differs from what the
code generates (CI: the pages are committed and must be today's).
"""

from __future__ import annotations

import argparse
import ast
import inspect
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from socai import errors, reason_codes
from socai.infra.config import Settings
from socai.infra.grpc_errors import STATUS_OF
from socai.rules import base, registry
from socai.settle.replay import ReplayError
from socai_cli import protodocs

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("libs/socai", "services")
NOT_SCANNED = ("libs/socai/gen", "libs/socai/client")  # generated code; the client raises no codes

ERROR_CLASSES: Mapping[str, type[errors.SocaiError]] = {
    **{name: cls for name, cls in vars(errors).items() if isinstance(cls, type) and issubclass(cls, errors.SocaiError)},
    "ReplayError": ReplayError,
}


def status_of(cls: type[errors.SocaiError]) -> str:
    for klass in cls.__mro__:
        status = STATUS_OF.get(klass)  # type: ignore[call-overload]
        if status is not None:
            return str(status.name)
    return "INTERNAL"


@dataclass(frozen=True, order=True)
class Raised:
    """One place the source raises a code: the code, the error class, the file (relative)."""

    code: str
    error: str
    path: str


def _strings(node: ast.AST) -> set[str]:
    """The string constants an expression can be: "X", "X" if … else "Y"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _strings(node.body) | _strings(node.orelse)
    return set()


def _named(tree: ast.AST) -> dict[str, set[str]]:
    """Every name the module assigns a string (or a choice of strings) to, anywhere."""
    named: dict[str, set[str]] = defaultdict(set)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    named[target.id] |= _strings(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            named[node.target.id] |= _strings(node.value)
    return named


def _error_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _helpers(tree: ast.AST) -> dict[str, str]:
    """Functions that raise or return an error with a code taken from their first parameter
    (``_refused(code, …)``): function name -> the error class."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.args.args:
            first = node.args.args[0].arg
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and _error_name(call) in ERROR_CLASSES
                    and call.args
                    and isinstance(call.args[0], ast.Name)
                    and call.args[0].id == first
                ):
                    out[node.name] = _error_name(call)
    return out


def _calls(tree: ast.AST) -> Iterator[tuple[Any, ast.Call]]:
    """Every call in ``tree`` with the function it is in (None at module level)."""

    def walk(node: ast.AST, function: Any) -> Iterator[tuple[Any, ast.Call]]:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Call):
                yield function, child
            yield from walk(child, inner)

    yield from walk(tree, None)


def _codes_of(arg: ast.AST, named: Mapping[str, set[str]], known: set[str]) -> set[str]:
    if isinstance(arg, ast.Name):
        return set(named.get(arg.id, set()))
    if isinstance(arg, ast.JoinedStr):  # f"{word}_TOO_SMALL": each known code that fits
        parts = [v.value if isinstance(v, ast.Constant) else None for v in arg.values]
        suffix = parts[-1] if parts and isinstance(parts[-1], str) else ""
        return {k for k in known if suffix and k.endswith(suffix)}
    return _strings(arg)


def scan(root: Path = ROOT) -> list[Raised]:
    """Every code the source raises, with its error class and file."""
    known = set(reason_codes.MEANINGS) | set(base.RULE_CODES)
    found: set[Raised] = set()
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            rel = str(path.relative_to(root))
            if rel.startswith(NOT_SCANNED):
                continue
            tree = ast.parse(path.read_text())
            named = _named(tree)
            helpers = _helpers(tree)
            for function, node in _calls(tree):
                passing_on = function is not None and function.name in helpers
                name = _error_name(node)
                error = name if name in ERROR_CLASSES else helpers.get(name)
                if error is None or not node.args:
                    continue
                arg = node.args[0]
                if passing_on and isinstance(arg, ast.Name) and function.args.args[0].arg == arg.id:
                    continue  # a helper passing its parameter on: its callers name the codes
                for code in _codes_of(arg, named, known):
                    if code.isupper() and code.replace("_", "").isalnum():
                        found.add(Raised(code, error, rel))
    return sorted(found)


def _area(path: str) -> str:
    if path.startswith("services/"):
        return path.split("/")[1].removeprefix("socai_")
    if path.startswith("libs/socai/rules/"):
        return "rules"
    return "library"


@dataclass(frozen=True)
class Code:
    code: str
    statuses: tuple[str, ...]
    meaning: str
    areas: tuple[str, ...]


def catalogue(raised: list[Raised] | None = None) -> list[Code]:
    """Every code with its statuses, meaning and the areas raising it. Raises
    PreconditionFailed("CODE_WITHOUT_MEANING") naming any code raised without a meaning."""
    raised = scan() if raised is None else raised
    by_code: dict[str, list[Raised]] = defaultdict(list)
    for r in raised:
        by_code[r.code].append(r)
    missing = sorted(c for c in by_code if c not in reason_codes.MEANINGS and c not in base.RULE_CODES)
    if missing:
        raise errors.PreconditionFailed(
            "CODE_WITHOUT_MEANING", f"codes raised without a meaning in socai.reason_codes: {', '.join(missing)}"
        )
    out = []
    for code, where in sorted(by_code.items()):
        meaning = base.RULE_CODES.get(code) or reason_codes.MEANINGS[code]
        # INTERNAL is the generic reason of an unexpected error, whoever relays it.
        statuses = (
            ("INTERNAL",) if code == "INTERNAL" else tuple(sorted({status_of(ERROR_CLASSES[r.error]) for r in where}))
        )
        areas = tuple(sorted({_area(r.path) for r in where}))
        out.append(Code(code, statuses, meaning, areas))
    return out


# --- the rules' codes, per game ----------------------------------------------------------


def _rules_modules(module: ModuleType) -> list[ModuleType]:
    """``module`` and every ``socai.rules`` module it uses, directly or not."""
    seen: dict[str, ModuleType] = {}
    todo = [module]
    while todo:
        m = todo.pop()
        if m.__name__ in seen:
            continue
        seen[m.__name__] = m
        for value in vars(m).values():
            owner = value if isinstance(value, ModuleType) else inspect.getmodule(value)
            if owner is not None and owner.__name__.startswith("socai.rules.") and owner.__name__ not in seen:
                todo.append(owner)
    return [seen[k] for k in sorted(seen)]


def game_codes(game: str, raised: list[Raised] | None = None) -> list[str]:
    """The refusal codes the rules can answer for ``game``: those its module and the rules
    modules it uses raise."""
    raised = scan() if raised is None else raised
    # By name, not by __file__: a compiled module's file is its extension module elsewhere.
    files = {f"libs/{m.__name__.replace('.', '/')}.py" for m in _rules_modules(registry.get(game))}
    return sorted({r.code for r in raised if r.path in files and r.code in base.RULE_CODES})


# --- the pages ------------------------------------------------------------------------------


def reason_codes_page(codes: list[Code], raised: list[Raised]) -> str:
    lines = [
        "# Reason codes",
        "",
        "Generated by `socai docs api` from the code (do not edit): every reason a socai service",
        "can answer in the `google.rpc.ErrorInfo` of an error (domain `socai`), its gRPC status,",
        "its meaning and the services that raise it. A refusal by a game's rules is",
        "`FAILED_PRECONDITION` with ErrorInfo metadata `seat`, `hand_id` and `rule` (the RULES.md",
        "rule it cites in that game: the game's page lists them). UNAVAILABLE and DEADLINE_EXCEEDED",
        "may be tried again with the same idempotency key (`retry_after_ms` in the metadata says",
        "when); every other status is an answer.",
        "",
        f"{len(codes)} codes.",
        "",
        "| code | status | meaning | raised by |",
        "|---|---|---|---|",
    ]
    for c in codes:
        meaning = c.meaning.replace("|", "\\|")
        lines.append(f"| `{c.code}` | {', '.join(c.statuses)} | {meaning} | {', '.join(c.areas)} |")
    lines += ["", "Refusals by the rules, per game (the rule each cites there):", ""]
    for game in registry.available():
        lines.append(
            f"- [{registry.get(game).SPEC.name}]({game}.md#reason-codes): {len(game_codes(game, raised))} codes"
        )
    return "\n".join(lines) + "\n"


_DIRECTION = {
    base.CLOCKWISE: "clockwise: the next seat is the next higher seat number (wrapping round)",
    base.COUNTERCLOCKWISE: "counterclockwise: the next seat is the next lower seat number (wrapping round)",
}

# The PlayerAction of each move kind as JSON and as Python (``socai.client.moves``).
_EXAMPLES: Mapping[str, tuple[str, str]] = {
    "check": ('{"bet": {"kind": "ACTION_KIND_CHECK"}}', "moves.check()"),
    "call": ('{"bet": {"kind": "ACTION_KIND_CALL", "amount_gold": "40"}}', "moves.call(40)"),
    "bet": ('{"bet": {"kind": "ACTION_KIND_BET", "amount_gold": "100"}}', "moves.bet(100)"),
    "raise": ('{"bet": {"kind": "ACTION_KIND_RAISE", "amount_gold": "240"}}', "moves.raise_to_add(240)"),
    "fold": ('{"bet": {"kind": "ACTION_KIND_FOLD"}}', "moves.fold()"),
    "all_in": ('{"bet": {"kind": "ACTION_KIND_ALL_IN", "amount_gold": "900"}}', "moves.all_in(900)"),
    "play": ('{"play": {"cards": ["3s", "3c"]}}', 'moves.play("3s 3c")'),
    "pass": ('{"pass_turn": {}}', "moves.pass_turn()"),
    "arrange": (
        '{"arrange": {"back": ["Ah", "Kh", "Qh", "Jh", "Th"], "middle": ["9s", "9c", "9d", "4s", "4c"], '
        '"front": ["2s", "2c", "7d"]}}',
        'moves.arrange("Ah Kh Qh Jh Th", "9s 9c 9d 4s 4c", "2s 2c 7d")',
    ),
    "take": ('{"take": {"from_seat": 1, "card": "7h"}}', 'moves.take(1, "7h")'),
    "lay": (
        '{"lay": {"melds": [{"cards": ["5s", "5c", "5d"]}, {"cards": ["7h", "8h", "9h"]}]}}',
        'moves.lay(["5s 5c 5d", "7h 8h 9h"])',
    ),
    "send": ('{"send": {"to_seat": 2, "meld_index": 0, "card": "Th"}}', 'moves.send(2, 0, "Th")'),
}


def _example(kind: str, game: str) -> tuple[str, str]:
    if kind.startswith("declare:"):
        what = kind.removeprefix("declare:")
        return f'{{"declare": {{"declaration": "{what}"}}}}', f'moves.declare("{what}")'
    if kind == "wager":
        if game == "taixiu":
            return (
                '{"wager": {"kind": "single", "selection": [4], "amount_gold": "50"}}',
                'moves.wager("single", 50, (4,))',
            )
        return '{"wager": {"kind": "bet", "amount_gold": "50"}}', 'moves.wager("bet", 50)'
    return _EXAMPLES[kind]


# How cards rank where the game compares single cards (RULES.md, the game's §x.1/§x.2).
_ORDER: Mapping[str, str] = {
    "tienlen": "ranks 3 4 5 6 7 8 9 T J Q K A 2 (2 highest), suits ♠ < ♣ < ♦ < ♥ (9.1)",
    "samloc": "ranks 3 4 5 6 7 8 9 T J Q K A 2 (2 highest); suits do not rank (4.1)",
    "phom": "ranks A 2 3 … Q K (A lowest) for melds and points; suits do not rank (6.1)",
    "maubinh": "poker ranks 2 … A within each chi (11.2)",
    "holdem": "poker ranks 2 … A; suits do not rank (1.2)",
    "xito": "a 28-card deck 8 … A (3.1)",
    "bacay_ga": "a 36-card deck A 2 … 9, points mod 10, ♦ > ♥ > ♣ > ♠ on ties (7.2)",
    "bacay_chuong": "a 36-card deck A 2 … 9, points mod 10, ♦ > ♥ > ♣ > ♠ on ties (8.2 = 7.2)",
    "lieng": "three-card hands (5.2)",
    "lieng_sanh": "three-card hands (12.2)",
}

_TIMERS: Mapping[str, str] = {
    "turn": "the seat to act (`turn_timeout_s` of the table, else the game's)",
    "arrange": "every seat's arrangement (`arrange_timeout_s`)",
    "flip": "every seat's flip (15 s, 7 s with `fast_mode`)",
    "betting": "the betting window (Tài Xỉu `betting_window_s`, Ba Cây Chương `betting_timeout_s`)",
    "declare": "the báo Sâm window (`declare_timeout_s`)",
}


def game_page(game: str, raised: list[Raised]) -> str:
    module = registry.get(game)
    spec = module.SPEC
    chapter = base.RULES_CHAPTERS.get(game, "?")
    kinds = list(module.MOVES)
    lines = [
        f"# {spec.name} (`{game}`)",
        "",
        "Generated by `socai docs api` from the code (do not edit). The rules:",
        f"[RULES.md](../rules/index.md) §{chapter}; the API guide: [README](README.md).",
        "",
        "## Seating and direction of play",
        "",
        f"- {spec.players_min} to {spec.players_max} players; seats are numbered 0..`seats_max`-1 clockwise.",
        f"- Play goes {_DIRECTION[spec.direction]}.",
        f"- Deck: {spec.deck or 'none (three dice)'}" + (f"; {_ORDER[game]}." if game in _ORDER else "."),
        "",
        "## Cards",
        "",
        "Rank then suit: `As Td 9h 2c`. Ranks `2`-`9`, `T` (ten; `10` is read as `T`), `J Q K A`;",
        "suits `s c d h` (or `♠ ♣ ♦ ♥`); case is ignored. Anything else is `INVALID_ARGUMENT",
        "BAD_CARD`; a card the seat does not hold is `NOT_HOLDING`.",
        "",
        "## Moves",
        "",
        "A move is an `ActRequest` whose `action` is one of these (the seat may be left 0: it is",
        "the caller's). `TableView.legal_moves` lists them on the player's turn: every move of a",
        "`complete` kind, or the description and examples of the others; `ValidateAction`",
        "answers for any move without playing it.",
        "",
    ]
    for kind in kinds:
        json_form, python = _example(kind, game)
        lines += [
            f"### `{kind}`",
            "",
            base.MOVE_KINDS[kind][1] + ".",
            "",
            "```json",
            f'{{"table_id": "T1", "hand_id": "T1-h3", "idempotency_key": "k1", "player_token": "…", "action": {json_form}}}',
            "```",
            "",
            "```python",
            "from socai.client import moves",
            f"await turn.act({python})",
            "```",
            "",
        ]
    lines += [
        "## What the table shows a player",
        "",
        "Every `WatchTable` message's `view`: `to_act`, `timer` and `deadline`, the player's `cards`,",
        "its `facing` (what to beat or answer) and, on its turn, its `legal_moves`. Timers:",
        "",
    ]
    for timer in module.TIMERS:
        lines.append(f"- `{timer}`: {_TIMERS[timer]}")
    lines += [
        "",
        "## Leaving",
        "",
        f"`LeaveTable` with `LEAVE_WHEN_NOW` in a hand in play: {getattr(module, 'LEAVE_RULE', 'GEN-6')}.",
        "With `LEAVE_WHEN_AFTER_HAND` the player plays the hand out and stands up at its end.",
        "",
        "## Reason codes",
        "",
        "A refusal by the rules (`FAILED_PRECONDITION`, ErrorInfo `seat`, `hand_id`, `rule`):",
        "",
        "| code | rule | meaning |",
        "|---|---|---|",
    ]
    for code in game_codes(game, raised):
        lines.append(f"| `{code}` | {base.refusal_rule(module, code)} | {base.RULE_CODES[code]} |")
    lines += ["", "Every other code: [reason-codes.md](reason-codes.md).", ""]
    return "\n".join(lines)


def moves_page() -> str:
    """The vocabulary of moves, facings and timers, with the games that use each."""
    games = {g: registry.get(g) for g in registry.available()}
    lines = [
        "# Moves, facings and timers",
        "",
        "Generated by `socai docs api` from the code (do not edit): the words of",
        "`LegalMove.kind` / `LegalAction.kind`, of `Facing.kind` and of `TableView.timer`.",
        "",
        "## Move kinds",
        "",
        "| kind | `PlayerAction` field | what it is | games |",
        "|---|---|---|---|",
    ]
    for kind, (field_name, what) in base.MOVE_KINDS.items():
        users = ", ".join(f"[{g}]({g}.md)" for g, m in games.items() if kind in m.MOVES)
        lines.append(f"| `{kind}` | `{field_name}` | {what} | {users} |")
    lines += ["", "## Facing kinds", "", "| kind | what the player must beat or answer |", "|---|---|"]
    for kind, what in base.FACING_KINDS.items():
        lines.append(f"| `{kind or '(empty)'}` | {what} |")
    lines += ["", "## Timers", "", "| timer | what it waits for | games |", "|---|---|---|"]
    for timer, what in _TIMERS.items():
        users = ", ".join(f"[{g}]({g}.md)" for g, m in games.items() if timer in m.TIMERS)
        lines.append(f"| `{timer}` | {what} | {users} |")
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Every generated page of the API guide: file name -> text."""
    raised = scan()
    out = {"reason-codes.md": reason_codes_page(catalogue(raised), raised), "moves.md": moves_page()}
    for game in registry.available():
        out[f"{game}.md"] = game_page(game, raised)
    out.update(protodocs.reference_pages())
    return out


def add_commands(sub: Any, command: Any) -> None:
    docs = sub.add_parser("docs", help="generate the API guide's pages from the code")
    dsub = docs.add_subparsers(dest="docs_command", required=True)
    api = dsub.add_parser("api", help="docs/api: the reason-code catalogue and a page per game")
    api.add_argument("--out", default=str(ROOT / "docs" / "api"), help="the directory (default docs/api)")
    api.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is not today's")
    command("docs")(cmd_docs)


def cmd_docs(args: argparse.Namespace, settings: Settings) -> int:
    undescribed = protodocs.missing(protodocs.descriptor_set())
    if undescribed:
        print("socai docs api: the API reference is made of the protos' comments; these have none:")
        print("\n".join(f"  {name}" for name in undescribed))
        return 1
    out = Path(args.out)
    stale = []
    for name, text in pages().items():
        path = out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
            continue
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if stale:
        print(f"socai docs api: not today's (run `socai docs api`): {', '.join(stale)}")
        return 1
    return 0
