"""Settlement's replay keeps only the table's sealed hand chain (socai_settlement.sealed_replay)."""

from __future__ import annotations

import dataclasses

from socai.events import codec, seal
from socai.events.model import Event, HandEnded, subject
from socai_settlement.hand_cache import HandCache
from socai_settlement.sealed_replay import EventBytes, HandInput, SealPolicy, replay_payloads, sealed_events
from tests.support.synthetic import DEV_SIGNER, SimHand, simulate

SIM = simulate(2, ("xito", "taixiu"), seed=41)
POLICY = SealPolicy(((DEV_SIGNER.key_id, DEV_SIGNER.public_key),))


def as_stored(
    hand: SimHand,
    signer: seal.HandSigner | None = DEV_SIGNER,
    first_seq: int = 10,
    strangers: dict[int, bytes] | None = None,
) -> list[EventBytes]:
    """The hand's messages as the pipeline caches them, chained and sealed like the table
    writes them; ``strangers[i]`` is a stranger's message forked after event ``i``."""
    subj = subject(hand.table_id, hand.hand_id)
    out: list[EventBytes] = []
    prev = seal.genesis(subj)
    seq = first_seq
    for i, e in enumerate(hand.events):
        payload = codec.encode(e)
        headers = {seal.PREV_HEADER: prev.hex()}
        prev = seal.link(prev, subj, payload)
        if signer is not None and isinstance(e.body, HandEnded):
            headers.update(signer.headers(subj, prev))
        out.append(EventBytes(e.seq, e.hand_id, e.table_id, payload, seq, tuple(headers.items())))
        seq += 1
        if strangers and i in strangers:
            out.append(
                EventBytes(e.seq + 1, e.hand_id, e.table_id, strangers[i], seq, ((seal.PREV_HEADER, prev.hex()),))
            )
            seq += 1
    return out


def input_of(hand: SimHand, stored: list[EventBytes]) -> HandInput:
    return HandInput(hand.hand_id, subject(hand.table_id, hand.hand_id), stored[-1].stream_seq, tuple(stored))


def nets(settled: object) -> dict[int, int]:
    return {seat: net for seat, _, _, net in settled.seats}  # type: ignore[attr-defined]


def later(event: Event) -> bytes:
    return codec.encode(dataclasses.replace(event, occurred_at=event.occurred_at.replace(year=2001)))


def test_a_sealed_hand_replays_to_the_table_s_settlement() -> None:
    hand = SIM.hands[0]
    (got,) = replay_payloads([input_of(hand, as_stored(hand))], POLICY)
    assert got.settled is not None and nets(got.settled) == dict(hand.settlement.nets)
    assert got.strangers == () and got.end_stream_seq == 10 + len(hand.events) - 1


def test_a_stranger_s_event_in_the_cached_copy_is_left_out_and_named() -> None:
    hand = SIM.hands[0]
    stored = as_stored(hand, strangers={1: later(hand.events[2])})
    # The cache hands it over with the stranger: seq 1..n are all there.
    cache = HandCache(1000)
    for m in stored[:-1]:
        cache.add(hand.table_id, hand.hand_id, m.stream_seq, m)
    taken = cache.take(hand.table_id, hand.hand_id, stored[-1].stream_seq, stored[-1])
    assert taken == stored
    (got,) = replay_payloads([input_of(hand, stored)], POLICY)
    assert got.settled is not None and nets(got.settled) == dict(hand.settlement.nets)
    assert got.strangers == ((12, seal.NOT_ON_CHAIN),)


def test_an_unsealed_or_foreign_sealed_hand_is_not_replayed() -> None:
    hand = SIM.hands[1]
    (unsealed,) = replay_payloads([input_of(hand, as_stored(hand, signer=None))], POLICY)
    assert unsealed.settled is None and unsealed.error_code == seal.HAND_UNSEALED
    forger = seal.HandSigner(seal.derive_private_key("forger"))
    (foreign,) = replay_payloads([input_of(hand, as_stored(hand, signer=forger))], POLICY)
    assert foreign.settled is None and foreign.error_code == seal.HAND_SEAL_INVALID


def test_a_legacy_hand_is_replayed_unsealed_only_below_the_cutoff() -> None:
    hand = SIM.hands[1]
    legacy = [m._replace(chain_headers=()) for m in as_stored(hand, signer=None, first_seq=10)]
    (refused,) = replay_payloads([input_of(hand, legacy)], POLICY)
    assert refused.error_code == seal.HAND_UNSEALED
    (accepted,) = replay_payloads([input_of(hand, legacy)], POLICY._replace(legacy_before_seq=11))
    assert accepted.settled is not None and nets(accepted.settled) == dict(hand.settlement.nets)
    (too_new,) = replay_payloads([input_of(hand, legacy)], POLICY._replace(legacy_before_seq=10))
    assert too_new.error_code == seal.HAND_UNSEALED


def test_a_sealed_message_that_is_not_an_event_makes_the_hand_bad_event() -> None:
    hand = SIM.hands[0]
    subj = subject(hand.table_id, hand.hand_id)
    payloads = [codec.encode(e) for e in hand.events]
    payloads[1] = b"\xff\xff not an event"  # the table's own chain and seal cover it
    stored, prev = [], seal.genesis(subj)
    for i, (e, payload) in enumerate(zip(hand.events, payloads, strict=True)):
        headers = {seal.PREV_HEADER: prev.hex()}
        prev = seal.link(prev, subj, payload)
        if i == len(payloads) - 1:
            headers.update(DEV_SIGNER.headers(subj, prev))
        stored.append(EventBytes(e.seq, e.hand_id, e.table_id, payload, 10 + i, tuple(headers.items())))
    events, checked = sealed_events(input_of(hand, stored), POLICY)
    assert events == [] and checked.error_code == "BAD_EVENT"
    (got,) = replay_payloads([input_of(hand, stored)], POLICY)
    assert got.settled is None and got.error_code == "BAD_EVENT"
    # The same hand with its real bytes decodes to the chain's events, first to last.
    events, checked = sealed_events(input_of(hand, as_stored(hand)), POLICY)
    assert checked.error_code == "" and [ev.seq for ev in events] == [e.seq for e in hand.events]
