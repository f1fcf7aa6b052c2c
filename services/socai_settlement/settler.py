"""Settle a batch of finished hands: read, replay, post to the ledger, store. One path for the
consumer and for RetryDeadLetter.

For each hand (in the order given, which is stream order):

1. already settled (a redelivered HandEnded) → nothing to do; a HandEnded at another stream
   sequence than the one the hand was settled from is a duplicate (``Outcome.duplicate_of``,
   which the consumer counts);
2. its events: the consumer's cached copy when it is complete, else read by subject (the
   stream is the truth);
3. only the table's messages: the HandEnded's seal must verify with the table's public key
   and only the hand chain it covers is replayed (``socai.events.seal``, ``sealed_replay``); a
   stranger's message on the subject is an ignored message (``not_the_tables``), a hand
   without a valid seal or chain is dead-lettered (HAND_UNSEALED, HAND_SEAL_INVALID,
   CHAIN_BROKEN). A cached copy that does not authenticate is read by subject first;
4. ``socai.settle.replay.replay``: gapless seq, the seed against the commitment and every
   card or die, the rules engine's fold and settlement. A ``ReplayError`` dead-letters the
   hand with its reason;
5. the hands whose settlement moves gold are posted together (``LedgerPoster``, key
   ``settle:{hand_id}``); APPLIED and REPLAYED are success, REJECTED dead-letters the hand
   with reason LEDGER_REJECTED; an unavailable ledger is waited for, never a dead letter;
6. the settlement records and the dead letters are written in one database transaction.

Steps 1-4 are ``prepare``, 5 is ``post``, 6 is ``save`` (``commit`` is both): the consumer
runs them as a pipeline, each batch's steps in order and every step in stream order.

Only then may the caller acknowledge the HandEnded messages. Every step before 5 is
either pure or idempotent, so a crash anywhere repeats work but never doubles money:
the ledger answers a repeated ``settle:{hand_id}`` with the original transaction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from nats.errors import Error as NatsError

from socai import errors
from socai.events import seal
from socai.events.log import EventLog
from socai.gen.ledger.v1.ledger_pb2 import Fence
from socai.infra.logging import get_logger
from socai.settle.keys import find_settlement, settlement_key
from socai.settle.replay import diff_entries
from socai_settlement import convert, metrics
from socai_settlement.convert import SettledHand
from socai_settlement.hand_spans import HandSpans
from socai_settlement.ignored import NOT_THE_TABLES, IgnoredMessages
from socai_settlement.poster import Backoff, LedgerPoster, Posted
from socai_settlement.sealed_replay import HandInput, Replayed, Replayer, event_bytes
from socai_settlement.store import HandRow, NewDeadLetter, Store

log = get_logger("socai.settlement")

LEDGER_REJECTED: Final = "LEDGER_REJECTED"
LEDGER_CONFLICT: Final = "LEDGER_CONFLICT"  # the hand's key holds a transaction with other entries
RETRY_LIMIT: Final = "RETRY_LIMIT"  # every key of the hand's chain was refused
REPLAY_FAILED: Final = "REPLAY_FAILED"  # an unexpected error while replaying (a bug): details in the log
READS_IN_FLIGHT_MAX: Final = 32
SEAL_REASONS: Final = frozenset({seal.HAND_UNSEALED, seal.HAND_SEAL_INVALID, seal.CHAIN_BROKEN})

T = TypeVar("T")
OnWait = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class HandJob:
    """A finished hand to settle: where its HandEnded is, and its events if the caller has
    a complete copy (None: read them by subject)."""

    table_id: str
    hand_id: str
    stream_seq: int
    events: Sequence[object] | None = None


@dataclass(slots=True)
class Outcome:
    hand_id: str
    settled: bool
    already_settled: bool = False
    row: HandRow | None = None
    dead: NewDeadLetter | None = None
    # (this HandEnded's stream seq, the one the hand was settled from) when they differ: a
    # second HandEnded of a settled hand, not a redelivery of the first.
    duplicate_of: tuple[int, int] | None = None


@dataclass
class BatchStats:
    hands: int = 0
    settled: int = 0
    already: int = 0
    dead: int = 0
    read_from_stream: int = 0
    timings_s: dict[str, float] = field(default_factory=dict)


@dataclass
class Prepared:
    """A batch replayed and ready to post: the distinct hands in order, those already
    settled, the replays, and the hands that failed before reaching the ledger."""

    hand_ids: list[str]
    already: set[str]
    replayed: list[tuple[HandJob, SettledHand]]
    dead: list[NewDeadLetter]
    stats: BatchStats
    jobs: dict[str, HandJob] = field(default_factory=dict)  # the first job of each hand
    settled_from: dict[str, int] = field(default_factory=dict)  # stream seq of each settled hand's record
    spans: HandSpans = field(default_factory=HandSpans)  # each replayed hand's settle span (tracing on)


@dataclass
class PostedBatch:
    """A prepared batch after the ledger answered: the rows to store and every dead letter."""

    prepared: Prepared
    rows: list[HandRow]
    dead: list[NewDeadLetter]
    refused: dict[str, str] = field(default_factory=dict)  # hand_id → the ledger's reason, for LEDGER_REJECTED


class Settler:
    def __init__(
        self,
        event_log: EventLog,
        store: Store,
        poster: LedgerPoster,
        *,
        replayer: Replayer | None = None,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
    ) -> None:
        self.replayer = replayer or Replayer(0)
        self.log = event_log
        self.store = store
        self.poster = poster
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.last = BatchStats()
        self.ignored = IgnoredMessages()  # strangers' messages found on hands' subjects

    async def settle(
        self, jobs: Sequence[HandJob], on_wait: OnWait | None = None, *, fence: Fence | None = None
    ) -> list[Outcome]:
        """One Outcome per distinct hand, in order. Waits (with backoff, calling
        ``on_wait``) while PostgreSQL, NATS or the ledger is unavailable. ``fence``: the
        posting pipeline's lease (``LedgerPoster.post``)."""
        return await self.commit(await self.prepare(jobs, on_wait), on_wait, fence=fence)

    async def prepare(self, jobs: Sequence[HandJob], on_wait: OnWait | None = None) -> Prepared:
        """Steps 1-3: skip settled hands, get the events, replay. Writes nothing, so a
        pipeline may prepare the next batch while the previous one is being posted."""
        stats = BatchStats(hands=len(jobs))
        clock = time.perf_counter()
        started_ns = time.time_ns()
        unique: dict[str, HandJob] = {}
        for job in jobs:
            unique.setdefault(job.hand_id, job)
        ids = list(unique)
        done = await self.retrying(lambda: self.store.settled_among(ids), on_wait)
        todo = [j for j in unique.values() if j.hand_id not in done]
        stats.already = len(done)
        settled_from = await self._settled_from(done, on_wait)
        events = await self._events(todo, on_wait, stats)
        stats.timings_s["read"] = time.perf_counter() - clock

        clock = time.perf_counter()
        replayed: list[tuple[HandJob, SettledHand]] = []
        dead: list[NewDeadLetter] = []
        readable = []
        for job in todo:
            got = events[job.hand_id]
            if isinstance(got, NewDeadLetter):
                dead.append(got)
            else:
                readable.append((job, got))
        spans = HandSpans()
        spans.start([(job.hand_id, job.table_id, job.stream_seq, got) for job, got in readable], started_ns)
        replay_ns = time.time_ns()
        answers = await self._authenticated_replays(readable, on_wait, stats)
        spans.replayed(replay_ns, len(readable))
        for (job, _), replay_answer in zip(readable, answers, strict=True):
            for stream_seq, why in replay_answer.strangers:
                self.ignored.add(NOT_THE_TABLES, stream_seq, hand_id=job.hand_id, table_id=job.table_id, reason=why)
            if replay_answer.settled is not None:
                if replay_answer.end_stream_seq and replay_answer.end_stream_seq != job.stream_seq:
                    # Announced by another HandEnded (a stranger's): the record names the
                    # sealed one, and the announcing one counts as a duplicate.
                    job = dataclasses.replace(job, stream_seq=replay_answer.end_stream_seq)
                replayed.append((job, replay_answer.settled))
            elif replay_answer.error_code:
                dead.append(
                    NewDeadLetter(
                        job.hand_id, job.table_id, replay_answer.error_code, replay_answer.error_message, job.stream_seq
                    )
                )
            else:  # a bug in the engine or here: dead-letter it, keep going
                log.error("replay_failed", hand_id=job.hand_id, error=replay_answer.crashed)
                detail = f"{job.hand_id}: {replay_answer.crashed}"
                dead.append(NewDeadLetter(job.hand_id, job.table_id, REPLAY_FAILED, detail, job.stream_seq))
        stats.timings_s["replay"] = time.perf_counter() - clock
        return Prepared(ids, done, replayed, dead, stats, unique, settled_from, spans)

    async def commit(
        self,
        prepared: Prepared,
        on_wait: OnWait | None = None,
        keys: dict[str, str] | None = None,
        *,
        fence: Fence | None = None,
    ) -> list[Outcome]:
        """Steps 4-5: post the hands that move gold, then store records and dead letters
        in one transaction. Call in stream order: a table's hands must reach the ledger in
        the order they were played (each hand's stacks depend on the one before)."""
        return await self.save(await self.post(prepared, on_wait, keys, fence=fence), on_wait)

    async def post(
        self,
        prepared: Prepared,
        on_wait: OnWait | None = None,
        keys: dict[str, str] | None = None,
        *,
        fence: Fence | None = None,
    ) -> PostedBatch:
        """Step 4: post the hands that move gold (one PostTransactions call per
        ``post_batch_max``); the ledger's refusals become LEDGER_REJECTED dead letters."""
        stats = prepared.stats
        dead = list(prepared.dead)
        clock = time.perf_counter()
        chosen = keys or {}
        moving: list[tuple[HandJob, SettledHand, str]] = []
        rows: list[HandRow | None] = []
        for job, hand in prepared.replayed:
            key = chosen.get(job.hand_id) or settlement_key(job.hand_id)
            if hand.entries:
                moving.append((job, hand, key))
                rows.append(None)  # filled in with the ledger's transaction id below
            else:
                rows.append(convert.row_of(hand, job.stream_seq, "", key))  # moves no gold: nothing to post
        posted: list[Posted] = []
        if moving:
            with prepared.spans.posting([job.hand_id for job, _, _ in moving]):
                items = [convert.transaction_of(hand, key) for _, hand, key in moving]
                posted = await self.poster.post(items, on_wait, fence=fence)
        answers = iter(zip(moving, posted, strict=True))
        out: list[HandRow] = []
        refused: dict[str, str] = {}
        for row in rows:
            if row is None:
                (job, hand, key), p = next(answers)
                if not p.ok:
                    detail = f"{job.hand_id}: the ledger refused {key}: {p.reason}: {p.message}"
                    dead.append(NewDeadLetter(job.hand_id, job.table_id, LEDGER_REJECTED, detail, job.stream_seq))
                    refused[job.hand_id] = p.reason
                    continue
                row = convert.row_of(hand, job.stream_seq, p.transaction_id, key)
            out.append(row)
        stats.timings_s["ledger"] = time.perf_counter() - clock
        return PostedBatch(prepared, out, dead, refused)

    async def save(self, batch: PostedBatch, on_wait: OnWait | None = None) -> list[Outcome]:
        """Step 5: the settlement records and the dead letters, in one transaction. Only
        then may the caller acknowledge the batch's HandEnded messages."""
        prepared, rows, dead = batch.prepared, batch.rows, batch.dead
        stats = prepared.stats
        clock = time.perf_counter()
        inserted = await self.retrying(lambda: self.store.commit_rows(rows, dead), on_wait)
        stats.timings_s["store"] = time.perf_counter() - clock

        settled_from = dict(prepared.settled_from)
        # A row not inserted: the hand was stored meanwhile (the same hand in the chunk
        # before this one, still in the pipeline when this one was prepared).
        settled_from.update(await self._settled_from([r.hand_id for r in rows if r.hand_id not in inserted], on_wait))
        outcomes = {h: Outcome(h, settled=True, already_settled=True) for h in prepared.already}
        games: dict[str, int] = {}
        for row in rows:
            fresh = row.hand_id in inserted
            outcomes[row.hand_id] = Outcome(row.hand_id, settled=True, already_settled=not fresh, row=row)
            if fresh:
                games[row.game] = games.get(row.game, 0) + 1
        for hand_id, seq in settled_from.items():
            job = prepared.jobs.get(hand_id)
            outcome = outcomes.get(hand_id)
            if job is not None and outcome is not None and job.stream_seq != seq:
                outcome.duplicate_of = (job.stream_seq, seq)
        for game, count in games.items():
            metrics.HANDS_SETTLED.labels(game).inc(count)
        for d in dead:
            outcomes[d.hand_id] = Outcome(d.hand_id, settled=False, dead=d)
            metrics.DEAD_LETTERS.labels(d.reason).inc()
            log.warning("hand_dead_lettered", hand_id=d.hand_id, table_id=d.table_id, reason=d.reason, detail=d.detail)
        for hand_id, outcome in outcomes.items():
            prepared.spans.end(
                hand_id,
                dead_reason=outcome.dead.reason if outcome.dead else "",
                already_settled=outcome.already_settled,
            )
        stats.settled = len(inserted)
        stats.dead = len(dead)
        self.last = stats
        return [outcomes[h] for h in prepared.hand_ids]

    async def _authenticated_replays(
        self, readable: Sequence[tuple[HandJob, Sequence[object]]], on_wait: OnWait | None, stats: BatchStats
    ) -> list[Replayed]:
        """Authenticate and replay each hand (``sealed_replay``). A cached copy that does not
        authenticate (a message the cache missed, a stranger's HandEnded first) is read by
        subject and tried again: only the stream's answer can dead-letter a hand."""
        inputs = [self._input(job, got) for job, got in readable]
        answers = await self.replayer.replay(inputs)
        again = [
            i
            for i, ((job, _), a) in enumerate(zip(readable, answers, strict=True))
            if a.error_code in SEAL_REASONS and job.events is not None
        ]
        if again:
            stats.read_from_stream += len(again)
            jobs = [dataclasses.replace(readable[i][0], events=None) for i in again]
            read = await self._events(jobs, on_wait, BatchStats())
            retry = [
                (i, job) for i, job in zip(again, jobs, strict=True) if not isinstance(read[job.hand_id], NewDeadLetter)
            ]
            for (i, _), answer in zip(
                retry,
                await self.replayer.replay([self._input(job, read[job.hand_id]) for _, job in retry]),
                strict=True,
            ):
                answers[i] = answer
        return answers

    def _input(self, job: HandJob, got: Sequence[object]) -> HandInput:
        subject = self.log.subject_of(job.table_id, job.hand_id)
        return HandInput(job.hand_id, subject, job.stream_seq, tuple(event_bytes(e) for e in got))

    async def _settled_from(self, hand_ids: Collection[str], on_wait: OnWait | None) -> dict[str, int]:
        """The stream seq each of these settled hands was settled from (none: no query)."""
        if not hand_ids:
            return {}
        ids = list(hand_ids)
        return await self.retrying(lambda: self.store.settled_seqs(ids), on_wait)

    async def retry(self, job: HandJob, *, fence: Fence | None = None) -> Outcome:
        """Settle one dead-lettered hand again (RetryDeadLetter): the same path, except that
        the ledger key is found by walking the hand's key chain (``socai.settle.keys``).

        The ledger remembers a refusal under its key, so once ``settle:{hand_id}`` was
        refused (INSUFFICIENT_FUNDS …) the hand can only be posted under the next unused key
        ``settle:{hand_id}:retryN``. A key already applied is adopted when its entries are the
        replay's (a retry that crashed after posting), refused as LEDGER_CONFLICT otherwise.
        Nothing is ever posted under a second key while one is applied: exactly once holds.
        """
        prepared = await self.prepare([job])
        if prepared.already or prepared.dead or not prepared.replayed:
            return (await self.commit(prepared, fence=fence))[0]
        _, hand = prepared.replayed[0]
        want = dict(hand.entries)
        if not want:
            return (await self.commit(prepared, fence=fence))[0]
        found = await self.retrying(lambda: find_settlement(self.poster.stub, job.hand_id), None)
        if found.transaction is not None:
            if found.entries != want:
                diffs = "; ".join(diff_entries(want, found.entries, want="replay", have="ledger"))
                detail = f"{found.key} is transaction {found.transaction.transaction_id}, not this hand's: {diffs}"
                return await self._dead_one(job, LEDGER_CONFLICT, detail)
            row = convert.row_of(hand, job.stream_seq, found.transaction.transaction_id, found.key)
            await self.retrying(lambda: self.store.commit_rows([row], []), None)
            metrics.HANDS_SETTLED.labels(row.game).inc()
            return Outcome(job.hand_id, settled=True, row=row)
        if not found.next_key:
            tried = ", ".join(f"{key} ({reason})" for key, reason in found.refused)
            return await self._dead_one(job, RETRY_LIMIT, f"{job.hand_id}: every key was refused: {tried}")
        return (await self.commit(prepared, keys={job.hand_id: found.next_key}, fence=fence))[0]

    async def _dead_one(self, job: HandJob, reason: str, detail: str) -> Outcome:
        dead = NewDeadLetter(job.hand_id, job.table_id, reason, detail, job.stream_seq)
        await self.retrying(lambda: self.store.commit_rows([], [dead]), None)
        metrics.DEAD_LETTERS.labels(reason).inc()
        log.warning("hand_dead_lettered", hand_id=job.hand_id, table_id=job.table_id, reason=reason, detail=detail)
        return Outcome(job.hand_id, settled=False, dead=dead)

    async def _events(self, jobs: Sequence[HandJob], on_wait: OnWait | None, stats: BatchStats) -> dict[str, Any]:
        """Each job's events, or a dead letter when they cannot be read (a message that is
        not an Event). Reads by subject run concurrently, at most READS_IN_FLIGHT_MAX."""
        out: dict[str, Any] = {}
        gate = asyncio.Semaphore(READS_IN_FLIGHT_MAX)

        async def read(job: HandJob) -> None:
            async with gate:
                try:
                    stored = await self.retrying(lambda: self._read_hand(job), on_wait)
                except errors.InvalidArgument as exc:
                    out[job.hand_id] = NewDeadLetter(
                        job.hand_id, job.table_id, exc.code, f"{job.hand_id}: {exc.message}", job.stream_seq
                    )
                    return
                out[job.hand_id] = stored

        to_read = []
        for job in jobs:
            if job.events is not None:
                out[job.hand_id] = job.events
            else:
                to_read.append(job)
        stats.read_from_stream = len(to_read)
        metrics.HANDS_READ.labels("cache").inc(len(jobs) - len(to_read))
        metrics.HANDS_READ.labels("stream").inc(len(to_read))
        await asyncio.gather(*(read(j) for j in to_read))
        return out

    async def _read_hand(self, job: HandJob) -> list[Any]:
        """Every message of the hand's subject as stored (bytes and headers, not decoded:
        the replay keeps the table's and decodes those)."""
        try:
            return [r async for r in self.log.read_raw(self.log.subject_of(job.table_id, job.hand_id))]
        except (TimeoutError, NatsError) as exc:
            raise errors.Unavailable("NATS_UNAVAILABLE", f"reading {job.hand_id}: {exc!r}") from exc

    async def retrying(self, fn: Callable[[], Awaitable[T]], on_wait: OnWait | None) -> T:
        backoff = Backoff(self.backoff_initial_s, self.backoff_max_s)
        while True:
            try:
                return await fn()
            except errors.Unavailable as exc:
                delay = backoff.next_delay()
                log.warning("dependency_unavailable", code=exc.code, error=exc.message, retry_in_s=round(delay, 3))
                if on_wait is not None:
                    await on_wait()
                await asyncio.sleep(delay)
