"""The SettlementService gRPC API on settled hands: reads, pagination, ReplayHand, errors, access."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai.gen.settlement.v1 import settlement_pb2_grpc as pb_grpc
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from socai.rules import registry
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import Simulation, fund, publish, simulate

pytestmark = pytest.mark.integration


@pytest.fixture
async def settled(harness: Harness) -> AsyncIterator[Simulation]:
    sim = simulate(14, ("holdem", "taixiu"), seed=51, hands_per_table=7)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    await harness.start_settlement()
    await publish(harness.log, sim)

    async def done() -> bool:
        return (await harness.counts())[0] == len(sim.hands)

    await wait_for(done, 60, "the hands to settle")
    yield sim


async def rpc_error(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call  # type: ignore[misc]
    return err.value


async def test_get_settlement_gives_seats_transfers_fees_and_the_ledger_transaction(
    harness: Harness, settled: Simulation
) -> None:
    hand = settled.hands[3]
    reply = await harness.api("backend").GetSettlement(pb.GetSettlementRequest(hand_id=hand.hand_id))
    s = reply.settlement
    assert (s.hand_id, s.table_id, s.game) == (hand.hand_id, hand.table_id, hand.game)
    assert {r.seat: r.net_gold for r in s.seats} == dict(hand.settlement.nets)
    assert {r.seat: r.account_id for r in s.seats} == dict(hand.settlement.seat_accounts)
    assert [(t.from_account_id, t.to_account_id, t.amount_gold, t.reason) for t in s.transfers] == [
        (t.from_account, t.to_account, t.amount_gold, t.reason) for t in hand.settlement.transfers
    ]
    assert s.fees_gold == hand.settlement.fees_gold()
    penalty = registry.penalty_reasons(hand.settlement.game)
    assert dict(s.penalties_gold) == {r: v for r, v in hand.settlement.by_reason().items() if r in penalty}
    tx = await harness.transaction(f"settle:{hand.hand_id}")
    assert tx is not None and s.ledger_transaction_id == tx.transaction_id
    assert s.stream_seq > 0 and s.settled_at.seconds > 0


async def test_list_settlements_pages_a_table_newest_first(harness: Harness, settled: Simulation) -> None:
    table = settled.tables[0]
    api = harness.api("table")
    seen: list[pb.Settlement] = []
    token = ""
    pages = 0
    while True:
        reply = await api.ListSettlements(
            pb.ListSettlementsRequest(table_id=table.table_id, page_size=3, page_token=token)
        )
        seen += reply.settlements
        pages += 1
        token = reply.next_page_token
        if not token:
            break
    assert pages == -(-len(table.hands) // 3) and len(table.hands) > 3
    assert [s.hand_id for s in seen] == [h.hand_id for h in reversed(table.hands)]
    assert [s.stream_seq for s in seen] == sorted((s.stream_seq for s in seen), reverse=True)

    # A page token belongs to its table: with another table's (or a player's) filter it is
    # refused, not read as a position in that other list.
    first = await api.ListSettlements(pb.ListSettlementsRequest(table_id=table.table_id, page_size=3))
    for other in (
        pb.ListSettlementsRequest(table_id=settled.tables[1].table_id, page_token=first.next_page_token),
        pb.ListSettlementsRequest(player_id=table.seats[0].player_id, page_token=first.next_page_token),
    ):
        err = await rpc_error(api.ListSettlements(other))
        assert (err.code(), error_reason(err)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_PAGE_TOKEN")


async def test_list_settlements_of_a_player_finds_every_hand_they_played(harness: Harness, settled: Simulation) -> None:
    table = settled.tables[1]
    player = table.seats[0].player_id
    played = [h.hand_id for h in table.hands if player in {i.player_id for i in h.events[0].body.seats}]  # type: ignore[union-attr]
    reply = await harness.api("auditor").ListSettlements(pb.ListSettlementsRequest(player_id=player, page_size=100))
    assert [s.hand_id for s in reply.settlements] == list(reversed(played))
    assert reply.next_page_token == ""


async def test_replay_hand_finds_no_difference_then_names_a_tampered_net(harness: Harness, settled: Simulation) -> None:
    hand = settled.hands[0]
    api = harness.api("auditor")
    reply = await api.ReplayHand(pb.ReplayHandRequest(hand_id=hand.hand_id))
    assert list(reply.differences) == []
    assert {r.seat: r.net_gold for r in reply.recomputed.seats} == dict(hand.settlement.nets)

    seat, net = next(iter(hand.settlement.nets.items()))
    assert harness.settlement is not None
    async with harness.settlement.store.pool.connection() as conn:
        await conn.execute(
            'update "socai_settlement".settlement_seats set net_gold = net_gold + 7 where hand_id = %s and seat = %s',
            (hand.hand_id, seat),
        )
    reply = await api.ReplayHand(pb.ReplayHandRequest(hand_id=hand.hand_id))
    account = hand.settlement.seat_accounts[seat]
    assert list(reply.differences) == [
        f"seat {seat} ({account}): stored net {net + 7:+d}, recomputed {net:+d} ({account})"
    ]


async def test_bad_requests_are_invalid_argument_and_unknown_hands_not_found(
    harness: Harness, settled: Simulation
) -> None:
    api = harness.api("operator")
    err = await rpc_error(api.GetSettlement(pb.GetSettlementRequest(hand_id="no-such-hand")))
    assert (err.code(), error_reason(err)) == (grpc.StatusCode.NOT_FOUND, "SETTLEMENT_NOT_FOUND")
    err = await rpc_error(api.GetSettlement(pb.GetSettlementRequest(hand_id="a.b")))
    assert (err.code(), error_reason(err)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_ID")
    err = await rpc_error(api.ListSettlements(pb.ListSettlementsRequest(table_id="t1", player_id="p1")))
    assert (err.code(), error_reason(err)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_FILTER")
    err = await rpc_error(api.ListSettlements(pb.ListSettlementsRequest(table_id="t1", page_token="%%%")))
    assert (err.code(), error_reason(err)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_PAGE_TOKEN")
    err = await rpc_error(api.ListSettlements(pb.ListSettlementsRequest(table_id="t1", page_size=-1)))
    assert (err.code(), error_reason(err)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_PAGE_SIZE")
    err = await rpc_error(api.ReplayHand(pb.ReplayHandRequest(hand_id="never-played")))
    assert (err.code(), error_reason(err)) == (grpc.StatusCode.NOT_FOUND, "HAND_NOT_FOUND")
    err = await rpc_error(api.RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id="never-played")))
    assert (err.code(), error_reason(err)) == (grpc.StatusCode.NOT_FOUND, "DEAD_LETTER_NOT_FOUND")


async def test_only_the_operator_may_retry_and_a_stranger_nothing(harness: Harness, settled: Simulation) -> None:
    hand_id = settled.hands[0].hand_id
    # A retry posts money: not for the table, nor for the read-only auditor (issue 27).
    for caller in ("table", "auditor", "backend"):
        err = await rpc_error(harness.api(caller).RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id=hand_id)))
        assert err.code() == grpc.StatusCode.PERMISSION_DENIED, caller
    reply = await harness.api("operator").RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id=hand_id))
    assert reply.settled  # the hand was settled already: the operator hears so
    err = await rpc_error(harness.api("cashier").GetSettlement(pb.GetSettlementRequest(hand_id=hand_id)))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    async with channel(harness.settings.settlement_addr, "not-a-token") as ch:
        err = await rpc_error(pb_grpc.SettlementServiceStub(ch).GetSettlement(pb.GetSettlementRequest(hand_id=hand_id)))
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
