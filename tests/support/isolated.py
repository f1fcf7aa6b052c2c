"""What a test (or a module of tests) gets of its own on the shared servers: a database and
a stream. ``tests/conftest.py`` gives one of each to every test that asks; a module whose
tests only read can share one, set up once, through these."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from socai.infra.nats import StreamSpec


def with_database(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name`` (query parameters kept)."""
    base, _, rest = url.rpartition("/")
    query = ""
    if "?" in rest:
        query = "?" + rest.split("?", 1)[1]
    return f"{base}/{name}{query}"


@contextmanager
def fresh_database(admin_url: str, *, migrated: bool = False) -> Iterator[str]:
    """A new, empty database on the server of ``admin_url`` (every service's migrations
    applied when ``migrated``), dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    url = with_database(admin_url, name)
    try:
        if migrated:
            from socai_cli import migrations as migrate

            migrate.upgrade_all(url)
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


def new_stream_spec() -> StreamSpec:
    """A stream name and subject prefix no other test uses."""
    token = uuid.uuid4().hex[:12]
    return StreamSpec(name=f"T_{token.upper()}", subjects=(f"t{token}.events.>",))
