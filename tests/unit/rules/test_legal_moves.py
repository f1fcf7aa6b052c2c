"""What a seat holds, faces and may do now (``base.held_cards``, ``facing``, ``legal_moves``,
``refusal``): the kit's answers to a client, checked over self-played hands of every game.

Every listed move is accepted by the rules; where a set says it is complete, brute force
finds no other accepted move of its kind (every subset of a Tiến Lên hand, every card of a
Phỏm hand, every send to every laid Phỏm); where it is described by amounts, its bounds
are accepted and the amounts just outside them refused; every kind is in the one
vocabulary (``MOVE_KINDS``) and every candidate move a bot may pick is in the sets.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from socai.errors import RuleViolation
from socai.events.model import (
    ActionKind,
    BetAction,
    Body,
    CardsDealt,
    CardSent,
    CardsPlayed,
    CardTaken,
    Declared,
    HandStarted,
    WagerPlaced,
)
from socai.rules import base, registry
from socai.rules.base import FACING_KINDS, MOVE_KINDS, MoveSet
from socai.rules.climbing import samloc, tienlen
from socai.rules.rummy import phom
from tests.support.snapshot import snapshot
from tests.support.synthetic import SimHand, simulate

GAMES = registry.available()


@pytest.fixture(scope="module")
def hands() -> dict[str, list[SimHand]]:
    return {game: simulate(24, (game,), seed=36).hands for game in GAMES}


def decisions(module: ModuleType, game_hands: list[SimHand], limit: int = 10_000) -> Iterator[tuple[Any, int]]:
    """(state, seat) at every decision a seat owed in ``game_hands``, in order."""
    count = 0
    for hand in game_hands:
        bodies = [e.body for e in hand.events]
        state = module.initial_state(bodies[0])
        for body in bodies[1:]:
            for seat in module.pending(state).to_act:
                if seat >= 0:
                    yield state, seat
                    count += 1
                    if count >= limit:
                        return
            state = module.apply(state, body)


def dealt_seats(state: Any, started: HandStarted) -> list[int]:
    return [info.seat for info in started.seats]


def started_of(game_hands: list[SimHand]) -> HandStarted:
    first = game_hands[0].events[0].body
    assert isinstance(first, HandStarted)
    return first


@pytest.mark.parametrize("game", GAMES)
def test_every_listed_move_is_accepted_and_every_kind_is_in_the_vocabulary(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    checked = 0
    for state, seat in decisions(module, hands[game], limit=400):
        sets = base.legal_moves(module, state, seat)
        kinds = [m.kind for m in sets]
        legal = {str(a.kind) for a in module.legal_actions(state, seat)}
        assert set(kinds) == legal, f"{game}: legal_moves {kinds} and legal_actions {legal} disagree"
        for move_set in sets:
            assert move_set.kind in MOVE_KINDS, move_set.kind
            assert move_set.text, f"{game}: {move_set.kind} has no description"
            assert move_set.moves or not move_set.complete, f"{game}: a complete {move_set.kind} set with no move"
            for move in move_set.moves:
                assert base.move_kind(move) == move_set.kind
                assert base.refusal(module, state, move) is None, f"{game}: listed {move} is refused"
                checked += 1
        assert base.facing(module, state, seat).kind in FACING_KINDS
    assert checked > 0


@pytest.mark.parametrize("game", GAMES)
def test_every_candidate_move_is_in_the_legal_moves(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    for state, seat in decisions(module, hands[game], limit=300):
        sets = {m.kind: m for m in base.legal_moves(module, state, seat)}
        for candidate in module.candidate_actions(state, seat):
            move_set = sets.get(base.move_kind(candidate))
            assert move_set is not None, f"{game}: candidate {candidate} has no legal move set"
            if move_set.complete:
                assert candidate in [m for s in base.legal_moves(module, state, seat) for m in s.moves]
            else:
                amount = getattr(candidate, "amount_gold", None)
                if amount is not None and move_set.max_gold:
                    assert move_set.min_gold <= amount <= move_set.max_gold


@pytest.mark.parametrize("game", GAMES)
def test_a_seat_with_no_decision_has_no_legal_moves(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    started = started_of(hands[game])
    for state, _ in decisions(module, hands[game], limit=200):
        to_act = set(module.pending(state).to_act)
        for other in dealt_seats(state, started):
            if other not in to_act:
                assert base.legal_moves(module, state, other) == (), f"{game}: seat {other} is not to act"


@pytest.mark.parametrize("game", [g for g in GAMES if registry.get(g).SPEC.deck])
def test_the_cards_a_seat_holds_are_its_own_and_its_moves_use_only_them(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    seen_cards = 0
    for hand in hands[game][:6]:
        bodies = [e.body for e in hand.events]
        state = module.initial_state(bodies[0])
        dealt_to: dict[int, set[Any]] = {}
        taken_by: dict[int, set[Any]] = {}
        for body in bodies[1:]:
            for seat in module.pending(state).to_act:
                if seat < 0:
                    continue
                held = base.held_cards(module, state, seat)
                seen_cards += len(held)
                assert set(held) <= dealt_to.get(seat, set()) | taken_by.get(seat, set())
                for move_set in base.legal_moves(module, state, seat):
                    for move in move_set.moves:
                        assert set(_cards_of(move)) <= set(held), f"{game}: {move} uses a card seat {seat} lacks"
            if isinstance(body, CardsDealt):
                for d in body.cards:
                    dealt_to.setdefault(d.seat, set()).add(d.card)
            if isinstance(body, CardTaken):
                taken_by.setdefault(body.seat, set()).add(body.card)
            state = module.apply(state, body)
    assert seen_cards > 0


def _cards_of(move: Body) -> tuple[Any, ...]:
    if isinstance(move, CardsPlayed):
        return move.cards
    if isinstance(move, CardSent):
        return (move.card,)
    if hasattr(move, "melds"):
        return tuple(c for meld in move.melds for c in meld.cards)
    if hasattr(move, "back"):
        return (*move.back, *move.middle, *move.front)
    return ()


@pytest.mark.parametrize("module", [tienlen, samloc])
def test_every_accepted_play_of_a_shedding_hand_is_listed(module: ModuleType, hands: dict[str, Any]) -> None:
    """Brute force: every subset of the seat's cards that the rules accept as a play is in
    the complete ``play`` set, and nothing else is."""
    game = module.SPEC.game_id
    states = 0
    for state, seat in decisions(module, hands[game], limit=2000):
        sets = {m.kind: m for m in base.legal_moves(module, state, seat)}
        if "play" not in sets or len(base.held_cards(module, state, seat)) > 11 or states >= 8:
            continue
        held = base.held_cards(module, state, seat)
        listed = {frozenset(m.cards) for m in sets["play"].moves if isinstance(m, CardsPlayed)}
        accepted = {
            frozenset(cards)
            for size in range(1, len(held) + 1)
            for cards in itertools.combinations(held, size)
            if base.refusal(module, state, CardsPlayed(seat, cards)) is None
        }
        assert sets["play"].complete
        assert listed == accepted, f"{game}: listed and accepted plays differ"
        states += 1
    assert states > 0


def test_every_accepted_phom_discard_take_and_send_is_listed(hands: dict[str, Any]) -> None:
    checked: dict[str, int] = {"play": 0, "send": 0, "take": 0}
    for state, seat in decisions(phom, hands["phom"], limit=3000):
        sets = {m.kind: m for m in base.legal_moves(phom, state, seat)}
        held = base.held_cards(phom, state, seat)
        if "play" in sets:
            accepted = {c for c in held if base.refusal(phom, state, CardsPlayed(seat, (c,))) is None}
            assert {m.cards[0] for m in sets["play"].moves if isinstance(m, CardsPlayed)} == accepted
            checked["play"] += 1
        sends = {
            CardSent(seat, to_seat, index, card)
            for card in held
            for to_seat, melds in state.laid.items()
            for index in range(len(melds))
        }
        accepted_sends = {s for s in sends if base.refusal(phom, state, s) is None}
        listed_sends = set(sets["send"].moves) if "send" in sets else set()
        assert listed_sends == accepted_sends
        checked["send"] += bool(accepted_sends)
        if state.discards:
            last = state.discards[-1]
            take = CardTaken(seat, last.seat, last.card)
            assert ("take" in sets) == (base.refusal(phom, state, take) is None)
            checked["take"] += "take" in sets
    assert min(checked.values()) > 0, checked


def _bounds_hold(module: ModuleType, state: Any, move_set: MoveSet, make: Any) -> None:
    low, high = move_set.min_gold, move_set.max_gold
    assert base.refusal(module, state, make(low)) is None, f"{move_set.text}: the least is refused"
    assert base.refusal(module, state, make(high)) is None, f"{move_set.text}: the most is refused"
    assert base.refusal(module, state, make(low - 1)) is not None, f"{move_set.text}: less than the least"
    assert base.refusal(module, state, make(high + 1)) is not None, f"{move_set.text}: more than the most"
    step = max(move_set.step_gold, 1)
    if step > 1 and high - low >= step:
        assert base.refusal(module, state, make(low + step)) is None
        assert base.refusal(module, state, make(low + step - 1)) is not None


@pytest.mark.parametrize("game", ["holdem", "xito", "lieng", "lieng_sanh", "bacay_chuong", "taixiu"])
def test_amount_ranges_are_exact_at_their_bounds(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    ranges = 0
    for state, seat in decisions(module, hands[game], limit=300):
        for move_set in base.legal_moves(module, state, seat):
            if move_set.complete or move_set.max_gold <= move_set.min_gold:
                continue
            example = move_set.moves[0]
            if isinstance(example, BetAction):
                kind = ActionKind(move_set.kind)
                _bounds_hold(module, state, move_set, lambda amount, k=kind, s=seat: BetAction(s, k, amount))
            elif isinstance(example, WagerPlaced):
                e = example
                _bounds_hold(module, state, move_set, lambda a, e=e: WagerPlaced(e.seat, e.kind, e.selection, a))
            ranges += 1
    assert ranges > 0


def test_refusal_says_why_and_changes_nothing(hands: dict[str, Any]) -> None:
    state, seat = next(decisions(tienlen, hands["tienlen"]))
    before = snapshot(state)
    stranger = next(s for s in (0, 1, 2, 3) if s != seat)
    refused = base.refusal(tienlen, state, CardsPlayed(stranger, base.held_cards(tienlen, state, stranger)[:1]))
    assert isinstance(refused, RuleViolation)
    assert refused.code == "NOT_YOUR_TURN"
    assert snapshot(state) == before
    assert base.refusal(tienlen, state, Declared(seat, "nonsense")) is not None


def test_a_trick_is_faced_with_its_cards_kind_and_player(hands: dict[str, Any]) -> None:
    for state, seat in decisions(tienlen, hands["tienlen"]):
        faced = base.facing(tienlen, state, seat)
        if faced.kind == "trick":
            over = state.round_plays[-1]
            assert (faced.seat, faced.cards, faced.combination) == (
                over.seat,
                over.combination.cards,
                over.combination.kind,
            )
            play_set = next((m for m in base.legal_moves(tienlen, state, seat) if m.kind == "play"), None)
            if play_set is not None:
                assert over.combination.kind in play_set.text
            return
    raise AssertionError("no trick was faced in the hands played")


@pytest.mark.parametrize("game", GAMES)
def test_every_kind_a_game_offers_is_among_the_kinds_it_declares(game: str, hands: dict[str, Any]) -> None:
    """``MOVES`` (the API guide's page of the game lists them) covers what self-play offers."""
    module = registry.get(game)
    assert set(module.MOVES) <= set(MOVE_KINDS)
    offered = {
        m.kind for state, seat in decisions(module, hands[game], 600) for m in base.legal_moves(module, state, seat)
    }
    assert offered and offered <= set(module.MOVES), offered - set(module.MOVES)


@pytest.mark.parametrize("game", GAMES)
def test_every_timer_a_game_runs_is_among_the_timers_it_declares(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    timers = set()
    for hand in hands[game][:8]:
        bodies = [e.body for e in hand.events]
        state = module.initial_state(bodies[0])
        for body in bodies[1:]:
            timers.add(module.pending(state).timer)
            state = module.apply(state, body)
    assert timers - {""} <= set(module.TIMERS), timers
