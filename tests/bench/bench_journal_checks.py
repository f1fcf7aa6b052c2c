"""What the database's money checks cost a batch, each candidate against the others in one run.

``python -m tests.bench journal_checks``. One embedded PostgreSQL, one database per variant,
each migrated and funded alike (10,000 escrows and ``house:fees``), then the same batches
written to every variant in turn: round by round, the variants' order rotating, so the
machine's load weighs on each alike; the figure is each variant's median over the rounds.
Each batch is what the ledger's write path sends for it (the transactions' and the entries'
rows by COPY, one ``UPDATE … FROM unnest(…)`` of the balances, the outbox row, the commit),
made before the clock starts; every transaction moves gold between two escrows and credits
``house:fees`` (three entries). Variants:

- ``ledger_0003``: the checks as ledger_0003 made them (the database at ``ledger_0005``):
  pending duties as arrays in a ``journal_checks`` row per transaction.
- ``head``: the migrations' head (ledger_0006: ledger_0003's design, the account check's
  bookkeeping lighter).
- ``session_tables``: a candidate, prototyped here only (``_SESSION_TABLES_SQL`` over
  ``ledger_0005``): the same checks, their pending duties as rows of two session-local
  ``ON COMMIT DELETE ROWS`` tables made by the trigger functions.
- ``definer_function``: the alternative the issue named, prototyped here only: the rows go
  by COPY into the session's own staging tables and one ``SECURITY DEFINER`` function checks
  them set-wise (every transaction balanced, every entry under a staged applied transaction,
  the chains, each chain anchored at its locked account row), moves them into the journal
  and sets the balances from the chains' ends; statement-level triggers refuse any write of
  the journal or a balance outside it.
- ``unchecked``: ``ledger_0005`` with ledger_0003's four triggers dropped: what the checks
  cost, for the record (never a deployment).

``ledger.journal_check_batch_<n>`` is ``head``'s rate in transactions per second
for batches of n transactions, the other variants its peers; on a shared machine the rate
moves with everyone else's load, so ``ledger.journal_check_cpu_us_<n>`` gives what decides:
the CPU time the variant's PostgreSQL backend spent per transaction (``/proc/<pid>/schedstat``,
the time on a CPU: neither waiting for one nor for a disk counts), and in its params that CPU
step by step (the transactions' COPY, the entries' COPY, the balance update, the outbox row, the
commit: where each check runs) for every variant written directly.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg

from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedPostgres, free_port
from tests.bench.harness import BenchContext, Result

ACCOUNTS = 10_000
OPENING_GOLD = 10**12
VARIANTS = ("ledger_0003", "head", "session_tables", "definer_function", "unchecked")
S = "socai_ledger"

_COPY_TRANSACTIONS = (
    "copy {table} (transaction_id, idempotency_key, request_hash, status, journal_seq, kind, reference, "
    "created_at) from stdin"
)
_COPY_ENTRIES = (
    "copy {table} (account_id, account_version, journal_seq, entry_index, transaction_id, amount_gold, "
    "balance_after_gold, created_at) from stdin"
)
_UPDATE = (
    f"update {S}.accounts a set balance_gold = u.b, version = u.v "
    "from unnest(%s::text[], %s::int8[], %s::int8[]) as u(id, b, v) where a.account_id = u.id"
)
_OUTBOX = f"insert into {S}.outbox (first_seq, last_seq) values (%s, %s)"

# The SECURITY DEFINER candidate (a prototype: no account opening, no holds).
_DEFINER_SQL = f"""
drop trigger transactions_noted on {S}.transactions;
drop trigger entries_checked on {S}.entries;
drop trigger accounts_checked_on_update on {S}.accounts;
drop trigger accounts_checked_on_insert on {S}.accounts;
create function {S}.refuse_outside_posting() returns trigger language plpgsql
set search_path = pg_catalog, pg_temp as $$
begin
    if current_setting('socai.posting', true) is distinct from 'on' then
        raise exception 'the journal and balances are written by post_staged only'
            using errcode = 'insufficient_privilege';
    end if;
    return null;
end;
$$;
create trigger transactions_only_posted after insert on {S}.transactions
    for each statement execute function {S}.refuse_outside_posting();
create trigger entries_only_posted after insert on {S}.entries
    for each statement execute function {S}.refuse_outside_posting();
create trigger accounts_only_posted after update of balance_gold, version on {S}.accounts
    for each statement execute function {S}.refuse_outside_posting();
create function {S}.post_staged() returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    bad bigint;
    steps bigint;
    moved bigint;
begin
    perform set_config('socai.posting', 'on', true);
    select g.journal_seq into bad
      from (select journal_seq, sum(amount_gold) as total from pg_temp.staged_entries group by journal_seq) g
      left join pg_temp.staged_transactions t on t.journal_seq = g.journal_seq and t.status = 'applied'
     where g.total <> 0 or t.journal_seq is null
     limit 1;
    if found then
        raise exception 'ledger transaction % does not balance or was not applied here', bad
            using errcode = 'integrity_constraint_violation';
    end if;
    insert into {S}.transactions select * from pg_temp.staged_transactions;
    insert into {S}.entries select * from pg_temp.staged_entries;
    with chained as (
        select n.account_id, n.account_version, n.amount_gold, n.balance_after_gold,
               lag(n.account_version) over w as previous_version,
               lag(n.balance_after_gold) over w as previous_after,
               lead(n.account_version) over w is null as is_last
          from pg_temp.staged_entries n
        window w as (partition by n.account_id order by n.account_version)
    ), per_account as (
        select account_id, min(account_version) as first_version, max(account_version) as last_version,
               min(balance_after_gold - amount_gold) filter (where previous_version is null) as balance_before,
               min(balance_after_gold) filter (where is_last) as balance_after,
               bool_or(previous_version is not null
                       and (previous_version <> account_version - 1
                            or previous_after + amount_gold <> balance_after_gold)) as broken
          from chained group by account_id
    ), moved as (
        update {S}.accounts a set balance_gold = p.balance_after, version = p.last_version
          from per_account p
         where a.account_id = p.account_id and not p.broken
           and a.version = p.first_version - 1 and a.balance_gold = p.balance_before
        returning 1
    )
    select (select count(*) from per_account), (select count(*) from moved) into steps, moved;
    if steps <> moved then
        raise exception 'ledger entries do not chain from their accounts'' balances'
            using errcode = 'integrity_constraint_violation';
    end if;
    delete from pg_temp.staged_transactions;
    delete from pg_temp.staged_entries;
    perform set_config('socai.posting', 'off', true);
end;
$$;
"""
_STAGING_SQL = f"""
create temp table staged_transactions (like {S}.transactions) on commit delete rows;
create temp table staged_entries (like {S}.entries) on commit delete rows;
"""
# The session-tables candidate (measured, not chosen): ledger_0003's checks with their pending
# duties as rows of two ON COMMIT DELETE ROWS temporary tables made by the trigger functions
# (as the owner), the journal_checks row naming their oids (DISCARD TEMP drops them).
_SEQS = f'pg_temp."{S}_pending_seqs"'
_STEPS = f'pg_temp."{S}_pending_steps"'
_SESSION_TABLES_SQL = f"""
alter table {S}.journal_checks
    drop column applied_seqs, drop column unbalanced_seqs, drop column step_accounts,
    drop column step_first_versions, drop column step_balances_before, drop column step_last_versions,
    drop column step_balances_after,
    add column pending_seqs oid not null, add column pending_steps oid not null;
comment on table {S}.journal_checks is
    'one row per writing transaction: the session tables holding what it must satisfy at commit; '
    'written by the ledger triggers only';

-- The session's pending tables (made on first use, as the owner) and this transaction's
-- journal_checks row naming them: a statement that finds its transaction's duties
-- written to other tables (DISCARD TEMP dropped them) is refused.
create function {S}.journal_pending() returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    seqs_oid oid := to_regclass('{_SEQS}');
    steps_oid oid := to_regclass('{_STEPS}');
    noted {S}.journal_checks;
begin
    if seqs_oid is null or steps_oid is null then
        create temp table if not exists {_SEQS} (
            kind "char" not null,
            lo bigint not null,
            hi bigint not null
        ) on commit delete rows;
        create temp table if not exists {_STEPS} (
            account_id text storage plain collate "C" not null,
            first_version bigint not null,
            balance_before bigint not null,
            last_version bigint not null,
            balance_after bigint not null
        ) on commit delete rows;
        seqs_oid := to_regclass('{_SEQS}');
        steps_oid := to_regclass('{_STEPS}');
    end if;
    if (select count(*) from pg_class
         where oid in (seqs_oid, steps_oid) and relkind = 'r' and relpersistence = 't'
           and relowner = (select oid from pg_roles where rolname = current_user)) <> 2 then
        raise exception 'the ledger''s pending-check tables of this session were not made by its checks'
            using errcode = 'insufficient_privilege';
    end if;
    select * into noted from {S}.journal_checks where xact_id = pg_current_xact_id();
    if not found then
        insert into {S}.journal_checks (xact_id, pending_seqs, pending_steps)
        values (pg_current_xact_id(), seqs_oid, steps_oid);
    elsif noted.pending_seqs <> seqs_oid or noted.pending_steps <> steps_oid then
        raise exception 'the ledger''s pending checks of this transaction were dropped'
            using errcode = 'integrity_constraint_violation';
    end if;
end;
$$;

create or replace function {S}.note_applied_transactions() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    first_seq bigint;
    last_seq bigint;
    applied bigint;
begin
    select min(journal_seq), max(journal_seq), count(journal_seq) into first_seq, last_seq, applied
      from new_transactions where status = 'applied';
    if applied = 0 then
        return null;
    end if;
    perform {S}.journal_pending();
    if last_seq - first_seq + 1 = applied then
        insert into {_SEQS} (kind, lo, hi) values ('a', first_seq, last_seq);
    else
        insert into {_SEQS} (kind, lo, hi)
        select 'a', journal_seq, journal_seq from new_transactions where status = 'applied';
    end if;
    return null;
end;
$$;

create or replace function {S}.check_new_entries() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp set enable_nestloop = off as $$
declare
    first_seq bigint;
    last_seq bigint;
    spans bigint;
    span_lo bigint;
    span_hi bigint;
    unbalanced bigint[];
    orphan bigint;
    chain_broken boolean;
    again text;
begin
    -- Each ledger transaction of the statement: applied by this database transaction
    -- (an earlier one's legs are final), and balanced within the statement (else
    -- noted, and summed again at commit).
    select min(journal_seq), max(journal_seq), array_agg(journal_seq) filter (where total <> 0)
      into first_seq, last_seq, unbalanced
      from (select journal_seq, sum(amount_gold) as total from new_entries group by journal_seq) g;
    if first_seq is null then
        return null;  -- no rows
    end if;
    perform {S}.journal_pending();
    if unbalanced is not null then
        insert into {_SEQS} (kind, lo, hi) select 'u', seq, seq from unnest(unbalanced) as u(seq);
    end if;
    select count(*), min(lo), max(hi) into spans, span_lo, span_hi from {_SEQS} where kind = 'a';
    if not (spans = 1 and first_seq >= span_lo and last_seq <= span_hi) then
        select min(g.journal_seq) into orphan
          from (select distinct journal_seq from new_entries) g
         where not exists (select 1 from {_SEQS} a where a.kind = 'a' and g.journal_seq between a.lo and a.hi);
        if orphan is not null then
            raise exception 'ledger entries of journal_seq % belong to no transaction applied by this '
                'database transaction', orphan
                using errcode = 'integrity_constraint_violation',
                      hint = 'insert the applied transaction row, then its entries, in one database transaction';
        end if;
    end if;
    if exists (select 1 from {_STEPS}) then
        select p.account_id into again
          from {_STEPS} p join (select distinct account_id from new_entries) n on n.account_id = p.account_id
         limit 1;
        if again is not null then
            raise exception 'ledger account % has entries its row does not show yet; write the row before '
                'appending more of its entries', again
                using errcode = 'integrity_constraint_violation';
        end if;
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
    ), noted as (
        insert into {_STEPS} (account_id, first_version, balance_before, last_version, balance_after)
        select account_id, first_version, balance_before, last_version, balance_after from per_account
    )
    select bool_or(broken) into chain_broken from per_account;
    if chain_broken then
        raise exception 'ledger entries break their account''s chain: a balance_after is not the previous '
            'entry''s plus its amount, or a version is skipped'
            using errcode = 'integrity_constraint_violation';
    end if;
    return null;
end;
$$;

-- An account row whose balance or version a statement changed takes exactly the
-- pending step of its entries: from its old (balance, version) — (0, 0) for a new
-- row — to its new ones. A statement changing neither (opening an empty account,
-- moving held_gold) has nothing to check.
create or replace function {S}.check_account_rows() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp set enable_nestloop = off as $$
declare
    broken record;
    steps_pending boolean;
begin
    if tg_op = 'UPDATE' then
        -- The posting path's update finds steps pending; any other (held_gold moved by
        -- a hold) is checked only when it changed a balance or a version.
        steps_pending := to_regclass('{_STEPS}') is not null;
        if steps_pending then  -- a statement apart: the table may not exist yet
            steps_pending := exists (select 1 from {_STEPS});
        end if;
        if not steps_pending and not exists (
               select 1 from new_accounts n join old_accounts o on o.account_id = n.account_id
                where n.balance_gold <> o.balance_gold or n.version <> o.version
           ) then
            return null;
        end if;
        perform {S}.journal_pending();
        select n.account_id, o.balance_gold as balance_before, o.version as version_before,
               n.balance_gold, n.version
          into broken
          from new_accounts n
          join old_accounts o on o.account_id = n.account_id
          left join {_STEPS} p on p.account_id = n.account_id
         where (n.balance_gold <> o.balance_gold or n.version <> o.version)
           and (p.account_id is null or p.first_version <> o.version + 1 or p.balance_before <> o.balance_gold
                or p.last_version <> n.version or p.balance_after <> n.balance_gold)
         limit 1;
    else
        if not exists (select 1 from new_accounts n where n.balance_gold <> 0 or n.version <> 0) then
            return null;
        end if;
        perform {S}.journal_pending();
        select n.account_id, 0 as balance_before, 0 as version_before, n.balance_gold, n.version
          into broken
          from new_accounts n
          left join {_STEPS} p on p.account_id = n.account_id
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
    -- A step is done when its account's row stands at its end (a row written by this
    -- statement got there through the check above; one left unchanged cannot be there,
    -- as its entries are newer than the row).
    delete from {_STEPS} p using new_accounts n
     where n.account_id = p.account_id and n.version = p.last_version and n.balance_gold = p.balance_after;
    return null;
end;
$$;

create or replace function {S}.check_journal_at_commit() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    noted {S}.journal_checks;
    pending record;
    unbalanced record;
begin
    delete from {S}.journal_checks where xact_id = pg_current_xact_id() returning * into noted;
    if not found then
        return null;  -- already checked (SET CONSTRAINTS … IMMEDIATE)
    end if;
    if to_regclass('{_SEQS}') is distinct from noted.pending_seqs
       or to_regclass('{_STEPS}') is distinct from noted.pending_steps then
        raise exception 'the ledger''s pending checks of this transaction were dropped'
            using errcode = 'integrity_constraint_violation';
    end if;
    select account_id, last_version into pending from {_STEPS} limit 1;
    if found then
        raise exception 'ledger account % has entries up to version % that its balance does not show',
            pending.account_id, pending.last_version
            using errcode = 'integrity_constraint_violation',
                  hint = 'update each account to its newest entry in the same transaction';
    end if;
    select s.journal_seq, t.total into unbalanced
      from (select distinct lo as journal_seq from {_SEQS} where kind = 'u') s
      cross join lateral (
          select coalesce(sum(e.amount_gold), 0) as total from {S}.entries e where e.journal_seq = s.journal_seq
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
revoke all on function {S}.journal_pending() from public;
"""
_UNCHECKED_SQL = f"""
drop trigger transactions_noted on {S}.transactions;
drop trigger entries_checked on {S}.entries;
drop trigger accounts_checked_on_update on {S}.accounts;
drop trigger accounts_checked_on_insert on {S}.accounts;
"""


@dataclass
class Batch:
    transactions: bytes  # COPY text
    entries: bytes
    ids: list[str]
    balances: list[int]
    versions: list[int]
    first_seq: int
    last_seq: int


class Journal:
    """The workload's state: every variant is written the same batches from the same start."""

    def __init__(self) -> None:
        self.balance = {escrow(i): OPENING_GOLD for i in range(ACCOUNTS)} | {"house:fees": 0}
        self.version = {escrow(i): 1 for i in range(ACCOUNTS)} | {"house:fees": 0}
        self.seq = ACCOUNTS  # the funding transactions
        self.counter = 0

    def batch(self, size: int) -> Batch:
        now = datetime.now(UTC).isoformat()
        tx_lines: list[str] = []
        entry_lines: list[str] = []
        touched: dict[str, None] = {}
        first = self.seq + 1
        for _ in range(size):
            self.seq += 1
            self.counter += 1
            n = self.counter
            source, target = escrow(n * 7919 % ACCOUNTS), escrow((n * 104729 + 1) % ACCOUNTS)
            if source == target:
                target = escrow((n * 104729 + 2) % ACCOUNTS)
            amount, fee = 100 + n % 900, 1 + n % 5
            tx_id = uuid.uuid4()
            tx_lines.append(f"{tx_id}\tbench:{n}\t\\\\x{'00' * 32}\tapplied\t{self.seq}\tsettlement\t\t{now}\n")
            for index, (account, delta) in enumerate(((source, -amount), (target, amount - fee), ("house:fees", fee))):
                self.balance[account] += delta
                self.version[account] += 1
                touched[account] = None
                entry_lines.append(
                    f"{account}\t{self.version[account]}\t{self.seq}\t{index}\t{tx_id}\t{delta}\t"
                    f"{self.balance[account]}\t{now}\n"
                )
        ids = sorted(touched)
        return Batch(
            "".join(tx_lines).encode(),
            "".join(entry_lines).encode(),
            ids,
            [self.balance[i] for i in ids],
            [self.version[i] for i in ids],
            first,
            self.seq,
        )


def escrow(i: int) -> str:
    return f"escrow:bench:{i:05d}"


def setup(url: str, variant: str) -> None:
    migrate.upgrade(url, "ledger", "head" if variant == "head" else "ledger_0005")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"insert into {S}.accounts (account_id, kind) select 'escrow:bench:' || lpad(i::text, 5, '0'), 'escrow' "
            f"from generate_series(0, {ACCOUNTS - 1}) i"
        )
        # Funding: one transaction per escrow from the cashier, written through today's checks.
        now = datetime.now(UTC).isoformat()
        with conn.transaction(), conn.cursor() as cur:
            txs, entries = [], []
            for i in range(ACCOUNTS):
                tx_id = uuid.uuid4()
                txs.append(f"{tx_id}\tfund:{i}\t\\\\x{'00' * 32}\tapplied\t{i + 1}\tdeposit\t\t{now}\n")
                entries.append(f"external:cashier\t{i + 1}\t{i + 1}\t0\t{tx_id}\t{-OPENING_GOLD}\t")
                entries.append(f"{-OPENING_GOLD * (i + 1)}\t{now}\n")
                entries.append(f"{escrow(i)}\t1\t{i + 1}\t1\t{tx_id}\t{OPENING_GOLD}\t{OPENING_GOLD}\t{now}\n")
            with cur.copy(_COPY_TRANSACTIONS.format(table=f"{S}.transactions")) as copy:
                copy.write("".join(txs).encode())
            with cur.copy(_COPY_ENTRIES.format(table=f"{S}.entries")) as copy:
                copy.write("".join(entries).encode())
            cur.execute(
                f"update {S}.accounts set balance_gold = %s, version = 1 where kind = 'escrow'", (OPENING_GOLD,)
            )
            cur.execute(
                f"update {S}.accounts set balance_gold = %s, version = %s where account_id = 'external:cashier'",
                (-OPENING_GOLD * ACCOUNTS, ACCOUNTS),
            )
        if variant == "definer_function":
            conn.execute(_DEFINER_SQL)
        elif variant == "session_tables":
            conn.execute(_SESSION_TABLES_SQL)
        elif variant == "unchecked":
            conn.execute(_UNCHECKED_SQL)
        conn.execute("vacuum analyze")


STEPS = ("transactions", "entries", "balances", "outbox", "commit")


def writer(conn: psycopg.Connection, variant: str, steps: dict[str, float]) -> Callable[[Batch], None]:
    """The variant's way to write a batch; the direct ones add each step's backend CPU
    seconds to ``steps``."""
    if variant == "definer_function":
        conn.execute(_STAGING_SQL)
        conn.commit()

        def staged(batch: Batch) -> None:
            with conn.cursor() as cur:
                with cur.copy(_COPY_TRANSACTIONS.format(table="pg_temp.staged_transactions")) as copy:
                    copy.write(batch.transactions)
                with cur.copy(_COPY_ENTRIES.format(table="pg_temp.staged_entries")) as copy:
                    copy.write(batch.entries)
                cur.execute(f"select {S}.post_staged()")
                cur.execute(_OUTBOX, (batch.first_seq, batch.last_seq))
            conn.commit()

        return staged

    def direct(batch: Batch) -> None:
        marks = [backend_cpu_s(conn)]
        with conn.cursor() as cur:
            with cur.copy(_COPY_TRANSACTIONS.format(table=f"{S}.transactions")) as copy:
                copy.write(batch.transactions)
            marks.append(backend_cpu_s(conn))
            with cur.copy(_COPY_ENTRIES.format(table=f"{S}.entries")) as copy:
                copy.write(batch.entries)
            marks.append(backend_cpu_s(conn))
            cur.execute(_UPDATE, (batch.ids, batch.balances, batch.versions))
            marks.append(backend_cpu_s(conn))
            cur.execute(_OUTBOX, (batch.first_seq, batch.last_seq))
            marks.append(backend_cpu_s(conn))
        conn.commit()
        marks.append(backend_cpu_s(conn))
        for step, before, after in zip(STEPS, marks[:-1], marks[1:], strict=True):
            steps[step] += after - before

    return direct


def backend_cpu_s(conn: psycopg.Connection) -> float:
    """Seconds the connection's backend has spent on a CPU."""
    with open(f"/proc/{conn.info.backend_pid}/schedstat") as stat:
        return int(stat.read().split()[0]) / 1e9


def run(ctx: BenchContext) -> list[Result]:
    sizes = (1000, 100, 10)
    rounds = 3 if ctx.quick else 7
    transactions_per_round = 2_000 if ctx.quick else 10_000
    pg = EmbeddedPostgres(ctx.workdir / "pg", port=free_port(), database="postgres")
    pg.start()
    base = pg.admin_url().rsplit("/", 1)[0]
    run_id = uuid.uuid4().hex[:8]
    try:
        urls = {}
        for variant in VARIANTS:
            with psycopg.connect(pg.admin_url(), autocommit=True) as conn:
                conn.execute(f'create database "checks_{variant}_{run_id}"')
            urls[variant] = f"{base}/checks_{variant}_{run_id}"
            setup(urls[variant], variant)
        conns = {v: psycopg.connect(u) for v, u in urls.items()}
        steps = {v: dict.fromkeys(STEPS, 0.0) for v in VARIANTS}
        writers = {v: writer(conns[v], v, steps[v]) for v in VARIANTS}
        journal = Journal()
        results = []
        try:
            for size in sizes:
                rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
                cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
                for totals in steps.values():
                    totals.update(dict.fromkeys(STEPS, 0.0))
                written = 0
                for r in range(rounds):
                    batches = [journal.batch(size) for _ in range(max(1, transactions_per_round // size))]
                    written += len(batches) * size
                    order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
                    for variant in order:
                        with psycopg.connect(pg.admin_url(), autocommit=True) as admin:
                            admin.execute("checkpoint")
                        started, cpu_before = time.perf_counter(), backend_cpu_s(conns[variant])
                        for batch in batches:
                            writers[variant](batch)
                        elapsed, used = time.perf_counter() - started, backend_cpu_s(conns[variant]) - cpu_before
                        rates[variant].append(len(batches) * size / elapsed)
                        cpu[variant].append(used * 1e6 / (len(batches) * size))
                medians = {v: statistics.median(x) for v, x in rates.items()}
                cpu_medians = {v: statistics.median(x) for v, x in cpu.items()}
                line = ", ".join(f"{v} {m:,.0f} tx/s {cpu_medians[v]:.1f} µs" for v, m in medians.items())
                print(f"   batches of {size}: {line}", flush=True)
                for v in ("ledger_0003", "head", "unchecked"):
                    by_step = ", ".join(f"{k} {t * 1e6 / written:.1f}" for k, t in steps[v].items())
                    print(f"      {v} backend CPU µs/tx by step: {by_step}", flush=True)
                results.append(
                    Result(
                        name=f"ledger.journal_check_batch_{size}",
                        value=medians["head"],
                        unit="tx/s",
                        peers={v: m for v, m in medians.items() if v != "head"},
                        params={
                            "rounds": rounds,
                            "transactions_per_round": transactions_per_round,
                            "rates": {v: [round(x) for x in xs] for v, xs in rates.items()},
                            "ratio_to_unchecked": {v: round(m / medians["unchecked"], 3) for v, m in medians.items()},
                            "entries_per_transaction": 3,
                            "accounts": ACCOUNTS + 2,
                            "interleaved": "each round writes the same batches to every variant, order rotating",
                            "cpus": os.cpu_count(),
                        },
                    )
                )
                results.append(
                    Result(
                        name=f"ledger.journal_check_cpu_us_{size}",
                        value=cpu_medians["head"],
                        unit="µs/tx",
                        higher_is_better=False,
                        peers={v: m for v, m in cpu_medians.items() if v != "head"},
                        params={
                            "what": "CPU time of the PostgreSQL backend per transaction, batches of "
                            f"{size} (/proc/<pid>/schedstat)",
                            "rounds": rounds,
                            "per_round": {v: [round(x, 1) for x in xs] for v, xs in cpu.items()},
                            "ratio_to_ledger_0003": {
                                v: round(m / cpu_medians["ledger_0003"], 3) for v, m in cpu_medians.items()
                            },
                            "steps_cpu_us_per_tx": {
                                v: {step: round(t * 1e6 / written, 1) for step, t in totals.items()}
                                for v, totals in steps.items()
                                if v != "definer_function"
                            },
                        },
                    )
                )
        finally:
            for conn in conns.values():
                conn.close()
        for variant, url in urls.items():
            verify(url, variant)
        return results
    finally:
        pg.stop()


def verify(url: str, variant: str) -> None:
    """Every variant ends with the same balances, each its newest entry's."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            f"select count(*) filter (where a.balance_gold <> e.balance_after_gold), sum(a.balance_gold) "
            f"from {S}.accounts a join {S}.entries e on e.account_id = a.account_id and e.account_version = a.version"
        ).fetchone()
    if row is None or row[0] != 0 or row[1] != 0:
        raise RuntimeError(f"{variant}: balances do not follow the journal: {row}")
