"""PostgreSQL down and back: every RPC that needs it answers UNAVAILABLE, then works at once.

Issue 17, defect 4: while PostgreSQL was down the services answered INTERNAL, and for up to
23 s after it returned calls kept failing (each stale pooled connection once with
``AdminShutdown``, and psycopg_pool's reconnection back-off kept the pools empty). Here the
ledger, the table service and settlement run in this process against a private PostgreSQL
(and the session's NATS), and every RPC of theirs that needs the database is called:

1. after a restart nobody noticed (stopped and started again on the same data directory
   and port while no call ran): every pool holds connections that idled through it, and
   the first call of each RPC must work;
2. while PostgreSQL is down: each call, alone or among concurrent ones, must answer
   UNAVAILABLE (reason DATABASE_UNAVAILABLE) within seconds — never INTERNAL, UNKNOWN or a
   deadline;
3. once it is back: the first call of each RPC must work, a deposit refused during the
   outage included (retried under the same key, it is applied once), and so must a burst
   of concurrent calls.

Phase 1 begins with a burst of concurrent calls (many callers at once find the stale
connections), and phase 3 ends with one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from socai import accounts
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.settlement.v1 import settlement_pb2_grpc as sgrpc
from socai.gen.table.v1 import table_pb2 as tpb
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from socai.infra.nats import StreamSpec
from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedPostgres, free_port
from tests.support.clients import Backend
from tests.support.services import running, service_settings

pytestmark = [pytest.mark.fault, pytest.mark.slow]

CALL_DEADLINE_S = 20.0
# While PostgreSQL is down a call must say so promptly: a refused connection takes
# milliseconds, and nothing should queue for a pool's timeout first.
UNAVAILABLE_WITHIN_S = 5.0
BURST_PER_KIND = 12  # concurrent calls of each kind: the pools hold (and need) several connections
# Answers that are right for the calls below on a working database (a hand that was never
# played has no settlement, no dead letter and no events).
ANSWERED = (grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND)


@dataclass
class World:
    """What the calls act on: funded players, a table, the players seated at it."""

    table_id: str = ""
    funded: list[str] = field(default_factory=list)
    seated: list[str] = field(default_factory=list)
    deposit_key: str = ""
    deposit_tx: str = ""


@dataclass
class Callers:
    backend: Backend
    auditor_ledger: lgrpc.LedgerServiceStub
    settlement: sgrpc.SettlementServiceStub
    settlement_operator: sgrpc.SettlementServiceStub
    channels: list[Any]

    async def close(self) -> None:
        await self.backend.close()
        for ch in self.channels:
            await ch.close()


def callers(settings: Any) -> Callers:
    channels = [
        channel(settings.ledger_addr, settings.tokens["auditor"]),
        channel(settings.settlement_addr, settings.tokens["backend"]),
        channel(settings.settlement_addr, settings.tokens["operator"]),
    ]
    return Callers(
        backend=Backend(settings),
        auditor_ledger=lgrpc.LedgerServiceStub(channels[0]),
        settlement=sgrpc.SettlementServiceStub(channels[1]),
        settlement_operator=sgrpc.SettlementServiceStub(channels[2]),
        channels=channels,
    )


def database_calls(c: Callers, world: World, phase: int, deposit_key: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Every RPC that needs PostgreSQL, as a fresh call of phase ``phase`` (writes use keys and
    players of their own, so each phase's calls are new)."""
    b, d = c.backend, CALL_DEADLINE_S
    player = accounts.player(world.funded[0])
    newcomer = world.funded[len(world.seated) + phase]  # funded, not seated: joins in this phase
    leaver = world.seated[phase]  # seated before the phases began: leaves in this phase
    return {
        # ledger: the read pool
        "ledger.GetAccount": lambda: b.ledger.GetAccount(lpb.GetAccountRequest(account_id=player), timeout=d),
        "ledger.ListAccounts": lambda: b.ledger.ListAccounts(lpb.ListAccountsRequest(kind="player"), timeout=d),
        "ledger.GetTransaction": lambda: b.ledger.GetTransaction(
            lpb.GetTransactionRequest(idempotency_key=world.deposit_key), timeout=d
        ),
        "ledger.ListEntries": lambda: b.ledger.ListEntries(lpb.ListEntriesRequest(account_id=player), timeout=d),
        "ledger.GetBalanceAt": lambda: b.ledger.GetBalanceAt(
            lpb.GetBalanceAtRequest(account_id=player, transaction_id=world.deposit_tx), timeout=d
        ),
        "ledger.TrialBalance": lambda: c.auditor_ledger.TrialBalance(lpb.TrialBalanceRequest(), timeout=d),
        "ledger.VerifyJournal": lambda: c.auditor_ledger.VerifyJournal(lpb.VerifyJournalRequest(), timeout=d),
        "ledger.OpenAccount": lambda: b.cashier.OpenAccount(
            lpb.OpenAccountRequest(account_id=accounts.player(f"open{phase}{uuid.uuid4().hex[:8]}")), timeout=d
        ),
        # ledger: the write batcher
        "ledger.Deposit": lambda: b.cashier.Deposit(
            lpb.DepositRequest(idempotency_key=deposit_key, player_id=world.funded[0], amount_gold=7), timeout=d
        ),
        # table service
        "table.CreateTable": lambda: b.table.CreateTable(
            tpb.CreateTableRequest(config=tpb.TableConfig(game="holdem", stake_gold=100, seats_max=9)), timeout=d
        ),
        "table.JoinTable": lambda: b.join(world.table_id, newcomer, 1_000),
        "table.LeaveTable": lambda: b.leave(world.table_id, leaver),
        # settlement
        "settlement.GetSettlement": lambda: c.settlement.GetSettlement(
            spb.GetSettlementRequest(hand_id=f"nohand{phase}"), timeout=d
        ),
        "settlement.ListSettlements": lambda: c.settlement.ListSettlements(
            spb.ListSettlementsRequest(table_id=world.table_id), timeout=d
        ),
        "settlement.ListDeadLetters": lambda: c.settlement.ListDeadLetters(spb.ListDeadLettersRequest(), timeout=d),
        "settlement.ReplayHand": lambda: c.settlement.ReplayHand(
            spb.ReplayHandRequest(hand_id=f"nohand{phase}"), timeout=d
        ),
        "settlement.RetryDeadLetter": lambda: c.settlement_operator.RetryDeadLetter(
            spb.RetryDeadLetterRequest(hand_id=f"nohand{phase}"), timeout=d
        ),
    }


def burst_calls(c: Callers, world: World) -> list[Callable[[], Awaitable[Any]]]:
    """Concurrent calls of each pool and the write batcher (deposits under keys of their own)."""
    b, d = c.backend, CALL_DEADLINE_S
    player = accounts.player(world.funded[0])

    def deposit() -> Awaitable[Any]:
        key = f"burst{uuid.uuid4().hex}"
        return b.cashier.Deposit(
            lpb.DepositRequest(idempotency_key=key, player_id=world.funded[0], amount_gold=1), timeout=d
        )

    return [
        lambda: b.ledger.GetAccount(lpb.GetAccountRequest(account_id=player), timeout=d),
        deposit,
        lambda: b.table.CreateTable(
            tpb.CreateTableRequest(config=tpb.TableConfig(game="holdem", stake_gold=100, seats_max=9)), timeout=d
        ),
        lambda: c.settlement.ListSettlements(spb.ListSettlementsRequest(table_id=world.table_id), timeout=d),
    ] * BURST_PER_KIND


@dataclass(frozen=True)
class Answer:
    code: grpc.StatusCode
    reason: str
    seconds: float
    response: Any = None


async def call(fn: Callable[[], Awaitable[Any]]) -> Answer:
    started = time.monotonic()
    try:
        response = await fn()
    except grpc.aio.AioRpcError as exc:
        return Answer(exc.code(), error_reason(exc), time.monotonic() - started)
    return Answer(grpc.StatusCode.OK, "", time.monotonic() - started, response)


async def call_all(calls: dict[str, Callable[[], Awaitable[Any]]]) -> dict[str, Answer]:
    """Each call once, one after the other (each the first of its kind in this phase)."""
    return {name: await call(fn) for name, fn in calls.items()}


async def call_together(calls: list[Callable[[], Awaitable[Any]]]) -> dict[str, Answer]:
    answers = await asyncio.gather(*(call(fn) for fn in calls))
    return {f"burst call {n}": a for n, a in enumerate(answers)}


def not_answered(answers: dict[str, Answer]) -> dict[str, str]:
    return {
        name: f"{a.code.name} {a.reason} after {a.seconds:.2f}s"
        for name, a in answers.items()
        if a.code not in ANSWERED
    }


def not_unavailable(answers: dict[str, Answer]) -> dict[str, str]:
    """The answers that are not a prompt UNAVAILABLE / DATABASE_UNAVAILABLE."""
    return {
        name: f"{a.code.name} {a.reason} after {a.seconds:.2f}s"
        for name, a in answers.items()
        if a.code is not grpc.StatusCode.UNAVAILABLE
        or a.reason != "DATABASE_UNAVAILABLE"
        or a.seconds > UNAVAILABLE_WITHIN_S
    }


async def test_rpcs_answer_unavailable_while_postgres_is_down_and_work_as_soon_as_it_is_back(
    nats_url: str, stream_spec: StreamSpec, test_var_dir: Path
):
    pg = EmbeddedPostgres(test_var_dir / f"pg-outage-{uuid.uuid4().hex[:8]}", port=free_port(), database="socai")
    pg.start()
    try:
        migrate.upgrade_all(pg.url)
        settings = service_settings(nats_url, pg.url, stream_spec)
        async with running(settings, ("ledger", "table", "settlement")) as r:
            c = callers(r.settings)
            try:
                world = World()
                world.funded = [f"p{n}{uuid.uuid4().hex[:6]}" for n in range(6)]
                for player in world.funded:
                    await c.backend.deposit(player, 100_000)
                world.deposit_key = f"seed{uuid.uuid4().hex}"
                seed = await c.backend.cashier.Deposit(
                    lpb.DepositRequest(idempotency_key=world.deposit_key, player_id=world.funded[0], amount_gold=5)
                )
                world.deposit_tx = seed.result.transaction.transaction_id
                # No auto-start: no hand runs, so leaving stands up at once.
                world.table_id = await c.backend.create("holdem", stake_gold=100, seats_max=9)
                for player in world.funded[:2]:
                    await c.backend.join(world.table_id, player, 1_000)
                world.seated = world.funded[:2]

                async def warm() -> None:
                    """Every pool holds connections: each RPC once, and a burst of calls."""
                    calls = database_calls(c, world, 0, f"warm{uuid.uuid4().hex}")
                    del calls["table.JoinTable"], calls["table.LeaveTable"]  # the phases' own players
                    assert not_answered(await call_all(calls)) == {}
                    assert not_answered(await call_together(burst_calls(c, world))) == {}

                await warm()

                # 1. A restart nobody noticed: the pools are full of connections it killed.
                await asyncio.to_thread(pg.stop)
                await asyncio.to_thread(pg.start)
                assert not_answered(await call_together(burst_calls(c, world))) == {}, "a burst after a restart"
                after_restart = await call_all(database_calls(c, world, 0, f"restart{uuid.uuid4().hex}"))
                assert not_answered(after_restart) == {}, "calls failed after a restart"

                await warm()

                # 2. PostgreSQL down: UNAVAILABLE, promptly, from every RPC that needs it.
                outage_key = f"outage{uuid.uuid4().hex}"
                await asyncio.to_thread(pg.stop)
                down = await call_all(database_calls(c, world, 1, outage_key))
                assert not_unavailable(down) == {}, "while PostgreSQL was down"
                together = await call_together(burst_calls(c, world))
                assert not_unavailable(together) == {}, "a burst while PostgreSQL was down"
                # The table itself still answers; the refused leave left its player seated.
                state = await c.backend.state(world.table_id)
                assert world.seated[1] in {seat.player_id for seat in state.table.seats}

                # 3. Back on the same data directory and port: the first calls work.
                await asyncio.to_thread(pg.start)
                back = await call_all(database_calls(c, world, 1, outage_key))
                assert not_answered(back) == {}, "calls failed after PostgreSQL came back"
                assert not_answered(await call_together(burst_calls(c, world))) == {}, "a burst after the outage"
                deposit = back["ledger.Deposit"].response
                assert deposit.result.status == lpb.POST_STATUS_APPLIED  # refused during the outage: never written
                assert back["table.LeaveTable"].response.cashed_out
                report = await c.auditor_ledger.VerifyJournal(lpb.VerifyJournalRequest())
                assert report.ok, report.mismatches
            finally:
                await c.close()
    finally:
        pg.stop()
