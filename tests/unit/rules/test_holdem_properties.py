"""Properties of every Hold'em hand, on random tables played by random (legal) players:
settlements balance, nobody loses more than their stack, fees stay within fee_bps of a net
win, replays are deterministic, ``apply`` never mutates its input, play always ends, and
``legal_actions`` tells the truth about what ``apply`` accepts."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from socai.errors import RuleViolation
from socai.events.model import (
    ActionKind,
    BetAction,
    Body,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    SeatInfo,
)
from socai.money import fee
from socai.rules import autoplay
from socai.rules.base import Settlement
from socai.rules.poker import holdem


@dataclass(frozen=True)
class Table:
    started: HandStarted
    seed: bytes
    choices: int  # seeds the random players


@st.composite
def tables(draw: st.DrawFn) -> Table:
    seats_max = draw(st.integers(2, 9))
    seats = draw(st.lists(st.integers(0, seats_max - 1), min_size=2, max_size=seats_max, unique=True))
    stacks = draw(st.lists(st.integers(1, 3000), min_size=len(seats), max_size=len(seats)))
    options = {
        "min_raise": draw(st.sampled_from(holdem.MIN_RAISE_RULES)),
        "heads_up_dealer_is_small_blind": draw(st.sampled_from(["true", "false"])),
    }
    started = HandStarted(
        table_id="t1",
        hand_id="h1",
        game="holdem",
        hand_number=1,
        stake_gold=draw(st.sampled_from([10, 30, 100, 250])),
        fee_bps=draw(st.sampled_from([0, 1, 250, 500, 1000])),
        seats_max=seats_max,
        seats=tuple(SeatInfo(s, f"p{s}", stack) for s, stack in zip(seats, stacks, strict=True)),
        dealer_seat=draw(st.sampled_from(seats)),
        deck_commitment="c",
        options=options,
    )
    return Table(started, draw(st.binary(min_size=32, max_size=32)), draw(st.integers(0, 2**32)))


def random_player(rng: random.Random, check_legal: bool = False) -> autoplay.Chooser:
    """Picks a random candidate; now and then lets the timer run out, disconnects,
    reconnects, or leaves (its own seat, or another's, out of turn)."""

    def choose(state: holdem.HoldemState, seat: int, candidates: Sequence[Body]) -> Body | None:
        if check_legal:
            assert_legal_actions_tell_the_truth(state, seat)
        roll = rng.random()
        if roll < 0.04:
            return None
        if roll < 0.06:
            return PlayerDisconnected(seat)
        if roll < 0.07:
            return PlayerReconnected(rng.choice(state.seats))
        if roll < 0.09:
            return PlayerLeft(rng.choice(state.seats))
        return rng.choice(list(candidates))

    return choose


def assert_legal_actions_tell_the_truth(state: holdem.HoldemState, seat: int) -> None:
    """Every legal action is accepted at its bounds and refused just outside them, and the
    state is never changed by trying."""
    before = state.snapshot()
    for action in holdem.legal_actions(state, seat):
        kind = ActionKind(action.kind)
        holdem.apply(state, BetAction(seat, kind, action.min_gold))
        holdem.apply(state, BetAction(seat, kind, action.max_gold))
        for wrong in (action.max_gold + 1, action.min_gold - 1 if kind in (ActionKind.BET, ActionKind.RAISE) else -1):
            if wrong >= 0 or kind != ActionKind.FOLD:
                try:
                    holdem.apply(state, BetAction(seat, kind, wrong))
                except RuleViolation:
                    pass
                else:
                    raise AssertionError(f"{kind} {wrong} accepted outside {action}")
    for body in holdem.candidate_actions(state, seat):
        holdem.apply(state, body)
    assert state.snapshot() == before


def fees_by_seat(settlement: Settlement) -> dict[int, int]:
    account_seat = {a: s for s, a in settlement.seat_accounts.items()}
    out: dict[int, int] = {}
    for t in settlement.transfers:
        if t.reason == "fee":
            out[account_seat[t.from_account]] = out.get(account_seat[t.from_account], 0) + t.amount_gold
    return out


@settings(max_examples=500, deadline=None)
@given(tables())
def test_every_hand_ends_balanced_within_stacks_and_fees(table: Table) -> None:
    _, final = autoplay.play_hand(holdem, table.started, table.seed, random_player(random.Random(table.choices)))
    settlement = holdem.settle(final)
    entries = settlement.entries()
    assert sum(entries.values()) == 0
    assert sum(settlement.nets.values()) + settlement.fees_gold() == 0
    stacks = {s.seat: s.stack_gold for s in table.started.seats}
    assert set(settlement.nets) == set(stacks)
    for seat, net in settlement.nets.items():
        assert net >= -stacks[seat]  # nobody loses more than they brought
        assert net >= -final.committed_of(seat)  # nor more than they put in
    fees = fees_by_seat(settlement)
    assert sum(fees.values()) == settlement.fees_gold()
    for seat in stacks:
        paid = fees.get(seat, 0)
        won = settlement.nets[seat] + paid  # the net result before the fee
        assert paid <= max(0, won) * table.started.fee_bps // 10_000  # GEN-1: on a net win only
        assert paid == fee(won, table.started.fee_bps)


@settings(max_examples=200, deadline=None)
@given(tables())
def test_replaying_the_events_gives_the_same_state_and_settlement_and_never_mutates(table: Table) -> None:
    bodies, final = autoplay.play_hand(holdem, table.started, table.seed, random_player(random.Random(table.choices)))
    state = holdem.initial_state(table.started)  # type: ignore[arg-type]
    for body in bodies[1:]:
        before = state.snapshot()
        new = holdem.apply(state, body)
        assert state.snapshot() == before  # apply never mutates its input
        state = new
    assert state == final
    first = holdem.settle(autoplay.replay(holdem, bodies))
    second = holdem.settle(autoplay.replay(holdem, bodies))
    assert first == second == holdem.settle(final)


@settings(max_examples=100, deadline=None)
@given(tables())
def test_legal_actions_match_what_apply_accepts_all_hand_long(table: Table) -> None:
    _, final = autoplay.play_hand(
        holdem, table.started, table.seed, random_player(random.Random(table.choices), check_legal=True)
    )
    assert holdem.is_finished(final)


@settings(max_examples=100, deadline=None)
@given(tables(), st.integers(0, 2**32))
def test_a_seat_that_is_not_to_act_can_never_bet(table: Table, pick: int) -> None:
    """Whatever the moment, a betting action from any seat but the one to act is refused."""
    rng = random.Random(pick)
    bodies, _ = autoplay.play_hand(holdem, table.started, table.seed, random_player(random.Random(table.choices)))
    state = holdem.initial_state(table.started)  # type: ignore[arg-type]
    for body in bodies[1 : 1 + rng.randrange(len(bodies) - 1)]:
        state = holdem.apply(state, body)
    for seat in state.seats:
        if seat != state.seat_to_act:
            assert holdem.legal_actions(state, seat) == ()
            kind = rng.choice(list(ActionKind))
            try:
                holdem.apply(state, BetAction(seat, kind, rng.randrange(0, 50)))
            except RuleViolation as err:
                assert err.code in {"NOT_YOUR_TURN", "SEAT_FOLDED", "HAND_FINISHED"}
            else:
                raise AssertionError(f"seat {seat} acted out of turn")
