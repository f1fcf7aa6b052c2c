"""Holds on house:bank through the real ledger service (gRPC, the write batcher, PostgreSQL).

The table holds a hand's worst case before it accepts a bet; the bank's balance may then not
fall below its holds, a bet it cannot cover is refused (BANKER_CAPACITY, nothing written),
and the hand's settlement spends and releases its hold in its own database transaction.
"""

from __future__ import annotations

import asyncio

import grpc
import psycopg
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.grpc_errors import error_info, error_reason
from tests.integration.ledger.conftest import Ledger, fund_escrow, journal_snapshot, transaction
from tests.integration.ledger.test_cli import socai

pytestmark = pytest.mark.integration

BANK = "house:bank"


async def fund_bank(ledger: Ledger, amount: int, key: str = "bankroll") -> None:
    reply = await ledger.stub("operator").Transfer(
        pb.TransferRequest(
            idempotency_key=key, from_account_id="external:cashier", to_account_id=BANK, amount_gold=amount
        )
    )
    assert reply.result.status == pb.POST_STATUS_APPLIED


async def hold(ledger: Ledger, hand_id: str, amount: int) -> pb.HoldResponse:
    return await ledger.stub("table").Hold(pb.HoldRequest(account_id=BANK, hand_id=hand_id, amount_gold=amount))


async def refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value


async def bank(ledger: Ledger) -> tuple[int, int]:
    account = (await ledger.stub("auditor").GetAccount(pb.GetAccountRequest(account_id=BANK))).account
    return int(account.balance_gold), int(account.held_gold)


def holds_rows(url: str) -> list[tuple[str, int, str, str | None]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select hand_id, amount_gold, status, released_by from socai_ledger.holds order by hand_id"
        ).fetchall()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def settlement(key: str, *legs: tuple[str, int]) -> pb.TransactionInput:
    return transaction(key, *legs, kind="settlement", open_accounts=True)


async def settle(ledger: Ledger, *items: pb.TransactionInput) -> list[pb.PostResult]:
    reply = await ledger.stub("settlement").PostTransactions(pb.PostTransactionsRequest(transactions=list(items)))
    return list(reply.results)


async def test_a_hold_the_bank_cannot_cover_is_refused_with_its_free_gold_and_writes_nothing(ledger: Ledger) -> None:
    url = ledger.settings.database_url or ""
    before = journal_snapshot(url)
    caught = await refused(hold(ledger, "t1-h1", 20_000))  # house:bank holds 0
    assert caught.code() == grpc.StatusCode.FAILED_PRECONDITION
    info = error_info(caught)
    assert info is not None and info.reason == "BANKER_CAPACITY"
    assert dict(info.metadata) == {
        "account_id": BANK,
        "free_gold": "0",
        "needed_gold": "20000",
        "held_gold": "0",
        "balance_gold": "0",
    }
    assert journal_snapshot(url) == before and holds_rows(url) == []
    assert await bank(ledger) == (0, 0)

    await fund_bank(ledger, 30_000)
    first = await hold(ledger, "t1-h1", 20_000)
    assert (first.hold.amount_gold, first.hold.status, first.free_gold) == (20_000, pb.HOLD_STATUS_OPEN, 10_000)
    caught = await refused(hold(ledger, "t2-h1", 10_001))
    assert error_reason(caught) == "BANKER_CAPACITY"
    assert dict(error_info(caught).metadata)["free_gold"] == "10000"  # type: ignore[union-attr]
    assert (await hold(ledger, "t2-h1", 10_000)).free_gold == 0
    assert await bank(ledger) == (30_000, 30_000)


async def test_a_hold_only_grows_and_asking_again_changes_nothing(ledger: Ledger) -> None:
    await fund_bank(ledger, 1_000)
    assert (await hold(ledger, "t1-h1", 300)).hold.amount_gold == 300
    assert (await hold(ledger, "t1-h1", 300)).hold.amount_gold == 300  # a retry
    assert (await hold(ledger, "t1-h1", 100)).hold.amount_gold == 300  # a table rebuilt, asking less
    raised = await hold(ledger, "t1-h1", 700)  # the next bet: only the 400 more must be free
    assert (raised.hold.amount_gold, raised.free_gold) == (700, 300)
    assert await bank(ledger) == (1_000, 700)
    listed = await ledger.stub("auditor").ListHolds(pb.ListHoldsRequest(account_id=BANK))
    assert [(h.hand_id, h.amount_gold) for h in listed.holds] == [("t1-h1", 700)]


async def test_the_bank_may_not_pay_out_the_gold_it_holds(ledger: Ledger) -> None:
    await fund_bank(ledger, 1_000)
    await hold(ledger, "t1-h1", 800)
    out = pb.TransferRequest(
        idempotency_key="withdraw-bank", from_account_id=BANK, to_account_id="external:cashier", amount_gold=201
    )
    caught = await refused(ledger.stub("operator").Transfer(out))
    assert error_reason(caught) == "INSUFFICIENT_FUNDS"
    assert "800 is held for hands in play" in (caught.details() or "")
    # Another hand's settlement may not spend it either.
    await fund_escrow(ledger, "t9", "ann", 10)
    (result,) = await settle(ledger, settlement("settle:t9-h1", (BANK, -201), ("escrow:t9:ann", 201)))
    assert (result.status, result.error_reason) == (pb.POST_STATUS_REJECTED, "INSUFFICIENT_FUNDS")
    out.idempotency_key, out.amount_gold = "withdraw-bank-2", 200
    assert (await ledger.stub("operator").Transfer(out)).result.status == pb.POST_STATUS_APPLIED
    assert await bank(ledger) == (800, 800)


async def test_a_settlement_spends_its_hands_hold_and_releases_it_in_the_same_transaction(ledger: Ledger) -> None:
    url = ledger.settings.database_url or ""
    await fund_bank(ledger, 30_000)
    await fund_escrow(ledger, "t1", "ann", 20_000)
    await fund_escrow(ledger, "t2", "bo", 10_000)
    await fund_escrow(ledger, "t3", "cy", 10)
    await hold(ledger, "t1-h1", 20_000)
    await hold(ledger, "t2-h1", 10_000)  # every gold of the bank is held now
    # t1-h1's tai bet won: the bank pays 20,000 (the whole of its hold), the winner a fee.
    win = settlement("settle:t1-h1", (BANK, -20_000), ("escrow:t1:ann", 19_000), ("house:fees", 1_000))
    # In one batch with a hand of a table that holds nothing of the bank.
    other = settlement("settle:t3-h1", ("escrow:t3:cy", -5), ("house:fees", 5))
    results = await settle(ledger, other, win)
    assert [r.status for r in results] == [pb.POST_STATUS_APPLIED] * 2
    assert await bank(ledger) == (10_000, 10_000)
    assert holds_rows(url) == [("t1-h1", 20_000, "released", "settlement"), ("t2-h1", 10_000, "open", None)]
    listed = await ledger.stub("auditor").ListHolds(pb.ListHoldsRequest(account_id=BANK, include_released=True))
    released = next(h for h in listed.holds if h.hand_id == "t1-h1")
    assert released.release_transaction_id == results[1].transaction.transaction_id
    assert released.status == pb.HOLD_STATUS_RELEASED and released.released_at.seconds > 0
    # A replay of the settlement releases nothing again; a late raise of the hand is refused.
    (again,) = await settle(ledger, win)
    assert again.status == pb.POST_STATUS_REPLAYED
    assert error_reason(await refused(hold(ledger, "t1-h1", 20_001))) == "HOLD_RELEASED"
    assert await bank(ledger) == (10_000, 10_000)
    # t2-h1 lost: the bank is credited, and the hold goes too.
    (lost,) = await settle(ledger, settlement("settle:t2-h1", ("escrow:t2:bo", -10_000), (BANK, 10_000)))
    assert lost.status == pb.POST_STATUS_APPLIED
    assert await bank(ledger) == (20_000, 0)
    verified = await ledger.stub("auditor").VerifyJournal(pb.VerifyJournalRequest())
    assert verified.ok


async def test_a_refused_settlement_keeps_the_hold_and_its_retry_key_releases_it(ledger: Ledger) -> None:
    await fund_bank(ledger, 1_000)
    await fund_escrow(ledger, "t1", "ann", 50)
    await hold(ledger, "t1-h1", 1_000)
    # The escrow is short (not the bank): the settlement is refused and remembered.
    (first,) = await settle(
        ledger, settlement("settle:t1-h1", ("escrow:t1:ann", -100), (BANK, -900), ("escrow:t1:bo", 1_000))
    )
    assert (first.status, first.error_reason) == (pb.POST_STATUS_REJECTED, "INSUFFICIENT_FUNDS")
    assert await bank(ledger) == (1_000, 1_000)  # the hand still owes: its hold stays
    await fund_escrow(ledger, "t1", "ann", 50)
    (retry,) = await settle(
        ledger, settlement("settle:t1-h1:retry1", ("escrow:t1:ann", -100), (BANK, -900), ("escrow:t1:bo", 1_000))
    )
    assert retry.status == pb.POST_STATUS_APPLIED
    assert await bank(ledger) == (100, 0)


async def test_the_outcome_finalizes_a_hold_and_an_operator_releases_a_hand_that_never_settles(
    ledger: Ledger,
) -> None:
    url = ledger.settings.database_url or ""
    await fund_bank(ledger, 5_000)
    table = ledger.stub("table")
    await hold(ledger, "t1-h1", 3_000)
    final = await table.FinalizeHold(pb.FinalizeHoldRequest(account_id=BANK, hand_id="t1-h1", amount_gold=1_200))
    assert (final.hold.amount_gold, final.hold.status, final.free_gold) == (1_200, pb.HOLD_STATUS_FINAL, 3_800)
    assert error_reason(await refused(hold(ledger, "t1-h1", 1_201))) == "HOLD_FINAL"
    assert (await hold(ledger, "t1-h1", 1_000)).hold.amount_gold == 1_200  # asks no more than it holds
    # An outcome that debits the bank nothing releases the hold at once.
    await hold(ledger, "t2-h1", 2_000)
    done = await table.FinalizeHold(pb.FinalizeHoldRequest(account_id=BANK, hand_id="t2-h1", amount_gold=0))
    assert (done.hold.status, done.hold.released_by, done.free_gold) == (pb.HOLD_STATUS_RELEASED, "outcome", 3_800)
    assert (await table.FinalizeHold(pb.FinalizeHoldRequest(account_id=BANK, hand_id="t2-h1"))).free_gold == 3_800
    caught = await refused(table.FinalizeHold(pb.FinalizeHoldRequest(account_id=BANK, hand_id="t3-h1")))
    assert (caught.code(), error_reason(caught)) == (grpc.StatusCode.NOT_FOUND, "HOLD_NOT_FOUND")
    # t1-h1's table was lost for good: an operator releases its hold, saying why.
    operator = ledger.stub("operator")
    caught = await refused(operator.ReleaseHold(pb.ReleaseHoldRequest(account_id=BANK, hand_id="t1-h1")))
    assert (caught.code(), error_reason(caught)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_REASON")
    released = await operator.ReleaseHold(
        pb.ReleaseHoldRequest(account_id=BANK, hand_id="t1-h1", reason="table t1 lost; hand voided")
    )
    assert (released.hold.released_by, released.hold.release_reason) == ("operator", "table t1 lost; hand voided")
    assert released.free_gold == 5_000
    assert holds_rows(url) == [("t1-h1", 1_200, "released", "operator"), ("t2-h1", 2_000, "released", "outcome")]


@pytest.mark.parametrize(
    ("request_", "code", "reason"),
    [
        (
            pb.HoldRequest(account_id="player:ann", hand_id="t1-h1", amount_gold=1),
            "PERMISSION_DENIED",
            "ACCOUNT_NOT_ALLOWED",
        ),
        (pb.HoldRequest(account_id="house:nope", hand_id="t1-h1", amount_gold=1), "INVALID_ARGUMENT", "BAD_ACCOUNT_ID"),
        (pb.HoldRequest(account_id=BANK, hand_id="t1", amount_gold=1), "INVALID_ARGUMENT", "BAD_HAND_ID"),
        (pb.HoldRequest(account_id=BANK, hand_id="t 1-h1", amount_gold=1), "INVALID_ARGUMENT", "BAD_HAND_ID"),
        (pb.HoldRequest(account_id=BANK, hand_id="t1-h1", amount_gold=0), "INVALID_ARGUMENT", "ZERO_AMOUNT"),
        (pb.HoldRequest(account_id=BANK, hand_id="t1-h1", amount_gold=-5), "INVALID_ARGUMENT", "NEGATIVE_AMOUNT"),
    ],
)
async def test_a_malformed_hold_is_refused_and_writes_nothing(
    ledger: Ledger, request_: pb.HoldRequest, code: str, reason: str
) -> None:
    await fund_bank(ledger, 100)
    caught = await refused(ledger.stub("table").Hold(request_))
    assert (caught.code().name, error_reason(caught)) == (code, reason)
    assert holds_rows(ledger.settings.database_url or "") == []


async def test_many_tables_racing_for_the_banks_last_gold_get_exactly_what_it_holds(ledger: Ledger) -> None:
    """Forty hands ask at once for 1,000 each of a bank holding 10,250, while settlements
    of other hands take gold out of it and put gold in: the holds granted never exceed what
    the bank held when each was granted, and the bank never falls below its holds."""
    await fund_bank(ledger, 10_250)
    await fund_escrow(ledger, "tw", "ann", 5_000)

    async def ask(n: int) -> bool:
        try:
            await hold(ledger, f"race{n}-h1", 1_000)
        except grpc.aio.AioRpcError as exc:
            assert error_reason(exc) == "BANKER_CAPACITY", exc
            return False
        return True

    async def payouts() -> list[str]:
        # Hands that held nothing pay from the bank's free gold only: 250 is free at most.
        reasons = []
        for n in range(10):
            (result,) = await settle(ledger, settlement(f"settle:tw-h{n}", (BANK, -100), ("escrow:tw:ann", 100)))
            reasons.append(result.error_reason)
        return reasons

    granted, paid = await asyncio.gather(asyncio.gather(*(ask(n) for n in range(40))), payouts())
    balance, held = await bank(ledger)
    assert held == 1_000 * sum(granted) and balance == 10_250 - 100 * paid.count("")
    assert set(paid) <= {"", "INSUFFICIENT_FUNDS"}
    assert balance >= held  # never more granted and paid than the bank held
    assert balance - held < 1_000  # and no room for one more hold left unused
    assert sum(granted) in (9, 10)
    verified = await ledger.stub("auditor").VerifyJournal(pb.VerifyJournalRequest())
    assert verified.ok


async def test_an_operator_lists_the_banks_holds_and_releases_a_hand_that_never_settles(ledger: Ledger) -> None:
    await fund_bank(ledger, 5_000)
    await hold(ledger, "tq-h7", 1_500)
    code, out, _ = await socai(ledger, "balance", "house:bank")
    assert (code, out.strip()) == (0, "house:bank: 5000 gold, 1500 held for hands in play, 3500 free (version 1)")
    code, out, _ = await socai(ledger, "holds")
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 2 and lines[1].split()[:3] == ["tq-h7", "1500", "open"]
    code, _, err = await socai(ledger, "release-hold", "tq-h7", "--reason", "")
    assert code != 0 and "BAD_REASON" in err
    code, out, _ = await socai(ledger, "release-hold", "tq-h7", "--reason", "table tq lost")
    assert code == 0 and " released " in out and "by operator: table tq lost" in out and "5000 gold free" in out
    code, out, _ = await socai(ledger, "holds")
    assert out.strip().splitlines()[1:] == []
    code, out, _ = await socai(ledger, "holds", "--all")
    assert out.strip().splitlines()[1].split()[:3] == ["tq-h7", "1500", "released"]


async def test_verify_finds_held_gold_written_around_the_holds(ledger: Ledger) -> None:
    await fund_bank(ledger, 1_000)
    await hold(ledger, "t1-h1", 400)
    assert (await ledger.stub("auditor").VerifyJournal(pb.VerifyJournalRequest())).ok
    with psycopg.connect(ledger.settings.database_url or "") as conn:  # the owner, guards switched off
        conn.execute("alter table socai_ledger.accounts disable trigger user")
        conn.execute("update socai_ledger.accounts set held_gold = 100 where account_id = 'house:bank'")
        conn.execute("alter table socai_ledger.accounts enable trigger user")
        conn.commit()
    report = await ledger.stub("auditor").VerifyJournal(pb.VerifyJournalRequest())
    assert not report.ok
    (mismatch,) = report.mismatches
    assert (mismatch.account_id, mismatch.detail) == (BANK, "100 gold held but its holds not released sum to 400")
