"""The auditor's site: ``socai audit --html DIR`` writes a static, self-contained folder.

- ``index.html``, the overview: the verdict, every mismatch first (with its hand), dead
  letters, hands per game and day, and per game the gold moved, fees and penalties by
  reason with the RULES.md rule each names;
- ``hands.html``, every hand in a table (table, players, game, hand id, gold moved, status)
  with a search box; ``hands.html?q=alice`` opens it already searched, so a link (or a
  test) can name a search;
- ``hands/<hand id>.html``, one page per hand: the ``socai.audit.handview`` view the
  terminal prints, as HTML;
- ``style.css`` and ``search.js``, the only other files.

Nothing is loaded from outside the folder (no CDN, no web font, no server): an auditor can
open it from a USB stick, and the pages show the same thing years later. Everything that
comes from the input is escaped on the way out (player ids and table ids are user input;
an export may be forged), and a hand page's file name is the hand id only when it is a
valid id, else a digest of it.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from html import escape
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from socai.audit.auditor import Audit
from socai.audit.handview import HandView, views
from socai.audit.report import AuditReport
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


def _page(title: str, body: str, *, depth: int = 0, script: str = "") -> str:
    up = "../" * depth
    js = f'<script src="{up}{script}"></script>' if script else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<title>{e(title)}</title><link rel="stylesheet" href="{up}style.css"></head>\n<body>'
        f'<nav><a href="{up}index.html">overview</a><a href="{up}hands.html">hands</a></nav>\n'
        f"{body}\n{js}</body></html>\n"
    )


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
    (out_dir / "style.css").write_text(STYLE, encoding="utf-8")
    (out_dir / "search.js").write_text(SEARCH_JS, encoding="utf-8")
    rows: list[str] = []
    per_day: Counter[tuple[str, str]] = Counter()
    written = 0
    for view in views(audit):
        (hands_dir / page_name(view.hand_id)).write_text(hand_page(view), encoding="utf-8")
        written += 1
        rows.append(_list_row(view))
        per_day[(view.game, view.started_at[:10])] += 1
    (out_dir / "hands.html").write_text(_hand_list(rows), encoding="utf-8")
    (out_dir / "index.html").write_text(
        overview(audit.report, per_day, list(dead_letters), signed_verdict), encoding="utf-8"
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
) -> str:
    parts = ["<h1>socai audit</h1>"]
    parts.append(
        f'<p class="note">{e(report.source)}; '
        + (f"ledger {e(report.ledger)}" if report.ledger else "no ledger reconciled")
        + "</p>"
    )
    parts.append(_proof_section(report, signed_verdict))
    if report.ok:
        parts.append('<p id="verdict" class="ok" data-ok="true">Clean: every hand replays and the ledger agrees.</p>')
    else:
        parts.append(
            f'<p id="verdict" class="bad" data-ok="false">{len(report.mismatches)} mismatch(es): '
            "every one is listed below with its hand.</p>"
        )
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
            penalty_rows.append(
                f'<tr data-reason="{e(reason)}"><td>{e(game)}</td><td>{e(reason)}</td><td>RULES.md {e(rule or "?")}</td>'
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
    parts.append('</table><p><a href="hands.html">every hand, searchable</a></p>')
    return _page("socai audit: overview", "\n".join(parts))


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
    search = " ".join((view.table_id, players, view.game, view.hand_id, str(view.moved_gold), status)).lower()
    cls = "" if view.ok else ' class="bad"'
    return (
        f'<tr{cls} data-hand="{e(view.hand_id)}" data-search="{e(search)}"><td>{e(view.table_id)}</td>'
        f"<td>{e(players)}</td><td>{e(view.game)}</td><td>{_hand_link(view.hand_id)}</td>"
        f'<td class="n">{gold(view.moved_gold)}</td><td>{e(view.started_at[:19])}</td><td>{e(status)}</td></tr>'
    )


def _hand_list(rows: list[str]) -> str:
    body = (
        "<h1>Hands</h1>"
        '<p><input id="q" type="search" placeholder="table, player, game, hand id, amount" autofocus> '
        f'<span id="count" data-shown="{len(rows)}">{len(rows)}</span> of {len(rows)} hands</p>'
        '<table id="hands"><thead><tr><th>table</th><th>players</th><th>game</th><th>hand</th>'
        '<th class="n">gold moved</th><th>started (UTC)</th><th>status</th></tr></thead><tbody>\n'
        + "\n".join(rows)
        + "\n</tbody></table>"
    )
    return _page("socai audit: hands", body, script="search.js")


# --- a hand ---------------------------------------------------------------------------------


def _card(text: str, face_up: bool, to: str) -> str:
    title = f"to {to}" + ("" if face_up else ", dealt face down")
    cls = "card" if face_up else "card down"
    return f'<span class="{cls}" title="{e(title)}">{e(text)}</span>'


def hand_page(view: HandView) -> str:
    """One hand's page: the same view ``socai audit hand`` prints."""
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
    p.append(
        '<h2>Seats</h2><table id="seats"><tr><th>seat</th><th>player</th><th class="n">stack</th>'
        '<th class="n">net</th><th>account</th></tr>'
    )
    for s in view.seats:
        net = f"{s.net_gold:+,}" if s.net_gold is not None else "?"
        p.append(
            f'<tr data-player="{e(s.player_id)}"><td>{s.seat}</td><td>{e(s.player_id)}</td>'
            f'<td class="n">{gold(s.stack_gold)}</td><td class="n">{e(net)}</td><td class="mono">{e(s.account)}</td></tr>'
        )
    p.append("</table>")
    p.append(
        '<h2>Timeline</h2><p class="note">UTC. A dashed card was dealt face down: only its seat saw it then; '
        "the seed revealed at the end shows it to everyone (?? while the hand is in play: the log holds no "
        "face-down card).</p>"
        '<table id="timeline"><tr><th class="n">#</th><th>time</th><th>seat</th><th>event</th></tr>'
    )
    for r in view.timeline:
        who = f"{r.seat} {e(r.player_id)}" if r.seat is not None else ""
        if r.cards:
            what = "dealt " + " ".join(_card(c.card, c.face_up, c.to) + f"→{e(c.to)}" for c in r.cards)
        else:
            what = e(r.text)
        p.append(
            f'<tr data-kind="{e(r.kind)}"><td class="n">{r.seq}</td><td class="mono">{e(r.at)}</td>'
            f"<td>{who}</td><td>{what}</td></tr>"
        )
    p.append("</table>")
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
    p.append("<h2>Settlement</h2>")
    if view.replayed:
        p.append(
            '<table id="settlement"><tr><th>from</th><th>to</th><th class="n">gold</th><th>reason</th><th>rule</th></tr>'
        )
        for line in view.lines:
            tag = " (penalty)" if line.penalty else ""
            p.append(
                f'<tr data-reason="{e(line.reason)}"><td class="mono">{e(line.from_account)}</td>'
                f'<td class="mono">{e(line.to_account)}</td><td class="n">{gold(line.amount_gold)}</td>'
                f"<td>{e(line.reason)}{tag}</td><td>RULES.md {e(line.rule or '?')}"
                + (f'<br><span class="detail">caused by {e(line.detail)}</span>' if line.detail else "")
                + "</td></tr>"
            )
        p.append(
            f'</table><p>gold moved <span id="moved" data-gold="{view.moved_gold}">{gold(view.moved_gold)}</span>, '
            f'fees <span id="fees" data-gold="{view.fees_gold}">{gold(view.fees_gold)}</span></p>'
        )
    else:
        p.append('<p class="bad">The hand did not replay: see the findings.</p>')
    p.append("<h2>Ledger</h2>")
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
    return _page(f"socai audit: {view.hand_id}", "\n".join(p), depth=1)
