"""What the table service asks of the ledger and the settlement service, over gRPC."""

from __future__ import annotations

import grpc

from socai import accounts, errors
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.settlement.v1 import settlement_pb2_grpc as sgrpc
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason, from_rpc_error
from socai_table.model import buy_in_key, join_key

__all__ = ["Money", "buy_in_key", "join_key", "wallet"]  # the keys are the model's, kept importable here

DEADLINE_S = 10.0
# The table service's scope of ledger fences: its partitions are the tables' (``claim``).
FENCE_SCOPE = "table"
Lease = tuple[int, int]  # (partition, lease token) of a table partition


class Money:
    """Buy-ins, cash-outs and settlement checks."""

    def __init__(self, ledger_addr: str, settlement_addr: str, token: str) -> None:
        self._ledger_channel = channel(ledger_addr, token)
        self._settlement_channel = channel(settlement_addr, token)
        self.ledger = lgrpc.LedgerServiceStub(self._ledger_channel)
        self.settlement = sgrpc.SettlementServiceStub(self._settlement_channel)

    async def close(self) -> None:
        await self._ledger_channel.close()
        await self._settlement_channel.close()

    async def transfer(
        self, key: str, src: str, dst: str, amount: int, kind: str, reference: str, fence: Lease | None = None
    ) -> str:
        """Move ``amount`` gold; returns the ledger transaction id.

        With ``fence`` (the table partition's (partition, token)) the ledger posts it only
        while that lease is current (``claim``); a former holder's transfer is refused, as
        Unavailable("TABLE_NOT_HELD"). Raises InsufficientFunds, NotFound, Unavailable … as
        the ledger answers.
        """
        if fence is not None:
            item = lpb.TransactionInput(
                idempotency_key=key,
                kind=kind,
                reference=reference,
                # The legs of a Transfer, in its order: a retry through either call is the
                # same request under the key (REPLAYED).
                entries=[
                    lpb.EntryInput(account_id=src, amount_gold=-amount),
                    lpb.EntryInput(account_id=dst, amount_gold=amount),
                ],
                open_accounts=True,
            )
            replies = await self._fenced([item], fence)
            return self._applied(replies.results[0])
        request = lpb.TransferRequest(
            idempotency_key=key,
            from_account_id=src,
            to_account_id=dst,
            amount_gold=amount,
            kind=kind,
            reference=reference,
            open_accounts=True,
        )
        try:
            reply = await self.ledger.Transfer(request, timeout=DEADLINE_S)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc
        return self._applied(reply.result)

    async def claim(self, fence: Lease) -> None:
        """Record this holder's lease of a table partition at the ledger: from now on every
        earlier holder's fenced transfer is refused. A buy-in a paused former holder sent
        late can then never land after the new holder found it missing. Raises
        Unavailable("TABLE_NOT_HELD") when a newer holder has claimed it, Unavailable when
        the ledger does not answer."""
        await self._fenced([], fence)

    async def _fenced(self, items: list[lpb.TransactionInput], fence: Lease) -> lpb.PostTransactionsResponse:
        partition, token = fence
        request = lpb.PostTransactionsRequest(
            transactions=items, fence=lpb.Fence(scope=FENCE_SCOPE, partition=partition, token=token)
        )
        try:
            reply: lpb.PostTransactionsResponse = await self.ledger.PostTransactions(request, timeout=DEADLINE_S)
        except grpc.aio.AioRpcError as exc:
            if error_reason(exc) == "FENCED":
                raise errors.Unavailable(
                    "TABLE_NOT_HELD",
                    f"the ledger knows a newer holder of table partition {partition} than token {token}",
                    partition=partition,
                ) from exc
            raise from_rpc_error(exc) from exc
        return reply

    @staticmethod
    def _applied(result: lpb.PostResult) -> str:
        """The transaction id of an applied (or replayed) result; a refused one raised as the
        error its reason is (a fenced item's refusal is a result, not the call's status)."""
        if result.status != lpb.POST_STATUS_REJECTED:
            return str(result.transaction.transaction_id)
        reason, message = result.error_reason or "LEDGER_REJECTED", result.error_message or result.error_reason
        if reason == "INSUFFICIENT_FUNDS":
            raise errors.InsufficientFunds("INSUFFICIENT_FUNDS", message or "insufficient funds")
        if reason.endswith("_NOT_FOUND"):
            raise errors.NotFound(reason, message)
        if reason.endswith("_NOT_ALLOWED") or reason.endswith("_RESERVED"):
            raise errors.PermissionDenied(reason, message)
        if reason.startswith("BAD_") or reason.endswith("_AMOUNT") or reason.endswith("_OUT_OF_RANGE"):
            raise errors.InvalidArgument(reason, message)
        raise errors.PreconditionFailed(reason, message)

    async def hold(self, hand_id: str, amount_gold: int) -> int:
        """Hold at least ``amount_gold`` of ``house:bank`` for ``hand_id`` (the hand's worst
        case now); returns the bank's free gold after it.

        Raises PreconditionFailed("BANKER_CAPACITY") when the bank cannot cover it (details:
        the ledger's ErrorInfo metadata, free_gold among them), Unavailable when the ledger
        does not answer; nothing is held then.
        """
        request = lpb.HoldRequest(account_id=accounts.HOUSE_BANK, hand_id=hand_id, amount_gold=amount_gold)
        try:
            reply = await self.ledger.Hold(request, timeout=DEADLINE_S)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc
        return int(reply.free_gold)

    async def finalize_hold(self, hand_id: str, amount_gold: int) -> None:
        """The hand's outcome is known: its hold of ``house:bank`` becomes ``amount_gold``,
        what its settlement will debit the bank (0 releases it). Raises NotFound
        ("HOLD_NOT_FOUND") when the hand holds nothing, Unavailable …"""
        request = lpb.FinalizeHoldRequest(account_id=accounts.HOUSE_BANK, hand_id=hand_id, amount_gold=amount_gold)
        try:
            await self.ledger.FinalizeHold(request, timeout=DEADLINE_S)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc

    async def transaction_of(self, key: str) -> str | None:
        """The id of the transaction posted under ``key``, or None."""
        try:
            reply = await self.ledger.GetTransaction(lpb.GetTransactionRequest(idempotency_key=key), timeout=DEADLINE_S)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise from_rpc_error(exc) from exc
        return str(reply.transaction.transaction_id)

    async def balance(self, account_id: str) -> int:
        try:
            reply = await self.ledger.GetAccount(lpb.GetAccountRequest(account_id=account_id), timeout=DEADLINE_S)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return 0
            raise from_rpc_error(exc) from exc
        return int(reply.account.balance_gold)

    async def is_settled(self, hand_id: str) -> bool:
        """True once the settlement service has settled ``hand_id``."""
        try:
            await self.settlement.GetSettlement(spb.GetSettlementRequest(hand_id=hand_id), timeout=DEADLINE_S)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return False
            raise from_rpc_error(exc) from exc
        return True


def wallet(player_id: str) -> str:
    return accounts.player(player_id)
