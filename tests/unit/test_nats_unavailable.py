"""Which nats-py errors are "NATS is unavailable" (``grpc_errors.nats_unavailable``): the
safety net that keeps a NATS call a service did not map itself from answering INTERNAL."""

from __future__ import annotations

import grpc
import nats.errors
import nats.js.errors
import pytest

from socai import errors
from socai.infra.grpc_errors import nats_unavailable, status_code_of


@pytest.mark.parametrize(
    "exc",
    [
        nats.errors.TimeoutError(),  # a request or a KV read with NATS paused: the 40 INTERNALs
        nats.errors.FlushTimeoutError(),
        nats.errors.NoRespondersError(),
        nats.errors.ConnectionClosedError(),
        nats.errors.ConnectionReconnectingError(),
        nats.errors.StaleConnectionError(),
        nats.errors.OutboundBufferLimitError(),
        nats.js.errors.ServiceUnavailableError(),
        nats.js.errors.NoStreamResponseError(),
        nats.js.errors.FetchTimeoutError(),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_a_failure_to_reach_nats_is_unavailable(exc: BaseException) -> None:
    mapped = nats_unavailable(exc)
    assert isinstance(mapped, errors.Unavailable)
    assert mapped.code == "NATS_UNAVAILABLE"
    assert status_code_of(mapped) is grpc.StatusCode.UNAVAILABLE
    assert type(exc).__name__ in mapped.message


@pytest.mark.parametrize(
    "exc",
    [
        nats.js.errors.NotFoundError(),  # an answer, mapped where the call is made
        nats.js.errors.KeyWrongLastSequenceError(),
        nats.js.errors.BadRequestError(),
        nats.errors.BadSubjectError(),  # a bug, not an outage
        TimeoutError(),  # not nats-py's: nothing says what timed out
        ValueError("not a NATS error"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_anything_else_is_not(exc: BaseException) -> None:
    assert nats_unavailable(exc) is None
