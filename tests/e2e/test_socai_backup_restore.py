"""``socai backup`` and ``socai restore`` as an operator runs them on the embedded stack.

``socai up``; deposits; ``socai backup``; more deposits; the stack stopped and PostgreSQL's
data directory deleted; ``socai restore FILE`` (it starts the embedded servers itself, on a
fresh data directory, and stops them): the journal is back row for row, the deposits made
after the backup with their ids, times and request hashes (so a retry under their keys is
answered with the original transaction). tests/fault/test_restore_drill.py is the drill with
hands, settlement, lost postings and the services started again.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai_cli.embedded import EmbeddedPostgres
from tests.support.stack import stack_env

# Heavy (~37 s alone): make test-heavy runs it, in CI after make test; the serial group's
# restore drill (tests/fault/test_restore_drill.py) stays in make test.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.heavy]

SOCAI = [sys.executable, "-m", "socai_cli.main"]


def socai(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SOCAI, *args], env=env, capture_output=True, text=True, timeout=180)


class Up:
    """``socai up`` in the background until ``stop``."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [*SOCAI, "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        output: list[str] = []
        deadline = time.monotonic() + 120
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            output.append(line)
            if line.startswith("socai is up"):
                return
        self.stop()
        raise AssertionError("socai up did not come up: " + "".join(output))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.communicate(timeout=60)


@pytest.fixture
def env(stack_var_dir: Path) -> Iterator[dict[str, str]]:
    yield stack_env(stack_var_dir)


def deposit(env: dict[str, str], *deposits: tuple[str, str, int]) -> None:
    """``Deposit`` (key, player, gold) each, as the cashier, through the running ledger."""

    async def post() -> None:
        async with channel(env["SOCAI_LEDGER_ADDR"], Settings().tokens["cashier"]) as ch:
            stub = pb_grpc.LedgerServiceStub(ch)
            for key, player, gold in deposits:
                reply = await stub.Deposit(
                    pb.DepositRequest(idempotency_key=key, player_id=player, amount_gold=gold), timeout=30
                )
                assert reply.result.status == pb.POST_STATUS_APPLIED, reply

    asyncio.run(post())


def database(env: dict[str, str], sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{env['SOCAI_PG_PORT']}/socai") as conn:
        return conn.execute(sql).fetchall()


ACCOUNTS = "select account_id, balance_gold, version from socai_ledger.accounts order by account_id"
JOURNAL = (
    "select t.journal_seq, t.transaction_id, t.idempotency_key, t.request_hash, t.created_at, "
    "e.account_id, e.amount_gold, e.balance_after_gold, e.account_version "
    "from socai_ledger.transactions t join socai_ledger.entries e using (journal_seq) "
    "order by t.journal_seq, e.entry_index"
)
PUBLISHED = (
    "select (select max(journal_seq) from socai_ledger.transactions) = "
    "(select published_seq from socai_ledger.outbox_progress)"
)


def test_socai_restore_brings_back_the_journal_after_the_database_is_lost(
    env: dict[str, str], stack_var_dir: Path
) -> None:
    dump = stack_var_dir / "backups" / "before.dump"
    up = Up(env)
    try:
        deposit(env, ("d1", "ana", 5000), ("d2", "bao", 300))
        done = socai(env, "backup", "--out", str(dump))
        assert done.returncode == 0, done.stderr
        assert dump.exists() and (dump.parent / "before.dump.json").exists()
        deposit(env, ("d3", "ana", 700), ("d4", "chi", 40))
        deadline = time.monotonic() + 30
        while database(env, PUBLISHED) != [(True,)]:
            assert time.monotonic() < deadline, "the relay did not publish the journal"
            time.sleep(0.2)
        before = database(env, ACCOUNTS), database(env, JOURNAL)
    finally:
        up.stop()

    shutil.rmtree(stack_var_dir / "pg" / "data")
    done = socai(env, "restore", str(dump))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 transactions from the ledger's stream" in done.stdout, done.stdout

    postgres = EmbeddedPostgres(stack_var_dir / "pg", port=int(env["SOCAI_PG_PORT"]))
    postgres.start()  # the restored data directory, as the next socai up finds it
    try:
        assert (database(env, ACCOUNTS), database(env, JOURNAL)) == before
    finally:
        postgres.stop()
