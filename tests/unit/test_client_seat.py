"""The typed client's Seat: when a player has stood up, read from their stream.

The one-hour nemesis froze all four Hold'em tables: bots stood up by the table while their
stream was down (a restart or handover) never saw their PlayerStoodUp (a stream opened
again starts from the hand in play), so they waited to play at a table they had left and
never bought in again. A view at the end of a change that names no seat of theirs says so.
"""

from __future__ import annotations

from socai.client.client import Seat, TableClient, Update
from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb


def seat() -> Seat:
    """A seat of a client that never dials (its channel is made lazily, inside a loop)."""
    return Seat(TableClient("127.0.0.1:1", "token"), "t1", "an", "tok", 2)


def stood_up_event(player: str) -> epb.Event:
    return epb.Event(table_id="t1", player_stood_up=epb.PlayerStoodUp(player_id=player, seat=2))


async def test_their_own_stand_up_event_says_so_and_another_players_does_not() -> None:
    s = seat()
    assert s.stood_up(Update(stood_up_event("an"), pb.TableView(viewer_seat=-1)))
    assert not s.stood_up(Update(stood_up_event("binh"), pb.TableView(viewer_seat=2)))


async def test_a_view_that_names_no_seat_of_theirs_says_so_without_the_event() -> None:
    """The stream opened again after the stand-up: no PlayerStoodUp, a spectator's view."""
    assert seat().stood_up(Update(None, pb.TableView(viewer_seat=-1)))


async def test_a_seated_view_or_one_in_the_middle_of_a_change_does_not() -> None:
    s = seat()
    assert not s.stood_up(Update(None, pb.TableView(viewer_seat=2)))
    assert not s.stood_up(Update(None, pb.TableView(viewer_seat=0)))
    # Only the view at the end of a change (more_follows false) is the table's state.
    assert not s.stood_up(Update(None, pb.TableView(viewer_seat=-1, more_follows=True)))
