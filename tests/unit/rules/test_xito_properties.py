"""Xì Tố under random play (autoplay.play_hand): gold is conserved, nobody loses more than
they brought, fees stay within fee_bps, replays agree, every hand ends."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from socai import accounts
from socai.events.model import ActionKind, BetAction, Body, HandStarted, PlayerLeft, SeatInfo
from socai.money import TABLE_FEE_BPS_MAX
from socai.rules import autoplay
from socai.rules.base import Settlement
from socai.rules.poker import xito
from tests.support.snapshot import snapshot


@st.composite
def hands(draw: st.DrawFn) -> HandStarted:
    seats_max = draw(st.integers(2, 7))
    seats = draw(st.lists(st.integers(0, seats_max - 1), min_size=2, max_size=min(5, seats_max), unique=True))
    stake = draw(st.sampled_from([1, 10, 39, 100, 1000]))
    stacks = [draw(st.integers(1, 12 * stake)) for _ in seats]
    options = {
        "auto_follow_2": draw(st.sampled_from(["true", "false"])),
        "hidden_5th": draw(st.sampled_from(["true", "false"])),
        "tay_max": draw(st.sampled_from(["true", "false"])),
        "straight_flush_lower_wins": draw(st.sampled_from(["true", "false"])),
        "deal_order": draw(st.sampled_from(["combo", "exposed"])),
        "round3_4_max_bet_stakes": str(draw(st.integers(1, 3))),
    }
    return HandStarted(
        table_id="t1",
        hand_id="h1",
        game="xito",
        hand_number=1,
        stake_gold=stake,
        fee_bps=draw(st.integers(0, TABLE_FEE_BPS_MAX)),
        seats_max=seats_max,
        seats=tuple(SeatInfo(s, f"p{s}", stack) for s, stack in zip(seats, stacks, strict=True)),
        dealer_seat=draw(st.integers(0, seats_max - 1)),
        deck_commitment="c" * 64,
        options=options,
    )


def random_player(choice_seed: int) -> autoplay.Chooser:
    """Mostly checks and calls, sometimes bets, raises, folds, times out or leaves.

    Every state handed to it is checked for immutability: applying a move must not change it.
    """
    rng = random.Random(choice_seed)

    def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
        before = snapshot(state)
        for body in candidates:
            xito.apply(state, body)
        assert snapshot(state) == before
        roll = rng.random()
        if roll < 0.04:
            return None
        if roll < 0.06:
            return PlayerLeft(seat)
        passive = [b for b in candidates if isinstance(b, BetAction) and b.kind in (ActionKind.CHECK, ActionKind.CALL)]
        if passive and roll < 0.7:
            return rng.choice(passive)
        return rng.choice(list(candidates))

    return choose


def fees_by_seat(settlement: Settlement) -> dict[int, int]:
    by_account = {acct: seat for seat, acct in settlement.seat_accounts.items()}
    out = dict.fromkeys(settlement.nets, 0)
    for t in settlement.transfers:
        if t.to_account == accounts.HOUSE_FEES:
            out[by_account[t.from_account]] += t.amount_gold
    return out


@given(started=hands(), seed=st.binary(min_size=32, max_size=32), choice_seed=st.integers(0, 2**32))
@settings(max_examples=300, deadline=None)
def test_random_hands_settle_within_the_rules(started: HandStarted, seed: bytes, choice_seed: int) -> None:
    bodies, state = autoplay.play_hand(xito, started, seed, random_player(choice_seed))
    assert xito.is_finished(state)
    settlement = xito.settle(state)
    stacks = {info.seat: info.stack_gold for info in started.seats}

    # Balanced: every gold unit a seat lost went to another seat or to the fee.
    assert sum(settlement.nets.values()) + settlement.fees_gold() == 0
    assert sum(settlement.entries().values()) == 0
    # Nobody loses more than their stack; what a seat put in never exceeds it.
    for seat, net in settlement.nets.items():
        assert net >= -stacks[seat]
        assert state.put_in_gold[seat] <= stacks[seat]
    # Fees: exactly floor(fee_bps) of each positive net win, nothing from losers.
    for seat, paid in fees_by_seat(settlement).items():
        gross = settlement.nets[seat] + paid
        assert paid == (gross * started.fee_bps // 10_000 if gross > 0 else 0)
    # The winner never loses gold, and is the seat dealt first next hand.
    winner = xito.first_seat_next_hand(state)
    assert settlement.nets[winner] >= 0
    assert winner not in state.folded
    # Replaying the recorded events, twice, gives the same settlement.
    assert xito.settle(autoplay.replay(xito, bodies)) == settlement
    assert xito.settle(autoplay.replay(xito, bodies)) == settlement
    # Every live seat at a showdown holds five cards; folded seats hold no more than that.
    live = [s for s in state.order if s not in state.folded]
    if len(live) > 1:
        assert all(len(state.hands[s]) == 5 for s in live)
    assert len(bodies) < autoplay.MAX_STEPS
