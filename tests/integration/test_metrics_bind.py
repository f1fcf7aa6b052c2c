"""A service's Prometheus endpoint (no authentication) listens where its gRPC listens (issue
27, item 5): a ledger process told to listen on loopback (``SOCAI_LISTEN_ADDR=127.0.0.1:…``,
as ``socai up --table-instances`` does for every instance) serves its metrics on loopback
too, not on every interface; ``SOCAI_METRICS_HOST`` widens it on purpose.

Every address in 127.0.0.0/8 reaches a socket bound to 0.0.0.0 on Linux, but only 127.0.0.1
reaches one bound to 127.0.0.1: 127.0.0.2 tells the two apart without a second interface.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from socai.infra.config import Settings
from socai_cli.embedded import free_port
from socai_cli.stack import grpc_health
from tests.integration.ledger.conftest import ledger_settings

pytestmark = pytest.mark.integration


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def ledger_process(settings: Settings, log_path: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    full = {**os.environ, **settings.as_env(), **env}
    full.pop("SOCAI_SERVICE_TOKEN", None)
    with log_path.open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "socai_ledger"], env=full, stdout=log, stderr=log)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def serving(proc: subprocess.Popen[bytes], address: str, log_path: Path) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError(f"the ledger exited: {log_path.read_text()[-3000:]}")
        if await grpc_health(address, 0.5) == "SERVING":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the ledger did not start: {log_path.read_text()[-3000:]}")


@pytest.mark.parametrize(("metrics_host", "reachable_elsewhere"), [(None, False), ("0.0.0.0", True)])
async def test_the_metrics_endpoint_listens_where_grpc_listens_unless_told_otherwise(
    nats_url: str, migrated_database_url: str, tmp_path: Path, metrics_host: str | None, reachable_elsewhere: bool
) -> None:
    grpc_address = f"127.0.0.1:{free_port()}"
    metrics_port = free_port()
    settings = replace(
        ledger_settings(nats_url, migrated_database_url),
        ledger_addr="127.0.0.1:50999",  # what others dial; it listens on SOCAI_LISTEN_ADDR
        listen_addr=grpc_address,
        metrics_port_base=metrics_port,
        metrics_host=metrics_host,
        log_format="json",
    )
    log_path = tmp_path / "ledger.log"
    with ledger_process(settings, log_path) as proc:
        await serving(proc, grpc_address, log_path)
        assert answers("127.0.0.1", metrics_port)
        assert answers("127.0.0.2", metrics_port) is reachable_elsewhere
        # gRPC itself, for comparison: loopback only.
        assert not answers("127.0.0.2", int(grpc_address.rsplit(":", 1)[1]))
