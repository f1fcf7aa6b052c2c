"""`socai simulate` against a stack whose table service goes away (issue 17).

Everything runs as its own process: embedded NATS and PostgreSQL, the ledger and table
services (`socai_cli.stack.Stack`), and `socai simulate` itself. Killed with SIGKILL and
started again mid-run, the table service must not stop the bots: they retry, open their
streams again and finish their hands. Stopped for good (SIGSTOP), it must not be hidden:
every table is reported frozen and the exit status is 1.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from socai.infra.config import Settings
from socai.infra.service import METRICS_OFFSET
from socai_cli.stack import Stack
from tests.chaos.stack import metric_sum, parse_metrics
from tests.support.ports import free_port
from tests.support.stack import metrics_base

# heavy: ~32 s for the two, alone in the serial group; make test-heavy runs them (CI, after make test).
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.fault, pytest.mark.heavy]

SOCAI = [sys.executable, "-m", "socai_cli.main"]
START_TIMEOUT_S = 90.0  # a loaded machine starts a service slowly


@pytest.fixture
def stack(stack_var_dir: Path) -> Iterator[Stack]:
    settings = Settings(
        var_dir=stack_var_dir,
        nats_port=free_port(),
        pg_port=free_port(),
        ledger_addr=f"127.0.0.1:{free_port()}",
        table_addr=f"127.0.0.1:{free_port()}",
        settlement_addr=f"127.0.0.1:{free_port()}",
        log_level="warning",
    )
    s = Stack(replace(settings, metrics_port_base=metrics_base()))
    try:
        s.start_infra()
        s.start_service("ledger", timeout_s=START_TIMEOUT_S)
        s.start_service("table", timeout_s=START_TIMEOUT_S)
        yield s
    finally:
        s.stop()


def hands_ended(s: Stack) -> float:
    """The running table process's ``socai_table_hands_ended_total`` (0 when it does not answer)."""
    port = s.resolved_settings().metrics_port_base + METRICS_OFFSET["table"]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return metric_sum(parse_metrics(reply.read().decode()), "socai_table_hands_ended_total")
    except OSError:
        return 0.0


def simulate(s: Stack, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, **s.resolved_settings().as_env()}
    return subprocess.Popen(
        [*SOCAI, "simulate", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def wait_for_hands(s: Stack, sim: subprocess.Popen[str], hands: int, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while hands_ended(s) < hands:
        if sim.poll() is not None:
            raise AssertionError(f"socai simulate ended early:\n{sim.communicate()[0]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {hands} hands ended in {timeout_s} s")
        time.sleep(0.5)


def finish(sim: subprocess.Popen[str], timeout_s: float) -> str:
    try:
        out, _ = sim.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        sim.kill()
        out, _ = sim.communicate()
        raise AssertionError(f"socai simulate did not finish in {timeout_s} s:\n{out}") from None
    return out


def test_simulate_finishes_its_hands_across_a_table_service_restart(stack: Stack):
    tables, hands = 3, 8
    sim = simulate(
        stack,
        *("--tables", str(tables), "--hands", str(hands), "--games", "holdem,xito,taixiu"),
        *("--timeout-rate", "0", "--seed", "5", "--frozen-after-s", "120"),
    )
    try:
        wait_for_hands(stack, sim, 3)
        stack.stop_service("table", signal.SIGKILL)
        stack.start_service("table", timeout_s=START_TIMEOUT_S)
        out = finish(sim, 400)
        after_restart = hands_ended(stack)  # counted by the new process only
    finally:
        if sim.poll() is None:
            sim.kill()
    assert sim.returncode == 0, out
    assert "Traceback" not in out, out
    assert "FROZEN" not in out and "FAILED" not in out, out
    # The bots noticed the restart and came back through it …
    assert re.search(
        r"the table service went away: \d+ calls retried, [1-9]\d* WatchTable streams opened again", out
    ), out
    # … and the tables played on after it: each finished its hands, or its bots went broke.
    assert after_restart > 0, out
    played = int(re.search(r"played (\d+) hands", out)[1])  # type: ignore[index]
    early = re.search(r"(\d+) tables ended early", out)
    assert played == tables * hands or early is not None, out


def test_simulate_reports_every_frozen_table_and_exits_1(stack: Stack):
    # Tài Xỉu (one table against the house, one with a banker): its bots rarely go broke,
    # so the tables are still playing when the service stops.
    sim = simulate(
        stack,
        *("--tables", "2", "--hands", "1000", "--games", "taixiu"),
        *("--timeout-rate", "0", "--seed", "3", "--frozen-after-s", "8"),
    )
    table = stack.procs["table"]
    try:
        wait_for_hands(stack, sim, 4)
        assert sim.poll() is None
        table.send_signal(signal.SIGSTOP)  # the service holds its connections and answers nothing
        out = finish(sim, 120)
    finally:
        table.send_signal(signal.SIGCONT)
        if sim.poll() is None:
            sim.kill()
    assert sim.returncode == 1, out
    assert "Traceback" not in out, out
    frozen = [line for line in out.splitlines() if line.startswith("FROZEN ")]
    early = re.search(r"tables ended early \(too few bots left with chips\): (.*)", out)
    still_playing = 2 - (len(early[1].split(", ")) if early else 0)
    assert still_playing > 0, out
    assert len(frozen) == still_playing, out  # every table still playing when the service stopped
    assert all("no hand started for 8 s" in line for line in frozen), out
