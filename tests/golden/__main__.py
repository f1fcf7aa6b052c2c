"""``python -m tests.golden``: record and check the golden corpus (tests/golden/README.md).

python -m tests.golden record GAME --hands N [--seed S]   a table batch: bots through the services
python -m tests.golden script [GAME ...]                  a scripted batch: the reasons bots miss
python -m tests.golden script --engine [GAME ...]         an engine batch: the deals no seed search finds
python -m tests.golden check                              replay and audit every batch, coverage
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from socai.rules import registry
from tests.golden import corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record a table batch: bots play GAME through the real services")
    rec.add_argument("game", choices=registry.available())
    rec.add_argument("--hands", type=int, default=300, help="at least this many hands (default 300)")
    rec.add_argument("--seed", help="seed of the bots' choices and the batch name (default: random)")
    rec.add_argument("--keep-var", action="store_true", help="keep the stack's var/golden/<batch> folder")
    rec.add_argument(
        "--players", type=_seats, help="seats per table, MIN-MAX (default 2-6, within the game's own range)"
    )
    script = sub.add_parser("script", help="record a scripted batch of the goals table batches miss")
    script.add_argument("games", nargs="*", help="games (default: every game with a reason not covered)")
    script.add_argument("--seed", type=int, default=1)
    script.add_argument(
        "--engine",
        action="store_true",
        help="record an engine batch: the goals no seed search reaches (targets.ENGINE_ONLY), from chosen decks",
    )
    sub.add_parser("check", help="replay and audit every batch; print coverage")
    args = parser.parse_args(argv)
    if args.command == "record":
        from tests.golden import record

        path = record.record(
            args.game, args.hands, seed=record.parse_seed(args.seed), keep_var=args.keep_var, players=args.players
        )
        print(f"wrote {path}")
        return 0
    if args.command == "script":
        from tests.golden import script as scripted

        path = scripted.record(args.games or None, seed=args.seed, engine=args.engine)
        if path:
            print(f"wrote {path}")
        elif args.engine:
            print("nothing for an engine batch: every goal of targets.ENGINE_ONLY is recorded")
        else:
            print("nothing to script: every goal a scripted run can reach is recorded (targets.ENGINE_ONLY: --engine)")
        return 0
    return check()


def _seats(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    try:
        return int(low), int(high or low)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"seats are MIN-MAX, e.g. 7-9, not {text!r}") from exc


def check() -> int:
    outcomes = []
    hands: Counter[str] = Counter()
    for batch in corpus.batches():
        outcome = corpus.check_batch(batch)
        outcomes.append(outcome)
        for line in batch.expected():
            hands[line["game"]] += 1
        status = "ok" if outcome.ok else "DIFFERS"
        print(f"{batch.name}: {outcome.hands} hands {status}")
        for hand, diffs in list(outcome.differences.items())[:10]:
            print(f"  {hand}: " + "; ".join(diffs[:3]))
        if outcome.verdict_differs:
            print(f"  audit verdict: {outcome.verdict_differs}")
    cov = corpus.coverage(outcomes)
    print("\n".join(corpus.coverage_lines(cov, hands)))
    complete = all(seen >= declared for seen, declared in cov.values())
    return 0 if all(o.ok for o in outcomes) and complete else 1


if __name__ == "__main__":
    sys.exit(main())
