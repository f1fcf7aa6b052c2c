"""The shedding core shared by Tiến Lên Miền Nam đếm lá and Sâm Lốc (RULES.md §9 and §4).

One core, two games. Everything a game does differently is data in its ``SheddingRules``
(``TIENLEN``, ``SAMLOC``) or one small function chosen by it, never a second copy:

- ``combo(cards, rules)``: the combination the cards form (``.kind`` one of ``KINDS``), or
  None; ``beats(play, over, rules)``: whether ``play`` may be played on ``over``, chops
  included; ``legal_plays(hand, over, rules)``: every combination a hand may play.
- penalty valuation from cards alone, in units of the stake S (1 lá = 1 × S, RULES.md 0.2),
  each amount with a reason code from ``REASONS`` and the RULES.md rule it applies:
  ``count_left`` (cards left, thối heo / thối hàng, cóng, treo), ``chop_penalty`` (chặt and
  chặt đè chains), ``instant_win`` / ``instant_winner`` / ``instant_win_penalties``
  (tới trắng / thắng trắng at the deal), Sâm Lốc's flat amounts (``sam_success``,
  ``sam_failed``, ``den_trang``, ``leave_penalties``) and Tiến Lên's 3♠ variants that are
  off by default (``dut_ba_bich_penalties``, ``thoi_ba_bich_penalty``).
- card checks the game modules need: ``has_answer`` (SL-10's đền trắng mark) and
  ``lowest_card_holder`` (who leads, TL-1).

What needs the hand's state (whose turn, passes, when a round or chain closes, who
declared Sâm, GEN-4 caps) belongs to the game modules built on the game kit.

The game modules (``socai.rules.climbing.tienlen`` / ``samloc``) bind ``rules`` and re-export
``combo(cards)`` and ``beats(play, over)`` (DESIGN.md "Public Python API"). Seats in
``Penalty`` are whatever identifiers the caller passes in: this module never looks at them.

The rank order is the same in both games, 3 < 4 < … < K < A < 2 (9.1, 4.1). Suit order is
not (0.5): Tiến Lên breaks ties ♥ > ♦ > ♣ > ♠, Sâm Lốc does not distinguish suits at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Final, cast

from socai.cards import ACE, Card, card_from_index
from socai.errors import broken, check

SINGLE: Final = "single"
PAIR: Final = "pair"
TRIPLE: Final = "triple"
STRAIGHT: Final = "straight"
PAIRS_RUN: Final = "pairs_run"
FOUR: Final = "four"
TWO_FOURS: Final = "two_fours"
KINDS: Final = (SINGLE, PAIR, TRIPLE, STRAIGHT, PAIRS_RUN, FOUR, TWO_FOURS)
_KIND_ORDER: Final = {kind: i for i, kind in enumerate(KINDS)}

# Shapes refine kinds where the chop tables care: a 2 alone, a pair of 2s, and a pairs run
# by its number of pairs (ba đôi thông is "pairs_run3", bốn đôi thông "pairs_run4").
SHAPE_TWO: Final = "two"
SHAPE_PAIR_OF_TWOS: Final = "pair_of_twos"

TWO: Final = 2
# Strength of a rank in both games, 3 lowest (0) to 2 highest (12).
_RANK_ORDER: Final = {rank: (rank - 3 if rank >= 3 else 12) for rank in range(2, 15)}
# Ranks a pairs run or a Tiến Lên straight may use: 3 … A, never a 2 (TL-7).
_RANKS_3_TO_A: Final = tuple(range(3, ACE + 1))

# How many cards one hand holds at most; every generator below is bounded by it.
HAND_CARDS_MAX: Final = 13

COUNT: Final = "count"
RANK: Final = "rank"
SETTLEMENT_MODES: Final = (COUNT, RANK)


# --- reasons --------------------------------------------------------------------------------

CARDS_LEFT: Final = "cards_left"
THOI_HEO_DEN: Final = "thoi_heo_den"
THOI_HEO_DO: Final = "thoi_heo_do"
THOI_BA_DOI_THONG: Final = "thoi_ba_doi_thong"
THOI_TU_QUY: Final = "thoi_tu_quy"
THOI_BON_DOI_THONG: Final = "thoi_bon_doi_thong"
CONG: Final = "cong"
TREO: Final = "treo"
CHAT_HEO_DEN: Final = "chat_heo_den"
CHAT_HEO_DO: Final = "chat_heo_do"
CHAT_HEO: Final = "chat_heo"
CHAT_HEO_TU_QUY_A: Final = "chat_heo_tu_quy_a"
CHAT_DOI_HEO: Final = "chat_doi_heo"
CHAT_BA_DOI_THONG: Final = "chat_ba_doi_thong"
CHAT_TU_QUY: Final = "chat_tu_quy"
CHAT_HAI_TU_QUY: Final = "chat_hai_tu_quy"
CHAT_BON_DOI_THONG: Final = "chat_bon_doi_thong"
CHAT_DE: Final = "chat_de"
TOI_TRANG: Final = "toi_trang"
THANG_TRANG: Final = "thang_trang"
SAM_SUCCESS: Final = "sam_success"
SAM_FAILED: Final = "sam_failed"
DEN_TRANG: Final = "den_trang"
DEN_BAO: Final = "den_bao"
LEAVE_PENALTY: Final = "leave_penalty"
DUT_BA_BICH: Final = "dut_ba_bich"
THOI_BA_BICH: Final = "thoi_ba_bich"

# Every reason code, with what it means (for audit output and the settlement records).
REASONS: Final[dict[str, str]] = {
    CARDS_LEFT: "ordinary cards left in hand, 1 lá each",
    THOI_HEO_DEN: "thối heo: a black 2 left in hand",
    THOI_HEO_DO: "thối heo: a red 2 left in hand",
    THOI_BA_DOI_THONG: "thối: three consecutive pairs left in hand",
    THOI_TU_QUY: "thối: four of a kind left in hand",
    THOI_BON_DOI_THONG: "thối: four (or more) consecutive pairs left in hand",
    CONG: "cóng: played no card, the count is multiplied",
    TREO: "treo: played no card, a flat amount instead of the count",
    CHAT_HEO_DEN: "chặt heo: a black 2 was chopped",
    CHAT_HEO_DO: "chặt heo: a red 2 was chopped",
    CHAT_HEO: "chặt heo: a 2 was chopped by a four of a kind",
    CHAT_HEO_TU_QUY_A: "chặt heo: a 2 was chopped by four aces",
    CHAT_DOI_HEO: "chặt đôi heo: a pair of 2s was chopped",
    CHAT_BA_DOI_THONG: "chặt: three consecutive pairs were chopped",
    CHAT_TU_QUY: "chặt: a four of a kind was chopped",
    CHAT_HAI_TU_QUY: "chặt: two fours of a kind were chopped",
    CHAT_BON_DOI_THONG: "chặt: four consecutive pairs were chopped",
    CHAT_DE: "chặt đè: a chop was chopped back; the last chopped pays the last chopper",
    TOI_TRANG: "tới trắng: an instant win at the deal",
    THANG_TRANG: "thắng trắng: an instant win at the deal",
    SAM_SUCCESS: "báo Sâm succeeded",
    SAM_FAILED: "báo Sâm failed: the declarer pays the catcher",
    DEN_TRANG: "đền trắng: did not block, pays for every loser",
    DEN_BAO: "đền báo: declared Sâm, then left",
    DUT_BA_BICH: "đút 3 bích: went out on the 3♠ (variant, off by default)",
    THOI_BA_BICH: "thối 3 bích: kept the 3♠ for last and failed; pays the village (variant, off by default)",
    LEAVE_PENALTY: "rời bàn: left the table mid-hand",
}

# How a chop is priced: by the converted value of what was chopped (Tiến Lên 9.4), or by a
# price per kind of chop (Sâm Lốc 4.4).
CONVERTED_VALUE: Final = "converted_value"
CHOP_PRICE: Final = "chop_price"


@dataclass(frozen=True, slots=True)
class SheddingRules:
    """One game's combinations, chops and penalty figures, as data.

    Amounts are in lá (units of the stake S). Build a variant with ``dataclasses.replace``;
    the game modules map their named options (RULES.md 0.1) onto these fields.
    """

    game_id: str
    hand_cards: int
    # Strength of each canonical suit index (♠ ♣ ♦ ♥); all zero where suits are not ranked.
    suit_strength: tuple[int, int, int, int]
    # Sâm Lốc SL-3: A and 2 may sit at the low end of a straight (A-2-3, 2-3-4 …).
    low_straights: bool
    pairs_runs: bool
    two_fours: bool
    # (chopper shape, shapes it chops). Closed lists: TL-17, SL-20.
    chops: tuple[tuple[str, tuple[str, ...]], ...]
    # Converted value of a 2 left in hand or chopped: black, red (9.4; SL-7).
    two_black_stakes: int
    two_red_stakes: int
    # Tiến Lên 9.4: converted value of a group left in hand or chopped. Empty in Sâm Lốc,
    # where a tứ quý left in hand is four ordinary cards (SL-17).
    group_stakes: tuple[tuple[str, int], ...]
    # Tiến Lên 9.4: a group left in hand is thối at its value. Sâm Lốc SL-17: never.
    groups_left_are_thoi: bool
    chop_pricing: str  # CONVERTED_VALUE or CHOP_PRICE
    instant_win_reason: str  # TOI_TRANG or THANG_TRANG
    # Sâm Lốc chop prices (4.4): a tứ quý on a 2, four aces on a 2 (SL-5), two tứ quý on a
    # pair of 2s (SL-4); a tứ quý on a led tứ quý (SL-6). Zero in Tiến Lên, which prices a
    # chop by what was chopped (9.4).
    chop_two_stakes: int = 0
    chop_two_by_four_aces_stakes: int = 0
    chop_pair_of_twos_stakes: int = 0
    chop_led_four_stakes: int = 0
    chop_led_two_fours_stakes: int = 0
    # Sâm Lốc SL-19: a đè chain pays the sum of the chops it overrode (False: only the last
    # overridden chop, SL-6 alone).
    chop_chain_sums: bool = True
    # Sâm Lốc SL-7 (b): a play that empties the hand may not contain a 2.
    no_two_in_last_play: bool = False
    # Flat amounts, each from every other player unless said otherwise.
    instant_win_stakes: int = 0
    instant_win_rank_mode_stakes: int = 0
    treo_stakes: int = 0  # Sâm Lốc SL-14: played no card, replaces the count
    cong_multiplier: int = 1  # Tiến Lên TL-4: played no card, the count × this
    # Instant wins (tới trắng / thắng trắng) at the deal, in the order they are tested.
    instant_wins: tuple[str, ...] = ()
    # Tiến Lên 9.6 #2 (not applied, default off): first-hand instant wins.
    first_hand_instant_wins: tuple[str, ...] = ()
    four_counts_as_two_pairs: bool = True  # TL-15 (and the same reading for Sâm's 5 đôi)
    rule_ids: tuple[tuple[str, str], ...] = ()

    def chops_of(self, shape: str) -> tuple[str, ...]:
        """The shapes a ``shape`` may chop (empty when it chops nothing)."""
        for chopper, chopped in self.chops:
            if chopper == shape:
                return chopped
        return ()

    def group_value(self, shape: str) -> int:
        """Tiến Lên's converted value of a group (9.4), 0 for a group with none."""
        for name, stakes in self.group_stakes:
            if name == shape:
                return stakes
        return 0

    def rule(self, reason: str) -> str:
        """The RULES.md id of ``reason`` in this game."""
        for name, rule_id in self.rule_ids:
            if name == reason:
                return rule_id
        check(False, f"{self.game_id} has no rule for reason {reason!r}")
        return ""


# --- the two games --------------------------------------------------------------------------

# Tiến Lên's own suit order (0.5, 9.1): ♥ > ♦ > ♣ > ♠, by canonical index ♠ ♣ ♦ ♥.
TIENLEN_SUIT_STRENGTH: Final = (0, 1, 2, 3)
# Sâm Lốc does not distinguish suits (4.1).
SAMLOC_SUIT_STRENGTH: Final = (0, 0, 0, 0)

# Tới trắng and thắng trắng kinds (9.1, 9.6 #2; SL-8).
SANH_RONG: Final = "sanh_rong"
NAM_DOI_THONG: Final = "nam_doi_thong"
SAU_DOI: Final = "sau_doi"
TU_QUY_HEO: Final = "tu_quy_heo"
TU_QUY_BA: Final = "tu_quy_ba"
DOI_THONG_BA_BICH: Final = "doi_thong_ba_bich"
NAM_DOI: Final = "nam_doi"
BA_SAM: Final = "ba_sam"
DONG_MAU: Final = "dong_mau"

TIENLEN: Final = SheddingRules(
    game_id="tienlen",
    hand_cards=13,
    suit_strength=TIENLEN_SUIT_STRENGTH,
    low_straights=False,
    pairs_runs=True,
    two_fours=False,
    # The chặt table of 9.2, a closed list (TL-17). Bốn đôi thông restoring a passed turn
    # is not applied (TL-8). Five or more pairs chop nothing (TL-19).
    chops=(
        ("pairs_run3", (SHAPE_TWO, "pairs_run3")),
        (FOUR, (SHAPE_TWO, SHAPE_PAIR_OF_TWOS, "pairs_run3", FOUR)),
        ("pairs_run4", (SHAPE_TWO, SHAPE_PAIR_OF_TWOS, "pairs_run3", FOUR, "pairs_run4")),
    ),
    two_black_stakes=5,
    two_red_stakes=10,
    group_stakes=(("pairs_run3", 10), (FOUR, 20), ("pairs_run4", 30)),
    groups_left_are_thoi=True,
    chop_pricing=CONVERTED_VALUE,
    instant_win_reason=TOI_TRANG,
    instant_win_stakes=26,  # count mode (9.1, TL-3)
    instant_win_rank_mode_stakes=2,  # rank mode (9.4 ranking table, TL-3)
    cong_multiplier=1,  # TL-4; the "× 2" flag sets 2
    instant_wins=(SANH_RONG, NAM_DOI_THONG, SAU_DOI, TU_QUY_HEO),
    first_hand_instant_wins=(),  # 9.6 #2 not applied: (TU_QUY_BA, DOI_THONG_BA_BICH)
    rule_ids=(
        (CARDS_LEFT, "9.4"),
        (THOI_HEO_DEN, "9.4"),
        (THOI_HEO_DO, "9.4"),
        (THOI_BA_DOI_THONG, "9.4"),
        (THOI_TU_QUY, "9.4"),
        (THOI_BON_DOI_THONG, "9.4"),
        (CONG, "TL-4"),
        (CHAT_HEO_DEN, "9.4"),
        (CHAT_HEO_DO, "9.4"),
        (CHAT_DOI_HEO, "9.4"),
        (CHAT_BA_DOI_THONG, "9.4"),
        (CHAT_TU_QUY, "9.4"),
        (CHAT_BON_DOI_THONG, "9.4"),
        (CHAT_DE, "TL-6"),
        (TOI_TRANG, "TL-3"),
        (DUT_BA_BICH, "TL-13"),
        (THOI_BA_BICH, "TL-13"),
    ),
)

SAMLOC: Final = SheddingRules(
    game_id="samloc",
    hand_cards=10,
    suit_strength=SAMLOC_SUIT_STRENGTH,
    low_straights=True,
    pairs_runs=False,
    two_fours=True,
    # 4.2 and SL-4, SL-20: one tứ quý chops a single 2 or a lower tứ quý; two tứ quý played
    # together chop a pair of 2s (or lower two tứ quý); nothing chops three 2s.
    chops=(
        (FOUR, (SHAPE_TWO, FOUR)),
        (TWO_FOURS, (SHAPE_PAIR_OF_TWOS, TWO_FOURS)),
    ),
    two_black_stakes=5,
    two_red_stakes=10,
    group_stakes=(),
    groups_left_are_thoi=False,
    chop_pricing=CHOP_PRICE,
    instant_win_reason=THANG_TRANG,
    chop_two_stakes=20,
    chop_two_by_four_aces_stakes=40,
    chop_pair_of_twos_stakes=40,
    chop_led_four_stakes=20,
    chop_led_two_fours_stakes=40,
    no_two_in_last_play=True,
    instant_win_stakes=20,
    instant_win_rank_mode_stakes=20,
    treo_stakes=15,
    instant_wins=(SANH_RONG, TU_QUY_HEO, NAM_DOI, BA_SAM, DONG_MAU),
    rule_ids=(
        (CARDS_LEFT, "4.4"),
        (THOI_HEO_DEN, "SL-7"),
        (THOI_HEO_DO, "SL-7"),
        (TREO, "SL-14"),
        (CHAT_HEO, "4.4"),
        (CHAT_HEO_TU_QUY_A, "SL-5"),
        (CHAT_DOI_HEO, "SL-4"),
        (CHAT_TU_QUY, "SL-6"),
        (CHAT_HAI_TU_QUY, "SL-6"),
        (CHAT_DE, "SL-19"),
        (THANG_TRANG, "SL-8"),
        (SAM_SUCCESS, "SL-9"),
        (SAM_FAILED, "SL-9"),
        (DEN_TRANG, "SL-10"),
        (DEN_BAO, "SL-12"),
        (LEAVE_PENALTY, "SL-21"),
    ),
)

# Sâm Lốc's flat amounts (4.4).
SAM_STAKES_PER_PLAYER: Final = 25
LEAVE_STAKES_PER_PLAYER: Final = 10


# --- combinations ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Combination:
    """Cards that form one play: ``kind`` (one of ``KINDS``) and its strength.

    ``cards`` run weakest first. ``key`` orders combinations of one ``shape``: higher beats
    lower. ``shape`` is the kind refined where chopping cares (``two``, ``pair_of_twos``,
    ``pairs_run3`` …). ``game_id`` says which game's rules built it.
    """

    kind: str
    cards: tuple[Card, ...]
    key: tuple[int, ...]
    shape: str
    game_id: str

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, kind: str, cards: tuple[Card, ...], key: tuple[int, ...], shape: str, game_id: str) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "cards", cards)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "game_id", game_id)

    def __str__(self) -> str:
        return f"{self.kind} {' '.join(str(c) for c in self.cards)}"


def _strength(card: Card, rules: SheddingRules) -> tuple[int, int]:
    return _RANK_ORDER[card.rank], rules.suit_strength[card.suit]


def _sort_key(card: Card, rules: SheddingRules) -> tuple[int, int, int]:
    # Canonical suit last, so that equal-strength Sâm Lốc cards still sort one way.
    return _RANK_ORDER[card.rank], rules.suit_strength[card.suit], card.suit


def _top(cards: Sequence[Card], rules: SheddingRules) -> tuple[int, int]:
    return max(_strength(c, rules) for c in cards)


def _build(kind: str, cards: Sequence[Card], rules: SheddingRules, *, presorted: bool = False) -> Combination:
    """A combination of ``kind`` from cards already known to form it (no checks).

    ``presorted``: the cards are already weakest first (the generators build them so).
    """
    ordered = tuple(cards) if presorted else tuple(sorted(cards, key=lambda c: _sort_key(c, rules)))
    shape = kind
    if kind == STRAIGHT:
        ordered, key = _straight_order(ordered, rules)
    elif kind == TWO_FOURS:
        key = (_RANK_ORDER[ordered[-1].rank], _RANK_ORDER[ordered[0].rank])
    else:
        key = _top(ordered, rules)
    if kind == SINGLE and ordered[0].rank == TWO:
        shape = SHAPE_TWO
    elif kind == PAIR and ordered[0].rank == TWO:
        shape = SHAPE_PAIR_OF_TWOS
    elif kind == PAIRS_RUN:
        shape = f"{PAIRS_RUN}{len(ordered) // 2}"
    return Combination(kind, ordered, key, shape, rules.game_id)


def _straight_order(cards: tuple[Card, ...], rules: SheddingRules) -> tuple[tuple[Card, ...], tuple[int, ...]]:
    """Cards of a straight in playing order and its key (top card; A and 2 low at the bottom)."""
    if rules.low_straights and any(c.rank == TWO for c in cards):
        # A low straight (SL-3): A counts below 2, 2 below 3, and the top is the last card.
        low = {ACE: -2, TWO: -1}
        ordered = tuple(sorted(cards, key=lambda c: (low.get(c.rank, _RANK_ORDER[c.rank]), c.suit)))
        return ordered, (_RANK_ORDER[ordered[-1].rank], 0)
    return cards, _strength(cards[-1], rules)


def _consecutive(orders: Sequence[int]) -> bool:
    return all(b == a + 1 for a, b in itertools.pairwise(orders))


def _is_straight(ranks: Sequence[int], rules: SheddingRules) -> bool:
    """Distinct ``ranks`` (sorted by rank order) form a straight in this game."""
    if len(ranks) < 3:
        return False
    if TWO not in ranks:
        return _consecutive([_RANK_ORDER[r] for r in ranks])
    if not rules.low_straights:
        return False  # TL-7: a 2 never sits in a straight
    low = sorted(-2 if r == ACE else -1 if r == TWO else _RANK_ORDER[r] for r in ranks)
    return _consecutive(low)  # SL-3: no wrap-around, K-A-2 is not a straight


def combo(cards: Iterable[Card], rules: SheddingRules) -> Combination | None:
    """The combination ``cards`` form in the game of ``rules``, or None.

    Kinds (TL-7, SL-2, SL-4): single; pair; triple; four (tứ quý); straight (≥ 3
    consecutive ranks: no 2 in Tiến Lên, A-2-3 and 2-3-4… allowed in Sâm Lốc, SL-3);
    pairs_run (đôi thông, ≥ 3 consecutive pairs without a 2, Tiến Lên only); two_fours
    (two tứ quý played together, Sâm Lốc only). Repeated cards form nothing.

    Every play of a replayed hand is classified here, and most are singles and pairs that
    every hand plays again: each answer is remembered (``_COMBOS``, by the cards as given and
    the fields of ``rules`` the answer depends on; at most ``COMBOS_MAX``, records frozen),
    a lookup of ~0.4 µs where classifying takes 3.5–6.5 (timeit, compiled).
    ``combo_uncached`` is the definition it is pinned to.
    """
    hand = tuple(cards)
    key = (rules.game_id, rules.suit_strength, rules.low_straights, rules.pairs_runs, rules.two_fours, hand)
    found = _COMBOS.get(key, _UNSEEN)
    if found is not _UNSEEN:
        return cast("Combination | None", found)
    made = combo_uncached(hand, rules)
    if len(_COMBOS) < COMBOS_MAX:
        _COMBOS[key] = made
    return made


# ``combo``'s answers: the plays of a Tiến Lên or Sâm Lốc session are mostly the 52 singles and
# the 78 pairs, then runs; a full map keeps what it holds and adds nothing more.
_COMBOS: Final[dict[tuple[object, ...], object]] = {}
COMBOS_MAX: Final = 8192
_UNSEEN: Final = object()


def combo_uncached(cards: Iterable[Card], rules: SheddingRules) -> Combination | None:
    """``combo``, worked out each time."""
    hand = tuple(cards)
    if not hand or len(set(hand)) != len(hand) or len(hand) > HAND_CARDS_MAX:
        return None
    by_rank: dict[int, int] = {}
    for c in hand:
        by_rank[c.rank] = by_rank.get(c.rank, 0) + 1
    counts = set(by_rank.values())
    ranks = sorted(by_rank, key=_RANK_ORDER.__getitem__)
    if len(ranks) == 1:
        return _build((SINGLE, PAIR, TRIPLE, FOUR)[len(hand) - 1], hand, rules)
    if counts == {1} and _is_straight(ranks, rules):
        return _build(STRAIGHT, hand, rules)
    if (
        rules.pairs_runs
        and counts == {2}
        and len(ranks) >= 3
        and TWO not in ranks
        and _consecutive([_RANK_ORDER[r] for r in ranks])
    ):
        return _build(PAIRS_RUN, hand, rules)
    if rules.two_fours and counts == {4} and len(ranks) == 2:
        return _build(TWO_FOURS, hand, rules)
    return None


def is_chop(play: Combination, over: Combination, rules: SheddingRules) -> bool:
    """``play`` chops ``over`` (chặt): a listed chopper on a listed victim (9.2; 4.2, SL-20)."""
    if over.shape not in rules.chops_of(play.shape):
        return False
    return play.shape != over.shape or play.key > over.key


def beats(play: Combination, over: Combination, rules: SheddingRules) -> bool:
    """``play`` may be played on ``over``: the same kind and size and stronger, or a chop.

    Strength is the top card (Tiến Lên: its rank, then its suit ♥ > ♦ > ♣ > ♠; Sâm Lốc:
    its rank only, so equal ranks never beat each other). Chops follow each game's closed
    table (9.2 and TL-17; 4.2, SL-4, SL-20).
    """
    check(play.game_id == rules.game_id and over.game_id == rules.game_id, "combinations of another game")
    if play.kind == over.kind and len(play.cards) == len(over.cards) and play.key > over.key:
        return True
    return is_chop(play, over, rules)


# --- legal plays ----------------------------------------------------------------------------


def _runs(sequence: Sequence[int], starts: Iterable[int], present: Callable[[int], bool]) -> Iterator[tuple[int, ...]]:
    """Every window of ≥ 3 ranks of ``sequence`` that begins at one of ``starts`` and is all present."""
    for start in starts:
        end = start
        while end < len(sequence) and present(sequence[end]):
            end += 1
            if end - start >= 3:
                yield tuple(sequence[start:end])


def _straight_windows(by_rank: dict[int, list[Card]], rules: SheddingRules) -> Iterator[tuple[int, ...]]:
    """Every rank sequence of a straight the hand holds, in this game."""
    yield from _runs(_RANKS_3_TO_A, range(len(_RANKS_3_TO_A)), by_rank.__contains__)
    if rules.low_straights:
        # Low straights must start at the A or the 2 (SL-3); one starting at 3 is high.
        yield from _runs((ACE, TWO, *_RANKS_3_TO_A[:-1]), (0,), by_rank.__contains__)
        yield from _runs((TWO, *_RANKS_3_TO_A[:-1]), (0,), by_rank.__contains__)


def _kinds_that_may_beat(over: Combination, rules: SheddingRules) -> set[str]:
    kinds = {over.kind}
    for chopper, chopped in rules.chops:
        if over.shape in chopped:
            kinds.add(PAIRS_RUN if chopper.startswith(PAIRS_RUN) else chopper)
    return kinds


def _chosen(by_rank: dict[int, list[Card]], rules: SheddingRules) -> Iterator[tuple[str, Sequence[Card]]]:
    """Every combination of the cards of ``by_rank`` (each rank's cards weakest first), as
    its kind and its cards in the order ``_build`` takes them (``presorted``)."""
    for rank_cards in by_rank.values():
        for size, kind in ((1, SINGLE), (2, PAIR), (3, TRIPLE), (4, FOUR)):
            if len(rank_cards) >= size:
                for chosen in itertools.combinations(rank_cards, size):
                    yield kind, chosen
    for window in _straight_windows(by_rank, rules):
        for chosen in itertools.product(*(by_rank[r] for r in window)):
            yield STRAIGHT, chosen
    if rules.pairs_runs:
        paired = {r: list(itertools.combinations(cards, 2)) for r, cards in by_rank.items() if len(cards) >= 2}
        for window in _runs(_RANKS_3_TO_A, range(len(_RANKS_3_TO_A)), paired.__contains__):
            for chosen_pairs in itertools.product(*(paired[r] for r in window)):
                yield PAIRS_RUN, [c for pair in chosen_pairs for c in pair]
    if rules.two_fours:
        fours = [cards for cards in by_rank.values() if len(cards) == 4]
        for a, b in itertools.combinations(fours, 2):
            yield TWO_FOURS, (*a, *b)


def play_order(c: Combination) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """The order ``legal_plays`` lists combinations in: kind, size, strength, cards."""
    return (_KIND_ORDER[c.kind], len(c.cards), c.key, tuple(card.index for card in c.cards))


def card_mask(cards: Iterable[Card]) -> int:
    """``cards`` as a bit mask: bit ``card.index`` for each card."""
    mask = 0
    for c in cards:
        mask |= 1 << ((c.rank - 2) * 4 + c.suit)  # Card.index, without the property call
    return mask


@dataclass(frozen=True, slots=True, init=False)
class HandPlays:
    """Every combination the cards of one hand form (``hand_plays``), in the game of
    ``rules``: ``by_kind`` lists each kind's in ``play_order``, each with its cards as a
    ``card_mask``; ``mask`` is the hand's.

    The plays of any part of the hand are those whose cards it still holds, so the plays
    of a seat's dealt hand, worked out once, answer every later turn of the seat by a
    filter (``legal_plays``' ``within``): a seat's cards only ever shrink."""

    rules: SheddingRules
    mask: int
    by_kind: Mapping[str, tuple[tuple[int, Combination], ...]]

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(
        self, rules: SheddingRules, mask: int, by_kind: Mapping[str, tuple[tuple[int, Combination], ...]]
    ) -> None:
        object.__setattr__(self, "rules", rules)
        object.__setattr__(self, "mask", mask)
        object.__setattr__(self, "by_kind", by_kind)


def hand_plays(hand: Iterable[Card], rules: SheddingRules) -> HandPlays:
    """Every combination ``hand`` forms (``HandPlays``). Raises RuleViolation for more than
    ``HAND_CARDS_MAX`` cards or a card twice."""
    cards = tuple(hand)
    check(len(cards) <= HAND_CARDS_MAX and len(set(cards)) == len(cards), "a hand of at most 13 distinct cards")
    return _hand_plays(card_mask(cards), rules)


# The plays of the last hands asked about, by their cards (a seat asked again before it
# plays, a replayed pass checked for an answer). Bounded; pure.
@lru_cache(maxsize=1024)
def _hand_plays(mask: int, rules: SheddingRules) -> HandPlays:
    by_rank: dict[int, list[Card]] = {}
    held = (card_from_index(i) for i in range(52) if mask >> i & 1)
    for c in sorted(held, key=lambda c: _sort_key(c, rules)):
        by_rank.setdefault(c.rank, []).append(c)
    built = _built.get(rules)
    if built is None or len(built) >= BUILT_MAX:
        built = _built[rules] = {}
    found = []
    for kind, chosen in _chosen(by_rank, rules):
        play_mask = card_mask(chosen)
        entry = built.get(play_mask)
        if entry is None:
            play = _build(kind, chosen, rules, presorted=True)
            entry = built[play_mask] = (play_order(play), play_mask, play)
        found.append(entry)
    found.sort()  # by play_order, which no two combinations share (it ends with the cards)
    by_kind: dict[str, list[tuple[int, Combination]]] = {}
    for _, play_mask, play in found:
        by_kind.setdefault(play.kind, []).append((play_mask, play))
    return HandPlays(rules, mask, MappingProxyType({kind: tuple(plays) for kind, plays in by_kind.items()}))


# Every combination ``_hand_plays`` built, with its ``play_order``, by its cards' mask under
# each rules (equal rules share): the same singles, pairs and runs come back hand after
# hand, and a combination is a value (frozen), so one object serves every hand. Emptied
# when full.
BUILT_MAX: Final = 1 << 16
_built: dict[SheddingRules, dict[int, tuple[tuple[int, int, tuple[int, ...], tuple[int, ...]], int, Combination]]] = {}


def legal_plays(
    hand: Iterable[Card],
    over: Combination | None,
    rules: SheddingRules,
    *,
    highest_single_only: bool = False,
    must_include: Card | None = None,
    within: HandPlays | None = None,
) -> tuple[Combination, ...]:
    """Every combination ``hand`` may play on ``over`` (None: leading), in ``play_order``.

    Bounded by the hand (at most ``HAND_CARDS_MAX`` cards) and deterministic. Game rules that
    need only cards are applied here: Sâm Lốc's SL-7 (b) (no 2 in a play that empties the
    hand); ``highest_single_only`` for Sâm Lốc's báo 1 (SL-11: a single must be of the
    highest rank held); ``must_include`` for a first lead that must hold a card (TL-12 flag).

    ``within``: the plays of a hand that holds every card of ``hand`` (``hand_plays`` of
    the seat's dealt hand), filtered instead of working the combinations out again; the
    answer is the same with or without it, and it is ignored when it does not hold
    ``hand`` or was built under other rules.
    """
    cards = tuple(hand)
    check(len(cards) <= HAND_CARDS_MAX and len(set(cards)) == len(cards), "a hand of at most 13 distinct cards")
    if over is not None:
        check(over.game_id == rules.game_id, "a combination of another game")
    mask = card_mask(cards)
    if within is None or within.mask & mask != mask or (within.rules is not rules and within.rules != rules):
        within = _hand_plays(mask, rules)
    if over is None:
        kinds: Sequence[str] = KINDS
    else:
        may_beat = _kinds_that_may_beat(over, rules)
        kinds = [k for k in KINDS if k in may_beat]
    top_rank = max((_RANK_ORDER[c.rank] for c in cards), default=-1)
    no_two_in_last = rules.no_two_in_last_play
    must = 0 if must_include is None else card_mask((must_include,))
    plays = []
    for kind in kinds:
        for play_mask, candidate in within.by_kind.get(kind, ()):
            if play_mask & mask != play_mask or (must and not play_mask & must):
                continue
            if over is not None and not beats(candidate, over, rules):
                continue
            if no_two_in_last and play_mask == mask and any(c.rank == TWO for c in candidate.cards):
                continue
            if highest_single_only and kind == SINGLE and _RANK_ORDER[candidate.cards[0].rank] != top_rank:
                continue
            plays.append(candidate)
    return tuple(plays)


def has_answer(hand: Iterable[Card], over: Combination, rules: SheddingRules) -> bool:
    """``hand`` holds a play that beats ``over``: a pass then marks the player (đền trắng, SL-10)."""
    return bool(legal_plays(hand, over, rules))


def lowest_card_holder(hands: Sequence[Iterable[Card]], rules: SheddingRules) -> int:
    """Index of the hand holding the weakest card: 3♠, else 3♣, 3♦, 3♥, 4♠ … (9.1, TL-1)."""
    held = [(min(_sort_key(c, rules) for c in hand), i) for i, hand in enumerate(map(tuple, hands)) if hand]
    check(bool(held), "at least one hand holds cards")
    return min(held)[1]


# --- penalties ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class CountLine:
    """One line of what a loser's cards cost: ``amount_stakes`` lá for ``reason`` (rule ``rule``)."""

    reason: str
    rule: str
    amount_stakes: int
    cards: tuple[Card, ...]

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, reason: str, rule: str, amount_stakes: int, cards: tuple[Card, ...]) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "amount_stakes", amount_stakes)
        object.__setattr__(self, "cards", cards)


@dataclass(frozen=True, slots=True, init=False)
class HandCount:
    """What the cards left in a loser's hand cost, in lá, line by line."""

    total_stakes: int
    lines: tuple[CountLine, ...]

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, total_stakes: int, lines: tuple[CountLine, ...]) -> None:
        object.__setattr__(self, "total_stakes", total_stakes)
        object.__setattr__(self, "lines", lines)


@dataclass(frozen=True, slots=True)
class Penalty:
    """``payer`` pays ``payee`` ``amount_stakes`` × S for ``reason`` (RULES.md ``rule``).

    ``cards`` are the cards that caused it (the chopped play for a chop).
    """

    payer: int
    payee: int
    amount_stakes: int
    reason: str
    rule: str
    cards: tuple[Card, ...] = ()


def _two_line(card: Card, rules: SheddingRules, red: str, black: str) -> CountLine:
    reason = red if card.is_red else black
    amount = rules.two_red_stakes if card.is_red else rules.two_black_stakes
    return CountLine(reason, rules.rule(reason), amount, (card,))


@lru_cache(maxsize=4096)
def _best_groups(counts: tuple[int, ...], values: tuple[int, int, int]) -> tuple[str, ...]:
    """The most valuable way to read the ranks of ``counts`` (3…A) as Tiến Lên groups.

    Returns the groups chosen (``four:i`` and ``run3:i`` / ``run4:i`` starting at rank index
    i) for the highest total, every card outside a group at 1 lá (TL-5). The search is over
    at most 12 ranks of at most 4 cards, memoised per call, and its answers are kept: a pure
    function of two tuples, asked for every loser of every hand a replay settles.
    """
    run3, four, run4 = values
    memo: dict[tuple[tuple[int, ...], int], tuple[int, tuple[str, ...]]] = {}

    def best(counts: tuple[int, ...], start: int) -> tuple[int, tuple[str, ...]]:
        if start == len(counts):
            return 0, ()
        found = memo.get((counts, start))
        if found is not None:
            return found
        here = counts[start]
        value, groups = best(counts, start + 1)
        result = (here + value, groups)
        if here == 4:
            value, groups = best((*counts[:start], 0, *counts[start + 1 :]), start + 1)
            result = max(result, (four + value, (f"four:{start}", *groups)))
        for length, worth in ((3, run3), (4, run4)):
            window = range(start, start + length)
            if start + length <= len(counts) and all(counts[i] >= 2 for i in window):
                rest = tuple(n - 2 if i in window else n for i, n in enumerate(counts))
                value, groups = best(rest, start)
                result = max(result, (worth + value, (f"run{length}:{start}", *groups)))
        memo[(counts, start)] = result
        return result

    return best(counts, 0)[1]


def count_left(hand: Iterable[Card], rules: SheddingRules, *, played_any: bool = True) -> HandCount:
    """What a loser's cards left cost the player, in lá, with one line per reason.

    Tiến Lên (9.4, TL-5, TL-14, TL-4): each 2 is 5 (black) or 10 (red); groups count at their
    converted value instead of 1 per card (ba đôi thông 10, tứ quý 20, bốn đôi thông 30;
    five or more pairs are read as the best split), choosing the split with the highest
    total; every other card 1. A player who played no card (cóng) pays the count times
    ``cong_multiplier`` (1 by default).

    Sâm Lốc (4.4, SL-7, SL-17, SL-14): each card 1, a 2 is 5 (black) or 10 (red) instead; a
    tứ quý left (even of 2s) is four ordinary cards; a player who played no card (treo) pays
    a flat 15 instead.
    """
    cards = tuple(sorted(hand, key=lambda c: _sort_key(c, rules)))
    if not played_any and rules.treo_stakes:
        return HandCount(rules.treo_stakes, (CountLine(TREO, rules.rule(TREO), rules.treo_stakes, cards),))
    by_rank: dict[int, list[Card]] = {}
    for c in cards:
        by_rank.setdefault(c.rank, []).append(c)
    lines: list[CountLine] = []
    ordinary: list[Card] = []
    twos = by_rank.pop(TWO, [])
    if rules.groups_left_are_thoi:
        lines.extend(_two_line(c, rules, THOI_HEO_DO, THOI_HEO_DEN) for c in twos)  # TL-14: four 2s too
        values = (rules.group_value("pairs_run3"), rules.group_value(FOUR), rules.group_value("pairs_run4"))
        counts = tuple(len(by_rank.get(r, ())) for r in _RANKS_3_TO_A)
        groups = _best_groups(counts, values)
        left = {r: list(cs) for r, cs in by_rank.items()}
        for group in groups:
            name, _, index = group.partition(":")
            start = int(index)
            if name == "four":
                taken = [left[_RANKS_3_TO_A[start]].pop() for _ in range(4)]
                lines.append(CountLine(THOI_TU_QUY, rules.rule(THOI_TU_QUY), values[1], tuple(taken)))
            else:
                length = int(name[-1])
                taken = [left[r].pop() for r in _RANKS_3_TO_A[start : start + length] for _ in range(2)]
                reason = THOI_BA_DOI_THONG if length == 3 else THOI_BON_DOI_THONG
                worth = values[0] if length == 3 else values[2]
                ordered = tuple(sorted(taken, key=lambda c: _sort_key(c, rules)))
                lines.append(CountLine(reason, rules.rule(reason), worth, ordered))
        kept = {c for rank_cards in left.values() for c in rank_cards}
        ordinary = [c for c in cards if c in kept]
    else:
        if len(twos) == 4:
            ordinary.extend(twos)  # SL-17: a tứ quý is never thối, even four 2s
        else:
            lines.extend(_two_line(c, rules, THOI_HEO_DO, THOI_HEO_DEN) for c in twos)
        ordinary = [c for c in cards if c.rank != TWO] + ordinary
    if ordinary:
        lines.insert(0, CountLine(CARDS_LEFT, rules.rule(CARDS_LEFT), len(ordinary), tuple(ordinary)))
    total = sum(line.amount_stakes for line in lines)
    if not played_any and rules.cong_multiplier > 1:
        extra = total * (rules.cong_multiplier - 1)
        lines.append(CountLine(CONG, rules.rule(CONG), extra, cards))
        total += extra
    return HandCount(total, tuple(lines))


# --- chops ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Play:
    """One play of a round: ``seat`` played ``combination``."""

    seat: int
    combination: Combination

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, seat: int, combination: Combination) -> None:
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "combination", combination)


def chop_chain(plays: Sequence[Play], rules: SheddingRules) -> tuple[Play, ...]:
    """The chop chain of one round: the first chopped play and every play after it.

    ``plays`` are a round's plays in order, each beating the one before. Empty when nothing
    was chopped. Once a play is chopped every later play of the round is a chop too (each
    game's chop table only lets choppers follow choppers), which is checked.
    """
    for before, after in itertools.pairwise(plays):
        if not beats(after.combination, before.combination, rules):  # the message only on failure
            broken(f"{after.combination} does not beat {before.combination}")
    for i in range(1, len(plays)):
        if is_chop(plays[i].combination, plays[i - 1].combination, rules):
            chain = tuple(plays[i - 1 :])
            check(
                all(is_chop(b.combination, a.combination, rules) for a, b in itertools.pairwise(chain)),
                "a chop chain is all chops",
            )
            return chain
    return ()


def _tienlen_chopped_value(combination: Combination, rules: SheddingRules) -> tuple[int, str]:
    """Tiến Lên: what a chopped play costs, its converted value (9.4)."""
    if combination.kind in (SINGLE, PAIR):
        check(combination.cards[0].rank == TWO, "only 2s are chopped as singles or pairs")
        amount = sum(rules.two_red_stakes if c.is_red else rules.two_black_stakes for c in combination.cards)
        if combination.kind == PAIR:
            return amount, CHAT_DOI_HEO
        return amount, CHAT_HEO_DO if combination.cards[0].is_red else CHAT_HEO_DEN
    reason = {"pairs_run3": CHAT_BA_DOI_THONG, FOUR: CHAT_TU_QUY, "pairs_run4": CHAT_BON_DOI_THONG}
    return rules.group_value(combination.shape), reason[combination.shape]


def _samloc_chop_values(chain: Sequence[Combination], rules: SheddingRules) -> list[tuple[int, str]]:
    """Sâm Lốc: the price of each chop of the chain (4.4, SL-4, SL-5, SL-6)."""
    values: list[tuple[int, str]] = []
    for over, play in itertools.pairwise(chain):
        if over.shape == SHAPE_TWO:
            if play.cards[0].rank == ACE:
                values.append((rules.chop_two_by_four_aces_stakes, CHAT_HEO_TU_QUY_A))
            else:
                values.append((rules.chop_two_stakes, CHAT_HEO))
        elif over.shape == SHAPE_PAIR_OF_TWOS:
            values.append((rules.chop_pair_of_twos_stakes, CHAT_DOI_HEO))
        elif values:
            # Đè: the over-chopped player owes the value of the chop that was overridden.
            values.append((values[-1][0], CHAT_DE))
        elif over.kind == FOUR:
            values.append((rules.chop_led_four_stakes, CHAT_TU_QUY))
        else:
            values.append((rules.chop_led_two_fours_stakes, CHAT_HAI_TU_QUY))
    return values


def chop_penalty(plays: Sequence[Play], rules: SheddingRules) -> Penalty | None:
    """What the round's chop chain costs: the last chopped player pays the last chopper.

    Tiến Lên (9.4, TL-6): the sum of the converted values of everything chopped in the
    chain (the first 2s and each group chopped in turn); earlier chops are void.
    Example: 2♥ (10) chopped by ba đôi thông (10) chopped by tứ quý: 20 lá from the ba đôi
    thông to the tứ quý.

    Sâm Lốc (4.4, SL-5, SL-6, SL-19): one chop pays its price (20, four aces on a 2 40, two
    tứ quý on a pair of 2s 40, a tứ quý on a led tứ quý 20). A đè chain pays the sum of the
    chops it overrode, each priced at the chop it overrode, so the source's example (four
    3s chop 2♥, four 4s chop the four 3s) costs the four 3s 20 lá and the 2♥ nothing.

    None when the round has no chop. Seats are ``Play.seat`` as given.
    """
    chain = chop_chain(plays, rules)
    if not chain:
        return None
    payer, payee = chain[-2], chain[-1]
    combinations = [p.combination for p in chain]
    if rules.chop_pricing == CONVERTED_VALUE:
        valued = [_tienlen_chopped_value(c, rules) for c in combinations[:-1]]
        amount = sum(v for v, _ in valued)
        reason = valued[0][1] if len(valued) == 1 else CHAT_DE
    else:
        if rules.chop_pricing != CHOP_PRICE:  # formats the message only on failure
            broken(f"unknown chop pricing {rules.chop_pricing!r}")
        prices = _samloc_chop_values(combinations, rules)
        overridden = prices[:-1] if len(prices) > 1 else prices
        if not rules.chop_chain_sums:
            overridden = overridden[-1:]
        amount = sum(v for v, _ in overridden)
        reason = prices[0][1] if len(prices) == 1 else CHAT_DE
        if len(prices) == 2:
            # The source's đè example (SL-6); longer chains are SL-19's.
            return Penalty(payer.seat, payee.seat, amount, reason, "SL-6", payer.combination.cards)
    return Penalty(payer.seat, payee.seat, amount, reason, rules.rule(reason), payer.combination.cards)


# --- instant wins ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InstantWin:
    """A hand that wins at the deal: ``kind`` (e.g. ``sanh_rong``) under RULES.md ``rule``."""

    kind: str
    rule: str


def _pairs(counts: dict[int, int], rules: SheddingRules) -> int:
    # TL-15: a tứ quý counts as two pairs; a triple holds one.
    return sum(2 if n == 4 and rules.four_counts_as_two_pairs else n // 2 for n in counts.values())


def _instant_win_test(kind: str, cards: tuple[Card, ...], counts: dict[int, int], rules: SheddingRules) -> bool:
    if kind == SANH_RONG:
        if rules.low_straights:  # Sâm Lốc: all ten cards one straight (SL-8)
            found = combo_uncached(cards, rules)  # a whole hand: not worth keeping in combo's map
            return found is not None and found.kind == STRAIGHT
        return all(r in counts for r in _RANKS_3_TO_A)  # TL-20: 3…A, the 13th card free
    if kind == NAM_DOI_THONG:  # TL-7: five consecutive pairs without a 2
        return any(all(counts.get(r, 0) >= 2 for r in _RANKS_3_TO_A[i : i + 5]) for i in range(len(_RANKS_3_TO_A) - 4))
    if kind == SAU_DOI:
        return _pairs(counts, rules) >= 6
    if kind == NAM_DOI:
        return _pairs(counts, rules) >= 5
    if kind == TU_QUY_HEO:
        return counts.get(TWO, 0) == 4
    if kind == BA_SAM:  # three triples; a tứ quý holds one
        return sum(1 for n in counts.values() if n >= 3) >= 3
    if kind == DONG_MAU:
        return len({c.is_red for c in cards}) == 1
    if kind == TU_QUY_BA:
        return counts.get(3, 0) == 4
    if kind == DOI_THONG_BA_BICH:  # 9.6 #2: three consecutive pairs 3-4-5 holding the 3♠
        return Card(3, 0) in cards and all(counts.get(r, 0) >= 2 for r in (3, 4, 5))
    check(False, f"unknown instant win {kind!r}")
    return False


def instant_win(hand: Iterable[Card], rules: SheddingRules, *, first_hand: bool = False) -> InstantWin | None:
    """The instant win a dealt hand holds, or None (9.1, TL-15, TL-20; SL-8).

    Tiến Lên (tới trắng): sảnh rồng (3…A), năm đôi thông, sáu đôi (a tứ quý counts as two
    pairs), tứ quý heo; in the first hand also ``first_hand_instant_wins`` (9.6 #2, off).
    Sâm Lốc (thắng trắng): a 10-card straight, four 2s, five pairs, three triples, one colour.
    The first kind in the game's list that the hand holds is returned.
    """
    cards = tuple(hand)
    if len(cards) != rules.hand_cards:
        return None
    counts: dict[int, int] = {}
    for c in cards:
        counts[c.rank] = counts.get(c.rank, 0) + 1
    kinds = rules.instant_wins + (rules.first_hand_instant_wins if first_hand else ())
    reason = rules.instant_win_reason
    for kind in kinds:
        if _instant_win_test(kind, cards, counts, rules):
            first = kind in (TU_QUY_BA, DOI_THONG_BA_BICH)
            return InstantWin(kind, "9.6" if first else "9.1" if reason == TOI_TRANG else rules.rule(reason))
    return None


def instant_winner(hands: Sequence[Iterable[Card]], rules: SheddingRules, *, first_hand: bool = False) -> int | None:
    """Index of the first hand, in the turn order given, that wins at the deal (TL-9)."""
    for i, hand in enumerate(hands):
        if instant_win(hand, rules, first_hand=first_hand) is not None:
            return i
    return None


def instant_win_penalties(
    winner: int, others: Sequence[int], rules: SheddingRules, *, settlement_mode: str = COUNT
) -> tuple[Penalty, ...]:
    """Each other player pays the instant winner, no thối counted (TL-3, TL-10; SL-8).

    Tiến Lên: 26 lá each in count mode, 2 in rank mode. Sâm Lốc: 20 lá each.
    """
    check(settlement_mode in SETTLEMENT_MODES, f"unknown settlement mode {settlement_mode!r}")
    amount = rules.instant_win_stakes if settlement_mode == COUNT else rules.instant_win_rank_mode_stakes
    reason = rules.instant_win_reason
    return tuple(Penalty(seat, winner, amount, reason, rules.rule(reason)) for seat in others if seat != winner)


# --- Tiến Lên's 3♠ variants (9.6 #3 and #4, not applied, TL-13) ----------------------------

DUT_BA_BICH_STAKES: Final = 26


def _twos_value(hand: Iterable[Card], rules: SheddingRules) -> int:
    """H: the converted value of the 2s in a hand (5 per black 2, 10 per red 2)."""
    return sum(rules.two_red_stakes if c.is_red else rules.two_black_stakes for c in hand if c.rank == TWO)


def dut_ba_bich_penalties(winner: int, other_hands: Mapping[int, Iterable[Card]]) -> tuple[Penalty, ...]:
    """Đút 3 Bích (9.6 #3, off by default): each other player i pays (26 + H_i) lá (TL-13).

    H_i is the converted value of the 2s in i's hand; nothing else in it is counted.
    """
    rule = TIENLEN.rule(DUT_BA_BICH)
    return tuple(
        Penalty(seat, winner, DUT_BA_BICH_STAKES + _twos_value(hand, TIENLEN), DUT_BA_BICH, rule)
        for seat, hand in other_hands.items()
        if seat != winner
    )


def thoi_ba_bich_penalty(offender: int, cuu_lang: int, other_hands: Mapping[int, Iterable[Card]]) -> Penalty:
    """Thối 3 Bích (9.6 #4, off by default): the offender pays the Cứu Làng player, for the
    whole village, the sum over every other player i of (26 + H_i) lá (TL-13).

    ``other_hands`` are the hands of every player but the offender, the Cứu Làng player's
    included (the source's 3-player example: 2 × 26 lá when nobody holds a 2).
    """
    check(offender not in other_hands and cuu_lang in other_hands, "the village is everyone but the offender")
    amount = sum(DUT_BA_BICH_STAKES + _twos_value(hand, TIENLEN) for hand in other_hands.values())
    return Penalty(offender, cuu_lang, amount, THOI_BA_BICH, TIENLEN.rule(THOI_BA_BICH))


# --- Sâm Lốc's flat amounts (4.4) -----------------------------------------------------------


def sam_success(declarer: int, others: Sequence[int]) -> tuple[Penalty, ...]:
    """Báo Sâm succeeds: each other player pays the declarer 25 lá (4.4, SL-9)."""
    rule = SAMLOC.rule(SAM_SUCCESS)
    return tuple(Penalty(s, declarer, SAM_STAKES_PER_PLAYER, SAM_SUCCESS, rule) for s in others if s != declarer)


def sam_failed(declarer: int, catcher: int, players: int) -> Penalty:
    """Báo Sâm fails: the declarer pays the catcher (n − 1) × 25 lá (4.4, SL-9)."""
    check(players >= 2 and declarer != catcher, "a failed Sâm has a catcher among at least two players")
    amount = (players - 1) * SAM_STAKES_PER_PLAYER
    return Penalty(declarer, catcher, amount, SAM_FAILED, SAMLOC.rule(SAM_FAILED))


def den_trang(payer: int, winner: int, players: int) -> Penalty:
    """Đền trắng: the marked player pays all the losers' Sâm, (n − 1) × 25 lá (SL-10)."""
    check(players >= 2 and payer != winner, "đền trắng is paid to another player")
    amount = (players - 1) * SAM_STAKES_PER_PLAYER
    return Penalty(payer, winner, amount, DEN_TRANG, SAMLOC.rule(DEN_TRANG))


def leave_penalties(leaver: int, others: Sequence[int], *, declared_sam: bool) -> tuple[Penalty, ...]:
    """Leaving mid-hand: 10 lá to each other player, or 25 after declaring Sâm (SL-12, SL-21)."""
    reason = DEN_BAO if declared_sam else LEAVE_PENALTY
    amount = SAM_STAKES_PER_PLAYER if declared_sam else LEAVE_STAKES_PER_PLAYER
    return tuple(Penalty(leaver, s, amount, reason, SAMLOC.rule(reason)) for s in others if s != leaver)
