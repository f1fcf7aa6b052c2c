"""The checks of the books: ``VerifyJournal`` recomputes every balance from the journal,
``TrialBalance`` sums the balances. Both run on the service's pool, each in one snapshot.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

from socai import errors
from socai.infra import db_pool
from socai.money import INT64_MAX
from socai_ledger import domain
from socai_ledger.db import SCHEMA
from socai_ledger.domain import KindTotal, Mismatch, TrialBalance, VerifyReport

VERIFY_MISMATCHES_MAX: Final = 1000

_VERIFY_BALANCES_SQL = f"""
with computed as (
    select account_id, sum(amount_gold)::numeric as total, count(*) as n, max(account_version) as max_version
    from {SCHEMA}.entries group by account_id
), last_entry as (
    select distinct on (account_id) account_id, balance_after_gold
    from {SCHEMA}.entries order by account_id, account_version desc
)
select a.account_id, a.balance_gold, coalesce(c.total, 0), a.version, coalesce(c.n, 0), coalesce(c.max_version, 0),
       l.balance_after_gold, a.may_go_negative
from {SCHEMA}.accounts a
left join computed c on c.account_id = a.account_id
left join last_entry l on l.account_id = a.account_id
where a.balance_gold <> coalesce(c.total, 0)
   or a.version <> coalesce(c.n, 0)
   or a.version <> coalesce(c.max_version, 0)
   or (l.balance_after_gold is not null and l.balance_after_gold <> a.balance_gold)
   or (a.balance_gold < 0 and not a.may_go_negative)
order by a.account_id
limit {VERIFY_MISMATCHES_MAX}
"""
_VERIFY_CHAIN_SQL = f"""
select account_id, account_version, amount_gold, balance_after_gold, previous_after, position
from (
    select account_id, account_version, amount_gold, balance_after_gold,
           lag(balance_after_gold, 1, 0::bigint) over w as previous_after,
           row_number() over w as position
    from {SCHEMA}.entries
    window w as (partition by account_id order by account_version)
) chain
where balance_after_gold::numeric <> previous_after::numeric + amount_gold or account_version <> position
order by account_id, account_version
limit {VERIFY_MISMATCHES_MAX}
"""
_VERIFY_TRANSACTIONS_SQL = f"""
select t.journal_seq, t.transaction_id, coalesce(s.total, 0), coalesce(s.n, 0)
from {SCHEMA}.transactions t
left join (
    select journal_seq, sum(amount_gold)::numeric as total, count(*) as n from {SCHEMA}.entries group by journal_seq
) s on s.journal_seq = t.journal_seq
where t.status = 'applied' and (coalesce(s.total, 0) <> 0 or coalesce(s.n, 0) < {domain.ENTRIES_MIN})
order by t.journal_seq
limit {VERIFY_MISMATCHES_MAX}
"""
_VERIFY_ORPHANS_SQL = f"""
select e.account_id, sum(e.amount_gold)::numeric from {SCHEMA}.entries e
where not exists (select 1 from {SCHEMA}.accounts a where a.account_id = e.account_id)
group by e.account_id order by e.account_id limit {VERIFY_MISMATCHES_MAX}
"""

# Holds (ledger_0005): each account's held_gold is the sum of its holds not released, and its
# balance covers it (the database guards both; the auditor checks them too).
_VERIFY_HOLDS_SQL = f"""
select a.account_id, a.balance_gold, a.held_gold, coalesce(h.total, 0), a.may_go_negative
from {SCHEMA}.accounts a
left join (
    select account_id, sum(amount_gold)::numeric as total from {SCHEMA}.holds where status <> 'released'
    group by account_id
) h on h.account_id = a.account_id
where a.held_gold <> coalesce(h.total, 0) or (a.balance_gold < a.held_gold and not a.may_go_negative)
order by a.account_id
limit {VERIFY_MISMATCHES_MAX}
"""


def _gold(value: Any) -> int:
    """A numeric sum as int64 gold, clamped (a sum outside int64 is itself a mismatch)."""
    number = int(value)
    return max(-INT64_MAX - 1, min(INT64_MAX, number))


@db_pool.retried_read
async def verify_journal(pool: db_pool.Pool) -> VerifyReport:
    """Recompute every balance from the entries, in one consistent snapshot.

    Checks: each account's balance and version against the sum and count of its entries and
    its last ``balance_after``; each entry's ``balance_after`` against the previous one plus
    its amount, versions gapless from 1; each applied transaction balanced with at least two
    entries; no entry on a missing account; no forbidden negative balance; each account's
    held gold the sum of its holds not released, and covered by its balance.
    """
    mismatches: list[Mismatch] = []
    async with pool.connection() as conn:
        await conn.set_autocommit(False)
        try:
            await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
            await conn.set_read_only(True)
            async with conn.transaction():
                counts = await (
                    await conn.execute(
                        f"select (select count(*) from {SCHEMA}.accounts), (select count(*) from {SCHEMA}.entries)"
                    )
                ).fetchone()
                errors.check(counts is not None, "the count query returns a row")
                assert counts is not None
                for row in await (await conn.execute(_VERIFY_BALANCES_SQL)).fetchall():
                    account_id, stored, computed, version, n, max_version, last_after, may_go_negative = row
                    problems = []
                    if stored != computed:
                        problems.append(f"balance {stored} but entries sum to {computed}")
                    if version != n or version != max_version:
                        problems.append(f"version {version} but {n} entries (last version {max_version})")
                    if last_after is not None and last_after != stored:
                        problems.append(f"last balance_after is {last_after}")
                    if stored < 0 and not may_go_negative:
                        problems.append("negative balance on an account that may not go negative")
                    mismatches.append(Mismatch(account_id, stored, _gold(computed), "; ".join(problems)))
                for row in await (await conn.execute(_VERIFY_CHAIN_SQL)).fetchall():
                    account_id, version, amount, after, previous, position = row
                    mismatches.append(
                        Mismatch(
                            account_id,
                            after,
                            _gold(previous + amount),
                            f"entry version {version} (position {position}): balance_after {after} "
                            f"but previous {previous} + amount {amount}",
                        )
                    )
                for seq, tx_id, total, n in await (await conn.execute(_VERIFY_TRANSACTIONS_SQL)).fetchall():
                    mismatches.append(
                        Mismatch(
                            "", 0, _gold(total), f"transaction {tx_id} (journal {seq}): {n} entries sum to {total}"
                        )
                    )
                for account_id, total in await (await conn.execute(_VERIFY_ORPHANS_SQL)).fetchall():
                    mismatches.append(
                        Mismatch(account_id, 0, _gold(total), "entries on an account that does not exist")
                    )
                for account_id, balance, held, holding, may_go_negative in await (
                    await conn.execute(_VERIFY_HOLDS_SQL)
                ).fetchall():
                    problems = []
                    if held != holding:
                        problems.append(f"{held} gold held but its holds not released sum to {holding}")
                    if balance < held and not may_go_negative:
                        problems.append(f"balance {balance} below the {held} gold it holds")
                    mismatches.append(Mismatch(account_id, balance, balance, "; ".join(problems)))
        finally:
            await conn.set_read_only(False)
            await conn.set_isolation_level(None)
            await conn.set_autocommit(True)
    return VerifyReport(int(counts[0]), int(counts[1]), tuple(mismatches[:VERIFY_MISMATCHES_MAX]))


@db_pool.retried_read
async def trial_balance(pool: db_pool.Pool) -> TrialBalance:
    """The sum of all balances, and per account kind (one statement: one snapshot)."""
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                f"select kind, sum(balance_gold)::numeric, count(*) from {SCHEMA}.accounts group by kind order by kind"
            )
        ).fetchall()
    total = sum(int(r[1]) for r in rows)
    return TrialBalance(_gold(total), tuple(KindTotal(r[0], _gold(r[1]), int(r[2])) for r in rows))
