"""Service logs rotate by size, and a crash's output follows the rotation (issue 17, logs)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from socai.infra.config import Settings
from socai.infra.logging import RotatingLog

# Run in a child process: rotation moves descriptors 1 and 2, which pytest's own capture uses.
CHILD = textwrap.dedent(
    """
    import os, sys
    from socai.infra.logging import configure, get_logger
    configure(fmt="json", level="info", log_file=sys.argv[1], max_bytes=4000, backups=3)
    log = get_logger("t")
    for i in range(400):
        log.info("line", i=i, pad="x" * 40)
    print("printed after rotating", flush=True)
    os.write(2, b"raw stderr after rotating\\n")
    raise SystemExit("a crash message")
    """
)


def test_the_log_rotates_by_size_keeps_its_backups_and_takes_stdout_and_stderr_along(tmp_path: Path) -> None:
    path = tmp_path / "svc.log"
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=False)
    assert out.returncode == 1
    assert out.stdout == "" and out.stderr == ""  # everything went to the file
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["svc.log", "svc.log.1", "svc.log.2", "svc.log.3"]
    for name in files:
        assert (tmp_path / name).stat().st_size <= 4000
    current = path.read_text()
    assert "printed after rotating" in current
    assert "raw stderr after rotating" in current
    assert "a crash message" in current
    # the backups hold the newest lines before the current file, in order, none lost among them
    numbers = []
    for name in ["svc.log.3", "svc.log.2", "svc.log.1", "svc.log"]:
        for line in (tmp_path / name).read_text().splitlines():
            if line.startswith("{"):
                numbers.append(json.loads(line)["i"])
    assert numbers == list(range(numbers[0], 400))
    assert numbers[0] > 0  # older lines were dropped with the oldest file


def test_a_rotating_log_refuses_a_useless_configuration(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        RotatingLog(tmp_path / "x.log", 0, 3, take_std=False)
    with pytest.raises(ValueError):
        RotatingLog(tmp_path / "x.log", 100, 0, take_std=False)


def test_log_settings_come_from_the_environment_and_reach_child_processes() -> None:
    s = Settings.from_env({"SOCAI_LOG_FILE": "/tmp/a.log", "SOCAI_LOG_MAX_BYTES": "1000", "SOCAI_LOG_BACKUPS": "2"})
    assert (s.log_file, s.log_max_bytes, s.log_backups) == ("/tmp/a.log", 1000, 2)
    env = s.as_env()
    assert (env["SOCAI_LOG_MAX_BYTES"], env["SOCAI_LOG_BACKUPS"]) == ("1000", "2")
    assert "SOCAI_LOG_FILE" not in env  # one file per process: the launcher names it
    assert Settings.from_env({}).log_file is None
