"""Hold'em hands in the Poker Hand History format (PHH), as PokerKit reads them.

``socai events export --format phh`` writes one ``.phhs`` file: a TOML table per hand,
keyed by the hand id, each a PHH hand of variant ``NT`` (no-limit Texas hold'em) that
``pokerkit.notation.HandHistory.loads_all`` loads and replays.

The actions come from our own replay, not from a second reading of the events: the hand's
events are folded through ``socai.rules.poker.holdem`` again (after ``socai.settle.replay`` has
verified them) and each betting event is written as what it did to the engine's state —
``f`` when the seat folded, ``cbr N`` when its street total rose above the bet to match
(N is the street total, blinds included, as PHH counts), ``cc`` otherwise. A timeout is
thus written as the check or fold the rules made of it.

Players are in PHH's order: from the seat left of the button round to the button (heads-up:
the big blind, then the button, who posts the small blind). ``finishing_stacks`` are what
our settlement leaves each player (the ledger's figures). PHH has no per-player fee:
PokerKit's ``rake`` takes from pots, while RULES.md GEN-1 charges ``fee_bps`` on each
player's net win. So a hand is written without rake, and the fee each player paid is in
the user-defined field ``_house_fee_gold``: PokerKit's final stacks minus it are
``finishing_stacks``. Other user-defined fields: ``_hand_id``, ``_table_id``, ``_fee_bps``,
``_seed`` (the revealed seed) and ``_commitment``.

Hands PHH cannot say are left out and counted, with the reason (``Skipped``): a player who
left out of turn (our rules fold them at once; PHH acts only in turn order), a heads-up
hand under ``heads_up_dealer_is_small_blind=false`` (PHH's heads-up button posts the small
blind), and blinds other than one small and one big blind in front of the button.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import time
from typing import IO, Any, Final

from socai import accounts
from socai.events.model import COMMUNITY, BetAction, CardsDealt, HandEnded, PlayerLeft, TimerExpired
from socai.rules.poker import holdem
from socai.settle.replay import ReplayResult

GAME: Final = "holdem"
VARIANT: Final = "NT"


@dataclass(frozen=True, slots=True)
class Skipped:
    hand_id: str
    reason: str


def _toml_string(text: str) -> str:
    # TOML basic strings: escape the backslash, the quote and control characters.
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, time):
        return value.isoformat()  # a TOML local time, which PHH's ``time`` is
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"no TOML for {type(value).__name__}")


def hand_history(result: ReplayResult) -> dict[str, object] | Skipped:
    """The PHH fields of one verified Hold'em hand, in PHH's order, or why it cannot be written."""
    started = result.started
    hand_id = started.hand_id
    state: Any = holdem.initial_state(started)
    layout = state.hand
    order: tuple[int, ...] = layout.seats  # clockwise from the seat left of the button
    n = len(order)
    if n == 2:
        if (layout.sb_pos, layout.bb_pos) != (1, 0):
            return Skipped(hand_id, "heads-up with the small blind not on the button")
        blinds = [layout.sb_gold, layout.bb_gold]
    else:
        if (layout.sb_pos, layout.bb_pos) != (0, 1):
            return Skipped(hand_id, "blinds not left of the button")
        blinds = [layout.sb_gold, layout.bb_gold] + [0] * (n - 2)
    # PHH's players are ours in dealing order (``layout.seats``): p1 is position 0.
    player = {seat: f"p{i + 1}" for i, seat in enumerate(order)}
    stacks = {info.seat: info.stack_gold for info in started.seats}
    ids = {info.seat: info.player_id for info in started.seats}
    actions: list[str] = []
    increment = 0  # the largest raise increment on this street (PHH's minimum for the next)
    street = state.street
    opener = 0  # PokerKit's showdown starts at the river's last bettor, else at p1
    for event in result.events[1:]:
        body: Any = event.body  # a hand's events only: replay checked them
        before = state
        state = holdem.apply(state, body)
        if isinstance(body, CardsDealt):
            holes: dict[int, list[str]] = {}
            board = [str(d.card) for d in body.cards if d.seat == COMMUNITY]
            for d in body.cards:
                if d.seat != COMMUNITY:
                    holes.setdefault(d.seat, []).append(str(d.card))
            actions += [f"d dh {player[seat]} {''.join(holes[seat])}" for seat in order if seat in holes]
            if board:
                actions.append(f"d db {''.join(board)}")
                opener = 0
        elif isinstance(body, BetAction | TimerExpired | PlayerLeft):
            pos = order.index(body.seat)
            if before.seat_to_act != body.seat:
                if isinstance(body, PlayerLeft):
                    return Skipped(hand_id, f"seat {body.seat} left out of turn")
                continue  # nothing to say: the engine refused nothing, and nobody acted
            if before.street != street:
                street, increment = before.street, 0
            if state.folded[pos] and not before.folded[pos]:
                actions.append(f"{player[body.seat]} f")
            elif state.street_bet[pos] > before.bet:
                raised = state.street_bet[pos] - before.bet
                if raised < increment and state.stack[pos] > 0:
                    return Skipped(
                        hand_id,
                        f"seat {body.seat} raised by {raised} after a raise by {increment}: "
                        "no-limit in PHH needs at least the last raise",
                    )
                increment = max(increment, raised)
                opener = pos
                actions.append(f"{player[body.seat]} cbr {state.street_bet[pos]}")
            else:
                actions.append(f"{player[body.seat]} cc")
        elif isinstance(body, HandEnded):
            live = [pos for pos in range(n) if not state.folded[pos]]
            if len(live) > 1:
                # A showdown: PHH shows the cards in PokerKit's order (from the opener round).
                for pos in sorted(live, key=lambda p: (p - opener) % n):
                    actions.append(f"p{pos + 1} sm {''.join(str(c) for c in state.hole[pos])}")
        # Disconnects and reconnects change no chips: nothing to write.
    nets = result.settlement.nets
    fees: dict[str, int] = {}
    for t in result.settlement.transfers:
        if t.to_account == accounts.HOUSE_FEES:
            fees[t.from_account] = fees.get(t.from_account, 0) + t.amount_gold
    seat_accounts = result.settlement.seat_accounts
    ended = result.events[-1].body
    started_at = result.events[0].occurred_at
    return {
        "variant": VARIANT,
        "antes": [0] * n,
        "blinds_or_straddles": blinds,
        # PHH's min_bet is also the smallest raise increment: ours may be the small blind (HE-2).
        "min_bet": min(layout.min_bet_gold, layout.min_raise_gold),
        "starting_stacks": [stacks[s] for s in order],
        "actions": actions,
        "hand": started.hand_number,
        "table": started.table_id,
        "seats": [s + 1 for s in order],  # PHH numbers seats from 1
        "seat_count": started.seats_max,
        "players": [ids[s] for s in order],
        "finishing_stacks": [stacks[s] + nets.get(s, 0) for s in order],
        "year": started_at.year,
        "month": started_at.month,
        "day": started_at.day,
        "time": started_at.time(),
        "time_zone": "UTC",
        "_hand_id": hand_id,
        "_table_id": started.table_id,
        "_fee_bps": started.fee_bps,
        "_house_fee_gold": [fees.get(seat_accounts.get(s, ""), 0) for s in order],
        "_commitment": started.deck_commitment,
        "_seed": ended.deck_seed if isinstance(ended, HandEnded) else "",
    }


def write_phhs(results: Iterable[ReplayResult], out: IO[str]) -> tuple[int, list[Skipped]]:
    """Write every Hold'em hand of ``results`` as one ``.phhs`` document; returns how
    many were written and the hands left out."""
    written, skipped = 0, []
    for fields in _histories(results):
        if isinstance(fields, Skipped):
            skipped.append(fields)
            continue
        if written:
            out.write("\n")
        out.write(f"[{_toml_string(str(fields['_hand_id']))}]\n")
        out.writelines(f"{key} = {_toml(value)}\n" for key, value in fields.items())
        written += 1
    return written, skipped


def _histories(results: Iterable[ReplayResult]) -> Iterator[dict[str, object] | Skipped]:
    for result in results:
        if result.game == GAME:
            yield hand_history(result)
