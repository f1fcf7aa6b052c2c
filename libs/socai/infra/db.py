"""PostgreSQL: URL helpers, the schemas and the roles.

Every service owns one schema (``socai_ledger``, ``socai_table``, ``socai_settlement``)
migrated by Alembic (``socai.infra.migrate``, the one user of SQLAlchemy). Services read
``SOCAI_DATABASE_URL`` as a plain ``postgresql://`` URL and connect with psycopg through
``socai.infra.db_pool``; Alembic's SQLAlchemy gets ``postgresql+psycopg://``.

Roles (deploy/README.md, "PostgreSQL roles"): the migrations run as the owner of the
schemas (``OWNER_ROLE``); each service connects as its own role (``SERVICE_ROLES``), which
owns nothing — so it cannot disable a trigger or alter a table — and holds only the
privileges its service's migrations grant it; ``AUDITOR_ROLE`` reads the ledger and the
settlement records, never the table service's schema (hand seeds). The migrations grant to
these names, so the roles exist before the first migration: ``ensure_roles`` makes them on
the embedded server and in the tests, deploy/ on the others.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote, urlsplit, urlunsplit

SERVICE_SCHEMAS: dict[str, str] = {
    "ledger": "socai_ledger",
    "table": "socai_table",
    "settlement": "socai_settlement",
}
OWNER_ROLE: Final = "socai"
SERVICE_ROLES: Final[dict[str, str]] = {
    "ledger": "socai_ledger_service",
    "table": "socai_table_service",
    "settlement": "socai_settlement_service",
}
AUDITOR_ROLE: Final = "socai_auditor"


def sqlalchemy_url(url: str) -> str:
    """``postgresql://…`` → ``postgresql+psycopg://…`` (psycopg 3, sync and async)."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url!r}")


def libpq_url(url: str) -> str:
    """Any of our URL forms → the plain ``postgresql://`` form psycopg.connect takes."""
    return "postgresql://" + sqlalchemy_url(url)[len("postgresql+psycopg://") :]


def role_url(url: str, role: str) -> str:
    """``url`` with ``role`` as its user and no password (for servers that trust local
    connections: the embedded one, the tests')."""
    parts = urlsplit(libpq_url(url))
    host = parts.hostname or "127.0.0.1"
    netloc = f"{quote(role)}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def ensure_roles(admin_url: str, database: str) -> None:
    """Create the owner, service and auditor roles when missing, without passwords, and let
    the owner create schemas in ``database``. For servers that trust local connections (the
    embedded one, the tests'); deploy/postgres/service-roles.sql, auditor-role.sql and the CloudNativePG cluster
    declare the same roles with passwords. Needs CREATEROLE; idempotent."""
    import psycopg

    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        for role in (OWNER_ROLE, *SERVICE_ROLES.values(), AUDITOR_ROLE):
            # Two sessions may race here (parallel test workers): a role another one just
            # made is as good as ours.
            exists = conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone()
            if not exists:
                try:
                    conn.execute(f'create role "{role}" login')
                except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
                    pass
        # The auditor's sessions are read-only by default (its grants are SELECT anyway).
        conn.execute(f'alter role "{AUDITOR_ROLE}" set default_transaction_read_only = on')
        conn.execute(f'grant create, connect on database "{database}" to "{OWNER_ROLE}"')


def give_schemas_to_owner(admin_url: str) -> None:
    """Make ``OWNER_ROLE`` the owner of the service schemas and of every table, view and
    function in them that another role owns (a superuser's migrations made before the roles
    existed): the migrations run as the owner and must be able to alter them. Needs a
    superuser; idempotent."""
    import psycopg
    from psycopg import sql

    adopt = sql.SQL(
        """
        do $$
        declare
            owner_oid oid := (select oid from pg_roles where rolname = {owner});
            r record;
        begin
            for r in select nspname from pg_namespace where nspname = any({schemas}) and nspowner <> owner_oid loop
                execute format('alter schema %I owner to %I', r.nspname, {owner});
            end loop;
            -- Tables (their indexes, row types and owned sequences follow them).
            for r in select c.oid::regclass as rel from pg_class c join pg_namespace n on n.oid = c.relnamespace
                      where n.nspname = any({schemas}) and c.relkind in ('r', 'p', 'v', 'm')
                        and c.relowner <> owner_oid loop
                execute format('alter table %s owner to %I', r.rel, {owner});
            end loop;
            for r in select p.oid::regprocedure as fn from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                      where n.nspname = any({schemas}) and p.proowner <> owner_oid loop
                execute format('alter function %s owner to %I', r.fn, {owner});
            end loop;
            for r in select t.oid::regtype as typ from pg_type t join pg_namespace n on n.oid = t.typnamespace
                      where n.nspname = any({schemas}) and t.typtype in ('e', 'd')
                        and t.typowner <> owner_oid loop
                execute format('alter type %s owner to %I', r.typ, {owner});
            end loop;
        end
        $$
        """
    ).format(owner=sql.Literal(OWNER_ROLE), schemas=sql.Literal(list(SERVICE_SCHEMAS.values())))
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        conn.execute(adopt)
