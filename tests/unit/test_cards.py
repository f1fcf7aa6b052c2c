"""Card notation (RULES.md 0.3) and the canonical deck of every game (DESIGN.md "Fairness" 4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socai import cards
from socai.cards import ACE, CLUBS, DIAMONDS, HEARTS, JACK, KING, QUEEN, SPADES, Card
from socai.errors import InvalidArgument

# --- notation ---------------------------------------------------------------------------


def test_as_td_9h_2c_are_ace_of_spades_ten_of_diamonds_nine_of_hearts_two_of_clubs() -> None:
    assert cards.parse_cards("As Td 9h 2c") == [
        Card(ACE, SPADES),
        Card(10, DIAMONDS),
        Card(9, HEARTS),
        Card(2, CLUBS),
    ]


def test_suit_symbols_and_10_mean_the_same_cards() -> None:
    assert cards.parse_cards("A♠ 10♦ 9♥ 2♣") == cards.parse_cards("As Td 9h 2c")


def test_lowercase_and_uppercase_are_the_same_card() -> None:
    assert cards.parse_cards("as td JH qC KS") == cards.parse_cards("As Td Jh Qc Ks")


def test_commas_separate_cards_like_spaces() -> None:
    assert cards.parse_cards("As,Td, 9h ,2c") == cards.parse_cards("As Td 9h 2c")


def test_a_list_of_card_strings_parses_like_a_string() -> None:
    assert cards.parse_cards(["As", " 10♦ ", "9h"]) == cards.parse_cards("As Td 9h")


def test_empty_text_is_no_cards() -> None:
    assert cards.parse_cards("") == []
    assert cards.parse_cards(" , ") == []


def test_face_cards_have_ranks_11_to_14() -> None:
    assert [c.rank for c in cards.parse_cards("Jc Qd Kh As")] == [JACK, QUEEN, KING, ACE] == [11, 12, 13, 14]


def test_str_gives_the_ascii_form_back() -> None:
    assert [str(c) for c in cards.parse_cards("a♠ 10♦ td 9H")] == ["As", "Td", "Td", "9h"]
    assert cards.format_cards(cards.parse_cards("A♠ 10♦")) == "As Td"


def test_symbol_gives_the_display_form() -> None:
    assert [c.symbol for c in cards.parse_cards("As Td 9h 2c")] == ["A♠", "10♦", "9♥", "2♣"]


@pytest.mark.parametrize("card", cards.ALL_CARDS, ids=str)
def test_every_card_round_trips_through_str_and_symbol(card: Card) -> None:
    assert cards.parse_card(str(card)) is card
    assert cards.parse_card(card.symbol) is card
    assert cards.card_from_index(card.index) is card


def test_red_cards_are_hearts_and_diamonds() -> None:
    assert [c.is_red for c in cards.parse_cards("As Ac Ad Ah")] == [False, False, True, True]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "A",
        "s",
        "1s",
        "11s",
        "Ax",
        "AS5",
        "As Td",  # two cards are not one
        "10",
        "Ts♠",
        "0s",
        "Aſ",  # long s case-folds to s, but is not a suit letter
        "\u212as",  # the Kelvin sign case-folds to k, but is not a king
        "As\n5",
    ],
)
def test_a_token_that_is_not_a_card_is_bad_card(text: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        cards.parse_card(text)
    assert err.value.code == "BAD_CARD"


def test_one_bad_token_spoils_the_whole_list() -> None:
    with pytest.raises(InvalidArgument) as err:
        cards.parse_cards("As Td Zz 9h")
    assert err.value.code == "BAD_CARD"


def test_a_non_string_token_is_bad_card_not_a_crash() -> None:
    with pytest.raises(InvalidArgument) as err:
        cards.parse_cards([Card(ACE, SPADES)])  # type: ignore[list-item]
    assert err.value.code == "BAD_CARD"


@pytest.mark.parametrize(("rank", "suit"), [(1, SPADES), (15, SPADES), (0, 0), (ACE, 4), (ACE, -1)])
def test_a_card_outside_2_to_ace_and_four_suits_cannot_be_made(rank: int, suit: int) -> None:
    # Card(1, 0) used to print as "As" while differing from the real ace of spades.
    with pytest.raises(InvalidArgument) as err:
        Card(rank, suit)
    assert err.value.code == "BAD_CARD"


@pytest.mark.parametrize("index", [-1, 52])
def test_card_index_is_0_to_51(index: int) -> None:
    with pytest.raises(InvalidArgument) as err:
        cards.card_from_index(index)
    assert err.value.code == "BAD_CARD"


def test_index_is_the_canonical_position() -> None:
    assert cards.parse_card("2s").index == 0
    assert cards.parse_card("2h").index == 3
    assert cards.parse_card("3s").index == 4
    assert cards.parse_card("Ah").index == 51


def test_cards_are_values() -> None:
    assert Card(ACE, SPADES) == cards.parse_card("As")
    assert hash(Card(ACE, SPADES)) == hash(cards.parse_card("As"))
    assert len({cards.parse_card("As"), cards.parse_card("a♠")}) == 1


@given(st.lists(st.sampled_from(cards.ALL_CARDS), max_size=13))
def test_format_then_parse_gives_the_same_cards(hand: list[Card]) -> None:
    assert cards.parse_cards(cards.format_cards(hand)) == hand
    assert cards.parse_cards(", ".join(c.symbol for c in hand)) == hand


# --- canonical decks --------------------------------------------------------------------


def test_the_52_card_deck_starts_2s_2c_2d_2h_3s_and_ends_with_the_aces() -> None:
    deck = cards.format_cards(cards.deck("holdem"))
    assert deck.startswith("2s 2c 2d 2h 3s 3c 3d 3h 4s")
    assert deck.endswith("Ks Kc Kd Kh As Ac Ad Ah")
    assert cards.deck("holdem") == list(cards.ALL_CARDS)


def test_xito_plays_the_28_cards_from_8s_to_ah() -> None:
    deck = cards.format_cards(cards.deck("xito"))
    assert deck == ("8s 8c 8d 8h 9s 9c 9d 9h Ts Tc Td Th Js Jc Jd Jh Qs Qc Qd Qh Ks Kc Kd Kh As Ac Ad Ah")


def test_ba_cay_plays_the_36_cards_from_the_ace_to_9_with_the_ace_first() -> None:
    expected = (
        "As Ac Ad Ah 2s 2c 2d 2h 3s 3c 3d 3h 4s 4c 4d 4h 5s 5c 5d 5h 6s 6c 6d 6h 7s 7c 7d 7h 8s 8c 8d 8h 9s 9c 9d 9h"
    )
    assert cards.format_cards(cards.deck("bacay_ga")) == expected
    assert cards.format_cards(cards.deck("bacay_chuong")) == expected


@pytest.mark.parametrize("game_id", sorted(cards.GAME_DECKS))
def test_every_deck_is_in_canonical_order_without_repeats(game_id: str) -> None:
    deck = cards.deck(game_id)
    assert len(set(deck)) == len(deck)
    if cards.GAME_DECKS[game_id] == "bacay":
        # Ba Cây counts the ace as 1, so the ace comes before the 2.
        key = [(1 if c.rank == ACE else c.rank, c.suit) for c in deck]
    else:
        key = [(c.rank, c.suit) for c in deck]
    assert key == sorted(key)


@pytest.mark.parametrize(
    ("game_id", "size"),
    [
        ("holdem", 52),
        ("xito", 28),
        ("maubinh", 52),
        ("lieng", 52),
        ("lieng_sanh", 52),
        ("bacay_ga", 36),
        ("bacay_chuong", 36),
        ("tienlen", 52),
        ("samloc", 52),
        ("phom", 52),
    ],
)
def test_deck_size_of_each_card_game(game_id: str, size: int) -> None:
    assert len(cards.deck(game_id)) == size


def test_every_card_game_of_the_design_has_a_deck_and_tai_xiu_has_none() -> None:
    from socai.rules.registry import GAME_IDS

    assert set(cards.GAME_DECKS) == set(GAME_IDS) - {"taixiu"}


def test_deck_gives_a_fresh_list_each_time() -> None:
    first = cards.deck("holdem")
    first.reverse()
    assert cards.deck("holdem")[0] == cards.parse_card("2s")


@pytest.mark.parametrize("game_id", ["taixiu", "poker", "", "HOLDEM"])
def test_a_game_without_cards_or_an_unknown_id_has_no_deck(game_id: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        cards.deck(game_id)
    assert err.value.code == "UNKNOWN_GAME"
