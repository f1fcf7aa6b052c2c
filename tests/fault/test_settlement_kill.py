"""Settlement killed with SIGKILL in the middle of draining, then restarted: every hand is
posted exactly once and none is missing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from nats.aio.client import Client as NatsClient

from socai.infra.config import Settings
from socai.infra.db import libpq_url
from socai.infra.nats import StreamSpec
from socai_cli.stack import grpc_health
from tests.support.settlement import Harness, harness_for
from tests.support.synthetic import fund, publish, simulate

pytestmark = [pytest.mark.fault, pytest.mark.slow]

HANDS = 600
POST_BATCH = 20  # many small batches, so that the kill lands in the middle of one


def settled_count(settings: Settings) -> int:
    with psycopg.connect(libpq_url(settings.database_url or "")) as conn:
        row = conn.execute('select count(*) from "socai_settlement".settlements').fetchone()
    return int(row[0]) if row else 0


async def start_settlement(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **settings.as_env(),
        "SOCAI_LOG_FORMAT": "json",
        "SOCAI_SETTLEMENT_POST_BATCH": str(POST_BATCH),
        # A restarted instance (a new id) waits for the killed one's lease to expire: 2 s, not 10.
        "SOCAI_SETTLEMENT_LEASE_TTL_S": "2",
        "SOCAI_SETTLEMENT_FETCH_BATCH": "200",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "socai_settlement"], env=env, stdout=log_path.open("ab"), stderr=subprocess.STDOUT
    )
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError(f"settlement exited: {log_path.read_text()[-3000:]}")
        if await grpc_health(settings.settlement_addr, 0.5) == "SERVING":
            return proc
        await asyncio.sleep(0.1)
    proc.kill()
    raise AssertionError(f"settlement did not start: {log_path.read_text()[-3000:]}")


@pytest.fixture
async def harness(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[Harness]:
    async with harness_for(nats_url, migrated_database_url, stream_spec, nats_client) as h:
        yield h


async def test_a_settlement_killed_mid_batch_posts_every_hand_exactly_once_after_restart(
    harness: Harness, tmp_path: Path
) -> None:
    sim = simulate(HANDS, ("holdem", "xito", "taixiu"), seed=600)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await publish(harness.log, sim, concurrency=64)
    settings = replace(harness.settings, metrics_port_base=0)
    log_path = tmp_path / "settlement.log"

    proc = await start_settlement(settings, log_path)
    try:
        for _ in range(600):  # kill it once a fair part is settled, mid-stream
            if settled_count(settings) >= HANDS // 4:
                break
            await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        at_kill = settled_count(settings)
        assert HANDS // 4 <= at_kill < HANDS, at_kill

        # The restarted service first settles, from the stream, the HandEnded messages the
        # killed one held unacked, so that every table's hands still reach the ledger in
        # order (without waiting for their redelivery, see test_settlement_restarts).
        proc = await start_settlement(settings, log_path)
        for _ in range(1800):
            if settled_count(settings) == HANDS:
                break
            await asyncio.sleep(0.05)
        assert settled_count(settings) == HANDS
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)

    # Exactly once: each hand has its one transaction, with the engine's entries, and every
    # escrow holds exactly its buy-in plus its hands (a hand posted twice under any key, or
    # lost, would show here).
    for hand in sim.hands:
        tx = await harness.transaction(f"settle:{hand.hand_id}")
        entries = hand.settlement.entries()
        assert (tx is None) == (not entries), hand.hand_id
        if tx is not None:
            assert {e.account_id: e.amount_gold for e in tx.entries} == entries
    for account, expected in sim.expected_balances().items():
        if account.startswith("escrow:"):
            assert await harness.balance(account) == expected, account
    with psycopg.connect(libpq_url(settings.database_url or "")) as conn:
        dead = conn.execute('select count(*) from "socai_settlement".dead_letters').fetchone()
    assert dead is not None and dead[0] == 0
    log_text = log_path.read_text()
    assert log_text.count("settlement_started") == 2
    assert "outstanding_settled" in log_text
    assert "awaiting_redeliveries" not in log_text
