"""What a refused or failed call tells a client: its status, its reason code and metadata.

Every socai error carries a ``google.rpc.ErrorInfo`` (domain ``socai``) whose reason is a
stable code of the catalogue (docs/api/reason-codes.md); a refusal by a game's rules also
names the seat, the hand and the rule it cites. ``TableError`` is that, as an exception;
``retryable`` is what the API guide says may be tried again with the same idempotency key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

# Statuses a call is tried again after (with the same idempotency key): the service is
# restarting, stalled, or the table is between instances. Everything else is an answer.
RETRYABLE_STATUSES: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class TableError(Exception):
    """A call the service refused or could not serve: ``status`` (gRPC), ``reason`` (the
    ErrorInfo code, e.g. ``CANNOT_BEAT``), ``message`` and ``metadata`` (``seat``,
    ``hand_id``, ``rule`` for a rules refusal; ``retry_after_ms`` where the service says
    when to try again)."""

    def __init__(
        self, status: grpc.StatusCode, reason: str, message: str, metadata: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(status, reason, message)
        self.status = status
        self.reason = reason
        self.message = message
        self.metadata: Mapping[str, str] = dict(metadata or {})

    def __str__(self) -> str:
        return f"{self.status.name} {self.reason}: {self.message}"

    @property
    def retryable(self) -> bool:
        return self.status in RETRYABLE_STATUSES

    @property
    def retry_after_s(self) -> float:
        """The service's hint of when to try again (0: none)."""
        try:
            return int(self.metadata.get("retry_after_ms", "0")) / 1000
        except ValueError:
            return 0.0

    @property
    def rule(self) -> str:
        """The RULES.md rule a rules refusal cites ("" for other errors)."""
        return self.metadata.get("rule", "")


def error_info(exc: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo of a failed call, if the server sent one."""
    try:
        status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    except Exception:  # a status without details, or one that does not decode
        return None
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None


def table_error(exc: grpc.aio.AioRpcError) -> TableError:
    """``exc`` as a ``TableError`` (reason "" when the server sent no ErrorInfo)."""
    info = error_info(exc)
    return TableError(
        exc.code(),
        info.reason if info is not None else "",
        exc.details() or "",
        dict(info.metadata) if info is not None else {},
    )
