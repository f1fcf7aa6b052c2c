"""The LedgerService servicer: protobuf at the edge, the domain and the store inside.

Access policy (callers are the services named in ``Settings.tokens``):

| methods | callers |
|---|---|
| GetAccount, ListAccounts, GetTransaction, ListEntries, GetBalanceAt | every authenticated caller |
| PostTransaction, PostTransactions | table, settlement, backend |
| Transfer | table, settlement, backend, cashier, operator |
| OpenAccount | table, settlement, backend, cashier, operator |
| Deposit, Withdraw | cashier, operator |
| VerifyJournal, TrialBalance | auditor, operator, settlement, backend |
| ListTransactions | auditor, operator |
| Hold, FinalizeHold | table |
| ReleaseHold | operator |
| ListHolds | every authenticated caller |

Which accounts and idempotency keys each writer may post to (``domain.authorize``, checked
once per request before it reaches the write batcher; anything else is PERMISSION_DENIED
with a reason):

| caller | accounts | keys |
|---|---|---|
| table | a player's wallet and their escrow at a table, two entries | ``join:``, ``cashout:``, ``refund:`` are its alone |
| settlement | the escrows and pot of the table of the key's hand, ``house:fees``, ``house:bank``; guild funds as payees only | ``settle:{table_id}-h{n}[:retryN]`` only |
| backend | wallets (``player:``) only: a live table's money is the table's | not the reserved prefixes |
| cashier, operator | any, ``external:cashier`` included | not the reserved prefixes |

Only settlement and the table service may send a ``Fence`` with PostTransactions, each in
scopes of its own name ("settlement…", "table…"; PERMISSION_DENIED, FENCE_NOT_ALLOWED
otherwise): a fence from anyone else would advance a partition's token and refuse the real
lease holder.

Money enters and leaves through ``external:cashier`` only: a posting with an entry on an
``external:`` account is refused (PERMISSION_DENIED, EXTERNAL_ACCOUNT_RESERVED) unless the
caller is the cashier or an operator, so a table or a backend cannot mint gold.

Holds (``holds``): only ``house:bank`` is held (PERMISSION_DENIED, ACCOUNT_NOT_ALLOWED for
any other account), for a hand id ``{table_id}-h{n}`` (INVALID_ARGUMENT, BAD_HAND_ID).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from socai import accounts, errors
from socai.audit.journal import JournalSigner
from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.grpc_server import ANY_CALLER, AccessPolicy, current_caller
from socai.infra.paging import filters_of
from socai.money import INT64_MAX
from socai_ledger import convert, domain, holds, journal_export, queries, verify
from socai_ledger.batcher import WriteBatcher
from socai_ledger.domain import PostStatus, PreparedTransaction

SERVICE_NAME: Final = pb.DESCRIPTOR.services_by_name["LedgerService"].full_name

_EVERYONE = frozenset({ANY_CALLER})
_WRITERS = frozenset({"table", "settlement", "backend"})
_CASHIERS = frozenset({"cashier", "operator"})
_AUDITORS = frozenset({"auditor", "operator", "settlement", "backend"})
# The whole journal, every player's money in it: only those who audit it (no service needs it).
_JOURNAL_READERS = frozenset({"auditor", "operator"})
# The table holds the house bank for the hands it runs (games against the house); only an
# operator releases a hold by hand (a hand that will never settle).
_HOLDERS = frozenset({"table"})
_OPERATORS = frozenset({"operator"})
ALLOW: Final[Mapping[str, frozenset[str]]] = {
    "OpenAccount": _WRITERS | _CASHIERS,
    "GetAccount": _EVERYONE,
    "ListAccounts": _EVERYONE,
    "PostTransaction": _WRITERS,
    "PostTransactions": _WRITERS,
    "Deposit": _CASHIERS,
    "Withdraw": _CASHIERS,
    "Transfer": _WRITERS | _CASHIERS,
    "GetTransaction": _EVERYONE,
    "ListEntries": _EVERYONE,
    "GetBalanceAt": _EVERYONE,
    "VerifyJournal": _AUDITORS,
    "TrialBalance": _AUDITORS,
    "ListTransactions": _JOURNAL_READERS,
    "Hold": _HOLDERS,
    "FinalizeHold": _HOLDERS,
    "ReleaseHold": _OPERATORS,
    "ListHolds": _EVERYONE,
}
ID_PREFIX_MAX_CHARS: Final = accounts.ACCOUNT_ID_MAX_CHARS
# Items converted (or answers built) between two yields to the event loop: the single
# write batcher shares the loop with the handlers, and the batch it is committing must not
# wait for a 1,000-item request to be parsed from end to end.
YIELD_EVERY: Final = 25


def access_policy(tokens: Mapping[str, str]) -> AccessPolicy:
    return AccessPolicy(tokens=tokens, allow=ALLOW)


class LedgerServicer(pb_grpc.LedgerServiceServicer):
    def __init__(
        self,
        pool: Any,
        batcher: WriteBatcher,
        hold_writer: holds.HoldWriter,
        journal_signer: JournalSigner | None = None,
    ) -> None:
        self.pool = pool
        self.batcher = batcher
        self.hold_writer = hold_writer
        self.journal_signer = journal_signer  # signs each page of ListTransactions (socai.audit.journal)
        self._times = convert.TimestampCache()

    # --- accounts ---------------------------------------------------------------------------

    async def OpenAccount(self, request: pb.OpenAccountRequest, context: Any) -> pb.OpenAccountResponse:
        domain.check_account_id(request.account_id)
        account, created = await queries.open_account(self.pool, request.account_id)
        return pb.OpenAccountResponse(account=convert.account(account), created=created)

    async def GetAccount(self, request: pb.GetAccountRequest, context: Any) -> pb.GetAccountResponse:
        domain.check_account_id(request.account_id)
        return pb.GetAccountResponse(account=convert.account(await queries.get_account(self.pool, request.account_id)))

    async def ListAccounts(self, request: pb.ListAccountsRequest, context: Any) -> pb.ListAccountsResponse:
        if request.kind and request.id_prefix:
            raise errors.InvalidArgument("KIND_AND_PREFIX", "give kind or id_prefix, not both")
        if request.kind and request.kind not in accounts.KINDS:
            raise errors.InvalidArgument("BAD_KIND", f"kind must be one of {', '.join(accounts.KINDS)}")
        if len(request.id_prefix) > ID_PREFIX_MAX_CHARS or not request.id_prefix.isprintable():
            raise errors.InvalidArgument(
                "BAD_ID_PREFIX", f"id_prefix: at most {ID_PREFIX_MAX_CHARS} printable characters"
            )
        limit = domain.check_page_size(request.page_size)
        filters = filters_of("accounts", request.kind, request.id_prefix)
        after = ""
        if request.page_token:
            after = queries.decode_bound_token(request.page_token, 1, filters)[0]
            if len(after) > accounts.ACCOUNT_ID_MAX_CHARS:
                raise errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token is not one this service issued")
        found, more = await queries.list_accounts(
            self.pool, kind=request.kind, id_prefix=request.id_prefix, after=after, limit=limit
        )
        return pb.ListAccountsResponse(
            accounts=[convert.account(a) for a in found],
            next_page_token=queries.encode_bound_token(filters, found[-1].account_id) if more and found else "",
        )

    # --- postings ---------------------------------------------------------------------------

    async def _post_one(self, item: PreparedTransaction, out: pb.PostResult | None = None) -> pb.PostResult:
        """Post one transaction into ``out`` (a new PostResult when None); a refusal becomes
        the RPC's error status."""
        domain.authorize(current_caller.get(), item)
        outcome = (await self.batcher.submit([item]))[0]
        if outcome.status is PostStatus.REJECTED:
            errors.check(outcome.error is not None, "a refusal carries its error")
            assert outcome.error is not None
            raise outcome.error
        # The calls answered by one batch share its time: one cache for all of them.
        return convert.post_result(outcome, out, self._times)

    async def PostTransaction(self, request: pb.PostTransactionRequest, context: Any) -> pb.PostTransactionResponse:
        # Filled in place: building the result apart and passing it to the constructor copies it.
        response = pb.PostTransactionResponse()
        await self._post_one(convert.prepared(request.transaction), response.result)
        return response

    async def PostTransactions(self, request: pb.PostTransactionsRequest, context: Any) -> pb.PostTransactionsResponse:
        """Up to 1,000 transactions, each atomic on its own.

        With a fence (settlement's lease, ``domain.Fence``) the valid items are written in one
        database transaction of their own, only if the token is current; a stale one fails the
        whole call with FAILED_PRECONDITION / FENCED, nothing written (``batcher``). A fence
        with no transactions is a claim: the token is recorded and no results come back.
        """
        count = len(request.transactions)
        caller = current_caller.get()
        fence = convert.fence(request)
        if fence is not None:
            domain.authorize_fence(caller, fence.scope)
        if count == 0 and fence is None:
            raise errors.InvalidArgument("EMPTY_BATCH", "PostTransactions needs at least one transaction")
        if count > domain.BATCH_MAX:
            raise errors.InvalidArgument(
                "BATCH_TOO_LARGE", f"{count} transactions in one call; at most {domain.BATCH_MAX}"
            )
        response = pb.PostTransactionsResponse()
        results = [response.results.add() for _ in range(count)]
        valid: list[PreparedTransaction] = []
        positions: list[int] = []
        for position, msg in enumerate(request.transactions):
            if position % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)  # a long request must not hold up the write batcher
            try:
                item = convert.prepared(msg)
                domain.authorize(caller, item)
            except errors.SocaiError as exc:
                # Malformed or forbidden items are refused on their own; nothing is written for them.
                convert.rejected(exc, results[position])
                continue
            valid.append(item)
            positions.append(position)
        # A fenced call goes to the batcher even when no item is left: the caller learns
        # whether its lease is still current, and a current token is recorded (a claim).
        if valid or fence is not None:
            outcomes = await self.batcher.submit(valid, fence)
            times = convert.TimestampCache()
            for done, (position, outcome) in enumerate(zip(positions, outcomes, strict=True)):
                if done % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)
                convert.post_result(outcome, results[position], times)
        return response

    async def Deposit(self, request: pb.DepositRequest, context: Any) -> pb.DepositResponse:
        player = self._movement_checks(
            request.idempotency_key, request.player_id, request.amount_gold, request.reference
        )
        result = await self._post_two_legs(
            request.idempotency_key,
            "deposit",
            request.reference,
            accounts.EXTERNAL_CASHIER,
            player,
            request.amount_gold,
            open_accounts=True,  # a first deposit opens the wallet
        )
        return pb.DepositResponse(result=result)

    async def Withdraw(self, request: pb.WithdrawRequest, context: Any) -> pb.WithdrawResponse:
        player = self._movement_checks(
            request.idempotency_key, request.player_id, request.amount_gold, request.reference
        )
        result = await self._post_two_legs(
            request.idempotency_key,
            "withdrawal",
            request.reference,
            player,
            accounts.EXTERNAL_CASHIER,
            request.amount_gold,
        )
        return pb.WithdrawResponse(result=result)

    @staticmethod
    def _movement_checks(key: str, player_id: str, amount_gold: int, reference: str) -> str:
        domain.check_idempotency_key(key)
        player = accounts.player(player_id)
        domain.check_positive_amount(amount_gold)
        domain.check_reference(reference)
        return player

    async def Transfer(self, request: pb.TransferRequest, context: Any) -> pb.TransferResponse:
        domain.check_idempotency_key(request.idempotency_key)
        domain.check_account_id(request.from_account_id)
        domain.check_account_id(request.to_account_id)
        if request.from_account_id == request.to_account_id:
            raise errors.InvalidArgument("SAME_ACCOUNT", "a transfer needs two different accounts")
        domain.check_positive_amount(request.amount_gold)
        result = await self._post_two_legs(
            request.idempotency_key,
            request.kind or "transfer",
            request.reference,
            request.from_account_id,
            request.to_account_id,
            request.amount_gold,
            metadata=dict(request.metadata),
            open_accounts=request.open_accounts,
        )
        return pb.TransferResponse(result=result)

    async def _post_two_legs(
        self,
        key: str,
        kind: str,
        reference: str,
        from_account: str,
        to_account: str,
        amount_gold: int,
        *,
        metadata: dict[str, str] | None = None,
        open_accounts: bool = False,
    ) -> pb.PostResult:
        """Deposit, Withdraw and Transfer: ``amount_gold`` from one account to another."""
        raw = domain.TransactionInput(
            idempotency_key=key,
            kind=kind,
            reference=reference,
            entries=[domain.EntryInput(from_account, -amount_gold), domain.EntryInput(to_account, amount_gold)],
            metadata=metadata or {},
            open_accounts=open_accounts,
        )
        return await self._post_one(domain.prepare(raw))

    # --- the journal ------------------------------------------------------------------------

    async def GetTransaction(self, request: pb.GetTransactionRequest, context: Any) -> pb.GetTransactionResponse:
        if bool(request.transaction_id) == bool(request.idempotency_key):
            raise errors.InvalidArgument("ONE_OF_ID_OR_KEY", "give transaction_id or idempotency_key (exactly one)")
        if request.transaction_id:
            tx = await queries.get_transaction(
                self.pool, transaction_id=convert.parse_transaction_id(request.transaction_id), idempotency_key=""
            )
        else:
            domain.check_idempotency_key(request.idempotency_key)
            tx = await queries.get_transaction(self.pool, transaction_id=None, idempotency_key=request.idempotency_key)
        return pb.GetTransactionResponse(transaction=convert.transaction(tx))

    async def ListEntries(self, request: pb.ListEntriesRequest, context: Any) -> pb.ListEntriesResponse:
        domain.check_account_id(request.account_id)
        limit = domain.check_page_size(request.page_size)
        before = INT64_MAX
        if request.page_token:
            token_account, token_version = queries.decode_token(request.page_token, 2)
            if token_account != request.account_id:
                raise errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token belongs to another statement")
            before = queries.parse_int64(token_version)
        found, more = await queries.list_entries(self.pool, request.account_id, before_version=before, limit=limit)
        response = pb.ListEntriesResponse()
        times = convert.TimestampCache()
        for e in found:
            convert.entry(e, response.entries.add(), times)
        if more and found:
            response.next_page_token = queries.encode_token(request.account_id, str(found[-1].account_version))
        return response

    async def GetBalanceAt(self, request: pb.GetBalanceAtRequest, context: Any) -> pb.GetBalanceAtResponse:
        domain.check_account_id(request.account_id)
        which = request.WhichOneof("as_of")
        if which is None:
            raise errors.InvalidArgument("AS_OF_REQUIRED", "give transaction_id or time")
        if which == "transaction_id":
            balance, version = await queries.balance_at(
                self.pool,
                request.account_id,
                transaction_id=convert.parse_transaction_id(request.transaction_id),
                at=None,
            )
        else:
            balance, version = await queries.balance_at(
                self.pool, request.account_id, transaction_id=None, at=convert.from_timestamp(request.time)
            )
        return pb.GetBalanceAtResponse(balance_gold=balance, account_version=version)

    async def VerifyJournal(self, request: pb.VerifyJournalRequest, context: Any) -> pb.VerifyJournalResponse:
        report = await verify.verify_journal(self.pool)
        return pb.VerifyJournalResponse(
            ok=report.ok,
            accounts_checked=report.accounts_checked,
            entries_checked=report.entries_checked,
            mismatches=[
                pb.Mismatch(
                    account_id=m.account_id,
                    stored_balance_gold=m.stored_balance_gold,
                    computed_balance_gold=m.computed_balance_gold,
                    detail=m.detail,
                )
                for m in report.mismatches
            ],
        )

    async def TrialBalance(self, request: pb.TrialBalanceRequest, context: Any) -> pb.TrialBalanceResponse:
        trial = await verify.trial_balance(self.pool)
        return pb.TrialBalanceResponse(
            total_gold=trial.total_gold,
            kinds=[pb.KindTotal(kind=k.kind, balance_gold=k.balance_gold, accounts=k.accounts) for k in trial.kinds],
        )

    async def ListTransactions(self, request: pb.ListTransactionsRequest, context: Any) -> pb.ListTransactionsResponse:
        limit = domain.check_page_size(request.page_size)
        since = convert.from_timestamp(request.since, "since") if request.HasField("since") else None
        until = convert.from_timestamp(request.until, "until") if request.HasField("until") else None
        if since is not None and until is not None and until <= since:
            raise errors.InvalidArgument("BAD_PERIOD", "until must be after since")
        filters = filters_of("journal", since, until)
        after = journal_export.decode_page_token(request.page_token, filters)
        found, more = await journal_export.list_transactions(
            self.pool, after_seq=after, limit=limit, since=since, until=until
        )
        response = pb.ListTransactionsResponse()
        times = convert.TimestampCache()
        for tx in found:
            convert.transaction(tx, response.transactions.add(), times)
        if more and found:
            response.next_page_token = journal_export.encode_page_token(found[-1].journal_seq, filters)
        if self.journal_signer is not None:
            # The page as sent, signed: an export that keeps it proves the page whole offline.
            response.seal.CopyFrom(
                self.journal_signer.seal(
                    response.transactions,
                    since=since,
                    until=until,
                    first=not request.page_token,
                    # A period's first page starts where the period does, not after 0.
                    after_seq=after if request.page_token or not found else found[0].journal_seq - 1,
                    more=bool(response.next_page_token),
                )
            )
        return response

    # --- holds ------------------------------------------------------------------------------

    async def Hold(self, request: pb.HoldRequest, context: Any) -> pb.HoldResponse:
        domain.check_holdable(request.account_id)
        domain.check_hand_id(request.hand_id)
        domain.check_positive_amount(request.amount_gold)
        result = await self.hold_writer.submit(
            domain.HoldCall(domain.HOLD, request.account_id, request.hand_id, request.amount_gold)
        )
        return pb.HoldResponse(hold=convert.hold(result.hold), free_gold=result.free_gold)

    async def FinalizeHold(self, request: pb.FinalizeHoldRequest, context: Any) -> pb.FinalizeHoldResponse:
        domain.check_holdable(request.account_id)
        domain.check_hand_id(request.hand_id)
        if request.amount_gold < 0:
            raise errors.InvalidArgument("NEGATIVE_AMOUNT", f"amount_gold must be >= 0, got {request.amount_gold}")
        result = await self.hold_writer.submit(
            domain.HoldCall(domain.FINALIZE, request.account_id, request.hand_id, request.amount_gold)
        )
        return pb.FinalizeHoldResponse(hold=convert.hold(result.hold), free_gold=result.free_gold)

    async def ReleaseHold(self, request: pb.ReleaseHoldRequest, context: Any) -> pb.ReleaseHoldResponse:
        domain.check_holdable(request.account_id)
        domain.check_hand_id(request.hand_id)
        reason = domain.check_release_reason(request.reason)
        result = await self.hold_writer.submit(
            domain.HoldCall(domain.RELEASE, request.account_id, request.hand_id, reason=reason)
        )
        return pb.ReleaseHoldResponse(hold=convert.hold(result.hold), free_gold=result.free_gold)

    async def ListHolds(self, request: pb.ListHoldsRequest, context: Any) -> pb.ListHoldsResponse:
        domain.check_account_id(request.account_id)
        limit = domain.check_page_size(request.page_size)
        filters = filters_of("holds", request.account_id, request.include_released)
        after = ""
        if request.page_token:
            after = queries.decode_bound_token(request.page_token, 1, filters)[0]
            try:
                domain.check_hand_id(after)
            except errors.InvalidArgument as exc:
                raise errors.InvalidArgument("BAD_PAGE_TOKEN", "page_token is not one this service issued") from exc
        found, more = await holds.list_holds(
            self.pool, request.account_id, include_released=request.include_released, after_hand=after, limit=limit
        )
        return pb.ListHoldsResponse(
            holds=[convert.hold(h) for h in found],
            next_page_token=queries.encode_bound_token(filters, found[-1].hand_id) if more and found else "",
        )
