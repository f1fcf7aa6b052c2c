"""``socai.rules.autoplay`` drives a rules module the way the table's game loop does.

The game modules here are tiny fakes defined in this file, so the loop is tested on its
own: deal what ``pending`` asks from the seeded deck, roll dice from the seed, ask
``choose`` for each seat's decision (a timeout when it declines), finish with HandEnded.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from socai import cards, fairness
from socai.errors import RuleViolation
from socai.events.model import (
    COMMUNITY,
    Body,
    CardsDealt,
    Declared,
    DiceRolled,
    HandEnded,
    HandStarted,
    SeatInfo,
    TimerExpired,
)
from socai.rules import autoplay
from socai.rules.base import DealSlot, GameSpec, Pending

SEED = bytes(range(32))


@dataclass(frozen=True)
class FakeState:
    started: HandStarted
    cards_per_seat: int
    dealt: tuple[tuple[int, str], ...] = ()  # (seat, card)
    dice: tuple[int, ...] = ()
    acted: tuple[tuple[int, str], ...] = ()  # (seat, "stay" | "timeout")
    ended_seed: str = ""


def fake_game(deck: str | None = "standard", cards_per_seat: int = 2, table_timer: bool = False) -> types.ModuleType:
    """A toy game: deal ``cards_per_seat`` cards to each seat (or roll dice when ``deck`` is
    None), then wait for every seat to say "stay", in seat order. With ``table_timer`` the
    hand waits once on a table-level timer (seat COMMUNITY) before the seats act."""
    game = types.ModuleType("fake_game")
    game_id = "holdem" if deck else "taixiu"

    def seats(state: FakeState) -> list[int]:
        return [s.seat for s in state.started.seats]

    def initial_state(started: HandStarted) -> FakeState:
        return FakeState(started, cards_per_seat)

    def pending(state: FakeState) -> Pending:
        if deck and not state.dealt:
            return Pending(deal=tuple(DealSlot(s, False) for _ in range(cards_per_seat) for s in seats(state)))
        if not deck and not state.dice:
            return Pending(roll_dice=True)
        if table_timer and not any(seat == COMMUNITY for seat, _ in state.acted):
            return Pending(to_act=(COMMUNITY,), timer="betting", timeout_s=30)
        waiting = tuple(s for s in seats(state) if s not in {seat for seat, _ in state.acted})
        if not waiting:
            return Pending(finished=True)
        return Pending(to_act=waiting, timer="turn", timeout_s=15)

    def apply(state: FakeState, body: Body) -> FakeState:
        if isinstance(body, CardsDealt):
            slots = tuple((c.seat, c.face_up) for c in body.cards)
            if slots != tuple((s.seat, s.face_up) for s in pending(state).deal):
                raise RuleViolation("WRONG_DEAL", "the deal does not match the pending slots")
            return dataclasses.replace(state, dealt=tuple((c.seat, str(c.card)) for c in body.cards))
        if isinstance(body, DiceRolled):
            return dataclasses.replace(state, dice=body.dice)
        if isinstance(body, Declared | TimerExpired):
            if body.seat not in pending(state).to_act:
                raise RuleViolation("NOT_YOUR_TURN", f"seat {body.seat} is not to act")
            what = "stay" if isinstance(body, Declared) else "timeout"
            return dataclasses.replace(state, acted=(*state.acted, (body.seat, what)))
        if isinstance(body, HandEnded):
            return dataclasses.replace(state, ended_seed=body.deck_seed)
        raise RuleViolation("ILLEGAL_MOVE", f"unexpected {type(body).__name__}")

    def candidate_actions(state: FakeState, seat: int) -> list[Body]:
        return [Declared(seat, "stay")]

    game.SPEC = GameSpec(game_id, "Fake", 2, 4, deck)  # type: ignore[attr-defined]
    game.initial_state = initial_state  # type: ignore[attr-defined]
    game.pending = pending  # type: ignore[attr-defined]
    game.apply = apply  # type: ignore[attr-defined]
    game.candidate_actions = candidate_actions  # type: ignore[attr-defined]
    return game


def started(game_id: str = "holdem", seats: Sequence[int] = (0, 2, 3)) -> HandStarted:
    return HandStarted(
        table_id="t1",
        hand_id="h1",
        game=game_id,
        hand_number=1,
        stake_gold=10,
        fee_bps=0,
        seats_max=6,
        seats=tuple(SeatInfo(s, f"p{s}", 1000) for s in seats),
        dealer_seat=seats[0],
        deck_commitment=fairness.commitment(SEED),
    )


def always_stay(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
    return candidates[0]


def never_act(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
    return None


def test_a_hand_starts_with_hand_started_and_ends_with_the_seed_revealed() -> None:
    bodies, state = autoplay.play_hand(fake_game(), started(), SEED, always_stay)
    assert bodies[0] == started()
    assert bodies[-1] == HandEnded(SEED.hex())
    assert state.ended_seed == SEED.hex()


def test_cards_come_from_the_top_of_the_seeded_deck_in_the_pending_slot_order() -> None:
    bodies, _ = autoplay.play_hand(fake_game(cards_per_seat=2), started(), SEED, always_stay)
    deal = bodies[1]
    assert isinstance(deal, CardsDealt)
    top = fairness.shuffle(SEED, cards.deck("holdem"))[:6]
    assert [c.card for c in deal.cards] == top
    assert [c.seat for c in deal.cards] == [0, 2, 3, 0, 2, 3]  # one card to each seat, repeated
    assert all(not c.face_up for c in deal.cards)


def test_the_first_card_dealt_is_deck_0_of_the_fairness_vectors() -> None:
    # FAIRNESS.md seed B (bytes 0..31): the shuffled 52-card deck starts 8s 9s Qs.
    bodies, _ = autoplay.play_hand(fake_game(cards_per_seat=1), started(), SEED, always_stay)
    deal = bodies[1]
    assert isinstance(deal, CardsDealt)
    assert cards.format_cards(c.card for c in deal.cards) == "8s 9s Qs"


def test_a_chosen_deck_is_dealt_in_its_order_and_the_seed_is_still_revealed() -> None:
    deck = sorted(cards.deck("holdem"), key=lambda c: (-c.rank, c.suit))  # As Ac Ad Ah Ks …
    bodies, _ = autoplay.play_hand(fake_game(cards_per_seat=2), started(), SEED, always_stay, deck=deck)
    deal = bodies[1]
    assert isinstance(deal, CardsDealt)
    assert cards.format_cards(c.card for c in deal.cards) == "As Ac Ad Ah Ks Kc"
    assert [c.seat for c in deal.cards] == [0, 2, 3, 0, 2, 3]
    assert bodies[-1] == HandEnded(SEED.hex())  # the seed's shuffle would have dealt 8s 9s Qs …


@pytest.mark.parametrize(
    ("change", "code", "why"),
    [
        (lambda d: d[:-1], "BAD_CARD", "it lacks 2h and holds nothing besides"),
        (lambda d: [*d[:-1], d[0]], "DUPLICATE_CARD", "holds As more than once"),
        (lambda d: [*d[:-1], cards.parse_card("2h"), cards.parse_card("2h")], "DUPLICATE_CARD", "2h more than once"),
    ],
    ids=["a card short", "a card twice", "a card too many"],
)
def test_a_chosen_deck_that_is_not_the_games_deck_is_refused(change, code: str, why: str) -> None:  # type: ignore[no-untyped-def]
    deck = sorted(cards.deck("holdem"), key=lambda c: (-c.rank, c.suit))
    with pytest.raises(RuleViolation) as err:
        autoplay.play_hand(fake_game(), started(), SEED, always_stay, deck=change(deck))
    assert err.value.code == code
    assert why in err.value.message


def test_a_chosen_deck_with_cards_foreign_to_the_game_is_refused() -> None:
    # Xì Tố plays 8 … A: a 52-card deck holds 24 cards it does not.
    with pytest.raises(RuleViolation) as err:
        autoplay.play_hand(fake_game(), started("xito"), SEED, always_stay, deck=cards.deck("holdem"))
    assert err.value.code == "BAD_CARD"
    assert "it lacks nothing and holds 2s 2c 2d 2h 3s" in err.value.message


def test_a_chosen_deck_for_a_game_without_cards_is_refused() -> None:
    with pytest.raises(RuleViolation) as err:
        autoplay.play_hand(fake_game(deck=None), started("taixiu"), SEED, always_stay, deck=cards.deck("holdem"))
    assert err.value.code == "BAD_CARD"


def test_each_seat_is_asked_in_the_pending_order_and_its_choice_is_applied() -> None:
    asked: list[tuple[int, list[Body]]] = []

    def choose(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
        asked.append((seat, list(candidates)))
        return candidates[0]

    bodies, state = autoplay.play_hand(fake_game(), started(), SEED, choose)
    assert asked == [(s, [Declared(s, "stay")]) for s in (0, 2, 3)]
    assert bodies[2:5] == [Declared(0, "stay"), Declared(2, "stay"), Declared(3, "stay")]
    assert state.acted == ((0, "stay"), (2, "stay"), (3, "stay"))


def test_a_seat_that_does_not_choose_lets_its_timer_run_out() -> None:
    bodies, state = autoplay.play_hand(fake_game(), started(), SEED, never_act)
    assert bodies[2:5] == [TimerExpired(0, "turn"), TimerExpired(2, "turn"), TimerExpired(3, "turn")]
    assert state.acted == ((0, "timeout"), (2, "timeout"), (3, "timeout"))


def test_a_table_level_timer_expires_without_asking_anyone() -> None:
    asked: list[int] = []

    def choose(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
        asked.append(seat)
        return candidates[0]

    bodies, _ = autoplay.play_hand(fake_game(table_timer=True), started(), SEED, choose)
    assert bodies[2] == TimerExpired(COMMUNITY, "betting")
    assert COMMUNITY not in asked


def test_a_dice_game_rolls_the_dice_of_the_seed() -> None:
    bodies, state = autoplay.play_hand(fake_game(deck=None), started("taixiu"), SEED, always_stay)
    assert bodies[1] == DiceRolled(fairness.roll_dice(SEED))
    assert state.dice == fairness.roll_dice(SEED)
    assert not any(isinstance(b, CardsDealt) for b in bodies)


def test_the_same_seed_and_choices_play_the_same_hand() -> None:
    first = autoplay.play_hand(fake_game(), started(), SEED, always_stay)
    second = autoplay.play_hand(fake_game(), started(), SEED, always_stay)
    assert first == second


def test_another_seed_deals_other_cards() -> None:
    bodies_a, _ = autoplay.play_hand(fake_game(), started(), SEED, always_stay)
    bodies_b, _ = autoplay.play_hand(fake_game(), started(), bytes(32), always_stay)
    assert bodies_a[1] != bodies_b[1]


def test_replaying_the_bodies_gives_the_final_state_again() -> None:
    game = fake_game()
    bodies, state = autoplay.play_hand(game, started(), SEED, never_act)
    assert autoplay.replay(game, bodies) == state


def test_replay_needs_hand_started_first() -> None:
    with pytest.raises(AssertionError):
        autoplay.replay(fake_game(), [HandEnded(SEED.hex())])


def test_a_hand_that_never_finishes_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    game = fake_game()
    game.pending = lambda state: Pending(to_act=(0,), timer="turn")  # type: ignore[attr-defined]
    game.apply = lambda state, body: state  # type: ignore[attr-defined]
    monkeypatch.setattr(autoplay, "MAX_STEPS", 50)
    with pytest.raises(AssertionError):
        autoplay.play_hand(game, started(), SEED, always_stay)


def test_a_pending_that_waits_for_nobody_is_a_bug() -> None:
    game = fake_game()
    game.pending = lambda state: Pending()  # type: ignore[attr-defined]
    with pytest.raises(AssertionError):
        autoplay.play_hand(game, started(), SEED, always_stay)


def test_a_rule_violation_from_the_game_is_not_swallowed() -> None:
    def cheat(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
        return Declared(5, "stay")  # seat 5 is not to act

    with pytest.raises(RuleViolation) as err:
        autoplay.play_hand(fake_game(), started(), SEED, cheat)
    assert err.value.code == "NOT_YOUR_TURN"


def test_simultaneous_decisions_are_asked_of_the_owing_seats_in_turn() -> None:
    from socai.rules.dice import taixiu

    asked: list[int] = []
    bets: dict[int, int] = {}

    def choose(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
        asked.append(seat)
        bets[seat] = bets.get(seat, 0) + 1
        return candidates[0] if bets[seat] <= 2 else None

    taixiu_hand = HandStarted(
        "t1", "h1", "taixiu", 1, 10, 0, 6, tuple(SeatInfo(s, f"p{s}", 1000) for s in (0, 1, 2)), 0, "c"
    )
    autoplay.play_hand(taixiu, taixiu_hand, SEED, choose)
    # One betting window (one timer): seats 0, 1, 2 take turns instead of seat 0 deciding
    # everything first; a seat done betting drops out of the rotation.
    assert asked[:6] == [0, 1, 2, 0, 1, 2]
    assert sorted(asked) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
