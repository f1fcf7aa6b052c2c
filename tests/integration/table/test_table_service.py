"""The table service on real NATS, PostgreSQL and gRPC, with the real ledger behind it."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from socai import accounts
from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.grpc_errors import error_reason
from tests.integration.table.conftest import World, seat_players
from tests.support.clients import bet, body_names, wager

pytestmark = pytest.mark.integration


async def test_a_scripted_holdem_hand_produces_the_expected_events_and_state(world: World):
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    # Heads-up (HE-4): the owner is the dealer and small blind (10), the other the big blind (20).
    assert (await w.backend.state(table_id)).to_act == [0]
    await w.backend.act(table_id, a, 0, bet(0, "call", 10))
    await w.backend.act(table_id, b, 1, bet(1, "check"))
    for _street in ("flop", "turn", "river"):
        await w.backend.act(table_id, b, 1, bet(1, "check"))  # the big blind acts first after the flop
        await w.backend.act(table_id, a, 0, bet(0, "check"))
    final = await w.backend.state(table_id)
    expected = [
        "hand_started",
        "cards_dealt",
        "bet_action",
        "bet_action",
        "cards_dealt",
        "bet_action",
        "bet_action",
        "cards_dealt",
        "bet_action",
        "bet_action",
        "cards_dealt",
        "bet_action",
        "bet_action",
        "hand_ended",
    ]
    assert body_names(final) == expected
    assert [e.seq for e in final.events] == list(range(1, 15))
    assert await w.stored(table_id, hand_id) == ["".join(part.title() for part in name.split("_")) for name in expected]
    stacks = {s.seat: s.stack_gold for s in final.table.seats}
    assert sum(stacks.values()) == 2000  # fee 0: the pot moved between the two
    assert sorted(stacks.values()) in ([980, 1020], [1000, 1000])
    assert final.table.status == pb.TABLE_STATUS_WAITING
    assert final.table.hands_played == 1


async def test_a_scripted_taixiu_round_settles_on_its_dice(world: World):
    w = world
    table_id, (a, b) = await seat_players(
        w, "taixiu", [1000, 1000], stake_gold=10, seats_max=2, options={"mode": "system", "betting_window_s": "1"}
    )
    await w.backend.cashier.Transfer(
        lpb.TransferRequest(
            idempotency_key="bank-1",
            from_account_id=accounts.EXTERNAL_CASHIER,
            to_account_id=accounts.HOUSE_BANK,
            amount_gold=1_000_000,
            kind="bankroll",
        )
    )
    await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
    await w.backend.act(table_id, a, 0, wager(0, "tai", 100))
    await w.backend.act(table_id, b, 1, wager(1, "xiu", 50))
    for _ in range(50):  # the 1-second betting window closes by itself
        final = await w.backend.state(table_id)
        if final.table.status == pb.TABLE_STATUS_WAITING:
            break
        await asyncio.sleep(0.1)
    names = body_names(final)
    assert names[:3] == ["hand_started", "wager_placed", "wager_placed"]
    assert names[-2:] == ["dice_rolled", "hand_ended"]
    assert set(names[3:-2]) == {"timer_expired"}
    dice = list(final.events[-2].dice_rolled.dice)
    total, triple = sum(dice), len(set(dice)) == 1
    tai_wins = 11 <= total <= 17 and not triple
    xiu_wins = 4 <= total <= 10 and not triple
    stacks = {s.seat: s.stack_gold for s in final.table.seats}
    assert stacks[0] == 1000 + (95 if tai_wins else -100)  # 5 % fee on a net win (TX-4)
    assert stacks[1] == 1000 + (48 if xiu_wins else -50)  # floor(5 % of 50) = 2


async def test_a_passive_xito_hand_deals_five_cards_each_and_keeps_the_gold(world: World):
    w = world
    table_id, players = await seat_players(
        w, "xito", [2000, 2000], stake_gold=100, seats_max=2, options={"auto_follow_2": "true"}
    )
    await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
    for _ in range(40):
        state = await w.backend.state(table_id)
        if state.table.status != pb.TABLE_STATUS_PLAYING:
            break
        seat = state.to_act[0]
        mine = await w.backend.state(table_id, players[seat])
        kinds = {a.kind: a for a in mine.legal_actions}
        action = bet(seat, "check") if "check" in kinds else bet(seat, "call", kinds["call"].min_gold)
        await w.backend.act(table_id, players[seat], seat, action)
    final = await w.backend.state(table_id)
    dealt = [c for e in final.events if e.WhichOneof("body") == "cards_dealt" for c in e.cards_dealt.cards]
    assert sorted(c.seat for c in dealt) == [0] * 5 + [1] * 5
    assert sum(1 for c in dealt if not c.face_up) == 2  # one hole card each (XT-3)
    assert body_names(final)[-1] == "hand_ended"
    assert sum(s.stack_gold for s in final.table.seats) == 4000


async def test_illegal_out_of_turn_and_foreign_seat_actions_are_rejected_and_write_nothing(world: World):
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    before = await w.stored(table_id, hand_id)
    cases = [
        (b, 1, bet(1, "check"), grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN"),
        (a, 0, bet(0, "raise", 1), grpc.StatusCode.FAILED_PRECONDITION, "RAISE_TOO_SMALL"),
        (a, 0, bet(0, "call", 999_999), grpc.StatusCode.FAILED_PRECONDITION, None),
        (a, 1, bet(1, "call", 10), grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_SEAT"),
        # Seat 0, in the request and in the action, means the caller's own seat.
        (b, 0, bet(0, "call", 10), grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN"),
        (a, 0, bet(1, "call", 10), grpc.StatusCode.INVALID_ARGUMENT, "SEAT_MISMATCH"),
        (a, 0, pb.PlayerAction(), grpc.StatusCode.INVALID_ARGUMENT, "BAD_ACTION"),
    ]
    for player, seat, action, code, reason in cases:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await w.backend.act(table_id, player, seat, action)
        assert caught.value.code() == code, (action, caught.value.details())
        if reason:
            assert error_reason(caught.value) == reason
    with pytest.raises(grpc.aio.AioRpcError) as stale:
        await w.backend.act(table_id, a, 0, bet(0, "call", 10), hand_id="someone-else-h9")
    assert error_reason(stale.value) == "STALE_HAND"
    with pytest.raises(grpc.aio.AioRpcError) as unauthenticated:
        await w.backend.table.Act(
            pb.ActRequest(table_id=table_id, hand_id=hand_id, seat=0, action=bet(0, "call", 10), idempotency_key="k")
        )
    assert unauthenticated.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert await w.stored(table_id, hand_id) == before


async def test_hidden_cards_never_reach_another_viewer(world: World):
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    watch_b = w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id, player_token=await w.backend.token(b)))
    watch_spectator = w.backend.table.WatchTable(pb.WatchTableRequest(table_id=table_id))
    await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))

    async def first_deal(stream: object) -> epb.CardsDealt:
        async for message in stream:  # type: ignore[attr-defined]
            if message.event.WhichOneof("body") == "cards_dealt":
                return message.event.cards_dealt
        raise AssertionError("no deal")

    seen_by_b = await asyncio.wait_for(first_deal(watch_b), 10)
    seen_by_spectator = await asyncio.wait_for(first_deal(watch_spectator), 10)
    watch_b.cancel()
    watch_spectator.cancel()
    assert {c.seat for c in seen_by_b.cards if c.card} == {1}
    assert all(c.card == "" for c in seen_by_spectator.cards)
    for viewer, seat in ((a, 0), (b, 1), (None, -1)):
        state = await w.backend.state(table_id, viewer)
        visible = {c.seat for e in state.events for c in e.cards_dealt.cards if c.card}
        assert visible <= {seat}, (viewer, visible)


async def test_concurrent_acts_stay_in_order_and_a_retried_key_is_applied_once(world: World):
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    first = await w.backend.act(table_id, a, 0, bet(0, "call", 10), key="same-key")
    again = await w.backend.act(table_id, a, 0, bet(0, "call", 10), key="same-key")
    assert (again.seq, again.event_id) == (first.seq, first.event_id)
    with pytest.raises(grpc.aio.AioRpcError) as reused:
        await w.backend.act(table_id, a, 0, bet(0, "fold"), key="same-key")
    assert error_reason(reused.value) == "IDEMPOTENCY_KEY_REUSED"
    # Both players fire at once, many times: exactly one check is accepted, in order.
    results = await asyncio.gather(
        *(w.backend.act(table_id, b, 1, bet(1, "check"), key=f"b-{i}") for i in range(5)),
        *(w.backend.act(table_id, a, 0, bet(0, "check"), key=f"a-{i}") for i in range(5)),
        return_exceptions=True,
    )
    accepted = [r for r in results if not isinstance(r, BaseException)]
    assert len(accepted) >= 1
    stored = await w.log.read_hand(table_id, hand_id)
    assert [s.event.seq for s in stored] == list(range(1, len(stored) + 1))
    calls = [s for s in stored if type(s.event.body).__name__ == "BetAction" and s.event.body.kind == "call"]
    assert len(calls) == 1


async def test_a_buy_in_above_the_wallet_fails_with_insufficient_funds_and_changes_nothing(world: World):
    w = world
    table_id = await w.backend.create("holdem", stake_gold=100, seats_max=6)
    await w.backend.deposit("poor", 500)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await w.backend.join(table_id, "poor", 1000)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "INSUFFICIENT_FUNDS"
    assert await w.backend.balance(accounts.player("poor")) == 500
    assert await w.backend.balance(accounts.escrow(table_id, "poor")) == 0
    table = (await w.backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
    assert list(table.seats) == []


async def test_leaving_cashes_out_after_the_hand_is_settled(world: World):
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
    await w.backend.act(table_id, a, 0, bet(0, "fold"))  # the small blind folds: b wins 10
    # No settlement service runs in this test: the cash-out waits for the hand's settlement.
    reply = await w.backend.leave(table_id, b)
    assert reply.cash_out_gold == 1010
    assert not reply.cashed_out
    assert await w.backend.balance(accounts.player(b)) == 1000


async def test_a_leave_retried_with_its_key_after_the_stand_up_answers_where_the_cash_out_stands(world: World):
    """A retry of a LeaveTable whose answer was lost finds the player stood up: with its key
    it answers STOOD_UP and the cash-out; without one, and for a player who never sat, it
    is NOT_SEATED."""
    w = world
    table_id, (a, b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=3)

    async def leave(player: str, key: str = "") -> pb.LeaveTableResponse:
        request = pb.LeaveTableRequest(
            table_id=table_id, player_token=await w.backend.token(player), idempotency_key=key
        )
        return await w.backend.table.LeaveTable(request)

    first = await leave(a, "k1")
    assert first.outcome == pb.LEAVE_OUTCOME_STOOD_UP and first.cash_out_gold == 1000
    again = await leave(a, "k1")
    assert again.outcome == pb.LEAVE_OUTCOME_STOOD_UP and again.cash_out_gold == 1000
    assert again.cash_out.amount_gold == 1000 and again.cash_out.player_id == a
    assert await w.backend.balance(accounts.player(a)) == 2000  # paid once
    for player, key in ((a, ""), ("never-sat", "k2")):
        await w.backend.deposit(player, 10)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await leave(player, key)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND and error_reason(refused.value) == "NOT_SEATED"
    assert [s.player_id for s in (await w.backend.state(table_id)).table.seats] == [b]


async def test_missed_heartbeats_disconnect_a_player_whose_timer_then_folds_and_reconnect_brings_them_back(
    world: World,
):
    w = world
    table_id, (a, _b) = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2, turn_timeout_s=2)
    token_a = await w.backend.token(a)
    await w.backend.table.Heartbeat(pb.HeartbeatRequest(table_id=table_id, player_token=token_a))
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    # a (the small blind, first to act heads-up) goes silent: after 0.5 s it is disconnected,
    # then its turn timer runs out and the game's rule folds it (HE-10: a check is not free).
    for _ in range(60):
        names = [type(s.event.body).__name__ for s in await w.log.read_hand(table_id, hand_id)]
        if "HandEnded" in names:
            break
        await asyncio.sleep(0.1)
    stored = await w.log.read_hand(table_id, hand_id)
    bodies = [s.event.body for s in stored]
    names = [type(b).__name__ for b in bodies]
    assert "PlayerDisconnected" in names and bodies[names.index("PlayerDisconnected")].seat == 0
    assert names.index("TimerExpired") > names.index("PlayerDisconnected"), names
    assert bodies[names.index("TimerExpired")].seat == 0
    state = await w.backend.state(table_id)
    stacks = {s.seat: s.stack_gold for s in state.table.seats}
    assert stacks == {0: 990, 1: 1010}  # the folded small blind's 10 went to b
    assert not next(s for s in state.table.seats if s.seat == 0).connected
    reply = await w.backend.table.Reconnect(pb.ReconnectRequest(table_id=table_id, player_token=token_a))
    assert next(s for s in reply.state.table.seats if s.seat == 0).connected


async def test_list_tables_refuses_a_page_token_that_is_no_table_id_and_finds_no_table_of_a_game_that_cannot_exist(
    world: World,
):
    """Found by the RPC fuzzer once ListTables read the shared directory: a NUL in ``game``
    or ``page_token`` reached PostgreSQL and came back INTERNAL."""
    table_id = await world.backend.create("holdem", stake_gold=10)
    listed = await world.backend.table.ListTables(pb.ListTablesRequest())
    assert table_id in [t.table_id for t in listed.tables]
    assert list((await world.backend.table.ListTables(pb.ListTablesRequest(game="hold\x00em"))).tables) == []
    assert list((await world.backend.table.ListTables(pb.ListTablesRequest(game="Holdem"))).tables) == []
    for token in ("a\x00b", "not a table id", "x" * 33):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await world.backend.table.ListTables(pb.ListTablesRequest(page_token=token))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_reason(caught.value) == "BAD_PAGE_TOKEN"
