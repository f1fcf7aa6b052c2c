"""The outbox relay reads every ack of a chunk, the refusals after the first one too.

After a NATS restart every message of a chunk in flight can be refused alike (503: no
stream listens yet). The relay stops at the first failure, but a refusal nobody read is
reported by asyncio ("Future exception was never retrieved") when its future is collected:
a traceback in the ledger's log for an outage the relay handled (the nemesis hour's one
such line).
"""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace
from typing import Any

from socai import errors
from socai.infra.nats import StreamSpec
from socai_ledger.outbox import OutboxRelay, _Publisher, _Refused


async def test_every_refusal_of_a_chunk_is_read_not_left_to_the_garbage_collector() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    relay = OutboxRelay("postgresql://unused", "nats://unused", stream=StreamSpec(), prefix="socai.posted")
    futures: list[asyncio.Future[dict[str, Any]]] = [loop.create_future() for _ in range(4)]
    futures[0].set_result({"stream": "SOCAI_LEDGER", "seq": 1})
    for refused in futures[1:]:
        refused.set_exception(_Refused(503, 0, "no stream listens on this subject"))
    chunk = [SimpleNamespace(journal_seq=n, transaction_id=f"tx{n}") for n in range(1, 5)]

    stored, failure = await relay._acked(_Publisher(None, "inbox"), chunk, futures)  # type: ignore[arg-type]

    assert stored == 1 and isinstance(failure, errors.Unavailable) and "journal 2" in failure.message
    del futures, refused
    gc.collect()
    assert reported == []
