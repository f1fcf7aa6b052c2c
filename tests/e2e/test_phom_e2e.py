"""End to end Phỏm (issue 15): a Phỏm table on the real table, ledger and settlement
services (real NATS, PostgreSQL and gRPC) plays hands through ``Act`` until one hand has
a draw from the stock (``Declared 'draw'`` and then a one-card ``CardsDealt`` to that
seat), a take (``CardTaken``) and a lay-down (``MeldsLaid`` with melds). While that hand
is in play every other seat's ``GetTableState`` shows each drawn card blank while the
drawer sees it. Every hand is played under Phỏm's current rules version. Settlement posts
every hand, and the audit re-derives every dealt card
(the mid-hand draws too) from the revealed seeds and every posting from the ledger:
clean, and the trial balance is 0."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import pairwise

import pytest

from socai.audit.auditor import reconcile, verify
from socai.audit.export import read_stream
from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec
from socai.rules.rummy import phom
from socai.settle.keys import find_settlement
from tests.support.clients import Backend
from tests.support.e2e import GameStack, game_stack

pytestmark = [pytest.mark.e2e]

PLAYERS = 4
BUY_IN = 5_000
STAKE = 100
HANDS_MAX = 8  # a hand with a draw, a take and a lay-down comes within a few
STEPS_PER_HAND = 400


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


@dataclass
class HandRecord:
    hand_id: str
    draws: int = 0  # Declared 'draw' followed by a one-card CardsDealt to the same seat
    takes: int = 0
    lays: int = 0  # MeldsLaid with at least one meld
    dealt_cards: int = 0
    # (event_id, seat, card as the drawer saw it) for each draw checked mid-hand
    drawn_seen: list[tuple[str, int, str]] = field(default_factory=list)


def names(state: pb.TableState) -> list[str]:
    return [str(e.WhichOneof("body")) for e in state.events]


def draws_in(events: list[epb.Event]) -> list[epb.Event]:
    """The one-card CardsDealt that follow a ``Declared(seat, 'draw')`` of the same seat."""
    out = []
    for before, after in pairwise(events):
        if (
            before.WhichOneof("body") == "declared"
            and before.declared.declaration == "draw"
            and after.WhichOneof("body") == "cards_dealt"
            and len(after.cards_dealt.cards) == 1
            and after.cards_dealt.cards[0].seat == before.declared.seat
        ):
            out.append(after)
    return out


async def check_draw_hidden(b: Backend, table_id: str, players: list[str], seat: int, rec: HandRecord) -> None:
    """After ``seat`` drew: the drawer sees its card; every other seat sees it blank."""
    mine = list((await b.state(table_id, players[seat])).events)
    drawn = draws_in(mine)
    assert drawn, "a draw was accepted but no one-card CardsDealt followed it"
    event = drawn[-1]
    card = event.cards_dealt.cards[0]
    assert card.seat == seat and card.card != "" and not card.face_up
    for other, player in enumerate(players):
        if other == seat:
            continue
        seen = await b.state(table_id, player)
        assert "hand_ended" not in names(seen), "checked while the hand was in play"
        same = [e for e in seen.events if e.event_id == event.event_id]
        assert len(same) == 1, f"seat {other} does not see the draw event"
        assert [(c.seat, c.card) for c in same[0].cards_dealt.cards] == [(seat, "")], (
            f"seat {other} can read seat {seat}'s drawn card"
        )
    rec.drawn_seen.append((event.event_id, seat, card.card))


async def play_hand(b: Backend, table_id: str, players: list[str], rng: random.Random) -> HandRecord:
    """Start a hand and play it to its end; a take is always chosen when offered."""
    hand_id = (await b.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    rec = HandRecord(hand_id)
    for _ in range(STEPS_PER_HAND):
        view = await b.state(table_id)
        assert view.hand_id == hand_id
        if "hand_ended" in names(view):
            break
        if not view.to_act:
            await asyncio.sleep(0.01)  # the table is dealing
            continue
        seat = view.to_act[0]
        mine = await b.state(table_id, players[seat])
        candidates = list(mine.candidate_actions)
        if not candidates:
            await asyncio.sleep(0.01)
            continue
        takes = [c for c in candidates if c.WhichOneof("action") == "take"]
        action = takes[0] if takes else rng.choice(candidates)
        await b.act(table_id, players[seat], seat, action, hand_id=hand_id)
        if action.WhichOneof("action") == "declare" and action.declare.declaration == "draw":
            await check_draw_hidden(b, table_id, players, seat, rec)
    else:
        raise AssertionError(f"hand {hand_id} did not end within {STEPS_PER_HAND} steps")

    # The hand is over: every card is public; count what it shows.
    final = list((await b.state(table_id)).events)
    assert final[-1].WhichOneof("body") == "hand_ended"
    # The table plays every new hand under Phỏm's current rules (version 2: every Phỏm laid).
    assert final[0].WhichOneof("body") == "hand_started"
    assert final[0].hand_started.rules_version == phom.RULES_VERSION == 2
    drawn = draws_in(final)
    rec.draws = len(drawn)
    rec.takes = sum(1 for e in final if e.WhichOneof("body") == "card_taken")
    rec.lays = sum(1 for e in final if e.WhichOneof("body") == "melds_laid" and len(e.melds_laid.melds) > 0)
    rec.dealt_cards = sum(len(e.cards_dealt.cards) for e in final if e.WhichOneof("body") == "cards_dealt")
    assert rec.draws == len(rec.drawn_seen)  # every draw was checked while the hand was in play
    revealed = {e.event_id: e.cards_dealt.cards[0] for e in drawn}
    for event_id, seat, card in rec.drawn_seen:
        assert (revealed[event_id].seat, revealed[event_id].card) == (seat, card)
    return rec


async def test_a_phom_hand_with_a_draw_a_take_and_a_lay_down_settles_and_audits_clean(stack: GameStack) -> None:
    b = stack.backend
    settings = stack.settings
    players = [f"ph{i}" for i in range(PLAYERS)]
    table_id = await b.create(
        "phom",
        owner_player_id=players[0],
        stake_gold=STAKE,
        fee_bps=300,
        seats_max=PLAYERS,
        buy_in_min_gold=BUY_IN,
        buy_in_max_gold=BUY_IN,
    )
    for i, player in enumerate(players):
        await b.deposit(player, BUY_IN * 2)
        assert await b.join(table_id, player, BUY_IN, seat=i) == i

    rng = random.Random(15)
    played: list[HandRecord] = []
    wanted: HandRecord | None = None
    for _ in range(HANDS_MAX):
        rec = await play_hand(b, table_id, players, rng)
        played.append(rec)
        if rec.draws and rec.takes and rec.lays:
            wanted = rec
            break
    assert wanted is not None, [(r.draws, r.takes, r.lays) for r in played]

    ledger = stack.auditor

    # Settlement posts every hand under its idempotency key.
    for _ in range(600):
        found = [await find_settlement(ledger, r.hand_id) for r in played]
        if all(f.transaction is not None for f in found):
            break
        await asyncio.sleep(0.05)
    else:
        missing = [r.hand_id for r, f in zip(played, found, strict=True) if f.transaction is None]
        raise AssertionError(f"settlement did not post {missing}")
    posted = await find_settlement(ledger, wanted.hand_id)
    assert posted.transaction is not None and posted.transaction.reference == wanted.hand_id
    assert sum(posted.entries.values()) == 0

    # The audit: every hand replayed from the stream, its cards from the revealed seed.
    log = stack.log
    raws = [r async for r in read_stream(log)]
    audit = verify(raws, source="stream")
    await reconcile(audit, ledger, ledger_name=settings.ledger_addr)
    trial = await ledger.TrialBalance(lpb.TrialBalanceRequest())

    report = audit.report
    assert report.mismatches == [], report.render()
    assert report.ok and not report.open_hands
    assert report.hands_verified == len(played)
    assert report.transactions_checked == len(played)
    assert report.escrows_checked == PLAYERS
    assert report.games["phom"].cards_verified == sum(r.dealt_cards for r in played)
    by_hand = {r.hand_id: r for r in audit.results}
    result = by_hand[wanted.hand_id]
    assert result.cards_verified == wanted.dealt_cards
    # Phỏm deals 9 cards a seat (10 to the first) before play: the rest are the draws.
    assert wanted.dealt_cards == 9 * PLAYERS + 1 + wanted.draws
    assert result.settlement.entries() == posted.entries
    assert int(trial.total_gold) == 0
