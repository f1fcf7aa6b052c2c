"""ledger_0003's account check, the same refusals for less work per batch.

Revision ID: ledger_0006
Revises: ledger_0005
Create Date: 2026-12-06

The guarantees are ledger_0003's, unchanged: an account row whose balance or version a
statement changes takes exactly the pending step of its entries, from its old
``(balance, version)`` to the step's end, and a step its row has not taken by the commit
refuses the transaction. What changes is the bookkeeping after the check. ledger_0003 built
the steps still pending again after every accounts statement — an ``array_agg`` of five
arrays over a join of every pending step with the statement's rows, the two sides sorted
(about a sixth of the checks' time for a batch of a thousand postings). The posting path's
balance update takes every pending step at once; the check now counts the steps the
statement took in the same join that looks for a wrong row, and when that is all of them it
empties the arrays instead of rebuilding them. Any other statement (a hand-written update
taking some steps only) rebuilds them as before.

Chosen by measurement (``python -m tests.bench journal_checks``, README "Ledger"): pending
duties kept as rows of session-local ``ON COMMIT DELETE ROWS`` tables, and one
``SECURITY DEFINER`` function as the only write path, each cost more CPU per posting than
ledger_0003's arrays on PostgreSQL 18 here; this does not.
"""

import importlib

from alembic import op

revision = "ledger_0006"
down_revision = "ledger_0005"
branch_labels = None
depends_on = None


def upgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        create or replace function {s}.check_account_rows() returns trigger
        language plpgsql security definer
        set search_path = pg_catalog, pg_temp set enable_nestloop = off as $$
        declare
            pending {s}.journal_checks;
            wrong boolean;
            taken bigint;
            broken record;
        begin
            select * into pending from {s}.journal_checks where xact_id = pg_current_xact_id();
            -- One pass: is a changed row not at the end of its pending step, and how many
            -- steps does the statement leave done (its row at the step's end)?
            if tg_op = 'UPDATE' then
                select bool_or((n.balance_gold <> o.balance_gold or n.version <> o.version)
                               and (p.account_id is null or p.first_version <> o.version + 1
                                    or p.balance_before <> o.balance_gold
                                    or p.last_version <> n.version or p.balance_after <> n.balance_gold)),
                       count(p.account_id) filter (where p.last_version = n.version and p.balance_after = n.balance_gold)
                  into wrong, taken
                  from new_accounts n
                  join old_accounts o on o.account_id = n.account_id
                  left join unnest(pending.step_accounts, pending.step_first_versions, pending.step_balances_before,
                                   pending.step_last_versions, pending.step_balances_after)
                       as p(account_id, first_version, balance_before, last_version, balance_after)
                       on p.account_id = n.account_id;
            else
                select bool_or((n.balance_gold <> 0 or n.version <> 0)
                               and (p.account_id is null or p.first_version <> 1 or p.balance_before <> 0
                                    or p.last_version <> n.version or p.balance_after <> n.balance_gold)),
                       count(p.account_id) filter (where p.last_version = n.version and p.balance_after = n.balance_gold)
                  into wrong, taken
                  from new_accounts n
                  left join unnest(pending.step_accounts, pending.step_first_versions, pending.step_balances_before,
                                   pending.step_last_versions, pending.step_balances_after)
                       as p(account_id, first_version, balance_before, last_version, balance_after)
                       on p.account_id = n.account_id;
            end if;
            if wrong then
                -- Refused: find one wrong row to name.
                if tg_op = 'UPDATE' then
                    select n.account_id, o.balance_gold as balance_before, o.version as version_before,
                           n.balance_gold, n.version
                      into broken
                      from new_accounts n
                      join old_accounts o on o.account_id = n.account_id
                      left join unnest(pending.step_accounts, pending.step_first_versions,
                                       pending.step_balances_before, pending.step_last_versions,
                                       pending.step_balances_after)
                           as p(account_id, first_version, balance_before, last_version, balance_after)
                           on p.account_id = n.account_id
                     where (n.balance_gold <> o.balance_gold or n.version <> o.version)
                       and (p.account_id is null or p.first_version <> o.version + 1
                            or p.balance_before <> o.balance_gold
                            or p.last_version <> n.version or p.balance_after <> n.balance_gold)
                     limit 1;
                else
                    select n.account_id, 0 as balance_before, 0 as version_before, n.balance_gold, n.version
                      into broken
                      from new_accounts n
                      left join unnest(pending.step_accounts, pending.step_first_versions,
                                       pending.step_balances_before, pending.step_last_versions,
                                       pending.step_balances_after)
                           as p(account_id, first_version, balance_before, last_version, balance_after)
                           on p.account_id = n.account_id
                     where (n.balance_gold <> 0 or n.version <> 0)
                       and (p.account_id is null or p.first_version <> 1 or p.balance_before <> 0
                            or p.last_version <> n.version or p.balance_after <> n.balance_gold)
                     limit 1;
                end if;
                raise exception 'ledger balances change only with journal entries: account % from balance % '
                    '(version %) to % (version %) is not what its entries say',
                    broken.account_id, broken.balance_before, broken.version_before, broken.balance_gold, broken.version
                    using errcode = 'integrity_constraint_violation',
                          hint = 'post a transaction: a balance is the balance_after of the account''s newest entry';
            end if;
            if cardinality(pending.step_accounts) > 0 then
                -- An account has at most one pending step (check_new_entries refuses more
                -- entries before its row is written) and a statement writes a row once, so
                -- the count is of distinct steps.
                if taken = cardinality(pending.step_accounts) then
                    update {s}.journal_checks c set
                        step_accounts = '{{}}', step_first_versions = '{{}}', step_balances_before = '{{}}',
                        step_last_versions = '{{}}', step_balances_after = '{{}}'
                     where c.xact_id = pg_current_xact_id();
                elsif taken > 0 then
                    -- A step is done when its account's row stands at its end (a row written
                    -- by this statement got there through the check above; one left unchanged
                    -- cannot be there, as its entries are newer than the row).
                    update {s}.journal_checks c set
                        step_accounts = coalesce(r.accounts, '{{}}'),
                        step_first_versions = coalesce(r.first_versions, '{{}}'),
                        step_balances_before = coalesce(r.balances_before, '{{}}'),
                        step_last_versions = coalesce(r.last_versions, '{{}}'),
                        step_balances_after = coalesce(r.balances_after, '{{}}')
                      from (
                          select array_agg(p.account_id) as accounts, array_agg(p.first_version) as first_versions,
                                 array_agg(p.balance_before) as balances_before,
                                 array_agg(p.last_version) as last_versions,
                                 array_agg(p.balance_after) as balances_after
                            from unnest(pending.step_accounts, pending.step_first_versions,
                                        pending.step_balances_before, pending.step_last_versions,
                                        pending.step_balances_after)
                                 as p(account_id, first_version, balance_before, last_version, balance_after)
                            left join new_accounts n on n.account_id = p.account_id
                           where n.account_id is null or n.version <> p.last_version
                              or n.balance_gold <> p.balance_after
                      ) r
                     where c.xact_id = pg_current_xact_id();
                end if;
            end if;
            return null;
        end;
        $$;
        revoke all on function {s}.check_account_rows() from public;
        """
    )


def downgrade(schema: str) -> None:
    # ledger_0003's functions as they were: its own downgrade and upgrade (the same grants,
    # the same constraint) rebuild them.
    integrity = importlib.import_module("socai_ledger.migrations.versions.0003_integrity")
    integrity.downgrade(schema)
    integrity.upgrade(schema)
