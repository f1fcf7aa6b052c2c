"""A lease holder in a process of its own, for the SIGSTOP and SIGKILL tests.

    python -m tests.integration.infra.lease_holder NATS_URL BUCKET INSTANCE PARTITIONS TTL_S [DATABASE_URL]

It runs a ``LeaseManager`` and prints one line per fact on stdout: ``READY``,
``ACQUIRED <partition> <token>``, ``LOST <partition>``, answers to commands. Commands on stdin:

- ``check <partition>``: ``CHECK <partition> ok|lost`` (``Lease.check()`` of its last lease);
- ``write <partition> <label>``: writes an effect row under the token of its last lease on
  the partition, fenced (``socai.infra.fence.advance`` in the same transaction), without
  checking the lease first, as a write already decided before a pause would: ``WRITE
  <partition> ok|fenced``.
"""

from __future__ import annotations

import asyncio
import sys

import psycopg

from socai import errors
from socai.infra import fence
from socai.infra.leases import Lease, LeaseConfig, LeaseManager
from socai.infra.nats import connect

SCOPE = "test"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def fenced_write(database_url: str, partition: int, token: int, holder: str, label: str) -> bool:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        try:
            async with conn.transaction():
                await fence.advance(conn, SCOPE, partition, token)
                await conn.execute(
                    "insert into effects (partition, token, holder, label) values (%s, %s, %s, %s)",
                    (partition, token, holder, label),
                )
        except errors.PreconditionFailed as exc:
            if exc.code != "FENCED":
                raise
            return False
    return True


async def main(argv: list[str]) -> None:
    nats_url, bucket, instance, partitions, ttl_s = argv[:5]
    database_url = argv[5] if len(argv) > 5 else ""
    nc = await connect(nats_url, name=instance)
    last: dict[int, Lease] = {}
    manager: LeaseManager

    async def on_acquired(partition: int, token: int) -> None:
        lease = manager.lease(partition)
        if lease is not None:
            last[partition] = lease
        say(f"ACQUIRED {partition} {token}")

    async def on_lost(partition: int) -> None:
        say(f"LOST {partition}")

    manager = LeaseManager(
        nc.jetstream(), LeaseConfig(bucket=bucket, ttl_s=float(ttl_s)), instance, int(partitions), on_acquired, on_lost
    )
    await manager.start()
    say("READY")
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command, *args = line.split()
        partition = int(args[0])
        if command == "check":
            try:
                last[partition].check()
                say(f"CHECK {partition} ok")
            except errors.PreconditionFailed:
                say(f"CHECK {partition} lost")
        elif command == "write":
            written = await fenced_write(database_url, partition, last[partition].fence_token, instance, args[1])
            say(f"WRITE {partition} {'ok' if written else 'fenced'}")
    await manager.stop()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
