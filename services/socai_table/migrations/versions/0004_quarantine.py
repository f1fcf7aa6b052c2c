"""Quarantined messages: what a table's rebuild found on its subjects and would not apply.

Revision ID: table_0004
Revises: table_0003
Create Date: 2026-12-01

A message on a table's subject that the table service did not write (no valid
``Socai-Table-Sig``), that does not decode, or that the rules engine refuses is never
applied as a fact: the rebuild skips it and records it here, naming the table, the hand,
the stream sequence and the reason, so that an operator sees it (``socai table quarantine
list``) and acknowledges it (``… resolve``). The stream refuses deletes, so the record is
the only place the decision is written.
"""

import sqlalchemy as sa
from alembic import op

revision = "table_0004"
down_revision = "table_0003"
branch_labels = None
depends_on = None

SERVICE_ROLE = "socai_table_service"


def upgrade(schema: str) -> None:
    op.create_table(
        "quarantine",
        sa.Column("stream_seq", sa.BigInteger, primary_key=True),
        sa.Column("table_id", sa.Text, nullable=False),
        sa.Column("hand_id", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sa.Column("found_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("resolved_at", sa.DateTime(timezone=True)),
        sa.Column("resolution", sa.Text, nullable=False, server_default=""),
        schema=schema,
    )
    op.create_index("quarantine_by_table", "quarantine", ["table_id"], schema=schema)
    op.execute(f'grant select, insert, update on "{schema}".quarantine to {SERVICE_ROLE}')


def downgrade(schema: str) -> None:
    op.drop_table("quarantine", schema=schema)
