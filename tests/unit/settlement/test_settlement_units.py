"""The settlement service's pure parts: the hand cache, the ledger transaction, the diff."""

from __future__ import annotations

import dataclasses

import pytest

from socai.events import codec
from socai.gen.ledger.v1 import ledger_pb2
from socai.settle import replay
from socai_settlement import convert
from socai_settlement.config import SettlementConfig
from socai_settlement.hand_cache import HandCache
from socai_settlement.outstanding import subject_tokens
from socai_settlement.poster import Backoff
from tests.support.synthetic import simulate

SIM = simulate(3, ("holdem", "xito", "taixiu"), seed=9)


def protos(i: int) -> list:
    return [codec.to_proto(e) for e in SIM.hands[i].events]


def fill(cache: HandCache, events: list, first_seq: int = 100) -> None:
    for n, ev in enumerate(events[:-1]):
        cache.add(ev.table_id, ev.hand_id, first_seq + n, ev)


def test_a_complete_hand_comes_out_of_the_cache_in_order() -> None:
    events = protos(0)
    cache = HandCache(1000)
    fill(cache, events)
    end = events[-1]
    got = cache.take(end.table_id, end.hand_id, 100 + len(events) - 1, end)
    assert got == events
    assert cache.size == 0


def test_a_hand_with_a_hole_is_not_taken_from_the_cache() -> None:
    events = protos(1)
    cache = HandCache(1000)
    fill(cache, [e for e in events if e.seq != 3])
    end = events[-1]
    assert cache.take(end.table_id, end.hand_id, 1000, end) is None  # read by subject instead
    assert cache.size == 0


def test_a_redelivered_event_is_kept_once() -> None:
    events = protos(0)
    cache = HandCache(1000)
    fill(cache, events)
    fill(cache, events)
    assert cache.size == len(events) - 1


def test_the_cache_drops_the_oldest_hands_beyond_its_bound() -> None:
    first, second = protos(0), protos(1)
    cache = HandCache(len(second) + 2)
    fill(cache, first, 1)
    fill(cache, second, 1000)
    assert cache.size <= len(second) + 2
    end = first[-1]
    assert cache.take(end.table_id, end.hand_id, 999, end) is None
    end = second[-1]
    assert cache.take(end.table_id, end.hand_id, 2000, end) == second


def test_subject_tokens_are_the_table_and_the_hand() -> None:
    assert subject_tokens("socai.events.t1.t1-h7") == ("t1", "t1-h7")
    assert subject_tokens("tabc.events.t1.t1-t") == ("t1", "t1-t")


def test_the_transaction_of_a_hand_is_balanced_keyed_and_the_same_every_time() -> None:
    hand = SIM.hands[0]
    s = replay.replay_hand(hand.events)
    tx = convert.transaction_input(s)
    assert tx.idempotency_key == f"settle:{hand.hand_id}"
    assert (tx.kind, tx.reference, tx.open_accounts) == ("settlement", hand.hand_id, True)
    assert {e.account_id: e.amount_gold for e in tx.entries} == s.entries()
    assert sum(e.amount_gold for e in tx.entries) == 0
    assert dict(tx.metadata) == {
        "game": hand.game,
        "table_id": hand.table_id,
        "hand_id": hand.hand_id,
        "reasons": ",".join(f"{r}={g}" for r, g in s.by_reason().items()),
    }
    # Deterministic: a retried post is byte for byte the same request (REPLAYED, not REUSED).
    again = convert.transaction_input(replay.replay_hand(hand.events))
    assert tx.SerializeToString(deterministic=True) == again.SerializeToString(deterministic=True)
    assert isinstance(tx, ledger_pb2.TransactionInput)


def test_the_transaction_is_byte_for_byte_the_one_its_fields_as_keywords_make() -> None:
    # transaction_input sets its fields one by one (faster); the constructor's keywords are
    # the plain definition, and the bytes a retried post compares must not move.
    from socai.rules import registry

    for hand in simulate(3 * len(registry.available()), registry.available(), seed=19).hands:
        s = replay.replay_hand(hand.events)
        if not s.entries():
            continue
        by_keywords = ledger_pb2.TransactionInput(
            idempotency_key=f"settle:{hand.hand_id}",
            kind="settlement",
            reference=hand.hand_id,
            entries=[ledger_pb2.EntryInput(account_id=a, amount_gold=v) for a, v in s.entries().items()],
            metadata={
                "game": s.game,
                "table_id": s.table_id,
                "hand_id": s.hand_id,
                "reasons": ",".join(f"{r}={g}" for r, g in s.by_reason().items()),
            },
            open_accounts=True,
        )
        assert convert.transaction_input(s).SerializeToString(deterministic=True) == by_keywords.SerializeToString(
            deterministic=True
        )


def test_differences_name_the_seat_fees_and_transfers_that_changed() -> None:
    result = replay.replay(SIM.hands[0].events)
    stored = convert.record_of(result, 42, "tx-1", "settle:x")
    assert convert.differences(stored, stored) == []
    seat = stored.seats[0]
    changed = dataclasses.replace(
        stored,
        seats=(dataclasses.replace(seat, net_gold=seat.net_gold + 5), *stored.seats[1:]),
        fees_gold=stored.fees_gold + 1,
    )
    diffs = convert.differences(changed, stored)
    assert (
        diffs[0]
        == f"seat {seat.seat} ({seat.account_id}): stored net {seat.net_gold + 5:+d}, recomputed {seat.net_gold:+d} ({seat.account_id})"
    )
    assert diffs[1] == f"fees: stored {stored.fees_gold + 1}, recomputed {stored.fees_gold}"


def test_backoff_doubles_up_to_its_cap_with_jitter() -> None:
    b = Backoff(0.1, 1.0)
    delays = [b.next_delay() for _ in range(8)]
    assert 0.05 <= delays[0] <= 0.1
    assert all(d <= 1.0 for d in delays)
    assert delays[-1] >= 0.5


def test_the_poison_threshold_leaves_deliveries_in_reserve() -> None:
    with pytest.raises(ValueError):
        SettlementConfig(poison_after_deliveries=10, max_deliver=10)
    # The default sets no server limit: handovers use up server deliveries without failing.
    assert SettlementConfig().max_deliver == -1
    assert SettlementConfig(max_deliver=-1, poison_after_deliveries=50).poison_after_deliveries == 50
    with pytest.raises(ValueError):
        SettlementConfig(post_batch_max=1001)
    assert SettlementConfig.from_env({"SOCAI_SETTLEMENT_POST_BATCH": "20"}).post_batch_max == 20
