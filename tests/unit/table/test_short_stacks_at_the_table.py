"""A seat left with chips below its game's minimum (``can_play``) at the table.

Chaos (issue 17, every game): at a Liêng Sảnh table two seats were left with 94 and 88
gold, less than the 100 ante. The table stood up only seats at 0, so they kept their seats
and sat out every hand (with a third seat broke, a table of four froze: one player could
play). Then the table service restarted: a rebuild takes the stacks from the last hand's
HandStarted, which they were not in, so they got their 2,000 buy-ins back; the next hand
they lost more than their escrows held, the ledger refused it (LEDGER_REJECTED
INSUFFICIENT_FUNDS) and every later hand of the table was dead-lettered.

The rules say such a player cannot continue (RULES.md §7.1: "a player who cannot pay the
Gà contribution cannot continue"; the ante of §5.1 and LS-2 likewise), so the table stands
them up at the end of the hand and cashes out what they have, as it does a seat at 0.

These drive the table's ``_after_hand`` (services/socai_table/table.py) with a real hand of
the rules engine; nothing reaches a dependency (the stand-up is recorded, not written).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType, SimpleNamespace
from typing import Any, TypeVar

import pytest

from socai import errors
from socai.cards import parse_cards
from socai.events.model import (
    ActionKind,
    BetAction,
    Body,
    CardsDealt,
    DealtCard,
    Declared,
    Event,
    HandEnded,
    HandStarted,
    PlayerStoodUp,
    SeatInfo,
)
from socai.rules import base
from socai.rules.three_card import bacay_ga, lieng_sanh
from socai.rules.three_card.threecard_play import deal_three_face_down
from socai_table import core
from socai_table.hand import Hand
from socai_table.model import Seat, TableConfig
from socai_table.table import Table

S = 100
SEED_HEX = "00" * 32
StateT = TypeVar("StateT")


def _table(game: str, stacks: dict[int, int], **options: str) -> tuple[Table, list[tuple[int, int]]]:
    config = TableConfig(
        game=game, stake_gold=S, fee_bps=0, seats_max=4, options=options, auto_start_players=2
    ).normalized()
    # Nothing here reaches a dependency but the lease check of ``heal`` (held throughout).
    table = Table("t1", config, deps=SimpleNamespace(fence=lambda _table_id: 1))  # type: ignore[arg-type]
    seats = {seat: Seat(seat, f"p{seat}", stack, seated_at=1 + seat) for seat, stack in stacks.items()}
    table.state = dataclasses.replace(table.state, seats=MappingProxyType(seats))
    stood_up: list[tuple[int, int]] = []

    async def stand_up(number: int) -> None:  # the table's _stand_up, without the store and the log
        seat = table.seats[number]
        stood_up.append((seat.seat, seat.stack_gold))
        table.state = core.evolve(
            table.state, Event("t1", "t1-t", 0, game, 0.0, PlayerStoodUp(number, seat.player_id, 0))
        )

    table._stand_up = stand_up  # type: ignore[method-assign]
    table.autostart.schedule = lambda *_args: None  # type: ignore[method-assign]
    return table, stood_up


def _started(table: Table) -> HandStarted:
    c = table.config
    return HandStarted(
        table.table_id,
        "t1-h1",
        c.game,
        1,
        c.stake_gold,
        c.fee_bps or 0,
        c.seats_max,
        tuple(SeatInfo(s.seat, s.player_id, s.stack_gold) for s in sorted(table.seats.values(), key=lambda s: s.seat)),
        0,
        "c",
        owner_seat=0,
        options=base.full_options(table.module, c.options),
    )


def _deal(order: tuple[int, ...], hands: dict[int, str]) -> CardsDealt:
    cards = {seat: parse_cards(text) for seat, text in hands.items()}
    taken = dict.fromkeys(cards, 0)
    dealt = []
    for slot in deal_three_face_down(order):
        dealt.append(DealtCard(slot.seat, cards[slot.seat][taken[slot.seat]], False))
        taken[slot.seat] += 1
    return CardsDealt(tuple(dealt))


async def _end_hand(table: Table, state: Any) -> None:
    started = _started(table)
    table.hand = Hand(started.hand_id, 1, started, b"", [], state, started_stream_seq=100, ended=True)
    table.state = core.fold(
        table.state,
        [
            (Event("t1", started.hand_id, 1, started.game, 0.0, started), 100),
            (Event("t1", started.hand_id, 2, started.game, 0.0, HandEnded(SEED_HEX)), 101),
        ],
    )
    await table._after_hand()


def _play(module: Any, state: StateT, *bodies: Body) -> StateT:
    for body in bodies:
        state = module.apply(state, body)
    return state


async def test_a_lieng_sanh_seat_left_below_the_ante_stands_up_with_what_it_has() -> None:
    table, stood_up = _table("lieng_sanh", {0: 2000, 1: 194, 2: 2000})
    state = lieng_sanh.initial_state(_started(table))  # play goes 0 → 2 → 1 (counterclockwise)
    state = _play(
        lieng_sanh,
        state,
        _deal(state.order, {0: "2h 7s 8c", 1: "3h 4s 5c", 2: "9s Kh Qd"}),
        # Round 1: seat 0 "Tố" 1 × S, seat 2 "Cân", seat 1 "Úp bỏ" (its ante lost: 94 left).
        BetAction(0, ActionKind.BET, S),
        BetAction(2, ActionKind.CALL, S),
        BetAction(1, ActionKind.FOLD, 0),
        # Rounds 2 and 3: "Chuyển" all round.
        *(BetAction(seat, ActionKind.CHECK, 0) for _ in range(2) for seat in (0, 2)),
        HandEnded(SEED_HEX),
    )
    await _end_hand(table, state)
    assert stood_up == [(1, 94)]
    assert sorted(table.seats) == [0, 2]
    assert table.participants() == [0, 2]


async def test_a_3_cay_ga_seat_that_cannot_pay_the_hand_bet_and_the_ga_stands_up() -> None:
    table, stood_up = _table("bacay_ga", {0: 2000, 1: 300, 2: 2000})
    state = bacay_ga.initial_state(_started(table))
    # Seat 0 has 9 points and wins, seat 1 has 1, seat 2 has 8; nobody has 10: the Gà carries.
    hands = {0: "9s 9h Ac", 1: "2h 3s 6c", 2: "5s 6h 7c"}
    state = _play(
        bacay_ga,
        state,
        _deal(state.order, hands),
        *(Declared(seat, "flip") for seat in state.order),
        HandEnded(SEED_HEX),
    )
    await _end_hand(table, state)
    # Seat 1 paid its Gà contribution and lost its hand bet: 100 left, below the 200 both need.
    assert stood_up == [(1, 100)]
    assert table.pot_gold == 300


async def test_heal_stands_up_the_seats_a_failed_stand_up_left_seated() -> None:
    """A stand-up that fails between hands (PostgreSQL down while its cash-out row is
    written: the chaos run's frozen table) leaves the seat taken; the table's ``heal``
    (its watchdog, once a second) stands up every seat still due, and only those."""
    table, stood_up = _table("lieng_sanh", {0: 2_000, 1: 88, 2: 2_000, 3: 1_500})
    table.state = core.evolve(table.state, core.LeavingMarked(3))  # asked to leave during the hand
    recorded = table._stand_up
    down = [errors.Unavailable("DATABASE_UNAVAILABLE", "PostgreSQL is restarting")]

    async def stand_up_while_the_database_is_down(number: int) -> None:
        if down:
            raise down.pop()
        await recorded(number)

    table._stand_up = stand_up_while_the_database_is_down  # type: ignore[method-assign]
    with pytest.raises(errors.Unavailable):
        await table._stand_up_due()  # what the hand's end ran: the first stand-up failed
    assert sorted(table.seats) == [0, 1, 2, 3] and stood_up == []

    await table.heal()
    assert stood_up == [(1, 88), (3, 1_500)]  # below the ante, and leaving
    assert sorted(table.seats) == [0, 2]
    await table.heal()  # nothing more is due: the players who can play keep their seats
    assert stood_up == [(1, 88), (3, 1_500)] and sorted(table.seats) == [0, 2]
