"""Every service's migrations build its schema from empty and are reversible."""

from __future__ import annotations

import psycopg
import pytest
from alembic.script import ScriptDirectory

from socai.infra.db import AUDITOR_ROLE, OWNER_ROLE, SERVICE_ROLES, SERVICE_SCHEMAS, give_schemas_to_owner, role_url
from socai_cli import migrations as migrate

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
def test_migrations_create_the_schema_from_empty_and_are_reversible(database_url: str, service: str) -> None:
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


def test_each_service_keeps_to_its_own_schema(database_url: str) -> None:
    migrate.upgrade_all(database_url)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "select distinct table_schema from information_schema.tables "
            "where table_schema not in ('pg_catalog', 'information_schema')"
        ).fetchall()
    assert {r[0] for r in rows} == set(SERVICE_SCHEMAS.values())


# Every role's privileges on every service table, as the migrations grant them (deploy/README.md,
# "PostgreSQL roles"). A table missing here fails the test: a new table needs a decision.
SELECT, INSERT, UPDATE, DELETE = "SELECT", "INSERT", "UPDATE", "DELETE"
LEDGER, TABLE, SETTLEMENT = (SERVICE_ROLES[s] for s in ("ledger", "table", "settlement"))
EXPECTED_GRANTS: dict[tuple[str, str], dict[str, set[str]]] = {
    ("socai_ledger", "transactions"): {LEDGER: {SELECT, INSERT}, AUDITOR_ROLE: {SELECT}},
    ("socai_ledger", "entries"): {LEDGER: {SELECT, INSERT}, AUDITOR_ROLE: {SELECT}},
    ("socai_ledger", "accounts"): {LEDGER: {SELECT, INSERT}, AUDITOR_ROLE: {SELECT}},
    ("socai_ledger", "outbox"): {LEDGER: {SELECT, INSERT, DELETE}},
    ("socai_ledger", "outbox_progress"): {LEDGER: {SELECT, UPDATE}},
    ("socai_ledger", "journal_checks"): {},  # the trigger functions only
    ("socai_ledger", "lease_fence"): {LEDGER: {SELECT, INSERT}, AUDITOR_ROLE: {SELECT}},
    ("socai_ledger", "holds"): {LEDGER: {SELECT, INSERT}, AUDITOR_ROLE: {SELECT}},
    ("socai_ledger", "service_meta"): {},
    ("socai_ledger", "alembic_version"): {AUDITOR_ROLE: {SELECT}},
    ("socai_table", "tables"): {TABLE: {SELECT, INSERT, UPDATE, DELETE}},
    ("socai_table", "hand_seeds"): {TABLE: {SELECT, INSERT, UPDATE}},
    ("socai_table", "joins"): {TABLE: {SELECT, INSERT, UPDATE}},
    ("socai_table", "cashouts"): {TABLE: {SELECT, INSERT, UPDATE}},
    ("socai_table", "quarantine"): {TABLE: {SELECT, INSERT, UPDATE}},
    ("socai_table", "service_meta"): {},
    ("socai_table", "alembic_version"): {},
    ("socai_settlement", "settlements"): {SETTLEMENT: {SELECT, INSERT}, AUDITOR_ROLE: {SELECT}},
    ("socai_settlement", "settlement_seats"): {SETTLEMENT: {SELECT, INSERT}, AUDITOR_ROLE: {SELECT}},
    ("socai_settlement", "dead_letters"): {SETTLEMENT: {SELECT, INSERT, UPDATE}, AUDITOR_ROLE: {SELECT}},
    ("socai_settlement", "delivery_attempts"): {SETTLEMENT: {SELECT, INSERT, UPDATE, DELETE}},
    ("socai_settlement", "service_meta"): {},
    ("socai_settlement", "alembic_version"): {AUDITOR_ROLE: {SELECT}},
}
# Column grants: the ledger moves a balance (and its version) only; the triggers see to how.
EXPECTED_COLUMN_GRANTS = {
    (LEDGER, "socai_ledger", "accounts", "balance_gold", UPDATE),
    (LEDGER, "socai_ledger", "accounts", "version", UPDATE),
    # A fence's token moves forward (a trigger refuses it going back); its key never changes.
    (LEDGER, "socai_ledger", "lease_fence", "token", UPDATE),
    (LEDGER, "socai_ledger", "lease_fence", "updated_at", UPDATE),
    # A hold's amount and status move (a trigger says which way; the account's held_gold
    # follows by the holds' own trigger); who and what a hold is for never change.
    *(
        (LEDGER, "socai_ledger", "holds", column, UPDATE)
        for column in (
            "amount_gold",
            "status",
            "updated_at",
            "released_at",
            "released_by",
            "release_transaction_id",
            "release_reason",
        )
    ),
}


def test_each_role_holds_exactly_the_privileges_its_service_needs(migrated_database_url: str) -> None:
    roles = [*SERVICE_ROLES.values(), AUDITOR_ROLE]
    schemas = list(SERVICE_SCHEMAS.values())
    with psycopg.connect(migrated_database_url) as conn:
        tables = conn.execute(
            "select n.nspname, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname = any(%s) and c.relkind in ('r', 'p', 'v', 'm')",
            (schemas,),
        ).fetchall()
        table_grants = conn.execute(
            "select n.nspname, c.relname, r.rolname, a.privilege_type "
            "from pg_class c join pg_namespace n on n.oid = c.relnamespace "
            "cross join lateral aclexplode(c.relacl) a join pg_roles r on r.oid = a.grantee "
            "where n.nspname = any(%s) and r.rolname = any(%s)",
            (schemas, roles),
        ).fetchall()
        column_grants = conn.execute(
            "select r.rolname, n.nspname, c.relname, t.attname, a.privilege_type "
            "from pg_attribute t join pg_class c on c.oid = t.attrelid join pg_namespace n on n.oid = c.relnamespace "
            "cross join lateral aclexplode(t.attacl) a join pg_roles r on r.oid = a.grantee "
            "where n.nspname = any(%s) and r.rolname = any(%s)",
            (schemas, roles),
        ).fetchall()
        usage = conn.execute(
            "select n.nspname, r.rolname from pg_namespace n cross join lateral aclexplode(n.nspacl) a "
            "join pg_roles r on r.oid = a.grantee where n.nspname = any(%s) and r.rolname = any(%s) "
            "and a.privilege_type = 'USAGE'",
            (schemas, roles),
        ).fetchall()
    assert {(schema, name) for schema, name in tables} == set(EXPECTED_GRANTS), "a table needs its grants decided"
    found: dict[tuple[str, str], dict[str, set[str]]] = {key: {} for key in EXPECTED_GRANTS}
    for schema, name, role, privilege in table_grants:
        found[(schema, name)].setdefault(role, set()).add(privilege)
    assert found == EXPECTED_GRANTS
    assert set(column_grants) == EXPECTED_COLUMN_GRANTS
    assert set(usage) == {
        ("socai_ledger", LEDGER),
        ("socai_ledger", AUDITOR_ROLE),
        ("socai_table", TABLE),
        ("socai_settlement", SETTLEMENT),
        ("socai_settlement", AUDITOR_ROLE),
    }, "no role but the table service's may even look into socai_table"


def test_schemas_a_superuser_migrated_pass_to_the_owner_who_migrates_on(database_url: str) -> None:
    """Data from before the roles (the embedded server's var/pg): the superuser's objects
    become the owner's, and the owner's migrations run on them."""
    dbname = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    for service in SERVICE_SCHEMAS:
        migrate.upgrade(database_url, service, f"{service}_0002")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'grant create on database "{dbname}" to "{OWNER_ROLE}"')
    give_schemas_to_owner(database_url)
    give_schemas_to_owner(database_url)  # idempotent
    owner_url = role_url(database_url, OWNER_ROLE)
    try:
        psycopg.connect(owner_url, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"the test server does not let the owner in without a password: {exc}")
    migrate.upgrade_all(owner_url)
    with psycopg.connect(database_url) as conn:
        owners = conn.execute(
            "select distinct pg_get_userbyid(c.relowner) from pg_class c join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname = any(%s) union select distinct pg_get_userbyid(nspowner) from pg_namespace "
            "where nspname = any(%s) union select distinct pg_get_userbyid(p.proowner) from pg_proc p "
            "join pg_namespace n on n.oid = p.pronamespace where n.nspname = any(%s)",
            (list(SERVICE_SCHEMAS.values()),) * 3,
        ).fetchall()
    assert owners == [(OWNER_ROLE,)]
    for service, schema in SERVICE_SCHEMAS.items():
        head = ScriptDirectory.from_config(
            migrate.migrate.alembic_config(database_url, SERVICE_SCHEMAS[service], migrate.location(service))
        ).get_current_head()
        assert version(database_url, schema) == head
