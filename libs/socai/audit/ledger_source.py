"""Where the auditor reads the ledger: the live service, or a journal export.

``socai.audit.auditor.reconcile`` asks a ``LedgerSource`` three things — a hand's
settlement transaction (walking its key chain, ``socai.settle.keys``), an account's
balance, and whether the journal is sound (every balance after each entry follows from
the one before, every transaction sums to 0) — and does the same comparisons whichever
source answers. So ``socai audit`` against the services and ``socai audit --events …
--journal …`` against two exported files reach the same verdict by the same code.

- ``LiveLedger`` asks ``GetTransaction`` (``find_settlement``), ``GetAccount`` and
  ``VerifyJournal`` (the database's own recomputation).
- ``JournalLedger`` indexes an exported journal (``socai.audit.journal``): transactions
  by idempotency key, each account's last balance after, and recomputes the chain itself.

One difference cannot be helped: the journal holds applied transactions only, so a hand
whose keys the ledger refused (``INSUFFICIENT_FUNDS`` …) and which was never posted is a
``LEDGER_MISSING`` in both, but only the live ledger can name the refusals in its detail.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from socai import errors
from socai.gen.ledger.v1 import ledger_pb2
from socai.settle.keys import Found, find_settlement, settlement_keys

SETTLEMENT_KEY_PREFIX: Final = "settle:"
JOURNAL_CHECK_DEADLINE_S: Final = 300.0
BALANCE_DEADLINE_S: Final = 10.0
JOURNAL_PROBLEMS_MAX: Final = 1_000  # a broken journal is reported, not listed to the last entry


@dataclass(frozen=True, slots=True)
class JournalProblem:
    """Something in the journal that does not add up; ``hand_id`` when it is a hand's transaction."""

    detail: str
    hand_id: str = ""


def hand_of_key(key: str) -> str:
    """The hand a settlement key names (``settle:{hand}`` or ``settle:{hand}:retryN``), else ""."""
    if not key.startswith(SETTLEMENT_KEY_PREFIX):
        return ""
    return key.removeprefix(SETTLEMENT_KEY_PREFIX).split(":", 1)[0]


class LedgerSource(abc.ABC):
    """What the reconciliation needs from a ledger. ``name`` is how the report names it."""

    name: str

    @abc.abstractmethod
    async def find(self, hand_id: str) -> Found:
        """The hand's settlement transaction (``Found.transaction`` a ``ledger_pb2.Transaction``)."""

    @abc.abstractmethod
    async def balance(self, account_id: str) -> int:
        """The account's balance now; 0 for an account the ledger does not have."""

    @abc.abstractmethod
    async def journal_problems(self) -> list[JournalProblem]:
        """Every place the journal contradicts itself (empty when it is sound)."""

    def covers(self, at: datetime) -> bool:
        """Whether a hand that ended at ``at`` must have its transaction here: always for a
        whole journal; for an export of a period, when ``at`` is inside it (a hand that ended
        before the period was settled before it, one that ended after it is settled after)."""
        del at
        return True


class LiveLedger(LedgerSource):
    """The ledger service (``stub`` a LedgerServiceStub with the auditor's token).

    Every method raises Unavailable("LEDGER_UNAVAILABLE") when the ledger does not answer.
    """

    def __init__(self, stub: Any, name: str) -> None:
        self.stub = stub
        self.name = name

    async def find(self, hand_id: str) -> Found:
        return await find_settlement(self.stub, hand_id)

    async def balance(self, account_id: str) -> int:
        import grpc

        try:
            reply = await self.stub.GetAccount(
                ledger_pb2.GetAccountRequest(account_id=account_id), timeout=BALANCE_DEADLINE_S
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return 0
            raise _unavailable("GetAccount", exc) from exc
        return int(reply.account.balance_gold)

    async def journal_problems(self) -> list[JournalProblem]:
        import grpc

        try:
            reply = await self.stub.VerifyJournal(ledger_pb2.VerifyJournalRequest(), timeout=JOURNAL_CHECK_DEADLINE_S)
        except grpc.aio.AioRpcError as exc:
            raise _unavailable("VerifyJournal", exc) from exc
        return [JournalProblem(f"{m.account_id}: {m.detail}" if m.account_id else m.detail) for m in reply.mismatches]


def _unavailable(method: str, exc: Any) -> errors.Unavailable:
    return errors.Unavailable("LEDGER_UNAVAILABLE", f"ledger {method}: {exc.code().name}: {exc.details()}")


class JournalLedger(LedgerSource):
    """An exported journal, held in memory: the transactions in file order."""

    def __init__(
        self,
        transactions: Iterable[ledger_pb2.Transaction],
        name: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> None:
        self.name = name
        self.since, self.until = since, until  # the period the export covers (None: open)
        self.transactions = list(transactions)
        self._by_key: dict[str, ledger_pb2.Transaction] = {}
        self._balances: dict[str, int] = {}
        for tx in self.transactions:
            self._by_key[tx.idempotency_key] = tx
            for e in tx.entries:
                self._balances[e.account_id] = int(e.balance_after_gold)

    async def find(self, hand_id: str) -> Found:
        # At most one key of a hand's chain is ever applied (socai.settle.keys), so the
        # first one in the journal is the hand's transaction.
        for key in settlement_keys(hand_id):
            tx = self._by_key.get(key)
            if tx is not None:
                return Found(hand_id, key, tx)
        return Found(hand_id)

    async def balance(self, account_id: str) -> int:
        return self._balances.get(account_id, 0)

    async def journal_problems(self) -> list[JournalProblem]:
        return check_journal(self.transactions)[:JOURNAL_PROBLEMS_MAX]

    @property
    def whole(self) -> bool:
        """Whether the export is the whole journal: no period, and it starts at journal_seq 1."""
        starts = not self.transactions or self.transactions[0].journal_seq == 1
        return starts and self.since is None and self.until is None

    def covers(self, at: datetime) -> bool:
        since = self.since
        if since is None and not self.whole and self.transactions:
            since = self.transactions[0].created_at.ToDatetime(tzinfo=UTC)  # a period export, unsigned
        return (since is None or at >= since) and (self.until is None or at < self.until)


def check_journal(transactions: Iterable[ledger_pb2.Transaction]) -> list[JournalProblem]:
    """What ``VerifyJournal`` checks, on an export: journal_seq runs 1, 2, 3 … with no gap
    or repeat (a removed or duplicated transaction), each transaction has two or more
    entries summing to 0, each account's versions run 1, 2, 3 … and each balance after is
    the previous one plus the amount (an edited amount or balance).

    An export of a period (``socai ledger export --since``) starts later: journal_seq then
    runs on from the first transaction's, and each account's first entry in the file gives
    the version and balance before it (the entries before the period are not in the file)."""
    problems: list[JournalProblem] = []
    last: dict[str, tuple[int, int]] = {}  # account -> (version, balance after)
    expected_seq = 0
    for tx in transactions:
        if not expected_seq:
            expected_seq = tx.journal_seq if tx.journal_seq > 1 else 1
            from_start = expected_seq == 1
        key = tx.idempotency_key
        hand = hand_of_key(key)
        where = f"{key} (journal_seq {tx.journal_seq})"
        if tx.journal_seq != expected_seq:
            what = "repeats" if tx.journal_seq < expected_seq else f"follows {expected_seq - 1}: a gap"
            problems.append(JournalProblem(f"{where}: journal_seq {tx.journal_seq} {what}", hand))
        expected_seq = tx.journal_seq + 1
        total = sum(int(e.amount_gold) for e in tx.entries)
        if len(tx.entries) < 2 or total != 0:
            problems.append(JournalProblem(f"{where}: {len(tx.entries)} entries sum to {total:+d}", hand))
        for e in tx.entries:
            amount, stored = int(e.amount_gold), int(e.balance_after_gold)
            if from_start or e.account_id in last:
                version, after = last.get(e.account_id, (0, 0))
            else:
                version, after = int(e.account_version) - 1, stored - amount  # before the period
            if e.account_version != version + 1:
                problems.append(
                    JournalProblem(
                        f"{where}: {e.account_id} version {e.account_version} follows version {version}", hand
                    )
                )
            if stored != after + amount:
                problems.append(
                    JournalProblem(
                        f"{where}: {e.account_id} balance after {stored:,}, but {after:,} {amount:+,} = "
                        f"{after + amount:,}",
                        hand,
                    )
                )
            last[e.account_id] = (int(e.account_version), stored)
    return problems
