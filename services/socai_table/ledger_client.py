"""What the table service asks of the ledger and the settlement service, over gRPC."""

from __future__ import annotations

import grpc

from socai import accounts, errors
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.settlement.v1 import settlement_pb2_grpc as sgrpc
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import from_rpc_error
from socai_table.model import buy_in_key, join_key

__all__ = ["Money", "buy_in_key", "join_key", "wallet"]  # the keys are the model's, kept importable here

DEADLINE_S = 10.0


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

    async def transfer(self, key: str, src: str, dst: str, amount: int, kind: str, reference: str) -> str:
        """Move ``amount`` gold; returns the ledger transaction id.

        Raises InsufficientFunds, NotFound, Unavailable … as the ledger answers.
        """
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
        result = reply.result
        if result.status == lpb.POST_STATUS_REJECTED:
            if result.error_reason == "INSUFFICIENT_FUNDS":
                raise errors.InsufficientFunds("INSUFFICIENT_FUNDS", result.error_message or "insufficient funds")
            raise errors.PreconditionFailed(result.error_reason or "LEDGER_REJECTED", result.error_message)
        return str(result.transaction.transaction_id)

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
