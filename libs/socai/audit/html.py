"""The auditor's site: ``socai audit --html DIR`` writes a static, self-contained folder.

- ``index.html``, the overview: the verdict, every mismatch first (with its hand), dead
  letters, hands per game and day, and per game the gold moved, fees and penalties by
  reason with the RULES.md rule each names;
- ``hands.html``, every hand in a table (table, players, game, hand id, gold moved, status)
  with a search box; ``hands.html?q=alice`` opens it already searched, so a link (or a
  test) can name a search;
- ``hands/<hand id>.html``, one page per hand: the ``socai.audit.handview`` view the
  terminal prints, as HTML, in the order a dispute reads it: why each seat paid (every
  settlement line with its reason and RULES.md rule, the plays a detail cites linked to
  the timeline, what each seat owed against what it paid under GEN-4), the seats with
  their cards at the start and at the end, the game's own picture (Mậu Binh's three chi
  side by side, Phỏm's melds, takes and sends, Tiến Lên's and Sâm Lốc's tricks), then the
  compact timeline (automatic plays shown as the plays they were, plays numbered as the
  details cite them), the seed and the ledger;
- ``players.html`` and ``players/<player>.html``: every player, and per player every hand
  with its net and reasons and an SVG chart of the net over time;
- ``style.css`` and ``search.js``, the only other files.

Cards are written with their suit symbols, ♠ ♣ dark and ♥ ♦ red. The overview also draws
gold moved and fees per game and day as an inline SVG chart, and links each penalty
reason to the hands that paid it (``hands.html?q=<reason>``): the hand list searches
players, games, reasons, the rules they cite and each player's net.

Nothing is loaded from outside the folder (no CDN, no web font, no server): an auditor can
open it from a USB stick, and the pages show the same thing years later. Everything that
comes from the input is escaped on the way out (player ids and table ids are user input;
an export may be forged), and a hand page's file name is the hand id only when it is a
valid id, else a digest of it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from socai.audit.auditor import Audit
from socai.audit.handview import HandView, views
from socai.audit.report import AuditReport
from socai.infra import collector
from socai.rules import registry

HANDS_DIR: Final = "hands"
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_\-@]{1,64}")

STYLE: Final = """\
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px 48px;color:#1d232a}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #d7dde3}
nav a{margin-right:14px}table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #eceff2;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ok{color:#17702f;font-weight:600}.bad{color:#b3261e;font-weight:600}
tr.bad td{background:#fdecea}.mono{font-family:ui-monospace,monospace;font-size:12px;word-break:break-all}
.card{display:inline-block;border:1px solid #8a96a3;border-radius:3px;padding:0 3px;margin:0 2px;
font-family:ui-monospace,monospace;background:#fff}
.card.down{border-style:dashed;background:#eef1f4;color:#4c5a67}
.note{color:#5b6875;font-size:12px}input[type=search]{font-size:15px;padding:4px 8px;width:340px}
.card[data-suit=s],.card[data-suit=c]{color:#1d232a}.card[data-suit=h],.card[data-suit=d]{color:#c0262d}
.card[data-suit=unknown]{color:#8a96a3}
#timeline td{padding:1px 6px;white-space:nowrap}#timeline td.what{white-space:normal}
#timeline tr.auto td{background:#fff7e0}#timeline tr.play td.n{font-weight:600}
.tag{display:inline-block;font-size:11px;padding:0 4px;border-radius:3px;background:#e8edf2;color:#3a4652;margin-right:4px}
.tag.auto{background:#ffe7a8;color:#5a4300}.short{color:#b3261e;font-weight:600}
.chi{display:flex;gap:18px;flex-wrap:wrap}.chi div{border:1px solid #d7dde3;border-radius:4px;padding:4px 8px}
.chi b{display:block;font-size:12px;color:#5b6875}svg text{font:11px system-ui,sans-serif}
"""

SEARCH_JS: Final = """\
// Filters the hand list by every word typed (table, player, game, hand id, amount).
// The query also comes from the address (hands.html?q=alice), so a search can be linked.
(function () {
  var box = document.getElementById("q");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#hands tbody tr"));
  var count = document.getElementById("count");
  function run() {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var text = row.getAttribute("data-search");
      var hit = words.every(function (w) { return text.indexOf(w) >= 0; });
      row.hidden = !hit;
      if (hit) { shown += 1; }
    });
    count.textContent = String(shown);
    count.setAttribute("data-shown", String(shown));
  }
  var q = new URLSearchParams(window.location.search).get("q");
  if (q) { box.value = q; }
  box.addEventListener("input", run);
  run();
})();
"""


def e(value: object) -> str:
    """Escaped for HTML text and attribute values."""
    return escape(str(value), quote=True)


def gold(value: int) -> str:
    return f"{value:,}"


def page_name(hand_id: str) -> str:
    """The hand page's file name: the id when it is a valid one, else a digest."""
    if _SAFE_ID.fullmatch(hand_id):
        return f"{hand_id}.html"
    return "hand-" + hashlib.sha256(hand_id.encode()).hexdigest()[:24] + ".html"


def player_page_name(player_id: str) -> str:
    """A player page's file name: the id when it is safe, else a digest."""
    if _SAFE_ID.fullmatch(player_id):
        return f"{player_id}.html"
    return "player-" + hashlib.sha256(player_id.encode()).hexdigest()[:24] + ".html"


SUITS: Final = {"s": "♠", "c": "♣", "d": "♦", "h": "♥"}


@functools.lru_cache(maxsize=4096)  # a deck's cards, face up or down, to a few seats: a small set
def card_html(text: str, *, face_up: bool = True, title: str = "") -> str:
    """A card with its suit symbol and colour: ``As`` → A♠ (dark), ``Td`` → 10♦ (red);
    ``??`` (not known yet) as it is."""
    if len(text) == 2 and text[1] in SUITS:
        rank = "10" if text[0] == "T" else text[0]
        shown, suit = rank + SUITS[text[1]], text[1]
    else:
        shown, suit = text, "unknown"
    cls = "card" if face_up else "card down"
    extra = f' title="{e(title)}"' if title else ""
    return f'<span class="{cls}" data-suit="{suit}" data-card="{e(text)}"{extra}>{e(shown)}</span>'


def cards_html(cards: Iterable[str]) -> str:
    shown = " ".join(card_html(c) for c in cards)
    return shown or "-"


def _page(title: str, body: str, *, depth: int = 0, script: str = "") -> str:
    up = "../" * depth
    js = f'<script src="{up}{script}"></script>' if script else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<title>{e(title)}</title><link rel="stylesheet" href="{up}style.css"></head>\n<body>'
        f'<nav><a href="{up}index.html">overview</a><a href="{up}hands.html">hands</a>'
        f'<a href="{up}players.html">players</a></nav>\n'
        f"{body}\n{js}</body></html>\n"
    )


@collector.tuned()  # it folds hands again beside the whole audit it holds (socai.infra.collector)
def write_site(
    audit: Audit,
    out_dir: Path,
    *,
    dead_letters: Iterable[tuple[str, str, str]] = (),
    signed_verdict: Mapping[str, Any] | None = None,
) -> int:
    """Write the site for ``audit`` into ``out_dir`` (created; files of an older site with
    the same names are replaced). ``dead_letters`` are (hand id, reason, detail) from the
    settlement service, when one was asked. Returns how many hand pages were written."""
    hands_dir = out_dir / HANDS_DIR
    hands_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / PLAYERS_DIR).mkdir(parents=True, exist_ok=True)
    (out_dir / "style.css").write_text(STYLE, encoding="utf-8")
    (out_dir / "search.js").write_text(SEARCH_JS, encoding="utf-8")
    rows: list[str] = []
    per_day: Counter[tuple[str, str]] = Counter()
    money_per_day: dict[tuple[str, str], tuple[int, int]] = {}
    by_player: dict[str, list[PlayerHand]] = {}
    written = 0
    for view in views(audit):
        (hands_dir / page_name(view.hand_id)).write_text(hand_page(view), encoding="utf-8")
        written += 1
        rows.append(_list_row(view))
        day = view.started_at[:10]
        per_day[(view.game, day)] += 1
        moved, fees = money_per_day.get((view.game, day), (0, 0))
        money_per_day[(view.game, day)] = (moved + view.moved_gold, fees + view.fees_gold)
        for seat in view.seats:
            by_player.setdefault(seat.player_id, []).append(PlayerHand(view, seat.seat, seat.net_gold))
    (out_dir / "hands.html").write_text(_hand_list(rows), encoding="utf-8")
    for player, hands in by_player.items():
        (out_dir / PLAYERS_DIR / player_page_name(player)).write_text(player_page(player, hands), encoding="utf-8")
    (out_dir / "players.html").write_text(_player_list(by_player), encoding="utf-8")
    (out_dir / "index.html").write_text(
        overview(audit.report, per_day, list(dead_letters), signed_verdict, money_per_day), encoding="utf-8"
    )
    return written


# --- the overview ---------------------------------------------------------------------------


def _hand_link(hand_id: str, depth: int = 0) -> str:
    if not hand_id:
        return "-"
    href = "../" * depth + f"{HANDS_DIR}/{quote(page_name(hand_id))}"
    return f'<a href="{e(href)}">{e(hand_id)}</a>'


def overview(
    report: AuditReport,
    per_day: Counter[tuple[str, str]],
    dead_letters: list[tuple[str, str, str]],
    signed_verdict: Mapping[str, Any] | None = None,
    money_per_day: Mapping[tuple[str, str], tuple[int, int]] | None = None,
) -> str:
    parts = ["<h1>socai audit</h1>"]
    parts.append(
        f'<p class="note">{e(report.source)}; '
        + (f"ledger {e(report.ledger)}" if report.ledger else "no ledger reconciled")
        + "</p>"
    )
    if report.ok:
        parts.append('<p id="verdict" class="ok" data-ok="true">Clean: every hand replays and the ledger agrees.</p>')
    else:
        parts.append(
            f'<p id="verdict" class="bad" data-ok="false">{len(report.mismatches)} mismatch(es): '
            "every one is listed below with its hand.</p>"
        )
    parts.append(_proof_section(report, signed_verdict))
    parts.append("<h2>Mismatches</h2>")
    if report.mismatches:
        parts.append('<table id="mismatches"><tr><th>hand</th><th>table</th><th>reason</th><th>what differs</th></tr>')
        for m in report.mismatches:
            parts.append(
                f'<tr class="bad" data-hand="{e(m.hand_id)}" data-reason="{e(m.reason)}"><td>{_hand_link(m.hand_id)}</td>'
                f'<td>{e(m.table_id or "-")}</td><td>{e(m.reason)}</td><td class="mono">{e(m.detail)}</td></tr>'
            )
        parts.append("</table>")
    else:
        parts.append('<p id="mismatches">None.</p>')
    parts.append("<h2>Dead letters</h2>")
    if dead_letters:
        parts.append('<table id="dead-letters"><tr><th>hand</th><th>reason</th><th>detail</th></tr>')
        for hand_id, reason, detail in dead_letters:
            parts.append(
                f'<tr class="bad"><td>{_hand_link(hand_id)}</td><td>{e(reason)}</td><td class="mono">{e(detail)}</td></tr>'
            )
        parts.append("</table>")
    else:
        parts.append(
            '<p id="dead-letters" class="note">None reported. A hand settlement could not post has no ledger '
            "transaction: the audit lists it above as LEDGER_MISSING.</p>"
        )
    open_hands = ", ".join(e(h) for h in report.open_hands)
    cards = sum(g.cards_verified for g in report.games.values())
    dice = sum(g.dice_verified for g in report.games.values())
    parts.append("<h2>Totals</h2>")
    parts.append(
        f"<p>events {gold(report.events)} (table facts {gold(report.table_facts)}); hands verified "
        f'<span id="hands-verified" data-value="{report.hands_verified}">{gold(report.hands_verified)}</span>; '
        f"cards checked against the seed {gold(cards)}; dice {gold(dice)}"
        + (
            f"; ledger: {gold(report.transactions_checked)} hand transactions, {gold(report.accounts_checked)} "
            f"account totals, {gold(report.escrows_checked)} escrow balances checked"
            if report.ledger
            else ""
        )
        + (f"; open hands (allowed): {open_hands}" if open_hands else "")
        + (
            "; of those, checked in form until their seed is revealed (face-down cards hidden): "
            + ", ".join(e(h) for h in report.open_hands_hidden)
            if report.open_hands_hidden
            else ""
        )
        + "</p>"
    )
    parts.append("<h2>Per game</h2>")
    parts.append(
        '<table id="games"><tr><th>game</th><th class="n">hands</th><th class="n">gold moved</th>'
        '<th class="n">fees</th></tr>'
    )
    for game in sorted(report.games):
        g = report.games[game]
        parts.append(
            f'<tr data-game="{e(game)}"><td>{e(game)}</td><td class="n">{gold(g.hands)}</td>'
            f'<td class="n" data-gold="{g.gold_moved}">{gold(g.gold_moved)}</td>'
            f'<td class="n" data-gold="{g.fees_gold}">{gold(g.fees_gold)}</td></tr>'
        )
    moved = sum(g.gold_moved for g in report.games.values())
    fees = sum(g.fees_gold for g in report.games.values())
    parts.append(
        f'<tr><th>total</th><th class="n">{gold(report.hands_verified)}</th>'
        f'<th class="n" id="total-moved" data-gold="{moved}">{gold(moved)}</th>'
        f'<th class="n" id="total-fees" data-gold="{fees}">{gold(fees)}</th></tr></table>'
    )
    parts.append("<h2>Penalties by reason</h2>")
    penalty_rows = []
    for game in sorted(report.games):
        reasons = getattr(registry.get(game), "REASONS", {})
        for reason, amount in sorted(report.games[game].penalties_gold.items()):
            rule = reasons[reason].rule if reason in reasons else ""
            search = f"hands.html?q={quote(reason)}"
            penalty_rows.append(
                f'<tr data-reason="{e(reason)}"><td>{e(game)}</td><td><a class="hands-of" href="{e(search)}">'
                f"{e(reason)}</a></td><td>RULES.md {e(rule or '?')}</td>"
                f'<td class="n" data-gold="{amount}">{gold(amount)}</td></tr>'
            )
    if penalty_rows:
        parts.append(
            '<table id="penalties"><tr><th>game</th><th>reason</th><th>rule</th><th class="n">gold</th></tr>'
            + "".join(penalty_rows)
            + "</table>"
        )
    else:
        parts.append('<p id="penalties">None.</p>')
    parts.append("<h2>Hands per game and day (UTC)</h2>")
    days = sorted({day for _, day in per_day})
    games = sorted({game for game, _ in per_day})
    parts.append(
        '<table id="per-day"><tr><th>game</th>' + "".join(f'<th class="n">{e(d or "-")}</th>' for d in days) + "</tr>"
    )
    for game in games:
        parts.append(
            f"<tr><td>{e(game)}</td>"
            + "".join(f'<td class="n">{gold(per_day[(game, d)])}</td>' for d in days)
            + "</tr>"
        )
    parts.append("</table>")
    if money_per_day:
        parts.append("<h2>Gold moved and fees per game and day</h2>")
        parts.append(money_chart(money_per_day))
    parts.append('<p><a href="hands.html">every hand, searchable</a> · <a href="players.html">every player</a></p>')
    return _page("socai audit: overview", "\n".join(parts))


CHART_COLOURS: Final = ("#3b6ea8", "#d9822b", "#2f8f5b", "#9b59b6", "#c0392b", "#16a085", "#7f8c8d", "#b7950b")
CHART_HEIGHT: Final = 180


def money_chart(money: Mapping[tuple[str, str], tuple[int, int]]) -> str:
    """Bars of gold moved per game for each day, the day's fees as a dark band at the foot
    of each bar; an inline SVG (no script, no outside file), every bar titled with its figures."""
    days = sorted({day for _, day in money})
    games = sorted({game for game, _ in money})
    top = max((moved for moved, _ in money.values()), default=0) or 1
    bar, gap, left = 14, 10, 56
    width = left + len(days) * (len(games) * bar + gap) + gap
    out = [
        f'<svg id="money-chart" width="{width}" height="{CHART_HEIGHT + 60}" '
        f'role="img" aria-label="gold moved and fees per game and day">',
        f'<text x="2" y="12">{gold(top)}</text><text x="2" y="{CHART_HEIGHT + 10}">0</text>',
        f'<line x1="{left - 4}" y1="{CHART_HEIGHT + 10}" x2="{width}" y2="{CHART_HEIGHT + 10}" stroke="#8a96a3"/>',
    ]
    for d, day in enumerate(days):
        x0 = left + d * (len(games) * bar + gap)
        for g, game in enumerate(games):
            moved, fees = money.get((game, day), (0, 0))
            if not moved and not fees:
                continue
            h = max(1, round(CHART_HEIGHT * moved / top))
            fh = min(h, max(1 if fees else 0, round(CHART_HEIGHT * fees / top)))
            x = x0 + g * bar
            colour = CHART_COLOURS[g % len(CHART_COLOURS)]
            label = f"{game} {day}: gold moved {gold(moved)}, fees {gold(fees)}"
            out.append(
                f'<g class="bar" data-game="{e(game)}" data-day="{e(day)}" data-gold="{moved}" data-fees="{fees}">'
                f"<title>{e(label)}</title>"
                f'<rect x="{x}" y="{CHART_HEIGHT + 10 - h}" width="{bar - 2}" height="{h}" fill="{colour}"/>'
                + (
                    f'<rect x="{x}" y="{CHART_HEIGHT + 10 - fh}" width="{bar - 2}" height="{fh}" fill="#1d232a"/>'
                    if fh
                    else ""
                )
                + "</g>"
            )
        out.append(f'<text x="{x0}" y="{CHART_HEIGHT + 26}">{e(day[5:] or "-")}</text>')
    for g, game in enumerate(games):
        x = left + g * 90
        out.append(
            f'<rect x="{x}" y="{CHART_HEIGHT + 38}" width="10" height="10" fill="{CHART_COLOURS[g % len(CHART_COLOURS)]}"/>'
            f'<text x="{x + 14}" y="{CHART_HEIGHT + 47}">{e(game)}</text>'
        )
    out.append(
        f'<rect x="{left + len(games) * 90}" y="{CHART_HEIGHT + 38}" width="10" height="10" fill="#1d232a"/>'
        f'<text x="{left + len(games) * 90 + 14}" y="{CHART_HEIGHT + 47}">fees</text></svg>'
    )
    return "".join(out)


def _proof_section(report: AuditReport, signed: Mapping[str, Any] | None) -> str:
    """What was proven about the inputs: the seals checked and with which keys, the ranges,
    and, when the verdict was signed, its signer and the sha256 of each input."""
    rows = [
        f"<tr><th>{e(line.split(':', 1)[0])}</th><td>{e(line.split(':', 1)[1].strip())}</td></tr>"
        for line in report.proof.lines()
    ]
    p = report.proof
    if p.stream_last_seq:
        rows.append(f"<tr><th>stream seq</th><td>{p.stream_first_seq:,}–{p.stream_last_seq:,}</td></tr>")
    if p.events_since or p.events_until:
        rows.append(f"<tr><th>events period</th><td>{e(p.events_since or '…')} – {e(p.events_until or '…')}</td></tr>")
    if p.journal_since or p.journal_until:
        rows.append(
            f"<tr><th>journal period</th><td>{e(p.journal_since or '…')} – {e(p.journal_until or '…')}</td></tr>"
        )
    if signed is not None:
        signer = signed.get("signed_by", {})
        rows.append(
            f'<tr><th>signed verdict</th><td id="signed-by" data-key-id="{e(signer.get("key_id", ""))}">signed by '
            f"auditor key id {e(signer.get('key_id', ''))} at {e(signed.get('audited_at', ''))}</td></tr>"
        )
        for item in signed.get("inputs", []):
            rows.append(
                f'<tr><th>{e(item.get("role", ""))}</th><td class="mono" data-sha256="{e(item.get("sha256", ""))}">'
                f"{e(item.get('name', ''))} · {gold(int(item.get('bytes', 0)))} bytes · sha256 {e(item.get('sha256', ''))}</td></tr>"
            )
    return '<h2>Proof of the inputs</h2><table id="proof">' + "".join(rows) + "</table>"


# --- the hand list --------------------------------------------------------------------------


def _list_row(view: HandView) -> str:
    players = " ".join(view.players)
    status = "clean" if view.ok else " ".join(sorted({m.reason for m in view.findings}))
    reasons = sorted({line.reason for line in view.lines})
    rules = sorted({line.rule.split(":", 1)[0] for line in view.lines if line.rule})
    nets = " ".join(f"{s.player_id}:{s.net_gold:+d}" for s in view.seats if s.net_gold is not None)
    search = " ".join(
        (view.table_id, players, view.game, view.hand_id, str(view.moved_gold), status, *reasons, *rules, nets)
    ).lower()
    cls = "" if view.ok else ' class="bad"'
    shown_nets = ", ".join(
        f"{_player_link(s.player_id)} {s.net_gold:+,}" for s in view.seats if s.net_gold is not None
    ) or e(players)
    return (
        f'<tr{cls} data-hand="{e(view.hand_id)}" data-search="{e(search)}"><td>{e(view.table_id)}</td>'
        f"<td>{shown_nets}</td><td>{e(view.game)}</td><td>{_hand_link(view.hand_id)}</td>"
        f'<td class="n">{gold(view.moved_gold)}</td><td>{e(" ".join(reasons) or "-")}</td>'
        f"<td>{e(view.started_at[:19])}</td><td>{e(status)}</td></tr>"
    )


def _hand_list(rows: list[str]) -> str:
    body = (
        "<h1>Hands</h1>"
        '<p><input id="q" type="search" placeholder="player, reason (thoi_heo_den), rule (TL-6), game, table, hand id" '
        f'autofocus> <span id="count" data-shown="{len(rows)}">{len(rows)}</span> of {len(rows)} hands</p>'
        '<table id="hands"><thead><tr><th>table</th><th>players (net)</th><th>game</th><th>hand</th>'
        '<th class="n">gold moved</th><th>reasons</th><th>started (UTC)</th><th>status</th></tr></thead><tbody>\n'
        + "\n".join(rows)
        + "\n</tbody></table>"
    )
    return _page("socai audit: hands", body, script="search.js")


# --- players --------------------------------------------------------------------------------

PLAYERS_DIR: Final = "players"


@dataclass(frozen=True, slots=True)
class PlayerHand:
    view: HandView
    seat: int
    net_gold: int | None


def _player_link(player_id: str, depth: int = 0) -> str:
    href = "../" * depth + f"{PLAYERS_DIR}/{quote(player_page_name(player_id))}"
    return f'<a class="player" href="{e(href)}">{e(player_id)}</a>'


def _player_list(by_player: Mapping[str, list[PlayerHand]]) -> str:
    rows = []
    for player in sorted(by_player):
        hands = by_player[player]
        net = sum(h.net_gold or 0 for h in hands)
        rows.append(
            f'<tr data-player="{e(player)}"><td>{_player_link(player)}</td><td class="n">{len(hands)}</td>'
            f'<td class="n" data-gold="{net}">{net:+,}</td></tr>'
        )
    body = (
        "<h1>Players</h1>"
        '<table id="players"><tr><th>player</th><th class="n">hands</th><th class="n">net</th></tr>'
        + "".join(rows)
        + "</table>"
    )
    return _page("socai audit: players", body)


def player_page(player_id: str, hands: list[PlayerHand]) -> str:
    """One player: every hand they sat in, in time order, with the net, the reasons of what
    they paid and received, and the running net drawn as an SVG line."""
    ordered = sorted(hands, key=lambda h: (h.view.started_at, h.view.hand_id))
    running, points = 0, []
    rows = []
    for h in ordered:
        v = h.view
        net = h.net_gold or 0
        running += net
        points.append(running)
        account = next((s.account for s in v.seats if s.seat == h.seat), "")
        theirs = sorted(
            {line.reason for line in v.lines if account and account in (line.from_account, line.to_account)}
        )
        rows.append(
            f'<tr data-hand="{e(v.hand_id)}" data-net="{net}"><td>{e(v.started_at[:19])}</td><td>{e(v.table_id)}</td>'
            f"<td>{e(v.game)}</td><td>{_hand_link(v.hand_id, depth=1)}</td><td>{h.seat}</td>"
            f'<td class="n">{"?" if h.net_gold is None else f"{net:+,}"}</td><td class="n">{running:+,}</td>'
            f"<td>{e(' '.join(theirs) or '-')}</td><td>{'clean' if v.ok else 'FINDINGS'}</td></tr>"
        )
    total = points[-1] if points else 0
    body = (
        f'<h1>Player {e(player_id)}</h1><p id="player-net" data-gold="{total}">{len(ordered)} hands, net '
        f"{total:+,} gold</p>"
        + net_chart(points)
        + '<table id="player-hands"><tr><th>started (UTC)</th><th>table</th><th>game</th><th>hand</th><th>seat</th>'
        '<th class="n">net</th><th class="n">running</th><th>reasons</th><th>status</th></tr>'
        + "".join(rows)
        + "</table>"
    )
    return _page(f"socai audit: {player_id}", body, depth=1)


def net_chart(points: list[int]) -> str:
    """The running net after each hand as an SVG polyline, with the zero line."""
    if not points:
        return ""
    width, height, pad = 640, 140, 8
    low, high = min(0, *points), max(0, *points)
    span = (high - low) or 1

    def y(value: int) -> float:
        return round(pad + (height - 2 * pad) * (high - value) / span, 1)

    step = (width - 2 * pad) / max(1, len(points) - 1)
    line = " ".join(f"{round(pad + i * step, 1)},{y(v)}" for i, v in enumerate(points))
    return (
        f'<svg id="net-chart" width="{width}" height="{height}" role="img" '
        f'aria-label="running net">'
        f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" stroke="#8a96a3" stroke-dasharray="4 3"/>'
        f'<polyline fill="none" stroke="#3b6ea8" stroke-width="2" points="{line}"/>'
        f'<text x="{pad}" y="12">{high:+,}</text><text x="{pad}" y="{height - 2}">{low:+,}</text></svg>'
    )


# --- a hand ---------------------------------------------------------------------------------


_PLAYS: Final = re.compile(r"\bplays? ((?:\d+)(?:, \d+)*)")


def _detail_html(detail: str) -> str:
    """A settlement detail with the plays it cites linked to the timeline: ``TL-6; plays 4, 5``."""
    out, last = [], 0
    for m in _PLAYS.finditer(detail):
        out.append(e(detail[last : m.start(1)]))
        out.append(", ".join(f'<a href="#play-{n}">{n}</a>' for n in m.group(1).split(", ")))
        last = m.end(1)
    out.append(e(detail[last:]))
    return "".join(out)


_CARD_IN_TEXT: Final = re.compile(r"(?<![\w?])([2-9TJQKA][scdh])(?![\w])")


def _with_cards(text: str) -> str:
    """Escaped text with every card in it (``Ah``, ``Td``) written as a card."""
    out, last = [], 0
    for m in _CARD_IN_TEXT.finditer(text):
        out.append(e(text[last : m.start()]))
        out.append(card_html(m.group(1)))
        last = m.end()
    out.append(e(text[last:]))
    return "".join(out)


def _short_time(at: str) -> str:
    """``12:00:00.006`` of ``2026-11-29 12:00:00.006000``: the day is in the page's header."""
    return at[11:23] if len(at) >= 23 else at


def hand_page(view: HandView) -> str:
    """One hand's page: the same view ``socai audit hand`` prints, settlement first."""
    p: list[str] = []
    status = '<span class="ok">clean</span>' if view.ok else f'<span class="bad">{len(view.findings)} finding(s)</span>'
    p.append(f"<h1>Hand {e(view.hand_id)} {status}</h1>")
    p.append(
        f"<p>table {e(view.table_id)} · {e(view.game)} · hand #{view.hand_number} · stake {gold(view.stake_gold)} · "
        f"fee {view.fee_bps} bps · dealer seat {e(view.dealer_seat if view.dealer_seat is not None else '-')}<br>"
        f"started {e(view.started_at or '-')} UTC · ended {e(view.ended_at or 'not yet')}</p>"
    )
    if view.findings:
        p.append('<h2>Findings</h2><table id="findings"><tr><th>reason</th><th>what differs</th></tr>')
        for m in view.findings:
            p.append(
                f'<tr class="bad" data-reason="{e(m.reason)}"><td>{e(m.reason)}</td><td class="mono">{e(m.detail)}</td></tr>'
            )
        p.append("</table>")
    p.append(_settlement_html(view))
    p.append(_seats_html(view))
    p.append(_game_html(view))
    p.append(_timeline_html(view))
    p.append('<h2>Seed</h2><table id="seed">')
    p.append(f'<tr><th>commitment</th><td class="mono">{e(view.commitment or "-")}</td></tr>')
    p.append(f'<tr><th>revealed</th><td class="mono">{e(view.seed or "- (the hand has not ended)")}</td></tr>')
    if view.seed_check:
        cls = "ok" if view.seed_ok else "bad"
        p.append(
            f'<tr><th>check</th><td class="{cls}" data-ok="{str(bool(view.seed_ok)).lower()}">{e(view.seed_check)}</td></tr>'
        )
    if view.replayed:
        p.append(
            f"<tr><th>deal</th><td>every dealt card ({view.cards_verified}) and die ({view.dice_verified}) "
            "is the one the seed deals</td></tr>"
        )
    p.append("</table>")
    p.append(_ledger_html(view))
    return _page(f"socai audit: {view.hand_id}", "\n".join(p), depth=1)


def _settlement_html(view: HandView) -> str:
    p = ["<h2>Settlement: who paid whom, and why</h2>"]
    if not view.replayed:
        p.append('<p class="bad">The hand did not replay: see the findings.</p>')
        return "".join(p)
    p.append(
        '<table id="settlement"><tr><th>from</th><th>to</th><th class="n">gold</th><th>reason</th><th>rule</th></tr>'
    )
    for line in view.lines:
        tag = " (penalty)" if line.penalty else ""
        p.append(
            f'<tr data-reason="{e(line.reason)}"><td class="mono">{e(line.from_account)}</td>'
            f'<td class="mono">{e(line.to_account)}</td><td class="n" data-gold="{line.amount_gold}">'
            f"{gold(line.amount_gold)}</td><td>{e(line.reason)}{tag}</td><td>RULES.md {e(line.rule or '?')}"
            + (f'<br><span class="detail">caused by {_detail_html(line.detail)}</span>' if line.detail else "")
            + "</td></tr>"
        )
    p.append(
        f'</table><p>gold moved <span id="moved" data-gold="{view.moved_gold}">{gold(view.moved_gold)}</span>, '
        f'fees <span id="fees" data-gold="{view.fees_gold}">{gold(view.fees_gold)}</span></p>'
    )
    if view.owed:
        p.append(
            '<h3>Owed against paid</h3><p class="note">RULES.md GEN-4: a seat never pays more than its chips at '
            "the table; when what the rules say it owes is more, the payees share what it has pro rata and the "
            "shortfall is reported, never invented.</p>"
            '<table id="owed"><tr><th>seat</th><th>player</th><th>reason</th><th class="n">owed</th>'
            '<th class="n">paid</th><th class="n">short</th><th class="n">stack at the start</th><th>rule</th></tr>'
        )
        for o in view.owed:
            short = f'<span class="short">{gold(o.short_gold)}</span>' if o.short_gold else "0"
            p.append(
                f'<tr data-seat="{o.seat}" data-reason="{e(o.reason)}" data-owed="{o.owed_gold}" '
                f'data-paid="{o.paid_gold}"><td>{o.seat}</td><td>{_player_link(o.player_id, depth=1)}</td>'
                f'<td>{e(o.reason)}</td><td class="n">{gold(o.owed_gold)}</td><td class="n">{gold(o.paid_gold)}</td>'
                f'<td class="n">{short}</td><td class="n">{gold(o.stack_gold)}</td><td>RULES.md {e(o.rule or "?")}</td></tr>'
            )
        p.append("</table>")
    return "".join(p)


def _seats_html(view: HandView) -> str:
    p = [
        '<h2>Seats</h2><table id="seats"><tr><th>seat</th><th>player</th><th class="n">stack</th>'
        '<th class="n">net</th><th>cards at the start</th><th>cards at the end</th><th>account</th></tr>'
    ]
    for s in view.seats:
        net = f"{s.net_gold:+,}" if s.net_gold is not None else "?"
        p.append(
            f'<tr data-player="{e(s.player_id)}"><td>{s.seat}</td><td>{_player_link(s.player_id, depth=1)}</td>'
            f'<td class="n">{gold(s.stack_gold)}</td><td class="n">{e(net)}</td>'
            f'<td class="start-cards">{cards_html(s.start_cards)}</td><td class="end-cards">{cards_html(s.end_cards)}</td>'
            f'<td class="mono">{e(s.account)}</td></tr>'
        )
    p.append("</table>")
    return "".join(p)


def _game_html(view: HandView) -> str:
    if view.chi:
        p = ['<h2>Chi</h2><p class="note">Back (chi đầu), middle (chi giữa), front (chi cuối), side by side.</p>']
        p.append('<table id="chi"><tr><th>seat</th><th>player</th><th>the three chi</th></tr>')
        for c in view.chi:
            auto = '<span class="tag auto">arranged by the rules (MB-20)</span>' if c.automatic else ""
            p.append(
                f'<tr data-seat="{c.seat}"><td>{c.seat}</td><td>{e(c.player_id)} {auto}</td><td><div class="chi">'
                f"<div><b>back · {e(c.categories[0])}</b>{cards_html(c.back)}</div>"
                f"<div><b>middle · {e(c.categories[1])}</b>{cards_html(c.middle)}</div>"
                f"<div><b>front · {e(c.categories[2])}</b>{cards_html(c.front)}</div></div></td></tr>"
            )
        return "".join(p) + "</table>"
    if view.phom:
        p = [
            '<h2>Melds</h2><table id="phom"><tr><th>seat</th><th>player</th><th>melds laid</th><th>taken (ăn)</th>'
            "<th>sent (gửi)</th><th>left</th></tr>"
        ]
        for ph in view.phom:
            melds = " | ".join(cards_html(m) for m in ph.melds) or "-"
            sent = ", ".join(f"{card_html(card)} to seat {to} meld {i + 1}" for card, to, i in ph.sent) or "-"
            p.append(
                f'<tr data-seat="{ph.seat}"><td>{ph.seat}</td><td>{e(ph.player_id)}</td><td>{melds}</td>'
                f"<td>{cards_html(ph.taken)}</td><td>{sent}</td><td>{cards_html(ph.left)}</td></tr>"
            )
        return "".join(p) + "</table>"
    if view.tricks:
        p = [
            '<h2>Tricks</h2><table id="tricks"><tr><th class="n">trick</th><th>plays (play number · seat · cards)</th></tr>'
        ]
        by_trick: dict[int, list[str]] = {}
        for r in view.timeline:
            if not r.trick:
                continue
            if r.play:
                auto = '<span class="tag auto">automatic</span>' if r.automatic else ""
                by_trick.setdefault(r.trick, []).append(
                    f'<a href="#play-{r.play}">{r.play}</a> · seat {r.seat} {auto}{cards_html(r.played)}'
                )
            elif r.kind in ("Passed", "TimerExpired"):
                by_trick.setdefault(r.trick, []).append(f"seat {r.seat} passes" + (" (timer)" if r.automatic else ""))
        for trick, items in sorted(by_trick.items()):
            p.append(f'<tr data-trick="{trick}"><td class="n">{trick}</td><td>{"; ".join(items)}</td></tr>')
        return "".join(p) + "</table>"
    return ""


def _timeline_html(view: HandView) -> str:
    p = [
        '<h2>Timeline</h2><p class="note">UTC, on the day above. A dashed card was dealt face down: only its seat '
        "saw it then; the seed revealed at the end shows it to everyone (?? while the hand is in play: the log holds "
        "no face-down card). An automatic move is the one the rules made when the seat's timer ran out (GEN-5).</p>"
        '<table id="timeline"><tr><th class="n">#</th><th>time</th><th>seat</th><th class="n">play</th>'
        "<th>event</th></tr>"
    ]
    for r in view.timeline:
        who = f"{r.seat} {e(r.player_id)}" if r.seat is not None else ""
        if r.cards:
            what = "dealt " + " ".join(
                card_html(c.card, face_up=c.face_up, title=f"to {c.to}") + f"→{e(c.to)}" for c in r.cards
            )
        elif r.automatic:
            made = f"played {cards_html(r.played)}" if r.played else e(r.automatic)
            what = f'<span class="tag auto">automatic</span>timer ran out; the rules {made}'
        elif r.played:
            what = f"{e(r.kind)} {cards_html(r.played)}"
        else:
            what = _with_cards(r.text)
        classes = " ".join(c for c in ("auto" if r.automatic else "", "play" if r.play else "") if c)
        anchor = f' id="play-{r.play}"' if r.play else ""
        p.append(
            f'<tr{anchor} data-kind="{e(r.kind)}"{f" class={chr(34)}{classes}{chr(34)}" if classes else ""}>'
            f'<td class="n">{r.seq}</td><td class="mono" title="{e(r.at)}">{e(_short_time(r.at))}</td>'
            f'<td>{who}</td><td class="n">{r.play or ""}</td><td class="what">{what}</td></tr>'
        )
    p.append("</table>")
    return "".join(p)


def _ledger_html(view: HandView) -> str:
    p = ["<h2>Ledger</h2>"]
    if not view.ledger_checked:
        p.append('<p class="note">Not reconciled (no ledger given).</p>')
    elif not view.ledger_transaction_id:
        p.append('<p id="ledger">No transaction for this hand.</p>')
    else:
        p.append(
            f'<p id="ledger" data-transaction="{e(view.ledger_transaction_id)}">{e(view.ledger_key)} · transaction '
            f'<span class="mono">{e(view.ledger_transaction_id)}</span> · journal_seq {view.ledger_journal_seq} · '
            f"{e(view.ledger_at)} UTC</p>"
            '<table id="entries"><tr><th>account</th><th class="n">amount</th><th class="n">balance after</th>'
            '<th class="n">version</th></tr>'
        )
        for entry in view.ledger_lines:
            p.append(
                f'<tr data-account="{e(entry.account_id)}" data-amount="{entry.amount_gold}" '
                f'data-balance-after="{entry.balance_after_gold}"><td class="mono">{e(entry.account_id)}</td>'
                f'<td class="n">{entry.amount_gold:+,}</td><td class="n">{gold(entry.balance_after_gold)}</td>'
                f'<td class="n">{entry.account_version}</td></tr>'
            )
        p.append("</table>")
    return "".join(p)
