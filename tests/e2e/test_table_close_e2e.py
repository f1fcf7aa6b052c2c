"""An operator closes a table (CloseTable, ``socai table close``), through the real table,
settlement and ledger services (issues 12 and 17).

A 3 Cây Gà table with a carried Gà: the Gà goes back to the players seated at the close in
a closing hand that settlement posts and ``socai audit`` re-derives (odd chips in seat
order), every seat cashes out, ``pot:{table}`` and the escrows end at 0, the trial balance
is 0. A table with a hand in play refuses joins and hands at once and closes when the hand
ends. Bad calls change nothing. A table service that stops in the middle of a closing hand
finishes the close when the table is rebuilt, writing nothing twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest

from socai import accounts
from socai.events import codec
from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.settlement.v1 import settlement_pb2_grpc as sgrpc
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from socai.infra.nats import StreamSpec
from socai_cli.embedded import free_port
from socai_table import core
from socai_table.model import hand_id_of
from tests.support.clients import Backend, bet
from tests.support.e2e import until
from tests.support.services import Running, build, running, service_settings

pytestmark = [pytest.mark.e2e]

STAKE = 101  # odd, so that a Gà of 3 × S shared by two players leaves an odd chip
BUY_IN = 2_000
DEPOSIT = 5_000
MAX_HANDS = 20  # a hand without a 10 (the Gà carries) has probability ~0.73 with 3 players


@dataclass
class Stack:
    running: Running
    backend: Backend
    operator: pb_grpc.TableServiceStub
    settlement: sgrpc.SettlementServiceStub
    auditor: lgrpc.LedgerServiceStub
    channels: list[grpc.aio.Channel]


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[Stack]:
    settings = service_settings(nats_url, migrated_database_url, stream_spec)
    async with running(settings, ("ledger", "table", "settlement")) as r:
        chans = [
            channel(r.settings.table_addr, r.settings.tokens["operator"]),
            channel(r.settings.settlement_addr, r.settings.tokens["operator"]),
            channel(r.settings.ledger_addr, r.settings.tokens["auditor"]),
        ]
        backend = Backend(r.settings)
        try:
            yield Stack(
                r,
                backend,
                pb_grpc.TableServiceStub(chans[0]),
                sgrpc.SettlementServiceStub(chans[1]),
                lgrpc.LedgerServiceStub(chans[2]),
                chans,
            )
        finally:
            await backend.close()
            for ch in chans:
                await ch.close()
            await r.delete_streams(stream_spec.name)


async def settled(s: Stack, hand_id: str) -> spb.Settlement | None:
    try:
        return (await s.settlement.GetSettlement(spb.GetSettlementRequest(hand_id=hand_id))).settlement
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


def flip(seat: int) -> pb.PlayerAction:
    return pb.PlayerAction(declare=epb.Declared(seat=seat, declaration="flip"))


async def play_ga_hand(s: Stack, table_id: str, players: list[str]) -> spb.Settlement:
    """Start a hand, every seat flips through Act; the hand's settlement."""
    hand_id = (await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    for seat, player in enumerate(players):
        await s.backend.act(table_id, player, seat, flip(seat), hand_id=hand_id)

    async def settlement() -> spb.Settlement | None:
        return await settled(s, hand_id)

    return await until(f"hand {hand_id} to settle", settlement)


async def ga_table_with_a_carry(s: Stack, players: list[str]) -> tuple[str, int, int]:
    """A 3 Cây Gà table whose last hand carried its Gà: (table id, hands played, the Gà)."""
    table_id = await s.backend.create(
        "bacay_ga",
        stake_gold=STAKE,
        seats_max=len(players),
        owner_player_id=players[0],
        options={"fast_mode": "true"},
        buy_in_min_gold=BUY_IN,
        buy_in_max_gold=BUY_IN,
    )
    for seat, player in enumerate(players):
        await s.backend.deposit(player, DEPOSIT)
        assert await s.backend.join(table_id, player, BUY_IN, seat=seat) == seat
    for number in range(1, MAX_HANDS + 1):
        result = await play_ga_hand(s, table_id, players)
        if result.pot_carry_gold > 0:
            assert await s.backend.balance(accounts.pot(table_id)) == result.pot_carry_gold
            return table_id, number, int(result.pot_carry_gold)
    raise AssertionError(f"no Gà carried in {MAX_HANDS} hands")


async def stacks_of(s: Stack, table_id: str) -> dict[str, int]:
    table = (await s.backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
    return {seat.player_id: int(seat.stack_gold) for seat in table.seats}


async def cashed_out(s: Stack, table_id: str, players: list[str]) -> None:
    async def empty() -> bool:
        return all([await s.backend.balance(accounts.escrow(table_id, p)) == 0 for p in players])

    await until("every escrow to be cashed out", empty)


async def socai(s: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """``socai …`` as a command, in a thread so the in-process services keep answering."""
    env = {**os.environ, **s.running.settings.as_env(), "SOCAI_LOG_LEVEL": "warning"}
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "socai_cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def reason_of(exc: pytest.ExceptionInfo[grpc.aio.AioRpcError]) -> tuple[grpc.StatusCode, str]:
    return exc.value.code(), error_reason(exc.value)


async def test_closing_a_ga_table_returns_the_carried_ga_to_the_players_seated_and_audits_clean(
    stack: Stack, tmp_path: Path
) -> None:
    s = stack
    run = uuid.uuid4().hex[:6]
    players = [f"cl{run}p{i}" for i in range(3)]
    table_id, hands, ga = await ga_table_with_a_carry(s, players)
    assert ga == 3 * STAKE  # the Gà opened by the three contributions, carried
    # The third player stands up before the close: the Gà is shared by the two still seated.
    stacks = await stacks_of(s, table_id)
    await s.backend.leave(table_id, players[2])
    assert sorted(await stacks_of(s, table_id)) == players[:2]

    closed = await socai(s, "table", "close", table_id, "--reason", "the event is over")
    assert closed.returncode == 0, closed.stdout + closed.stderr
    shown = json.loads(closed.stdout)
    assert shown["status"] == "TABLE_STATUS_CLOSED" and shown["close_reason"] == "the event is over", shown

    closing_hand = hand_id_of(table_id, hands + 1)
    result = await until("the closing hand to settle", lambda: settled(s, closing_hand))
    assert [(t.from_account_id, t.to_account_id, t.amount_gold, t.reason) for t in result.transfers] == [
        (accounts.pot(table_id), accounts.escrow(table_id, players[0]), 152, "ga_pot_returned"),  # the odd chip: seat 0
        (accounts.pot(table_id), accounts.escrow(table_id, players[1]), 151, "ga_pot_returned"),
    ]
    assert result.pot_carry_gold == 0
    await cashed_out(s, table_id, players)
    assert await s.backend.balance(accounts.pot(table_id)) == 0
    wallets = [await s.backend.balance(accounts.player(p)) for p in players]
    assert wallets == [
        DEPOSIT - BUY_IN + stacks[players[0]] + 152,
        DEPOSIT - BUY_IN + stacks[players[1]] + 151,
        DEPOSIT - BUY_IN + stacks[players[2]],
    ]
    assert sum(wallets) == 3 * DEPOSIT  # no fee at this table: every chip came back

    # Closed: out of the service's memory, answered from the store, refusing everything.
    assert table_id not in s.running.apps["table"].manager.tables
    table = (await s.backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
    assert (table.status, table.close_reason, list(table.seats)) == (pb.TABLE_STATUS_CLOSED, "the event is over", [])
    assert table.hands_played == hands + 1 and table.closed_at.seconds > 0
    listed = await s.backend.table.ListTables(pb.ListTablesRequest(include_closed=True))
    assert table_id in {t.table_id for t in listed.tables if t.status == pb.TABLE_STATUS_CLOSED}
    assert table_id not in {t.table_id for t in (await s.backend.table.ListTables(pb.ListTablesRequest())).tables}
    again = await s.operator.CloseTable(pb.CloseTableRequest(table_id=table_id, reason="a second reason"))
    assert (again.table.status, again.table.close_reason) == (pb.TABLE_STATUS_CLOSED, "the event is over")
    await s.backend.deposit(players[0], BUY_IN)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await s.backend.join(table_id, players[0], BUY_IN)
    assert reason_of(refused) == (grpc.StatusCode.FAILED_PRECONDITION, "TABLE_CLOSED")

    trial = await s.auditor.TrialBalance(lpb.TrialBalanceRequest())
    assert trial.total_gold == 0
    audit = await socai(s, "audit", "--json", str(tmp_path / "report.json"))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "mismatches: none; the audit is clean" in audit.stdout, audit.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["games"]["bacay_ga"]["hands"] == hands + 1, report  # the closing hand re-derived too
    assert report["escrows_checked"] == 3, report


async def test_bad_close_calls_change_nothing_then_a_hand_in_play_finishes_first_and_every_stack_returns(
    stack: Stack,
) -> None:
    s = stack
    run = uuid.uuid4().hex[:6]
    a, b, late = (f"hp{run}{name}" for name in ("a", "b", "late"))
    table_id = await s.backend.create("holdem", stake_gold=100, seats_max=3, owner_player_id=a)
    for seat, player in enumerate((a, b)):
        await s.backend.deposit(player, DEPOSIT)
        await s.backend.join(table_id, player, 1_000, seat=seat)
    await s.backend.deposit(late, DEPOSIT)

    # Bad calls: refused with a clear status, and the table is as it was.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await s.operator.CloseTable(pb.CloseTableRequest(table_id="nosuchtable", reason="typo"))
    assert reason_of(refused) == (grpc.StatusCode.NOT_FOUND, "TABLE_NOT_FOUND")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await s.backend.table.CloseTable(pb.CloseTableRequest(table_id=table_id, reason="a backend may not"))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    for reason in ("", "   ", "x" * 201, "line\nbreak"):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await s.operator.CloseTable(pb.CloseTableRequest(table_id=table_id, reason=reason))
        assert reason_of(refused) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_REASON")
    table = (await s.backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
    assert (table.status, table.close_reason, [x.player_id for x in table.seats]) == (
        pb.TABLE_STATUS_WAITING,
        "",
        [a, b],
    )
    assert await s.running.apps["table"].manager.deps.store.closing_reason(table_id) is None

    hand_id = (await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id  # still open

    closing = await s.operator.CloseTable(pb.CloseTableRequest(table_id=table_id, reason="maintenance"))
    assert closing.table.status == pb.TABLE_STATUS_CLOSING and closing.table.hand_id == hand_id
    # At once: no joins, no new hands.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await s.backend.join(table_id, late, 1_000)
    assert reason_of(refused) == (grpc.StatusCode.FAILED_PRECONDITION, "TABLE_CLOSING")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))
    assert reason_of(refused) == (grpc.StatusCode.FAILED_PRECONDITION, "TABLE_CLOSING")
    again = await s.operator.CloseTable(pb.CloseTableRequest(table_id=table_id, reason="maintenance"))
    assert again.table.status == pb.TABLE_STATUS_CLOSING

    # The hand plays on to its end; then the close completes by itself.
    state = await s.backend.state(table_id)
    assert state.hand_id == hand_id
    seat = state.to_act[0]
    await s.backend.act(table_id, (a, b)[seat], seat, bet(seat, "fold"), hand_id=hand_id)

    async def closed() -> bool:
        table = (await s.backend.table.GetTable(pb.GetTableRequest(table_id=table_id))).table
        return table.status == pb.TABLE_STATUS_CLOSED

    await until("the table to close", closed)
    stored = await s.running.apps["table"].manager.deps.log.read_hand(table_id, f"{table_id}-t")
    assert type(stored[-1].event.body).__name__ == "TableClosed"
    # No pot to return: no closing hand, only the hand that was in play.
    assert [n for n, _, _ in await s.running.apps["table"].manager.deps.store.last_hands(table_id, 5)] == [1]
    await cashed_out(s, table_id, [a, b])
    wallets = [await s.backend.balance(accounts.player(p)) for p in (a, b)]
    assert sum(wallets) == 2 * DEPOSIT and wallets != [DEPOSIT, DEPOSIT]  # the blinds moved, nothing was lost
    assert await s.backend.balance(accounts.player(late)) == DEPOSIT
    assert (await s.auditor.TrialBalance(lpb.TrialBalanceRequest())).total_gold == 0


async def test_a_table_service_stopped_inside_the_closing_hand_finishes_the_close_once(stack: Stack) -> None:
    s = stack
    run = uuid.uuid4().hex[:6]
    players = [f"rs{run}p{i}" for i in range(3)]
    table_id, hands, ga = await ga_table_with_a_carry(s, players)
    stacks = await stacks_of(s, table_id)
    first = s.running.apps["table"]
    table = first.manager.tables[table_id]

    # The first service records the close and writes the closing hand's HandStarted, then
    # dies before its HandEnded: its ``_advance`` raises, as a killed process would stop there.
    async def killed() -> None:
        raise ConnectionResetError("the process died here")

    async with table._lock:
        reason = await first.store.begin_close(table_id, "restart test")
        table.state = core.evolve(table.state, core.CloseBegun(reason))
        table._advance = killed  # type: ignore[method-assign]
        with pytest.raises(ConnectionResetError):
            await table._closing_hand()
    closing_hand = hand_id_of(table_id, hands + 1)
    log = first.manager.deps.log
    assert [type(x.event.body).__name__ for x in await log.read_hand(table_id, closing_hand)] == ["HandStarted"]

    # A stranger's message on the table's facts: the rebuild quarantines it, and a quarantined
    # table closes like any other (the operator's way out, docs/use/table.md).
    facts_subject = log.subject_of(table_id, f"{table_id}-t")
    stranger = await first.nc.jetstream().publish(
        facts_subject, b"\x00not an event", stream=s.running.settings.events_stream
    )

    # Another table service takes the table over and rebuilds it from the log.
    await first.ownership.stop()
    second = await build("table", replace(s.running.settings, table_addr=f"127.0.0.1:{free_port()}"))
    await second.manager.start()
    await second.ownership.start(wait_s=10)
    try:

        async def closed() -> bool:
            return await second.store.closed_table(table_id) is not None and table_id not in second.manager.tables

        await until("the restarted service to finish the close", closed)
        quarantined = await second.store.quarantined(table_id)
        assert [(q["stream_seq"], q["reason"]) for q in quarantined] == [(stranger.seq, "UNSIGNED")]
        bodies = [type(x.event.body).__name__ for x in await log.read_hand(table_id, closing_hand)]
        assert bodies == ["HandStarted", "HandEnded"]  # resumed, not started again
        facts = [
            type(codec.decode(raw.data).body).__name__
            async for raw in log.read_raw(facts_subject)
            if raw.stream_seq != stranger.seq
        ]
        assert facts[-4:] == ["PlayerStoodUp", "PlayerStoodUp", "PlayerStoodUp", "TableClosed"]
        assert facts.count("TableClosed") == 1
        await cashed_out(s, table_id, players)
        shares = [101, 101, 101]  # 3 × S shared by three: no odd chip
        assert ga == sum(shares)
        wallets = [await s.backend.balance(accounts.player(p)) for p in players]
        assert wallets == [DEPOSIT - BUY_IN + stacks[p] + share for p, share in zip(players, shares, strict=True)]
        assert await s.backend.balance(accounts.pot(table_id)) == 0
        result = await settled(s, closing_hand)
        assert result is not None and {t.reason for t in result.transfers} == {"ga_pot_returned"}
        assert (await s.auditor.TrialBalance(lpb.TrialBalanceRequest())).total_gold == 0
    finally:
        await second.ownership.stop()
        await second.manager.stop()
        await second.money.close()
        await second.store.close()
        await second.nc.drain()
