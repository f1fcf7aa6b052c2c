"""The ledger's domain: value types, limits, request validation and the batch planner.

Pure: no I/O, no clock, no randomness (ids and the time come in as arguments), no protobuf.
``plan_batch`` is the functional core of the write path: given the requests of one batch,
what the journal already knows about their idempotency keys and the locked accounts, it
decides every request's outcome and returns the rows to write. ``socai_ledger.journal_write``
runs it inside one database transaction; tests can run it on plain dictionaries.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, NamedTuple
from uuid import UUID

from socai import accounts, errors
from socai.money import INT64_MAX

INT64_MIN: Final = -INT64_MAX - 1

# A limit on everything (STYLE.md habit 8).
IDEMPOTENCY_KEY_MAX_CHARS: Final = 200
REFERENCE_MAX_CHARS: Final = 200
KIND_MAX_CHARS: Final = 64
METADATA_MAX_PAIRS: Final = 32
METADATA_KEY_MAX_CHARS: Final = 64
METADATA_VALUE_MAX_CHARS: Final = 1024
ENTRIES_MIN: Final = 2
ENTRIES_MAX: Final = 256
BATCH_MAX: Final = 1000  # PostTransactions items per call, and transactions per database transaction
PAGE_SIZE_DEFAULT: Final = 100
PAGE_SIZE_MAX: Final = 1000
FENCE_SCOPE_MAX_CHARS: Final = 64
# Partitions of the event log: socai.infra.partitions.PARTITIONS_MAX (a test pins it; this
# module imports no infrastructure).
FENCE_PARTITIONS: Final = 1024
# The callers that post under a lease, each in scopes of its own name ("settlement",
# "settlement-…"): settlement's partition workers, and the table service's buy-ins (a table
# partition's holder, so a buy-in a paused former holder sends late is refused once the new
# holder has claimed the partition).
FENCED_CALLERS: Final = frozenset({"settlement", "table"})

# Kinds a posting may open on the fly (``open_accounts``). house:fees, house:bank and
# external:cashier exist from the first migration; nothing else of their kinds is valid.
OPENABLE_KINDS: Final = frozenset({"player", "escrow", "pot", "guild"})
# Money enters and leaves the system only through these accounts, and only the cashier or an
# operator may post to them (socai_ledger.server enforces it).
EXTERNAL_KIND: Final = "external"

_sha256 = hashlib.sha256
_KIND = re.compile(r"[a-z][a-z0-9_.\-]{0,63}")
_METADATA_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

# Refusals decided against the journal's state. They are remembered under their idempotency
# key, so a retry gets the same answer (a retry can never turn a failure into a success).
# Malformed requests (INVALID_ARGUMENT) are not remembered: nothing is written for them, and
# the same bytes are refused the same way every time anyway.
REMEMBERED_REFUSALS: Final[Mapping[str, type[errors.SocaiError]]] = {
    "INSUFFICIENT_FUNDS": errors.InsufficientFunds,
    "BALANCE_OVERFLOW": errors.PreconditionFailed,
    "ACCOUNT_NOT_FOUND": errors.NotFound,
}


class PostStatus(enum.Enum):
    APPLIED = 1  # applied by this request
    REPLAYED = 2  # applied earlier under the same key with the same request
    REJECTED = 3  # refused; ``PostOutcome.error`` says why


# The value types of the write path are NamedTuples: immutable like frozen dataclasses but
# about three times cheaper to build (a tuple, no object.__setattr__ per field). A batch of
# 1,000 transactions makes ~10,000 of them; frozen dataclasses were a visible share of the
# ledger's CPU.


class EntryInput(NamedTuple):
    account_id: str
    amount_gold: int  # signed: positive credits the account, negative debits it


class TransactionInput(NamedTuple):
    """A transaction as a caller asked for it, before validation."""

    idempotency_key: str
    kind: str
    reference: str
    entries: Sequence[EntryInput]
    metadata: Mapping[str, str]
    open_accounts: bool = False


class PreparedTransaction(NamedTuple):
    """A validated request with its canonical hash: what the write path works on."""

    idempotency_key: str
    kind: str
    reference: str
    entries: tuple[EntryInput, ...]
    metadata: Mapping[str, str]
    open_accounts: bool
    request_hash: bytes


class Fence(NamedTuple):
    """A lease holder's fencing token on one partition (``socai.infra.fence``): a request
    carrying it is written only if ``token`` is at least the newest recorded for
    (``scope``, ``partition``), in the same database transaction as its writes."""

    scope: str
    partition: int
    token: int


class Entry(NamedTuple):
    transaction_id: str
    account_id: str
    amount_gold: int
    balance_after_gold: int
    account_version: int
    created_at: datetime
    journal_seq: int


class Transaction(NamedTuple):
    transaction_id: str
    idempotency_key: str
    kind: str
    reference: str
    entries: tuple[Entry, ...]
    metadata: Mapping[str, str]
    created_at: datetime
    journal_seq: int


@dataclass(frozen=True, slots=True)
class Account:
    account_id: str
    kind: str
    balance_gold: int
    version: int
    may_go_negative: bool
    created_at: datetime
    held_gold: int = 0  # held for hands in play (ledger_0005)


class PostOutcome(NamedTuple):
    status: PostStatus
    transaction: Transaction | None = None
    error: errors.SocaiError | None = None


@dataclass(frozen=True, slots=True)
class Mismatch:
    account_id: str
    stored_balance_gold: int
    computed_balance_gold: int
    detail: str


@dataclass(frozen=True, slots=True)
class VerifyReport:
    accounts_checked: int
    entries_checked: int
    mismatches: tuple[Mismatch, ...]

    @property
    def ok(self) -> bool:
        return not self.mismatches


@dataclass(frozen=True, slots=True)
class KindTotal:
    kind: str
    balance_gold: int
    accounts: int


@dataclass(frozen=True, slots=True)
class TrialBalance:
    total_gold: int
    kinds: tuple[KindTotal, ...]


# --- validation (the edge: shape only, nothing looked up) -----------------------------------


def check_idempotency_key(key: str) -> None:
    """Raises InvalidArgument("IDEMPOTENCY_KEY_REQUIRED" / "BAD_IDEMPOTENCY_KEY")."""
    if not key:
        raise errors.InvalidArgument("IDEMPOTENCY_KEY_REQUIRED", "an idempotency_key is required")
    if len(key) > IDEMPOTENCY_KEY_MAX_CHARS:
        raise errors.InvalidArgument(
            "BAD_IDEMPOTENCY_KEY",
            f"idempotency_key has {len(key)} characters; at most {IDEMPOTENCY_KEY_MAX_CHARS}",
        )
    if not key.isprintable():
        raise errors.InvalidArgument("BAD_IDEMPOTENCY_KEY", "idempotency_key must be printable characters")


_KINDS_SEEN: dict[str, str] = {}
_KINDS_SEEN_MAX: Final = 100_000


def check_account_id(account_id: str) -> str:
    """The account's kind. Raises InvalidArgument("BAD_ACCOUNT_ID").

    Valid ids are remembered (a bounded dict, emptied when full): the same few thousand
    accounts appear in every batch, and the regular expression is then paid once per id.
    """
    kind = _KINDS_SEEN.get(account_id)
    if kind is None:
        kind = accounts.kind_of(account_id)
        if len(_KINDS_SEEN) >= _KINDS_SEEN_MAX:
            _KINDS_SEEN.clear()
        _KINDS_SEEN[account_id] = kind
    return kind


def check_positive_amount(amount_gold: int, what: str = "amount_gold") -> None:
    """Deposits, withdrawals and transfers move a positive amount."""
    if type(amount_gold) is not int:
        raise errors.InvalidArgument("BAD_AMOUNT", f"{what} must be an integer")
    if amount_gold == 0:
        raise errors.InvalidArgument("ZERO_AMOUNT", f"{what} must not be 0")
    if amount_gold < 0:
        raise errors.InvalidArgument("NEGATIVE_AMOUNT", f"{what} must be positive, got {amount_gold}")
    if amount_gold > INT64_MAX:
        raise errors.InvalidArgument("AMOUNT_OUT_OF_RANGE", f"{what} {amount_gold} does not fit int64")


def check_reference(reference: str) -> None:
    if len(reference) > REFERENCE_MAX_CHARS or not reference.isprintable():
        raise errors.InvalidArgument(
            "BAD_REFERENCE", f"reference must be at most {REFERENCE_MAX_CHARS} printable characters"
        )


def prepare(raw: TransactionInput) -> PreparedTransaction:
    """Validate the shape of a transaction and compute its request hash.

    Raises InvalidArgument with a reason: IDEMPOTENCY_KEY_REQUIRED, BAD_IDEMPOTENCY_KEY,
    BAD_KIND, BAD_REFERENCE, BAD_METADATA, TOO_FEW_ENTRIES, TOO_MANY_ENTRIES,
    BAD_ACCOUNT_ID, DUPLICATE_ACCOUNT, ZERO_AMOUNT, AMOUNT_OUT_OF_RANGE,
    UNBALANCED_TRANSACTION. Nothing is looked up: an unknown account is found later.
    """
    return prepare_fields(*raw)


def prepare_fields(
    idempotency_key: str,
    kind: str,
    reference: str,
    entries_in: Iterable[EntryInput],
    metadata_in: Mapping[str, str],
    open_accounts: bool = False,
) -> PreparedTransaction:
    """``prepare`` on the fields of a ``TransactionInput`` (the gRPC edge calls it directly:
    this runs for every posting, and the intermediate tuple is a measurable share)."""
    check_idempotency_key(idempotency_key)
    if kind not in _KINDS_VALID:  # the same few kinds every time: the regex once per kind
        if not _KIND.fullmatch(kind):
            raise errors.InvalidArgument(
                "BAD_KIND",
                f"kind must be 1-{KIND_MAX_CHARS} of a-z 0-9 _ . - starting with a letter, got {errors.shown(kind)}",
            )
        if len(_KINDS_VALID) >= _KINDS_VALID_MAX:
            _KINDS_VALID.clear()
        _KINDS_VALID.add(kind)
    if reference and (len(reference) > REFERENCE_MAX_CHARS or not reference.isprintable()):
        check_reference(reference)
    metadata: dict[str, str] = dict(metadata_in) if metadata_in else {}
    if metadata:
        _check_metadata(metadata)
    entries = tuple(entries_in)
    if len(entries) < ENTRIES_MIN:
        raise errors.InvalidArgument(
            "TOO_FEW_ENTRIES", f"a transaction has at least {ENTRIES_MIN} entries, got {len(entries)}"
        )
    if len(entries) > ENTRIES_MAX:
        raise errors.InvalidArgument("TOO_MANY_ENTRIES", f"a transaction has at most {ENTRIES_MAX} entries")
    seen: set[str] = set()
    total = 0
    credits = 0
    known_ids = _KINDS_SEEN
    for account_id, amount in entries:
        if account_id not in known_ids:
            check_account_id(account_id)
        if account_id in seen:
            raise errors.InvalidArgument(
                "DUPLICATE_ACCOUNT", f"account {account_id} appears twice; merge its entries into one"
            )
        seen.add(account_id)
        if type(amount) is not int:
            raise errors.InvalidArgument("BAD_AMOUNT", f"amount of {account_id} must be an integer")
        if amount == 0:
            raise errors.InvalidArgument("ZERO_AMOUNT", f"entry on {account_id} has amount 0")
        # INT64_MIN is refused too: its negation does not fit int64.
        if not -INT64_MAX <= amount <= INT64_MAX:
            raise errors.InvalidArgument("AMOUNT_OUT_OF_RANGE", f"amount {amount} of {account_id} out of range")
        total += amount
        if amount > 0:
            credits += amount
    if total != 0:
        raise errors.InvalidArgument("UNBALANCED_TRANSACTION", f"entries sum to {total}, not 0")
    if credits > INT64_MAX:
        raise errors.InvalidArgument("AMOUNT_OUT_OF_RANGE", f"the transaction moves {credits}, more than int64 holds")
    # tuple.__new__ rather than the NamedTuple's constructor (a Python function): this runs
    # for every posting.
    return tuple.__new__(
        PreparedTransaction,
        (
            idempotency_key,
            kind,
            reference,
            entries,
            metadata,
            open_accounts,
            request_hash(kind, reference, entries, metadata, open_accounts),
        ),
    )


_KINDS_VALID: set[str] = set()
_KINDS_VALID_MAX: Final = 1_000


def _check_metadata(metadata: Mapping[str, str]) -> None:
    if len(metadata) > METADATA_MAX_PAIRS:
        raise errors.InvalidArgument("BAD_METADATA", f"at most {METADATA_MAX_PAIRS} metadata pairs")
    for key, value in metadata.items():
        if not _METADATA_KEY.fullmatch(key):
            raise errors.InvalidArgument(
                "BAD_METADATA", f"metadata key {errors.shown(key)} must be 1-64 of A-Z a-z 0-9 _ . -"
            )
        if len(value) > METADATA_VALUE_MAX_CHARS or not value.isprintable():
            raise errors.InvalidArgument(
                "BAD_METADATA", f"metadata {key}: at most {METADATA_VALUE_MAX_CHARS} printable characters"
            )


def request_hash(
    kind: str, reference: str, entries: Iterable[EntryInput], metadata: Mapping[str, str], open_accounts: bool
) -> bytes:
    """sha256 of a canonical encoding: entries sorted by account, metadata by key.

    Validated text holds no control characters, so NUL and US (0x1f) separate fields
    unambiguously. The idempotency key is not part of it: the hash is only ever compared
    between requests under the same key. Changing this encoding breaks idempotency for
    requests made before the change; keep the ``v1`` tag and add a ``v2`` instead.
    """
    parts = ["v1", kind, reference, "1" if open_accounts else "0"]
    parts += sorted([f"{account_id}\x1f{amount}" for account_id, amount in entries])
    parts.append("\x1e")
    if metadata:
        parts += sorted([f"{k}\x1f{v}" for k, v in metadata.items()])
    return _sha256("\x00".join(parts).encode()).digest()


def check_fence(scope: str, partition: int, token: int) -> Fence:
    """Validate a fence's shape. Raises InvalidArgument with a reason: BAD_FENCE_SCOPE (not
    1-64 printable characters), BAD_FENCE_PARTITION (outside 0..1023), BAD_FENCE_TOKEN (not
    positive)."""
    if not 0 < len(scope) <= FENCE_SCOPE_MAX_CHARS or not scope.isprintable():
        raise errors.InvalidArgument(
            "BAD_FENCE_SCOPE", f"fence.scope must be 1-{FENCE_SCOPE_MAX_CHARS} printable characters"
        )
    if not 0 <= partition < FENCE_PARTITIONS:
        raise errors.InvalidArgument(
            "BAD_FENCE_PARTITION", f"fence.partition must be 0-{FENCE_PARTITIONS - 1}, not {partition}"
        )
    if token <= 0:
        raise errors.InvalidArgument("BAD_FENCE_TOKEN", f"fence.token must be positive, not {token}")
    return Fence(scope, partition, token)


def authorize_fence(caller: str, scope: str) -> None:
    """A caller posts under a lease only in its own scopes (``scope`` is its name or starts
    with it and a dash). Raises PermissionDenied("FENCE_NOT_ALLOWED") otherwise: a fence
    another caller sent would advance a partition's token and refuse the real holder's
    postings."""
    if caller not in FENCED_CALLERS or not (scope == caller or scope.startswith(f"{caller}-")):
        raise errors.PermissionDenied(
            "FENCE_NOT_ALLOWED",
            f"only {', '.join(sorted(FENCED_CALLERS))} may send a fence, each in scopes of its own name; "
            f"not {errors.shown(caller)} in {errors.shown(scope)}",
        )


def check_page_size(page_size: int) -> int:
    """0 → the default; negative or above the maximum → InvalidArgument("BAD_PAGE_SIZE")."""
    if page_size == 0:
        return PAGE_SIZE_DEFAULT
    if not 0 < page_size <= PAGE_SIZE_MAX:
        raise errors.InvalidArgument(
            "BAD_PAGE_SIZE", f"page_size must be 1-{PAGE_SIZE_MAX} (0 for {PAGE_SIZE_DEFAULT})"
        )
    return page_size


def refusal(reason: str, message: str, *, remembered: bool = False) -> errors.SocaiError:
    """The error of a remembered refusal, flagged when it comes back from the journal."""
    cls = REMEMBERED_REFUSALS.get(reason, errors.PreconditionFailed)
    return cls(reason, message, remembered="true") if remembered else cls(reason, message)


# --- the batch planner (the functional core of the write path) -----------------------------


class KnownKey(NamedTuple):
    """What the journal holds under an idempotency key."""

    request_hash: bytes
    transaction: Transaction | None  # applied
    error_reason: str | None = None  # rejected
    error_message: str | None = None


class LockedAccounts:
    """The batch's account rows, locked by the caller: balances and versions run as the
    batch goes. Dictionaries rather than an object per row: a batch of 1,000 transactions
    locks ~2,000 accounts, and the planner does a few dictionary operations per entry.
    """

    __slots__ = ("balance_gold", "held_gold", "holds", "kind", "may_go_negative", "opened", "touched", "version")

    def __init__(self, rows: Iterable[tuple[str, int, int, bool, str]] = ()) -> None:
        self.balance_gold: dict[str, int] = {}
        self.version: dict[str, int] = {}
        self.kind: dict[str, str] = {}
        self.may_go_negative: set[str] = set()
        self.opened: set[str] = set()  # opened by this batch (to insert rather than update)
        self.touched: set[str] = set()  # changed by an applied item
        # Only the accounts that hold gold for hands in play (``house:bank`` while a game
        # against the house is in play): the gold each holds, which its balance must cover,
        # and their holds by hand (what a hand's settlement releases). Empty for nearly every
        # batch, which then plans exactly as if holds did not exist.
        self.held_gold: dict[str, int] = {}
        self.holds: dict[str, list[tuple[str, int]]] = {}  # hand id -> [(account, gold held)]
        for account_id, balance, version, may_go_negative, kind in rows:
            self.add(account_id, balance, version, may_go_negative, kind)

    def hold(self, hand_id: str, account_id: str, amount_gold: int) -> None:
        """Record a hold not released of a locked account (part of its ``held_gold``)."""
        self.holds.setdefault(hand_id, []).append((account_id, amount_gold))

    def add(self, account_id: str, balance: int, version: int, may_go_negative: bool, kind: str) -> None:
        self.balance_gold[account_id] = balance
        self.version[account_id] = version
        self.kind[account_id] = kind
        if may_go_negative:
            self.may_go_negative.add(account_id)

    def remove(self, account_id: str) -> None:
        del self.balance_gold[account_id], self.version[account_id], self.kind[account_id]
        self.may_go_negative.discard(account_id)
        self.opened.discard(account_id)

    def __contains__(self, account_id: object) -> bool:
        return account_id in self.balance_gold


# Rows in the column order of the COPY statements of socai_ledger.journal_write
# (socai_ledger.journal_copy.TRANSACTION_COLUMNS and ENTRY_COLUMNS).
# transactions: transaction_id, idempotency_key, request_hash, status, journal_seq, kind,
#               reference, metadata, error_reason, error_message
TransactionRow = tuple[UUID, str, bytes, str, int | None, str, str, Mapping[str, str], str | None, str | None]
# entries: account_id, account_version, journal_seq, entry_index, transaction_id, amount_gold,
#          balance_after_gold
EntryRow = tuple[str, int, int, int, UUID, int, int]


# A hold an applied settlement releases: account, hand id, the settlement's transaction id.
ReleasedHold = tuple[str, str, UUID]


@dataclass
class BatchPlan:
    outcomes: list[PostOutcome]
    transaction_rows: list[TransactionRow] = field(default_factory=list)
    entry_rows: list[EntryRow] = field(default_factory=list)
    released_holds: list[ReleasedHold] = field(default_factory=list)
    applied: int = 0
    first_seq: int = 0
    last_seq: int = 0


def plan_batch(
    items: Sequence[PreparedTransaction],
    known: Mapping[str, KnownKey],
    locked: LockedAccounts,
    head_seq: int,
    now: datetime,
    ids: Iterator[UUID],
) -> BatchPlan:
    """Decide every item of a batch in order, each atomic on its own.

    ``locked`` holds the batch's existing accounts (locked by the caller); missing ones are
    opened in it when an item asks for it and is applied. Balances and versions in
    ``locked`` run as items apply, so each item is checked against the effect of the items
    before it; a refused item leaves them untouched. Applied items get consecutive journal
    sequence numbers after ``head_seq``; every item written takes the next of ``ids``. The
    plan holds an outcome per item and the rows to write; nothing is written here.

    Holds: an account that holds gold for hands in play may not fall below what it holds
    (``held_gold``), except that a hand's settlement (``settle:{hand_id}``, or a retry key
    of it) releases that hand's holds in the same transaction, so it may spend them. A
    batch that locks no held account (nearly all) never looks at holds.
    """
    plan = BatchPlan(outcomes=[])
    outcomes = plan.outcomes
    transaction_rows = plan.transaction_rows
    entry_rows = plan.entry_rows
    balances = locked.balance_gold
    versions = locked.version
    touched = locked.touched
    decided: dict[str, KnownKey] = {}
    held = locked.held_gold
    released: list[tuple[str, int]] | None = None
    seq = head_seq
    # The value types are built with tuple.__new__: a NamedTuple's own constructor is a
    # Python function, and this loop builds six of them per transaction (measured: 0.25 ->
    # 0.11 µs each; the plan of 1,000 transactions is on the writer's critical path).
    new = tuple.__new__
    for item in items:
        key = item.idempotency_key
        previous = decided.get(key) or known.get(key)
        if previous is not None:
            outcomes.append(_answer_again(item, previous))
            continue
        if held:
            # The batch locked an account holding gold: no account may fall below what it
            # holds. Checked as below against every gold held; an item that does not pass goes
            # through _refusal_of, which sets aside the holds a settlement releases (its own
            # hand's) and may then accept it.
            released = _holds_released_by(key, locked)
            for account_id, amount in item.entries:
                balance = balances.get(account_id)
                if balance is None or not held.get(account_id, 0) <= balance + amount <= INT64_MAX:
                    refused = _refusal_of(item, locked, released)
                    break
            else:
                refused = None
        else:
            # Nearly every item finds its accounts and keeps them within 0..INT64_MAX: that
            # is checked here, and only an item that does not goes through _refusal_of (which
            # may still accept it: an account to open, a negative balance allowed).
            released = None
            for account_id, amount in item.entries:
                balance = balances.get(account_id)
                if balance is None or not 0 <= balance + amount <= INT64_MAX:
                    refused = _refusal_of(item, locked)
                    break
            else:
                refused = None
        if refused is not None:
            reason, message = refused
            transaction_rows.append(
                (
                    next(ids),
                    key,
                    item.request_hash,
                    "rejected",
                    None,
                    item.kind,
                    item.reference,
                    item.metadata,
                    reason,
                    message,
                )
            )
            decided[key] = KnownKey(item.request_hash, None, reason, message)
            outcomes.append(PostOutcome(PostStatus.REJECTED, None, refusal(reason, message)))
            continue
        seq += 1
        tx_uuid = next(ids)
        tx_id = str(tx_uuid)
        entries = []
        for index, (account_id, amount) in enumerate(item.entries):
            balance = balances[account_id] = balances[account_id] + amount
            version = versions[account_id] = versions[account_id] + 1
            touched.add(account_id)
            entries.append(new(Entry, (tx_id, account_id, amount, balance, version, now, seq)))
            entry_rows.append((account_id, version, seq, index, tx_uuid, amount, balance))
        if released:
            _release(locked, key, released, tx_uuid, plan.released_holds)
        transaction = new(Transaction, (tx_id, key, item.kind, item.reference, tuple(entries), item.metadata, now, seq))
        transaction_rows.append(
            (tx_uuid, key, item.request_hash, "applied", seq, item.kind, item.reference, item.metadata, None, None)
        )
        decided[key] = new(KnownKey, (item.request_hash, transaction, None, None))
        outcomes.append(new(PostOutcome, (PostStatus.APPLIED, transaction, None)))
    plan.applied = seq - head_seq
    if plan.applied:
        plan.first_seq, plan.last_seq = head_seq + 1, seq
    errors.check(len(outcomes) == len(items), "one outcome per item")
    return plan


def _answer_again(item: PreparedTransaction, previous: KnownKey) -> PostOutcome:
    if previous.request_hash != item.request_hash:
        return PostOutcome(
            PostStatus.REJECTED,
            None,
            errors.PreconditionFailed(
                "IDEMPOTENCY_KEY_REUSED",
                f"idempotency key {item.idempotency_key!r} was used for a different request",
            ),
        )
    if previous.transaction is not None:
        return PostOutcome(PostStatus.REPLAYED, previous.transaction)
    reason = previous.error_reason or "FAILED_PRECONDITION"
    return PostOutcome(PostStatus.REJECTED, None, refusal(reason, previous.error_message or reason, remembered=True))


def _holds_released_by(key: str, locked: LockedAccounts) -> list[tuple[str, int]] | None:
    """The holds (account, gold) an item under ``key`` releases when it applies: those of
    its hand when it is a settlement (``settle:{hand_id}`` or ``settle:{hand_id}:retryN``;
    the key is reserved to settlement by ``authorize``), else None."""
    if not key.startswith(SETTLEMENT_KEY_PREFIX):
        return None
    return locked.holds.get(key[len(SETTLEMENT_KEY_PREFIX) :].partition(":")[0])


def _release(
    locked: LockedAccounts, key: str, released: list[tuple[str, int]], tx_uuid: UUID, out: list[ReleasedHold]
) -> None:
    """An applied settlement releases its hand's holds: the gold they held is free again."""
    hand_id = key[len(SETTLEMENT_KEY_PREFIX) :].partition(":")[0]
    del locked.holds[hand_id]
    held = locked.held_gold
    for account_id, amount in released:
        held[account_id] = max(0, held.get(account_id, 0) - amount)
        out.append((account_id, hand_id, tx_uuid))


def _refusal_of(
    item: PreparedTransaction, locked: LockedAccounts, released: list[tuple[str, int]] | None = None
) -> tuple[str, str] | None:
    """Why ``item`` cannot apply on top of ``locked`` (reason, message), or None.

    An account may not fall below the gold it holds for hands in play, less the holds
    ``released`` (the item's own hand's, when it is that hand's settlement). Opens missing
    accounts in ``locked`` when the item asks for it; an account opened for an item that is
    then refused is removed again, so a refusal leaves no trace.
    """
    balances = locked.balance_gold
    held = locked.held_gold
    opened: list[str] = []
    problem: tuple[str, str] | None = None
    for account_id, amount in item.entries:
        balance = balances.get(account_id)
        if balance is None:
            kind = check_account_id(account_id)
            if not (item.open_accounts and kind in OPENABLE_KINDS):
                hint = "" if kind not in OPENABLE_KINDS else " (set open_accounts to open it)"
                problem = ("ACCOUNT_NOT_FOUND", f"account {account_id} does not exist{hint}")
                break
            locked.add(account_id, 0, 0, accounts.may_go_negative(account_id), kind)
            locked.opened.add(account_id)
            opened.append(account_id)
            balance = 0
        after = balance + amount
        floor = held.get(account_id, 0) if held else 0
        if floor and released:
            floor -= sum(gold for held_account, gold in released if held_account == account_id)
        if after < floor and account_id not in locked.may_go_negative:
            if floor:
                problem = (
                    "INSUFFICIENT_FUNDS",
                    f"{account_id} holds {balance}, of which {floor} is held for hands in play, cannot pay {-amount}",
                )
            else:
                problem = ("INSUFFICIENT_FUNDS", f"{account_id} holds {balance}, cannot pay {-amount}")
            break
        if not INT64_MIN <= after <= INT64_MAX:
            problem = ("BALANCE_OVERFLOW", f"{account_id} would hold {after}, outside int64")
            break
    if problem is not None:
        for account_id in opened:
            locked.remove(account_id)
    return problem


# --- holds: gold set aside for a hand in play ------------------------------------------------
#
# A game against the house pays from house:bank. Before the table accepts a bet it holds the
# hand's worst case there (the rules engine's ``house_exposure``); the bank's balance may then
# not fall below the sum of its holds (the planner above, and the database's own CHECK). When
# the hand's outcome is known the table finalizes the hold to what the settlement will debit
# (0 releases it), and the settlement's own database transaction releases what is left. An
# operator releases the hold of a hand that will never settle.

HOLDABLE_ACCOUNTS: Final = frozenset({accounts.HOUSE_BANK})
HOLD_OPEN: Final = "open"
HOLD_FINAL: Final = "final"
HOLD_RELEASED: Final = "released"
RELEASED_BY_SETTLEMENT: Final = "settlement"
RELEASED_BY_OUTCOME: Final = "outcome"
RELEASED_BY_OPERATOR: Final = "operator"
RELEASE_REASON_MAX_CHARS: Final = 200
# A hand id: {table_id}-h{n}, the table id an account id part (as in settlement keys).
_HAND_ID = re.compile(r"([A-Za-z0-9_.\-@]{1,64})-h[0-9]{1,19}")


@dataclass(frozen=True, slots=True)
class Hold:
    account_id: str
    hand_id: str
    amount_gold: int  # what is held (a released hold keeps what it held until released)
    status: str  # HOLD_OPEN, HOLD_FINAL or HOLD_RELEASED
    created_at: datetime
    updated_at: datetime
    released_at: datetime | None = None
    released_by: str = ""  # RELEASED_BY_*
    release_transaction_id: str = ""  # the settlement's, when it released the hold
    release_reason: str = ""  # the operator's


class HoldChange(NamedTuple):
    """What a hold call does: the hold's amount and status after it, and by how much the
    account's ``held_gold`` moves (0: nothing to write)."""

    amount_gold: int
    status: str
    held_delta: int


def check_hand_id(hand_id: str) -> str:
    """The table of a hand id ``{table_id}-h{n}``. Raises InvalidArgument("BAD_HAND_ID")."""
    match = _HAND_ID.fullmatch(hand_id) if isinstance(hand_id, str) else None
    if match is None:
        raise errors.InvalidArgument("BAD_HAND_ID", f"hand_id must be {{table_id}}-h{{n}}, not {errors.shown(hand_id)}")
    return match.group(1)


def check_holdable(account_id: str) -> None:
    """Only the house's bank is held for hands. Raises InvalidArgument("BAD_ACCOUNT_ID") for
    a malformed id, PermissionDenied("ACCOUNT_NOT_ALLOWED") for any other account: a player
    or p2p banker's chips are bounded by the rules engine against their stack instead."""
    check_account_id(account_id)
    if account_id not in HOLDABLE_ACCOUNTS:
        raise errors.PermissionDenied(
            "ACCOUNT_NOT_ALLOWED", f"only {', '.join(sorted(HOLDABLE_ACCOUNTS))} is held for hands, not {account_id}"
        )


def check_release_reason(reason: str) -> str:
    """An operator's release says why. Raises InvalidArgument("BAD_REASON")."""
    text = reason.strip()
    if not text or len(text) > RELEASE_REASON_MAX_CHARS or not text.isprintable():
        raise errors.InvalidArgument(
            "BAD_REASON",
            f"reason must be 1-{RELEASE_REASON_MAX_CHARS} printable characters (why the hand never settles)",
        )
    return text


def raise_hold(
    current: Hold | None, account_id: str, balance_gold: int, held_gold: int, amount_gold: int
) -> HoldChange:
    """Raise a hand's hold to at least ``amount_gold`` (the hand's worst case now).

    Idempotent: a hold already at or above ``amount_gold`` stays as it is (a retry, or a
    table rebuilt mid-hand asking again for what it held). Raises PreconditionFailed:
    BANKER_CAPACITY when the account's free gold (balance − held) cannot cover the increase
    (ErrorInfo metadata: account_id, free_gold, needed_gold, held_gold, balance_gold);
    HOLD_RELEASED when the hand's hold was released (its hand settled); HOLD_FINAL when the
    hand's outcome fixed the hold below ``amount_gold``.
    """
    if current is not None and current.status == HOLD_RELEASED:
        raise errors.PreconditionFailed(
            "HOLD_RELEASED",
            f"the hold of {current.hand_id} was released ({current.released_by})",
            hand_id=current.hand_id,
        )
    existing = current.amount_gold if current is not None else 0
    if amount_gold <= existing:
        return HoldChange(existing, current.status if current is not None else HOLD_OPEN, 0)
    if current is not None and current.status == HOLD_FINAL:
        raise errors.PreconditionFailed(
            "HOLD_FINAL",
            f"the hold of {current.hand_id} is final at {existing}: the hand's outcome is known",
            hand_id=current.hand_id,
        )
    needed = amount_gold - existing
    free = balance_gold - held_gold
    if needed > free:
        raise errors.PreconditionFailed(
            "BANKER_CAPACITY",
            f"{account_id} cannot cover {needed} more: {free} of its {balance_gold} is free ({held_gold} held)",
            account_id=account_id,
            free_gold=free,
            needed_gold=needed,
            held_gold=held_gold,
            balance_gold=balance_gold,
        )
    return HoldChange(amount_gold, HOLD_OPEN, needed)


def finalize_hold(current: Hold | None, hand_id: str, amount_gold: int) -> HoldChange:
    """The hand's outcome is known: its hold becomes what its settlement will debit the
    account, at most what it holds, and grows no more; 0 releases it (released by the
    outcome). Idempotent; a released hold stays released (the settlement may have released
    it first). Raises NotFound("HOLD_NOT_FOUND") when the hand holds nothing here."""
    if current is None:
        raise errors.NotFound("HOLD_NOT_FOUND", f"{hand_id} holds nothing", hand_id=hand_id)
    if current.status == HOLD_RELEASED:
        return HoldChange(current.amount_gold, HOLD_RELEASED, 0)
    final = min(current.amount_gold, amount_gold)
    if final == 0:
        return HoldChange(current.amount_gold, HOLD_RELEASED, -current.amount_gold)
    return HoldChange(final, HOLD_FINAL, final - current.amount_gold)


def release_hold(current: Hold | None, hand_id: str) -> HoldChange:
    """An operator releases the hold of a hand that will never settle. Idempotent. Raises
    NotFound("HOLD_NOT_FOUND")."""
    if current is None:
        raise errors.NotFound("HOLD_NOT_FOUND", f"{hand_id} holds nothing", hand_id=hand_id)
    if current.status == HOLD_RELEASED:
        return HoldChange(current.amount_gold, HOLD_RELEASED, 0)
    return HoldChange(current.amount_gold, HOLD_RELEASED, -current.amount_gold)


HOLD: Final = "hold"
FINALIZE: Final = "finalize"
RELEASE: Final = "release"


class HoldCall(NamedTuple):
    """One call of the hold writer: Hold, FinalizeHold or ReleaseHold."""

    kind: str  # HOLD, FINALIZE or RELEASE
    account_id: str
    hand_id: str
    amount_gold: int = 0
    reason: str = ""  # an operator's release


class HoldAnswer(NamedTuple):
    """A call's outcome: the hold after it and its account's balance and held gold, or the
    error that refused it (nothing of it written)."""

    hold: Hold | None
    balance_gold: int = 0
    held_gold: int = 0
    error: errors.SocaiError | None = None


@dataclass
class HoldsPlan:
    answers: list[HoldAnswer]
    inserts: list[Hold] = field(default_factory=list)  # holds new to the table (final state)
    updates: list[Hold] = field(default_factory=list)  # holds that changed (final state)


def plan_holds(
    calls: Sequence[HoldCall],
    accounts_found: Mapping[str, tuple[int, int]],
    existing: Mapping[tuple[str, str], Hold],
    now: datetime,
) -> HoldsPlan:
    """Decide a batch of hold calls in order, each against what the calls before it left.

    ``accounts_found``: the locked accounts' (balance, held gold); ``existing``: the calls'
    holds as the table has them, by (account, hand). At most one call per (account, hand):
    the writer keeps a second one for its next batch, so each hold changes in one step (the
    database's guard checks each step). Returns an answer per call and the rows to write.
    """
    figures = dict(accounts_found)
    holds = dict(existing)
    changed: dict[tuple[str, str], Hold] = {}
    answers: list[HoldAnswer] = []
    for call in calls:
        where = (call.account_id, call.hand_id)
        errors.check(where not in changed, f"two calls for the hold of {call.hand_id} in one batch")
        if call.account_id not in figures:
            answers.append(
                HoldAnswer(
                    None,
                    error=errors.NotFound(
                        "ACCOUNT_NOT_FOUND", f"account {call.account_id} does not exist", account_id=call.account_id
                    ),
                )
            )
            continue
        balance, held = figures[call.account_id]
        current = holds.get(where)
        try:
            if call.kind == HOLD:
                change = raise_hold(current, call.account_id, balance, held, call.amount_gold)
            elif call.kind == FINALIZE:
                change = finalize_hold(current, call.hand_id, call.amount_gold)
            else:
                errors.check(call.kind == RELEASE, f"hold call {call.kind!r}")
                change = release_hold(current, call.hand_id)
        except errors.SocaiError as exc:
            answers.append(HoldAnswer(None, balance, held, exc))
            continue
        if current is not None and (change.amount_gold, change.status) == (current.amount_gold, current.status):
            answers.append(HoldAnswer(current, balance, held))  # nothing to write
            continue
        released = change.status == HOLD_RELEASED
        hold = Hold(
            account_id=call.account_id,
            hand_id=call.hand_id,
            amount_gold=change.amount_gold,
            status=change.status,
            created_at=current.created_at if current is not None else now,
            updated_at=now,
            released_at=now if released else None,
            released_by=(RELEASED_BY_OPERATOR if call.kind == RELEASE else RELEASED_BY_OUTCOME) if released else "",
            release_reason=call.reason if released else "",
        )
        holds[where] = changed[where] = hold
        held += change.held_delta
        figures[call.account_id] = (balance, held)
        answers.append(HoldAnswer(hold, balance, held))
    plan = HoldsPlan(answers)
    for where, hold in changed.items():
        (plan.updates if where in existing else plan.inserts).append(hold)
    errors.check(len(answers) == len(calls), "one answer per hold call")
    return plan


# --- who may post what (checked once per request, before it reaches the write batcher) ------
#
# Idempotency keys are one namespace across callers and hand ids are predictable, so a
# writer that posted first under ``settle:{hand_id}`` would make that hand's settlement fail
# forever (IDEMPOTENCY_KEY_REUSED). The keys of a flow therefore belong to the one caller
# that runs it, and each writer may touch only the accounts its flow needs.

SETTLEMENT_KEY_PREFIX: Final = "settle:"
# Key prefix (up to and including the first ':') -> the only caller that may post under it.
RESERVED_KEY_PREFIXES: Final[Mapping[str, str]] = {
    SETTLEMENT_KEY_PREFIX: "settlement",
    "join:": "table",  # buy-ins: join:{table_id}:{join key}
    "cashout:": "table",  # cash-outs: cashout:{cashout_id}
    "refund:": "table",  # buy-ins refunded after a crash: refund:{table_id}:{join key}
}
# Callers that may post anything but keys reserved to another caller: people, not services.
UNRESTRICTED_CALLERS: Final = frozenset({"cashier", "operator"})
# settle:{table_id}-h{n}[:retryN]; the table id is an account id part (accounts._PART), and
# the greedy match gives it everything up to the last "-h{digits}".
_SETTLEMENT_KEY = re.compile(r"settle:([A-Za-z0-9_.\-@]{1,64})-h[0-9]{1,19}(?::retry[0-9]{1,9})?")


def authorize(caller: str, item: PreparedTransaction) -> None:
    """May ``caller`` post ``item``? Raises PermissionDenied with a reason:

    - IDEMPOTENCY_KEY_RESERVED: the key's prefix belongs to another caller;
    - EXTERNAL_ACCOUNT_RESERVED: an ``external:`` entry from neither the cashier nor an operator;
    - ACCOUNT_NOT_ALLOWED: an account outside the caller's rules (docs/use/ledger.md);
    - SETTLEMENT_KEY_REQUIRED: a settlement posted under another key than ``settle:{hand_id}``;
    - POSTING_NOT_ALLOWED: a caller without posting rules.

    The shape was checked by ``prepare``: account ids are well formed, so a prefix test
    (``escrow:{table_id}:``) tells exactly which table an escrow belongs to.
    """
    key = item.idempotency_key
    colon = key.find(":")
    if colon > 0:
        owner = RESERVED_KEY_PREFIXES.get(key[: colon + 1])
        if owner is not None and owner != caller:
            raise errors.PermissionDenied(
                "IDEMPOTENCY_KEY_RESERVED",
                f"idempotency keys starting {key[: colon + 1]!r} are reserved to the {owner} service",
            )
    rule = _RULES.get(caller)
    if rule is not None:
        rule(item)
    elif caller not in UNRESTRICTED_CALLERS:
        raise errors.PermissionDenied("POSTING_NOT_ALLOWED", f"{errors.shown(caller)} has no posting rules")


def _not_allowed(account_id: str, message: str) -> errors.PermissionDenied:
    """The refusal of an entry on ``account_id``. No rule admits an ``external:`` account,
    so the rules look at it only when they refuse (one pass over the entries, not two)."""
    if account_id.startswith(EXTERNAL_KIND + ":"):
        return errors.PermissionDenied(
            "EXTERNAL_ACCOUNT_RESERVED", f"only the cashier or an operator may post to {account_id}"
        )
    return errors.PermissionDenied("ACCOUNT_NOT_ALLOWED", message)


def _backend_rule(item: PreparedTransaction) -> None:
    """A backend moves gold among wallets only: a live table's money is the table's."""
    for account_id, _ in item.entries:
        if not account_id.startswith("player:"):
            raise _not_allowed(account_id, f"the backend moves gold between wallets only, not {account_id}")


def _table_rule(item: PreparedTransaction) -> None:
    """The table service moves a player's gold between their wallet and their escrow at a
    table (buy-in, cash-out, refund). It owns every table for now; with more than one table
    service each would be held to its own tables here."""
    entries = item.entries
    if len(entries) == 2:
        (first, _), (second, _) = entries
        wallet, escrow = (first, second) if first.startswith("player:") else (second, first)
        # Ids are well formed, so the escrow's last part is its player.
        if (
            wallet.startswith("player:")
            and escrow.startswith("escrow:")
            and escrow.rpartition(":")[2] == wallet[len("player:") :]
        ):
            return
    accounts_named = ", ".join(account_id for account_id, _ in entries)
    message = f"the table service moves gold only between a wallet and its owner's escrow, not among {accounts_named}"
    for account_id, _ in entries:
        if account_id.startswith(EXTERNAL_KIND + ":"):
            raise _not_allowed(account_id, message)
    raise errors.PermissionDenied("ACCOUNT_NOT_ALLOWED", message)


def settlement_table_of(key: str) -> str | None:
    """The table of a settlement key ``settle:{hand_id}`` or ``settle:{hand_id}:retryN``
    (hand ids are ``{table_id}-h{n}``), or None when ``key`` is not one."""
    match = _SETTLEMENT_KEY.fullmatch(key)
    return match.group(1) if match is not None else None


def _settlement_rule(item: PreparedTransaction) -> None:
    """A hand's settlement moves gold among the escrows and the pot of the hand's table and
    the house (``house:fees``, ``house:bank``), and pays guild funds. The ledger cannot tell
    which guilds sit at a table, so a guild account is accepted only as a payee: no hand
    takes gold out of a guild fund."""
    table_id = settlement_table_of(item.idempotency_key)
    if table_id is None:
        message = "a settlement is posted under settle:{table_id}-h{n} (or settle:{table_id}-h{n}:retryN)"
        for account_id, _ in item.entries:
            if account_id.startswith(EXTERNAL_KIND + ":"):
                raise _not_allowed(account_id, message)
        raise errors.PermissionDenied("SETTLEMENT_KEY_REQUIRED", message)
    said = item.metadata.get("table_id") if item.metadata else None
    if said is not None and said != table_id:
        raise errors.PermissionDenied(
            "ACCOUNT_NOT_ALLOWED", f"metadata table_id {errors.shown(said)} is not the key's table {table_id}"
        )
    escrows = f"escrow:{table_id}:"
    pot = f"pot:{table_id}"
    for account_id, amount in item.entries:
        if account_id.startswith(escrows) or account_id == pot or account_id in _HOUSE:
            continue
        if amount > 0 and account_id.startswith("guild:"):
            continue
        raise _not_allowed(
            account_id,
            f"a settlement of table {table_id} moves gold among its escrows and pot, the house and "
            f"guild funds (credited only), not {account_id}",
        )


_HOUSE: Final = frozenset({accounts.HOUSE_FEES, accounts.HOUSE_BANK})
_RULES: Final = {"backend": _backend_rule, "table": _table_rule, "settlement": _settlement_rule}
