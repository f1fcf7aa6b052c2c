"""Rolling upgrades: a service's newest migration applied while its previous version serves.

A rolling upgrade runs the migration job while every pod still runs the previous image, so
each migration must work for the code of the version before it (expand now; contract one
version later, once no pod of the old code is left). For each service:
the code of the commit before the service's newest migration was added (``git archive`` of
that commit, run with this virtualenv's dependencies), against a database at the previous
revision, under a steady load that writes new rows (the ledger: deposits and transfers that
open accounts; the table service: tables created and joined); the newest migration is
applied mid-load. Every call must succeed (none failing, not even with a retry). The ledger's
old VerifyJournal and TrialBalance and this version's VerifyJournal stay clean; every table
shows its owner seated. Settlement's previous version settles only hands its own table
wrote, so for it the whole previous release runs (its test says how). A ``NOT NULL`` column
without a default, tried in a newest migration's place, fails its test at the first row the
old code inserts.
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

from socai.events.log import EventLog
from socai.events.model import HandEnded
from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.nats import StreamSpec, ensure_stream
from socai_cli import migrations as migrate
from socai_cli.stack import grpc_health
from socai_ledger import db
from socai_ledger.verify import verify_journal
from tests.support.clients import Backend
from tests.support.ports import free_port
from tests.support.services import running, service_settings

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


def previous_version(service: str, into: Path) -> Previous:
    """The code of the commit before ``service``'s newest migration was added, under ``into``."""
    migration = newest_migration(service)
    if not (ROOT / ".git").exists() or git("rev-parse", "--is-shallow-repository") == "true":
        # The previous version is read from git's history: a tree without it cannot say what
        # that version was (a shallow clone, an exported tree). Said in the run's summary.
        pytest.skip("needs the git history of the migration (a full clone)")
    spec = importlib.util.spec_from_file_location(f"newest_{service}_migration", migration)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    added = git("log", "--diff-filter=A", "--format=%H", "--", str(migration.relative_to(ROOT))).splitlines()[-1]
    commit = git("rev-parse", f"{added}^")
    archive = into / "code.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--output", str(archive), commit, "libs", "services", "apps"], check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    # The previous version really is the one without the newest migration.
    assert not (into / migration.relative_to(ROOT)).exists()
    return Previous(commit, into, module.revision, module.down_revision)


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Previous:
    return previous_version(SERVICE, tmp_path_factory.mktemp("previous-ledger"))


@contextlib.contextmanager
def previous_service(
    previous: Previous, settings: Settings, log_path: Path, service: str = SERVICE
) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m socai_<service>`` of the previous version (its code first on the path)."""
    path = os.pathsep.join(str(previous.code / part) for part in ("libs", "services", "apps"))
    env = {**os.environ, **settings.as_env(), "PYTHONPATH": path, "SOCAI_LOG_FORMAT": "json"}
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", f"socai_{service}"], env=env, stdout=log, stderr=log, cwd=previous.code
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


async def serving(address: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while await grpc_health(address, 1.0) != "SERVING":
        assert proc.poll() is None, f"the previous version exited: {log_path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the previous version did not start: {log_path.read_text()[-3000:]}"
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


async def assert_books_clean(settings: Settings) -> None:
    """The running ledger's own VerifyJournal and TrialBalance, asked as the auditor."""
    async with channel(settings.ledger_addr, settings.tokens["auditor"]) as audit_ch:
        auditor = pb_grpc.LedgerServiceStub(audit_ch)
        verified = await auditor.VerifyJournal(pb.VerifyJournalRequest())
        assert verified.ok, verified.mismatches
        trial = await auditor.TrialBalance(pb.TrialBalanceRequest())
        assert trial.total_gold == 0


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
    with previous_service(previous, settings, log_path) as proc:
        await serving(settings.ledger_addr, proc, log_path)
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
        await assert_books_clean(settings)

    # This version reads the journal the previous one wrote across the migration as clean.
    pool = db.create_pool(url)
    await pool.open()
    try:
        report = await verify_journal(pool)
    finally:
        await pool.close()
    assert report.ok, report.mismatches
    assert report.entries_checked >= 2 * done["calls"]


@pytest.fixture(scope="module")
def previous_table(tmp_path_factory: pytest.TempPathFactory) -> Previous:
    return previous_version("table", tmp_path_factory.mktemp("previous-table"))


async def test_the_newest_table_migration_applies_while_the_previous_table_service_opens_tables(
    previous_table: Previous, nats_url: str, database_url: str, stream_spec: StreamSpec, tmp_path: Path
) -> None:
    """The table service's newest migration under its previous version: tables created and
    joined (rows in the table service's schema, buy-ins through this version's ledger) while
    the migration is applied."""
    url = database_url
    for service in ("ledger", "settlement"):
        migrate.upgrade(url, service)
    migrate.upgrade(url, "table", previous_table.down_revision)
    settings = service_settings(nats_url, url, stream_spec)
    async with running(settings, ("ledger",)) as r:
        table_settings = replace(r.settings, metrics_port_base=0)
        log_path = tmp_path / "previous-table.log"
        with previous_service(previous_table, table_settings, log_path, "table") as proc:
            await serving(table_settings.table_addr, proc, log_path)
            backend = Backend(table_settings)
            failures: list[str] = []
            tables: list[str] = []
            stop = asyncio.Event()

            async def load() -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    try:
                        table_id = await backend.create("holdem", stake_gold=10, seats_max=6, owner_player_id=f"o{n}")
                        await backend.deposit(f"o{n}", 500)
                        await backend.join(table_id, f"o{n}", 200, seat=0)
                        tables.append(table_id)
                    except grpc.aio.AioRpcError as exc:
                        failures.append(f"call {n}: {exc.code().name} {exc.details()}")
                    await asyncio.sleep(LOAD_INTERVAL_S)

            try:
                loading = asyncio.create_task(load())
                await asyncio.sleep(1.0)
                before = len(tables)
                await asyncio.to_thread(migrate.upgrade, url, "table")  # the migration job, mid-load
                assert revision_of(url, "table") == previous_table.revision
                after_migration = len(tables)
                await asyncio.sleep(1.0)
                stop.set()
                await loading
                assert not failures, failures[:5]
                assert before >= 3 and len(tables) >= after_migration + 3, (before, after_migration, len(tables))
                assert proc.poll() is None, "the previous table service kept running"
                for table_id in tables:
                    state = await backend.state(table_id)
                    assert [s.player_id for s in state.table.seats if s.player_id] == [
                        state.table.config.owner_player_id
                    ]
            finally:
                await backend.close()


@pytest.fixture(scope="module")
def previous_settlement(tmp_path_factory: pytest.TempPathFactory) -> Previous:
    return previous_version("settlement", tmp_path_factory.mktemp("previous-settlement"))


def newest_revision_in(code: Path, service: str) -> str:
    """The newest migration's revision id in a version's tree (what that version runs on)."""
    versions = sorted((code / "services" / f"socai_{service}" / "migrations" / "versions").glob("0*.py"))
    spec = importlib.util.spec_from_file_location(f"previous_{service}_migration", versions[-1])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.revision)


def count(url: str, sql: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


async def hands_ended(nc: NatsClient, settings: Settings) -> int:
    log = EventLog(nc, settings.events_stream, settings.events_prefix)
    return sum([isinstance(s.event.body, HandEnded) async for s in log.read(f"{settings.events_prefix}.>")])


SETTLED_SQL = 'select count(*) from "socai_settlement".settlements'
DEAD_LETTERS_SQL = 'select count(*) from "socai_settlement".dead_letters'


async def test_the_newest_settlement_migration_applies_while_the_previous_version_settles_hands(
    previous_settlement: Previous, settings: Settings, database_url: str, nats_client: NatsClient, tmp_path: Path
) -> None:
    """Settlement's newest migration under its previous version. That version's settlement
    replays hands only as that version's table wrote them, so the whole previous release
    runs (ledger, table and settlement from the same commit, on the schemas it had): hold'em
    tables play by themselves (two seated players, automatic start, a one-second turn timer
    that folds), the previous settlement settles them, and the migration is applied
    mid-play. Hands go on settling across it, and at the end every hand that ended is
    settled once, none dead-lettered, the books balanced and verified."""
    previous, url = previous_settlement, database_url
    for service in ("ledger", "table"):
        migrate.upgrade(url, service, newest_revision_in(previous.code, service))
    migrate.upgrade(url, "settlement", previous.down_revision)
    s = replace(settings, metrics_port_base=0)
    logs = {name: tmp_path / f"previous-{name}.log" for name in ("ledger", "table", "settlement")}
    with contextlib.ExitStack() as stack:
        procs = {name: stack.enter_context(previous_service(previous, s, logs[name], name)) for name in logs}
        addrs = {"ledger": s.ledger_addr, "table": s.table_addr, "settlement": s.settlement_addr}
        await asyncio.gather(*(serving(addrs[name], procs[name], logs[name]) for name in logs))
        backend = Backend(s)
        try:
            for n in range(4):
                table_id = await backend.create(
                    "holdem", stake_gold=10, seats_max=2, auto_start_players=2, turn_timeout_s=1
                )
                for seat in (0, 1):
                    await backend.deposit(f"p{n}-{seat}", 1_000)
                    await backend.join(table_id, f"p{n}-{seat}", 500, seat=seat)
        finally:
            await backend.close()

        async def settled_at_least(n: int) -> int:
            deadline = time.monotonic() + 60
            while (settled := count(url, SETTLED_SQL)) < n:
                assert time.monotonic() < deadline, (settled, n, logs["settlement"].read_text()[-3000:])
                await asyncio.sleep(0.2)
            return settled

        before = await settled_at_least(4)
        await asyncio.to_thread(migrate.upgrade, url, "settlement")  # the migration job, mid-play
        assert revision_of(url, "settlement") == previous.revision
        after_migration = count(url, SETTLED_SQL)
        await settled_at_least(after_migration + 8)  # the previous version settles on across it
        assert procs["settlement"].poll() is None, "the previous settlement kept running"

        # The tables stop (a hand in play is left unended); every hand that ended is settled.
        procs["table"].terminate()
        procs["table"].wait(30)
        ended = await hands_ended(nats_client, s)
        assert ended > before
        assert await settled_at_least(ended) == ended
        assert count(url, DEAD_LETTERS_SQL) == 0

        await assert_books_clean(s)
        for name in ("ledger", "settlement"):
            assert procs[name].poll() is None, f"the previous {name} kept running: {logs[name].read_text()[-3000:]}"
