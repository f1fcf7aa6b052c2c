"""The outbox's bound (issue 17, defect 5's follow-up): above JetStream's rate, and while NATS
is down, the writer holds postings back instead of letting the outbox grow without end.

Against real PostgreSQL and NATS: the lag stays within the bound plus one batch, held-back
postings complete once the relay catches up, refused ones change nothing and succeed on
retry under the same key, and the callers (settlement's poster, the table's ledger client)
take the refusal for what it is: retryable.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from nats.js import JetStreamContext
from prometheus_client import REGISTRY

from socai import errors
from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.grpc_errors import error_info
from socai.infra.nats_auth import TEST_HARNESS
from socai_cli.embedded import EmbeddedNats, free_port
from socai_ledger.config import LedgerConfig
from socai_ledger.outbox_backlog import OutboxBacklog
from socai_settlement.poster import LedgerPoster
from socai_table.ledger_client import Money
from tests.integration.ledger.conftest import (
    Ledger,
    deposit,
    fund_escrow,
    journal_snapshot,
    ledger_settings,
    transaction,
)
from tests.integration.ledger.test_outbox import Follower, check_delivery, js  # noqa: F401 (fixture)
from tests.integration.ledger.test_outbox_under_load import outbox_lag

pytestmark = pytest.mark.integration

MAX_BATCH = 100  # the writer's batch: the bound may be passed by one of them
CALL_ITEMS = 50  # transactions per PostTransactions call
# Generous for a loaded machine: a held-back posting may wait this long before it is refused
# (the first test wants every posting to land, so none may time out).
PATIENT_WAIT_S = 60.0


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def payments(prefix: str, count: int) -> list[pb.TransactionInput]:
    return [
        transaction(f"{prefix}{n}", ("player:alice", -1), (f"player:p{n % 40}", 1), open_accounts=True)
        for n in range(count)
    ]


async def post_all(stub: Any, txs: list[pb.TransactionInput], callers: int) -> list[pb.PostResult]:
    """``txs`` in calls of CALL_ITEMS by ``callers`` concurrent callers; every result."""
    calls = iter(range(0, len(txs), CALL_ITEMS))
    results: list[pb.PostResult] = []

    async def caller() -> None:
        for start in calls:
            request = pb.PostTransactionsRequest(transactions=txs[start : start + CALL_ITEMS])
            reply = await stub.PostTransactions(request, timeout=PATIENT_WAIT_S + 60)
            results.extend(reply.results)

    await asyncio.gather(*(caller() for _ in range(callers)))
    return results


async def lag_while(url: str, work: asyncio.Future[Any]) -> list[int]:
    """The outbox lag, read from the database every 20 ms until ``work`` is done."""
    lags: list[int] = []
    while not work.done():
        lags.append(await asyncio.to_thread(outbox_lag, url))
        await asyncio.wait({work}, timeout=0.02)
    return lags


async def caught_up(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s  # a bound on the wait, not a measure
    while await asyncio.to_thread(outbox_lag, url) > 0:
        assert time.monotonic() < deadline, "the relay caught up"
        await asyncio.sleep(0.1)


@pytest.fixture
async def replicas(nats_url: str, migrated_database_url: str) -> AsyncIterator[tuple[Ledger, Ledger]]:
    """Two ledger replicas on one journal with a small outbox bound: the first runs the relay,
    the second does not (it knows the lag only from the database)."""
    settings = ledger_settings(nats_url, migrated_database_url)
    config = LedgerConfig(outbox_max_lag=300, outbox_wait_s=PATIENT_WAIT_S)
    relaying, writing = Ledger(settings), Ledger(settings)
    await relaying.start(config=config, max_batch=MAX_BATCH)
    await writing.start(config=config, max_batch=MAX_BATCH, relay=False)
    try:
        yield relaying, writing
    finally:
        await writing.stop()
        await relaying.stop()


async def test_above_the_relays_rate_the_lag_stays_within_its_bound_and_every_held_posting_lands(
    replicas: tuple[Ledger, Ledger],
    js: JetStreamContext,  # noqa: F811 (the fixture)
) -> None:
    relaying, writing = replicas
    url = relaying.settings.database_url or ""
    bound = 300
    await deposit(relaying, "alice", 10**9)
    waits_before = sample("socai_ledger_outbox_wait_seconds_count")
    # 8,000 payments in calls of 50 from 8 callers, through the replica without the relay:
    # the write path takes tens of thousands a second, JetStream stores a few thousand.
    txs = payments("bp-", 8_000)
    work = asyncio.ensure_future(post_all(writing.stub("backend"), txs, callers=8))
    lags = await lag_while(url, work)
    results = await work

    assert [r.status for r in results] == [pb.POST_STATUS_APPLIED] * len(txs), "every held-back posting landed"
    assert len(lags) >= 10, "the load lasted a while and the lag was sampled during it"
    assert max(lags) <= bound + MAX_BATCH, f"the lag stayed within its bound plus one batch: max {max(lags)}"
    assert sample("socai_ledger_outbox_wait_seconds_count") > waits_before, "postings did wait for the relay"
    await caught_up(url)
    messages = await Follower(js, relaying).read(len(txs) + 1, timeout_s=120)
    check_delivery(messages, url)


async def test_while_nats_is_down_postings_flow_up_to_the_bound_then_are_refused_unwritten_and_land_on_retry(
    migrated_database_url: str, tmp_path: Path
) -> None:
    nats = EmbeddedNats(tmp_path / "nats", port=free_port(), test_harness=True)
    nats.start()
    bound = 20
    ledger = Ledger(ledger_settings(nats.url_for(TEST_HARNESS), migrated_database_url))
    await ledger.start(config=LedgerConfig(outbox_max_lag=bound, outbox_wait_s=1.0))
    money: Money | None = None
    try:
        url = migrated_database_url
        await deposit(ledger, "alice", 1_000)
        for escrow in ESCROWS:  # what settlement will move, funded before the outage
            await fund_escrow(ledger, "tbp", escrow.rsplit(":", 1)[1], 1_000)
        await caught_up(url)  # the relay is connected and has published everything
        nats.stop()
        backend = ledger.stub("backend")

        # Up to the bound, postings flow as before: the outbox absorbs the outage.
        for n in range(bound):
            reply = await backend.PostTransaction(
                pb.PostTransactionRequest(
                    transaction=transaction(f"down-{n}", ("player:alice", -1), ("player:bob", 1), open_accounts=True)
                )
            )
            assert reply.result.status == pb.POST_STATUS_APPLIED
        assert outbox_lag(url) == bound

        # Past it: refused, retryable, with a hint, and nothing written.
        before = journal_snapshot(url)
        refused_before = refusals()
        held = transaction("held-1", ("player:alice", -5), ("player:bob", 5), open_accounts=True)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await backend.PostTransaction(pb.PostTransactionRequest(transaction=held), timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        info = error_info(refused.value)
        assert info is not None and info.reason == "OUTBOX_BACKLOG"
        assert int(info.metadata["retry_after_ms"]) > 0 and int(info.metadata["max_lag"]) == bound
        # Once the relay has published nothing for a whole wait, postings are refused
        # without waiting (relay_stalled): waiting cannot help while NATS is down.
        with pytest.raises(grpc.aio.AioRpcError) as again:
            await backend.PostTransaction(pb.PostTransactionRequest(transaction=held), timeout=30)
        assert again.value.code() == grpc.StatusCode.UNAVAILABLE
        assert sample("socai_ledger_outbox_refused_total", {"reason": "relay_stalled"}) >= 1
        assert refusals() == refused_before + 2
        assert journal_snapshot(url) == before, "a refused posting changes nothing"
        assert outbox_lag(url) == bound

        # The table's ledger client hears a retryable Unavailable (its cash-outs wait and retry).
        money = Money(ledger.address, "127.0.0.1:9", ledger.settings.tokens["table"])
        with pytest.raises(errors.Unavailable) as table_refused:
            await money.transfer("join:t9:alice:k1", "player:alice", "escrow:t9:alice", 10, "buy_in", "t9")
        assert table_refused.value.code == "OUTBOX_BACKLOG"

        # Settlement's poster keeps retrying the whole call and never reports a refusal
        # (it would dead-letter the hands): it lands once NATS is back and the relay catches up.
        poster = LedgerPoster(ledger.stub("settlement"), backoff_max_s=0.5)
        hands = [settlement(f"tbp-h{n}") for n in range(1, 4)]
        posting = asyncio.ensure_future(poster.post(hands))
        for _ in range(600):  # until the poster has met the refusal (a bound on the wait)
            if poster.retries:
                break
            await asyncio.sleep(0.05)
        assert poster.retries > 0 and not posting.done()
        nats.start()
        posted = await asyncio.wait_for(posting, 120)
        assert [p.status for p in posted] == ["applied"] * len(hands)

        # The refused posting, retried under its key, is a first attempt: applied, not replayed.
        reply = await backend.PostTransaction(pb.PostTransactionRequest(transaction=held), timeout=60)
        assert reply.result.status == pb.POST_STATUS_APPLIED
        await caught_up(url)
        with psycopg.connect(url) as conn:
            (count,) = conn.execute(
                "select count(*) from socai_ledger.transactions where idempotency_key = 'held-1'"
            ).fetchone() or (0,)
        assert count == 1
    finally:
        if money is not None:
            await money.close()
        await ledger.stop()
        nats.stop()


ESCROWS = ("escrow:tbp:a", "escrow:tbp:b")


def refusals() -> float:
    return sum(sample("socai_ledger_outbox_refused_total", {"reason": r}) for r in ("wait_expired", "relay_stalled"))


def settlement(hand_id: str) -> pb.TransactionInput:
    """A settlement-shaped posting of table ``tbp``: what the settlement service sends."""
    return pb.TransactionInput(
        idempotency_key=f"settle:{hand_id}",
        kind="settlement",
        reference=hand_id,
        entries=[
            pb.EntryInput(account_id=ESCROWS[0], amount_gold=-10),
            pb.EntryInput(account_id=ESCROWS[1], amount_gold=10),
        ],
        metadata={"table_id": "tbp", "hand_id": hand_id},
    )


def test_the_bound_is_read_from_the_environment() -> None:
    config = LedgerConfig.from_env({"SOCAI_LEDGER_OUTBOX_MAX_LAG": "500", "SOCAI_LEDGER_OUTBOX_WAIT_S": "0.5"})
    assert (config.outbox_max_lag, config.outbox_wait_s) == (500, 0.5)
    assert LedgerConfig.from_env({}) == LedgerConfig()
    assert LedgerConfig.from_env({"SOCAI_LEDGER_OUTBOX_MAX_LAG": "0"}).outbox_max_lag == 0  # no bound
    with pytest.raises(ValueError):
        LedgerConfig(outbox_max_lag=-1)
    with pytest.raises(ValueError):
        LedgerConfig(outbox_wait_s=0)


def test_the_bound_holds_back_at_max_lag_and_a_relay_that_publishes_nothing_for_a_wait_is_stalled() -> None:
    backlog = OutboxBacklog(None, max_lag=10, wait_s=1.0)
    backlog.observe(head_seq=9, published_seq=0)
    assert not backlog.over()
    backlog.observe(head_seq=10)
    assert backlog.over() and backlog.lag == 10
    over_at = time.monotonic()
    assert not backlog.stalled(over_at)
    assert backlog.stalled(over_at + 1.0), "a whole wait without progress"
    backlog.observe(published_seq=1)  # the relay published: room again
    assert not backlog.over() and not backlog.stalled(over_at + 1.0)
    backlog.observe(head_seq=3, published_seq=0)  # a stale report changes nothing
    assert (backlog.head_seq, backlog.published_seq) == (10, 1)
    unbounded = OutboxBacklog(None, max_lag=0, wait_s=1.0)
    unbounded.observe(head_seq=10**9)
    assert not unbounded.over()
    refusal = backlog.refusal("relay_stalled")
    assert (refusal.code, refusal.details["max_lag"], refusal.details["why"]) == (
        "OUTBOX_BACKLOG",
        "10",
        "relay_stalled",
    )
