"""What settlement knows about a HandEnded's attempts beyond the server's delivery count.

JetStream counts every delivery of a message, including those that ended because the
partition's lease moved or the instance stopped (the holder gave the message back with a
nak). Those are not failures of the hand, so settlement subtracts them before it compares a
delivery count with its poison limit (``socai_settlement.pipeline``), and it counts the
attempts that no delivery counts: a starting holder settling, from the stream, the hands
its predecessor left unacknowledged (``socai_settlement.outstanding``).

- ``delivery_attempts``: one row per HandEnded (its stream sequence) that was ever given
  back or settled from the stream at start; ``given_back`` (deliveries that ended by a
  handover or a stop) and ``recovered`` (unfinished attempts to settle it from the stream
  at start). Rows of settled hands are pruned.

Revision ID: settlement_0004
Revises: settlement_0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "settlement_0004"
down_revision = "settlement_0003"
branch_labels = None
depends_on = None

SERVICE_ROLE = "socai_settlement_service"


def upgrade(schema: str) -> None:
    op.create_table(
        "delivery_attempts",
        sa.Column("stream_seq", sa.BigInteger, primary_key=True),
        sa.Column("hand_id", sa.Text, nullable=False),
        sa.Column("given_back", sa.Integer, nullable=False, server_default="0"),
        sa.Column("recovered", sa.Integer, nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("given_back >= 0 and recovered >= 0", name="delivery_attempts_not_negative"),
        schema=schema,
    )
    # The service keeps the counts (rows of settled hands are pruned); nothing here is the
    # auditor's business: it is how many times a message went round, not what was settled.
    op.execute(f'grant select, insert, update, delete on "{schema}".delivery_attempts to {SERVICE_ROLE}')


def downgrade(schema: str) -> None:
    op.drop_table("delivery_attempts", schema=schema)
