from __future__ import annotations

import pytest

from socai import errors
from socai.infra import player_tokens

KEY = "test-key"


def test_a_token_names_its_player_until_it_expires():
    token, expires = player_tokens.issue(KEY, "p42", ttl_s=60, now=1_000_000)
    assert expires == 1_000_060
    assert player_tokens.verify(KEY, token, now=1_000_059) == "p42"
    with pytest.raises(errors.Unauthenticated):
        player_tokens.verify(KEY, token, now=1_000_061)


@pytest.mark.parametrize("bad", ["", "abc", "a.b.c", "!!!.###", "x" * 2000])
def test_malformed_tokens_are_unauthenticated(bad: str):
    with pytest.raises(errors.Unauthenticated) as caught:
        player_tokens.verify(KEY, bad)
    assert caught.value.code == "BAD_PLAYER_TOKEN"


def test_a_token_signed_with_another_key_or_edited_is_refused():
    token, _ = player_tokens.issue(KEY, "p1")
    with pytest.raises(errors.Unauthenticated):
        player_tokens.verify("other-key", token)
    _payload, signature = token.split(".")
    forged_payload, _ = player_tokens.issue("other-key", "p2")[0].split(".")
    with pytest.raises(errors.Unauthenticated):
        player_tokens.verify(KEY, f"{forged_payload}.{signature}")


@pytest.mark.parametrize(("player", "ttl"), [("", 60), ("a b", 60), ("p1", 0), ("p1", 8 * 24 * 3600)])
def test_issue_refuses_bad_input(player: str, ttl: int):
    with pytest.raises(errors.InvalidArgument):
        player_tokens.issue(KEY, player, ttl_s=ttl)


@pytest.mark.parametrize("where", [0, 5, -3])
def test_a_token_with_characters_outside_base64url_is_refused_wherever_they_are(where: int):
    """Python's base64 decoder skips stray characters; a token has one spelling only."""
    token, _ = player_tokens.issue("k", "alice", 60)
    payload, signature = token.split(".")
    for part in ("payload", "signature"):
        text = payload if part == "payload" else signature
        edited = text[:where] + "!!" + text[where:]
        forged = f"{edited}.{signature}" if part == "payload" else f"{payload}.{edited}"
        with pytest.raises(errors.Unauthenticated):
            player_tokens.verify("k", forged)


def test_a_token_whose_last_character_carries_stray_bits_is_refused():
    token, _ = player_tokens.issue("k", "alice", 60)
    payload, signature = token.split(".")
    # 32 signature bytes are 43 characters: the last one carries 2 unused bits. Another
    # character with the same used bits decodes to the same bytes and must be refused.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(signature[-1])
    twin = alphabet[last ^ 1]
    with pytest.raises(errors.Unauthenticated):
        player_tokens.verify("k", f"{payload}.{signature[:-1]}{twin}")
    assert player_tokens.verify("k", token) == "alice"
