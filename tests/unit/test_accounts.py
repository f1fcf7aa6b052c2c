"""Ledger account ids (DESIGN.md "Accounts"): one place builds and parses them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socai import accounts
from socai.errors import InvalidArgument

# Any part but dots alone (test_a_part_of_dots_alone_is_refused).
id_parts = st.text(alphabet="abcXYZ019_.-@", min_size=1, max_size=64).filter(lambda t: t.strip(".") != "")


def test_builders_make_the_ids_of_the_design() -> None:
    assert accounts.player("alice") == "player:alice"
    assert accounts.escrow("t-17", "alice") == "escrow:t-17:alice"
    assert accounts.pot("t-17") == "pot:t-17"
    assert accounts.guild("g.9") == "guild:g.9"
    assert accounts.HOUSE_FEES == "house:fees"
    assert accounts.HOUSE_BANK == "house:bank"
    assert accounts.EXTERNAL_CASHIER == "external:cashier"


@pytest.mark.parametrize(
    ("account_id", "kind"),
    [
        ("player:alice", "player"),
        ("escrow:t1:alice", "escrow"),
        ("house:fees", "house"),
        ("house:bank", "house"),
        ("pot:t1", "pot"),
        ("guild:g1", "guild"),
        ("external:cashier", "external"),
        ("player:a.b-c_d@e", "player"),
    ],
)
def test_kind_of_a_well_formed_id(account_id: str, kind: str) -> None:
    assert accounts.kind_of(account_id) == kind


@pytest.mark.parametrize(
    "account_id",
    [
        "",
        "player",
        "player:",
        "player:alice:bob",
        "player:al ice",
        "player:alice\n",  # "$" alone would have let a trailing newline through
        "house:fees\n",
        "escrow:t1",
        "escrow:t1:",
        "escrow::alice",
        "house:cash",
        "external:bank",
        "wallet:alice",
        "Player:alice",
        "pot:" + "x" * 65,
        "guild:é",
        "player:alice\u00a0",
    ],
)
def test_a_malformed_id_is_bad_account_id(account_id: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        accounts.kind_of(account_id)
    assert err.value.code == "BAD_ACCOUNT_ID"


def test_a_non_string_id_is_bad_account_id() -> None:
    with pytest.raises(InvalidArgument) as err:
        accounts.kind_of(42)  # type: ignore[arg-type]
    assert err.value.code == "BAD_ACCOUNT_ID"


@pytest.mark.parametrize(
    "build",
    [
        lambda: accounts.player(""),
        lambda: accounts.player("a:b"),
        lambda: accounts.player("alice\n"),
        lambda: accounts.escrow("t 1", "alice"),
        lambda: accounts.escrow("t1", "x" * 65),
        lambda: accounts.pot("t/1"),
        lambda: accounts.guild("g#"),
    ],
)
def test_builders_refuse_a_part_that_would_make_a_malformed_id(build: Callable[[], str]) -> None:
    with pytest.raises(InvalidArgument) as err:
        build()
    assert err.value.code == "BAD_ACCOUNT_ID"


def test_the_longest_parts_still_make_a_valid_id() -> None:
    longest = accounts.escrow("t" * 64, "p" * 64)
    assert accounts.kind_of(longest) == "escrow"


def test_only_the_outside_world_may_go_negative() -> None:
    assert accounts.may_go_negative("external:cashier")
    for account_id in ("player:a", "escrow:t:a", "house:fees", "house:bank", "pot:t", "guild:g"):
        assert not accounts.may_go_negative(account_id)


def test_may_go_negative_of_a_malformed_id_is_an_error_not_a_no() -> None:
    with pytest.raises(InvalidArgument):
        accounts.may_go_negative("external:cashier ")


def test_is_valid_part() -> None:
    assert accounts.is_valid_part("alice-01@x.y_z")
    assert not accounts.is_valid_part("")
    assert not accounts.is_valid_part("a:b")
    assert not accounts.is_valid_part("alice\n")
    assert not accounts.is_valid_part("x" * 65)


@given(table_id=id_parts, player_id=id_parts)
def test_every_built_id_parses_back_to_its_kind(table_id: str, player_id: str) -> None:
    assert accounts.kind_of(accounts.player(player_id)) == "player"
    assert accounts.kind_of(accounts.escrow(table_id, player_id)) == "escrow"
    assert accounts.kind_of(accounts.pot(table_id)) == "pot"
    assert accounts.kind_of(accounts.guild(table_id)) == "guild"
    assert accounts.escrow(table_id, player_id).split(":") == ["escrow", table_id, player_id]


def test_an_error_about_a_huge_id_quotes_only_its_start():
    """Issue 16, defect 8: a 10,000-character id made a 20 KB error."""
    with pytest.raises(InvalidArgument) as caught:
        accounts.kind_of("player:" + "x" * 10_000)
    assert len(caught.value.message) < 200 and "10007 characters" in caught.value.message


@pytest.mark.parametrize("part", [".", "..", "...", "." * 64])
def test_a_part_of_dots_alone_is_refused(part: str) -> None:
    assert not accounts.is_valid_part(part)
    for build in (accounts.player, accounts.pot, accounts.guild, lambda p: accounts.escrow(p, "alice")):
        with pytest.raises(InvalidArgument) as caught:
            build(part)
        assert caught.value.code == "BAD_ACCOUNT_ID"
    for account_id in (f"player:{part}", f"escrow:t1:{part}", f"escrow:{part}:alice", f"guild:{part}"):
        with pytest.raises(InvalidArgument):
            accounts.kind_of(account_id)


@pytest.mark.parametrize("part", [".a", "a.", "a..b", "..a", "a.b.c"])
def test_dots_beside_other_characters_are_fine(part: str) -> None:
    assert accounts.is_valid_part(part) and accounts.kind_of(f"player:{part}") == "player"
