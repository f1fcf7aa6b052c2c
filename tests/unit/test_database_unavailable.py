"""Which driver errors are "PostgreSQL is unavailable" (``grpc_errors.database_unavailable``)."""

from __future__ import annotations

import grpc
import psycopg
import psycopg.errors
import pytest
from psycopg_pool import PoolClosed, PoolTimeout

from socai import errors
from socai.infra.grpc_errors import database_unavailable, status_code_of


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.OperationalError("connection failed: Connection refused"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.InterfaceError("the connection is closed"),
        PoolTimeout("couldn't get a connection after 10.00 sec"),
        PoolClosed("the pool 'socai-settlement' is already closed"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_a_connection_failure_is_unavailable_and_quotes_no_address(exc: BaseException):
    mapped = database_unavailable(exc)
    assert isinstance(mapped, errors.Unavailable)
    assert mapped.code == "DATABASE_UNAVAILABLE"
    assert status_code_of(mapped) is grpc.StatusCode.UNAVAILABLE
    assert "Connection refused" not in mapped.message  # the class name only, never the driver's text


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.errors.SerializationFailure("could not serialize access"),  # a conflict, not an outage
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.UniqueViolation("duplicate key"),
        psycopg.errors.UndefinedTable('relation "socai_settlement.settlements" does not exist'),  # a bug, not an outage
        ValueError("not a database error"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_anything_else_is_not(exc: BaseException):
    assert database_unavailable(exc) is None
