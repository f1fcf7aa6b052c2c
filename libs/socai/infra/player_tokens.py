"""Player tokens: who a player-scoped call (Join, Act, Leave …) is made for.

A trusted backend, authenticated with its service token, asks the table service for a
token (``IssuePlayerToken``); the player's client then presents it. A token is
``base64url(payload) "." base64url(HMAC-SHA256(key, payload))`` with payload
``{"p": player_id, "exp": unix_seconds}``. The key is ``SOCAI_PLAYER_TOKEN_KEY``. Tokens
are verified in constant time; an expired or forged token is UNAUTHENTICATED.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time

from socai import accounts, errors

TTL_DEFAULT_S = 24 * 3600
TTL_MAX_S = 7 * 24 * 3600
TOKEN_MAX_CHARS = 1024


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_B64URL = re.compile(r"[A-Za-z0-9_-]+")


def _unb64(text: str) -> bytes:
    """Strict unpadded base64url: Python's decoder skips characters outside the alphabet
    and ignores stray trailing bits, so ``a!!b`` would decode like ``ab``. A token has
    exactly one spelling; anything else is refused (ValueError)."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical base64url of its bytes")
    return data


def issue(key: str, player_id: str, ttl_s: int = TTL_DEFAULT_S, now: float | None = None) -> tuple[str, int]:
    """A token for ``player_id``; returns (token, expiry unix seconds).

    Raises InvalidArgument for a malformed player id or a ttl outside 1 s … 7 days.
    """
    if not accounts.is_valid_part(player_id):
        raise errors.InvalidArgument(
            "BAD_PLAYER_ID", f"player id {player_id!r} must be 1-64 of A-Z a-z 0-9 _ . - @, not dots alone"
        )
    if not 0 < ttl_s <= TTL_MAX_S:
        raise errors.InvalidArgument("BAD_TTL", f"ttl_s must be 1..{TTL_MAX_S}")
    expires = int((time.time() if now is None else now) + ttl_s)
    payload = json.dumps({"p": player_id, "exp": expires}, separators=(",", ":"), sort_keys=True).encode()
    signature = hmac.new(key.encode(), payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(signature)}", expires


def verify(key: str | tuple[str, ...], token: str, now: float | None = None) -> str:
    """The player id of a valid token, signed with ``key`` (or any of several: the current
    key and those a rotation still accepts, ``SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED``).

    Raises Unauthenticated("BAD_PLAYER_TOKEN") for a missing, malformed, forged or
    expired token.
    """
    if not token or len(token) > TOKEN_MAX_CHARS or token.count(".") != 1:
        raise errors.Unauthenticated("BAD_PLAYER_TOKEN", "missing or malformed player token")
    payload_text, signature_text = token.split(".")
    try:
        payload = _unb64(payload_text)
        signature = _unb64(signature_text)
    except (ValueError, TypeError) as exc:
        raise errors.Unauthenticated("BAD_PLAYER_TOKEN", "malformed player token") from exc
    keys = (key,) if isinstance(key, str) else key
    if not any(hmac.compare_digest(hmac.new(k.encode(), payload, hashlib.sha256).digest(), signature) for k in keys):
        raise errors.Unauthenticated("BAD_PLAYER_TOKEN", "player token signature does not match")
    try:
        claims = json.loads(payload)
        player_id, expires = str(claims["p"]), int(claims["exp"])
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.Unauthenticated("BAD_PLAYER_TOKEN", "malformed player token claims") from exc
    if expires < (time.time() if now is None else now):
        raise errors.Unauthenticated("BAD_PLAYER_TOKEN", "player token expired")
    return player_id
