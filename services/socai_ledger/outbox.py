"""The outbox relay: publishes every committed transaction to NATS, in commit order, at least once.

The transactional outbox: the batch that appends journal rows also inserts one ``outbox``
row naming the journal range it appended ``[first_seq, last_seq]``, in the same database
transaction. So a transaction is in the outbox if and only if it committed. This relay (a
background task of the ledger process) reads the pending ranges in journal order, loads
those transactions, publishes one message per transaction, and after the acks advances
``outbox_progress.published_seq`` and deletes the ranges it covers.

Messages (stream ``SOCAI_LEDGER``, subjects ``socai.ledger.>``, provisioned by ``socai
migrate`` — or by this relay when it is missing, see ``socai.infra.nats.ledger_stream_spec``):

- subject ``socai.ledger.posted.<kind>``, where ``<kind>`` is the account kind of the
  transaction's *first* entry (one message per transaction: JetStream fsyncs every message,
  so one message per transaction rather than one per kind touched keeps the relay at the
  journal's pace); consumers that follow other kinds subscribe to
  ``socai.ledger.posted.>`` and read the ``Socai-Account-Kinds`` header;
- body: the ``socai.ledger.v1.Transaction`` protobuf (entries with ``balance_after`` and
  ``account_version``, so a follower can apply them idempotently);
- headers ``Nats-Msg-Id`` = the transaction id (JetStream drops a re-publish within the
  duplicate window), ``Socai-Journal-Seq``, ``Socai-Account-Kinds`` (sorted, comma separated),
  ``Socai-Request-Hash`` (the request's canonical hash, hex: a journal restored from this
  stream keeps it, so a caller's retry after a restore is still recognised; ``journal_restore``).

Order. Journal sequence numbers are assigned under the writers' advisory lock, so their
order is the commit order, and the journal is gapless. The relay publishes pipelined (many
messages in flight on one connection, which the server stores in the order sent), and each
message carries ``Nats-Expected-Last-Msg-Id`` = the previous message's id: if one message
is not stored, every later one in flight is refused too, and the relay starts again from
its cursor, so the stream never holds a later transaction before an earlier one (the server
checks duplicates before the expectation, so re-publishing after a crash is harmless).

At least once. The cursor advances only after the acks. A crash between the acks and the
cursor update re-publishes those messages on restart; within the duplicate window (10
minutes) JetStream stores them once, after it a consumer may see a transaction twice and
recognises it by its id or journal sequence.

Postings first, with a bounded lag: the pending outbox ranges (one per batch, often of a
transaction or two) are merged into one span and published in pipelined chunks. While the
write batcher is busy the relay takes a share of the time (BUSY_SHARE below: it pauses in
proportion to the time its chunks took, however the span was cut into ranges), and past
LAG_BOUND transactions behind it stops yielding; when the batcher idles it runs at full speed.
Above JetStream's rate that still falls behind; the writer's own bound (``outbox_backlog``:
postings wait, then are refused, past ``SOCAI_LEDGER_OUTBOX_MAX_LAG``) bounds the lag, and
the relay tells it of every chunk it publishes (``report_to``).

Several ledger replicas: only the replica holding the session advisory lock ``RELAY_LOCK``
relays; the others stand by and take over when its connection goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from nats.aio.client import Client as NatsClient
from nats.js.errors import NotFoundError
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from prometheus_client import Counter, Gauge

from socai import errors
from socai.infra import tracing
from socai.infra.logging import get_logger
from socai.infra.nats import StreamSpec, connect, ensure_stream, posted_subject
from socai_ledger import convert, db, outbox_queries
from socai_ledger.domain import Transaction

log = get_logger("socai.ledger.outbox")

OUTBOX_LAG = Gauge("socai_ledger_outbox_lag", "Committed transactions not yet published to NATS")
PUBLISHED = Counter("socai_ledger_outbox_published_total", "Transactions published by the outbox relay")
RELAY_ERRORS = Counter("socai_ledger_outbox_errors_total", "Outbox relay failures (retried)", ["reason"])

# The request's canonical hash (``domain.request_hash``, hex): not part of the Transaction
# message, but part of the journal a restore rebuilds from this stream (``journal_restore``).
REQUEST_HASH_HEADER: Final = "Socai-Request-Hash"
WRONG_LAST_MSG_ID_CODE: Final = 10070  # JSStreamWrongLastMsgIDErrF
# Outbox rows read per round. A batch appends one range, under a light load of a transaction
# or two; the rows are merged into one span, so a round's work does not depend on how the
# write path happened to cut the journal.
RANGES_PER_ROUND: Final = 2000
CHUNK_MAX: Final = 1000  # transactions loaded at once
PIPELINE_CHUNKS: Final = 2  # chunks in flight at full speed (at most 2,000 messages)
# POSTINGS FIRST. Publishing competes with the write path for the ledger's CPU, for
# PostgreSQL (reading the journal) and for the disk (JetStream fsyncs every message, next to
# PostgreSQL's commit fsyncs); unthrottled it cost a third of the posting throughput under
# load. While the write batcher is busy the relay publishes chunks of BUSY_CHUNK transactions
# and after each one pauses so that it works BUSY_SHARE of the time: a budget of time, so its
# rate under load is a fixed fraction of its full speed whatever the size of the outbox ranges
# (a pause per range let it fall behind for good when ranges held a transaction or two).
# But the lag must stay bounded: LAG_BOUND transactions behind, the relay stops yielding and
# takes what it needs (the postings then slow down a little instead of the outbox growing
# without end). When the batcher idles the relay runs at full speed. Its full speed is
# JetStream's: one fsync per message. LAG_BOUND is small, so the yielding serves a burst
# (a batch or two) and under a steady load the relay keeps pace: at 1,000 it yielded until
# 1,000 behind and then caught up in saw teeth, publishing 0.92–0.97 of what was posted
# over a 20 s load (lag up to 2,200); at 100, 0.99 (lag up to 480, the trail of a round's
# gathering and acks), the postings' rate the same within the machine's noise (four runs
# of each, alternated: `SOCAI_BENCH_LEDGER_ONLY=under_load python -m tests.bench
# bench_ledger`; docs/use/ledger.md).
BUSY_CHUNK: Final = 100
BUSY_SHARE: Final = 0.5
LAG_BOUND: Final = 100
YIELD_EVERY: Final = 25  # messages built between two yields to the event loop (the writer goes first)


def kind_of(account_id: str) -> str:
    """The kind of an account id already in the journal (validated when it was posted)."""
    return account_id.partition(":")[0]


def subject_of(prefix: str, transaction: Transaction) -> str:
    return posted_subject(prefix, kind_of(transaction.entries[0].account_id))


def pending_through(cursor: int, ranges: list[tuple[int, int]]) -> int:
    """The last journal sequence the outbox ``ranges`` (in journal order) cover without a gap
    after ``cursor``; ``cursor`` itself when the first of them does not continue it."""
    through = cursor
    for first_seq, last_seq in ranges:
        if first_seq > through + 1:
            break
        through = max(through, last_seq)
    return through


def _end_publish(span: Span, future: asyncio.Future[dict[str, Any]]) -> None:
    """End a ``publish`` span when the ack of its last message came (or it was given up)."""
    if future.cancelled() or future.exception() is not None:
        span.set_status(Status(StatusCode.ERROR, "not acknowledged"))
    span.end()


class _ChainBroken(Exception):
    """A message was refused because the stream's last message is not its predecessor."""


class _Refused(Exception):
    """JetStream answered a publish with an error (``err_code`` as in the server's API)."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(f"{code}/{err_code}: {description}")
        self.err_code = err_code


class _Publisher:
    """Pipelined JetStream publishes on one connection, acks matched by reply subject.

    Messages go out in call order (each ``publish`` appends to the connection's write
    buffer before it returns) and the server stores them in that order. nats-py's own
    ``publish_async`` is not used: it never resolves a publish the server refuses (its
    error parser raises inside the reply callback), which would turn every refusal into a
    timeout.
    """

    def __init__(self, nc: NatsClient, inbox: str) -> None:
        self._nc = nc
        self._inbox = inbox
        self._futures: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0

    @classmethod
    async def start(cls, nc: NatsClient) -> _Publisher:
        publisher = cls(nc, nc.new_inbox())
        await nc.subscribe(f"{publisher._inbox}.*", cb=publisher._on_reply)
        return publisher

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str]) -> asyncio.Future[dict[str, Any]]:
        self._next += 1
        token = str(self._next)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._futures[token] = future
        await self._nc.publish(subject, payload, reply=f"{self._inbox}.{token}", headers=headers)
        return future

    def forget(self, futures: list[asyncio.Future[dict[str, Any]]]) -> None:
        pending = set(map(id, futures))
        for token, future in list(self._futures.items()):
            if id(future) in pending:
                del self._futures[token]
                if not future.done():
                    future.cancel()

    async def _on_reply(self, msg: Any) -> None:
        future = self._futures.pop(msg.subject.rsplit(".", 1)[-1], None)
        if future is None or future.done():
            return
        if msg.headers and msg.headers.get("Status") == "503":
            future.set_exception(_Refused(503, 0, "no stream listens on this subject"))
            return
        try:
            reply = json.loads(msg.data)
        except ValueError as exc:
            future.set_exception(exc)
            return
        error = reply.get("error")
        if error:
            future.set_exception(_Refused(error.get("code", 0), error.get("err_code", 0), error.get("description", "")))
        else:
            future.set_result(reply)


class OutboxRelay:
    def __init__(
        self,
        database_url: str,
        nats_url: str,
        *,
        stream: StreamSpec,
        prefix: str,
        poll_s: float = 0.5,
        gather_s: float = 0.1,
        publish_timeout_s: float = 10.0,
        chunk_max: int = CHUNK_MAX,
        writer_busy: Callable[[], bool] | None = None,
        busy_chunk: int = BUSY_CHUNK,
        busy_share: float = BUSY_SHARE,
        lag_bound: int = LAG_BOUND,
        on_progress: Callable[[int, int], None] | None = None,
        marks: tracing.Marks | None = None,
    ) -> None:
        """``marks``: the write batcher's ``batch`` span of each journal sequence (tracing
        on): a transaction found there is published under a ``publish`` span, its child, with
        its ``traceparent`` in the message's headers."""
        errors.check(0 < busy_share <= 1 and busy_chunk >= 1 and lag_bound >= 0, "outbox relay limits")
        self._db_url = database_url
        self._nats_url = nats_url
        self._stream = stream
        self._prefix = prefix
        self._poll_s = poll_s
        self._gather_s = gather_s
        self._publish_timeout_s = publish_timeout_s
        self._chunk_max = chunk_max
        self._writer_busy = writer_busy or (lambda: False)
        self._busy_chunk = busy_chunk
        self._busy_share = busy_share
        self._lag_bound = lag_bound
        self._on_progress = on_progress or (lambda head_seq, published_seq: None)
        self.marks = marks if marks is not None else tracing.Marks()
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._nc: NatsClient | None = None
        self._publisher: _Publisher | None = None
        self._conn: db.AConn | None = None
        self._leader = False
        self._last_msg_id: str | None = None  # the chain: the last message this relay had stored
        self.published_seq = 0

    def yield_to(self, writer_busy: Callable[[], bool]) -> None:
        """Publish gently while ``writer_busy()`` says postings are waiting (POSTINGS FIRST)."""
        self._writer_busy = writer_busy

    def report_to(self, on_progress: Callable[[int, int], None]) -> None:
        """Call ``on_progress(journal head, published cursor)`` at each round and after each
        published chunk (the writer's outbox bound waits on it)."""
        self._on_progress = on_progress

    def wake(self, last_seq: int = 0) -> None:
        """Called after a batch commits: publish now instead of at the next poll."""
        self._wakeup.set()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ledger-outbox-relay")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Finish the chunks in flight (their acks and cursor), then disconnect. A relay still
        busy after ``grace_s`` (NATS unreachable) is cancelled: its chunks are published again
        by the next relay, which the duplicate window makes harmless."""
        self._stopping.set()
        self._wakeup.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), grace_s)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None
        await self._disconnect()

    async def _run(self) -> None:
        backoff_s = 0.1
        while not self._stopping.is_set():
            try:
                published = await self._round()
                backoff_s = 0.1
                if published >= self._chunk_max:
                    continue  # a backlog: keep going
                if published:
                    # Let commits gather for a moment: one round per few dozen batches costs
                    # far fewer queries and publishes per transaction than one per commit.
                    await asyncio.sleep(self._gather_s)
                    continue
                await self._sleep(self._poll_s)
            except asyncio.CancelledError:
                raise
            except _ChainBroken as exc:
                RELAY_ERRORS.labels("chain_broken").inc()
                log.warning("outbox_chain_broken", error=str(exc))
                self._last_msg_id = None  # start again from the cursor without an expectation
            except Exception as exc:
                reason = exc.code if isinstance(exc, errors.SocaiError) else type(exc).__name__
                RELAY_ERRORS.labels(reason).inc()
                log.warning("outbox_relay_retry", reason=reason, error=str(exc), backoff_s=round(backoff_s, 2))
                self._last_msg_id = None
                await self._disconnect()
                await self._sleep(backoff_s)
                backoff_s = min(backoff_s * 2, 5.0)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), seconds)
        self._wakeup.clear()

    async def _round(self) -> int:
        """Publish everything pending; the number of transactions published."""
        conn = await self._database()
        if not self._leader:
            return 0
        publisher = await self._jetstream()
        head, cursor, ranges = await outbox_queries.outbox_pending(conn, RANGES_PER_ROUND)
        self.published_seq = cursor
        OUTBOX_LAG.set(max(0, head - cursor))
        self._on_progress(head, cursor)
        through = pending_through(cursor, ranges)
        if through == cursor and head > cursor:
            # Committed transactions without an outbox range would be a bug in the write path.
            log.error("outbox_missing_ranges", head=head, published=cursor)
        published = 0
        start = cursor + 1
        chain = self._last_msg_id  # the expectation of the next message sent
        in_flight: deque[tuple[list[Transaction], list[asyncio.Future[dict[str, Any]]], float]] = deque()
        try:
            while start <= through or in_flight:
                # Postings first, by a budget of time (see POSTINGS FIRST above).
                gentle = self._writer_busy() and head - cursor < self._lag_bound
                window = 1 if gentle else PIPELINE_CHUNKS
                if start <= through and len(in_flight) < window and not self._stopping.is_set():
                    # The next chunk goes out while the acks of the previous one come back, so
                    # JetStream always has messages to store.
                    end = min(through, start + (self._busy_chunk if gentle else self._chunk_max) - 1)
                    began = time.monotonic()
                    hashes: dict[int, bytes] = {}
                    transactions = await outbox_queries.load_journal(conn, start, end, hashes)
                    errors.check(
                        [t.journal_seq for t in transactions] == list(range(start, end + 1)),
                        f"the journal is gapless over the outbox range {start}..{end}",
                    )
                    futures = await self._send(publisher, transactions, chain, hashes)
                    in_flight.append((transactions, futures, began))
                    chain = transactions[-1].transaction_id
                    start = end + 1
                    continue
                if not in_flight:
                    return published  # stopping
                transactions, futures, began = in_flight.popleft()
                stored, failure = await self._acked(publisher, transactions, futures)
                if stored:
                    # Record the stored prefix even when a later message failed: a retry then
                    # starts at the first message that is not in the stream.
                    last_stored = transactions[stored - 1].journal_seq
                    await outbox_queries.mark_published(conn, last_stored)
                    cursor = self.published_seq = last_stored
                    published += stored
                    PUBLISHED.inc(stored)
                    OUTBOX_LAG.set(max(0, head - cursor))
                    self._on_progress(head, cursor)
                if failure is not None:
                    raise failure
                if gentle and start <= through and not self._stopping.is_set():
                    pause_s = (time.monotonic() - began) * (1 - self._busy_share) / self._busy_share
                    with contextlib.suppress(TimeoutError):  # commits do not cut it short; a stop does
                        await asyncio.wait_for(self._stopping.wait(), pause_s)
        finally:
            for _, futures, _ in in_flight:  # after a failure: whatever they hold is retried
                publisher.forget(futures)
        return published

    async def _send(
        self,
        publisher: _Publisher,
        transactions: list[Transaction],
        previous: str | None,
        request_hashes: dict[int, bytes] | None = None,
    ) -> list[asyncio.Future[dict[str, Any]]]:
        """Send one message per transaction, in order, each expecting its predecessor
        ``previous`` (none after a failure or a restart); the futures of their acks."""
        futures: list[asyncio.Future[dict[str, Any]]] = []
        times = convert.TimestampCache()
        spans: dict[int, Span] = {}  # the chunk's publish spans, by the span id of their batch
        last_of: dict[Span, asyncio.Future[dict[str, Any]]] = {}  # each one's last message
        try:
            for built, tx in enumerate(transactions, start=1):
                kinds = sorted({kind_of(e.account_id) for e in tx.entries})
                headers = {
                    "Nats-Msg-Id": tx.transaction_id,
                    "Socai-Journal-Seq": str(tx.journal_seq),
                    "Socai-Account-Kinds": ",".join(kinds),
                }
                if request_hashes is not None and tx.journal_seq in request_hashes:
                    headers[REQUEST_HASH_HEADER] = request_hashes[tx.journal_seq].hex()
                if previous is not None:
                    headers["Nats-Expected-Last-Msg-Id"] = previous
                payload = convert.transaction(tx, times=times).SerializeToString()
                span = self._publish_span(tx, spans, headers) if self.marks else None
                futures.append(await publisher.publish(subject_of(self._prefix, tx), payload, headers))
                if span is not None:
                    last_of[span] = futures[-1]
                previous = tx.transaction_id
                if built % YIELD_EVERY == 0:
                    # Building and sending a chunk is CPU work; let the write path run between.
                    await asyncio.sleep(0)
        except BaseException:
            publisher.forget(futures)
            for future in futures:
                if future.done() and not future.cancelled():
                    future.exception()  # read: the chunk is abandoned, its outcomes with it
            raise
        finally:
            for span, future in last_of.items():  # a batch's messages are consecutive
                future.add_done_callback(functools.partial(_end_publish, span))
        return futures

    def _publish_span(self, tx: Transaction, spans: dict[int, Span], headers: dict[str, str]) -> Span | None:
        """The ``publish`` span of ``tx`` (one per batch and chunk), its ``traceparent`` put
        into ``headers``; None when ``tx`` has no mark (another replica wrote it, a restart)."""
        batch = self.marks.take(tx.journal_seq)
        if batch is None:
            return None
        span = spans.get(batch.span_id)
        if span is None:
            span = spans[batch.span_id] = tracing.start_span(
                "socai.ledger",
                "publish",
                parent=batch,
                kind=SpanKind.PRODUCER,
                attributes={"messaging.system": "nats", "messaging.destination.name": subject_of(self._prefix, tx)},
            )
        span.set_attribute("socai.journal_seq_last", tx.journal_seq)
        with tracing.current_span(span):
            tracing.inject(headers)
        return span

    async def _acked(
        self, publisher: _Publisher, transactions: list[Transaction], futures: list[asyncio.Future[dict[str, Any]]]
    ) -> tuple[int, Exception | None]:
        """Wait for the acks of a chunk; (how many leading messages the stream stored, the first failure)."""
        try:
            if futures:
                await asyncio.wait(futures, timeout=self._publish_timeout_s)
        finally:
            publisher.forget(futures)
        # Every outcome is read, those after the first failure too: a refusal left unread is
        # logged by asyncio as "Future exception was never retrieved" when it is collected
        # (each message after a NATS restart's first 503 is refused alike).
        for future in futures:
            if future.done() and not future.cancelled():
                future.exception()
        stored = 0
        for tx, future in zip(transactions, futures, strict=True):
            if future.cancelled():
                failure: Exception = errors.Unavailable(
                    "NATS_UNAVAILABLE", f"no ack within {self._publish_timeout_s}s for journal {tx.journal_seq}"
                )
            elif (cause := future.exception()) is None:
                stored += 1
                self._last_msg_id = tx.transaction_id
                continue
            elif isinstance(cause, _Refused) and cause.err_code == WRONG_LAST_MSG_ID_CODE:
                failure = _ChainBroken(f"journal {tx.journal_seq}: {cause}")
            else:
                failure = errors.Unavailable("NATS_UNAVAILABLE", f"publish of journal {tx.journal_seq} failed: {cause}")
            # Whatever the stream holds after the stored prefix is unknown: no expectation next time.
            self._last_msg_id = None
            return stored, failure
        return stored, None

    async def _database(self) -> db.AConn:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._leader = False
            self._conn = await db.connect(self._db_url, autocommit=True)
        if not self._leader:
            row = await (await self._conn.execute("select pg_try_advisory_lock(%s)", (db.RELAY_LOCK,))).fetchone()
            self._leader = bool(row and row[0])
            if self._leader:
                log.info("outbox_relay_leader")
                self._last_msg_id = None
        return self._conn

    async def _jetstream(self) -> _Publisher:
        if self._publisher is None:
            # A few quick reconnects for a blip; past them the client gives up and this relay's
            # own loop reconnects with backoff (an unreachable NATS must not hang the relay).
            self._nc = await asyncio.wait_for(
                connect(
                    self._nats_url,
                    name="socai-ledger-outbox",
                    max_reconnect_attempts=3,
                    reconnect_time_wait=1,
                    connect_timeout=2,
                ),
                timeout=15,
            )
            js = self._nc.jetstream()
            try:
                await js.stream_info(self._stream.name)
            except NotFoundError:
                # Development and tests: the ledger provisions its own stream. In a deployment
                # the migration job has (its NATS user may create streams; the ledger's may not),
                # and the existing stream's configuration is the provisioner's to change.
                await ensure_stream(js, self._stream)
            self._publisher = await _Publisher.start(self._nc)
        return self._publisher

    async def _disconnect(self) -> None:
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.close()
        self._nc = None
        self._publisher = None
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
        self._conn = None
        self._leader = False
