"""No face-down card of a live hand can be read from the event stream (issue 27, "Trust").

One hand of each of the eleven games is played through the real table service (bots choose
from the server's ``candidate_actions``). After every decision, while the hand is in play,
the whole stream is read by a client that is not the table service: its own NATS
connection as the auditor's user (the tests' nats-server has deploy/'s users:
tests/support/nats_users.py), holding none of the table's secrets (its signing, sealing and
seed keys), reading as the auditor does, by direct gets (``socai.audit.export.read_stream``).
Every string of every message of the live hand, at any depth, is compared with the cards the table holds at that moment: none may be a card a spectator
cannot see (a hole card, an unflipped Ba Cây card, a Mậu Binh arrangement, a card still in
the deck). Once the hand ends, settlement posts it and the settlement equals what the
rules engine makes of the table's own whole events, and the audit of the stream is clean.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from typing import Any

import grpc
import nats
import pytest

from socai.audit.export import RawEvent, read_stream
from socai.cards import deck
from socai.events.log import EventLog
from socai.events.model import HandEnded, HandStarted
from socai.gen.events.v1 import events_pb2 as epb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec
from socai.rules import registry
from socai.rules.autoplay import replay as fold
from socai.settle.replay import replay
from socai_table.simulate import options_for, players_for
from socai_table.table import Table
from tests.support.e2e import GameStack, game_stack
from tests.support.hidden import CARD_TEXTS, cards_written, spectator_cards

pytestmark = [pytest.mark.e2e]

BUY_IN = 20_000
STAKE = 10
STEPS_MAX = 400  # decisions per hand: a limit on everything
HANDS_MAX = 5  # hands of a game until one is live after its deal (an instant win ends it there)
CALM = (epb.ACTION_KIND_CHECK, epb.ACTION_KIND_CALL)


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


def passive_first(rng: random.Random, candidates: list[pb.PlayerAction]) -> pb.PlayerAction:
    """Check or call when possible (the hand lasts, more cards are dealt), else any move."""
    calm = [a for a in candidates if a.WhichOneof("action") == "bet" and a.bet.kind in CALM]
    return rng.choice(calm) if calm and rng.random() < 0.9 else rng.choice(candidates)


async def live_hand_checked(outsider: EventLog, table: Table, hand_id: str) -> set[str]:
    """Read the whole stream as ``outsider`` and compare the live hand's messages with what
    the table holds now; returns the cards the table holds hidden (none when the hand
    ended meanwhile: nothing is hidden any more)."""
    raws: list[RawEvent] = [raw async for raw in read_stream(outsider)]
    mine = [r for r in raws if r.message is not None and r.message.hand_id == hand_id]
    if any(r.message is not None and r.message.WhichOneof("body") == "hand_ended" for r in mine):
        return set()
    hand = table.hand
    if hand is None or hand.hand_id != hand_id:
        # It ended while the stream was read (a timer: a busy machine reads a long stream
        # slowly): its HandEnded is on the stream now.
        again = [raw async for raw in read_stream(outsider)]
        assert any(
            r.message is not None and r.message.hand_id == hand_id and r.message.WhichOneof("body") == "hand_ended"
            for r in again
        ), f"{hand_id} is no longer at the table, yet the stream has no HandEnded of it"
        return set()
    module = registry.get(hand.started.game)
    visible: set[str] = set()
    for event in hand.events:  # the table's whole events, as a spectator sees them now
        visible |= spectator_cards(module, event, hand.state)
    hidden_now = (CARD_TEXTS & {str(c) for c in deck(hand.started.game)}) - visible if module.SPEC.deck else set()
    for raw in mine:
        assert raw.message is not None
        leaked = cards_written(raw.message) & hidden_now
        assert not leaked, f"{raw.message.event_id} on the stream names {sorted(leaked)}, hidden at the table"
    # Every other hand in the stream has ended: no other live hand to look at.
    live = {r.message.hand_id for r in raws if r.message is not None and r.message.WhichOneof("body") == "hand_started"}
    ended = {r.message.hand_id for r in raws if r.message is not None and r.message.WhichOneof("body") == "hand_ended"}
    assert live - ended <= {hand_id}
    return hidden_now


async def audit_hand_shows_nothing_hidden(stack: GameStack, hand_id: str, hidden_now: set[str]) -> None:
    """``socai audit hand`` of the live hand (the issue's own example) prints no card the
    table holds hidden; its face-down cards show as unknown."""
    shown = await stack.socai("audit", "hand", hand_id, "--allow-open", "--no-ledger")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    printed = set(re.findall(r"\b[2-9TJQKA][scdh]\b", shown.stdout))
    assert not printed & hidden_now, shown.stdout
    assert "(??)>seat" in shown.stdout


async def play_one_hand(stack: GameStack, outsider: EventLog, game: str, rng: random.Random) -> tuple[str, str, int]:
    """Play a hand of ``game``, checking the stream after every decision; returns (table id,
    hand id, how many checks found cards hidden at the table)."""
    backend = stack.backend
    players = [f"{game}-p{i}" for i in range(players_for(game, 3))]
    table_id = await backend.create(
        game,
        owner_player_id=players[0],
        stake_gold=STAKE,
        seats_max=max(len(players), registry.get(game).SPEC.players_min),
        options=options_for(game, 1),
        turn_timeout_s=60,
        buy_in_min_gold=BUY_IN,
        buy_in_max_gold=BUY_IN,
    )
    for seat, player in enumerate(players):
        await backend.deposit(player, BUY_IN * 2)
        assert await backend.join(table_id, player, BUY_IN, seat=seat) == seat
    table = await stack.running.apps["table"].manager.get(table_id)
    for _ in range(HANDS_MAX):
        hand_id = (await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
        checked = await play_checked(stack, outsider, game, rng, players, table, table_id, hand_id)
        if checked or not registry.get(game).SPEC.deck:
            break  # else the deal ended the hand at once (an instant win, TL-4): play another
    return table_id, hand_id, checked


async def play_checked(
    stack: GameStack,
    outsider: EventLog,
    game: str,
    rng: random.Random,
    players: list[str],
    table: Any,
    table_id: str,
    hand_id: str,
) -> int:
    """Play ``hand_id`` out, checking the stream after every decision; how many checks found
    cards hidden at the table."""
    backend = stack.backend
    checked = 0
    for _ in range(STEPS_MAX):
        view = await backend.state(table_id)
        if view.hand_id != hand_id or any(e.WhichOneof("body") == "hand_ended" for e in view.events):
            break
        hidden_now = await live_hand_checked(outsider, table, hand_id)
        if hidden_now:
            checked += 1
            if checked == 1 and game == "holdem":
                await audit_hand_shows_nothing_hidden(stack, hand_id, hidden_now)
        if not view.to_act:
            await asyncio.sleep(0.05)  # a window runs (Tài Xỉu's bets, a declaration): its timer ends it
            continue
        seat = rng.choice(list(view.to_act))
        mine = await backend.state(table_id, players[seat])
        if seat not in mine.to_act or not mine.candidate_actions:
            await asyncio.sleep(0.05)
            continue
        try:
            await backend.act(
                table_id, players[seat], seat, passive_first(rng, list(mine.candidate_actions)), hand_id=hand_id
            )
        except grpc.aio.AioRpcError as exc:  # a timer moved the hand on between the two calls
            assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
    else:
        pytest.fail(f"{game}: {hand_id} did not end in {STEPS_MAX} steps")
    return checked


async def test_the_stream_of_a_live_hand_of_every_game_shows_no_hidden_card(stack: GameStack) -> None:
    rng = random.Random(27)
    # The auditor's NATS user: it may read the whole stream (direct gets), and nothing of the
    # table's secrets is in this process's reach through it.
    outsider_nc = await nats.connect(stack.running.nats_url_for("auditor"))
    try:
        outsider = EventLog(outsider_nc, stack.settings.events_stream, stack.settings.events_prefix)
        for game in registry.GAME_IDS:
            module = registry.get(game)
            table_id, hand_id, checked = await play_one_hand(stack, outsider, game, rng)
            if module.SPEC.deck:
                assert checked > 0, f"{game}: no moment of the hand had a hidden card to look for"
            stored = [s.event for s in await outsider.read_hand(table_id, hand_id)]
            started = stored[0].body
            assert isinstance(started, HandStarted) and started.face_down_by_position
            assert isinstance(stored[-1].body, HandEnded)
            # What settlement posts is what the rules engine makes of the table's whole hand.
            table = await stack.running.apps["table"].manager.get(table_id)
            whole = table.last_hand
            assert whole is not None and whole.hand_id == hand_id
            engine = module.settle(fold(module, [e.body for e in whole.events]))
            result = replay(stored)
            assert result.settlement == engine
            assert [e.body for e in result.events] == [e.body for e in whole.events]
            record = await stack.settled(hand_id)
            assert {s.seat: s.net_gold for s in record.seats} == dict(engine.nets), game
            assert sorted(
                (t.from_account_id, t.to_account_id, t.amount_gold, t.reason) for t in record.transfers
            ) == sorted((t.from_account, t.to_account, t.amount_gold, t.reason) for t in engine.transfers), game
    finally:
        await outsider_nc.close()

    audited = await stack.socai("audit", "--json", "/dev/stdout")
    assert audited.returncode == 0, audited.stdout + audited.stderr
