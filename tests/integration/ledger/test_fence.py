"""Fenced postings: a settlement instance whose lease moved on cannot post (issue 19).

Settlement's partition workers send their lease's fencing token with every PostTransactions
(``Fence``); the ledger applies the call only if, in the database transaction that applies
it, the token is at least the newest it has recorded for the partition. A holder paused past
its lease (SIGSTOP, a long GC) wakes up with an older token than its successor's and is
refused whole: FAILED_PRECONDITION / FENCED, nothing written, its keys left free for the new
holder. Real PostgreSQL and the real ledger over gRPC throughout.
"""

from __future__ import annotations

import asyncio

import grpc
import psycopg
import pytest
from prometheus_client import REGISTRY
from psycopg import errors as pg_errors

from socai import errors
from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra import fence as fencing
from socai.infra.db import OWNER_ROLE, SERVICE_ROLES, role_url
from socai.infra.grpc_errors import error_reason
from socai.infra.partitions import PARTITIONS_MAX
from socai_ledger import db, domain
from socai_ledger.batcher import WriteBatcher, _Unit
from tests.integration.ledger.conftest import Ledger, balances, deposit, fund_escrow, journal_snapshot, transaction

pytestmark = pytest.mark.integration

SCOPE = "settlement"


def hand(n: int, amount: int = 100, table: str = "t1") -> pb.TransactionInput:
    """Hand n of ``table``: ann pays ``amount`` to bo, 5 of it to the house."""
    return transaction(
        f"settle:{table}-h{n}",
        (f"escrow:{table}:ann", -amount),
        (f"escrow:{table}:bo", amount - 5),
        ("house:fees", 5),
        kind="settlement",
        open_accounts=True,
    )


def fenced(
    token: int, *hands: pb.TransactionInput, partition: int = 0, scope: str = SCOPE
) -> pb.PostTransactionsRequest:
    return pb.PostTransactionsRequest(
        transactions=list(hands), fence=pb.Fence(scope=scope, partition=partition, token=token)
    )


async def post(
    ledger: Ledger, request: pb.PostTransactionsRequest, caller: str = "settlement"
) -> pb.PostTransactionsResponse:
    reply: pb.PostTransactionsResponse = await ledger.stub(caller).PostTransactions(request)
    return reply


async def refused(
    ledger: Ledger, request: pb.PostTransactionsRequest, caller: str = "settlement"
) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await post(ledger, request, caller)
    return caught.value.code(), error_reason(caught.value)


def recorded(ledger: Ledger, partition: int = 0, scope: str = SCOPE) -> int | None:
    with psycopg.connect(ledger.settings.database_url or "") as conn:
        row = conn.execute(
            "select token from socai_ledger.lease_fence where scope = %s and partition = %s", (scope, partition)
        ).fetchone()
    return None if row is None else int(row[0])


async def key_is_free(ledger: Ledger, key: str) -> bool:
    try:
        await ledger.stub("auditor").GetTransaction(pb.GetTransactionRequest(idempotency_key=key))
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == grpc.StatusCode.NOT_FOUND, exc.details()
        return True
    return False


@pytest.fixture
async def funded(ledger: Ledger) -> Ledger:
    await fund_escrow(ledger, "t1", "ann", 100_000)
    await fund_escrow(ledger, "t2", "ann", 100_000)
    return ledger


FENCED = (grpc.StatusCode.FAILED_PRECONDITION, "FENCED")


async def test_a_newer_token_posts_and_becomes_the_newest(funded: Ledger) -> None:
    first = await post(funded, fenced(10, hand(1)))
    assert [r.status for r in first.results] == [pb.POST_STATUS_APPLIED]
    assert recorded(funded) == 10
    second = await post(funded, fenced(25, hand(2), hand(3)))
    assert [r.status for r in second.results] == [pb.POST_STATUS_APPLIED] * 2
    assert recorded(funded) == 25


async def test_the_same_token_posts_again(funded: Ledger) -> None:
    await post(funded, fenced(7, hand(1)))
    again = await post(funded, fenced(7, hand(2), hand(1)))
    assert [r.status for r in again.results] == [pb.POST_STATUS_APPLIED, pb.POST_STATUS_REPLAYED]
    assert recorded(funded) == 7


def fenced_total() -> float:
    return REGISTRY.get_sample_value("socai_ledger_fenced_total") or 0.0


async def test_an_older_token_is_refused_whole_and_writes_nothing(funded: Ledger) -> None:
    url = funded.settings.database_url or ""
    refusals_before = fenced_total()
    await post(funded, fenced(9, hand(1)))
    await post(funded, fenced(12, pb.TransactionInput(), partition=0))  # a malformed item, a current fence
    before = journal_snapshot(url)
    money_before = balances(url)

    # The stale holder resends a hand already applied (it would be a replay) with two new ones.
    assert await refused(funded, fenced(11, hand(1), hand(2), hand(3))) == FENCED
    assert journal_snapshot(url) == before
    assert balances(url) == money_before
    assert recorded(funded) == 12
    assert fenced_total() == refusals_before + 1  # the metric an alert on stale holders watches
    # Not even a remembered refusal: the keys are free for the current holder …
    assert await key_is_free(funded, "settle:t1-h2")
    assert await key_is_free(funded, "settle:t1-h3")
    # … who posts them (and hears that hand 1 was applied before).
    current = await post(funded, fenced(12, hand(1), hand(2), hand(3)))
    assert [r.status for r in current.results] == [
        pb.POST_STATUS_REPLAYED,
        pb.POST_STATUS_APPLIED,
        pb.POST_STATUS_APPLIED,
    ]


async def test_a_stale_holder_whose_items_are_all_malformed_still_hears_it_is_fenced(funded: Ledger) -> None:
    await post(funded, fenced(5, hand(1)))
    assert await refused(funded, fenced(4, pb.TransactionInput(idempotency_key="settle:t1-h2"))) == FENCED


async def test_a_claim_records_the_token_and_fences_out_the_old_holder(funded: Ledger) -> None:
    url = funded.settings.database_url or ""
    await post(funded, fenced(3, hand(1)))
    before = journal_snapshot(url)

    claim = await post(funded, fenced(8))
    assert list(claim.results) == []
    assert recorded(funded) == 8
    assert journal_snapshot(url) == before  # a claim posts nothing
    assert await refused(funded, fenced(3, hand(2))) == FENCED  # the old holder, awake again
    assert await key_is_free(funded, "settle:t1-h2")

    assert await refused(funded, fenced(7)) == FENCED  # a claim with an older token
    assert recorded(funded) == 8
    assert list((await post(funded, fenced(8))).results) == []  # the holder claims again: fine


async def test_an_empty_call_without_a_fence_is_still_refused(funded: Ledger) -> None:
    code, reason = await refused(funded, pb.PostTransactionsRequest())
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_BATCH")


async def test_scopes_and_partitions_are_fenced_apart(funded: Ledger) -> None:
    await post(funded, fenced(50, partition=0))
    # A smaller token on another partition, or in another scope on the same partition, posts.
    other_partition = await post(funded, fenced(2, hand(1, table="t2"), partition=1))
    assert [r.status for r in other_partition.results] == [pb.POST_STATUS_APPLIED]
    other_scope = await post(funded, fenced(2, hand(2, table="t2"), partition=0, scope="settlement-b"))
    assert [r.status for r in other_scope.results] == [pb.POST_STATUS_APPLIED]
    assert (recorded(funded, 0), recorded(funded, 1), recorded(funded, 0, "settlement-b")) == (50, 2, 2)
    assert await refused(funded, fenced(49, hand(3), partition=0)) == FENCED


@pytest.mark.parametrize("caller", ["table", "backend"])
async def test_only_settlement_may_send_a_fence_in_its_scope(funded: Ledger, caller: str) -> None:
    """The table service fences too, but only in scopes of its own name ("table…"):
    settlement's token is out of its reach, as of everyone else's."""
    url = funded.settings.database_url or ""
    await deposit(funded, "alice", 100)
    before = journal_snapshot(url)
    wallet_move = transaction("move-1", ("player:alice", -1), ("player:bob", 1), open_accounts=True)
    assert await refused(funded, fenced(99, wallet_move), caller) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "FENCE_NOT_ALLOWED",
    )
    assert await refused(funded, fenced(99), caller) == (grpc.StatusCode.PERMISSION_DENIED, "FENCE_NOT_ALLOWED")
    assert journal_snapshot(url) == before
    assert recorded(funded) is None  # it could not move the real holder's token


@pytest.mark.parametrize(
    ("fence", "reason"),
    [
        (pb.Fence(scope="", partition=0, token=1), "BAD_FENCE_SCOPE"),
        (pb.Fence(scope="s" * 65, partition=0, token=1), "BAD_FENCE_SCOPE"),
        (pb.Fence(scope="a\nb", partition=0, token=1), "BAD_FENCE_SCOPE"),
        (pb.Fence(scope="a\x00b", partition=0, token=1), "BAD_FENCE_SCOPE"),
        (pb.Fence(scope=SCOPE, partition=-1, token=1), "BAD_FENCE_PARTITION"),
        (pb.Fence(scope=SCOPE, partition=1024, token=1), "BAD_FENCE_PARTITION"),
        (pb.Fence(scope=SCOPE, partition=0, token=0), "BAD_FENCE_TOKEN"),
        (pb.Fence(scope=SCOPE, partition=0, token=-5), "BAD_FENCE_TOKEN"),
    ],
)
async def test_a_malformed_fence_is_invalid_and_writes_nothing(funded: Ledger, fence: pb.Fence, reason: str) -> None:
    url = funded.settings.database_url or ""
    before = journal_snapshot(url)
    request = pb.PostTransactionsRequest(transactions=[hand(1)], fence=fence)
    assert await refused(funded, request) == (grpc.StatusCode.INVALID_ARGUMENT, reason)
    assert journal_snapshot(url) == before


async def test_the_fence_limits_match_the_partitions_of_the_event_log(funded: Ledger) -> None:
    assert domain.FENCE_PARTITIONS == PARTITIONS_MAX
    scope = "settlement-" + "s" * (domain.FENCE_SCOPE_MAX_CHARS - len("settlement-"))  # its own, the longest
    last = await post(funded, fenced(2**63 - 1, hand(1), partition=PARTITIONS_MAX - 1, scope=scope))
    assert [r.status for r in last.results] == [pb.POST_STATUS_APPLIED]
    assert recorded(funded, PARTITIONS_MAX - 1, scope) == 2**63 - 1


async def test_unfenced_postings_work_as_before(funded: Ledger) -> None:
    await post(funded, fenced(40, partition=0))  # a fence elsewhere changes nothing for them
    unfenced = await post(funded, pb.PostTransactionsRequest(transactions=[hand(1), pb.TransactionInput()]))
    assert [r.status for r in unfenced.results] == [pb.POST_STATUS_APPLIED, pb.POST_STATUS_REJECTED]
    await deposit(funded, "alice", 10)
    backend = await post(
        funded,
        pb.PostTransactionsRequest(
            transactions=[transaction("b-1", ("player:alice", -3), ("player:carol", 3), open_accounts=True)]
        ),
        "backend",
    )
    assert [r.status for r in backend.results] == [pb.POST_STATUS_APPLIED]
    assert recorded(funded) == 40


async def test_a_holder_and_its_successor_racing_end_with_only_the_successors_writes_after_its_claim(
    funded: Ledger,
) -> None:
    """The old holder (token 5) posts hands 1..40 one call at a time; once it has posted a
    few, the successor (token 6) claims the partition and posts the same hands, as it would
    after reading the partition again. Meanwhile a backend moves wallet gold unfenced."""
    url = funded.settings.database_url or ""
    hands = 40
    await deposit(funded, "alice", 1_000)
    old_answers: list[tuple[int, str, bool]] = []  # (hand, status or reason, sent after the claim)
    claimed = asyncio.Event()

    async def old_holder() -> None:
        for n in range(1, hands + 1):
            after_claim = claimed.is_set()
            try:
                reply = await post(funded, fenced(5, hand(n)))
                old_answers.append((n, pb.PostStatus.Name(reply.results[0].status), after_claim))
            except grpc.aio.AioRpcError as exc:
                old_answers.append((n, error_reason(exc), after_claim))

    async def backend() -> list[int]:
        statuses = []
        for n in range(hands):
            reply = await post(
                funded,
                pb.PostTransactionsRequest(
                    transactions=[
                        transaction(f"wallet-{n}", ("player:alice", -1), ("player:carol", 1), open_accounts=True)
                    ]
                ),
                "backend",
            )
            statuses.append(reply.results[0].status)
        return statuses

    old = asyncio.create_task(old_holder())
    unfenced = asyncio.create_task(backend())
    for _ in range(6000):  # a bound on the wait, not a timing assertion
        if len(old_answers) >= 3 or old.done():
            break
        await asyncio.sleep(0.01)
    assert not old.done(), "the old holder finished before the successor could claim"
    assert list((await post(funded, fenced(6))).results) == []
    claimed.set()
    new_answers = [await post(funded, fenced(6, hand(n))) for n in range(1, hands + 1)]
    await old

    old_applied = [n for n, status, _ in old_answers if status == "POST_STATUS_APPLIED"]
    old_fenced = [n for n, status, _ in old_answers if status == "FENCED"]
    assert sorted(old_applied + old_fenced) == list(range(1, hands + 1)), old_answers
    # The old holder's writes are a prefix: once fenced, it never wrote again …
    assert old_applied == list(range(1, len(old_applied) + 1))
    assert len(old_applied) >= 3
    # … and everything it sent after the claim was refused.
    assert all(status == "FENCED" for _, status, after in old_answers if after)
    new_status = [pb.PostStatus.Name(reply.results[0].status) for reply in new_answers]
    assert new_status == ["POST_STATUS_REPLAYED"] * len(old_applied) + ["POST_STATUS_APPLIED"] * len(old_fenced)
    # Every hand is in the journal once, and the unfenced caller was never held up by a refusal.
    assert await unfenced == [pb.POST_STATUS_APPLIED] * hands
    assert balances(url, ["escrow:t1:ann", "escrow:t1:bo", "player:carol"]) == {
        "escrow:t1:ann": 100_000 - 100 * hands,
        "escrow:t1:bo": 95 * hands,
        "player:carol": hands,
    }
    assert recorded(funded) == 6
    verified = await funded.stub("auditor").VerifyJournal(pb.VerifyJournalRequest())
    assert verified.ok
    assert (await funded.stub("auditor").TrialBalance(pb.TrialBalanceRequest())).total_gold == 0


async def test_a_poison_item_of_a_fenced_call_fails_alone_and_its_neighbours_are_still_fenced(funded: Ledger) -> None:
    """A database error re-runs a batch's items one by one; a fenced call's items each carry
    its fence then, so the fallback cannot write around it."""
    url = funded.settings.database_url or ""
    with psycopg.connect(url) as conn:  # a rule the planner does not know: the database refuses the item
        conn.execute("alter table socai_ledger.transactions add constraint no_poison check (reference <> 'poison')")
        conn.commit()
    poison = hand(2)
    poison.reference = "poison"
    reply = await post(funded, fenced(30, hand(1), poison, hand(3)))
    assert [(r.status, r.error_reason) for r in reply.results] == [
        (pb.POST_STATUS_APPLIED, ""),
        (pb.POST_STATUS_REJECTED, "INTERNAL"),
        (pb.POST_STATUS_APPLIED, ""),
    ]
    assert recorded(funded) == 30
    before = journal_snapshot(url)
    assert await refused(funded, fenced(29, hand(4), poison, hand(5))) == FENCED
    assert journal_snapshot(url) == before


async def test_a_fenced_request_is_a_batch_of_its_own() -> None:
    """The batcher never shares a fenced request's database transaction: the fence check
    must commit or roll back with that request's writes alone."""
    batcher = WriteBatcher("postgresql://unused")  # never started: only the queue is used
    loop = asyncio.get_running_loop()
    item = domain.prepare_fields("k", "test", "", [("player:a", -1), ("player:b", 1)], {})
    fence = domain.Fence(SCOPE, 0, 1)

    def unit(fenced: bool, items: int = 1) -> _Unit:
        return _Unit([item] * items, loop.create_future(), fence if fenced else None)

    plain_1, plain_2, fenced_1, claim, plain_3 = unit(False), unit(False), unit(True, 3), unit(True, 0), unit(False)
    batcher._queue.extend([plain_1, plain_2, fenced_1, claim, plain_3])
    assert batcher._take() == ([plain_1, plain_2], 2)  # stops before the fenced unit
    assert batcher._take(100) == ([], 0)  # nor is it added to a batch being formed
    assert batcher._take() == ([fenced_1], 3)  # alone
    assert batcher._take() == ([claim], 0)  # a claim alone too
    assert batcher._take() == ([plain_3], 1)


# --- the fence table, as the ledger's own role ------------------------------------------------


async def test_the_ledger_role_advances_a_fence_but_cannot_turn_it_back_or_delete_it(owner_migrated: str) -> None:
    url = role_url(owner_migrated, SERVICE_ROLES["ledger"])
    batcher = WriteBatcher(url)
    await batcher.start()
    try:
        assert await batcher.submit([], domain.Fence(SCOPE, 3, 20)) == []  # insert
        assert await batcher.submit([], domain.Fence(SCOPE, 3, 21)) == []  # update
        with pytest.raises(errors.PreconditionFailed) as caught:
            await batcher.submit([], domain.Fence(SCOPE, 3, 19))
        assert caught.value.code == "FENCED"
    finally:
        await batcher.close()
    conn = await db.connect(url)
    try:
        assert await fencing.current(conn, SCOPE, 3, schema=db.SCHEMA) == 21
        with pytest.raises(pg_errors.IntegrityConstraintViolation):  # the trigger, for every role
            await conn.execute("update socai_ledger.lease_fence set token = 1 where partition = 3")
        with pytest.raises(pg_errors.InsufficientPrivilege):
            await conn.execute("delete from socai_ledger.lease_fence")
        with pytest.raises(pg_errors.InsufficientPrivilege):
            await conn.execute("update socai_ledger.lease_fence set partition = 4")
        assert await fencing.current(conn, SCOPE, 3, schema=db.SCHEMA) == 21
    finally:
        await conn.close()
    # The owner cannot turn it back either: "only grows" is the database's own rule.
    with (
        psycopg.connect(role_url(owner_migrated, OWNER_ROLE)) as owner,
        pytest.raises(pg_errors.IntegrityConstraintViolation),
    ):
        owner.execute("update socai_ledger.lease_fence set token = 2")


async def test_the_table_service_fences_in_its_own_scope_and_settlement_cannot_touch_it(funded: Ledger) -> None:
    """A table partition's holder claims it and posts its buy-ins under its token; a former
    holder's buy-in is refused whole. Settlement may not send a fence in the table's scope."""
    await deposit(funded, "alice", 100)
    buy_in = transaction(
        "join:t1:alice:k1", ("player:alice", -40), ("escrow:t1:alice", 40), kind="buy_in", open_accounts=True
    )
    assert list((await post(funded, fenced(5, scope="table"), "table")).results) == []  # the claim
    assert recorded(funded, 0, "table") == 5
    assert await refused(funded, fenced(4, buy_in, scope="table"), "table") == FENCED  # the former holder
    assert await key_is_free(funded, "join:t1:alice:k1")
    posted = await post(funded, fenced(5, buy_in, scope="table"), "table")
    assert [r.status for r in posted.results] == [pb.POST_STATUS_APPLIED]
    assert await refused(funded, fenced(9, scope="table"), "settlement") == (
        grpc.StatusCode.PERMISSION_DENIED,
        "FENCE_NOT_ALLOWED",
    )
    assert recorded(funded, 0, "table") == 5
