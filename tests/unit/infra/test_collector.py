"""The collector's setting: services keep it for life, an audit for its own length."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from socai.audit.auditor import verify
from socai.audit.export import RawEvent, read_jsonl, write_jsonl
from socai.infra import collector, service
from socai.rules import registry
from tests.support.synthetic import simulate


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_tuned_raises_the_thresholds_for_its_length_and_restores_the_callers_even_on_an_error(
    default_thresholds: tuple[int, int, int],
) -> None:
    with collector.tuned():
        assert gc.get_threshold() == collector.THRESHOLDS
    assert gc.get_threshold() == default_thresholds
    with pytest.raises(RuntimeError), collector.tuned():
        raise RuntimeError("the work failed")
    assert gc.get_threshold() == default_thresholds
    assert service.GC_GEN0_THRESHOLD == collector.GEN0_THRESHOLD  # the name services import


def test_an_audit_reads_and_replays_under_the_raised_thresholds(
    default_thresholds: tuple[int, int, int], tmp_path: Path
) -> None:
    """Reading the export is part of the audit (``verify`` draws its events lazily): the
    thresholds hold while every line is read, and the caller's are back after."""
    export = tmp_path / "export.jsonl"
    with export.open("w", encoding="utf-8") as out:
        write_jsonl(simulate(12, registry.available(), seed=5).events(), out)
    seen: list[tuple[int, int, int]] = []

    def raws() -> Iterator[RawEvent]:
        for raw in read_jsonl(export):
            seen.append(gc.get_threshold())
            yield raw

    audit = verify(raws(), source="test")
    assert audit.report.ok, audit.report.render()
    assert audit.report.hands_verified == 12
    assert seen and set(seen) == {collector.THRESHOLDS}
    assert gc.get_threshold() == default_thresholds


def test_the_audits_site_folds_its_hands_under_the_raised_thresholds(
    default_thresholds: tuple[int, int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from socai.audit import html

    export = tmp_path / "export.jsonl"
    with export.open("w", encoding="utf-8") as out:
        write_jsonl(simulate(4, registry.available(), seed=6).events(), out)
    audit = verify(read_jsonl(export), source="test")
    seen: list[tuple[int, int, int]] = []
    real_views = html.views

    def views(audit: Any) -> Iterator[Any]:
        for view in real_views(audit):
            seen.append(gc.get_threshold())
            yield view

    monkeypatch.setattr(html, "views", views)
    assert html.write_site(audit, tmp_path / "site") == 4
    assert seen and set(seen) == {collector.THRESHOLDS}
    assert gc.get_threshold() == default_thresholds
