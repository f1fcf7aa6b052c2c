"""The table service's role: the privileges it needs on its own schema, and nobody else's.

Revision ID: table_0003
Revises: table_0002
Create Date: 2026-12-01

The tables belong to the role that runs the migrations; ``socai_table_service`` (the table
service's connections, see ``socai.infra.db``) reads and writes the rows the service keeps
(``tables``: insert, look up, forget a table that could not open; ``hand_seeds``: store a
hand's seed, insert-or-keep; ``joins`` and ``cashouts``: work lists whose status moves on).
No other role gets anything here: a hand's seed gives every card before it is dealt, so
neither the auditor nor the other services may read this schema.
"""

from alembic import op

revision = "table_0003"
down_revision = "table_0002"
branch_labels = None
depends_on = None

SERVICE_ROLE = "socai_table_service"


def upgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        grant usage on schema {s} to {SERVICE_ROLE};
        -- INSERT … ON CONFLICT DO UPDATE (the idempotent inserts) needs UPDATE as well.
        grant select, insert, update, delete on {s}.tables to {SERVICE_ROLE};
        grant select, insert, update on {s}.hand_seeds, {s}.joins, {s}.cashouts to {SERVICE_ROLE};
        """
    )


def downgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        revoke all on {s}.tables, {s}.hand_seeds, {s}.joins, {s}.cashouts from {SERVICE_ROLE};
        revoke usage on schema {s} from {SERVICE_ROLE};
        """
    )
