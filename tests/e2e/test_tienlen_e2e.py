"""Tiến Lên end to end (issue 14): hands played through the real table service until one
ends with a red 2 left in a loser's hand (thối heo đỏ) after a chop during play; the
settlement service posts it to the real ledger with those reasons at the amounts of RULES.md
9.4, and ``socai audit`` re-derives every card and posting clean, trial balance 0.

Cards come from a random seed per hand, so the test plays hands (its own moves, chosen from
the server's ``candidate_actions``) until the situation occurs, at most ``HANDS_MAX`` of them.
The players chop whenever they can, lead black 2s to invite chops and keep their red 2s.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from socai.cards import Card, parse_card
from socai.gen.ledger.v1 import ledger_pb2 as lpb
from socai.gen.settlement.v1 import settlement_pb2 as spb
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec
from socai.rules.climbing import shedding
from tests.support.e2e import GameStack, game_stack

pytestmark = [pytest.mark.e2e]

STAKE = 10
BUY_IN = 100_000  # 10 000 lá: no seat can run short, so every penalty is paid in full (GEN-4)
PLAYERS = 4
HANDS_MAX = 40
CHOPS = frozenset(
    (
        shedding.CHAT_HEO_DEN,
        shedding.CHAT_HEO_DO,
        shedding.CHAT_DOI_HEO,
        shedding.CHAT_BA_DOI_THONG,
        shedding.CHAT_TU_QUY,
        shedding.CHAT_BON_DOI_THONG,
        shedding.CHAT_DE,
    )
)
# RULES.md 9.4, written out here rather than read from the engine: a 2 is 5 lá (black) or
# 10 (red); ba đôi thông 10, tứ quý 20, bốn đôi thông 30.
TWO_STAKES = {False: 5, True: 10}
GROUP_STAKES = {(4, True): 20, (6, False): 10, (8, False): 30}


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


def cards_of(action: pb.PlayerAction) -> list[Card]:
    return [parse_card(c) for c in action.play.cards]


def group_key(cards: list[Card]) -> tuple[int, bool] | None:
    """(cards, tứ quý?) of a tứ quý or a run of three or four pairs, the plays that chop
    (9.2); None for anything else."""
    ranks = sorted(c.rank for c in cards)
    if len(cards) == 4 and len(set(ranks)) == 1:
        return (4, True)
    pairs = ranks[::2]
    run = pairs == list(range(pairs[0], pairs[0] + len(pairs))) if pairs else False
    if len(cards) in (6, 8) and ranks[1::2] == pairs and run and shedding.TWO not in ranks:
        return (len(cards), False)
    return None


def twos(cards: list[Card]) -> bool:
    return bool(cards) and all(c.rank == shedding.TWO for c in cards) and len(cards) <= 2


def choose(rng: random.Random, candidates: list[pb.PlayerAction]) -> pb.PlayerAction:
    """Chop when possible; lead or follow with a black 2 now and then (so it can be
    chopped); never give up a red 2 unless it is all there is to lead; keep groups."""
    plays = [a for a in candidates if a.WhichOneof("action") == "play"]
    following = any(a.WhichOneof("action") == "pass" for a in candidates)
    if following:
        chops = [a for a in plays if group_key(cards_of(a))]
        if chops:
            return chops[0]
    keep_red = [a for a in plays if not any(c.rank == shedding.TWO and c.is_red for c in cards_of(a))]
    black_twos = [a for a in keep_red if [c.rank for c in cards_of(a)] == [shedding.TWO]]
    if black_twos and rng.random() < 0.7:
        return black_twos[0]
    no_groups = [a for a in keep_red if not group_key(cards_of(a))]
    pool = no_groups or keep_red or ([] if following else plays)
    if following and (not pool or rng.random() < 0.25):
        return next(a for a in candidates if a.WhichOneof("action") == "pass")
    return rng.choice(pool)


@dataclass
class Hand:
    hand_id: str
    dealt: dict[int, list[Card]] = field(default_factory=dict)
    # (seat, cards, led): every play of the hand, in order.
    plays: list[tuple[int, list[Card], bool]] = field(default_factory=list)

    def left(self, seat: int) -> list[Card]:
        played = {c for s, cards, _ in self.plays if s == seat for c in cards}
        return [c for c in self.dealt[seat] if c not in played]

    def rounds(self) -> list[list[tuple[int, list[Card]]]]:
        out: list[list[tuple[int, list[Card]]]] = []
        for seat, cards, led in self.plays:
            if led or not out:
                out.append([])
            out[-1].append((seat, cards))
        return out


def chop_of(round_: list[tuple[int, list[Card]]]) -> tuple[int, int, int, str] | None:
    """(payer seat, payee seat, lá, reason) of a round's chop chain (9.4, TL-6), by hand."""
    for i in range(1, len(round_)):
        chopped, chopper = round_[i - 1][1], round_[i][1]
        if group_key(chopper) and (twos(chopped) or group_key(chopped)):
            chain = round_[i - 1 :]
            assert all(group_key(cards) for _, cards in chain[1:]), chain
            valued: list[tuple[int, str]] = []
            for _, cards in chain[:-1]:
                key = group_key(cards)
                if key is None:
                    lá = sum(TWO_STAKES[c.is_red] for c in cards)
                    reason = (
                        shedding.CHAT_DOI_HEO
                        if len(cards) == 2
                        else shedding.CHAT_HEO_DO
                        if cards[0].is_red
                        else shedding.CHAT_HEO_DEN
                    )
                else:
                    lá = GROUP_STAKES[key]
                    reason = {
                        (4, True): shedding.CHAT_TU_QUY,
                        (6, False): shedding.CHAT_BA_DOI_THONG,
                        (8, False): shedding.CHAT_BON_DOI_THONG,
                    }[key]
                valued.append((lá, reason))
            reason = valued[0][1] if len(valued) == 1 else shedding.CHAT_DE
            return chain[-2][0], chain[-1][0], sum(v for v, _ in valued), reason
    return None


async def play_hand(s: GameStack, table_id: str, players: list[str], rng: random.Random) -> Hand:
    b = s.backend
    hand = Hand((await b.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id)
    for seat, player in enumerate(players):
        mine = await b.state(table_id, player)
        assert mine.hand_id == hand.hand_id
        dealt = next(e.cards_dealt for e in mine.events if e.WhichOneof("body") == "cards_dealt")
        hand.dealt[seat] = [parse_card(d.card) for d in dealt.cards if d.seat == seat]
        assert len(hand.dealt[seat]) == 13
    for _ in range(600):
        view = await b.state(table_id)
        if view.hand_id != hand.hand_id or view.table.status == pb.TABLE_STATUS_WAITING:
            return hand
        if not view.to_act:
            await asyncio.sleep(0.01)
            continue
        seat = view.to_act[0]
        mine = await b.state(table_id, players[seat])
        if not mine.candidate_actions or mine.hand_id != hand.hand_id:
            continue
        candidates = list(mine.candidate_actions)
        action = choose(rng, candidates)
        await b.act(table_id, players[seat], seat, action, hand_id=hand.hand_id)
        if action.WhichOneof("action") == "play":
            led = not any(a.WhichOneof("action") == "pass" for a in candidates)
            hand.plays.append((seat, cards_of(action), led))
    raise AssertionError(f"hand {hand.hand_id} did not end")


def paid(settlement: spb.Settlement, reasons: frozenset[str]) -> Counter[tuple[str, str, str]]:
    """Gold by (payer account, payee account, reason) for ``reasons``."""
    out: Counter[tuple[str, str, str]] = Counter()
    for t in settlement.transfers:
        if t.reason in reasons:
            out[(t.from_account_id, t.to_account_id, t.reason)] += t.amount_gold
    return out


async def test_a_hand_with_a_chop_and_a_red_two_left_settles_and_audits_clean(stack: GameStack) -> None:
    s = stack
    b = s.backend
    players = [f"p{i}" for i in range(PLAYERS)]
    table_id = await b.create(
        "tienlen",
        owner_player_id=players[0],
        stake_gold=STAKE,
        seats_max=PLAYERS,
        buy_in_min_gold=BUY_IN,
        buy_in_max_gold=BUY_IN,
        turn_timeout_s=60,  # nobody times out: every play is one the test chose
    )
    for i, player in enumerate(players):
        await b.deposit(player, BUY_IN)
        assert await b.join(table_id, player, BUY_IN, seat=i) == i
    rng = random.Random(14)
    played: list[Hand] = []
    found: tuple[Hand, spb.Settlement] | None = None
    for _ in range(HANDS_MAX):
        hand = await play_hand(s, table_id, players, rng)
        played.append(hand)
        settlement = await s.settled(hand.hand_id)
        reasons = {t.reason for t in settlement.transfers}
        if shedding.THOI_HEO_DO in reasons and reasons & CHOPS:
            found = hand, settlement
            break
    assert found is not None, f"none of {len(played)} hands had both a chop and a red 2 left in a loser's hand"
    hand, settlement = found
    assert settlement.game == "tienlen" and settlement.table_id == table_id
    account = {r.seat: r.account_id for r in settlement.seats}
    assert sorted(account) == list(range(PLAYERS))

    # Who went out first, and what each loser still held (dealt minus played).
    winners = [seat for seat in hand.dealt if not hand.left(seat)]
    assert len(winners) == 1, winners
    winner = winners[0]

    # Thối heo đỏ: every red 2 left in a loser's hand costs that loser 10 lá (9.4), to the winner.
    expected_thoi: Counter[tuple[str, str, str]] = Counter()
    for seat in hand.dealt:
        for card in hand.left(seat):
            if seat != winner and card.rank == shedding.TWO and card.is_red:
                expected_thoi[(account[seat], account[winner], shedding.THOI_HEO_DO)] += 10 * STAKE
    assert expected_thoi, "a red 2 was left in a loser's hand"
    assert paid(settlement, frozenset({shedding.THOI_HEO_DO})) == expected_thoi

    # Chặt: each round's chop chain, priced by hand from the plays the test made.
    expected_chops: Counter[tuple[str, str, str]] = Counter()
    for round_ in hand.rounds():
        chop = chop_of(round_)
        if chop is not None:
            payer, payee, lá, reason = chop
            expected_chops[(account[payer], account[payee], reason)] += lá * STAKE
    assert expected_chops, "a chop happened during play"
    assert paid(settlement, CHOPS) == expected_chops
    # ... and each chop's line in the settlement record says which rule and plays caused it
    for t in settlement.transfers:
        if t.reason in CHOPS:
            assert re.fullmatch(r"[0-9A-Z][^;]*; plays? \d+(, \d+)*", t.detail), t

    # The per-reason totals the settlement reports agree, and nobody ran short.
    for reason in {shedding.THOI_HEO_DO, *(r for _, _, r in expected_chops)}:
        want = sum(v for k, v in (expected_thoi + expected_chops).items() if k[2] == reason)
        assert settlement.penalties_gold[reason] == want, reason
    assert list(settlement.shortfalls) == []

    # The ledger holds the hand once, under its key, balanced, each seat moved by its net.
    ledger = s.auditor
    tx = (
        await ledger.GetTransaction(lpb.GetTransactionRequest(idempotency_key=settlement.idempotency_key))
    ).transaction
    assert settlement.idempotency_key == f"settle:{hand.hand_id}"
    assert tx.transaction_id == settlement.ledger_transaction_id
    assert sum(e.amount_gold for e in tx.entries) == 0

    # The audit re-derives every card and posting of every hand played: clean.
    audit = await s.socai("audit")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert f"ledger: {len(played)} hand transactions checked by idempotency key" in audit.stdout
    assert "mismatches: none; the audit is clean" in audit.stdout
    trial = await ledger.TrialBalance(lpb.TrialBalanceRequest())
    assert trial.total_gold == 0
