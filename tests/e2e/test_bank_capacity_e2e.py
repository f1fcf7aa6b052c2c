"""A banker never owes more than it holds (issue 27, item 2), through the real table,
settlement and ledger services.

Every game where a banker pays accepts a bet only while the banker can cover the worst case
of every bet it has accepted; a bet it cannot cover is refused (FAILED_PRECONDITION
BANKER_CAPACITY) and writes nothing:

- Tài Xỉu against the system: the bank is ``house:bank``, shared by every table, so the
  table holds the hand's worst case there in the ledger before it accepts a bet; with the
  bank at 0 a 20,000 bet is refused (it used to be accepted, its win was dead-lettered
  LEDGER_REJECTED INSUFFICIENT_FUNDS, the player's cash-out never completed and the audit
  failed); many tables racing for its last capacity get exactly what it holds.
- Tài Xỉu p2p and Ba Cây Chương: the banker is a seat, bounded by the rules engine against
  its stack (TX-7, CH-2); many players racing for its last capacity at one table get
  exactly what it covers.

After each game every hand is settled (no dead letter), every hold is released, every
player cashes out, and ``socai audit`` (the Tài Xỉu games) reconciles the log with the
ledger clean.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from socai import accounts
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.grpc_errors import error_info, error_reason
from socai.infra.nats import StreamSpec
from tests.support.clients import body_names, wager
from tests.support.e2e import GameStack, game_stack, until

pytestmark = [pytest.mark.e2e]

BANK = accounts.HOUSE_BANK


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


async def fund_bank(s: GameStack, amount: int) -> None:
    reply = await s.backend.cashier.Transfer(
        lpb.TransferRequest(
            idempotency_key=f"bankroll-{uuid.uuid4().hex}",
            from_account_id=accounts.EXTERNAL_CASHIER,
            to_account_id=BANK,
            amount_gold=amount,
            kind="bankroll",
        )
    )
    assert reply.result.status == lpb.POST_STATUS_APPLIED


async def bank(s: GameStack) -> tuple[int, int]:
    """house:bank's (balance, held)."""
    account = (await s.auditor.GetAccount(lpb.GetAccountRequest(account_id=BANK))).account
    return int(account.balance_gold), int(account.held_gold)


async def open_table(s: GameStack, game: str, players: list[str], buy_ins: list[int], **config: object) -> str:
    table_id = await s.backend.create(
        game,
        owner_player_id=players[0],
        seats_max=len(players),
        buy_in_min_gold=min(buy_ins),
        buy_in_max_gold=max(buy_ins),
        **config,
    )
    for seat, (player, buy_in) in enumerate(zip(players, buy_ins, strict=True)):
        await s.backend.deposit(player, buy_in)
        assert await s.backend.join(table_id, player, buy_in, seat=seat) == seat
    return table_id


async def try_bet(s: GameStack, table_id: str, hand_id: str, player: str, seat: int, action: pb.PlayerAction) -> str:
    """The reason a bet was refused, "" when it was accepted."""
    try:
        await s.backend.act(table_id, player, seat, action, hand_id=hand_id)
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc
        return error_reason(exc)
    return ""


async def hand_over(s: GameStack, table_id: str, hand_id: str) -> pb.TableState:
    async def ended() -> pb.TableState | None:
        state = await s.backend.state(table_id)
        return state if state.hand_id == hand_id and "hand_ended" in body_names(state) else None

    return await until(f"hand {hand_id} to end", ended)


async def no_dead_letters(s: GameStack) -> None:
    letters = await s.settlement.ListDeadLetters(spb.ListDeadLettersRequest())
    assert list(letters.dead_letters) == [], letters


async def cash_out(s: GameStack, table_id: str, players: list[str]) -> None:
    """Every player leaves (one who lost every chip stood up already); every escrow is paid
    back to its wallet (the cash-out completes)."""
    for player in players:
        try:
            await s.backend.leave(table_id, player)
        except grpc.aio.AioRpcError as exc:
            assert error_reason(exc) == "NOT_SEATED", exc

    async def paid() -> bool:
        return all([await s.backend.balance(accounts.escrow(table_id, p)) == 0 for p in players])

    await until(f"every cash-out of {table_id}", paid)


async def audit_clean(s: GameStack, tmp_path: Path, hands: int) -> None:
    report_path = tmp_path / "report.json"
    audit = await s.socai("audit", "--json", str(report_path))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "mismatches: none; the audit is clean" in audit.stdout, audit.stdout
    report = json.loads(report_path.read_text())
    assert report["ok"] and report["games"]["taixiu"]["hands"] == hands, report
    assert (await s.auditor.TrialBalance(lpb.TrialBalanceRequest())).total_gold == 0
    journal = await s.auditor.VerifyJournal(lpb.VerifyJournalRequest())
    assert journal.ok, journal.mismatches


async def test_a_bet_the_house_bank_cannot_cover_is_refused_and_the_table_stays_whole(
    stack: GameStack, tmp_path: Path
) -> None:
    s = stack
    run = uuid.uuid4().hex[:6]
    players = [f"tx{run}a", f"tx{run}b"]
    table_id = await open_table(
        s, "taixiu", players, [20_000, 20_000], stake_gold=10, options={"mode": "system", "betting_window_s": "2"}
    )
    assert await bank(s) == (0, 0)
    hand_id = (await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await s.backend.act(table_id, players[0], 0, wager(0, "tai", 20_000), hand_id=hand_id)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    info = error_info(caught.value)
    assert info is not None and info.reason == "BANKER_CAPACITY", caught.value.details()
    assert (info.metadata["free_gold"], info.metadata["needed_gold"]) == ("0", "20000")
    # Nothing was written: no wager in the hand, nothing held.
    assert "wager_placed" not in body_names(await s.backend.state(table_id))
    assert await bank(s) == (0, 0)
    # A bet the bank wins on every roll is accepted: Tài and Xỉu of one size cost it nothing.
    assert await try_bet(s, table_id, hand_id, players[0], 0, wager(0, "tai", 500)) == "BANKER_CAPACITY"
    assert await try_bet(s, table_id, hand_id, players[1], 1, wager(1, "xiu", 500)) == "BANKER_CAPACITY"

    final = await hand_over(s, table_id, hand_id)
    assert "wager_placed" not in body_names(final)
    await s.settled(hand_id)
    await no_dead_letters(s)
    await cash_out(s, table_id, players)
    assert [await s.backend.balance(accounts.player(p)) for p in players] == [20_000, 20_000]
    await audit_clean(s, tmp_path, hands=1)


async def test_hedged_bets_need_no_bank_and_a_funded_bank_pays_what_it_held(stack: GameStack, tmp_path: Path) -> None:
    s = stack
    run = uuid.uuid4().hex[:6]
    players = [f"tx{run}a", f"tx{run}b"]
    table_id = await open_table(
        s, "taixiu", players, [5_000, 5_000], stake_gold=10, options={"mode": "system", "betting_window_s": "2"}
    )
    await fund_bank(s, 3_000)
    hand_id = (await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    # Tài 1,000 and Xỉu 1,000: one pays the other on every roll but a triple, where the bank
    # wins both. A hold only grows: the Tài alone held 1,000, and the Xỉu leaves it there.
    assert await try_bet(s, table_id, hand_id, players[0], 0, wager(0, "tai", 1_000)) == ""
    assert await try_bet(s, table_id, hand_id, players[1], 1, wager(1, "xiu", 1_000)) == ""
    assert await bank(s) == (3_000, 1_000)
    # A triple 6 pays 150 × its stake on 6-6-6, the one roll where the bank takes the 2,000
    # of the hedged bets: 34 would need 5,100 - 2,000 = 3,100 of the bank's 3,000; 33 fits.
    assert await try_bet(s, table_id, hand_id, players[1], 1, wager(1, "triple", 34, 6)) == "BANKER_CAPACITY"
    assert await try_bet(s, table_id, hand_id, players[1], 1, wager(1, "triple", 33, 6)) == ""
    assert await bank(s) == (3_000, 4_950 - 2_000)

    final = await hand_over(s, table_id, hand_id)
    dice = list(final.events[-2].dice_rolled.dice)
    record = await s.settled(hand_id)
    await no_dead_letters(s)

    async def released() -> bool:
        return (await bank(s))[1] == 0

    await until("the hand's hold to be released", released)
    balance, _ = await bank(s)
    paid_by_bank = 3_000 - balance
    bank_entry = sum(
        t.amount_gold if t.to_account_id == BANK else -t.amount_gold
        for t in record.transfers
        if BANK in (t.to_account_id, t.from_account_id)
    )
    assert -bank_entry == paid_by_bank, (dice, record)
    assert paid_by_bank <= 2_950  # its worst roll, 6-6-6
    await cash_out(s, table_id, players)
    await audit_clean(s, tmp_path, hands=1)


async def test_many_tables_racing_for_the_house_banks_last_capacity_get_exactly_what_it_holds(
    stack: GameStack, tmp_path: Path
) -> None:
    """Eight system tables, two players each, sixteen Tài bets of 7,000 at once against a bank
    of 50,000: exactly seven are accepted (49,000 held), the other nine refused, and every hand
    then settles, whatever the dice, without a dead letter."""
    s = stack
    run = uuid.uuid4().hex[:6]
    await fund_bank(s, 50_000)
    tables: list[tuple[str, list[str]]] = []
    for t in range(8):
        players = [f"r{run}t{t}a", f"r{run}t{t}b"]
        table_id = await open_table(
            s, "taixiu", players, [7_000, 7_000], stake_gold=10, options={"mode": "system", "betting_window_s": "6"}
        )
        tables.append((table_id, players))
    hands = [
        (await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id for table_id, _ in tables
    ]
    seats = [
        (table_id, hand_id, player, seat)
        for (table_id, players), hand_id in zip(tables, hands, strict=True)
        for seat, player in enumerate(players)
    ]
    outcomes = await asyncio.gather(*(try_bet(s, t, h, p, seat, wager(seat, "tai", 7_000)) for t, h, p, seat in seats))
    assert sorted(outcomes) == [""] * 7 + ["BANKER_CAPACITY"] * 9, outcomes
    assert await bank(s) == (50_000, 49_000)

    for (table_id, _), hand_id in zip(tables, hands, strict=True):
        final = await hand_over(s, table_id, hand_id)
        accepted = sum(1 for (t, *_), outcome in zip(seats, outcomes, strict=True) if t == table_id and not outcome)
        assert body_names(final).count("wager_placed") == accepted
        await s.settled(hand_id)
    await no_dead_letters(s)

    async def released() -> bool:
        return (await bank(s))[1] == 0

    await until("every hold to be released", released)
    balance, _ = await bank(s)
    for table_id, players in tables:
        await cash_out(s, table_id, players)
    wallets = sum([await s.backend.balance(accounts.player(p)) for _, ps in tables for p in ps])
    fees = await s.backend.balance(accounts.HOUSE_FEES)
    assert wallets + balance + fees == 16 * 7_000 + 50_000  # every gold accounted for
    await audit_clean(s, tmp_path, hands=8)


async def test_a_p2p_banker_covered_by_many_players_racing_for_its_last_capacity(
    stack: GameStack, tmp_path: Path
) -> None:
    """Tài Xỉu p2p: the owner banks 10,000; six players bet Tài 3,000 at once: each bet
    reserves its best payout (TX-7), so three are accepted and three refused."""
    s = stack
    run = uuid.uuid4().hex[:6]
    players = [f"p{run}owner", *(f"p{run}x{i}" for i in range(6))]
    table_id = await open_table(
        s,
        "taixiu",
        players,
        [10_000, *([3_000] * 6)],
        stake_gold=10,
        options={"mode": "p2p", "betting_window_s": "5"},
    )
    hand_id = (await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    outcomes = await asyncio.gather(
        *(try_bet(s, table_id, hand_id, p, seat, wager(seat, "tai", 3_000)) for seat, p in enumerate(players) if seat)
    )
    assert sorted(outcomes) == ["", "", "", "BANKER_CAPACITY", "BANKER_CAPACITY", "BANKER_CAPACITY"], outcomes
    assert await bank(s) == (0, 0)  # a p2p hand holds nothing of the house
    final = await hand_over(s, table_id, hand_id)
    assert body_names(final).count("wager_placed") == 3
    await s.settled(hand_id)
    await no_dead_letters(s)
    await cash_out(s, table_id, players)
    wallets = sum([await s.backend.balance(accounts.player(p)) for p in players])
    assert wallets + await s.backend.balance(accounts.HOUSE_FEES) == 10_000 + 6 * 3_000
    await audit_clean(s, tmp_path, hands=1)


async def test_a_chuong_banker_covered_by_many_players_racing_for_its_last_capacity(stack: GameStack) -> None:
    """Ba Cây Chương: the banker must cover twice every accepted bet (CH-2, a player's 10 is
    paid double); with 10,000 it covers five bets of 1,000, and eight players bet at once."""
    s = stack
    run = uuid.uuid4().hex[:6]
    players = [f"c{run}bank", *(f"c{run}x{i}" for i in range(8))]
    table_id = await open_table(
        s,
        "bacay_chuong",
        players,
        [10_000, *([2_000] * 8)],
        stake_gold=100,
        options={"fast_mode": "true", "betting_timeout_s": "4"},
    )
    hand_id = (await s.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    state = await s.backend.state(table_id)
    banker = next(e.hand_started.dealer_seat for e in state.events if e.WhichOneof("body") == "hand_started")
    assert banker == 0  # the room owner banks the first hand (CH-3)
    outcomes = await asyncio.gather(
        *(
            try_bet(s, table_id, hand_id, p, seat, wager(seat, "bet", 1_000))
            for seat, p in enumerate(players)
            if seat != banker
        )
    )
    assert sorted(outcomes) == [""] * 5 + ["BANKER_CAPACITY"] * 3, outcomes
    final = await hand_over(s, table_id, hand_id)  # the flips time out for everyone
    assert body_names(final).count("wager_placed") == 5
    record = await s.settled(hand_id)
    await no_dead_letters(s)
    banker_account = accounts.escrow(table_id, players[banker])
    paid = sum(t.amount_gold for t in record.transfers if t.from_account_id == banker_account)
    assert paid <= 10_000
    await cash_out(s, table_id, players)
    wallets = sum([await s.backend.balance(accounts.player(p)) for p in players])
    assert wallets == 10_000 + 8 * 2_000  # no fee at this table: gold only moved between players
