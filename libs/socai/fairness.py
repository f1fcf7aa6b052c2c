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
import struct
from collections.abc import Sequence
from typing import TypeVar

from mypy_extensions import mypyc_attr

from socai.errors import InvalidArgument

SEED_BYTES = 32
_TWO_64 = 2**64
_U64 = struct.Struct(">Q")
_SHA256_BLOCK = 64
_SHA256_DIGEST = 32
# HMAC's inner and outer pads (RFC 2104): a key byte XORed with 0x36 / 0x5c, as one
# ``bytes.translate`` each: a stream set up in 1.3–2.5 µs where a generator over the key's 64
# bytes took 5–8, a 52-card shuffle 24 µs against 32–37 with the blocks joined once (timeit,
# compiled, this machine).
_XOR_36 = bytes(b ^ 0x36 for b in range(256))
_XOR_5C = bytes(b ^ 0x5C for b in range(256))
_SEED_HEX = re.compile(r"[0-9a-fA-F]{64}", re.ASCII)  # used with fullmatch
# An empty SHA-256 to copy: ``hashlib.sha256()`` looks the digest up by name in OpenSSL at
# each call, and a replayed hand makes three (the commitment, the stream's two pads).
_SHA256 = hashlib.sha256()
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
    digest = _SHA256.copy()
    digest.update(seed)
    return digest.hexdigest()


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


# Open to interpreted subclasses under mypyc: the fairness tests subclass it to feed it
# chosen bytes (the rejection branch of ``uniform``).
@mypyc_attr(allow_interpreted_subclasses=True)
class ByteStream:
    """The HMAC-SHA256 counter-mode byte stream of a seed, consumed strictly in order.

    Every replayed hand shuffles a deck, so this is on the auditor's and settlement's hot
    path: the HMAC's keyed inner and outer SHA-256 states (RFC 2104: the key padded to the
    block and XORed with 0x36 / 0x5c) are made once per seed and copied per block, which
    is the same HMAC-SHA256 at a third of ``hmac.new(...).digest()``'s cost, and bytes are
    read through a position instead of slicing the buffer after every draw.
    """

    __slots__ = ("_buffer", "_counter", "_inner", "_outer", "_pos")

    def __init__(self, seed: bytes) -> None:
        _check_seed(seed)
        key = bytes(seed).ljust(_SHA256_BLOCK, b"\0")  # a 32-byte key is shorter than the block
        self._inner = _SHA256.copy()
        self._inner.update(key.translate(_XOR_36))
        self._outer = _SHA256.copy()
        self._outer.update(key.translate(_XOR_5C))
        self._counter = 0
        self._buffer = b""
        self._pos = 0

    def _block(self, counter: int) -> bytes:
        """``HMAC-SHA256(seed, counter as 8 bytes big-endian)``."""
        inner = self._inner.copy()
        inner.update(counter.to_bytes(8, "big"))
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def _refill(self, n: int) -> None:
        """Make at least ``n`` unread bytes available."""
        rest = self._buffer[self._pos :]
        counter = self._counter
        blocks = [rest]
        for _ in range(-(-(n - len(rest)) // _SHA256_DIGEST)):
            blocks.append(self._block(counter))
            counter += 1
        self._buffer, self._pos, self._counter = b"".join(blocks), 0, counter

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes of the stream."""
        if n < 0:
            raise ValueError("take(n) needs n >= 0")
        if len(self._buffer) - self._pos < n:
            self._refill(n)
        pos = self._pos
        self._pos = pos + n
        return self._buffer[pos : pos + n]

    def uniform(self, n: int) -> int:
        """An unbiased integer in ``[0, n)`` by rejection sampling on 64-bit draws.

        A draw is discarded with probability ``(2**64 % n) / 2**64``. ``n`` above 2**64
        cannot be drawn from 8 bytes (every draw would be rejected, forever).
        """
        if not 1 <= n <= _TWO_64:
            raise ValueError(f"uniform(n) needs 1 <= n <= 2**64, not {n}")
        limit = _TWO_64 - (_TWO_64 % n)
        while True:
            if len(self._buffer) - self._pos < 8:
                self._refill(8)
            (x,) = _U64.unpack_from(self._buffer, self._pos)
            self._pos += 8
            if x < limit:
                return int(x % n)


def shuffle(seed: bytes, deck: Sequence[T]) -> list[T]:
    """The deck after the seeded Fisher–Yates shuffle; cards are dealt from index 0 onward.

    Fast path: the ``len(deck) - 1`` draws are read from the stream at once; if one of
    them would be rejected (about once in 10**17 decks), the shuffle is done again the
    plain way, draw by draw, which is the definition.
    """
    cards = list(deck)
    draws = len(cards) - 1
    if draws < 1:
        return cards
    stream = ByteStream(seed)
    values = struct.unpack(f">{draws}Q", stream.take(8 * draws))
    for k, i in enumerate(range(draws, 0, -1)):
        bound = i + 1
        x = values[k]
        if x >= _TWO_64 - _TWO_64 % bound:
            return _shuffle_draw_by_draw(seed, deck)
        j = x % bound
        cards[i], cards[j] = cards[j], cards[i]
    return cards


def _shuffle_draw_by_draw(seed: bytes, deck: Sequence[T]) -> list[T]:
    uniform = ByteStream(seed).uniform
    cards = list(deck)
    for i in range(len(cards) - 1, 0, -1):
        j = uniform(i + 1)
        cards[i], cards[j] = cards[j], cards[i]
    return cards


def roll_dice(seed: bytes) -> tuple[int, int, int]:
    """Three dice for Tài Xỉu, each ``1 + uniform(6)``, from the seed's stream."""
    stream = ByteStream(seed)
    return (1 + stream.uniform(6), 1 + stream.uniform(6), 1 + stream.uniform(6))


def _check_seed(seed: bytes) -> None:
    if not isinstance(seed, bytes | bytearray) or len(seed) != SEED_BYTES:
        raise InvalidArgument("BAD_SEED", f"a deck seed is {SEED_BYTES} bytes")
