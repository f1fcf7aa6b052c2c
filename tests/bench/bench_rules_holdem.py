"""Hold'em benchmarks: 7-card evaluation, replaying hands from their events, self-play.

- ``rules.holdem.eval7`` (evals/s, params mode=batch): ``socai.rules.poker.holdem.evaluate_batch``
  on an (N, 7) array of card indices, against each peer's best public API on the same
  hands, in the same run: ``treys`` (``Evaluator.evaluate``, pure Python), ``pokerkit``
  (``StandardHighHand.from_game``, pure Python), ``eval7`` (``evaluate``, Cython) and
  ``phevaluator`` (``evaluate_cards``, C). Peers have no batch API, so they are called once
  per hand from a Python loop over pre-converted cards; that is the fastest way a Python
  caller can use them.
- ``rules.holdem.eval7_scalar`` (evals/s): our one-hand-per-call path,
  ``evaluator.strength7_of_indices`` on card indices, with ``hand_value`` on ``Card``
  objects in the params; the same peers as above.
- ``rules.holdem.replay_6max`` (hands/s): full 6-max hands folded from their events through
  ``initial_state``/``apply``/``settle``; peer ``pokerkit`` replays the same hands through
  its state machine (``NoLimitTexasHoldem``). The hands are played with the standard
  no-limit raise rule (``min_raise="last_raise"``) so that PokerKit accepts every raise.
- ``rules.holdem.selfplay`` (hands/s): ``autoplay.play_hand`` with random choices among
  ``candidate_actions``, dealing from the fair shuffle, then ``settle``.
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Sequence

import eval7
import numpy as np
import phevaluator
import pokerkit
import treys

from socai.cards import ALL_CARDS
from socai.events.model import ActionKind, BetAction, Body, HandStarted, SeatInfo
from socai.rules import autoplay
from socai.rules.poker import evaluator, holdem
from tests.bench.harness import BenchContext, Result, rate
from tests.unit.rules.test_holdem_pokerkit import pokerkit_replay


def random_hands(count: int, seed: int) -> np.ndarray:
    """``count`` random 7-card hands as canonical card indices, shape (count, 7)."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((count, 52)), axis=1)[:, :7].astype(np.uint8)


def _eval_results(ctx: BenchContext) -> list[Result]:
    count = 20_000 if ctx.quick else 200_000
    rounds = 2 if ctx.quick else 5
    hands = random_hands(count, 7)
    rows = hands.tolist()
    evaluator.tables()
    evaluator.evaluate_batch(hands[:10])  # the tables are built before timing

    batch = rate(lambda: len(evaluator.evaluate_batch(hands)), rounds)

    def scalar() -> int:
        f = evaluator.strength7_of_indices
        for h in rows:
            f(*h)
        return len(rows)

    as_cards = [[ALL_CARDS[i] for i in h] for h in rows]

    def scalar_cards() -> int:
        f = holdem.hand_value
        for h in as_cards:
            f(h)
        return len(as_cards)

    # Peers, each on the same hands, converted to its own card type before timing.
    treys_eval = treys.Evaluator()
    treys_hands = [[treys.Card.new(str(c)) for c in h] for h in as_cards]

    def run_treys() -> int:
        f = treys_eval.evaluate
        for h in treys_hands:
            f(h[:2], h[2:])
        return len(treys_hands)

    e7_cards = [eval7.Card(str(c)) for c in ALL_CARDS]
    e7_hands = [[e7_cards[i] for i in h] for h in rows]

    def run_eval7() -> int:
        f = eval7.evaluate
        for h in e7_hands:
            f(h)
        return len(e7_hands)

    def run_phevaluator() -> int:
        # phevaluator's int card id is rank * 4 + suit with suits c d h s.
        f = phevaluator.evaluate_cards
        for h in ph_hands:
            f(*h)
        return len(ph_hands)

    ph_suit = {0: 3, 1: 0, 2: 1, 3: 2}  # our ♠ ♣ ♦ ♥ → phevaluator's c d h s order
    ph_hands = [[(i >> 2) * 4 + ph_suit[i & 3] for i in h] for h in rows]

    pk_count = max(1000, count // 50)  # PokerKit is slow: time it on a slice
    pk_hands = [pokerkit.Card.parse("".join(str(c) for c in h)) for h in as_cards[:pk_count]]
    pk_lists = [list(h) for h in pk_hands]

    def run_pokerkit() -> int:
        f = pokerkit.StandardHighHand.from_game
        for h in pk_lists:
            f(h[:2], h[2:])
        return len(pk_lists)

    _check_peers_agree(rows[:2000], treys_eval, treys_hands, e7_hands)
    peers = {
        "treys": rate(run_treys, rounds),
        "eval7": rate(run_eval7, rounds),
        "phevaluator": rate(run_phevaluator, rounds),
        "pokerkit": rate(run_pokerkit, max(1, rounds // 2)),
    }
    scalar_rate = rate(scalar, rounds)
    cards_rate = rate(scalar_cards, rounds)
    return [
        Result(
            "rules.holdem.eval7",
            batch,
            "evals/s",
            peers=peers,
            params={"mode": "batch", "hands": count, "api": "evaluator.evaluate_batch (numpy)"},
        ),
        Result(
            "rules.holdem.eval7_scalar",
            scalar_rate,
            "evals/s",
            peers=peers,
            params={
                "mode": "scalar",
                "hands": count,
                "api": "evaluator.strength7_of_indices",
                "hand_value_on_cards_evals_per_s": round(cards_rate, 1),
            },
        ),
    ]


def _check_peers_agree(
    rows: Sequence[Sequence[int]],
    treys_eval: treys.Evaluator,
    treys_hands: Sequence[Sequence[int]],
    e7_hands: Sequence[Sequence[eval7.Card]],
) -> None:
    """The figures compare like with like: every evaluator orders these hands the same."""
    ours = [evaluator.strength7_of_indices(*h) for h in rows]
    e7 = [eval7.evaluate(h) for h in e7_hands]
    tr = [-treys_eval.evaluate(list(h[:2]), list(h[2:])) for h in treys_hands]
    for peer in (e7, tr):
        for i in range(len(rows) - 1):
            a, b = ours[i] - ours[i + 1], peer[i] - peer[i + 1]
            if (a > 0) != (b > 0) or (a == 0) != (b == 0):
                raise AssertionError(f"evaluators disagree on hand {rows[i]} vs {rows[i + 1]}")


# --- replay -----------------------------------------------------------------------------

SIX_MAX_STACK_GOLD = 2000  # 100 big blinds at a stake of 200 (SB 20, BB 40)


def six_max_hands(count: int, seed: int) -> list[list[Body]]:
    """``count`` recorded 6-max hands: 100 BB stacks, a rotating button, decisions drawn
    with loose-aggressive weights from ``candidate_actions`` (and now and then a timeout)."""
    rng = random.Random(seed)
    weights = {
        ActionKind.FOLD: 40,
        ActionKind.CHECK: 50,
        ActionKind.CALL: 35,
        ActionKind.BET: 12,
        ActionKind.RAISE: 10,
        ActionKind.ALL_IN: 2,
    }

    def choose(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
        bets = [c for c in candidates if isinstance(c, BetAction)]
        if rng.random() < 0.01:
            return None  # the turn timer runs out
        return rng.choices(bets, [weights[c.kind] for c in bets])[0]

    hands = []
    for k in range(count):
        seats = tuple(SeatInfo(s, f"p{s}", SIX_MAX_STACK_GOLD) for s in range(6))
        started = HandStarted(
            "bench", f"h{k}", "holdem", k + 1, 200, 0, 6, seats, k % 6, "c", options={"min_raise": "last_raise"}
        )
        bodies, _ = autoplay.play_hand(holdem, started, rng.randbytes(32), choose)
        hands.append(bodies)
    return hands


def replay_hand(bodies: Sequence[Body]) -> object:
    apply = holdem.apply
    state = holdem.initial_state(bodies[0])  # type: ignore[arg-type]
    for body in bodies[1:]:
        state = apply(state, body)
    return holdem.settle(state)


def _replay_results(ctx: BenchContext) -> list[Result]:
    count = 200 if ctx.quick else 2000
    rounds = 2 if ctx.quick else 5
    hands = six_max_hands(count, 11)
    events = sum(len(h) for h in hands)
    # The same money on both engines, checked before timing (no fees, stacks of 100 BB).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for bodies in hands[:200]:
            ours = replay_hand(bodies)
            game = pokerkit_replay(bodies)
            order = holdem.initial_state(bodies[0]).seats  # type: ignore[arg-type]
            nets = [ours.nets[s] for s in order]  # type: ignore[attr-defined]
            theirs = [final - SIX_MAX_STACK_GOLD for final in game.stacks]
            if sum(abs(a - b) for a, b in zip(nets, theirs, strict=True)) > 6:  # odd chips only
                raise AssertionError(f"PokerKit settles hand {bodies[0]} differently: {nets} vs {theirs}")

    def ours() -> int:
        for bodies in hands:
            replay_hand(bodies)
        return len(hands)

    pk_hands = hands[: max(50, count // 10)]

    def theirs() -> int:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for bodies in pk_hands:
                pokerkit_replay(bodies)
        return len(pk_hands)

    ours_rate = rate(ours, rounds)
    return [
        Result(
            "rules.holdem.replay_6max",
            ours_rate,
            "hands/s",
            peers={"pokerkit": rate(theirs, max(1, rounds // 2))},
            params={"hands": count, "events_per_hand": round(events / count, 2), "min_raise": "last_raise"},
        )
    ]


def _selfplay_results(ctx: BenchContext) -> list[Result]:
    count = 100 if ctx.quick else 1000
    rng = random.Random(3)
    seeds = [rng.randbytes(32) for _ in range(count)]

    def choose(state: object, seat: int, candidates: Sequence[Body]) -> Body | None:
        return rng.choice(list(candidates))

    def play() -> int:
        for k, seed in enumerate(seeds):
            seats = tuple(SeatInfo(s, f"p{s}", SIX_MAX_STACK_GOLD) for s in range(6))
            started = HandStarted("bench", f"s{k}", "holdem", k + 1, 200, 300, 6, seats, k % 6, "c")
            _, final = autoplay.play_hand(holdem, started, seed, choose)
            holdem.settle(final)
        return count

    return [
        Result(
            "rules.holdem.selfplay",
            rate(play, 2 if ctx.quick else 3),
            "hands/s",
            params={"players": 6, "chooser": "uniform over candidate_actions", "includes": "fair shuffle"},
        )
    ]


def run(ctx: BenchContext) -> list[Result]:
    started = time.perf_counter()
    evaluator.tables()
    build_s = time.perf_counter() - started
    results = _eval_results(ctx)
    results[0].params["table_build_s"] = round(build_s, 3)
    return results + _replay_results(ctx) + _selfplay_results(ctx)
