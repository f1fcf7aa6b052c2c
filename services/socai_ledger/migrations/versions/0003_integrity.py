"""Money integrity in the database itself, and the least privilege of the service's role.

Revision ID: ledger_0003
Revises: ledger_0002
Create Date: 2026-12-01

Until now balance was the application's promise: PostgreSQL took an unbalanced transaction
or a direct ``UPDATE`` of ``accounts.balance_gold`` from whoever could write the tables.
From here the database refuses, for every role, at the latest when the transaction commits:

- **Balanced transactions.** Every ledger transaction's entries sum to 0.
- **Legs are final.** Entries are appended only for an applied ``transactions`` row inserted
  by the same database transaction (so every posting has its row, which the outbox
  publishes, and a committed transaction never gains a leg).
- **A chain per account.** Each entry's ``balance_after_gold`` is the previous entry's plus
  its amount; versions follow one another.
- **Only the outside world goes negative.** ``may_go_negative`` holds for ``external``
  accounts only (``socai.accounts.may_go_negative``).
- **The projection follows the journal.** An account row's ``(balance_gold, version)``
  changes only to the end of its new entries, from the exact point where they start, and
  when a transaction commits every account it appended entries for shows them.

So the only way to change a balance is to append balanced, chained entries under an applied
transaction, which is what the posting path (``journal_write.write_batch``) does. This is enforced
by what the data must look like, not by who claims to be the posting path: a
transaction-local setting the posting path would set (``set local socai.posting = …``) can
be set by any session of the same role, so it would guard against accidents only. Together
with the append-only triggers of ``ledger_0002`` (UPDATE, DELETE, TRUNCATE refused) and the
service's role (below: it owns nothing, so it cannot disable a trigger), a balance can no
longer be written around the journal; ``VerifyJournal`` remains the auditor's check.

How, cheaply enough for the batched write path (one database transaction per batch of up
to a thousand postings, its journal rows in one COPY or INSERT per table). Every check is a
statement-level trigger reading the statement's transition tables: one call per statement,
set-based queries, hash joins, and no lookup into the journal or the accounts table (which
only grow). Between statements a writing transaction's duties are kept in
``journal_checks``, one row per transaction:

1. ``transactions`` insert: note the applied transactions' journal numbers.
2. ``entries`` insert: each entry's ledger transaction is one of those; per ledger
   transaction, the statement's legs sum to 0 (else the transaction is noted, and summed
   again from the journal at commit); per account, the entries chain and form one *step*
   from the balance before the first to the balance after the last, noted as pending.
3. ``accounts`` update or insert: every row whose balance or version changes must take
   exactly its pending step — from its old ``(balance, version)`` (``(0, 0)`` for a new
   row) to the step's end; the step is then done. By induction the row's old values are its
   newest entry's, so the step is anchored where the account stood.
4. At commit, a ``DEFERRABLE INITIALLY DEFERRED`` constraint trigger on ``journal_checks``
   refuses the transaction if a step is still pending (entries its account does not show)
   or a noted ledger transaction does not balance, and deletes the row.

The induction starts from the journal as this migration finds it: a journal that
``VerifyJournal`` reports clean (each account at its newest entry).

Rules for writers (the posting path follows them): insert a transaction's row, then its
entries, in one database transaction; an account's entries in version order; the account's
row after its entries, before more of its entries. ``SET CONSTRAINTS ALL IMMEDIATE`` runs
the commit check at the end of each statement, which the posting path never asks for.

Roles (created outside the migrations: ``socai.infra.db.ensure_roles`` for the embedded
server and the tests, deploy/postgres/service-roles.sql and auditor-role.sql for compose,
managed roles of the CloudNativePG cluster in Kubernetes). The tables belong to the role
that runs the migrations; ``socai_ledger_service`` gets SELECT and INSERT on the journal
(``transactions``, ``entries``), SELECT, INSERT and UPDATE of ``balance_gold`` and
``version`` only on ``accounts``, and what the outbox relay needs; ``socai_auditor`` reads
the journal and the accounts. ``journal_checks`` is written only by the trigger functions,
which run as their owner (``SECURITY DEFINER``, fixed ``search_path``): no other role holds
any privilege on it, so nobody can remove a pending check before it runs.
"""

from alembic import op

revision = "ledger_0003"
down_revision = "ledger_0002"
branch_labels = None
depends_on = None

SERVICE_ROLE = "socai_ledger_service"
AUDITOR_ROLE = "socai_auditor"


def upgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        -- Only the outside world may go negative (socai.accounts.may_go_negative): an account
        -- opened with the right to, through a negative balance, would mint gold.
        alter table {s}.accounts add constraint accounts_only_external_goes_negative
            check (may_go_negative = (kind = 'external'));

        -- What a writing transaction has yet to satisfy, one row per transaction, removed
        -- when it commits: the applied transactions it inserted, the ledger transactions a
        -- statement left unbalanced, and its pending account steps (an account's entries
        -- appended since its row last changed: from the balance before the first, at
        -- version first_version - 1, to the balance after the last), as parallel arrays
        -- (an array of a composite type costs ~10 times more to build). Unlogged: a row never
        -- outlives its transaction, so a crash has nothing to recover.
        create unlogged table {s}.journal_checks (
            xact_id xid8 primary key,
            applied_seqs bigint[] not null default '{{}}',
            unbalanced_seqs bigint[] not null default '{{}}',
            step_accounts text[] collate "C" not null default '{{}}',
            step_first_versions bigint[] not null default '{{}}',
            step_balances_before bigint[] not null default '{{}}',
            step_last_versions bigint[] not null default '{{}}',
            step_balances_after bigint[] not null default '{{}}'
        );
        -- Stored out of line but not compressed: each array is written once and read once.
        alter table {s}.journal_checks
            alter column applied_seqs set storage external,
            alter column unbalanced_seqs set storage external,
            alter column step_accounts set storage external,
            alter column step_first_versions set storage external,
            alter column step_balances_before set storage external,
            alter column step_last_versions set storage external,
            alter column step_balances_after set storage external;
        comment on table {s}.journal_checks is
            'what each writing transaction must satisfy at commit; written by the ledger triggers only';

        create function {s}.note_applied_transactions() returns trigger
        language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
        declare
            seqs bigint[];
        begin
            select array_agg(journal_seq) into seqs from new_transactions where status = 'applied';
            if seqs is not null then
                insert into {s}.journal_checks as c (xact_id, applied_seqs) values (pg_current_xact_id(), seqs)
                on conflict (xact_id) do update set applied_seqs = c.applied_seqs || excluded.applied_seqs;
            end if;
            return null;
        end;
        $$;

        -- enable_nestloop off: the joins with the pending arrays are hash joins (a nested
        -- loop over an unnested array of a thousand elements is a million comparisons).
        create function {s}.check_new_entries() returns trigger
        language plpgsql security definer
        set search_path = pg_catalog, pg_temp set enable_nestloop = off as $$
        declare
            pending {s}.journal_checks;
            orphan bigint;
            unbalanced bigint[];
            accounts text[];
            first_versions bigint[];
            balances_before bigint[];
            last_versions bigint[];
            balances_after bigint[];
            chain_broken boolean;
            again text;
        begin
            select * into pending from {s}.journal_checks where xact_id = pg_current_xact_id();
            -- Each ledger transaction of the statement: applied by this database transaction
            -- (an earlier one's legs are final), and balanced within the statement (else
            -- summed again at commit).
            select min(g.journal_seq) filter (where a.seq is null),
                   array_agg(g.journal_seq) filter (where g.total <> 0)
              into orphan, unbalanced
              from (select journal_seq, sum(amount_gold) as total from new_entries group by journal_seq) g
              left join unnest(pending.applied_seqs) as a(seq) on a.seq = g.journal_seq;
            if orphan is not null then
                raise exception 'ledger entries of journal_seq % belong to no transaction applied by this database '
                    'transaction', orphan
                    using errcode = 'integrity_constraint_violation',
                          hint = 'insert the applied transaction row, then its entries, in one database transaction';
            end if;
            -- The chain inside the statement, and each account's step (checked against the
            -- account's row when that is written). Sums stay bigint: for rows a correct
            -- writer made they cannot overflow, and an overflow refuses the statement too.
            with chained as (
                select n.account_id, n.account_version, n.amount_gold, n.balance_after_gold,
                       lag(n.account_version) over w as previous_version,
                       lag(n.balance_after_gold) over w as previous_after,
                       lead(n.account_version) over w is null as is_last
                  from new_entries n
                window w as (partition by n.account_id order by n.account_version)
            ), per_account as (
                select account_id, min(account_version) as first_version, max(account_version) as last_version,
                       min(balance_after_gold - amount_gold) filter (where previous_version is null) as balance_before,
                       min(balance_after_gold) filter (where is_last) as balance_after,
                       bool_or(
                           previous_version is not null
                           and (previous_version <> account_version - 1
                                or previous_after + amount_gold <> balance_after_gold)
                       ) as broken
                  from chained group by account_id
            )
            select array_agg(account_id), array_agg(first_version), array_agg(balance_before),
                   array_agg(last_version), array_agg(balance_after), bool_or(broken)
              into accounts, first_versions, balances_before, last_versions, balances_after, chain_broken
              from per_account;
            if chain_broken then
                raise exception 'ledger entries break their account''s chain: a balance_after is not the previous '
                    'entry''s plus its amount, or a version is skipped'
                    using errcode = 'integrity_constraint_violation';
            end if;
            if accounts is null then
                return null;  -- no rows
            end if;
            if cardinality(pending.step_accounts) > 0 then
                select p.account_id into again
                  from unnest(pending.step_accounts) as p(account_id)
                  join unnest(accounts) as n(account_id) on n.account_id = p.account_id
                 limit 1;
                if again is not null then
                    raise exception 'ledger account % has entries its row does not show yet; write the row before '
                        'appending more of its entries', again
                        using errcode = 'integrity_constraint_violation';
                end if;
            end if;
            insert into {s}.journal_checks as c (
                xact_id, unbalanced_seqs, step_accounts, step_first_versions, step_balances_before,
                step_last_versions, step_balances_after
            ) values (
                pg_current_xact_id(), coalesce(unbalanced, '{{}}'), accounts, first_versions, balances_before,
                last_versions, balances_after
            )
            on conflict (xact_id) do update set
                unbalanced_seqs = c.unbalanced_seqs || excluded.unbalanced_seqs,
                step_accounts = c.step_accounts || excluded.step_accounts,
                step_first_versions = c.step_first_versions || excluded.step_first_versions,
                step_balances_before = c.step_balances_before || excluded.step_balances_before,
                step_last_versions = c.step_last_versions || excluded.step_last_versions,
                step_balances_after = c.step_balances_after || excluded.step_balances_after;
            return null;
        end;
        $$;

        -- An account row whose balance or version a statement changed takes exactly the
        -- pending step of its entries: from its old (balance, version) — (0, 0) for a new
        -- row — to its new ones.
        create function {s}.check_account_rows() returns trigger
        language plpgsql security definer
        set search_path = pg_catalog, pg_temp set enable_nestloop = off as $$
        declare
            pending {s}.journal_checks;
            broken record;
        begin
            select * into pending from {s}.journal_checks where xact_id = pg_current_xact_id();
            if tg_op = 'UPDATE' then
                select n.account_id, o.balance_gold as balance_before, o.version as version_before,
                       n.balance_gold, n.version
                  into broken
                  from new_accounts n
                  join old_accounts o on o.account_id = n.account_id
                  left join unnest(pending.step_accounts, pending.step_first_versions, pending.step_balances_before,
                                   pending.step_last_versions, pending.step_balances_after)
                       as p(account_id, first_version, balance_before, last_version, balance_after)
                       on p.account_id = n.account_id
                 where (n.balance_gold <> o.balance_gold or n.version <> o.version)
                   and (p.account_id is null or p.first_version <> o.version + 1 or p.balance_before <> o.balance_gold
                        or p.last_version <> n.version or p.balance_after <> n.balance_gold)
                 limit 1;
            else
                select n.account_id, 0 as balance_before, 0 as version_before, n.balance_gold, n.version
                  into broken
                  from new_accounts n
                  left join unnest(pending.step_accounts, pending.step_first_versions, pending.step_balances_before,
                                   pending.step_last_versions, pending.step_balances_after)
                       as p(account_id, first_version, balance_before, last_version, balance_after)
                       on p.account_id = n.account_id
                 where (n.balance_gold <> 0 or n.version <> 0)
                   and (p.account_id is null or p.first_version <> 1 or p.balance_before <> 0
                        or p.last_version <> n.version or p.balance_after <> n.balance_gold)
                 limit 1;
            end if;
            if found then
                raise exception 'ledger balances change only with journal entries: account % from balance % '
                    '(version %) to % (version %) is not what its entries say',
                    broken.account_id, broken.balance_before, broken.version_before, broken.balance_gold, broken.version
                    using errcode = 'integrity_constraint_violation',
                          hint = 'post a transaction: a balance is the balance_after of the account''s newest entry';
            end if;
            if cardinality(pending.step_accounts) > 0 then
                -- A step is done when its account's row stands at its end (a row written by
                -- this statement got there through the check above; one left unchanged
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
                        from unnest(pending.step_accounts, pending.step_first_versions, pending.step_balances_before,
                                    pending.step_last_versions, pending.step_balances_after)
                             as p(account_id, first_version, balance_before, last_version, balance_after)
                        left join new_accounts n on n.account_id = p.account_id
                       where n.account_id is null or n.version <> p.last_version or n.balance_gold <> p.balance_after
                  ) r
                 where c.xact_id = pg_current_xact_id();
            end if;
            return null;
        end;
        $$;

        create function {s}.check_journal_at_commit() returns trigger
        language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
        declare
            pending {s}.journal_checks;
            unbalanced record;
        begin
            delete from {s}.journal_checks where xact_id = pg_current_xact_id() returning * into pending;
            if not found then
                return null;  -- already checked (SET CONSTRAINTS … IMMEDIATE)
            end if;
            if cardinality(pending.step_accounts) > 0 then
                raise exception 'ledger account % has entries up to version % that its balance does not show',
                    pending.step_accounts[1], pending.step_last_versions[1]
                    using errcode = 'integrity_constraint_violation',
                          hint = 'update each account to its newest entry in the same transaction';
            end if;
            if cardinality(pending.unbalanced_seqs) = 0 then
                return null;  -- every statement's legs balanced on their own (the posting path)
            end if;
            select s.journal_seq, t.total into unbalanced
              from (select distinct unnest(pending.unbalanced_seqs) as journal_seq) s
              cross join lateral (
                  select coalesce(sum(e.amount_gold), 0) as total from {s}.entries e where e.journal_seq = s.journal_seq
              ) t
             where t.total <> 0
             limit 1;
            if found then
                raise exception 'ledger transaction % does not balance: its entries sum to %',
                    unbalanced.journal_seq, unbalanced.total
                    using errcode = 'integrity_constraint_violation';
            end if;
            return null;
        end;
        $$;
        create trigger transactions_noted after insert on {s}.transactions
            referencing new table as new_transactions
            for each statement execute function {s}.note_applied_transactions();
        create trigger entries_checked after insert on {s}.entries
            referencing new table as new_entries
            for each statement execute function {s}.check_new_entries();
        create trigger accounts_checked_on_update after update on {s}.accounts
            referencing old table as old_accounts new table as new_accounts
            for each statement execute function {s}.check_account_rows();
        create trigger accounts_checked_on_insert after insert on {s}.accounts
            referencing new table as new_accounts
            for each statement execute function {s}.check_account_rows();
        create constraint trigger journal_checked_at_commit after insert on {s}.journal_checks
            deferrable initially deferred
            for each row execute function {s}.check_journal_at_commit();

        -- The functions run as their owner; trigger functions cannot be called directly,
        -- and nobody else needs to see them.
        revoke all on function {s}.note_applied_transactions() from public;
        revoke all on function {s}.check_new_entries() from public;
        revoke all on function {s}.check_account_rows() from public;
        revoke all on function {s}.check_journal_at_commit() from public;

        grant usage on schema {s} to {SERVICE_ROLE}, {AUDITOR_ROLE};
        grant select, insert on {s}.transactions, {s}.entries to {SERVICE_ROLE};
        grant select, insert on {s}.accounts to {SERVICE_ROLE};
        grant update (balance_gold, version) on {s}.accounts to {SERVICE_ROLE};
        grant select, insert, delete on {s}.outbox to {SERVICE_ROLE};
        grant select, update on {s}.outbox_progress to {SERVICE_ROLE};
        grant select on {s}.accounts, {s}.transactions, {s}.entries, {s}.alembic_version to {AUDITOR_ROLE};
        """
    )


def downgrade(schema: str) -> None:
    s = f'"{schema}"'
    op.execute(
        f"""
        revoke all on {s}.accounts, {s}.transactions, {s}.entries, {s}.outbox, {s}.outbox_progress,
            {s}.alembic_version from {SERVICE_ROLE}, {AUDITOR_ROLE};
        revoke usage on schema {s} from {SERVICE_ROLE}, {AUDITOR_ROLE};
        alter table {s}.accounts drop constraint accounts_only_external_goes_negative;
        drop trigger accounts_checked_on_insert on {s}.accounts;
        drop trigger accounts_checked_on_update on {s}.accounts;
        drop trigger entries_checked on {s}.entries;
        drop trigger transactions_noted on {s}.transactions;
        drop table {s}.journal_checks;
        drop function {s}.check_journal_at_commit();
        drop function {s}.check_account_rows();
        drop function {s}.check_new_entries();
        drop function {s}.note_applied_transactions();
        """
    )
