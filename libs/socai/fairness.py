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
import re
from collections.abc import Sequence
from typing import TypeVar

from socai.errors import InvalidArgument

SEED_BYTES = 32
_TWO_64 = 2**64
_SEED_HEX = re.compile(r"[0-9a-fA-F]{64}", re.ASCII)  # used with fullmatch
T = TypeVar("T")


def new_seed() -> bytes:
    """32 fresh bytes from the operating system's CSPRNG.

    The only randomness in socai's pure code, used by the table before a hand; it is
    imported here so that importing this module (as the rules engine does) draws nothing.
    """
    import secrets

    return secrets.token_bytes(SEED_BYTES)


def commitment(seed: bytes) -> str:
    """Lowercase hex of ``sha256(seed)``, published in ``HandStarted.deck_commitment``."""
    _check_seed(seed)
    return hashlib.sha256(seed).hexdigest()


def seed_from_hex(text: str) -> bytes:
    """Decode a revealed seed; raises InvalidArgument("BAD_SEED") unless it is 64 hex digits.

    ``bytes.fromhex`` alone would also accept spaces between the digits; a seed in an event
    has exactly one spelling apart from letter case.
    """
    if not isinstance(text, str) or _SEED_HEX.fullmatch(text) is None:
        raise InvalidArgument("BAD_SEED", f"deck seed is not {2 * SEED_BYTES} hex digits: {text!r}")
    return bytes.fromhex(text)


def verify_commitment(seed: bytes, deck_commitment: str) -> bool:
    """True when ``seed`` is the one committed to (constant-time comparison).

    A commitment that is not even ASCII text is simply not the seed's (compare_digest
    would raise TypeError on it).
    """
    expected = commitment(seed)
    if not isinstance(deck_commitment, str) or not deck_commitment.isascii():
        return False
    return hmac.compare_digest(expected, deck_commitment.lower())


class ByteStream:
    """The HMAC-SHA256 counter-mode byte stream of a seed, consumed strictly in order."""

    __slots__ = ("_buffer", "_counter", "_seed")

    def __init__(self, seed: bytes) -> None:
        _check_seed(seed)
        self._seed = seed
        self._counter = 0
        self._buffer = b""

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes of the stream."""
        if n < 0:
            raise ValueError("take(n) needs n >= 0")
        while len(self._buffer) < n:
            block = hmac.new(self._seed, self._counter.to_bytes(8, "big"), hashlib.sha256).digest()
            self._buffer += block
            self._counter += 1
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def uniform(self, n: int) -> int:
        """An unbiased integer in ``[0, n)`` by rejection sampling on 64-bit draws.

        A draw is discarded with probability ``(2**64 % n) / 2**64``. ``n`` above 2**64
        cannot be drawn from 8 bytes (every draw would be rejected, forever).
        """
        if not 1 <= n <= _TWO_64:
            raise ValueError(f"uniform(n) needs 1 <= n <= 2**64, not {n}")
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
