"""The journal in commit order, a page at a time: ``ListTransactions`` (``socai ledger export``).

An auditor who exports the journal and the event log can re-check everything ``socai
audit`` checks against the live ledger without it (``socai audit --events … --journal …``).
A page is the applied transactions with ``journal_seq`` above the token's, in journal
order, each with all its entries; rejected requests have no ``journal_seq`` and are not in
the journal. ``journal_seq`` is unique and only grows (one writer at a time holds the
journal lock), so paging by it never skips or repeats a transaction, even while postings
continue: a later page simply reaches further.

A module of its own: one RPC's read of the whole journal for auditors, beside the
per-account reads of ``queries.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from socai import errors
from socai.infra import db_pool
from socai_ledger import domain, queries
from socai_ledger.db import SCHEMA
from socai_ledger.domain import Entry, Transaction

# The token says which list it belongs to, so a ListEntries or ListAccounts token given
# here is refused as BAD_PAGE_TOKEN rather than read as a position.
TOKEN_TAG: Final = "journal"

# A period is the transactions committed in [since, until): the batch's commit time only
# grows with journal_seq (one writer holds the journal's lock), so it is a run of
# consecutive journal_seq and paging by journal_seq inside it skips nothing.
_PAGE_SQL = f"""
select journal_seq, transaction_id, idempotency_key, kind, reference, metadata, created_at
from {SCHEMA}.transactions
where journal_seq > %(after)s
  and (%(since)s::timestamptz is null or created_at >= %(since)s)
  and (%(until)s::timestamptz is null or created_at < %(until)s)
order by journal_seq limit %(limit)s
"""
_ENTRIES_SQL = f"""
select journal_seq, account_id, amount_gold, balance_after_gold, account_version
from {SCHEMA}.entries where journal_seq between %s and %s order by journal_seq, entry_index
"""


def encode_page_token(after_seq: int, filters: str) -> str:
    """The token of the page after ``after_seq`` of a call with ``filters`` (``socai.infra.paging.filters_of``
    of its period)."""
    return queries.encode_bound_token(filters, TOKEN_TAG, str(after_seq))


def decode_page_token(token: str, filters: str) -> int:
    """The journal_seq a page continues after (0 for no token). Raises InvalidArgument
    ("BAD_PAGE_TOKEN"), for a token of another list or of another period too."""
    if not token:
        return 0
    tag, seq = queries.decode_bound_token(token, 2, filters)
    if tag != TOKEN_TAG:
        raise errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token belongs to another list")
    return queries.parse_int64(seq)


@db_pool.retried_read
async def list_transactions(
    pool: db_pool.Pool,
    *,
    after_seq: int,
    limit: int,
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[list[Transaction], bool]:
    """Up to ``limit`` applied transactions after ``after_seq`` in journal order, committed
    in ``[since, until)`` when those are given, and whether more follow. ``limit`` is at
    most ``domain.PAGE_SIZE_MAX``."""
    errors.check(0 < limit <= domain.PAGE_SIZE_MAX, "a journal page is bounded")
    params = {"after": after_seq, "since": since, "until": until, "limit": limit + 1}
    async with pool.connection() as conn:
        heads = await (await conn.execute(_PAGE_SQL, params)).fetchall()
        page = heads[:limit]
        if not page:
            return [], False
        # The entries of a transaction commit with it, so the range read of committed
        # transactions finds every entry they have, however many batches commit meanwhile.
        rows = await (await conn.execute(_ENTRIES_SQL, (page[0][0], page[-1][0]))).fetchall()
    by_seq: dict[int, list[Entry]] = {}
    info = {row[0]: (str(row[1]), row[6]) for row in page}
    for seq, account_id, amount, after, version in rows:
        tx_id, created_at = info[seq]
        by_seq.setdefault(seq, []).append(Entry(tx_id, account_id, amount, after, version, created_at, seq))
    found = [
        Transaction(str(tx_id), key, kind, reference, tuple(by_seq.get(seq, ())), metadata or {}, created_at, seq)
        for seq, tx_id, key, kind, reference, metadata, created_at in page
    ]
    return found, len(heads) > limit
