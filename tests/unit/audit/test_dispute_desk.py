"""The desk for disputes (issue 33): what a dispute officer needs on a hand's page and around
it — owed against paid under GEN-4, each seat's cards at the start and the end, automatic
plays as plays, plays numbered as the details cite them, the game's own picture — and the
pages that lead there: per player, search by reason and rule, penalties linked to hands."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from socai.audit import handview, html
from socai.audit.auditor import Audit, Seals, reconcile, verify
from socai.audit.export import RawEvent
from socai.audit.journal import read_journal
from socai.audit.ledger_source import JournalLedger
from socai.events import codec, seal
from socai.rules import registry
from tests.golden import corpus
from tests.support.synthetic import Simulation, simulate
from tests.unit.audit.ledger_journal import journal_of


def audited(sim: Simulation) -> Audit:
    audit = verify([RawEvent(0, "", codec.to_proto(e)) for e in sim.events()], source="sim")
    asyncio.run(reconcile(audit, JournalLedger(journal_of(sim), "journal sim")))
    return audit


@pytest.fixture(scope="module")
def every_game() -> Audit:
    return audited(simulate(330, registry.available(), seed=7))


@pytest.fixture(scope="module")
def site(every_game: Audit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    html.write_site(every_game, out)
    return out


def recorded_tienlen() -> Audit:
    """A Tiến Lên recording of the golden corpus: real hands the table service played,
    some of them paid short under GEN-4."""
    batch = next((b for b in corpus.batches() if b.kind == "table" and b.manifest["games"] == ["tienlen"]), None)
    if batch is None:
        pytest.fail("the golden corpus has no Tiến Lên table batch")
    audit = verify(batch.raws(), source="golden", seals=Seals(seal.SealVerifier(batch.public_keys())))
    assert batch.journal_path is not None
    asyncio.run(reconcile(audit, JournalLedger(read_journal(batch.journal_path), "journal")))
    return audit


def test_owed_against_paid_shows_each_shortfall_with_the_stack_that_capped_it() -> None:
    audit = recorded_tienlen()
    views = list(handview.views(audit))
    short = [(v, o) for v in views for o in v.owed if o.short_gold]
    assert short, "the recording holds hands paid short"
    results = {r.hand_id: r for r in audit.results}
    for view, line in short:
        shortfalls = [
            s for s in results[view.hand_id].settlement.shortfalls if (s.seat, s.reason) == (line.seat, line.reason)
        ]
        assert line.owed_gold - line.paid_gold == sum(s.owed_gold - s.paid_gold for s in shortfalls)
        paid = sum(
            t.amount_gold
            for t in results[view.hand_id].settlement.transfers
            if t.reason == line.reason and t.from_account == next(s.account for s in view.seats if s.seat == line.seat)
        )
        assert line.paid_gold == paid and line.rule
        # GEN-4: what the seat paid in all is never more than its chips at the start plus what it won.
        assert line.stack_gold == next(s.stack_gold for s in view.seats if s.seat == line.seat)
    view, line = short[0]
    text = handview.render_text(view)
    assert f"owed {line.owed_gold:>10,}  paid {line.paid_gold:>10,}, short {line.short_gold:,}" in text
    page = html.hand_page(view)
    assert f'data-owed="{line.owed_gold}" data-paid="{line.paid_gold}"' in page and 'class="short"' in page


def test_each_seat_shows_its_cards_at_the_start_and_what_it_held_at_the_end(every_game: Audit) -> None:
    views = {v.game: v for v in handview.views(every_game) if v.replayed}
    tienlen = views["tienlen"]
    results = {r.hand_id: r for r in every_game.results}
    state = results[tienlen.hand_id].state
    for s in tienlen.seats:
        assert len(s.start_cards) == 13
        assert s.end_cards == tuple(str(c) for c in state.hands[s.seat])
        assert set(s.end_cards) <= set(s.start_cards)
    holdem = views["holdem"]
    assert all(len(s.start_cards) == 2 and s.end_cards == s.start_cards for s in holdem.seats)


def test_automatic_plays_are_shown_as_plays_numbered_as_the_details_cite_them(every_game: Audit) -> None:
    views = [v for v in handview.views(every_game) if v.game == "tienlen"]
    rows = [r for v in views for r in v.timeline]
    automatic = [r for r in rows if r.kind == "TimerExpired"]
    assert automatic and all(r.automatic for r in automatic)
    assert any(r.play and r.played for r in automatic), "a leader's timer plays its lowest combination"
    assert any(r.automatic == "passed" for r in automatic)
    for view in views:
        numbers = [r.play for r in view.timeline if r.play]
        assert numbers == list(range(1, len(numbers) + 1)), view.hand_id
        assert {r.trick for r in view.timeline if r.play} == set(range(1, view.tricks + 1))
        for line in view.lines:
            for cited in re.findall(r"\d+", line.detail.split("plays", 1)[-1]) if "plays" in line.detail else ():
                assert int(cited) in numbers, (view.hand_id, line.detail)


def test_the_desk_draws_each_games_own_picture(every_game: Audit) -> None:
    views = list(handview.views(every_game))
    maubinh = next(v for v in views if v.game == "maubinh" and v.replayed)
    assert {c.seat for c in maubinh.chi} == {s.seat for s in maubinh.seats}
    assert all(len(c.back) == len(c.middle) == 5 and len(c.front) == 3 for c in maubinh.chi)
    assert all(cat for c in maubinh.chi for cat in c.categories)
    phom = next(v for v in views if v.game == "phom" and any(p.melds for p in v.phom))
    assert {p.seat for p in phom.phom} == {s.seat for s in phom.seats}
    page = html.hand_page(phom)
    assert 'id="phom"' in page and 'id="chi"' not in page
    assert 'id="chi"' in html.hand_page(maubinh)
    tienlen = next(v for v in views if v.game == "tienlen" and v.tricks)
    assert f'<tr data-trick="{tienlen.tricks}">' in html.hand_page(tienlen)


def test_cards_carry_their_suit_symbols_in_their_colours() -> None:
    assert html.card_html("Td") == '<span class="card" data-suit="d" data-card="Td">10♦</span>'
    assert html.card_html("As", face_up=False).startswith('<span class="card down" data-suit="s"')
    assert "♥" in html.card_html("2h") and "♣" in html.card_html("Kc")
    assert html.card_html("??") == '<span class="card" data-suit="unknown" data-card="??">??</span>'
    assert "[data-suit=h],.card[data-suit=d]{color:#c0262d}" in html.STYLE


def test_every_player_has_a_page_with_every_hand_and_the_running_net(every_game: Audit, site: Path) -> None:
    views = list(handview.views(every_game))
    nets: dict[str, list[int]] = {}
    for v in views:
        for s in v.seats:
            nets.setdefault(s.player_id, []).append(s.net_gold or 0)
    assert len(list((site / "players").iterdir())) == len(nets)
    player = max(nets, key=lambda p: len(nets[p]))
    page = (site / "players" / html.player_page_name(player)).read_text()
    assert f'<p id="player-net" data-gold="{sum(nets[player])}">' in page
    assert len(re.findall(r'<tr data-hand="', page)) == len(nets[player])
    assert '<svg id="net-chart"' in page and "<polyline" in page
    listing = (site / "players.html").read_text()
    assert f'data-player="{player}"' in listing


def test_the_hand_list_searches_reasons_rules_and_nets_and_penalties_link_to_their_hands(
    every_game: Audit, site: Path
) -> None:
    listing = (site / "hands.html").read_text()
    rows = re.findall(r'data-hand="([^"]+)" data-search="([^"]*)"', listing)
    views = {v.hand_id: v for v in handview.views(every_game)}
    paid = {hand for hand, search in rows if "thoi_heo_den" in search.split()}
    assert paid == {h for h, v in views.items() if any(line.reason == "thoi_heo_den" for line in v.lines)} and paid
    assert any("tl-6" in search.split() or "9.4" in search.split() for _, search in rows)
    hand, search = rows[0]
    first = views[hand].seats[0]
    assert f"{first.player_id}:{first.net_gold:+d}".lower() in search
    index = (site / "index.html").read_text()
    assert '<a class="hands-of" href="hands.html?q=thoi_heo_den">thoi_heo_den</a>' in index


def test_the_overview_charts_gold_moved_and_fees_per_game_and_day(every_game: Audit, site: Path) -> None:
    index = (site / "index.html").read_text()
    assert '<svg id="money-chart"' in index
    bars = re.findall(r'<g class="bar" data-game="([^"]+)" data-day="[^"]+" data-gold="(\d+)" data-fees="(\d+)"', index)
    assert {game for game, _, _ in bars} == set(every_game.report.games)
    assert sum(int(g) for _, g, _ in bars) == sum(g.gold_moved for g in every_game.report.games.values())
    assert sum(int(f) for _, _, f in bars) == sum(g.fees_gold for g in every_game.report.games.values())


def test_a_settlement_detail_links_the_plays_it_cites_to_the_timeline(every_game: Audit) -> None:
    view, line = next(
        (v, line)
        for v in handview.views(every_game)
        if v.game == "tienlen"
        for line in v.lines
        if "play" in line.detail
    )
    page = html.hand_page(view)
    for number in re.findall(r"\d+", line.detail.split("play", 1)[1]):
        assert f'<a href="#play-{number}">{number}</a>' in page and f'<tr id="play-{number}"' in page


def test_every_games_timeouts_are_told_as_the_move_the_rules_made(every_game: Audit) -> None:
    told: dict[str, set[str]] = {}
    for view in handview.views(every_game):
        for r in view.timeline:
            if r.kind == "TimerExpired":
                assert r.automatic and r.automatic != "acted for the seat (GEN-5)", (view.hand_id, r)
                told.setdefault(view.game, set()).add(r.automatic.split(" ")[0])
    assert {"checked", "folded"} & told["holdem"] and "passed" in told["tienlen"]
    assert len(told) >= 6, told
