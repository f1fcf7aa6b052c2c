"""The setup the end-to-end tests share: a whole stack in this process, and the ``socai`` command.

Two shapes of end-to-end test use it:

- ``game_stack``: the ledger, table and settlement services, each built with its real
  ``build_app`` on free ports (``tests.support.services``), on the test's own stream and
  database. The test plays hands through the table's gRPC API as a game backend would
  (``GameStack.backend``) and reads the settlement API as the operator and the ledger as
  the auditor.
- ``settled_simulation``: simulated hands (``tests.support.synthetic``) published on the test's
  event log and settled by the real settlement and ledger services, waited for until every
  hand is settled.

Both run the ``socai`` command against the stack with ``socai(settings, ...)``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TypeVar

import grpc
from nats.aio.client import Client as NatsClient

from socai.events.log import EventLog
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.settlement.v1 import settlement_pb2_grpc as sgrpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai.infra.nats import StreamSpec
from tests.support.clients import Backend
from tests.support.services import Running, running
from tests.support.settlement import Harness, harness_for, test_settings, wait_for
from tests.support.synthetic import Simulation, fund, publish, simulate

# Deadlines only (every wait returns as soon as its condition holds), generous because the
# machine is shared: a ``socai`` command starts a Python process and may replay every hand.
SOCAI_TIMEOUT_S = 180.0
SETTLE_TIMEOUT_S = 60.0
WAIT_S = 30.0  # a hand played, settled or cashed out

T = TypeVar("T")


async def until(what: str, probe: Callable[[], Awaitable[T | None]], timeout_s: float = WAIT_S) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = await probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.05)


async def socai(settings: Settings, *args: str, timeout_s: float = SOCAI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run ``socai …`` as a command with the stack's settings in its environment; in a
    thread, so that this process's services keep answering the command."""
    env = {**os.environ, **settings.as_env(), "SOCAI_LOG_LEVEL": "warning"}
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "socai_cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


@dataclass
class GameStack:
    """The three services in this process and the clients a test drives them with."""

    running: Running
    backend: Backend
    settlement: sgrpc.SettlementServiceStub  # as the operator
    auditor: lgrpc.LedgerServiceStub  # the ledger, as the auditor
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    @property
    def settings(self) -> Settings:
        return self.running.settings

    @property
    def log(self) -> EventLog:
        """The table service's event log (the test's own stream)."""
        log: EventLog = self.running.apps["table"].manager.deps.log
        return log

    def channel(self, address: str, caller: str) -> grpc.aio.Channel:
        """A channel presenting ``caller``'s token, closed with the stack."""
        ch = channel(address, self.settings.tokens[caller])
        self.channels.append(ch)
        return ch

    async def socai(self, *args: str, timeout_s: float = SOCAI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """``socai …`` as an auditor or operator runs it: NATS as the auditor's user."""
        as_auditor = replace(self.settings, nats_url=self.running.nats_url_for("auditor"))
        return await socai(as_auditor, *args, timeout_s=timeout_s)

    async def settlement_of(self, hand_id: str) -> spb.Settlement | None:
        """The settlement record of ``hand_id``, or None while it is not settled."""
        try:
            reply = await self.settlement.GetSettlement(spb.GetSettlementRequest(hand_id=hand_id))
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        return reply.settlement

    async def settled(self, hand_id: str, timeout_s: float = SETTLE_TIMEOUT_S) -> spb.Settlement:
        """The settlement record of ``hand_id`` once it is settled (polled)."""
        found: list[spb.Settlement] = []

        async def ready() -> bool:
            record = await self.settlement_of(hand_id)
            if record is not None:
                found.append(record)
            return record is not None

        await wait_for(ready, timeout_s, f"hand {hand_id} to settle")
        return found[-1]


@asynccontextmanager
async def game_stack(nats_url: str, database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    """Ledger, table and settlement on ``database_url`` (migrated) and the test's own event
    and ledger-outbox streams, which are deleted afterwards."""
    settings = test_settings(nats_url, database_url, stream_spec)
    async with running(settings, ("ledger", "table", "settlement")) as r:
        backend = Backend(r.settings)
        chans = [
            channel(r.settings.settlement_addr, r.settings.tokens["operator"]),
            channel(r.settings.ledger_addr, r.settings.tokens["auditor"]),
        ]
        stack = GameStack(r, backend, sgrpc.SettlementServiceStub(chans[0]), lgrpc.LedgerServiceStub(chans[1]), chans)
        try:
            yield stack
        finally:
            await backend.close()
            for ch in stack.channels:
                await ch.close()
            await r.delete_streams(stream_spec.name, r.settings.ledger_stream)


@asynccontextmanager
async def settled_simulation(
    nats_url: str,
    database_url: str,
    stream_spec: StreamSpec,
    nats_client: NatsClient,
    *,
    hands: int,
    games: Sequence[str],
    seed: int,
    hands_per_table: int,
) -> AsyncIterator[tuple[Harness, Simulation]]:
    """``hands`` simulated hands of ``games`` (``simulate``), all settled through the real ledger;
    the ledger and settlement services keep running until the block ends."""
    async with harness_for(nats_url, database_url, stream_spec, nats_client) as h:
        sim = simulate(hands, tuple(games), seed=seed, hands_per_table=hands_per_table)
        await h.start_ledger()
        await fund(h.ledger("cashier"), sim)
        await h.start_settlement()
        await publish(h.log, sim)

        async def done() -> bool:
            return (await h.counts())[0] == len(sim.hands)

        await wait_for(done, SETTLE_TIMEOUT_S, "every hand to settle")
        yield h, sim
