"""A service that cannot reach its database while it starts (the nemesis hour: a table
instance started while PostgreSQL restarted) exits with status 1 and one structured line
for its supervisor to start it again, not a Python traceback; a bug at start keeps its
traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import psycopg_pool
from socai.infra.service import run

async def build(settings):
    raise {error}

run("table", build)
"""


def start(error: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOCAI_LOG_FORMAT": "json", "SOCAI_METRICS_PORT_BASE": "0", "SOCAI_DEV_MODE": "1"}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(error=error)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_a_database_that_does_not_answer_at_start_is_exit_status_1_and_one_line():
    done = start('psycopg_pool.PoolTimeout("pool initialization incomplete after 30 sec")')
    assert done.returncode == 1, done.stderr
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    failed = [line for line in lines if line["event"] == "service_failed"]
    assert [(f["service"], f["code"], f["level"]) for f in failed] == [("table", "DATABASE_UNAVAILABLE", "error")]


def test_a_bug_at_start_keeps_its_traceback():
    done = start('KeyError("a bug")')
    assert done.returncode == 1 and "Traceback" in done.stderr and "KeyError" in done.stderr
