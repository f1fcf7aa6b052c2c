"""Regenerate ``fixtures/hands.jsonl``: ``python -m tests.unit.audit.make_fixture``.

Six hands played by bots with ``tests.support.synthetic`` (seed 7): two of Hold'em at t0001,
two of Xì Tố at t0002, two of Tài Xỉu at t0003, each table's own facts first, exported
exactly as ``socai events export`` writes them. The tamper tests edit copies of it.
"""

from __future__ import annotations

from pathlib import Path

from socai.audit.export import write_jsonl
from tests.support.synthetic import simulate

FIXTURE = Path(__file__).parent / "fixtures" / "hands.jsonl"


def main() -> None:
    sim = simulate(6, ("holdem", "xito", "taixiu"), seed=7, hands_per_table=2)
    with FIXTURE.open("w", encoding="utf-8") as out:
        write_jsonl(sim.events(), out)


if __name__ == "__main__":
    main()
