"""End-to-end latency with the real table service: HandEnded published → ledger committed.

``settlement.e2e_p99_ms_100_tables`` (ms, lower is better): the ledger, table and
settlement services run as their own processes on embedded NATS and PostgreSQL; 100
tables of bots (``socai simulate``'s Simulator, all available games) play through the
table's gRPC API while settlement runs. For every hand, the latency is its ledger
transaction's ``created_at`` minus its HandEnded ``occurred_at`` (stamped by the table
service when it publishes). p50 is reported beside it from the same run.

``settlement.e2e_p99_ms_100_tables_steady``: the p99 of the hands that ended once every
table's bots were funded and seated. The setup (100 tables opened at once, two ledger
calls a bot: its deposit and its buy-in) runs while the first tables already play, and
the first hands' settlements wait behind it in the ledger (its log showed Deposit and
PostTransactions calls at 300-580 ms then): the whole run's p99 is mostly those hands.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from socai.rules import registry
from socai_table.simulate import SimConfig, Simulator
from tests.bench.bench_settlement import hand_latencies
from tests.bench.harness import BenchContext, Result, percentile
from tests.bench.stack_support import stack

TABLES = 100
SETTLE_WAIT_S = 120.0


def run(ctx: BenchContext) -> list[Result]:
    tables = 20 if ctx.quick else TABLES
    hands = 2 if ctx.quick else 4
    with stack(ctx.workdir, ("ledger", "table", "settlement")) as s:
        settings = s.resolved_settings()
        config = SimConfig(
            tables=tables, hands=hands, games=registry.available(), timeout_rate=0.0, seed=4, between_hands_ms=20
        )

        async def play() -> tuple[list[tuple[datetime, float]], float, float]:
            sim = Simulator(settings, config)
            started = time.time()
            try:
                played = await sim.run()
            finally:
                await sim.close()
            seated = max(t.seated_at for t in played.tables)
            deadline = time.monotonic() + SETTLE_WAIT_S
            latencies = await hand_latencies(settings)
            while time.monotonic() < deadline:
                await asyncio.sleep(2.0)
                again = await hand_latencies(settings)
                if len(again) == len(latencies):
                    break  # nothing new settled in the last pause: every hand is in
                latencies = again
            return latencies, started, seated

        latencies, started, seated = asyncio.run(play())
    every = [ms for _, ms in latencies]
    steady = [ms for ended, ms in latencies if ended.timestamp() >= seated]
    params = {"tables": tables, "hands_per_table": hands, "games": list(config.games), "hands_measured": len(every)}
    steady_params = {
        **params,
        "hands_measured": len(steady),
        "setup_s": round(seated - started, 2),
        "of": "the hands that ended once every table's bots were funded and seated",
    }
    return [
        Result("settlement.e2e_p99_ms_100_tables", percentile(every, 99), "ms", False, params=params),
        Result("settlement.e2e_p50_ms_100_tables", percentile(every, 50), "ms", False, params=params),
        Result("settlement.e2e_p99_ms_100_tables_steady", percentile(steady, 99), "ms", False, params=steady_params),
    ]
