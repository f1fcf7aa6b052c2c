"""``python -m tests.support.native_diff HANDS``: what the differential test between the
compiled and the interpreted core compares (``tests/unit/rules/test_native_build.py``).

Prints one JSON object: which core ran (``socai.core_build()``), and per golden-corpus batch
and per game's self-play a sha256 over every replayed hand (its posting, stored row, error or crash:
corpus) or every hand's events and settlement (self-play, ``HANDS`` hands of each game from a
fixed seed), with the counts. The test runs it once on each build and requires equal output
but for the build's name: byte-identical settlements and event sequences."""

from __future__ import annotations

import hashlib
import json
import sys

import socai
from socai.rules import registry
from tests.golden import corpus
from tests.support.synthetic import simulate


def digests(hands: int) -> dict[str, object]:
    out: dict[str, object] = {"core": socai.core_build()}
    for batch in corpus.batches():
        if batch.kind == corpus.ENGINE:
            outcome = corpus.check_engine_batch(batch)
            out[f"corpus/{batch.name}"] = [outcome.hands, sorted(outcome.differences)]
            continue
        _, replayed, _ = corpus.replay_batch(batch)
        digest = hashlib.sha256()
        for got in replayed:
            digest.update(repr(got).encode())
        out[f"corpus/{batch.name}"] = [len(replayed), digest.hexdigest()]
    for game in registry.available():
        played = simulate(hands, (game,), seed=5).hands
        digest = hashlib.sha256()
        for hand in played:
            digest.update(repr((hand.hand_id, hand.events, hand.settlement)).encode())
        out[f"selfplay/{game}"] = [len(played), digest.hexdigest()]
    return out


if __name__ == "__main__":
    print(json.dumps(digests(int(sys.argv[1]))))
