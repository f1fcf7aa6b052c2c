"""The table holds house:bank for its hands against the system (issue 27, item 2): the real
table service and the real ledger, no settlement (so what releases a hold here is the
table's own finalize at the end of the hand, never a settlement).

A hold follows the hand's worst case up (only up), and when the hand ends it becomes what
the hand's settlement will debit the bank (0 releases it). A finalize the ledger missed is
retried by the table's watchdog; a table rebuilt in the middle of a hand (a crash after its
hold and before its event) asks again for what it holds, which changes nothing.
"""

from __future__ import annotations

import asyncio
import uuid

import grpc
import pytest

from socai import accounts, errors
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.grpc_errors import error_reason
from tests.integration.table.conftest import World, seat_players
from tests.support.clients import body_names, wager
from tests.support.e2e import until

pytestmark = pytest.mark.integration

BANK = accounts.HOUSE_BANK
SYSTEM = {"mode": "system", "betting_window_s": "1"}


async def fund_bank(w: World, amount: int) -> None:
    await w.backend.cashier.Transfer(
        lpb.TransferRequest(
            idempotency_key=f"bank-{uuid.uuid4().hex}",
            from_account_id=accounts.EXTERNAL_CASHIER,
            to_account_id=BANK,
            amount_gold=amount,
            kind="bankroll",
        )
    )


async def held(w: World) -> int:
    return int((await w.backend.ledger.GetAccount(lpb.GetAccountRequest(account_id=BANK))).account.held_gold)


async def hold_of(w: World, hand_id: str) -> lpb.Hold:
    listed = await w.backend.ledger.ListHolds(lpb.ListHoldsRequest(account_id=BANK, include_released=True))
    (found,) = [h for h in listed.holds if h.hand_id == hand_id]
    return found


async def ended(w: World, table_id: str, hand_id: str) -> pb.TableState:
    async def done() -> pb.TableState | None:
        state = await w.backend.state(table_id)
        return state if state.hand_id == hand_id and "hand_ended" in body_names(state) else None

    return await until(f"{hand_id} to end", done)


def bank_debit(dice: list[int], tai_gold: int) -> int:
    """What a lone Tài bet's settlement debits the bank: its stake when Tài wins."""
    total = sum(dice)
    return tai_gold if 11 <= total <= 17 and len(set(dice)) > 1 else 0


async def test_the_hold_follows_the_worst_case_up_and_the_outcome_finalizes_it(world: World) -> None:
    w = world
    await fund_bank(w, 10_000)
    table_id, (a, b) = await seat_players(
        w, "taixiu", [5_000, 5_000], stake_gold=10, seats_max=2, buy_in_max_gold=5_000, options=SYSTEM
    )

    hedged = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    await w.backend.act(table_id, a, 0, wager(0, "tai", 1_000), hand_id=hedged)
    assert await held(w) == 1_000
    await w.backend.act(table_id, b, 1, wager(1, "xiu", 1_000), hand_id=hedged)
    assert await held(w) == 1_000  # the worst case fell to 0; a hold only grows while betting
    await ended(w, table_id, hedged)

    async def released() -> bool:
        return (await hold_of(w, hedged)).status == lpb.HOLD_STATUS_RELEASED

    await until("the hedged hand's hold to be released by its outcome", released)
    hold = await hold_of(w, hedged)
    assert (hold.released_by, hold.amount_gold) == ("outcome", 1_000)

    lone = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    await w.backend.act(table_id, a, 0, wager(0, "tai", 2_000), hand_id=lone)
    final = await ended(w, table_id, lone)
    debit = bank_debit(list(final.events[-2].dice_rolled.dice), 2_000)

    async def finalized() -> bool:
        return (await hold_of(w, lone)).status != lpb.HOLD_STATUS_OPEN

    await until("the lone bet's hold to be finalized", finalized)
    hold = await hold_of(w, lone)
    if debit:  # Tài won: the bank owes 2,000 until the settlement posts it
        assert (hold.status, hold.amount_gold, await held(w)) == (lpb.HOLD_STATUS_FINAL, debit, debit)
    else:
        assert (hold.status, hold.released_by, await held(w)) == (lpb.HOLD_STATUS_RELEASED, "outcome", 0)


async def test_a_finalize_the_ledger_missed_is_retried_by_the_watchdog(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = world
    await fund_bank(w, 10_000)
    table_id, (a, _) = await seat_players(
        w, "taixiu", [5_000, 5_000], stake_gold=10, seats_max=2, buy_in_max_gold=5_000, options=SYSTEM
    )
    money = w.running.apps["table"].money
    finalize = money.finalize_hold
    missed: list[str] = []

    async def unreachable_once(hand_id: str, amount_gold: int) -> None:
        if not missed:
            missed.append(hand_id)
            raise errors.Unavailable("LEDGER_UNAVAILABLE", "the ledger did not answer")
        await finalize(hand_id, amount_gold)

    monkeypatch.setattr(money, "finalize_hold", unreachable_once)
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    await w.backend.act(table_id, a, 0, wager(0, "tai", 3_000), hand_id=hand_id)
    await ended(w, table_id, hand_id)

    table = w.running.apps["table"].manager.tables[table_id]

    async def finalized() -> bool:
        # The ledger commits the finalize before the table hears its answer and forgets the
        # hand: wait for both, or the check races the table's own bookkeeping.
        return (await hold_of(w, hand_id)).status != lpb.HOLD_STATUS_OPEN and not table.holds_to_finalize

    await until("the watchdog to finalize the hold", finalized)
    assert missed == [hand_id]
    assert table.holds_to_finalize == {}


async def test_a_table_rebuilt_between_its_hold_and_its_event_asks_again_and_changes_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = world
    await fund_bank(w, 10_000)
    table_id, (a, b) = await seat_players(
        w,
        "taixiu",
        [5_000, 5_000],
        stake_gold=10,
        seats_max=2,
        buy_in_max_gold=5_000,
        options={**SYSTEM, "betting_window_s": "4"},
    )
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    await w.backend.act(table_id, a, 0, wager(0, "tai", 1_000), hand_id=hand_id)
    log = w.running.apps["table"].manager.deps.log
    append = log.append
    lost: list[int] = []

    async def lost_once(*args: object, **kwargs: object) -> int:
        if not lost:
            lost.append(1)
            raise errors.Unavailable("NATS_UNAVAILABLE", "the event was not stored")
        return await append(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(log, "append", lost_once)
    # The hold of the second Tài (3,000 in all) is made, its event is lost: the table is
    # behind its log and rebuilds itself before the next command.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await w.backend.act(table_id, a, 0, wager(0, "tai", 2_000), hand_id=hand_id)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, caught.value
    assert await held(w) == 3_000  # more than the log's bets need: it only costs capacity
    # The rebuilt table knows only the first Tài; the next bet asks for 1,500, which the
    # hold already covers.
    for attempt in range(20):
        try:
            await w.backend.act(table_id, b, 1, wager(1, "tai", 500), key="tai-500", hand_id=hand_id)
            break
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
            await asyncio.sleep(0.1 * (attempt + 1))
    state = await w.backend.state(table_id)
    assert [e.wager_placed.amount_gold for e in state.events if e.WhichOneof("body") == "wager_placed"] == [1_000, 500]
    assert await held(w) == 3_000
    final = await ended(w, table_id, hand_id)
    debit = bank_debit(list(final.events[-2].dice_rolled.dice), 1_500)

    async def finalized() -> bool:
        return (await hold_of(w, hand_id)).status != lpb.HOLD_STATUS_OPEN

    await until("the hold to be finalized", finalized)
    assert await held(w) == debit  # the outcome trimmed the lost bet's hold away


async def test_a_bet_the_house_bank_cannot_cover_writes_nothing_and_says_what_is_free(world: World) -> None:
    w = world
    await fund_bank(w, 700)
    table_id, (a, _) = await seat_players(
        w, "taixiu", [5_000, 5_000], stake_gold=10, seats_max=2, buy_in_max_gold=5_000, options=SYSTEM
    )
    hand_id = (await w.backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    before = await w.stored(table_id, hand_id)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await w.backend.act(table_id, a, 0, wager(0, "single", 300, 4), hand_id=hand_id)  # may pay 900
    assert error_reason(caught.value) == "BANKER_CAPACITY"
    assert "700 is free" in (caught.value.details() or "")
    assert await w.stored(table_id, hand_id) == before and await held(w) == 0
    await w.backend.act(table_id, a, 0, wager(0, "single", 233, 4), hand_id=hand_id)  # may pay 699
    assert await held(w) == 699
