"""Mậu Binh benchmarks, and the tool that regenerates the arranger's opponent samples.

- ``rules.maubinh.suggest_p99_ms`` (ms, lower is better): the 99th percentile of one
  ``suggest_arrangement`` call (wall clock) over random 13-card hands (3,000; 300 with
  ``--quick``), after ``warm()``; params carry p50, mean, the maximum and the calling
  thread's CPU-time p50/p99.
- ``rules.maubinh.special_hand`` (hands/s): ``special_hand`` on random 13-card hands.

``python -m tests.bench.bench_maubinh --samples`` prints a new ``_SAMPLE_TEXT`` for
``socai.rules.chinese_poker.maubinh_hands``: the chi codes of every seat of random deals, arranged by
``suggest_arrangement``, 256 quantiles per position. It starts from the chi of random
cards and re-arranges with the previous round's samples a few times, so the samples are
those of opponents who play like the arranger itself.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence

from socai.cards import Card, deck
from socai.rules import ranking
from socai.rules.chinese_poker import maubinh_hands
from tests.bench.harness import BenchContext, Result, percentile, rate

SAMPLE_QUANTILES = 256


def random_deals(count: int, seed: int) -> Iterator[list[tuple[Card, ...]]]:
    """``count`` deals of four 13-card hands from a seeded shuffle (a benchmark, not a table)."""
    rng = random.Random(seed)
    cards = deck("maubinh")
    for _ in range(count):
        rng.shuffle(cards)
        yield [tuple(cards[seat * 13 : (seat + 1) * 13]) for seat in range(4)]


def random_hands(count: int, seed: int) -> list[tuple[Card, ...]]:
    hands: list[tuple[Card, ...]] = []
    for deal in random_deals((count + 3) // 4, seed):
        hands.extend(deal)
    return hands[:count]


def run(ctx: BenchContext) -> list[Result]:
    maubinh_hands.warm()
    hands = random_hands(300 if ctx.quick else 3000, 13)
    timings_ms: list[float] = []
    cpu_ms: list[float] = []
    for hand in hands:
        start, start_cpu = time.perf_counter(), time.thread_time()
        maubinh_hands.suggest_arrangement(hand)
        timings_ms.append((time.perf_counter() - start) * 1000)
        cpu_ms.append((time.thread_time() - start_cpu) * 1000)
    suggest = Result(
        "rules.maubinh.suggest_p99_ms",
        percentile(timings_ms, 99),
        "ms",
        higher_is_better=False,
        params={
            "hands": len(hands),
            "p50_ms": round(percentile(timings_ms, 50), 3),
            "mean_ms": round(statistics.fmean(timings_ms), 3),
            "max_ms": round(max(timings_ms), 3),
            # CPU time of the calling thread: the same calls without the waits of a busy
            # machine, to tell a slow arranger from a crowded host.
            "cpu_p50_ms": round(percentile(cpu_ms, 50), 3),
            "cpu_p99_ms": round(percentile(cpu_ms, 99), 3),
        },
    )

    def detect() -> int:
        for hand in hands:
            maubinh_hands.special_hand(hand)
        return len(hands)

    special = Result(
        "rules.maubinh.special_hand", rate(detect, 2 if ctx.quick else 5), "hands/s", params={"hands": len(hands)}
    )
    return [suggest, special]


# --- regenerating the opponent samples ----------------------------------------------------


def quantiles(codes: Sequence[int], k: int = SAMPLE_QUANTILES) -> list[int]:
    ordered = sorted(codes)
    n = len(ordered)
    return [ordered[min(n - 1, (2 * j + 1) * n // (2 * k))] for j in range(k)]


def chi_codes(arrangement: maubinh_hands.Arrangement) -> tuple[int, int, int]:
    return (
        maubinh_hands.hand_value(arrangement.back).code,
        maubinh_hands.hand_value(arrangement.middle).code,
        maubinh_hands.hand_value(arrangement.front).code,
    )


def sample_round(
    deals: int, seed: int, arrange: Callable[[tuple[Card, ...]], maubinh_hands.Arrangement]
) -> list[list[int]]:
    """Quantiles of each position's chi codes over the normal hands of ``deals`` deals."""
    codes: list[list[int]] = [[], [], []]
    for deal in random_deals(deals, seed):
        for hand in deal:
            if maubinh_hands.special_hand(hand) is not None:
                continue
            for position, code in enumerate(chi_codes(arrange(hand))):
                codes[position].append(code)
    return [quantiles(c) for c in codes]


def random_chi_samples(count: int, seed: int) -> list[list[int]]:
    """The first round's samples: chi of random cards (5, 5 and 3)."""
    rng = random.Random(seed)
    cards = deck("maubinh")
    codes: list[list[int]] = [[], [], []]
    for _ in range(count):
        rng.shuffle(cards)
        for position, chi in enumerate((cards[:5], cards[5:10], cards[10:13])):
            codes[position].append(maubinh_hands.hand_value(chi).code)
    return [quantiles(sorted(c)[len(c) // 2 :] if p < 2 else c) for p, c in enumerate(codes)]


def use_samples(samples: Sequence[Sequence[int]]) -> None:
    """Make ``suggest_arrangement`` score against these samples (this tool only)."""
    maubinh_hands._TABLES[True] = maubinh_hands._Tables(ranking.WHEEL_SECOND_HIGHEST, samples)


def suggestion_of(hand: tuple[Card, ...]) -> maubinh_hands.Arrangement:
    return maubinh_hands.suggest_arrangement(hand).arrangement


def sample_text(samples: Sequence[Sequence[int]]) -> str:
    lines = ["_SAMPLE_TEXT: Final = ("]
    for codes in samples:
        words = [f"{code:06x}" for code in codes]
        lines.append("    (")
        for start in range(0, len(words), 14):
            lines.append('        "' + " ".join(words[start : start + 14]) + ' "')
        lines.append("    ),")
    lines.append(")")
    return "\n".join(lines)


# --- how close the arranger comes to the best arrangement ----------------------------------


def quality(deals: int, opponents: int, seed: int) -> dict[str, float]:
    """Regret of ``suggest_arrangement`` against an exhaustive search, per deal.

    For each deal, one seat's 13 cards; opponents are random 13 of the other 39 cards,
    arranged by ``suggest_arrangement`` (special hands redrawn). Every valid arrangement
    of the seat is scored by its mean units against a first set of opponents (xử bắn
    included, exactly as ``compare_hands``); the best of them and the suggestion are then
    both scored against a second, independent set (so the search's luck on the first set
    does not flatter it). Returns the mean units per opponent of each, the mean regret,
    and how often the suggestion was the search's pick.
    """
    import numpy as np

    rng = random.Random(seed)
    tables = maubinh_hands._tables(True)
    units = np.array(
        [[maubinh_hands.chi_units(code, position) for code in tables.codes] for position in maubinh_hands.POSITIONS]
    )
    index = {code: i for i, code in enumerate(tables.codes)}
    totals = {"suggest": 0.0, "search": 0.0, "baseline": 0.0, "same_pick": 0.0}
    done = 0
    while done < deals:
        cards = deck("maubinh")
        rng.shuffle(cards)
        hand = tuple(sorted(cards[:13], key=maubinh_hands._card_order))
        if maubinh_hands.special_hand(hand) is not None:
            continue
        others = cards[13:]

        def opponent_classes(count: int, others: list[Card] = others) -> np.ndarray:
            rows = []
            while len(rows) < count:
                rng.shuffle(others)
                theirs = tuple(others[:13])
                if maubinh_hands.special_hand(theirs) is not None:
                    continue
                rows.append([index[c] for c in chi_codes(suggestion_of(theirs))])
            return np.array(rows)

        pick_set, judge_set = opponent_classes(opponents), opponent_classes(opponents)
        _, _, back, middle, front = maubinh_hands._valid_splits(hand, tables)
        mine = np.stack([back, middle, front], axis=1)

        def mean_units(rows: np.ndarray, against: np.ndarray) -> np.ndarray:
            result = np.zeros((rows.shape[0], against.shape[0]))
            wins = np.ones(result.shape, dtype=bool)
            losses = np.ones(result.shape, dtype=bool)
            for p in range(3):
                a, o = rows[:, p, None], against[None, :, p]
                result += np.where(a > o, units[p][a], 0) - np.where(a < o, units[p][o], 0)
                wins &= a > o
                losses &= a < o
            result = np.where(wins | losses, 2 * result, result)
            return result.mean(axis=1)

        best = int(np.argmax(mean_units(mine, pick_set)))
        ours = [index[c] for c in chi_codes(suggestion_of(hand))]
        base = [index[c] for c in chi_codes(maubinh_hands.baseline_arrangement(hand))]
        judged = mean_units(np.array([mine[best], ours, base]), judge_set)
        totals["search"] += judged[0]
        totals["suggest"] += judged[1]
        totals["baseline"] += judged[2]
        totals["same_pick"] += float(list(mine[best]) == ours)
        done += 1
    result = {k: v / deals for k, v in totals.items()}
    result["regret"] = result["search"] - result["suggest"]
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_maubinh")
    parser.add_argument("--samples", action="store_true", help="print a new _SAMPLE_TEXT")
    parser.add_argument("--quality", action="store_true", help="regret against an exhaustive search")
    parser.add_argument("--opponents", type=int, default=200)
    parser.add_argument("--deals", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.quality:
        print(quality(args.deals, args.opponents, 7))
        return
    if not args.samples:
        parser.error("nothing to do: pass --samples or --quality")
    samples = random_chi_samples(args.deals * 4, 1)
    for round_number in range(args.rounds):
        use_samples(samples)
        samples = sample_round(args.deals, 100 + round_number, suggestion_of)
        medians = [maubinh_hands.category_of_code(codes[len(codes) // 2]) for codes in samples]
        print(f"# round {round_number + 1}: median chi {medians}", flush=True)
    print(sample_text(samples))


if __name__ == "__main__":
    main()
