"""A bot's choice among a turn's moves: for demos, simulations and tests of a backend.

``random_action`` picks a kind of move at random (each kind as likely as another, so a
Tiến Lên seat with 200 listed plays still passes as often as it plays), then one of the
moves of that kind that are ready to send: every move of a complete kind, the examples of a
described one (a bet's bounds, a suggested arrangement).
"""

from __future__ import annotations

import random

from socai.client.client import Turn
from socai.gen.table.v1 import table_pb2 as pb


def random_action(turn: Turn, rng: random.Random) -> pb.PlayerAction | None:
    """One of ``turn``'s ready-to-send moves, a kind first, then a move of it; None when the
    turn lists none (a kind described with no example)."""
    kinds = [m for m in turn.moves if m.actions]
    if not kinds:
        return None
    chosen = rng.choice(kinds)
    return rng.choice(list(chosen.actions))
