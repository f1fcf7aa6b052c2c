"""The auditor's site in a real browser (issue 20): hands settle through the real ledger, the
event log and the journal are exported, ``socai audit --html`` builds the site from the
two files alone, and headless Chromium opens it from disk: the overview's fees and a hand
page's ledger entries are checked against the live ledger, a player is searched for, and
screenshots land in ``var/audit-html/``.

Chromium is Debian's ``chromium`` package. The session fixture installs it when it is
missing and this process may (root with apt-get), so a fresh machine runs the test too;
otherwise the test fails and says what to install, it never skips.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient

from socai.gen.ledger.v1 import ledger_pb2
from socai.infra.nats import StreamSpec
from tests.support.e2e import settled_simulation, socai
from tests.support.settlement import Harness
from tests.support.synthetic import Simulation

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "audit-html"
BROWSER_NAMES = ("chromium", "chromium-browser")
INSTALL_TIMEOUT_S = 900
PAGE_TIMEOUT_S = 120


def _find_browser() -> str | None:
    return next((path for name in BROWSER_NAMES if (path := shutil.which(name))), None)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of a headless-capable Chromium, installed with apt-get when missing."""
    found = _find_browser()
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        pytest.fail(
            "this test needs Chromium and cannot install it here (needs root and apt-get): "
            "install Debian's package with `sudo apt-get install -y chromium`"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in ([apt, "update"], [apt, "install", "-y", "--no-install-recommends", "chromium"]):
        done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        if done.returncode != 0:
            pytest.fail(f"`{' '.join(step)}` failed ({done.returncode}): {done.stderr[-2000:]}")
    found = _find_browser()
    if not found:
        pytest.fail("apt-get installed chromium, but no chromium binary is on PATH")
    return found


def browse(chromium: str, url: str, *extra: str) -> str:
    """Chromium's own headless mode: the DOM after the page's scripts ran (--dump-dom), or
    a screenshot with ``--screenshot=FILE``."""
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--window-size=1280,1800",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def attr(dom: str, element_id: str, name: str) -> str:
    found = re.search(rf'<[^>]*\bid="{re.escape(element_id)}"[^>]*>', dom)
    assert found, f"no element #{element_id}"
    value = re.search(rf'\b{name}="([^"]*)"', found.group(0))
    assert value, f"#{element_id} has no {name}"
    return value.group(1)


@pytest.fixture
async def settled(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[tuple[Harness, Simulation]]:
    async with settled_simulation(
        nats_url,
        migrated_database_url,
        stream_spec,
        nats_client,
        hands=16,
        games=("holdem", "xito", "taixiu", "tienlen"),
        seed=31,
        hands_per_table=4,
    ) as (h, sim):
        yield h, sim


async def test_the_site_of_an_export_shows_the_ledgers_numbers_and_finds_a_player(
    chromium: str, settled: tuple[Harness, Simulation], tmp_path: Path
) -> None:
    h, sim = settled
    events, journal, site = tmp_path / "events.jsonl", tmp_path / "journal.jsonl", tmp_path / "site"
    for args in (("events", "export", "--out", str(events)), ("ledger", "export", "--out", str(journal))):
        done = await socai(h.settings, *args)
        assert done.returncode == 0, done.stderr
    built = await socai(
        h.settings,
        "audit",
        "--events",
        str(events),
        "--journal",
        str(journal),
        "--html",
        str(site),
        "--settlement",
        h.settings.settlement_addr,  # its dead letters (none here) on the overview
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert sorted(p.name for p in (site / "hands").iterdir()) == sorted(f"{hd.hand_id}.html" for hd in sim.hands)
    # Self-contained: no page names anything outside the folder.
    for page in site.rglob("*.html"):
        assert not re.search(r'(src|href)="(https?:)?//', page.read_text()), page

    SHOTS.mkdir(parents=True, exist_ok=True)
    overview = await asyncio.to_thread(browse, chromium, (site / "index.html").as_uri(), "--dump-dom")
    assert attr(overview, "verdict", "data-ok") == "true"
    assert attr(overview, "dead-letters", "class") == "note"  # asked, and settlement has none
    assert attr(overview, "hands-verified", "data-value") == str(len(sim.hands))
    fees = await h.ledger("auditor").GetAccount(ledger_pb2.GetAccountRequest(account_id="house:fees"))
    assert int(attr(overview, "total-fees", "data-gold")) == fees.account.balance_gold > 0
    await asyncio.to_thread(browse, chromium, (site / "index.html").as_uri(), f"--screenshot={SHOTS / 'overview.png'}")

    # A hand page: every ledger entry and balance after, as the ledger holds them now.
    hand = next(hd for hd in sim.hands if hd.game == "holdem" and hd.settlement.fees_gold() > 0)
    page_url = (site / "hands" / f"{hand.hand_id}.html").as_uri()
    page = await asyncio.to_thread(browse, chromium, page_url, "--dump-dom")
    posted = await h.transaction(f"settle:{hand.hand_id}")
    shown = re.findall(r'data-account="([^"]+)" data-amount="(-?\d+)" data-balance-after="(-?\d+)"', page)
    assert shown == [(e.account_id, str(e.amount_gold), str(e.balance_after_gold)) for e in posted.entries]
    assert attr(page, "ledger", "data-transaction") == posted.transaction_id
    assert int(attr(page, "fees", "data-gold")) == hand.settlement.fees_gold()
    assert 'class="card down"' in page  # hole cards, marked as dealt face down
    await asyncio.to_thread(browse, chromium, page_url, f"--screenshot={SHOTS / 'hand.png'}")

    # Search: the list opened with ?q=<player> shows exactly that player's hands.
    table = sim.tables[0]
    player = table.seats[0].player_id
    theirs = {
        hd.hand_id
        for t in sim.tables
        for hd in t.hands
        if any(player in a for a in hd.settlement.seat_accounts.values())
    }
    found_url = (site / "hands.html").as_uri() + f"?q={player}"
    listing = await asyncio.to_thread(browse, chromium, found_url, "--dump-dom")
    rows = re.findall(r'<tr( class="bad")? data-hand="([^"]+)"[^>]*?( hidden="")?>', listing)
    visible = {hand_id for _, hand_id, hidden in rows if not hidden}
    assert len(rows) == len(sim.hands)
    assert visible == theirs and theirs
    assert attr(listing, "count", "data-shown") == str(len(theirs))
    await asyncio.to_thread(browse, chromium, found_url, f"--screenshot={SHOTS / 'search.png'}")
    assert all((SHOTS / name).stat().st_size > 0 for name in ("overview.png", "hand.png", "search.png"))


async def test_a_dispute_walk_through_on_a_recorded_tien_len_table(chromium: str, tmp_path: Path) -> None:
    """A dispute officer's path through the desk, on hands the real table service played
    (the golden corpus's Tiến Lên recording, audited offline from its two files with the
    deployment's keys): open the player's page, find the hand, read why they paid — every
    line's rule, what they owed against what they paid under GEN-4, their cards at the end,
    the plays the details cite."""
    import json

    from socai.audit import proof
    from tests.golden import corpus

    batch = next((b for b in corpus.batches() if b.kind == "table" and b.manifest["games"] == ["tienlen"]), None)
    assert batch is not None and batch.journal_path is not None, "the golden corpus has a Tiến Lên table batch"
    keys, site = tmp_path / "keys.json", tmp_path / "site"
    keys.write_text(json.dumps(proof.keys_document(batch.public_keys().values(), [])))
    built = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "socai_cli.main",
            "audit",
            "--events",
            str(batch.events_path),
            "--journal",
            str(batch.journal_path),
            "--keys",
            str(keys),
            "--html",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT_S,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-2000:]
    assert "hand seals: checked" in built.stdout
    short = next(line for line in batch.expected() if line["shortfalls"])
    seat, _, _, reason = short["shortfalls"][0]
    player = next(p for s, p, _, _ in short["seats"] if s == seat)
    SHOTS.mkdir(parents=True, exist_ok=True)

    # 1. The player's page lists the hand with its net.
    player_url = (site / "players" / f"{player}.html").as_uri()
    player_dom = await asyncio.to_thread(browse, chromium, player_url, "--dump-dom")
    row = re.search(rf'<tr data-hand="{re.escape(short["hand_id"])}" data-net="(-?\d+)">(.*?)</tr>', player_dom, re.S)
    assert row, f"{short['hand_id']} is on {player}'s page"
    net = next(n for s, _, _, n in short["seats"] if s == seat)
    assert int(row.group(1)) == net
    link = re.search(r'href="(\.\./hands/[^"]+)"', row.group(2))
    assert link
    await asyncio.to_thread(browse, chromium, player_url, f"--screenshot={SHOTS / 'player.png'}")

    # 2. The hand: why they paid. Every line names its rule; owed against paid shows the shortfall.
    hand_url = (site / "players" / link.group(1)).resolve().as_uri()
    hand_dom = await asyncio.to_thread(browse, chromium, hand_url, "--dump-dom")
    owed_row = re.search(
        rf'<tr data-seat="{seat}" data-reason="{re.escape(reason)}" data-owed="(\d+)" data-paid="(\d+)">', hand_dom
    )
    assert owed_row, "the owed-against-paid table has the short obligation"
    shorts = [sf for sf in short["shortfalls"] if sf[0] == seat and sf[3] == reason]
    assert int(owed_row.group(1)) - int(owed_row.group(2)) == sum(o - p for _, o, p, _ in shorts)
    lines = re.findall(r'<tr data-reason="([a-z_0-9]+)"><td class="mono">', hand_dom)
    assert sorted(lines) == sorted(t[3] for t in short["transfers"])
    assert "RULES.md ?" not in hand_dom
    # The settlement comes before the timeline, and the seat's cards at the end are shown.
    assert hand_dom.index('id="settlement"') < hand_dom.index('id="timeline"')
    end_cards = re.search(rf'<tr data-player="{re.escape(player)}">.*?<td class="end-cards">(.*?)</td>', hand_dom, re.S)
    assert end_cards and 'data-suit="' in end_cards.group(1)
    await asyncio.to_thread(browse, chromium, hand_url, f"--screenshot={SHOTS / 'dispute-hand.png'}")

    # 3. Searching by the reason finds exactly the hands that paid it; the overview links there.
    paying = {line["hand_id"] for line in batch.expected() if any(t[3] == reason for t in line["transfers"])}
    search_url = (site / "hands.html").as_uri() + f"?q={reason}"
    listing = await asyncio.to_thread(browse, chromium, search_url, "--dump-dom")
    rows = re.findall(r'<tr( class="bad")? data-hand="([^"]+)"[^>]*?( hidden="")?>', listing)
    visible = {hand_id for _, hand_id, hidden in rows if not hidden}
    assert visible == paying, (len(visible), len(paying))
    overview = await asyncio.to_thread(browse, chromium, (site / "index.html").as_uri(), "--dump-dom")
    assert 'id="money-chart"' in overview and 'class="hands-of"' in overview
    await asyncio.to_thread(
        browse, chromium, (site / "index.html").as_uri(), f"--screenshot={SHOTS / 'overview-chart.png'}"
    )
    assert all((SHOTS / n).stat().st_size > 0 for n in ("player.png", "dispute-hand.png", "overview-chart.png"))
