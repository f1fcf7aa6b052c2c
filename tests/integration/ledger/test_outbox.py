"""The outbox: every committed transaction reaches a JetStream consumer once, in commit order."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from nats.js import JetStreamContext
from prometheus_client import REGISTRY

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.nats import publish
from tests.integration.ledger.conftest import Ledger, deposit, ledger_settings, transaction

pytestmark = pytest.mark.integration


class Follower:
    """A durable pull consumer on the ledger stream: what another service would run."""

    def __init__(self, js: JetStreamContext, ledger: Ledger) -> None:
        self.js = js
        self.stream = ledger.settings.ledger_stream
        self.prefix = ledger.settings.ledger_prefix
        self.messages: list[Any] = []
        self._sub: Any = None

    async def read(self, count: int, timeout_s: float = 30.0, settle_s: float = 0.5) -> list[Any]:
        """Until ``count`` messages arrived (then ``settle_s`` more, to catch any extra)."""
        if self._sub is None:
            await wait_for_stream(self.js, self.stream)
            self._sub = await self.js.pull_subscribe(f"{self.prefix}.>", durable="follower", stream=self.stream)
        deadline = time.monotonic() + timeout_s
        settle_until = None
        while time.monotonic() < deadline:
            if len(self.messages) >= count:
                settle_until = settle_until or time.monotonic() + settle_s
                if time.monotonic() >= settle_until:
                    break
            try:
                batch = await self._sub.fetch(200, timeout=0.2)
            except TimeoutError:
                continue
            for msg in batch:
                await msg.ack()
                self.messages.append(msg)
        return self.messages


async def wait_for_stream(js: JetStreamContext, name: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await js.stream_info(name)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


@pytest.fixture
async def js(nats_client: Any) -> AsyncIterator[JetStreamContext]:
    yield nats_client.jetstream()


def journal_order(messages: list[Any]) -> list[int]:
    return [int(m.headers["Socai-Journal-Seq"]) for m in messages]


def applied_ids(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select transaction_id::text, journal_seq from socai_ledger.transactions where status = 'applied'"
        ).fetchall()
    return dict(rows)


def request_hashes(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select transaction_id::text, encode(request_hash, 'hex') from socai_ledger.transactions "
            "where status = 'applied'"
        ).fetchall()
    return dict(rows)


async def post_many(ledger: Ledger, prefix: str, count: int) -> None:
    """Single posts and batches, concurrently: many batches of mixed sizes."""
    stub = ledger.stub("backend")  # payments between wallets: the write path, not a game

    async def single(i: int) -> None:
        await stub.PostTransaction(
            pb.PostTransactionRequest(
                transaction=transaction(
                    f"{prefix}{i}", ("player:alice", -1), ("player:bob", 1), reference=f"h{i}", open_accounts=True
                )
            )
        )

    half = count // 2
    batch = [
        transaction(f"{prefix}b{i}", ("player:alice", -1), ("player:carol", 1), open_accounts=True) for i in range(half)
    ]
    await asyncio.gather(
        *(single(i) for i in range(count - half)),
        stub.PostTransactions(pb.PostTransactionsRequest(transactions=batch)),
    )


def check_delivery(messages: list[Any], url: str) -> None:
    ids = applied_ids(url)
    hashes = request_hashes(url)
    seen = Counter(m.headers["Nats-Msg-Id"] for m in messages)
    assert set(seen) == set(ids), "every committed transaction is published"
    assert max(seen.values()) == 1, "and delivered once"
    assert journal_order(messages) == sorted(ids.values()), "in commit order"
    for msg in messages:
        tx = pb.Transaction.FromString(msg.data)
        assert tx.transaction_id == msg.headers["Nats-Msg-Id"]
        assert ids[tx.transaction_id] == tx.journal_seq
        # The request's hash, which a journal restored from this stream keeps (journal_restore).
        assert msg.headers["Socai-Request-Hash"] == hashes[tx.transaction_id]
        first_kind = tx.entries[0].account_id.split(":", 1)[0]
        assert msg.subject.endswith(f".posted.{first_kind}")
        assert msg.headers["Socai-Account-Kinds"] == ",".join(sorted({e.account_id.split(":")[0] for e in tx.entries}))
        assert sum(e.amount_gold for e in tx.entries) == 0


async def test_every_transaction_reaches_a_consumer_once_in_order_also_across_a_restart(
    ledger: Ledger, js: JetStreamContext
):
    url = ledger.settings.database_url or ""
    await deposit(ledger, "alice", 10_000)
    await post_many(ledger, "a", 120)
    follower = Follower(js, ledger)
    assert len(await follower.read(121)) == 121

    await ledger.restart()
    # As if the previous relay had crashed after the acks but before recording them: the
    # cursor goes back 40 transactions and the restarted relay publishes them again.
    with psycopg.connect(url) as conn:
        conn.execute("update socai_ledger.outbox_progress set published_seq = published_seq - 40")
        conn.execute(
            "insert into socai_ledger.outbox (first_seq, last_seq) select published_seq + 1, published_seq + 40 "
            "from socai_ledger.outbox_progress"
        )
        conn.commit()
    await post_many(ledger, "b", 80)
    messages = await follower.read(201)
    check_delivery(messages, url)
    info = await js.stream_info(ledger.settings.ledger_stream)
    assert info.state.messages == 201  # the 40 re-published ones were dropped as duplicates


async def test_postings_go_on_while_nats_is_unreachable_and_the_outbox_catches_up(
    nats_url: str, migrated_database_url: str, js: JetStreamContext
):
    unreachable = ledger_settings("nats://127.0.0.1:9", migrated_database_url)
    down = Ledger(unreachable)
    await down.start()
    try:
        await deposit(down, "alice", 1_000)
        await post_many(down, "x", 30)
        with psycopg.connect(migrated_database_url) as conn:
            (published,) = conn.execute("select published_seq from socai_ledger.outbox_progress").fetchone() or (0,)
        assert published == 0
    finally:
        await down.stop()
    from dataclasses import replace

    up = Ledger(replace(unreachable, nats_url=nats_url))
    await up.start()
    try:
        check_delivery(await Follower(js, up).read(31), migrated_database_url)
    finally:
        await up.stop()
        with contextlib.suppress(Exception):
            await js.delete_stream(up.settings.ledger_stream)


async def test_a_foreign_message_breaks_the_chain_and_the_relay_starts_again_from_its_cursor(
    ledger: Ledger, js: JetStreamContext
):
    url = ledger.settings.database_url or ""
    await deposit(ledger, "alice", 100)
    follower = Follower(js, ledger)
    assert len(await follower.read(1)) == 1
    broken_before = REGISTRY.get_sample_value("socai_ledger_outbox_errors_total", {"reason": "chain_broken"}) or 0
    # Someone else publishes into the ledger's stream between two of the relay's messages.
    await publish(js, f"{ledger.settings.ledger_prefix}.posted.player", b"not a transaction", msg_id="intruder")
    await post_many(ledger, "c", 10)
    messages = await follower.read(12)
    foreign = [m for m in messages if m.headers["Nats-Msg-Id"] == "intruder"]
    assert len(foreign) == 1
    check_delivery([m for m in messages if m not in foreign], url)
    broken_after = REGISTRY.get_sample_value("socai_ledger_outbox_errors_total", {"reason": "chain_broken"}) or 0
    assert broken_after == broken_before + 1


async def test_two_replicas_write_the_same_journal_and_one_of_them_relays(ledger: Ledger, js: JetStreamContext):
    url = ledger.settings.database_url or ""
    second = Ledger(ledger.settings)  # the same database and stream, another process's worth of state
    await second.start()
    try:
        await deposit(ledger, "alice", 10_000)
        await asyncio.gather(post_many(ledger, "r1-", 100), post_many(second, "r2-", 100))
        messages = await Follower(js, ledger).read(201)
        check_delivery(messages, url)
        relays = [ledger.app.relay, second.app.relay]  # type: ignore[union-attr]
        assert sorted(r._leader for r in relays if r is not None) == [False, True]
    finally:
        await second.stop()
    report = await ledger.stub("auditor").VerifyJournal(pb.VerifyJournalRequest())
    assert report.ok
