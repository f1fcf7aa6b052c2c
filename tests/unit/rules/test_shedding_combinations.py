"""Combinations, beating, chops and legal plays of the shedding core (RULES.md §9.1–9.2, §4.1–4.2).

Each test names the rule it shows; where the games differ the two are side by side.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from socai.cards import deck, parse_card, parse_cards
from socai.rules.climbing import shedding
from socai.rules.climbing.shedding import SAMLOC, TIENLEN, Combination, SheddingRules


def tl(text: str) -> Combination:
    found = shedding.combo(parse_cards(text), TIENLEN)
    assert found is not None, text
    return found


def sl(text: str) -> Combination:
    found = shedding.combo(parse_cards(text), SAMLOC)
    assert found is not None, text
    return found


def tl_beats(play: str, over: str) -> bool:
    return shedding.beats(tl(play), tl(over), TIENLEN)


def sl_beats(play: str, over: str) -> bool:
    return shedding.beats(sl(play), sl(over), SAMLOC)


def plays(hand: str, over: Combination | None, rules: SheddingRules, **flags: object) -> list[str]:
    found = shedding.legal_plays(parse_cards(hand), over, rules, **flags)  # type: ignore[arg-type]
    return [" ".join(str(c) for c in p.cards) for p in found]


# --- kinds (TL-7, SL-2, SL-3, SL-4) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("cards", "kind"),
    [
        ("7h", "single"),
        ("7h 7s", "pair"),
        ("7h 7s 7d", "triple"),
        ("7h 7s 7d 7c", "four"),
        ("3s 4h 5d", "straight"),
        ("9s Th Jd Qc Ks Ah", "straight"),
        ("3s 3c 4s 4c 5s 5c", "pairs_run"),
        ("3s 3c 4s 4c 5s 5c 6s 6c 7s 7c", "pairs_run"),
    ],
)
def test_tienlen_kinds(cards: str, kind: str) -> None:
    assert tl(cards).kind == kind


@pytest.mark.parametrize(
    ("cards", "kind"),
    [
        ("7h", "single"),
        ("7h 7s", "pair"),
        ("7h 7s 7d", "triple"),
        ("7h 7s 7d 7c", "four"),
        ("3s 4h 5d", "straight"),
        ("As 2s 3d", "straight"),
        ("2s 3c 4d 5h", "straight"),
        ("3s 3c 3d 3h 4s 4c 4d 4h", "two_fours"),
    ],
)
def test_samloc_kinds(cards: str, kind: str) -> None:
    assert sl(cards).kind == kind


@pytest.mark.parametrize(
    "cards",
    [
        "",
        "7h 7h",  # the same card twice
        "7h 8h",  # two ranks, no kind
        "3s 4h 6d",  # a gap
        "3s 4h",  # a straight needs three cards
        "3s 3c 4s 4c",  # two pairs are no pairs run
        "3s 3c 3d 4s 4c 4d",  # two triples
        "3s 3c 3d 3h 4s 4c 4d 4h",  # two tứ quý: a Sâm Lốc play only (SL-4)
    ],
)
def test_tienlen_non_combinations(cards: str) -> None:
    assert shedding.combo(parse_cards(cards), TIENLEN) is None


def test_tienlen_straight_never_holds_a_two_and_the_ace_is_high_only() -> None:
    """TL-7: Q-K-A is a straight; K-A-2, A-2-3 and 2-3-4 are not."""
    assert tl("Qs Kh Ad").kind == "straight"
    for cards in ("Ks Ah 2d", "As 2h 3d", "2s 3h 4d"):
        assert shedding.combo(parse_cards(cards), TIENLEN) is None


def test_samloc_a23_and_2345_are_straights_but_k_a_2_wraps_around() -> None:
    """4.2 worked example and SL-3: A-2-3 and 2-3-4-5 are legal, no wrap-around."""
    assert sl("As 2h 3d").kind == "straight"
    assert sl("2s 3h 4d 5c").kind == "straight"
    assert sl("As 2h 3d 4c").kind == "straight"
    for cards in ("Ks Ah 2d", "Qs Ks Ah 2d", "As 3h 4d"):
        assert shedding.combo(parse_cards(cards), SAMLOC) is None


def test_pairs_runs_need_three_consecutive_pairs_without_a_two() -> None:
    """TL-7: đôi thông is ≥ 3 consecutive pairs, never with a 2; Sâm Lốc has none (SL-2)."""
    assert tl("Qs Qc Ks Kc As Ac").shape == "pairs_run3"
    assert tl("3s 3c 4s 4c 5s 5c 6s 6c").shape == "pairs_run4"
    assert shedding.combo(parse_cards("Ks Kc As Ac 2s 2c"), TIENLEN) is None
    assert shedding.combo(parse_cards("3s 3c 4s 4c 5s 5c"), SAMLOC) is None


def test_two_fours_are_a_samloc_play_only() -> None:
    """SL-4: two tứ quý played together (8 cards) are one play."""
    assert sl("5s 5c 5d 5h 9s 9c 9d 9h").kind == "two_fours"
    assert shedding.combo(parse_cards("5s 5c 5d 5h 9s 9c 9d 9h"), TIENLEN) is None


def test_sanh_rong_is_a_twelve_card_straight_and_no_thirteenth_two() -> None:
    """9.2 and TL-20: 3…A is a straight; with a 2 added it is no combination."""
    assert tl("3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As").kind == "straight"
    assert shedding.combo(parse_cards("3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks As 2h"), TIENLEN) is None


# --- rank and suit order (9.1, 4.1, 0.5) ----------------------------------------------------


def test_rank_order_is_three_lowest_and_two_highest_in_both_games() -> None:
    """9.1 example: 2 (heo) > A (xì) > K (già) > Q (đầm) > J (bồi) > 10 > 9 > … > 3; 4.1 alike."""
    ladder = ["3s", "4s", "5s", "6s", "7s", "8s", "9s", "Ts", "Js", "Qs", "Ks", "As", "2s"]
    for lower, higher in itertools.pairwise(ladder):
        assert tl_beats(higher, lower) and not tl_beats(lower, higher)
        assert sl_beats(higher, lower) and not sl_beats(lower, higher)


def test_tienlen_suits_break_ties_hearts_diamonds_clubs_spades() -> None:
    """9.1: "Bích là yếu nhất. Tiếp theo là Chuồn, Rô, Cơ": ♥ > ♦ > ♣ > ♠."""
    assert tl_beats("5h", "5d") and tl_beats("5d", "5c") and tl_beats("5c", "5s")
    assert tl_beats("2h", "2d")


def test_samloc_does_not_distinguish_suits() -> None:
    """4.1: "không phân biệt về chất": equal ranks never beat each other."""
    assert not sl_beats("5h", "5s") and not sl_beats("5s", "5h")
    assert not sl_beats("2h", "2s")
    assert not sl_beats("9h 9d", "9s 9c")
    assert not sl_beats("3h 4h 5h", "3s 4s 5s")


def test_tienlen_pairs_and_straights_compare_by_their_highest_card() -> None:
    """9.1: among groups of the same ranks, the highest card's suit decides."""
    assert tl_beats("9h 9s", "9d 9c")
    assert tl_beats("3s 4s 5h", "3h 4h 5d")
    assert tl_beats("3s 3c 4s 4c 5s 5h", "3d 3h 4d 4h 5c 5d")
    assert tl_beats("6s 7s 8s", "5h 6h 7h")


def test_the_same_kind_and_size_must_follow() -> None:
    """9.1, SL-2: a pair is not beaten by a single or a triple, nor a 3-card straight by a 4-card one."""
    assert not tl_beats("As", "3s 3c")
    assert not tl_beats("4s 4c 4d", "3s 3c")
    assert not tl_beats("4s 5s 6s 7s", "3h 4h 5h")
    assert not sl_beats("4s 5s 6s 7s", "3h 4h 5h")


def test_samloc_a_straight_of_three_is_beaten_only_by_a_higher_straight_of_three() -> None:
    """4.2 worked example: 3-4-5 can be beaten only by 4-5-6 or a higher 3-card straight."""
    assert sl_beats("4s 5s 6s", "3h 4h 5h")
    assert sl_beats("Qs Ks As", "3h 4h 5h")
    assert not sl_beats("As 2s 3s", "3h 4h 5h")
    assert not sl_beats("2s 3s 4s", "3h 4h 5h")
    assert not sl_beats("4s 5s 6s 7s", "3h 4h 5h")


def test_samloc_low_straights_rank_a23_below_234_below_345() -> None:
    """SL-3: A-2-3 < 2-3-4 < 3-4-5 < … < Q-K-A; A and 2 count low inside low straights."""
    ladder = ["As 2s 3s", "2h 3h 4h", "3d 4d 5d", "Jc Qc Kc", "Qs Ks Ah"]
    for lower, higher in itertools.pairwise(ladder):
        assert sl_beats(higher, lower) and not sl_beats(lower, higher)
    assert sl_beats("2s 3s 4s 5s", "As 2h 3h 4h")


# --- chops, Tiến Lên (9.2 table, TL-17, TL-19) ----------------------------------------------


def test_four_of_a_kind_cuts_a_single_two() -> None:
    """9.2 and 4.2 case 1: "3s 3c 3d 3h" cuts "2h" in both games."""
    assert tl_beats("3s 3c 3d 3h", "2h")
    assert sl_beats("3s 3c 3d 3h", "2h")
    assert shedding.is_chop(tl("3s 3c 3d 3h"), tl("2h"), TIENLEN)
    assert shedding.is_chop(sl("3s 3c 3d 3h"), sl("2h"), SAMLOC)


def test_ba_doi_thong_chops_a_single_two() -> None:
    assert tl_beats("3s 3c 4s 4c 5s 5c", "2h")


def test_ba_doi_thong_chops_a_smaller_ba_doi_thong() -> None:
    assert tl_beats("4s 4c 5s 5c 6s 6c", "3s 3c 4d 4h 5d 5h")
    assert shedding.is_chop(tl("4s 4c 5s 5c 6s 6c"), tl("3s 3c 4d 4h 5d 5h"), TIENLEN)
    assert not tl_beats("3s 3c 4d 4h 5d 5h", "4s 4c 5s 5c 6s 6c")


def test_ba_doi_thong_chops_neither_a_pair_of_twos_nor_a_four() -> None:
    """TL-17: only what the table lists."""
    assert not tl_beats("3s 3c 4s 4c 5s 5c", "2s 2h")
    assert not tl_beats("Qs Qc Ks Kc As Ac", "3s 3c 3d 3h")


def test_four_of_a_kind_chops_a_pair_of_twos_in_tienlen_only() -> None:
    """9.2: tứ quý chops đôi 2. Sâm Lốc SL-20: one tứ quý chops only a single 2."""
    assert tl_beats("3s 3c 3d 3h", "2s 2h")
    assert not sl_beats("3s 3c 3d 3h", "2s 2h")


def test_four_of_a_kind_chops_ba_doi_thong() -> None:
    assert tl_beats("3s 3c 3d 3h", "Qs Qc Ks Kc As Ac")


def test_a_higher_four_of_a_kind_chops_a_lower_one() -> None:
    """9.2 and 4.2 case 3."""
    assert tl_beats("4s 4c 4d 4h", "3s 3c 3d 3h")
    assert sl_beats("4s 4c 4d 4h", "3s 3c 3d 3h")
    assert not tl_beats("3s 3c 3d 3h", "4s 4c 4d 4h")


def test_bon_doi_thong_chops_a_two_a_pair_of_twos_ba_doi_thong_a_four_and_a_smaller_bon_doi_thong() -> None:
    run4 = "3s 3c 4s 4c 5s 5c 6s 6c"
    assert tl_beats(run4, "2h")
    assert tl_beats(run4, "2d 2h")
    assert tl_beats(run4, "Qs Qc Ks Kc As Ac")
    assert tl_beats(run4, "As Ac Ad Ah")
    assert tl_beats("4d 4h 5d 5h 6d 6h 7s 7c", run4)
    assert not tl_beats(run4, "4d 4h 5d 5h 6d 6h 7s 7c")


def test_nothing_chops_three_twos() -> None:
    """TL-17 and SL-20: the chop tables are closed; three 2s are beaten by nothing."""
    for chopper in ("3s 3c 3d 3h", "3s 3c 4s 4c 5s 5c 6s 6c"):
        assert not tl_beats(chopper, "2s 2c 2h")
    assert not sl_beats("3s 3c 3d 3h", "2s 2c 2h")
    assert not sl_beats("3s 3c 3d 3h 4s 4c 4d 4h", "2s 2c 2h")


def test_chops_cut_only_twos_and_chop_groups() -> None:
    """TL-17: a tứ quý played on an ordinary single or pair is not a chop and not legal."""
    assert not tl_beats("3s 3c 3d 3h", "As")
    assert not tl_beats("3s 3c 3d 3h", "Ks Kh")
    assert not tl_beats("3s 3c 4s 4c 5s 5c", "As")
    assert not sl_beats("3s 3c 3d 3h", "As")


def test_a_two_on_a_two_is_no_chop() -> None:
    assert tl_beats("2h", "2s")
    assert not shedding.is_chop(tl("2h"), tl("2s"), TIENLEN)


def test_five_pairs_run_follows_only_its_own_length_and_chops_nothing() -> None:
    """TL-19: five or more consecutive pairs beat only an equal run with a higher top pair."""
    run5 = "3s 3c 4s 4c 5s 5c 6s 6c 7s 7c"
    assert tl_beats("4d 4h 5d 5h 6d 6h 7d 7h 8s 8c", run5)
    for victim in ("2h", "2s 2h", "Qs Qc Ks Kc As Ac", "As Ac Ad Ah", "Ts Tc Js Jc Qs Qc Ks Kc"):
        assert not tl_beats(run5, victim)


# --- chops, Sâm Lốc (4.2, SL-4, SL-20) ------------------------------------------------------


def test_two_fours_chop_a_pair_of_twos() -> None:
    """4.2 case 2 and SL-4: "2 tứ quý" chop đôi heo."""
    assert sl_beats("3s 3c 3d 3h 4s 4c 4d 4h", "2s 2h")
    assert shedding.is_chop(sl("3s 3c 3d 3h 4s 4c 4d 4h"), sl("2s 2h"), SAMLOC)


def test_two_fours_chop_only_a_pair_of_twos() -> None:
    """SL-20: shapes must match: two tứ quý do not chop a single 2 or one tứ quý."""
    assert not sl_beats("3s 3c 3d 3h 4s 4c 4d 4h", "2h")
    assert not sl_beats("3s 3c 3d 3h 4s 4c 4d 4h", "Ks Kc Kd Kh")


def test_higher_two_fours_beat_lower_two_fours() -> None:
    assert sl_beats("3s 3c 3d 3h 5s 5c 5d 5h", "3s 3c 3d 3h 4s 4c 4d 4h")
    assert sl_beats("Ks Kc Kd Kh As Ac Ad Ah", "Qs Qc Qd Qh 5s 5c 5d 5h")


def test_the_differences_side_by_side() -> None:
    """The same cards, two games: what each allows differs only by its data."""
    assert tl_beats("5h", "5s") is True and sl_beats("5h", "5s") is False
    assert shedding.combo(parse_cards("As 2s 3d"), TIENLEN) is None
    assert shedding.combo(parse_cards("As 2s 3d"), SAMLOC) is not None
    assert shedding.combo(parse_cards("3s 3c 4s 4c 5s 5c"), TIENLEN) is not None
    assert shedding.combo(parse_cards("3s 3c 4s 4c 5s 5c"), SAMLOC) is None
    assert tl_beats("9s 9c 9d 9h", "2s 2c") is True and sl_beats("9s 9c 9d 9h", "2s 2c") is False


def test_combinations_of_another_game_are_refused() -> None:
    with pytest.raises(AssertionError):
        shedding.beats(tl("5h"), sl("5s"), SAMLOC)


# --- legal plays ----------------------------------------------------------------------------


def test_leading_lists_every_combination_in_a_fixed_order() -> None:
    """Singles, pairs, triples, straights, pairs runs, fours; weakest first within each."""
    assert plays("3s 3c 4d 5h", None, TIENLEN) == [
        "3s",
        "3c",
        "4d",
        "5h",
        "3s 3c",
        "3s 4d 5h",
        "3c 4d 5h",
    ]


def test_the_plays_on_a_single_two_are_the_higher_twos_and_the_chops() -> None:
    hand = "2h 3s 3c 4s 4c 5s 5c 9s 9c 9d 9h Ks"
    assert plays(hand, tl("2d"), TIENLEN) == ["2h", "3s 3c 4s 4c 5s 5c", "9s 9c 9d 9h"]
    assert plays("2h 9s 9c 9d 9h Ks", sl("2d"), SAMLOC) == ["9s 9c 9d 9h"]


def test_the_plays_on_a_pair_of_twos() -> None:
    hand = "2h 2d 3s 3c 3d 3h 4s 4c 4d 4h"
    assert plays(hand, tl("2s 2c"), TIENLEN) == ["2d 2h", "3s 3c 3d 3h", "4s 4c 4d 4h"]
    assert plays(hand, sl("2s 2c"), SAMLOC) == ["3s 3c 3d 3h 4s 4c 4d 4h"]


def test_samloc_no_two_in_the_play_that_empties_the_hand() -> None:
    """SL-7 (b): going out on a 2 is refused; a hand of 2s only has no play and must pass."""
    assert plays("2h", None, SAMLOC) == []
    assert plays("2s 2h", None, SAMLOC) == ["2s", "2h"]
    assert plays("As 2h 3s", None, SAMLOC) == ["3s", "As", "2h"]  # not A-2-3, holding a 2
    assert plays("As 2h 3s 9d", None, SAMLOC)[-1] == "As 2h 3s"
    assert plays("2h", None, TIENLEN) == ["2h"]


def test_samloc_bao_1_allows_only_the_highest_single() -> None:
    """SL-11: before a player holding one card, a single must be the highest rank held."""
    hand = "5s 9h Kd Kc"
    assert plays(hand, None, SAMLOC, highest_single_only=True) == ["Kc", "Kd", "Kc Kd"]
    assert plays(hand, sl("7s"), SAMLOC, highest_single_only=True) == ["Kc", "Kd"]


def test_a_first_lead_may_be_required_to_hold_the_three_of_spades() -> None:
    """TL-12 flag (off by default): the first lead must include 3♠."""
    hand = "3s 3c 4d 5h"
    found = plays(hand, None, TIENLEN, must_include=parse_card("3s"))
    assert found == ["3s", "3s 3c", "3s 4d 5h"]


def test_has_answer_says_whether_a_pass_held_a_beating_play() -> None:
    """SL-10: a player who passes while holding a play that beats the declarer is marked."""
    assert shedding.has_answer(parse_cards("5s 9h"), sl("8d"), SAMLOC)
    assert not shedding.has_answer(parse_cards("5s 8h"), sl("8d"), SAMLOC)


def test_the_three_of_spades_leads_else_the_lowest_card() -> None:
    """9.1 and TL-1: 3♠ leads the first hand; if it was not dealt, 3♣, 3♦, 3♥, then 4♠ …"""
    hands = [parse_cards("4s 9h"), parse_cards("3s Kd"), parse_cards("3c 2h")]
    assert shedding.lowest_card_holder(hands, TIENLEN) == 1
    assert shedding.lowest_card_holder([parse_cards("4s"), parse_cards("3h"), parse_cards("3d")], TIENLEN) == 2
    assert shedding.lowest_card_holder([parse_cards("5s"), parse_cards("4c"), parse_cards("4s")], TIENLEN) == 2


def test_rules_are_data_a_variant_is_a_replace() -> None:
    """A game variant is a field change, not new code: Sâm Lốc without low straights."""
    variant = dataclasses.replace(SAMLOC, low_straights=False)
    assert shedding.combo(parse_cards("As 2s 3d"), variant) is None


def test_a_remembered_combination_is_the_definitions_on_random_plays() -> None:
    rng = random.Random(3)
    cards = deck("tienlen")
    made = 0
    for _ in range(4_000):
        hand = tuple(rng.sample(list(cards), rng.randint(1, 8)))
        # Narrow plays too: pairs, runs and fours are rare among random cards.
        low = rng.randrange(3, 12)
        run = tuple(c for c in cards if low <= c.rank < low + rng.randint(2, 4))
        for play in (hand, run[: rng.randint(1, len(run))], run):
            for rules in (TIENLEN, SAMLOC, dataclasses.replace(TIENLEN, pairs_runs=False)):
                first = shedding.combo(play, rules)
                assert first == shedding.combo_uncached(play, rules), (play, rules.game_id)
                assert shedding.combo(play, rules) == first  # remembered or not, the same
                made += first is not None
    assert made > 1_000


def test_the_remembered_answer_follows_the_rules_fields_it_depends_on() -> None:
    pairs_run = parse_cards("3s 3d 4s 4h 5c 5d")
    assert shedding.combo(pairs_run, TIENLEN) is not None  # remembered under TIENLEN's fields
    assert shedding.combo(pairs_run, dataclasses.replace(TIENLEN, pairs_runs=False)) is None
    straight = parse_cards("As 2d 3c")
    assert shedding.combo(straight, SAMLOC) is not None
    assert shedding.combo(straight, dataclasses.replace(SAMLOC, low_straights=False)) is None
    assert shedding.combo(straight, TIENLEN) is None
