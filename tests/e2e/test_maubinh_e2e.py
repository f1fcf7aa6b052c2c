"""Mậu Binh end to end (issue 13): through the real ledger, table and settlement services, two
seats arrange, the third's window runs out and the engine arranges it (MB-20); settlement
posts the hand with Mậu Binh's reason codes, ``socai audit`` replays the stream and finds
it clean, and the ledger's trial balance is 0."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from socai.events.log import EventLog
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec
from socai.rules.chinese_poker import maubinh
from socai.settle.replay import replay
from tests.support.clients import Backend, body_names
from tests.support.e2e import GameStack, game_stack

pytestmark = [pytest.mark.e2e]

BUY_IN = 10_000
STAKE = 100
HANDS_MAX = 3  # a hand where every chi of every pair draws moves no gold; play another
CHI = {"chi_back", "chi_middle", "chi_front"}


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


async def play_hand_with_a_late_seat(backend: Backend, table_id: str, players: list[str]) -> tuple[str, pb.TableState]:
    """Seats 0 and 1 send the first candidate arrangement; seat 2 sends nothing."""
    hand_id = (await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    for seat, player in enumerate(players[:2]):
        state = await backend.state(table_id, player)
        assert state.timer == "arrange" and seat in state.to_act
        assert state.candidate_actions, "GetTableState offers no arrangement"
        action = state.candidate_actions[0]
        assert action.WhichOneof("action") == "arrange"
        await backend.act(table_id, player, seat, action, hand_id=hand_id)
    assert list((await backend.state(table_id)).to_act) == [2]

    final = await backend.state(table_id)
    for _ in range(200):  # the 3 s window, plenty on a loaded machine
        final = await backend.state(table_id)
        if final.table.status == pb.TABLE_STATUS_WAITING:
            break
        await asyncio.sleep(0.1)
    assert final.table.status == pb.TABLE_STATUS_WAITING, "the hand did not end"
    return hand_id, final


async def test_a_late_seat_is_arranged_automatically_then_settled_and_audited_clean(
    stack: GameStack, tmp_path: Path
) -> None:
    backend, ledger, log = stack.backend, stack.auditor, stack.log
    players = ["mb0", "mb1", "mb2"]
    table_id = await backend.create(
        "maubinh",
        owner_player_id=players[0],
        stake_gold=STAKE,
        seats_max=4,
        options={"arrange_timeout_s": "3"},
    )
    for seat, player in enumerate(players):
        await backend.deposit(player, BUY_IN * 2)
        assert await backend.join(table_id, player, BUY_IN, seat=seat) == seat

    played: list[str] = []
    record = spb.Settlement()
    for _ in range(HANDS_MAX):
        hand_id, final = await play_hand_with_a_late_seat(backend, table_id, players)
        played.append(hand_id)
        names = body_names(final)
        assert names == ["hand_started", "cards_dealt", "arranged", "arranged", "timer_expired", "hand_ended"]
        expired = final.events[4].timer_expired
        assert (expired.seat, expired.timer) == (2, "arrange")
        assert await log_names(log, table_id, hand_id) == [
            "HandStarted",
            "CardsDealt",
            "Arranged",
            "Arranged",
            "TimerExpired",
            "HandEnded",
        ]

        # The replay of the stored events: seat 2 arranged by the engine, the others not.
        result = replay([s.event for s in await log.read_hand(table_id, hand_id)])
        assert maubinh.auto_arranged(result.state) == frozenset({2})
        assert sorted(result.state.arranged) == [0, 1, 2]
        # The table records the rules it plays new hands under, and they settle the hand.
        assert result.state.rules_version == maubinh.RULES_VERSION

        record = await stack.settled(hand_id)
        assert record.game == "maubinh" and record.table_id == table_id
        assert {s.seat: s.net_gold for s in record.seats} == dict(result.settlement.nets)
        expected = result.settlement
        assert sorted(
            (t.from_account_id, t.to_account_id, t.amount_gold, t.reason) for t in record.transfers
        ) == sorted((t.from_account, t.to_account, t.amount_gold, t.reason) for t in expected.transfers)
        if expected.entries():  # gold moved on balance (transfers can cancel out)
            break
    else:
        pytest.fail(f"no hand of {HANDS_MAX} moved gold on balance: {played}")

    # Mậu Binh's reason codes, and the chi were paid; the ledger holds that transaction.
    reasons = {t.reason for t in record.transfers}
    assert reasons <= set(maubinh.REASONS), reasons
    assert reasons & CHI or reasons & {"special_hand", "foul"}, reasons
    assert sorted(s.seat for s in record.seats) == [0, 1, 2]
    assert sum(s.net_gold for s in record.seats) + record.fees_gold == 0
    assert record.ledger_transaction_id and record.idempotency_key == f"settle:{hand_id}"
    tx = (await ledger.GetTransaction(lpb.GetTransactionRequest(idempotency_key=f"settle:{hand_id}"))).transaction
    assert tx.transaction_id == record.ledger_transaction_id
    assert tx.kind == "settlement" and tx.metadata["game"] == "maubinh"
    by_reason = dict(x.split("=") for x in tx.metadata["reasons"].split(","))
    assert {k: int(v) for k, v in by_reason.items()} == expected.by_reason()
    assert set(by_reason) <= set(maubinh.REASONS), by_reason
    assert {e.account_id: e.amount_gold for e in tx.entries} == expected.entries()

    # Every played hand settled (a hand moving no gold is stored, not posted).
    for other in played:
        await stack.settled(other)

    audit = await stack.socai("audit", "--json", str(tmp_path / "report.json"))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "mismatches: none; the audit is clean" in audit.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] and report["games"]["maubinh"]["hands"] == len(played), report

    trial = await ledger.TrialBalance(lpb.TrialBalanceRequest())
    assert trial.total_gold == 0


async def log_names(log: EventLog, table_id: str, hand_id: str) -> list[str]:
    return [type(s.event.body).__name__ for s in await log.read_hand(table_id, hand_id)]
