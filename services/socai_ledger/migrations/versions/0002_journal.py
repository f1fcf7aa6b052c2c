"""The journal: accounts, transactions, entries (append-only), the outbox, and the house accounts.

Revision ID: ledger_0002
Revises: ledger_0001
Create Date: 2026-11-29

- ``accounts``: the balance projection, updated in the same database transaction as the
  entries; ``CHECK (may_go_negative OR balance_gold >= 0)`` makes PostgreSQL itself refuse a
  negative balance. An account's id, kind and sign rule never change and it is never deleted.
  Every batch rewrites its accounts' rows: ``fillfactor = 70`` leaves room on each page for
  the new row versions, so the updates are HOT (no index entries, less bloat).
- ``transactions``: one row per idempotency key: an applied transaction (with its journal
  sequence number, the commit order) or a remembered refusal (with its reason).
- ``entries``: signed amounts with the balance and the account version after each one;
  primary key ``(account_id, account_version)`` serves statements and balance-at queries.
- ``transactions`` and ``entries`` are append-only: triggers refuse UPDATE, DELETE and
  TRUNCATE for every role, the table owner included.
- ``outbox``: one row per committed batch naming the journal range it appended; the relay
  publishes that range to NATS and deletes the row. ``outbox_progress`` is its cursor.
- Ids are collated "C" (byte order): prefix listing is an index range scan, whatever the
  database's default collation.
"""

import sqlalchemy as sa
from alembic import op

revision = "ledger_0002"
down_revision = "ledger_0001"
branch_labels = None
depends_on = None

HOUSE_ACCOUNTS = (
    # account id, kind, may go negative
    ("house:fees", "house", False),
    ("house:bank", "house", False),
    ("external:cashier", "external", True),
)


def upgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        create table {s}.accounts (
            account_id text collate "C" primary key,
            kind text not null,
            balance_gold bigint not null default 0,
            version bigint not null default 0,
            may_go_negative boolean not null default false,
            created_at timestamptz not null default now(),
            constraint accounts_kind_is_id_prefix check (kind = split_part(account_id, ':', 1)),
            constraint accounts_never_negative check (may_go_negative or balance_gold >= 0),
            constraint accounts_version_not_negative check (version >= 0)
        ) with (fillfactor = 70);
        create index accounts_by_kind on {s}.accounts (kind, account_id);

        create table {s}.transactions (
            transaction_id uuid primary key,
            idempotency_key text not null,
            request_hash bytea not null,
            status text not null,
            journal_seq bigint,
            kind text not null,
            reference text not null default '',
            metadata jsonb,
            error_reason text,
            error_message text,
            created_at timestamptz not null,
            constraint transactions_one_per_key unique (idempotency_key),
            constraint transactions_journal_order unique (journal_seq),
            constraint transactions_status check (status in ('applied', 'rejected')),
            constraint transactions_applied_in_journal check ((status = 'applied') = (journal_seq is not null)),
            constraint transactions_rejected_has_reason check ((status = 'rejected') = (error_reason is not null)),
            constraint transactions_hash_is_sha256 check (octet_length(request_hash) = 32),
            constraint transactions_key_length check (char_length(idempotency_key) between 1 and 200)
        );

        create table {s}.entries (
            account_id text collate "C" not null,
            account_version bigint not null,
            journal_seq bigint not null,
            entry_index smallint not null,
            transaction_id uuid not null,
            amount_gold bigint not null,
            balance_after_gold bigint not null,
            created_at timestamptz not null,
            primary key (account_id, account_version),
            constraint entries_by_transaction unique (journal_seq, entry_index),
            constraint entries_amount_not_zero check (amount_gold <> 0),
            constraint entries_version_positive check (account_version > 0)
        );

        create table {s}.outbox (
            first_seq bigint primary key,
            last_seq bigint not null,
            created_at timestamptz not null default now(),
            constraint outbox_range check (last_seq >= first_seq)
        );

        create table {s}.outbox_progress (
            singleton boolean primary key default true,
            published_seq bigint not null,
            updated_at timestamptz not null default now(),
            constraint outbox_progress_one_row check (singleton)
        );
        insert into {s}.outbox_progress (published_seq) values (0);

        create function {s}.refuse_journal_change() returns trigger language plpgsql as $$
        begin
            raise exception 'the ledger journal is append-only: % on %.% refused', tg_op, tg_table_schema, tg_table_name
                using errcode = 'insufficient_privilege',
                      hint = 'correct a posting with a new, compensating transaction';
        end;
        $$;
        create trigger transactions_append_only before update or delete on {s}.transactions
            for each row execute function {s}.refuse_journal_change();
        create trigger transactions_no_truncate before truncate on {s}.transactions
            for each statement execute function {s}.refuse_journal_change();
        create trigger entries_append_only before update or delete on {s}.entries
            for each row execute function {s}.refuse_journal_change();
        create trigger entries_no_truncate before truncate on {s}.entries
            for each statement execute function {s}.refuse_journal_change();

        create function {s}.refuse_account_change() returns trigger language plpgsql as $$
        begin
            raise exception 'ledger accounts keep their id, kind and sign rule and are never deleted: % on % refused',
                tg_op, coalesce(old.account_id, '?')
                using errcode = 'insufficient_privilege';
        end;
        $$;
        -- The WHEN clause is evaluated without calling the function, so the per-batch balance
        -- update pays nothing for this guard.
        create trigger accounts_identity_fixed before update on {s}.accounts for each row
            when (new.account_id is distinct from old.account_id or new.kind is distinct from old.kind
                  or new.may_go_negative is distinct from old.may_go_negative
                  or new.created_at is distinct from old.created_at or new.version < old.version)
            execute function {s}.refuse_account_change();
        create trigger accounts_never_deleted before delete on {s}.accounts
            for each row execute function {s}.refuse_account_change();
        create trigger accounts_no_truncate before truncate on {s}.accounts
            for each statement execute function {s}.refuse_journal_change();
        """
    )
    insert = sa.text(
        f"insert into {s}.accounts (account_id, kind, may_go_negative) values (:account_id, :kind, :may_go_negative)"
    )
    for account_id, kind, may_go_negative in HOUSE_ACCOUNTS:
        op.get_bind().execute(insert, {"account_id": account_id, "kind": kind, "may_go_negative": may_go_negative})


def downgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        drop table {s}.outbox_progress;
        drop table {s}.outbox;
        drop table {s}.entries;
        drop table {s}.transactions;
        drop table {s}.accounts;
        drop function {s}.refuse_journal_change();
        drop function {s}.refuse_account_change();
        """
    )
