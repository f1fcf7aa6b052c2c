"""Simulated tables of bots: hands for tests, benchmarks and demos, published like the table does.

``simulate(hands=300)`` plays whole tables of every available game with
``socai.rules.autoplay.play_hand`` and deterministic random bots: each table seats a few
players with a buy-in, plays hands one after another (stacks carry over, the dealer
rotates) and records the events exactly as the table service will: HandStarted first,
HandEnded last, seq from 1, one subject per hand. ``publish`` appends them through
``socai.events.log.EventLog`` (``Nats-Msg-Id = event_id``, expected last subject sequence),
tables concurrently and each table's hands in order, so that hand n+1 of a table is in the
stream after hand n (its stacks depend on it). ``fund`` puts the buy-ins into the escrow
accounts through the real ledger (deposit to ``player:X``, then ``player:X`` →
``escrow:{table}:{X}``) and funds ``house:bank`` for Tài Xỉu against the house.

Table-level facts (TableOpened, PlayerSeated) go on the table's own subject, with
``hand_id = "{table_id}-t"`` and the table's own seq, as the table service writes them;
hands are ``"{table_id}-h{n}"``.

Like the table service, ``publish_hand`` chains every event (``Socai-Prev``) and seals each
HandEnded (``socai.events.seal``) with the development seal key, which settlement and the
auditor accept in development mode; ``signer=None`` publishes a hand nobody sealed.

With ``face_down_by_position`` the hands are logged as the table service logs them: no
face-down card in the clear (``socai.events.hidden``); without it, every card is written,
as in hands logged before (the recorded fixtures).

Everything is deterministic for a given ``seed`` (and ``at``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any, Final

from socai import accounts, cards, fairness
from socai.events import codec, hidden, seal
from socai.events.log import EventLog
from socai.events.model import (
    ActionKind,
    BetAction,
    Body,
    Event,
    HandEnded,
    HandStarted,
    PlayerDisconnected,
    PlayerLeft,
    PlayerReconnected,
    PlayerSeated,
    SeatInfo,
    TableOpened,
    WagerPlaced,
)
from socai.infra.config import Settings
from socai.rules import autoplay, base, registry
from socai.rules.base import Settlement
from socai.settle import replay

BANK_FUNDING_GOLD: Final = 10**12  # what ``fund`` deposits into house:bank (Tài Xỉu vs the house)
HANDS_PER_TABLE: Final = 10
EVENT_SPACING: Final = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class GameSetup:
    """How a simulated table of one game is set up."""

    seats_max: int
    players_min: int
    players_max: int
    stake_gold: int
    buy_in_gold: int
    fee_bps: int
    options: Mapping[str, str] = field(default_factory=dict)
    guilds: bool = False  # some players belong to guilds (guild fees)


SETUPS: Final[Mapping[str, GameSetup]] = {
    "holdem": GameSetup(seats_max=6, players_min=2, players_max=6, stake_gold=100, buy_in_gold=4_000, fee_bps=250),
    "xito": GameSetup(seats_max=5, players_min=2, players_max=5, stake_gold=100, buy_in_gold=3_000, fee_bps=300),
    "taixiu": GameSetup(
        seats_max=8,
        players_min=1,
        players_max=5,
        stake_gold=10,
        buy_in_gold=2_000,
        fee_bps=500,
        options={"mode": "system", "guild_threshold_gold": "30"},
        guilds=True,
    ),
}


def setup_of(game: str) -> GameSetup:
    """The setup of ``game``: a tuned one above, else a generic one from the game's SPEC."""
    known = SETUPS.get(game)
    if known is not None:
        return known
    spec = registry.get(game).SPEC
    top = min(spec.players_max, 4)
    return GameSetup(
        seats_max=max(top, spec.players_min),
        players_min=spec.players_min,
        players_max=top,
        stake_gold=100,
        buy_in_gold=10_000,
        fee_bps=base.default_fee_bps(registry.get(game), {}),
    )


@dataclass(frozen=True, slots=True)
class SimSeat:
    seat: int
    player_id: str
    buy_in_gold: int
    guild_id: str = ""


@dataclass(frozen=True, slots=True)
class SimHand:
    """One finished hand: its events and the settlement the rules engine gave while playing."""

    table_id: str
    hand_id: str
    game: str
    events: tuple[Event, ...]
    settlement: Settlement


@dataclass(frozen=True, slots=True)
class SimTable:
    table_id: str
    game: str
    seats: tuple[SimSeat, ...]
    table_events: tuple[Event, ...]
    hands: tuple[SimHand, ...]

    def final_stacks(self) -> dict[str, int]:
        """Each player's chips after the last hand: buy-in plus every net."""
        stacks = {s.player_id: s.buy_in_gold for s in self.seats}
        for hand in self.hands:
            for seat, net in hand.settlement.nets.items():
                stacks[_player(self, seat)] += net
        return stacks


@dataclass(frozen=True, slots=True)
class Simulation:
    tables: tuple[SimTable, ...]

    @property
    def hands(self) -> list[SimHand]:
        return [h for t in self.tables for h in t.hands]

    def events(self) -> list[Event]:
        """Every event, table by table (table facts first, then the hands in order)."""
        return [e for t in self.tables for e in (*t.table_events, *(e for h in t.hands for e in h.events))]

    def expected_balances(self) -> dict[str, int]:
        """What every account touched by the simulation holds once all hands are settled,
        counting only the simulation's own money (buy-ins into escrows and settlements;
        house:bank without its funding)."""
        out: dict[str, int] = {}
        for t in self.tables:
            for s in t.seats:
                acct = accounts.escrow(t.table_id, s.player_id)
                out[acct] = out.get(acct, 0) + s.buy_in_gold
            for h in t.hands:
                for acct, amount in h.settlement.entries().items():
                    out[acct] = out.get(acct, 0) + amount
        return out


def facts_id(table_id: str) -> str:
    """The ``hand_id`` of a table's own facts (the table service's convention)."""
    return f"{table_id}-t"


def _player(table: SimTable, seat: int) -> str:
    return next(s.player_id for s in table.seats if s.seat == seat)


# --- bots -------------------------------------------------------------------------------


def random_bot(module: ModuleType, rng: random.Random) -> autoplay.Chooser:
    """Mostly checks and calls; sometimes bets, raises, folds, lets the timer run out,
    disconnects (and comes back a decision later), or leaves, so that every game's
    timeout, disconnect and leaving rules run in self-play. Tài Xỉu bots place a few bets
    of 1-5 times the minimum, then stop."""
    game = module.SPEC.game_id
    away: set[tuple[str, int]] = set()

    def choose(state: Any, seat: int, candidates: Sequence[Body]) -> Body | None:
        if away and (_hand_of(state), seat) in away:
            away.discard((_hand_of(state), seat))
            return PlayerReconnected(seat)
        roll = rng.random()
        if roll < 0.03 or not candidates:
            return None
        if roll < 0.04:
            return PlayerLeft(seat)
        if roll < 0.05:
            away.add((_hand_of(state), seat))
            return PlayerDisconnected(seat)
        if game == "taixiu":
            if roll < 0.45:
                return None  # done betting
            body = rng.choice(list(candidates))
            if isinstance(body, WagerPlaced):
                bigger = WagerPlaced(body.seat, body.kind, body.selection, body.amount_gold * rng.choice((1, 2, 5)))
                try:
                    module.apply(state, bigger)
                    return bigger
                except Exception:
                    return body
            return body
        passive = [b for b in candidates if isinstance(b, BetAction) and b.kind in (ActionKind.CHECK, ActionKind.CALL)]
        if passive and roll < 0.7:
            return rng.choice(passive)
        return rng.choice(list(candidates))

    return choose


def _hand_of(state: Any) -> str:
    """The hand id of a game state, whatever the game keeps it in (for the bots' memory)."""
    for path in (("hand_id",), ("started", "hand_id"), ("hand", "started", "hand_id")):
        value: Any = state
        for name in path:
            value = getattr(value, name, None)
        if isinstance(value, str):
            return value
    return ""


# --- simulation -------------------------------------------------------------------------


def simulate(
    hands: int,
    games: Sequence[str] | None = None,
    *,
    seed: int = 0,
    hands_per_table: int = HANDS_PER_TABLE,
    table_prefix: str = "t",
    at: datetime | None = None,
    bot: Callable[[ModuleType, random.Random], autoplay.Chooser] = random_bot,
    face_down_by_position: bool = False,
) -> Simulation:
    """``hands`` finished hands spread evenly over ``games`` (default: every available game),
    at tables of ``hands_per_table`` hands each. Deterministic for ``seed`` and ``at``; the
    same hands with and without ``face_down_by_position``, only logged otherwise."""
    chosen = tuple(games) if games is not None else registry.available()
    if not chosen or hands < 0:
        raise ValueError("simulate needs at least one game and hands >= 0")
    rng = random.Random(seed)
    clock = [at or datetime(2026, 11, 29, 12, 0, tzinfo=UTC)]
    tables: list[SimTable] = []
    per_game = [hands // len(chosen) + (1 if i < hands % len(chosen) else 0) for i in range(len(chosen))]
    for game, want in zip(chosen, per_game, strict=True):
        made = 0
        while made < want:
            table_id = f"{table_prefix}{len(tables) + 1:04d}"
            table = play_table(
                table_id,
                game,
                min(hands_per_table, want - made),
                rng,
                clock,
                bot,
                face_down_by_position=face_down_by_position,
            )
            if not table.hands:
                continue  # nobody could play (cannot happen with the setups above)
            tables.append(table)
            made += len(table.hands)
    return Simulation(tuple(tables))


def _tick(clock: list[datetime]) -> datetime:
    clock[0] += EVENT_SPACING
    return clock[0]


def play_table(
    table_id: str,
    game: str,
    hands: int,
    rng: random.Random,
    clock: list[datetime],
    bot: Callable[[ModuleType, random.Random], autoplay.Chooser],
    *,
    setup: GameSetup | None = None,
    seed_for: Callable[[int], bytes | None] | None = None,
    deck_for: Callable[[int], Sequence[cards.Card] | None] | None = None,
    face_down_by_position: bool = False,
    close: bool = False,
) -> SimTable:
    """One table of ``game`` playing up to ``hands`` hands, set up by ``setup`` (default
    ``setup_of(game)``); ``seed_for(hand_number)`` may choose a hand's seed (the golden
    corpus searches seeds for rare deals), else it comes from ``rng``. ``deck_for(hand_number)``
    may choose the cards a hand deals, in order, instead of its seed's shuffle
    (``autoplay.play_hand``'s ``deck``: the golden corpus's ``engine`` batches); such a
    hand still commits to and reveals its seed, but no seed deals its cards, so it can be
    logged in the clear only (ValueError with ``face_down_by_position``). With ``close`` the
    table is then closed as an operator's CloseTable closes it: a pot it still carries (3
    Cây Gà's Gà) goes back to the seated players in a closing hand (``closing_hand``)."""
    if deck_for is not None and face_down_by_position:
        raise ValueError("a chosen deck cannot be logged by position: no revealed seed deals its cards")
    module = registry.get(game)
    setup = setup or setup_of(game)
    count = rng.randint(setup.players_min, setup.players_max)
    seat_numbers = sorted(rng.sample(range(setup.seats_max), count))
    seats = tuple(
        SimSeat(
            seat=n,
            player_id=f"{table_id}p{n}",
            buy_in_gold=setup.buy_in_gold,
            guild_id=f"g{rng.randint(1, 3)}" if setup.guilds and rng.random() < 0.5 else "",
        )
        for n in seat_numbers
    )
    table_events: list[Event] = []

    def table_event(body: Any) -> None:
        table_events.append(Event(table_id, facts_id(table_id), len(table_events) + 1, game, _tick(clock), body))

    owner = seats[0]  # the first player seated owns the table
    table_event(
        TableOpened(
            table_id,
            game,
            setup.stake_gold,
            setup.fee_bps,
            setup.seats_max,
            owner_player_id=owner.player_id,
            options=dict(setup.options),
            buy_in_min_gold=setup.buy_in_gold,
            buy_in_max_gold=setup.buy_in_gold,
        )
    )
    for s in seats:
        table_event(PlayerSeated(s.seat, s.player_id, s.buy_in_gold, s.guild_id))
    stacks = {s.seat: s.buy_in_gold for s in seats}
    played: list[SimHand] = []
    previous: tuple[Any, int] | None = None  # the last hand's final state and dealer seat
    pot_gold = 0
    choose = bot(module, rng)
    options = base.full_options(module, setup.options)
    for number in range(1, hands + 1):
        # As the table does: every seat the game lets play (``base.can_play``: any chips by
        # default; a stack too small for a blind plays all-in); the table stops when too
        # few are left.
        participants = base.participants(module, stacks, setup.stake_gold, options)
        if len(participants) < setup.players_min:
            break
        playing = [s for s in seats if s.seat in participants]
        owner_seat = owner.seat if owner.seat in participants else -1
        dealer = next_dealer(module, previous, participants, setup.seats_max, owner_seat, stacks)
        hand_id = f"{table_id}-h{number}"
        chosen = seed_for(number) if seed_for is not None else None
        seed = chosen or bytes(rng.getrandbits(8) for _ in range(fairness.SEED_BYTES))
        started = HandStarted(
            table_id=table_id,
            hand_id=hand_id,
            game=game,
            hand_number=number,
            stake_gold=setup.stake_gold,
            fee_bps=setup.fee_bps,
            seats_max=setup.seats_max,
            seats=tuple(SeatInfo(s.seat, s.player_id, stacks[s.seat], s.guild_id) for s in playing),
            dealer_seat=dealer,
            deck_commitment=fairness.commitment(seed),
            owner_seat=owner_seat,
            pot_gold=pot_gold,
            options=options,
            rules_version=base.rules_version(module),
            face_down_by_position=face_down_by_position,
        )
        deck = deck_for(number) if deck_for is not None else None
        bodies, state = autoplay.play_hand(module, started, seed, choose, deck=deck)
        settlement = module.settle(state)
        previous = (state, dealer)
        pot_gold = settlement.pot_carry_gold
        events = tuple(Event(table_id, hand_id, i, game, _tick(clock), b) for i, b in enumerate(bodies, start=1))
        if face_down_by_position:
            shuffled = fairness.shuffle(seed, cards.deck(game)) if module.SPEC.deck else []
            events = tuple(hidden.conceal(e, shuffled) for e in events)
        for seat, net in settlement.nets.items():
            stacks[seat] += net
        played.append(SimHand(table_id, hand_id, game, events, settlement))
    if close and pot_gold > 0 and replay.has_closing_rule(game):
        # The table stood up every seat that could no longer play after each hand
        # (``Table._stand_up_due``): the seats at the close are those that can.
        seated = base.participants(module, stacks, setup.stake_gold, options)
        if seated:  # with nobody seated the pot stays in pot:{table} (closing_pot_settlement)
            owner_seat = owner.seat if owner.seat in seated else -1
            started = HandStarted(
                table_id=table_id,
                hand_id=f"{table_id}-h{len(played) + 1}",
                game=game,
                hand_number=len(played) + 1,
                stake_gold=setup.stake_gold,
                fee_bps=setup.fee_bps,
                seats_max=setup.seats_max,
                seats=tuple(
                    SeatInfo(s.seat, s.player_id, stacks[s.seat], s.guild_id) for s in seats if s.seat in seated
                ),
                dealer_seat=next_dealer(module, previous, seated, setup.seats_max, owner_seat, stacks),
                deck_commitment="",
                owner_seat=owner_seat,
                pot_gold=pot_gold,
                options=options,
                rules_version=base.rules_version(module),
                closing=True,
            )
            played.append(closing_hand(started, bytes(rng.getrandbits(8) for _ in range(fairness.SEED_BYTES)), clock))
    return SimTable(table_id, game, seats, tuple(table_events), tuple(played))


def closing_hand(started: HandStarted, seed: bytes, clock: list[datetime]) -> SimHand:
    """A table's closing hand as the table service writes it when a table that carries a
    pot is closed (``Table._closing_hand``): ``started`` (``closing``, the carried pot, the
    seated players at their stacks, the dealer the rules choose) committed to ``seed``, then
    HandEnded revealing it, nothing between; settled by the game's closing rule
    (``socai.settle.replay.closing_settlement``: 3 Cây Gà's ``ga_pot_returned``)."""
    started = dataclasses.replace(started, deck_commitment=fairness.commitment(seed), closing=True)
    bodies: tuple[Body, ...] = (started, HandEnded(seed.hex()))
    events = tuple(
        Event(started.table_id, started.hand_id, i, started.game, _tick(clock), b)
        for i, b in enumerate(bodies, start=1)
    )
    return SimHand(started.table_id, started.hand_id, started.game, events, replay.closing_settlement(started))


def next_dealer(
    module: ModuleType,
    previous: tuple[Any, int] | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The next hand's reference seat, as the table service chooses it
    (``base.choose_dealer``)."""
    state, dealer = previous if previous is not None else (None, None)
    return base.choose_dealer(module, state, dealer, participants, seats_max, owner_seat, stacks)


# --- publishing and funding ---------------------------------------------------------------


async def publish(
    log: EventLog,
    sim: Simulation | Sequence[SimTable],
    *,
    concurrency: int = 32,
    table_events: bool = True,
    on_hand: Callable[[SimHand, int], None] | None = None,
) -> int:
    """Append every table's events to the log; returns the number of events appended.

    Tables go concurrently (at most ``concurrency`` at once); within a table, the table
    facts first, then each hand's events in order, each append waiting for its ack with
    the expected last subject sequence, exactly as the table service does.
    ``on_hand(hand, stream_seq)`` is called after each HandEnded is stored (latency hooks).
    """
    tables = sim.tables if isinstance(sim, Simulation) else tuple(sim)
    gate = asyncio.Semaphore(concurrency)
    counts = [0]

    async def one(table: SimTable) -> None:
        async with gate:
            if table_events:
                await publish_hand(log, table.table_events)
                counts[0] += len(table.table_events)
            for hand in table.hands:
                await publish_hand(log, hand, on_hand=on_hand)
                counts[0] += len(hand.events)

    await asyncio.gather(*(one(t) for t in tables))
    return counts[0]


DEV_SIGNER: Final = seal.HandSigner(Settings().hand_seal_private_key())


def sealed(
    subject: str, event: Event, chains: dict[str, bytes], signer: seal.HandSigner | None = DEV_SIGNER
) -> tuple[bytes, dict[str, str]]:
    """``event``'s bytes and the headers the table service writes with them: ``Socai-Prev``
    (``chains`` holds each subject's last chain value and moves on) and, on HandEnded, the
    seal by ``signer`` (None: unsealed)."""
    payload = codec.encode(event)
    prev = chains.get(subject) or seal.genesis(subject)
    chains[subject] = seal.link(prev, subject, payload)
    headers = {seal.PREV_HEADER: prev.hex()}
    if signer is not None and isinstance(event.body, HandEnded):
        headers.update(signer.headers(subject, chains[subject]))
    return payload, headers


async def publish_hand(
    log: EventLog,
    hand: SimHand | Sequence[Event],
    *,
    on_hand: Callable[[SimHand, int], None] | None = None,
    signer: seal.HandSigner | None = DEV_SIGNER,
    strangers: Mapping[int, Sequence[bytes]] | None = None,
    tamper: Callable[[Event], Event] | None = None,
) -> int:
    """Append one hand's events in order, chained and sealed as the table service does
    (``signer`` None: HandEnded unsealed); returns the stream sequence of the last one.

    Attacks, for the tests of hand seals: ``strangers[i]`` are published raw right after
    event ``i`` (0-based), forking the chain there as anyone reading the stream could
    (``Socai-Prev`` = the table's last chain value); ``tamper`` rewrites each event after
    its chain value and seal were computed (the headers stay the table's).
    """
    events = hand.events if isinstance(hand, SimHand) else tuple(hand)
    chains: dict[str, bytes] = {}
    last = 0
    for i, e in enumerate(events):
        subject = log.subject_of(e.table_id, e.hand_id)
        payload, headers = sealed(subject, e, chains, signer)
        if tamper is not None:
            e = tamper(e)
            payload = codec.encode(e)
        last = await log.append(e, last, headers, payload=payload)
        for forged in (strangers or {}).get(i, ()):
            ack = await log.js.publish(subject, forged, headers={seal.PREV_HEADER: chains[subject].hex()})
            last = int(ack.seq)
    if on_hand is not None and isinstance(hand, SimHand):
        on_hand(hand, last)
    return last


async def fund(ledger: Any, sim: Simulation | Sequence[SimTable], *, bank_gold: int = BANK_FUNDING_GOLD) -> None:
    """Fund the simulation through the real ledger (``ledger`` is a LedgerServiceStub).

    Each seat: Deposit ``buy_in`` to ``player:X``, then Transfer ``player:X`` →
    ``escrow:{table}:{X}`` (kind ``buy_in``). When a Tài Xỉu table plays against the house,
    Transfer ``bank_gold`` from ``external:cashier`` to ``house:bank`` once (kind
    ``deposit``). Idempotency keys are derived from the table and player, so funding twice
    is harmless. Raises the ledger's domain error when a posting is refused.
    """
    from socai.gen.ledger.v1 import ledger_pb2

    tables = sim.tables if isinstance(sim, Simulation) else tuple(sim)
    gate = asyncio.Semaphore(16)

    async def seat(table: SimTable, s: SimSeat) -> None:
        async with gate:
            dep = await ledger.Deposit(
                ledger_pb2.DepositRequest(
                    idempotency_key=f"sim:deposit:{table.table_id}:{s.player_id}",
                    player_id=s.player_id,
                    amount_gold=s.buy_in_gold,
                    reference=table.table_id,
                )
            )
            _require_posted(dep.result, f"deposit for {s.player_id}")
            move = await ledger.Transfer(
                ledger_pb2.TransferRequest(
                    idempotency_key=f"sim:buy_in:{table.table_id}:{s.player_id}",
                    from_account_id=accounts.player(s.player_id),
                    to_account_id=accounts.escrow(table.table_id, s.player_id),
                    amount_gold=s.buy_in_gold,
                    kind="buy_in",
                    reference=table.table_id,
                    open_accounts=True,
                )
            )
            _require_posted(move.result, f"buy-in of {s.player_id} at {table.table_id}")

    if any(t.game == "taixiu" for t in tables) and bank_gold > 0:
        bank = await ledger.Transfer(
            ledger_pb2.TransferRequest(
                idempotency_key=f"sim:bank:{tables[0].table_id}",
                from_account_id=accounts.EXTERNAL_CASHIER,
                to_account_id=accounts.HOUSE_BANK,
                amount_gold=bank_gold,
                kind="deposit",
                reference="simulation bankroll",
                open_accounts=True,
            )
        )
        _require_posted(bank.result, "house:bank funding")
    await asyncio.gather(*(seat(t, s) for t in tables for s in t.seats))


def _require_posted(result: Any, what: str) -> None:
    from socai import errors
    from socai.gen.ledger.v1 import ledger_pb2

    if result.status not in (ledger_pb2.POST_STATUS_APPLIED, ledger_pb2.POST_STATUS_REPLAYED):
        raise errors.PreconditionFailed(result.error_reason or "REJECTED", f"{what}: {result.error_message}")
