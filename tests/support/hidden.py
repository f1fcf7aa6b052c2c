"""What a reader of the event log can learn of the cards, for the tests of issue 27.

``texts_in`` walks a stored message generically (every string field, at any depth, of any
body, whatever its type), so a card written anywhere counts, not only where today's code
writes cards. ``spectator_cards`` is the reference of what may be known: the cards a
spectator sees of an event (the game's ``visible`` hook, no seat) at that moment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from types import ModuleType
from typing import Any, Final

from google.protobuf.message import Message

from socai.cards import ALL_CARDS, Card
from socai.events.model import COMMUNITY, HIDDEN_CARD, Event
from socai.rules import base

SPECTATOR: Final = COMMUNITY - 1  # no seat (socai_table.views.SPECTATOR_SEAT)
CARD_TEXTS: Final = frozenset(str(c) for c in ALL_CARDS)


def texts_in(message: Message) -> Iterator[str]:
    """Every string value of ``message`` and of every message inside it."""
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            values = [*value.keys(), *value.values()]
        else:
            values = value if field.is_repeated else [value]
        for item in values:
            if isinstance(item, Message):
                yield from texts_in(item)
            elif isinstance(item, str):
                yield item


def cards_written(message: Message) -> set[str]:
    """The cards a stored message names, wherever it names them."""
    return {text for text in texts_in(message) if text in CARD_TEXTS}


def cards_in(value: Any) -> Iterator[Card]:
    """Every card of a domain value (an event body, a tuple of them …), hidden ones left out."""
    if isinstance(value, Card):
        if value is not HIDDEN_CARD:
            yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from cards_in(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from cards_in(getattr(value, f.name))


def spectator_cards(module: ModuleType, event: Event, state: Any) -> set[str]:
    """The cards a spectator sees of ``event`` (whole, as the table holds it) while the
    hand's rules state is ``state``."""
    seen = base.visible_event(module, event, SPECTATOR, state, False)
    return set() if seen is None else {str(c) for c in cards_in(seen.body)}
