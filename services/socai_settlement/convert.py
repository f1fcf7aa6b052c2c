"""Domain ↔ protobuf for the settlement service: the only module here that builds messages.

- a replayed hand → the ledger ``TransactionInput`` (kind ``settlement``, reference the hand,
  idempotency key ``settle:{hand_id}``, deterministic metadata so a retried post is the
  *same* request and the ledger answers REPLAYED rather than IDEMPOTENCY_KEY_REUSED);
- a replayed hand → ``SettledHand``, all the batch path needs of it (the transaction already
  serialized, the stored columns as plain values), built where the replay runs;
- a replayed hand → the ``SettlementRecord`` the service stores;
- records and dead letters → ``socai.settlement.v1`` messages;
- two records → the list of their differences (``ReplayHand``).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Final, NamedTuple

from socai.gen.ledger.v1 import ledger_pb2
from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai.rules.base import Settlement, Transfer
from socai.settle.keys import settlement_key
from socai.settle.replay import ReplayResult, penalties
from socai_settlement.store import DeadLetter, HandRow, SeatNet, SettlementRecord, TransferRow

TRANSACTION_KIND: Final = "settlement"


def reasons_summary(settlement: Settlement) -> str:
    """``bet_loss=120,fee=6,pot=300``: gold by reason code, sorted (ledger metadata)."""
    return ",".join(f"{reason}={gold}" for reason, gold in settlement.by_reason().items())


def transaction_input(
    settlement: Settlement, key: str | None = None, entries: dict[str, int] | None = None
) -> ledger_pb2.TransactionInput:
    """The hand's balanced transaction. Its entries are ``Settlement.entries()`` (net per
    account, zeros left out; pass them when already computed); the caller skips hands whose
    entries are empty."""
    net = settlement.entries() if entries is None else entries
    # Field by field: the same message as the constructor's keywords (a list of EntryInput
    # messages copied in, a dict converted to the map) in 9.7 against 23 µs a hand with its
    # serialization (timeit over 220 hands of all eleven games), on every replay worker's
    # path. tests/unit/settlement/test_settlement_units.py holds the bytes equal.
    tx = ledger_pb2.TransactionInput()
    tx.idempotency_key = key or settlement_key(settlement.hand_id)
    tx.kind = TRANSACTION_KIND
    tx.reference = settlement.hand_id
    add_entry = tx.entries.add
    for account_id, gold in net.items():
        add_entry(account_id=account_id, amount_gold=gold)
    metadata = tx.metadata
    metadata["game"] = settlement.game
    metadata["table_id"] = settlement.table_id
    metadata["hand_id"] = settlement.hand_id
    metadata["reasons"] = reasons_summary(settlement)
    tx.open_accounts = True
    return tx


class SettledHand(NamedTuple):
    """A replayed hand as the batch path needs it: what to post and what to store.

    Built where the replay runs (a worker process, see ``sealed_replay``) from plain values — a
    tuple of strings, ints and tuples — so that crossing back to the service costs little;
    the transaction is already serialized (``settle:{hand_id}``), so the service only
    concatenates the batch's requests.
    """

    hand_id: str
    table_id: str
    game: str
    entries: tuple[tuple[str, int], ...]  # Settlement.entries(): net per account, zeros left out
    transaction: bytes  # the serialized TransactionInput under settle:{hand_id}; b"" when no gold moves
    fees_gold: int
    pot_carry_gold: int
    penalties_gold: dict[str, int]
    transfers: tuple[TransferRow, ...]
    shortfalls: tuple[tuple[int, int, int, str], ...]  # (seat, owed_gold, paid_gold, reason)
    seats: tuple[tuple[int, str, str, int], ...]  # (seat, player_id, account_id, net_gold)


def transfer_row(t: Transfer) -> TransferRow:
    """A transfer as stored: (from, to, gold, reason), with its detail as a fifth item only
    when it has one (most transfers have none; the rows stay short)."""
    if t.detail:
        return (t.from_account, t.to_account, t.amount_gold, t.reason, t.detail)
    return (t.from_account, t.to_account, t.amount_gold, t.reason)


def settled_hand(result: ReplayResult) -> SettledHand:
    s = result.settlement
    entries = s.entries()
    players = {info.seat: info.player_id for info in result.started.seats}
    accounts = s.seat_accounts
    return SettledHand(
        hand_id=s.hand_id,
        table_id=s.table_id,
        game=s.game,
        entries=tuple(entries.items()),
        transaction=transaction_input(s, entries=entries).SerializeToString(deterministic=True) if entries else b"",
        fees_gold=s.fees_gold(),
        pot_carry_gold=s.pot_carry_gold,
        penalties_gold=penalties(s),
        transfers=tuple(transfer_row(t) for t in s.transfers),
        shortfalls=tuple((f.seat, f.owed_gold, f.paid_gold, f.reason) for f in s.shortfalls),
        seats=tuple((seat, players.get(seat, ""), accounts.get(seat, ""), net) for seat, net in sorted(s.nets.items())),
    )


def transaction_of(hand: SettledHand, key: str) -> ledger_pb2.TransactionInput | bytes:
    """What to post for ``hand`` under ``key``: its serialized transaction as it is for
    the usual key, a copy under another key (a retry's ``settle:{hand_id}:retryN``)."""
    if key == settlement_key(hand.hand_id):
        return hand.transaction
    tx = ledger_pb2.TransactionInput.FromString(hand.transaction)
    tx.idempotency_key = key
    return tx


def row_of(hand: SettledHand, stream_seq: int, ledger_transaction_id: str, key: str) -> HandRow:
    return HandRow(
        hand.hand_id,
        hand.table_id,
        hand.game,
        stream_seq,
        hand.fees_gold,
        hand.pot_carry_gold,
        hand.penalties_gold,
        hand.transfers,
        hand.shortfalls,
        ledger_transaction_id,
        key,
        hand.seats,
    )


def record_of(result: ReplayResult, stream_seq: int, ledger_transaction_id: str, key: str) -> SettlementRecord:
    s = result.settlement
    players = {info.seat: info.player_id for info in result.started.seats}
    seats = tuple(
        SeatNet(seat, players.get(seat, ""), s.seat_accounts.get(seat, ""), net) for seat, net in sorted(s.nets.items())
    )
    return SettlementRecord(
        hand_id=s.hand_id,
        table_id=s.table_id,
        game=s.game,
        stream_seq=stream_seq,
        seats=seats,
        transfers=tuple(s.transfers),
        fees_gold=s.fees_gold(),
        penalties_gold=penalties(s),
        shortfalls=tuple(s.shortfalls),
        pot_carry_gold=s.pot_carry_gold,
        ledger_transaction_id=ledger_transaction_id,
        idempotency_key=key,
    )


def settlement_pb(record: SettlementRecord) -> pb.Settlement:
    msg = pb.Settlement(
        hand_id=record.hand_id,
        table_id=record.table_id,
        game=record.game,
        seats=[
            pb.SeatResult(seat=s.seat, player_id=s.player_id, account_id=s.account_id, net_gold=s.net_gold)
            for s in record.seats
        ],
        transfers=[
            pb.SettlementTransfer(
                from_account_id=t.from_account,
                to_account_id=t.to_account,
                amount_gold=t.amount_gold,
                reason=t.reason,
                detail=t.detail,
            )
            for t in record.transfers
        ],
        fees_gold=record.fees_gold,
        penalties_gold=record.penalties_gold,
        shortfalls=[
            pb.Shortfall(seat=s.seat, owed_gold=s.owed_gold, paid_gold=s.paid_gold, reason=s.reason)
            for s in record.shortfalls
        ],
        ledger_transaction_id=record.ledger_transaction_id,
        stream_seq=record.stream_seq,
        pot_carry_gold=record.pot_carry_gold,
        idempotency_key=record.idempotency_key,
    )
    if record.settled_at is not None:
        msg.settled_at.FromDatetime(record.settled_at.astimezone(UTC))
    return msg


def dead_letter_pb(d: DeadLetter) -> pb.DeadLetter:
    msg = pb.DeadLetter(
        hand_id=d.hand_id,
        table_id=d.table_id,
        reason=d.reason,
        detail=d.detail,
        stream_seq=d.stream_seq,
        attempts=d.attempts,
    )
    msg.first_failed_at.FromDatetime(_utc(d.first_failed_at))
    msg.last_failed_at.FromDatetime(_utc(d.last_failed_at))
    return msg


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC)


def differences(stored: SettlementRecord, recomputed: SettlementRecord) -> list[str]:
    """What differs between the stored settlement and a recomputation, one line each:
    identity, each seat's net, fees, penalties, shortfalls, pot carry and the transfers."""
    out: list[str] = []
    for name in ("table_id", "game"):
        a, b = getattr(stored, name), getattr(recomputed, name)
        if a != b:
            out.append(f"{name}: stored {a!r}, recomputed {b!r}")
    stored_seats = {s.seat: s for s in stored.seats}
    new_seats = {s.seat: s for s in recomputed.seats}
    for seat in sorted(set(stored_seats) | set(new_seats)):
        a_seat, b_seat = stored_seats.get(seat), new_seats.get(seat)
        if a_seat is None or b_seat is None:
            out.append(
                f"seat {seat}: {'missing from the stored settlement' if a_seat is None else 'not in the replay'}"
            )
        elif (a_seat.net_gold, a_seat.account_id) != (b_seat.net_gold, b_seat.account_id):
            out.append(
                f"seat {seat} ({a_seat.account_id}): stored net {a_seat.net_gold:+d}, "
                f"recomputed {b_seat.net_gold:+d} ({b_seat.account_id})"
            )
    if stored.fees_gold != recomputed.fees_gold:
        out.append(f"fees: stored {stored.fees_gold}, recomputed {recomputed.fees_gold}")
    for reason in sorted(set(stored.penalties_gold) | set(recomputed.penalties_gold)):
        a, b = stored.penalties_gold.get(reason, 0), recomputed.penalties_gold.get(reason, 0)
        if a != b:
            out.append(f"penalty {reason}: stored {a}, recomputed {b}")
    if stored.shortfalls != recomputed.shortfalls:
        out.append(f"shortfalls: stored {list(stored.shortfalls)}, recomputed {list(recomputed.shortfalls)}")
    if stored.pot_carry_gold != recomputed.pot_carry_gold:
        out.append(f"pot carry: stored {stored.pot_carry_gold}, recomputed {recomputed.pot_carry_gold}")
    # A transfer's detail explains it; the money and its reason are what must agree.
    a_set = [dataclasses.replace(t, detail="") for t in stored.transfers]
    b_set = [dataclasses.replace(t, detail="") for t in recomputed.transfers]
    if a_set != b_set:
        for t in a_set:
            if t not in b_set:
                out.append(f"transfer only stored: {t.from_account} -> {t.to_account} {t.amount_gold} ({t.reason})")
        for t in b_set:
            if t not in a_set:
                out.append(f"transfer only recomputed: {t.from_account} -> {t.to_account} {t.amount_gold} ({t.reason})")
        if sorted(a_set, key=repr) == sorted(b_set, key=repr):
            out.append("transfers: the same, in another order")
    return out
