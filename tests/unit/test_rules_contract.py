"""The contract every game module shares (``socai.rules.base``) and the registry of games."""

from __future__ import annotations

import dataclasses
import importlib.abc
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socai import cards
from socai.errors import InvalidArgument, NotFound, RuleViolation
from socai.rules import registry
from socai.rules.base import (
    CLOCKWISE,
    COUNTERCLOCKWISE,
    MOVE_KINDS,
    RULES_CHAPTERS,
    GameSpec,
    SettlementBuilder,
    match_flows,
    options_to_strings,
    parse_options,
    seats_after,
    seats_in_order,
)

# --- parse_options ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SampleOptions:
    """A game's flags as a game module declares them (with ``from __future__ import annotations``)."""

    fast_mode: bool = False
    max_raises: int = 3
    wheel: str = "lowest"

    def validate(self) -> None:
        if not 0 <= self.max_raises <= 10:
            raise RuleViolation("BAD_OPTION", "max_raises is 0..10", option="max_raises")


# The same flags with real classes as field types (a module without postponed annotations).
PlainOptions = dataclasses.make_dataclass(
    "PlainOptions", [("fast_mode", bool, False), ("max_raises", int, 3), ("wheel", str, "lowest")], frozen=True
)


def test_no_options_give_the_defaults() -> None:
    assert parse_options(SampleOptions, {}) == SampleOptions()


def test_options_are_parsed_by_their_field_type() -> None:
    parsed = parse_options(SampleOptions, {"fast_mode": "true", "max_raises": "7", "wheel": "none"})
    assert parsed == SampleOptions(fast_mode=True, max_raises=7, wheel="none")


def test_options_of_a_dataclass_with_class_annotations_parse_the_same() -> None:
    parsed = parse_options(PlainOptions, {"fast_mode": "true", "max_raises": "7", "wheel": "none"})
    assert (parsed.fast_mode, parsed.max_raises, parsed.wheel) == (True, 7, "none")


def test_false_is_false_and_a_negative_int_is_an_int() -> None:
    assert parse_options(PlainOptions, {"fast_mode": "false", "max_raises": "-2"}) == PlainOptions(
        fast_mode=False, max_raises=-2
    )


def test_an_unknown_option_is_bad_option() -> None:
    with pytest.raises(RuleViolation) as err:
        parse_options(SampleOptions, {"fast_mode": "true", "slow_mode": "true"})
    assert err.value.code == "BAD_OPTION"
    assert err.value.details == {"option": "slow_mode"}


@pytest.mark.parametrize("text", ["True", "FALSE", "1", "0", "yes", "", " true"])
def test_a_bool_is_exactly_true_or_false(text: str) -> None:
    with pytest.raises(RuleViolation) as err:
        parse_options(SampleOptions, {"fast_mode": text})
    assert err.value.code == "BAD_OPTION"


@pytest.mark.parametrize("text", ["", "1.5", "3e2", "0x10", "1_000", " 5", "5 ", "+5", "٣", "five"])
def test_an_int_is_plain_ascii_decimal(text: str) -> None:
    # int() alone would take "1_000", " 5", "+5" and "٣" (an Arabic-Indic three).
    with pytest.raises(RuleViolation) as err:
        parse_options(SampleOptions, {"max_raises": text})
    assert err.value.code == "BAD_OPTION"


def test_a_value_that_is_not_a_string_is_bad_option() -> None:
    with pytest.raises(RuleViolation) as err:
        parse_options(SampleOptions, {"max_raises": 5})  # type: ignore[dict-item]
    assert err.value.code == "BAD_OPTION"


def test_a_value_that_cannot_be_hashed_is_bad_option() -> None:
    with pytest.raises(RuleViolation) as err:
        parse_options(SampleOptions, {"wheel": ["a"]})  # type: ignore[dict-item]
    assert err.value.code == "BAD_OPTION"


def test_a_map_parsed_again_gives_the_record_parsed_first_and_a_refused_one_is_refused_again() -> None:
    raw = {"fast_mode": "true", "max_raises": "4"}
    first = parse_options(SampleOptions, raw)
    assert parse_options(SampleOptions, dict(raw)) is first  # kept: the records are frozen
    assert parse_options(PlainOptions, raw) == PlainOptions(fast_mode=True, max_raises=4)  # by class
    reordered = parse_options(SampleOptions, {"max_raises": "4", "fast_mode": "true"})
    assert reordered == first
    for _ in range(2):
        with pytest.raises(RuleViolation):
            parse_options(SampleOptions, {"max_raises": "12"})


def test_a_str_option_takes_any_text() -> None:
    assert parse_options(SampleOptions, {"wheel": ""}).wheel == ""
    assert parse_options(SampleOptions, {"wheel": "true"}).wheel == "true"


def test_the_options_own_validation_runs() -> None:
    with pytest.raises(RuleViolation) as err:
        parse_options(SampleOptions, {"max_raises": "11"})
    assert err.value.code == "BAD_OPTION"


def test_an_option_field_that_is_not_bool_int_or_str_is_a_bug() -> None:
    # It used to receive the raw string silently.
    odd = dataclasses.make_dataclass("OddOptions", [("ratio", float, 0.5)], frozen=True)
    with pytest.raises(AssertionError):
        parse_options(odd, {"ratio": "0.25"})


def test_options_must_be_a_dataclass() -> None:
    with pytest.raises(AssertionError):
        parse_options(dict, {})


def test_options_to_strings_writes_every_field() -> None:
    assert options_to_strings(SampleOptions(fast_mode=True, max_raises=-1)) == {
        "fast_mode": "true",
        "max_raises": "-1",
        "wheel": "lowest",
    }


@given(fast_mode=st.booleans(), max_raises=st.integers(0, 10), wheel=st.text())
def test_options_to_strings_then_parse_options_gives_the_same_options(
    fast_mode: bool, max_raises: int, wheel: str
) -> None:
    options = SampleOptions(fast_mode=fast_mode, max_raises=max_raises, wheel=wheel)
    assert parse_options(SampleOptions, options_to_strings(options)) == options


# --- seating ----------------------------------------------------------------------------
# Seats are numbered clockwise. A six-seat table with players in seats 0, 2 and 5.

SEATED = [5, 0, 2]


def test_clockwise_goes_up_the_seat_numbers_and_wraps() -> None:
    assert seats_in_order(SEATED, start=2, seats_max=6, direction=CLOCKWISE) == [2, 5, 0]


def test_counterclockwise_goes_down_the_seat_numbers_and_wraps() -> None:
    assert seats_in_order(SEATED, start=2, seats_max=6, direction=COUNTERCLOCKWISE) == [2, 0, 5]


def test_starting_from_an_empty_seat_starts_with_the_next_player() -> None:
    assert seats_in_order(SEATED, start=3, seats_max=6, direction=CLOCKWISE) == [5, 0, 2]
    assert seats_in_order(SEATED, start=3, seats_max=6, direction=COUNTERCLOCKWISE) == [2, 0, 5]


def test_seats_after_the_dealer_put_the_dealer_last() -> None:
    assert seats_after(SEATED, start=2, seats_max=6, direction=CLOCKWISE) == [5, 0, 2]
    assert seats_after(SEATED, start=2, seats_max=6, direction=COUNTERCLOCKWISE) == [0, 5, 2]
    assert seats_after(SEATED, start=5, seats_max=6, direction=CLOCKWISE) == [0, 2, 5]
    assert seats_after(SEATED, start=0, seats_max=6, direction=COUNTERCLOCKWISE) == [5, 2, 0]


def test_seats_after_an_empty_seat_are_the_seats_from_the_next_one() -> None:
    assert seats_after(SEATED, start=3, seats_max=6, direction=CLOCKWISE) == [5, 0, 2]
    assert seats_after(SEATED, start=3, seats_max=6, direction=COUNTERCLOCKWISE) == [2, 0, 5]


def test_a_seat_outside_the_table_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        seats_in_order([0, 6], start=0, seats_max=6, direction=CLOCKWISE)


def test_an_unknown_direction_is_a_bug() -> None:
    # A misspelt direction used to mean counterclockwise silently.
    with pytest.raises(AssertionError):
        seats_in_order(SEATED, start=0, seats_max=6, direction="clockwize")
    with pytest.raises(AssertionError):
        seats_after(SEATED, start=0, seats_max=6, direction="anticlockwise")


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[int], int, int]:
    seats_max = draw(st.integers(2, 10))
    seats = draw(st.lists(st.integers(0, seats_max - 1), min_size=1, max_size=seats_max, unique=True))
    start = draw(st.integers(0, seats_max - 1))
    return seats, start, seats_max


@given(tables())
def test_clockwise_order_is_a_rotation_of_the_sorted_seats(table: tuple[list[int], int, int]) -> None:
    seats, start, seats_max = table
    order = seats_in_order(seats, start, seats_max, CLOCKWISE)
    ascending = sorted(seats)
    first = next((i for i, s in enumerate(ascending) if s >= start), 0)
    assert order == ascending[first:] + ascending[:first]


@given(tables())
def test_counterclockwise_is_clockwise_reversed_around_the_start(table: tuple[list[int], int, int]) -> None:
    seats, start, seats_max = table
    ccw = seats_in_order(seats, start, seats_max, COUNTERCLOCKWISE)
    cw_after = seats_after(seats, start, seats_max, CLOCKWISE)
    assert ccw == list(reversed(cw_after))


@given(tables(), st.sampled_from([CLOCKWISE, COUNTERCLOCKWISE]))
def test_seats_after_is_every_seat_once_with_the_start_last_if_seated(
    table: tuple[list[int], int, int], direction: str
) -> None:
    seats, start, seats_max = table
    order = seats_after(seats, start, seats_max, direction)
    assert sorted(order) == sorted(seats)
    if start in seats:
        assert order[-1] == start


# --- match_flows ------------------------------------------------------------------------


def test_payers_are_matched_to_receivers_greedily_in_order() -> None:
    assert match_flows([("a", 30), ("b", 20)], [("x", 25), ("y", 25)]) == [
        ("a", "x", 25),
        ("a", "y", 5),
        ("b", "y", 20),
    ]


def test_zero_amounts_make_no_transfer() -> None:
    assert match_flows([("a", 0), ("b", 10)], [("x", 0), ("y", 10)]) == [("b", "y", 10)]


def test_an_account_matched_with_itself_writes_no_transfer() -> None:
    assert match_flows([("a", 10)], [("a", 4), ("b", 6)]) == [("a", "b", 6)]


def test_flows_that_do_not_balance_are_a_bug() -> None:
    with pytest.raises(AssertionError):
        match_flows([("a", 10)], [("b", 9)])


def test_a_negative_flow_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        match_flows([("a", 5), ("b", -2)], [("c", 3)])


@given(
    st.lists(st.integers(0, 1000), min_size=1, max_size=6),
    st.lists(st.integers(0, 1000), min_size=1, max_size=6),
)
def test_matched_flows_pay_and_receive_exactly_what_is_owed(owed: list[int], due: list[int]) -> None:
    # Scale the larger side down so both total the same.
    total = min(sum(owed), sum(due))
    owed = _shrink_to(owed, total)
    due = _shrink_to(due, total)
    payers = [(f"p{i}", a) for i, a in enumerate(owed)]
    receivers = [(f"r{i}", a) for i, a in enumerate(due)]
    paid: dict[str, int] = {}
    received: dict[str, int] = {}
    for src, dst, amount in match_flows(payers, receivers):
        assert amount > 0
        paid[src] = paid.get(src, 0) + amount
        received[dst] = received.get(dst, 0) + amount
    assert all(paid.get(k, 0) == a for k, a in payers)
    assert all(received.get(k, 0) == a for k, a in receivers)


def _shrink_to(amounts: list[int], total: int) -> list[int]:
    out = []
    for a in amounts:
        take = min(a, total)
        out.append(take)
        total -= take
    return out


# --- SettlementBuilder ------------------------------------------------------------------


def three_seats() -> SettlementBuilder:
    return SettlementBuilder("holdem", "t1", "h1", {0: "alice", 1: "bob", 2: "carol"})


def test_seats_settle_on_their_escrow_at_the_table() -> None:
    b = three_seats()
    assert b.account(1) == "escrow:t1:bob"


def test_nets_follow_the_transfers_and_every_seat_has_one() -> None:
    b = three_seats()
    b.pay_seat(0, 1, 100, "pot")
    b.pay_seat(2, 1, 40, "pot")
    settlement = b.build()
    assert settlement.nets == {0: -100, 1: 140, 2: -40}
    assert settlement.seat_accounts == {0: "escrow:t1:alice", 1: "escrow:t1:bob", 2: "escrow:t1:carol"}


def test_a_seat_that_neither_pays_nor_wins_nets_zero() -> None:
    b = three_seats()
    b.pay_seat(0, 1, 10, "pot")
    assert b.build().nets[2] == 0


def test_a_zero_transfer_is_left_out() -> None:
    b = three_seats()
    b.pay_seat(0, 1, 0, "pot")
    assert b.transfers == []


def test_a_transfer_to_the_same_account_is_refused() -> None:
    b = three_seats()
    with pytest.raises(AssertionError):
        b.pay_seat(1, 1, 10, "pot")
    with pytest.raises(AssertionError):
        b.pay("house:fees", "house:fees", 10, "fee")


@pytest.mark.parametrize("amount", [-1, 1.5, True])
def test_a_transfer_is_a_non_negative_int(amount: object) -> None:
    with pytest.raises(AssertionError):
        three_seats().pay_seat(0, 1, amount, "pot")  # type: ignore[arg-type]


def test_fees_are_charged_on_each_seats_net_win_rounded_down() -> None:
    # Seat 1 nets +139 and pays 5 % = 6 (6.95 rounded down); losers pay no fee.
    b = three_seats()
    b.pay_seat(0, 1, 100, "pot")
    b.pay_seat(2, 1, 39, "pot")
    assert b.charge_fees(500, [1, 2, 0]) == {1: 6}
    settlement = b.build()
    assert settlement.nets == {0: -100, 1: 133, 2: -39}
    assert settlement.fees_gold() == 6
    assert settlement.entries() == {
        "escrow:t1:alice": -100,
        "escrow:t1:bob": 133,
        "escrow:t1:carol": -39,
        "house:fees": 6,
    }
    assert settlement.by_reason() == {"fee": 6, "pot": 139}


def test_fees_use_the_reason_given() -> None:
    b = three_seats()
    b.pay_seat(0, 1, 1000, "pot")
    b.charge_fees(500, [1], reason="commission")
    assert b.build().by_reason() == {"commission": 50, "pot": 1000}


def test_a_seat_listed_twice_for_fees_is_a_bug() -> None:
    # It would pay a second fee on its already reduced net.
    b = three_seats()
    b.pay_seat(0, 1, 1000, "pot")
    with pytest.raises(AssertionError):
        b.charge_fees(500, [1, 1])


def test_two_seats_on_one_escrow_are_a_bug() -> None:
    b = SettlementBuilder("holdem", "t1", "h1", {0: "alice", 1: "alice", 2: "bob"})
    b.pay_seat(2, 0, 10, "pot")  # seat 1 would also be credited with it
    with pytest.raises(AssertionError):
        b.build()


def test_entries_leave_out_accounts_that_net_zero_and_sum_to_zero() -> None:
    b = three_seats()
    b.pay_seat(0, 1, 50, "pot")
    b.pay_seat(1, 0, 50, "side_pot")
    b.pay_seat(2, 0, 5, "pot")
    settlement = b.build()
    assert settlement.entries() == {"escrow:t1:alice": 5, "escrow:t1:carol": -5}


def test_the_settlement_carries_the_hand_and_its_shortfalls() -> None:
    b = three_seats()
    b.pot_carry_gold = 70
    settlement = b.build()
    assert (settlement.game, settlement.table_id, settlement.hand_id) == ("holdem", "t1", "h1")
    assert settlement.pot_carry_gold == 70
    assert settlement.transfers == ()


@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 10**6)).filter(lambda t: t[0] != t[1]),
        max_size=20,
    ),
    st.integers(0, 1000),
)
def test_every_settlement_balances_and_fees_never_exceed_their_share(
    moves: list[tuple[int, int, int]], fee_bps: int
) -> None:
    b = three_seats()
    for src, dst, amount in moves:
        b.pay_seat(src, dst, amount, "pot")
    before = {seat: b.net_of(seat) for seat in (0, 1, 2)}
    charged = b.charge_fees(fee_bps, [0, 1, 2])
    settlement = b.build()
    assert sum(settlement.entries().values()) == 0
    assert sum(settlement.nets.values()) + settlement.fees_gold() == 0
    for seat, net in before.items():
        assert charged.get(seat, 0) * 10_000 <= max(net, 0) * fee_bps


# --- the registry -----------------------------------------------------------------------

DESIGN_GAME_IDS = [
    "holdem",
    "xito",
    "maubinh",
    "lieng",
    "lieng_sanh",
    "bacay_ga",
    "bacay_chuong",
    "taixiu",
    "tienlen",
    "samloc",
    "phom",
]
# DESIGN.md "Public Python API": these games expose hand_value(cards).
HAND_VALUE_GAMES = {"holdem", "xito", "lieng", "lieng_sanh", "bacay_ga", "bacay_chuong", "maubinh"}


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """The registry caches modules; start and end each registry test with an empty cache."""
    registry.get.cache_clear()
    yield
    registry.get.cache_clear()


def test_game_ids_are_the_eleven_games_of_the_design() -> None:
    assert list(registry.GAME_IDS) == DESIGN_GAME_IDS
    assert len(registry.GAME_IDS) == 11
    assert tuple(registry.MODULES) == registry.GAME_IDS


@pytest.mark.parametrize("game_id", ["poker", "", "HOLDEM", "bacay"])
def test_an_unknown_game_id_is_unknown_game(game_id: str, fresh_registry: None) -> None:
    with pytest.raises(InvalidArgument) as err:
        registry.get(game_id)
    assert err.value.code == "UNKNOWN_GAME"


def test_a_game_without_a_module_is_not_available(monkeypatch: pytest.MonkeyPatch, fresh_registry: None) -> None:
    monkeypatch.setitem(sys.modules, registry.MODULES["phom"], None)  # import now fails as if missing
    with pytest.raises(NotFound) as err:
        registry.get("phom")
    assert err.value.code == "GAME_NOT_AVAILABLE"
    assert "phom" not in registry.available()


def test_a_module_that_lacks_part_of_the_contract_is_not_available(
    monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    monkeypatch.setitem(sys.modules, registry.MODULES["phom"], fake_game_module("phom", without="settle"))
    with pytest.raises(NotFound) as err:
        registry.get("phom")
    assert err.value.code == "GAME_NOT_AVAILABLE"
    assert "settle" in err.value.message


def test_a_module_whose_own_import_fails_is_an_error_not_a_missing_game(
    monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    class BrokenImport(importlib.abc.MetaPathFinder):
        """The game module's own import fails on a dependency (through the import system
        itself, so the compiled registry meets it as the interpreted one does)."""

        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == registry.MODULES["phom"]:
                raise ModuleNotFoundError("No module named 'grpc'", name="grpc")

    monkeypatch.delitem(sys.modules, registry.MODULES["phom"], raising=False)
    monkeypatch.setattr(sys, "meta_path", [BrokenImport(), *sys.meta_path])
    with pytest.raises(ModuleNotFoundError) as err:
        registry.get("phom")
    assert err.value.name == "grpc"


def test_a_complete_module_is_returned_and_listed_as_available(
    monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    module = fake_game_module("phom")
    monkeypatch.setitem(sys.modules, registry.MODULES["phom"], module)
    assert registry.get("phom") is module
    assert "phom" in registry.available()
    assert contract_problems("phom", module) == []


def test_the_contract_check_finds_what_a_module_gets_wrong() -> None:
    module = fake_game_module("phom")
    module.SPEC = dataclasses.replace(module.SPEC, game_id="tienlen", direction="sideways")
    assert contract_problems("phom", module) == [
        "SPEC.game_id is 'tienlen'",
        "SPEC.direction is 'sideways'",
    ]


def test_every_available_game_module_has_the_whole_contract(fresh_registry: None) -> None:
    problems = {game_id: contract_problems(game_id, registry.get(game_id)) for game_id in registry.available()}
    assert {game_id: p for game_id, p in problems.items() if p} == {}


def test_importing_the_registry_loads_no_game(fresh_registry: None) -> None:
    code = (
        "import sys, socai.rules.registry; print(sorted(m for m in sys.modules"
        " if m.startswith('socai.rules.') and not m.endswith('__mypyc')))"  # the compiled core's runtime
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['socai.rules.registry']"


def contract_problems(game_id: str, module: types.ModuleType) -> list[str]:
    """What ``module`` gets wrong about the contract of socai.rules.base; empty when nothing."""
    problems = [f"lacks {name}" for name in registry.CONTRACT if not hasattr(module, name)]
    if game_id in HAND_VALUE_GAMES and not hasattr(module, "hand_value"):
        problems.append("lacks hand_value")
    if problems:
        return problems
    spec = module.SPEC
    if not isinstance(spec, GameSpec):
        return ["SPEC is not a GameSpec"]
    if spec.game_id != game_id:
        problems.append(f"SPEC.game_id is {spec.game_id!r}")
    if spec.direction not in (CLOCKWISE, COUNTERCLOCKWISE):
        problems.append(f"SPEC.direction is {spec.direction!r}")
    if not 1 <= spec.players_min <= spec.players_max:
        problems.append(f"SPEC players {spec.players_min}..{spec.players_max}")
    if spec.deck != cards.GAME_DECKS.get(game_id):
        problems.append(f"SPEC.deck is {spec.deck!r}, cards.GAME_DECKS says {cards.GAME_DECKS.get(game_id)!r}")
    if not 0 <= spec.default_fee_bps <= 10_000:
        problems.append(f"SPEC.default_fee_bps is {spec.default_fee_bps}")
    for name in registry.CONTRACT:
        if name not in ("SPEC", "Options", "MOVES", "TIMERS") and not callable(getattr(module, name)):
            problems.append(f"{name} is not callable")
    moves, timers = module.MOVES, module.TIMERS
    if not isinstance(moves, tuple) or not moves or not set(moves) <= set(MOVE_KINDS):
        problems.append(f"MOVES {moves!r} are not MOVE_KINDS")
    if not isinstance(timers, tuple) or not all(isinstance(t, str) and t for t in timers):
        problems.append(f"TIMERS {timers!r} are not timer names")
    if game_id not in RULES_CHAPTERS:
        problems.append("has no RULES.md chapter in base.RULES_CHAPTERS (its refusals would cite none)")
    options_cls = module.Options
    if not dataclasses.is_dataclass(options_cls) or not options_cls.__dataclass_params__.frozen:
        return [*problems, "Options is not a frozen dataclass"]
    for f in dataclasses.fields(options_cls):
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        if kind not in ("bool", "int", "str"):
            problems.append(f"option {f.name} is a {kind}")
        if f.default is dataclasses.MISSING:
            problems.append(f"option {f.name} has no default")
    if not problems:
        defaults = options_cls()
        if parse_options(options_cls, options_to_strings(defaults)) != defaults:
            problems.append("Options do not round-trip through strings")
    return problems


def fake_game_module(game_id: str, without: str = "") -> types.ModuleType:
    """A stand-in game module with the whole contract (minus ``without``)."""

    @dataclass(frozen=True)
    class Options:
        fast_mode: bool = False

    module = types.ModuleType(registry.MODULES[game_id])
    module.SPEC = GameSpec(game_id, "Fake", 2, 4, cards.GAME_DECKS.get(game_id))  # type: ignore[attr-defined]
    module.Options = Options  # type: ignore[attr-defined]
    for name in registry.CONTRACT[2:]:
        setattr(module, name, lambda *args: None)
    module.MOVES = ("check",)  # type: ignore[attr-defined]
    module.TIMERS = ("turn",)  # type: ignore[attr-defined]
    if without:
        delattr(module, without)
    return module
