"""Table service benchmark: Act round trips with 50 tables of bots playing at once.

The ledger and table services run as their own processes on embedded NATS and PostgreSQL
(fsync on every event: ``sync_interval: always``); the bots (``socai simulate``'s
Simulator) run in this process and time every Act call from request to response, which
covers the rules engine's validation, the JetStream append and its acknowledgement, and
whatever dealing follows the move. Reported: p99 (the fixed name), p50 and accepted
actions per second, all from the same run.
"""

from __future__ import annotations

import asyncio

from socai_table.simulate import SimConfig, Simulator
from tests.bench.harness import BenchContext, Result, percentile
from tests.bench.stack_support import stack

TABLES = 50


def run(ctx: BenchContext) -> list[Result]:
    tables = 10 if ctx.quick else TABLES
    hands = 2 if ctx.quick else 6
    with stack(ctx.workdir, ("ledger", "table")) as s:
        config = SimConfig(
            tables=tables,
            hands=hands,
            games=("holdem", "xito", "taixiu"),
            timeout_rate=0.0,
            seed=1,
            between_hands_ms=10,
        )

        async def play() -> object:
            sim = Simulator(s.resolved_settings(), config)
            try:
                return await sim.run()
            finally:
                await sim.close()

        result = asyncio.run(play())
    latencies = [ms for t in result.tables for ms in t.act_latency_ms]  # type: ignore[attr-defined]
    actions = len(latencies)
    params = {"tables": tables, "hands_per_table": hands, "games": list(config.games), "actions": actions}
    per_s = actions / result.elapsed_s  # type: ignore[attr-defined]
    return [
        Result("table.act_p99_ms_50_tables", percentile(latencies, 99), "ms", False, params=params),
        Result("table.act_p50_ms_50_tables", percentile(latencies, 50), "ms", False, params=params),
        Result("table.actions_per_s_50_tables", per_s, "actions/s", True, params=params),
    ]
