"""What a forwarded call answers when the holder fails: its own refusal as it gave it, or,
when the holder went away mid-call (a rolling restart's SIGTERM, a crash), UNAVAILABLE
``TABLE_OWNER_UNREACHABLE`` with a retry hint, never the transport's INTERNAL.

The one-hour nemesis saw INTERNAL at clients during rolling restarts: calls forwarded to a
table instance that was stopping came back from gRPC's transport as INTERNAL (a stream
reset) without socai's ErrorInfo, and the forwarder passed the code on."""

from __future__ import annotations

import grpc
import pytest
from grpc.aio import AioRpcError, Metadata

from socai import errors
from socai.infra.grpc_errors import error_info, internal_status, rich_status
from socai_table.forward import TRANSPORT_FAILURES, owner_error


def transport(code: grpc.StatusCode, details: str) -> AioRpcError:
    """A call's failure as gRPC's client reports it when no server answered it."""
    return AioRpcError(code, Metadata(), Metadata(), details=details)


def answered(status: grpc.Status) -> AioRpcError:
    """A call's failure as the holder answered it (its status with socai's ErrorInfo)."""
    return AioRpcError(status.code, Metadata(), Metadata(*status.trailing_metadata), details=status.details)


@pytest.mark.parametrize("code", sorted(TRANSPORT_FAILURES, key=lambda c: c.name))
def test_a_holder_gone_mid_call_is_unavailable_with_a_retry_hint(code: grpc.StatusCode) -> None:
    error = owner_error(transport(code, "Received RST_STREAM with error code 2"))
    assert isinstance(error, errors.Unavailable)
    assert error.code == "TABLE_OWNER_UNREACHABLE"
    assert str(error.details["retry_after_ms"]) == "500"
    assert code.name in error.message


def test_the_holders_own_refusal_reaches_the_caller_as_it_gave_it() -> None:
    refused = errors.Unavailable("TABLE_NOT_HELD", "moving; retry", retry_after_ms=250)
    exc = answered(rich_status(refused))
    assert error_info(exc) is not None
    error = owner_error(exc)
    assert isinstance(error, errors.Unavailable)
    assert error.code == "TABLE_NOT_HELD"
    assert str(error.details["retry_after_ms"]) == "250"


def test_a_holders_internal_failure_with_its_reason_stays_internal() -> None:
    """The holder's own INTERNAL (a bug there, with socai's ErrorInfo) is not hidden as a
    retryable outage."""
    error = owner_error(answered(internal_status()))
    assert not isinstance(error, errors.Unavailable)
