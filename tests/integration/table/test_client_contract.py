"""The table service's contract with a game backend (issue 36), through ``socai.client``.

- the stream and the state never disagree: every ``GetTableState`` answer's view is the view
  its player's stream carried at the same ``log_seq`` (a property over random hands of
  random games, the states asked for again and again while the bots play);
- an Act whose answer was lost is retried with its key and answered with its first result,
  the hand's last move included, after the next hands too, and nothing is played twice;
- ``GetHand`` shows an ended hand with every card and the engine's settlement;
- ``ValidateAction`` says whether a move would be accepted and writes nothing; a refusal
  carries the seat, the hand and the rule;
- ``LeaveTable`` says what it did: after the hand (playing it out, a rebuild remembering it)
  or now (the game's forfeit).
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from datetime import UTC
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from socai.client import LEAVE_AFTER_HAND, LEAVE_NOW, Seat, TableClient, TableError, Update
from socai.client import moves as mv
from socai.client.bots import random_action
from socai.events.model import Arranged, HandStarted, PlayerLeft
from socai.gen.table.v1 import table_pb2 as pb
from socai_table.simulate import options_for
from tests.integration.table.conftest import World

pytestmark = pytest.mark.integration

BUY_IN = 1_000
WAIT_S = 60.0
SLOW_ARRANGING = {"arrange_timeout_s": "120"}  # the players arrange; no window runs out under load


def client_of(w: World) -> TableClient:
    s = w.running.settings
    return TableClient(s.table_addr, s.tokens["backend"], rpc_timeout_s=10, retry_for_s=20)


async def seat_players(
    w: World, tables: TableClient, game: str, players: int, *, auto_start: int | None = None, **config: Any
) -> tuple[str, list[Seat]]:
    # Tài Xỉu between players: the owner banks.
    options = config.pop("options", options_for(game, 1 if game == "taixiu" else 0))
    owner = f"{game}-p0"
    table = await tables.create_table(
        game=game,
        stake_gold=10,
        seats_max=config.pop("seats_max", players),
        auto_start_players=players if auto_start is None else auto_start,
        turn_timeout_s=config.pop("turn_timeout_s", 2),
        between_hands_ms=50,
        owner_player_id=owner,
        options=options,
        buy_in_max_gold=config.pop("buy_in_max_gold", BUY_IN * (5 if game == "taixiu" else 1)),
        **config,
    )
    seats = []
    for i in range(players):
        player = f"{game}-p{i}"
        amount = BUY_IN * (5 if game == "taixiu" and i == 0 else 1)
        await w.backend.deposit(player, amount)
        seats.append(await tables.join(table.table_id, player, amount, seat=i))
    return table.table_id, seats


# --- the stream and the state ------------------------------------------------------------


PROPERTY_GAMES = ("tienlen", "phom", "holdem", "maubinh", "bacay_chuong", "taixiu", "samloc", "xito", "lieng")


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(game=st.sampled_from(PROPERTY_GAMES), seed=st.integers(0, 2**32))
async def test_the_stream_and_the_state_never_disagree(world: World, game: str, seed: int):
    """Bots play a hand of ``game`` from their streams with random legal moves (now and then
    letting a timer run out); every player's state is asked for again and again meanwhile.
    Each state's view equals the last view of the same ``log_seq`` on that player's stream.
    (The bots' choices come from a seed hypothesis draws: they run concurrently, so they
    cannot draw from hypothesis itself in a fixed order.)"""
    w = world
    rng = random.Random(seed)
    async with client_of(w) as tables:
        table_id, seats = await seat_players(w, tables, game, 3 if game != "maubinh" else 2)
        streamed: dict[str, dict[int, pb.TableView]] = defaultdict(dict)
        states: list[tuple[str, pb.TableView]] = []
        ended = asyncio.Event()
        # The states are asked for once every stream is open: a state read before a stream's
        # first message may show a moment (the last join, say) that the stream, opened
        # after the next event, never shows (its first message brings the view then).
        watching = {s.player_id: asyncio.Event() for s in seats}
        offered: list[int] = []  # the moments a stream offered its player a turn

        async def bot(seat: Seat) -> None:
            acted: dict[str, int] = defaultdict(int)
            async for update in seat.updates():
                watching[seat.player_id].set()
                if not update.view.more_follows:
                    streamed[seat.player_id][int(update.view.log_seq)] = update.view
                if update.kind == "hand_ended":
                    ended.set()
                turn = seat.turn_of(update)
                if turn is not None:
                    offered.append(turn.log_seq)
                if turn is None or ended.is_set() or rng.random() < 0.05 or acted[turn.hand_id] >= 12:
                    continue
                if len(turn.view.to_act) > 1:
                    acted[turn.hand_id] += 1  # simultaneous decisions (bets, flips): a few each
                action = random_action(turn, rng)
                if action is None:
                    continue
                # The player's own state on its turn: it shows the moves the stream offered.
                states.append((seat.player_id, (await tables.state(table_id, seat.player_token)).view))
                try:
                    await turn.act(action)
                except TableError as exc:
                    # On a loaded machine the turn's timer (2 s) may run out first: the move
                    # is refused as too late, and the stream goes on with the next moment.
                    if exc.status != grpc.StatusCode.FAILED_PRECONDITION:
                        raise

        async def asker(seat: Seat) -> None:
            await asyncio.gather(*(opened.wait() for opened in watching.values()))
            while not ended.is_set():
                state = await tables.state(table_id, seat.player_token)
                states.append((seat.player_id, state.view))
                await asyncio.sleep(rng.random() * 0.02)

        bots = [asyncio.create_task(bot(s)) for s in seats]
        try:
            await asyncio.wait_for(asyncio.gather(*(asker(s) for s in seats)), WAIT_S)
            last = {p: max(int(v.log_seq) for q, v in states if q == p) for p in {p for p, _ in states}}
            for _ in range(200):  # the streams deliver what the last states had seen
                if all(max(streamed[p], default=0) >= n for p, n in last.items()):
                    break
                await asyncio.sleep(0.02)
        finally:
            for task in bots:
                task.cancel()
            outcomes = await asyncio.gather(*bots, return_exceptions=True)
        for outcome in outcomes:  # a bot that died stopped reading its stream: say why
            if isinstance(outcome, Exception):
                raise outcome
        assert len(states) > len(seats)
        for player, view in states:
            assert int(view.log_seq) in streamed[player], f"{game}: {player} never streamed log_seq {view.log_seq}"
            assert streamed[player][int(view.log_seq)] == view, f"{game}: stream and state differ at {view.log_seq}"
        # Not when the deal ended the hand (Tiến Lên's instant wins, TL-4): no turn to show.
        assert any(v.legal_moves for _, v in states) or not offered, "a state showed some player's legal moves"


# --- idempotent to the end ---------------------------------------------------------------


async def arrange(seat: Seat, key: str | None = None) -> tuple[pb.ActResponse, pb.PlayerAction]:
    """``seat``'s next Mậu Binh turn, arranged as the turn suggests: the answer and the
    action sent."""
    async for turn in seat.turns():
        action = turn.actions("arrange")[0]
        return await turn.act(action, key=key), action
    raise AssertionError(f"{seat} had no turn")


async def test_a_lost_answer_to_a_hands_last_move_is_retried_and_returns_its_first_result(world: World):
    w = world
    async with client_of(w) as tables:
        table_id, (first, last) = await seat_players(w, tables, "maubinh", 2, options=SLOW_ARRANGING)
        real_act = tables.stub.Act
        lost: list[pb.ActResponse] = []

        async def lossy_act(request: pb.ActRequest, **kwargs: Any) -> pb.ActResponse:
            reply: pb.ActResponse = await real_act(request, **kwargs)
            if request.idempotency_key == "the-last-move" and not lost:
                lost.append(reply)  # accepted and played, but the answer never reaches the client
                empty = grpc.aio.Metadata()
                raise grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, empty, empty, details="answer lost")
            return reply

        tables.stub.Act = lossy_act  # type: ignore[method-assign]
        await arrange(first)
        answer, action = await arrange(last, key="the-last-move")  # ends the hand: the comparison, HandEnded
        assert lost and answer.replayed
        assert (answer.seq, answer.event_id, answer.log_seq) == (lost[0].seq, lost[0].event_id, lost[0].log_seq)
        hand_id = answer.event_id.split("/")[0]
        stored = [e.event.body for e in await w.log.read_hand(table_id, hand_id)]
        assert sum(isinstance(b, Arranged) and b.seat == last.seat for b in stored) == 1  # played once

        # The same key for the same hand is answered the same way once the next hand is in
        # play, and two hands later, when the hand is read back from the log.
        for _ in range(3):
            again = await last.act(action, hand_id=hand_id, key="the-last-move")
            assert again.replayed and (again.seq, again.event_id) == (answer.seq, answer.event_id)
            await asyncio.gather(arrange(first), arrange(last))
        assert tables.calls["GetTableState"] == 0

        # Another action under that key is refused; a new key for a hand that is over is
        # STALE_HAND, as before.
        with pytest.raises(TableError) as reused:
            await last.act(
                mv.arrange("2s 3s 4s 5s 6s", "2c 3c 4c 5c 6c", "2d 3d 4d"), hand_id=hand_id, key="the-last-move"
            )
        assert reused.value.reason == "IDEMPOTENCY_KEY_REUSED"
        with pytest.raises(TableError) as stale:
            await last.act(action, hand_id=hand_id, key="a-new-key")
        assert stale.value.reason in ("STALE_HAND", "NO_HAND_IN_PLAY")


async def test_views_built_before_a_player_s_accepted_action_offer_no_turn_again(world: World):
    """Mậu Binh's players arrange at once. Two arrange while the third's arrangement is on
    its way: the third's stream still holds the views of their arrangements, each waiting
    for the third player. Once its own arrangement is accepted, ``turn_of`` offers none of
    them (acting on them is refused: ALREADY_ACTED, or STALE_HAND once the hand is over,
    which was half of the bots' Act calls in the table benchmark); the next hand's deal is
    a turn again."""
    w = world
    async with client_of(w) as tables:
        _, seats = await seat_players(w, tables, "maubinh", 3, options=SLOW_ARRANGING)
        streams = [seat.updates() for seat in seats]

        async def next_turn(i: int) -> Any:
            async for update in streams[i]:
                turn = seats[i].turn_of(update)
                if turn is not None:
                    return turn
            raise AssertionError("the stream ended")

        turns = [await asyncio.wait_for(next_turn(i), WAIT_S) for i in range(3)]
        rng = random.Random(5)
        for turn in turns[:2]:
            await turn.act(random_action(turn, rng))
        third, mine = seats[2], await turns[2].act(random_action(turns[2], rng))
        assert third.acted_log_seq == mine.log_seq

        waiting_for_it = 0  # views the stream carried after the deal that still wait for it
        async for update in streams[2]:
            view = update.view
            if view.log_seq >= mine.log_seq:
                break
            if not view.more_follows and view.viewer_seat in view.to_act and view.legal_moves:
                waiting_for_it += 1
                assert third.turn_of(update) is None
        assert waiting_for_it == 2
        following = await asyncio.wait_for(next_turn(2), WAIT_S)  # the next hand's deal
        assert following.hand_id != turns[2].hand_id and following.log_seq > mine.log_seq
        for stream in streams:
            await stream.aclose()


# --- a hand that is over ------------------------------------------------------------------


async def test_get_hand_shows_an_ended_hand_with_every_card_and_its_settlement(world: World):
    w = world
    async with client_of(w) as tables:
        table_id, seats = await seat_players(w, tables, "maubinh", 2, options=SLOW_ARRANGING)
        await asyncio.gather(*(arrange(s) for s in seats))
        hand_id = f"{table_id}-h1"
        spectator = await tables.hand(table_id, hand_id)
        assert spectator.ended and spectator.hand_id == hand_id
        kinds = [e.WhichOneof("body") for e in spectator.events]
        assert kinds[0] == "hand_started" and kinds[-1] == "hand_ended"
        dealt = [c for e in spectator.events if e.HasField("cards_dealt") for c in e.cards_dealt.cards]
        assert len(dealt) == 26 and all(c.card for c in dealt)  # every card, for everyone, once it is over
        arranged = [e.arranged for e in spectator.events if e.HasField("arranged")]
        assert len(arranged) == 2 and all(len(a.back) == 5 and len(a.front) == 3 for a in arranged)
        settlement = spectator.settlement
        assert settlement.hand_id == hand_id and settlement.game == "maubinh"
        nets = {r.seat: r.net_gold for r in settlement.seats}
        table = await tables.table(table_id)
        # Hand 2 may have started already: its HandStarted has the stacks hand 1 left.
        stacks = {s.seat: s.stack_gold for s in table.seats}
        started = await w.log.read_hand(table_id, f"{table_id}-h2")
        if started and isinstance(started[0].event.body, HandStarted):
            stacks = {i.seat: i.stack_gold for i in started[0].event.body.seats}
        assert {s: BUY_IN + nets[s] for s in nets} == stacks
        assert sum(nets.values()) + settlement.fees_gold == 0
        with pytest.raises(TableError) as missing:
            await tables.hand(table_id, f"{table_id}-h99")
        assert missing.value.reason == "HAND_NOT_FOUND"


# --- validation and refusals --------------------------------------------------------------


async def test_validate_action_answers_without_playing_and_refusals_name_seat_hand_and_rule(world: World):
    w = world
    async with client_of(w) as tables:
        table_id, seats = await seat_players(w, tables, "tienlen", 2, turn_timeout_s=120)
        turns = {s.player_id: s.turns() for s in seats}
        first = await asyncio.wait_for(_first_turn_of(seats, turns), WAIT_S)
        seat, turn = first
        before = len(await w.log.read_hand(table_id, turn.hand_id))
        legal = turn.actions("play")[0]
        assert (await turn.validate(legal)).accepted
        foreign = next(c for c in _deck() if c not in turn.cards)
        refused = await turn.validate(mv.play(foreign))
        assert not refused.accepted and refused.reason == "NOT_HOLDING" and refused.rule == "9.1"
        other = next(s for s in seats if s is not seat)
        out_of_turn = await other.validate(mv.play(foreign), hand_id=turn.hand_id)
        assert not out_of_turn.accepted and out_of_turn.reason in ("NOT_YOUR_TURN", "NOT_HOLDING")
        bad = await turn.validate(mv.play("1x"))
        assert not bad.accepted and bad.reason == "BAD_CARD"
        assert len(await w.log.read_hand(table_id, turn.hand_id)) == before  # nothing written
        with pytest.raises(TableError) as caught:
            await turn.act(mv.play(foreign))
        error = caught.value
        assert error.status == grpc.StatusCode.FAILED_PRECONDITION and error.reason == "NOT_HOLDING"
        assert error.metadata["seat"] == str(seat.seat) and error.metadata["hand_id"] == turn.hand_id
        assert error.rule == "9.1"


def _deck() -> list[str]:
    return [r + s for r in "23456789TJQKA" for s in "scdh"]


async def _first_turn_of(seats: list[Seat], turns: dict[str, Any]) -> tuple[Seat, Any]:
    """The seat whose turn comes first, and that turn."""
    waits = {asyncio.ensure_future(turns[s.player_id].__anext__()): s for s in seats}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    task = done.pop()
    return waits[task], task.result()


# --- leaving ------------------------------------------------------------------------------


async def test_leaving_after_the_hand_plays_it_out_and_leaving_now_forfeits_it(world: World):
    w = world
    async with client_of(w) as tables:
        # A turn timer longer than the test: the hand moves only when its players act.
        # Hands started by hand, so that all four are dealt into the first.
        table_id, seats = await seat_players(w, tables, "tienlen", 4, auto_start=0, turn_timeout_s=120)
        stayer, after, now, other = seats

        async def stacks() -> dict[str, int]:
            return {s.player_id: s.stack_gold for s in (await tables.table(table_id)).seats if s.player_id}

        brought = await stacks()
        hand_id = await tables.start_hand(table_id)
        while (await tables.hand(table_id, hand_id)).ended:  # an instant win (TL-4) ends a hand at its deal
            brought = await stacks()
            hand_id = await tables.start_hand(table_id)

        leaving = await after.leave(LEAVE_AFTER_HAND)
        assert leaving.response.outcome == pb.LEAVE_OUTCOME_AFTER_HAND
        assert leaving.response.hand_id == hand_id and leaving.response.cash_out_gold == 0
        assert leaving.response.forfeit.at_most_gold == brought[after.player_id]
        assert leaving.response.cash_out.status == pb.CASH_OUT_STATUS_WAITING_FOR_HAND
        # A rebuild (a restart) remembers it: the player plays no further hand.
        table = w.running.apps["table"].manager.tables[table_id]
        await table.rebuild()
        assert table.seat_of(after.player_id).leaving

        forfeited = await now.leave(LEAVE_NOW)
        assert forfeited.response.outcome == pb.LEAVE_OUTCOME_FORFEITED and forfeited.response.hand_id == hand_id
        assert forfeited.response.forfeit.rule.startswith("9.5, TL-11")
        assert forfeited.response.forfeit.at_most_gold == brought[now.player_id]
        assert (await now.leave(LEAVE_AFTER_HAND)).response.outcome == pb.LEAVE_OUTCOME_FORFEITED  # asked again
        stored = [e.event.body for e in await w.log.read_hand(table_id, hand_id)]
        assert PlayerLeft(now.seat) in stored and PlayerLeft(after.seat) not in stored

        async def play_out(seat: Seat) -> list[Update]:
            seen = []
            async for update in seat.updates():
                seen.append(update)
                if seat.stood_up(update):
                    return seen
                turn = seat.turn_of(update)
                if turn is not None and turn.hand_id == hand_id:
                    await turn.act(turn.actions("pass")[0] if turn.move("pass") else turn.actions()[0])
            return seen

        async def play_hand(seat: Seat) -> None:
            async for update in seat.updates():
                if update.kind == "hand_ended" and update.event is not None and update.event.hand_id == hand_id:
                    return
                turn = seat.turn_of(update)
                if turn is not None and turn.hand_id == hand_id:
                    await turn.act(turn.actions()[0])

        played = await asyncio.wait_for(asyncio.gather(play_out(after), play_hand(stayer), play_hand(other)), WAIT_S)
        after_saw = played[0]
        assert any(u.kind == "hand_ended" for u in after_saw)  # it played the hand out
        assert after.stood_up(after_saw[-1])
        waiting = await after.cash_out()
        assert waiting.status == pb.CASH_OUT_STATUS_WAITING_FOR_SETTLEMENT  # no settlement service here
        assert waiting.after_hand_id == hand_id and waiting.amount_gold >= 0
        second = await tables.start_hand(table_id)
        started = (await w.log.read_hand(table_id, second))[0].event.body
        assert isinstance(started, HandStarted)
        assert {i.player_id for i in started.seats} == {stayer.player_id, other.player_id}


async def test_a_player_seated_after_the_deal_sees_the_hand_without_a_part_in_it(world: World):
    """A seat taken while a hand is in play was not dealt into it: its views show no cards
    and nothing to answer (and never fail on a seat the hand does not know)."""
    w = world
    async with client_of(w) as tables:
        table_id, seats = await seat_players(w, tables, "phom", 2, seats_max=3, turn_timeout_s=120)
        for _ in range(100):
            if (await tables.table(table_id)).hand_id:
                break
            await asyncio.sleep(0.05)
        await w.backend.deposit("late", BUY_IN)
        late = await tables.join(table_id, "late", BUY_IN, seat=2)
        first = await now_of(late)
        assert first.view.viewer_seat == 2 and first.view.hand_id == f"{table_id}-h1"
        assert list(first.view.cards) == [] and first.view.facing.kind == "" and not first.view.legal_moves
        dealt = await now_of(seats[0])
        assert len(dealt.view.cards) >= 9  # the dealt seats see their own cards
        state = await tables.state(table_id, late.player_token)
        assert state.view == first.view


async def now_of(seat: Seat) -> Update:
    """The first message of a new stream of ``seat`` that carries its whole view (the last
    of the hand replayed so far)."""
    async for update in seat.updates():
        if not update.view.more_follows:
            return update
    raise AssertionError("the stream ended")


# --- guilds --------------------------------------------------------------------------------


async def test_a_guild_member_s_seat_carries_the_guild_into_the_hand_and_a_bad_guild_id_writes_nothing(world: World):
    """JoinTable's guild_id is the seat's (SeatState) and every hand's (SeatInfo of
    HandStarted): what Tài Xỉu's guild share (TX-6) is paid by. A malformed id is refused
    before anything moves."""
    w = world
    async with client_of(w) as tables:
        table = await tables.create_table(
            game="taixiu",
            stake_gold=10,
            seats_max=3,
            turn_timeout_s=30,
            owner_player_id="gm-banker",
            options=options_for("taixiu", 1),
            buy_in_max_gold=5 * BUY_IN,
        )
        await w.backend.deposit("gm-banker", 5 * BUY_IN)
        await w.backend.deposit("gm-member", BUY_IN)
        with pytest.raises(TableError) as bad:
            await tables.join(table.table_id, "gm-member", BUY_IN, guild_id="no spaces allowed")
        assert (bad.value.status, bad.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_ACCOUNT_ID")
        assert await w.backend.balance("player:gm-member") == BUY_IN  # nothing moved
        assert (await tables.table(table.table_id)).seats == []

        await tables.join(table.table_id, "gm-banker", 5 * BUY_IN, seat=0)
        member = await tables.join(table.table_id, "gm-member", BUY_IN, seat=1, guild_id="rong-vang")
        seats = {s.player_id: s.guild_id for s in (await tables.table(table.table_id)).seats}
        assert seats == {"gm-banker": "", "gm-member": "rong-vang"}
        hand_id = await tables.start_hand(table.table_id)
        stored = [e.event.body for e in await w.log.read_hand(table.table_id, hand_id)]
        started = next(b for b in stored if isinstance(b, HandStarted))
        assert {s.player_id: s.guild_id for s in started.seats} == {"gm-banker": "", "gm-member": "rong-vang"}
        assert member.seat == 1


async def test_a_table_s_creation_time_is_when_it_opened_not_when_an_instance_loaded_it(world: World):
    """``Table.created_at`` is the TableOpened's time, read back by every rebuild: a table
    dropped and loaded again (a restart, a handover) keeps it."""
    w = world
    manager = w.running.apps["table"].manager
    async with client_of(w) as tables:
        table = await tables.create_table(game="holdem", stake_gold=10, seats_max=2)
        opened = table.created_at.ToDatetime(tzinfo=UTC)
        await asyncio.sleep(1.2)
        await manager.drop(lambda t: t == table.table_id)
        assert table.table_id not in manager.tables
        again = await tables.table(table.table_id)  # loaded again, rebuilt from the log
        assert table.table_id in manager.tables
        assert again.created_at.ToDatetime(tzinfo=UTC) == opened
