"""How a command that outlived its caller (``socai_table.table.run_to_end``) is logged.

The nemesis hour logged 100 ``command_failed_after_caller_left`` errors with tracebacks,
all a NATS read timing out while NATS was paused: an outage the caller would have been told
about as UNAVAILABLE, not a fault of the service. A dependency's outage is a warning; a
refusal is routine; anything else is still an error with its traceback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import nats.errors
import pytest
import structlog
from structlog.testing import capture_logs

from socai import errors
from socai_table.table import run_to_end


@pytest.fixture(autouse=True)
def info_lines() -> Iterator[None]:
    previous = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    structlog.configure(wrapper_class=previous)


async def outcome_of(failure: BaseException, *, same_turn: bool = False) -> list[dict[str, object]]:
    """The log lines of a command failing with ``failure`` after its caller left; with
    ``same_turn`` it ends in the same turn of the event loop as the caller's cancellation."""
    gate = asyncio.Event()

    async def command() -> None:
        await gate.wait()
        raise failure

    caller = asyncio.ensure_future(run_to_end(command(), "act", "t1"))
    await asyncio.sleep(0)
    with capture_logs() as logs:
        if same_turn:
            gate.set()
        caller.cancel()  # the caller leaves; the command runs on
        await asyncio.sleep(0)
        gate.set()
        for _ in range(5):
            await asyncio.sleep(0)
    assert caller.cancelled()
    return [e for e in logs if "after_caller_left" in str(e["event"])]


async def test_a_nats_timeout_after_the_caller_left_is_a_warning_without_a_traceback():
    [line] = await outcome_of(nats.errors.TimeoutError())
    assert (line["event"], line["log_level"]) == ("command_unavailable_after_caller_left", "warning")
    assert "exc_info" not in line


async def test_a_command_ending_as_its_caller_leaves_is_logged_too():
    [line] = await outcome_of(KeyError("seat"), same_turn=True)
    assert (line["event"], line["log_level"]) == ("command_failed_after_caller_left", "error")


async def test_a_refusal_after_the_caller_left_is_routine_and_a_bug_is_an_error():
    [refused] = await outcome_of(errors.RuleViolation("NOT_YOUR_TURN", "seat 2 acted out of turn"))
    assert (refused["event"], refused["log_level"], refused["code"]) == (
        "command_refused_after_caller_left",
        "info",
        "NOT_YOUR_TURN",
    )
    [bug] = await outcome_of(KeyError("seat"))
    assert (bug["event"], bug["log_level"]) == ("command_failed_after_caller_left", "error")
    assert isinstance(bug["exc_info"], KeyError)
