"""Between hands the audit checks what no single hand can: each hand's dealer (or banker,
or seat dealt first) is the one the rules choose after the previous hand, and a carried
pot continues from hand to hand."""

from __future__ import annotations

import dataclasses

import pytest

from socai.audit.auditor import DEALER_MISMATCH, POT_CARRY_MISMATCH, Audit, check_continuity
from socai.audit.report import AuditReport
from socai.rules import registry
from socai.settle.replay import ReplayResult, replay
from tests.support.synthetic import simulate


def audited(results: list[ReplayResult]) -> list[tuple[str, str]]:
    audit = Audit(AuditReport(source="test"), results=results)
    check_continuity(audit)
    return [(m.reason, m.hand_id) for m in audit.report.mismatches]


@pytest.fixture(scope="module")
def results() -> dict[str, list[ReplayResult]]:
    return {game: [replay(h.events) for h in simulate(30, (game,), seed=4).hands] for game in registry.available()}


@pytest.mark.parametrize("game", registry.available())
def test_simulated_tables_pass_the_dealer_and_pot_checks(game: str, results: dict[str, list[ReplayResult]]) -> None:
    assert audited(results[game]) == []


def test_a_hand_dealt_from_the_wrong_seat_is_a_dealer_mismatch(results: dict[str, list[ReplayResult]]) -> None:
    hands = list(results["holdem"])
    second = next(i for i, r in enumerate(hands) if r.started.hand_number == 2)
    r = hands[second]
    others = [info.seat for info in r.started.seats if info.seat != r.started.dealer_seat]
    hands[second] = dataclasses.replace(r, started=dataclasses.replace(r.started, dealer_seat=others[0]))
    # The tampered hand, and the next, whose button moves on from the tampered one.
    assert audited(hands)[0] == (DEALER_MISMATCH, r.hand_id)


def test_a_pot_that_does_not_continue_is_a_pot_carry_mismatch(results: dict[str, list[ReplayResult]]) -> None:
    hands = list(results["xito"])
    second = next(i for i, r in enumerate(hands) if r.started.hand_number == 2)
    r = hands[second]
    hands[second] = dataclasses.replace(r, started=dataclasses.replace(r.started, pot_gold=r.started.pot_gold + 5))
    assert (POT_CARRY_MISMATCH, r.hand_id) in audited(hands)


def test_a_hand_whose_predecessor_is_missing_is_not_compared(results: dict[str, list[ReplayResult]]) -> None:
    hands = [r for r in results["xito"] if r.started.hand_number != 2]
    assert audited(hands) == []
