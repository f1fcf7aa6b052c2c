"""Phỏm rules versions: a hand recorded under version 1 (HandStarted.rules_version 0 or 1)
replays exactly as version 1 played it, events, transfers, details and nets alike.

The pin below is a hash of 1,000 self-played version-1 hands (events and settlements),
computed on the version-1 engine before version 2 existed: bots that take, draw, lay the
best melds or only some of them, send, Ù, let the timer play, leave and disconnect. The
same seeds must give the same hash for as long as version 1 is replayed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Sequence
from typing import Final

from socai import fairness
from socai.cards import Card
from socai.events.model import (
    Body,
    CardTaken,
    HandStarted,
    Meld,
    MeldsLaid,
    PlayerDisconnected,
    PlayerLeft,
    SeatInfo,
    TimerExpired,
)
from socai.rules import autoplay
from socai.rules.base import Settlement
from socai.rules.rummy import phom

STAKE = 50
# sha256 of the canonical JSON (``_digest``) of the first 1,000 and 300 hands of
# ``_v1_hands``, pinned on the version-1 engine; rules_version 0 (hands logged before
# HandStarted carried it) is version 1 too.
V1_DIGEST_1000: Final = "d303f9dc1fb847b4d55d69af8d134a8a9b75a84ba809fe7e4615a2861d790ceb"
V0_DIGEST_300: Final = "b97b3c34c16d447f26e17b679238a14db7d12c7bef114c1f373eb8b28877195b"


def _added_later(value: object, name: str) -> bool:
    """A field added to an event after the digests below were pinned, at its empty default
    (as the log's own JSON mapping leaves it out): ``TimerExpired.automatic``, the move a
    table records; self-play records none, so these hands are the same hands."""
    return isinstance(value, TimerExpired) and name == "automatic" and not value.automatic


def _canonical(value: object) -> object:
    """``value`` as plain JSON data: a card as its text, a dataclass as its name and fields."""
    if isinstance(value, Card):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: _canonical(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not _added_later(value, f.name)
        }
        return {"type": type(value).__name__, **fields}
    if isinstance(value, tuple | list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}  # type: ignore[attr-defined]
    return value


def _started(rng: random.Random, number: int, seed: bytes, rules_version: int) -> HandStarted:
    players = rng.randint(2, 4)
    seats = sorted(rng.sample(range(4), players))
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
        rules_version=rules_version,
    )


def _bot(rng: random.Random) -> autoplay.Chooser:
    """A bot that mostly takes, and on its last turn sometimes lays only some of its best
    melds (every taken card still laid): version 1 accepts such a lay."""

    def choose(state: phom.State, seat: int, candidates: Sequence[Body]) -> Body | None:
        roll = rng.random()
        if roll < 0.03 or not candidates:
            return None  # the timer plays
        if roll < 0.035:
            return PlayerLeft(seat)
        if roll < 0.04:
            return PlayerDisconnected(seat)
        takes = [b for b in candidates if isinstance(b, CardTaken)]
        if takes and roll < 0.8:
            return takes[0]
        lays = [b for b in candidates if isinstance(b, MeldsLaid)]
        if lays and roll < 0.6:
            taken = state.taken[seat]
            kept = tuple(m for m in lays[0].melds if taken & set(m.cards) or rng.random() < 0.5)
            return MeldsLaid(seat, tuple(Meld(m.cards) for m in kept))
        return rng.choice(list(candidates))

    return choose


def _v1_hands(count: int, rules_version: int) -> list[tuple[list[Body], Settlement]]:
    rng = random.Random(28)
    out = []
    for number in range(count):
        hand_seed = rng.randbytes(32)
        started = _started(rng, number, hand_seed, rules_version)
        bodies, _ = autoplay.play_hand(phom, started, hand_seed, _bot(rng))
        out.append((bodies, phom.settle(autoplay.replay(phom, bodies))))
    return out


def _digest(hands: Sequence[tuple[Sequence[Body], Settlement]]) -> str:
    data = [{"events": _canonical(list(bodies[1:])), "settlement": _canonical(s)} for bodies, s in hands]
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_version_1_hands_play_and_settle_as_version_1_always_did() -> None:
    assert _digest(_v1_hands(1000, rules_version=1)) == V1_DIGEST_1000


def test_hands_without_a_rules_version_are_version_1() -> None:
    assert _digest(_v1_hands(300, rules_version=0)) == V0_DIGEST_300
