"""structlog setup: JSON lines in services, readable output in a terminal.

Context (``request_id``, ``table_id``, ``hand_id``) is bound through contextvars with
``bind(...)``, so every log line inside a request or a hand carries it without passing a
logger around; while tracing is on (``socai.infra.tracing``) a line written under a span
carries its ``trace_id`` and ``span_id`` too.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from socai.infra.tracing import add_trace_ids

_configured = False


class RotatingLog:
    """A log file that rotates itself by size and takes the process's stdout and stderr along.

    The local stack starts each service with stdout and stderr redirected to its log file,
    so a crash's traceback lands there too. Rotating only the logger's stream would leave
    those descriptors writing into the renamed file forever; on each rotation this class
    therefore points descriptors 1 and 2 at the new file as well (``os.dup2``). Files:
    ``name.log`` (current), ``name.log.1`` … ``name.log.<backups>`` (oldest, then deleted).
    """

    def __init__(self, path: Path, max_bytes: int, backups: int, take_std: bool = True) -> None:
        if max_bytes <= 0 or backups < 1:
            raise ValueError("a rotating log needs max_bytes > 0 and at least one backup")
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self.take_std = take_std
        self._lock = threading.Lock()
        self._file = self._open()

    def _open(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = self.path.open("a", encoding="utf-8", buffering=1)
        if self.take_std:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
        return f

    def _rotate(self) -> None:
        self._file.close()
        for i in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{i + 1}"))
        if self.path.exists():
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        self._file = self._open()

    def write(self, text: str) -> int:
        with self._lock:
            # The size is read from the descriptor: stdout/stderr share the file and write
            # to it behind this object's back.
            if os.fstat(self._file.fileno()).st_size + len(text) > self.max_bytes:
                self._rotate()
            return int(self._file.write(text))

    def flush(self) -> None:
        with self._lock:
            self._file.flush()


def configure(
    fmt: str = "json",
    level: str = "info",
    stream: Any = None,
    log_file: str | None = None,
    max_bytes: int = 50 * 1024 * 1024,
    backups: int = 5,
) -> None:
    """Configure structlog and the standard library logging once per process.

    With ``log_file`` the lines go to that file, rotated by size (``RotatingLog``).
    """
    global _configured
    if log_file:
        stream = RotatingLog(Path(log_file), max_bytes, backups)
    lvl = getattr(logging, level.upper(), logging.INFO)
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,  # trace_id and span_id while a span is current (socai.infra.tracing)
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
