"""Settlement records, their seats (ListSettlements by player) and dead letters.

- ``settlements``: one row per settled hand (primary key ``hand_id``: a hand is settled
  once); what the ledger was sent (transfers, fees, penalties by reason, shortfalls) and the
  ledger transaction it became. ``stream_seq`` is the JetStream sequence of the hand's
  HandEnded: it orders the lists newest first.
- ``settlement_seats``: each seat's net, for the per-player list.
- ``dead_letters``: hands that could not be settled, with a stable reason and a precise
  detail. A retried and settled hand keeps its row with ``resolved_at`` set (the history
  of what went wrong stays); the open ones are those with ``resolved_at is null``.

Revision ID: settlement_0002
Revises: settlement_0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "settlement_0002"
down_revision = "settlement_0001"
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    op.create_table(
        "settlements",
        sa.Column("hand_id", sa.Text, primary_key=True),
        sa.Column("table_id", sa.Text, nullable=False),
        sa.Column("game", sa.Text, nullable=False),
        sa.Column("stream_seq", sa.BigInteger, nullable=False),
        sa.Column("fees_gold", sa.BigInteger, nullable=False),
        sa.Column("pot_carry_gold", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("penalties", postgresql.JSONB, nullable=False),
        sa.Column("transfers", postgresql.JSONB, nullable=False),
        sa.Column("shortfalls", postgresql.JSONB, nullable=False),
        sa.Column("ledger_transaction_id", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.Text, nullable=False),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("fees_gold >= 0", name="settlements_fees_not_negative"),
        sa.CheckConstraint("stream_seq > 0", name="settlements_stream_seq_positive"),
        schema=schema,
    )
    op.create_index(
        "settlements_by_table", "settlements", ["table_id", sa.text("stream_seq desc"), "hand_id"], schema=schema
    )
    op.create_table(
        "settlement_seats",
        sa.Column(
            "hand_id",
            sa.Text,
            sa.ForeignKey(f"{schema}.settlements.hand_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seat", sa.Integer, primary_key=True),
        sa.Column("player_id", sa.Text, nullable=False),
        sa.Column("account_id", sa.Text, nullable=False),
        sa.Column("net_gold", sa.BigInteger, nullable=False),
        sa.Column("stream_seq", sa.BigInteger, nullable=False),
        schema=schema,
    )
    op.create_index(
        "settlement_seats_by_player",
        "settlement_seats",
        ["player_id", sa.text("stream_seq desc"), "hand_id"],
        schema=schema,
    )
    op.create_table(
        "dead_letters",
        sa.Column("hand_id", sa.Text, primary_key=True),
        sa.Column("table_id", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("stream_seq", sa.BigInteger, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="1"),
        sa.Column("first_failed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolution", sa.Text, nullable=True),
        schema=schema,
    )
    op.create_index(
        "dead_letters_open",
        "dead_letters",
        ["stream_seq", "hand_id"],
        schema=schema,
        postgresql_where=sa.text("resolved_at is null"),
    )


def downgrade(schema: str) -> None:
    op.drop_table("dead_letters", schema=schema)
    op.drop_table("settlement_seats", schema=schema)
    op.drop_table("settlements", schema=schema)
