"""Authenticating and replaying a batch of hands, here or in worker processes.

Before a hand is replayed, its messages are authenticated (``socai.events.seal``): the
HandEnded's seal must verify with one of the table's public keys, and only the messages on
the hand chain that the seal covers are replayed, in chain order. Anything else on the
hand's subject is a stranger's (``Replayed.strangers``, reported as ignored messages); a
hand with no valid seal or a broken chain is not replayed (``Replayed.error_code``
HAND_UNSEALED, HAND_SEAL_INVALID or CHAIN_BROKEN: the settler dead-letters it), except a
legacy hand (``legacy_before_seq``: written before hand seals existed). Checking costs one
sha256 per event and one Ed25519 verification per hand, where the replay runs.

Replaying (``socai.settle.replay.replay``) is pure CPU (decoding, the seeded shuffle, the rules engine) and most of
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
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from typing import Any, Final, NamedTuple

from socai.events import codec, seal
from socai.events.model import Event
from socai.gen.events.v1 import events_pb2
from socai.infra.nats_pull import header_values
from socai.rules import registry
from socai.settle.replay import ReplayError, replay
from socai_settlement.convert import SettledHand, settled_hand

PARENT_CHECK_S: Final = 1.0
READY_HOLD_S: Final = 0.05
SPLIT_HANDS_MIN: Final = 64  # hands per worker before a batch is split over several
BAD_EVENT: Final = "BAD_EVENT"


class Replayed(NamedTuple):
    """One hand's replay: a settled hand, or a ReplayError's code and message, or a crash;
    the messages of its subject that are not the table's (stream seq, reason); the stream
    seq of the sealed HandEnded it was settled from (0 for a legacy hand)."""

    hand_id: str
    settled: SettledHand | None = None
    error_code: str = ""
    error_message: str = ""
    crashed: str = ""  # "TypeError: …" when the replay raised something unexpected (a bug)
    strangers: tuple[tuple[int, str], ...] = ()
    end_stream_seq: int = 0


class EventBytes(NamedTuple):
    """A message as it came from the stream: its bytes, the envelope fields the hand cache
    checks (``HandCache.take``) without decoding it again, its stream sequence and the
    headers of the hand chain and seal (``socai.events.seal``)."""

    seq: int
    hand_id: str
    table_id: str
    data: bytes
    stream_seq: int = 0
    # The hand-chain headers, or the message's raw NATS header block (parsed in the worker).
    chain_headers: tuple[tuple[str, str], ...] | bytes = ()


def chain_headers(headers: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """The hand-chain headers of a message, as ``EventBytes`` carries them."""
    if not headers:
        return ()
    return tuple((k, headers[k]) for k in seal.CHAIN_HEADERS if k in headers)


class HandInput(NamedTuple):
    """A finished hand to authenticate and replay: its canonical subject, the stream seq of
    the HandEnded that announced it, and every message of its subject that was read, in
    stream order."""

    hand_id: str
    subject: str
    end_stream_seq: int
    messages: tuple[EventBytes, ...]


# A HandInput as it crosses to a replay worker: plain tuples (hand id, subject, announcing
# HandEnded's stream seq, then each message's bytes, stream seq and chain headers), which
# pickle in C; a NamedTuple pickles through a Python-level ``__reduce__`` per object, and
# the service's one event loop paid that for every message it handed to the workers.
WireHand = tuple[str, str, int, tuple[bytes, ...], tuple[int, ...], tuple[tuple[tuple[str, str], ...] | bytes, ...]]


def to_wire(item: HandInput) -> WireHand:
    messages = item.messages
    return (
        item.hand_id,
        item.subject,
        item.end_stream_seq,
        tuple(m.data for m in messages),
        tuple(m.stream_seq for m in messages),
        tuple(m.chain_headers for m in messages),
    )


class SealPolicy(NamedTuple):
    """What the replay accepts as the table's: seals by these public keys (key id → key),
    and unsealed hands whose first message is below ``legacy_before_seq`` (0: none)."""

    public_keys: tuple[tuple[str, bytes], ...]
    legacy_before_seq: int = 0


@lru_cache(maxsize=8)
def _verifier(keys: tuple[tuple[str, bytes], ...]) -> seal.SealVerifier:
    return seal.SealVerifier(dict(keys))


def _headers(given: tuple[tuple[str, str], ...] | bytes) -> dict[str, str]:
    return header_values(given, seal.CHAIN_HEADERS) if isinstance(given, bytes) else dict(given)


def authenticate(item: HandInput, policy: SealPolicy) -> tuple[list[bytes], Replayed]:
    """The payloads to replay (the sealed chain, first event first) and a ``Replayed`` that
    carries the strangers and the sealed end, or no payloads and a ``Replayed`` with the
    reason (HAND_UNSEALED, HAND_SEAL_INVALID, CHAIN_BROKEN)."""
    return _authenticate(to_wire(item), policy)


def _authenticate(wire: WireHand, policy: SealPolicy) -> tuple[list[bytes], Replayed]:
    hand_id, subject, end_stream_seq, datas, stream_seqs, headers = wire
    messages = [seal.Message(*m) for m in zip(stream_seqs, datas, map(_headers, headers), strict=True)]
    if not messages:
        return [], Replayed(hand_id, error_code=seal.HAND_UNSEALED, error_message=f"{hand_id}: no messages")
    first = messages[0]
    if (
        policy.legacy_before_seq
        and first.stream_seq < policy.legacy_before_seq
        and seal.PREV_HEADER not in first.headers
    ):
        # Written before hand seals existed: replayed as before, every message of the subject.
        return list(datas), Replayed(hand_id)
    # Every sealed message may be the end (a stranger's unsealed HandEnded may come before
    # the table's); the announcing HandEnded is tried too, for its reason when none verifies.
    ends = [i for i, m in enumerate(messages) if seal.SEAL_HEADER in m.headers or m.stream_seq == end_stream_seq]
    verdict = seal.authenticate(subject, messages, _verifier(policy.public_keys), ends)
    if not verdict.ok:
        return [], Replayed(hand_id, error_code=verdict.reason, error_message=f"{hand_id}: {verdict.detail}")
    strangers = tuple((messages[i].stream_seq, why) for i, why in verdict.strangers)
    end_seq = messages[verdict.end].stream_seq
    return [datas[i] for i in verdict.hand], Replayed(hand_id, strangers=strangers, end_stream_seq=end_seq)


def replay_here(hand_id: str, events: Sequence[object]) -> Replayed:
    try:
        return Replayed(hand_id, settled=settled_hand(replay(events)))
    except ReplayError as exc:
        return Replayed(hand_id, error_code=exc.code, error_message=exc.message)
    except Exception as exc:  # a bug in the engine: the caller dead-letters the hand
        return Replayed(hand_id, crashed=f"{type(exc).__name__}: {exc}")


def replay_payloads(batch: Sequence[HandInput], policy: SealPolicy) -> list[Replayed]:
    """Authenticate each hand, then decode its events from their bytes and replay them (in
    a worker, or here)."""
    return replay_wire([to_wire(item) for item in batch], policy)


def sealed_events(item: HandInput | WireHand, policy: SealPolicy) -> tuple[list[events_pb2.Event], Replayed]:
    """The events of the hand's sealed chain, decoded, and a ``Replayed`` with the strangers
    and the sealed end; or no events and a ``Replayed`` with the reason (a seal reason, or
    BAD_EVENT for a sealed message that is not an Event)."""
    wire = to_wire(item) if isinstance(item, HandInput) else item
    payloads, checked = _authenticate(wire, policy)
    if checked.error_code:
        return [], checked
    try:
        return [events_pb2.Event.FromString(p) for p in payloads], checked
    except Exception as exc:  # protobuf's DecodeError
        return [], checked._replace(error_code=BAD_EVENT, error_message=f"{wire[0]}: {exc}")


def replay_wire(batch: Sequence[WireHand], policy: SealPolicy) -> list[Replayed]:
    """``replay_payloads`` of hands in their wire form (what a worker receives)."""
    out = []
    for wire in batch:
        events, checked = sealed_events(wire, policy)
        if checked.error_code:
            out.append(checked)
            continue
        replayed = replay_here(wire[0], events)
        out.append(replayed._replace(strangers=checked.strangers, end_stream_seq=checked.end_stream_seq))
    return out


def _watch_parent(parent_pid: int) -> None:
    """In a worker: exit when the service process is gone (even killed with SIGKILL, which
    runs no cleanup), instead of lingering as an orphan."""
    import threading

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


def _ready() -> int:
    """A worker's pid, once its initializer has run; held a moment so that one worker
    cannot answer every call while another is still warming up."""
    time.sleep(READY_HOLD_S)
    return os.getpid()


def event_bytes(item: object) -> EventBytes:
    """An ``EventBytes`` of a cached ``EventBytes``, a ``socai.events.log.RawStored`` (its
    bytes as stored), a protobuf ``Event`` or an ``Event`` (tests: encoded here, no headers)."""
    if isinstance(item, EventBytes):
        return item
    data = getattr(item, "data", None)
    if isinstance(data, bytes):  # socai.events.log.RawStored
        return EventBytes(
            0, "", "", data, int(getattr(item, "stream_seq", 0)), chain_headers(getattr(item, "headers", None))
        )
    if isinstance(item, events_pb2.Event):
        return EventBytes(item.seq, item.hand_id, item.table_id, item.SerializeToString())
    inner = getattr(item, "event", item)  # socai.events.log.Stored
    if isinstance(inner, Event):
        stored = getattr(item, "stream_seq", 0)
        return EventBytes(
            inner.seq,
            inner.hand_id,
            inner.table_id,
            codec.encode(inner),
            stored,
            chain_headers(getattr(item, "headers", None)),
        )
    raise TypeError(f"cannot send a {type(item).__name__} to a replay worker")


class Replayer:
    def __init__(self, workers: int = 0, policy: SealPolicy | None = None) -> None:
        """``policy``: the seals to accept; None accepts none (every hand is HAND_UNSEALED or
        HAND_SEAL_INVALID), so a service must pass its keys (``seal_policy``)."""
        self.workers = workers
        self.policy = policy or SealPolicy(())
        self._pool: ProcessPoolExecutor | None = None
        self.warm_pids: frozenset[int] = frozenset()  # the workers that answered start()

    async def start(self) -> None:
        """Start the workers and return once every one of them has warmed up
        (``registry.warm``, ~1.6 s a process here): a worker still warming when the first
        batches arrive would make them wait, and a drain timed from its start pay for it."""
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
        pids: set[int] = set()
        while len(pids) < self.workers:  # a call answers only after its worker's initializer
            pids.update(await asyncio.gather(*(loop.run_in_executor(self._pool, _ready) for _ in range(self.workers))))
        self.warm_pids = frozenset(pids)

    async def close(self) -> None:
        """Stop the workers and wait for them to exit (a batch in a worker is abandoned:
        its messages were not acked and come back by redelivery)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.to_thread(pool.shutdown, True, cancel_futures=True)

    async def replay(self, hands: Sequence[HandInput]) -> list[Replayed]:
        """One ``Replayed`` per hand, in order."""
        if not hands:
            return []
        batch = [to_wire(item) for item in hands]
        if self._pool is None:
            return replay_wire(batch, self.policy)
        loop = asyncio.get_running_loop()
        # A batch is split over the workers only when it is large (a backlog): for a few
        # hands, waking a second process and the IPC cost more than they save.
        parts_count = max(1, min(self.workers, len(batch) // SPLIT_HANDS_MIN))
        size = -(-len(batch) // parts_count)
        parts: list[Any] = [
            loop.run_in_executor(self._pool, replay_wire, batch[i : i + size], self.policy)
            for i in range(0, len(batch), size)
        ]
        return [r for part in await asyncio.gather(*parts) for r in part]


def seal_policy(public_keys: Mapping[str, bytes], legacy_before_seq: int = 0) -> SealPolicy:
    """The ``SealPolicy`` of a service's settings (``Settings.hand_seal_public_keys`` …)."""
    return SealPolicy(tuple(sorted(public_keys.items())), legacy_before_seq)
