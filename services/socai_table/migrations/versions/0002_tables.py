"""The table directory, hand seeds, and the buy-in / cash-out work lists.

Events in JetStream are the truth of what happened at a table; this schema holds what
the event log must not show or cannot find quickly:
- ``tables``: which tables exist and which table-service instance owns each one;
- ``hand_seeds``: the secret deck seed of each hand, written before HandStarted is
  published (so a restarted service can go on dealing the same deck) and public once the
  hand ends (HandEnded reveals it);
- ``joins``: buy-ins in flight (ledger transfer wallet → escrow, then a seat), so a crash
  between the two is repaired at restart;
- ``cashouts``: cash-outs waiting for the player's last hand to be settled.

Revision ID: table_0002
Revises: table_0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "table_0002"
down_revision = "table_0001"
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    op.create_table(
        "tables",
        sa.Column("table_id", sa.Text, primary_key=True),
        sa.Column("game", sa.Text, nullable=False),
        sa.Column("instance", sa.Text, nullable=False),
        sa.Column("config", postgresql.JSONB, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
        schema=schema,
    )
    op.create_index("tables_by_instance", "tables", ["instance"], schema=schema)
    op.create_table(
        "hand_seeds",
        sa.Column("hand_id", sa.Text, primary_key=True),
        sa.Column("table_id", sa.Text, nullable=False),
        sa.Column("hand_number", sa.BigInteger, nullable=False),
        sa.Column("seed", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("table_id", "hand_number", name="hand_seeds_table_number"),
        sa.CheckConstraint("octet_length(seed) = 32", name="hand_seeds_seed_32_bytes"),
        schema=schema,
    )
    op.create_table(
        "joins",
        sa.Column("idempotency_key", sa.Text, primary_key=True),
        sa.Column("table_id", sa.Text, nullable=False),
        sa.Column("player_id", sa.Text, nullable=False),
        sa.Column("seat", sa.Integer, nullable=False),
        sa.Column("amount_gold", sa.BigInteger, nullable=False),
        sa.Column("status", sa.Text, nullable=False),  # pending | seated | refunded | failed
        sa.Column("ledger_transaction_id", sa.Text, nullable=False, server_default=""),
        sa.Column("error", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("amount_gold > 0", name="joins_positive"),
        schema=schema,
    )
    op.create_table(
        "cashouts",
        sa.Column("cashout_id", sa.Text, primary_key=True),
        sa.Column("table_id", sa.Text, nullable=False),
        sa.Column("player_id", sa.Text, nullable=False),
        sa.Column("amount_gold", sa.BigInteger, nullable=False),
        sa.Column("last_hand_id", sa.Text, nullable=False, server_default=""),
        sa.Column("status", sa.Text, nullable=False),  # pending | done | alarm
        sa.Column("ledger_transaction_id", sa.Text, nullable=False, server_default=""),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("done_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("amount_gold >= 0", name="cashouts_not_negative"),
        schema=schema,
    )
    op.create_index("cashouts_pending", "cashouts", ["status"], schema=schema)


def downgrade(schema: str) -> None:
    op.drop_table("cashouts", schema=schema)
    op.drop_table("joins", schema=schema)
    op.drop_table("hand_seeds", schema=schema)
    op.drop_table("tables", schema=schema)
