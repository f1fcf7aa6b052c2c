"""The embedded nats-server and PostgreSQL: data reused across runs, clear errors."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import psycopg
import pytest

from socai import errors
from socai.infra.nats import StreamSpec, connect, ensure_stream, publish
from socai.infra.nats_auth import TEST_HARNESS
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port, port_is_free

pytestmark = pytest.mark.integration


def test_postgres_keeps_its_data_across_restarts(tmp_path: Path):
    server = EmbeddedPostgres(tmp_path / "pg", port=free_port())
    server.start()
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("create table kept (n int)")
            conn.execute("insert into kept values (42)")
    finally:
        server.stop()
    assert port_is_free(server.port)
    server.start()
    try:
        with psycopg.connect(server.url) as conn:
            assert conn.execute("select n from kept").fetchone() == (42,)
    finally:
        server.stop()


def test_nats_keeps_its_streams_across_restarts(tmp_path: Path):
    server = EmbeddedNats(tmp_path / "nats", port=free_port(), test_harness=True)
    spec = StreamSpec(name="KEPT", subjects=("kept.>",))

    async def write() -> None:
        nc = await connect(server.url_for(TEST_HARNESS), name="t")
        js = nc.jetstream()
        await ensure_stream(js, spec)
        await publish(js, "kept.a", b"1", msg_id="a1")
        await nc.close()

    async def count() -> int:
        nc = await connect(server.url_for(TEST_HARNESS), name="t")  # the same passwords after a restart
        info = await nc.jetstream().stream_info("KEPT")
        await nc.close()
        return int(info.state.messages)

    server.start()
    try:
        asyncio.run(write())
    finally:
        server.stop()
    server.start()
    try:
        assert asyncio.run(count()) == 1
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["nats", "postgres"])
def test_a_taken_port_is_a_clear_error(tmp_path: Path, kind: str):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        server = EmbeddedNats(tmp_path, port=port) if kind == "nats" else EmbeddedPostgres(tmp_path, port=port)
        with pytest.raises(errors.Unavailable) as caught:
            server.start()
    assert caught.value.code == "PORT_IN_USE"
    assert str(port) in caught.value.message


def test_a_data_directory_of_another_postgres_version_is_refused(tmp_path: Path):
    data = tmp_path / "pg" / "data"
    data.mkdir(parents=True)
    (data / "PG_VERSION").write_text("9\n")
    with pytest.raises(errors.PreconditionFailed) as caught:
        EmbeddedPostgres(tmp_path / "pg", port=free_port()).start()
    assert caught.value.code == "POSTGRES_DATA_INCOMPATIBLE"
    assert (data / "PG_VERSION").read_text() == "9\n"  # nothing was touched


async def test_the_server_runs_as_its_user_and_starts_while_grpc_is_busy_in_this_process(tmp_path: Path):
    """A PostgreSQL restart in a process serving gRPC (a test, the chaos harness, ``socai
    up``) failed with "postgres exited" and nothing in its log: ``subprocess``'s ``user=``
    forks, and gRPC's at-fork handlers crashed the child before its exec (121 of 300 forks
    under load). ``as_user`` starts the child by vfork and drops to the user in it."""
    import os
    import pwd
    import subprocess

    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    from socai_cli.embedded import PG_SYSTEM_USER, as_user

    user = PG_SYSTEM_USER if os.geteuid() == 0 else None  # only root switches users
    if user is not None:
        EmbeddedPostgres(tmp_path)._user()  # makes the system user when missing
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    stop = asyncio.Event()

    async def busy(stub: health_pb2_grpc.HealthStub) -> None:
        while not stop.is_set():
            await stub.Check(health_pb2.HealthCheckRequest())

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        load = [asyncio.create_task(busy(health_pb2_grpc.HealthStub(ch))) for _ in range(8)]

        def run_many() -> list[tuple[int, str]]:
            return [
                (done.returncode, done.stdout.strip())
                for done in (
                    subprocess.run(as_user(["/usr/bin/id", "-u"], user), capture_output=True, text=True)
                    for _ in range(100)
                )
            ]

        try:
            outcomes = await asyncio.to_thread(run_many)
        finally:
            stop.set()
            await asyncio.gather(*load, return_exceptions=True)
            await server.stop(None)
    uid = str(pwd.getpwnam(user).pw_uid if user else os.geteuid())
    assert outcomes == [(0, uid)] * 100
