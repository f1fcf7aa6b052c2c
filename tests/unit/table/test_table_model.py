"""The table service's pure parts: configuration checks, redaction, dealer choice."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from datetime import UTC, datetime
from types import MappingProxyType

import pytest

from socai import errors
from socai.cards import parse_card
from socai.events.model import COMMUNITY, HIDDEN_CARD, CardsDealt, DealtCard, Event
from socai.rules import registry
from socai.rules.base import choose_dealer
from socai_table.model import TableConfig, facts_id_of, hand_id_of
from socai_table.views import redact

AT = datetime(2026, 11, 29, tzinfo=UTC)


def test_defaults_are_filled_from_the_game():
    c = TableConfig(game="holdem", stake_gold=100, fee_bps=None, seats_max=0).normalized()
    assert c.seats_max == 9 and c.fee_bps == 0
    assert c.buy_in_min_gold == 100 and c.buy_in_max_gold == 10_000
    assert c.turn_timeout_s == 0  # the game's own turn timer
    taixiu = TableConfig(game="taixiu", stake_gold=10, fee_bps=None, seats_max=10).normalized()
    assert taixiu.fee_bps == 500  # the game's default fee against the system (RULES.md 0.6)


def test_an_unset_fee_takes_the_default_of_the_games_mode_and_zero_means_no_fee():
    """Issue 11: 0 was replaced by the game's default, so a p2p Tài Xỉu table got 500
    instead of 300 and no table could be fee-free."""
    p2p = TableConfig(game="taixiu", stake_gold=10, fee_bps=None, seats_max=10, options={"mode": "p2p"})
    assert p2p.normalized().fee_bps == 300
    free = TableConfig(game="taixiu", stake_gold=10, fee_bps=0, seats_max=10)
    assert free.normalized().fee_bps == 0


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"game": "chess"}, "UNKNOWN_GAME"),
        ({"stake_gold": 0}, "BAD_STAKE"),
        ({"stake_gold": -5}, "BAD_AMOUNT"),
        ({"fee_bps": 1001}, "BAD_FEE"),
        ({"seats_max": 10}, "BAD_SEATS"),
        ({"seats_max": 1}, "BAD_SEATS"),
        ({"buy_in_min_gold": 500, "buy_in_max_gold": 100}, "BAD_BUY_IN"),
        ({"turn_timeout_s": 601}, "BAD_TIMEOUT"),
        ({"auto_start_players": 7}, "BAD_AUTO_START"),
        # Derived values must fit in int64 (a stake of 10^17 made buy_in_max overflow).
        ({"stake_gold": 10**17}, "BAD_STAKE"),
        ({"owner_player_id": "x" * 2_000_000}, "BAD_PLAYER_ID"),
        ({"owner_player_id": "alice\x00"}, "BAD_PLAYER_ID"),
        ({"options": {"min_bet": "9" * 5000}}, "BAD_OPTION"),
        ({"game": "taixiu", "seats_max": 10, "options": {"guild_threshold_gold": "9" * 40}}, "BAD_OPTION"),
        ({"options": {"bad\x00name": "1"}}, "BAD_OPTION"),
        ({"options": {f"o{i}": "1" for i in range(33)}}, "BAD_OPTION"),
    ],
)
def test_bad_configurations_are_refused_with_a_reason(changes: dict, reason: str):
    base = {"game": "holdem", "stake_gold": 100, "fee_bps": 0, "seats_max": 6}
    with pytest.raises(errors.InvalidArgument) as caught:
        TableConfig(**{**base, **changes}).normalized()
    assert caught.value.code == reason


def test_an_unknown_rule_option_is_refused_by_the_rules_engine():
    with pytest.raises(errors.RuleViolation) as caught:
        TableConfig(game="xito", stake_gold=100, fee_bps=0, seats_max=4, options={"no_such": "1"}).normalized()
    assert caught.value.code == "BAD_OPTION"


def test_hand_and_fact_ids_never_collide():
    ids = {hand_id_of(t, n) for t in ("a", "ah1", "a1") for n in (1, 11)} | {facts_id_of(t) for t in ("a", "ah1")}
    assert len(ids) == 8


def test_a_face_down_card_is_hidden_from_everyone_but_its_owner_until_the_hand_ends():
    holdem = registry.get("holdem")
    dealt = CardsDealt(
        (
            DealtCard(0, parse_card("As"), False),
            DealtCard(1, parse_card("Kd"), False),
            DealtCard(COMMUNITY, parse_card("2c"), True),
        )
    )
    event = Event("t", "t-h1", 2, "holdem", AT, dealt)

    def seen(viewer: int, over: bool) -> list[str]:
        msg = redact(holdem, event, viewer, None, hand_over=over)
        assert msg is not None
        return [c.card for c in msg.cards_dealt.cards]

    assert seen(0, False) == ["As", "", "2c"]
    assert seen(-2, False) == ["", "", "2c"]
    assert seen(-2, True) == ["As", "Kd", "2c"]


def test_a_game_can_hide_a_whole_event_through_its_visible_hook():
    """The kit's ``visible`` hook: a game whose hook returns None hides the event."""
    import types

    from socai.events.model import PlayerDisconnected

    hiding = types.SimpleNamespace(visible=lambda body, viewer, state: None if viewer != body.seat else body)
    event = Event("t", "t-h1", 3, "holdem", AT, PlayerDisconnected(1))
    assert redact(hiding, event, 0, None, hand_over=False) is None  # type: ignore[arg-type]
    assert redact(hiding, event, 1, None, hand_over=False) is not None  # type: ignore[arg-type]
    assert redact(hiding, event, 0, None, hand_over=True) is not None  # type: ignore[arg-type]


def test_a_cached_view_shows_each_viewer_what_an_uncached_one_does_and_converts_each_copy_once():
    """``Hand.protos``: the whole message serves every viewer once the hand is over, and
    each seat's redacted copy is made once, never shown to another seat."""
    holdem = registry.get("holdem")
    dealt = CardsDealt((DealtCard(0, parse_card("As"), False), DealtCard(1, parse_card("Kd"), False)))
    event = Event("t", "t-h1", 2, "holdem", AT, dealt)
    cache: dict = {}
    for viewer, over in [(0, False), (1, False), (-2, False), (0, False), (1, False), (-2, False), (5, True)]:
        cached = redact(holdem, event, viewer, None, over, cache)
        assert cached == redact(holdem, event, viewer, None, over)
    assert redact(holdem, event, 0, None, False, cache) is redact(holdem, event, 0, None, False, cache)
    assert redact(holdem, event, 0, None, False, cache) is not redact(holdem, event, 1, None, False, cache)
    assert redact(holdem, event, 3, None, True, cache) is redact(holdem, event, 4, None, True, cache)
    assert len(cache) == 4  # seats 0 and 1, the spectator, and the whole event


def test_a_game_with_its_own_visible_hook_shows_more_of_a_cached_event_as_the_hand_moves_on():
    """A hook that reads the state (a Ba Cây flip) is asked again each time: a redacted
    copy is never cached, so a card flipped later shows in the next view."""
    import types

    flipped: set[int] = set()

    def visible(body: CardsDealt, viewer: int, state: object) -> CardsDealt:
        return CardsDealt(
            tuple(
                c if c.seat == viewer or c.seat in flipped else DealtCard(c.seat, HIDDEN_CARD, False)
                for c in body.cards
            )
        )

    hooked = types.SimpleNamespace(visible=visible)
    event = Event("t", "t-h1", 2, "bacay_ga", AT, CardsDealt((DealtCard(1, parse_card("Kd"), False),)))
    cache: dict = {}
    before = redact(hooked, event, 0, None, False, cache)  # type: ignore[arg-type]
    flipped.add(1)
    after = redact(hooked, event, 0, None, False, cache)  # type: ignore[arg-type]
    assert before is not None and after is not None
    assert [c.card for c in before.cards_dealt.cards] == [""]
    assert [c.card for c in after.cards_dealt.cards] == ["Kd"]


def test_the_button_starts_with_the_owner_and_moves_clockwise_to_the_next_player():
    holdem = registry.get("holdem")
    assert choose_dealer(holdem, None, None, [1, 3, 5], 6, 3) == 3
    assert choose_dealer(holdem, None, None, [1, 3, 5], 6, -1) == 1
    assert choose_dealer(holdem, object(), 3, [1, 3, 5], 6, 3, {1: 10, 3: 10, 5: 10}) == 5


def test_in_xito_the_previous_winner_is_dealt_first_and_in_taixiu_the_owner_banks():
    from socai.rules.dice import taixiu
    from socai.rules.poker import xito

    assert xito.next_hand_dealer(None, None, (0, 2, 4), 5, 2) == 2
    assert xito.next_hand_dealer(None, None, (0, 2, 4), 5, -1) == 0
    assert taixiu.next_hand_dealer(None, 3, (0, 3, 5), 6, 5) == 5


def test_the_xito_winner_of_a_played_hand_is_dealt_first_next():
    import random

    from socai.events.model import HandStarted, SeatInfo
    from socai.rules.autoplay import play_hand
    from socai.rules.poker import xito

    started = HandStarted(
        "t", "t-h1", "xito", 1, 100, 0, 5, tuple(SeatInfo(s, f"p{s}", 2000) for s in (0, 2, 4)), 0, "00" * 32
    )
    rng = random.Random(7)
    _, state = play_hand(xito, started, bytes(range(32)), lambda st, seat, options: rng.choice(options))
    assert xito.next_hand_dealer(state, 0, (0, 2, 4), 5, 0) == xito.winner(state)


async def test_a_hand_that_ends_inside_its_own_auto_start_schedules_the_next_one():
    """Issue 17, defect 2: the hand ended inside the auto-start task, which then saw itself
    running and scheduled nothing; no hand ever started again at that table."""
    from socai_table.model import Seat
    from socai_table.table import Table

    config = TableConfig(
        game="holdem", stake_gold=100, fee_bps=0, seats_max=2, auto_start_players=2, between_hands_ms=60_000
    ).normalized()
    table = Table("t1", config, deps=None)  # type: ignore[arg-type]  # nothing here reaches a dependency
    seats = {0: Seat(0, "a", 1000), 1: Seat(1, "b", 1000)}
    table.state = dataclasses.replace(table.state, seats=MappingProxyType(seats))

    async def inside_the_start_task() -> asyncio.Task[None] | None:
        table._maybe_autostart()  # what _after_hand does when the hand ends right away
        return table.autostart.task

    table.autostart.task = asyncio.get_running_loop().create_task(inside_the_start_task())
    running = table.autostart.task
    scheduled = await running
    assert scheduled is not None and scheduled is not running and not scheduled.done()
    scheduled.cancel()
    # From outside, a running start is left alone (no second start for one table).
    table._maybe_autostart()
    assert table.autostart.task is scheduled


def test_cashout_retries_double_up_to_the_cap_and_each_cash_out_has_its_own() -> None:
    from socai_table.manager import CASHOUT_BACKOFF_MAX_S, CASHOUT_POLL_S, CashoutRetries

    r = CashoutRetries()
    assert r.due("x", 0.0) and r.due("y", 0.0)  # seen for the first time: at once
    pauses = [r.later("x", 0.0)[1] for _ in range(8)]
    assert pauses[0] == CASHOUT_POLL_S
    assert all(b == min(CASHOUT_BACKOFF_MAX_S, 2 * a) for a, b in itertools.pairwise(pauses))
    assert pauses[-1] == CASHOUT_BACKOFF_MAX_S
    assert not r.due("x", CASHOUT_BACKOFF_MAX_S - 0.01) and r.due("x", CASHOUT_BACKOFF_MAX_S)
    assert r.due("y", 0.0)  # one cash-out's backoff never delays another
    r.keep_only({"y"})
    assert r.due("x", 0.0)
