"""Alembic environment: shared by every service (socai.infra.migrate.run_env)."""

from socai.infra.migrate import run_env

run_env()
