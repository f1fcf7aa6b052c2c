"""The nemesis's schedule comes from its seed alone, and its figures mean what they say.

Pure functions of ``tests.chaos.nemesis`` and ``tests.chaos.checks`` (no stack): the plan a
seed makes, the out-of-table arithmetic over a made-up timeline, the wallet and log checks'
parsing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.chaos.bots import Bots, TableLoad
from tests.chaos.checks import Timeline, longest_gap
from tests.chaos.nemesis import (
    ALL_KINDS,
    SHORT_PROFILE,
    Group,
    Planned,
    Record,
    log_problems,
    outages,
    percentile,
    plan,
    quiet_gap,
    rolling_failures,
    windows_of,
)


def test_a_seed_makes_one_schedule_and_another_seed_another() -> None:
    assert plan(7, 3600) == plan(7, 3600)
    assert plan(7, 3600) != plan(8, 3600)


def test_every_kind_comes_once_a_round_before_any_comes_again() -> None:
    groups = plan(11, 0, rounds=3, pair_chance=0.0)
    firsts = [g.faults[0].kind for g in groups]
    assert len(firsts) == 3 * len(ALL_KINDS)
    for r in range(3):
        assert sorted(firsts[r * len(ALL_KINDS) : (r + 1) * len(ALL_KINDS)]) == sorted(ALL_KINDS)


def test_two_faults_at_once_never_hurt_the_same_component() -> None:
    groups = plan(3, 4 * 3600, pair_chance=0.5)
    pairs = [g for g in groups if len(g.faults) == 2]
    assert len(pairs) > 20
    for g in pairs:
        a, b = g.faults
        assert not (a.classes & b.classes), g
        assert "duplicate_messages" not in (a.kind, b.kind)


def test_an_hour_at_30_to_60_s_gaps_has_about_a_fault_a_minute_and_every_kind() -> None:
    groups = plan(5, 3600, gap_s=(30.0, 60.0))
    assert 40 <= len(groups) <= 90
    assert {f.kind for g in groups for f in g.faults} == set(ALL_KINDS)
    assert all(30.0 <= g.gap_s <= 60.0 for g in groups)


def test_pauses_past_a_lease_outlast_it_and_the_short_profile_is_short() -> None:
    for g in plan(9, 0, rounds=4, ttl_s=2.0, profile=SHORT_PROFILE):
        for f in g.faults:
            if f.kind in ("settlement_pause", "table_pause_busiest"):
                assert 3.0 <= f.hold_s <= 4.0
            if f.kind in ("nats_pause", "table_kill_nats_pause"):
                assert 3.0 <= f.hold_s <= 4.0
            if f.kind == "pause_any":
                assert f.role in ("ledger", "table", "settlement", "nats", "postgres")


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault kinds"):
        plan(1, 60, kinds=("nats_pause", "meteor"))


# --- the figures ---------------------------------------------------------------------------


def test_percentiles_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 1.0) == 100.0
    assert percentile([], 0.5) == 0.0


def test_the_longest_gap_is_clipped_to_the_window_and_counts_a_table_still_out() -> None:
    times = [1.0, 2.0, 3.0, 10.0, 11.0]
    assert longest_gap(times, 4.0, 8.0) == 4.0  # out from before the window to after it
    assert longest_gap(times, 2.5, 12.0) == 7.0  # 3 -> 10
    assert longest_gap(times, 10.5, 20.0) == 9.0  # the last event at 11, still out at 20
    assert longest_gap([], 0.0, 5.0) == 5.0


def records(*spans: tuple[float, float]) -> list[list[Record]]:
    return [[Record("nats_pause", "nats_pause", b - a, ["nats"], a, b)] for a, b in spans]


def test_a_window_ends_at_the_next_fault_or_30_s_after_its_restore() -> None:
    assert windows_of(records((100.0, 110.0), (125.0, 126.0)), 500.0) == [
        (100.0, 110.0, 125.0),
        (125.0, 126.0, 156.0),
    ]


def test_quiet_gaps_leave_out_every_stretch_that_touches_a_fault() -> None:
    times = [0.0, 1.0, 2.0, 8.0, 9.0, 12.0, 13.0, 15.5]
    assert quiet_gap(times, [(3.0, 5.0, 7.0)], since=0.0) == 3.0  # 9 -> 12; 2 -> 8 touched the fault
    assert quiet_gap(times, [(3.0, 5.0, 7.0)], since=10.0) == 2.5  # 13 -> 15.5


def test_outages_per_fault_and_the_tables_out_longer_than_allowed() -> None:
    # Table a plays every second and stops for the fault from 100 to 106 (back at 107); table b
    # is back only at 125.
    a = [float(t) for t in range(80, 100)] + [float(t) for t in range(107, 140)]
    b = [float(t) for t in range(80, 100)] + [125.0 + t for t in range(10)]
    timeline = Timeline(events={"a": [(t, "x") for t in a], "b": [(t, "x") for t in b]})
    groups = [Group(30.0, (Planned("nats_pause", 6.0, 0),))]
    per_group, summary, late = outages(timeline, ["a", "b"], groups, records((100.0, 106.0)), 140.0, 80.0, 2.0, [0.2])
    # Out from the injection (100) to the first event after it: a table is not out before.
    assert per_group[0]["tables_out_s"] == {"a": 7.0, "b": 25.0}
    assert summary["nats_pause"]["out_max_s"] == 25.0
    assert summary["nats_pause"]["back_p50_s"] == 1.0  # a: 107 - 106
    assert summary["nats_pause"]["back_max_s"] == 19.0  # b: 125 - 106
    # Allowed: the fault's 6 s + 1.2 TTL + 0.2 rebuild + the table's quiet gap (1 s) + 5 s.
    assert len(late) == 1 and "table b out 25.0 s (allowed 14.6 s)" in late[0]


def test_a_rolling_restart_may_keep_a_table_out_a_lease_and_a_rebuild_not_its_whole_length() -> None:
    # The restart of five processes takes 100 -> 140; table a is handed over twice (out 4 s
    # each time), table b is out 16 s at once: more than 1.2 TTL + rebuild + quiet + margin.
    a = [float(t) for t in range(80, 110)] + [float(t) for t in range(114, 130)] + [134.0 + t for t in range(20)]
    b = [float(t) for t in range(80, 120)] + [135.0 + t for t in range(20)]
    timeline = Timeline(events={"a": [(t, "x") for t in a], "b": [(t, "x") for t in b]})
    groups = [Group(30.0, (Planned("rolling_restart", 0.0, 0),))]
    recs = [[Record("rolling_restart", "rolling_restart", 0.0, injected=100.0, restored=140.0)]]
    _, _, late = outages(timeline, ["a", "b"], groups, recs, 160.0, 80.0, 2.0, [0.2])
    # Allowed: two handovers of 1.2 TTL + 0.2 rebuild, the table's quiet gap (1 s) + 5 s, without the 40 s.
    assert len(late) == 1 and "table b out 16.0 s (allowed 11.2 s)" in late[0]


def test_a_rolling_restart_fails_no_call_past_the_client_s_retries() -> None:
    bots = Bots.__new__(Bots)  # only its tables' records are read
    calm, hurt = TableLoad("t1", "holdem"), TableLoad("t2", "xito")
    calm.gave_up = [(95.0, "act:UNAVAILABLE")]  # before the restart: another fault's
    hurt.gave_up = [(120.0, "watch:UNAVAILABLE"), (150.0, "act:DEADLINE_EXCEEDED"), (200.0, "act:UNAVAILABLE")]
    bots.loads = {"t1": calm, "t2": hurt}
    recs = [
        [Record("nats_pause", "nats_pause", 3.0, injected=90.0, restored=93.0)],
        [Record("rolling_restart", "rolling_restart", 0.0, injected=100.0, restored=140.0)],
    ]
    problems = rolling_failures(bots, recs, 300.0)
    # The window runs to 30 s after the restore: the failure at 200 is not the restart's.
    assert recs[1][0].client_failures == {"watch:UNAVAILABLE": 1, "act:DEADLINE_EXCEEDED": 1}
    assert len(problems) == 1 and "past the client's retries" in problems[0]
    hurt.gave_up = []
    assert rolling_failures(bots, recs, 300.0) == []


def test_the_log_check_flags_what_nothing_caught_and_counts_what_was_logged(tmp_path: Path) -> None:
    log = tmp_path / "table.log"
    log.write_text(
        "\n".join(
            [
                '{"event": "consumer_crashed", "level": "error", "exception": "Traceback (most recent call last): ..."}',
                '{"event": "rpc", "level": "info"}',
                "Task exception was never retrieved",
                "Traceback (most recent call last):",
                '  File "x.py", line 1',
                '{"event": "rpc_failed", "level": "error"}',
            ]
        )
    )
    problems, logged = log_problems([log])
    assert len(problems) == 3  # the unretrieved task, the bare traceback, the INTERNAL answer
    assert logged == {"consumer_crashed": 1}
    assert Counter(p.split(":")[0] for p in problems) == {"table.log": 3}
