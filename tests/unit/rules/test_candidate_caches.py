"""The candidate-move caches give exactly what their uncached definitions give.

What a client, a bot or the timer asks about a hand is kept where it is asked again: the
legal and candidate moves of a state (``base.per_state``, by the state's identity), what
fits a laid Phỏm meld (``phom_melds._fits``, by the meld's cards), Mậu Binh's suggested
arrangement (by the 13 cards), and Tiến Lên / Sâm Lốc's legal plays, a filter of every
combination of the seat's cards when first asked in the hand (``shedding.HandPlays``).
Each is checked here against the plain definition on random states and hands: a cache
can only ever save time.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socai import fairness
from socai.cards import ALL_CARDS, Card
from socai.events.model import Body, HandStarted, SeatInfo
from socai.rules import autoplay, base, registry
from socai.rules.base import PerState
from socai.rules.chinese_poker import maubinh, maubinh_hands
from socai.rules.chinese_poker.maubinh_hands import HandOptions
from socai.rules.climbing import shedding, shedding_play
from socai.rules.climbing.shedding import SAMLOC, TIENLEN, Combination, SheddingRules
from socai.rules.rummy import phom, phom_melds

GAMES = pytest.mark.parametrize("rules", [TIENLEN, SAMLOC], ids=["tienlen", "samloc"])
RANK_WINDOWS = ((14, 2, 3, 4, 5), (3, 4, 5, 6, 7), (7, 8, 9, 10, 11), (11, 12, 13, 14, 2))
POOLS = (tuple(ALL_CARDS), *(tuple(c for c in ALL_CARDS if c.rank in w) for w in RANK_WINDOWS))


def _fields(plays: Sequence[Combination]) -> list[tuple[object, ...]]:
    return [(p.kind, p.cards, p.key, p.shape, p.game_id) for p in plays]


def reference_legal_plays(
    hand: Sequence[Card],
    over: Combination | None,
    rules: SheddingRules,
    highest_single_only: bool,
    must_include: Card | None,
) -> list[Combination]:
    """Every subset of the hand that forms a combination and may be played, in
    ``play_order``: the definition ``legal_plays`` implements."""
    top_rank = max(shedding._RANK_ORDER[c.rank] for c in hand)
    found = []
    for size in range(1, len(hand) + 1):
        for cards in itertools.combinations(hand, size):
            play = shedding.combo(cards, rules)
            if play is None or (over is not None and not shedding.beats(play, over, rules)):
                continue
            if rules.no_two_in_last_play and size == len(hand) and any(c.rank == 2 for c in cards):
                continue
            if highest_single_only and play.kind == shedding.SINGLE and shedding._RANK_ORDER[cards[0].rank] != top_rank:
                continue
            if must_include is not None and must_include not in cards:
                continue
            found.append(play)
    return sorted(found, key=shedding.play_order)


@st.composite
def shedding_questions(
    draw: st.DrawFn, rules: SheddingRules
) -> tuple[list[Card], Combination | None, bool, Card | None]:
    pool = draw(st.sampled_from(POOLS))
    cards = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=17, unique=True))
    split = draw(st.integers(1, len(cards) - 1))
    hand, rest = cards[:split][:10], cards[split:]
    over = None
    if draw(st.booleans()):
        # The play to answer: a combination the other cards form.
        options = [c for n in range(1, 5) for cs in itertools.combinations(rest, n) if (c := shedding.combo(cs, rules))]
        over = draw(st.sampled_from(options)) if options else None
    must = draw(st.sampled_from([None, *hand]))
    return hand, over, draw(st.booleans()), must


@GAMES
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_legal_plays_are_the_subsets_that_may_be_played_in_play_order(
    rules: SheddingRules, data: st.DataObject
) -> None:
    hand, over, highest_single_only, must = data.draw(shedding_questions(rules))
    found = shedding.legal_plays(hand, over, rules, highest_single_only=highest_single_only, must_include=must)
    expected = reference_legal_plays(hand, over, rules, highest_single_only, must)
    assert _fields(found) == _fields(expected)


@GAMES
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_legal_plays_within_the_plays_of_a_larger_hand_are_the_same(rules: SheddingRules, data: st.DataObject) -> None:
    """Filtered from the plays of a hand that holds more cards (a seat's dealt hand), the
    answer is the one worked out from the cards; plays of a hand that lacks a card, or of
    other rules, are not used."""
    hand, over, highest_single_only, must = data.draw(shedding_questions(rules))
    extra = data.draw(st.lists(st.sampled_from([c for c in ALL_CARDS if c not in hand]), max_size=13 - len(hand)))
    larger = shedding.hand_plays([*hand, *dict.fromkeys(extra)], rules)
    smaller = shedding.hand_plays(hand[1:], rules)
    other = shedding.hand_plays(hand, TIENLEN if rules is SAMLOC else SAMLOC)
    expected = _fields(reference_legal_plays(hand, over, rules, highest_single_only, must))
    for within in (larger, smaller, other, None):
        found = shedding.legal_plays(
            hand, over, rules, highest_single_only=highest_single_only, must_include=must, within=within
        )
        assert _fields(found) == expected


def test_what_fits_a_laid_meld_is_every_card_that_keeps_it_a_phom() -> None:
    rng = random.Random(7)
    melds = [m for m in itertools.combinations(ALL_CARDS[:24], 3) if phom_melds.is_meld(m)]
    melds += [
        tuple(c for c in ALL_CARDS if c.suit == s and lo <= phom_melds.phom_rank(c) < lo + n)
        for s in range(4)
        for lo in range(1, 12)
        for n in (3, 4, 5)
    ]
    melds = [m for m in melds if phom_melds.is_meld(m)]
    assert len(melds) > 100
    for meld in melds:
        shuffled = list(meld)
        rng.shuffle(shuffled)
        expected = {c for c in ALL_CARDS if c not in meld and phom_melds.is_meld([*meld, c])}
        assert phom_melds._fits(shuffled) == expected
        assert phom_melds._fits(meld) == expected  # asked again: the kept answer


def test_a_laid_meld_that_is_no_phom_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(Exception, match="not a Phỏm"):
            phom_melds._fits((*ALL_CARDS[:3:2], ALL_CARDS[40]))


def test_maubinh_suggestions_kept_by_the_cards_are_the_arrangers_answers() -> None:
    rng = random.Random(11)
    for _ in range(30):
        cards = rng.sample(ALL_CARDS, 13)
        for wheel in (True, False):
            kept = maubinh._suggested(maubinh._key(cards), wheel)
            assert kept == maubinh_hands.suggest_arrangement(cards, HandOptions(wheel_second_highest=wheel))
            assert maubinh._suggested(maubinh._key(list(reversed(cards))), wheel) is kept


# --- moves kept per state ------------------------------------------------------------------


def _states(game: str, hands: int, seed: int) -> Iterator[tuple[Any, int]]:
    """Every (state, seat to act) of ``hands`` seeded self-played hands of ``game``."""
    module = registry.get(game)
    rng = random.Random(seed)
    for number in range(hands):
        players = rng.randint(module.SPEC.players_min, min(4, module.SPEC.players_max))
        seats = sorted(rng.sample(range(4), players))
        hand_seed = bytes(rng.getrandbits(8) for _ in range(fairness.SEED_BYTES))
        started = HandStarted(
            "t1",
            f"h{number}",
            game,
            number + 1,
            10,
            0,
            4,
            tuple(SeatInfo(s, f"p{s}", 5_000) for s in seats),
            rng.choice(seats),
            fairness.commitment(hand_seed),
            options=base.full_options(module, {}),
            rules_version=base.rules_version(module),
        )
        seen: list[tuple[Any, int]] = []

        def choose(state: Any, seat: int, candidates: Sequence[Body], seen: list[Any] = seen) -> Body | None:
            seen.append((state, seat))
            return rng.choice(list(candidates)) if candidates and rng.random() < 0.95 else None

        autoplay.play_hand(module, started, hand_seed, choose)
        yield from seen


KEPT: dict[str, tuple[PerState[Any, Any], ...]] = {
    "phom": (phom.legal_actions, phom.legal_moves, phom._candidates),
    "maubinh": (maubinh._candidates,),
    "tienlen": (shedding_play.plays_for, shedding_play.legal_moves),
    "samloc": (shedding_play.plays_for, shedding_play.legal_moves),
}


@pytest.mark.parametrize("game", sorted(KEPT))
def test_moves_kept_per_state_are_the_moves_of_that_state(game: str) -> None:
    module = registry.get(game)
    states = list(_states(game, 30 if game == "maubinh" else 12, seed=len(game)))
    assert len(states) > 50
    laying = 0
    for state, seat in states:
        for kept in KEPT[game]:
            first = kept(state, seat)
            assert first == kept.uncached(state, seat)
            assert kept(state, seat) is first  # asked again about the same state: kept
        if game in ("phom", "maubinh"):
            assert module.candidate_actions(state, seat) == list(KEPT[game][-1].uncached(state, seat))
        if game == "phom" and state.phase == phom.LAY:  # the lay-down asked of a seat laying down
            laid = phom._best_lay(state, seat)
            assert laid == phom._best_lay.uncached(state, seat)
            assert phom._best_lay(state, seat) is laid
            laying += 1
    assert game != "phom" or laying > 5
    # Answers about other states, asked in between, are never mixed up: each state again.
    for state, seat in states[:: max(1, len(states) // 50)]:
        for kept in KEPT[game]:
            assert kept(state, seat) == kept.uncached(state, seat)


@pytest.mark.parametrize("game", ["tienlen", "samloc"])
def test_a_seats_plays_filtered_from_its_first_hand_are_its_legal_plays_now(game: str) -> None:
    """``shedding_play.plays_for`` (the seat's plays of the hand, kept by the hand and the
    seat, then filtered) against ``legal_plays`` worked out from the cards with every
    cache emptied, and against the definition for hands of ten cards or fewer."""
    states = [(s, seat) for s, seat in _states(game, 12, seed=3) if s.phase == shedding_play.PLAYING]
    assert len(states) > 100
    rules = states[0][0].variant.rules
    checked = 0
    for state, seat in states:
        kept = shedding_play.plays_for.uncached(state, seat)
        shedding._hand_plays.cache_clear()
        shedding._built.clear()
        over = shedding_play.top(state)
        facing = None if state.leading or over is None else over.combination
        restricted = shedding_play._bao_1_restricted(state, seat)
        must = shedding_play._must_include(state, seat)
        hand = state.hands[seat]
        fresh = shedding.legal_plays(hand, facing, rules, highest_single_only=restricted, must_include=must)
        assert _fields(kept) == _fields(fresh)
        if len(hand) <= 10:
            assert _fields(kept) == _fields(reference_legal_plays(hand, facing, rules, restricted, must))
            checked += 1
    assert checked > 50


@base.game_state
class _Numbered(base.GameState):
    n: int


def test_the_memo_tells_equal_states_apart_and_forgets_the_oldest() -> None:
    calls: list[int] = []

    def answer(state: object, seat: int) -> tuple[int, ...]:
        calls.append(seat)
        return (id(state), seat)

    kept = base.per_state(answer)
    a, b = _Numbered.create(n=1), _Numbered.create(n=1)  # equal, not the same object
    assert a == b
    assert kept(a, 0) != kept(b, 0)
    assert kept(a, 0) == (id(a), 0) and calls == [0, 0]
    held = [_Numbered.create(n=n) for n in range(base.STATE_MEMO_MAX + 1)]
    for state in held:
        kept(state, 1)
    calls.clear()
    kept(a, 0)  # pushed out by the others
    assert calls == [0]


def test_a_record_memo_answers_by_identity_and_stops_growing_when_full() -> None:
    calls: list[object] = []

    def answer(record: object) -> tuple[int, int]:
        calls.append(record)
        return (id(record), len(calls))

    kept = base.per_record(answer)
    a, b = HandOptions(), HandOptions()  # equal, not the same object
    assert a == b and a is not b
    assert kept(a) == kept(a) and kept(a) != kept(b)
    assert calls == [a, b]
    others = [HandOptions(home_run_multiplier=2 + n % 15) for n in range(base.RECORD_MEMO_MAX)]
    for record in others:
        kept(record)
    calls.clear()
    kept(a)  # still kept
    kept(others[-1])  # came once the memo was full: worked out again
    assert calls == [others[-1]]


@pytest.mark.parametrize("game", ["tienlen", "samloc"])
def test_a_shedding_variant_is_built_once_per_options_and_is_the_uncached_one(game: str) -> None:
    module = registry.get(game)
    options = base.parse_options(module.Options, base.full_options(module, {}))
    assert module.variant(options) is module.variant(options)
    assert module.variant(options) == module.variant.uncached(options)
