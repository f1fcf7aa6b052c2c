"""`socai up` starts everything in the foreground and stops cleanly on SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from socai_cli.embedded import port_is_free
from tests.support.stack import stack_env

# Heavy (~32 s alone): make test-heavy runs it, in CI after make test.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.heavy]

SOCAI = [sys.executable, "-m", "socai_cli.main"]


def test_socai_up_starts_everything_and_stops_cleanly_on_sigint(stack_var_dir: Path):
    env = stack_env(stack_var_dir, log_level="info")
    ports = {k: int(v.rsplit(":", 1)[-1]) for k, v in env.items() if k.endswith(("_PORT", "_ADDR"))}
    up = subprocess.Popen([*SOCAI, "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    try:
        deadline = time.monotonic() + 120
        assert up.stdout is not None
        while time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line:
                break
            output.append(line)
            if line.startswith("socai is up"):
                break
        assert any(line.startswith("socai is up") for line in output), "".join(output)
        status = subprocess.run([*SOCAI, "status"], env=env, capture_output=True, text=True, timeout=60)
        rows = {line.split()[0]: line.split()[1] for line in status.stdout.splitlines() if line.strip()}
        assert rows["nats"] == "up", status.stdout
        assert rows["postgres"] == "up", status.stdout
        for service in ("ledger", "table", "settlement"):
            built = (Path(__file__).resolve().parents[2] / "services" / f"socai_{service}" / "__main__.py").exists()
            assert rows[service] == ("up" if built else "DOWN"), status.stdout
        assert status.returncode == (0 if rows["ledger"] == rows["table"] == rows["settlement"] == "up" else 1)
    finally:
        up.send_signal(signal.SIGINT)
        rest, _ = up.communicate(timeout=60)
        output.append(rest)
    assert up.returncode == 0, "".join(output)
    assert "stopped" in "".join(output)
    for port in ports.values():
        assert port_is_free(port), f"port {port} still taken after socai up stopped"
