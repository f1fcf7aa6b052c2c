"""The batch planner, the pure core of the write path: no database, no gRPC (runs anywhere)."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

from socai_ledger import domain
from socai_ledger.domain import EntryInput, LockedAccounts, PostStatus, TransactionInput

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def tx(key: str, *legs: tuple[str, int], open_accounts: bool = False) -> domain.PreparedTransaction:
    entries = [EntryInput(account, amount) for account, amount in legs]
    return domain.prepare(TransactionInput(key, "settlement", "", entries, {}, open_accounts))


def book(**balances: int) -> LockedAccounts:
    rows = [(f"player:{name}", gold, 1, False, "player") for name, gold in balances.items()]
    return LockedAccounts([*rows, ("house:fees", 0, 0, False, "house")])


def plan(items: list[domain.PreparedTransaction], locked: LockedAccounts, head_seq: int = 41) -> domain.BatchPlan:
    ids = (uuid.UUID(int=n) for n in itertools.count(1))
    return domain.plan_batch(items, {}, locked, head_seq, NOW, ids)


def test_each_item_sees_the_balances_left_by_the_items_before_it():
    locked = book(alice=100)
    result = plan(
        [
            tx("a", ("player:alice", -60), ("house:fees", 60)),
            tx("b", ("player:alice", -60), ("house:fees", 60)),  # only 40 left
            tx("c", ("player:alice", -40), ("house:fees", 40)),
        ],
        locked,
    )
    assert [o.status for o in result.outcomes] == [PostStatus.APPLIED, PostStatus.REJECTED, PostStatus.APPLIED]
    assert result.outcomes[1].error is not None and result.outcomes[1].error.code == "INSUFFICIENT_FUNDS"
    assert (locked.balance_gold["player:alice"], locked.version["player:alice"]) == (0, 3)
    assert (locked.balance_gold["house:fees"], locked.version["house:fees"]) == (100, 2)
    # Consecutive journal numbers after the head; the refusal is a row without one.
    assert (result.first_seq, result.last_seq, result.applied) == (42, 43, 2)
    assert [row[3:5] for row in result.transaction_rows] == [("applied", 42), ("rejected", None), ("applied", 43)]
    assert [(r[0], r[1], r[6]) for r in result.entry_rows] == [
        ("player:alice", 2, 40),
        ("house:fees", 1, 60),
        ("player:alice", 3, 0),
        ("house:fees", 2, 100),
    ]


def test_a_refused_item_opens_no_account_and_an_applied_one_does():
    locked = book(bob=10)
    result = plan(
        [
            tx("x", ("player:bob", -50), ("pot:t1", 50), open_accounts=True),
            tx("y", ("player:bob", -5), ("guild:g1", 5), open_accounts=True),
            tx("z", ("player:bob", -1), ("escrow:t1:bob", 1)),
        ],
        locked,
    )
    reasons = [o.error.code if o.error else "" for o in result.outcomes]
    assert reasons == ["INSUFFICIENT_FUNDS", "", "ACCOUNT_NOT_FOUND"]
    assert "pot:t1" not in locked and "escrow:t1:bob" not in locked
    assert locked.opened == {"guild:g1"} and locked.balance_gold["guild:g1"] == 5


def test_the_same_key_twice_in_a_batch_is_answered_like_a_retry():
    locked = book(carol=100)
    first = tx("k", ("player:carol", -10), ("house:fees", 10))
    result = plan([first, first, tx("k", ("player:carol", -11), ("house:fees", 11))], locked)
    assert [o.status for o in result.outcomes] == [PostStatus.APPLIED, PostStatus.REPLAYED, PostStatus.REJECTED]
    assert result.outcomes[1].transaction == result.outcomes[0].transaction
    assert result.outcomes[2].error is not None and result.outcomes[2].error.code == "IDEMPOTENCY_KEY_REUSED"
    assert locked.balance_gold["player:carol"] == 90


def test_the_request_hash_ignores_the_order_of_entries_and_metadata_but_not_their_values():
    def hashed(entries: list[tuple[str, int]], metadata: dict[str, str]) -> bytes:
        legs = [EntryInput(a, m) for a, m in entries]
        return domain.prepare(TransactionInput("k", "settlement", "h1", legs, metadata)).request_hash

    base = hashed([("player:a", -5), ("player:b", 5)], {"x": "1", "y": "2"})
    assert hashed([("player:b", 5), ("player:a", -5)], {"y": "2", "x": "1"}) == base
    assert hashed([("player:a", -6), ("player:b", 6)], {"x": "1", "y": "2"}) != base
    assert hashed([("player:a", -5), ("player:b", 5)], {"x": "1", "y": "3"}) != base


def held_bank(balance: int, holds: dict[str, int]) -> LockedAccounts:
    """house:bank with ``balance``, holding ``holds`` (hand id -> gold), and two escrows."""
    locked = LockedAccounts(
        [
            ("house:bank", balance, 1, False, "house"),
            ("escrow:t1:ann", 1_000, 1, False, "escrow"),
            ("escrow:t2:bo", 1_000, 1, False, "escrow"),
        ]
    )
    locked.held_gold["house:bank"] = sum(holds.values())
    for hand_id, gold in holds.items():
        locked.hold(hand_id, "house:bank", gold)
    return locked


def test_a_held_account_pays_only_its_free_gold_except_to_the_hand_that_holds_it():
    locked = held_bank(1_000, {"t1-h1": 700, "t2-h1": 200})
    result = plan(
        [
            tx("settle:t2-h5", ("house:bank", -101), ("escrow:t2:bo", 101)),  # holds nothing: 100 free
            tx("settle:t2-h6", ("house:bank", -100), ("escrow:t2:bo", 100)),
            tx("settle:t1-h1:retry1", ("house:bank", -700), ("escrow:t1:ann", 700)),  # spends its own hold
            tx("settle:t1-h1:retry2", ("house:bank", -1), ("escrow:t1:ann", 1)),  # released: nothing held for it now
        ],
        locked,
    )
    assert [o.status for o in result.outcomes] == [
        PostStatus.REJECTED,
        PostStatus.APPLIED,
        PostStatus.APPLIED,
        PostStatus.REJECTED,
    ]
    assert "of which 900 is held for hands in play" in result.outcomes[0].error.message  # type: ignore[union-attr]
    assert result.released_holds == [("house:bank", "t1-h1", uuid.UUID(int=3))]
    assert (locked.balance_gold["house:bank"], locked.held_gold["house:bank"]) == (200, 200)
    assert set(locked.holds) == {"t2-h1"}


def test_a_refused_settlement_releases_nothing():
    locked = held_bank(500, {"t1-h1": 500})
    result = plan(
        [tx("settle:t1-h1", ("house:bank", -300), ("escrow:t1:ann", -1_200), ("escrow:t2:bo", 1_500))], locked
    )
    assert result.outcomes[0].status is PostStatus.REJECTED  # escrow:t1:ann holds 1,000 only
    assert result.released_holds == [] and locked.held_gold["house:bank"] == 500


def test_hold_calls_are_decided_in_order_each_against_what_the_ones_before_left():
    bank = "house:bank"
    opened = domain.Hold(bank, "t9-h1", 300, domain.HOLD_OPEN, NOW, NOW)
    calls = [
        domain.HoldCall(domain.HOLD, bank, "t1-h1", 600),  # 700 free of 1,000: fits
        domain.HoldCall(domain.HOLD, bank, "t2-h1", 200),  # 100 left
        domain.HoldCall(domain.FINALIZE, bank, "t9-h1", 50),  # frees 250
        domain.HoldCall(domain.HOLD, bank, "t3-h1", 300),  # 350 free now
        domain.HoldCall(domain.RELEASE, bank, "t4-h1", reason="void"),  # holds nothing
        domain.HoldCall(domain.HOLD, "house:nope", "t5-h1", 1),
    ]
    plan = domain.plan_holds(calls, {bank: (1_000, 300)}, {(bank, "t9-h1"): opened}, NOW)
    codes = [a.error.code if a.error else "" for a in plan.answers]
    assert codes == ["", "BANKER_CAPACITY", "", "", "HOLD_NOT_FOUND", "ACCOUNT_NOT_FOUND"]
    assert [(a.balance_gold, a.held_gold) for a in plan.answers[:4]] == [
        (1_000, 900),
        (1_000, 900),
        (1_000, 650),
        (1_000, 950),
    ]
    assert plan.answers[1].error.details["free_gold"] == "100"  # type: ignore[union-attr]
    assert [(h.hand_id, h.amount_gold, h.status) for h in plan.inserts] == [
        ("t1-h1", 600, "open"),
        ("t3-h1", 300, "open"),
    ]
    assert [(h.hand_id, h.amount_gold, h.status) for h in plan.updates] == [("t9-h1", 50, "final")]
