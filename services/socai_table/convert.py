"""Protobuf at the edge of the table service: requests in, views out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from socai import errors
from socai.events import codec, hidden
from socai.events.model import Arranged, Body
from socai.gen.events.v1 import events_pb2
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.table.v1 import table_pb2 as pb
from socai.rules.base import Facing, LegalAction, MoveSet
from socai.settle.replay import ReplayResult, penalties
from socai_table.core import AFTER_HAND, FORFEITED, STOOD_UP, LeaveResult
from socai_table.model import TableConfig
from socai_table.store import CashoutRow, ClosedTable
from socai_table.table import CashOutDone, Table
from socai_table.views import View, WatchItem

# PlayerAction oneof field -> the event body it carries ("pass" and "pass_turn" are one move:
# "pass" is a keyword in Python, so the new field carries it under another name).
ACTION_FIELDS = ("bet", "wager", "play", "pass", "declare", "arrange", "take", "lay", "send", "pass_turn")
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


def action_to_proto(body: Any, pass_field: str = "pass") -> pb.PlayerAction:
    """``body`` as a PlayerAction; a pass in ``pass_field`` (``pass`` for the old
    ``candidate_actions``, ``pass_turn`` in the views' legal moves)."""
    msg = pb.PlayerAction()
    name = _ACTION_OF_BODY[type(body).__name__]
    codec.body_into(getattr(msg, pass_field if name == "pass" else name), body)
    return msg


def legal_to_proto(action: LegalAction) -> pb.LegalAction:
    return pb.LegalAction(
        kind=action.kind, min_gold=action.min_gold, max_gold=action.max_gold, step_gold=action.step_gold
    )


def move_set_to_proto(moves: MoveSet) -> pb.LegalMove:
    return pb.LegalMove(
        kind=moves.kind,
        text=moves.text,
        complete=moves.complete,
        actions=[action_to_proto(b, "pass_turn") for b in moves.moves],
        min_gold=moves.min_gold,
        max_gold=moves.max_gold,
        step_gold=moves.step_gold,
    )


def facing_to_proto(facing: Facing) -> pb.Facing:
    return pb.Facing(
        kind=facing.kind,
        seat=facing.seat,
        cards=[str(c) for c in facing.cards],
        combination=facing.combination,
        amount_gold=facing.amount_gold,
        max_gold=facing.max_gold,
        takeable=facing.takeable,
        text=facing.text,
    )


def view_to_proto(view: View) -> pb.TableView:
    msg = pb.TableView(
        log_seq=view.log_seq,
        hand_id=view.hand_id,
        seq=view.seq,
        hand_over=view.hand_over,
        to_act=view.to_act,
        timer=view.timer,
        viewer_seat=view.viewer_seat,
        cards=[str(c) for c in view.cards],
        facing=facing_to_proto(view.facing),
        legal_moves=[move_set_to_proto(m) for m in view.legal_moves],
        more_follows=view.more_follows,
    )
    if view.deadline:
        msg.deadline.CopyFrom(timestamp(view.deadline))
    return msg


def cash_out_done_to_proto(done: CashOutDone) -> pb.CashOut:
    return pb.CashOut(
        table_id=done.table_id,
        player_id=done.player_id,
        status=pb.CASH_OUT_STATUS_DONE,
        amount_gold=done.amount_gold,
        after_hand_id=done.after_hand_id,
        ledger_transaction_id=done.ledger_transaction_id,
        completed_at=timestamp(done.completed_s),
    )


def watch_item_to_proto(item: WatchItem) -> pb.WatchTableResponse:
    msg = pb.WatchTableResponse(view=view_to_proto(item.view))
    if item.event is not None:
        msg.event.CopyFrom(item.event)
    if item.cash_out is not None:
        msg.cash_out.CopyFrom(cash_out_done_to_proto(item.cash_out))
    return msg


def watch_item_wire(item: WatchItem) -> bytes:
    """``item`` as a serialized ``WatchTableResponse``, built on first use and kept in the
    item: every stream the item was queued for (a visibility class, ``Watchers.flush``)
    sends the same bytes."""
    if item.wire is None:
        item.wire = watch_item_to_proto(item).SerializeToString()
    return item.wire


_CASH_OUT_STATUS = {
    "pending": pb.CASH_OUT_STATUS_WAITING_FOR_SETTLEMENT,
    "done": pb.CASH_OUT_STATUS_DONE,
    "alarm": pb.CASH_OUT_STATUS_ALARM,
}


def cash_out_to_proto(table_id: str, player_id: str, row: CashoutRow | None, seated: bool) -> pb.CashOut:
    """The player's cash-out now: none, waiting for their hand (still seated, leaving),
    waiting for settlement, done or held (alarm)."""
    if row is None:
        return pb.CashOut(table_id=table_id, player_id=player_id, status=pb.CASH_OUT_STATUS_NONE)
    c = row.cashout
    status = _CASH_OUT_STATUS.get(c.status, pb.CASH_OUT_STATUS_UNSPECIFIED)
    waiting_for_hand = seated and c.status == "pending"
    msg = pb.CashOut(
        table_id=c.table_id,
        player_id=c.player_id,
        status=pb.CASH_OUT_STATUS_WAITING_FOR_HAND if waiting_for_hand else status,
        amount_gold=0 if waiting_for_hand else c.amount_gold,
        after_hand_id=c.last_hand_id,
        ledger_transaction_id=row.ledger_transaction_id,
    )
    if row.done_s:
        msg.completed_at.CopyFrom(timestamp(row.done_s))
    return msg


_OUTCOME = {
    STOOD_UP: pb.LEAVE_OUTCOME_STOOD_UP,
    FORFEITED: pb.LEAVE_OUTCOME_FORFEITED,
    AFTER_HAND: pb.LEAVE_OUTCOME_AFTER_HAND,
}


def leave_to_proto(result: LeaveResult, cashed_out: bool, cash_out: pb.CashOut) -> pb.LeaveTableResponse:
    msg = pb.LeaveTableResponse(
        cashed_out=cashed_out,
        cash_out_gold=result.cash_out_gold,
        outcome=_OUTCOME[result.outcome],
        hand_id=result.hand_id,
        cash_out=cash_out,
    )
    if result.outcome != STOOD_UP:
        forfeit = result.forfeit
        msg.forfeit.CopyFrom(
            pb.Forfeit(
                committed_gold=forfeit.committed_gold if forfeit is not None else 0,
                at_most_gold=result.at_most_gold,
                rule=forfeit.rule if forfeit is not None else "",
            )
        )
    return msg


def settlement_to_proto(result: ReplayResult) -> spb.Settlement:
    """An ended hand's settlement as the rules engine computes it (``GetHand``)."""
    s = result.settlement
    players = {info.seat: info.player_id for info in result.started.seats}
    return spb.Settlement(
        hand_id=s.hand_id,
        table_id=s.table_id,
        game=s.game,
        seats=[
            spb.SeatResult(
                seat=seat, player_id=players.get(seat, ""), account_id=s.seat_accounts.get(seat, ""), net_gold=net
            )
            for seat, net in sorted(s.nets.items())
        ],
        transfers=[
            spb.SettlementTransfer(
                from_account_id=t.from_account,
                to_account_id=t.to_account,
                amount_gold=t.amount_gold,
                reason=t.reason,
                detail=t.detail,
            )
            for t in s.transfers
        ],
        fees_gold=s.fees_gold(),
        penalties_gold=penalties(s),
        shortfalls=[
            spb.Shortfall(seat=x.seat, owed_gold=x.owed_gold, paid_gold=x.paid_gold, reason=x.reason)
            for x in s.shortfalls
        ],
        pot_carry_gold=s.pot_carry_gold,
    )


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
        view=view_to_proto(view["view"]),
    )
    if view["deadline"]:
        state.deadline.CopyFrom(timestamp(view["deadline"]))
    return state
