"""Pots and side pots (RULES.md 1.3 and 3.3): a winner takes from each other player at most
what the winner put in; folded players' chips stay in; unmatched chips go back."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socai.rules.base import CLOCKWISE, SettlementBuilder, seats_after
from socai.rules.pots import Pot, award_pots, build_pots

TABLE = "t1"


def builder(seats: Sequence[int]) -> SettlementBuilder:
    return SettlementBuilder("holdem", TABLE, "h1", {s: f"p{s}" for s in seats})


def best_of(strength: Mapping[int, int]) -> Callable[[tuple[int, ...]], list[int]]:
    """``winners_of`` for award_pots: the eligible seats with the highest strength."""

    def winners_of(eligible: tuple[int, ...]) -> list[int]:
        top = max(strength[s] for s in eligible)
        return [s for s in eligible if strength[s] == top]

    return winners_of


def flows(b: SettlementBuilder) -> dict[tuple[int, int], int]:
    """(from seat, to seat) → gold, from the builder's transfers."""
    seat_of = {b.account(s): s for s in b.seat_players}
    out: dict[tuple[int, int], int] = defaultdict(int)
    for t in b.transfers:
        out[(seat_of[t.from_account], seat_of[t.to_account])] += t.amount_gold
    return dict(out)


# --- building pots ---------------------------------------------------------------------


def test_equal_contributions_make_one_pot_for_everyone() -> None:
    assert build_pots({0: 100, 1: 100, 2: 100}, live=[0, 1, 2]) == [Pot(300, {0: 100, 1: 100, 2: 100}, (0, 1, 2))]


def test_a_short_all_in_makes_a_main_pot_and_a_side_pot() -> None:
    # Seat 0 is all-in for 50; seats 1 and 2 go on to 100 each.
    assert build_pots({0: 50, 1: 100, 2: 100}, live=[0, 1, 2]) == [
        Pot(150, {0: 50, 1: 50, 2: 50}, (0, 1, 2)),
        Pot(100, {1: 50, 2: 50}, (1, 2)),
    ]


def test_two_all_ins_at_different_levels_make_two_side_pots() -> None:
    assert build_pots({0: 30, 1: 70, 2: 200, 3: 200}, live=[0, 1, 2, 3]) == [
        Pot(120, {0: 30, 1: 30, 2: 30, 3: 30}, (0, 1, 2, 3)),
        Pot(120, {1: 40, 2: 40, 3: 40}, (1, 2, 3)),
        Pot(260, {2: 130, 3: 130}, (2, 3)),
    ]


def test_a_folded_players_chips_stay_in_the_pots_they_reached() -> None:
    # Seat 2 put in 80 and folded; seat 1 is all-in for 50; seat 0 is live with 100.
    assert build_pots({0: 100, 1: 50, 2: 80}, live=[0, 1]) == [
        Pot(150, {0: 50, 1: 50, 2: 50}, (0, 1)),
        Pot(80, {0: 50, 2: 30}, (0,)),
    ]


def test_a_folded_player_is_never_eligible() -> None:
    pots = build_pots({0: 100, 1: 100, 2: 100}, live=[0, 2])
    assert all(1 not in p.eligible for p in pots)
    assert sum(p.amount_gold for p in pots) == 300


def test_chips_above_every_live_contribution_have_no_one_to_win_them() -> None:
    # Seat 0 bet 300 and then left; seats 1 and 2 are live with 100 each.
    assert build_pots({0: 300, 1: 100, 2: 100}, live=[1, 2]) == [
        Pot(300, {0: 100, 1: 100, 2: 100}, (1, 2)),
        Pot(200, {0: 200}, ()),
    ]


def test_eligible_seats_keep_the_order_of_live() -> None:
    assert build_pots({0: 10, 1: 10, 2: 10}, live=[2, 0, 1])[0].eligible == (2, 0, 1)


def test_nothing_put_in_makes_no_pot() -> None:
    assert build_pots({0: 0, 1: 0}, live=[0, 1]) == []


def test_a_negative_contribution_or_a_repeated_live_seat_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        build_pots({0: -5, 1: 10}, live=[0, 1])
    with pytest.raises(AssertionError):
        build_pots({0: 5, 1: 10}, live=[0, 1, 0])


# --- awarding pots ---------------------------------------------------------------------


def test_the_best_hand_takes_the_whole_single_pot() -> None:
    b = builder([0, 1, 2])
    pots = build_pots({0: 100, 1: 100, 2: 100}, live=[0, 1, 2])
    won = award_pots(b, pots, best_of({0: 1, 1: 5, 2: 3}), payout_order=[1, 2, 0])
    assert won == {1: 300}
    assert b.build().nets == {0: -100, 1: 200, 2: -100}
    assert {t.reason for t in b.transfers} == {"pot"}


def test_an_all_in_winner_takes_only_what_it_matched_from_each_player() -> None:
    # Seat 0 (best hand) is all-in for 50; seat 1 beats seat 2 for the side pot.
    b = builder([0, 1, 2])
    pots = build_pots({0: 50, 1: 100, 2: 100}, live=[0, 1, 2])
    won = award_pots(b, pots, best_of({0: 9, 1: 5, 2: 1}), payout_order=[1, 2, 0])
    assert won == {0: 150, 1: 100}
    assert b.build().nets == {0: 100, 1: 0, 2: -100}
    assert flows(b) == {(1, 0): 50, (2, 0): 50, (2, 1): 50}
    assert b.build().by_reason() == {"pot": 100, "side_pot": 50}


def test_a_tied_pot_is_split_with_the_odd_chip_to_the_first_in_payout_order() -> None:
    # 3 × 101 = 303 split between seats 2 and 0: seat 2 is first after the dealer (seat 1).
    b = builder([0, 1, 2])
    pots = build_pots({0: 101, 1: 101, 2: 101}, live=[0, 1, 2])
    order = seats_after([0, 1, 2], start=1, seats_max=3, direction=CLOCKWISE)
    assert order == [2, 0, 1]
    won = award_pots(b, pots, best_of({0: 7, 1: 3, 2: 7}), payout_order=order)
    assert won == {2: 152, 0: 151}
    assert b.build().nets == {0: 50, 1: -101, 2: 51}


def test_each_pot_is_split_on_its_own() -> None:
    # Seats 0 and 1 tie for everything; seat 0 is all-in for 51, seat 1 and seat 2 put in 101.
    # Main pot 153 splits 77/76; the side pot of 100 goes to seat 1 alone.
    b = builder([0, 1, 2])
    pots = build_pots({0: 51, 1: 101, 2: 101}, live=[0, 1, 2])
    won = award_pots(b, pots, best_of({0: 8, 1: 8, 2: 1}), payout_order=[0, 1, 2])
    assert won == {0: 77, 1: 176}
    assert sum(won.values()) == 253


def test_odd_chips_follow_the_payout_order_not_the_seat_numbers() -> None:
    b = builder([0, 1, 2, 3])
    pots = build_pots({0: 1, 1: 1, 2: 1, 3: 1}, live=[0, 1, 2, 3])
    won = award_pots(b, pots, best_of({0: 2, 1: 2, 2: 2, 3: 0}), payout_order=[3, 2, 0, 1])
    assert won == {2: 2, 0: 1, 1: 1}


def test_the_last_live_player_takes_everything_without_a_showdown() -> None:
    def no_showdown(eligible: tuple[int, ...]) -> list[int]:
        raise AssertionError(f"a pot with one eligible seat needs no comparison: {eligible}")

    b = builder([0, 1, 2])
    pots = build_pots({0: 20, 1: 60, 2: 40}, live=[1])
    assert award_pots(b, pots, no_showdown, payout_order=[1, 2, 0]) == {1: 120}
    assert b.build().nets == {0: -20, 1: 60, 2: -40}


def test_an_unmatched_bet_comes_back_without_a_transfer() -> None:
    # Seat 0 bet 300, seat 1 called all-in for 100 and wins: seat 0 keeps its other 200.
    b = builder([0, 1])
    pots = build_pots({0: 300, 1: 100}, live=[0, 1])
    won = award_pots(b, pots, best_of({0: 1, 1: 2}), payout_order=[1, 0])
    assert won == {1: 200, 0: 200}
    assert b.build().nets == {0: -100, 1: 100}
    assert flows(b) == {(0, 1): 100}


def test_chips_of_a_player_who_left_above_every_live_stack_go_back_without_a_transfer() -> None:
    b = builder([0, 1, 2])
    pots = build_pots({0: 300, 1: 100, 2: 100}, live=[1, 2])
    won = award_pots(b, pots, best_of({1: 1, 2: 2}), payout_order=[1, 2, 0])
    assert won == {2: 300, 0: 200}
    assert b.build().nets == {0: -100, 1: -100, 2: 200}
    assert set(b.build().by_reason()) <= {"pot", "side_pot"}  # returning own chips moves nothing


def test_a_winner_outside_the_eligible_seats_is_a_bug() -> None:
    b = builder([0, 1, 2])
    pots = build_pots({0: 10, 1: 10, 2: 10}, live=[0, 1])
    with pytest.raises(AssertionError):
        award_pots(b, pots, lambda eligible: [2], payout_order=[0, 1, 2])


def test_a_winner_missing_from_the_payout_order_is_a_bug() -> None:
    b = builder([0, 1])
    pots = build_pots({0: 10, 1: 10}, live=[0, 1])
    with pytest.raises(AssertionError):
        award_pots(b, pots, best_of({0: 1, 1: 2}), payout_order=[0])


# --- properties ------------------------------------------------------------------------


Hand = tuple[dict[int, int], list[int], dict[int, int], list[int]]


@st.composite
def hands(draw: st.DrawFn) -> Hand:
    """Contributions, live seats (at least one), hand strengths (ties likely), payout order."""
    seats = draw(st.lists(st.integers(0, 8), min_size=2, max_size=7, unique=True))
    contributions = {s: draw(st.integers(0, 500)) for s in seats}
    live = draw(st.lists(st.sampled_from(seats), min_size=1, max_size=len(seats), unique=True))
    strength = {s: draw(st.integers(0, 3)) for s in seats}
    order = draw(st.permutations(seats))
    return contributions, live, strength, list(order)


@given(hands())
def test_pots_add_up_to_the_contributions(hand: Hand) -> None:
    contributions, live, _, _ = hand
    pots = build_pots(contributions, live)
    assert sum(p.amount_gold for p in pots) == sum(contributions.values())
    for seat, put in contributions.items():
        assert sum(p.shares.get(seat, 0) for p in pots) == put
    for p in pots:
        assert sum(p.shares.values()) == p.amount_gold > 0
        assert set(p.eligible) <= set(live)
        assert all(p.shares.get(s, 0) == max(p.shares.values()) for s in p.eligible)


@given(hands())
def test_awarded_pots_balance_and_nobody_loses_more_than_they_put_in(hand: Hand) -> None:
    contributions, live, strength, order = hand
    b = builder(list(contributions))
    won = award_pots(b, build_pots(contributions, live), best_of(strength), order)
    settlement = b.build()
    assert sum(won.values()) == sum(contributions.values())
    assert sum(settlement.nets.values()) == 0
    assert sum(settlement.entries().values()) == 0
    for seat, put in contributions.items():
        assert settlement.nets[seat] == won.get(seat, 0) - put
        assert settlement.nets[seat] >= -put


@given(hands())
def test_a_winner_takes_from_each_opponent_at_most_what_it_put_in(hand: Hand) -> None:
    contributions, live, strength, order = hand
    b = builder(list(contributions))
    award_pots(b, build_pots(contributions, live), best_of(strength), order)
    for (payer, taker), amount in flows(b).items():
        assert payer != taker
        assert amount <= contributions[taker]
        assert amount <= contributions[payer]


@given(hands())
def test_without_ties_each_chip_goes_to_the_best_live_hand_that_matched_it(hand: Hand) -> None:
    contributions, live, strength, order = hand
    unique = {s: i for i, s in enumerate(sorted(contributions, key=lambda s: (strength[s], s)))}
    # The k-th chip a seat put in goes to the best live hand among those who put in k or more,
    # or back to the seat when no live hand matched it: a chip-by-chip restatement of the rule.
    expected: dict[int, int] = defaultdict(int)
    for seat, put in contributions.items():
        for k in range(1, put + 1):
            matched = [s for s in live if contributions[s] >= k]
            expected[max(matched, key=unique.__getitem__) if matched else seat] += 1
    won = award_pots(builder(list(contributions)), build_pots(contributions, live), best_of(unique), order)
    assert won == dict(expected)


@given(hands())
def test_tied_winners_of_a_pot_differ_by_at_most_one_chip_earliest_first(hand: Hand) -> None:
    contributions, live, strength, order = hand
    winners_of = best_of(strength)
    for pot in build_pots(contributions, live):
        if not pot.eligible:
            continue
        b = builder(list(contributions))
        won = award_pots(b, [pot], winners_of, order)
        winners = [s for s in order if s in winners_of(pot.eligible)]
        shares = [won[s] for s in winners]
        assert shares == sorted(shares, reverse=True)
        assert shares[0] - shares[-1] <= 1
        assert sum(shares) == pot.amount_gold


@given(hands())
def test_awarding_is_deterministic(hand: Hand) -> None:
    contributions, live, strength, order = hand
    first, second = builder(list(contributions)), builder(list(contributions))
    award_pots(first, build_pots(contributions, live), best_of(strength), order)
    award_pots(second, build_pots(contributions, live), best_of(strength), order)
    assert first.transfers == second.transfers


def test_relabel_losses_names_the_first_gold_each_account_lost_and_splits_a_transfer_where_it_ends() -> None:
    from socai.rules.base import Transfer
    from socai.rules.pots import relabel_losses

    transfers = [
        Transfer("a", "w", 150, "pot"),
        Transfer("b", "w", 50, "pot"),
        Transfer("a", "w", 300, "side_pot"),
        Transfer("b", "w", 70, "pot"),
    ]
    out = relabel_losses(transfers, {"a": 100, "b": 100}, "ante", ("pot",))
    assert [(t.from_account, t.amount_gold, t.reason) for t in out] == [
        ("a", 100, "ante"),
        ("a", 50, "pot"),
        ("b", 50, "ante"),
        ("a", 300, "side_pot"),  # not one of of_reasons: untouched
        ("b", 50, "ante"),
        ("b", 20, "pot"),
    ]
    # amounts per account pair are unchanged, so the ledger entries are the same
    assert sum(t.amount_gold for t in out) == sum(t.amount_gold for t in transfers)
