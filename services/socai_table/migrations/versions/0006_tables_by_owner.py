"""The open tables of each owner, found without reading every table ever created.

Revision ID: table_0006
Revises: table_0005
Create Date: 2026-12-06

``CreateTable`` refuses an owner who already has ``SOCAI_LIMIT_OWNER_TABLES`` open tables
(``TOO_MANY_TABLES``), counted over every instance in this directory. Closed tables stay in
``tables`` for good, so the count reads this partial index of the open ones by owner instead
of the whole table.
"""

from alembic import op

revision = "table_0006"
down_revision = "table_0005"
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    op.execute(
        f'create index tables_open_by_owner on "{schema}".tables '
        "((config ->> 'owner_player_id')) where closed_at is null"
    )


def downgrade(schema: str) -> None:
    op.execute(f'drop index "{schema}".tables_open_by_owner')
