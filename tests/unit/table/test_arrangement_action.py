"""A player's arrangement names its cards: deck positions are how the log writes one
(``socai.events.hidden``), never what a player may send."""

from __future__ import annotations

import pytest

from socai.errors import InvalidArgument
from socai.events.model import Arranged
from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb
from socai_table.convert import action_from_proto

CHI = (["As", "Ah", "Ad", "Ac", "2s"], ["Ks", "Kh", "Kd", "Kc", "2h"], ["Qs", "Qh", "Qd"])


def test_an_arrangement_of_cards_is_taken_as_sent() -> None:
    back, middle, front = CHI
    body = action_from_proto(pb.PlayerAction(arrange=epb.Arranged(seat=1, back=back, middle=middle, front=front)))
    assert isinstance(body, Arranged) and [str(c) for c in body.back] == back
    assert body.back_positions == body.middle_positions == body.front_positions == ()


@pytest.mark.parametrize("field", ["back_positions", "middle_positions", "front_positions"])
def test_an_arrangement_with_deck_positions_is_bad_action(field: str) -> None:
    back, middle, front = CHI
    message = epb.Arranged(seat=1, back=back, middle=middle, front=front, **{field: [3]})
    with pytest.raises(InvalidArgument) as caught:
        action_from_proto(pb.PlayerAction(arrange=message))
    assert caught.value.code == "BAD_ACTION"
