"""``python -m socai_ledger``: the ledger service.

``socai.infra.service.run`` reads Settings from the environment, logs JSON lines, serves
Prometheus metrics on ``SOCAI_METRICS_PORT_BASE`` + 0, serves gRPC on ``SOCAI_LEDGER_ADDR``
(or ``SOCAI_LISTEN_ADDR``), tunes the garbage collector for a service's allocation
pattern, and stops gracefully on SIGTERM or SIGINT: health NOT_SERVING, no new calls,
in-flight calls finish, the write batcher flushes, the relay ends its round.
"""

from socai.infra.service import run
from socai_ledger.app import build_app

if __name__ == "__main__":
    run("ledger", build_app)
