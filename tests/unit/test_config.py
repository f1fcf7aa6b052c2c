from __future__ import annotations

from pathlib import Path

import pytest

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
