"""``python -m socai_ledger``: the ledger service.

``socai.infra.service.run`` reads Settings from the environment, logs JSON lines, serves
Prometheus metrics on ``SOCAI_METRICS_PORT_BASE`` + 0, serves gRPC on ``SOCAI_LEDGER_ADDR``
(or ``SOCAI_LISTEN_ADDR``), and stops gracefully on SIGTERM or SIGINT: health NOT_SERVING,
no new calls, in-flight calls finish, the write batcher flushes, the relay ends its round.
"""

import gc

from socai.infra.service import run
from socai_ledger.app import build_app

# The write path allocates short-lived tuples by the thousand per batch (rows, entries,
# outcomes). With CPython's default threshold (700 allocations) the collector ran every
# couple of transactions and scanned the long-lived heap each time; measured, it cost
# ~20-40 % of the ledger's throughput. Objects alive after startup are frozen out of the
# scans, and young collections run every 50,000 allocations instead (memory stays bounded:
# reference counting frees almost everything; the collector is only for cycles).
GC_GEN0_THRESHOLD = 50_000

if __name__ == "__main__":
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, 50, 100)
    run("ledger", build_app)
