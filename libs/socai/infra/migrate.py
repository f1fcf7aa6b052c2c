"""Alembic migrations, one schema per service, run programmatically.

Each service package has ``migrations/`` (``env.py`` calls ``run_env`` here) and keeps its
version table inside its own schema, so services migrate independently. This module knows
no service: its callers pass the schema and the migrations folder (``socai_cli.migrations``
maps each service to its own, for ``socai migrate`` and the local stack).
"""

from __future__ import annotations

from importlib.resources.abc import Traversable

from alembic import command
from alembic.config import Config

from socai.infra.db import sqlalchemy_url
from socai.infra.logging import get_logger

log = get_logger("socai.migrate")


def alembic_config(url: str, schema: str, location: Traversable | str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(location))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    cfg.attributes["schema"] = schema
    return cfg


def upgrade(url: str, schema: str, location: Traversable | str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url, schema, location), revision)
    log.info("migrated", schema=schema, revision=revision)


def downgrade(url: str, schema: str, location: Traversable | str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url, schema, location), revision)
    log.info("downgraded", schema=schema, revision=revision)


def run_env() -> None:
    """The body of every service's ``migrations/env.py`` (online mode only)."""
    from alembic import context
    from sqlalchemy import create_engine, pool, text

    cfg = context.config
    schema = cfg.attributes["schema"]
    engine = create_engine(cfg.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as conn:
        conn.execute(text(f'create schema if not exists "{schema}"'))
        conn.commit()
        context.configure(
            connection=conn,
            version_table_schema=schema,
            include_schemas=False,
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations(schema=schema)
    engine.dispose()
