"""The hand chain and the hand seal: which messages on a hand's subject are the table's, told
with the table's public key only.

The table service signs each message it writes with an HMAC (``socai_table.signing``), but
checking an HMAC takes the table's secret, which settlement and the auditor must not hold.
Anyone who can publish to the event stream could otherwise add an event to a hand (or a
whole hand paying themselves) that settlement replays and posts. So:

- **Chain.** Every event the table appends carries ``Socai-Prev``: the chain value of the
  previous event it accepted on that subject (hex). The chain value of a message is
  ``c = sha256(prev || subject || NUL || payload)`` with ``prev`` taken from its own
  ``Socai-Prev`` header, and the first event's ``prev`` is ``c_0 = genesis(subject) =
  sha256("socai/hand-chain/v1" NUL subject)``. One sha256 per event.
- **Seal.** HandEnded also carries ``Socai-Hand-Seal``: an Ed25519 signature over
  ``"socai/hand-seal/v1" NUL subject NUL c_n`` (``c_n`` the HandEnded's own chain value), and
  ``Socai-Seal-Key``: the key id, the first 16 hex digits of sha256 of the raw public key.
  One signature per hand at the table, one verification per hand where it is read.
- **Facts seal.** A table's own facts (``{table}-t``: opened, seated, stood up, closed) are
  chained the same way on their subject, and every fact carries ``Socai-Facts-Seal``: an
  Ed25519 signature by the same key over ``"socai/facts-seal/v1" NUL subject NUL c``, its
  own chain value (and ``Socai-Seal-Key``). The facts never end, so each one seals the
  chain up to itself: the last fact's seal covers every fact before it, and a removed or
  changed fact breaks the walk back from it. Facts written before facts were sealed carry
  no seal; a subject with none is read as before (``socai.audit.auditor``).
- **Walk back.** Given every message of a subject and a HandEnded whose seal verifies,
  index the messages by their *computed* chain value (never a header's claim about itself)
  and follow ``Socai-Prev`` from ``c_n`` back to ``c_0``. Exactly the messages on that path
  are the table's hand, in order; anything else on the subject (a stranger's event, a
  forged HandEnded, a copy) is not. A stranger cannot put a message on the path without
  finding a sha256 second preimage, and cannot make a path of their own without the
  private key. A HandEnded without a valid seal is never the end of a table's hand.

The table's private key (``SOCAI_TABLE_SEAL_KEY``, 64 hex digits: the Ed25519 seed) lives in
the table service only; settlement and the auditor get public keys
(``SOCAI_TABLE_SEAL_PUBLIC_KEYS``, several during a rotation). ``python -m socai.events.seal``
makes a new key pair. Ed25519 is OpenSSL's, through ``cryptography``.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

# The keys' ids, derivation and parsing live with the settings that read them; importable
# from here as before.
from socai.infra.keys import KEY_ID_HEX_CHARS as KEY_ID_HEX_CHARS
from socai.infra.keys import derive_private_key as derive_private_key
from socai.infra.keys import key_id as key_id
from socai.infra.keys import parse_private_key as parse_private_key
from socai.infra.keys import parse_public_keys as parse_public_keys
from socai.infra.keys import public_key_of as public_key_of

PREV_HEADER: Final = "Socai-Prev"
SEAL_HEADER: Final = "Socai-Hand-Seal"
FACTS_SEAL_HEADER: Final = "Socai-Facts-Seal"
SEAL_KEY_HEADER: Final = "Socai-Seal-Key"
# What a reader keeps of a message's headers.
CHAIN_HEADERS: Final = (PREV_HEADER, SEAL_HEADER, FACTS_SEAL_HEADER, SEAL_KEY_HEADER)

_GENESIS_LABEL: Final = b"socai/hand-chain/v1"
_SEAL_LABEL: Final = b"socai/hand-seal/v1"
_FACTS_SEAL_LABEL: Final = b"socai/facts-seal/v1"
CHAIN_BYTES: Final = 32

# Why a message or a hand is not the table's (settlement's dead letters and ignored
# messages, the audit's findings).
HAND_UNSEALED: Final = "HAND_UNSEALED"  # a HandEnded without a seal
HAND_SEAL_INVALID: Final = "HAND_SEAL_INVALID"  # a seal that does not verify, or by an unknown key
CHAIN_BROKEN: Final = "CHAIN_BROKEN"  # the walk back from a valid seal misses a message
NOT_ON_CHAIN: Final = "NOT_ON_CHAIN"  # a message on the subject that is not on the sealed hand's path
COPY_OF_CHAIN: Final = "COPY_OF_CHAIN"  # a byte-for-byte copy of a message already on the path


# --- the chain -------------------------------------------------------------------------------


def genesis(subject: str) -> bytes:
    """``c_0`` of a subject: the ``prev`` of its first event."""
    return hashlib.sha256(_GENESIS_LABEL + b"\x00" + subject.encode()).digest()


def link(prev: bytes, subject: str, payload: bytes) -> bytes:
    """The chain value of ``payload`` on ``subject`` after chain value ``prev``."""
    return hashlib.sha256(prev + subject.encode() + b"\x00" + payload).digest()


def prev_of(headers: Mapping[str, str]) -> bytes | None:
    """The ``Socai-Prev`` a message claims, or None when it carries none (or not 32 bytes of hex)."""
    text = headers.get(PREV_HEADER)
    if not text or len(text) != 2 * CHAIN_BYTES:
        return None
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None


def chain_value(subject: str, payload: bytes, headers: Mapping[str, str]) -> bytes | None:
    """A message's own chain value, computed from its ``Socai-Prev`` and bytes; None without one."""
    prev = prev_of(headers)
    return None if prev is None else link(prev, subject, payload)


# --- keys and the seal -----------------------------------------------------------------------


def seal_message(subject: str, chain: bytes) -> bytes:
    """What a seal signs: the label, the subject and the hand's last chain value."""
    return _SEAL_LABEL + b"\x00" + subject.encode() + b"\x00" + chain


def facts_seal_message(subject: str, chain: bytes) -> bytes:
    """What a facts seal signs: its label, the facts' subject and the fact's chain value."""
    return _FACTS_SEAL_LABEL + b"\x00" + subject.encode() + b"\x00" + chain


class HandSigner:
    """The table service's seal: signs a hand's last chain value with its private key."""

    def __init__(self, private_key: bytes) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(private_key)
        self.public_key = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_id = key_id(self.public_key)

    def seal(self, subject: str, chain: bytes) -> str:
        """The hex signature for ``Socai-Hand-Seal``."""
        return self._key.sign(seal_message(subject, chain)).hex()

    def headers(self, subject: str, chain: bytes) -> dict[str, str]:
        return {SEAL_HEADER: self.seal(subject, chain), SEAL_KEY_HEADER: self.key_id}

    def facts_headers(self, subject: str, chain: bytes) -> dict[str, str]:
        """``Socai-Facts-Seal`` and ``Socai-Seal-Key`` of a table fact with chain value ``chain``."""
        return {
            FACTS_SEAL_HEADER: self._key.sign(facts_seal_message(subject, chain)).hex(),
            SEAL_KEY_HEADER: self.key_id,
        }


class SealVerifier:
    """Checks seals with the table's public keys (key id → key; several during a rotation):
    hand seals, or with ``facts=True`` the seals of a table's facts."""

    def __init__(self, public_keys: Mapping[str, bytes], *, facts: bool = False) -> None:
        self.public_keys = dict(public_keys)
        self._keys = {kid: Ed25519PublicKey.from_public_bytes(raw) for kid, raw in public_keys.items()}
        self._header = FACTS_SEAL_HEADER if facts else SEAL_HEADER
        self._message = facts_seal_message if facts else seal_message

    def for_facts(self) -> SealVerifier:
        """The same keys, checking facts seals."""
        return SealVerifier(self.public_keys, facts=True)

    def reject_reason(self, subject: str, chain: bytes, headers: Mapping[str, str]) -> str | None:
        """None when the message's seal is the table's over ``chain``; else HAND_UNSEALED or
        HAND_SEAL_INVALID."""
        text = headers.get(self._header)
        if not text:
            return HAND_UNSEALED
        key = self._keys.get(headers.get(SEAL_KEY_HEADER, ""))
        if key is None:
            return HAND_SEAL_INVALID
        try:
            key.verify(bytes.fromhex(text), self._message(subject, chain))
        except (InvalidSignature, ValueError):
            return HAND_SEAL_INVALID
        return None

    def explain(self, subject: str, chain: bytes, headers: Mapping[str, str]) -> str:
        """Why ``reject_reason`` says what it says, naming the key ids: the one the message
        names and the ones this verifier holds (an auditor checking a file must see whether
        the wrong key was given or the seal is forged)."""
        reason = self.reject_reason(subject, chain, headers)
        named = headers.get(SEAL_KEY_HEADER, "")
        if reason is None:
            return f"sealed with key id {named}"
        if reason == HAND_UNSEALED:
            return "carries no seal"
        held = ", ".join(sorted(self.public_keys)) or "none"
        if named not in self._keys:
            return f"sealed with key id {named or '(none named)'}, not one of the keys given ({held})"
        return f"the seal of key id {named} does not verify over chain value {chain.hex()[:16]}…"


# --- reading a subject back ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """A stored message as the walk needs it: stream sequence, bytes and headers."""

    stream_seq: int
    payload: bytes
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Walk:
    """The result of walking back from one end message: the path (indices into the messages,
    first event first) or why there is none."""

    path: tuple[int, ...] = ()
    broken: str = ""  # the reason when there is no path (CHAIN_BROKEN …)

    @property
    def ok(self) -> bool:
        return not self.broken


def chain_values(subject: str, messages: Sequence[Message]) -> list[bytes | None]:
    """Each message's own chain value (None without a ``Socai-Prev``)."""
    return [chain_value(subject, m.payload, m.headers) for m in messages]


def walk_back(
    subject: str,
    messages: Sequence[Message],
    end: int,
    chains: Sequence[bytes | None] | None = None,
    prevs: Sequence[bytes | None] | None = None,
) -> Walk:
    """The messages from ``c_0`` to ``messages[end]`` along ``Socai-Prev``, by computed chain value
    (``chains``, ``prevs``: each message's chain value and ``Socai-Prev``, when the caller has them).

    When two messages share a chain value (a byte-for-byte copy: same bytes, same
    ``Socai-Prev``), the earlier in stream order stands. Pure: it checks no seal, so the path
    is the table's only when the end's seal verifies over its chain value.
    """
    if chains is None:
        chains = chain_values(subject, messages)
    if prevs is None:
        prevs = [prev_of(m.headers) for m in messages]
    start = genesis(subject)
    if end == len(messages) - 1 and _linear(prevs, chains, start):
        # The usual subject: nothing but the table's hand, each message linked to the one
        # before. Walking back visits every message, last to first (a chain value cannot
        # repeat along one chain without a sha256 cycle): the same path, without the index.
        return Walk(tuple(range(len(messages))))
    return _walk_by_index(messages, end, chains, prevs, start)


def _walk_by_index(
    messages: Sequence[Message], end: int, chains: Sequence[bytes | None], prevs: Sequence[bytes | None], start: bytes
) -> Walk:
    """``walk_back`` by its definition: messages indexed by chain value, followed back from
    ``end`` (the fast path for a linear subject is pinned equal to this by a test)."""
    by_chain: dict[bytes, int] = {}
    for i, c in enumerate(chains):
        if c is not None and c not in by_chain:
            by_chain[c] = i
    path = [end]
    prev = prevs[end]
    if prev is None:
        return Walk(broken=f"{CHAIN_BROKEN}: stream seq {messages[end].stream_seq} carries no {PREV_HEADER}")
    # A limit on everything: a path is never longer than the messages it is made of.
    while prev != start:
        found = by_chain.get(prev)
        if found is None or len(path) >= len(messages):
            return Walk(
                broken=f"{CHAIN_BROKEN}: no message with chain value {prev.hex()[:16]}… before stream seq "
                f"{messages[path[-1]].stream_seq}"
            )
        path.append(found)
        prev = prevs[found]
        if prev is None:
            return Walk(broken=f"{CHAIN_BROKEN}: stream seq {messages[found].stream_seq} carries no {PREV_HEADER}")
    path.reverse()
    return Walk(tuple(path))


def _linear(prevs: Sequence[bytes | None], chains: Sequence[bytes | None], start: bytes) -> bool:
    """True when message 0 follows ``start`` and every later message follows the one before."""
    expected: bytes | None = start
    for prev, chain in zip(prevs, chains, strict=True):
        if prev is None or prev != expected:
            return False
        expected = chain
    return True


@dataclass
class Verdict:
    """Which messages of a subject are the table's hand: ``hand`` (indices, first event first)
    when a sealed HandEnded and its path stand, else ``reason``; ``strangers`` are the others
    (index, reason), each to be reported."""

    hand: tuple[int, ...] = ()
    reason: str = ""  # why no hand stands (HAND_UNSEALED, HAND_SEAL_INVALID, CHAIN_BROKEN …)
    detail: str = ""
    end: int = -1  # the index of the sealed HandEnded the hand ends with
    strangers: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reason


def authenticate(subject: str, messages: Sequence[Message], verifier: SealVerifier, ends: Sequence[int]) -> Verdict:
    """The table's hand among ``messages`` (every message of ``subject``, in stream order).

    ``ends`` are the indices of the HandEnded messages (the caller decoded them). The first
    end whose seal verifies and whose path reaches ``c_0`` is the hand; every other message
    is a stranger's: NOT_ON_CHAIN, COPY_OF_CHAIN (same chain value as a path message), or
    the end's own seal reason. With no such end, ``reason`` is the first end's reason
    (HAND_UNSEALED when there is no HandEnded at all).
    """
    failures: list[tuple[int, str, str]] = []
    prevs = [prev_of(m.headers) for m in messages]
    label = subject.encode() + b"\x00"  # link()'s, encoded once for the whole subject
    chains = [
        None if p is None else sha256(p + label + m.payload).digest() for p, m in zip(prevs, messages, strict=True)
    ]
    for end in ends:
        m = messages[end]
        c = chains[end]
        reason = HAND_UNSEALED if c is None else verifier.reject_reason(subject, c, m.headers)
        if reason is not None:
            why = "carries no Socai-Prev" if c is None else verifier.explain(subject, c, m.headers)
            failures.append((end, reason, f"stream seq {m.stream_seq}: {reason}: {why}"))
            continue
        walk = walk_back(subject, messages, end, chains, prevs)
        if not walk.ok:
            failures.append((end, CHAIN_BROKEN, walk.broken))
            continue
        on_path = set(walk.path)
        path_chains = {chains[i] for i in walk.path}
        strangers = []
        for i in range(len(messages)):
            if i in on_path:
                continue
            why = next((r for e, r, _ in failures if e == i), "")
            if not why:
                why = COPY_OF_CHAIN if chains[i] in path_chains else NOT_ON_CHAIN
            strangers.append((i, why))
        return Verdict(hand=walk.path, end=end, strangers=strangers)
    if not failures:
        return Verdict(reason=HAND_UNSEALED, detail=f"{subject}: no HandEnded")
    _, reason, detail = failures[0]
    return Verdict(reason=reason, detail=detail)


def _main(argv: Sequence[str]) -> int:
    """``python -m socai.events.seal``: a new key pair, for the table's Secret and the others' config."""
    if argv and argv[0] not in ("keygen",):
        print("usage: python -m socai.events.seal [keygen]", file=sys.stderr)
        return 2
    private = Ed25519PrivateKey.generate().private_bytes_raw()
    signer = HandSigner(private)
    print(f"SOCAI_TABLE_SEAL_KEY={private.hex()}")
    print(f"SOCAI_TABLE_SEAL_PUBLIC_KEYS={signer.public_key.hex()}")
    print(f"# key id {signer.key_id}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
