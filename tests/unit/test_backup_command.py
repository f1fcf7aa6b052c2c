"""``socai backup`` / ``socai restore``: what they hand PostgreSQL's tools."""

from __future__ import annotations

import os

from socai_cli.backup import _connection


def test_the_password_travels_in_the_environment_never_on_the_command_line() -> None:
    dbname, env = _connection("postgresql://socai:s3cret@db.internal:5432/socai?sslmode=require")
    assert "s3cret" not in dbname
    assert env["PGPASSWORD"] == "s3cret"
    assert set(dbname.split()) == {"user=socai", "dbname=socai", "host=db.internal", "port=5432", "sslmode=require"}


def test_without_a_password_none_is_set() -> None:
    dbname, env = _connection("postgresql://postgres@127.0.0.1:5433/socai")
    assert set(dbname.split()) == {"user=postgres", "dbname=socai", "host=127.0.0.1", "port=5433"}
    assert env.get("PGPASSWORD") == os.environ.get("PGPASSWORD")  # the caller's own, if any
