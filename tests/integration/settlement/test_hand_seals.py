"""Settlement replays only what the table sealed (issue 17, defect 1: "only the owning
instance's own writes are the table's truth"): a stranger who can publish to the event
stream cannot add an event to a hand, nor a whole hand paying themselves, nor alter a sealed
one. Settlement holds only the table's public keys (socai.events.seal)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import grpc
import pytest
from prometheus_client import REGISTRY

from socai import accounts
from socai.events import codec, seal
from socai.events.model import Event, HandEnded
from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai.infra.grpc_errors import error_reason
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import DEV_SIGNER, SimHand, Simulation, fund, publish, publish_hand, simulate

pytestmark = pytest.mark.integration


def dead_letters(reason: str) -> float:
    return REGISTRY.get_sample_value("socai_settlement_dead_letters_total", {"reason": reason}) or 0.0


def not_the_tables() -> float:
    return REGISTRY.get_sample_value("socai_settlement_ignored_messages_total", {"kind": "not_the_tables"}) or 0.0


async def settled(harness: Harness, hands: int, dead: int = 0) -> None:
    async def check() -> bool:
        return await harness.counts() == (hands, dead)

    await wait_for(check, 90, f"{hands} settlements and {dead} dead letters")


async def escrows_match(harness: Harness, sim: Simulation) -> None:
    for account, expected in sim.expected_balances().items():
        if account.startswith("escrow:"):
            assert await harness.balance(account) == expected, account


def forged_copy(event: Event) -> bytes:
    """The event with another timestamp: the same table, hand and seq, other bytes."""
    return codec.encode(dataclasses.replace(event, occurred_at=event.occurred_at.replace(year=2001)))


async def test_a_stranger_s_event_mid_hand_is_not_replayed_and_the_hand_settles_as_the_table_played_it(
    harness: Harness,
) -> None:
    sim = simulate(3, ("holdem",), seed=1717, hands_per_table=3)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await harness.start_settlement()
    before = not_the_tables()
    target = sim.hands[1]
    # After the second event, a stranger publishes a forged third one (seq 3, its own bytes),
    # chained from what the table wrote so far. Replayed, it would stand in for the table's
    # seq 3 and the hand would not settle as played.
    for table in sim.tables:
        await publish_hand(harness.log, table.table_events)
        for hand in table.hands:
            strangers = {1: [forged_copy(hand.events[2])]} if hand is target else None
            await publish_hand(harness.log, hand, strangers=strangers)

    await settled(harness, len(sim.hands))
    assert not_the_tables() == before + 1
    record = await harness.api("auditor").GetSettlement(pb.GetSettlementRequest(hand_id=target.hand_id))
    assert {s.seat: s.net_gold for s in record.settlement.seats} == dict(target.settlement.nets)
    await escrows_match(harness, sim)
    # The auditor's ReplayHand reads the subject as the consumer does: the stranger is left
    # out, and the replay agrees with what was settled.
    replayed = await harness.api("auditor").ReplayHand(pb.ReplayHandRequest(hand_id=target.hand_id))
    assert list(replayed.differences) == []
    assert {s.seat: s.net_gold for s in replayed.recomputed.seats} == dict(target.settlement.nets)


def hands_read_from_stream() -> float:
    return REGISTRY.get_sample_value("socai_settlement_hands_read_total", {"source": "stream"}) or 0.0


async def test_the_same_stranger_is_caught_when_the_hand_is_read_from_the_stream(harness: Harness) -> None:
    """With no cached copy (a restart, a full cache) the hand is read by subject, stranger and all."""
    sim = simulate(1, ("xito",), seed=1718, hands_per_table=1)
    hand = sim.hands[0]
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await publish_hand(harness.log, sim.tables[0].table_events)
    await publish_hand(harness.log, hand, strangers={0: [forged_copy(hand.events[1])]})
    before, read_before = not_the_tables(), hands_read_from_stream()
    await harness.start_settlement(dataclasses.replace(harness.config, cache_events_max=1))
    await settled(harness, 1)
    assert hands_read_from_stream() == read_before + 1
    assert not_the_tables() == before + 1
    await escrows_match(harness, sim)


@pytest.mark.parametrize(
    ("signer", "reason"),
    [(None, seal.HAND_UNSEALED), (seal.HandSigner(seal.derive_private_key("forger")), seal.HAND_SEAL_INVALID)],
    ids=["unsealed", "sealed-by-the-forger"],
)
async def test_a_forged_whole_hand_posts_nothing_and_is_dead_lettered(
    harness: Harness, signer: seal.HandSigner | None, reason: str
) -> None:
    genuine = simulate(2, ("xito",), seed=1719, hands_per_table=2, table_prefix="real")
    forged = simulate(1, ("taixiu",), seed=1720, hands_per_table=1, table_prefix="forged")
    await harness.start_ledger()
    # The forger's escrows are even funded: only the seal stands between the hand and the ledger.
    await fund(harness.ledger("cashier"), genuine)
    await fund(harness.ledger("cashier"), forged)
    await harness.start_settlement()
    before = dead_letters(reason)
    await publish(harness.log, genuine)
    hand = forged.hands[0]
    await publish_hand(harness.log, hand, signer=signer)

    await settled(harness, len(genuine.hands), dead=1)
    assert dead_letters(reason) == before + 1
    letters = (await harness.api("operator").ListDeadLetters(pb.ListDeadLettersRequest())).dead_letters
    assert [(d.hand_id, d.reason) for d in letters] == [(hand.hand_id, reason)]
    assert await harness.transaction(f"settle:{hand.hand_id}") is None
    await escrows_match(harness, genuine)
    # Nor does ReplayHand replay it as if it were a hand: it says why it is none.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await harness.api("auditor").ReplayHand(pb.ReplayHandRequest(hand_id=hand.hand_id))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(err.value) == reason
    # The forger's escrows hold their buy-ins, untouched.
    for table in forged.tables:
        for s in table.seats:
            assert await harness.balance(accounts.escrow(table.table_id, s.player_id)) == s.buy_in_gold


def with_seed(seed_hex: str) -> Callable[[Event], Event]:
    """Rewrites HandEnded's revealed seed after the table sealed it."""

    def tamper(event: Event) -> Event:
        return dataclasses.replace(event, body=HandEnded(seed_hex)) if isinstance(event.body, HandEnded) else event

    return tamper


async def test_a_tampered_sealed_hand_ended_is_caught_by_its_seal(harness: Harness) -> None:
    sim = simulate(1, ("taixiu",), seed=1721, hands_per_table=1)
    hand: SimHand = sim.hands[0]
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await harness.start_settlement()
    before = dead_letters(seal.HAND_SEAL_INVALID)
    await publish_hand(harness.log, sim.tables[0].table_events)
    await publish_hand(harness.log, hand, tamper=with_seed("ab" * 32))

    await settled(harness, 0, dead=1)
    assert dead_letters(seal.HAND_SEAL_INVALID) == before + 1
    assert await harness.transaction(f"settle:{hand.hand_id}") is None


async def test_during_a_key_rotation_hands_sealed_by_either_key_settle(harness: Harness) -> None:
    new_key = seal.HandSigner(seal.derive_private_key("table-seal-2027"))
    stale_key = seal.HandSigner(seal.derive_private_key("table-seal-2020"))
    harness.settings = dataclasses.replace(
        harness.settings, table_seal_public_keys=(DEV_SIGNER.public_key.hex(), new_key.public_key.hex())
    )
    sim = simulate(6, ("taixiu",), seed=1722, hands_per_table=2)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await harness.start_settlement()
    before = dead_letters(seal.HAND_SEAL_INVALID)
    signers = [DEV_SIGNER, new_key, stale_key]
    for table, signer in zip(sim.tables, signers, strict=True):
        await publish_hand(harness.log, table.table_events)
        for hand in table.hands:
            await publish_hand(harness.log, hand, signer=signer)

    stale = sim.tables[2].hands
    await settled(harness, len(sim.hands) - len(stale), dead=len(stale))
    assert dead_letters(seal.HAND_SEAL_INVALID) == before + len(stale)
    for hand in (*sim.tables[0].hands, *sim.tables[1].hands):
        assert await harness.transaction(f"settle:{hand.hand_id}") is not None or not hand.settlement.entries()
