"""Hand seeds sealed at rest (security issue: the auditor role must not see the future)."""

from __future__ import annotations

import pytest

from socai import errors, fairness
from socai_table import seeds

KEY = seeds.seal_key("table-secret")
SEED = bytes(range(32))


def test_a_sealed_seed_reveals_nothing_and_unseals_to_itself():
    sealed = seeds.seal(KEY, "t1-h1", SEED)
    assert sealed != SEED and len(sealed) == 32
    assert seeds.unseal(KEY, "t1-h1", sealed) == SEED
    # Whoever reads the row cannot shuffle the deck: the stored bytes are not the seed.
    assert fairness.commitment(sealed) != fairness.commitment(SEED)


def test_each_hand_has_its_own_pad():
    assert seeds.seal(KEY, "t1-h1", SEED) != seeds.seal(KEY, "t1-h2", SEED)


def test_another_key_does_not_unseal():
    sealed = seeds.seal(KEY, "t1-h1", SEED)
    assert seeds.unseal(seeds.seal_key("other"), "t1-h1", sealed) != SEED


def test_open_seed_proves_the_seed_against_the_commitment():
    commitment = fairness.commitment(SEED)
    assert seeds.open_seed(KEY, "t1-h1", seeds.seal(KEY, "t1-h1", SEED), commitment) == SEED
    # A row written in clear before sealing existed is still recognised.
    assert seeds.open_seed(KEY, "t1-h1", SEED, commitment) == SEED
    with pytest.raises(errors.PreconditionFailed) as err:
        seeds.open_seed(seeds.seal_key("rotated"), "t1-h1", seeds.seal(KEY, "t1-h1", SEED), commitment)
    assert err.value.code == "SEED_MISMATCH"
