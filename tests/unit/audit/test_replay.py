"""Replay and tamper detection on a real export (``fixtures/hands.jsonl``, six bot hands).

Each tampering test edits a copy of the export the way a forger would and asserts the
exact reason and message the auditor gives: the event it blames and what differs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from socai import fairness
from socai.audit import REASONS, ReplayError, replay_hand
from socai.events import codec
from socai.rules import registry
from socai.rules.autoplay import replay as fold
from socai.settle.replay import replay

FIXTURE = Path(__file__).parent / "fixtures" / "hands.jsonl"
Line = dict[str, Any]


def export() -> list[Line]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def hand(hand_id: str, lines: list[Line] | None = None) -> list[Line]:
    return [copy.deepcopy(x) for x in (lines or export()) if x["hand_id"] == hand_id]


def find(lines: list[Line], event_id: str) -> Line:
    return next(x for x in lines if x["event_id"] == event_id)


def rejected(lines: list[Line]) -> ReplayError:
    with pytest.raises(ReplayError) as err:
        replay_hand(lines)
    assert err.value.code in REASONS
    return err.value


HANDS = ["t0001-h1", "t0001-h2", "t0002-h1", "t0002-h2", "t0003-h1", "t0003-h2"]


# --- the untouched export -------------------------------------------------------------------


@pytest.mark.parametrize("hand_id", HANDS)
def test_every_exported_hand_replays_to_the_settlement_the_rules_engine_gives(hand_id: str) -> None:
    lines = hand(hand_id)
    events = [codec.from_json(x) for x in lines]
    module = registry.get(events[0].game)
    direct = module.settle(fold(module, [e.body for e in events]))
    assert replay_hand(lines) == direct
    assert sum(direct.entries().values()) == 0


@pytest.mark.parametrize("hand_id", HANDS)
def test_json_protobuf_and_domain_events_replay_alike(hand_id: str) -> None:
    lines = hand(hand_id)
    domain = [codec.from_json(x) for x in lines]
    protos = [codec.to_proto(e) for e in domain]
    assert replay_hand(lines) == replay_hand(protos) == replay_hand(domain)


def test_the_replay_counts_every_card_and_die_it_checked_against_the_seed() -> None:
    holdem = replay(hand("t0001-h1"))
    assert holdem.cards_verified == 4 * 2 + 5  # four players' hole cards and the board
    dice = replay(hand("t0003-h1"))
    assert (dice.cards_verified, dice.dice_verified) == (0, 3)


# --- tampering ------------------------------------------------------------------------------


def test_a_changed_card_is_a_deal_mismatch_naming_the_event_seat_and_both_cards() -> None:
    lines = hand("t0001-h1")
    find(lines, "t0001-h1/2")["cards_dealt"]["cards"][2]["card"] = "Ks"
    err = rejected(lines)
    assert err.code == "DEAL_MISMATCH"
    assert err.message == "t0001-h1/2: dealt Ks to seat 4, the seed deals Qd"
    assert err.event_id == "t0001-h1/2"


def test_a_changed_board_card_names_the_board() -> None:
    lines = hand("t0001-h1")
    find(lines, "t0001-h1/12")["cards_dealt"]["cards"][0]["card"] = "2c"
    err = rejected(lines)
    assert (err.code, err.message) == ("DEAL_MISMATCH", "t0001-h1/12: dealt 2c to the board, the seed deals Jh")


def test_a_changed_bet_amount_is_an_illegal_event_with_the_rules_reason() -> None:
    lines = hand("t0001-h1")
    find(lines, "t0001-h1/15")["bet_action"]["amount_gold"] = "2000"  # a call of 3980 turned into 2000
    err = rejected(lines)
    assert err.code == "ILLEGAL_EVENT"
    assert err.message.startswith("t0001-h1/15: BetAction seat 4 call 2000: WRONG_CALL_AMOUNT")


def test_a_changed_wager_amount_still_replays_but_settles_differently() -> None:
    # Legal but false: only the ledger reconciliation can catch it (tests/e2e).
    honest = replay_hand(hand("t0003-h1"))
    lines = hand("t0003-h1")
    find(lines, "t0003-h1/9")["wager_placed"]["amount_gold"] = "60"
    forged = replay_hand(lines)
    assert forged.entries() != honest.entries()


def test_a_missing_event_is_a_seq_gap_naming_the_neighbours() -> None:
    lines = [x for x in hand("t0002-h2") if x["event_id"] != "t0002-h2/6"]
    err = rejected(lines)
    assert err.code == "SEQ_GAP"
    assert err.message == "t0002-h2/6 is missing (t0002-h2/5 is followed by t0002-h2/7)"


def test_a_missing_hand_started_is_not_started() -> None:
    lines = hand("t0002-h2")[1:]
    err = rejected(lines)
    assert err.code == "NOT_STARTED"
    assert err.message.startswith("t0002-h2: no HandStarted; the first event is t0002-h2/2 (CardsDealt 9c>seat 3")


def test_a_missing_hand_ended_is_missing_end() -> None:
    lines = hand("t0002-h2")[:-1]
    err = rejected(lines)
    assert err.code == "MISSING_END"
    assert err.message == "t0002-h2: no HandEnded after t0002-h2/13 (BetAction seat 3 call 50); the hand has not ended"


def test_a_reordered_event_is_out_of_order() -> None:
    lines = hand("t0002-h2")
    lines[5], lines[6] = lines[6], lines[5]  # t0002-h2/7 before t0002-h2/6
    err = rejected(lines)
    assert err.code == "OUT_OF_ORDER"
    assert err.message == (
        "t0002-h2/7 (BetAction seat 2 check) comes where t0002-h2/6 belongs: events are out of order"
    )


def test_reordered_and_renumbered_actions_break_the_rules() -> None:
    lines = hand("t0002-h2")
    a, b = find(lines, "t0002-h2/6"), find(lines, "t0002-h2/7")
    a["bet_action"], b["bet_action"] = b["bet_action"], a["bet_action"]  # seat 2 acts before seat 3
    err = rejected(lines)
    assert err.code == "ILLEGAL_EVENT"
    assert err.message.startswith("t0002-h2/6: BetAction seat 2 check: NOT_YOUR_TURN")


def test_a_duplicated_event_is_a_seq_gap() -> None:
    lines = hand("t0002-h2")
    lines.insert(3, copy.deepcopy(lines[2]))
    err = rejected(lines)
    assert (err.code, err.message) == ("SEQ_GAP", "t0002-h2/3 appears twice")


def test_a_wrong_seed_does_not_match_the_commitment() -> None:
    lines = hand("t0001-h2")
    find(lines, "t0001-h2/12")["hand_ended"]["deck_seed"] = "00" * 32
    err = rejected(lines)
    assert err.code == "BAD_SEED"
    commitment = find(lines, "t0001-h2/1")["hand_started"]["deck_commitment"]
    assert err.message == (
        f"t0001-h2/12: the revealed seed 000000000000… hashes to {fairness.commitment(bytes(32))[:12]}…, "
        f"not the commitment {commitment[:12]}… of t0001-h2/1"
    )


def test_a_seed_that_is_not_hex_is_a_bad_seed() -> None:
    lines = hand("t0001-h2")
    find(lines, "t0001-h2/12")["hand_ended"]["deck_seed"] = "not a seed"
    err = rejected(lines)
    assert (err.code, err.message) == (
        "BAD_SEED",
        "t0001-h2/12: the revealed deck seed is not 64 hex digits: 'not a seed'",
    )


def test_a_commitment_changed_to_fit_another_seed_is_caught_by_the_cards() -> None:
    # The forger picks a seed, commits to it and keeps the dealt cards: the cards betray it.
    lines = hand("t0001-h2")
    forged = bytes(range(32))
    find(lines, "t0001-h2/1")["hand_started"]["deck_commitment"] = fairness.commitment(forged)
    find(lines, "t0001-h2/12")["hand_ended"]["deck_seed"] = forged.hex()
    err = rejected(lines)
    assert (err.code, err.message) == ("DEAL_MISMATCH", "t0001-h2/2: dealt 3s to seat 0, the seed deals 8s")


def test_a_forged_early_hand_ended_is_refused_by_the_rules() -> None:
    # Cut the hand after the flop and end it with the real seed (to void the all-ins).
    lines = [x for x in hand("t0001-h2") if int(x["seq"]) <= 7]
    end = copy.deepcopy(find(hand("t0001-h2"), "t0001-h2/12"))
    end.update(seq="8", event_id="t0001-h2/8")
    lines.append(end)
    err = rejected(lines)
    assert err.code == "ILLEGAL_EVENT"
    assert err.message.startswith("t0001-h2/8: HandEnded: HAND_NOT_OVER")


def test_a_second_hand_ended_is_a_duplicate_end() -> None:
    lines = hand("t0002-h1")
    extra = copy.deepcopy(lines[-1])
    extra.update(seq="5", event_id="t0002-h1/5")
    lines.append(extra)
    err = rejected(lines)
    assert (err.code, err.message) == ("DUPLICATE_END", "t0002-h1/5: a second HandEnded (the first is t0002-h1/4)")


def test_an_event_after_hand_ended_is_illegal() -> None:
    lines = hand("t0002-h1")
    extra = copy.deepcopy(find(lines, "t0002-h1/3"))
    extra.update(seq="5", event_id="t0002-h1/5")
    lines.append(extra)
    err = rejected(lines)
    assert (err.code, err.message) == (
        "ILLEGAL_EVENT",
        "t0002-h1/5: BetAction seat 2 fold after HandEnded (t0002-h1/4)",
    )


def test_changed_dice_are_a_dice_mismatch() -> None:
    lines = hand("t0003-h2")
    find(lines, "t0003-h2/21")["dice_rolled"]["dice"] = [4, 4, 4]
    err = rejected(lines)
    assert (err.code, err.message) == ("DICE_MISMATCH", "t0003-h2/21: rolled 4-4-4, the seed rolls 2-5-4")


def test_an_event_of_another_table_is_an_envelope_mismatch() -> None:
    lines = hand("t0002-h2")
    find(lines, "t0002-h2/9")["table_id"] = "t0009"
    err = rejected(lines)
    assert (err.code, err.message) == ("ENVELOPE_MISMATCH", "t0002-h2/9: table_id is 't0009', the hand's is 't0002'")


def test_a_hand_started_that_disagrees_with_its_envelope_is_an_envelope_mismatch() -> None:
    lines = hand("t0002-h2")
    find(lines, "t0002-h2/1")["hand_started"]["hand_id"] = "t0002-h9"
    err = rejected(lines)
    assert (err.code, err.message) == (
        "ENVELOPE_MISMATCH",
        "t0002-h2/1: HandStarted.hand_id is 't0002-h9', the envelope's is 't0002-h2'",
    )


def test_an_unknown_game_is_unknown_game() -> None:
    lines = hand("t0002-h1")
    for x in lines:
        x["game"] = "poker5"
    find(lines, "t0002-h1/1")["hand_started"]["game"] = "poker5"
    err = rejected(lines)
    assert err.code == "UNKNOWN_GAME"
    assert err.message.startswith("t0002-h1/1: unknown game 'poker5'")


def test_a_card_that_is_not_a_card_is_a_bad_event() -> None:
    lines = hand("t0002-h1")
    find(lines, "t0002-h1/2")["cards_dealt"]["cards"][0]["card"] = "Zz"
    err = rejected(lines)
    assert (err.code, err.message) == ("BAD_EVENT", "t0002-h1/2: not a card: 'Zz'")


def test_no_events_at_all_is_not_started() -> None:
    err = rejected([])
    assert err.code == "NOT_STARTED"


def test_replay_errors_map_to_failed_precondition_with_the_reason() -> None:
    from grpc import StatusCode

    from socai.infra.grpc_errors import rich_status, status_code_of

    lines = hand("t0001-h1")
    find(lines, "t0001-h1/2")["cards_dealt"]["cards"][2]["card"] = "Ks"
    err = rejected(lines)
    assert status_code_of(err) == StatusCode.FAILED_PRECONDITION
    assert rich_status(err).details  # carries ErrorInfo(reason="DEAL_MISMATCH")
    assert err.details == {"hand_id": "t0001-h1", "event_id": "t0001-h1/2"}
