"""A game backend written only against ``socai.client`` (issue 36): it seats players at a
table of every game, plays whole hands from each player's stream, leaves after the hand,
waits for each cash-out on the stream, and the money reconciles to the gold.

The backend looks at each table's state once, before play; after that every decision comes
from the players' streams (each message carries whose turn, the cards, what to beat and
the legal moves). Each player's cash-out equals its buy-in plus its nets in the hands'
settlements (``GetHand``), its wallet ends at its deposit less the buy-in plus the cash-out,
and its escrow at 0.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from socai import accounts, fairness
from socai.client import LEAVE_AFTER_HAND, LEAVE_NOW, Seat, TableClient, TableError
from socai.client.bots import random_action
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec
from socai.rules import registry
from socai_table.model import hand_id_of
from socai_table.simulate import options_for, players_for, players_min_for
from tests.support.e2e import GameStack, game_stack, until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HANDS = 2
STAKE = 10
BUY_IN = 1_000
DEPOSIT = 3_000
PLAY_S = 120.0
SIMULTANEOUS_MAX = 2  # a player's decisions on one shared timer (Tài Xỉu bets) per hand


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


@dataclass
class Played:
    """What one table's players saw and were paid."""

    game: str
    table_id: str
    buy_ins: dict[str, int] = field(default_factory=dict)
    hands: set[str] = field(default_factory=set)
    cash_outs: dict[str, pb.CashOut] = field(default_factory=dict)
    turns: int = 0
    seated: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    moved_on: int = 0  # moves the hand had moved on from (a timer, a shared window closing)


async def play_table(stack: GameStack, tables: TableClient, game: str, index: int, progress: list[Played]) -> Played:
    rng = random.Random(index)
    options = options_for(game, 1 if game == "taixiu" else 0)  # Tài Xỉu between players
    n = players_for(game, 3)
    minimum = players_min_for(game, options)
    owner = f"{game}-0"
    table = await tables.create_table(
        game=game,
        stake_gold=STAKE,
        seats_max=n,
        auto_start_players=minimum,  # go on with fewer when one busts
        turn_timeout_s=2,
        between_hands_ms=50,
        owner_player_id=owner,
        options=options,
        buy_in_max_gold=3 * BUY_IN,
    )
    played = Played(game, table.table_id)
    progress.append(played)
    seats: list[Seat] = []
    for k in range(n):
        player = f"{game}-{k}"
        buy_in = BUY_IN * (3 if game == "taixiu" and k == 0 else 1)  # the banker covers the bets
        await stack.backend.deposit(player, DEPOSIT)
        seats.append(await tables.join(table.table_id, player, buy_in, seat=k))
        played.buy_ins[player] = buy_in
    first = await tables.state(table.table_id)  # the one look at the table's state
    assert first.table.table_id == table.table_id
    seated = played.seated = {s.player_id for s in seats}
    ended = played.ended

    async def player(seat: Seat) -> None:
        leaving = False
        decisions: dict[str, int] = {}
        async for update in seat.updates():
            event = update.event
            if update.kind == "hand_started" and event is not None:
                played.hands.add(event.hand_id)
            if update.kind == "hand_ended" and event is not None:
                ended.add(event.hand_id)
            if update.kind == "player_stood_up" and event is not None:
                seated.discard(event.player_stood_up.player_id)
            if update.cash_out is not None and update.cash_out.status == pb.CASH_OUT_STATUS_DONE:
                played.cash_outs[seat.player_id] = update.cash_out
                return
            if seat.player_id not in seated:
                continue  # stood up: the cash-out comes on this stream
            last_hand = update.kind == "hand_started" and len(ended) >= HANDS - 1
            if not leaving and (last_hand or len(seated) < minimum):
                # Play the last hand out (or, with too few left to play, go now).
                leaving = True
                try:
                    await seat.leave(LEAVE_AFTER_HAND if last_hand else LEAVE_NOW)
                except TableError as exc:
                    # Stood up already (busted at the hand's end): its PlayerStoodUp follows.
                    assert exc.reason == "NOT_SEATED", (game, str(exc))
            turn = seat.turn_of(update)
            if turn is None:
                continue
            if len(turn.view.to_act) > 1:
                decisions[turn.hand_id] = decisions.get(turn.hand_id, 0) + 1
                if decisions[turn.hand_id] > SIMULTANEOUS_MAX:
                    continue
            action = random_action(turn, rng)
            if action is None:
                continue
            played.turns += 1
            try:
                await turn.act(action)
            except TableError as exc:
                # The hand may move on between the view and the move: its timer ran out, or
                # another seat closed a window all of them decide in. Never a stale card or
                # trick (CANNOT_BEAT, NOT_HOLDING …): the view was the table's own.
                moved_on = {"NOT_YOUR_TURN", "HAND_FINISHED", "STALE_HAND", "NO_HAND_IN_PLAY", "BETTING_CLOSED"}
                moved_on |= {"BAD_DECLARATION", "ALREADY_ACTED"}
                assert exc.reason in moved_on, (game, str(exc))
                played.moved_on += 1

    await asyncio.gather(*(player(s) for s in seats))
    return played


async def test_a_backend_on_the_client_plays_every_game_leaves_and_reconciles_to_the_gold(stack: GameStack):
    s = stack.settings
    games = registry.available()
    async with TableClient(s.table_addr, s.tokens["backend"]) as tables:
        progress: list[Played] = []
        plays = asyncio.gather(*(play_table(stack, tables, game, i, progress) for i, game in enumerate(games)))
        try:
            results = await asyncio.wait_for(plays, PLAY_S)
        except TimeoutError:
            stuck = [
                (p.game, sorted(p.hands), sorted(p.ended), sorted(p.seated), sorted(p.cash_outs)) for p in progress
            ]
            raise AssertionError(f"not done after {PLAY_S} s: {stuck}") from None
        assert tables.calls["GetTableState"] == len(games)  # one look per table, before play
        for played in results:
            await reconcile(stack, tables, played)


async def reconcile(stack: GameStack, tables: TableClient, played: Played) -> None:
    """Each player's cash-out is its buy-in plus its nets in every hand of the table, its
    wallet its deposit less the buy-in plus the cash-out, its escrow 0.

    Every hand, not only those the players' streams saw start: the table starts its first
    hand once ``auto_start_players`` are seated, and a hand that ends at the deal (Sâm Lốc's
    thắng trắng, 20 lá from each other player) can be over before the streams open, whose
    first messages are the hand in play (or else the last one) only. The table's hands are
    numbered 1 … ``Table.hands_played`` (``hand_id_of``). And the streams may
    see more than HANDS: a player leaves after the hand in play when its leave arrives, and
    one whose stream lags (it shows the last hand's start once that hand is over) asks
    during a next hand and plays it out."""
    assert len(played.hands) >= HANDS and played.turns > 0, (played.game, played.hands)
    table = await tables.table(played.table_id)
    every_hand = {hand_id_of(played.table_id, n) for n in range(1, table.hands_played + 1)}
    assert played.hands <= every_hand, (played.game, played.hands, table.hands_played)
    nets: dict[str, int] = dict.fromkeys(played.buy_ins, 0)
    for hand_id in sorted(every_hand):
        hand = await tables.hand(played.table_id, hand_id)
        assert hand.ended, (played.game, hand_id)
        for seat in hand.settlement.seats:
            nets[seat.player_id] += seat.net_gold
    for player_id, buy_in in played.buy_ins.items():
        cash_out = played.cash_outs[player_id]
        assert cash_out.amount_gold == buy_in + nets[player_id], (played.game, player_id)
        assert await stack.backend.balance(accounts.player(player_id)) == DEPOSIT - buy_in + cash_out.amount_gold
        assert await stack.backend.balance(accounts.escrow(played.table_id, player_id)) == 0


# A Sâm Lốc deal that ends the first hand of seats 0 and 1 (seat 0 the owner and dealer) at
# once: thắng trắng, seat 0 takes 20 lá from seat 1.
INSTANT_WIN_SEED = bytes.fromhex("7e9c6c0a87b82d4e8c9e112dbc1322d57418d8a52ce19cde0ae8964a69c59120")


async def test_a_hand_over_before_the_streams_open_is_reconciled_too(
    stack: GameStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first hand starts with two of the three players seated and ends at the deal,
    before any stream opens (the third player joins once the second hand is in play): no
    stream ever sees it, and its nets are in the cash-outs all the same."""
    drawn: list[bytes] = []

    def new_seed() -> bytes:
        drawn.append(INSTANT_WIN_SEED if not drawn else os.urandom(32))
        return drawn[-1]

    monkeypatch.setattr(fairness, "new_seed", new_seed)
    s = stack.settings
    async with TableClient(s.table_addr, s.tokens["backend"]) as tables:
        join = tables.join

        async def join_after_the_first_hand(table_id: str, player_id: str, buy_in_gold: int, **kw: Any) -> Seat:
            if kw.get("seat") == 2:
                await until("the second hand to start", lambda: second_hand_started(tables, table_id))
            return await join(table_id, player_id, buy_in_gold, **kw)

        monkeypatch.setattr(tables, "join", join_after_the_first_hand)
        played = await asyncio.wait_for(play_table(stack, tables, "samloc", 0, []), PLAY_S)
        first = hand_id_of(played.table_id, 1)
        assert first not in played.hands, "the streams saw the first hand: the scenario did not happen"
        hand = await tables.hand(played.table_id, first)
        assert {seat.player_id: seat.net_gold for seat in hand.settlement.seats} == {
            "samloc-0": 20 * STAKE,
            "samloc-1": -20 * STAKE,
        }
        await reconcile(stack, tables, played)


async def second_hand_started(tables: TableClient, table_id: str) -> bool:
    return (await tables.table(table_id)).hands_played >= 2
