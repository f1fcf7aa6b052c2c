"""Settlement's settings have one default per field: built in code or read from an empty
environment, the config is the same."""

from __future__ import annotations

import dataclasses

import pytest

from socai_settlement.config import SettlementConfig, default_replay_workers


def test_the_dataclass_and_an_empty_environment_agree_on_every_field() -> None:
    in_code, from_env = SettlementConfig(), SettlementConfig.from_env({})
    for f in dataclasses.fields(SettlementConfig):
        assert getattr(in_code, f.name) == getattr(from_env, f.name), f.name


def test_replay_workers_default_to_the_machine_s_choice_both_ways() -> None:
    assert SettlementConfig().replay_workers == default_replay_workers()
    assert SettlementConfig.from_env({}).replay_workers == default_replay_workers()


def test_the_environment_overrides_a_default() -> None:
    config = SettlementConfig.from_env({"SOCAI_SETTLEMENT_REPLAY_WORKERS": "1", "SOCAI_SETTLEMENT_ACK_WAIT_S": "12.5"})
    assert (config.replay_workers, config.ack_wait_s) == (1, 12.5)
    assert config.post_batch_max == SettlementConfig().post_batch_max


def test_the_config_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SettlementConfig().post_batch_max = 1  # type: ignore[misc]
