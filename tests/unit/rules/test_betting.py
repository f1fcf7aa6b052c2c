"""The kit's betting round (``socai.rules.betting``), as Liêng, Liêng Sảnh and the Ba Cây
games will use it: k × S raises with a cap, free amounts, voluntary all-in, a check round
(Liêng Sảnh's "Chuyển") closing the round, raises reopening it, timeouts and turns."""

from __future__ import annotations

import pytest

from socai.errors import RuleViolation
from socai.events.model import ActionKind
from socai.rules import betting
from socai.rules.betting import Sizing

S = 100
LIENG = Sizing(min_gold=S, max_gold=30 * S, step_gold=S)  # LI-4 / LS-3: k × S, k 1..30


def code(sizing: Sizing | None, kind: ActionKind, amount: int, owed: int, remaining: int) -> str:
    with pytest.raises(RuleViolation) as err:
        betting.check_action(sizing, kind, amount, owed, remaining)
    return err.value.code


def test_a_lieng_raise_is_a_whole_number_of_stakes_from_one_to_thirty() -> None:
    assert betting.check_action(LIENG, ActionKind.RAISE, 200 + 3 * S, 200, 10_000) == 500
    assert code(LIENG, ActionKind.RAISE, 200 + 150, 200, 10_000) == "BAD_AMOUNT"
    assert code(LIENG, ActionKind.RAISE, 200 + 31 * S, 200, 10_000) == "RAISE_TOO_LARGE"
    assert code(LIENG, ActionKind.RAISE, 200 + 50, 200, 10_000) == "RAISE_TOO_SMALL"
    assert betting.wager_bounds(LIENG, 200, 10_000) == (200 + S, 200 + 30 * S)


def test_the_largest_raise_keeps_a_chip_unless_all_in_is_allowed() -> None:
    assert betting.wager_bounds(LIENG, 0, 1_050) == (S, 1_000)  # 10 × S, one step below everything
    assert code(LIENG, ActionKind.BET, 1_000, 0, 1_000) == "ALL_IN_NOT_ALLOWED"
    free = Sizing(1, None, all_in=True)
    assert betting.wager_bounds(free, 30, 500) == (31, 500)
    assert betting.check_action(free, ActionKind.ALL_IN, 500, 30, 500) == 500


def test_a_short_stack_may_always_call_all_it_has() -> None:
    assert betting.check_action(LIENG, ActionKind.CALL, 70, 300, 70) == 70
    assert betting.check_action(LIENG, ActionKind.ALL_IN, 70, 300, 70) == 70
    assert code(LIENG, ActionKind.ALL_IN, 500, 300, 500) == "ALL_IN_NOT_ALLOWED"
    assert [a.kind for a in betting.legal_actions(LIENG, 300, 70)] == ["call", "all_in", "fold"]


def test_check_call_and_bet_kinds_follow_what_is_owed() -> None:
    assert code(LIENG, ActionKind.CHECK, 0, 100, 1_000) == "BAD_BET_KIND"
    assert code(LIENG, ActionKind.CALL, 0, 0, 1_000) == "BAD_BET_KIND"
    assert code(LIENG, ActionKind.BET, 200, 100, 1_000) == "BAD_BET_KIND"
    assert code(LIENG, ActionKind.RAISE, 200, 0, 1_000) == "BAD_BET_KIND"
    assert code(None, ActionKind.BET, 200, 0, 1_000) == "BAD_BET_KIND"  # a round without bets
    assert code(LIENG, ActionKind.CALL, 50, 100, 1_000) == "BAD_AMOUNT"


def test_a_raise_reopens_the_round_and_a_call_does_not() -> None:
    put_in, acted = betting.after_put_in({0: 100, 1: 100, 2: 0}, frozenset({0, 1}), 2, 300)
    assert put_in == {0: 100, 1: 100, 2: 300} and acted == {2}
    put_in, acted = betting.after_put_in(put_in, acted, 0, 200)
    assert acted == {0, 2}


def test_checks_all_the_way_round_close_the_round_with_nobody_adding() -> None:
    order = (4, 2, 0)  # counterclockwise from the opener (GEN-2)
    zero = dict.fromkeys(order, 0)
    remaining = dict.fromkeys(order, 1_000)
    assert betting.waiting(order, zero, frozenset(), (), remaining) == [4, 2, 0]
    assert betting.waiting(order, zero, frozenset({4, 2}), (), remaining) == [0]
    assert betting.waiting(order, zero, frozenset({4, 2, 0}), (), remaining) == []


def test_folded_and_all_in_seats_owe_nothing_and_turns_go_round_in_order() -> None:
    order = (4, 2, 0)
    put_in = {4: 300, 2: 100, 0: 50}
    owing = betting.waiting(order, put_in, frozenset({4}), {2}, {4: 700, 2: 900, 0: 0})
    assert owing == []  # seat 2 folded, seat 0 all-in, seat 4 made the price
    owing = betting.waiting(order, put_in, frozenset({4}), (), {4: 700, 2: 900, 0: 10})
    assert owing == [2, 0]
    assert betting.next_seat(order, owing, 4, None) == 2
    assert betting.next_seat(order, [4], 0, None) == 4


def test_a_timeout_checks_when_a_check_is_free_and_folds_otherwise() -> None:
    assert betting.timeout_checks(0)
    assert not betting.timeout_checks(100)
    assert not betting.timeout_checks(0, check_allowed=False)  # a forced bet is never free


@pytest.mark.parametrize("value", [kind.value for kind in ActionKind])
def test_an_action_kind_is_read_from_its_value_or_itself(value: str) -> None:
    assert betting.action_kind(value) is ActionKind(value)
    assert betting.action_kind(ActionKind(value)) is ActionKind(value)


@pytest.mark.parametrize("bad", ["", "Check", "allin", 1, None, ["check"], b"check"])
def test_anything_but_an_action_kind_is_bad_bet_kind(bad: object) -> None:
    with pytest.raises(RuleViolation) as err:
        betting.action_kind(bad)
    assert err.value.code == "BAD_BET_KIND"
