"""Each writer moves only the gold its flow needs, under keys no other caller can take.

The attack these guard against (issue 16, defect 5): idempotency keys were one namespace
across callers and hand ids are predictable, so a backend posting under
``settle:{table}-h1`` before the hand ended made that hand's settlement fail forever; and a
backend could move any escrow's gold. Every refusal is PERMISSION_DENIED with a reason and
writes nothing: the key stays free for its owner.
"""

from __future__ import annotations

import grpc
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.grpc_errors import error_reason
from tests.integration.ledger.conftest import Ledger, balances, deposit, fund_escrow, journal_snapshot, transaction

pytestmark = pytest.mark.integration

DENIED = grpc.StatusCode.PERMISSION_DENIED


async def post(ledger: Ledger, caller: str, tx: pb.TransactionInput) -> pb.PostResult:
    reply = await ledger.stub(caller).PostTransaction(pb.PostTransactionRequest(transaction=tx))
    return reply.result


async def denied(ledger: Ledger, caller: str, tx: pb.TransactionInput) -> str:
    """The reason ``caller`` may not post ``tx``; asserts that nothing was written."""
    url = ledger.settings.database_url or ""
    before = journal_snapshot(url)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await post(ledger, caller, tx)
    assert caught.value.code() == DENIED, caught.value.details()
    assert caught.value.details()
    assert journal_snapshot(url) == before
    return error_reason(caught.value)


def settlement(key: str, *legs: tuple[str, int], **metadata: str) -> pb.TransactionInput:
    return transaction(key, *legs, kind="settlement", open_accounts=True, **metadata)


async def test_a_backend_cannot_take_a_hands_settlement_key_and_the_hand_still_settles(ledger: Ledger) -> None:
    await deposit(ledger, "mallory", 100)
    await deposit(ledger, "bob", 100)
    await fund_escrow(ledger, "t1", "ann", 500)
    await fund_escrow(ledger, "t1", "bo", 500)
    squat = transaction("settle:t1-h1", ("player:mallory", -1), ("player:bob", 1))
    assert await denied(ledger, "backend", squat) == "IDEMPOTENCY_KEY_RESERVED"
    batch = await ledger.stub("backend").PostTransactions(pb.PostTransactionsRequest(transactions=[squat]))
    assert (batch.results[0].status, batch.results[0].error_reason) == (
        pb.POST_STATUS_REJECTED,
        "IDEMPOTENCY_KEY_RESERVED",
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ledger.stub("auditor").GetTransaction(pb.GetTransactionRequest(idempotency_key="settle:t1-h1"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND  # the key is still free …

    # … so the hand settles under it when it ends.
    hand = settlement(
        "settle:t1-h1",
        ("escrow:t1:ann", -100),
        ("escrow:t1:bo", 95),
        ("house:fees", 5),
        table_id="t1",
        hand_id="t1-h1",
    )
    assert (await post(ledger, "settlement", hand)).status == pb.POST_STATUS_APPLIED
    assert (await post(ledger, "settlement", hand)).status == pb.POST_STATUS_REPLAYED


@pytest.mark.parametrize(
    ("caller", "key"),
    [
        ("backend", "join:t1:k1"),
        ("backend", "cashout:c1"),
        ("backend", "refund:t1:k1"),
        ("settlement", "join:t1:k1"),
        ("table", "settle:t1-h1"),
        ("table", "settle:t1-h1:retry1"),
        ("cashier", "settle:t1-h1"),
        ("cashier", "cashout:c1"),
        ("operator", "join:t1:k1"),
    ],
)
async def test_reserved_key_prefixes_belong_to_one_caller(ledger: Ledger, caller: str, key: str) -> None:
    await deposit(ledger, "ann", 100)
    await fund_escrow(ledger, "t1", "ann", 100)
    tx = transaction(key, ("player:ann", -10), ("escrow:t1:ann", 10))
    if caller in ("cashier", "operator"):  # they reach Transfer only
        url = ledger.settings.database_url or ""
        before = journal_snapshot(url)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await ledger.stub(caller).Transfer(
                pb.TransferRequest(
                    idempotency_key=key, from_account_id="player:ann", to_account_id="escrow:t1:ann", amount_gold=10
                )
            )
        assert caught.value.code() == DENIED
        assert error_reason(caught.value) == "IDEMPOTENCY_KEY_RESERVED"
        assert journal_snapshot(url) == before
        return
    assert await denied(ledger, caller, tx) == "IDEMPOTENCY_KEY_RESERVED"


async def test_a_backend_moves_gold_between_wallets_only(ledger: Ledger) -> None:
    await deposit(ledger, "ann", 100)
    await fund_escrow(ledger, "t1", "ann", 500)
    paid = await post(
        ledger, "backend", transaction("gift-1", ("player:ann", -10), ("player:bo", 10), open_accounts=True)
    )
    assert paid.status == pb.POST_STATUS_APPLIED
    # A live table's money is the table's: no escrow, pot, house or guild account.
    for key, legs in [
        ("steal-1", (("escrow:t1:ann", -500), ("player:mallory", 500))),
        ("steal-2", (("player:ann", -10), ("escrow:t1:ann", 10))),
        ("steal-3", (("player:ann", -10), ("pot:t1", 10))),
        ("steal-4", (("player:ann", -10), ("house:fees", 10))),
        ("steal-5", (("player:ann", -10), ("guild:g1", 10))),
    ]:
        assert await denied(ledger, "backend", transaction(key, *legs, open_accounts=True)) == "ACCOUNT_NOT_ALLOWED"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ledger.stub("backend").Transfer(
            pb.TransferRequest(
                idempotency_key="steal-6",
                from_account_id="escrow:t1:ann",
                to_account_id="player:mallory",
                amount_gold=500,
                open_accounts=True,
            )
        )
    assert (caught.value.code(), error_reason(caught.value)) == (DENIED, "ACCOUNT_NOT_ALLOWED")
    assert balances(ledger.settings.database_url or "", ["escrow:t1:ann", "player:mallory"]) == {
        "escrow:t1:ann": 500,
        "player:mallory": 0,
    }


async def test_the_table_service_moves_gold_between_a_wallet_and_its_owners_escrow_only(ledger: Ledger) -> None:
    await deposit(ledger, "ann", 1_000)
    await fund_escrow(ledger, "t1", "bo", 500)
    table = ledger.stub("table")
    buy_in = await table.Transfer(
        pb.TransferRequest(
            idempotency_key="join:t1:ann:k1",
            from_account_id="player:ann",
            to_account_id="escrow:t1:ann",
            amount_gold=300,
            kind="buy_in",
            reference="t1",
            open_accounts=True,
        )
    )
    assert buy_in.result.status == pb.POST_STATUS_APPLIED
    cash_out = await table.Transfer(
        pb.TransferRequest(
            idempotency_key="cashout:c1",
            from_account_id="escrow:t1:ann",
            to_account_id="player:ann",
            amount_gold=300,
            kind="cash_out",
            reference="t1",
        )
    )
    assert cash_out.result.status == pb.POST_STATUS_APPLIED
    for key, legs in [
        ("t-1", (("escrow:t1:bo", -500), ("player:ann", 500))),  # another player's chips
        ("t-2", (("player:ann", -10), ("escrow:t1:bo", 10))),  # into another player's escrow
        ("t-3", (("escrow:t1:bo", -10), ("escrow:t2:bo", 10))),  # escrow to escrow
        ("t-4", (("player:ann", -10), ("player:bo", 10))),  # wallet to wallet
        ("t-5", (("player:ann", -10), ("pot:t1", 10))),
        ("t-6", (("player:ann", -10), ("escrow:t1:ann", 5), ("house:fees", 5))),
    ]:
        assert await denied(ledger, "table", transaction(key, *legs, open_accounts=True)) == "ACCOUNT_NOT_ALLOWED"
    assert balances(ledger.settings.database_url or "", ["player:ann", "escrow:t1:bo"]) == {
        "player:ann": 1_000,
        "escrow:t1:bo": 500,
    }


async def test_a_settlement_moves_gold_only_within_its_hands_table_and_the_house(ledger: Ledger) -> None:
    await deposit(ledger, "ann", 1_000)
    await fund_escrow(ledger, "t1", "ann", 500)
    await fund_escrow(ledger, "t1", "bo", 500)
    await fund_escrow(ledger, "t2", "cy", 500)
    await ledger.stub("cashier").Transfer(
        pb.TransferRequest(
            idempotency_key="bank",
            from_account_id="external:cashier",
            to_account_id="house:bank",
            amount_gold=1_000,
            open_accounts=True,
        )
    )
    allowed = [
        settlement("settle:t1-h1", ("escrow:t1:ann", -100), ("escrow:t1:bo", 90), ("house:fees", 5), ("pot:t1", 5)),
        settlement("settle:t1-h2:retry1", ("escrow:t1:ann", -50), ("guild:g1", 2), ("house:bank", 48)),
        settlement("settle:t1-h3", ("house:bank", -40), ("escrow:t1:bo", 40), table_id="t1", hand_id="t1-h3"),
    ]
    for tx in allowed:
        assert (await post(ledger, "settlement", tx)).status == pb.POST_STATUS_APPLIED
    refused = [
        # Another table's escrow, a wallet, a guild fund paying out, another table's pot.
        (settlement("settle:t1-h4", ("escrow:t1:ann", -10), ("escrow:t2:cy", 10)), "ACCOUNT_NOT_ALLOWED"),
        (settlement("settle:t1-h5", ("escrow:t1:ann", -10), ("player:ann", 10)), "ACCOUNT_NOT_ALLOWED"),
        (settlement("settle:t1-h6", ("guild:g1", -2), ("escrow:t1:bo", 2)), "ACCOUNT_NOT_ALLOWED"),
        (settlement("settle:t1-h7", ("escrow:t1:ann", -10), ("pot:t2", 10)), "ACCOUNT_NOT_ALLOWED"),
        # The metadata names another table than the key's hand.
        (settlement("settle:t1-h8", ("escrow:t2:cy", -10), ("house:fees", 10), table_id="t2"), "ACCOUNT_NOT_ALLOWED"),
        # Not a settlement key: the ledger could not tell the table.
        (settlement("pay-1", ("escrow:t1:ann", -10), ("house:fees", 10)), "SETTLEMENT_KEY_REQUIRED"),
        (settlement("settle:h1", ("escrow:t1:ann", -10), ("house:fees", 10)), "SETTLEMENT_KEY_REQUIRED"),
        (settlement("settle:t1-h9:again", ("escrow:t1:ann", -10), ("house:fees", 10)), "SETTLEMENT_KEY_REQUIRED"),
    ]
    for tx, reason in refused:
        assert await denied(ledger, "settlement", tx) == reason, tx.idempotency_key
    # In a batch each refused item is refused alone, with its reason.
    reply = await ledger.stub("settlement").PostTransactions(
        pb.PostTransactionsRequest(
            transactions=[
                refused[0][0],
                settlement("settle:t1-h10", ("escrow:t1:ann", -1), ("house:fees", 1)),
            ]
        )
    )
    assert [(r.status, r.error_reason) for r in reply.results] == [
        (pb.POST_STATUS_REJECTED, "ACCOUNT_NOT_ALLOWED"),
        (pb.POST_STATUS_APPLIED, ""),
    ]


async def test_the_cashier_and_an_operator_post_as_before(ledger: Ledger) -> None:
    for caller in ("cashier", "operator"):
        reply = await ledger.stub(caller).Transfer(
            pb.TransferRequest(
                idempotency_key=f"bank-{caller}",
                from_account_id="external:cashier",
                to_account_id="house:bank",
                amount_gold=100,
                open_accounts=True,
            )
        )
        assert reply.result.status == pb.POST_STATUS_APPLIED
    moved = await ledger.stub("operator").Transfer(
        pb.TransferRequest(
            idempotency_key="fix-1",
            from_account_id="house:bank",
            to_account_id="escrow:t1:ann",
            amount_gold=50,
            open_accounts=True,
        )
    )
    assert moved.result.status == pb.POST_STATUS_APPLIED
