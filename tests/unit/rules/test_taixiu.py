"""Tài Xỉu (RULES.md §2): the worked examples, the paytable, fees, the banker and the flow."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pytest

from socai import accounts
from socai.errors import RuleViolation
from socai.events.model import (
    COMMUNITY,
    Body,
    CardsDealt,
    DiceRolled,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
    WagerPlaced,
)
from socai.rules import registry
from socai.rules.autoplay import replay
from socai.rules.base import LegalAction, Settlement
from socai.rules.dice import taixiu

TABLE = "tx1"
SEED_HEX = "00" * 32


# --- helpers ----------------------------------------------------------------------------


def started(
    mode: str = "system",
    *,
    fee_bps: int | None = None,
    seats: Sequence[SeatInfo] | None = None,
    dealer_seat: int = 0,
    stake_gold: int = 0,
    **options: str,
) -> HandStarted:
    """A round at table TABLE: by default three players with 100,000 gold each (system) or
    an owner with 1,000,000 at seat 0 plus two players (p2p)."""
    if seats is None:
        if mode == "p2p":
            seats = (
                SeatInfo(0, "owner", 1_000_000),
                SeatInfo(1, "an", 100_000),
                SeatInfo(2, "binh", 100_000),
            )
        else:
            seats = (SeatInfo(0, "an", 100_000), SeatInfo(1, "binh", 100_000), SeatInfo(2, "chi", 100_000))
    return HandStarted(
        table_id=TABLE,
        hand_id="h1",
        game="taixiu",
        hand_number=1,
        stake_gold=stake_gold,
        fee_bps=taixiu.DEFAULT_FEE_BPS[mode] if fee_bps is None else fee_bps,
        seats_max=10,
        seats=tuple(seats),
        dealer_seat=dealer_seat,
        deck_commitment="c0ffee",
        options={"mode": mode, **options},
    )


def with_options(hs: HandStarted, options: Mapping[str, str]) -> HandStarted:
    return dataclasses.replace(hs, options={**hs.options, **options})


def wager(seat: int, kind: str, *selection: int, gold: int = 100) -> WagerPlaced:
    return WagerPlaced(seat, kind, tuple(selection), gold)


def round_bodies(hs: HandStarted, bets: Sequence[Body], dice: tuple[int, int, int]) -> list[Body]:
    return [hs, *bets, TimerExpired(COMMUNITY, "betting"), DiceRolled(dice), HandEnded(SEED_HEX)]


def play(hs: HandStarted, bets: Sequence[Body], dice: tuple[int, int, int]) -> taixiu.State:
    state = replay(taixiu, round_bodies(hs, bets, dice))
    assert isinstance(state, taixiu.State)
    return state


def finish(state: taixiu.State, dice: tuple[int, int, int]) -> taixiu.State:
    """Close the window (if still open), roll ``dice`` and end the round."""
    if taixiu.pending(state).to_act:
        state = taixiu.apply(state, TimerExpired(COMMUNITY, "betting"))
    return taixiu.apply(taixiu.apply(state, DiceRolled(dice)), HandEnded(SEED_HEX))


def settle(hs: HandStarted, bets: Sequence[Body], dice: tuple[int, int, int]) -> Settlement:
    return taixiu.settle(play(hs, bets, dice))


def odds_of(kind: str, selection: tuple[int, ...], dice: tuple[int, int, int], **options: str) -> int:
    """The net multiple a single bet wins, through the whole engine (0 = lost)."""
    state = play(with_options(started(fee_bps=0), options), [WagerPlaced(0, kind, selection, 100)], dice)
    (result,) = taixiu.bet_results(state)
    return result.odds


def escrow(player: str) -> str:
    return accounts.escrow(TABLE, player)


def paid(settlement: Settlement, from_account: str, to_account: str, reason: str) -> int:
    return sum(
        t.amount_gold
        for t in settlement.transfers
        if (t.from_account, t.to_account, t.reason) == (from_account, to_account, reason)
    )


ALL_DICE = [(a, b, c) for a in range(1, 7) for b in range(1, 7) for c in range(1, 7)]


# --- the module -------------------------------------------------------------------------


def test_registry_serves_taixiu_with_the_contract() -> None:
    assert registry.get("taixiu") is taixiu
    assert taixiu.SPEC.game_id == "taixiu"
    assert taixiu.SPEC.deck is None
    assert (taixiu.SPEC.players_min, taixiu.SPEC.players_max) == (1, 200)
    assert taixiu.SPEC.default_fee_bps == 500
    assert dict(taixiu.DEFAULT_FEE_BPS) == {"system": 500, "p2p": 300}


# --- worked examples of RULES.md 2.2 ----------------------------------------------------


def test_pair_1_2_wins_on_1_2_5() -> None:
    assert odds_of("pair", (1, 2), (1, 2, 5)) == 5


@pytest.mark.parametrize(
    ("pair", "winning_dice"),
    [((3, 4), (4, 3, 6)), ((2, 5), (5, 5, 2)), ((2, 6), (6, 1, 2))],
)
def test_other_valid_pairs_3_4_2_5_2_6_win_when_both_numbers_show(
    pair: tuple[int, int], winning_dice: tuple[int, int, int]
) -> None:
    assert odds_of("pair", pair, winning_dice) == 5


@pytest.mark.parametrize("dice", [(1, 1, 5), (2, 2, 2), (1, 3, 4)])
def test_pair_1_2_loses_unless_both_1_and_2_show(dice: tuple[int, int, int]) -> None:
    assert odds_of("pair", (1, 2), dice) == 0


def test_there_are_exactly_fifteen_pair_bets() -> None:
    accepted = []
    for a in range(0, 8):
        for b in range(0, 8):
            try:
                taixiu.validate_selection("pair", (a, b))
            except RuleViolation:
                continue
            accepted.append((a, b))
    assert len(accepted) == 15
    assert accepted == list(taixiu.PAIRS)


@pytest.mark.parametrize("third_die", [1, 2, 3, 4, 5, 6])
def test_double_two_3s_wins_on_3_3_x_including_3_3_3(third_die: int) -> None:
    assert odds_of("double", (3,), (3, third_die, 3)) == 8


@pytest.mark.parametrize("dice", [(3, 4, 5), (1, 1, 3), (6, 6, 6)])
def test_double_two_3s_loses_with_fewer_than_two_3s(dice: tuple[int, int, int]) -> None:
    assert odds_of("double", (3,), dice) == 0


def test_triple_three_2s_wins_only_on_2_2_2() -> None:
    winners = [dice for dice in ALL_DICE if taixiu.bet_odds("triple", (2,), dice) > 0]
    assert winners == [(2, 2, 2)]
    assert odds_of("triple", (2,), (2, 2, 2)) == 150


def test_4_4_4_loses_both_tai_and_xiu() -> None:
    assert odds_of("tai", (), (4, 4, 4)) == 0
    assert odds_of("xiu", (), (4, 4, 4)) == 0


def test_every_triple_loses_both_tai_and_xiu() -> None:
    for face in range(1, 7):
        dice = (face, face, face)
        assert taixiu.bet_odds("tai", (), dice) == 0
        assert taixiu.bet_odds("xiu", (), dice) == 0


def test_4_4_4_wins_tai_when_triples_do_not_lose_tai_xiu() -> None:
    assert odds_of("tai", (), (4, 4, 4), triple_loses_tai_xiu="false") == 1
    assert odds_of("xiu", (), (3, 3, 3), triple_loses_tai_xiu="false") == 1


def test_total_6_wins_on_2_2_2_tx2() -> None:
    assert odds_of("total", (6,), (2, 2, 2)) == 14


def test_total_6_loses_on_2_2_2_when_totals_lose_on_triples() -> None:
    assert odds_of("total", (6,), (2, 2, 2), total_bets_win_on_triple="false") == 0
    assert odds_of("total", (6,), (1, 2, 3), total_bets_win_on_triple="false") == 14


# --- the paytable -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "selection", "dice", "odds"),
    [
        ("xiu", (), (1, 2, 3), 1),  # total 6
        ("xiu", (), (4, 3, 3), 1),  # total 10, the top of Xỉu
        ("xiu", (), (5, 3, 3), 0),  # total 11 is Tài
        ("tai", (), (5, 3, 3), 1),  # total 11, the bottom of Tài
        ("tai", (), (6, 6, 5), 1),  # total 17
        ("tai", (), (4, 3, 3), 0),
        ("single", (5,), (5, 1, 2), 1),  # 1:1 on one die
        ("single", (5,), (5, 5, 2), 2),  # 1:2 on two dice
        ("single", (5,), (5, 5, 5), 3),  # 1:3 on three dice
        ("single", (5,), (1, 2, 3), 0),
        ("pair", (4, 6), (6, 4, 4), 5),
        ("total", (4,), (1, 1, 2), 50),
        ("double", (6,), (6, 2, 6), 8),
        ("triple", (1,), (1, 1, 1), 150),
        ("any_triple", (), (5, 5, 5), 24),
        ("any_triple", (), (5, 5, 4), 0),
    ],
)
def test_each_payout_of_the_table(kind: str, selection: tuple[int, ...], dice: tuple[int, int, int], odds: int) -> None:
    assert odds_of(kind, selection, dice) == odds


# RULES.md TX-1, the Macau table, written out as in the spec.
TX1_TOTAL_ODDS = {
    4: 50,
    17: 50,
    5: 18,
    16: 18,
    6: 14,
    15: 14,
    7: 12,
    14: 12,
    8: 8,
    13: 8,
    9: 6,
    10: 6,
    11: 6,
    12: 6,
}


@pytest.mark.parametrize("total", sorted(TX1_TOTAL_ODDS))
def test_every_tx1_total_pays_the_macau_odds(total: int) -> None:
    dice = next(d for d in ALL_DICE if sum(d) == total)
    assert odds_of("total", (total,), dice) == TX1_TOTAL_ODDS[total]
    other = next(d for d in ALL_DICE if sum(d) != total)
    assert odds_of("total", (total,), other) == 0


@pytest.mark.parametrize("total", [3, 18, 2, 19])
def test_totals_3_and_18_are_not_offered_tx10(total: int) -> None:
    with pytest.raises(RuleViolation) as err:
        taixiu.validate_selection("total", (total,))
    assert err.value.code == "BAD_SELECTION"


def test_total_payouts_are_configurable_tx1() -> None:
    assert odds_of("total", (4,), (1, 1, 2), total_odds_4_17="60") == 60
    assert odds_of("total", (17,), (6, 6, 5), total_odds_4_17="60") == 60
    assert odds_of("total", (10,), (6, 3, 1), total_odds_9_12="7") == 7


def test_tai_pays_two_times_the_stake_back_tx3() -> None:
    settlement = settle(started(fee_bps=0), [wager(0, "tai", gold=1_000)], (4, 5, 6))
    # The stake stays in the escrow and 1,000 profit comes from the bank: 2,000 back in total.
    assert paid(settlement, accounts.HOUSE_BANK, escrow("an"), "bet_win") == 1_000
    assert settlement.nets[0] == 1_000


def test_a_losing_bet_pays_its_stake_to_the_bank() -> None:
    settlement = settle(started(), [wager(1, "xiu", gold=700)], (4, 5, 6))
    assert paid(settlement, escrow("binh"), accounts.HOUSE_BANK, "bet_loss") == 700
    assert settlement.nets[1] == -700
    assert settlement.fees_gold() == 0


# --- fees (TX-4, TX-5, TX-6, GEN-1) -----------------------------------------------------


def test_hedged_tai_and_xiu_pay_no_fee_on_a_net_loss_tx4() -> None:
    # Xỉu 100 wins 100, Tài 150 loses 150: gross win 100, net −50 → no fee.
    settlement = settle(started(), [wager(0, "tai", gold=150), wager(0, "xiu", gold=100)], (1, 2, 3))
    assert settlement.nets[0] == -50
    assert settlement.fees_gold() == 0


def test_hedged_tai_and_xiu_at_equal_stakes_pay_no_fee() -> None:
    settlement = settle(started(), [wager(0, "tai", gold=100), wager(0, "xiu", gold=100)], (1, 2, 3))
    assert settlement.nets[0] == 0
    assert settlement.fees_gold() == 0


def test_fee_is_on_the_net_result_not_the_gross_win_tx4() -> None:
    # Pair 1-2 wins 5 × 1,000; Tài 1,000 loses: net 4,000, fee 5 % of 4,000 (not of 5,000).
    settlement = settle(started(), [wager(0, "pair", 1, 2, gold=1_000), wager(0, "tai", gold=1_000)], (1, 2, 5))
    assert paid(settlement, escrow("an"), accounts.HOUSE_FEES, "fee") == 200
    assert settlement.nets[0] == 3_800


def test_system_mode_charges_5_percent_of_a_net_win() -> None:
    settlement = settle(started("system"), [wager(0, "tai", gold=10_000)], (6, 5, 4))
    assert settlement.fees_gold() == 500
    assert settlement.nets[0] == 9_500


def test_p2p_mode_charges_3_percent_of_a_net_win() -> None:
    settlement = settle(started("p2p"), [wager(1, "tai", gold=10_000)], (6, 5, 4))
    assert paid(settlement, escrow("an"), accounts.HOUSE_FEES, "fee") == 300
    assert paid(settlement, escrow("owner"), escrow("an"), "bet_win") == 10_000
    assert settlement.nets == {0: -10_000, 1: 9_700, 2: 0}


def test_p2p_banker_pays_3_percent_on_a_winning_round_tx5() -> None:
    bets = [wager(1, "tai", gold=10_000), wager(2, "single", 6, gold=5_000)]
    settlement = settle(started("p2p"), bets, (1, 2, 3))
    assert paid(settlement, escrow("owner"), accounts.HOUSE_FEES, "fee") == 450  # 3 % of 15,000
    assert settlement.nets == {0: 14_550, 1: -10_000, 2: -5_000}


def test_p2p_banker_pays_no_fee_when_the_flag_is_off() -> None:
    bets = [wager(1, "tai", gold=10_000)]
    settlement = settle(started("p2p", banker_pays_fee="false"), bets, (1, 2, 3))
    assert settlement.fees_gold() == 0
    assert settlement.nets[0] == 10_000


def test_p2p_banker_pays_no_fee_on_a_losing_round() -> None:
    settlement = settle(started("p2p"), [wager(1, "tai", gold=10_000)], (6, 6, 5))
    assert paid(settlement, escrow("owner"), accounts.HOUSE_FEES, "fee") == 0
    assert settlement.nets[0] == -10_000


def test_fees_are_rounded_down() -> None:
    # Net win 199: 5 % is 9.95 → 9; the guild's 1 % is 1.99 → 1.
    seats = (SeatInfo(0, "an", 1_000, guild_id="rong"),)
    hs = started(seats=seats, guild_threshold_gold="0")
    settlement = settle(hs, [wager(0, "tai", gold=199)], (6, 5, 4))
    assert paid(settlement, escrow("an"), accounts.HOUSE_FEES, "fee") == 9
    assert paid(settlement, escrow("an"), accounts.guild("rong"), "guild_fee") == 1
    assert settlement.nets[0] == 189


def _guild_round(stake_gold: int, **options: str) -> Settlement:
    hs = with_options(started(seats=(SeatInfo(1, "an", 10_000_000, guild_id="rong"),)), options)
    # Tài wins stake_gold; a losing Xỉu of 1 counts toward the round's bets.
    return settle(hs, [wager(1, "tai", gold=stake_gold - 1), wager(1, "xiu", gold=1)], (6, 5, 4))


def test_guild_takes_1_percent_of_a_member_betting_5_million_tx6() -> None:
    settlement = _guild_round(5_000_000)
    net = 5_000_000 - 1 - 1
    assert paid(settlement, escrow("an"), accounts.guild("rong"), "guild_fee") == net // 100
    assert paid(settlement, escrow("an"), accounts.HOUSE_FEES, "fee") == net * 5 // 100
    assert settlement.nets[1] == net - net // 100 - net * 5 // 100


def test_guild_takes_nothing_below_the_threshold_tx6() -> None:
    settlement = _guild_round(4_999_999)
    assert settlement.by_reason().get("guild_fee", 0) == 0
    assert settlement.fees_gold() == (4_999_999 - 2) * 5 // 100


def test_guild_takes_nothing_from_a_player_without_a_guild() -> None:
    hs = started(seats=(SeatInfo(0, "an", 10_000_000),))
    settlement = settle(hs, [wager(0, "tai", gold=6_000_000)], (6, 5, 4))
    assert settlement.by_reason().get("guild_fee", 0) == 0


def test_guild_never_charges_the_p2p_banker_tx6() -> None:
    # The member loses, so the owner (also a guild member) wins 5,000,000 and pays 3 % only.
    seats = (
        SeatInfo(0, "owner", 100_000_000, guild_id="rong"),
        SeatInfo(1, "an", 10_000_000, guild_id="rong"),
    )
    settlement = settle(started("p2p", seats=seats), [wager(1, "xiu", gold=5_000_000)], (6, 5, 4))
    assert settlement.by_reason().get("guild_fee", 0) == 0
    assert paid(settlement, escrow("owner"), accounts.HOUSE_FEES, "fee") == 150_000


def test_guild_share_is_carved_out_of_the_fee_when_it_does_not_stack() -> None:
    settlement = _guild_round(5_000_000, guild_stacks_with_fee="false")
    net = 5_000_000 - 2
    assert paid(settlement, escrow("an"), accounts.guild("rong"), "guild_fee") == net // 100
    assert paid(settlement, escrow("an"), accounts.HOUSE_FEES, "fee") == net * 5 // 100 - net // 100
    assert settlement.nets[1] == net - net * 5 // 100


def test_guild_experience_goes_to_members_betting_5_million_not_the_owner() -> None:
    seats = (
        SeatInfo(0, "owner", 100_000_000, guild_id="rong"),
        SeatInfo(1, "an", 10_000_000, guild_id="rong"),
        SeatInfo(2, "binh", 10_000_000, guild_id="ho"),
    )
    state = play(
        started("p2p", seats=seats),
        [wager(1, "tai", gold=5_000_000), wager(2, "tai", gold=4_999_999)],
        (1, 2, 3),
    )
    assert taixiu.guild_experience(state) == {"rong": 5}


# --- banker capacity (TX-7) -------------------------------------------------------------


def _p2p_state(owner_gold: int) -> taixiu.State:
    seats = (SeatInfo(0, "owner", owner_gold), SeatInfo(1, "an", 100_000), SeatInfo(2, "binh", 100_000))
    return taixiu.initial_state(started("p2p", seats=seats))


def test_banker_capacity_rejects_a_bet_whose_maximum_payout_does_not_fit_tx7() -> None:
    state = _p2p_state(1_000)
    assert taixiu.banker_available(state) == 1_000
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, wager(1, "triple", 2, gold=7))  # may pay 150 × 7 = 1,050
    assert err.value.code == "BANKER_CAPACITY"
    state = taixiu.apply(state, wager(1, "triple", 2, gold=6))  # reserves 900
    assert taixiu.banker_available(state) == 100
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, wager(2, "tai", gold=101))
    assert err.value.code == "BANKER_CAPACITY"
    state = taixiu.apply(state, wager(2, "tai", gold=100))
    assert taixiu.banker_available(state) == 0


def test_each_bet_reserves_its_best_net_payout_not_its_stake() -> None:
    state = _p2p_state(10_000)
    reserves = {}
    for body in [
        wager(1, "tai", gold=10),
        wager(1, "xiu", gold=10),
        wager(1, "single", 4, gold=10),
        wager(1, "pair", 1, 6, gold=10),
        wager(1, "total", 4, gold=10),
        wager(1, "total", 10, gold=10),
        wager(1, "double", 2, gold=10),
        wager(1, "triple", 2, gold=10),
        wager(1, "any_triple", gold=10),
    ]:
        before = taixiu.banker_available(state)
        state = taixiu.apply(state, body)
        after = taixiu.banker_available(state)
        assert before is not None and after is not None
        reserves[(body.kind, body.selection)] = before - after
    assert reserves == {
        ("tai", ()): 10,
        ("xiu", ()): 10,
        ("single", (4,)): 30,
        ("pair", (1, 6)): 50,
        ("total", (4,)): 500,
        ("total", (10,)): 60,
        ("double", (2,)): 80,
        ("triple", (2,)): 1_500,
        ("any_triple", ()): 240,
    }


def test_system_mode_has_no_banker_capacity() -> None:
    state = taixiu.initial_state(started("system"))
    assert taixiu.banker_available(state) is None
    state = taixiu.apply(state, wager(0, "triple", 6, gold=100_000))
    assert taixiu.seat_available(state, 0) == 0


def test_p2p_banker_pays_a_worst_case_round_from_exactly_the_reserved_stack() -> None:
    state = _p2p_state(1_500)
    state = taixiu.apply(state, wager(1, "triple", 2, gold=10))
    assert taixiu.banker_available(state) == 0
    state = finish(state, (2, 2, 2))
    settlement = taixiu.settle(state)
    assert settlement.nets[0] == -1_500
    assert settlement.nets[1] == 1_500 - 45  # 3 % fee on the 1,500 won


# --- stacks, limits, options ------------------------------------------------------------


def test_a_seats_bets_in_a_round_may_not_exceed_its_stack() -> None:
    state = taixiu.initial_state(started(seats=(SeatInfo(0, "an", 500),)))
    state = taixiu.apply(state, wager(0, "tai", gold=300))
    assert taixiu.seat_available(state, 0) == 200
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, wager(0, "xiu", gold=201))
    assert err.value.code == "BET_ABOVE_STACK"
    state = taixiu.apply(state, wager(0, "xiu", gold=200))
    assert taixiu.legal_actions(state, 0) == ()


def test_table_stake_is_the_minimum_bet() -> None:
    state = taixiu.initial_state(started(stake_gold=50))
    assert taixiu.legal_actions(state, 0) == (LegalAction("wager", 50, 100_000),)
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, wager(0, "tai", gold=49))
    assert err.value.code == "BET_TOO_SMALL"


def test_bet_limits_come_from_the_options_tx8() -> None:
    state = taixiu.initial_state(started(bet_min_gold="10", bet_max_gold="1000"))
    assert taixiu.legal_actions(state, 1) == (LegalAction("wager", 10, 1_000),)
    state = taixiu.apply(state, wager(1, "tai", gold=1_000))
    assert state.bets[-1].amount_gold == 1_000


def test_legal_actions_in_p2p_are_capped_by_the_bankers_unreserved_stack() -> None:
    state = _p2p_state(700)
    assert taixiu.legal_actions(state, 1) == (LegalAction("wager", 1, 700),)
    assert taixiu.legal_actions(state, 0) == ()  # the banker does not bet
    assert taixiu.max_bet_gold(state, 1, "triple", (3,)) == 4  # 150 × 4 = 600 ≤ 700
    assert taixiu.max_bet_gold(state, 1, "any_triple", ()) == 29


@pytest.mark.parametrize(
    ("options", "bad"),
    [
        ({"mode": "casino"}, "mode"),
        ({"guild_bps": "-1"}, "guild_bps"),
        ({"bet_min_gold": "0"}, "bet_min_gold"),
        ({"bet_min_gold": "10", "bet_max_gold": "5"}, "bet_max_gold"),
        ({"betting_window_s": "0"}, "betting_window_s"),
        ({"total_odds_8_13": "0"}, "total_odds_8_13"),
        ({"no_such_flag": "true"}, "no_such_flag"),
        ({"banker_pays_fee": "yes"}, "banker_pays_fee"),
    ],
)
def test_bad_options_are_rejected(options: dict[str, str], bad: str) -> None:
    hs = dataclasses.replace(started(), options=options)
    with pytest.raises(RuleViolation) as err:
        taixiu.initial_state(hs)
    assert err.value.code == "BAD_OPTION"
    assert err.value.details["option"] == bad


def test_default_options_are_the_rules_md_decisions() -> None:
    o = taixiu.Options()
    assert (o.mode, o.guild_bps, o.guild_threshold_gold) == ("system", 100, 5_000_000)
    assert o.guild_stacks_with_fee and o.banker_pays_fee
    assert o.triple_loses_tai_xiu and o.total_bets_win_on_triple
    assert (o.bet_min_gold, o.bet_max_gold, o.betting_window_s) == (1, 0, 30)


@pytest.mark.parametrize(
    ("hs", "code"),
    [
        (started(fee_bps=1_001), "BAD_FEE"),
        (started(seats=()), "BAD_SEAT_COUNT"),
        (started("p2p", seats=(SeatInfo(0, "owner", 1_000),)), "BAD_SEAT_COUNT"),
        (started("p2p", dealer_seat=7), "BAD_DEALER"),
        (started(seats=(SeatInfo(0, "an", 1), SeatInfo(0, "binh", 1))), "BAD_SEATS"),
        (started(seats=(SeatInfo(0, "an", 1), SeatInfo(1, "an", 1))), "BAD_SEATS"),
        (started(seats=(SeatInfo(10, "an", 1),)), "BAD_SEATS"),
        (started(seats=(SeatInfo(0, "an", -1),)), "BAD_STACK"),
        (started(seats=(SeatInfo(0, "an", 1, guild_id="bad guild"),)), "BAD_SEATS"),
        (started(stake_gold=-1), "BAD_STAKE"),
    ],
)
def test_bad_hand_starts_are_rejected(hs: HandStarted, code: str) -> None:
    with pytest.raises(RuleViolation) as err:
        taixiu.initial_state(hs)
    assert err.value.code == code


def test_a_hand_of_another_game_is_rejected() -> None:
    hs = dataclasses.replace(started(), game="holdem")
    with pytest.raises(RuleViolation) as err:
        taixiu.initial_state(hs)
    assert err.value.code == "WRONG_GAME"


# --- the round's flow -------------------------------------------------------------------


def test_betting_window_waits_for_every_player_on_the_betting_timer() -> None:
    state = taixiu.initial_state(started("p2p", betting_window_s="45"))
    pending = taixiu.pending(state)
    assert pending.to_act == (1, 2)  # the banker at seat 0 does not bet
    assert (pending.timer, pending.timeout_s) == ("betting", 45)
    assert not pending.roll_dice and not pending.finished


def test_the_tables_countdown_closes_the_window_then_the_dice_are_rolled() -> None:
    state = taixiu.initial_state(started())
    state = taixiu.apply(state, wager(0, "tai"))
    state = taixiu.apply(state, TimerExpired(COMMUNITY, "betting"))
    assert taixiu.pending(state).roll_dice
    assert taixiu.candidate_actions(state, 1) == []
    assert taixiu.legal_actions(state, 1) == ()
    state = taixiu.apply(state, DiceRolled((1, 2, 3)))
    assert taixiu.pending(state).finished
    assert not taixiu.is_finished(state)
    state = taixiu.apply(state, HandEnded(SEED_HEX))
    assert taixiu.is_finished(state)
    assert taixiu.pending(state).finished


def test_the_window_closes_when_every_seat_is_done_betting() -> None:
    state = taixiu.initial_state(started())
    state = taixiu.apply(state, TimerExpired(0, "betting"))
    state = taixiu.apply(state, TimerExpired(2, "betting"))
    assert taixiu.pending(state).to_act == (1,)
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, wager(0, "tai"))
    assert err.value.code == "BETTING_CLOSED"
    state = taixiu.apply(state, wager(1, "xiu"))
    state = taixiu.apply(state, TimerExpired(1, "betting"))
    assert taixiu.pending(state).roll_dice


def test_a_disconnected_players_bets_stand_tx9() -> None:
    hs = started(fee_bps=0)
    bets: list[Body] = [wager(0, "tai", gold=1_000), PlayerDisconnected(0)]
    settlement = settle(hs, bets, (6, 5, 4))
    assert settlement.nets[0] == 1_000


def test_a_disconnected_player_may_bet_again_after_reconnecting() -> None:
    state = taixiu.initial_state(started())
    state = taixiu.apply(state, PlayerDisconnected(1))
    assert taixiu.pending(state).to_act == (0, 1, 2)
    state = taixiu.apply(state, PlayerReconnected(1))
    state = taixiu.apply(state, wager(1, "tai"))
    assert len(state.bets) == 1


def test_a_player_who_leaves_keeps_their_bets_but_bets_no_more_tx9() -> None:
    state = taixiu.initial_state(started(fee_bps=0))
    state = taixiu.apply(state, wager(2, "xiu", gold=400))
    state = taixiu.apply(state, PlayerLeft(2))
    assert taixiu.pending(state).to_act == (0, 1)
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, wager(2, "tai"))
    assert err.value.code == "SEAT_LEFT"
    state = finish(state, (1, 1, 2))
    assert taixiu.settle(state).nets[2] == 400


def test_the_window_closes_when_the_last_betting_seat_leaves() -> None:
    state = taixiu.initial_state(started(seats=(SeatInfo(0, "an", 100),)))
    state = taixiu.apply(state, PlayerLeft(0))
    assert taixiu.pending(state).roll_dice


def test_candidate_actions_are_legal_and_cover_every_bet_kind() -> None:
    state = taixiu.initial_state(started())
    candidates = taixiu.candidate_actions(state, 1)
    assert sorted(c.kind for c in candidates if isinstance(c, WagerPlaced)) == sorted(taixiu.BET_KINDS)
    for body in candidates:
        assert isinstance(body, WagerPlaced) and body.amount_gold == 1
        taixiu.apply(state, body)


def test_candidate_actions_leave_out_what_the_banker_cannot_cover() -> None:
    state = _p2p_state(100)
    # A triple at 1 gold may pay 150 > 100; every other kind (the total offered is 4, 1:50) fits.
    kinds = {c.kind for c in taixiu.candidate_actions(state, 1) if isinstance(c, WagerPlaced)}
    assert kinds == set(taixiu.BET_KINDS) - {"triple"}


def test_bet_results_give_the_per_bet_breakdown() -> None:
    state = play(
        started(),
        [wager(0, "tai", gold=100), wager(0, "single", 6, gold=50), wager(1, "xiu", gold=30)],
        (6, 6, 1),
    )
    results = [(r.bet.kind, r.won, r.net_gold) for r in taixiu.bet_results(state)]
    assert results == [("tai", True, 100), ("single", True, 100), ("xiu", False, -30)]


# --- illegal moves: a stable code, and the state is unchanged ---------------------------


def _betting_state() -> tuple[list[Body], taixiu.State]:
    """p2p, owner 10,000; seat 1 has 5,000 and has bet; seat 2 (500) timed out; seat 3 left."""
    seats = (
        SeatInfo(0, "owner", 10_000),
        SeatInfo(1, "an", 5_000),
        SeatInfo(2, "binh", 500),
        SeatInfo(3, "chi", 500),
        SeatInfo(4, "dung", 100_000),
    )
    hs = started("p2p", seats=seats, stake_gold=10, bet_max_gold="3000")
    bodies: list[Body] = [hs, wager(1, "tai", gold=2_500), TimerExpired(2, "betting"), PlayerLeft(3)]
    state = replay(taixiu, bodies)
    return bodies, state


ILLEGAL_BETS: list[tuple[str, WagerPlaced, str]] = [
    ("unknown kind", WagerPlaced(1, "big", (), 100), "BAD_BET_KIND"),
    ("kind in capitals", WagerPlaced(1, "TAI", (), 100), "BAD_BET_KIND"),
    ("tai with a number", WagerPlaced(1, "tai", (5,), 100), "BAD_SELECTION"),
    ("single without a number", WagerPlaced(1, "single", (), 100), "BAD_SELECTION"),
    ("single on 7", WagerPlaced(1, "single", (7,), 100), "BAD_SELECTION"),
    ("single on 0", WagerPlaced(1, "single", (0,), 100), "BAD_SELECTION"),
    ("pair written high first", WagerPlaced(1, "pair", (2, 1), 100), "BAD_SELECTION"),
    ("pair of one number", WagerPlaced(1, "pair", (3, 3), 100), "BAD_SELECTION"),
    ("pair of three numbers", WagerPlaced(1, "pair", (1, 2, 3), 100), "BAD_SELECTION"),
    ("total 3", WagerPlaced(1, "total", (3,), 100), "BAD_SELECTION"),
    ("total 18", WagerPlaced(1, "total", (18,), 100), "BAD_SELECTION"),
    ("double on two numbers", WagerPlaced(1, "double", (3, 4), 100), "BAD_SELECTION"),
    ("triple of a bool", WagerPlaced(1, "triple", (True,), 100), "BAD_SELECTION"),
    ("any triple with a number", WagerPlaced(1, "any_triple", (2,), 100), "BAD_SELECTION"),
    ("amount not an int", WagerPlaced(1, "tai", (), 100.0), "BAD_AMOUNT"),  # type: ignore[arg-type]
    ("amount a bool", WagerPlaced(1, "tai", (), True), "BAD_AMOUNT"),
    ("zero amount", WagerPlaced(1, "tai", (), 0), "BET_TOO_SMALL"),
    ("negative amount", WagerPlaced(1, "tai", (), -100), "BET_TOO_SMALL"),
    ("below the table stake", WagerPlaced(1, "tai", (), 9), "BET_TOO_SMALL"),
    ("above the table maximum", WagerPlaced(4, "tai", (), 3_001), "BET_TOO_LARGE"),
    ("above the unreserved stack", WagerPlaced(1, "xiu", (), 2_501), "BET_ABOVE_STACK"),
    ("unknown seat", WagerPlaced(9, "tai", (), 100), "UNKNOWN_SEAT"),
    ("the community seat", WagerPlaced(COMMUNITY, "tai", (), 100), "UNKNOWN_SEAT"),
    ("the banker", WagerPlaced(0, "tai", (), 100), "BANKER_CANNOT_BET"),
    ("a seat done betting", WagerPlaced(2, "tai", (), 100), "BETTING_CLOSED"),
    ("a seat that left", WagerPlaced(3, "tai", (), 100), "SEAT_LEFT"),
    ("beyond the banker's capacity", WagerPlaced(4, "triple", (1,), 100), "BANKER_CAPACITY"),
]


@pytest.mark.parametrize(("why", "body", "code"), ILLEGAL_BETS, ids=[case[0] for case in ILLEGAL_BETS])
def test_illegal_bet_is_rejected_and_changes_nothing(why: str, body: WagerPlaced, code: str) -> None:
    bodies, state = _betting_state()
    pending_before = taixiu.pending(state)
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, body)
    assert err.value.code == code, why
    assert state == replay(taixiu, bodies)
    assert taixiu.pending(state) == pending_before
    assert taixiu.banker_available(state) == 10_000 - 2_500


ILLEGAL_EVENTS: list[tuple[str, list[Body], Body, str]] = [
    ("dice during betting", [], DiceRolled((1, 2, 3)), "BETTING_OPEN"),
    ("end before the dice", [TimerExpired(COMMUNITY, "betting")], HandEnded(SEED_HEX), "DICE_NOT_ROLLED"),
    ("two dice", [TimerExpired(COMMUNITY, "betting")], DiceRolled((1, 2)), "BAD_DICE"),
    ("a die of 7", [TimerExpired(COMMUNITY, "betting")], DiceRolled((1, 2, 7)), "BAD_DICE"),
    ("a die of 0", [TimerExpired(COMMUNITY, "betting")], DiceRolled((0, 2, 3)), "BAD_DICE"),
    (
        "dice twice",
        [TimerExpired(COMMUNITY, "betting"), DiceRolled((1, 2, 3))],
        DiceRolled((4, 5, 6)),
        "DICE_ALREADY_ROLLED",
    ),
    ("bet after the window", [TimerExpired(COMMUNITY, "betting")], wager(1, "tai"), "BETTING_CLOSED"),
    (
        "window closed twice",
        [TimerExpired(COMMUNITY, "betting")],
        TimerExpired(COMMUNITY, "betting"),
        "BETTING_CLOSED",
    ),
    ("a turn timer", [], TimerExpired(1, "turn"), "WRONG_TIMER"),
    ("a done seat times out again", [], TimerExpired(2, "betting"), "SEAT_NOT_BETTING"),
    ("the banker times out", [], TimerExpired(0, "betting"), "SEAT_NOT_BETTING"),
    ("timer for an unknown seat", [], TimerExpired(8, "betting"), "UNKNOWN_SEAT"),
    ("an unknown seat disconnects", [], PlayerDisconnected(8), "UNKNOWN_SEAT"),
    ("a seat leaves twice", [], PlayerLeft(3), "SEAT_LEFT"),
    ("cards in a dice game", [], CardsDealt(()), "UNEXPECTED_EVENT"),
    (
        "anything after the end",
        [TimerExpired(COMMUNITY, "betting"), DiceRolled((1, 2, 3)), HandEnded(SEED_HEX)],
        PlayerLeft(1),
        "HAND_FINISHED",
    ),
]


@pytest.mark.parametrize(("why", "before", "body", "code"), ILLEGAL_EVENTS, ids=[case[0] for case in ILLEGAL_EVENTS])
def test_illegal_event_is_rejected_and_changes_nothing(why: str, before: list[Body], body: Body, code: str) -> None:
    bodies, _ = _betting_state()
    bodies = bodies + before
    state = replay(taixiu, bodies)
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, body)
    assert err.value.code == code, why
    assert state == replay(taixiu, bodies)


def test_too_many_bets_from_one_seat_are_rejected() -> None:
    state = taixiu.initial_state(started())
    for _ in range(taixiu.MAX_BETS_PER_SEAT):
        state = taixiu.apply(state, wager(0, "tai", gold=1))
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, wager(0, "tai", gold=1))
    assert err.value.code == "TOO_MANY_BETS"
    assert taixiu.candidate_actions(state, 0) == []


def test_settle_before_the_end_is_rejected() -> None:
    _, state = _betting_state()
    with pytest.raises(RuleViolation) as err:
        taixiu.settle(state)
    assert err.value.code == "HAND_NOT_OVER"


def test_a_carved_out_guild_share_never_exceeds_the_fee() -> None:
    # guild 2 % out of a 1 % fee: the guild gets the whole 1 % fee and the house nothing.
    seats = (SeatInfo(0, "an", 100_000, guild_id="rong"),)
    hs = started(fee_bps=100, seats=seats, guild_bps="200", guild_threshold_gold="0", guild_stacks_with_fee="false")
    settlement = settle(hs, [wager(0, "tai", gold=10_000)], (6, 5, 4))
    assert paid(settlement, escrow("an"), accounts.guild("rong"), "guild_fee") == 100
    assert settlement.fees_gold() == 0
    assert settlement.nets[0] == 9_900


def test_a_system_round_whose_possible_payouts_overflow_int64_is_refused() -> None:
    rich = 2**62
    state = taixiu.initial_state(started(seats=(SeatInfo(0, "an", rich),)))
    with pytest.raises(RuleViolation) as err:
        taixiu.apply(state, wager(0, "triple", 1, gold=rich // 10))  # may pay 15 × 2**62 > 2**63
    assert err.value.code == "BET_TOO_LARGE"


# --- the house's exposure (system mode) ---------------------------------------------------


def exposure_after(*bets: WagerPlaced, **options: str) -> int:
    state = taixiu.initial_state(with_options(started("system"), options))
    for body in bets:
        state = taixiu.apply(state, body)
    return taixiu.house_exposure_gold(state)


def test_no_bet_exposes_the_house_to_nothing() -> None:
    assert exposure_after() == 0


def test_a_tai_bet_exposes_the_house_to_its_stake() -> None:
    assert exposure_after(wager(0, "tai", gold=20_000)) == 20_000


def test_tai_and_xiu_of_one_size_cost_the_house_nothing_on_any_roll() -> None:
    # One of them wins and the other pays for it; on a triple both lose.
    assert exposure_after(wager(0, "tai", gold=500), wager(1, "xiu", gold=500)) == 0


def test_a_triple_bet_exposes_the_house_to_150_times_it() -> None:
    assert exposure_after(wager(0, "triple", 6, gold=10)) == 1_500


def test_the_stakes_the_house_takes_on_a_roll_offset_what_it_pays_on_it() -> None:
    # 1-1-1 pays the triple 1,500 and three 1s on single 1 (300), and the tai bet loses 400.
    bets = (wager(0, "triple", 1, gold=10), wager(1, "single", 1, gold=100), wager(2, "tai", gold=400))
    assert exposure_after(*bets) == 1_500 + 300 - 400


def test_a_triple_that_wins_tai_too_exposes_the_house_to_both_payouts() -> None:
    bets = (wager(0, "any_triple", gold=10), wager(1, "tai", gold=100))
    # Triples lose Tài (the default): on 5-5-5 the house pays 240 and takes the Tài's 100.
    assert exposure_after(*bets) == 240 - 100
    # Without that rule 5-5-5 (total 15) is a Tài too: the house pays 240 + 100.
    assert exposure_after(*bets, triple_loses_tai_xiu="false") == 240 + 100


def test_p2p_rounds_expose_the_house_to_nothing() -> None:
    state = taixiu.apply(_p2p_state(10_000), wager(1, "triple", 2, gold=10))
    assert taixiu.house_exposure_gold(state) == 0
