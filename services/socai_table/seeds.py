"""Hand seeds encrypted at rest: only the table service can read the seed of a hand in play.

A hand's seed gives every card before it is dealt (``fairness.shuffle(seed, deck)``), so
whoever reads it during the hand sees the future. PostgreSQL grants alone cannot keep it
secret: backups, replicas and roles such as ``pg_read_all_data`` read every table. The
table service therefore stores ``seed XOR pad`` with ``pad = HMAC-SHA256(rest_key,
"socai/hand-seed/v1" || hand_id)``: a one-time pad per hand (hand ids never repeat, and a
hand's seed is written once), keyed by a secret the database never sees. Once the hand
ends, ``HandEnded.deck_seed`` reveals the seed anyway; auditors read it there.

The key is derived from the player-token key (one table-service secret, not two):
``rest_key = HMAC-SHA256(player_token_key, "socai/seed-seal-key/v1")`` (the label keeps the
name it was first written with: the rows stored under it must stay readable). A seed that
does not decrypt to the hand's commitment (a key changed while the hand was in play, or a
row written in clear by an older version) is recognised by ``recover`` through the
``deck_commitment`` of HandStarted, never used blindly.

Not to be confused with the hand seal (``socai.events.seal``: the Ed25519 signature that
tells the table's events from a stranger's) or the writer's HMAC (``socai_table.signing``).
"""

from __future__ import annotations

import hashlib
import hmac

from socai import errors, fairness

SEED_BYTES = 32
_PAD_LABEL = b"socai/hand-seed/v1\x00"
_KEY_LABEL = b"socai/seed-seal-key/v1"


def rest_key(player_token_key: str) -> bytes:
    """The key that encrypts hand seeds at rest, derived from the table service's
    player-token key."""
    return hmac.new(player_token_key.encode(), _KEY_LABEL, hashlib.sha256).digest()


def _pad(key: bytes, hand_id: str) -> bytes:
    return hmac.new(key, _PAD_LABEL + hand_id.encode(), hashlib.sha256).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def encrypt(key: bytes, hand_id: str, seed: bytes) -> bytes:
    """The stored form of ``seed`` (32 bytes, reveals nothing without ``key``)."""
    errors.check(len(seed) == SEED_BYTES, "a hand seed is 32 bytes")
    return _xor(seed, _pad(key, hand_id))


def decrypt(key: bytes, hand_id: str, stored: bytes) -> bytes:
    """The inverse of ``encrypt``."""
    errors.check(len(stored) == SEED_BYTES, "a stored hand seed is 32 bytes")
    return _xor(stored, _pad(key, hand_id))


def recover(key: bytes | tuple[bytes, ...], hand_id: str, stored: bytes, commitment: str) -> bytes:
    """The seed of a started hand from its stored form, proven against its ``deck_commitment``.

    Accepts a row encrypted with ``key`` (or any of several: the current one and those a
    rotation of the player-token key still accepts, ``SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED``)
    or, from before seeds were encrypted, stored in clear. Raises
    PreconditionFailed("SEED_MISMATCH") when none matches the commitment (the key changed
    while the hand was in play and the old one is not accepted): dealing from a wrong seed
    would break the commitment every player was shown.
    """
    for each in (key,) if isinstance(key, bytes) else key:
        seed = decrypt(each, hand_id, stored)
        if fairness.commitment(seed) == commitment:
            return seed
    if fairness.commitment(stored) == commitment:
        return stored
    raise errors.PreconditionFailed(
        "SEED_MISMATCH", f"the stored seed of {hand_id} does not match its commitment (key changed?)"
    )
