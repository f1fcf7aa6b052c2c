from __future__ import annotations

from pathlib import Path

import pytest

from socai import errors
from socai.infra.config import DEV_TOKENS, Settings


def test_defaults_are_embedded_and_use_dev_tokens():
    s = Settings.from_env({})
    assert s.nats_url is None and s.database_url is None
    assert s.var_dir == Path("var")
    assert dict(s.tokens) == DEV_TOKENS
    assert s.token_of("settlement") == DEV_TOKENS["settlement"]


def test_environment_overrides_everything():
    s = Settings.from_env(
        {
            "SOCAI_NATS_URL": "nats://nats:4222",
            "SOCAI_DATABASE_URL": "postgresql://u:p@db/socai",
            "SOCAI_LEDGER_ADDR": "ledger:50051",
            "SOCAI_TOKENS": "table=t1, settlement=s1",
            "SOCAI_SERVICE_TOKEN": "mine",
        }
    )
    assert s.nats_url == "nats://nats:4222"
    assert s.database_url == "postgresql://u:p@db/socai"
    assert s.ledger_addr == "ledger:50051"
    assert dict(s.tokens) == {"table": "t1", "settlement": "s1"}
    assert s.token_of("anything") == "mine"


def test_settings_survive_the_trip_through_a_child_environment():
    s = Settings.from_env({"SOCAI_NATS_URL": "nats://x:1", "SOCAI_TOKENS": "a=b"})
    assert Settings.from_env(s.as_env()) == s


def test_a_malformed_token_list_is_refused():
    with pytest.raises(ValueError):
        Settings.from_env({"SOCAI_TOKENS": "table"})


def test_the_first_of_two_rotating_tokens_is_the_one_presented():
    s = Settings.from_env({"SOCAI_TOKENS": "table=new|old"})
    assert s.token_of("table") == "new"


def test_stream_replicas_reach_the_stream_spec():
    s = Settings.from_env({"SOCAI_STREAM_REPLICAS": "3", "SOCAI_EVENTS_STREAM": "EV", "SOCAI_EVENTS_PREFIX": "ev"})
    spec = s.events_stream_spec()
    assert (spec.name, spec.subjects, spec.replicas) == ("EV", ("ev.>",), 3)


EXTERNAL = {"SOCAI_NATS_URL": "nats://nats:4222", "SOCAI_DATABASE_URL": "postgresql://u:p@db/socai"}
OWN_SECRETS = {"SOCAI_TOKENS": "table=t1,settlement=s1", "SOCAI_PLAYER_TOKEN_KEY": "k" * 32}


def test_public_dev_secrets_are_refused_outside_development_mode():
    """Issue 16, defect 8: a deployment that forgot its Secrets used the README's tokens."""
    s = Settings.from_env(EXTERNAL)
    assert not s.dev_mode
    assert s.public_dev_values() == ["SOCAI_TOKENS", "SOCAI_PLAYER_TOKEN_KEY"]
    with pytest.raises(errors.PreconditionFailed) as caught:
        s.check_secrets()
    assert caught.value.code == "DEV_SECRETS" and "SOCAI_TOKENS" in caught.value.message
    # One public token among private ones, or a rotation that keeps one, is still refused.
    mixed = Settings.from_env({**EXTERNAL, **OWN_SECRETS, "SOCAI_TOKENS": "table=t1|dev-table-token"})
    with pytest.raises(errors.PreconditionFailed):
        mixed.check_secrets()


@pytest.mark.parametrize(
    "env",
    [
        {},  # the embedded servers: a laptop
        {**EXTERNAL, "SOCAI_DEV_MODE": "1"},  # docker compose says so
        {**EXTERNAL, **OWN_SECRETS},  # a deployment with its own secrets
    ],
)
def test_development_mode_or_own_secrets_start(env: dict[str, str]):
    Settings.from_env(env).check_secrets()


def test_development_mode_survives_the_trip_through_a_child_environment():
    for env in ({}, EXTERNAL, {**EXTERNAL, "SOCAI_DEV_MODE": "1"}):
        s = Settings.from_env(env)
        assert Settings.from_env(s.as_env()).dev_mode == s.dev_mode


@pytest.mark.parametrize("service", ["socai_ledger", "socai_table", "socai_settlement"])
def test_a_service_with_public_secrets_outside_development_mode_refuses_to_start(service: str):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("SOCAI_")}
    env.update(EXTERNAL, SOCAI_METRICS_PORT_BASE="0")
    done = subprocess.run([sys.executable, "-m", service], env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 2
    assert b"SOCAI_TOKENS" in done.stderr and b"SOCAI_DEV_MODE=1" in done.stderr


def test_the_metrics_endpoint_listens_on_the_grpc_host_unless_told_otherwise() -> None:
    assert Settings.from_env({}).metrics_bind_host("127.0.0.1:50051") == "127.0.0.1"
    listening = Settings.from_env({"SOCAI_LISTEN_ADDR": "0.0.0.0:50051"})
    assert listening.metrics_bind_host("socai-ledger:50051") == "0.0.0.0"
    assert Settings.from_env({"SOCAI_LISTEN_ADDR": "[::1]:50051"}).metrics_bind_host("x:1") == "::1"
    widened = Settings.from_env({"SOCAI_LISTEN_ADDR": "127.0.0.1:50051", "SOCAI_METRICS_HOST": "10.0.0.7"})
    assert widened.metrics_bind_host("127.0.0.1:50051") == "10.0.0.7"
    assert Settings.from_env(widened.as_env()).metrics_host == "10.0.0.7"
