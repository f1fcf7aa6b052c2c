"""The fence of lease holders: the newest fencing token per (scope, partition).

Revision ID: ledger_0004
Revises: ledger_0003
Create Date: 2026-12-01

Settlement runs as several instances, each consuming the partitions of the event log it
holds a lease on (``socai.infra.leases``); a lease's fencing token only grows. A holder
paused past its lease may wake up and post: the ledger refuses a ``PostTransactions`` whose
fence token is older than the newest it has recorded for the partition, in the database
transaction that would apply it (``socai.infra.fence``, ``socai_ledger.batcher``).

``lease_fence`` has the shape of ``socai.infra.fence.table_ddl`` (written out here: a
migration must read the same after the library changes). The service's role inserts rows
and moves ``token`` (and ``updated_at``) only, never deletes one; a trigger refuses a token
going back for every role, so "only grows" holds in the database itself, not only in the
upsert's ``WHERE``. The auditor reads it (which holder wrote last, and when).
"""

from alembic import op

revision = "ledger_0004"
down_revision = "ledger_0003"
branch_labels = None
depends_on = None

SERVICE_ROLE = "socai_ledger_service"
AUDITOR_ROLE = "socai_auditor"


def upgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        create table {s}.lease_fence (
            scope text not null,
            partition integer not null check (partition >= 0),
            token bigint not null check (token > 0),
            updated_at timestamptz not null default now(),
            primary key (scope, partition)
        );
        comment on table {s}.lease_fence is
            'the newest fencing token per (scope, partition): an older one is refused (socai.infra.fence)';

        create function {s}.refuse_fence_going_back() returns trigger
        language plpgsql set search_path = pg_catalog, pg_temp as $$
        begin
            if new.scope <> old.scope or new.partition <> old.partition or new.token < old.token then
                raise exception 'lease_fence: token of % partition % may only grow (% -> %)',
                    old.scope, old.partition, old.token, new.token
                    using errcode = 'integrity_constraint_violation';
            end if;
            return new;
        end;
        $$;
        create trigger lease_fence_only_grows before update on {s}.lease_fence
            for each row execute function {s}.refuse_fence_going_back();
        revoke all on function {s}.refuse_fence_going_back() from public;

        grant select, insert on {s}.lease_fence to {SERVICE_ROLE};
        grant update (token, updated_at) on {s}.lease_fence to {SERVICE_ROLE};
        grant select on {s}.lease_fence to {AUDITOR_ROLE};
        """
    )


def downgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        drop table {s}.lease_fence;
        drop function {s}.refuse_fence_going_back();
        """
    )
