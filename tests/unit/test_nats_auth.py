"""One generator of NATS users and permissions (``socai.infra.nats_auth``) for deploy/ and the
embedded server: deploy/ holds exactly what it generates, and it names what the services
name (durables, filters, lease buckets) for any layout."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import yaml

from socai.infra import nats_auth
from socai.infra.config import Settings
from socai.infra.nats_auth import ROLES, Credentials, Layout, shown_url
from socai_settlement import config as settlement_config
from socai_settlement.durables import durable_of, filter_of
from socai_table import ownership

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_holds_the_generated_accounts():
    """Edit socai.infra.nats_auth and run `python -m socai.infra.nats_auth`, never deploy/ by hand."""
    for path, block in nats_auth.deploy_blocks(nats_auth.deployed_partitions(ROOT)).items():
        assert nats_auth.block_in((ROOT / path).read_text(), path) == block, f"{path}: python -m socai.infra.nats_auth"
    assert nats_auth.main(["--check"]) == 0


def test_the_deployed_p_is_the_one_of_the_compose_env_and_the_configmap():
    docs = yaml.safe_load_all((ROOT / "deploy" / "k8s" / "base" / "configmap.yaml").read_text())
    (config_map,) = [d for d in docs if d and d["kind"] == "ConfigMap"]
    assert int(config_map["data"]["SOCAI_EVENT_PARTITIONS"]) == nats_auth.deployed_partitions(ROOT) == 8


def test_a_hand_edit_of_deploy_is_found():
    path = nats_auth.DEPLOY_CONF
    text = (ROOT / path).read_text()
    widened = text.replace(
        '"$JS.API.STREAM.INFO.SOCAI_LEDGER"\n', '"$JS.API.STREAM.INFO.SOCAI_LEDGER"\n"socai.events.>"\n', 1
    )
    assert widened != text
    assert nats_auth.block_in(widened, path) != nats_auth.deploy_blocks(8)[path]


def _allowed(layout: Layout, user: str) -> set[str]:
    (found,) = [u for u in nats_auth.users(layout) if u.name == user]
    return {s for g in found.publish for s in g.subjects}


def _subscribable(layout: Layout, user: str) -> set[str]:
    (found,) = [u for u in nats_auth.users(layout) if u.name == user]
    return {s for g in found.subscribe for s in g.subjects}


def test_a_run_s_streams_prefixes_and_p_are_filled_in():
    layout = Layout(
        events_stream="T_RUN",
        events_prefix="trun.events",
        ledger_stream="L_RUN",
        ledger_prefix="trun.ledger",
        partitions=3,
    )
    table = _allowed(layout, "table")
    assert "trun.events.>" in table and "$JS.API.DIRECT.GET.T_RUN.>" in table
    assert "$KV.table_leases_T_RUN.>" in table and not any("SOCAI" in s for s in table)
    settlement = _allowed(layout, "settlement")
    for k in range(3):
        durable, subject = durable_of("settlement", 3, k), filter_of("trun.events", 3, k)
        assert f"$JS.API.CONSUMER.CREATE.T_RUN.{durable}.{subject}" in settlement
        assert f"$JS.ACK.T_RUN.{durable}.>" in settlement
        assert f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.T_RUN.{durable}" in _subscribable(layout, "settlement")
    assert not any("-p3" in s for s in settlement)
    assert "trun.events.>" not in settlement  # never a publish on the log
    assert _allowed(layout, "ledger") >= {"trun.ledger.>", "$JS.API.STREAM.INFO.L_RUN"}
    assert "$JS.API.STREAM.CREATE.L_RUN" in _allowed(layout, "provisioner")
    (auditor,) = [u for u in nats_auth.users(layout) if u.name == "auditor"]
    assert "trun.>" in auditor.deny  # both prefixes share their first token


def test_the_names_are_the_services_own():
    settings = replace(Settings(), events_stream="T_NAMES", event_partitions=4)
    layout = Layout.of(settings)
    assert layout.table_bucket == ownership.lease_config(settings, ownership.OwnershipSettings()).bucket
    assert (
        layout.settlement_bucket
        == settlement_config.lease_config(settings, settlement_config.SettlementConfig()).bucket
    )
    assert layout.settlement_durable == settlement_config.SettlementConfig().durable
    assert [layout.durable(k) for k in range(4)] == [durable_of(layout.settlement_durable, 4, k) for k in range(4)]
    assert layout.durable(None) == durable_of(layout.settlement_durable, 0, 0)


def test_users_merged_over_layouts_may_do_what_each_may_and_no_more():
    a, b = (
        Layout(events_stream="T_A", events_prefix="ta.events"),
        Layout(events_stream="T_B", events_prefix="tb.events"),
    )
    merged = {u.name: u for u in nats_auth.merged_users([a, b])}
    assert [u.name for u in nats_auth.merged_users([a])] == list(ROLES)
    table = set(merged["table"].publish[0].subjects)
    assert table == _allowed(a, "table") | _allowed(b, "table")
    assert "tb.events.>" not in set(merged["auditor"].publish[0].subjects)


def test_the_embedded_configuration_names_each_user_with_its_password():
    passwords = {user: f"pw-{user}" for user in (*ROLES, nats_auth.SYSTEM_USER, nats_auth.TEST_HARNESS)}
    conf = nats_auth.render_conf(
        [*nats_auth.users(Layout()), nats_auth.test_harness_user()], lambda user: json.dumps(passwords[user])
    )
    for user in passwords:
        assert f'password: "pw-{user}"' in conf
    harness = conf[conf.index("user: test-harness") :]
    assert "permissions" not in harness.split("}", 1)[0]  # the harness alone may do anything
    assert conf.count("permissions: {") == len(ROLES)


def test_credentials_make_urls_and_urls_are_shown_without_passwords(tmp_path: Path):
    credentials = Credentials("127.0.0.1", 4333, {"auditor": "s3cret"})
    (tmp_path / "users.json").write_text(credentials.dump())
    assert Credentials.load(tmp_path / "users.json") == credentials
    url = credentials.url_for("auditor")
    assert url == "nats://auditor:s3cret@127.0.0.1:4333"
    assert shown_url(url) == "nats://auditor:…@127.0.0.1:4333"
    assert shown_url("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"


def test_settings_find_a_user_s_url_of_the_embedded_server(tmp_path: Path):
    settings = replace(Settings(), var_dir=tmp_path, nats_port=4333)
    assert settings.nats_url_for("auditor") == "nats://127.0.0.1:4333"  # before the server ever ran
    (tmp_path / "nats").mkdir()
    (tmp_path / "nats" / nats_auth.CREDENTIALS_FILE).write_text(
        Credentials("127.0.0.1", 4333, {"auditor": "x1"}).dump()
    )
    assert settings.nats_url_for("auditor") == "nats://auditor:x1@127.0.0.1:4333"
    assert replace(settings, nats_url="nats://table:t@nats:4222").nats_url_for("auditor") == "nats://table:t@nats:4222"
