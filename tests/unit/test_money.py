"""Integer gold (DESIGN.md "Money"): fees in basis points, even splits, pro-rata shortfalls."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socai import money

# A float or a negative share is a bug of the caller: refused by money's own check, or, in
# the compiled core (make native), by the typed boundary before it.
MISUSE = (AssertionError, TypeError)

gold = st.integers(min_value=0, max_value=10**15)
seat_ids = st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=9, unique=True)


# --- fee --------------------------------------------------------------------------------


def test_five_percent_of_1000_is_50() -> None:
    assert money.fee(1000, 500) == 50


def test_a_fee_is_rounded_down() -> None:
    assert money.fee(1999, 500) == 99  # 99.95
    assert money.fee(19, 500) == 0  # 0.95
    assert money.fee(33, 300) == 0  # 0.99
    assert money.fee(34, 300) == 1  # 1.02


def test_no_fee_on_a_zero_or_losing_result() -> None:
    assert money.fee(0, 500) == 0
    assert money.fee(-1000, 500) == 0


def test_zero_bps_is_no_fee_and_10000_bps_is_everything() -> None:
    assert money.fee(12345, 0) == 0
    assert money.fee(12345, 10_000) == 12345


@pytest.mark.parametrize("fee_bps", [-1, 10_001])
def test_fee_bps_outside_0_to_10000_is_a_bug(fee_bps: int) -> None:
    with pytest.raises(AssertionError):
        money.fee(1000, fee_bps)


@pytest.mark.parametrize(("amount", "fee_bps"), [(100.0, 500), (100, 5.0), (True, 500)])
def test_fee_takes_int_gold_only(amount: object, fee_bps: object) -> None:
    with pytest.raises(MISUSE):
        money.fee(amount, fee_bps)  # type: ignore[arg-type]


@given(amount=st.integers(min_value=-(10**15), max_value=10**15), fee_bps=st.integers(0, 10_000))
def test_a_fee_never_exceeds_its_share_of_a_win(amount: int, fee_bps: int) -> None:
    charged = money.fee(amount, fee_bps)
    assert 0 <= charged <= max(amount, 0)
    assert charged * 10_000 <= max(amount, 0) * fee_bps < (charged + 1) * 10_000


# --- split_evenly ------------------------------------------------------------------------


def test_an_even_split_has_no_remainder() -> None:
    assert money.split_evenly(300, [4, 1, 2]) == {4: 100, 1: 100, 2: 100}


def test_odd_chips_go_one_at_a_time_in_the_order_given() -> None:
    # 302 among seats 4, 1, 2 (playing order from the first seat after the dealer): 101 101 100.
    assert money.split_evenly(302, [4, 1, 2]) == {4: 101, 1: 101, 2: 100}
    assert money.split_evenly(302, [2, 1, 4]) == {2: 101, 1: 101, 4: 100}


def test_a_split_smaller_than_the_recipients_gives_the_first_ones_a_chip_each() -> None:
    assert money.split_evenly(2, ["c", "a", "b"]) == {"c": 1, "a": 1, "b": 0}


def test_a_split_of_nothing_gives_zero_to_everyone() -> None:
    assert money.split_evenly(0, [1, 2]) == {1: 0, 2: 0}


def test_a_split_among_nobody_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        money.split_evenly(10, [])


def test_a_split_with_a_repeated_recipient_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        money.split_evenly(10, [1, 2, 1])


def test_a_split_of_a_negative_or_float_amount_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        money.split_evenly(-3, [1, 2])
    with pytest.raises(MISUSE):
        money.split_evenly(3.0, [1, 2])  # type: ignore[arg-type]


@given(amount=gold, recipients=seat_ids)
def test_a_split_adds_up_and_shares_differ_by_at_most_one_chip_in_order(amount: int, recipients: list[int]) -> None:
    shares = money.split_evenly(amount, recipients)
    assert sum(shares.values()) == amount
    in_order = [shares[r] for r in recipients]
    assert in_order == sorted(in_order, reverse=True)
    assert in_order[0] - in_order[-1] <= 1
    assert money.split_evenly(amount, recipients) == shares


# --- pro_rata ----------------------------------------------------------------------------


def test_pro_rata_pays_every_claim_in_full_when_covered() -> None:
    assert money.pro_rata(300, [("a", 100), ("b", 200)]) == {"a": 100, "b": 200}


def test_pro_rata_pays_claims_exactly_when_there_is_more_than_enough() -> None:
    # The surplus is not invented into anyone's share: it stays with the payer.
    assert money.pro_rata(1000, [("a", 100), ("b", 200)]) == {"a": 100, "b": 200}


def test_a_shortfall_is_shared_in_proportion_to_the_claims() -> None:
    # Owes 300 (100 to a, 200 to b) but has 150: a gets 50, b gets 100.
    assert money.pro_rata(150, [("a", 100), ("b", 200)]) == {"a": 50, "b": 100}


def test_a_shortfall_remainder_goes_one_chip_at_a_time_in_claim_order() -> None:
    # 100 over three equal claims of 100: floor gives 33 each, the odd chip goes to the first.
    assert money.pro_rata(100, [("b", 100), ("a", 100), ("c", 100)]) == {"b": 34, "a": 33, "c": 33}
    assert money.pro_rata(101, [("b", 100), ("a", 100), ("c", 100)]) == {"b": 34, "a": 34, "c": 33}


def test_a_shortfall_remainder_follows_claim_order_not_claim_size() -> None:
    # 10 over claims 1, 3, 7 (total 11): floors 0, 2, 6 leave 2 chips for the first two in order.
    assert money.pro_rata(10, [("x", 1), ("y", 3), ("z", 7)]) == {"x": 1, "y": 3, "z": 6}


def test_nothing_to_share_pays_nobody() -> None:
    assert money.pro_rata(0, [("a", 5), ("b", 5)]) == {"a": 0, "b": 0}


def test_a_zero_claim_gets_nothing_even_from_a_remainder() -> None:
    assert money.pro_rata(5, [("zero", 0), ("a", 3), ("b", 3)]) == {"zero": 0, "a": 3, "b": 2}


def test_pro_rata_refuses_negative_claims_repeats_and_floats() -> None:
    with pytest.raises(AssertionError):
        money.pro_rata(10, [("a", -1), ("b", 5)])
    with pytest.raises(AssertionError):
        money.pro_rata(10, [("a", 5), ("a", 5)])
    with pytest.raises(AssertionError):
        money.pro_rata(-10, [("a", 5)])
    with pytest.raises(MISUSE):
        money.pro_rata(10, [("a", 5.0)])  # type: ignore[list-item]


claims_lists = st.lists(
    st.tuples(st.integers(0, 9), st.integers(min_value=0, max_value=10**12)),
    min_size=1,
    max_size=9,
    unique_by=lambda kc: kc[0],
)


@given(amount=gold, claims=claims_lists)
def test_pro_rata_never_pays_above_a_claim_and_adds_up(amount: int, claims: list[tuple[int, int]]) -> None:
    shares = money.pro_rata(amount, claims)
    total = sum(c for _, c in claims)
    assert list(shares) == [k for k, _ in claims]
    assert all(0 <= shares[k] <= c for k, c in claims)
    assert sum(shares.values()) == min(amount, total)
    assert money.pro_rata(amount, claims) == shares


@given(amount=gold, claims=claims_lists)
def test_pro_rata_shares_are_the_floor_or_one_above(amount: int, claims: list[tuple[int, int]]) -> None:
    total = sum(c for _, c in claims)
    shares = money.pro_rata(amount, claims)
    if amount < total:
        for k, c in claims:
            assert shares[k] - amount * c // total in (0, 1)


# --- is_gold -----------------------------------------------------------------------------


def test_gold_is_an_int64_int() -> None:
    assert money.is_gold(0) and money.is_gold(2**63 - 1) and money.is_gold(-(2**63))
    assert not money.is_gold(2**63)
    assert not money.is_gold(1.0)
    assert not money.is_gold(True)
    assert not money.is_gold("5")
