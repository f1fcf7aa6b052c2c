"""The ledger in this process on a free port, against a fresh migrated database, real NATS.

``ledger`` is a running service; ``ledger.stub(caller)`` is a LedgerService stub that
presents that caller's token. ``journal_snapshot(url)`` reads the database directly (what
"changes nothing" is checked against).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
import pytest

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai_ledger.app import App, build_app


@dataclass
class Ledger:
    """A running ledger and the channels opened to it."""

    settings: Settings
    app: App | None = None
    _channels: list[Any] = field(default_factory=list)

    @property
    def address(self) -> str:
        assert self.app is not None
        return self.app.address

    def stub(self, caller: str = "backend") -> Any:
        ch = channel(self.address, self.settings.tokens[caller])
        self._channels.append(ch)
        return pb_grpc.LedgerServiceStub(ch)

    async def start(self, **options: Any) -> None:
        self.app = await build_app(self.settings, **options)
        await self.app.start()

    async def stop(self) -> None:
        for ch in self._channels:
            await ch.close()
        self._channels.clear()
        if self.app is not None:
            await self.app.stop()
            self.app = None

    async def restart(self, **options: Any) -> None:
        await self.stop()
        await self.start(**options)


def ledger_settings(nats_url: str, database_url: str, **overrides: Any) -> Settings:
    """Settings of a test ledger: port 0, its own outbox stream and subject prefix."""
    token = uuid.uuid4().hex[:12]
    base = Settings(
        nats_url=nats_url,
        database_url=database_url,
        ledger_addr="127.0.0.1:0",
        ledger_stream=f"L_{token.upper()}",
        ledger_prefix=f"t{token}.ledger",
        metrics_port_base=0,
        log_format="console",
    )
    return replace(base, **overrides)


@pytest.fixture
async def ledger(nats_url: str, migrated_database_url: str) -> AsyncIterator[Ledger]:
    running = Ledger(ledger_settings(nats_url, migrated_database_url))
    await running.start()
    try:
        yield running
    finally:
        await running.stop()
        await _delete_stream(nats_url, running.settings.ledger_stream)


async def _delete_stream(nats_url: str, name: str) -> None:
    from socai.infra.nats import connect

    nc = await connect(nats_url, name="socai-test-cleanup")
    try:
        try:
            await nc.jetstream().delete_stream(name)
        except Exception:
            pass  # never created (the relay had nothing to publish)
    finally:
        await nc.close()


# --- building requests --------------------------------------------------------------------------


def entries(*legs: tuple[str, int]) -> list[pb.EntryInput]:
    return [pb.EntryInput(account_id=account, amount_gold=amount) for account, amount in legs]


def transaction(
    key: str,
    *legs: tuple[str, int],
    kind: str = "test",
    reference: str = "",
    open_accounts: bool = False,
    **metadata: str,
) -> pb.TransactionInput:
    return pb.TransactionInput(
        idempotency_key=key,
        kind=kind,
        reference=reference,
        entries=entries(*legs),
        metadata=metadata,
        open_accounts=open_accounts,
    )


async def deposit(ledger: Ledger, player: str, amount: int, key: str | None = None) -> pb.PostResult:
    reply = await ledger.stub("cashier").Deposit(
        pb.DepositRequest(idempotency_key=key or f"dep-{uuid.uuid4().hex}", player_id=player, amount_gold=amount)
    )
    return reply.result


async def fund_escrow(ledger: Ledger, table_id: str, player: str, amount: int) -> pb.PostResult:
    """Chips at a table, put there by the cashier (who may post to any account): what a
    settlement moves, without the table service's buy-in."""
    reply = await ledger.stub("cashier").Transfer(
        pb.TransferRequest(
            idempotency_key=f"fund-{uuid.uuid4().hex}",
            from_account_id="external:cashier",
            to_account_id=f"escrow:{table_id}:{player}",
            amount_gold=amount,
            kind="deposit",
            open_accounts=True,
        )
    )
    return reply.result


# --- reading the database directly ----------------------------------------------------------


@dataclass(frozen=True)
class JournalSnapshot:
    accounts: tuple[tuple[Any, ...], ...]
    transactions: int
    entries: int
    journal_head: int  # (the outbox itself drains concurrently: compare the journal instead)


def journal_snapshot(url: str) -> JournalSnapshot:
    with psycopg.connect(url) as conn:
        accounts = conn.execute(
            "select account_id, balance_gold, version from socai_ledger.accounts order by account_id"
        ).fetchall()
        (transactions,) = conn.execute("select count(*) from socai_ledger.transactions").fetchone() or (0,)
        (count,) = conn.execute("select count(*) from socai_ledger.entries").fetchone() or (0,)
        (head,) = conn.execute("select coalesce(max(journal_seq), 0) from socai_ledger.transactions").fetchone() or (0,)
    return JournalSnapshot(tuple(accounts), transactions, count, head)


def balances(url: str, account_ids: Sequence[str] | None = None) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("select account_id, balance_gold from socai_ledger.accounts").fetchall()
    found = dict(rows)
    return found if account_ids is None else {a: found.get(a, 0) for a in account_ids}
