"""What a scripted batch hunts for (``tests.golden.script``), game by game: each rare goal
with the table that can reach it, the bots that steer towards it and, for a rare deal, a
search over seeds.

A goal is a reason code a game declares (``REASONS``) or a finer goal written
``reason:detail``: Mậu Binh's special hands, each paid under ``special_hand`` whatever the
special, are goals ``special_hand:<id>`` (``maubinh_hands.SPECIAL_HANDS``), told apart by the
dealt cards of the seat the special hand paid (``hand_goals``).

Every deal of a scripted batch comes from a real seed: a search draws 32-byte seeds from
the hunt's random generator, deals each with ``socai.fairness.shuffle`` exactly as the table
would, and lets the table play the first seed whose deal holds what the goal needs. Every
move is one the rules engine accepts at that point (the replay of the batch checks each
one): the bots choose among the legal moves, and may look at every seat's cards to steer
the hand (a bot that saves the 3♠ for last, one that declares Sâm only with a hand nobody
can beat, one that leads a four so that a higher four can chop it).

A deal too rare for any seed search (``ENGINE_ONLY``, each with its odds) is built instead:
its ``ENGINE_TARGETS`` choose the deck the first hand deals (``Target.deck_for``), drawn
from the hunt's generator and checked to hold what the goal needs, and the bots play it as
above. Such hands make an ``engine`` batch (``python -m tests.golden script --engine``):
no seed deals those cards, so they pin only what the rules engine makes of the deal.

Goals no run reaches at all (a reason no hand can pay) would be in ``UNREACHED``, each with
why, and are not hunted (tests/golden/README.md).
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from socai import accounts, cards, fairness
from socai.cards import ACE, JACK, Card
from socai.errors import check
from socai.events.model import (
    Arranged,
    Body,
    CardsDealt,
    CardSent,
    CardsPlayed,
    CardTaken,
    Declared,
    Event,
    HandStarted,
    MeldsLaid,
    Passed,
    PlayerLeft,
)
from socai.rules import autoplay, base, registry
from socai.rules.chinese_poker import maubinh_hands
from socai.rules.climbing import shedding, shedding_play
from socai.rules.climbing.shedding import Combination, SheddingRules
from tests.support.synthetic import GameSetup, random_bot

Bot = Callable[[ModuleType, random.Random], autoplay.Chooser]
# seed_for(rng) -> (hand number -> the seed to deal it with, or None for a random one)
SeedSearch = Callable[[random.Random], Callable[[int], bytes | None]]
# deck_for(rng) -> (hand number -> the cards to deal it, in order, or None for its seed's shuffle)
DeckChoice = Callable[[random.Random], Callable[[int], Sequence[Card] | None]]

HANDS_PER_TABLE: Final = 6
TABLES_PER_TARGET_MAX: Final = 20_000  # a limit on every hunt
DEALS_PER_SEARCH_MAX: Final = 400_000  # a limit on every seed search (about 15 s of shuffles)
DECKS_PER_CHOICE_MAX: Final = 2_000  # a limit on the draws of one chosen deck (a few are enough)


@dataclass(frozen=True)
class Target:
    """How to hunt for hands of ``game`` reaching ``reason`` (a goal: a reason code, or
    ``reason:detail``): the table's setup (None: the game's generic one), the bots, and
    optionally a seed search for the first hand's deal, or (an ``engine`` target) the deck
    it deals instead of its seed's shuffle. Each hunted table plays ``hands`` hands, then
    is closed (``close``: a carried pot goes back in a closing hand)."""

    game: str
    reason: str
    setup: GameSetup | None = None
    bot: Bot = random_bot
    seed_for: SeedSearch | None = None
    deck_for: DeckChoice | None = None
    hands: int = HANDS_PER_TABLE
    tables_max: int = TABLES_PER_TARGET_MAX
    close: bool = False


# --- goals ------------------------------------------------------------------------------

SPECIAL: Final = "special_hand"


def special_goal(kind: str) -> str:
    return f"{SPECIAL}:{kind}"


# Goals no seed search reaches within a scripted run, "game:goal" → why: a deal too rare,
# with the odds that a deal holds it (Mậu Binh: 4 seats, 4 × the hands of the kind /
# C(52, 13); Sâm Lốc: 5 seats of 10 cards). A search needs 1 / odds shuffles on average, at
# about 30 µs a shuffle here (``fairness.shuffle``), so 10⁷ shuffles are five minutes of one
# core. They are reached by ``ENGINE_TARGETS`` instead, from chosen decks, in an ``engine``
# batch (tests/golden/README.md, "Engine batches").
ENGINE_ONLY: Final[Mapping[str, str]] = {
    "maubinh:special_hand:dragon_roll": "13 cards of one suit: 4 × 4 / C(52,13) = 2.5e-11 a deal",
    "maubinh:special_hand:twelve_royals": "13 of the 16 J, Q, K, A: 4 × 560 / C(52,13) = 3.5e-9 a deal",
    "maubinh:special_hand:three_quads": "4-4-4-1: 4 × C(13,3) × 10 × 4 / C(52,13) = 7.2e-8 a deal",
    "maubinh:special_hand:three_straight_flushes": "two 5-card and a 3-card straight flush: 4 × 21,744 / C(52,13) = 1.4e-7 a deal",
    "samloc:chat_hai_tu_quy": "two seats each holding two tứ quý: about 10 × 4.7e-6 × 1.7e-5 = 8e-10 a deal",
}

# Goals no run reaches at all, "game:goal" → why (a reason no hand can pay): none today.
# They are not hunted, and the corpus is not asked for them.
UNREACHED: Final[Mapping[str, str]] = {}

# Goals besides every game's reason codes: each special hand a recorded hand paid.
EXTRA_GOALS: Final[Mapping[str, frozenset[str]]] = {
    "maubinh": frozenset(special_goal(k) for k in maubinh_hands.SPECIAL_HANDS),
}


def wanted_goals(game: str) -> set[str]:
    """What the corpus should hold of ``game``: every reason code it declares and its extra
    goals, less what no run reaches (``UNREACHED``)."""
    goals = set(registry.get(game).REASONS) | set(EXTRA_GOALS.get(game, ()))
    return {g for g in goals if f"{game}:{g}" not in UNREACHED}


def hand_goals(game: str, events: Sequence[Event], transfers: Iterable[Sequence[Any]]) -> set[str]:
    """The goals one hand reached: the reasons of its ``transfers`` (rows ``[from, to, gold,
    reason, detail]``) and, in Mậu Binh, ``special_hand:<id>`` for each special hand that a
    ``special_hand`` transfer paid (its seat's dealt cards tell which special it is)."""
    rows = [tuple(row) for row in transfers]
    goals = {str(row[3]) for row in rows}
    if game != "maubinh" or SPECIAL not in goals:
        return goals
    started = events[0].body
    assert isinstance(started, HandStarted)
    paid_to = {row[1] for row in rows if row[3] == SPECIAL}
    dealt: dict[int, list[Card]] = {}
    for event in events:
        if isinstance(event.body, CardsDealt):
            for card in event.body.cards:
                dealt.setdefault(card.seat, []).append(card.card)
    for info in started.seats:
        kind = maubinh_hands.special_hand(dealt[info.seat]) if len(dealt.get(info.seat, ())) == 13 else None
        if kind is not None and accounts.escrow(started.table_id, info.player_id) in paid_to:
            goals.add(special_goal(kind))
    return goals


# --- setups and deals ----------------------------------------------------------------------


def setup(
    game: str,
    players: int,
    options: Mapping[str, str] | None = None,
    *,
    stake_gold: int = 100,
    buy_in_gold: int = 10_000,
    fee_bps: int | None = None,
    guilds: bool = False,
) -> GameSetup:
    """A table of exactly ``players`` seated players (seats_max the same, so each deal's
    hands are known from the seed alone), with ``options`` over the game's defaults."""
    module = registry.get(game)
    return GameSetup(
        seats_max=players,
        players_min=players,
        players_max=players,
        stake_gold=stake_gold,
        buy_in_gold=buy_in_gold,
        fee_bps=base.default_fee_bps(module, dict(options or {})) if fee_bps is None else fee_bps,
        options=dict(options or {}),
        guilds=guilds,
    )


CARDS_EACH: Final[Mapping[str, int]] = {"tienlen": 13, "samloc": 10, "maubinh": 13}


def dealt_hands(game: str, deck: Sequence[Card], players: int) -> list[tuple[Card, ...]]:
    """Each hand a shuffled ``deck`` deals in a hand of ``game`` with ``players`` seats, in
    dealing order from the first seat dealt: one card at a time round the table."""
    each = CARDS_EACH[game]
    return [tuple(deck[i : players * each : players]) for i in range(players)]


def deal_search(game: str, players: int, accept: Callable[[list[tuple[Card, ...]]], bool]) -> SeedSearch:
    """A seed search for the first hand of a table: the first of up to
    ``DEALS_PER_SEARCH_MAX`` seeds drawn from the hunt's generator whose deal ``accept``s
    (the hands of ``dealt_hands``); a random seed when none does. Later hands are random."""
    full = cards.deck(game)

    def search(rng: random.Random) -> Callable[[int], bytes | None]:
        def seed_for(number: int) -> bytes | None:
            if number != 1:
                return None
            for _ in range(DEALS_PER_SEARCH_MAX):
                seed = rng.randbytes(fairness.SEED_BYTES)
                if accept(dealt_hands(game, fairness.shuffle(seed, full), players)):
                    return seed
            return None

        return seed_for

    return search


def dealing_deck(game: str, hands: Sequence[Sequence[Card]], rest: Sequence[Card]) -> list[Card]:
    """The deck that deals ``hands`` (in dealing order from the first seat dealt, each of
    the game's ``CARDS_EACH``) to a table of ``len(hands)`` seats, ``rest`` undealt after
    them: ``dealt_hands`` of it gives ``hands`` back."""
    each = CARDS_EACH[game]
    check(all(len(h) == each for h in hands), f"a {game} hand is {each} cards")
    return [hand[k] for k in range(each) for hand in hands] + list(rest)


def deck_choice(
    game: str,
    players: int,
    make: Callable[[random.Random], Sequence[Sequence[Card]]],
    accept: Callable[[list[tuple[Card, ...]]], bool],
) -> DeckChoice:
    """Chosen decks for the first hand of a table (later hands deal their seed's shuffle):
    ``make`` draws the hands the goal needs from the hunt's generator, the rest of the
    game's deck is shuffled by it into the other seats and the undealt cards, the seats'
    dealing order is shuffled too, and the first of up to ``DECKS_PER_CHOICE_MAX`` such
    deals that ``accept`` accepts (the hands of ``dealt_hands``) is dealt; None (the seed's
    shuffle) when none is."""
    full = cards.deck(game)
    each = CARDS_EACH[game]

    def choice(rng: random.Random) -> Callable[[int], Sequence[Card] | None]:
        def deck_for(number: int) -> Sequence[Card] | None:
            if number != 1:
                return None
            for _ in range(DECKS_PER_CHOICE_MAX):
                wanted = [tuple(h) for h in make(rng)]
                taken = {c for h in wanted for c in h}
                rest = [c for c in full if c not in taken]
                rng.shuffle(rest)
                others = [tuple(rest[i * each : (i + 1) * each]) for i in range(players - len(wanted))]
                hands = [*wanted, *others]
                rng.shuffle(hands)
                if accept(hands):
                    return dealing_deck(game, hands, rest[(players - len(wanted)) * each :])
            return None

        return deck_for

    return choice


def _counts(hand: Iterable[Card]) -> Counter[int]:
    return Counter(c.rank for c in hand)


def _fours(hand: Iterable[Card]) -> list[int]:
    return [rank for rank, n in _counts(hand).items() if n == 4]


def _pairs_runs(hand: Iterable[Card], pairs: int) -> int:
    """How many runs of ``pairs`` consecutive pairs (3 … A, đôi thông) the hand holds."""
    counts = _counts(hand)
    ranks = range(3, ACE + 1)
    return sum(1 for r in ranks if all(counts.get(r + i, 0) >= 2 for i in range(pairs)))


def _two_holders(
    hands: Sequence[Sequence[Card]], first: Callable[[Sequence[Card]], bool], second: Callable[[Sequence[Card]], bool]
) -> bool:
    """Two different hands: one that ``first`` accepts and another that ``second`` does."""
    return any(first(a) and any(second(b) for j, b in enumerate(hands) if j != i) for i, a in enumerate(hands))


# --- bots -----------------------------------------------------------------------------------


def _hand_id(state: Any) -> str:
    started = getattr(state, "started", None)
    if isinstance(started, HandStarted):
        return started.hand_id
    value = getattr(state, "hand_id", "")
    return value if isinstance(value, str) else ""


def steady_bot(module: ModuleType, rng: random.Random) -> autoplay.Chooser:
    """Always the first candidate move: no timeouts, no disconnects, nobody leaves."""

    def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
        return candidates[0] if candidates else None

    return choose


def greedy_phom(module: ModuleType, rng: random.Random) -> autoplay.Chooser:
    """Phỏm: declares Ù (or Ù khan) whenever it can, takes every discard it may, lays its
    best melds and sends every card that fits; otherwise draws and throws its highest junk.
    Greedy takers make the third take of a player (``an_cay_n``), chốt takes and three
    takes in a row, so a later Ù is paid by one seat alone (``u_den``)."""

    def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
        for kind in (CardTaken, CardSent, MeldsLaid):
            for body in candidates:
                if isinstance(body, kind):
                    return body
        return candidates[0] if candidates else None

    return choose


def fouling_bot(module: ModuleType, rng: random.Random) -> autoplay.Chooser:
    """Mậu Binh: the lowest seat of each hand sends a fouled arrangement (ngược chi: its
    weakest cards behind, its strongest in front), which ``accept_fouled`` lets stand; the
    others send the suggested one."""

    def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
        if seat != min(state.hands) or not candidates:
            return candidates[0] if candidates else None
        ranked = sorted(state.hands[seat], key=lambda c: (c.rank, c.suit))
        back, middle, front = tuple(ranked[:5]), tuple(ranked[5:10]), tuple(ranked[10:])
        wheel = state.options.wheel_second_highest
        if maubinh_hands.is_valid_arrangement(front, middle, back, wheel):
            return candidates[0]
        return Arranged(seat, back, middle, front)

    return choose


# --- shedding games: Tiến Lên and Sâm Lốc -----------------------------------------------------


def _weakest(plays: Sequence[Combination], avoid: set[Card]) -> Combination | None:
    """The first play (``legal_plays`` order: kind, size, strength) that keeps ``avoid``."""
    free = [p for p in plays if not avoid.intersection(p.cards)]
    return free[0] if free else None


def _play(seat: int, play: Combination) -> Body:
    return CardsPlayed(seat, play.cards)


def _pass_or_lead(state: shedding_play.State, seat: int, plays: Sequence[Combination], avoid: set[Card]) -> Body:
    """Pass when following; when leading, the weakest lead that keeps ``avoid`` (else the
    weakest), or a pass when no lead is possible (Sâm Lốc SL-7 b)."""
    if state.leading and plays:
        return _play(seat, _weakest(plays, avoid) or plays[0])
    return Passed(seat)


Plan = tuple[tuple[int, Combination], ...]


@dataclass(frozen=True)
class ChopChain:
    """A chop chain to play: the bait (a play of one seat that ``bait`` accepts), then each
    chop of ``chops`` in turn, by the chopper and the bait's seat alternately, each a chop
    (``shedding.is_chop``) of the play before it that its predicate accepts. ``deal`` is a
    cheap test of a deal's hands (rank counts) run before the full plan search."""

    rules: SheddingRules
    bait: Callable[[Combination], bool]
    chops: tuple[Callable[[Combination], bool], ...]
    deal: Callable[[list[tuple[Card, ...]]], bool] = lambda hands: True
    avoid_instant_wins: bool = True


def _any(play: Combination) -> bool:
    return True


def chop_plan(hands: Mapping[int, Sequence[Card]], chain: ChopChain) -> Plan | None:
    """The first way the seats' ``hands`` can play ``chain``: (seat, play) per step."""
    rules = chain.rules
    seats = sorted(hands)
    for a in seats:
        for bait in shedding.legal_plays(hands[a], None, rules):
            if not chain.bait(bait):
                continue
            for b in seats:
                if b == a:
                    continue
                found = _chops(hands, chain, (a, b), [(a, bait)])
                if found is not None:
                    return found
    return None


def _chops(
    hands: Mapping[int, Sequence[Card]], chain: ChopChain, pair: tuple[int, int], plan: list[tuple[int, Combination]]
) -> Plan | None:
    step = len(plan) - 1
    if step == len(chain.chops):
        return tuple(plan)
    seat = pair[(step + 1) % 2]
    used = {c for s, p in plan if s == seat for c in p.cards}
    left = [c for c in hands[seat] if c not in used]
    over = plan[-1][1]
    for play in shedding.legal_plays(left, over, chain.rules):
        if shedding.is_chop(play, over, chain.rules) and chain.chops[step](play):
            found = _chops(hands, chain, pair, [*plan, (seat, play)])
            if found is not None:
                return found
    return None


def chop_deal(chain: ChopChain) -> Callable[[list[tuple[Card, ...]]], bool]:
    """A deal that can play ``chain`` (and, with ``avoid_instant_wins``, holds no instant
    win at the deal, which would end the hand before any play)."""

    def accept(hands: list[tuple[Card, ...]]) -> bool:
        if not chain.deal(hands):
            return False
        if chain.avoid_instant_wins and shedding.instant_winner(hands, chain.rules) is not None:
            return False
        return chop_plan(dict(enumerate(hands)), chain) is not None

    return accept


def chop_search(game: str, players: int, chain: ChopChain) -> SeedSearch:
    """Seeds whose deal can play ``chain`` (``chop_deal``)."""
    return deal_search(game, players, chop_deal(chain))


def chop_director(chain: ChopChain) -> Bot:
    """Bots that play ``chain`` when the deal allows it (``chop_plan`` on the dealt hands).

    The bait's seat wins a lead with its weakest plays that keep the chain's cards and
    leads the bait (or plays it at once on a play it beats while nobody in the chain has
    passed the round); each chopper plays its chop on the step before; every other seat,
    and the chain's seats out of their step, passes. After the chain everyone passes
    unless leading, so the hand ends quickly. No Sâm is declared."""

    def bot(module: ModuleType, rng: random.Random) -> autoplay.Chooser:
        plans: dict[str, Plan | None] = {}

        def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
            if state.phase == shedding_play.DECLARING:
                return Declared(seat, shedding_play.NO_SAM)
            hand = _hand_id(state)
            if hand not in plans:
                plans[hand] = chop_plan(state.hands, chain)
            plan = plans[hand]
            plays = shedding_play.plays_for(state, seat)
            if not plan or not _plan_alive(state, plan):
                return _pass_or_lead(state, seat, plays, set())
            done = _steps_done(state, plan)
            if done < len(plan) and plan[done][0] == seat and plan[done][1] in plays:
                step = plan[done][1]
                if done > 0 or state.leading or _may_bait(state, plan, step):
                    return _play(seat, step)
            reserved = {c for s, p in plan if s == seat for c in p.cards}
            if seat == plan[0][0] and not state.leading:
                top = shedding_play.top(state)
                keep = [p for p in plays if top is None or not shedding.is_chop(p, top.combination, chain.rules)]
                play = _weakest(keep, reserved)
                return _play(seat, play) if play is not None else Passed(seat)
            return _pass_or_lead(state, seat, plays, reserved)

        return choose

    return bot


def _steps_done(state: shedding_play.State, plan: Plan) -> int:
    """How many of the plan's steps end the current round's plays."""
    played = [(p.seat, p.combination.cards) for p in state.round_plays]
    for k in range(min(len(plan), len(played)), 0, -1):
        if played[-k:] == [(s, c.cards) for s, c in plan[:k]]:
            return k
    return 0


def _plan_alive(state: shedding_play.State, plan: Plan) -> bool:
    """Every step not yet played is still in its seat's hand, and the chain is unfinished."""
    done = _steps_done(state, plan)
    if done == len(plan):
        return False
    return all(set(c.cards) <= set(state.hands[s]) for s, c in plan[done:])


def _may_bait(state: shedding_play.State, plan: Plan, bait: Combination) -> bool:
    """The bait may go on the table's top play: it beats it and no seat of the chain has
    passed this round (it could not chop any more)."""
    top = shedding_play.top(state)
    if top is None:
        return True
    in_chain = {s for s, _ in plan}
    return not (in_chain & state.round_passed) and shedding.beats(bait, top.combination, state.variant.rules)


THREE_OF_SPADES: Final = shedding_play.THREE_OF_SPADES


def ba_bich_bot(*, block: bool) -> Bot:
    """Tiến Lên with ``dut_3_bich``: the seat holding the 3♠ keeps it for last, leading its
    other cards one at a time, strongest first, and beating a lead with its weakest card
    that is not the 3♠; the others pass unless leading. It goes out on the 3♠ (Đút 3 Bích)
    unless, with ``block``, another seat beats the play that left it holding the 3♠ alone
    (Thối 3 Bích: that seat saves the village)."""

    def bot(module: ModuleType, rng: random.Random) -> autoplay.Chooser:
        def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
            plays = shedding_play.plays_for(state, seat)
            held = state.hands[seat]
            top = shedding_play.top(state)
            if THREE_OF_SPADES in held:
                singles = [p for p in plays if p.kind == shedding.SINGLE and THREE_OF_SPADES not in p.cards]
                if state.leading:
                    return _play(seat, singles[-1] if singles else plays[0])
                return _play(seat, singles[0]) if singles else Passed(seat)
            if (
                block
                and top is not None
                and not state.leading
                and state.hands[top.seat] == (THREE_OF_SPADES,)
                and plays
            ):
                return _play(seat, plays[0])
            return _pass_or_lead(state, seat, plays, set())

        return choose

    return bot


@functools.lru_cache(maxsize=4096)
def _sam_line(hand: frozenset[Card], others: tuple[tuple[Card, ...], ...]) -> tuple[Combination, ...] | None:
    """Plays that take ``hand`` out with no other hand ever answering one (the last play
    needs no answer: it ends the hand), biggest plays tried first; None when there are none."""
    rules = shedding.SAMLOC
    cards_left = tuple(sorted(hand, key=lambda c: shedding._sort_key(c, rules)))
    plays = shedding.legal_plays(cards_left, None, rules)
    for play in plays:
        if len(play.cards) == len(cards_left):
            return (play,)
    for play in sorted(plays, key=lambda p: -len(p.cards)):
        if any(shedding.has_answer(other, play, rules) for other in others):
            continue
        rest = _sam_line(hand - set(play.cards), others)
        if rest is not None:
            return (play, *rest)
    return None


def sam_line(hands: Mapping[int, Sequence[Card]], seat: int) -> tuple[Combination, ...] | None:
    """A báo Sâm that cannot fail for ``seat`` against the other hands as they are."""
    others = tuple(tuple(h) for s, h in sorted(hands.items()) if s != seat and h)
    return _sam_line(frozenset(hands[seat]), others)


def sam_search(players: int) -> SeedSearch:
    """Seeds where some seat holds a Sâm nobody can catch, and nobody wins at the deal."""

    def accept(hands: list[tuple[Card, ...]]) -> bool:
        if shedding.instant_winner(hands, shedding.SAMLOC) is not None:
            return False
        return any(sam_line(dict(enumerate(hands)), seat) is not None for seat in range(len(hands)))

    return deal_search("samloc", players, accept)


def sam_bot(*, declare: str, others_catch: bool, leave: bool = False) -> Bot:
    """Sâm Lốc with báo Sâm: who declares (``declare``: ``"sure"`` a seat whose Sâm nobody
    can catch, ``"first"`` the first seat to lead), how the declarer plays (its sure line,
    else the plays holding a 2 first and the biggest first, so that it never ends on a lone
    2), and whether the others catch the Sâm when they can (``others_catch``; if not they
    pass, marked when they could have answered: đền trắng). With ``leave`` the declarer
    leaves at its first turn (đền báo). The others pass unless leading."""

    def bot(module: ModuleType, rng: random.Random) -> autoplay.Chooser:
        def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
            if state.phase == shedding_play.DECLARING:
                wants = (declare == "sure" and sam_line(state.hands, seat) is not None) or (
                    declare == "first" and seat == state.order[0]
                )
                return Declared(seat, shedding_play.SAM if wants and state.declarer is None else shedding_play.NO_SAM)
            plays = shedding_play.plays_for(state, seat)
            if seat == state.declarer:
                if leave:
                    return PlayerLeft(seat)
                line = sam_line(state.hands, seat)
                if line is not None and line[0] in plays:
                    return _play(seat, line[0])
                with_two = [p for p in plays if any(c.rank == shedding.TWO for c in p.cards)]
                pick = max(with_two or plays, key=lambda p: len(p.cards), default=None)
                return _play(seat, pick) if pick is not None else Passed(seat)
            top = shedding_play.top(state)
            if others_catch and plays and top is not None and top.seat == state.declarer and not state.leading:
                return _play(seat, plays[0])
            return _pass_or_lead(state, seat, plays, set())

        return choose

    return bot


# --- the targets --------------------------------------------------------------------------------


def _tl_chain(
    bait: Callable[[Combination], bool], chops: int, deal: Callable[[list[tuple[Card, ...]]], bool]
) -> ChopChain:
    return ChopChain(shedding.TIENLEN, bait, (_any,) * chops, deal, avoid_instant_wins=False)


def _groups(hand: Sequence[Card]) -> bool:
    """A Tiến Lên chopper: ba đôi thông, a tứ quý or bốn đôi thông."""
    return bool(_fours(hand)) or _pairs_runs(hand, 3) > 0


def _has_two(hand: Sequence[Card]) -> bool:
    return any(c.rank == shedding.TWO for c in hand)


TL_CHAINS: Final[Mapping[str, ChopChain]] = {
    "chat_ba_doi_thong": _tl_chain(
        lambda p: p.shape == "pairs_run3",
        1,
        lambda hands: _two_holders(hands, lambda h: _pairs_runs(h, 3) > 0, _groups),
    ),
    "chat_tu_quy": _tl_chain(
        lambda p: p.kind == shedding.FOUR,
        1,
        lambda hands: _two_holders(
            hands, lambda h: bool(_fours(h)), lambda h: bool(_fours(h)) or _pairs_runs(h, 4) > 0
        ),
    ),
    "chat_bon_doi_thong": _tl_chain(
        lambda p: p.shape == "pairs_run4",
        1,
        lambda hands: _two_holders(hands, lambda h: _pairs_runs(h, 4) > 0, lambda h: _pairs_runs(h, 4) > 0),
    ),
    "chat_de": _tl_chain(
        lambda p: p.shape == shedding.SHAPE_TWO,
        2,
        lambda hands: _two_holders(hands, lambda h: _has_two(h) and _groups(h), _groups),
    ),
}


def _sl_chain(
    bait: Callable[[Combination], bool],
    chops: tuple[Callable[[Combination], bool], ...],
    deal: Callable[[list[tuple[Card, ...]]], bool],
) -> ChopChain:
    return ChopChain(shedding.SAMLOC, bait, chops, deal)


def _two_fours(hand: Sequence[Card]) -> bool:
    return len([r for r in _fours(hand) if r != shedding.TWO]) >= 2


SL_CHAINS: Final[Mapping[str, ChopChain]] = {
    "chat_heo": _sl_chain(
        lambda p: p.shape == shedding.SHAPE_TWO,
        (lambda p: p.cards[0].rank != ACE,),
        lambda hands: _two_holders(hands, _has_two, lambda h: any(r not in (ACE, shedding.TWO) for r in _fours(h))),
    ),
    "chat_heo_tu_quy_a": _sl_chain(
        lambda p: p.shape == shedding.SHAPE_TWO,
        (lambda p: p.cards[0].rank == ACE,),
        lambda hands: _two_holders(hands, _has_two, lambda h: ACE in _fours(h)),
    ),
    "chat_doi_heo": _sl_chain(
        lambda p: p.shape == shedding.SHAPE_PAIR_OF_TWOS,
        (_any,),
        lambda hands: _two_holders(hands, lambda h: _counts(h)[shedding.TWO] >= 2, _two_fours),
    ),
    "chat_tu_quy": _sl_chain(
        lambda p: p.kind == shedding.FOUR,
        (_any,),
        lambda hands: _two_holders(hands, lambda h: bool(_fours(h)), lambda h: bool(_fours(h))),
    ),
    "chat_de": _sl_chain(
        lambda p: p.shape == shedding.SHAPE_TWO,
        (_any, _any),
        lambda hands: _two_holders(hands, lambda h: _has_two(h) and bool(_fours(h)), lambda h: bool(_fours(h))),
    ),
}


# Cheap necessary conditions of some special hands, tested before ``special_hand`` itself.
_SPECIAL_HINTS: Final[Mapping[str, Callable[[Sequence[Card]], bool]]] = {
    "dragon": lambda h: len({c.rank for c in h}) == 13,
    "all_big": lambda h: min(c.rank for c in h) >= 8,
    "all_small": lambda h: max(c.rank for c in h) <= 8,
    "one_colour": lambda h: len({c.is_red for c in h}) == 1,
    "four_triples": lambda h: sorted(_counts(h).values()) == [1, 3, 3, 3, 3],
}


def _specials(kind: str) -> Callable[[list[tuple[Card, ...]]], bool]:
    """A Mậu Binh deal where a hand is the special ``kind`` and no other hand is special."""
    hint = _SPECIAL_HINTS.get(kind, lambda h: True)

    def accept(hands: list[tuple[Card, ...]]) -> bool:
        if not any(hint(h) for h in hands):
            return False
        found = [maubinh_hands.special_hand(h) for h in hands]
        return found.count(kind) == 1 and sum(1 for k in found if k is not None) == 1

    return accept


def _maubinh_targets() -> list[Target]:
    table = setup("maubinh", 4)
    out = [
        Target(
            "maubinh",
            special_goal(kind),
            table,
            steady_bot,
            deal_search("maubinh", 4, _specials(kind)),
            hands=1,
            tables_max=3,
        )
        for kind in maubinh_hands.SPECIAL_HANDS
        if f"maubinh:{special_goal(kind)}" not in {**ENGINE_ONLY, **UNREACHED}
    ]
    out.append(
        Target("maubinh", "foul", setup("maubinh", 4, {"accept_fouled": "true"}), fouling_bot, hands=1, tables_max=20)
    )
    return out


TARGETS: Final[Mapping[str, list[Target]]] = {
    "bacay_ga": [
        Target("bacay_ga", "ga_pot_returned", setup("bacay_ga", 3), steady_bot, hands=2, tables_max=50, close=True)
    ],
    "maubinh": _maubinh_targets(),
    "phom": [
        Target(
            "phom",
            reason,
            setup("phom", 4, {"u_khan": "true"} if reason == "u_khan" else {}),
            greedy_phom,
            hands=2,
            tables_max=2_000,
        )
        for reason in ("an_cay_n", "u_den", "u_khan", "u_tron")
    ],
    "samloc": [
        *(
            Target(
                "samloc",
                reason,
                setup("samloc", 5),
                chop_director(chain),
                chop_search("samloc", 5, chain),
                hands=1,
                tables_max=10,
            )
            for reason, chain in SL_CHAINS.items()
        ),
        Target(
            "samloc",
            "sam_success",
            setup("samloc", 2),
            sam_bot(declare="sure", others_catch=True),
            sam_search(2),
            hands=1,
            tables_max=10,
        ),
        Target(
            "samloc",
            "den_trang",
            setup("samloc", 3),
            sam_bot(declare="first", others_catch=False),
            hands=1,
            tables_max=50,
        ),
        Target(
            "samloc",
            "sam_failed",
            setup("samloc", 3),
            sam_bot(declare="first", others_catch=True),
            hands=1,
            tables_max=50,
        ),
        Target(
            "samloc",
            "den_bao",
            setup("samloc", 3),
            sam_bot(declare="first", others_catch=True, leave=True),
            hands=1,
            tables_max=10,
        ),
    ],
    "taixiu": [
        Target(
            "taixiu",
            "guild_fee",
            setup(
                "taixiu",
                4,
                {"mode": "system", "guild_threshold_gold": "1000"},
                stake_gold=1_000,
                buy_in_gold=50_000,
                guilds=True,
            ),
            hands=2,
            tables_max=200,
        )
    ],
    "tienlen": [
        *(
            Target(
                "tienlen",
                reason,
                setup("tienlen", 4, {"instant_wins": "false"}),
                chop_director(chain),
                chop_search("tienlen", 4, chain),
                hands=1,
                tables_max=10,
            )
            for reason, chain in TL_CHAINS.items()
        ),
        Target(
            "tienlen",
            "dut_ba_bich",
            setup("tienlen", 4, {"dut_3_bich": "true"}),
            ba_bich_bot(block=False),
            hands=1,
            tables_max=50,
        ),
        Target(
            "tienlen",
            "thoi_ba_bich",
            setup("tienlen", 4, {"dut_3_bich": "true"}),
            ba_bich_bot(block=True),
            hands=1,
            tables_max=50,
        ),
    ],
}


# --- engine targets: chosen decks ------------------------------------------------------------


def _suit_run(rng: random.Random, suit: int, length: int) -> list[Card]:
    """``length`` cards of ``suit`` in a row, 2 … A (no wheel), starting where ``rng`` says."""
    low = rng.randint(2, ACE - length + 1)
    return [Card(rank, suit) for rank in range(low, low + length)]


def _three_straight_flushes(rng: random.Random) -> list[Card]:
    back, middle, front = rng.sample(range(4), 3)
    return [*_suit_run(rng, back, 5), *_suit_run(rng, middle, 5), *_suit_run(rng, front, 3)]


def _three_quads(rng: random.Random) -> list[Card]:
    *quads, single = rng.sample(range(2, ACE + 1), 4)
    return [Card(rank, suit) for rank in quads for suit in range(4)] + [Card(single, rng.randrange(4))]


# How to draw each special hand that ``ENGINE_ONLY`` names (13 cards; the deal's ``accept``
# checks with ``maubinh_hands.special_hand`` that it is that special and no higher one).
SPECIAL_DECKS: Final[Mapping[str, Callable[[random.Random], list[Card]]]] = {
    "dragon_roll": lambda rng: [Card(rank, suit) for suit in (rng.randrange(4),) for rank in range(2, ACE + 1)],
    "twelve_royals": lambda rng: rng.sample([c for c in cards.ALL_CARDS if c.rank >= JACK], 13),
    "three_straight_flushes": _three_straight_flushes,
    "three_quads": _three_quads,
}


def _one_hand(make: Callable[[random.Random], list[Card]]) -> Callable[[random.Random], list[list[Card]]]:
    return lambda rng: [make(rng)]


def _two_fours_pair(rng: random.Random) -> list[list[Card]]:
    """Sâm Lốc: two hands of two tứ quý each (ranks 3 … A), the second's higher, each with
    two more cards; the deal's ``accept`` checks that the second chops the first."""
    low_a, low_b, high_a, high_b = sorted(rng.sample(range(3, ACE + 1), 4))
    quads = [[Card(rank, suit) for rank in pair for suit in range(4)] for pair in ((low_a, low_b), (high_a, high_b))]
    spare = [c for c in cards.deck("samloc") if not any(c in q for q in quads)]
    extra = rng.sample(spare, 4)
    return [quads[0] + extra[:2], quads[1] + extra[2:]]


SL_TWO_FOURS_CHAIN: Final = _sl_chain(
    lambda p: p.kind == shedding.TWO_FOURS,
    (_any,),
    lambda hands: _two_holders(hands, _two_fours, _two_fours),
)


ENGINE_TARGETS: Final[Mapping[str, list[Target]]] = {
    "maubinh": [
        Target(
            "maubinh",
            special_goal(kind),
            setup("maubinh", 4),
            steady_bot,
            deck_for=deck_choice("maubinh", 4, _one_hand(make), _specials(kind)),
            hands=2,
            tables_max=3,
        )
        for kind, make in SPECIAL_DECKS.items()
    ],
    "samloc": [
        Target(
            "samloc",
            "chat_hai_tu_quy",
            setup("samloc", 5),
            chop_director(SL_TWO_FOURS_CHAIN),
            deck_for=deck_choice("samloc", 5, _two_fours_pair, chop_deal(SL_TWO_FOURS_CHAIN)),
            hands=2,
            tables_max=10,
        )
    ],
}
