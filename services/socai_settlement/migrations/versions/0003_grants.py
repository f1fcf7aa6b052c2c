"""The settlement service's role and the auditor's: the privileges each needs, no more.

Revision ID: settlement_0003
Revises: settlement_0002
Create Date: 2026-12-01

The tables belong to the role that runs the migrations. ``socai_settlement_service`` (the
settlement service's connections, see ``socai.infra.db``) appends settlement records and
their seats (a settled hand is never rewritten: INSERT and SELECT only) and keeps the dead
letters (an attempt more, resolved when the hand settles: INSERT, UPDATE, SELECT).
``socai_auditor`` reads all three (and which revision the schema is at).
"""

from alembic import op

revision = "settlement_0003"
down_revision = "settlement_0002"
branch_labels = None
depends_on = None

SERVICE_ROLE = "socai_settlement_service"
AUDITOR_ROLE = "socai_auditor"


def upgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        grant usage on schema {s} to {SERVICE_ROLE}, {AUDITOR_ROLE};
        grant select, insert on {s}.settlements, {s}.settlement_seats to {SERVICE_ROLE};
        grant select, insert, update on {s}.dead_letters to {SERVICE_ROLE};
        grant select on {s}.settlements, {s}.settlement_seats, {s}.dead_letters, {s}.alembic_version
            to {AUDITOR_ROLE};
        """
    )


def downgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        revoke all on {s}.settlements, {s}.settlement_seats, {s}.dead_letters, {s}.alembic_version
            from {SERVICE_ROLE}, {AUDITOR_ROLE};
        revoke usage on schema {s} from {SERVICE_ROLE}, {AUDITOR_ROLE};
        """
    )
