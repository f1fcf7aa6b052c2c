"""Posting settlements to the ledger: batched, idempotent, retried while it is unavailable.

``LedgerPoster.post(items)`` sends up to ``batch_max`` transactions per PostTransactions
call and returns one ``Posted`` per item, in order. An item is a ``TransactionInput`` or
one already serialized (what the replay workers send back): a batch of those becomes the
request by concatenation, since a repeated message field is its items' encodings, each
after its tag and length.

- APPLIED and REPLAYED are both success (REPLAYED is a redelivered hand whose transaction
  the ledger already holds under ``settle:{hand_id}``: the original transaction id comes back);
- REJECTED (INSUFFICIENT_FUNDS, IDEMPOTENCY_KEY_REUSED …) is the hand's own problem: the
  caller dead-letters it with reason LEDGER_REJECTED;
- a call that fails as a whole with UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED,
  RESOURCE_EXHAUSTED, UNAUTHENTICATED or PERMISSION_DENIED (a configuration problem to fix,
  not a reason to drop a hand) is retried with exponential backoff, forever, calling
  ``on_wait`` between attempts (the consumer keeps its messages in progress);
- a call that fails as a whole otherwise (INVALID_ARGUMENT, INTERNAL …) is split: each item
  is posted alone, so one bad item cannot sink the others, and an item that still fails
  is reported as rejected with the status's reason.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import grpc

from socai import errors
from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.grpc_errors import error_reason
from socai.infra.logging import get_logger

log = get_logger("socai.settlement.poster")

RETRYABLE: Final = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.CANCELLED,
    }
)
LEDGER_BATCH_MAX: Final = 1000  # the ledger's own limit per PostTransactions call
_TRANSACTIONS_TAG: Final = b"\x0a"  # PostTransactionsRequest.transactions: field 1, length-delimited

Item: TypeAlias = ledger_pb2.TransactionInput | bytes

APPLIED: Final = "applied"
REPLAYED: Final = "replayed"
REJECTED: Final = "rejected"


@dataclass(frozen=True, slots=True)
class Posted:
    """The ledger's answer for one transaction."""

    status: str  # APPLIED, REPLAYED or REJECTED
    transaction_id: str = ""
    reason: str = ""
    message: str = ""
    entries: tuple[tuple[str, int], ...] = ()  # (account, amount) as the ledger holds them

    @property
    def ok(self) -> bool:
        return self.status in (APPLIED, REPLAYED)


@dataclass
class Backoff:
    """Exponential backoff with jitter: ``initial_s``, doubling, capped at ``max_s``."""

    initial_s: float = 0.1
    max_s: float = 5.0
    attempt: int = 0

    def next_delay(self) -> float:
        delay = min(self.max_s, self.initial_s * 2.0**self.attempt)
        self.attempt += 1
        return delay * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self.attempt = 0


FENCED: Final = "FENCED"


def lease_lost(fence: ledger_pb2.Fence, detail: str) -> errors.PreconditionFailed:
    return errors.PreconditionFailed(
        "LEASE_LOST", f"partition {fence.partition}: the ledger fenced token {fence.token} ({detail})"
    )


class LedgerPoster:
    def __init__(
        self,
        stub: Any,
        *,
        batch_max: int = 200,
        deadline_s: float = 10.0,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
    ) -> None:
        if not 1 <= batch_max <= LEDGER_BATCH_MAX:
            raise ValueError(f"batch_max must be 1..{LEDGER_BATCH_MAX}")
        self.stub = stub
        self.batch_max = batch_max
        self.deadline_s = deadline_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.retries = 0  # calls retried since start (metrics, tests)

    async def post(
        self,
        items: Sequence[Item],
        on_wait: Callable[[], Awaitable[None]] | None = None,
        *,
        fence: ledger_pb2.Fence | None = None,
    ) -> list[Posted]:
        """One ``Posted`` per item, in order. Returns only when the ledger answered for
        every item (it never gives up on an unavailable ledger; cancel the task to stop).
        ``fence``: the lease of the partition whose pipeline posts (every PostTransactions
        carries its token, and the ledger refuses a holder whose lease moved on: FENCED);
        None for an unfenced post (an operator's RetryDeadLetter, tests)."""
        out: list[Posted] = []
        for start in range(0, len(items), self.batch_max):
            chunk = list(items[start : start + self.batch_max])
            out.extend(await self._post_chunk(chunk, on_wait, fence))
        return out

    async def claim(self, fence: ledger_pb2.Fence, on_wait: Callable[[], Awaitable[None]] | None = None) -> None:
        """Record ``fence`` in the ledger (a PostTransactions with the fence and nothing to
        post) before consuming a newly leased partition: from then on a paused old holder's
        posts are refused. Waits while the ledger is unavailable; raises
        PreconditionFailed("LEASE_LOST") when a newer token was recorded already."""
        backoff = Backoff(self.backoff_initial_s, self.backoff_max_s)
        request = ledger_pb2.PostTransactionsRequest(fence=fence)
        while True:
            try:
                await self.stub.PostTransactions(request, timeout=self.deadline_s)
                return
            except grpc.aio.AioRpcError as exc:
                if error_reason(exc) == FENCED:
                    raise lease_lost(fence, "claim") from exc
                if exc.code() not in RETRYABLE:
                    raise
                delay = backoff.next_delay()
                log.warning("ledger_unavailable", code=exc.code().name, retry_in_s=round(delay, 3), claim=True)
                if on_wait is not None:
                    await on_wait()
                await asyncio.sleep(delay)

    async def _post_chunk(
        self, chunk: list[Item], on_wait: Callable[[], Awaitable[None]] | None, fence: ledger_pb2.Fence | None
    ) -> list[Posted]:
        backoff = Backoff(self.backoff_initial_s, self.backoff_max_s)
        request = _request(chunk)
        if fence is not None:
            request.fence.CopyFrom(fence)
        while True:
            try:
                reply = await self.stub.PostTransactions(request, timeout=self.deadline_s)
            except grpc.aio.AioRpcError as exc:
                if fence is not None and error_reason(exc) == FENCED:
                    # Another instance holds the partition now: nothing of this is posted or
                    # dead-lettered; the pipeline stops and its messages go to the new holder.
                    raise lease_lost(fence, "post") from exc
                if exc.code() in RETRYABLE:
                    delay = backoff.next_delay()
                    self.retries += 1
                    log.warning(
                        "ledger_unavailable",
                        code=exc.code().name,
                        reason=error_reason(exc),
                        retry_in_s=round(delay, 3),
                        hands=len(chunk),
                    )
                    if on_wait is not None:
                        await on_wait()
                    await asyncio.sleep(delay)
                    continue
                if len(chunk) > 1:
                    log.warning(
                        "ledger_batch_refused", code=exc.code().name, reason=error_reason(exc), hands=len(chunk)
                    )
                    out: list[Posted] = []
                    for item in chunk:
                        out.extend(await self._post_chunk([item], on_wait, fence))
                    return out
                return [Posted(REJECTED, reason=error_reason(exc) or exc.code().name, message=exc.details() or "")]
            results = list(reply.results)
            if len(results) != len(chunk):
                # The ledger broke its contract (one result per input): retrying is the only
                # safe answer, since the idempotency keys make a repeat harmless.
                log.error("ledger_result_count", sent=len(chunk), got=len(results))
                await asyncio.sleep(backoff.next_delay())
                continue
            posted = [_posted(r) for r in results]
            if fence is not None and any(p.reason == FENCED for p in posted):
                raise lease_lost(fence, "an item of the batch")  # the ledger's item-by-item fallback
            return posted


def _request(items: Sequence[Item]) -> ledger_pb2.PostTransactionsRequest:
    parts: list[bytes] = []
    for item in items:
        if not isinstance(item, bytes):
            return ledger_pb2.PostTransactionsRequest(
                transactions=[_transaction(i) if isinstance(i, bytes) else i for i in items]
            )
        parts += (_TRANSACTIONS_TAG, _varint(len(item)), item)
    return ledger_pb2.PostTransactionsRequest.FromString(b"".join(parts))


def _transaction(data: bytes) -> ledger_pb2.TransactionInput:
    return ledger_pb2.TransactionInput.FromString(data)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _posted(result: Any) -> Posted:
    tx = result.transaction
    entries = tuple((e.account_id, int(e.amount_gold)) for e in tx.entries)
    if result.status == ledger_pb2.POST_STATUS_APPLIED:
        return Posted(APPLIED, tx.transaction_id, entries=entries)
    if result.status == ledger_pb2.POST_STATUS_REPLAYED:
        return Posted(REPLAYED, tx.transaction_id, entries=entries)
    return Posted(
        REJECTED,
        tx.transaction_id,
        reason=result.error_reason or "REJECTED",
        message=result.error_message,
    )
