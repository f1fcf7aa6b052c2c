"""Phỏm self-play: whole hands of bots that draw, take, lay, send, Ù, time out, disconnect
and leave, with the invariants checked after every hand (issue 15): every card accounted
for, taken cards end in laid melds, after a lay-down no Phỏm remains among the cards kept
or sent (§6.1 last turn, issue 28), the hand ends, the settlement balances and nobody pays
more than their table chips (GEN-4); a rejected event changes nothing; replay agrees."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import pytest

from socai import fairness
from socai.cards import Card
from socai.errors import RuleViolation
from socai.events.model import (
    Body,
    CardsDealt,
    CardsPlayed,
    CardTaken,
    Declared,
    HandStarted,
    MeldsLaid,
    PlayerDisconnected,
    PlayerLeft,
    SeatInfo,
)
from socai.rules import autoplay
from socai.rules.rummy import phom
from socai.rules.rummy.phom_melds import find_u, has_meld, is_meld
from tests.support.snapshot import snapshot

STAKE = 50


def _started(rng: random.Random, number: int, seed: bytes) -> HandStarted:
    players = rng.randint(2, 4)
    seats = sorted(rng.sample(range(4), players))
    # Small stacks now and then, so that the GEN-4 cap is exercised.
    infos = tuple(SeatInfo(s, f"p{s}", rng.choice((100, 400, 5_000, 50_000))) for s in seats)
    options = {"one_taken_per_meld": rng.choice(("true", "false")), "u_khan": rng.choice(("true", "false"))}
    return HandStarted(
        "t1",
        f"h{number}",
        "phom",
        number,
        STAKE,
        rng.choice((0, 300)),
        4,
        infos,
        rng.choice(seats),
        fairness.commitment(seed),
        owner_seat=seats[0],
        options=options,
        rules_version=phom.RULES_VERSION,
    )


def _bot(rng: random.Random) -> autoplay.Chooser:
    def choose(state: phom.State, seat: int, candidates: Sequence[Body]) -> Body | None:
        roll = rng.random()
        if roll < 0.02 or not candidates:
            return None  # the timer plays
        if roll < 0.025:
            return PlayerLeft(seat)
        if roll < 0.03:
            return PlayerDisconnected(seat)
        takes = [b for b in candidates if isinstance(b, CardTaken)]
        if takes and roll < 0.8:
            return takes[0]
        return rng.choice(list(candidates))

    return choose


def kept_or_sent_after_lay_downs(bodies: Sequence[Body]) -> Iterator[frozenset[Card]]:
    """For each last turn of the hand (HandStarted first in ``bodies``), the cards the seat
    kept or sent after laying down: what it held after the lay-down (by ``MeldsLaid`` or
    its timer), less its final discard."""
    state = phom.initial_state(bodies[0])
    after_lay: dict[int, frozenset[Card]] = {}
    for body in bodies[1:]:
        before, state = state, phom.apply(state, body)
        seat = before.to_act
        if seat is None:
            continue
        if before.phase == phom.LAY and state.phase == phom.SEND:
            after_lay[seat] = frozenset(state.hands[seat])
        elif before.phase == phom.SEND and len(state.discards) > len(before.discards):
            yield after_lay.pop(seat) - {state.discards[-1].card}


def _check_hand(state: phom.State, bodies: Sequence[Body]) -> None:
    started = state.started
    assert phom.hand_cards(state) == 52
    assert state.stock_left >= 0
    # Cards are where the events put them, each once.
    places = [c for h in state.hands.values() for c in h]
    places += [c for p in state.piles.values() for c in p]
    places += [c for melds in state.laid.values() for m in melds for c in m]
    places += list(state.dead)
    assert len(places) == len(set(places)) == 52 - state.stock_left
    # The cards dealt, as the deal's duplicate check keeps them, are the cards in play.
    assert state.dealt_mask == sum(1 << c.index for c in places)
    for melds in state.laid.values():
        assert all(is_meld(m) for m in melds)
    # Every Phỏm is laid down: junk, kept or sent, is only what is in no Phỏm (§6.1, §6.2).
    for kept_or_sent in kept_or_sent_after_lay_downs(bodies):
        assert not has_meld(list(kept_or_sent)), sorted(kept_or_sent, key=str)
    # Taken cards end in the taker's laid melds, or stay bound in the hand of a taker whose
    # final turn never came (a Ù or the last forfeit ended play), or left play with the taker.
    laid_by = {s: {c for m in melds for c in m} for s, melds in state.laid.items()}
    for record in state.discards:
        if record.taken_by is None:
            continue
        taker = record.taken_by
        assert (
            record.card in laid_by[taker]
            or record.card in state.taken[taker]
            or (taker in state.out and record.card in state.dead)
        )
    if state.u is not None:
        u_seat = state.u.seat
        assert find_u(state.hands[u_seat], state.taken[u_seat], drew_from_stock=u_seat in state.drew) is not None
    # Every taken card was the discard just before the take (what the audit's replay checks).
    replayed = phom.initial_state(started)
    for body in bodies[1:]:
        if isinstance(body, CardTaken):
            last = replayed.discards[-1]
            assert (last.seat, last.card, last.taken_by) == (body.from_seat, body.card, None)
        replayed = phom.apply(replayed, body)
    assert replayed == state
    settlement = phom.settle(state)
    assert sum(settlement.entries().values()) == 0
    stacks = {info.seat: info.stack_gold for info in started.seats}
    for seat, net in settlement.nets.items():
        assert net >= -stacks[seat]
    assert set(t.reason for t in settlement.transfers) <= set(phom.REASONS)


def _play(count: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    seen: dict[str, int] = {}
    for number in range(count):
        hand_seed = rng.randbytes(32)
        started = _started(rng, number, hand_seed)
        bodies, state = autoplay.play_hand(phom, started, hand_seed, _bot(rng))
        _check_hand(state, bodies)
        for t in phom.settle(state).transfers:
            seen[t.reason] = seen.get(t.reason, 0) + 1
        for body in bodies:
            kind = type(body).__name__
            if isinstance(body, Declared):
                kind = f"Declared:{body.declaration}"
            seen[kind] = seen.get(kind, 0) + 1
    return seen


def test_self_play_keeps_every_invariant_and_reaches_every_kind_of_move() -> None:
    seen = _play(400, seed=1)
    for kind in ("CardTaken", "Declared:draw", "MeldsLaid", "CardSent", "Declared:u", "CardsPlayed"):
        assert seen.get(kind, 0) > 0, kind
    for reason in ("an_cay", "an_chot", "u_thuong", "mom", "ve_nhi", "ve_chot", "disconnect_forfeit"):
        assert seen.get(reason, 0) > 0, reason


@pytest.mark.slow
@pytest.mark.heavy
def test_ten_thousand_self_played_hands_keep_every_invariant() -> None:
    seen = _play(10_000, seed=2)
    assert seen["u_tron"] > 0 and seen["u_den"] > 0 and seen["an_cay_2"] > 0


def test_replay_of_self_play_gives_the_same_state_and_a_rejected_event_changes_nothing() -> None:
    rng = random.Random(3)
    for number in range(5):
        hand_seed = rng.randbytes(32)
        started = _started(rng, number, hand_seed)
        bodies, final = autoplay.play_hand(phom, started, hand_seed, _bot(rng))
        assert autoplay.replay(phom, bodies) == final
        state = phom.initial_state(started)
        for body in bodies[1:]:
            for seat in state.order:
                bad_bodies: list[Body] = [
                    Declared(seat, "draw"),
                    Declared(seat, "u"),
                    MeldsLaid(seat, ()),
                    CardsDealt(()),
                ]
                bad_bodies += [CardsPlayed(seat, (card,)) for card in state.hands[seat][:2]]
                bad_bodies += [CardTaken(seat, r.seat, r.card) for r in state.discards[-2:]]
                for bad in bad_bodies:
                    before = snapshot(state)
                    try:
                        phom.apply(state, bad)
                    except RuleViolation:
                        pass
                    assert snapshot(state) == before
            state = phom.apply(state, body)
