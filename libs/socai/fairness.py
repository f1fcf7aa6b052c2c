"""Provably fair dealing, exactly as DESIGN.md "Fairness" fixes it, byte for byte.

1. ``seed`` is 32 bytes from the OS CSPRNG (``new_seed``); the commitment published before
   the hand is ``sha256(seed).hexdigest()``; the seed is revealed when the hand ends.
2. The byte stream is ``HMAC-SHA256(key=seed, msg=counter)`` for counter = 0, 1, 2, …
   as 8-byte big-endian, concatenated; bytes are consumed in order and never reused.
3. ``uniform(n)``: take 8 bytes as a big-endian unsigned ``x``; reject and retake while
   ``x >= 2**64 - (2**64 % n)``; return ``x % n``.
4. Shuffle: Fisher–Yates from the last index down, ``j = uniform(i + 1)``.
5. Dice: three dice, each ``1 + uniform(6)``, from the stream of a fresh seed.

Test vectors an auditor can check a reimplementation against are in ``FAIRNESS.md``
beside this file; ``tests/unit/test_fairness.py`` pins them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from typing import TypeVar

from socai.errors import InvalidArgument

SEED_BYTES = 32
_TWO_64 = 2**64
T = TypeVar("T")


def new_seed() -> bytes:
    """32 fresh bytes from the operating system's CSPRNG."""
    return secrets.token_bytes(SEED_BYTES)


def commitment(seed: bytes) -> str:
    """Lowercase hex of ``sha256(seed)``, published in ``HandStarted.deck_commitment``."""
    _check_seed(seed)
    return hashlib.sha256(seed).hexdigest()


def seed_from_hex(text: str) -> bytes:
    """Decode a revealed seed; raises InvalidArgument("BAD_SEED") unless it is 64 hex digits."""
    try:
        seed = bytes.fromhex(text)
    except ValueError as exc:
        raise InvalidArgument("BAD_SEED", f"deck seed is not hex: {text!r}") from exc
    _check_seed(seed)
    return seed


def verify_commitment(seed: bytes, deck_commitment: str) -> bool:
    """True when ``seed`` is the one committed to (constant-time comparison)."""
    return hmac.compare_digest(commitment(seed), deck_commitment.lower())


class ByteStream:
    """The HMAC-SHA256 counter-mode byte stream of a seed, consumed strictly in order."""

    __slots__ = ("_buffer", "_counter", "_seed")

    def __init__(self, seed: bytes) -> None:
        _check_seed(seed)
        self._seed = seed
        self._counter = 0
        self._buffer = b""

    def take(self, n: int) -> bytes:
        while len(self._buffer) < n:
            block = hmac.new(self._seed, self._counter.to_bytes(8, "big"), hashlib.sha256).digest()
            self._buffer += block
            self._counter += 1
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def uniform(self, n: int) -> int:
        """An unbiased integer in ``[0, n)`` by rejection sampling on 64-bit draws."""
        if n <= 0:
            raise ValueError("uniform(n) needs n >= 1")
        limit = _TWO_64 - (_TWO_64 % n)
        while True:
            x = int.from_bytes(self.take(8), "big")
            if x < limit:
                return x % n


def shuffle(seed: bytes, deck: Sequence[T]) -> list[T]:
    """The deck after the seeded Fisher–Yates shuffle; cards are dealt from index 0 onward."""
    stream = ByteStream(seed)
    cards = list(deck)
    for i in range(len(cards) - 1, 0, -1):
        j = stream.uniform(i + 1)
        cards[i], cards[j] = cards[j], cards[i]
    return cards


def roll_dice(seed: bytes) -> tuple[int, int, int]:
    """Three dice for Tài Xỉu, each ``1 + uniform(6)``, from the seed's stream."""
    stream = ByteStream(seed)
    return (1 + stream.uniform(6), 1 + stream.uniform(6), 1 + stream.uniform(6))


def _check_seed(seed: bytes) -> None:
    if not isinstance(seed, bytes | bytearray) or len(seed) != SEED_BYTES:
        raise InvalidArgument("BAD_SEED", f"a deck seed is {SEED_BYTES} bytes")
