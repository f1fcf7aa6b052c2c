"""End to end: hands settle through the real ledger, then ``socai events export`` and
``socai audit`` (as commands) prove them, and catch an export forged after the fact."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient

from socai.infra.nats import StreamSpec
from tests.support.e2e import settled_simulation, socai
from tests.support.settlement import Harness
from tests.support.synthetic import Simulation

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
async def settled(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[tuple[Harness, Simulation]]:
    async with settled_simulation(
        nats_url,
        migrated_database_url,
        stream_spec,
        nats_client,
        hands=45,
        games=("holdem", "xito", "taixiu"),
        seed=45,
        hands_per_table=5,
    ) as (h, sim):
        yield h, sim


async def test_export_and_audit_prove_every_hand_and_catch_a_forged_amount(
    settled: tuple[Harness, Simulation], tmp_path: Path
) -> None:
    h, sim = settled
    export = tmp_path / "events.jsonl"
    done = await socai(h.settings, "events", "export", "--out", str(export))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith(f"exported {len(sim.events())} events")

    live = await socai(h.settings, "audit", "--json", str(tmp_path / "report.json"))
    assert live.returncode == 0, live.stdout + live.stderr
    assert f"ledger {h.settings.ledger_addr}" in live.stdout
    assert f"ledger: {len(sim.hands)} hand transactions checked by idempotency key" in live.stdout
    assert "mismatches: none; the audit is clean" in live.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] and report["escrows_checked"] == sum(len(t.seats) for t in sim.tables)

    offline = await socai(h.settings, "audit", "--file", str(export), "--ledger", h.settings.ledger_addr)
    assert offline.returncode == 0, offline.stdout

    # Forge a Tài Xỉu wager after the fact: still a legal hand, so only the ledger can tell.
    rows = [json.loads(x) for x in export.read_text().splitlines()]
    hand = next(
        hd
        for hd in sim.hands
        if hd.game == "taixiu" and any("wager_placed" in r for r in rows if r["hand_id"] == hd.hand_id)
    )
    wager = next(r for r in rows if r["hand_id"] == hand.hand_id and "wager_placed" in r)
    wager["wager_placed"]["amount_gold"] = str(int(wager["wager_placed"]["amount_gold"]) + 10)
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join(json.dumps(r) + "\n" for r in rows))

    without_ledger = await socai(h.settings, "audit", "--file", str(forged))
    assert without_ledger.returncode == 0  # a legal hand: the replay alone cannot tell

    caught = await socai(h.settings, "audit", "--file", str(forged), "--ledger", h.settings.ledger_addr)
    assert caught.returncode == 1, caught.stdout
    lines = [x for x in caught.stdout.splitlines() if x.startswith("  ")]
    mine = [x.split(maxsplit=2) for x in lines if x.split()[0] == hand.hand_id]
    assert [m[1] for m in mine] == ["LEDGER_MISMATCH"]
    seat = wager["wager_placed"].get("seat", 0)
    account = next(a for s, a in hand.settlement.seat_accounts.items() if s == seat)
    assert mine[0][2].startswith(f"settle:{hand.hand_id} (transaction ")
    assert f"{account}: replay " in mine[0][2]
    assert any(x.split()[1] == "ACCOUNT_TOTAL" for x in lines)
