"""The table service signs what it writes, so that only its own writes are a table's truth.

Anyone who can publish to the event stream (a misconfigured service, an attacker with a
leaked NATS credential, an operator's typo) could otherwise append a message to a table's
subject that a restarting table service would apply as a fact. Every event the table
service appends carries ``Socai-Table-Sig``: the first 32 hex digits of
``HMAC-SHA256(writer_key, subject NUL payload)``, with ``writer_key`` derived from the
table service's own secret (``SOCAI_PLAYER_TOKEN_KEY``), which no other service holds.
The rebuild quarantines a message without a valid signature instead of applying it.

The signature is also part of the message id (``{event_id}:{sig}``): JetStream's duplicate
window then cannot take the table's own next event for a duplicate of a stranger's message
that used the same event id, while a retry of the table's own publish (same bytes, same
signature) is still recognised as one.

The HMAC proves authorship only to the table service itself. For settlement and the auditor,
which hold no secret, each event also carries ``Socai-Prev`` (the hand chain) and each
HandEnded ``Socai-Hand-Seal`` (an Ed25519 signature by the table service's seal key): see
``socai.events.seal``. ``SubjectReader`` follows the chain along what the rebuild accepts, so
the table's next event names the right ``Socai-Prev`` after a restart.

Events written before signing existed carry no signature. A subject is read in "legacy"
mode until its first signed message: unsigned messages before it are accepted (they can
only be old, finished history), any unsigned message after it is quarantined.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from socai.events import seal

SIGNATURE_HEADER = "Socai-Table-Sig"
SIGNATURE_HEX_CHARS = 32
_KEY_LABEL = b"socai/table-writer/v1"


def writer_key(player_token_key: str) -> bytes:
    """The signing key derived from the table service's player-token key."""
    return hmac.new(player_token_key.encode(), _KEY_LABEL, hashlib.sha256).digest()


def sign(key: bytes, subject: str, payload: bytes) -> str:
    return hmac.new(key, subject.encode() + b"\x00" + payload, hashlib.sha256).hexdigest()[:SIGNATURE_HEX_CHARS]


def verify(key: bytes, subject: str, payload: bytes, signature: str | None) -> bool:
    """True when ``signature`` is the table service's signature of ``payload`` on ``subject``."""
    if not signature or len(signature) != SIGNATURE_HEX_CHARS:
        return False
    return hmac.compare_digest(sign(key, subject, payload), signature)


@dataclass(frozen=True)
class WriterKeys:
    """The key the table service signs with, and the others it still accepts while its
    player-token key is rotated (``SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED``): each with the last
    stream sequence it may have signed (0: any, while some instance may still sign with it).
    A retired key given its last sequence signs nothing later: a leaked one forges nothing."""

    current: bytes
    accepted: tuple[tuple[bytes, int], ...] = ()

    def verify(self, subject: str, payload: bytes, signature: str | None, stream_seq: int) -> bool:
        if verify(self.current, subject, payload, signature):
            return True
        return any(
            (last == 0 or 0 < stream_seq <= last) and verify(key, subject, payload, signature)
            for key, last in self.accepted
        )


class SubjectReader:
    """Decides, message by message along one subject, whether the table wrote it.

    ``accept(subject, payload, headers)`` is None for a message the table wrote (or, in
    legacy mode, may have written), else the reason to quarantine it.
    """

    def __init__(self, key: bytes | WriterKeys) -> None:
        self.keys = key if isinstance(key, WriterKeys) else WriterKeys(key)
        self.signed_seen = False
        self.chain: bytes | None = None  # the chain value of the last message accepted (``accepted``)

    def accepted(self, subject: str, payload: bytes) -> None:
        """The rebuild applied this message: the chain moves on over it (``socai.events.seal``),
        over the table's own accepted messages only, never a quarantined stranger's."""
        self.chain = seal.link(self.chain or seal.genesis(subject), subject, payload)

    def reject_reason(self, subject: str, payload: bytes, headers: dict[str, str], stream_seq: int = 0) -> str | None:
        signature = headers.get(SIGNATURE_HEADER)
        if signature is None:
            return "UNSIGNED" if self.signed_seen else None
        if not self.keys.verify(subject, payload, signature, stream_seq):
            return "BAD_SIGNATURE"
        self.signed_seen = True
        return None
