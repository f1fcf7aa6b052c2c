"""Holds: gold of an account set aside for a hand in play, which its balance must cover.

Revision ID: ledger_0005
Revises: ledger_0004
Create Date: 2026-12-02

A game against the house (Tài Xỉu in system mode) pays its winners from ``house:bank``. The
table holds the hand's worst case there before it accepts a bet (``Hold``), so that the
bank can never owe more than it holds: a bet the bank cannot cover is refused at the table
(``BANKER_CAPACITY``) instead of its settlement being refused by the ledger later.

- ``holds``: one row per (account, hand): the gold held, and where it stands: ``open``
  (raised as bets arrive), ``final`` (the hand's outcome is known: the hold is what its
  settlement will debit, and it no longer grows) or ``released`` (by the settlement's own
  database transaction, by the outcome when the hand debits the account nothing, or by an
  operator for a hand that will never settle). Rows are never deleted: a released hold is
  the record of when and by what.
- ``accounts.held_gold``: the sum of the account's holds that are not released, kept by
  every statement that changes a hold, in the same database transaction.

What the database itself guards, for every role, the owner included:

- **A balance below its holds.** ``CHECK (may_go_negative OR balance_gold >= held_gold)``
  on ``accounts``, evaluated on every row a statement writes: a posting that would take
  ``house:bank`` into the gold held for hands in play fails, whoever sends it. It replaces
  nothing: ``accounts_never_negative`` stays, and ``held_gold >= 0``.
- **``held_gold`` is its holds.** Only the triggers on ``holds`` write it: one statement-level
  trigger per statement that inserts or updates holds adds, per account, what the statement's
  holds not released now hold minus what they held before (transition tables: one update of
  each account per statement, however many holds it releases). A direct change of
  ``held_gold`` (a statement not run by a trigger, ``pg_trigger_depth() = 0``) is refused.
  The service's role has no privilege on the column at all.
- **A hold that moves the wrong way.** An open hold only grows, a final one only shrinks, a
  released one never changes again, the account, hand and creation time never change, and
  no row is deleted or truncated. The update guard is a ``WHEN`` clause, evaluated without
  calling a function: the statement that releases a batch's holds pays nothing per row for
  it.

The batched posting path pays for none of this unless a batch's settlements release holds:
its balance update names neither ``held_gold`` nor ``holds``.

No foreign key from ``holds`` to ``accounts``: PostgreSQL would then run a referential
trigger for every account row every batch updates. The hold's statements lock the account
row first and refuse an unknown account themselves.

The service's role inserts holds and updates their amount and status (and the release's
record); the auditor reads holds.
"""

from alembic import op

revision = "ledger_0005"
down_revision = "ledger_0004"
branch_labels = None
depends_on = None

SERVICE_ROLE = "socai_ledger_service"
AUDITOR_ROLE = "socai_auditor"


def upgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        alter table {s}.accounts add column held_gold bigint not null default 0;
        alter table {s}.accounts add constraint accounts_held_not_negative check (held_gold >= 0);
        alter table {s}.accounts add constraint accounts_holds_covered
            check (may_go_negative or balance_gold >= held_gold);

        create table {s}.holds (
            account_id text collate "C" not null,
            hand_id text collate "C" not null,
            amount_gold bigint not null,
            status text not null,
            created_at timestamptz not null,
            updated_at timestamptz not null,
            released_at timestamptz,
            released_by text,
            release_transaction_id uuid,
            release_reason text,
            primary key (account_id, hand_id),
            constraint holds_amount_positive check (amount_gold > 0),
            constraint holds_status check (status in ('open', 'final', 'released')),
            constraint holds_released_when check ((status = 'released') = (released_at is not null)),
            constraint holds_released_by check (
                (status = 'released') = (released_by is not null)
                and (released_by is null or released_by in ('settlement', 'outcome', 'operator'))
            ),
            constraint holds_settlement_names_its_transaction check (
                (released_by = 'settlement') = (release_transaction_id is not null)
            )
        );
        -- The holds not released, per account: what a batch touching a held account reads
        -- under the account's lock, and the oldest one (the stale-hold alert).
        create index holds_not_released on {s}.holds (account_id, created_at) where status <> 'released';
        comment on table {s}.holds is
            'gold of an account held for a hand in play; accounts.held_gold is the sum of those not released';

        create function {s}.refuse_hold_change() returns trigger
        language plpgsql set search_path = pg_catalog, pg_temp as $$
        begin
            if tg_op <> 'UPDATE' then
                raise exception 'holds are kept: % on %.% refused', tg_op, tg_table_schema, tg_table_name
                    using errcode = 'insufficient_privilege',
                          hint = 'release a hold instead (its row records when and by what)';
            end if;
            raise exception 'hold of % for % may not go from % % to % %', old.account_id, old.hand_id,
                old.status, old.amount_gold, new.status, new.amount_gold
                using errcode = 'integrity_constraint_violation',
                      hint = 'an open hold only grows, a final one only shrinks, a released one is kept as it is';
        end;
        $$;
        create trigger holds_move_one_way before update on {s}.holds for each row
            when (new.account_id <> old.account_id or new.hand_id <> old.hand_id
                  or new.created_at <> old.created_at or old.status = 'released'
                  or (new.status = 'open' and (old.status <> 'open' or new.amount_gold < old.amount_gold))
                  or (new.status = 'final' and new.amount_gold > old.amount_gold)
                  or (new.status = 'released' and new.amount_gold <> old.amount_gold))
            execute function {s}.refuse_hold_change();
        create trigger holds_never_deleted before delete on {s}.holds
            for each row execute function {s}.refuse_hold_change();
        create trigger holds_no_truncate before truncate on {s}.holds
            for each statement execute function {s}.refuse_hold_change();

        -- held_gold follows the holds: per account, what the statement's holds not released
        -- hold now minus what they held before. Run as the owner (the service's role may not
        -- write held_gold), with the accounts_holds_covered CHECK applied to each row it writes.
        create function {s}.holds_move_held_gold() returns trigger
        language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
        begin
            if tg_op = 'INSERT' then
                update {s}.accounts a set held_gold = a.held_gold + d.gold
                  from (select account_id, sum(amount_gold) as gold from new_holds
                        where status <> 'released' group by account_id) d
                 where a.account_id = d.account_id;
            else
                update {s}.accounts a set held_gold = a.held_gold + d.gold
                  from (select account_id, sum(gold) as gold from (
                            select account_id, amount_gold as gold from new_holds where status <> 'released'
                            union all
                            select account_id, -amount_gold from old_holds where status <> 'released'
                        ) moved group by account_id) d
                 where a.account_id = d.account_id and d.gold <> 0;
            end if;
            return null;
        end;
        $$;
        create trigger holds_inserted_move_held_gold after insert on {s}.holds
            referencing new table as new_holds
            for each statement execute function {s}.holds_move_held_gold();
        create trigger holds_updated_move_held_gold after update on {s}.holds
            referencing old table as old_holds new table as new_holds
            for each statement execute function {s}.holds_move_held_gold();

        create function {s}.refuse_held_gold_change() returns trigger
        language plpgsql set search_path = pg_catalog, pg_temp as $$
        begin
            raise exception 'held_gold of % changes only with its holds (% -> % refused)',
                old.account_id, old.held_gold, new.held_gold
                using errcode = 'integrity_constraint_violation',
                      hint = 'insert or update a hold: its trigger moves held_gold';
        end;
        $$;
        -- The WHEN clause is evaluated without calling the function: the per-batch balance
        -- update pays nothing for this guard.
        create trigger held_gold_follows_holds before update on {s}.accounts for each row
            when (new.held_gold is distinct from old.held_gold and pg_trigger_depth() = 0)
            execute function {s}.refuse_held_gold_change();
        create trigger new_accounts_hold_nothing before insert on {s}.accounts for each row
            when (new.held_gold <> 0)
            execute function {s}.refuse_held_gold_change();
        revoke all on function {s}.refuse_hold_change() from public;
        revoke all on function {s}.holds_move_held_gold() from public;
        revoke all on function {s}.refuse_held_gold_change() from public;

        grant select, insert on {s}.holds to {SERVICE_ROLE};
        grant update (amount_gold, status, updated_at, released_at, released_by, release_transaction_id,
                      release_reason) on {s}.holds to {SERVICE_ROLE};
        grant select on {s}.holds to {AUDITOR_ROLE};
        """
    )


def downgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        drop trigger new_accounts_hold_nothing on {s}.accounts;
        drop trigger held_gold_follows_holds on {s}.accounts;
        drop table {s}.holds;
        drop function {s}.refuse_held_gold_change();
        drop function {s}.holds_move_held_gold();
        drop function {s}.refuse_hold_change();
        alter table {s}.accounts drop constraint accounts_holds_covered;
        alter table {s}.accounts drop constraint accounts_held_not_negative;
        alter table {s}.accounts drop column held_gold;
        """
    )
