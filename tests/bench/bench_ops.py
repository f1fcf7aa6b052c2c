"""Disaster recovery: how long ``socai restore`` takes per million journal transactions.

Setup: an embedded PostgreSQL and nats-server, a real ``python -m socai_ledger`` (relay
running), 1,000 funded escrows (``bench_ledger``'s workload: each transaction moves gold
between two escrows and credits ``house:fees``, three entries). A backup is taken right
after the funding (``early``), then ``TRANSACTIONS`` are posted (``PostTransactions`` of
1,000, 4 callers), the relay publishes them all, and a second backup is taken (``late``).
The ledger is stopped and each backup is restored with ``socai_cli.backup.restore`` into a
fresh, empty database (the migrations, the journal's catch-up from the ledger's stream and
settlement's rewind included), each step timed:

- ``ops.restore_s_per_million``: restoring ``late`` (the whole journal in the backup, nothing
  to catch up), seconds per million transactions of journal. Peers: ``pg_dump_s_per_million``
  (taking that backup) and ``catch_up_s_per_million``: restoring ``early``, whose journal
  comes back from the stream (every transaction appended by ``journal_restore``), seconds per
  million transactions caught up. A loss's recovery time is about
  ``restore_s_per_million × journal / 10⁶ + catch_up_s_per_million × postings since the backup / 10⁶``
  plus settlement posting again what was never published.

Measured on a smaller journal (``TRANSACTIONS``) and scaled linearly to a million: pg_restore
and the catch-up are linear in rows (COPY, index builds, one batch of 1,000 per database
transaction); ``params`` carry the measured seconds and sizes. Both restored journals are
checked against the original (every account's balance and version).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from dataclasses import replace
from pathlib import Path

import psycopg

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.config import Settings
from socai.infra.nats import connect, ensure_stream
from socai.infra.nats_auth import TEST_HARNESS
from socai_cli import backup as ops
from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port
from tests.bench.bench_ledger import WRITE_PATH_ENV, LedgerProcess, Workload, checkpoint, fund, post_rate
from tests.bench.harness import BenchContext, Result

TRANSACTIONS = (200_000, 20_000)  # full, quick
BATCH = 1000
CALLERS = 4
ACCOUNTS_SQL = "select account_id, balance_gold, version from socai_ledger.accounts order by account_id"


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def _head_and_cursor(url: str) -> tuple[int, int]:
    ((head, cursor),) = _rows(
        url,
        "select (select coalesce(max(journal_seq), 0) from socai_ledger.transactions), "
        "(select published_seq from socai_ledger.outbox_progress)",
    )
    return int(head), int(cursor)  # type: ignore[call-overload]


def _wait_published(url: str, timeout_s: float = 1800) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        head, cursor = _head_and_cursor(url)
        if head == cursor:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the relay published {cursor} of {head} in {timeout_s}s")
        time.sleep(0.5)


def run(ctx: BenchContext) -> list[Result]:
    count = TRANSACTIONS[1] if ctx.quick else TRANSACTIONS[0]
    pg = EmbeddedPostgres(ctx.workdir / "pg", port=free_port(), database="postgres")
    nats = EmbeddedNats(ctx.workdir / "nats", port=free_port(), test_harness=True)
    pg.start()
    nats.start()
    nats_url = nats.url_for(TEST_HARNESS)
    run_id = uuid.uuid4().hex[:8]
    base = pg.admin_url().rsplit("/", 1)[0]

    def fresh_database(name: str) -> str:
        with psycopg.connect(pg.admin_url(), autocommit=True) as conn:
            conn.execute(f'create database "{name}_{run_id}"')
        return f"{base}/{name}_{run_id}"

    try:
        url = fresh_database("ops")
        migrate.upgrade_all(url)
        settings = Settings(
            nats_url=nats_url,
            database_url=url,
            ledger_addr=f"127.0.0.1:{free_port()}",
            metrics_port_base=free_port(),
            events_stream=f"OPS_EVENTS_{run_id}",
            events_prefix=f"ops{run_id}.events",
            ledger_stream=f"OPS_LEDGER_{run_id}",
            ledger_prefix=f"ops{run_id}.ledger",
            log_format="json",
        )

        async def streams() -> None:
            nc = await connect(nats_url, name="bench-ops")
            try:
                await ensure_stream(nc.jetstream(), settings.events_stream_spec())
                await ensure_stream(nc.jetstream(), settings.ledger_stream_spec())
            finally:
                await nc.close()

        asyncio.run(streams())
        early = ctx.workdir / f"early-{run_id}.dump"
        late = ctx.workdir / f"late-{run_id}.dump"
        with LedgerProcess(settings, ctx.workdir / "ledger.log", WRITE_PATH_ENV):
            asyncio.run(fund(settings.ledger_addr, settings.tokens["cashier"]))
            _wait_published(url)
            funded, _ = _head_and_cursor(url)
            ops.backup(url, early)
            txs = Workload(random.Random(35)).transactions(count, "ops")
            payloads = [
                pb.PostTransactionsRequest(transactions=txs[i : i + BATCH]).SerializeToString()
                for i in range(0, len(txs), BATCH)
            ]
            asyncio.run(
                post_rate(settings.ledger_addr, settings.tokens["settlement"], "PostTransactions", payloads, CALLERS)
            )
            _wait_published(url)
        head, _ = _head_and_cursor(url)
        accounts = _rows(url, ACCOUNTS_SQL)
        checkpoint(pg.admin_url())
        meta = ops.backup(url, late)
        dump_s = float(meta["seconds"])

        def restore(dump: Path, name: str) -> ops.Restored:
            target = fresh_database(name)
            checkpoint(pg.admin_url())
            report = ops.restore(
                dump,
                admin_url=target,
                owner_url=target,
                nats_url_for=lambda _user: nats_url,
                settings=replace(settings, database_url=target),
            )
            if report.journal_head != head or _rows(target, ACCOUNTS_SQL) != accounts:
                raise RuntimeError(f"{name}: the restored journal differs from the original ({report})")
            return report

        whole = restore(late, "restored_late")
        caught = restore(early, "restored_early")
        restore_s = sum(whole.seconds.values())
        catch_up_s = caught.seconds["journal_catch_up"]
        per_million = 1_000_000 / head
        caught_per_million = 1_000_000 / caught.applied_from_stream
        value = restore_s * per_million
        print(
            f"   ops.restore_s_per_million: {value:,.1f} s (journal {head}: {whole.seconds}); "
            f"catch-up of {caught.applied_from_stream}: {catch_up_s:.1f} s; pg_dump {dump_s:.1f} s",
            flush=True,
        )
        return [
            Result(
                name="ops.restore_s_per_million",
                value=value,
                unit="s",
                higher_is_better=False,
                peers={
                    "catch_up_s_per_million": catch_up_s * caught_per_million,
                    "pg_dump_s_per_million": dump_s * per_million,
                },
                params={
                    "journal_transactions": head,
                    "entries_per_transaction": 3,
                    "accounts": len(accounts),
                    "backup_bytes": late.stat().st_size,
                    "measured_s": whole.seconds,
                    "caught_up_transactions": caught.applied_from_stream,
                    "catch_up_measured_s": catch_up_s,
                    "early_backup_journal": funded,
                    "pg_dump_measured_s": dump_s,
                    "scaled": "linearly from the measured journal to 1,000,000 transactions",
                    "cpus": os.cpu_count(),
                },
            )
        ]
    finally:
        nats.stop()
        pg.stop()
