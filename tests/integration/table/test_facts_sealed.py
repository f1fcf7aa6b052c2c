"""The table service seals every one of its own facts (issue 33): a table's opening, each
buy-in and stand-up carry ``Socai-Facts-Seal`` over their chain value, so an offline audit
of a stored export proves the facts are the table's and whole, as it does a hand."""

from __future__ import annotations

import pytest

from socai.audit.auditor import Seals, verify
from socai.audit.export import _decode
from socai.events import seal
from socai.gen.table.v1 import table_pb2 as pb
from tests.integration.table.conftest import World, seat_players

pytestmark = pytest.mark.integration


async def test_every_fact_the_table_writes_is_sealed_and_the_audit_checks_them(world: World) -> None:
    w = world
    table_id, _ = await seat_players(w, "holdem", [1000, 1000], stake_gold=100, seats_max=2)
    await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
    subject = w.log.subject_of(table_id, f"{table_id}-t")
    facts = [r async for r in w.log.read_raw(subject)]
    assert len(facts) >= 3  # opened, two seated
    assert all(seal.FACTS_SEAL_HEADER in r.headers and seal.SEAL_HEADER not in r.headers for r in facts)
    keys = w.running.settings.hand_seal_public_keys()
    messages = [seal.Message(r.stream_seq, r.data, r.headers) for r in facts]
    verdict = seal.authenticate(subject, messages, seal.SealVerifier(keys, facts=True), [len(messages) - 1])
    assert verdict.ok and verdict.hand == tuple(range(len(messages))), verdict.detail
    # A fact's seal is no hand seal: moved into Socai-Hand-Seal it does not verify (the labels differ).
    last = messages[-1]
    moved = {**last.headers, seal.SEAL_HEADER: last.headers[seal.FACTS_SEAL_HEADER]}
    as_hand = [*messages[:-1], seal.Message(last.stream_seq, last.payload, moved)]
    assert seal.authenticate(subject, as_hand, seal.SealVerifier(keys), [len(messages) - 1]).reason == (
        seal.HAND_SEAL_INVALID
    )
    raws = [_decode(r.stream_seq, subject, r.data, tuple(r.headers.items())) for r in facts]
    report = verify(raws, source="facts", seals=Seals(seal.SealVerifier(keys), w.running.settings.events_prefix)).report
    assert report.ok, report.render()
    assert report.proof.facts_sealed == len(facts) and report.proof.facts_unsealed == 0
