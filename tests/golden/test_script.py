"""The scripted and engine batches' machinery (tests/golden/script.py, targets.py): what
they hunt, how their bots find a line, the closing hand written, the decks an engine target
chooses, and that the corpus holds every goal."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime

import pytest

from socai import accounts, cards
from socai.cards import parse_cards
from socai.events.model import CardsDealt, DealtCard, Event, HandEnded, HandStarted, SeatInfo
from socai.rules import registry
from socai.rules.chinese_poker import maubinh_hands
from socai.rules.climbing import shedding
from socai.settle import replay
from tests.golden import corpus, script, targets
from tests.support.synthetic import play_table

AT = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_two_chopped_by_ba_doi_thong_then_by_a_tu_quy_is_a_chop_chain_plan() -> None:
    hands = {
        0: parse_cards("2h 7s 7c 7d 7h 9s Jc"),
        1: parse_cards("3s 3c 4s 4c 5s 5c Kd"),
    }
    plan = targets.chop_plan(hands, targets.TL_CHAINS["chat_de"])
    assert plan is not None
    assert [(seat, play.shape, " ".join(map(str, play.cards))) for seat, play in plan] == [
        (0, "two", "2h"),
        (1, "pairs_run3", "3s 3c 4s 4c 5s 5c"),
        (0, "four", "7s 7c 7d 7h"),
    ]


def test_no_chop_chain_plan_without_a_chopper() -> None:
    hands = {0: parse_cards("2h 9s Jc"), 1: parse_cards("3s 3c 4s 4c 6s 6c Kd")}
    assert targets.chop_plan(hands, targets.TL_CHAINS["chat_de"]) is None


def test_a_sure_sam_takes_the_hand_out_and_no_other_hand_answers_a_play_but_the_last() -> None:
    declarer = parse_cards("As Ac Ad 5s 6c 7d 8h 9s Tc Jd")
    other = parse_cards("3s 3c 4d 4h 6s 6h 8s 8c Qh Kh")
    line = targets.sam_line({0: declarer, 1: other}, 0)
    assert line is not None
    assert Counter(c for play in line for c in play.cards) == Counter(declarer)
    assert not any(shedding.has_answer(other, play, shedding.SAMLOC) for play in line[:-1])


def test_no_sure_sam_when_every_play_but_one_has_an_answer() -> None:
    declarer = parse_cards("3s 4c 5d 6h 7s 9c 9d Jh Qs Kc")
    other = parse_cards("4s 5c 6d 7h 8s Ah Ad 2h 3h 3d")
    assert targets.sam_line({0: declarer, 1: other}, 0) is None


def test_a_special_hand_goal_names_the_special_the_transfer_paid() -> None:
    dragon = parse_cards("2s 3c 4d 5h 6s 7c 8d 9h Ts Jc Qd Kh As")
    plain = parse_cards("2c 2d 3s 3h 4s 5s 6c 7d 8h 9s Tc Jd Qh")
    started = HandStarted("t", "t-h1", "maubinh", 1, 100, 0, 2, (SeatInfo(0, "a", 1000), SeatInfo(1, "b", 1000)), 0, "")
    dealt = CardsDealt(
        tuple(DealtCard(s, c, False) for a, b in zip(dragon, plain, strict=True) for s, c in ((0, a), (1, b)))
    )
    events = [Event("t", "t-h1", i, "maubinh", AT, body) for i, body in enumerate((started, dealt), start=1)]
    paid = [(accounts.escrow("t", "b"), accounts.escrow("t", "a"), 3000, "special_hand", "")]
    assert targets.hand_goals("maubinh", events, paid) == {"special_hand", "special_hand:dragon"}
    unpaid = [(accounts.escrow("t", "a"), accounts.escrow("t", "b"), 300, "chi_back", "")]
    assert targets.hand_goals("maubinh", events, unpaid) == {"chi_back"}


def test_a_closed_table_that_carries_a_ga_returns_it_in_a_closing_hand() -> None:
    setup = targets.setup("bacay_ga", 3)
    for seed in range(20):
        table = play_table("c1", "bacay_ga", 1, random.Random(seed), [AT], targets.steady_bot, setup=setup, close=True)
        if len(table.hands) == 2:
            break
    else:
        raise AssertionError("no table of 20 carried a Gà after its hand")
    carried = table.hands[0].settlement.pot_carry_gold
    closing = table.hands[1]
    assert carried > 0
    assert [type(e.body) for e in closing.events] == [HandStarted, HandEnded]
    started = closing.events[0].body
    assert isinstance(started, HandStarted) and started.closing and started.pot_gold == carried
    assert {t.reason for t in closing.settlement.transfers} == {"ga_pot_returned"}
    assert sum(t.amount_gold for t in closing.settlement.transfers) == carried
    assert closing.settlement.pot_carry_gold == 0
    assert replay.replay(closing.events).settlement == closing.settlement  # settlement's replay agrees


def test_a_led_two_tu_quy_chopped_by_a_higher_two_tu_quy_is_a_chop_chain_plan() -> None:
    hands = {
        0: parse_cards("3s 3c 3d 3h 4s 4c 4d 4h 9s Jc"),
        1: parse_cards("Ks Kc Kd Kh As Ac Ad Ah 6d 8h"),
    }
    plan = targets.chop_plan(hands, targets.SL_TWO_FOURS_CHAIN)
    assert plan is not None
    assert [(seat, play.kind, " ".join(map(str, play.cards))) for seat, play in plan] == [
        (0, shedding.TWO_FOURS, "3s 3c 3d 3h 4s 4c 4d 4h"),
        (1, shedding.TWO_FOURS, "Ks Kc Kd Kh As Ac Ad Ah"),
    ]


def test_a_deck_built_for_some_hands_deals_them_round_the_table() -> None:
    hands = [tuple(cards.deck("samloc")[i * 10 : (i + 1) * 10]) for i in range(5)]
    rest = cards.deck("samloc")[50:]
    deck = targets.dealing_deck("samloc", hands, rest)
    assert sorted(deck, key=cards.ALL_CARDS.index) == cards.deck("samloc")
    assert targets.dealt_hands("samloc", deck, 5) == hands
    assert deck[50:] == rest


def test_the_engine_targets_are_the_goals_no_seed_search_reaches() -> None:
    reached = {f"{t.game}:{t.reason}" for ts in targets.ENGINE_TARGETS.values() for t in ts}
    assert reached == set(targets.ENGINE_ONLY)
    assert all(t.deck_for is not None and t.seed_for is None for ts in targets.ENGINE_TARGETS.values() for t in ts)
    wanted = {f"{g}:{goal}" for g in registry.available() for goal in targets.wanted_goals(g)}
    assert set(targets.ENGINE_ONLY) <= wanted  # the corpus is asked for them


ENGINE = [t for ts in targets.ENGINE_TARGETS.values() for t in ts]


@pytest.mark.parametrize("target", ENGINE, ids=[f"{t.game}:{t.reason}" for t in ENGINE])
def test_an_engine_targets_first_hand_deals_its_goal_from_the_games_whole_deck(target: targets.Target) -> None:
    assert target.deck_for is not None and target.setup is not None
    for seed in range(3):
        deck_for = target.deck_for(random.Random(seed))
        deck = deck_for(1)
        assert deck is not None
        assert sorted(deck, key=cards.ALL_CARDS.index) == cards.deck(target.game)
        assert deck_for(2) is None  # later hands deal their seed's shuffle
        hands = targets.dealt_hands(target.game, deck, target.setup.seats_max)
        if target.game == "maubinh":
            kind = target.reason.split(":", 1)[1]
            specials = [maubinh_hands.special_hand(h) for h in hands]
            assert specials.count(kind) == 1 and specials.count(None) == len(hands) - 1
        else:
            assert shedding.instant_winner(hands, shedding.SAMLOC) is None
            plan = targets.chop_plan(dict(enumerate(hands)), targets.SL_TWO_FOURS_CHAIN)
            assert plan is not None and [p.kind for _, p in plan] == [shedding.TWO_FOURS] * 2


def test_a_hand_from_a_chosen_deck_fails_settlements_replay_but_settles_through_the_engine() -> None:
    target = next(t for t in ENGINE if t.game == "samloc")
    assert target.deck_for is not None
    table = play_table(
        "e1",
        "samloc",
        1,
        random.Random(1),
        [AT],
        target.bot,
        setup=target.setup,
        deck_for=target.deck_for(random.Random(1)),
    )
    hand = table.hands[0]
    with pytest.raises(replay.ReplayError) as err:
        replay.replay(hand.events)
    assert err.value.code == replay.DEAL_MISMATCH  # what the auditor would say of it
    assert not script.dealt_by_seed(hand.events)
    result = corpus.engine_replay(hand.events)
    assert result.settlement == hand.settlement
    assert "chat_hai_tu_quy" in {t.reason for t in result.settlement.transfers}


def test_a_chosen_deck_cannot_be_logged_by_position() -> None:
    target = ENGINE[0]
    assert target.deck_for is not None
    with pytest.raises(ValueError, match="by position"):
        play_table(
            "e1",
            target.game,
            1,
            random.Random(1),
            [AT],
            target.bot,
            setup=target.setup,
            deck_for=target.deck_for(random.Random(1)),
            face_down_by_position=True,
        )


def test_every_goal_is_recorded() -> None:
    missing = script.missing_goals()
    assert not missing, (
        "goals no recorded hand reaches (python -m tests.golden script --seed N, "
        f"and --engine for targets.ENGINE_ONLY): {missing}"
    )


def test_all_thirteen_special_hands_of_mau_binh_are_recorded() -> None:
    specials = {targets.special_goal(k) for k in maubinh_hands.SPECIAL_HANDS}
    assert len(specials) == 13
    assert targets.wanted_goals("maubinh") >= specials
    assert "maubinh" not in script.missing_goals()
