"""The hand mechanics Tiến Lên and Sâm Lốc share (``socai.rules.climbing.shedding_play``): the deal,
turns counterclockwise, rounds and passes, the lead after a round, illegal plays refused
without a change, timeouts, the GEN-4 cap, and self-play invariants of both games.

The helpers here (``Hand``) script a hand card by card; test_tienlen.py and test_samloc.py
use them too."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from socai import cards, fairness
from socai.cards import Card, parse_cards
from socai.errors import RuleViolation
from socai.events.model import (
    Body,
    CardsDealt,
    CardsPlayed,
    DealtCard,
    Declared,
    HandEnded,
    HandStarted,
    Passed,
    PlayerDisconnected,
    PlayerLeft,
    SeatInfo,
    TimerExpired,
)
from socai.rules import autoplay, base
from socai.rules.base import Settlement
from socai.rules.climbing import samloc, shedding_play, tienlen
from tests.support.snapshot import snapshot

SEED_HEX = "00" * 32


# --- helpers --------------------------------------------------------------------------------


def started(
    game: str,
    seats: Sequence[int] = (0, 1),
    *,
    seats_max: int = 4,
    dealer: int = 0,
    hand_number: int = 2,
    stake: int = 100,
    stacks: Mapping[int, int] | None = None,
    options: Mapping[str, str] | None = None,
    fee_bps: int = 0,
) -> HandStarted:
    return HandStarted(
        table_id="t1",
        hand_id="h1",
        game=game,
        hand_number=hand_number,
        stake_gold=stake,
        fee_bps=fee_bps,
        seats_max=seats_max,
        seats=tuple(SeatInfo(s, f"p{s}", (stacks or {}).get(s, 100_000)) for s in seats),
        dealer_seat=dealer,
        deck_commitment="c" * 64,
        options=dict(options or {}),
        rules_version=1,
    )


def filled(hands: Mapping[int, str], size: int) -> dict[int, list[Card]]:
    """Each seat's cards, completed to ``size`` from the unused cards (3s to Ks, low first,
    no 2 and no ace), so a test writes out only the cards it is about."""
    given = {s: parse_cards(text) for s, text in hands.items()}
    used = {c for cs in given.values() for c in cs}
    spare = [c for c in cards.deck("tienlen") if c not in used and c.rank not in (2, 14)]
    for seat in sorted(given):
        while len(given[seat]) < size:
            given[seat].append(spare.pop(0))
    return given


class Hand:
    """A scripted hand: ``Hand(tienlen, {0: "3s 4s …", 1: …})`` deals those cards (each
    seat's hand, completed by ``filled``) and every step checks the engine accepts it."""

    def __init__(self, module: Any, hands: Mapping[int, str], **kwargs: Any) -> None:
        self.module = module
        self.started = started(module.SPEC.game_id, tuple(sorted(hands)), **kwargs)
        self.state = module.initial_state(self.started)
        queues = filled(hands, module.RULES.hand_cards)
        slots = module.pending(self.state).deal
        dealt = [DealtCard(slot.seat, queues[slot.seat].pop(0), False) for slot in slots]
        assert all(not q for q in queues.values()), "each hand must be exactly the game's hand size"
        self.apply(CardsDealt(tuple(dealt)))

    def apply(self, body: Body) -> Hand:
        self.state = self.module.apply(self.state, body)
        return self

    def play(self, seat: int, text: str) -> Hand:
        return self.apply(CardsPlayed(seat, tuple(parse_cards(text))))

    def no_sam(self) -> Hand:
        """Sâm Lốc: every seat still to answer the báo Sâm window declines."""
        for seat in self.module.pending(self.state).to_act:
            self.declare(seat, "no_sam")
        return self

    def goes_out(self, seat: int) -> Hand:
        """``seat`` (on lead) plays its cards one by one, highest first, every other seat
        passing each time, until it is out."""
        while self.state.hands[seat] and not self.module.pending(self.state).finished:
            assert self.turn == seat and self.state.leading
            self.apply(CardsPlayed(seat, (self.state.hands[seat][-1],)))
            while not self.module.pending(self.state).finished and self.turn != seat:
                self.apply(Passed(self.turn))  # type: ignore[arg-type]
        return self

    def owed(self) -> list[tuple[int, int, int, str]]:
        """The obligations so far as (payer, payee, lá, reason)."""
        stake = self.started.stake_gold
        return [(o.payer, o.payee, o.amount_gold // stake, o.reason) for o in self.state.obligations]

    def passes(self, *seats: int) -> Hand:
        for seat in seats:
            self.apply(Passed(seat))
        return self

    def declare(self, seat: int, what: str) -> Hand:
        return self.apply(Declared(seat, what))

    def refused(self, body: Body) -> str:
        """The code of the RuleViolation ``body`` raises; the state is unchanged."""
        before = snapshot(self.state)
        with pytest.raises(RuleViolation) as err:
            self.module.apply(self.state, body)
        assert snapshot(self.state) == before
        return str(err.value.code)

    @property
    def turn(self) -> int | None:
        return self.state.turn  # type: ignore[no-any-return]

    def settle(self) -> Settlement:
        assert self.module.pending(self.state).finished
        self.apply(HandEnded(SEED_HEX))
        settlement: Settlement = self.module.settle(self.state)
        return settlement

    def lines(self) -> list[tuple[int, int, int, str]]:
        """The settlement as (payer seat, payee seat, gold, reason), in order."""
        s = self.settle()
        seat_of = {account: seat for seat, account in s.seat_accounts.items()}
        return [(seat_of[t.from_account], seat_of[t.to_account], t.amount_gold, t.reason) for t in s.transfers]


# Two Tiến Lên hands: seat 0 goes out with a 12-card straight then the 2♠; seat 1 holds
# nothing that beats a 12-card straight.
TL_WINNER = "3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As 2s"
TL_LOSER = "3c 4d 5c 6d 7c 8d 9c Td Jc Qd Kc Ad 2h"


# --- the deal and the turn order ------------------------------------------------------------


def test_the_deal_is_one_card_at_a_time_counterclockwise_from_the_dealer_face_down() -> None:
    state = tienlen.initial_state(started("tienlen", (0, 1, 2, 3), dealer=1))
    slots = tienlen.pending(state).deal
    assert len(slots) == 52 and not any(s.face_up for s in slots)
    assert [s.seat for s in slots[:5]] == [1, 0, 3, 2, 1]  # counterclockwise: decreasing seats


def test_a_deal_to_the_wrong_seats_or_with_a_card_twice_is_refused() -> None:
    state = tienlen.initial_state(started("tienlen"))
    slots = tienlen.pending(state).deal
    deck = cards.deck("tienlen")
    wrong = CardsDealt(tuple(DealtCard(1 - s.seat, deck[i], False) for i, s in enumerate(slots)))
    twice = CardsDealt(tuple(DealtCard(s.seat, deck[0], False) for s in slots))
    short = CardsDealt(tuple(DealtCard(s.seat, deck[i], False) for i, s in enumerate(slots[:-1])))
    extra = CardsDealt(
        (*(DealtCard(s.seat, deck[i], False) for i, s in enumerate(slots)), DealtCard(0, deck[0], False))
    )
    cases = ((wrong, "WRONG_DEAL"), (twice, "DUPLICATE_CARD"), (short, "WRONG_DEAL"), (extra, "WRONG_DEAL"))
    for body, code in cases:
        with pytest.raises(RuleViolation) as err:
            tienlen.apply(state, body)
        assert err.value.code == code


def test_play_goes_counterclockwise_and_a_seat_that_passes_is_out_of_the_round() -> None:
    h = Hand(
        tienlen,
        {
            0: "3s 5s 7s 9s Js Ks 2s 4c 6c 8c Tc Qc Ac",
            1: "3c 5c 7c 9c Jc Kc 2c 4d 6d 8d Td Qd Ad",
            2: "3d 5d 7d 9d Jd Kd 2d 4h 6h 8h Th Qh Ah",
            3: "3h 5h 7h 9h Jh Kh 2h 4s 6s 8s Ts Qs As",
        },
        options={"instant_wins": "false"},
    )
    assert h.state.order == (0, 3, 2, 1)
    assert h.turn == 0
    h.play(0, "3s").play(3, "5h").passes(2)
    assert h.turn == 1
    h.play(1, "7c")
    assert h.turn == 0  # seat 2 passed: out of this round
    h.passes(0, 3)
    assert h.turn == 1 and h.state.leading  # everyone else passed: seat 1 leads anything
    assert h.state.round_plays == ()


def test_the_seat_leading_a_round_may_not_pass() -> None:
    h = Hand(tienlen, {0: TL_WINNER, 1: TL_LOSER}, options={"instant_wins": "false"})
    assert h.refused(Passed(0)) == "CANNOT_PASS"


def test_illegal_plays_raise_a_stable_code_and_change_nothing() -> None:
    h = Hand(tienlen, {0: TL_WINNER, 1: TL_LOSER}, options={"instant_wins": "false"})
    assert h.refused(CardsPlayed(1, tuple(parse_cards("3c")))) == "NOT_YOUR_TURN"
    assert h.refused(CardsPlayed(0, tuple(parse_cards("3c")))) == "NOT_HOLDING"
    assert h.refused(CardsPlayed(0, tuple(parse_cards("3s 3s")))) == "DUPLICATE_CARD"
    assert h.refused(CardsPlayed(0, tuple(parse_cards("3s 5s")))) == "BAD_COMBINATION"
    assert h.refused(CardsPlayed(7, tuple(parse_cards("3s")))) == "UNKNOWN_SEAT"
    assert h.refused(Declared(0, "sam")) == "BAD_DECLARATION"
    assert h.refused(HandEnded(SEED_HEX)) == "HAND_NOT_OVER"
    assert h.refused(TimerExpired(0, "declare")) == "WRONG_TIMER"
    h.play(0, "9s")
    assert h.refused(CardsPlayed(1, tuple(parse_cards("7c")))) == "CANNOT_BEAT"
    assert h.refused(CardsPlayed(1, tuple(parse_cards("9c Td Jc")))) == "CANNOT_BEAT"


def test_the_first_seat_out_of_cards_ends_play() -> None:
    h = Hand(tienlen, {0: TL_WINNER, 1: TL_LOSER}, options={"instant_wins": "false"})
    h.play(0, "3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As").passes(1).play(0, "2s")
    assert h.state.winner == 0 and tienlen.pending(h.state).finished
    assert h.refused(CardsPlayed(1, tuple(parse_cards("3c")))) == "HAND_FINISHED"


def test_a_turn_timeout_passes_and_a_leading_timeout_plays_the_lowest_card() -> None:
    h = Hand(tienlen, {0: TL_WINNER, 1: TL_LOSER}, options={"instant_wins": "false"})
    h.apply(TimerExpired(0, "turn"))
    assert [p.combination.cards for p in h.state.round_plays] == [tuple(parse_cards("3s"))]
    h.apply(TimerExpired(1, "turn"))
    assert 1 in h.state.round_passed or h.state.leading


def test_nobody_pays_more_than_their_chips_gen_4() -> None:
    # Seat 1 owes 12 ordinary cards + a red 2 (10) = 22 lá (2,200 gold) but brought 1,000:
    # it pays 1,000, shared pro rata over its two lines (money.pro_rata).
    h = Hand(tienlen, {0: TL_WINNER, 1: TL_LOSER}, stacks={0: 100_000, 1: 1_000}, options={"instant_wins": "false"})
    h.play(0, "3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As").passes(1).play(0, "2s")
    s = h.settle()
    assert s.nets == {0: 1_000, 1: -1_000}
    assert sum(f.owed_gold for f in s.shortfalls) == 2_200 and sum(f.paid_gold for f in s.shortfalls) == 1_000
    assert [(f.reason, f.owed_gold, f.paid_gold) for f in s.shortfalls] == [
        ("cards_left", 1_200, 546),
        ("thoi_heo_do", 1_000, 454),
    ]
    assert sum(s.entries().values()) == 0


def test_the_fee_is_charged_on_the_winners_net_gen_1() -> None:
    h = Hand(tienlen, {0: TL_WINNER, 1: TL_LOSER}, fee_bps=500, options={"instant_wins": "false"})
    h.play(0, "3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As").passes(1).play(0, "2s")
    s = h.settle()
    assert s.fees_gold() == 2_200 * 5 // 100
    assert s.nets[0] == 2_200 - 110 and s.nets[1] == -2_200


def test_candidate_actions_are_legal_and_bounded() -> None:
    h = Hand(tienlen, {0: TL_WINNER, 1: TL_LOSER}, options={"instant_wins": "false"})
    candidates = tienlen.candidate_actions(h.state, 0)
    assert 0 < len(candidates) <= shedding_play.CANDIDATES_MAX + 1
    assert not any(isinstance(c, Passed) for c in candidates)  # the leader must play
    for body in candidates:
        tienlen.apply(h.state, body)
    assert tienlen.candidate_actions(h.state, 1) == []


def test_the_legal_actions_say_play_and_pass() -> None:
    h = Hand(tienlen, {0: TL_WINNER, 1: TL_LOSER}, options={"instant_wins": "false"})
    assert [a.kind for a in tienlen.legal_actions(h.state, 0)] == ["play"]
    h.play(0, "3s")
    assert [a.kind for a in tienlen.legal_actions(h.state, 1)] == ["play", "pass"]


# --- self-play invariants -----------------------------------------------------------------


def _bot(rng: random.Random) -> autoplay.Chooser:
    def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
        roll = rng.random()
        if roll < 0.02:
            return None
        if roll < 0.025:
            return PlayerLeft(seat)
        if roll < 0.03:
            return PlayerDisconnected(seat)
        return rng.choice(list(candidates)) if candidates else None

    return choose


@pytest.mark.parametrize("module", [tienlen, samloc], ids=["tienlen", "samloc"])
def test_self_play_every_card_is_accounted_for_and_every_hand_settles_within_the_rules(module: Any) -> None:
    rng = random.Random(7)
    game = module.SPEC.game_id
    modes = ["count", "rank"] if game == "tienlen" else [None]
    for i in range(300):
        count = rng.randint(module.SPEC.players_min, module.SPEC.players_max)
        seats = tuple(sorted(rng.sample(range(module.SPEC.players_max), count)))
        stake = rng.choice([1, 10, 100])
        stacks = {s: rng.randint(1, 60 * stake) for s in seats}
        mode = modes[i % len(modes)]
        options = {"settlement_mode": mode} if mode else {}
        seed = bytes(rng.getrandbits(8) for _ in range(32))
        hand = started(
            game,
            seats,
            seats_max=module.SPEC.players_max,
            dealer=rng.choice(seats),
            hand_number=rng.choice([1, 2]),
            stake=stake,
            stacks=stacks,
            options=base.full_options(module, options),
            fee_bps=rng.choice([0, 300]),
        )
        bodies, state = autoplay.play_hand(module, hand, seed, _bot(rng))
        s = module.settle(state)
        assert sum(s.entries().values()) == 0
        for seat, net in s.nets.items():
            assert net >= -stacks[seat]
        # Every dealt card is in a hand or was played (a CardsPlayed, or a lead on a timeout), once.
        dealt = [d.card for b in bodies if isinstance(b, CardsDealt) for d in b.cards]
        played = list(state.played_cards)
        assert set(c for b in bodies if isinstance(b, CardsPlayed) for c in b.cards) <= set(played)
        held = [c for cs in state.hands.values() for c in cs]
        assert sorted(played + held, key=lambda c: c.index) == sorted(dealt, key=lambda c: c.index)
        assert dealt == fairness.shuffle(seed, cards.deck(game))[: len(dealt)]
        # Each obligation's figure is the table's figure for its reason, in lá × S.
        for ob in state.obligations:
            assert ob.amount_gold % stake == 0 and ob.reason in module.REASONS
        assert module.settle(autoplay.replay(module, bodies)) == s
