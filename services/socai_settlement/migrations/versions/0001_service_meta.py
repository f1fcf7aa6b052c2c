"""The settlement service's schema and its meta table (service facts such as when the schema was made).

Revision ID: settlement_0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "settlement_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    op.create_table(
        "service_meta",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        schema=schema,
    )
    op.execute(f"insert into \"{schema}\".service_meta (key, value) values ('schema_created', now()::text)")


def downgrade(schema: str) -> None:
    op.drop_table("service_meta", schema=schema)
