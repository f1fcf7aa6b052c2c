"""A whole socai stack for benchmarks: embedded NATS and PostgreSQL under the benchmark's
work directory, the services as their own processes (as in production), free ports."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from socai.infra.config import Settings
from socai_cli.embedded import free_port
from socai_cli.stack import Stack


def bench_settings(workdir: Path) -> Settings:
    return Settings(
        var_dir=workdir / "var",
        nats_port=free_port(),
        pg_port=free_port(),
        ledger_addr=f"127.0.0.1:{free_port()}",
        table_addr=f"127.0.0.1:{free_port()}",
        settlement_addr=f"127.0.0.1:{free_port()}",
        metrics_port_base=free_port(),
        log_level="warning",
    )


@contextmanager
def stack(workdir: Path, services: Sequence[str]) -> Iterator[Stack]:
    """Fresh data (the directory is emptied first), the given services started in order."""
    import shutil

    shutil.rmtree(workdir / "var", ignore_errors=True)
    s = Stack(bench_settings(workdir))
    try:
        s.start_infra()
        for name in services:
            s.start_service(name)
        yield s
    finally:
        s.stop()
