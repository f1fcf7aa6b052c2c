"""Hand seeds encrypted at rest (security issue: the auditor role must not see the future)."""

from __future__ import annotations

import pytest

from socai import errors, fairness
from socai_table import seeds

KEY = seeds.rest_key("table-secret")
SEED = bytes(range(32))


def test_an_encrypted_seed_reveals_nothing_and_decrypts_to_itself():
    stored = seeds.encrypt(KEY, "t1-h1", SEED)
    assert stored != SEED and len(stored) == 32
    assert seeds.decrypt(KEY, "t1-h1", stored) == SEED
    # Whoever reads the row cannot shuffle the deck: the stored bytes are not the seed.
    assert fairness.commitment(stored) != fairness.commitment(SEED)


def test_each_hand_has_its_own_pad():
    assert seeds.encrypt(KEY, "t1-h1", SEED) != seeds.encrypt(KEY, "t1-h2", SEED)


def test_another_key_does_not_decrypt():
    stored = seeds.encrypt(KEY, "t1-h1", SEED)
    assert seeds.decrypt(seeds.rest_key("other"), "t1-h1", stored) != SEED


def test_open_seed_proves_the_seed_against_the_commitment():
    commitment = fairness.commitment(SEED)
    assert seeds.recover(KEY, "t1-h1", seeds.encrypt(KEY, "t1-h1", SEED), commitment) == SEED
    # A row written in clear before seeds were encrypted is still recognised.
    assert seeds.recover(KEY, "t1-h1", SEED, commitment) == SEED
    with pytest.raises(errors.PreconditionFailed) as err:
        seeds.recover(seeds.rest_key("rotated"), "t1-h1", seeds.encrypt(KEY, "t1-h1", SEED), commitment)
    assert err.value.code == "SEED_MISMATCH"
