"""Play a whole hand through a rules module, the way the table's game loop does.

Used by property tests, benchmarks and bots. It is pure given ``choose``: the dealing
comes from the seed (``socai.fairness``), decisions from ``choose``. The table service
drives the same ``pending``/``apply`` steps, with real players and timers, and always deals
the seed's shuffle; a caller may give ``play_hand`` a chosen deck instead, for hands that
pin only what the rules engine makes of a deal (the golden corpus's ``engine`` batches: no
seed deals those cards, so no audit can prove such a hand fair).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from socai import cards, fairness
from socai.cards import Card
from socai.errors import RuleViolation, check
from socai.events.model import Body, CardsDealt, HandEnded, HandStarted, TimerExpired
from socai.rules.base import system_event

MAX_STEPS = 10_000

# choose(state, seat, candidates) -> the chosen body, or None to let the seat's timer run out.
Chooser = Callable[[Any, int, Sequence[Body]], Body | None]


def play_hand(
    module: ModuleType,
    started: HandStarted,
    seed: bytes,
    choose: Chooser,
    deck: Sequence[Card] | None = None,
) -> tuple[list[Body], Any]:
    """Play ``started`` to the end; returns (every body applied, HandStarted first and
    HandEnded last; the final state).

    Deals, dice and HandEnded come from ``base.next_system_event``, as at the table: the
    cards from ``deck`` in order when given (the whole deck of the game, in any order),
    else from the seed's shuffle (``fairness.shuffle``); HandEnded reveals ``seed`` either
    way. Raises RuleViolation when ``deck`` is not the game's deck: "DUPLICATE_CARD" for a
    card in it twice, "BAD_CARD" for a card missing or foreign (or any deck for a game
    without cards).

    When the hand waits for one seat's decision (``pending.to_act``), ``choose`` is asked
    for it; None lets that seat's timer run out (``TimerExpired``). Simultaneous decisions
    (several seats to act on one timer, as in a Tài Xỉu betting window) are counted per
    (hand, timer) and asked of the owing seats in turn, round the table."""
    if deck is None:
        deck = fairness.shuffle(seed, cards.deck(started.game)) if module.SPEC.deck else []
    else:
        _check_deck(module, started.game, deck)
    next_card = 0
    state = module.initial_state(started)
    bodies: list[Body] = [started]
    # Per timer of the hand, the seat asked last and the seats that owed a decision then.
    asked_on: dict[str, tuple[int, tuple[int, ...]]] = {}
    for _ in range(MAX_STEPS):
        pending = module.pending(state)
        body = system_event(pending, deck, next_card, seed)  # base.next_system_event
        if body is None:
            to_act = pending.to_act
            check(len(to_act) > 0, "a pending hand must wait for someone")
            seat = to_act[0]
            if len(to_act) > 1:
                # Simultaneous decisions: each decision on this timer of the hand goes to
                # the next seat still owing one after the seat asked last, round the
                # table, so that no seat decides everything before the others are asked.
                last = asked_on.get(pending.timer)
                if last is not None:
                    last_seat, last_owing = last
                    start = last_owing.index(last_seat) + 1
                    seat = next((s for s in last_owing[start:] + last_owing[:start] if s in to_act), seat)
                asked_on[pending.timer] = (seat, to_act)
            if seat >= 0:
                body = choose(state, seat, module.candidate_actions(state, seat))
            if body is None:
                body = TimerExpired(seat, pending.timer)
        state = module.apply(state, body)
        bodies.append(body)
        if type(body) is HandEnded:
            return bodies, state
        if type(body) is CardsDealt:
            next_card += len(body.cards)
    raise AssertionError("hand did not finish within MAX_STEPS")


def _check_deck(module: ModuleType, game: str, deck: Sequence[Card]) -> None:
    if not module.SPEC.deck:
        raise RuleViolation("BAD_CARD", f"{game} is played without cards: there is no deck to deal")
    given = Counter(deck)
    twice = [c for c, n in given.items() if n > 1]
    if twice:
        raise RuleViolation("DUPLICATE_CARD", f"the deck to deal holds {cards.format_cards(twice)} more than once")
    full = Counter(cards.deck(game))
    if given != full:
        missing = [c for c in cards.deck(game) if c not in given]
        foreign = [c for c in deck if c not in full]
        raise RuleViolation(
            "BAD_CARD",
            f"the deck to deal is not the {game} deck: it lacks {cards.format_cards(missing) or 'nothing'} "
            f"and holds {cards.format_cards(foreign) or 'nothing'} besides",
        )


def replay(module: ModuleType, bodies: Sequence[Body]) -> Any:
    """Fold ``bodies`` (HandStarted first) through ``module``; returns the final state."""
    first = bodies[0]
    check(isinstance(first, HandStarted), "a hand starts with HandStarted")
    state = module.initial_state(first)
    for body in bodies[1:]:
        state = module.apply(state, body)
    return state
