"""``socai events export`` and ``socai audit`` reading a real stream (no ledger needed here)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from socai.audit.export import read_jsonl
from socai.events import codec, seal
from socai.events.log import EventLog
from socai.events.model import Event
from socai.infra.logging import configure
from socai.infra.nats import StreamSpec, ensure_stream
from socai_cli.main import main
from tests.support.synthetic import DEV_SIGNER, Simulation, publish, publish_hand, simulate

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
    stream_seq = (await log.read_hand(hand.table_id, hand.hand_id))[-1].stream_seq
    status, out, _ = await run(["audit", "--nats-url", nats_url, *flags, "--no-ledger"], capsys)
    assert status == 1
    # Not on the table's sealed chain: named, and not replayed (the hand itself verifies).
    assert "NOT_THE_TABLES" in out
    assert f"stream seq {stream_seq} ({hand.hand_id}/{len(hand.events) + 1}) is not the table's: NOT_ON_CHAIN" in out
    assert f"hands verified {len(sim.hands)}" in out


def forged_copy(event: Event) -> bytes:
    return codec.encode(dataclasses.replace(event, occurred_at=event.occurred_at.replace(year=2001)))


async def test_audit_of_the_stream_names_a_stranger_s_event_mid_hand_and_a_forged_hand(
    nats_url: str, nats_client: object, stream_spec: StreamSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = stream_spec.subjects[0].removesuffix(".>")
    log = EventLog(nats_client, stream_spec.name, prefix)  # type: ignore[arg-type]
    await ensure_stream(log.js, stream_spec)
    sim = simulate(2, ("xito",), seed=6, hands_per_table=1)
    forged = simulate(2, ("taixiu",), seed=7, hands_per_table=1, table_prefix="forged")
    mid, clean = sim.hands
    unsealed, own_key = forged.hands
    try:
        await publish_hand(log, mid, strangers={1: [forged_copy(mid.events[2])]})
        await publish_hand(log, clean)
        await publish_hand(log, unsealed, signer=None)
        await publish_hand(log, own_key, signer=seal.HandSigner(seal.derive_private_key("forger")))
        stranger_seq = [r.stream_seq for r in await log.read_hand(mid.table_id, mid.hand_id)][2]
        flags = ["--stream", stream_spec.name, "--prefix", prefix, "--no-ledger"]
        status, out, _ = await run(["audit", "--nats-url", nats_url, *flags], capsys)
        assert status == 1
        assert f"stream seq {stranger_seq} ({mid.hand_id}/3) is not the table's: NOT_ON_CHAIN" in out
        assert f"{unsealed.hand_id}" in out and "HAND_UNSEALED" in out
        assert f"{own_key.hand_id}" in out and "HAND_SEAL_INVALID" in out
        assert "hands verified 2" in out  # the two genuine hands, the stranger left out of the first

        # Holding the wrong public key, the genuine hands are not the table's either.
        other = seal.HandSigner(seal.derive_private_key("someone-else")).public_key.hex()
        status, out, _ = await run(["audit", "--nats-url", nats_url, *flags, "--seal-public-key", other], capsys)
        assert status == 1 and "hands verified 0" in out
        # During a rotation, either key: the forger's own hand then passes its seal, as it must
        # with the forger's key trusted — which shows the key, not the data, decides.
        forger = seal.HandSigner(seal.derive_private_key("forger")).public_key.hex()
        dev = DEV_SIGNER.public_key.hex()
        status, out, _ = await run(
            ["audit", "--nats-url", nats_url, *flags, "--seal-public-key", dev, "--seal-public-key", forger], capsys
        )
        assert "hands verified 3" in out and "HAND_SEAL_INVALID" not in out
    finally:
        await log.js.delete_stream(stream_spec.name)
