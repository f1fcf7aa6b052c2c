"""Every service serves Prometheus metrics with the named series after a short run."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest

from socai.infra.config import Settings
from socai_cli.stack import Stack
from socai_table.simulate import SimConfig, Simulator
from tests.support.stack import stack_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SERIES = {
    "ledger": [
        "socai_rpc_requests_total",
        "socai_rpc_latency_seconds",
        "socai_ledger_postings_total",
        "socai_ledger_outbox_lag",
    ],
    "table": ["socai_rpc_requests_total", "socai_rpc_latency_seconds", "socai_events_published_total"],
    "settlement": [
        "socai_rpc_requests_total",
        "socai_settlement_lag_messages",
        "socai_settlement_hands_settled_total",
        "socai_settlement_dead_letters_total",
        "socai_settlement_dead_letters_open",
    ],
}
OFFSET = {"ledger": 0, "table": 1, "settlement": 2}


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


def test_metrics_endpoints_expose_the_named_series(stack_var_dir: Path):
    settings = Settings.from_env(stack_env(stack_var_dir))
    stack = Stack(settings)
    try:
        stack.start()
        running = stack.resolved_settings()

        async def play() -> None:
            sim = Simulator(running, SimConfig(tables=2, hands=2, games=("holdem", "taixiu"), seed=3, timeout_rate=0))
            try:
                await sim.run()
            finally:
                await sim.close()

        asyncio.run(play())
        for service, names in SERIES.items():
            text = scrape(settings.metrics_port_base + OFFSET[service])
            declared = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
            for name in names:
                assert {name, name.removesuffix("_total")} & declared, f"{service} does not serve {name}"
        table_text = scrape(settings.metrics_port_base + 1)
        assert 'socai_events_published_total{game="holdem",type="HandEnded"}' in table_text
    finally:
        stack.stop()
