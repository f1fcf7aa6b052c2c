"""Mậu Binh, properties over random hands: gold is conserved, nobody pays more than their
chips (GEN-4) and a net loss within the chips is paid in full, the result is the table's
units × S less the commission (11.5, MB-17), replay is deterministic, and a hand always
reaches the comparison whatever mix of arrangements, timeouts, disconnects and leaving."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from socai import cards, fairness
from socai.events.model import (
    COMMUNITY,
    Arranged,
    Body,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
)
from socai.money import fee
from socai.rules import autoplay
from socai.rules.base import system_event
from socai.rules.chinese_poker import maubinh


def play_random(seed: int, players: int, stacks: list[int], stake: int, fee_bps: int) -> list[Body]:
    """One hand with random decisions: an arrangement (a candidate, or any split of the
    cards, fouled or not, under ``accept_fouled``), the seat's timer, a disconnect, a
    reconnect, leaving, or the table's window closing."""
    rng = random.Random(seed)
    hand_seed = seed.to_bytes(32, "big")
    started = HandStarted(
        table_id="mbp",
        hand_id=f"h{seed}",
        game="maubinh",
        hand_number=1,
        stake_gold=stake,
        fee_bps=fee_bps,
        seats_max=4,
        seats=tuple(SeatInfo(s, f"p{s}", stacks[s]) for s in range(players)),
        dealer_seat=rng.randrange(players),
        deck_commitment=fairness.commitment(hand_seed),
        options={"accept_fouled": "true"},
        rules_version=maubinh.RULES_VERSION,
    )
    deck = fairness.shuffle(hand_seed, cards.deck("maubinh"))
    state = maubinh.initial_state(started)
    bodies: list[Body] = [started]
    next_card = 0
    for _ in range(200):
        pending = maubinh.pending(state)
        body = system_event(pending, deck, next_card, hand_seed)
        if body is None:
            seat = rng.choice(pending.to_act)
            roll = rng.random()
            if roll < 0.1:
                body = TimerExpired(seat, "arrange")
            elif roll < 0.15:
                body = TimerExpired(COMMUNITY, "arrange")
            elif roll < 0.25:
                body = PlayerDisconnected(seat)
            elif roll < 0.3:
                body = PlayerLeft(seat)
            elif roll < 0.5:
                held = list(state.hands[seat])
                rng.shuffle(held)
                body = Arranged(seat, tuple(held[:5]), tuple(held[5:10]), tuple(held[10:]))
            else:
                body = rng.choice(maubinh.candidate_actions(state, seat))
            if state.disconnected and rng.random() < 0.3:
                body = PlayerReconnected(rng.choice(sorted(state.disconnected)))
        state = maubinh.apply(state, body)
        bodies.append(body)
        next_card += len(getattr(body, "cards", ()))
        if isinstance(body, HandEnded):
            return bodies
    raise AssertionError("the hand did not end")


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    players=st.integers(2, 4),
    stacks=st.lists(st.integers(1, 3_000), min_size=4, max_size=4),
    stake=st.sampled_from([1, 7, 100]),
    fee_bps=st.sampled_from([0, 300, 500, 1000]),
)
def test_gold_is_conserved_and_nobody_pays_more_than_their_chips(
    seed: int, players: int, stacks: list[int], stake: int, fee_bps: int
) -> None:
    bodies = play_random(seed, players, stacks, stake, fee_bps)
    state = autoplay.replay(maubinh, bodies)
    settlement = maubinh.settle(state)
    assert sum(settlement.entries().values()) == 0
    assert sum(settlement.nets.values()) + settlement.fees_gold() == 0
    seats, _, result = maubinh.comparison(state)
    owed = {seat: result.units[i] * stake for i, seat in enumerate(seats)}
    short = {seat for seat in seats if -owed[seat] > stacks[seat]}
    for seat in seats:
        net = settlement.nets[seat]
        assert net >= -stacks[seat]
        if seat in short:
            assert net == -stacks[seat]  # pays exactly its chips
        elif owed[seat] <= 0:
            assert net == owed[seat]  # a loss within the chips is paid in full
        else:
            assert 0 <= net <= owed[seat]  # a winner may bear a shortfall, then the fee
    assert {f.seat for f in settlement.shortfalls} == short
    if not short:
        for seat in seats:
            assert settlement.nets[seat] == owed[seat] - fee(owed[seat], fee_bps)
    assert maubinh.settle(autoplay.replay(maubinh, bodies)) == settlement


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), players=st.integers(2, 4))
def test_an_automatic_arrangement_is_never_fouled(seed: int, players: int) -> None:
    bodies = play_random(seed, players, [10_000] * 4, 10, 500)
    state = autoplay.replay(maubinh, bodies)
    for seat in maubinh.auto_arranged(state):
        a = state.arranged[seat].arrangement
        assert maubinh.is_valid_arrangement(a.front, a.middle, a.back)
