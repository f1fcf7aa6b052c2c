"""Protobuf at the edge of the table service: requests in, views out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from socai import errors
from socai.events import codec, hidden
from socai.events.model import Arranged, Body
from socai.gen.events.v1 import events_pb2
from socai.gen.table.v1 import table_pb2 as pb
from socai.rules.base import LegalAction
from socai_table.model import TableConfig
from socai_table.store import ClosedTable
from socai_table.table import Table

# PlayerAction oneof field -> the event body it carries.
ACTION_FIELDS = ("bet", "wager", "play", "pass", "declare", "arrange", "take", "lay", "send")
_ACTION_OF_BODY = {
    "BetAction": "bet",
    "WagerPlaced": "wager",
    "CardsPlayed": "play",
    "Passed": "pass",
    "Declared": "declare",
    "Arranged": "arrange",
    "CardTaken": "take",
    "MeldsLaid": "lay",
    "CardSent": "send",
}


def config_from_proto(msg: pb.TableConfig) -> TableConfig:
    if not msg.game:
        raise errors.InvalidArgument("BAD_GAME", "config.game is required")
    return TableConfig(
        game=msg.game,
        stake_gold=msg.stake_gold,
        fee_bps=msg.fee_bps if msg.HasField("fee_bps") else None,
        seats_max=msg.seats_max,
        options=dict(msg.options),
        buy_in_min_gold=msg.buy_in_min_gold,
        buy_in_max_gold=msg.buy_in_max_gold,
        auto_start_players=msg.auto_start_players,
        turn_timeout_s=msg.turn_timeout_s,
        owner_player_id=msg.owner_player_id,
        between_hands_ms=msg.between_hands_ms,
    )


def config_to_proto(c: TableConfig) -> pb.TableConfig:
    return pb.TableConfig(
        game=c.game,
        stake_gold=c.stake_gold,
        fee_bps=c.fee_bps,
        seats_max=c.seats_max,
        options=c.options,
        buy_in_min_gold=c.buy_in_min_gold,
        buy_in_max_gold=c.buy_in_max_gold,
        auto_start_players=c.auto_start_players,
        turn_timeout_s=c.turn_timeout_s,
        owner_player_id=c.owner_player_id,
        between_hands_ms=c.between_hands_ms,
    )


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(datetime.fromtimestamp(seconds, UTC))
    return ts


def table_to_proto(table: Table) -> pb.Table:
    hand = table.hand
    status = (
        pb.TABLE_STATUS_CLOSED
        if table.closed
        else pb.TABLE_STATUS_CLOSING
        if table.closing
        else pb.TABLE_STATUS_PLAYING
        if hand is not None and not hand.ended
        else pb.TABLE_STATUS_WAITING
    )
    dealt = hand.dealt_seats if hand is not None and not hand.ended else set()
    return pb.Table(
        table_id=table.table_id,
        config=config_to_proto(table.config),
        status=status,
        seats=[
            pb.SeatState(
                seat=s.seat,
                player_id=s.player_id,
                stack_gold=s.stack_gold,
                connected=s.connected,
                in_hand=s.seat in dealt,
                leaving=s.leaving,
                guild_id=s.guild_id,
            )
            for s in sorted(table.seats.values(), key=lambda s: s.seat)
        ],
        hand_id=hand.hand_id if hand is not None and not hand.ended else "",
        hands_played=table.hands_played,
        created_at=timestamp(table.created_at),
        close_reason=table.close_reason,
    )


def closed_to_proto(closed: ClosedTable) -> pb.Table:
    """A closed table from its row: no seats (every one stood up), status CLOSED."""
    return pb.Table(
        table_id=closed.table_id,
        config=config_to_proto(closed.config),
        status=pb.TABLE_STATUS_CLOSED,
        hands_played=closed.hands_played,
        created_at=timestamp(closed.created_at.timestamp()),
        close_reason=closed.close_reason,
        closed_at=timestamp(closed.closed_at.timestamp()),
    )


def any_table_to_proto(table: Table | ClosedTable) -> pb.Table:
    return closed_to_proto(table) if isinstance(table, ClosedTable) else table_to_proto(table)


def action_from_proto(msg: pb.PlayerAction) -> Body:
    which = msg.WhichOneof("action")
    if which is None:
        raise errors.InvalidArgument("BAD_ACTION", "action is empty")
    body: Body = codec.body_from_proto(getattr(msg, which))
    if isinstance(body, Arranged) and hidden.positions_named(body):
        # Deck positions are how the log writes an arrangement; a player names the cards.
        raise errors.InvalidArgument("BAD_ACTION", "an arrangement names its cards, not deck positions")
    return body


def action_to_proto(body: Any) -> pb.PlayerAction:
    msg = pb.PlayerAction()
    getattr(msg, _ACTION_OF_BODY[type(body).__name__]).CopyFrom(codec.body_to_proto(body))
    return msg


def legal_to_proto(action: LegalAction) -> pb.LegalAction:
    return pb.LegalAction(kind=action.kind, min_gold=action.min_gold, max_gold=action.max_gold)


def state_to_proto(table: Table, view: dict[str, Any]) -> pb.TableState:
    events: list[events_pb2.Event] = view["events"]
    state = pb.TableState(
        table=table_to_proto(table),
        hand_id=view["hand_id"],
        last_seq=view["last_seq"],
        events=events,
        to_act=view["to_act"],
        timer=view["timer"],
        legal_actions=[legal_to_proto(a) for a in view["legal_actions"]],
        candidate_actions=[action_to_proto(b) for b in view["candidate_actions"]],
        viewer_seat=view["viewer_seat"],
    )
    if view["deadline"]:
        state.deadline.CopyFrom(timestamp(view["deadline"]))
    return state
