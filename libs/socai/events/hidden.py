"""Cards only their seat may see, in the event log: written by their place in the deck.

A hand's seed deals every card: the n-th card dealt in the hand, counting every
``CardsDealt`` in log order, is card n of ``fairness.shuffle(seed, cards.deck(game))``
(DESIGN.md "Fairness" 5). So a card dealt face down need not be written at all: its
position says which card it is, to whoever holds the seed. A hand whose HandStarted sets
``face_down_by_position`` (every hand the table service starts) is logged that way:

- a face-down ``DealtCard`` is written without its card (``HIDDEN_CARD``, encoded ``""``);
  a face-up one (the board, Xì Tố's up cards) with its card, since every spectator sees it;
- Mậu Binh's ``Arranged`` names each card by its deck position (``back_positions``,
  ``middle_positions``, ``front_positions``; each a card dealt face down to that seat) and
  leaves its card fields empty: an arrangement is secret until the comparison;
- every other event is public when it happens (bets, wagers, dice, plays, discards, takes,
  melds laid, cards sent, declarations, timers) and is written as it is. A move the rules
  make for a seat (a timeout, a disconnect) is derived by the engine from ``TimerExpired``
  and the like, so it names no card in the log either.

Until HandEnded reveals the seed, only the table service, which keeps each seed sealed at
rest (``socai_table.seeds``), knows a face-down card: an auditor, an operator with NATS
access, a backup of the stream read nothing of it. The revealed seed shows every card to
every reader at once. A hand logged before (no ``face_down_by_position``) writes every card
in the clear and is read exactly as it always was.

``conceal`` is the writer's side: the stored form of an event. ``HandCards`` is the
reader's: it checks each event's form against its hand's and, given the shuffled deck,
fills every hidden card in, so that the rules engine, settlement and the auditor fold the
same events as for a hand logged in the clear. What a reader refuses, as
``InvalidArgument`` with one of these codes (the replay's reasons of the same name):

- ``CARD_IN_CLEAR``: a card the hand's form hides is written (a face-down card, an
  arrangement's card): the log showed it before its time;
- ``CARD_FORMAT``: a card missing where the form writes it (a face-up card, or any card of
  a hand logged in the clear), positions in a hand logged in the clear, or positions that
  do not name cards dealt face down to the arranging seat, each once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

from socai import errors
from socai.cards import Card
from socai.events.model import COMMUNITY, HIDDEN_CARD, Arranged, CardsDealt, DealtCard, Event, HandStarted

CARD_IN_CLEAR: Final = "CARD_IN_CLEAR"
CARD_FORMAT: Final = "CARD_FORMAT"


def _to(seat: int) -> str:
    return "the board" if seat == COMMUNITY else f"seat {seat}"


def _refused(code: str, event: Event, what: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(code, f"{event.event_id}: {what}", event_id=event.event_id)


def positions_named(body: Arranged) -> bool:
    """Whether an arrangement gives deck positions (the log's form, never a player's)."""
    return bool(body.back_positions or body.middle_positions or body.front_positions)


def conceal(event: Event, deck: Sequence[Card]) -> Event:
    """``event`` as a hand with ``face_down_by_position`` logs it: ``event`` itself when it
    names no hidden card, else a copy with each face-down dealt card blank and an
    arrangement given by deck positions. ``deck`` is the hand's shuffled deck."""
    body = event.body
    if type(body) is CardsDealt:
        if all(d.face_up for d in body.cards):
            return event
        dealt = tuple([d if d.face_up else DealtCard(d.seat, HIDDEN_CARD, False) for d in body.cards])
        return dataclasses.replace(event, body=CardsDealt(dealt))
    if type(body) is Arranged:
        index = {card: i for i, card in enumerate(deck)}

        def positions(chi: tuple[Card, ...]) -> tuple[int, ...]:
            errors.check(all(c in index for c in chi), "an arranged card is of the hand's deck")
            return tuple([index[c] for c in chi])

        stored = Arranged(body.seat, (), (), (), positions(body.back), positions(body.middle), positions(body.front))
        return dataclasses.replace(event, body=stored)
    return event


class HandCards:
    """One hand's cards as a reader of its log knows them, event after event.

    ``read`` checks an event's form against the hand's and returns it as the rules engine
    folds it: with every hidden card filled in from ``deck`` (the shuffled deck, once the
    seed is known), or as it is without one (an open hand: its form checked only).
    ``read`` changes nothing; ``accept`` records an event the reader took, so that a reader
    that skips an event (the table's rebuild quarantines what the rules refuse) keeps
    counting the deal right.
    """

    __slots__ = ("by_position", "dealt", "deck", "face_down")

    def __init__(self, started: HandStarted, deck: Sequence[Card] | None = None) -> None:
        self.by_position = started.face_down_by_position
        self.deck = deck
        self.dealt = 0  # cards dealt so far: the position of the next one
        self.face_down: dict[int, int] = {}  # deck position -> the seat it was dealt to face down

    def read(self, event: Event) -> Event:
        """``event`` as the engine folds it. Raises InvalidArgument (CARD_IN_CLEAR,
        CARD_FORMAT) when its form is not the hand's."""
        body = event.body
        if type(body) is CardsDealt:
            return self._dealt(event, body)
        if type(body) is Arranged:
            return self._arranged(event, body)
        return event

    def accept(self, event: Event) -> None:
        body = event.body
        if type(body) is CardsDealt:
            for d in body.cards:
                if not d.face_up:
                    self.face_down[self.dealt] = d.seat
                self.dealt += 1

    def _dealt(self, event: Event, body: CardsDealt) -> Event:
        if not self.by_position:
            for d in body.cards:
                if d.card is HIDDEN_CARD:
                    raise _refused(
                        CARD_FORMAT,
                        event,
                        f"the card dealt to {_to(d.seat)} is not written, but this hand writes "
                        "every card (its HandStarted has no face_down_by_position)",
                    )
            return event
        deck = self.deck
        filled: list[DealtCard] = []
        for i, d in enumerate(body.cards):
            if d.face_up:
                if d.card is HIDDEN_CARD:
                    raise _refused(CARD_FORMAT, event, f"the face-up card dealt to {_to(d.seat)} is not written")
                filled.append(d)
                continue
            if d.card is not HIDDEN_CARD:
                raise _refused(
                    CARD_IN_CLEAR,
                    event,
                    f"the face-down card dealt to {_to(d.seat)} is written in the clear; "
                    "this hand writes face-down cards by position (face_down_by_position)",
                )
            position = self.dealt + i
            # Past the deck's end the card stays unknown: the deal check reports the overrun.
            filled.append(DealtCard(d.seat, deck[position], False) if deck is not None and position < len(deck) else d)
        if deck is None:
            return event
        return dataclasses.replace(event, body=CardsDealt(tuple(filled)))

    def _arranged(self, event: Event, body: Arranged) -> Event:
        if not self.by_position:
            if positions_named(body):
                raise _refused(
                    CARD_FORMAT,
                    event,
                    f"seat {body.seat}'s arrangement gives deck positions, but this hand writes "
                    "every card (its HandStarted has no face_down_by_position)",
                )
            return event
        if body.back or body.middle or body.front:
            raise _refused(
                CARD_IN_CLEAR,
                event,
                f"seat {body.seat}'s arrangement is written in the clear; this hand gives "
                "arranged cards by deck position (face_down_by_position)",
            )
        named: set[int] = set()
        for position in (*body.back_positions, *body.middle_positions, *body.front_positions):
            if self.face_down.get(position) != body.seat:
                raise _refused(
                    CARD_FORMAT,
                    event,
                    f"seat {body.seat}'s arrangement names deck position {position}, "
                    "which is not a card dealt face down to that seat",
                )
            if position in named:
                raise _refused(
                    CARD_FORMAT, event, f"seat {body.seat}'s arrangement names deck position {position} twice"
                )
            named.add(position)
        deck = self.deck
        if deck is None:
            return event

        def cards(positions: tuple[int, ...]) -> tuple[Card, ...]:
            return tuple([deck[p] for p in positions])

        revealed = Arranged(
            body.seat, cards(body.back_positions), cards(body.middle_positions), cards(body.front_positions)
        )
        return dataclasses.replace(event, body=revealed)


def hidden_in(event: Event) -> bool:
    """Whether ``event`` as stored hides a card (a face-down card by position, an
    arrangement by positions): the rules engine cannot fold it before the seed is known."""
    body = event.body
    if type(body) is CardsDealt:
        return any(d.card is HIDDEN_CARD for d in body.cards)
    return type(body) is Arranged and positions_named(body)


def reveal(events: Sequence[Event], deck: Sequence[Card] | None) -> Sequence[Event]:
    """A hand's events (HandStarted first) as the rules engine folds them: each read by
    ``HandCards`` with ``deck`` (None: the form checked only, the events returned as they
    are). A hand logged in the clear comes back as the same sequence. Raises
    InvalidArgument (CARD_IN_CLEAR, CARD_FORMAT)."""
    if not events:
        return events
    started = events[0].body
    errors.check(isinstance(started, HandStarted), "a hand's events start with HandStarted")
    assert isinstance(started, HandStarted)
    cards = HandCards(started, deck)
    out: list[Event] = []
    changed = False
    for event in events:
        read = cards.read(event)
        cards.accept(read)
        changed = changed or read is not event
        out.append(read)
    return out if changed else events


__all__ = [
    "CARD_FORMAT",
    "CARD_IN_CLEAR",
    "HandCards",
    "conceal",
    "hidden_in",
    "positions_named",
    "reveal",
]
