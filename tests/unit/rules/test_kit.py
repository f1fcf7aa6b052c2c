"""The game kit's contract over every available game: one set of RuleViolation codes,
declared settlement reasons, recorded option defaults, and the properties every game
keeps (balance, nobody pays more than their chips, deterministic replay, a rejected event
changes nothing, every card accounted for). A game is covered the moment it registers."""

from __future__ import annotations

import ast
import dataclasses
import json
import random
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from socai import cards, fairness
from socai.errors import RuleViolation
from socai.events.model import (
    HIDDEN_CARD,
    ActionKind,
    BetAction,
    CardsDealt,
    DealtCard,
    DiceRolled,
    HandEnded,
    HandStarted,
    PlayerReconnected,
    SeatInfo,
    TimerExpired,
    WagerPlaced,
)
from socai.money import TABLE_FEE_BPS_MAX
from socai.rules import autoplay, base, registry
from socai.rules.base import (
    RULE_CODES,
    Obligation,
    Reason,
    SettlementBuilder,
    choose_dealer,
    next_system_event,
    option_defaults,
    pay_obligations,
    visible,
)
from socai.rules.dice import taixiu
from socai.rules.poker import holdem, xito
from socai.rules.rummy import phom
from socai.rules.rummy.phom_melds import has_meld
from socai.settle.replay import ReplayError, replay
from tests.support.snapshot import snapshot
from tests.support.synthetic import SimHand, simulate
from tests.unit.rules.test_phom_properties import kept_or_sent_after_lay_downs

GAMES = registry.available()
KIT_FILES = ("base", "pots", "betting", "autoplay")
FIXTURE = Path(__file__).parent.parent / "audit" / "fixtures" / "hands.jsonl"


def _codes_raised(source: str) -> Iterator[tuple[int, str]]:
    """Every literal code of ``RuleViolation("CODE", …)`` in ``source`` (an f-string code
    yields its literal parts joined with ``*``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "RuleViolation" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value
            elif isinstance(first, ast.JoinedStr):
                yield node.lineno, "".join(str(v.value) if isinstance(v, ast.Constant) else "*" for v in first.values)


@pytest.fixture(scope="module")
def hands() -> dict[str, list[SimHand]]:
    return {game: simulate(40, (game,), seed=11).hands for game in GAMES}


def _source(module: ModuleType) -> str:
    """A module's source, beside its file on either build (a compiled module's file is its
    extension module, which ``inspect.getsource`` cannot read)."""
    assert module.__file__ is not None
    name = module.__name__.rpartition(".")[2]
    return Path(module.__file__).with_name(f"{name}.py").read_text(encoding="utf-8")


# --- codes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_every_code_a_game_raises_is_in_the_kits_one_set(game: str) -> None:
    module = registry.get(game)
    outside = []
    for lineno, code in _codes_raised(_source(module)):
        if "*" in code:
            # f"{word}_TOO_SMALL": each reading of the pattern must be a known code.
            suffix = code.split("*")[-1]
            if not any(known.endswith(suffix) for known in RULE_CODES):
                outside.append(f"line {lineno}: {code}")
        elif code not in RULE_CODES:
            outside.append(f"line {lineno}: {code}")
    assert outside == [], f"{game} raises codes outside base.RULE_CODES: {outside}"


def test_the_kit_itself_raises_only_codes_of_its_set() -> None:
    for name in KIT_FILES:
        path = Path(base.__file__).with_name(f"{name}.py")
        if path.exists():
            assert [c for _, c in _codes_raised(path.read_text()) if c not in RULE_CODES] == [], name


def test_old_spellings_of_one_fault_are_gone() -> None:
    for old in ("BAD_EVENT", "HAND_NOT_FINISHED", "TOO_FEW_PLAYERS", "BAD_SEAT", "BAD_BANKER", "DUPLICATE_PLAYER"):
        assert old not in RULE_CODES


@pytest.mark.parametrize("game", GAMES)
def test_a_wrong_player_count_is_bad_seat_count_in_every_game(game: str) -> None:
    module = registry.get(game)
    spec = module.SPEC
    count = spec.players_max + 1
    seats = tuple(SeatInfo(s, f"p{s}", 1000) for s in range(count))
    started = HandStarted("t1", "h1", game, 1, 100, 0, count, seats, 0, "c")
    with pytest.raises(RuleViolation) as err:
        module.initial_state(started)
    assert err.value.code == "BAD_SEAT_COUNT"


@pytest.mark.parametrize("game", GAMES)
def test_an_unknown_body_and_settling_early_have_one_code_in_every_game(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    started = hands[game][0].events[0].body
    state = module.initial_state(started)
    foreign = DiceRolled((1, 2, 3)) if module.SPEC.deck else CardsDealt(())
    for body in (foreign, started):
        with pytest.raises(RuleViolation) as err:
            module.apply(state, body)
        assert err.value.code == "UNEXPECTED_EVENT"
    with pytest.raises(RuleViolation) as err:
        module.settle(state)
    assert err.value.code == "HAND_NOT_OVER"


@pytest.mark.parametrize("game", [g for g in GAMES if g != "holdem"])  # Hold'em's phases are ints
def test_a_finished_hand_is_in_the_kits_ended_phase(game: str, hands: dict[str, Any]) -> None:
    # base.hand_ended writes the kit's ENDED; each game's is_finished reads its own name.
    module = registry.get(game)
    for hand in hands[game][:5]:
        state = module.initial_state(hand.events[0].body)
        for event in hand.events[1:]:
            state = module.apply(state, event.body)
        assert module.is_finished(state)
        assert state.phase == base.ENDED


def test_the_previous_winner_goes_first_while_it_plays_then_the_owner_then_the_first_seat() -> None:
    assert base.seat_or_owner(4, [1, 4, 6], 6) == 4
    assert base.seat_or_owner(2, [1, 4, 6], 6) == 6
    assert base.seat_or_owner(None, [1, 4, 6], 6) == 6
    assert base.seat_or_owner(2, [1, 4, 6], 3) == 1


# --- reasons, options, versions -----------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_every_reason_seen_in_simulated_hands_is_declared_with_its_rule(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    assert all(isinstance(r, Reason) and r.rule for r in module.REASONS.values())
    seen = {t.reason for hand in hands[game] for t in hand.settlement.transfers}
    assert seen, f"no {game} hand moved gold"
    assert seen - set(module.REASONS) == set()


@pytest.mark.parametrize("game", GAMES)
def test_the_current_defaults_are_recorded_under_the_current_rules_version(game: str) -> None:
    module = registry.get(game)
    # Changing a default in Options without a new RULES_VERSION would change old hands.
    assert dict(module.OPTION_DEFAULTS[module.RULES_VERSION]) == option_defaults(module.Options)


@pytest.mark.parametrize("game", GAMES)
def test_hands_record_every_option_and_the_rules_version(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    started = hands[game][0].events[0].body
    assert started.rules_version == module.RULES_VERSION
    assert set(started.options) == {f.name for f in dataclasses.fields(module.Options)}


def test_a_rules_version_the_engine_does_not_know_is_refused(hands: dict[str, Any]) -> None:
    events = list(hands[GAMES[0]][0].events)
    first = events[0]
    events[0] = dataclasses.replace(first, body=dataclasses.replace(first.body, rules_version=99))
    with pytest.raises(ReplayError) as err:
        replay(events)
    assert err.value.code == "UNKNOWN_RULES_VERSION"
    assert "rules version 99" in err.value.message


def _flipped(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return value


def test_exported_hands_replay_to_the_same_settlements_after_a_default_is_flipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [json.loads(x) for x in FIXTURE.read_text().splitlines()]
    by_hand: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if "hand_started" in by_hand.get(line["hand_id"], [line])[0]:
            by_hand.setdefault(line["hand_id"], []).append(line)
    before = {hand_id: replay(events).settlement for hand_id, events in by_hand.items()}
    assert before
    for game in GAMES:
        options = registry.get(game).Options
        init = options.__init__
        old_defaults = options()
        monkeypatch.setattr(init, "__defaults__", tuple(_flipped(v) for v in init.__defaults__))
        assert options() != old_defaults  # the defaults in code are flipped
    holdem._options.cache_clear()
    holdem._layout.cache_clear()
    after = {hand_id: replay(events).settlement for hand_id, events in by_hand.items()}
    holdem._options.cache_clear()
    holdem._layout.cache_clear()
    assert after == before


# --- properties over every game -----------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_settlements_balance_and_nobody_pays_more_than_their_chips(game: str, hands: dict[str, Any]) -> None:
    for hand in hands[game]:
        s = hand.settlement
        assert sum(s.entries().values()) == 0
        stacks = {info.seat: info.stack_gold for info in hand.events[0].body.seats}
        for seat, net in s.nets.items():
            assert net >= -stacks[seat], f"{hand.hand_id}: seat {seat} lost {-net} of {stacks[seat]}"


@pytest.mark.parametrize("game", GAMES)
def test_replay_is_deterministic_and_agrees_with_play(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    for hand in hands[game][:10]:
        bodies = [e.body for e in hand.events]
        assert module.settle(autoplay.replay(module, bodies)) == hand.settlement
        assert module.settle(autoplay.replay(module, bodies)) == hand.settlement


@pytest.mark.parametrize("game", GAMES)
def test_a_rejected_event_changes_nothing(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    rng = random.Random(5)
    for hand in hands[game][:8]:
        bodies = [e.body for e in hand.events]
        state = module.initial_state(bodies[0])
        for body in bodies[1:]:
            seat = rng.choice([info.seat for info in bodies[0].seats])
            bad_bodies = (
                BetAction(seat, rng.choice([ActionKind.FOLD, ActionKind.RAISE]), 10**9),
                WagerPlaced(seat, "tai", (), -1),
                TimerExpired(seat, "nonsense"),
                HandEnded("00"),
            )
            for bad in bad_bodies:
                before = snapshot(state)
                try:
                    module.apply(state, bad)
                except RuleViolation as exc:
                    assert exc.code in RULE_CODES
                assert snapshot(state) == before
            state = module.apply(state, body)


def test_after_a_phom_lay_down_no_phom_remains_among_the_cards_kept_or_sent(hands: dict[str, Any]) -> None:
    # RULES.md §6.1 last turn: lay down all Phỏm, then send junk; junk is what is in no
    # Phỏm (§6.2). The simulated hands are played under Phỏm's current rules version.
    checked = 0
    for hand in hands["phom"]:
        bodies = [e.body for e in hand.events]
        assert bodies[0].rules_version == phom.RULES_VERSION
        for kept_or_sent in kept_or_sent_after_lay_downs(bodies):
            assert not has_meld(list(kept_or_sent)), f"{hand.hand_id}: {sorted(map(str, kept_or_sent))}"
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("game", GAMES)
def test_every_card_is_accounted_for(game: str, hands: dict[str, Any]) -> None:
    spec = registry.get(game).SPEC
    for hand in hands[game]:
        dealt = [d.card for e in hand.events if isinstance(e.body, CardsDealt) for d in e.body.cards]
        if spec.deck is None:
            assert dealt == []
            continue
        seed = bytes.fromhex(hand.events[-1].body.deck_seed)
        deck = fairness.shuffle(seed, cards.deck(game))
        assert dealt == deck[: len(dealt)]  # the next cards of the fair shuffle, each once
        assert len(set(dealt)) == len(dealt)


# --- hooks and helpers ----------------------------------------------------------------------


def test_the_default_view_hides_only_other_seats_face_down_cards() -> None:
    ace, king, queen = cards.parse_cards("As Kd Qh")
    body = CardsDealt((DealtCard(0, ace, False), DealtCard(1, king, False), DealtCard(-1, queen, True)))
    seen = visible(body, 0, None)
    assert isinstance(seen, CardsDealt)
    assert [d.card for d in seen.cards] == [ace, HIDDEN_CARD, queen]
    assert str(HIDDEN_CARD) == "" and king != HIDDEN_CARD
    assert visible(PlayerReconnected(1), 0, None) == PlayerReconnected(1)


def test_next_system_event_deals_rolls_or_ends_and_waits_for_decisions() -> None:
    seed = bytes(range(32))
    seats = (SeatInfo(0, "a", 1000), SeatInfo(1, "b", 1000))
    started = HandStarted("t1", "h1", "holdem", 1, 100, 0, 2, seats, 0, fairness.commitment(seed))
    deck = fairness.shuffle(seed, cards.deck("holdem"))
    state = holdem.initial_state(started)
    deal = next_system_event(holdem, state, deck, 0, seed)
    assert isinstance(deal, CardsDealt) and [d.card for d in deal.cards] == deck[:4]
    assert next_system_event(holdem, holdem.apply(state, deal), deck, 4, seed) is None  # a player acts
    tx = HandStarted("t1", "h1", "taixiu", 1, 0, 0, 2, seats, 0, fairness.commitment(seed))
    closed = taixiu.apply(taixiu.initial_state(tx), TimerExpired(-1, "betting"))
    assert next_system_event(taixiu, closed, [], 0, seed) == DiceRolled(fairness.roll_dice(seed))
    rolled = taixiu.apply(closed, DiceRolled(fairness.roll_dice(seed)))
    assert next_system_event(taixiu, rolled, [], 0, seed) == HandEnded(seed.hex())


def test_obligations_are_capped_at_the_payers_chips_and_shared_pro_rata() -> None:
    builder = SettlementBuilder("tienlen", "t1", "h1", {0: "a", 1: "b", 2: "c"})
    owed = [Obligation(0, 1, 300, "thoi_heo"), Obligation(0, 2, 100, "thoi_heo"), Obligation(1, 2, 50, "chat")]
    pay_obligations(builder, owed, {0: 200, 1: 500, 2: 500}, order=[1, 2, 0])
    s = builder.build()
    assert s.nets == {0: -200, 1: 150 - 50, 2: 50 + 50}
    assert [(f.seat, f.owed_gold, f.paid_gold) for f in s.shortfalls] == [(0, 300, 150), (0, 100, 50)]


def test_an_obligations_detail_reaches_the_transfer_that_pays_it() -> None:
    builder = SettlementBuilder("tienlen", "t1", "h1", {0: "a", 1: "b"})
    owed = [Obligation(0, 1, 300, "chat_de", "TL-6; plays 4, 5"), Obligation(0, 1, 100, "thoi_heo_den")]
    pay_obligations(builder, owed, {0: 1000, 1: 1000}, order=[0, 1])
    assert [(t.amount_gold, t.reason, t.detail) for t in builder.build().transfers] == [
        (300, "chat_de", "TL-6; plays 4, 5"),
        (100, "thoi_heo_den", ""),
    ]


def test_the_default_fee_comes_from_the_game_and_its_mode() -> None:
    assert base.default_fee_bps(taixiu, {}) == 500
    assert base.default_fee_bps(taixiu, {"mode": "p2p"}) == 300
    assert base.default_fee_bps(holdem, {}) == base.default_fee_bps(xito, {}) == 0
    assert all(0 <= base.default_fee_bps(registry.get(g), {}) <= TABLE_FEE_BPS_MAX for g in GAMES)


def test_choose_dealer_starts_with_the_owner_then_moves_the_button_and_calls_a_games_hook() -> None:
    assert choose_dealer(holdem, None, None, [1, 3, 5], 6, 3) == 3
    assert choose_dealer(holdem, None, None, [1, 3, 5], 6, -1) == 1
    assert choose_dealer(holdem, object(), 3, [1, 3, 5], 6, 3) == 5
    assert choose_dealer(holdem, object(), 5, [1, 3], 6, 3) == 1
    assert choose_dealer(taixiu, None, 3, (0, 3, 5), 6, 5) == 5
    assert choose_dealer(xito, None, None, (0, 2, 4), 5, 2) == 2


def test_penalty_reasons_come_from_the_games_declarations() -> None:
    assert registry.penalty_reasons("holdem") == frozenset()
    assert base.is_penalty(holdem, "pot") is False
    assert registry.penalty_reasons() == frozenset(
        code for g in GAMES for code, r in registry.get(g).REASONS.items() if r.penalty
    )


@pytest.mark.parametrize("game", GAMES)
def test_every_pending_decision_has_candidate_actions_that_apply(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    asked = 0
    for hand in hands[game][:10]:
        bodies = [e.body for e in hand.events]
        state = module.initial_state(bodies[0])
        for body in bodies[1:]:
            pending = module.pending(state)
            for seat in pending.to_act:
                if seat < 0:
                    continue
                candidates = module.candidate_actions(state, seat)
                assert candidates, f"{game}: seat {seat} must decide and has no candidate action"
                for candidate in candidates:
                    module.apply(state, candidate)  # each is legal now
                asked += 1
            state = module.apply(state, body)
    assert asked > 0


def test_a_hidden_card_encodes_as_an_empty_card() -> None:
    from datetime import UTC, datetime

    from socai.events import codec
    from socai.events.model import Event

    body = visible(CardsDealt((DealtCard(1, cards.parse_cards("As")[0], False),)), 0, None)
    assert body is not None
    msg = codec.to_proto(Event("t1", "h1", 2, "holdem", datetime(2026, 1, 1, tzinfo=UTC), body))
    assert [c.card for c in msg.cards_dealt.cards] == [""]


def test_a_choice_between_hands_comes_from_the_revealed_seed() -> None:
    seed_hex = bytes(range(32)).hex()
    picks = {base.seeded_index(seed_hex, "banker", 5) for _ in range(3)}
    assert len(picks) == 1 and 0 <= picks.pop() < 5
    assert base.seeded_index(seed_hex, "banker", 1) == 0


@pytest.mark.parametrize("game", GAMES)
def test_a_fee_of_zero_means_no_fee(game: str, hands: dict[str, Any]) -> None:
    module = registry.get(game)
    for hand in hands[game][:10]:
        bodies = [e.body for e in hand.events]
        free = [dataclasses.replace(bodies[0], fee_bps=0), *bodies[1:]]
        settlement = module.settle(autoplay.replay(module, free))
        assert settlement.fees_gold() == 0
        assert all(t.reason != "fee" for t in settlement.transfers)


def test_the_tables_view_of_an_event_hides_other_hole_cards_until_the_hand_is_over() -> None:
    from datetime import UTC, datetime

    from socai.events.model import Event

    ace, king = cards.parse_cards("As Kd")
    event = Event(
        "t1",
        "h1",
        2,
        "holdem",
        datetime(2026, 1, 1, tzinfo=UTC),
        CardsDealt((DealtCard(0, ace, False), DealtCard(1, king, False))),
    )
    seen = base.visible_event(holdem, event, 0, None, hand_over=False)
    assert seen is not None and [d.card for d in seen.body.cards] == [ace, HIDDEN_CARD]
    assert base.visible_event(holdem, event, 0, None, hand_over=True) is event
    reconnect = dataclasses.replace(event, body=PlayerReconnected(1))
    assert base.visible_event(holdem, reconnect, 0, None, hand_over=False) is reconnect
