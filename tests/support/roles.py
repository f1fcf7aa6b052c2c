"""Databases migrated as the deployment does it: by the owner role, each service as its own.

The migration job connects as ``OWNER_ROLE``, which owns every schema; each service then
connects as its own role (``socai.infra.db.SERVICE_ROLES``) with only the grants the
migrations give it. Tests that try what a role may and may not do start from such a database.
"""

from __future__ import annotations

import psycopg
import pytest

from socai.infra.db import OWNER_ROLE, role_url
from socai_cli import migrations as migrate


def migrate_as_owner(database_url: str) -> str:
    """Migrate the fresh database at ``database_url`` (a superuser's URL) as the owner role,
    as the migration job does; returns ``database_url``, from which ``role_url`` gives each
    role's. Skips the test when the server does not let the roles in without a password
    (a configured server; the embedded one and the containers trust 127.0.0.1)."""
    dbname = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'grant create on database "{dbname}" to "{OWNER_ROLE}"')
    try:
        with psycopg.connect(role_url(database_url, OWNER_ROLE), connect_timeout=5):
            pass
    except psycopg.OperationalError as exc:
        pytest.skip(f"the test server does not let the roles in without a password: {exc}")
    migrate.upgrade_all(role_url(database_url, OWNER_ROLE))
    return database_url
