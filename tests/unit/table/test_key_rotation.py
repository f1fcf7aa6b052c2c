"""Rotating the table service's player-token key (``SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED``).

One secret keys three things: player tokens, the writer signature every event carries
(checked each time a table is loaded) and the pads of hand seeds at rest. A rotation signs
with the new key while the old one is still accepted: for tokens, for the seeds of hands in
play, and for events up to the last stream sequence it may have signed (a leaked retired
key then forges nothing later)."""

from __future__ import annotations

import pytest

from socai import errors, fairness
from socai.infra import player_tokens
from socai.infra.config import Settings
from socai_table import seeds, signing

OLD, NEW = "old-player-token-key", "new-player-token-key"
SUBJECT, PAYLOAD = "socai.events.t1.t1-facts", b"PlayerSeated"


def test_an_event_the_retired_key_signed_is_accepted_up_to_its_last_sequence_only():
    old_sig = signing.sign(signing.writer_key(OLD), SUBJECT, PAYLOAD)
    keys = signing.WriterKeys(signing.writer_key(NEW), ((signing.writer_key(OLD), 100),))
    assert keys.verify(SUBJECT, PAYLOAD, old_sig, 100)
    assert not keys.verify(SUBJECT, PAYLOAD, old_sig, 101)  # signed after its retirement: forged
    assert keys.verify(SUBJECT, PAYLOAD, signing.sign(signing.writer_key(NEW), SUBJECT, PAYLOAD), 101)
    any_time = signing.WriterKeys(signing.writer_key(NEW), ((signing.writer_key(OLD), 0),))
    assert any_time.verify(SUBJECT, PAYLOAD, old_sig, 10**9)  # while some instance may still sign with it
    assert not signing.WriterKeys(signing.writer_key(NEW)).verify(SUBJECT, PAYLOAD, old_sig, 1)
    reader = signing.SubjectReader(keys)
    assert reader.reject_reason(SUBJECT, PAYLOAD, {signing.SIGNATURE_HEADER: old_sig}, 101) == "BAD_SIGNATURE"
    assert reader.reject_reason(SUBJECT, PAYLOAD, {signing.SIGNATURE_HEADER: old_sig}, 99) is None


def test_the_seed_of_a_hand_in_play_under_the_old_key_is_recovered_with_it_accepted():
    seed = fairness.new_seed()
    stored = seeds.encrypt(seeds.rest_key(OLD), "t1-h7", seed)
    commitment = fairness.commitment(seed)
    assert seeds.recover((seeds.rest_key(NEW), seeds.rest_key(OLD)), "t1-h7", stored, commitment) == seed
    with pytest.raises(errors.PreconditionFailed) as lost:
        seeds.recover(seeds.rest_key(NEW), "t1-h7", stored, commitment)
    assert lost.value.code == "SEED_MISMATCH"


def test_a_player_token_of_the_old_key_is_accepted_while_it_is():
    token, _ = player_tokens.issue(OLD, "alice", 600, now=1_000)
    assert player_tokens.verify((NEW, OLD), token, now=1_001) == "alice"
    with pytest.raises(errors.Unauthenticated):
        player_tokens.verify((NEW,), token, now=1_001)


def test_the_accepted_keys_setting_reads_each_key_with_its_last_sequence():
    s = Settings.from_env({"SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED": "k-one@1200, k@two ,k3@"})
    assert s.player_token_keys_accepted == (("k-one", 1200), ("k@two", 0), ("k3@", 0))
    assert Settings.from_env(s.as_env()).player_token_keys_accepted == s.player_token_keys_accepted
    assert Settings.from_env({}).player_token_keys_accepted == ()
    with pytest.raises(errors.InvalidArgument) as bad:
        Settings.from_env({"SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED": "@5"})
    assert bad.value.code == "BAD_ACCEPTED_KEY"
