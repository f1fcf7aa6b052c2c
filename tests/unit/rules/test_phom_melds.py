"""Phỏm / Tá Lả card logic and payments (RULES.md §6, PH-*), with the cards written out."""

from __future__ import annotations

import pytest

from socai.cards import Card, parse_card, parse_cards
from socai.errors import RuleViolation
from socai.rules.rummy.phom_melds import (
    REASONS,
    Arrangement,
    Discard,
    LayDown,
    Payment,
    PlayerResult,
    Send,
    UWin,
    best_arrangement,
    best_lay_down,
    can_discard,
    can_send,
    can_take,
    card_points,
    den_liable,
    disconnect_payments,
    find_u,
    hand_payments,
    has_meld,
    is_meld,
    is_u_khan,
    iter_arrangements,
    junk_points,
    meld_left_to_lay,
    placement_payments,
    rank_players,
    sends,
    take_payments,
    u_khan_payments,
    u_payments,
)


def cards(text: str) -> list[Card]:
    return parse_cards(text)


def card(text: str) -> Card:
    return parse_card(text)


def melds_of(*texts: str) -> tuple[tuple[Card, ...], ...]:
    return tuple(tuple(cards(t)) for t in texts)


# --- melds (§6.2, PH-10) -----------------------------------------------------------------


@pytest.mark.parametrize(
    "meld",
    [
        "7s 7c 7d",  # three of a rank
        "7s 7c 7d 7h",  # four of a rank
        "3h 4h 5h",  # three in a row of one suit
        "3h 4h 5h 6h 7h 8h 9h",  # any length from 3
        "Ah 2h 3h",  # A is low (PH-10)
        "Js Qs Ks",  # K is the top
        "5d 3d 4d",  # order given does not matter
    ],
)
def test_a_meld_is_three_or_four_of_a_rank_or_three_or_more_in_a_row_of_a_suit(meld: str) -> None:
    assert is_meld(cards(meld))


@pytest.mark.parametrize(
    "not_meld",
    [
        "7s 7c",  # two of a rank
        "3h 4h",  # two in a row
        "Qh Kh Ah",  # A is not high (PH-10)
        "Kh Ah 2h",  # no wrap-around (PH-10)
        "3h 4d 5h",  # a run is one suit
        "3h 4h 6h",  # a gap
        "3h 3h 3h",  # one card three times
        "7s 7c 7d 8d",  # a set and a card
        "",
    ],
)
def test_these_cards_are_not_a_meld(not_meld: str) -> None:
    assert not is_meld(cards(not_meld))


def test_has_meld_finds_a_meld_hidden_in_a_hand() -> None:
    assert has_meld(cards("2c 9h 4d 7s Ad 3d Kc 2d"))  # A♦ 2♦ 3♦ 4♦
    assert not has_meld(cards("2c 9h 4d 7s Ad Kc Qc Jd"))


# --- points (PH-2) -------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "points"), [("As", 1), ("2h", 2), ("10d", 10), ("Jc", 11), ("Qs", 12), ("Kh", 13)])
def test_card_points_are_a_one_face_value_then_jack_11_queen_12_king_13(text: str, points: int) -> None:
    assert card_points(card(text)) == points


def test_junk_points_add_up() -> None:
    assert junk_points(cards("As 5d Kh")) == 19


# --- the best arrangement ------------------------------------------------------------------


def test_a_card_shared_by_a_run_and_a_set_goes_where_the_junk_scores_less() -> None:
    # Run 5♥ 6♥ 7♥ leaves 7♣ 7♦ (14); set 7♥ 7♣ 7♦ leaves 5♥ 6♥ (11).
    assert best_arrangement(cards("5h 6h 7h 7d 7c")) == Arrangement(melds_of("7c 7d 7h"), tuple(cards("5h 6h")))


def test_four_of_a_rank_gives_one_card_to_a_run_when_that_melds_more() -> None:
    arrangement = best_arrangement(cards("5s 5c 5d 5h 6h 7h"))
    assert arrangement == Arrangement(melds_of("5s 5c 5d", "5h 6h 7h"), ())


def test_a_long_run_is_laid_whole_not_split() -> None:
    arrangement = best_arrangement(cards("3h 4h 5h 6h 7h 8h 2c 9d"))
    assert arrangement == Arrangement(melds_of("3h 4h 5h 6h 7h 8h"), tuple(cards("2c 9d")))


def test_a_ten_card_hand_with_three_melds_and_a_junk_king() -> None:
    arrangement = best_arrangement(cards("Kd 2h 5s Ah 5d 3h Td 5c Jd Qd"))
    assert arrangement == Arrangement(melds_of("Ah 2h 3h", "5s 5c 5d", "Td Jd Qd Kd"), ())
    arrangement = best_arrangement(cards("Kc 2h 5s Ah 5d 3h Td 5c Jd Qd"))
    assert arrangement == Arrangement(melds_of("Ah 2h 3h", "5s 5c 5d", "Td Jd Qd"), tuple(cards("Kc")))
    assert arrangement.junk_points == 13


def test_equal_junk_points_are_decided_card_by_card_from_the_lowest() -> None:
    # Run 4♥ 5♥ 6♥ leaves A♥ 5♠ 5♣ (11); set 5♠ 5♣ 5♥ leaves A♥ 4♥ 6♥ (11). Both leave
    # three cards in one meld: A♥ is junk in both, and the next card, 4♥, is melded by
    # the run and not by the set, so the run wins.
    arrangement = best_arrangement(cards("Ah 4h 5h 6h 5s 5c"))
    assert arrangement == Arrangement(melds_of("4h 5h 6h"), tuple(cards("Ah 5s 5c")))


def test_the_arrangement_does_not_depend_on_the_order_the_cards_are_given() -> None:
    hand = cards("Ah 4h 5h 6h 5s 5c 9c Tc Jc Kd")
    assert best_arrangement(hand) == best_arrangement(list(reversed(hand)))


def test_a_taken_card_must_be_in_a_meld_even_if_the_junk_scores_more() -> None:
    hand = cards("5h 6h 7h 7d 7c")
    # 5♥ was taken: only the run holds it, and 7♣ 7♦ are junk (14 rather than 11).
    assert best_arrangement(hand, cards("5h")) == Arrangement(melds_of("5h 6h 7h"), tuple(cards("7c 7d")))
    assert best_arrangement(hand, cards("7d")) == Arrangement(melds_of("7c 7d 7h"), tuple(cards("5h 6h")))
    assert best_arrangement(hand, cards("5h 7d")) is None  # both cannot be melded at once


def test_at_most_one_taken_card_per_meld_splits_a_run_under_the_ph13_flag() -> None:
    hand = cards("5h 6h 7h 8h 9h Th")
    taken = cards("6h 9h")
    assert best_arrangement(hand, taken) == Arrangement(melds_of("5h 6h 7h 8h 9h Th"), ())
    flagged = best_arrangement(hand, taken, one_taken_per_meld=True)
    assert flagged == Arrangement(melds_of("5h 6h 7h", "8h 9h Th"), ())
    assert best_arrangement(cards("7h 7d 7c"), cards("7h 7d"), one_taken_per_meld=True) is None


@pytest.mark.parametrize(
    ("hand", "taken"),
    [("5h 5h 6h", ""), ("5h 6h 7h", "8h"), ("2s 3s 4s 5s 6s 7s 8s 9s Ts Js Qs Ks 2h 3h 4h 5h 6h", "")],
)
def test_a_hand_with_a_repeated_card_a_foreign_taken_card_or_too_many_cards_is_refused(hand: str, taken: str) -> None:
    with pytest.raises(RuleViolation) as raised:
        best_arrangement(cards(hand), cards(taken))
    assert raised.value.code == "BAD_HAND"


def test_every_arrangement_is_listed_once_and_the_best_comes_first_among_the_cheapest() -> None:
    hand = cards("5h 6h 7h 7d 7c")
    listed = list(iter_arrangements(hand))
    assert len(listed) == len(set(listed)) == 3  # all junk, the run, the set
    cheapest = min(a.junk_points for a in listed)
    assert next(a for a in listed if a.junk_points == cheapest) == best_arrangement(hand)


def test_a_run_of_ten_has_114_arrangements() -> None:
    # The most found for any 10-card hand: the bound LAY_DOWN_CARDS_MAX rests on.
    assert sum(1 for _ in iter_arrangements(cards("As 2s 3s 4s 5s 6s 7s 8s 9s Ts"))) == 114


# --- taking (ăn, §6.1, PH-9, PH-13) ----------------------------------------------------------


def test_a_discard_may_be_taken_when_it_makes_a_meld_with_the_takers_cards() -> None:
    assert can_take(cards("5h 6h 2c Kd"), card("7h"))  # 5♥ 6♥ 7♥
    assert can_take(cards("7c 7d 2c Kd"), card("7h"))  # 7♣ 7♦ 7♥
    assert can_take(cards("5h 7h 2c Kd"), card("6h"))  # in the middle
    assert can_take(cards("2h 3h 9s"), card("Ah"))  # A-2-3 (PH-10)


def test_a_discard_that_makes_no_meld_must_not_be_taken_the_player_draws_instead() -> None:
    assert not can_take(cards("5h 9h 2c Kd"), card("7h"))
    assert not can_take(cards("7c 8d 2c Kd"), card("7h"))
    assert not can_take(cards("Qh Kh 9s"), card("Ah"))  # Q-K-A is no run (PH-10)


def test_a_take_must_leave_the_cards_taken_before_in_melds() -> None:
    # 7♥ was taken with 5♥ 6♥. Taking 5♦ for 5♣ 5♦ 5♥ would strand 7♥.
    assert not can_take(cards("5h 6h 7h 5c 9s"), card("5d"), cards("7h"))
    # With 5♠ too, 5♠ 5♣ 5♦ is a meld of its own.
    assert can_take(cards("5h 6h 7h 5c 5s"), card("5d"), cards("7h"))
    # Without the earlier take, 5♦ could be taken.
    assert can_take(cards("5h 6h 7h 5c 9s"), card("5d"))


def test_a_taken_card_may_share_a_meld_with_an_earlier_one_unless_the_ph13_flag_is_on() -> None:
    assert can_take(cards("5h 6h 7h 2c"), card("8h"), cards("7h"))
    assert not can_take(cards("5h 6h 7h 2c"), card("8h"), cards("7h"), one_taken_per_meld=True)


def test_taking_a_card_already_held_is_refused() -> None:
    with pytest.raises(RuleViolation) as raised:
        can_take(cards("5h 6h 7h"), card("7h"))
    assert raised.value.code == "BAD_HAND"


def test_a_taken_card_cannot_be_discarded_nor_a_card_it_needs() -> None:
    hand, taken = cards("5h 6h 7h 2c"), cards("7h")
    assert not can_discard(hand, card("7h"), taken)  # PH-13
    assert not can_discard(hand, card("5h"), taken)  # 7♥ would be left without a meld
    assert can_discard(hand, card("2c"), taken)
    with pytest.raises(RuleViolation):
        can_discard(hand, card("Kd"), taken)


# --- sending (gửi) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("junk", "meld", "fits"),
    [
        ("Th", "7h 8h 9h", True),  # the top end
        ("6h", "7h 8h 9h", True),  # the bottom end
        ("Jh", "7h 8h 9h", False),  # a gap
        ("Td", "7h 8h 9h", False),  # another suit
        ("7c", "7s 7d 7h", True),  # the fourth of a set
        ("8c", "7s 7d 7h", False),
        ("4h", "Ah 2h 3h", True),
        ("Ah", "Jh Qh Kh", False),  # A is not above K (PH-10)
    ],
)
def test_a_junk_card_can_be_sent_to_a_meld_it_extends(junk: str, meld: str, fits: bool) -> None:
    assert can_send(card(junk), cards(meld)) is fits


def test_nothing_can_be_sent_to_four_of_a_rank() -> None:
    assert not any(can_send(c, cards("7s 7c 7d 7h")) for c in cards("6h 8h 7h"))


def test_sending_one_card_lets_the_next_one_fit() -> None:
    laid = [cards("7h 8h 9h"), cards("Ks Kd Kh")]
    assert sends(cards("Jh 2c Th Kc"), laid) == (Send(card("Th"), 0), Send(card("Jh"), 0), Send(card("Kc"), 1))


def test_lay_down_keeps_junk_that_can_be_sent_rather_than_the_lowest_junk() -> None:
    hand = cards("9h Th Jh Js Jd 2c 3d")
    # Alone, the set J♠ J♦ J♥ leaves 9♥ 10♥ 2♣ 3♦ (24) rather than J♠ J♦ 2♣ 3♦ (27).
    assert best_arrangement(hand) == Arrangement(melds_of("Js Jd Jh"), tuple(cards("2c 3d 9h Th")))
    # With 8♠ 9♠ 10♠ and 8♦ 9♦ 10♦ laid by others, J♠ and J♦ can be sent: 2♣ 3♦ are left,
    # 3♦ is the final discard and 2♣ scores 2.
    lay_down = best_lay_down(hand, laid_melds=[cards("8s 9s Ts"), cards("8d 9d Td")])
    assert lay_down == LayDown(
        melds=melds_of("9h Th Jh"),
        sends=(Send(card("Js"), 0), Send(card("Jd"), 1)),
        discard=card("3d"),
        junk=tuple(cards("2c")),
    )
    assert lay_down.junk_points == 2


def test_lay_down_keeps_the_junk_that_scores_least_after_the_final_discard() -> None:
    # The run 6♠ 7♠ 8♠ leaves 7♦ 7♥ and the set 7♠ 7♦ 7♥ leaves 6♠ 8♠: 14 points each.
    # After throwing the highest card, 6♠ (6) beats 7♦ or 7♥ (7).
    lay_down = best_lay_down(cards("6s 7s 8s 7d 7h"))
    assert lay_down == LayDown(melds_of("7s 7d 7h"), (), card("8s"), tuple(cards("6s")))


def test_lay_down_never_sends_away_the_only_meld_a_player_has() -> None:
    # 10♥ J♥ Q♥ could all go to 7♥ 8♥ 9♥, but then the player would lay nothing (móm, PH-11).
    lay_down = best_lay_down(cards("Th Jh Qh 2c"), laid_melds=[cards("7h 8h 9h")])
    assert lay_down == LayDown(melds_of("Th Jh Qh"), (), card("2c"), ())


def test_lay_down_without_anything_to_send_lays_the_best_arrangement() -> None:
    hand = cards("Kd 2h 5s Ah 5d 3h Td 5c Jd 9c")
    lay_down = best_lay_down(hand, laid_melds=[cards("7h 8h 9h")])
    assert lay_down == LayDown(melds_of("Ah 2h 3h", "5s 5c 5d"), (), card("Kd"), tuple(cards("9c Td Jd")))
    assert best_arrangement(hand) == Arrangement(lay_down.melds, tuple(cards("9c Td Jd Kd")))


def test_lay_down_of_more_than_ten_cards_is_refused() -> None:
    with pytest.raises(RuleViolation):
        best_lay_down(cards("As 2s 3s 4s 5s 6s 7s 8s 9s Ts Js"))


def test_a_taken_card_is_never_sent() -> None:
    # 10♥ was taken into 10♥ J♥ Q♥: it stays there though 7♥ 8♥ 9♥ would take it.
    lay_down = best_lay_down(cards("Th Jh Qh Kh 2c"), cards("Th"), [cards("7h 8h 9h")])
    assert lay_down == LayDown(melds_of("Th Jh Qh Kh"), (), card("2c"), ())


# --- laying down every Phỏm (§6.1 last turn; rules version 2: ``lay_every_meld``) ----------


def test_a_meld_left_to_lay_is_one_that_still_leaves_a_card_to_throw() -> None:
    assert meld_left_to_lay(cards("9c 9d 9h Ks")) == tuple(cards("9c 9d 9h"))
    assert meld_left_to_lay(cards("5h 6h 7h 8h")) is not None  # 5♥ 6♥ 7♥ leaves 8♥
    assert meld_left_to_lay(cards("9c 9d Ks 2h")) is None  # junk: in no Phỏm
    # Cards that are one Phỏm and nothing else stay: laying them leaves no final discard.
    assert meld_left_to_lay(cards("5h 6h 7h")) is None
    assert meld_left_to_lay(()) is None


def test_issue_28_lay_down_lays_the_run_it_could_send_card_by_card() -> None:
    # A♠ 3♠ 4♠ 5♠ 6♠ K♠ K♣ 8♦ K♦ K♥ with 7♠ 8♠ 9♠ on the table. Version 1 lays the four
    # Kings and keeps 3♠ 4♠ 5♠ 6♠, a Phỏm, to send one card at a time; every Phỏm is laid.
    hand = cards("As 3s 4s 5s 6s Ks Kc 8d Kd Kh")
    table = [cards("7s 8s 9s")]
    assert best_lay_down(hand, laid_melds=table) == LayDown(
        melds_of("Ks Kc Kd Kh"),
        (Send(card("6s"), 0), Send(card("5s"), 0), Send(card("4s"), 0), Send(card("3s"), 0)),
        card("8d"),
        tuple(cards("As")),
    )
    assert best_lay_down(hand, laid_melds=table, lay_every_meld=True) == LayDown(
        melds_of("3s 4s 5s 6s", "Ks Kc Kd Kh"), (), card("8d"), tuple(cards("As"))
    )


def test_issue_28_lay_down_keeps_six_points_rather_than_sending_a_set_away() -> None:
    # 6♠ 7♠ 8♠ 9♠ 7♣ 7♦ 8♦ 7♥ 8♥ J♥ against 4♥5♥6♥ | 3♦4♦5♦6♦ | 10♠J♠Q♠ | 8♣9♣10♣.
    # Version 1 lays 6♠ 7♠ 8♠ and sends 7♣ 7♦ 7♥ 8♦ 8♥ 9♠ (0 points), a set of 7s among
    # them; laying every Phỏm is 7♠ 7♣ 7♦ 7♥ and 8♠ 8♦ 8♥, 9♠ sent, J♥ thrown, 6♠ kept.
    hand = cards("6s 7s 8s 9s 7c 7d 8d 7h 8h Jh")
    table = [cards("4h 5h 6h"), cards("3d 4d 5d 6d"), cards("Ts Js Qs"), cards("8c 9c Tc")]
    old = best_lay_down(hand, laid_melds=table)
    assert old is not None and old.melds == melds_of("6s 7s 8s") and old.junk_points == 0
    assert {s.card for s in old.sends} == set(cards("7c 7d 7h 8d 8h 9s"))
    lay_down = best_lay_down(hand, laid_melds=table, lay_every_meld=True)
    assert lay_down == LayDown(
        melds_of("7s 7c 7d 7h", "8s 8d 8h"), (Send(card("9s"), 2),), card("Jh"), tuple(cards("6s"))
    )
    assert lay_down.junk_points == 6


def test_laying_every_meld_keeps_the_last_card_to_throw_when_all_could_be_sent() -> None:
    # 10♥ J♥ could both go to 7♥ 8♥ 9♥, but the final discard is a card of the hand: J♥.
    lay_down = best_lay_down(cards("2c 3c 4c Th Jh"), laid_melds=[cards("7h 8h 9h")], lay_every_meld=True)
    assert lay_down == LayDown(melds_of("2c 3c 4c"), (Send(card("Th"), 0),), card("Jh"), ())


def test_laying_every_meld_keeps_a_lone_phom_that_would_leave_nothing_to_throw() -> None:
    # A re-turn (tái) with 5♥ 6♥ 7♥ only: laying them would leave no final discard.
    lay_down = best_lay_down(cards("5h 6h 7h"), lay_every_meld=True)
    assert lay_down == LayDown((), (), card("7h"), tuple(cards("5h 6h")))
    # With a fourth card, the Phỏm is laid and that card thrown.
    assert best_lay_down(cards("5h 6h 7h Kc"), lay_every_meld=True) == LayDown(melds_of("5h 6h 7h"), (), card("Kc"), ())


def test_laying_every_meld_finds_nothing_to_throw_when_taken_cards_bind_every_card() -> None:
    # 2♣ 7♣ K♥ 10♣ taken: all ten cards are in Phỏm and none can be thrown (that is Ù tròn).
    hand = cards("2s Ks 2c 7c 8c 9c Kc 2h Kh Tc")
    assert best_lay_down(hand, cards("2c 7c Kh Tc"), lay_every_meld=True) is None


# --- Ù (§6.2, PH-4, PH-5, PH-16, PH-17) -----------------------------------------------------


def test_u_thuong_every_card_but_the_discard_in_melds() -> None:
    u = find_u(cards("Ah 2h 3h 5s 5c 5d 9d Td Jd Kc"), drew_from_stock=True)
    assert u is not None
    assert (u.tron, u.kings, u.discard) == (False, False, card("Kc"))
    assert u.melds == melds_of("Ah 2h 3h", "5s 5c 5d", "9d Td Jd")


def test_u_tron_all_ten_cards_in_melds_with_nothing_to_discard() -> None:
    u = find_u(cards("Ah 2h 3h 5s 5c 5d 9d Td Jd Qd"), drew_from_stock=True)
    assert u is not None
    assert (u.tron, u.discard) == (True, None)
    assert u.melds == melds_of("Ah 2h 3h", "5s 5c 5d", "9d Td Jd Qd")


def test_two_junk_cards_are_not_u() -> None:
    assert find_u(cards("Ah 2h 3h 5s 5c 5d 9d Td Kc Qs"), drew_from_stock=True) is None


def test_the_u_discard_is_never_a_taken_card() -> None:
    hand = cards("Ah 2h 3h 5s 5c 5d 9d Td Jd Kc")
    u = find_u(hand, drew_from_stock=True)
    assert u is not None and u.discard == card("Kc")
    # Had K♣ been taken it would have to be melded (PH-13): no Ù.
    assert find_u(hand, cards("Kc"), drew_from_stock=True) is None


def test_a_taken_card_must_be_in_the_melds_of_a_u() -> None:
    # 3♥ was taken: it stays in A♥ 2♥ 3♥ and the other 3s make a set of their own.
    u = find_u(cards("Ah 2h 3h 3s 3c 3d 9d Td Jd Qd"), cards("3h"), drew_from_stock=True)
    assert u is not None and u.tron and u.melds == melds_of("Ah 2h 3h", "3s 3c 3d", "9d Td Jd Qd")


def test_u_k_needs_a_set_of_kings_and_no_draw_from_the_stock() -> None:
    hand = cards("Ks Kc Kd Ah 2h 3h 5s 5c 5d 9d")
    u = find_u(hand, drew_from_stock=False)
    assert u is not None
    assert (u.tron, u.kings, u.discard) == (False, True, card("9d"))
    assert u.melds == melds_of("Ah 2h 3h", "5s 5c 5d", "Ks Kc Kd")
    drew = find_u(hand, drew_from_stock=True)
    assert drew is not None and not drew.kings


def test_u_k_counts_a_set_of_kings_even_when_a_king_could_sit_in_a_run() -> None:
    # J♥ Q♥ K♥ and K♠ K♣ K♦: the four Kings are not a set here, but three of them are.
    u = find_u(cards("Jh Qh Kh Ks Kc Kd Ah 2h 3h 9c"), drew_from_stock=False)
    assert u is not None and u.kings and u.discard == card("9c")
    # Kings only in a run are no Ù K.
    u = find_u(cards("Jh Qh Kh Ah 2h 3h 5s 5c 5d 9c"), drew_from_stock=False)
    assert u is not None and not u.kings


def test_u_tron_with_kings_is_both() -> None:
    u = find_u(cards("Ks Kc Kd Ah 2h 3h 5s 5c 5d 5h"), drew_from_stock=False)
    assert u is not None and (u.tron, u.kings) == (True, True)


def test_u_khan_is_a_hand_where_no_two_cards_could_share_a_meld() -> None:
    assert is_u_khan(cards("As 4s 7s Tc Kc 2d 5d 8h Jh"))
    assert is_u_khan(cards("As Qs 4c 7c Tc 2d 5d 8h Jh"))  # Q and A are far apart (PH-10)
    assert not is_u_khan(cards("As 3s 7s Tc Kc 2d 5d 8h Jh"))  # A♠ 3♠ could meet in A-2-3
    assert not is_u_khan(cards("As 4s 7s Tc Qc 2d 5d 8h Jh"))  # 10♣ Q♣ could meet in 10-J-Q
    assert not is_u_khan(cards("As 4s 7s Tc Kc 2d 5d 8h 8c"))  # a pair of 8s


# --- payments for taken cards (§6.4, PH-6, PH-19) ------------------------------------------


def test_the_discarder_pays_the_taker_1_then_2_then_the_ordinal() -> None:
    discards = [
        Discard(0, taken_by=1),
        Discard(1),
        Discard(2, taken_by=3),
        Discard(3),
        Discard(0, taken_by=1),
        Discard(1),
        Discard(0, taken_by=1),
    ]
    assert take_payments(discards) == (
        Payment(0, 1, 1, "an_cay", "§6.4, PH-6"),
        Payment(2, 3, 1, "an_cay", "§6.4, PH-6"),  # the ordinal is per taker
        Payment(0, 1, 2, "an_cay_2", "§6.4, PH-6"),
        Payment(0, 1, 3, "an_cay_n", "PH-6"),
    )


def test_an_chot_costs_5_whatever_its_ordinal_and_still_counts() -> None:
    discards = [Discard(0, taken_by=1, final=True), Discard(1, final=True), Discard(0, taken_by=1)]
    assert take_payments(discards) == (
        Payment(0, 1, 5, "an_chot", "PH-6, PH-19"),
        Payment(0, 1, 2, "an_cay_2", "§6.4, PH-6"),
    )


# --- placement (§6.4, PH-2, PH-3, PH-11, PH-15) ------------------------------------------------


def test_four_players_last_third_and_second_pay_the_first_3_2_and_1() -> None:
    results = [
        PlayerResult(seat=0, junk_points=30, mom=False, lay_order=0),
        PlayerResult(seat=1, junk_points=5, mom=False, lay_order=1),
        PlayerResult(seat=2, junk_points=41, mom=False, lay_order=2),
        PlayerResult(seat=3, junk_points=12, mom=False, lay_order=3),
    ]
    assert [r.seat for r in rank_players(results)] == [1, 3, 0, 2]
    assert placement_payments(results) == (
        Payment(3, 1, 1, "ve_nhi", "§6.4, PH-15"),
        Payment(0, 1, 2, "ve_ba", "§6.4, PH-15"),
        Payment(2, 1, 3, "ve_chot", "§6.4, PH-15"),
    )


def test_three_players_last_and_second_pay_the_first_2_and_1() -> None:
    results = [PlayerResult(0, 30, False, 0), PlayerResult(1, 5, False, 1), PlayerResult(2, 41, False, 2)]
    assert placement_payments(results) == (
        Payment(0, 1, 1, "ve_nhi", "§6.4, PH-15"),
        Payment(2, 1, 2, "ve_chot", "§6.4, PH-15"),
    )


def test_two_players_the_last_pays_the_first_1() -> None:
    results = [PlayerResult(0, 30, False, 0), PlayerResult(1, 5, False, 1)]
    assert placement_payments(results) == (Payment(0, 1, 1, "ve_chot", "§6.4, PH-15"),)


def test_equal_junk_points_go_to_who_laid_down_earlier() -> None:
    results = [PlayerResult(0, 20, False, 2), PlayerResult(1, 20, False, 0), PlayerResult(2, 20, False, 1)]
    assert [r.seat for r in rank_players(results)] == [1, 2, 0]


def test_mom_ranks_last_and_pays_4_instead_of_its_place() -> None:
    # PH-11's example: 4 players, one móm: 2nd pays 1, 3rd pays 2, the móm player 4.
    results = [
        PlayerResult(0, 3, True, 0),  # fewest points, but móm
        PlayerResult(1, 10, False, 1),
        PlayerResult(2, 20, False, 2),
        PlayerResult(3, 30, False, 3),
    ]
    assert [r.seat for r in rank_players(results)] == [1, 2, 3, 0]
    assert placement_payments(results) == (
        Payment(2, 1, 1, "ve_nhi", "§6.4, PH-15"),
        Payment(3, 1, 2, "ve_ba", "§6.4, PH-15"),
        Payment(0, 1, 4, "mom", "PH-11, PH-15"),
    )


def test_two_mom_players_each_pay_4() -> None:
    results = [
        PlayerResult(0, 40, True, 0),
        PlayerResult(1, 10, False, 1),
        PlayerResult(2, 20, False, 2),
        PlayerResult(3, 30, True, 3),
    ]
    assert placement_payments(results) == (
        Payment(2, 1, 1, "ve_nhi", "§6.4, PH-15"),
        Payment(3, 1, 4, "mom", "PH-11, PH-15"),
        Payment(0, 1, 4, "mom", "PH-11, PH-15"),
    )


def test_when_everyone_is_mom_the_best_of_them_is_paid_4_by_each_other() -> None:
    results = [PlayerResult(0, 40, True, 0), PlayerResult(1, 35, True, 1), PlayerResult(2, 50, True, 2)]
    assert placement_payments(results) == (
        Payment(0, 1, 4, "mom", "PH-11, PH-15"),
        Payment(2, 1, 4, "mom", "PH-11, PH-15"),
    )


# --- Ù payments and Ù đền (§6.2, §6.4, PH-4, PH-5, PH-7, PH-12, PH-17, PH-18) -------------------


def test_u_thuong_takes_5_from_each_other_player() -> None:
    assert u_payments(2, [0, 1, 2, 3], tron=False, kings=False) == (
        Payment(0, 2, 5, "u_thuong", "§6.4"),
        Payment(1, 2, 5, "u_thuong", "§6.4"),
        Payment(3, 2, 5, "u_thuong", "§6.4"),
    )


def test_u_tron_takes_10_from_each_other_player() -> None:
    assert u_payments(0, [0, 1, 2], tron=True, kings=False) == (
        Payment(1, 0, 10, "u_tron", "PH-4"),
        Payment(2, 0, 10, "u_tron", "PH-4"),
    )


def test_u_k_pays_as_u_thuong() -> None:
    assert u_payments(0, [0, 1], tron=False, kings=True) == (Payment(1, 0, 5, "u_thuong", "§6.4, PH-5"),)


def test_u_tron_and_k_together_pay_the_higher_10() -> None:
    assert u_payments(0, [0, 1], tron=True, kings=True) == (Payment(1, 0, 10, "u_tron", "PH-4, PH-17"),)


def test_u_den_the_chot_taker_pays_for_the_whole_table() -> None:
    # Seat 1 takes seat 0's last discard (chốt); later seat 3 goes Ù thường.
    discards = [Discard(0, taken_by=1, final=True), Discard(1, final=True), Discard(2, final=True)]
    assert den_liable(discards, u_seat=3) == (1, "§6.2, PH-18")
    assert u_payments(3, [0, 1, 2, 3], tron=False, kings=False, discards=discards) == (
        Payment(1, 3, 15, "u_den", "§6.2, PH-18"),
    )


def test_tai_gui_u_den_the_last_chot_taker_pays_instead_of_the_earlier_one() -> None:
    discards = [
        Discard(0, taken_by=1, final=True),
        Discard(1, taken_by=2, final=True),
        Discard(2, final=True),
    ]
    assert u_payments(3, [0, 1, 2, 3], tron=True, kings=False, discards=discards) == (
        Payment(2, 3, 30, "u_den", "§6.2, PH-18"),
    )


def test_the_u_player_who_took_the_last_chot_makes_nobody_pay_for_the_others() -> None:
    discards = [Discard(0, taken_by=1, final=True), Discard(1, final=True), Discard(2, taken_by=3, final=True)]
    assert den_liable(discards, u_seat=3) is None
    assert [p.payer for p in u_payments(3, [0, 1, 2, 3], tron=False, kings=False, discards=discards)] == [0, 1, 2]


def test_three_discards_taken_in_a_row_make_the_discarder_liable() -> None:
    discards = [
        Discard(0, taken_by=1),
        Discard(1),
        Discard(2),
        Discard(0, taken_by=1),
        Discard(1),
        Discard(2),
        Discard(0, taken_by=1),
    ]
    assert den_liable(discards, u_seat=1) == (0, "PH-7, PH-18")
    assert u_payments(1, [0, 1, 2], tron=False, kings=False, discards=discards) == (
        Payment(0, 1, 10, "u_den", "PH-7, PH-18"),
    )


def test_three_takes_with_a_kept_discard_between_are_not_in_a_row() -> None:
    discards = [Discard(0, taken_by=1), Discard(0), Discard(0, taken_by=1), Discard(0, taken_by=1)]
    assert den_liable(discards, u_seat=1) is None


def test_a_chot_taker_is_liable_before_a_three_times_taken_player() -> None:
    discards = [Discard(0, taken_by=1)] * 3 + [Discard(2, taken_by=3, final=True)]
    assert den_liable(discards, u_seat=1) == (3, "§6.2, PH-18")


def test_the_u_player_is_never_liable_for_three_takes_of_their_own() -> None:
    discards = [Discard(0, taken_by=1)] * 3
    assert den_liable(discards, u_seat=0) is None


# --- disconnect and Ù khan (§6.5, §6.6, PH-14, PH-16) ------------------------------------------


def test_a_disconnected_player_pays_5_to_each_remaining_player() -> None:
    assert disconnect_payments(2, [0, 1, 3]) == tuple(
        Payment(2, s, 5, "disconnect_forfeit", "§6.5, PH-14") for s in (0, 1, 3)
    )


def test_u_khan_takes_5_from_each_with_9_cards_and_10_with_10() -> None:
    assert u_khan_payments(0, [0, 1, 2], hand_cards=9) == (
        Payment(1, 0, 5, "u_khan", "§6.6, PH-16"),
        Payment(2, 0, 5, "u_khan", "§6.6, PH-16"),
    )
    assert [p.amount_stakes for p in u_khan_payments(0, [0, 1], hand_cards=10)] == [10]


# --- a whole hand's payments (PH-12) ------------------------------------------------------


def test_take_payments_stand_when_a_hand_ends_in_u() -> None:
    discards = [Discard(0, taken_by=1), Discard(1), Discard(2)]
    payments = hand_payments([0, 1, 2], discards, u=UWin(seat=2))
    assert payments == (
        Payment(0, 1, 1, "an_cay", "§6.4, PH-6"),
        Payment(0, 2, 5, "u_thuong", "§6.4"),
        Payment(1, 2, 5, "u_thuong", "§6.4"),
    )


def test_a_scripted_hand_with_a_chot_take_and_placement() -> None:
    discards = [
        Discard(0),
        Discard(1, taken_by=2),
        Discard(2),
        Discard(0, final=True),
        Discard(1, final=True),
        Discard(2, taken_by=0, final=True),  # seat 0 takes seat 2's chốt
    ]
    results = [PlayerResult(0, 0, False, 0), PlayerResult(1, 25, True, 1), PlayerResult(2, 14, False, 2)]
    assert hand_payments([0, 1, 2], discards, results=results) == (
        Payment(1, 2, 1, "an_cay", "§6.4, PH-6"),
        Payment(2, 0, 5, "an_chot", "PH-6, PH-19"),
        Payment(2, 0, 1, "ve_nhi", "§6.4, PH-15"),
        Payment(1, 0, 4, "mom", "PH-11, PH-15"),
    )


def test_a_scripted_u_den_hand() -> None:
    # Four players. Seat 1 takes seat 0's chốt; seat 3 then goes Ù tròn. Seat 1 pays
    # everyone's 10 × S (3 × 10); seat 0 still pays seat 1 the 5 × S for the chốt.
    discards = [
        Discard(0),
        Discard(1),
        Discard(2, taken_by=3),
        Discard(3),
        Discard(0, final=True, taken_by=1),
        Discard(1, final=True),
        Discard(2, final=True),
    ]
    assert hand_payments([0, 1, 2, 3], discards, u=UWin(seat=3, tron=True)) == (
        Payment(2, 3, 1, "an_cay", "§6.4, PH-6"),
        Payment(0, 1, 5, "an_chot", "PH-6, PH-19"),
        Payment(1, 3, 30, "u_den", "§6.2, PH-18"),
    )


def test_every_reason_paid_is_a_known_reason() -> None:
    assert {"an_cay", "an_cay_2", "an_chot", "u_tron", "u_thuong", "u_den", "mom"} <= set(REASONS)


@pytest.mark.parametrize(
    "hand",
    [
        "Ah 2h 3h 4h 5s 5c 5d 5h Kc",  # 9 cards, 8 in Phỏm and K♣ loose: no Ù thường
        "Ah 2h 3h 5s 5c 5d 9d Td Jd",  # 9 cards all in Phỏm: no Ù tròn
        "Ks Kc Kd 2h",
        "2h",
        "Ah 2h 3h 5s 5c 5d 9d Td Jd Qd Kd",
    ],
)
def test_u_is_judged_on_ten_cards_and_any_other_hand_size_is_refused(hand: str) -> None:
    # Ù is the 10 cards after a take or draw (PH-4): tròn all 10 in Phỏm, thường 9 and one
    # to throw. A 9-card hand is neither; the answer for it would be a guess.
    with pytest.raises(RuleViolation) as raised:
        find_u(cards(hand), drew_from_stock=False)
    assert raised.value.code == "BAD_HAND"


def test_sending_to_something_that_is_no_meld_is_refused() -> None:
    with pytest.raises(RuleViolation) as raised:
        sends(cards("5h"), [cards("2h 3d 4h")])
    assert raised.value.code == "BAD_MELD"
