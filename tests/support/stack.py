"""The environment of a whole socai stack of its own: a var directory and free ports
(``tests.support.ports``)."""

from __future__ import annotations

import os
from pathlib import Path

from socai.infra.service import METRICS_OFFSET
from tests.support.ports import free_port, free_ports


def metrics_base() -> int:
    """A base port whose whole block of metrics ports (base + each service's offset) is free:
    tests read these ports, so base + 1 must not be, say, the NATS port."""
    return free_ports(max(METRICS_OFFSET.values()) + 1)


def stack_env(var_dir: Path, log_level: str = "warning") -> dict[str, str]:
    """``os.environ`` plus SOCAI_* settings for a stack under ``var_dir`` on free ports,
    with embedded NATS and PostgreSQL (any configured URLs are removed)."""
    ports = {name: free_port() for name in ("nats", "pg", "ledger", "table", "settlement")}
    ports["metrics"] = metrics_base()
    env = {
        **os.environ,
        "SOCAI_VAR_DIR": str(var_dir),
        "SOCAI_NATS_PORT": str(ports["nats"]),
        "SOCAI_PG_PORT": str(ports["pg"]),
        "SOCAI_LEDGER_ADDR": f"127.0.0.1:{ports['ledger']}",
        "SOCAI_TABLE_ADDR": f"127.0.0.1:{ports['table']}",
        "SOCAI_SETTLEMENT_ADDR": f"127.0.0.1:{ports['settlement']}",
        "SOCAI_METRICS_PORT_BASE": str(ports["metrics"]),
        "SOCAI_LOG_LEVEL": log_level,
    }
    for key in ("SOCAI_NATS_URL", "SOCAI_DATABASE_URL"):
        env.pop(key, None)
    return env
