"""deploy/postgres/*.sql on a real PostgreSQL: the roles compose creates before migrating.

The auditor reads the ledger and the settlement records and nothing of the table service —
above all not ``socai_table.hand_seeds``, whose seed of a hand in play gives every card
before it is dealt — and can change nothing. The service roles log in and own nothing.

Roles are cluster-wide and the test server is shared, but the scripts only create a role
that is missing and the test server already has them (``ensure_roles``): running them
again is what a restart does, and must change nothing harmful.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

from socai.infra.db import AUDITOR_ROLE, SERVICE_ROLES, role_url

pytestmark = pytest.mark.integration

POSTGRES = Path(__file__).resolve().parents[2] / "deploy" / "postgres"
AUDITOR_SCRIPT = POSTGRES / "auditor-role.sql"
SERVICE_SCRIPT = POSTGRES / "service-roles.sql"

# What an audit reads: the journal, the balances and the settlement records.
AUDITOR_READS = (
    "socai_ledger.accounts",
    "socai_ledger.transactions",
    "socai_ledger.entries",
    "socai_settlement.settlements",
    "socai_settlement.settlement_seats",
    "socai_settlement.dead_letters",
)


@pytest.fixture
def scripted(migrated_database_url: str) -> str:
    """The migrated database after both scripts ran (twice: a restart re-runs them)."""
    with psycopg.connect(migrated_database_url, autocommit=True) as conn:
        for script in (SERVICE_SCRIPT, AUDITOR_SCRIPT, SERVICE_SCRIPT, AUDITOR_SCRIPT):
            conn.execute(script.read_text())  # type: ignore[arg-type]
    return migrated_database_url


def test_the_auditor_script_grants_no_blanket_read() -> None:
    statements = [line for line in AUDITOR_SCRIPT.read_text().splitlines() if not line.startswith("--")]
    assert not [line for line in statements if "GRANT" in line.upper()], "the migrations grant, table by table"
    assert "ALTER ROLE socai_auditor SET default_transaction_read_only = on;" in statements


def test_the_auditor_reads_the_ledger_and_the_settlements(scripted: str) -> None:
    with psycopg.connect(role_url(scripted, AUDITOR_ROLE), autocommit=True) as conn:
        assert conn.execute("select current_user").fetchone() == (AUDITOR_ROLE,)
        for table in AUDITOR_READS:
            conn.execute(f"select count(*) from {table}")
        assert conn.execute("select count(*) from socai_ledger.alembic_version").fetchone() == (1,)
        assert conn.execute("show default_transaction_read_only").fetchone() == ("on",)


@pytest.mark.parametrize(
    "statement",
    [
        "select seed from socai_table.hand_seeds",
        "select * from socai_table.tables",
        "select * from socai_table.joins",
        "select * from socai_ledger.outbox",
        "select * from socai_ledger.journal_checks",
    ],
)
def test_the_auditor_never_reads_the_hand_seeds_or_what_it_does_not_need(scripted: str, statement: str) -> None:
    with psycopg.connect(role_url(scripted, AUDITOR_ROLE), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
        (member_of,) = conn.execute(
            "select array_agg(r.rolname::text) from pg_auth_members m join pg_roles r on r.oid = m.roleid "
            "where m.member = (select oid from pg_roles where rolname = current_user)"
        ).fetchone() or (None,)
        assert not member_of, f"the auditor inherits {member_of}"


def test_the_auditor_writes_nothing(scripted: str) -> None:
    with psycopg.connect(role_url(scripted, AUDITOR_ROLE), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("delete from socai_ledger.entries")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("create table public.audit_scratch (x int)")
        # Even with the read-only default switched off, the role holds no write privilege.
        conn.execute("set default_transaction_read_only = off")
        for statement in (
            "delete from socai_ledger.entries",
            "update socai_ledger.accounts set balance_gold = 0",
            "insert into socai_settlement.dead_letters (hand_id, table_id, reason, detail, stream_seq) "
            "values ('h', 't', 'r', 'd', 1)",
            "alter table socai_ledger.entries disable trigger user",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_the_service_roles_log_in_and_own_nothing(scripted: str) -> None:
    with psycopg.connect(scripted, autocommit=True) as conn:
        rows = conn.execute(
            "select rolname, rolcanlogin, rolsuper or rolcreaterole or rolcreatedb or rolbypassrls "
            "from pg_roles where rolname = any(%s)",
            (list(SERVICE_ROLES.values()),),
        ).fetchall()
        assert {(name, login, powers) for name, login, powers in rows} == {
            (role, True, False) for role in SERVICE_ROLES.values()
        }
        owned = conn.execute(
            "select count(*) from pg_class c join pg_roles r on r.oid = c.relowner where r.rolname = any(%s)",
            (list(SERVICE_ROLES.values()),),
        ).fetchone()
        assert owned == (0,)
        members = conn.execute(
            "select count(*) from pg_auth_members m join pg_roles r on r.oid = m.member where r.rolname = any(%s)",
            (list(SERVICE_ROLES.values()),),
        ).fetchone()
        assert members == (0,), "a service role that is a member of another role could SET ROLE to it"


def test_the_service_script_creates_missing_roles_with_their_passwords(migrated_database_url: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    script = SERVICE_SCRIPT.read_text()
    renamed = {role: f"{role}_{suffix}" for role in SERVICE_ROLES.values()}
    for role, new in renamed.items():
        assert script.count(f"'{role}'") == 1, role
        script = script.replace(f"'{role}'", f"'{new}'")
    with psycopg.connect(migrated_database_url, autocommit=True) as conn:
        try:
            conn.execute(script)  # type: ignore[arg-type]
            rows = conn.execute(
                "select rolname, rolcanlogin, rolpassword is not null from pg_authid where rolname = any(%s)",
                (list(renamed.values()),),
            ).fetchall()
            assert set(rows) == {(new, True, True) for new in renamed.values()}
        finally:
            for new in renamed.values():
                conn.execute(f'drop role if exists "{new}"')
