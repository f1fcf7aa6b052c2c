"""Tài Xỉu properties: every one of the 216 rolls, random bets, random rounds played by bots."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from socai import accounts
from socai.errors import RuleViolation
from socai.events.model import (
    COMMUNITY,
    Body,
    DiceRolled,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    SeatInfo,
    TimerExpired,
    WagerPlaced,
)
from socai.rules.autoplay import Chooser, play_hand, replay
from socai.rules.base import Settlement
from socai.rules.dice import taixiu
from tests.support.snapshot import snapshot

TABLE = "tx1"
ALL_DICE = [(a, b, c) for a in range(1, 7) for b in range(1, 7) for c in range(1, 7)]
EVERY_SELECTION = (
    [("tai", ()), ("xiu", ()), ("any_triple", ())]
    + [(kind, (n,)) for kind in ("single", "double", "triple") for n in range(1, 7)]
    + [("pair", (a, b)) for a in range(1, 7) for b in range(a + 1, 7)]
    + [("total", (t,)) for t in range(4, 18)]
)
TX1 = {4: 50, 17: 50, 5: 18, 16: 18, 6: 14, 15: 14, 7: 12, 14: 12, 8: 8, 13: 8, 9: 6, 10: 6, 11: 6, 12: 6}


def oracle_odds(kind: str, selection: tuple[int, ...], dice: tuple[int, int, int]) -> int:
    """RULES.md 2.2 with the default decisions, written independently of the module."""
    faces = Counter(dice)
    total = sum(dice)
    triple = len(faces) == 1
    if kind == "xiu":
        return 1 if 4 <= total <= 10 and not triple else 0
    if kind == "tai":
        return 1 if 11 <= total <= 17 and not triple else 0
    if kind == "single":
        return faces[selection[0]]  # 1:1, 1:2, 1:3 by the number of dice showing it
    if kind == "pair":
        return 5 if faces[selection[0]] and faces[selection[1]] else 0
    if kind == "total":
        return TX1[total] if total == selection[0] else 0
    if kind == "double":
        return 8 if faces[selection[0]] >= 2 else 0
    if kind == "triple":
        return 150 if faces[selection[0]] == 3 else 0
    assert kind == "any_triple"
    return 24 if triple else 0


def test_every_bet_on_every_one_of_the_216_rolls_pays_as_rules_md_says() -> None:
    assert len(EVERY_SELECTION) == 3 + 18 + 15 + 14
    for dice in ALL_DICE:
        for kind, selection in EVERY_SELECTION:
            assert taixiu.bet_odds(kind, selection, dice) == oracle_odds(kind, selection, dice), (
                kind,
                selection,
                dice,
            )


def test_exactly_one_of_tai_and_xiu_wins_unless_the_roll_is_a_triple() -> None:
    for dice in ALL_DICE:
        winners = taixiu.bet_odds("tai", (), dice) + taixiu.bet_odds("xiu", (), dice)
        assert winners == (0 if len(set(dice)) == 1 else 1), dice


def test_no_bet_ever_pays_more_than_its_reservation() -> None:
    for kind, selection in EVERY_SELECTION:
        best = max(taixiu.bet_odds(kind, selection, dice) for dice in ALL_DICE)
        assert best == taixiu.max_odds(kind, selection), (kind, selection)


# --- random rounds ----------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    started: HandStarted
    attempts: tuple[Body, ...]
    dice: tuple[int, int, int]


@st.composite
def rounds(draw: st.DrawFn) -> Round:
    mode = draw(st.sampled_from(["system", "p2p"]))
    players = draw(st.integers(1, 5))
    seats = []
    for i in range(players):
        guild = draw(st.sampled_from(["", "rong", "ho"]))
        seats.append(SeatInfo(i + 1, f"p{i + 1}", draw(st.integers(0, 20_000)), guild_id=guild))
    if mode == "p2p":
        seats.insert(0, SeatInfo(0, "owner", draw(st.integers(0, 200_000)), guild_id="rong"))
    options = {
        "mode": mode,
        "guild_threshold_gold": str(draw(st.sampled_from([0, 1_000, 5_000_000]))),
        "guild_stacks_with_fee": draw(st.sampled_from(["true", "false"])),
        "banker_pays_fee": draw(st.sampled_from(["true", "false"])),
        "triple_loses_tai_xiu": draw(st.sampled_from(["true", "false"])),
        "total_bets_win_on_triple": draw(st.sampled_from(["true", "false"])),
        "guild_bps": str(draw(st.sampled_from([0, 100, 700]))),
    }
    started = HandStarted(
        table_id=TABLE,
        hand_id="h1",
        game="taixiu",
        hand_number=1,
        stake_gold=draw(st.sampled_from([0, 1, 5])),
        fee_bps=draw(st.sampled_from([0, 1, 300, 500, 999, 1000])),
        seats_max=6,
        seats=tuple(seats),
        dealer_seat=0,
        deck_commitment="c",
        options=options,
    )
    # Mostly well-formed bets by seated players (so that stacks and the banker's capacity are
    # reached), with some malformed ones, strangers, timeouts, leavers and disconnects mixed in.
    seated = [s.seat for s in seats]
    attempts: list[Body] = []
    for _ in range(draw(st.integers(0, 40))):
        roll = draw(st.integers(0, 19))
        seat = draw(st.sampled_from(seated)) if roll else draw(st.integers(-1, 7))
        if roll == 1:
            done: list[Body] = [TimerExpired(seat, "betting"), PlayerLeft(seat)]
            attempts.append(draw(st.sampled_from(done)))
        elif roll == 2:
            attempts.append(PlayerDisconnected(seat))
        else:
            if roll == 3:
                kind = draw(st.sampled_from([*taixiu.BET_KINDS, "big"]))
                selection = tuple(draw(st.lists(st.integers(0, 19), max_size=3)))
            else:
                kind, selection = draw(st.sampled_from(EVERY_SELECTION))
            gold = draw(st.integers(-5, 30_000) if roll == 4 else st.integers(1, 2_000))
            attempts.append(WagerPlaced(seat, kind, selection, gold))
    return Round(started, tuple(attempts), draw(st.sampled_from(ALL_DICE)))


def run(r: Round) -> tuple[list[Body], taixiu.State]:
    """Apply every attempt the rules accept; a rejected one must leave the state unchanged."""
    state = taixiu.initial_state(r.started)
    accepted: list[Body] = [r.started]
    for body in r.attempts:
        before = snapshot(state)
        try:
            state = taixiu.apply(state, body)
        except RuleViolation as err:
            assert err.code.isupper() and " " not in err.code
            assert snapshot(state) == before
            continue
        accepted.append(body)
    ending: list[Body] = [DiceRolled(r.dice), HandEnded("00" * 32)]
    if not taixiu.pending(state).roll_dice:
        ending.insert(0, TimerExpired(COMMUNITY, "betting"))
    for body in ending:
        state = taixiu.apply(state, body)
        accepted.append(body)
    return accepted, state


def outflow(settlement: Settlement, account: str, to_account: str) -> int:
    return sum(t.amount_gold for t in settlement.transfers if (t.from_account, t.to_account) == (account, to_account))


@settings(max_examples=400, deadline=None)
@given(rounds())
def test_random_rounds_settle_within_the_rules(r: Round) -> None:
    bodies, state = run(r)
    settlement = taixiu.settle(state)
    results = taixiu.bet_results(state)
    fee_bps = r.started.fee_bps
    banker = state.banker_seat

    # Settlement balances: every account's change sums to zero, the seats' nets included.
    entries = settlement.entries()
    assert sum(entries.values()) == 0
    for seat, account in settlement.seat_accounts.items():
        assert entries.get(account, 0) == settlement.nets[seat]

    staked: Counter[int] = Counter()
    before_fees: Counter[int] = Counter()
    for result in results:
        staked[result.bet.seat] += result.bet.amount_gold
        before_fees[result.bet.seat] += result.net_gold
    stacks = {s.seat: s.stack_gold for s in r.started.seats}

    for seat in stacks:
        if seat == banker:
            continue
        account = settlement.seat_accounts[seat]
        fee_paid = outflow(settlement, account, accounts.HOUSE_FEES)
        guild_paid = sum(
            t.amount_gold for t in settlement.transfers if t.from_account == account and t.reason == "guild_fee"
        )
        # Nobody loses more than they staked, and what they staked fits their stack.
        assert staked[seat] <= stacks[seat]
        assert settlement.nets[seat] >= -staked[seat]
        # Fees never exceed fee_bps of a net win (rounded down); none on a net loss.
        assert fee_paid <= max(0, before_fees[seat]) * fee_bps // 10_000
        assert guild_paid <= max(0, before_fees[seat]) * state.options.guild_bps // 10_000
        if before_fees[seat] <= 0:
            assert fee_paid == 0 and guild_paid == 0
        assert settlement.nets[seat] == before_fees[seat] - fee_paid - guild_paid

    if banker is not None:
        # The p2p banker never pays more than their stack (TX-7), and pays no guild share.
        assert settlement.nets[banker] >= -stacks[banker]
        assert state.reserved_gold <= stacks[banker]
        banker_account = settlement.seat_accounts[banker]
        assert not any(t.from_account == banker_account and t.reason == "guild_fee" for t in settlement.transfers)
        banker_win = -sum(before_fees.values())
        banker_fee = outflow(settlement, banker_account, accounts.HOUSE_FEES)
        assert banker_fee <= max(0, banker_win) * fee_bps // 10_000
        assert settlement.nets[banker] == banker_win - banker_fee
    else:
        assert -entries.get(accounts.HOUSE_BANK, 0) == sum(before_fees.values())

    # Replaying the same events twice gives the same settlement.
    assert replay(taixiu, bodies) == state
    assert taixiu.settle(replay(taixiu, bodies)) == settlement
    assert replay(taixiu, bodies) == state
    assert taixiu.settle(replay(taixiu, bodies)) == settlement


def chooser(rng: random.Random, quit_pct: int) -> Chooser:
    """A bot: stops betting with probability quit_pct %, else bets on a random candidate
    cell a random legal amount."""

    def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
        if not candidates or rng.randrange(100) < quit_pct:
            return None
        body = rng.choice(list(candidates))
        assert isinstance(body, WagerPlaced)
        # Scale the minimum bet up when that is still legal, to reach stacks and capacity.
        room = taixiu.max_bet_gold(state, seat, body.kind, body.selection)
        return WagerPlaced(seat, body.kind, body.selection, rng.randint(body.amount_gold, max(room, 1)))

    return choose


@settings(max_examples=150, deadline=None)
@given(
    mode=st.sampled_from(["system", "p2p"]),
    stacks=st.lists(st.integers(0, 5_000), min_size=2, max_size=6),
    seed=st.binary(min_size=32, max_size=32),
    bot_seed=st.integers(0, 2**32),
    quit_pct=st.integers(5, 60),
)
def test_rounds_played_by_bots_balance_and_replay_identically(
    mode: str, stacks: list[int], seed: bytes, bot_seed: int, quit_pct: int
) -> None:
    started = HandStarted(
        table_id=TABLE,
        hand_id="h7",
        game="taixiu",
        hand_number=7,
        stake_gold=0,
        fee_bps=taixiu.DEFAULT_FEE_BPS[mode],
        seats_max=6,
        seats=tuple(SeatInfo(i, f"p{i}", gold, guild_id="rong" if i % 2 else "") for i, gold in enumerate(stacks)),
        dealer_seat=0,
        deck_commitment="c",
        options={"mode": mode, "guild_threshold_gold": "100"},
    )
    bodies, state = play_hand(taixiu, started, seed, chooser(random.Random(bot_seed), quit_pct))
    assert isinstance(bodies[-1], HandEnded) and taixiu.is_finished(state)
    settlement = taixiu.settle(state)
    assert sum(settlement.entries().values()) == 0
    for seat, gold in enumerate(stacks):
        assert settlement.nets[seat] >= -gold
    assert replay(taixiu, bodies) == state
    assert taixiu.settle(replay(taixiu, bodies)) == settlement


def betting_done(r: Round) -> taixiu.State:
    """The round's state once every accepted bet is in, before the dice."""
    state = taixiu.initial_state(r.started)
    for body in r.attempts:
        try:
            state = taixiu.apply(state, body)
        except RuleViolation:
            continue
    return state


@settings(max_examples=200, deadline=None)
@given(rounds())
def test_the_house_exposure_is_the_largest_debit_of_house_bank_over_every_roll(r: Round) -> None:
    betting = betting_done(r)
    exposure = taixiu.house_exposure_gold(betting)
    if betting.banker_seat is not None:
        assert exposure == 0  # p2p: the banker is a seat, bounded by TX-7's reservations
        return
    debits = []
    for dice in ALL_DICE:
        state = betting
        if taixiu.pending(state).to_act:
            state = taixiu.apply(state, TimerExpired(COMMUNITY, "betting"))
        state = taixiu.apply(taixiu.apply(state, DiceRolled(dice)), HandEnded("00" * 32))
        debits.append(-taixiu.settle(state).entries().get(accounts.HOUSE_BANK, 0))
    # Never less than any roll's debit (the hold covers every outcome), and no more than the
    # worst of them (the hold takes no more of the bank than a settlement can).
    assert exposure == max(0, *debits)
