"""Where a hand's settlement lives in the ledger: its idempotency keys, and finding it.

A hand is posted under ``settle:{hand_id}``. The ledger remembers a refusal under its key
(INSUFFICIENT_FUNDS, ACCOUNT_NOT_FOUND …: a retry gets the same answer), so a hand whose
post was refused can only be settled, once its cause is fixed, under a new key:
``settle:{hand_id}:retry1``, then ``:retry2`` … up to ``RETRY_KEYS_MAX``. A key is used only
after every key before it was refused, so at most one key of the chain is ever applied:
the hand is still posted exactly once. ``find_settlement`` walks the chain the same way
for the settlement service (which key to use next) and the auditor (which transaction is
the hand's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from socai import errors

RETRY_KEYS_MAX: Final = 5
LOOKUP_DEADLINE_S: Final = 10.0


def settlement_key(hand_id: str, retry: int = 0) -> str:
    return f"settle:{hand_id}" if retry == 0 else f"settle:{hand_id}:retry{retry}"


def settlement_keys(hand_id: str) -> list[str]:
    return [settlement_key(hand_id, n) for n in range(RETRY_KEYS_MAX + 1)]


@dataclass(frozen=True, slots=True)
class Found:
    """What the ledger holds for a hand: the applied transaction (and its key), the keys
    refused on the way, and the first key never used (empty when one applied or every key
    was refused)."""

    hand_id: str
    key: str = ""
    transaction: Any = None  # ledger_pb2.Transaction
    refused: tuple[tuple[str, str], ...] = ()  # (key, the ledger's refusal reason)
    next_key: str = ""

    @property
    def entries(self) -> dict[str, int]:
        if self.transaction is None:
            return {}
        return {e.account_id: int(e.amount_gold) for e in self.transaction.entries}


async def find_settlement(ledger: Any, hand_id: str) -> Found:
    """Walk the hand's keys (``ledger`` is a LedgerServiceStub). One call in the usual case.

    Raises Unavailable("LEDGER_UNAVAILABLE") when the ledger does not answer.
    """
    import grpc

    from socai.gen.ledger.v1 import ledger_pb2
    from socai.infra.grpc_errors import error_info

    refused: list[tuple[str, str]] = []
    for key in settlement_keys(hand_id):
        try:
            reply = await ledger.GetTransaction(
                ledger_pb2.GetTransactionRequest(idempotency_key=key), timeout=LOOKUP_DEADLINE_S
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise errors.Unavailable(
                    "LEDGER_UNAVAILABLE", f"ledger GetTransaction {key}: {exc.code().name}: {exc.details()}"
                ) from exc
            info = error_info(exc)
            reason = info.metadata.get("refused_reason", "") if info is not None else ""
            if not reason:
                return Found(hand_id, refused=tuple(refused), next_key=key)
            refused.append((key, reason))
            continue
        return Found(hand_id, key, reply.transaction, tuple(refused))
    return Found(hand_id, refused=tuple(refused))
