"""What hand seals cost settlement (socai.events.seal), side by side in one run.

- ``settlement.drain_sealed`` (hands/s): ``settlement.drain``'s backlog (every available game,
  ``DRAIN_HANDS`` hands; 500 with ``--quick``), chained and sealed as the table service writes
  it, drained by the ``socai_settlement`` process, which verifies each hand's seal and walks its
  chain before replaying it. Peer ``unchecked``: the same hands written unsealed (as before
  hand seals) and drained with ``SOCAI_SEAL_LEGACY_BEFORE_SEQ`` above them all, so no seal is
  checked — the settlement path as it was. Each drain has a fresh stack.
- ``settlement.seal_check_us_per_hand`` (µs, lower is better): ``sealed_replay.authenticate`` alone
  (sha256 per event, the walk back, one Ed25519 verification) over the same hands, in this
  process; peer ``replay_us_per_hand``: the replay of the same hands, for scale.
"""

from __future__ import annotations

import asyncio
import time

from socai.events import seal
from socai.events.model import subject
from socai.rules import registry
from socai_settlement.config import default_replay_workers
from socai_settlement.sealed_replay import EventBytes, HandInput, SealPolicy, authenticate, replay_payloads
from tests.bench.bench_settlement import DRAIN_HANDS, DRAIN_HANDS_QUICK, _backlogged
from tests.bench.harness import BenchContext, Result
from tests.support.synthetic import DEV_SIGNER, Simulation, sealed, simulate

UNCHECKED_LEGACY_BEFORE = 2**62  # every message of the unsealed backlog is "legacy"


def run(ctx: BenchContext) -> list[Result]:
    hands = DRAIN_HANDS_QUICK if ctx.quick else DRAIN_HANDS
    sim = simulate(hands, registry.available(), seed=2026)
    checked = asyncio.run(_drain(ctx, sim, DEV_SIGNER))
    unchecked = asyncio.run(_drain(ctx, sim, None, SOCAI_SEAL_LEGACY_BEFORE_SEQ=str(UNCHECKED_LEGACY_BEFORE)))
    params = {
        "hands": len(sim.hands),
        "events": len(sim.events()),
        "replay_workers": default_replay_workers(),
        "note": "2 cores shared with other work; each drain on a fresh embedded stack",
    }
    check_us, replay_us = _check_cost(sim)
    return [
        Result("settlement.drain_sealed", checked, "hands/s", peers={"unchecked": unchecked}, params=params),
        Result(
            "settlement.seal_check_us_per_hand",
            check_us,
            "µs",
            higher_is_better=False,
            peers={"replay_us_per_hand": replay_us},
            params={"hands": len(sim.hands)},
        ),
    ]


async def _drain(ctx: BenchContext, sim: Simulation, signer: seal.HandSigner | None, **service_env: str) -> float:
    env = await _backlogged(ctx.workdir / "stack", sim, signer=signer)
    try:
        await env.start_service("settlement", **service_env)
        deadline = time.monotonic() + 1800
        while True:
            count, first, last = env.settled()
            if count >= len(sim.hands) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.25)
        if count < len(sim.hands):
            raise RuntimeError(f"only {count} of {len(sim.hands)} hands settled: {env.dead_letters()}")
        assert first is not None and last is not None
        return count / max((last - first).total_seconds(), 1e-6)
    finally:
        env.stop()


def _check_cost(sim: Simulation) -> tuple[float, float]:
    policy = SealPolicy(((DEV_SIGNER.key_id, DEV_SIGNER.public_key),))
    inputs = []
    for hand in sim.hands:
        subj = subject(hand.table_id, hand.hand_id)
        chains: dict[str, bytes] = {}
        stored = []
        for i, e in enumerate(hand.events, start=1):
            payload, headers = sealed(subj, e, chains)
            stored.append(EventBytes(e.seq, e.hand_id, e.table_id, payload, i, tuple(headers.items())))
        inputs.append(HandInput(hand.hand_id, subj, len(stored), tuple(stored)))
    start = time.perf_counter()
    for item in inputs:
        _, checked = authenticate(item, policy)
        if checked.error_code:
            raise RuntimeError(f"{item.hand_id}: {checked.error_code}")
    check_s = time.perf_counter() - start
    start = time.perf_counter()
    replayed = replay_payloads(inputs, policy)  # authenticates again: subtract it
    replay_s = time.perf_counter() - start - check_s
    if any(r.settled is None for r in replayed):
        raise RuntimeError("a hand did not replay")
    n = len(inputs)
    return check_s / n * 1e6, replay_s / n * 1e6
