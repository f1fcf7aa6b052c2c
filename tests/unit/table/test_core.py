"""The table's functional core (``socai_table.core``) as plain values: no NATS, no PostgreSQL.

Each command's decision is read as the effects the table performs, in order, and the
answer or the refusal (the same reason codes the service answers). ``World`` performs
decisions the way ``Table._perform`` does, against dictionaries standing for the wallets,
the escrows, the join and cash-out rows and the log, so that the property tests can run
random sequences of joins, leaves, hands, stand-ups and closes and check what must always
hold: no seat held twice, gold conserved (gold bought in = gold at the table + gold cashed
out), a closing table accepting nothing new.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from socai import accounts, errors
from socai.events.model import (
    Event,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    PlayerSeated,
    PlayerStoodUp,
    SeatInfo,
    TableClosed,
)
from socai.settle.replay import has_closing_rule
from socai_table import core
from socai_table.core import LEAVE_AFTER_HAND, LEAVE_NOW
from socai_table.model import TableConfig, buy_in_key, facts_id_of

TABLE = "t1"
AT = datetime(2026, 1, 1, tzinfo=UTC)
SEED_HEX = "00" * 32


def holdem(seats_max: int = 4, auto_start_players: int = 0, game: str = "holdem", **options: str) -> TableConfig:
    return TableConfig(
        game=game,
        stake_gold=10,
        fee_bps=0,
        seats_max=seats_max,
        buy_in_min_gold=100,
        buy_in_max_gold=1_000,
        auto_start_players=auto_start_players,
        options=options,
    ).normalized()


def fact(seq: int, body: Any) -> Event:
    return Event(TABLE, facts_id_of(TABLE), seq, "holdem", AT, body)


def hand_event(hand_id: str, seq: int, body: Any) -> Event:
    return Event(TABLE, hand_id, seq, "holdem", AT, body)


def seated(state: core.TableState, seat: int, player: str, buy_in: int, stream_seq: int) -> core.TableState:
    return core.evolve(
        state, fact(state.facts_seq + 1, PlayerSeated(seat, player, buy_in, "", f"tx-{player}")), stream_seq
    )


def started(state: core.TableState, number: int, stream_seq: int, *, closing: bool = False) -> core.TableState:
    hand_id = f"{TABLE}-h{number}"
    infos = tuple(
        SeatInfo(s.seat, s.player_id, s.stack_gold) for s in sorted(state.seats.values(), key=lambda s: s.seat)
    )
    body = HandStarted(TABLE, hand_id, "holdem", number, 10, 0, state.config.seats_max, infos, 0, "c", closing=closing)
    return core.evolve(state, hand_event(hand_id, 1, body), stream_seq)


def table_of(*stacks: int, **config: int) -> core.TableState:
    state = core.initial(TABLE, holdem(**config))
    for seat, stack in enumerate(stacks):
        state = seated(state, seat, f"p{seat}", stack, 10 + seat)
    return state


def join(
    state: core.TableState, player: str, buy_in: int = 500, seat: int = core.ANY_SEAT, **read: Any
) -> core.Decision:
    return core.decide(state, core.Join(player, buy_in, seat, f"key-{player}", **read))


def pending_row(player: str, buy_in: int = 500, status: str = "pending", tx: str = "") -> core.JoinRow:
    return core.JoinRow(TABLE, player, buy_in, status, tx)


def code_of(decision: core.Decision) -> str:
    assert decision.refusal is not None, decision
    return decision.refusal.code


def test_the_core_imports_no_infrastructure_no_protobuf_and_no_clock():
    """``socai_table.core`` is a functional core (STYLE.md habit 1): imported alone, it
    brings in nothing that does I/O, keeps time or draws at random, and no protobuf."""
    script = (
        "import sys, socai_table.core; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in FORBIDDEN or m.startswith(SOCAI)))"
    )
    forbidden = {"grpc", "nats", "psycopg", "asyncio", "random", "socket", "structlog", "google", "socai_table"}
    socai = ("socai.gen", "socai.infra", "socai.settle", "socai.events.codec")
    found = subprocess.run(
        [sys.executable, "-c", f"FORBIDDEN = {forbidden!r}; SOCAI = {socai!r}; {script}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found == "['socai_table', 'socai_table.core', 'socai_table.model']"


# --- joins -------------------------------------------------------------------------------------


def test_a_join_reads_its_row_then_whether_a_cash_out_is_pending_then_buys_in_seats_and_marks_the_row():
    state = table_of()
    assert join(state, "ann").needs == core.NEEDS_JOIN_ROW
    assert join(state, "ann", row=pending_row("ann")).needs == core.NEEDS_CASHOUT_PENDING
    decision = join(state, "ann", row=pending_row("ann"), cashout_pending=False)
    assert decision.answer == 0 and decision.refusal is None
    transfer, append, finish, then = decision.effects
    assert transfer == core.Transfer(
        buy_in_key("key-ann", TABLE),
        accounts.player("ann"),
        accounts.escrow(TABLE, "ann"),
        500,
        "buy_in",
        TABLE,
        refused=core.FinishJoin("key-ann", "failed"),
    )
    assert append == core.AppendFact(PlayerSeated(0, "ann", 500, "", core.TRANSFER_TX))
    assert finish == core.FinishJoin("key-ann", "seated", core.TRANSFER_TX)
    assert then == core.Then(core.MaybeAutostart())


def test_the_buy_in_moves_before_the_seat_is_taken_and_the_row_is_marked_last():
    """A crash between two of these leaves what ``repair_joins`` finishes: a buy-in with no
    seat is refunded, a seat whose row is pending is marked seated."""
    decision = join(table_of(), "ann", row=pending_row("ann"), cashout_pending=False)
    kinds = [type(effect) for effect in decision.effects]
    assert kinds == [core.Transfer, core.AppendFact, core.FinishJoin, core.Then]


@pytest.mark.parametrize(
    ("buy_in", "seat", "code"),
    [(99, -1, "BAD_BUY_IN"), (1_001, -1, "BAD_BUY_IN"), (500, -2, "BAD_SEAT"), (500, 4, "BAD_SEAT")],
)
def test_a_bad_buy_in_or_seat_is_refused_before_anything_is_read(buy_in: int, seat: int, code: str):
    decision = join(table_of(), "ann", buy_in, seat)
    assert code_of(decision) == code and decision.effects == () and not decision.needs


def test_a_join_key_reused_for_another_join_is_refused():
    assert code_of(join(table_of(), "ann", 600, row=pending_row("ann", 500))) == "IDEMPOTENCY_KEY_REUSED"
    assert code_of(join(table_of(), "ann", row=pending_row("bob"))) == "IDEMPOTENCY_KEY_REUSED"


def test_a_retried_join_answers_its_seat_while_that_seating_lasts_and_join_key_used_after():
    state = table_of(500, 500)  # p1 seated with tx-p1
    assert join(state, "p1", row=pending_row("p1", status="seated", tx="tx-p1")) == core.Decision(answer=1)
    left = core.evolve(state, fact(state.facts_seq + 1, PlayerStoodUp(1, "p1", 500)), 20)
    assert code_of(join(left, "p1", row=pending_row("p1", status="seated", tx="tx-p1"))) == "JOIN_KEY_USED"
    assert code_of(join(left, "p1", row=pending_row("p1", status="failed"))) == "JOIN_FAILED"


def test_a_join_retried_after_a_lost_ack_finds_its_buy_in_and_answers_the_seat():
    state = table_of(500, 500)
    assert join(state, "p1", row=pending_row("p1")).needs == core.NEEDS_BUY_IN_TX
    answered = join(state, "p1", row=pending_row("p1"), buy_in_tx="tx-p1", buy_in_tx_read=True)
    assert answered == core.Decision((core.FinishJoin("key-p1", "seated", "tx-p1"),), answer=1)
    other = join(state, "p1", row=pending_row("p1"), buy_in_tx=None, buy_in_tx_read=True)
    assert code_of(other) == "ALREADY_SEATED"
    assert other.effects == (core.FinishJoin("key-p1", "failed", error="already seated"),)


def test_a_join_with_a_cash_out_pending_is_refused_and_its_row_failed():
    decision = join(table_of(), "ann", row=pending_row("ann"), cashout_pending=True)
    assert code_of(decision) == "CASHOUT_PENDING"
    assert decision.effects == (core.FinishJoin("key-ann", "failed", error="cash-out pending"),)


def test_a_taken_seat_and_a_full_table_are_refused():
    state = table_of(500, 500, seats_max=2)
    assert code_of(join(state, "ann", seat=1, row=pending_row("ann"), cashout_pending=False)) == "SEAT_TAKEN"
    assert code_of(join(state, "ann", row=pending_row("ann"), cashout_pending=False)) == "TABLE_FULL"


def test_any_seat_is_the_first_free_one():
    state = table_of(500, 500)
    state = core.evolve(state, fact(state.facts_seq + 1, PlayerStoodUp(0, "p0", 500)), 20)
    assert join(state, "ann", row=pending_row("ann"), cashout_pending=False).answer == 0


def test_a_closing_table_takes_no_join_and_starts_no_hand():
    state = core.evolve(table_of(500, 500), core.CloseBegun("maintenance"))
    assert code_of(join(state, "ann")) == "TABLE_CLOSING"
    assert code_of(core.decide(state, core.StartHand())) == "TABLE_CLOSING"
    closed = core.evolve(state, fact(state.facts_seq + 1, TableClosed("maintenance")), 30)
    assert code_of(join(closed, "ann")) == "TABLE_CLOSED"


# --- leaves --------------------------------------------------------------------------------------


def test_leaving_with_no_hand_in_play_stands_up_with_the_stack():
    state = table_of(500, 700)
    decision = core.decide(state, core.Leave("p1"))
    assert decision == core.Decision((core.StandUp(1),), answer=core.LeaveResult(core.STOOD_UP, cash_out_gold=700))
    assert code_of(core.decide(state, core.Leave("nobody"))) == "NOT_SEATED"


def test_leaving_after_the_hand_records_the_cash_out_row_once_and_answers_the_same_when_asked_again():
    state = started(table_of(500, 700), 1, 40)
    assert core.decide(state, core.Leave("p1", LEAVE_AFTER_HAND)).needs == core.NEEDS_CASHOUT_PENDING
    decision = core.decide(state, core.Leave("p1", LEAVE_AFTER_HAND, cashout_pending=False))
    answer = core.LeaveResult(core.AFTER_HAND, f"{TABLE}-h1", at_most_gold=700)
    assert decision == core.Decision((core.MarkLeaving(1, False),), answer=answer)
    marked = core.evolve(state, core.LeavingMarked(1))
    assert core.decide(marked, core.Leave("p1", LEAVE_AFTER_HAND)) == core.Decision(answer=answer)


def test_leaving_a_hand_now_writes_player_left_once_and_stands_up_at_its_end():
    state = started(table_of(500, 700), 1, 40)
    decision = core.decide(state, core.Leave("p0", LEAVE_NOW))
    assert decision.effects == (core.Evolve(core.LeavingMarked(0)), core.HandEvent(PlayerLeft(0)))
    assert decision.answer == core.LeaveResult(core.FORFEITED, f"{TABLE}-h1", at_most_gold=500)
    left = core.evolve(core.evolve(state, core.LeavingMarked(0)), hand_event(f"{TABLE}-h1", 2, PlayerLeft(0)), 41)
    assert left.hand is not None and left.hand.left == {0}
    again = core.decide(left, core.Leave("p0", LEAVE_AFTER_HAND))  # asked again: already left
    assert again == core.Decision(answer=decision.answer)
    ended = core.evolve(left, hand_event(f"{TABLE}-h1", 3, HandEnded(SEED_HEX)), 42)
    settled = core.evolve(ended, core.HandSettled(f"{TABLE}-h1", {0: -20, 1: 20}, 0))
    assert core.decide(settled, core.StandUpDue()) == core.Decision((core.StandUp(0),))
    assert settled.seats[0].stack_gold == 480 and settled.seats[1].stack_gold == 720


def test_a_seat_not_dealt_into_the_hand_stands_up_at_once():
    state = started(table_of(500, 700), 1, 40)
    state = seated(state, 2, "late", 300, 45)
    assert core.decide(state, core.Leave("late", LEAVE_AFTER_HAND)).effects == (core.StandUp(2),)


# --- hands ---------------------------------------------------------------------------------------


def test_a_hand_settles_onto_the_seats_of_its_players_only():
    """Someone who sat down in a seat after the hand started starts with their buy-in."""
    state = started(table_of(500, 700, 300), 1, 40)
    state = core.evolve(state, fact(state.facts_seq + 1, PlayerStoodUp(2, "p2", 300)), 41)  # not dealt? it was
    state = seated(state, 2, "late", 400, 42)
    state = core.evolve(state, hand_event(f"{TABLE}-h1", 2, HandEnded(SEED_HEX)), 43)
    state = core.evolve(state, core.HandSettled(f"{TABLE}-h1", {0: 100, 1: -50, 2: -50}, 0))
    assert {s.seat: s.stack_gold for s in state.seats.values()} == {0: 600, 1: 650, 2: 400}
    assert state.seats[0].last_hand_id == f"{TABLE}-h1" and state.seats[2].last_hand_id == ""
    assert state.hand is None and state.hands_played == 1


def test_start_hand_is_refused_while_a_hand_is_in_play_and_with_too_few_players():
    assert code_of(core.decide(table_of(500), core.StartHand())) == "NOT_ENOUGH_PLAYERS"
    state = table_of(500, 500)
    decision = core.decide(state, core.StartHand())
    assert decision == core.Decision((core.PlayHand(f"{TABLE}-h1", 1, (0, 1), -1),), answer=f"{TABLE}-h1")
    assert code_of(core.decide(started(state, 1, 40), core.StartHand())) == "HAND_IN_PLAY"


def test_a_leaving_or_busted_seat_is_dealt_into_no_hand_and_stands_up_between_hands():
    state = core.evolve(table_of(500, 0, 700), core.LeavingMarked(2))
    assert state.participants() == [0]
    assert core.decide(state, core.StandUpDue()).effects == (core.StandUp(1), core.StandUp(2))


def test_the_automatic_start_waits_for_its_players_and_never_starts_at_a_closing_table():
    state = table_of(500, auto_start_players=2)
    assert core.decide(state, core.MaybeAutostart()) == core.Decision()
    state = seated(state, 1, "p1", 500, 20)
    assert core.decide(state, core.MaybeAutostart()).effects == (core.ScheduleAutostart(1.0),)
    assert core.decide(core.evolve(state, core.CloseBegun("x")), core.MaybeAutostart()) == core.Decision()


@pytest.mark.parametrize(("mode", "fewest"), [("system", 1), ("p2p", 2)])
def test_a_game_whose_fewest_players_depend_on_its_options_starts_no_hand_with_fewer(mode: str, fewest: int):
    """Tài Xỉu against the system is played by one bettor, between players by the banker
    and a bettor: a p2p table with one player neither starts by itself nor on request (its
    rules would refuse the HandStarted, BAD_SEAT_COUNT: a failed start and a warning each
    time the bots' tables were left with one player)."""
    config = holdem(auto_start_players=1, game="taixiu", mode=mode)  # the same table, Tài Xỉu
    state = seated(core.initial(TABLE, config), 0, "p0", 500, 10)
    alone = core.decide(state, core.StartHand())
    if fewest == 1:
        assert core.decide(state, core.MaybeAutostart()).effects == (core.ScheduleAutostart(1.0),)
        assert alone.effects[0] == core.PlayHand(f"{TABLE}-h1", 1, (0,), -1)
        return
    assert core.decide(state, core.MaybeAutostart()) == core.Decision()
    assert code_of(alone) == "NOT_ENOUGH_PLAYERS" and not alone.effects
    two = seated(state, 1, "p1", 500, 11)
    assert core.decide(two, core.MaybeAutostart()).effects == (core.ScheduleAutostart(1.0),)


def test_after_a_hand_the_stand_ups_come_first_then_the_close_or_the_next_hand():
    state = table_of(500, 500)
    assert core.decide(state, core.AfterHand()).effects == (
        core.Then(core.StandUpDue()),
        core.Then(core.MaybeAutostart()),
    )
    closing = core.evolve(state, core.CloseBegun("x"))
    assert core.decide(closing, core.AfterHand()).effects == (
        core.Then(core.StandUpDue()),
        core.Then(core.FinishClose()),
    )


# --- closing -------------------------------------------------------------------------------------


def test_a_close_is_recorded_first_then_every_seat_stands_up_then_table_closed():
    state = table_of(500, 700)
    assert core.decide(state, core.Close("maintenance")).effects == (
        core.BeginClose("maintenance"),
        core.Then(core.FinishClose()),
    )
    closing = core.evolve(state, core.CloseBegun("maintenance"))
    assert core.decide(closing, core.Close("another reason")).effects == (core.Then(core.FinishClose()),)
    assert core.decide(closing, core.FinishClose()).effects == (
        core.StandUp(0),
        core.StandUp(1),
        core.AppendFact(TableClosed("maintenance")),
        core.CloseDone(),
    )


def test_a_close_during_a_hand_waits_for_its_end_and_a_closed_table_does_nothing():
    state = core.evolve(started(table_of(500, 700), 1, 40), core.CloseBegun("x"))
    assert core.decide(state, core.Close("x")) == core.Decision()
    closed = core.evolve(state, fact(state.facts_seq + 1, TableClosed("x")), 50)
    assert core.decide(closed, core.Close("x")) == core.Decision()
    assert core.decide(closed, core.FinishClose()).effects == (core.CloseDone(),)


def test_a_carried_pot_is_returned_by_a_closing_hand_before_the_stand_ups():
    config = TableConfig(game="bacay_ga", stake_gold=10, fee_bps=0, seats_max=4).normalized()
    state = core.initial(TABLE, config, closing_rule=has_closing_rule("bacay_ga"))
    state = core.evolve(state, fact(1, PlayerSeated(0, "p0", 500)), 10)
    state = dataclasses.replace(state, pot_gold=30, closing=True, close_reason="x")
    assert core.decide(state, core.FinishClose()).effects == (core.ClosingHand(),)
    without = dataclasses.replace(state, closing_rule=has_closing_rule("holdem"))  # a game with no pot to carry
    assert core.decide(without, core.FinishClose()).effects == (
        core.StandUp(0),
        core.AppendFact(TableClosed("x")),
        core.CloseDone(),
    )


# --- heartbeats ------------------------------------------------------------------------------------


def test_a_heartbeat_is_noted_and_reconnects_a_player_of_the_hand_in_play():
    state = started(table_of(500, 700), 1, 40)
    assert code_of(core.decide(state, core.Heartbeat("nobody", 5.0))) == "NOT_SEATED"
    assert core.decide(state, core.Heartbeat("p0", 5.0)).effects == (core.Evolve(core.Heard(0, 5.0)),)
    gone = core.evolve(state, core.ConnectionChanged(0, False))
    assert core.decide(gone, core.Heartbeat("p0", 6.0)).effects == (
        core.Evolve(core.Heard(0, 6.0)),
        core.Evolve(core.ConnectionChanged(0, True)),
        core.HandEvent(PlayerReconnected(0), advance=True, ignore_refusal=True),
    )


def test_missed_heartbeats_disconnect_only_players_who_sent_one():
    state = started(table_of(500, 700), 1, 40)
    state = core.evolve(state, core.Heard(0, 10.0))  # p1 never sent one
    assert core.decide(state, core.CheckHeartbeats(20.0, 15.0)) == core.Decision()
    decision = core.decide(state, core.CheckHeartbeats(30.0, 15.0))
    assert decision.effects == (core.Then(core.Disconnect(0)),)
    assert core.decide(state, core.Disconnect(0)).effects == (
        core.Evolve(core.ConnectionChanged(0, False)),
        core.HandEvent(PlayerDisconnected(0), advance=True, ignore_refusal=True),
    )


def test_a_heartbeat_changes_the_heard_times_only_and_a_seat_taken_again_starts_with_none():
    state = table_of(500, 700)
    beat = core.evolve(state, core.Heard(1, 7.0))
    assert beat.seats is state.seats and beat.heard == {1: 7.0}
    assert core.evolve(state, core.Heard(3, 7.0)) == state  # nobody at seat 3
    gone = core.evolve(beat, fact(beat.facts_seq + 1, PlayerStoodUp(1, "p1", 700)), 50)
    again = seated(gone, 1, "p9", 300, 51)
    assert again.heard == {} and core.decide(again, core.CheckHeartbeats(100.0, 15.0)) == core.Decision()


# --- acts -----------------------------------------------------------------------------------------


def test_an_act_names_the_hand_in_play_and_the_callers_own_seat():
    from socai.events.model import ActionKind, BetAction

    state = table_of(500, 700)
    assert core.hand_refusal(state, f"{TABLE}-h1").code == "NO_HAND_IN_PLAY"
    state = started(state, 1, 40)
    assert core.hand_refusal(state, f"{TABLE}-h0").code == "STALE_HAND"
    assert core.hand_refusal(state, f"{TABLE}-h1") is None
    fold = BetAction(0, ActionKind.FOLD, 0)  # seat 0: "mine"
    assert core.acting(state, "p1", 0, fold) == (state.seats[1], BetAction(1, ActionKind.FOLD, 0))
    assert core.acting(state, "p1", 1, BetAction(1, ActionKind.FOLD, 0)) == (
        state.seats[1],
        BetAction(1, ActionKind.FOLD, 0),
    )
    refused = core.acting(state, "p1", 0, BetAction(2, ActionKind.FOLD, 0))
    assert isinstance(refused, errors.SocaiError) and refused.code == "SEAT_MISMATCH"
    for player, seat in (("p1", 3), ("stranger", 0)):
        refused = core.acting(state, player, seat, fold)
        assert isinstance(refused, errors.SocaiError) and refused.code == "NOT_YOUR_SEAT"


# --- rebuild: a fold of evolve -----------------------------------------------------------------------


def test_a_rebuild_leaves_alone_a_player_seated_where_someone_left_the_last_hand():
    """Found by the rebuild property below: p0 leaves hand 1 now (PlayerLeft) and stands up
    at its end; p1 sits down in seat 0. Read back, hand 1's PlayerLeft(0) must not mark p1
    leaving (the rebuild would stand p1 up at once, as the table's rebuild before the core
    did: it marked whoever held the seat)."""
    state = started(table_of(500, 700), 1, 40)
    state = core.evolve(state, hand_event(f"{TABLE}-h1", 2, PlayerLeft(0)), 41)
    state = core.evolve(state, hand_event(f"{TABLE}-h1", 3, HandEnded(SEED_HEX)), 42)
    state = core.evolve(state, core.HandSettled(f"{TABLE}-h1", {0: -10, 1: 10}, 0))
    state = core.evolve(state, fact(state.facts_seq + 1, PlayerStoodUp(0, "p0", 490)), 43)
    state = seated(state, 0, "p1", 300, 44)
    facts = [(fact(1, PlayerSeated(0, "p0", 500)), 10), (fact(2, PlayerSeated(1, "p1x", 700)), 11)]
    infos = (SeatInfo(0, "p0", 500), SeatInfo(1, "p1x", 700))
    hand = f"{TABLE}-h1"
    read_back = core.fold(
        core.initial(TABLE, holdem()),
        [
            *facts,
            (fact(3, PlayerStoodUp(0, "p0", 490)), 43),
            (fact(4, PlayerSeated(0, "p1", 300, "", "tx-p1")), 44),
            (hand_event(hand, 1, HandStarted(TABLE, hand, "holdem", 1, 10, 0, 4, infos, 0, "c")), 40),
            (hand_event(hand, 2, PlayerLeft(0)), 41),
            (hand_event(hand, 3, HandEnded(SEED_HEX)), 42),
        ],
    )
    assert not read_back.seats[0].leaving and read_back.seats[0].player_id == "p1"
    assert core.decide(core.evolve(read_back, core.HandSettled(hand, {0: -10, 1: 10}, 0)), core.StandUpDue()) == (
        core.Decision()
    )
    assert not state.seats[0].leaving


def test_a_rebuild_folds_the_facts_and_the_last_hand_into_the_state_play_made():
    live = table_of(500, 700)
    live = started(live, 1, 40)
    live = core.evolve(live, hand_event(f"{TABLE}-h1", 2, PlayerLeft(1)), 41)
    infos = tuple(SeatInfo(s, f"p{s}", stack) for s, stack in ((0, 500), (1, 700)))
    log: list[tuple[Event | core.Note, int]] = [
        (fact(1, PlayerSeated(0, "p0", 500, "", "tx-p0")), 10),
        (fact(2, PlayerSeated(1, "p1", 700, "", "tx-p1")), 11),
        (hand_event(f"{TABLE}-h1", 1, HandStarted(TABLE, f"{TABLE}-h1", "holdem", 1, 10, 0, 4, infos, 0, "c")), 40),
        (hand_event(f"{TABLE}-h1", 2, PlayerLeft(1)), 41),
    ]
    assert core.fold(core.initial(TABLE, holdem()), log) == live
    assert live.seats[1].leaving and live.hands_played == 1 and live.facts_seq == 2


# --- properties over random command sequences -------------------------------------------------------

PLAYERS = [f"p{i}" for i in range(6)]


@dataclass
class World:
    """The table's dependencies as dictionaries, and a ``perform`` as the shell's."""

    state: core.TableState
    wallets: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PLAYERS, 5_000))
    escrows: dict[str, int] = field(default_factory=dict)
    joins: dict[str, core.JoinRow] = field(default_factory=dict)
    transfers: dict[str, str] = field(default_factory=dict)  # idempotency key -> tx
    cashouts: dict[str, int] = field(default_factory=dict)  # player -> pending amount
    stream_seq: int = 0
    gold_in: int = 0
    gold_out: int = 0
    appended: list[Any] = field(default_factory=list)
    log: list[tuple[Event | core.Note, int]] = field(default_factory=list)  # (event, stream seq)
    nets: dict[str, dict[int, int]] = field(default_factory=dict)  # hand id -> its settlement's nets
    closing_seen: bool = False

    def run(self, command: core.Command) -> Any:
        decision = core.decide(self.state, command)
        while decision.needs:
            command = self.read(command, decision.needs)
            decision = core.decide(self.state, command)
        tx = ""
        for effect in decision.effects:
            tx = self.perform(effect, tx)
        if decision.refusal is not None:
            raise decision.refusal
        return decision.answer

    def read(self, command: core.Command, needs: str) -> core.Command:
        if isinstance(command, core.Join):
            if needs == core.NEEDS_JOIN_ROW:
                row = self.joins.setdefault(command.key, pending_row(command.player_id, command.buy_in_gold))
                return dataclasses.replace(command, row=row)
            if needs == core.NEEDS_BUY_IN_TX:
                tx = self.transfers.get(buy_in_key(command.key, TABLE))
                return dataclasses.replace(command, buy_in_tx=tx, buy_in_tx_read=True)
        assert isinstance(command, core.Join | core.Leave)
        return dataclasses.replace(command, cashout_pending=command.player_id in self.cashouts)

    def append(self, hand_id: str, seq: int, body: Any) -> None:
        if self.state.closing and not self.closing_seen:
            self.closing_seen = True
        self.stream_seq += 1
        self.appended.append(body)
        event = Event(TABLE, hand_id, seq, "holdem", AT, body)
        self.log.append((event, self.stream_seq))
        self.state = core.evolve(self.state, event, self.stream_seq)

    def perform(self, effect: core.Effect, tx: str) -> str:
        s = self.state
        if isinstance(effect, core.Transfer):
            player = effect.debit_account.removeprefix("player:")
            if self.wallets[player] < effect.amount_gold:
                if effect.refused is not None:
                    self.joins[effect.refused.key] = dataclasses.replace(
                        self.joins[effect.refused.key], status="failed"
                    )
                raise errors.InsufficientFunds("INSUFFICIENT_FUNDS", "short")
            self.wallets[player] -= effect.amount_gold
            self.escrows[player] = self.escrows.get(player, 0) + effect.amount_gold
            self.gold_in += effect.amount_gold
            tx = self.transfers[effect.idempotency_key] = f"tx{len(self.transfers)}"
        elif isinstance(effect, core.FinishJoin):
            row = self.joins[effect.key]
            self.joins[effect.key] = dataclasses.replace(
                row, status=effect.status, ledger_transaction_id=tx if effect.tx == core.TRANSFER_TX else effect.tx
            )
        elif isinstance(effect, core.AppendFact):
            body = effect.body
            if isinstance(body, PlayerSeated) and body.ledger_transaction_id == core.TRANSFER_TX:
                body = dataclasses.replace(body, ledger_transaction_id=tx)
            self.append(facts_id_of(TABLE), s.facts_seq + 1, body)
        elif isinstance(effect, core.HandEvent):
            hand = s.in_play
            assert hand is not None and isinstance(effect.body, PlayerLeft | PlayerDisconnected | PlayerReconnected)
            self.append(hand.hand_id, 2, effect.body)
        elif isinstance(effect, core.Evolve):
            self.state = core.evolve(s, effect.note)
        elif isinstance(effect, core.MarkLeaving):
            seat = s.seats[effect.seat]
            self.cashouts.setdefault(seat.player_id, seat.stack_gold)
            self.state = core.evolve(s, core.LeavingMarked(effect.seat))
        elif isinstance(effect, core.StandUp):
            seat = s.seats[effect.seat]
            self.cashouts[seat.player_id] = seat.stack_gold  # the row first, then the fact
            self.append(facts_id_of(TABLE), s.facts_seq + 1, PlayerStoodUp(seat.seat, seat.player_id, seat.stack_gold))
        elif isinstance(effect, core.BeginClose):
            self.state = core.evolve(s, core.CloseBegun(s.close_reason or effect.reason))
        elif isinstance(effect, core.PlayHand):
            infos = tuple(SeatInfo(n, s.seats[n].player_id, s.seats[n].stack_gold) for n in effect.seats)
            body = HandStarted(TABLE, effect.hand_id, "holdem", effect.number, 10, 0, s.config.seats_max, infos, 0, "c")
            self.append(effect.hand_id, 1, body)
        elif isinstance(effect, core.Then):
            self.run(effect.command)
        else:  # ClosingHand (no pot in Hold'em), CloseDone, ScheduleAutostart: nothing to count
            assert isinstance(effect, core.CloseDone | core.ScheduleAutostart), effect
        return tx

    def end_hand(self, winner_index: int, losses: list[int]) -> None:
        """The hand in play ends: each other player loses up to what it brought, the
        winner takes it all (a zero-sum settlement, as every hand's without a fee)."""
        hand = self.state.in_play
        assert hand is not None
        players = [info.seat for info in hand.players]
        winner = players[winner_index % len(players)]
        nets: dict[int, int] = {}
        for i, seat in enumerate(players):
            if seat != winner:
                nets[seat] = -min(hand.brought(seat), losses[i % len(losses)])
        nets[winner] = -sum(nets.values())
        self.append(hand.hand_id, 3, HandEnded(SEED_HEX))
        self.nets[hand.hand_id] = nets
        for seat, net in nets.items():  # the settlement moves the escrows
            player = next(info.player_id for info in hand.players if info.seat == seat)
            self.escrows[player] += net
        self.state = core.evolve(self.state, core.HandSettled(hand.hand_id, nets, 0))
        self.run(core.AfterHand())

    def pay_cash_outs(self) -> None:
        """The cash-out worker: a stood-up player's escrow goes back to the wallet."""
        for player, amount in list(self.cashouts.items()):
            if self.state.seat_of(player) is None:
                assert self.escrows[player] == amount, (player, self.escrows[player], amount)
                self.escrows[player] -= amount
                self.wallets[player] += amount
                self.gold_out += amount
                del self.cashouts[player]


join_commands = st.tuples(st.just("join"), st.sampled_from(PLAYERS), st.integers(90, 1_010), st.integers(-1, 3))
commands = st.one_of(
    # Joins and hands are drawn more often than the rest, so that most sequences play hands
    # before anybody closes the table; a close is one draw in ten of its kind.
    join_commands,
    join_commands,
    st.tuples(st.just("leave"), st.sampled_from(PLAYERS), st.sampled_from([LEAVE_NOW, LEAVE_AFTER_HAND])),
    st.tuples(st.just("start")),
    st.tuples(st.just("start")),
    st.tuples(st.just("end"), st.integers(0, 5), st.lists(st.integers(0, 1_200), min_size=1, max_size=4)),
    st.tuples(st.just("end"), st.integers(0, 5), st.lists(st.integers(0, 1_200), min_size=1, max_size=4)),
    st.tuples(st.just("heartbeat"), st.sampled_from(PLAYERS), st.floats(0, 100)),
    st.tuples(st.just("check"), st.floats(0, 200)),
    st.tuples(st.just("close"), st.integers(0, 9)),
    st.tuples(st.just("cash_outs")),
)


def step(world: World, command: tuple[Any, ...]) -> None:
    kind = command[0]
    try:
        if kind == "join":
            world.run(core.Join(command[1], command[2], command[3], f"key-{command[1]}-{world.stream_seq}"))
        elif kind == "leave":
            world.run(core.Leave(command[1], command[2]))
        elif kind == "start":
            world.run(core.StartHand())
        elif kind == "end" and world.state.in_play is not None:
            world.end_hand(command[1], command[2])
        elif kind == "heartbeat":
            world.run(core.Heartbeat(command[1], command[2]))
        elif kind == "check":
            world.run(core.CheckHeartbeats(command[1], 15.0))
        elif kind == "close" and command[1] == 0:
            world.run(core.Close("the property test"))
        elif kind == "cash_outs":
            world.pay_cash_outs()
    except errors.SocaiError:
        pass  # a refusal: checked below like every other step


def check(world: World, before: core.TableState) -> None:
    state = world.state
    players = [s.player_id for s in state.seats.values()]
    assert len(players) == len(set(players)), f"a player holds two seats: {players}"
    assert all(number == s.seat and 0 <= number < state.config.seats_max for number, s in state.seats.items())
    at_table = sum(s.stack_gold for s in state.seats.values())
    pending = sum(world.cashouts.get(p, 0) for p in world.cashouts if state.seat_of(p) is None)
    assert world.gold_in == at_table + pending + world.gold_out, "gold bought in != at the table + cashed out"
    assert sum(world.escrows.values()) == at_table + pending
    if before.closing:
        new = [s for n, s in state.seats.items() if before.seats.get(n) != s and n not in before.seats]
        assert not new, f"a closing table seated {new}"
        assert state.hands_played == before.hands_played, "a closing table started a hand"
        assert state.closing


def rebuilt(world: World) -> core.TableState:
    """The table as ``Table._rebuild_from_log`` reads it back from ``world``: a close begun
    (the store's row), the facts, the seated players with a pending cash-out marked leaving,
    the last hand's events, and that hand's settlement when it has ended."""
    state = core.initial(TABLE, world.state.config)
    if world.state.closing:
        state = core.evolve(state, core.CloseBegun(world.state.close_reason))
    state = core.fold(
        state, [(e, seq) for e, seq in world.log if isinstance(e, Event) and e.hand_id == facts_id_of(TABLE)]
    )
    for seat in list(state.seats.values()):
        if seat.player_id in world.cashouts:
            state = core.evolve(state, core.LeavingMarked(seat.seat))
    hands = [e.hand_id for e, _ in world.log if isinstance(e, Event) and isinstance(e.body, HandStarted)]
    if hands:
        last = hands[-1]
        state = core.fold(state, [(e, seq) for e, seq in world.log if isinstance(e, Event) and e.hand_id == last])
        if state.hand is not None and state.hand.ended:
            state = core.evolve(state, core.HandSettled(last, world.nets[last], 0))
    return state


def present(state: core.TableState) -> core.TableState:
    """``state`` without what only the running table knows (heartbeats, connections)."""
    seats = {n: dataclasses.replace(s, connected=True) for n, s in state.seats.items()}
    return dataclasses.replace(state, seats=MappingProxyType(seats), heard=MappingProxyType({}))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(commands, min_size=25, max_size=80))
def test_a_rebuild_from_the_log_after_random_commands_is_the_state_play_left(sequence: list[tuple[Any, ...]]):
    """Rebuild is a fold of evolve: between any two commands, the state read back from the
    log (and the store's rows) is the state the commands left, heartbeats aside."""
    world = World(core.initial(TABLE, holdem(auto_start_players=0)))
    for command in sequence:
        step(world, command)
        assert present(rebuilt(world)) == present(world.state), command


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(commands, min_size=25, max_size=80))
def test_random_commands_hold_no_seat_twice_conserve_the_gold_and_a_closing_table_takes_nothing_new(
    sequence: list[tuple[Any, ...]],
):
    world = World(core.initial(TABLE, holdem(auto_start_players=0)))
    for command in sequence:
        before = world.state
        step(world, command)
        check(world, before)
    # However the sequence ended: play the hand out, close, pay every cash-out; every
    # grain of gold bought in is back in a wallet.
    if world.state.in_play is not None:
        world.end_hand(0, [10])
    world.run(core.Close("the end"))
    world.pay_cash_outs()
    assert world.state.closed and not world.state.seats
    assert world.gold_in == world.gold_out
    assert sum(world.wallets.values()) == 5_000 * len(PLAYERS)
