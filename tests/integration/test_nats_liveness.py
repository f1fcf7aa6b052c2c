"""The guard of ``socai.infra.nats_liveness``: the nats-py internals it uses exist with the
shape it uses, and on the pinned nats-py the failure it guards against happens as described.

A private nats-server per module (it is paused with SIGSTOP, which no other test may see).
The day a nats-py upgrade fixes the late PONG, ``test_on_the_pinned_nats_py_…_kills_the_read_loop``
fails: then ``harden`` can go (the watch stays: a read loop may die of other causes).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.client import Client as NatsClient

from socai.infra import nats_liveness
from socai.infra.nats import connect
from socai.infra.nats_auth import TEST_HARNESS
from socai.infra.nats_liveness import (
    PONG_OVERDUE,
    READ_LOOP_DEAD,
    RECOVERIES,
    ConnectionWatch,
    harden,
    read_loop_alive,
    round_trip,
)
from socai_cli.embedded import EmbeddedNats
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

PAUSE_CHECK_S = 10.0  # how long to wait for a paused server's answers to be read


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    nats_server = EmbeddedNats(tmp_path_factory.mktemp("liveness") / "nats", port=free_port(), test_harness=True)
    nats_server.start()
    try:
        yield nats_server
    finally:
        if nats_server.proc is not None:
            os.kill(nats_server.proc.pid, signal.SIGCONT)
        nats_server.stop()


def thread_state(pid: int, tid: str) -> str:
    """The state letter of one thread (``T``: stopped by a signal); "T" once it is gone."""
    try:
        return Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "T"


class Paused:
    """``with Paused(server):`` nats-server stopped (SIGSTOP) inside, continued after."""

    def __init__(self, server: EmbeddedNats) -> None:
        assert server.proc is not None
        self.pid = server.proc.pid

    def __enter__(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)
        # The signal takes a moment to stop every thread; a PING sent before then is answered.
        deadline = time.monotonic() + 5
        while not all(thread_state(self.pid, tid) in "tT" for tid in os.listdir(f"/proc/{self.pid}/task")):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGCONT)
                raise AssertionError("nats-server did not stop")
            time.sleep(0.001)

    def __exit__(self, *_: object) -> None:
        os.kill(self.pid, signal.SIGCONT)


@pytest.fixture
async def raw(server: EmbeddedNats) -> AsyncIterator[NatsClient]:
    """A plain nats-py client: not hardened."""
    nc = await nats.connect(
        server.url_for(TEST_HARNESS), name="liveness-raw", reconnect_time_wait=0.2, max_reconnect_attempts=-1
    )
    try:
        yield nc
    finally:
        await nc.close()


async def answers(nc: NatsClient) -> bool:
    """Whether a request through ``nc`` gets its reply (the server's JetStream account info)."""
    try:
        await nc.request("$JS.API.INFO", b"", timeout=2)
    except nats.errors.Error:
        return False
    return True


async def eventually(check: Callable[[], object], timeout_s: float = PAUSE_CHECK_S) -> bool:
    """Whether ``check()`` (a value, or an awaitable of one) came true within ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return True
        await asyncio.sleep(0.05)
    return False


async def flush_timed_out_while_paused(server: EmbeddedNats, nc: NatsClient) -> None:
    """A flush that times out while the server is paused, then the server's late PONG read."""
    with Paused(server), pytest.raises(nats.errors.TimeoutError):
        await nc.flush(timeout=0.3)  # type: ignore[arg-type]
    # The PONG arrives once the server runs again; give the read loop time to take it.
    await eventually(lambda: not nc._pongs, 5)
    await asyncio.sleep(0.2)


# --- the internals, one by one -------------------------------------------------------------


def test_the_pong_hook_has_the_shape_harden_replaces() -> None:
    hook = NatsClient._process_pong
    assert inspect.iscoroutinefunction(hook)
    assert tuple(inspect.signature(hook).parameters) == ("self",)
    source = inspect.getsource(hook)
    # What the replacement does too: the oldest future answers, the counters reset.
    for line in (
        "future = self._pongs.pop(0)",
        "future.set_result(True)",
        "self._pongs_received += 1",
        "self._pings_outstanding = 0",
    ):
        assert line in source


def test_the_protocol_parser_calls_the_pong_hook_on_the_client_instance() -> None:
    from nats.protocol import parser

    assert "await self.nc._process_pong()" in inspect.getsource(parser)


def test_the_internals_the_watch_uses_have_their_shape() -> None:
    assert tuple(inspect.signature(NatsClient._send_ping).parameters) == ("self", "future")
    assert inspect.iscoroutinefunction(NatsClient._send_ping)
    assert tuple(inspect.signature(NatsClient._process_op_err).parameters) == ("self", "e")
    assert inspect.iscoroutinefunction(NatsClient._process_op_err)
    # The read loop is a task kept on the client; a new connection starts a new one and a new
    # PING queue.
    assert "self._reading_task = asyncio.get_running_loop().create_task(self._read_loop())" in inspect.getsource(
        NatsClient._process_connect_init
    )
    assert "self._pongs = []" in inspect.getsource(NatsClient._process_connect_init)


# --- the failure, and what keeps the client alive ----------------------------------------


async def test_on_the_pinned_nats_py_a_flush_timed_out_while_paused_kills_the_read_loop(
    server: EmbeddedNats, raw: NatsClient
) -> None:
    await flush_timed_out_while_paused(server, raw)
    assert not read_loop_alive(raw)
    assert raw.is_connected  # and nothing says otherwise: no callback, no reconnect
    assert not await answers(raw)


async def test_a_hardened_client_reads_on_after_the_late_pong(server: EmbeddedNats) -> None:
    nc = await connect(server.url_for(TEST_HARNESS), name="liveness-hardened")
    try:
        assert nc._socai_hardened  # type: ignore[attr-defined]
        await flush_timed_out_while_paused(server, nc)
        assert read_loop_alive(nc)
        assert await answers(nc)
    finally:
        await nc.close()


async def test_a_round_trip_that_times_out_leaves_nothing_to_kill_the_read_loop(
    server: EmbeddedNats, raw: NatsClient
) -> None:
    with Paused(server):
        assert not await round_trip(raw, 0.3)
    assert await eventually(lambda: not raw._pongs, 5)
    assert read_loop_alive(raw)
    assert await answers(raw)
    assert await round_trip(raw, 5)


async def test_harden_refuses_a_pong_hook_of_another_shape(server: EmbeddedNats, raw: NatsClient) -> None:
    async def changed(extra: int) -> None:
        return None

    raw._process_pong = changed  # type: ignore[method-assign,assignment]
    assert not harden(raw)


async def test_the_watch_brings_back_a_client_whose_read_loop_died(server: EmbeddedNats, raw: NatsClient) -> None:
    await flush_timed_out_while_paused(server, raw)
    assert not read_loop_alive(raw)
    before = RECOVERIES.labels("raw", READ_LOOP_DEAD)._value.get()
    watch = ConnectionWatch(raw, "raw")
    assert await watch.check() == READ_LOOP_DEAD
    assert RECOVERIES.labels("raw", READ_LOOP_DEAD)._value.get() == before + 1
    assert await eventually(lambda: raw.is_connected and read_loop_alive(raw))
    assert await eventually(lambda: answers(raw))
    assert raw.stats["reconnects"] >= 1
    # A PING answered on the new connection: the watch is content again.
    await watch.check()
    assert await eventually(lambda: watch._ping is not None and watch._ping.done(), 5)
    assert await watch.check() is None
    assert watch.recoveries == 0


async def test_the_watch_forces_a_reconnect_when_its_ping_goes_unanswered(
    server: EmbeddedNats, raw: NatsClient
) -> None:
    watch = ConnectionWatch(raw, "stale", stale_after_s=0.5)
    assert await watch.check() is None  # its first PING goes out
    with Paused(server):
        await asyncio.sleep(0.8)
        assert await watch.check() == PONG_OVERDUE
    assert await eventually(lambda: raw.is_connected and read_loop_alive(raw))
    assert await eventually(lambda: answers(raw))


async def test_a_watch_that_cannot_reconnect_the_client_calls_on_dead(server: EmbeddedNats, raw: NatsClient) -> None:
    await flush_timed_out_while_paused(server, raw)
    deaths: list[str] = []
    watch = ConnectionWatch(raw, "doomed", on_dead=deaths.append)
    raw._process_op_err = None  # type: ignore[method-assign,assignment]  # another nats-py: no way to reconnect
    assert await watch.check() == READ_LOOP_DEAD
    assert watch.dead and len(deaths) == 1 and "read_loop_dead" in deaths[0]


def test_the_process_hook_is_what_a_watch_without_its_own_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    monkeypatch.setattr(nats_liveness, "_process_on_dead", [called.append])
    nats_liveness._process_on_dead[0]("why")
    assert called == ["why"]
