"""`make run`'s main job, shorter: the whole stack, bots, settlement, audit, summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from socai.infra.embedded import free_port, port_is_free

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def stack_env(var_dir: Path) -> dict[str, str]:
    ports = {name: free_port() for name in ("nats", "pg", "ledger", "table", "settlement", "metrics")}
    env = {
        **os.environ,
        "SOCAI_VAR_DIR": str(var_dir),
        "SOCAI_NATS_PORT": str(ports["nats"]),
        "SOCAI_PG_PORT": str(ports["pg"]),
        "SOCAI_LEDGER_ADDR": f"127.0.0.1:{ports['ledger']}",
        "SOCAI_TABLE_ADDR": f"127.0.0.1:{ports['table']}",
        "SOCAI_SETTLEMENT_ADDR": f"127.0.0.1:{ports['settlement']}",
        "SOCAI_METRICS_PORT_BASE": str(ports["metrics"]),
        "SOCAI_LOG_LEVEL": "warning",
    }
    for key in ("SOCAI_NATS_URL", "SOCAI_DATABASE_URL"):
        env.pop(key, None)
    return env


def test_the_demo_plays_every_game_settles_audits_and_balances(tmp_path: Path):
    env = stack_env(tmp_path / "var")
    done = subprocess.run(
        [sys.executable, "-m", "socai.cli", "demo", "--tables-per-game", "1", "--hands", "3", "--seed", "5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "trial balance: 0 gold" in out
    assert "mismatches: none; the audit is clean" in out
    from socai.rules import registry

    for game in registry.available():
        assert any(line.startswith(game) for line in out.splitlines()), f"{game} missing from the summary:\n{out}"
    for key in ("SOCAI_NATS_PORT", "SOCAI_PG_PORT"):
        assert port_is_free(int(env[key]))  # the demo stopped what it started
