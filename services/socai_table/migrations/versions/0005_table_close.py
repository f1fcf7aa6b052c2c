"""A table's close: when an operator asked for it, why, and (``closed_at``) when it completed.

Revision ID: table_0005
Revises: table_0004
Create Date: 2026-12-01

``CloseTable`` records ``closing_at`` and ``close_reason`` before anything else, so a table
service restarted in the middle of a close finds the table closing and finishes the close
(the closing hand, the stand-ups, TableClosed). ``closed_at`` (there since table_0002) is
set once TableClosed is written: a closed table is no longer loaded, and GetTable answers it
from this row.
"""

import sqlalchemy as sa
from alembic import op

revision = "table_0005"
down_revision = "table_0004"
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    op.add_column("tables", sa.Column("closing_at", sa.DateTime(timezone=True)), schema=schema)
    op.add_column("tables", sa.Column("close_reason", sa.Text, nullable=False, server_default=""), schema=schema)


def downgrade(schema: str) -> None:
    op.drop_column("tables", "close_reason", schema=schema)
    op.drop_column("tables", "closing_at", schema=schema)
