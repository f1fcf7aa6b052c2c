"""Every refusal a game's rules can answer is in the catalogue, under that game (issue 36).

The games are played (self-play) and at every decision sent a barrage of wrong moves: every
kind of move from the right seat, another seat and no seat, with cards the seat holds and
does not, amounts at and just past the legal bounds, timers and declarations that are not
due; and every hand is started wrongly in each way a HandStarted can be wrong. Each code the
rules answer must be one the game's page of the API guide lists (``apidocs.game_codes``,
read from the code), and together the games raise every code of ``RULE_CODES`` but the two
that only queries raise.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from socai.cards import ALL_CARDS
from socai.errors import RuleViolation
from socai.events.model import (
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
    HandEnded,
    HandStarted,
    Meld,
    MeldsLaid,
    Passed,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
    WagerPlaced,
)
from socai.rules import base, registry
from socai_cli.apidocs import Raised, game_codes, scan
from tests.support.synthetic import simulate

GAMES = registry.available()
HANDS = 3
DECISIONS_PER_HAND = 30  # the first events of each hand get the barrage (the rest is played)
QUERY_ONLY = {"BAD_HAND", "NO_WINNER"}  # hand_value and winner(): no event is refused with them
DECLARATIONS = ("draw", "u", "u_khan", "sam", "no_sam", "flip", "nonsense")
WAGER_KINDS = ("tai", "xiu", "single", "pair", "total", "double", "triple", "any_triple", "bet", "nonsense")


@pytest.fixture(scope="module")
def source_codes() -> list[Raised]:
    return scan()


@pytest.fixture(scope="module")
def raised_by_game() -> dict[str, set[str]]:
    return {game: refusals(registry.get(game), random.Random(36)) for game in GAMES}


def refusals(module: ModuleType, rng: random.Random) -> set[str]:
    """Every RuleViolation code the wrong moves and wrong starts draw from ``module``."""
    codes: set[str] = set()
    for hand in simulate(HANDS, (module.SPEC.game_id,), seed=36).hands:
        bodies = [e.body for e in hand.events]
        started = bodies[0]
        assert isinstance(started, HandStarted)
        for wrong in wrong_starts(started):
            codes |= _refused(lambda w=wrong: module.initial_state(w))
        # A dealer (or banker) with one stake: a bank that cannot cover a bet (CH-2, TX-7).
        poor = dataclasses.replace(
            started,
            seats=tuple(
                dataclasses.replace(i, stack_gold=started.stake_gold) if i.seat == started.dealer_seat else i
                for i in started.seats
            ),
        )
        codes |= _refused(lambda p=poor: _first_decisions(module, p, rng))
        state = module.initial_state(started)
        seats = [info.seat for info in started.seats]
        for step, body in enumerate(bodies[1:]):
            if step < DECISIONS_PER_HAND:
                for seat in module.pending(state).to_act or tuple(seats[:1]):
                    for wrong_move in wrong_moves(module, state, max(seat, 0), seats, rng):
                        codes |= _refused(lambda b=wrong_move, s=state: module.apply(s, b))
                    for sequence in _sequences(module, state, max(seat, 0)):
                        codes |= _refused(sequence)
            state = module.apply(state, body)
        codes |= _refused(lambda s=state: module.apply(s, HandEnded("00" * 32)))
    return codes


def _first_decisions(module: ModuleType, started: HandStarted, rng: random.Random) -> None:
    """Every seat to decide at ``started``'s first decision bets two stakes: raises the
    first refusal."""
    state = module.initial_state(started)
    for seat in module.pending(state).to_act:
        for kind in ("bet", "tai"):
            module.apply(state, WagerPlaced(seat, kind, (), 2 * started.stake_gold))


def _sequences(module: ModuleType, state: Any, seat: int) -> Iterator[Any]:
    """Refusals that take more than one move: a move of a seat that left; the same bet
    again and again (a per-seat limit)."""
    moves = [m for s in base.legal_moves(module, state, seat) for m in s.moves]
    if not moves:
        return
    left = module.apply(state, PlayerLeft(seat))
    yield lambda: module.apply(left, moves[0])
    if isinstance(moves[0], WagerPlaced):

        def again() -> None:
            now = state
            for _ in range(200):
                now = module.apply(now, moves[0])

        yield again


def _refused(call: Any) -> set[str]:
    try:
        call()
    except RuleViolation as exc:
        return {exc.code}
    return set()


def wrong_starts(started: HandStarted) -> Iterator[HandStarted]:
    first = started.seats[0]
    yield dataclasses.replace(started, game="nonsense")
    yield dataclasses.replace(started, seats=())
    yield dataclasses.replace(started, seats=(first, first))
    yield dataclasses.replace(started, seats=(dataclasses.replace(first, stack_gold=0), *started.seats[1:]))
    yield dataclasses.replace(started, stake_gold=0)
    yield dataclasses.replace(started, fee_bps=-1)
    yield dataclasses.replace(started, dealer_seat=99)
    yield dataclasses.replace(started, owner_seat=99)
    yield dataclasses.replace(started, options={**started.options, "nonsense": "1"})
    yield dataclasses.replace(started, rules_version=99)
    yield dataclasses.replace(started, seats=(*started.seats, SeatInfo(98, "x98", 10), SeatInfo(99, "x99", 10)) * 6)


def wrong_moves(module: ModuleType, state: Any, seat: int, seats: list[int], rng: random.Random) -> Iterator[Body]:
    held = list(base.held_cards(module, state, seat))
    cards = list(ALL_CARDS)
    other = next((s for s in seats if s != seat), seat)
    for move_set in base.legal_moves(module, state, seat):  # just past the legal bounds
        for example in move_set.moves[:1]:
            for amount in (move_set.min_gold - 1, move_set.max_gold + 1, 10**12):
                if isinstance(example, BetAction | WagerPlaced):
                    yield dataclasses.replace(example, amount_gold=amount)
    for who in (seat, other, 99):
        for kind in ActionKind:
            for amount in (0, 1, 7, 10**6, 10**12, -5):
                yield BetAction(who, kind, amount)
        selection = tuple(rng.sample(range(8), rng.randint(0, 3)))
        yield WagerPlaced(who, rng.choice(WAGER_KINDS), selection, rng.choice([1, 10, 10**9, 10**12, 0]))
        yield CardsPlayed(who, tuple(rng.sample(cards, rng.randint(1, 3))))
        yield CardsPlayed(who, ())
        if held:
            yield CardsPlayed(who, tuple(rng.sample(held, min(len(held), rng.randint(1, 4)))))
            yield CardsPlayed(who, (held[0], held[0]))
            yield CardsPlayed(who, tuple(held))
        yield Passed(who)
        for declaration in DECLARATIONS:
            yield Declared(who, declaration)
        if len(held) >= 13:
            shuffled = rng.sample(held, 13)
            yield Arranged(who, tuple(shuffled[:5]), tuple(shuffled[5:10]), tuple(shuffled[10:]))
            yield Arranged(who, tuple(shuffled[:4]), tuple(shuffled[4:10]), tuple(shuffled[10:]))
        yield Arranged(who, tuple(cards[:5]), tuple(cards[5:10]), tuple(cards[10:13]))
        yield CardTaken(who, other, rng.choice(cards))
        yield MeldsLaid(who, (Meld(tuple(rng.sample(held or cards, min(3, len(held or cards))))),))
        yield MeldsLaid(who, ())
        yield CardSent(who, other, rng.randint(-1, 2), rng.choice(held or cards))
        yield TimerExpired(who, rng.choice(["turn", "flip", "arrange", "betting", "declare", "nonsense"]))
        yield PlayerLeft(who)
        yield PlayerDisconnected(who)
        yield PlayerReconnected(who)
    remaining = _remaining(state, seat)
    if remaining:  # everything left, as a bet or an all-in the game may not allow now
        yield BetAction(seat, ActionKind.ALL_IN, remaining)
        yield BetAction(seat, ActionKind.RAISE, remaining)
    yield HandEnded("00" * 32)
    yield DiceRolled((1, 2, 3))
    yield DiceRolled((0, 9))
    yield CardsDealt((DealtCard(seat, rng.choice(cards), False),))
    due = module.pending(state).deal
    if due:  # the deal that is due, with a card of no deck of the game's, or one card twice
        yield CardsDealt(tuple(DealtCard(slot.seat, ALL_CARDS[0], slot.face_up) for slot in due))


def _remaining(state: Any, seat: int) -> int:
    """The chips ``seat`` has behind in a betting game's state (0 elsewhere)."""
    stacks, put_in = getattr(state, "stacks_gold", None), getattr(state, "put_in_gold", None)
    if not isinstance(stacks, dict) or not isinstance(put_in, dict) or seat not in stacks:
        return 0
    return int(stacks[seat] - put_in.get(seat, 0))


@pytest.mark.parametrize("game", GAMES)
def test_every_refusal_of_a_game_is_on_its_page(
    game: str, raised_by_game: dict[str, set[str]], source_codes: list[Raised]
) -> None:
    listed = set(game_codes(game, source_codes))
    raised = raised_by_game[game]
    assert raised, game
    assert raised <= listed, f"{game} raises codes its page does not list: {sorted(raised - listed)}"
    assert raised <= set(base.RULE_CODES)


def test_together_the_games_raise_every_refusal_of_the_catalogue(raised_by_game: dict[str, set[str]]) -> None:
    raised = set().union(*raised_by_game.values())
    assert set(base.RULE_CODES) - QUERY_ONLY - raised == set()


def test_the_barrage_tries_every_declaration_and_wager_kind_a_game_has() -> None:
    """A game's own declarations (``declare:…`` of its MOVES) and Tài Xỉu's bet kinds are
    in the barrage's vocabulary: a new game's are tried, not left out by a fixed list."""
    declared = {m.split(":", 1)[1] for g in GAMES for m in registry.get(g).MOVES if m.startswith("declare:")}
    assert declared and declared <= set(DECLARATIONS), declared - set(DECLARATIONS)
    bet_kinds = set(registry.get("taixiu").BET_KINDS)
    assert bet_kinds <= set(WAGER_KINDS), bet_kinds - set(WAGER_KINDS)
