"""Every service's migrations build its schema from empty and are reversible."""

from __future__ import annotations

import psycopg
import pytest

from socai.infra import migrate
from socai.infra.db import SERVICE_SCHEMAS

pytestmark = pytest.mark.integration


def tables(url: str, schema: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select table_name from information_schema.tables where table_schema = %s", (schema,)
        ).fetchall()
    return {r[0] for r in rows}


def version(url: str, schema: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(f'select version_num from "{schema}".alembic_version').fetchone()
    return row[0] if row else None


@pytest.mark.parametrize("service", sorted(SERVICE_SCHEMAS))
def test_migrations_create_the_schema_from_empty_and_are_reversible(database_url: str, service: str):
    schema = SERVICE_SCHEMAS[service]
    assert tables(database_url, schema) == set()

    migrate.upgrade(database_url, service)
    created = tables(database_url, schema) - {"alembic_version"}
    assert created, f"{service} migrations created no tables"
    head = version(database_url, schema)
    assert head is not None

    migrate.downgrade(database_url, service, "base")
    assert tables(database_url, schema) == {"alembic_version"}
    assert version(database_url, schema) is None

    migrate.upgrade(database_url, service)
    assert tables(database_url, schema) - {"alembic_version"} == created
    assert version(database_url, schema) == head


def test_each_service_keeps_to_its_own_schema(database_url: str):
    migrate.upgrade_all(database_url)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "select distinct table_schema from information_schema.tables "
            "where table_schema not in ('pg_catalog', 'information_schema')"
        ).fetchall()
    assert {r[0] for r in rows} == set(SERVICE_SCHEMAS.values())
