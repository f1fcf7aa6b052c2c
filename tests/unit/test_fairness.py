"""Provably fair dealing (DESIGN.md "Fairness"), pinned by the vectors of FAIRNESS.md.

The test vectors are read from ``libs/socai/FAIRNESS.md`` itself, so the document cannot drift
from the code. Each vector is checked three ways: against ``socai.fairness``, against an
independent implementation written below with ``hashlib`` and ``hmac`` only, and against the
reference implementation printed in FAIRNESS.md (executed from the document).
"""

from __future__ import annotations

import hashlib
import hmac
import random
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import socai
from socai import cards, fairness
from socai.errors import InvalidArgument

FAIRNESS_MD = Path(socai.__file__).parent / "FAIRNESS.md"
DOC = FAIRNESS_MD.read_text(encoding="utf-8")
TWO_64 = 2**64

seeds_32 = st.binary(min_size=32, max_size=32)


# --- reading FAIRNESS.md ------------------------------------------------------------------


def _section(heading: str) -> str:
    """The text under the markdown heading ``heading`` up to the next heading of any level."""
    lines = DOC.splitlines()
    start = lines.index(heading)  # ValueError names the missing heading
    body = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        body.append(line)
    return "\n".join(body)


def _cell(text: str) -> str:
    text = text.strip()
    return text[1:-1] if text.startswith("`") and text.endswith("`") else text


def _table(body: str) -> list[list[str]]:
    """The data rows of the first markdown table in ``body`` (header and rule dropped)."""
    rows = [line for line in body.splitlines() if line.startswith("|")]
    assert len(rows) >= 3, "a table with a header, a rule and at least one row"
    return [[_cell(c) for c in row.strip().strip("|").split("|")] for row in rows[2:]]


SEED_HEADING = re.compile(r"^### Seed ([A-Z]): (.+)$", re.MULTILINE)
SEED_SECTIONS: dict[str, tuple[str, dict[str, str]]] = {
    m.group(1): (m.group(2), dict(_table(_section(m.group(0))))) for m in SEED_HEADING.finditer(DOC)
}
SEEDS: dict[str, bytes] = {label: bytes.fromhex(rows["seed"]) for label, (_, rows) in SEED_SECTIONS.items()}

ROW_LABELS = (
    "seed",
    "commitment",
    "HMAC block 0",
    "uniform(52), 10 draws",
    "Fisher–Yates j for i = 51 … 42",
    "52-card deck, shuffled",
    "Xì Tố deck, first 10",
    "Ba Cây deck, first 10",
    "roll_dice",
)


def _reference_namespace() -> dict[str, Any]:
    """Execute the reference implementation printed in FAIRNESS.md."""
    body = _section("## Reference implementation")
    match = re.search(r"```python\n(.*?)```", body, re.DOTALL)
    assert match is not None, "FAIRNESS.md has a python block under 'Reference implementation'"
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), str(FAIRNESS_MD), "exec"), namespace)
    return namespace


REFERENCE = _reference_namespace()


# --- an independent implementation, hashlib and hmac only ----------------------------------


class _Words:
    """8-byte big-endian words of a byte source that yields blocks of bytes."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self._blocks = blocks
        self._pending = bytearray()
        self.read = 0  # bytes consumed so far

    @classmethod
    def of_seed(cls, seed: bytes) -> _Words:
        def blocks() -> Iterator[bytes]:
            counter = 0
            while True:
                yield hmac.digest(seed, counter.to_bytes(8, "big"), "sha256")
                counter += 1

        return cls(blocks())

    def next_word(self) -> int:
        while len(self._pending) < 8:
            self._pending.extend(next(self._blocks))
        word = int.from_bytes(self._pending[:8], "big")
        del self._pending[:8]
        self.read += 8
        return word

    def uniform(self, n: int) -> int:
        rejected_from = TWO_64 - TWO_64 % n
        word = self.next_word()
        while word >= rejected_from:
            word = self.next_word()
        return word % n


def _independent_shuffle(seed: bytes, deck: Sequence[str]) -> list[str]:
    words = _Words.of_seed(seed)
    out = list(deck)
    i = len(out) - 1
    while i > 0:
        j = words.uniform(i + 1)
        out[i], out[j] = out[j], out[i]
        i -= 1
    return out


def _independent_deck(ranks: str) -> list[str]:
    return [f"{rank}{suit}" for rank in ranks for suit in ("s", "c", "d", "h")]


INDEPENDENT_DECKS = {
    "52": _independent_deck("23456789TJQKA"),
    "xito": _independent_deck("89TJQKA"),
    "bacay": _independent_deck("A23456789"),
}


# --- the vectors each implementation computes ------------------------------------------------


def _words(values: Sequence[object]) -> str:
    return " ".join(str(v) for v in values)


def _vectors_socai(seed: bytes) -> dict[str, str]:
    draws = fairness.ByteStream(seed)
    js = fairness.ByteStream(seed)
    return {
        "seed": seed.hex(),
        "commitment": fairness.commitment(seed),
        "HMAC block 0": fairness.ByteStream(seed).take(32).hex(),
        "uniform(52), 10 draws": _words([draws.uniform(52) for _ in range(10)]),
        "Fisher–Yates j for i = 51 … 42": _words([js.uniform(i + 1) for i in range(51, 41, -1)]),
        "52-card deck, shuffled": cards.format_cards(fairness.shuffle(seed, cards.deck("holdem"))),
        "Xì Tố deck, first 10": cards.format_cards(fairness.shuffle(seed, cards.deck("xito"))[:10]),
        "Ba Cây deck, first 10": cards.format_cards(fairness.shuffle(seed, cards.deck("bacay_ga"))[:10]),
        "roll_dice": _words(fairness.roll_dice(seed)),
    }


def _vectors_independent(seed: bytes) -> dict[str, str]:
    draws = _Words.of_seed(seed)
    js = _Words.of_seed(seed)
    dice = _Words.of_seed(seed)
    return {
        "seed": seed.hex(),
        "commitment": hashlib.sha256(seed).hexdigest(),
        "HMAC block 0": hmac.new(seed, b"\x00" * 8, "sha256").hexdigest(),
        "uniform(52), 10 draws": _words([draws.uniform(52) for _ in range(10)]),
        "Fisher–Yates j for i = 51 … 42": _words([js.uniform(n) for n in range(52, 42, -1)]),
        "52-card deck, shuffled": _words(_independent_shuffle(seed, INDEPENDENT_DECKS["52"])),
        "Xì Tố deck, first 10": _words(_independent_shuffle(seed, INDEPENDENT_DECKS["xito"])[:10]),
        "Ba Cây deck, first 10": _words(_independent_shuffle(seed, INDEPENDENT_DECKS["bacay"])[:10]),
        "roll_dice": _words([1 + dice.uniform(6) for _ in range(3)]),
    }


def _vectors_reference(seed: bytes) -> dict[str, str]:
    ref = REFERENCE
    first_bytes = ref["byte_stream"](seed)
    block = bytes(next(first_bytes) for _ in range(32))
    draws = ref["byte_stream"](seed)
    js = ref["byte_stream"](seed)
    return {
        "seed": seed.hex(),
        "commitment": ref["commitment"](seed),
        "HMAC block 0": block.hex(),
        "uniform(52), 10 draws": _words([ref["uniform"](draws, 52) for _ in range(10)]),
        "Fisher–Yates j for i = 51 … 42": _words([ref["uniform"](js, i + 1) for i in range(51, 41, -1)]),
        "52-card deck, shuffled": _words(ref["shuffle"](seed, ref["DECK_52"])),
        "Xì Tố deck, first 10": _words(ref["shuffle"](seed, ref["DECK_XITO"])[:10]),
        "Ba Cây deck, first 10": _words(ref["shuffle"](seed, ref["DECK_BACAY"])[:10]),
        "roll_dice": _words(ref["roll_dice"](seed)),
    }


IMPLEMENTATIONS: dict[str, Callable[[bytes], dict[str, str]]] = {
    "socai": _vectors_socai,
    "independent": _vectors_independent,
    "reference": _vectors_reference,
}


# --- the document has what it promises --------------------------------------------------------


def test_fairness_md_gives_at_least_five_seed_vectors() -> None:
    assert len(SEED_SECTIONS) >= 5


@pytest.mark.parametrize("label", sorted(SEED_SECTIONS))
def test_every_seed_vector_has_every_row_and_no_other(label: str) -> None:
    _, rows = SEED_SECTIONS[label]
    assert tuple(rows) == ROW_LABELS


@pytest.mark.parametrize("label", sorted(SEED_SECTIONS))
def test_seed_description_says_how_the_seed_bytes_are_made(label: str) -> None:
    made_by = {
        "32 zero bytes": bytes(32),
        "the bytes 0, 1, …, 31": bytes(range(32)),
        "32 bytes 0xff": b"\xff" * 32,
    }
    description, _ = SEED_SECTIONS[label]
    hashed = re.fullmatch(r'sha256\(b"(.*)"\)', description)
    expected = hashlib.sha256(hashed.group(1).encode()).digest() if hashed else made_by[description]
    assert SEEDS[label] == expected


def test_the_documented_seeds_include_the_ones_the_design_asks_for() -> None:
    assert bytes(32) in SEEDS.values()
    assert bytes(range(32)) in SEEDS.values()
    assert hashlib.sha256(b"socai").digest() in SEEDS.values()


# --- every vector, three implementations -------------------------------------------------------


@pytest.mark.parametrize("implementation", sorted(IMPLEMENTATIONS))
@pytest.mark.parametrize("label", sorted(SEED_SECTIONS))
def test_every_seed_vector_of_fairness_md_matches(label: str, implementation: str) -> None:
    _, documented = SEED_SECTIONS[label]
    assert IMPLEMENTATIONS[implementation](SEEDS[label]) == documented


@pytest.mark.parametrize("label", sorted(SEED_SECTIONS))
def test_the_first_fisher_yates_draw_is_the_first_uniform_52_draw(label: str) -> None:
    _, rows = SEED_SECTIONS[label]
    assert rows["Fisher–Yates j for i = 51 … 42"].split()[0] == rows["uniform(52), 10 draws"].split()[0]


@pytest.mark.parametrize("label", sorted(SEED_SECTIONS))
def test_the_documented_shuffle_is_a_permutation_of_the_52_cards(label: str) -> None:
    _, rows = SEED_SECTIONS[label]
    assert sorted(rows["52-card deck, shuffled"].split()) == sorted(INDEPENDENT_DECKS["52"])


# --- canonical deck orders ------------------------------------------------------------------


DECK_ROWS = {row[0]: (row[1].split(), row[2].split()) for row in _table(_section("## Canonical deck orders"))}


def test_fairness_md_lists_the_three_decks() -> None:
    assert set(DECK_ROWS) == {"52 cards", "Xì Tố, 28 cards", "Ba Cây, 36 cards"}


@pytest.mark.parametrize("deck_name", sorted(DECK_ROWS))
def test_documented_deck_order_is_the_order_of_cards_deck(deck_name: str) -> None:
    games, listed = DECK_ROWS[deck_name]
    for game_id in games:
        assert cards.format_cards(cards.deck(game_id)).split() == listed


def test_every_card_game_is_listed_under_exactly_one_documented_deck() -> None:
    listed = [game for games, _ in DECK_ROWS.values() for game in games]
    assert sorted(listed) == sorted(cards.GAME_DECKS)


def test_documented_decks_match_the_design_in_its_own_words() -> None:
    assert DECK_ROWS["52 cards"][1] == INDEPENDENT_DECKS["52"]
    xito = DECK_ROWS["Xì Tố, 28 cards"][1]
    assert (len(xito), xito[0], xito[-1]) == (28, "8s", "Ah")
    assert xito == INDEPENDENT_DECKS["xito"]
    bacay = DECK_ROWS["Ba Cây, 36 cards"][1]
    assert (len(bacay), bacay[:5], bacay[-1]) == (36, ["As", "Ac", "Ad", "Ah", "2s"], "9h")
    assert bacay == INDEPENDENT_DECKS["bacay"]
    assert REFERENCE["DECK_52"] == INDEPENDENT_DECKS["52"]
    assert REFERENCE["DECK_XITO"] == INDEPENDENT_DECKS["xito"]
    assert REFERENCE["DECK_BACAY"] == INDEPENDENT_DECKS["bacay"]


# --- rejection in uniform(n) ------------------------------------------------------------------


class FedBytes(fairness.ByteStream):
    """A ByteStream whose bytes are given, to drive uniform(n) into its rejection branch."""

    def __init__(self, data: bytes) -> None:  # no seed: the bytes are the stream
        self._buffer = data
        self._pos = 0

    def _refill(self, n: int) -> None:
        raise AssertionError("the test fed too few bytes")

    @property
    def read(self) -> int:
        return self._pos


LIMIT_ROWS = _table(_section("### Limits for the sizes a deal needs"))
REAL_STREAM_ROWS = _table(_section("### Rejections on a real stream"))
FED_ROWS = _table(_section("### Rejections from a given byte source"))


@pytest.mark.parametrize(("n", "remainder", "limit_hex"), LIMIT_ROWS)
def test_documented_rejection_limit(n: str, remainder: str, limit_hex: str) -> None:
    assert TWO_64 % int(n) == int(remainder)
    assert TWO_64 - TWO_64 % int(n) == int(limit_hex, 16)


@pytest.mark.parametrize(("label", "n", "draws", "result"), REAL_STREAM_ROWS)
def test_rejection_on_a_real_stream(label: str, n: str, draws: str, result: str) -> None:
    seed, size = SEEDS[label], int(n)
    words = [int(w, 16) for w in draws.split()]
    limit = TWO_64 - TWO_64 % size
    assert all(w >= limit for w in words[:-1]) and words[-1] < limit
    independent = _Words.of_seed(seed)
    assert [independent.next_word() for _ in words] == words
    assert fairness.ByteStream(seed).uniform(size) == int(result) == words[-1] % size
    assert REFERENCE["uniform"](REFERENCE["byte_stream"](seed), size) == int(result)


def test_some_real_stream_vector_rejects_a_draw() -> None:
    assert any(len(draws.split()) > 1 for _, _, draws, _ in REAL_STREAM_ROWS)


@pytest.mark.parametrize(("n", "data_hex", "result", "bytes_read"), FED_ROWS)
def test_uniform_on_given_bytes(n: str, data_hex: str, result: str, bytes_read: str) -> None:
    data = bytes.fromhex(data_hex.replace(" ", ""))
    fed = FedBytes(data)
    assert fed.uniform(int(n)) == int(result)
    assert fed.read == int(bytes_read) == len(data)

    independent = _Words(iter([data]))
    assert independent.uniform(int(n)) == int(result)
    assert independent.read == int(bytes_read)

    source = iter(data)
    assert REFERENCE["uniform"](source, int(n)) == int(result)
    assert list(source) == []


def test_some_given_bytes_vector_rejects_twice_in_a_row() -> None:
    assert any(int(read) >= 24 for _, _, _, read in FED_ROWS)


def test_a_draw_at_the_limit_is_discarded_and_the_next_8_bytes_decide() -> None:
    # n = 3: 2**64 % 3 == 1, so the limit is 2**64 - 1 and only 0xffffffffffffffff is discarded.
    fed = FedBytes(bytes.fromhex("ffffffffffffffff0000000000000004"))
    assert fed.uniform(3) == 1
    assert fed.read == 16


def test_a_draw_just_below_the_limit_is_kept() -> None:
    fed = FedBytes(bytes.fromhex("fffffffffffffffe"))
    assert fed.uniform(3) == (TWO_64 - 2) % 3
    assert fed.read == 8


def test_uniform_of_a_power_of_two_never_rejects() -> None:
    fed = FedBytes(bytes.fromhex("ffffffffffffffff"))
    assert fed.uniform(2**64) == TWO_64 - 1
    assert fed.read == 8


# --- the rest of socai.fairness -------------------------------------------------------------


def test_commitment_is_lowercase_hex_sha256_of_the_seed() -> None:
    seed = bytes(range(32))
    assert fairness.commitment(seed) == hashlib.sha256(seed).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", fairness.commitment(seed))


def test_verify_commitment_accepts_the_committed_seed_in_either_case() -> None:
    seed = bytes(range(32))
    assert fairness.verify_commitment(seed, hashlib.sha256(seed).hexdigest())
    assert fairness.verify_commitment(seed, hashlib.sha256(seed).hexdigest().upper())


def test_verify_commitment_rejects_another_seed() -> None:
    assert not fairness.verify_commitment(bytes(32), hashlib.sha256(bytes(range(32))).hexdigest())


@pytest.mark.parametrize("garbage", ["", "é" * 64, "not hex", "00" * 31])
def test_verify_commitment_of_garbage_is_false_not_an_error(garbage: str) -> None:
    assert fairness.verify_commitment(bytes(32), garbage) is False


@pytest.mark.parametrize("length", [0, 16, 31, 33, 64])
def test_a_seed_is_exactly_32_bytes(length: int) -> None:
    with pytest.raises(InvalidArgument) as err:
        fairness.commitment(bytes(length))
    assert err.value.code == "BAD_SEED"
    with pytest.raises(InvalidArgument):
        fairness.shuffle(bytes(length), [1, 2, 3])


def test_seed_from_hex_reads_64_hex_digits_in_either_case() -> None:
    seed = bytes(range(32))
    assert fairness.seed_from_hex(seed.hex()) == seed
    assert fairness.seed_from_hex(seed.hex().upper()) == seed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "00" * 31,
        "00" * 33,
        "0" * 63,
        "zz" * 32,
        " ".join(["00"] * 32),  # bytes.fromhex would accept the spaces
        "00" * 32 + "\n",
        "\u0660" * 64,  # Arabic-Indic zeros are digits, not hex digits
    ],
)
def test_seed_from_hex_rejects_anything_but_64_hex_digits(text: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        fairness.seed_from_hex(text)
    assert err.value.code == "BAD_SEED"


def test_new_seed_gives_32_fresh_bytes() -> None:
    first, second = fairness.new_seed(), fairness.new_seed()
    assert len(first) == len(second) == 32
    assert first != second  # equal with probability 2**-256


def test_the_stream_never_reuses_bytes_across_takes_and_blocks() -> None:
    seed = hashlib.sha256(b"socai").digest()
    whole = fairness.ByteStream(seed).take(100)
    pieces = fairness.ByteStream(seed)
    assert pieces.take(5) + pieces.take(30) + pieces.take(0) + pieces.take(65) == whole
    blocks = b"".join(hmac.new(seed, c.to_bytes(8, "big"), "sha256").digest() for c in range(4))
    assert whole == blocks[:100]


def test_take_of_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError):
        fairness.ByteStream(bytes(32)).take(-1)


@pytest.mark.parametrize("n", [0, -1, 2**64 + 1])
def test_uniform_refuses_a_range_it_cannot_draw(n: int) -> None:
    # Above 2**64 every 64-bit draw would be rejected and uniform(n) would never return.
    with pytest.raises(ValueError):
        fairness.ByteStream(bytes(32)).uniform(n)


def test_uniform_of_one_is_zero_and_still_consumes_a_draw() -> None:
    stream = fairness.ByteStream(bytes(32))
    assert stream.uniform(1) == 0
    assert stream.take(8) == fairness.ByteStream(bytes(32)).take(16)[8:]


def test_dice_are_the_first_three_uniform_6_draws_plus_one() -> None:
    seed = hashlib.sha256(b"socai").digest()
    stream = fairness.ByteStream(seed)
    assert fairness.roll_dice(seed) == tuple(1 + stream.uniform(6) for _ in range(3))


def test_shuffle_leaves_its_input_alone() -> None:
    deck = cards.deck("holdem")
    before = list(deck)
    fairness.shuffle(bytes(32), deck)
    assert deck == before


def test_shuffle_of_no_cards_or_one_card_draws_nothing() -> None:
    assert fairness.shuffle(bytes(32), []) == []
    assert fairness.shuffle(bytes(32), ["As"]) == ["As"]


@given(seed=seeds_32)
def test_a_shuffle_is_a_permutation_and_repeats_exactly(seed: bytes) -> None:
    deck = cards.deck("holdem")
    shuffled = fairness.shuffle(seed, deck)
    assert sorted(shuffled, key=lambda c: c.index) == deck
    assert fairness.shuffle(seed, deck) == shuffled
    assert [str(c) for c in shuffled] == _independent_shuffle(seed, [str(c) for c in deck])


@given(seed=seeds_32)
def test_dice_are_between_one_and_six(seed: bytes) -> None:
    dice = fairness.roll_dice(seed)
    assert len(dice) == 3 and all(1 <= d <= 6 for d in dice)


@given(seed=seeds_32, n=st.integers(min_value=1, max_value=2**64))
def test_uniform_is_in_range_and_agrees_with_the_independent_implementation(seed: bytes, n: int) -> None:
    value = fairness.ByteStream(seed).uniform(n)
    assert 0 <= value < n
    assert value == _Words.of_seed(seed).uniform(n)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 28, 36, 52])
def test_the_fast_shuffle_is_the_draw_by_draw_definition(size: int) -> None:
    deck = list(range(size))
    for n in range(200):
        seed = hashlib.sha256(f"fast-{size}-{n}".encode()).digest()
        assert fairness.shuffle(seed, deck) == fairness._shuffle_draw_by_draw(seed, deck)


def test_each_block_is_hmac_sha256_of_the_counter() -> None:
    seed = bytes(range(32))
    stream = fairness.ByteStream(seed)
    expected = b"".join(hmac.digest(seed, c.to_bytes(8, "big"), "sha256") for c in range(5))
    assert stream.take(7) + stream.take(100) + stream.take(53) == expected


@pytest.mark.parametrize("seed_byte", range(8))
def test_the_stream_read_in_pieces_of_any_size_is_the_hmac_counter_stream(seed_byte: int) -> None:
    seed = bytes([seed_byte]) * fairness.SEED_BYTES
    sizes = random.Random(seed_byte).choices(range(0, 100), k=40)
    stream = fairness.ByteStream(seed)
    read = b"".join(stream.take(n) for n in sizes)
    blocks = b"".join(hmac.digest(seed, c.to_bytes(8, "big"), "sha256") for c in range(-(-len(read) // 32)))
    assert read == blocks[: len(read)]
