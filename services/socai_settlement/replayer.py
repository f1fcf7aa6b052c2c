"""Running ``socai.settle.replay.replay`` over a batch of hands, here or in worker processes.

Replaying is pure CPU (decoding, the seeded shuffle, the rules engine) and most of
settlement's work per hand. With ``workers`` > 0 the batch goes to a process pool, so
the service's event loop keeps acking, posting and storing while another core replays.
It is the same function either way: the events are decoded from their stored bytes and
``replay`` runs on them (one code path, as for the auditor), then ``convert.settled_hand``
turns the result into a ``SettledHand``.

What crosses the process boundary is kept plain, because pickling it is on the service's
hot path: each hand goes out as the events' bytes exactly as they came from the stream
(no re-encoding) and comes back as a ``Replayed`` tuple of strings, ints and tuples, with
the ledger transaction already serialized. Workers are spawned, not forked (a forked gRPC
process is unsafe), and warmed up at start so the first batch does not pay for their
imports.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Final, NamedTuple

from socai.events import codec
from socai.events.model import Event
from socai.gen.events.v1 import events_pb2
from socai.rules import registry
from socai.settle.replay import ReplayError, replay
from socai_settlement.convert import SettledHand, settled_hand

PARENT_CHECK_S: Final = 1.0
SPLIT_HANDS_MIN: Final = 64  # hands per worker before a batch is split over several
BAD_EVENT: Final = "BAD_EVENT"


class Replayed(NamedTuple):
    """One hand's replay: a settled hand, or a ReplayError's code and message, or a crash."""

    hand_id: str
    settled: SettledHand | None = None
    error_code: str = ""
    error_message: str = ""
    crashed: str = ""  # "TypeError: …" when the replay raised something unexpected (a bug)


class EventBytes(NamedTuple):
    """An event as it came from the stream: its bytes, and the envelope fields the hand
    cache checks (``HandCache.take``) without decoding it again."""

    seq: int
    hand_id: str
    table_id: str
    data: bytes


def replay_here(hand_id: str, events: Sequence[object]) -> Replayed:
    try:
        return Replayed(hand_id, settled=settled_hand(replay(events)))
    except ReplayError as exc:
        return Replayed(hand_id, error_code=exc.code, error_message=exc.message)
    except Exception as exc:  # a bug in the engine: the caller dead-letters the hand
        return Replayed(hand_id, crashed=f"{type(exc).__name__}: {exc}")


def replay_payloads(batch: Sequence[tuple[str, Sequence[bytes]]]) -> list[Replayed]:
    """Decode each hand's events from their bytes and replay them (in a worker, or here)."""
    out = []
    for hand_id, payloads in batch:
        try:
            events = [events_pb2.Event.FromString(p) for p in payloads]
        except Exception as exc:  # protobuf's DecodeError
            out.append(Replayed(hand_id, error_code=BAD_EVENT, error_message=f"{hand_id}: {exc}"))
            continue
        out.append(replay_here(hand_id, events))
    return out


def _watch_parent(parent_pid: int) -> None:
    """In a worker: exit when the service process is gone (even killed with SIGKILL, which
    runs no cleanup), instead of lingering as an orphan."""
    import os
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _init_worker(parent_pid: int) -> None:
    """Each worker, as it starts: watch the parent, import every game and build its costly
    first-use tables (``registry.warm``), so that no hand waits for them."""
    _watch_parent(parent_pid)
    registry.warm()


def _ready() -> bool:
    return True


def _payload(item: object) -> bytes:
    if isinstance(item, EventBytes):
        return item.data
    if isinstance(item, events_pb2.Event):
        return item.SerializeToString()
    inner = getattr(item, "event", item)  # socai.events.log.Stored
    if isinstance(inner, Event):
        return codec.encode(inner)
    raise TypeError(f"cannot send a {type(item).__name__} to a replay worker")


class Replayer:
    def __init__(self, workers: int = 0) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    async def start(self) -> None:
        if self.workers <= 0:
            registry.warm()  # replays run here: the same warm-up as a worker's
            return
        if self._pool is not None:
            return
        self._pool = ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(os.getpid(),),
        )
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(self._pool, _ready) for _ in range(self.workers)))

    async def close(self) -> None:
        """Stop the workers and wait for them to exit (a batch in a worker is abandoned:
        its messages were not acked and come back by redelivery)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.to_thread(pool.shutdown, True, cancel_futures=True)

    async def replay(self, hands: Sequence[tuple[str, Sequence[object]]]) -> list[Replayed]:
        """One ``Replayed`` per hand, in order."""
        if not hands:
            return []
        batch = [(hand_id, [_payload(e) for e in events]) for hand_id, events in hands]
        if self._pool is None:
            return replay_payloads(batch)
        loop = asyncio.get_running_loop()
        # A batch is split over the workers only when it is large (a backlog): for a few
        # hands, waking a second process and the IPC cost more than they save.
        parts_count = max(1, min(self.workers, len(batch) // SPLIT_HANDS_MIN))
        size = -(-len(batch) // parts_count)
        parts: list[Any] = [
            loop.run_in_executor(self._pool, replay_payloads, batch[i : i + size]) for i in range(0, len(batch), size)
        ]
        return [r for part in await asyncio.gather(*parts) for r in part]
