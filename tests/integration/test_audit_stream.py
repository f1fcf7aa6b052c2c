"""``socai events export`` and ``socai audit`` reading a real stream (no ledger needed here)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from socai.audit.export import read_jsonl
from socai.events import codec
from socai.events.log import EventLog
from socai.infra.logging import configure
from socai.infra.nats import StreamSpec, ensure_stream
from socai_cli.main import main
from tests.support.simulate import Simulation, publish, simulate

pytestmark = pytest.mark.integration


@pytest.fixture
async def published(nats_client: object, stream_spec: StreamSpec) -> AsyncIterator[tuple[list[str], Simulation]]:
    prefix = stream_spec.subjects[0].removesuffix(".>")
    log = EventLog(nats_client, stream_spec.name, prefix)  # type: ignore[arg-type]
    await ensure_stream(log.js, stream_spec)
    sim = simulate(9, ("holdem", "xito", "taixiu"), seed=5, hands_per_table=3)
    await publish(log, sim)
    try:
        yield ["--stream", stream_spec.name, "--prefix", prefix], sim
    finally:
        await log.js.delete_stream(stream_spec.name)


async def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``socai …`` in a thread (it runs its own event loop), output captured."""
    status = await asyncio.to_thread(main, args)
    out = capsys.readouterr()
    configure(fmt="console", level="warning", stream=sys.__stderr__)  # main pointed logs at the capture
    return status, out.out, out.err


async def test_export_writes_every_event_as_the_protobuf_json_mapping(
    nats_url: str, published: tuple[list[str], Simulation], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags, sim = published
    out = tmp_path / "all.jsonl"
    status, _, err = await run(["events", "export", "--nats-url", nats_url, *flags, "--out", str(out)], capsys)
    assert status == 0
    assert err.strip().endswith(f"exported {len(sim.events())} events")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    # Stream order per subject; tables were published concurrently, so compare as sets.
    assert sorted(json.dumps(x, sort_keys=True) for x in lines) == sorted(
        json.dumps(codec.to_json(e), sort_keys=True) for e in sim.events()
    )
    per_hand: dict[str, list[int]] = {}
    for x in lines:
        per_hand.setdefault(x["hand_id"], []).append(int(x["seq"]))
    assert all(seqs == sorted(seqs) for seqs in per_hand.values())


async def test_export_filters_by_table_and_game_keep_whole_hands(
    nats_url: str, published: tuple[list[str], Simulation], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags, sim = published
    table = sim.tables[1]
    out = tmp_path / "one.jsonl"
    status, _, _ = await run(
        ["events", "export", "--nats-url", nats_url, *flags, "--table", table.table_id, "--out", str(out)], capsys
    )
    assert status == 0
    assert [r.message.event_id for r in read_jsonl(out) if r.message] == [
        e.event_id for e in (*table.table_events, *(e for h in table.hands for e in h.events))
    ]
    status, _, _ = await run(
        ["events", "export", "--nats-url", nats_url, *flags, "--game", "taixiu", "--out", str(out)], capsys
    )
    hands = {r.message.hand_id for r in read_jsonl(out) if r.message and not r.is_table_fact}
    assert hands == {h.hand_id for h in sim.hands if h.game == "taixiu"}


async def test_audit_of_the_stream_without_a_ledger_is_clean(
    nats_url: str, published: tuple[list[str], Simulation], capsys: pytest.CaptureFixture[str]
) -> None:
    flags, sim = published
    status, out, _ = await run(["audit", "--nats-url", nats_url, *flags, "--no-ledger"], capsys)
    assert status == 0, out
    assert f"hands verified {len(sim.hands)}" in out
    assert "mismatches: none" in out


async def test_audit_of_a_stream_with_a_forged_hand_names_it(
    nats_url: str,
    nats_client: object,
    published: tuple[list[str], Simulation],
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags, sim = published
    stream, prefix = flags[1], flags[3]
    log = EventLog(nats_client, stream, prefix)  # type: ignore[arg-type]
    # A second writer appends to a finished hand (the stream allows it; the audit does not).
    hand = sim.hands[0]
    last = (await log.read_hand(hand.table_id, hand.hand_id))[-1].stream_seq
    extra = hand.events[-2]
    await log.append(
        type(extra)(extra.table_id, extra.hand_id, len(hand.events) + 1, extra.game, extra.occurred_at, extra.body),
        last,
    )
    status, out, _ = await run(["audit", "--nats-url", nats_url, *flags, "--no-ledger"], capsys)
    assert status == 1
    assert (
        f"{hand.hand_id}/{len(hand.events) + 1}: " in out
        and f"after HandEnded ({hand.hand_id}/{len(hand.events)})" in out
    )
