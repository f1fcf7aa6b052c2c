"""The guild a join names, kept with its row.

Revision ID: table_0007
Revises: table_0006
Create Date: 2026-12-06

A join cut between its buy-in and its seat is finished when the table is loaded again
(``Table.repair_joins``), from its row alone: without the guild there, a player who joined
for a guild (Tài Xỉu's guild pools, TX-6) was seated by the repair without one. Rows written
before this column (and joins without a guild) hold "".
"""

from alembic import op

revision = "table_0007"
down_revision = "table_0006"
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    op.execute(f"alter table \"{schema}\".joins add column guild_id text not null default ''")


def downgrade(schema: str) -> None:
    op.execute(f'alter table "{schema}".joins drop column guild_id')
