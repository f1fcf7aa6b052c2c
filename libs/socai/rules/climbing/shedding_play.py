"""The hand mechanics Tiến Lên (RULES.md §9) and Sâm Lốc (§4) share, on the game kit.

The card logic (combinations, beating, chops, penalty values) is ``socai.rules.climbing.shedding``;
this module plays a hand with it: the deal, who leads, turns in the game's direction
(counterclockwise, GEN-2), rounds and passes (a seat that passes is out of the round), chop
chains closed with the round (TL-6, TL-16, SL-19), the first player out ending the hand,
instant wins at the deal, Sâm Lốc's báo Sâm window (SL-9, SL-10), báo 1 (SL-11),
disconnects (TL-11, SL-13), leaving (GEN-6, SL-21) and the settlement of every line as an
``Obligation`` paid through the kit's ``pay_obligations`` (GEN-4 cap).

Each game module builds a ``Variant`` from its ``Options`` (its ``SheddingRules`` and the
flags below) and binds the functions here; every difference between the two games is a
field of ``Variant``, never a second copy of the code.

A hand:

1. ``HandStarted``; the table deals ``hand_cards`` cards to every seat, one at a time
   counterclockwise from ``dealer_seat`` (``CardsDealt``, face down).
2. Instant wins at the deal (tới trắng 9.1 / thắng trắng SL-8) end the hand at once: the
   first qualifying seat in turn order from the leader wins (TL-9).
3. Sâm Lốc only: the declaration window (SL-9). Every seat answers ``Declared(sam)`` or
   ``Declared(no_sam)`` on the ``declare`` timer (a timeout is ``no_sam``); the first
   ``sam`` is the declaration (a second is refused, BAD_DECLARATION) and that seat leads.
4. Play: the seat to act plays a combination (``CardsPlayed``) that beats the top play of
   the round, or passes (``Passed``) and is out of the round. When every other seat still
   in the hand has passed, the round closes (its chop chain is paid, TL-6) and the seat
   that played last leads anything. A ``TimerExpired(turn)`` passes, or when leading plays
   the lowest legal lead (GEN-5).
5. The first seat out of cards ends play (both games, TL-2); ``HandEnded`` reveals the
   seed and ``settle`` pays every obligation in the order incurred, then the fee (GEN-1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from socai.cards import ALL_CARDS, Card
from socai.errors import RuleViolation, check
from socai.events.model import (
    Body,
    CardsDealt,
    CardsPlayed,
    Declared,
    HandEnded,
    HandStarted,
    Passed,
    PlayerDisconnected,
    PlayerReconnected,
    TimerExpired,
)
from socai.rules.base import (
    COUNTERCLOCKWISE,
    DealSlot,
    Facing,
    GameSpec,
    GameState,
    LegalAction,
    MoveSet,
    Obligation,
    Pending,
    Reason,
    Settlement,
    SettlementBuilder,
    check_settlement,
    common_event,
    freeze,
    game_state,
    hand_ended,
    pay_obligations,
    per_state,
    seats_in_order,
)
from socai.rules.base import (
    next_hand_dealer as kit_next_hand_dealer,
)
from socai.rules.climbing import shedding
from socai.rules.climbing.shedding import Combination, Play, SheddingRules

# Phases of a hand.
DEALING: Final = "dealing"
DECLARING: Final = "declaring"  # Sâm Lốc's báo Sâm window
PLAYING: Final = "playing"
PLAY_OVER: Final = "play_over"  # the result is decided; only HandEnded is expected
ENDED: Final = "ended"

TURN_TIMER: Final = "turn"
DECLARE_TIMER: Final = "declare"
SAM: Final = "sam"
NO_SAM: Final = "no_sam"

# How play ended.
OUT: Final = "out"  # a seat played its last card (or was the only one left)
INSTANT: Final = "instant"  # tới trắng / thắng trắng at the deal
SAM_WON: Final = "sam_success"
SAM_CAUGHT: Final = "sam_failed"
STALEMATE: Final = "stalemate"  # Sâm Lốc: nobody still in the hand can lead (SL-7 b)
DUT: Final = "dut_ba_bich"  # Tiến Lên 9.6 #3: went out on the 3♠
CUU_LANG: Final = "thoi_ba_bich"  # Tiến Lên 9.6 #4: the 3♠ kept for last was blocked

THREE_OF_SPADES: Final = Card(3, 0)

# Candidate moves offered per decision (bots, tests): bounded whatever the hand.
CANDIDATES_MAX: Final = 24

# Ranking table (9.4): what each place after the first pays the first, in lá, by players.
RANK_PAYS: Final[Mapping[int, tuple[int, ...]]] = {2: (1,), 3: (1, 2), 4: (1, 2, 3)}
RANK_PLACE: Final = "rank_place"

# Reasons that are not penalties: the ordinary payments of a hand.
_NOT_PENALTIES: Final = frozenset(
    {
        shedding.CARDS_LEFT,
        RANK_PLACE,
        shedding.TOI_TRANG,
        shedding.THANG_TRANG,
        shedding.SAM_SUCCESS,
        shedding.DUT_BA_BICH,
    }
)


@dataclass(frozen=True, slots=True)
class Variant:
    """Everything one game (and its options) does differently, as data."""

    spec: GameSpec
    rules: SheddingRules
    settlement_mode: str = shedding.COUNT
    # Tiến Lên 9.1: the first hand is led by the holder of the lowest card (3♠, TL-1).
    first_hand_lowest_leads: bool = False
    # TL-12: the first lead of the first hand must hold that card.
    first_lead_must_include_lowest: bool = False
    # TL-11: a disconnected (or leaving) seat is out of play at once and pays at the end.
    # False (Sâm Lốc SL-13): a disconnected seat auto-passes; leaving costs leave_penalty.
    disconnect_is_out: bool = True
    leave_penalty: bool = False  # SL-21, SL-12
    declarations: bool = False  # SL-9: the báo Sâm window
    bao_1: bool = False  # SL-11
    instant_wins: bool = True
    first_hand_instant_wins: bool = False  # 9.6 #2
    restore_turn_4dt: bool = False  # 9.6 #1, TL-8
    dut_3_bich: bool = False  # 9.6 #3 and #4, TL-13
    turn_timeout_s: int = 20
    declare_timeout_s: int = 10


@game_state
class State(GameState):
    """One hand of a shedding game. ``order`` is every dealt seat in playing order
    (counterclockwise) from ``started.dealer_seat``; ``hands`` each seat's cards left."""

    started: HandStarted
    variant: Variant
    order: tuple[int, ...]
    hands: Mapping[int, tuple[Card, ...]]
    phase: str = DEALING
    leader: int = -1  # the seat that led (or would lead) the hand's first round
    turn: int | None = None
    leading: bool = False  # the seat to act leads a new round
    round_plays: tuple[Play, ...] = ()
    round_passed: frozenset[int] = frozenset()
    plays_made: int = 0
    played_cards: tuple[Card, ...] = ()  # every card played this hand, in order
    played_any: frozenset[int] = frozenset()
    out: frozenset[int] = frozenset()  # out of play: disconnected (TL-11) or left
    left: frozenset[int] = frozenset()
    disconnected: frozenset[int] = frozenset()
    declarations: Mapping[int, str] = {}
    declarer: int | None = None  # SL-9, while the Sâm is live
    declared_sam: int | None = None  # who declared Sâm this hand (kept after it ends)
    marked: tuple[int, ...] = ()  # SL-10: passed while holding an answer to the Sâm
    winner: int | None = None
    ending: str = ""
    instant_kind: str = ""
    obligations: tuple[Obligation, ...] = ()
    # Why each obligation was incurred: (reason, rule, payer, payee, lá, play numbers).
    explanations: tuple[tuple[str, str, int, int, int, tuple[int, ...]], ...] = ()
    deck_seed: str = ""


# --- reasons ------------------------------------------------------------------------------


def reasons(rules: SheddingRules, extra: Mapping[str, str] | None = None) -> dict[str, Reason]:
    """``REASONS`` of a game: every reason code its rules name, with the RULES.md rule and
    what it means (``shedding.REASONS``), plus ``extra`` (code → rule) and the fee."""
    out: dict[str, Reason] = {}
    for code, rule in (*rules.rule_ids, *(extra or {}).items()):
        meaning = shedding.REASONS.get(code, "the ranking table (9.4): each place pays the first")
        out[code] = Reason(code not in _NOT_PENALTIES, f"{rule}: {meaning}")
    out["fee"] = Reason(False, "GEN-1: the table's fee_bps on each net win")
    return out


# --- reading the state --------------------------------------------------------------------


_DECK: Final = frozenset(ALL_CARDS)


def active(state: State) -> list[int]:
    """Seats still in play, in playing order."""
    return [s for s in state.order if s not in state.out]


def after(state: State, seat: int) -> list[int]:
    """Every dealt seat after ``seat`` in playing order (``seat`` itself last)."""
    i = state.order.index(seat)
    return [*state.order[i + 1 :], *state.order[: i + 1]]


def top(state: State) -> Play | None:
    return state.round_plays[-1] if state.round_plays else None


def _first_hand(state: State) -> bool:
    return state.started.hand_number <= 1


def _lowest_card(state: State) -> Card | None:
    dealt = [c for s in state.order for c in state.hands[s]]
    if not dealt:
        return None
    return min(dealt, key=lambda c: shedding._sort_key(c, state.variant.rules))


def _must_include(state: State, seat: int) -> Card | None:
    v = state.variant
    if not (v.first_lead_must_include_lowest and _first_hand(state) and state.plays_made == 0):
        return None
    low = _lowest_card(state)
    return low if low is not None and low in state.hands[seat] else None


def _bao_1_restricted(state: State, seat: int) -> bool:
    """SL-11: ``seat`` plays just before a seat holding one card (in playing order)."""
    if not state.variant.bao_1:
        return False
    playing = active(state)
    if len(playing) < 2 or seat not in playing:
        return False
    nxt = playing[(playing.index(seat) + 1) % len(playing)]
    return nxt != seat and len(state.hands[nxt]) == 1


@per_state
def plays_for(state: State, seat: int) -> tuple[Combination, ...]:
    """Every legal play of ``seat`` now (it must be the seat to act), filtered from the
    plays of the seat's cards when it was first asked this hand (``_seat_plays``); kept per
    state (``base.per_state``): the table asks for every view of the seat to act, the bot
    and the timer again."""
    over = top(state)
    return shedding.legal_plays(
        state.hands[seat],
        None if state.leading or over is None else over.combination,
        state.variant.rules,
        highest_single_only=_bao_1_restricted(state, seat),
        must_include=_must_include(state, seat),
        within=_seat_plays(state, seat),
    )


# How many (hand, seat) entries ``_seat_plays`` keeps: the hands in play at one table
# service's tables, or a replay's one hand at a time, each a few seats.
SEAT_PLAYS_MAX: Final = 256
_seat_plays_kept: dict[tuple[int, int], tuple[HandStarted, shedding.HandPlays]] = {}


def _seat_plays(state: State, seat: int) -> shedding.HandPlays:
    """Every combination of the cards ``seat`` held when first asked in this hand
    (``shedding.hand_plays``), kept by the hand's HandStarted, the same object in every
    state of a hand, and the seat: its cards only shrink as it plays, so each later turn's
    legal plays are a filter of these (``legal_plays``' ``within``), where working them
    out again from the cards took about two thirds of a self-played hand. Worked out
    afresh when the kept plays do not hold the seat's cards (a state of another hand with
    the same id)."""
    key = (id(state.started), seat)
    rules = state.variant.rules
    found = _seat_plays_kept.get(key)
    if found is not None and found[0] is state.started:
        held = shedding.card_mask(state.hands[seat])
        if found[1].mask & held == held and found[1].rules is rules:
            return found[1]
    plays = shedding.hand_plays(state.hands[seat], rules)
    if len(_seat_plays_kept) >= SEAT_PLAYS_MAX:
        try:
            del _seat_plays_kept[next(iter(_seat_plays_kept))]  # the oldest (dicts keep insertion order)
        except (KeyError, StopIteration, RuntimeError):  # another thread was first
            pass
    _seat_plays_kept[key] = (state.started, plays)
    return plays


def is_finished(state: State) -> bool:
    return state.phase == ENDED


def _deal_seats(state: State) -> list[int]:
    """The seat of each card of the deal: ``hand_cards`` rounds, one card a seat in order."""
    return [s for _ in range(state.variant.rules.hand_cards) for s in state.order]


def pending(state: State) -> Pending:
    phase = state.phase
    if phase == DEALING:
        return Pending(deal=tuple(DealSlot(s, False) for s in _deal_seats(state)))
    if phase == DECLARING:
        waiting = tuple(s for s in state.order if s not in state.declarations and s not in state.out)
        return Pending(to_act=waiting, timer=DECLARE_TIMER, timeout_s=state.variant.declare_timeout_s)
    if phase == PLAYING:
        check(state.turn is not None, "a seat is to act")
        return Pending(to_act=(state.turn,), timer=TURN_TIMER, timeout_s=state.variant.turn_timeout_s)  # type: ignore[arg-type]
    return Pending(finished=True)


def legal_actions(state: State, seat: int) -> tuple[LegalAction, ...]:
    if state.phase == DECLARING and seat in pending(state).to_act:
        if state.declarer is None:
            return (LegalAction(f"declare:{SAM}"), LegalAction(f"declare:{NO_SAM}"))
        return (LegalAction(f"declare:{NO_SAM}"),)
    if state.phase != PLAYING or state.turn != seat:
        return ()
    plays = plays_for(state, seat)
    out = [LegalAction("play")] if plays else []
    if not state.leading or not plays:
        out.append(LegalAction("pass"))
    return tuple(out)


def candidate_actions(state: State, seat: int) -> list[Body]:
    """A bounded set of legal moves: up to four chops, then the weakest, middle and
    strongest plays of each kind, then a pass when passing is allowed; in a declaration window, both answers."""
    out: list[Body] = []
    if state.phase == PLAYING and state.turn == seat:
        return _play_candidates(state, seat)
    kinds = {a.kind for a in legal_actions(state, seat)}
    if f"declare:{SAM}" in kinds and sum(c.rank == shedding.TWO for c in state.hands[seat]) >= 3:
        # Offered to bots only with three 2s or more (any seat may declare: legal_actions).
        out.append(Declared(seat, SAM))
    if f"declare:{NO_SAM}" in kinds:
        out.append(Declared(seat, NO_SAM))
    return out


def held(state: State, seat: int) -> tuple[Card, ...]:
    """The cards ``seat`` has left."""
    return state.hands.get(seat, ())


def facing(state: State, seat: int) -> Facing:
    """The combination on the table (``trick``: its cards, kind and who played it), or
    ``lead`` when ``seat`` is to start a new round; ``declare`` during Sâm Lốc's báo Sâm
    window. The trick is shown to every seat; ``lead`` only to the seat that leads."""
    if state.phase == DECLARING:
        return Facing("declare", text="báo Sâm window: declare sam or no_sam (SL-9)")
    if state.phase != PLAYING:
        return Facing()
    over = top(state)
    if state.turn == seat and (state.leading or over is None):
        return Facing("lead", text="you lead: any combination")
    if over is None:
        return Facing()
    cards = over.combination.cards
    return Facing(
        "trick",
        seat=over.seat,
        cards=cards,
        combination=over.combination.kind,
        text=f"beat {over.combination.kind} {' '.join(map(str, cards))} of seat {over.seat}",
    )


@per_state
def legal_moves(state: State, seat: int) -> tuple[MoveSet, ...]:
    """Every legal move of ``seat``, listed: each combination it may play now
    (``plays_for``: leading any combination, else one of the trick's kind that beats it or
    a chop of it, with the game's restrictions), the pass when passing is allowed, and in
    a declaration window each declaration. Kept per state (``base.per_state``): the table
    asks for the view of the seat to act and again for ``GetTableState``."""
    out: list[MoveSet] = []
    for action in legal_actions(state, seat):
        if action.kind == "play":
            over = top(state)
            plays = plays_for(state, seat)
            if state.leading or over is None:
                text = "play any combination of your cards (you lead)"
            else:
                cards = " ".join(map(str, over.combination.cards))
                text = f"play a {over.combination.kind} beating {cards}, or a combination that chops it"
            if _bao_1_restricted(state, seat):
                text += "; a single must be your highest card (the next seat has one card left)"
            out.append(MoveSet("play", text, tuple(CardsPlayed(seat, p.cards) for p in plays)))
        elif action.kind == "pass":
            out.append(MoveSet("pass", "pass: play nothing this round", (Passed(seat),)))
        else:
            declaration = action.kind.removeprefix("declare:")
            out.append(MoveSet(action.kind, f"declare {declaration} (SL-9)", (Declared(seat, declaration),)))
    return tuple(out)


def _play_candidates(state: State, seat: int) -> list[Body]:
    out: list[Body] = []
    plays = plays_for(state, seat)
    if plays:
        over = top(state)
        chosen: list[Combination] = []
        if over is not None and not state.leading:
            chosen = [p for p in plays if shedding.is_chop(p, over.combination, state.variant.rules)][:4]
        by_kind: dict[str, list[Combination]] = {}
        for p in plays:
            by_kind.setdefault(p.kind, []).append(p)
        for group in by_kind.values():
            for p in (group[0], group[-1], group[len(group) // 2]):
                if p not in chosen:
                    chosen.append(p)
        out.extend(CardsPlayed(seat, p.cards) for p in chosen[:CANDIDATES_MAX])
    if not state.leading or not plays:
        out.append(Passed(seat))
    return out


# --- starting and dealing -------------------------------------------------------------------


def new_state(started: HandStarted, variant: Variant) -> State:
    seats = [info.seat for info in started.seats]
    order = tuple(seats_in_order(seats, started.dealer_seat, started.seats_max, variant.spec.direction))
    return State.create(started=started, variant=variant, order=order, hands={s: () for s in order})


def _deal(state: State, body: CardsDealt) -> State:
    # pending(state).deal's seats, without building its DealSlots (every replay checks a deal).
    if [d.seat for d in body.cards] != _deal_seats(state):
        raise RuleViolation("WRONG_DEAL", "the deal is hand_cards cards to each seat, one at a time in turn")
    cards = [d.card for d in body.cards]
    if any(type(c) is not Card or c not in _DECK for c in cards):
        raise RuleViolation("BAD_CARD", "a dealt card is not in the deck")
    if len(set(cards)) != len(cards):
        raise RuleViolation("DUPLICATE_CARD", "a card is dealt twice")
    if any(dealt.face_up for dealt in body.cards):
        raise RuleViolation("WRONG_DEAL", "shedding games deal face down")
    rules = state.variant.rules
    hands: dict[int, list[Card]] = {s: [] for s in state.order}
    for dealt in body.cards:
        hands[dealt.seat].append(dealt.card)
    sorted_hands = {s: tuple(sorted(cs, key=lambda c: shedding._sort_key(c, rules))) for s, cs in hands.items()}
    d = state.draft()
    d.hands = sorted_hands
    playing = [s for s in state.order if s not in state.out]
    v = state.variant
    if v.first_hand_lowest_leads and _first_hand(state):
        leader = playing[shedding.lowest_card_holder([sorted_hands[s] for s in playing], rules)] if playing else -1
    else:
        leader = state.started.dealer_seat
        if leader in state.out and playing:
            leader = next(s for s in after(state, leader) if s not in state.out)
    d.leader = leader
    s = freeze(d)
    if len(playing) <= 1:
        return _end(s, playing[0] if playing else state.order[0], OUT)
    # Instant wins at the deal (TL-9: the first in turn order from the leader).
    if v.instant_wins:
        turn_order = [x for x in [leader, *after(s, leader)[:-1]] if x not in state.out]
        first = _first_hand(state) and v.first_hand_instant_wins
        winner = shedding.instant_winner([sorted_hands[x] for x in turn_order], rules, first_hand=first)
        if winner is not None:
            seat = turn_order[winner]
            won = shedding.instant_win(sorted_hands[seat], rules, first_hand=first)
            check(won is not None, "the instant winner holds an instant win")
            s = s.derive(instant_kind=won.kind if won else "")
            return _end(s, seat, INSTANT)
    if v.declarations:
        return s.derive(phase=DECLARING)
    return _start_play(s, leader)


def _start_play(state: State, leader: int) -> State:
    d = state.draft()
    d.phase = PLAYING
    d.turn = leader
    d.leading = True
    return _settle_turn(freeze(d))


# --- turns and rounds ---------------------------------------------------------------------


def _can_lead(state: State, seat: int) -> bool:
    """``seat`` has a legal lead. Only Sâm Lốc's SL-7 (b) can leave a hand without one: a
    lone 2 (any two cards lead a single; báo 1 still allows the highest single)."""
    hand = state.hands[seat]
    if not hand:
        return False
    if not state.variant.rules.no_two_in_last_play:
        return True
    return len(hand) >= 2 or hand[0].rank != shedding.TWO


def _auto_skips(state: State) -> bool:
    """SL-13: disconnected seats are skipped while a connected seat is still in play."""
    return not state.variant.disconnect_is_out and any(s not in state.disconnected for s in active(state))


def _settle_turn(state: State) -> State:
    """Skip the seats that cannot act now: disconnected seats (SL-13: an automatic pass, or
    the lead handed on) and, when a lead is due that no seat in play can make, end play
    (SL-7 b stalemate)."""
    for _ in range(2 * len(state.order) + 2):
        if state.phase != PLAYING:
            return state
        seat = state.turn
        check(seat is not None, "a seat is to act")
        assert seat is not None
        if state.leading:
            playing = active(state)
            if not any(_can_lead(state, s) for s in playing):
                return _stalemate(state)
            if _auto_skips(state) and seat in state.disconnected and seat != state.declarer:
                state = state.derive(turn=_next_leader(state, seat))
                continue
            return state
        if _auto_skips(state) and seat in state.disconnected:
            state = _pass(state, seat, marks=False)
            continue
        return state
    check(False, "turn settling did not converge")
    return state


def _next_leader(state: State, seat: int) -> int:
    """The lead handed on from ``seat``: the next seat in play after it."""
    for s in after(state, seat):
        if s not in state.out:
            return s
    return seat


def _advance(state: State, seat: int) -> State:
    """After ``seat`` played or passed: the next seat in play that has not passed this
    round; when that is the seat of the top play (everyone else passed), or nobody is left
    to answer, the round closes and the top play's seat (or the next seat in play after
    it) leads."""
    last = top(state)
    check(last is not None, "a round in play has a top play")
    assert last is not None
    owner = last.seat
    for s in after(state, seat):
        if s in state.out:
            continue
        if s == owner:
            return _close_round(state, owner)
        if s not in state.round_passed:
            return _settle_turn(state.derive(turn=s, leading=False))
    return _close_round(state, owner)


def _close_round(state: State, owner: int) -> State:
    """The round closes: its chop chain is paid (TL-6, TL-16, SL-19) and the seat that
    played last leads (the next seat in play when it is out)."""
    state = _pay_chain(state)
    leader = owner if owner not in state.out else _next_leader(state, owner)
    d = state.draft()
    d.round_plays = ()
    d.round_passed = frozenset()
    d.turn = leader
    d.leading = True
    return _settle_turn(freeze(d))


def _pay_chain(state: State) -> State:
    penalty = shedding.chop_penalty(state.round_plays, state.variant.rules)
    if penalty is None:
        return state
    chain = shedding.chop_chain(state.round_plays, state.variant.rules)
    first = state.plays_made - len(chain) + 1  # plays are numbered from 1 in the hand
    numbers = tuple(range(first, first + len(chain)))
    return _owe(state, penalty.payer, penalty.payee, penalty.amount_stakes, penalty.reason, penalty.rule, numbers)


def _owe(
    state: State, payer: int, payee: int, stakes: int, reason: str, rule: str, plays: tuple[int, ...] = ()
) -> State:
    if stakes <= 0 or payer == payee:
        return state
    amount = stakes * state.started.stake_gold
    return state.derive(
        obligations=(*state.obligations, Obligation(payer, payee, amount, reason, obligation_detail(rule, plays))),
        explanations=(*state.explanations, (reason, rule, payer, payee, stakes, plays)),
    )


def _pass(state: State, seat: int, *, marks: bool) -> State:
    d = state.draft()
    if state.leading and seat == state.declarer:
        return _sam_stuck(state, seat)
    if state.leading:
        # Only a seat with no legal lead passes it on (SL-7 b; SL-13 for a disconnected one).
        d.turn = _next_leader(state, seat)
        return _settle_turn(freeze(d))
    over = top(state)
    if (
        marks
        and state.declarer is not None
        and seat != state.declarer
        and over is not None
        and over.seat == state.declarer
        and shedding.has_answer(state.hands[seat], over.combination, state.variant.rules)
        and seat not in state.marked
    ):
        d.marked = (*state.marked, seat)  # SL-10
    d.round_passed = state.round_passed | {seat}
    return _advance(freeze(d), seat)


def _sam_stuck(state: State, declarer: int) -> State:
    """The declarer holds the lead and no legal play (SL-7 b: only a 2 left): the Sâm can
    no longer succeed. Decision: it fails at once with no catcher; the declarer pays 25 lá
    to each other player ((n − 1) × 25 lá, as đền báo is shared, SL-12)."""
    nxt = _next_leader(state, declarer)
    for other in [s for s in after(state, declarer)[:-1] if s not in state.left]:
        state = _owe(state, declarer, other, shedding.SAM_STAKES_PER_PLAYER, shedding.SAM_FAILED, "SL-9")
    return _finish(state.derive(declarer=None), nxt, SAM_CAUGHT)


# --- applying events ----------------------------------------------------------------------


def apply(state: State, body: Body) -> State:
    """The state after ``body``; raises RuleViolation (the caller's state is untouched)."""
    kind = type(body)
    if kind is CardsPlayed:
        return _play(state, body)  # type: ignore[arg-type]
    if kind is Passed:
        seat = body.seat  # type: ignore[union-attr]
        _check_turn(state, seat)
        if state.leading and _can_lead(state, seat):
            raise RuleViolation("CANNOT_PASS", "the seat leading the round must play")
        return _pass(state, seat, marks=True)
    if kind is TimerExpired:
        return _timeout(state, body)  # type: ignore[arg-type]
    if kind is Declared:
        return _declare(state, body)  # type: ignore[arg-type]
    if kind is CardsDealt:
        if state.phase != DEALING:
            raise _after_deal(state)
        return _deal(state, body)  # type: ignore[arg-type]
    if kind is PlayerDisconnected:
        return _disconnect(state, body.seat)  # type: ignore[union-attr]
    if kind is PlayerReconnected:
        _known(state, body.seat)  # type: ignore[union-attr]
        if body.seat in state.left:  # type: ignore[union-attr]
            return state
        # TL-11: a disconnected seat stays out of play; SL-13: it plays again.
        return state.derive(disconnected=state.disconnected - {body.seat})  # type: ignore[union-attr]
    if kind is HandEnded and state.phase == ENDED:
        raise RuleViolation("HAND_FINISHED", "the hand has ended")
    return common_event(
        state,
        body,
        game_name=state.variant.spec.name,
        seats=state.order,
        over=state.phase == PLAY_OVER,
        leave=_leave,
        end=hand_ended,
    )


def _after_deal(state: State) -> RuleViolation:
    if state.phase in (PLAY_OVER, ENDED):
        return RuleViolation("HAND_FINISHED", "play is over")
    return RuleViolation("WRONG_DEAL", "the cards are already dealt")


def _known(state: State, seat: int) -> None:
    if seat not in state.hands:
        raise RuleViolation("UNKNOWN_SEAT", f"seat {seat!r} is not in this hand", seat=seat)


def _check_turn(state: State, seat: int) -> None:
    _known(state, seat)
    if state.phase in (PLAY_OVER, ENDED):
        raise RuleViolation("HAND_FINISHED", "play is over")
    if seat in state.left:
        raise RuleViolation("SEAT_LEFT", f"seat {seat} has left the hand")
    if state.phase != PLAYING or state.turn != seat:
        raise RuleViolation("NOT_YOUR_TURN", f"seat {seat} is not to act")


def _play(state: State, body: CardsPlayed) -> State:
    seat = body.seat
    _check_turn(state, seat)
    cards = body.cards
    if not isinstance(cards, tuple) or any(type(c) is not Card or c not in _DECK for c in cards):
        raise RuleViolation("BAD_CARD", "a played card is not in the deck")
    if len(set(cards)) != len(cards):
        raise RuleViolation("DUPLICATE_CARD", "a card is played twice")
    hand = state.hands[seat]
    if any(c not in hand for c in cards):
        raise RuleViolation("NOT_HOLDING", f"seat {seat} does not hold those cards")
    rules = state.variant.rules
    found = shedding.combo(cards, rules)
    if found is None:
        raise RuleViolation("BAD_COMBINATION", f"{' '.join(map(str, cards))} form no {state.variant.spec.name} play")
    over = top(state)
    if not state.leading and over is not None and not shedding.beats(found, over.combination, rules):
        raise RuleViolation("CANNOT_BEAT", f"{found} does not beat {over.combination}")
    if rules.no_two_in_last_play and len(cards) == len(hand) and any(c.rank == shedding.TWO for c in cards):
        raise RuleViolation("ILLEGAL_MOVE", "SL-7: the last play may not hold a 2 (thối)")
    if (
        _bao_1_restricted(state, seat)
        and found.kind == shedding.SINGLE
        and shedding._RANK_ORDER[cards[0].rank] != max(shedding._RANK_ORDER[c.rank] for c in hand)
    ):
        raise RuleViolation("ILLEGAL_MOVE", "SL-11 báo 1: a single must be your highest card")
    must = _must_include(state, seat)
    if must is not None and must not in cards:
        raise RuleViolation("ILLEGAL_MOVE", f"TL-12: the first lead must hold {must}")
    d = state.draft()
    played = set(cards)
    left = tuple(c for c in hand if c not in played)
    d.hands = {**state.hands, seat: left}
    d.round_plays = (*state.round_plays, Play(seat, found))
    d.plays_made = state.plays_made + 1
    d.played_cards = (*state.played_cards, *found.cards)
    d.played_any = state.played_any | {seat}
    chopped_4dt = (
        state.variant.restore_turn_4dt
        and over is not None
        and not state.leading
        and found.shape == "pairs_run4"
        and shedding.is_chop(found, over.combination, rules)
    )
    if chopped_4dt:
        d.round_passed = frozenset()  # 9.6 #1 (TL-8, off by default): passed seats come back
    new = freeze(d)
    if (
        state.variant.dut_3_bich
        and over is not None
        and not state.leading
        and state.hands[over.seat] == (THREE_OF_SPADES,)
    ):
        # 9.6 #4 (TL-13): the play before the 3♠ is beaten; this seat saves the village.
        # Decision: the village payment replaces this round's chop (RULES.md's example
        # charges 2 × 26 lá only); chops of earlier rounds stand.
        return _end(new, seat, CUU_LANG, offender=over.seat)
    if state.declarer is not None and seat != state.declarer:
        # SL-9: the Sâm is caught. SL-18: a chop on it is paid as well.
        new = _pay_chain(new)
        n = len(state.order)
        failed = shedding.sam_failed(state.declarer, seat, n)
        new = _owe(new, failed.payer, failed.payee, failed.amount_stakes, failed.reason, failed.rule, (new.plays_made,))
        return _finish(new.derive(declarer=None), seat, SAM_CAUGHT)
    if not left:
        new = _pay_chain(new)  # TL-16: a chop that is the last card closes its chain at once
        if state.variant.dut_3_bich and cards == (THREE_OF_SPADES,):
            return _end(new, seat, DUT)  # 9.6 #3 (TL-13)
        return _end(new, seat, SAM_WON if state.declarer == seat else OUT)
    return _advance(new, seat)


def _timeout(state: State, body: TimerExpired) -> State:
    seat = body.seat
    if body.timer == DECLARE_TIMER and state.phase == DECLARING:
        return _declare(state, Declared(seat, NO_SAM))
    if body.timer != TURN_TIMER or state.phase not in (PLAYING, PLAY_OVER, ENDED):
        raise RuleViolation("WRONG_TIMER", f"{body.timer!r} is not running")
    _check_turn(state, seat)
    if state.leading:
        plays = plays_for(state, seat)
        if plays:
            return _play(state, CardsPlayed(seat, plays[0].cards))  # GEN-5: the lowest lead
    return _pass(state, seat, marks=True)


def _declare(state: State, body: Declared) -> State:
    seat = body.seat
    _known(state, seat)
    if state.phase in (PLAY_OVER, ENDED):
        raise RuleViolation("HAND_FINISHED", "play is over")
    if state.phase != DECLARING or not state.variant.declarations:
        raise RuleViolation("BAD_DECLARATION", "no declaration is open now")
    if seat in state.out:
        raise RuleViolation("SEAT_LEFT", f"seat {seat} has left the hand")
    if seat in state.declarations:
        raise RuleViolation("ALREADY_ACTED", f"seat {seat} already answered")
    if body.declaration not in (SAM, NO_SAM) or (body.declaration == SAM and state.declarer is not None):
        raise RuleViolation("BAD_DECLARATION", f"{body.declaration!r} is not allowed now (SL-9)")
    d = state.draft()
    d.declarations = {**state.declarations, seat: body.declaration}
    if body.declaration == SAM:
        d.declarer = seat
        d.declared_sam = seat
    s = freeze(d)
    return _close_window(s)


def _close_window(state: State) -> State:
    if state.phase != DECLARING or pending(state).to_act:
        return state
    return _start_play(state, state.declarer if state.declarer is not None else state.leader)


# --- leaving and disconnecting --------------------------------------------------------------


def _disconnect(state: State, seat: int) -> State:
    _known(state, seat)
    state = state.derive(disconnected=state.disconnected | {seat})
    if state.phase in (PLAY_OVER, ENDED) or seat in state.out:
        return state
    if state.variant.disconnect_is_out:
        return _remove(state, seat)  # TL-11
    if state.phase == PLAYING:
        return _settle_turn(state)  # SL-13: an automatic pass
    return state


def _leave(state: State, seat: int) -> State:
    if state.phase in (PLAY_OVER, ENDED) or seat in state.left:
        return state.derive(disconnected=state.disconnected | {seat})
    state = state.derive(left=state.left | {seat}, disconnected=state.disconnected | {seat})
    if state.variant.leave_penalty and seat not in state.out:
        sam = state.declarer == seat
        for p in shedding.leave_penalties(seat, state.order, declared_sam=sam):
            state = _owe(state, p.payer, p.payee, p.amount_stakes, p.reason, p.rule)
        if sam:
            state = state.derive(declarer=None)
    if seat in state.out:
        return state
    return _remove(state, seat)


def _remove(state: State, seat: int) -> State:
    """``seat`` is out of play (TL-11 disconnect, leaving); play goes on without it."""
    state = state.derive(out=state.out | {seat})
    if state.phase == DEALING:
        return state
    playing = active(state)
    if state.phase == DECLARING:
        if len(playing) == 1:
            return _end(state, playing[0], OUT)
        return _close_window(state)
    if len(playing) == 1:
        state = _pay_chain(state)
        return _end(state, playing[0], OUT)  # TL-11: the one left wins
    if state.turn == seat:
        if state.leading:
            return _settle_turn(state.derive(turn=_next_leader(state, seat)))
        return _advance(state, seat)
    if state.leading:
        return _settle_turn(state)
    last = top(state)
    if last is not None and last.seat == seat and state.turn is not None:
        # The top play's seat left: the round closes when everyone else has passed.
        waiting = [s for s in playing if s not in state.round_passed]
        if not waiting:
            return _close_round(state, seat)
    return state


# --- the end of play ------------------------------------------------------------------------


def _stalemate(state: State) -> State:
    """Sâm Lốc SL-7 (b): nobody in play can lead (each holds only a 2). Decision: play ends
    and the seat with the lowest count (ties: playing order from the seat to lead) is first."""
    check(state.turn is not None, "a seat was to lead")
    assert state.turn is not None
    if state.declarer is not None:
        return _sam_stuck(state, state.declarer)
    start = state.turn
    playing = [s for s in [start, *after(state, start)[:-1]] if s not in state.out]
    rules = state.variant.rules
    best = min(playing, key=lambda s: (shedding.count_left(state.hands[s], rules).total_stakes, playing.index(s)))
    return _end(state, best, STALEMATE)


def _end(state: State, winner: int, how: str, *, offender: int = -1) -> State:
    """Play is over: ``winner`` is first; the end-of-hand lines are owed now."""
    v = state.variant
    rules = v.rules
    state = state.derive(winner=winner, ending=how, phase=PLAY_OVER, turn=None)
    others = [s for s in after(state, winner)[:-1]]
    if how == DUT:
        for p in shedding.dut_ba_bich_penalties(winner, {s: state.hands[s] for s in others}):
            state = _owe(state, p.payer, p.payee, p.amount_stakes, p.reason, p.rule)
        return state
    if how == CUU_LANG:
        village = {s: state.hands[s] for s in state.order if s != offender}
        p = shedding.thoi_ba_bich_penalty(offender, winner, village)
        return _owe(state, p.payer, p.payee, p.amount_stakes, p.reason, p.rule)
    if how == INSTANT:
        for p in shedding.instant_win_penalties(winner, others, rules, settlement_mode=v.settlement_mode):
            state = _owe(state, p.payer, p.payee, p.amount_stakes, p.reason, p.rule)
        return state
    if how == SAM_WON:
        if state.marked:  # SL-10 đền trắng: the first marked seat pays for everyone
            first = min(state.marked, key=lambda s: others.index(s))
            p = shedding.den_trang(first, winner, len(state.order))
            state = _owe(state, p.payer, p.payee, p.amount_stakes, p.reason, p.rule)
        else:
            for p in shedding.sam_success(winner, [s for s in others if s not in state.left]):
                state = _owe(state, p.payer, p.payee, p.amount_stakes, p.reason, p.rule)
        return state.derive(declarer=None)
    return _finish(state, winner, how)


def _finish(state: State, winner: int, how: str) -> State:
    if state.phase != PLAY_OVER:
        state = state.derive(winner=winner, ending=how, phase=PLAY_OVER, turn=None)
    if how == SAM_CAUGHT:
        return state  # SL-9: no card count after a caught Sâm
    v = state.variant
    rules = v.rules
    # SL-21: a Sâm Lốc leaver pays the leave penalty instead of any count.
    losers = [s for s in after(state, winner)[:-1] if not (v.leave_penalty and s in state.left)]
    if v.settlement_mode == shedding.RANK:
        return _rank(state, winner, losers)
    for seat in losers:
        counted = shedding.count_left(state.hands[seat], rules, played_any=seat in state.played_any)
        for line in counted.lines:
            state = _owe(state, seat, winner, line.amount_stakes, line.reason, line.rule)
    return state


def _rank(state: State, winner: int, losers: list[int]) -> State:
    """Rank mode (TL-2, TL-18, TL-4, TL-11): the others are placed by their count with
    conversions, ascending, ties in turn order after the winner; a cóng or disconnected
    seat is last; each place pays the first its figure of the ranking table (9.4)."""
    rules = state.variant.rules
    turn = {s: i for i, s in enumerate(losers)}

    def key(s: int) -> tuple[int, int, int, int]:
        return (
            s in state.out,
            s not in state.played_any,
            shedding.count_left(state.hands[s], rules).total_stakes,
            turn[s],
        )

    placed = sorted(losers, key=key)
    pays = RANK_PAYS.get(len(state.order), ())
    for place, seat in enumerate(placed):
        stakes = pays[place] if place < len(pays) else pays[-1] if pays else 0
        state = _owe(state, seat, winner, stakes, RANK_PLACE, "9.4, TL-18")
    return state


# --- settlement -----------------------------------------------------------------------------


def settle(state: State) -> Settlement:
    if state.phase != ENDED:
        raise RuleViolation("HAND_NOT_OVER", "the hand has not ended")
    started = state.started
    players = {info.seat: info.player_id for info in started.seats}
    builder = SettlementBuilder(started.game, started.table_id, started.hand_id, players)
    stacks = {info.seat: info.stack_gold for info in started.seats}
    pay_obligations(builder, state.obligations, stacks, state.order)
    builder.charge_fees(started.fee_bps, list(state.order))
    # Gold moves only between the seats and the fee account: no pot, no bank.
    return check_settlement(builder.build(), stacks)


# --- who leads the next hand ----------------------------------------------------------------


def next_hand_dealer(
    previous_state: object | None,
    previous_dealer: int | None,
    participants: Sequence[int],
    seats_max: int,
    owner_seat: int,
    stacks: Mapping[int, int] | None = None,
) -> int:
    """The next hand's leader (``HandStarted.dealer_seat``): the previous hand's winner
    (9.1, SL-1), else the seat that came second by its count (9.1), else the kit's default
    (the owner in a first hand, then the seat after the previous dealer)."""
    if isinstance(previous_state, State) and previous_state.winner is not None:
        if previous_state.winner in participants:
            return previous_state.winner
        rules = previous_state.variant.rules
        rest = [s for s in after(previous_state, previous_state.winner)[:-1] if s in participants]
        if rest:
            return min(rest, key=lambda s: shedding.count_left(previous_state.hands[s], rules).total_stakes)
    return kit_next_hand_dealer(
        previous_state, previous_dealer, participants, seats_max, owner_seat, stacks, COUNTERCLOCKWISE
    )


def obligation_detail(rule: str, plays: tuple[int, ...]) -> str:
    """``"TL-6; plays 7, 8, 9"``: the rule and the plays that caused an obligation, numbered
    from 1 in the order the hand's ``play`` actions were made (the settlement's ``detail``).
    Empty when no play caused it (cards left at the end): the reason's rule says it all."""
    if not plays:
        return ""
    return f"{rule}; play{'s' if len(plays) > 1 else ''} {', '.join(map(str, plays))}"


def explain(state: State) -> list[str]:
    """One line per obligation: reason, rule, who pays whom, lá, and the plays that caused it."""
    lines = []
    for reason, rule, payer, payee, stakes, plays in state.explanations:
        caused = f" (plays {', '.join(map(str, plays))})" if plays else ""
        lines.append(f"{reason} [{rule}]: seat {payer} pays seat {payee} {stakes} lá{caused}")
    return lines


__all__ = [
    "State",
    "Variant",
    "apply",
    "candidate_actions",
    "explain",
    "is_finished",
    "legal_actions",
    "new_state",
    "next_hand_dealer",
    "pending",
    "reasons",
    "settle",
]
