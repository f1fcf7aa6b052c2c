"""structlog setup: JSON lines in services, readable output in a terminal.

Context (``request_id``, ``table_id``, ``hand_id``) is bound through contextvars with
``bind(...)``, so every log line inside a request or a hand carries it without passing a
logger around.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

_configured = False


def configure(fmt: str = "json", level: str = "info", stream: Any = None) -> None:
    """Configure structlog and the standard library logging once per process."""
    global _configured
    lvl = getattr(logging, level.upper(), logging.INFO)
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(lvl, logging.WARNING), stream=stream or sys.stderr, format="%(message)s")
    _configured = True


def get_logger(name: str | None = None) -> Any:
    return structlog.get_logger(name) if name else structlog.get_logger()


@contextmanager
def bound(**context: Any) -> Iterator[None]:
    """Bind ``context`` (request_id, table_id, hand_id …) for the duration of a block."""
    tokens = structlog.contextvars.bind_contextvars(**context)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
