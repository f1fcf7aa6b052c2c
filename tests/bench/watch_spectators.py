"""``python -m tests.bench.watch_spectators ADDRESS TOKEN TABLE_ID N``: N spectators of one
table, each holding a WatchTable stream, in a process of their own (``bench_watchers``).

The streams read each message's bytes as they arrive (a gateway relaying them would do no
more), so this process's CPU stays small beside the table service's. Protocol on stdin and
stdout, one line each: it prints ``ready`` once every stream has its first message (the
snapshot); then ``start`` and ``stop`` lines mark the window, and after ``stop`` it prints
``{"messages": …, "bytes": …, "ended": …}`` as JSON: what every stream together received in
the window, and how many streams ended before it closed (0 when all kept up). The last
message of each stream is parsed as a ``WatchTableResponse`` at the end, so that what was
counted is known to be the table's messages.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field

import grpc

from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.grpc_client import channel

WATCH_METHOD = "/socai.table.v1.TableService/WatchTable"
STREAMS_PER_CHANNEL = 10  # spectators come in over several connections, as through a few gateways


@dataclass
class Count:
    counting: bool = False
    messages: int = 0
    size: int = 0  # bytes
    ended: int = 0
    last: list[bytes] = field(default_factory=list)


async def command(word: str) -> None:
    """Wait for the line ``word`` on stdin (read in a thread: the streams go on meanwhile).
    Raises EOFError when stdin closes first (the benchmark went away)."""
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            raise EOFError(f"stdin closed before {word!r}")
        if line.strip() == word:
            return


async def spectate(address: str, token: str, table_id: str, n: int) -> None:
    channels = [channel(address, token) for _ in range((n + STREAMS_PER_CHANNEL - 1) // STREAMS_PER_CHANNEL)]
    count = Count(last=[b""] * n)
    first = [asyncio.Event() for _ in range(n)]

    async def watch(i: int) -> None:
        relay = channels[i // STREAMS_PER_CHANNEL].unary_stream(
            WATCH_METHOD, request_serializer=pb.WatchTableRequest.SerializeToString
        )
        try:
            async for message in relay(pb.WatchTableRequest(table_id=table_id)):
                first[i].set()
                count.last[i] = message
                if count.counting:
                    count.messages += 1
                    count.size += len(message)
        except grpc.aio.AioRpcError:
            pass
        count.ended += 1
        first[i].set()

    tasks = [asyncio.create_task(watch(i)) for i in range(n)]
    await asyncio.gather(*(event.wait() for event in first))
    print("ready", flush=True)
    await command("start")
    ended_before = count.ended
    count.counting = True
    await command("stop")
    count.counting = False
    for message in count.last:
        if message:
            pb.WatchTableResponse.FromString(message)  # raises if a stream carried anything else
    report = {"messages": count.messages, "bytes": count.size, "ended": count.ended - ended_before}
    print(json.dumps(report), flush=True)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for ch in channels:
        await ch.close()


if __name__ == "__main__":
    address, token, table_id, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    asyncio.run(spectate(address, token, table_id, n))
