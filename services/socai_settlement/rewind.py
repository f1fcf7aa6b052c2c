"""Where settlement must start again after its database was restored from a backup.

After a restore (``socai restore``) settlement's records stop at the backup, while its
durable consumers, whose state lives in NATS, have acknowledged every hand settled since.
Some of those hands' ledger postings came back with the journal (the ledger's stream), some
were committed but never published and are lost. Settlement replays every hand its records
do not hold: a posting that came back is answered ``REPLAYED`` with its original
transaction (the same request: the ledger kept its request hash), a lost one is posted again
— in stream order, as the first time.

Within a partition the pipeline stores hands strictly in stream order, so every
``HandEnded`` up to the partition's newest record was settled or dead-lettered when the
backup was taken: the partition's durable starts again right after it (``start_seqs``).
Starting earlier would cost only time (a settled hand is skipped); starting later would lose
hands.
"""

from __future__ import annotations

from collections.abc import Iterable

from socai.infra.partitions import partition_of

SCHEMA = "socai_settlement"

# The newest stream sequence settlement recorded per table, settled or dead-lettered.
NEWEST_PER_TABLE_SQL = f"""
select table_id, max(stream_seq) from (
    select table_id, stream_seq from {SCHEMA}.settlements
    union all
    select table_id, stream_seq from {SCHEMA}.dead_letters
) recorded group by table_id
"""


def start_seqs(newest_per_table: Iterable[tuple[str, int]], partitions: int) -> dict[int, int]:
    """The stream sequence each partition's durable starts at (1 when settlement recorded
    none of its hands): right after the newest hand recorded in that partition. ``partitions``
    is the event log's P (0: one durable, partition 0)."""
    starts = {k: 1 for k in range(max(partitions, 1))}
    for table_id, newest in newest_per_table:
        k = partition_of(table_id, partitions) if partitions else 0
        starts[k] = max(starts[k], int(newest) + 1)
    return starts
