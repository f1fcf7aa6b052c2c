"""The disaster-recovery drill, short form: lose PostgreSQL, get every gold back from the log.

Real NATS (the session's), a PostgreSQL of this test's own, the real ledger and settlement
in this process, hands published as the table service writes them:

1. load: tables funded, hands played and settled, every posting published;
2. ``socai backup`` (pg_dump);
3. more load, all of it published; then the relay stopped and more hands settled, so the
   journal's last postings were committed but never published (the relay's lag at a loss);
4. PostgreSQL killed (SIGKILL) and its data directory deleted;
5. ``socai restore``: a fresh data directory, the backup restored, the journal brought up to
   date from the ledger's stream, settlement's durables started again after its records;
6. the services started again: settlement posts the hands whose postings were lost.

Then the journal equals the journal before the loss: every account's balance and version,
every idempotency key's entries, balances after and journal position; every transaction
the stream held keeps its id, time and request hash; TrialBalance 0, VerifyJournal clean,
``socai audit`` clean, and the ledger's stream holds each transaction once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from nats.aio.client import Client as NatsClient

from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.config import Settings
from socai.infra.db import OWNER_ROLE, libpq_url
from socai.infra.nats import StreamSpec
from socai_cli import backup as ops
from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedPostgres, free_port
from socai_ledger import journal_restore
from tests.support.settlement import Harness, harness_for, wait_for
from tests.support.synthetic import Simulation, fund, publish, simulate

pytestmark = [pytest.mark.fault, pytest.mark.slow]

GAMES = ("holdem", "xito", "taixiu", "tienlen")

JOURNAL_SQL = """
select t.journal_seq, t.idempotency_key, t.transaction_id::text, t.request_hash, t.kind, t.reference, t.metadata,
       t.created_at,
       array_agg(array[e.account_id, e.amount_gold::text, e.balance_after_gold::text, e.account_version::text]
                 order by e.entry_index)
from socai_ledger.transactions t join socai_ledger.entries e on e.journal_seq = t.journal_seq
where t.status = 'applied' group by t.transaction_id order by t.journal_seq
"""
ACCOUNTS_SQL = "select account_id, balance_gold, version, held_gold from socai_ledger.accounts order by account_id"


def read(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_url(url)) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture
def postgres(test_var_dir: Path) -> Iterator[EmbeddedPostgres]:
    pg = EmbeddedPostgres(test_var_dir / f"pg-drill-{uuid.uuid4().hex[:8]}", port=free_port(), database="socai")
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(pg.root, ignore_errors=True)


@pytest.fixture
async def harness(
    nats_url: str, postgres: EmbeddedPostgres, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[Harness]:
    owner_url = postgres.url_for(OWNER_ROLE)
    migrate.upgrade_all(owner_url)
    async with harness_for(nats_url, owner_url, stream_spec, nats_client) as h:
        yield h


async def settle(h: Harness, sim: Simulation, settled_before: int) -> int:
    await fund(h.ledger("cashier"), sim)
    await publish(h.log, sim, concurrency=16)
    want = settled_before + len(sim.hands)

    async def all_settled() -> bool:
        settled, dead = await h.counts()
        assert dead == 0
        return bool(settled == want)

    await wait_for(all_settled, 120, f"{want} hands settled")
    return want


async def published(h: Harness, url: str) -> None:
    """Wait until the relay has published the whole journal."""

    async def caught_up() -> bool:
        ((head, cursor),) = read(
            url,
            "select (select coalesce(max(journal_seq), 0) from socai_ledger.transactions), "
            "(select published_seq from socai_ledger.outbox_progress)",
        )
        return bool(head == cursor)

    await wait_for(caught_up, 60, "the relay to publish the journal")


async def socai_audit(settings: Settings) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings.as_env(), "SOCAI_LOG_LEVEL": "warning"}
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "socai_cli.main", "audit"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def test_a_lost_database_is_restored_from_its_backup_and_the_logs_to_the_journal_before_the_loss(
    harness: Harness, postgres: EmbeddedPostgres, nats_url: str, nats_client: NatsClient, tmp_path: Path
) -> None:
    h = harness
    url = postgres.url_for(OWNER_ROLE)
    await h.start_ledger()
    await h.start_settlement()

    # 1-2. Load, then the base backup.
    settled = await settle(h, simulate(16, GAMES, seed=351, table_prefix="a"), 0)
    await published(h, url)
    dump = tmp_path / "socai.dump"
    meta = ops.backup(postgres.url, dump)
    backup_head = meta["journal_head_at_least"]
    assert backup_head > 0

    # 3. More load, published; then more with the relay stopped: committed, never published.
    settled = await settle(h, simulate(16, GAMES, seed=352, table_prefix="b"), settled)
    await published(h, url)
    last_sim = simulate(12, GAMES, seed=353, table_prefix="c")
    await fund(h.ledger("cashier"), last_sim)
    await published(h, url)
    ((published_at_loss,),) = read(url, "select published_seq from socai_ledger.outbox_progress")
    assert h.ledger_app is not None and h.ledger_app.relay is not None
    await h.ledger_app.relay.stop()
    settled = await settle(h, last_sim, settled)
    journal_before = read(url, JOURNAL_SQL)
    accounts_before = read(url, ACCOUNTS_SQL)
    head_before = journal_before[-1][0]
    lost = [row for row in journal_before if row[0] > published_at_loss]
    assert backup_head < published_at_loss < head_before
    assert lost and all(row[1].startswith("settle:") for row in lost)

    # 4. PostgreSQL killed, its data gone.
    await h.stop_settlement()
    await h.stop_ledger()
    assert postgres.proc is not None
    postgres.proc.send_signal(signal.SIGKILL)
    postgres.proc.wait(10)
    postgres.proc = None
    shutil.rmtree(postgres.data_dir)

    # 5. socai restore: a fresh data directory, the backup, the ledger's stream, settlement rewound.
    await asyncio.to_thread(postgres.start)
    report = await asyncio.to_thread(
        ops.restore,
        dump,
        admin_url=postgres.url,
        owner_url=url,
        nats_url_for=lambda _user: nats_url,
        settings=h.settings,
    )
    assert report.journal_head == published_at_loss
    assert report.applied_from_stream == published_at_loss - backup_head
    assert report.published_seq == published_at_loss
    assert report.hashes_inferred == 0
    # Up to the last published transaction the journal is the one before the loss, row for row.
    assert read(url, JOURNAL_SQL) == journal_before[:published_at_loss]
    # Restoring the stream again applies nothing: each posting once, by its key.
    again = await ops.catch_up_journal(url, nats_url, h.settings.ledger_stream)
    assert again.applied == 0 and again.head_after == published_at_loss

    # 6. The services again: settlement posts the hands whose postings were lost.
    await h.start_ledger()
    await h.start_settlement()

    async def every_hand_settled() -> bool:
        count, dead = await h.counts()
        assert dead == 0
        return bool(count == settled)

    await wait_for(every_hand_settled, 120, "settlement to settle every hand again")
    await published(h, url)

    journal_after = read(url, JOURNAL_SQL)
    assert read(url, ACCOUNTS_SQL) == accounts_before
    assert len(journal_after) == len(journal_before)
    # Transactions the stream held come back as they were; the lost ones are posted again,
    # under the same keys, with the same entries and balances, at the same journal positions.
    assert journal_after[:published_at_loss] == journal_before[:published_at_loss]
    again_by_key = {row[1]: row for row in journal_after[published_at_loss:]}
    for row in lost:
        key = row[1]
        posted_again = again_by_key[key]
        # All but the transaction's id and commit time (columns 2 and 7).
        assert posted_again[:2] + posted_again[3:7] + posted_again[8:] == row[:2] + row[3:7] + row[8:], key

    auditor = h.ledger("auditor")
    trial = await auditor.TrialBalance(ledger_pb2.TrialBalanceRequest())
    assert trial.total_gold == 0
    verify = await auditor.VerifyJournal(ledger_pb2.VerifyJournalRequest())
    assert verify.ok and not verify.mismatches
    audit = await socai_audit(replace(h.settings, nats_url=nats_url))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "mismatches: none; the audit is clean" in audit.stdout

    # The ledger's stream holds every transaction of the journal once, in journal order.
    stream = h.settings.ledger_stream
    keys = [p.transaction.idempotency_key async for p in journal_restore.read_postings(nats_client, stream, 0)]
    assert keys == [row[1] for row in journal_after]
