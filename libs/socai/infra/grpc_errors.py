"""One table maps domain errors to gRPC status codes, with a google.rpc.ErrorInfo reason.

Servers raise ``SocaiError`` subclasses; the server interceptor turns them into a rich
status (code, message, ``ErrorInfo{reason, domain="socai", metadata}``). Clients read the
reason back with ``error_reason``. Anything else becomes INTERNAL with a generic message;
the details go to the log, never to the caller. A failure to reach PostgreSQL or NATS is not
"anything else": ``database_unavailable`` names it ``Unavailable("DATABASE_UNAVAILABLE")``
(each service's store raises that, so a database outage answers UNAVAILABLE) and
``nats_unavailable`` ``Unavailable("NATS_UNAVAILABLE")`` (where a service did not map a
NATS call's failure itself).

What goes back is capped (``MESSAGE_MAX_CHARS``, ``DETAIL_VALUE_MAX_CHARS``,
``DETAILS_MAX_CHARS``): messages quote the caller's input, and the status travels in the
response's trailing metadata (the message twice: ``grpc-message`` and the status details),
which clients refuse beyond 8 KB. Without the cap, a 10,000-character account id came back
as ~20 KB of trailers and the caller saw RESOURCE_EXHAUSTED instead of INVALID_ARGUMENT.
"""

from __future__ import annotations

import sys
from typing import Final

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from socai import errors

DOMAIN: Final = "socai"
MESSAGE_MAX_CHARS: Final = 512
DETAIL_VALUE_MAX_CHARS: Final = 256
DETAILS_MAX_CHARS: Final = 1024  # all ErrorInfo metadata keys and values together

# The one table (DESIGN.md "Errors").
STATUS_OF: Final[dict[type[errors.SocaiError], grpc.StatusCode]] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.RuleViolation: grpc.StatusCode.FAILED_PRECONDITION,
    errors.InsufficientFunds: grpc.StatusCode.FAILED_PRECONDITION,
    errors.PreconditionFailed: grpc.StatusCode.FAILED_PRECONDITION,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.Conflict: grpc.StatusCode.ABORTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
}


def status_code_of(exc: errors.SocaiError) -> grpc.StatusCode:
    for cls in type(exc).__mro__:
        code = STATUS_OF.get(cls)  # type: ignore[call-overload]
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


DATABASE_UNAVAILABLE: Final = "DATABASE_UNAVAILABLE"
# SQLSTATE class 40 (serialization failure, deadlock) is psycopg's OperationalError too, but
# it is a conflict between transactions on a working connection, not an unreachable database.
_CONFLICT_SQLSTATE_CLASS: Final = "40"


def database_unavailable(exc: BaseException) -> errors.Unavailable | None:
    """``Unavailable("DATABASE_UNAVAILABLE")`` when ``exc`` is a failure to reach PostgreSQL or
    a connection to it that failed, else None.

    Those are psycopg's OperationalError and InterfaceError and their subclasses (a refused
    connection, ``AdminShutdown`` on a connection that outlived a restart, psycopg_pool's
    ``PoolTimeout``, a statement timeout). The message names the error's class only: a
    driver's message quotes the server's address, which is no business of the caller's.

    psycopg is looked up among the modules already imported, not imported here: an
    exception cannot come from a driver nobody imported, and importing it would cost every
    client of this module (the ``socai`` command) its import time.
    """
    psycopg = sys.modules.get("psycopg")
    if psycopg is None or not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return None
    if (getattr(exc, "sqlstate", None) or "").startswith(_CONFLICT_SQLSTATE_CLASS):
        return None
    return errors.Unavailable(DATABASE_UNAVAILABLE, f"PostgreSQL is unavailable ({type(exc).__name__}); retry later")


NATS_UNAVAILABLE: Final = "NATS_UNAVAILABLE"
# nats-py's failures to get an answer at all (a timeout, no responder, a connection closed,
# stale or reconnecting) and JetStream's "service unavailable": a dependency, not a fault of
# the server's own. JetStream's other API errors (not found, wrong last sequence …) are
# answers that a service maps where it makes the call.
_NATS_TRANSPORT_ERRORS: Final = (
    "TimeoutError",
    "FlushTimeoutError",
    "NoRespondersError",
    "StaleConnectionError",
    "UnexpectedEOF",
    "OutboundBufferLimitError",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "ConnectionReconnectingError",
    "NoServersError",
    "SlowConsumerError",
    "ServiceUnavailableError",
    "NoStreamResponseError",
    "FetchTimeoutError",
)


def nats_unavailable(exc: BaseException) -> errors.Unavailable | None:
    """``Unavailable("NATS_UNAVAILABLE")`` when ``exc`` is nats-py's failure to reach NATS or
    get its answer in time, else None. Like ``database_unavailable``, looked up among the
    modules already imported, and the message names the error's class only."""
    nats_errors = sys.modules.get("nats.errors")
    if nats_errors is None or not isinstance(exc, nats_errors.Error):
        return None
    if not any(
        cls.__module__.startswith("nats.") and cls.__name__ in _NATS_TRANSPORT_ERRORS for cls in type(exc).__mro__
    ):
        return None
    return errors.Unavailable(NATS_UNAVAILABLE, f"NATS is unavailable ({type(exc).__name__}); retry later")


def rich_status(exc: errors.SocaiError) -> grpc.Status:
    code = status_code_of(exc)
    metadata: dict[str, str] = {}
    budget = DETAILS_MAX_CHARS
    for key, value in exc.details.items():
        key, value = errors.truncate(key, DETAIL_VALUE_MAX_CHARS), errors.truncate(value, DETAIL_VALUE_MAX_CHARS)
        budget -= len(key) + len(value)
        if budget < 0:
            break  # the first details are the ones a caller needs (the reason's own context)
        metadata[key] = value
    info = error_details_pb2.ErrorInfo(
        reason=errors.truncate(exc.code, DETAIL_VALUE_MAX_CHARS), domain=DOMAIN, metadata=metadata
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    message = errors.truncate(exc.message, MESSAGE_MAX_CHARS)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    return rpc_status.to_status(status)


def internal_status() -> grpc.Status:
    info = error_details_pb2.ErrorInfo(reason="INTERNAL", domain=DOMAIN)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code_pb2.INTERNAL, message="internal error", details=[detail])
    return rpc_status.to_status(status)


def error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo of a failed call, if the server sent one."""
    try:
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
    except Exception:
        status = None
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None


def error_reason(err: grpc.RpcError) -> str:
    """The ErrorInfo reason of a failed call ("" when absent)."""
    info = error_info(err)
    return info.reason if info else ""


_ERROR_OF: Final[dict[grpc.StatusCode, type[errors.SocaiError]]] = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: errors.PreconditionFailed,
    grpc.StatusCode.NOT_FOUND: errors.NotFound,
    grpc.StatusCode.ALREADY_EXISTS: errors.AlreadyExists,
    grpc.StatusCode.ABORTED: errors.Conflict,
    grpc.StatusCode.UNAVAILABLE: errors.Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.ResourceExhausted,
    grpc.StatusCode.UNAUTHENTICATED: errors.Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDenied,
}


def from_rpc_error(err: grpc.RpcError) -> errors.SocaiError:
    """Turn a failed call back into a domain error (for service-to-service clients), with
    the ErrorInfo metadata as its details."""
    info = error_info(err)
    reason = info.reason if info else ""
    details = dict(info.metadata) if info else {}
    code = err.code()  # type: ignore[attr-defined]
    message = err.details() or reason or code.name  # type: ignore[attr-defined]
    if code == grpc.StatusCode.FAILED_PRECONDITION and reason == "INSUFFICIENT_FUNDS":
        exc: errors.SocaiError = errors.InsufficientFunds(reason, message)
    else:
        exc = _ERROR_OF.get(code, errors.SocaiError)(reason or None, message)
    exc.details = details  # set, not passed: a key may be a parameter's name ("code", "message")
    return exc
