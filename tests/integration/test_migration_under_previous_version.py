"""Rolling upgrades: the newest migration applied while the previous version keeps serving.

A rolling upgrade runs the migration job while every pod still runs the previous image, so
each migration must work for the code of the version before it (expand now; contract one
version later, once no pod of the old code is left). Here, for the ledger: the code of the
commit before its newest migration was added (``git archive`` of that commit, run with this
virtualenv's dependencies), against a database at the previous revision, under a steady load
of deposits and transfers; the newest migration is applied while it serves. Every call must
succeed (none failing, not even with a retry), the old ledger's own VerifyJournal and
TrialBalance stay clean, and this version's VerifyJournal is clean on the migrated journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import psycopg
import pytest
from nats.aio.client import Client as NatsClient

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.nats import StreamSpec, ensure_stream
from socai_cli import migrations as migrate
from socai_cli.stack import grpc_health
from socai_ledger import db
from socai_ledger.verify import verify_journal
from tests.support.ports import free_port
from tests.support.services import service_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SERVICE = "ledger"
LOAD_INTERVAL_S = 0.01  # between two calls of the load: a steady trickle of postings


@dataclass(frozen=True)
class Previous:
    """The code of the version before a migration, and the revisions around it."""

    commit: str
    code: Path  # holds libs/, services/, apps/ as that commit had them
    revision: str  # the newest migration (what the upgrade applies)
    down_revision: str  # the revision the previous version ran on


def newest_migration(service: str) -> Path:
    versions = ROOT / "services" / f"socai_{service}" / "migrations" / "versions"
    return sorted(versions.glob("0*.py"))[-1]


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Previous:
    migration = newest_migration(SERVICE)
    spec = importlib.util.spec_from_file_location("newest_migration", migration)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    added = git("log", "--diff-filter=A", "--format=%H", "--", str(migration.relative_to(ROOT))).splitlines()[-1]
    commit = git("rev-parse", f"{added}^")
    code = tmp_path_factory.mktemp("previous")
    archive = code / "code.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--output", str(archive), commit, "libs", "services", "apps"], check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(code, filter="data")
    # The previous version really is the one without the newest migration.
    assert not (code / migration.relative_to(ROOT)).exists()
    return Previous(commit, code, module.revision, module.down_revision)


@contextlib.contextmanager
def previous_ledger(previous: Previous, settings: Settings, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m socai_ledger`` of the previous version (its code first on the path)."""
    path = os.pathsep.join(str(previous.code / part) for part in ("libs", "services", "apps"))
    env = {**os.environ, **settings.as_env(), "PYTHONPATH": path, "SOCAI_LOG_FORMAT": "json"}
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "socai_ledger"], env=env, stdout=log, stderr=log, cwd=previous.code
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def serving(settings: Settings, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while await grpc_health(settings.ledger_addr, 1.0) != "SERVING":
        assert proc.poll() is None, f"the previous ledger exited: {log_path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the previous ledger did not start: {log_path.read_text()[-3000:]}"
        await asyncio.sleep(0.2)


@pytest.fixture
async def settings(
    nats_url: str, database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[Settings]:
    s = service_settings(nats_url, database_url, stream_spec)
    s = replace(
        s,
        metrics_port_base=free_port(),
        ledger_stream=f"{stream_spec.name}_LEDGER",
        ledger_prefix=stream_spec.subjects[0].removesuffix(".events.>") + ".ledger",
    )
    await ensure_stream(nats_client.jetstream(), s.ledger_stream_spec())
    yield s
    await nats_client.jetstream().delete_stream(s.ledger_stream)


def revision_of(url: str, service: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(f'select version_num from "socai_{service}".alembic_version').fetchone()
    return str(row[0]) if row else ""


async def test_the_newest_ledger_migration_applies_while_the_previous_version_serves_postings(
    previous: Previous, settings: Settings, database_url: str, tmp_path: Path
) -> None:
    url = database_url
    migrate.upgrade(url, SERVICE, previous.down_revision)
    log_path = tmp_path / "previous-ledger.log"
    with previous_ledger(previous, settings, log_path) as proc:
        await serving(settings, proc, log_path)
        async with channel(settings.ledger_addr, settings.tokens["cashier"]) as ch:
            ledger = pb_grpc.LedgerServiceStub(ch)
            failures: list[str] = []
            done = {"calls": 0}
            stop = asyncio.Event()

            async def load() -> None:
                """Every call opens an account (a wallet by its deposit, a payee by its
                transfer) and moves gold: new rows in every journal table, before and after."""
                n = 0
                while not stop.is_set():
                    n += 1
                    try:
                        if n % 2:
                            await ledger.Deposit(
                                pb.DepositRequest(idempotency_key=f"d{n}", player_id=f"p{n}", amount_gold=100),
                                timeout=10,
                            )
                        else:
                            await ledger.Transfer(
                                pb.TransferRequest(
                                    idempotency_key=f"t{n}",
                                    from_account_id=f"player:p{n - 1}",
                                    to_account_id=f"player:q{n}",
                                    amount_gold=30,
                                    open_accounts=True,
                                ),
                                timeout=10,
                            )
                        done["calls"] += 1
                    except grpc.aio.AioRpcError as exc:
                        failures.append(f"call {n}: {exc.code().name} {exc.details()}")
                    await asyncio.sleep(LOAD_INTERVAL_S)

            loading = asyncio.create_task(load())
            await asyncio.sleep(1.0)
            before = done["calls"]
            await asyncio.to_thread(migrate.upgrade, url, SERVICE)  # the migration job, mid-load
            assert revision_of(url, SERVICE) == previous.revision
            after_migration = done["calls"]
            await asyncio.sleep(1.0)
            stop.set()
            await loading

            assert not failures, failures[:5]
            assert before > 10 and done["calls"] > after_migration + 10, (before, after_migration, done["calls"])
            assert proc.poll() is None, "the previous ledger kept running"
        async with channel(settings.ledger_addr, settings.tokens["auditor"]) as audit_ch:
            auditor = pb_grpc.LedgerServiceStub(audit_ch)
            verified = await auditor.VerifyJournal(pb.VerifyJournalRequest())
            assert verified.ok, verified.mismatches
            trial = await auditor.TrialBalance(pb.TrialBalanceRequest())
            assert trial.total_gold == 0

    # This version reads the journal the previous one wrote across the migration as clean.
    pool = db.create_pool(url)
    await pool.open()
    try:
        report = await verify_journal(pool)
    finally:
        await pool.close()
    assert report.ok, report.mismatches
    assert report.entries_checked >= 2 * done["calls"]
