"""Attacks on settlement through the running services (issue 16, defects 5, 6 and 8).

- A backend that posts under a hand's predictable key ``settle:{table}-h{n}`` before the
  hand ends used to make its settlement fail forever (IDEMPOTENCY_KEY_REUSED, then a dead
  letter): the ledger now reserves the key to settlement, and the hand settles.
- Malformed page tokens (NUL bytes, 5,000-digit and beyond-int64 numbers) are
  INVALID_ARGUMENT, not INTERNAL; a 10,000-character id is INVALID_ARGUMENT with a short
  message, not RESOURCE_EXHAUSTED; a player id with a dot (valid in accounts) is accepted.
"""

from __future__ import annotations

import base64
from typing import Any

import grpc
import pytest

from socai.gen.ledger.v1 import ledger_pb2
from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai.infra.grpc_errors import error_reason
from socai_settlement.store import SeatNet, SettlementRecord
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import fund, publish, simulate

pytestmark = pytest.mark.integration

# What an error may quote back (the services cap their messages at 512 characters).
MESSAGE_BOUND = 512


async def test_a_backend_squatting_a_hands_settlement_key_cannot_block_the_hand(harness: Harness) -> None:
    sim = simulate(2, ("holdem",), seed=16, hands_per_table=2)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await harness.ledger("cashier").Deposit(
        ledger_pb2.DepositRequest(idempotency_key="mallory", player_id="mallory", amount_gold=10)
    )
    backend = harness.ledger("backend")
    for hand in sim.hands:  # before the hands end: their ids are predictable
        squat = ledger_pb2.TransactionInput(
            idempotency_key=f"settle:{hand.hand_id}",
            kind="settlement",
            entries=[
                ledger_pb2.EntryInput(account_id="player:mallory", amount_gold=-1),
                ledger_pb2.EntryInput(account_id="player:eve", amount_gold=1),
            ],
            open_accounts=True,
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await backend.PostTransaction(ledger_pb2.PostTransactionRequest(transaction=squat))
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error_reason(caught.value) == "IDEMPOTENCY_KEY_RESERVED"
    # Nor can it take a seat's chips out of a live table.
    seat = sim.tables[0].seats[0]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await backend.Transfer(
            ledger_pb2.TransferRequest(
                idempotency_key="grab",
                from_account_id=f"escrow:{sim.tables[0].table_id}:{seat.player_id}",
                to_account_id="player:mallory",
                amount_gold=1,
            )
        )
    assert (caught.value.code(), error_reason(caught.value)) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "ACCOUNT_NOT_ALLOWED",
    )

    await harness.start_settlement()
    await publish(harness.log, sim)

    async def done() -> bool:
        return (await harness.counts())[0] == len(sim.hands)

    await wait_for(done, 60, "the hands to settle")
    assert (await harness.counts())[1] == 0  # no dead letter
    for hand in sim.hands:
        if hand.settlement.entries():
            tx = await harness.transaction(f"settle:{hand.hand_id}")
            assert tx is not None and tx.kind == "settlement"


def settlement_token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


BAD_TOKENS = [
    ("a 5,000-digit sequence", settlement_token("9" * 5_000 + ":t1-h1")),
    ("a 4,000-digit sequence", settlement_token("9" * 4_000 + ":t1-h1")),
    ("a sequence beyond int64", settlement_token("99999999999999999999:t1-h1")),
    ("a NUL in the hand id", settlement_token("5:t1\x00-h1")),
    ("a NUL alone", settlement_token("\x00")),
    ("non-ASCII digits", settlement_token("١٢:t1-h1")),
    ("not base64", "!!!!"),
]


@pytest.mark.parametrize(("what", "token"), BAD_TOKENS, ids=[c[0] for c in BAD_TOKENS])
async def test_a_malformed_page_token_is_invalid_argument(harness: Harness, what: str, token: str) -> None:
    await harness.start_ledger()
    await harness.start_settlement()
    api = harness.api("auditor")
    requests: list[tuple[str, Any]] = [
        ("ListSettlements", pb.ListSettlementsRequest(table_id="t1", page_token=token)),
        ("ListSettlements", pb.ListSettlementsRequest(player_id="t1p0", page_token=token)),
        ("ListDeadLetters", pb.ListDeadLettersRequest(page_token=token)),
    ]
    for method, request in requests:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(api, method)(request)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, caught.value.details())
        assert error_reason(caught.value) == "BAD_PAGE_TOKEN"
    assert await harness.counts() == (0, 0)


async def test_a_huge_id_is_invalid_argument_with_a_short_message(harness: Harness) -> None:
    await harness.start_ledger()
    await harness.start_settlement()
    api = harness.api("operator")
    huge = "h" * 10_000
    for method, request in [
        ("GetSettlement", pb.GetSettlementRequest(hand_id=huge)),
        ("ListSettlements", pb.ListSettlementsRequest(table_id=huge)),
        ("ListSettlements", pb.ListSettlementsRequest(player_id=huge)),
        ("ReplayHand", pb.ReplayHandRequest(hand_id=huge)),
        ("RetryDeadLetter", pb.RetryDeadLetterRequest(hand_id=huge)),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(api, method)(request)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, caught.value.code())
        assert error_reason(caught.value) == "BAD_ID"
        assert 0 < len(caught.value.details() or "") <= MESSAGE_BOUND


async def test_a_player_id_with_a_dot_lists_that_players_settlements(harness: Harness) -> None:
    await harness.start_ledger()
    app = await harness.start_settlement()
    record = SettlementRecord(
        hand_id="t1-h1",
        table_id="t1",
        game="holdem",
        stream_seq=7,
        seats=(SeatNet(0, "ann.lee", "escrow:t1:ann.lee", 10), SeatNet(1, "bo", "escrow:t1:bo", -10)),
        transfers=(),
        fees_gold=0,
        penalties_gold={},
        shortfalls=(),
        pot_carry_gold=0,
        ledger_transaction_id="",
        idempotency_key="settle:t1-h1",
    )
    await app.store.commit([record])
    reply = await harness.api("backend").ListSettlements(pb.ListSettlementsRequest(player_id="ann.lee"))
    assert [s.hand_id for s in reply.settlements] == ["t1-h1"]
    # Table and hand ids are NATS subject tokens: a dot there is still refused.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.api("backend").ListSettlements(pb.ListSettlementsRequest(table_id="t.1"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
