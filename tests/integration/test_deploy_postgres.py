"""deploy/postgres/auditor-role.sql on a real PostgreSQL: the auditors' role reads every
service schema and can change nothing.

Roles are cluster-wide and the test server is shared, so the script runs under a unique role
name and the role is dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest

from socai.infra.db import SERVICE_SCHEMAS

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "postgres" / "auditor-role.sql"


def _as_user(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{quote(user)}:{quote(password)}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@pytest.fixture
def auditor(migrated_database_url: str) -> Iterator[tuple[str, str]]:
    role = f"socai_auditor_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    script = SCRIPT.read_text()
    assert script.count("socai_auditor") == 4 and script.count("'dev-auditor-db-password'") == 1
    script = script.replace("socai_auditor", role).replace("'dev-auditor-db-password'", f"'{password}'")
    with psycopg.connect(migrated_database_url, autocommit=True) as conn:
        conn.execute(script)  # type: ignore[arg-type]
        conn.execute(script)  # type: ignore[arg-type]  # idempotent: a restart re-runs nothing harmful
    try:
        yield role, _as_user(migrated_database_url, role, password)
    finally:
        with psycopg.connect(migrated_database_url, autocommit=True) as conn:
            conn.execute(f'drop owned by "{role}"')
            conn.execute(f'drop role "{role}"')


def test_the_auditor_role_reads_every_schema_and_writes_nothing(auditor: tuple[str, str]) -> None:
    role, url = auditor
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("select current_user").fetchone() == (role,)
        for schema in SERVICE_SCHEMAS.values():
            (version,) = conn.execute(f'select count(*) from "{schema}".alembic_version').fetchone()  # type: ignore[misc]
            assert version == 1, schema
        assert conn.execute("show default_transaction_read_only").fetchone() == ("on",)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute('delete from "socai_ledger".alembic_version')
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("create table public.audit_scratch (x int)")
        # Even with the read-only default switched off, the role holds no write privilege.
        conn.execute("set default_transaction_read_only = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute('delete from "socai_ledger".alembic_version')
