"""A private socai stack whose every part is a real process the harness may hurt.

``ProcessStack`` starts nats-server and PostgreSQL (the embedded binaries, data under its own
var directory, free ports), applies the migrations, provisions the streams and runs each
service as ``python -m socai_<name>`` with its own PostgreSQL role, exactly as ``socai up``
does (``socai_cli.stack.Stack``). On top of that it can SIGKILL, SIGSTOP/SIGCONT and
restart any service, restart NATS (SIGTERM or SIGKILL) and PostgreSQL (fast or immediate
shutdown) on the same data, read each service's Prometheus metrics and each process's RSS.
The chaos suite and the soak share it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import psutil

from socai.infra.config import Settings
from socai_cli.stack import (
    METRICS_PORT_STEP,
    SERVICES,
    Stack,
    clients_address,
    grpc_health,
    instance_address,
    instance_name,
    service_address,
)
from tests.support.stack import stack_env

METRICS_OFFSET = {"ledger": 0, "table": 1, "settlement": 2}


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text exposition as ``{"name{labels}": value}`` (comments skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out


def metric_sum(metrics: dict[str, float], name: str) -> float:
    """The sum of every series of ``name`` (all label sets)."""
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


def split_instance(name: str) -> tuple[str, int]:
    """``table-1`` → (``table``, 1); ``table`` → (``table``, 0)."""
    service, _, index = name.partition("-")
    return service, int(index or 0)


@dataclass
class ProcessStack:
    root: Path
    log_level: str = "warning"
    extra_env: dict[str, str] = field(default_factory=dict)
    stack: Stack | None = None
    settings: Settings | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, IO[bytes]] = field(default_factory=dict)
    stopped: set[str] = field(default_factory=set)  # services under SIGSTOP
    incidents: list[str] = field(default_factory=list)  # what went wrong outside the services
    # Processes per service at start (``table-1`` … are the others; a fault may start more).
    instances: dict[str, int] = field(default_factory=dict)
    # Instances a run will start in place of killed ones (the nemesis's replace_instance, per
    # service): clients dial their addresses from the start; one nothing listens at yet is
    # skipped by the clients' round robin. Only as many as planned: a spare address another
    # process happens to listen at would answer the clients.
    spare_instances: dict[str, int] = field(default_factory=dict)
    base: Settings | None = None  # the settings before the clients' multi-instance addresses
    # What ``checks.scan_stream`` has read of the event stream so far (a ``StreamScan``).
    scanned: Any = None

    # ---- whole stack ---------------------------------------------------------------

    def start_infra(self) -> None:
        """NATS, PostgreSQL, migrations and streams (blocking: run it before the loop or in a thread)."""
        if self.root.exists():
            self.reap_stale()
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        env = stack_env(self.root, self.log_level)
        # NATS: the services as their own users; the harness (leases, faults, scans) as its own.
        self.stack = Stack(Settings.from_env({**env, **self.extra_env}), nats_test_harness=True)
        self.stack.start_infra()
        self.base = self.stack.resolved_settings()
        # Clients (the bots, the checks) reach every instance of a service, round robin, and
        # the addresses the instances started in place of killed ones take (instance n
        # listens at the port of n, ``spare_instances``): as a Service routes to a
        # Deployment's new pods. Without them, once every first instance is replaced no
        # client reaches any table.
        self.settings = replace(
            self.base,
            table_addr=clients_address(self.base.table_addr, self.client_slots("table")),
            settlement_addr=clients_address(self.base.settlement_addr, self.client_slots("settlement")),
        )

    def client_slots(self, service: str) -> int:
        """How many instance addresses clients dial: the instances and the spare ones."""
        return self.instances.get(service, 1) + self.spare_instances.get(service, 0)

    def reap_stale(self) -> None:
        """SIGKILL services a crashed earlier run left behind on this root (the embedded
        servers reap their own through their pid files)."""
        marker = f"SOCAI_VAR_DIR={self.root}".encode()
        for line in (self.root / "services.pids").read_text().split() if (self.root / "services.pids").exists() else []:
            try:
                pid = int(line)
                if marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    os.kill(pid, signal.SIGKILL)
            except (ValueError, OSError):
                continue

    async def start(self) -> None:
        await asyncio.to_thread(self.start_infra)
        for name in SERVICES:
            # A service's instances at once (each takes seconds to import and to serve).
            await asyncio.gather(
                *(self.start_service(instance_name(name, i)) for i in range(self.instances.get(name, 1)))
            )

    async def stop(self) -> None:
        for name in reversed(list(self.procs)):
            if name in self.stopped:
                self.resume(name)
            await self.stop_service(name, signal.SIGTERM)
        if self.stack is not None:
            await asyncio.to_thread(self.stack.stop)

    # ---- services ------------------------------------------------------------------

    def service_env(self, name: str) -> dict[str, str]:
        assert self.stack is not None and self.settings is not None and self.base is not None
        service, instance = split_instance(name)
        env = {
            **os.environ,
            **self.settings.as_env(),
            "SOCAI_DATABASE_URL": self.stack.service_database_url(service),
            "SOCAI_LOG_FORMAT": "json",
            "SOCAI_LOG_LEVEL": self.log_level,
            **self.extra_env,
        }
        if instance or self.instances.get(service, 1) > 1:
            env["SOCAI_LISTEN_ADDR"] = instance_address(service_address(self.base, service), instance)
            env["SOCAI_METRICS_PORT_BASE"] = str(self.base.metrics_port_base + METRICS_PORT_STEP * instance)
            env["SOCAI_INSTANCE_ID"] = name
        return env

    def log_path(self, name: str) -> Path:
        return self.root / "log" / f"{name}.log"

    async def start_service(self, name: str, timeout_s: float = 60.0) -> float:
        """Start ``name`` and wait until its gRPC health says SERVING; the seconds it took."""
        started = time.monotonic()
        path = self.log_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        out = path.open("ab")
        self.logs[name] = out
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", f"socai_{split_instance(name)[0]}"],
            env=self.service_env(name),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        with (self.root / "services.pids").open("a") as pids:
            pids.write(f"{self.procs[name].pid}\n")
        await self.wait_serving(name, timeout_s)
        return time.monotonic() - started

    async def wait_serving(self, name: str, timeout_s: float = 60.0) -> None:
        assert self.base is not None
        service, instance = split_instance(name)
        address = instance_address(service_address(self.base, service), instance)
        deadline = time.monotonic() + timeout_s
        status = ""
        while time.monotonic() < deadline:
            proc = self.procs[name]
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}: {self.tail(name)}")
            status = await grpc_health(address, 1.0)
            if status == "SERVING":
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{name} not serving after {timeout_s}s ({status}): {self.tail(name)}")

    async def stop_service(self, name: str, sig: int) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 5)
        out = self.logs.pop(name, None)
        if out is not None:
            out.close()

    async def kill_and_restart(self, name: str) -> float:
        """SIGKILL ``name`` and start it again at once; the seconds until it serves."""
        await self.stop_service(name, signal.SIGKILL)
        return await self.start_service(name)

    def pause(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGSTOP)
        self.stopped.add(name)

    def resume(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGCONT)
        self.stopped.discard(name)

    def alive(self) -> dict[str, bool]:
        return {name: proc.poll() is None for name, proc in self.procs.items()}

    def exited(self) -> dict[str, int]:
        """Services that are no longer running, with their exit status."""
        return {name: rc for name, proc in self.procs.items() if (rc := proc.poll()) is not None}

    def tail(self, name: str, chars: int = 3000) -> str:
        try:
            return self.log_path(name).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # ---- NATS and PostgreSQL ---------------------------------------------------------

    async def restart_nats(self, sig: int, down_s: float = 0.0) -> float:
        """Stop nats-server with ``sig`` (SIGTERM: clean; SIGKILL: crash), keep it down
        ``down_s``, start it on the same store and port; the seconds it was unreachable."""
        assert self.stack is not None and self.stack.nats is not None
        nats = self.stack.nats
        began = time.monotonic()
        if nats.proc is not None:
            nats.proc.send_signal(sig)
            await asyncio.to_thread(nats.proc.wait, 30)
            nats.proc = None
        await asyncio.sleep(down_s)
        await asyncio.to_thread(nats.start)
        return time.monotonic() - began

    async def restart_postgres(self, mode: str, down_s: float = 0.0) -> float:
        """Stop PostgreSQL (``fast``: SIGINT, sessions aborted and a checkpoint; ``immediate``:
        SIGQUIT, crash recovery at the next start), start it again on the same data."""
        assert self.stack is not None and self.stack.postgres is not None
        pg = self.stack.postgres
        sig = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}[mode]
        began = time.monotonic()
        if pg.proc is not None:
            pg.proc.send_signal(sig)
            await asyncio.to_thread(pg.proc.wait, 60)
            pg.proc = None
        await asyncio.sleep(down_s)
        for attempt in range(1, 4):
            try:
                await asyncio.to_thread(pg.start)
                break
            except Exception as exc:
                rc = pg.proc.returncode if pg.proc is not None else None
                self.incidents.append(
                    f"postgres start {attempt} after a {mode} shutdown failed (exit {rc}): {str(exc)[-300:]}"
                )
                pg.proc = None
                if attempt == 3:
                    raise
                await asyncio.sleep(1.0)
        return time.monotonic() - began

    # ---- observation -----------------------------------------------------------------

    def metrics(self, name: str) -> dict[str, float]:
        """Service ``name``'s Prometheus metrics ({} when it does not answer); a service
        name (``table``) sums every instance that runs."""
        if "-" in name:
            return self._metrics_of(*split_instance(name))
        instances = [split_instance(n)[1] for n in self.procs if split_instance(n)[0] == name] or [0]
        total: dict[str, float] = {}
        for instance in instances:
            for key, value in self._metrics_of(name, instance).items():
                total[key] = total.get(key, 0.0) + value
        return total

    def _metrics_of(self, service: str, instance: int) -> dict[str, float]:
        assert self.base is not None
        port = self.base.metrics_port_base + METRICS_OFFSET[service] + METRICS_PORT_STEP * instance
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as reply:
                return parse_metrics(reply.read().decode())
        except OSError:
            return {}

    def pids(self) -> dict[str, int]:
        """Every process of the stack: the services (with their children, e.g. replay
        workers, counted under the service), nats-server and the postmaster."""
        assert self.stack is not None
        out = {name: proc.pid for name, proc in self.procs.items() if proc.poll() is None}
        if self.stack.nats is not None and self.stack.nats.proc is not None:
            out["nats"] = self.stack.nats.proc.pid
        if self.stack.postgres is not None and self.stack.postgres.proc is not None:
            out["postgres"] = self.stack.postgres.proc.pid
        return out

    def memory_mb(self) -> dict[str, dict[str, float]]:
        """Memory per component in MiB: ``rss`` of the component's own process and ``pss``
        of it with all its children (PostgreSQL's backends, settlement's replay workers),
        which counts shared pages once."""
        out: dict[str, dict[str, float]] = {}
        for name, pid in self.pids().items():
            try:
                proc = psutil.Process(pid)
                rss = proc.memory_info().rss
                pss = 0
                for member in [proc, *proc.children(recursive=True)]:
                    try:
                        pss += member.memory_full_info().pss
                    except psutil.Error:
                        pass
            except psutil.Error:
                continue
            out[name] = {"rss": round(rss / 2**20, 1), "pss_tree": round(pss / 2**20, 1)}
        return out
