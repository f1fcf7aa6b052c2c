"""Ed25519 seal keys: their ids, development derivation and parsing from settings.

The table's hand seal (``socai.events.seal``) and the ledger's journal seal sign with
Ed25519 keys that the settings carry as hex (``SOCAI_TABLE_SEAL_KEY``,
``SOCAI_*_SEAL_PUBLIC_KEYS``). The settings check and derive keys (``socai.infra.config``)
below the event log that signs with them, so what both need lives here.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

KEY_ID_HEX_CHARS: Final = 16
HAND_SEAL_DERIVE_LABEL: Final = b"socai/hand-seal-key/v1"
JOURNAL_SEAL_DERIVE_LABEL: Final = b"socai/journal-seal-key/v1"


def key_id(public_key: bytes) -> str:
    """A public key's id (``Socai-Seal-Key``): its fingerprint, so no key can be filed under another's id."""
    return hashlib.sha256(public_key).hexdigest()[:KEY_ID_HEX_CHARS]


def derive_private_key(secret: str) -> bytes:
    """A development seal key derived from the table service's secret (as ``signing.writer_key``
    is): ``socai up`` and the tests need no extra setting. Never used outside development mode."""
    return hmac.new(secret.encode(), HAND_SEAL_DERIVE_LABEL, hashlib.sha256).digest()


def derive_journal_key(secret: str) -> bytes:
    """The ledger's development journal seal key, derived like ``derive_private_key`` under a
    label of its own (the two seals never share a key). Never used outside development mode."""
    return hmac.new(secret.encode(), JOURNAL_SEAL_DERIVE_LABEL, hashlib.sha256).digest()


def parse_private_key(text: str) -> bytes:
    """The 32-byte seed of ``SOCAI_TABLE_SEAL_KEY`` (64 hex digits). Raises ValueError."""
    raw = bytes.fromhex(text.strip())
    if len(raw) != 32:
        raise ValueError("a seal key is 64 hex digits (the 32-byte Ed25519 private key)")
    return raw


def parse_public_keys(texts: Iterable[str]) -> dict[str, bytes]:
    """Key id → raw public key, from hex public keys (``SOCAI_TABLE_SEAL_PUBLIC_KEYS`` split on
    commas, or ``--seal-public-key`` flags). Raises ValueError naming a bad item."""
    keys: dict[str, bytes] = {}
    for text in texts:
        item = text.strip()
        if not item:
            continue
        try:
            raw = bytes.fromhex(item)
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise ValueError(f"seal public key {item[:20]!r}… is not 64 hex digits")
        keys[key_id(raw)] = raw
    return keys


def public_key_of(private_key: bytes) -> bytes:
    """The raw Ed25519 public key of a 32-byte private key."""
    public = Ed25519PrivateKey.from_private_bytes(private_key).public_key()
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)
