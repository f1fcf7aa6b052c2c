"""``python -m tests.soak`` (``make soak``): N bot tables for M minutes on a private stack.

    python -m tests.soak [--tables 250] [--minutes 10] [--games all] [--sample-s 10] [--out var/soak]

Every service runs as its own process (``tests.chaos.stack``), the bots of the chaos suite
play every available game without a break (a broke bot buys in again), and every
``--sample-s`` the soak records each process's memory (RSS of the process, PSS of it with its
children), the ledger's outbox lag (``socai_ledger_outbox_lag``), settlement's lag
(``socai_settlement_lag_messages``), and hands ended and settled per second (from
``socai_table_hands_ended_total`` and ``socai_settlement_hands_settled_total``). At the end
the bots leave and the ledger is checked (trial balance 0, ``VerifyJournal`` clean).

Writes ``<out>/report.json`` (every sample and a summary: hands/s, memory growth per process
over the second half of the run, the lags' maxima and final values) and ``<out>/soak.png``.
Exit status 1 when memory is not flat (a socai service grew more than
``--rss-growth-max-pct`` over the second half; nats-server and PostgreSQL are shown, not
judged), a lag is not bounded (it ends above ``--lag-max``), or the ledger check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from socai.infra.logging import configure
from tests.chaos.bots import Bots
from tests.chaos.checks import ledger_verdict
from tests.chaos.stack import ProcessStack, metric_sum

SERVICES = ("ledger", "table", "settlement")
STALLED_S = 30.0  # a table with players and no new event for this long is stalled


def sample(stack: ProcessStack, started: float) -> dict[str, Any]:
    ledger = stack.metrics("ledger")
    table = stack.metrics("table")
    settlement = stack.metrics("settlement")
    return {
        "t_s": round(time.monotonic() - started, 1),
        "memory_mb": stack.memory_mb(),
        "outbox_lag": metric_sum(ledger, "socai_ledger_outbox_lag") if ledger else None,
        "outbox_published": metric_sum(ledger, "socai_ledger_outbox_published_total") if ledger else None,
        "settlement_lag": metric_sum(settlement, "socai_settlement_lag_messages") if settlement else None,
        "hands_ended": metric_sum(table, "socai_table_hands_ended_total") if table else None,
        "hands_settled": metric_sum(settlement, "socai_settlement_hands_settled_total") if settlement else None,
    }


def rate(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
    if a.get(key) is None or b.get(key) is None or b["t_s"] <= a["t_s"]:
        return None
    return round((b[key] - a[key]) / (b["t_s"] - a["t_s"]), 2)


def summarize(samples: list[dict[str, Any]], lag_max: float, growth_max_pct: float) -> dict[str, Any]:
    if len(samples) < 3:
        return {"ok": False, "problems": ["fewer than three samples"]}
    first, mid, last = samples[0], samples[len(samples) // 2], samples[-1]
    problems = []
    memory: dict[str, Any] = {}
    for name in last["memory_mb"]:
        series = [s["memory_mb"][name]["rss"] for s in samples if name in s["memory_mb"]]
        at_mid = mid["memory_mb"].get(name, {}).get("rss")
        at_end = last["memory_mb"][name]["rss"]
        growth = None if not at_mid else round(100 * (at_end - at_mid) / at_mid, 1)
        memory[name] = {
            "rss_start_mb": series[0],
            "rss_mid_mb": at_mid,
            "rss_end_mb": at_end,
            "rss_max_mb": max(series),
            "pss_tree_end_mb": last["memory_mb"][name]["pss_tree"],
            "growth_second_half_pct": growth,
        }
        # The socai services must stay flat; nats-server's and PostgreSQL's caches grow with
        # the stream and the tables until their own limits, so they are shown, not judged.
        if name in SERVICES and growth is not None and growth > growth_max_pct:
            problems.append(f"{name}: RSS grew {growth} % over the second half ({at_mid} -> {at_end} MiB)")
    lags = {}
    for key in ("outbox_lag", "settlement_lag"):
        values = [s[key] for s in samples if s[key] is not None]
        second = [s[key] for s in samples[len(samples) // 2 :] if s[key] is not None]
        lags[key] = {
            "max": max(values, default=None),
            "end": values[-1] if values else None,
            "mean_second_half": round(sum(second) / len(second), 1) if second else None,
        }
        if values and values[-1] > lag_max:
            problems.append(f"{key} ends at {values[-1]:.0f} (bound {lag_max:.0f})")
    return {
        "duration_s": last["t_s"],
        "hands_ended": None if last["hands_ended"] is None else last["hands_ended"] - (first["hands_ended"] or 0),
        "hands_per_s": rate(first, last, "hands_ended"),
        "hands_settled_per_s": rate(first, last, "hands_settled"),
        "hands_per_s_second_half": rate(mid, last, "hands_ended"),
        "outbox_published_per_s": rate(first, last, "outbox_published"),
        "memory": memory,
        "lags": lags,
        "problems": problems,
        "ok": not problems,
    }


def plot(samples: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s["t_s"] / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(10, 12), sharex=True)
    names = sorted({n for s in samples for n in s["memory_mb"]})
    for name in names:
        # PostgreSQL's postmaster alone says little: show all its backends (PSS).
        kind = "pss_tree" if name == "postgres" else "rss"
        label = "postgres (PSS, all backends)" if name == "postgres" else name
        axes[0].plot(minutes, [s["memory_mb"].get(name, {}).get(kind) for s in samples], label=label)
    axes[0].set_ylabel("RSS (MiB)")
    axes[0].legend(loc="upper left", fontsize="small", ncol=3)
    axes[1].plot(minutes, [s["outbox_lag"] for s in samples], color="tab:red")
    axes[1].set_ylabel("ledger outbox lag (tx)")
    axes[2].plot(minutes, [s["settlement_lag"] for s in samples], color="tab:purple")
    axes[2].set_ylabel("settlement lag (messages)")
    ended = [None] + [rate(a, b, "hands_ended") for a, b in itertools.pairwise(samples)]
    settled = [None] + [rate(a, b, "hands_settled") for a, b in itertools.pairwise(samples)]
    axes[3].plot(minutes, ended, label="ended")
    axes[3].plot(minutes, settled, label="settled")
    axes[3].set_ylabel("hands/s")
    axes[3].legend(loc="upper left", fontsize="small")
    axes[3].set_xlabel("minutes")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out).resolve()
    stack = ProcessStack(out / "stack")
    samples: list[dict[str, Any]] = []
    report: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(),
        "tables": args.tables,
        "minutes": args.minutes,
        "sample_s": args.sample_s,
    }
    bots: Bots | None = None
    try:
        await stack.start()
        assert stack.settings is not None
        games = () if args.games == "all" else tuple(g for g in args.games.split(",") if g)
        bots = Bots(stack.settings, args.tables, games=games, seed=args.seed)
        opened = time.monotonic()
        await bots.open_tables()
        report["open_tables_s"] = round(time.monotonic() - opened, 1)
        report["games"] = sorted({load.game for load in bots.loads.values()})
        bots.start()
        print(
            f"{args.tables} tables open in {report['open_tables_s']} s ({', '.join(report['games'])}); soaking {args.minutes} min"
        )
        started = time.monotonic()
        end = started + args.minutes * 60
        while True:
            samples.append(await asyncio.to_thread(sample, stack, started))
            s = samples[-1]
            print(
                f"  t={s['t_s']:>6.0f}s hands={s['hands_ended']} settled={s['hands_settled']} "
                f"outbox_lag={s['outbox_lag']} settlement_lag={s['settlement_lag']} "
                + " ".join(f"{n}={m['rss']:.0f}M" for n, m in sorted(s["memory_mb"].items())),
                flush=True,
            )
            if time.monotonic() >= end:
                break
            await asyncio.sleep(min(args.sample_s, max(0.0, end - time.monotonic())))
        exited = stack.exited()
        report["exited"] = exited
        report["bots"] = bots.summary()
        # Tables that stopped moving although two or more players sit there: no event of their
        # hand for STALLED_S (a hand in play always has a timer, and a table between hands
        # auto-starts the next). "No new hand for 30 s" flagged long shedding hands that were
        # playing on (Tiến Lên and Sâm Lốc hands last about a minute at 250 tables), so the
        # longest time without a new hand is reported per game instead of judged.
        now = time.monotonic()
        report["stalled_tables"] = {
            t: {"game": load.game, "hand": load.hand, "seated": load.seated, "idle_s": round(now - load.last_event)}
            for t, load in bots.loads.items()
            if load.seated >= 2 and now - load.last_event > STALLED_S
        }
        longest: dict[str, float] = {}
        for load in bots.loads.values():
            if load.seated >= 2:
                longest[load.game] = max(longest.get(load.game, 0.0), round(now - load.last_progress))
        report["longest_without_a_new_hand_s"] = dict(sorted(longest.items()))
        await bots.stop(leave=True)
        bots = None
        await asyncio.sleep(5)  # the last hands end by their timers and settle
        report["ledger"] = await ledger_verdict(stack)
    finally:
        if bots is not None:
            await bots.stop(leave=False)
        await stack.stop()
    summary = summarize(samples, args.lag_max, args.rss_growth_max_pct)
    ledger = report.get("ledger", {})
    if ledger.get("trial_balance_gold") != 0 or not ledger.get("verify_ok"):
        summary["problems"].append(f"ledger: {ledger}")
    if report.get("stalled_tables"):
        summary["problems"].append(f"{len(report['stalled_tables'])} tables stalled: {report['stalled_tables']}")
    if report.get("exited"):
        summary["problems"].append(f"services exited during the soak: {report['exited']}")
    summary["ok"] = not summary["problems"]
    report["summary"] = summary
    report["samples"] = samples
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    plot(
        samples, out / "soak.png", f"socai soak: {args.tables} tables, {args.minutes} min ({report['started_at'][:16]})"
    )
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=int, default=250, help="bot tables, games in turn (default 250)")
    p.add_argument("--minutes", type=float, default=10.0, help="how long the bots play (default 10)")
    p.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples (default 10)")
    p.add_argument("--lag-max", type=float, default=5000.0, help="a lag ending above this fails (default 5000)")
    p.add_argument(
        "--rss-growth-max-pct", type=float, default=15.0, help="RSS growth over the second half that fails (default 15)"
    )
    p.add_argument("--games", default="all", help="comma-separated game ids, or all (default)")
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--out", default="var/soak", help="report, plot and stack directory (default var/soak)")
    args = p.parse_args(argv)
    configure(fmt="console", level="warning")
    report = asyncio.run(soak(args))
    summary = report["summary"]
    print(json.dumps({k: v for k, v in summary.items() if k != "memory"}, indent=2))
    for name, m in summary.get("memory", {}).items():
        print(
            f"  {name:<11} RSS {m['rss_start_mb']:>7.1f} -> {m['rss_mid_mb']} -> {m['rss_end_mb']:>7.1f} MiB ({m['growth_second_half_pct']} % second half)"
        )
    print(f"report: {Path(args.out) / 'report.json'}, plot: {Path(args.out) / 'soak.png'}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
