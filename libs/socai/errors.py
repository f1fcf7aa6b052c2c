"""The few error types of socai, each with a stable reason code.

Every layer raises these; one table in ``socai.infra.grpc_errors`` maps them to gRPC status
codes with a ``google.rpc.ErrorInfo`` reason. The rules engine raises only ``RuleViolation``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, NoReturn


class SocaiError(Exception):
    """Base class: ``code`` is a stable, machine-readable reason such as ``NOT_YOUR_TURN``."""

    default_code: ClassVar[str] = "INTERNAL"

    def __init__(self, code: str | None = None, message: str = "", **details: object) -> None:
        self.code = code or self.default_code
        self.message = message or self.code
        self.details: Mapping[str, str] = {k: str(v) for k, v in details.items()}
        super().__init__(f"{self.code}: {self.message}" if message else self.code)


class InvalidArgument(SocaiError):
    """Malformed input, rejected at the edge before anything is looked up or written."""

    default_code = "INVALID_ARGUMENT"


class RuleViolation(SocaiError):
    """A move the game's rules do not allow; the state is left unchanged."""

    default_code = "ILLEGAL_MOVE"


class InsufficientFunds(SocaiError):
    """A posting would take an account below zero."""

    default_code = "INSUFFICIENT_FUNDS"


class PreconditionFailed(SocaiError):
    """The request is well formed but the system is not in a state that allows it."""

    default_code = "FAILED_PRECONDITION"


class NotFound(SocaiError):
    default_code = "NOT_FOUND"


class AlreadyExists(SocaiError):
    default_code = "ALREADY_EXISTS"


class Conflict(SocaiError):
    """A retryable conflict: a concurrent writer won (optimistic concurrency, serialization)."""

    default_code = "CONFLICT"


class Unavailable(SocaiError):
    """A dependency (NATS, PostgreSQL, another service) cannot be reached; retry later."""

    default_code = "UNAVAILABLE"


class ResourceExhausted(SocaiError):
    """A limit on what one caller, player or owner may take was reached (calls per second,
    open streams, tables); nothing was done. ``details`` name the limit (``limit``, ``max``)
    and, for a rate, when to try again (``retry_after_ms``)."""

    default_code = "RESOURCE_EXHAUSTED"


class Unauthenticated(SocaiError):
    default_code = "UNAUTHENTICATED"


class PermissionDenied(SocaiError):
    default_code = "PERMISSION_DENIED"


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, marked with "…" when cut."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


SHOWN_MAX_CHARS = 80


def shown(value: object, max_chars: int = SHOWN_MAX_CHARS) -> str:
    """``repr(value)`` for an error message, at most about ``max_chars`` characters.

    Messages quote what the caller sent so that they can see what was wrong; a few dozen
    characters show that, and quoting a 10,000-character input whole only makes the error
    itself too big to deliver.
    """
    if isinstance(value, str) and len(value) > max_chars:
        return f"{value[:max_chars]!r}… ({len(value)} characters)"
    return truncate(repr(value), max_chars + 2)


def check(condition: bool, message: str) -> None:
    """An invariant that is always checked (``assert`` is removed by ``python -O``).

    Raises AssertionError: a broken invariant is a bug, never a user error.
    """
    if not condition:
        broken(message)


def broken(message: str) -> NoReturn:
    """Raise the AssertionError of a broken invariant: ``check``'s failure, for code that has
    tested the condition itself (a hot path formatting its message only on failure, or a
    type check the type checker should narrow on)."""
    raise AssertionError(f"invariant broken: {message}")
