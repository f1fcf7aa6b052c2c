"""`make run`'s main job, shorter: the whole stack, bots, settlement, audit, summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from socai_cli.embedded import port_is_free
from tests.support.stack import stack_env

# Serial: five processes and bots of every game, with the stack's 30 s bound on each service's
# start (apps/socai_cli/stack.py), which a machine shared with other tests can overrun. Heavy
# (~37 s alone): make test-heavy runs it, in CI after make test.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.serial, pytest.mark.heavy]


def test_the_demo_plays_every_game_on_two_table_and_two_settlement_instances(stack_var_dir: Path):
    """One stack for both of the demo's shapes: every game (its summary line each), and the
    scaled-out layout (two table and two settlement instances on 4 partitions), since the
    scaled-out run checks all that a single-instance run does."""
    var = stack_var_dir
    env = {**stack_env(var, log_level="info"), "SOCAI_EVENT_PARTITIONS": "4"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "socai_cli.main",
            "demo",
            "--tables-per-game",
            "1",
            "--hands",
            "3",
            "--seed",
            "5",
            "--table-instances",
            "2",
            "--settlement-instances",
            "2",
        ],
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
    # Both table instances ran (each its own process and log) and held partitions.
    for name in ("table", "table-1"):
        log = (var / "log" / f"{name}.log").read_text()
        assert "table_partition_acquired" in log, f"{name} never held a partition:\n{log[-3000:]}"
    for key in ("SOCAI_NATS_PORT", "SOCAI_PG_PORT"):
        assert port_is_free(int(env[key]))  # the demo stopped what it started
