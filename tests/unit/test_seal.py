"""The hand chain and seal (socai.events.seal): only the messages a valid seal covers are the table's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socai import errors
from socai.events import seal
from socai.infra.config import Settings
from socai.infra.nats_pull import header_values, parse_header_block

SUBJECT = "socai.events.t1.t1-h1"
TABLE = seal.HandSigner(seal.derive_private_key("table-secret"))
NEXT_TABLE_KEY = seal.HandSigner(seal.derive_private_key("table-secret-2027"))
STRANGER = seal.HandSigner(seal.derive_private_key("someone-else"))


def chained(payloads: list[bytes], signer: seal.HandSigner | None = TABLE, first_seq: int = 1) -> list[seal.Message]:
    """A hand as the table writes it: each message names the previous chain value; the last is sealed."""
    out = []
    prev = seal.genesis(SUBJECT)
    for i, payload in enumerate(payloads):
        headers = {seal.PREV_HEADER: prev.hex()}
        prev = seal.link(prev, SUBJECT, payload)
        if signer is not None and i == len(payloads) - 1:
            headers.update(signer.headers(SUBJECT, prev))
        out.append(seal.Message(first_seq + i, payload, headers))
    return out


def verifier(*signers: seal.HandSigner) -> seal.SealVerifier:
    return seal.SealVerifier({s.key_id: s.public_key for s in signers})


def ends_of(messages: list[seal.Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if seal.SEAL_HEADER in m.headers or m.payload.startswith(b"end")]


def payloads(messages: list[seal.Message], verdict: seal.Verdict) -> list[bytes]:
    return [messages[i].payload for i in verdict.hand]


def test_a_sealed_hand_is_the_table_s_in_order() -> None:
    hand = chained([b"started", b"bet", b"end"])
    verdict = seal.authenticate(SUBJECT, hand, verifier(TABLE), ends_of(hand))
    assert verdict.ok and payloads(hand, verdict) == [b"started", b"bet", b"end"]
    assert verdict.strangers == [] and verdict.end == 2


def test_the_chain_starts_from_the_subject_so_a_hand_cannot_be_moved_to_another() -> None:
    assert seal.genesis(SUBJECT) != seal.genesis("socai.events.t1.t1-h2")
    hand = chained([b"started", b"end"])
    verdict = seal.authenticate("socai.events.t1.t1-h2", hand, verifier(TABLE), ends_of(hand))
    assert verdict.reason == seal.HAND_SEAL_INVALID


def test_a_stranger_s_event_inserted_mid_hand_is_left_out_and_named() -> None:
    hand = chained([b"started", b"bet", b"call", b"end"])
    # The stranger knows the chain (headers are public) and forks from the second event.
    forged = seal.Message(3, b"bet 1000000", {seal.PREV_HEADER: hand[1].headers[seal.PREV_HEADER]})
    stream = [hand[0], hand[1], forged, *(seal.Message(m.stream_seq + 1, m.payload, m.headers) for m in hand[2:])]
    verdict = seal.authenticate(SUBJECT, stream, verifier(TABLE), ends_of(stream))
    assert payloads(stream, verdict) == [b"started", b"bet", b"call", b"end"]
    assert verdict.strangers == [(2, seal.NOT_ON_CHAIN)]


def test_a_byte_for_byte_copy_of_a_table_message_is_a_copy_and_the_first_stands() -> None:
    hand = chained([b"started", b"bet", b"end"])
    copy = seal.Message(4, hand[1].payload, dict(hand[1].headers))
    stream = [*hand, copy]
    verdict = seal.authenticate(SUBJECT, stream, verifier(TABLE), ends_of(stream))
    assert verdict.hand == (0, 1, 2)
    assert verdict.strangers == [(3, seal.COPY_OF_CHAIN)]


def test_walk_back_follows_the_sealed_branch_of_a_fork_whichever_comes_first() -> None:
    hand = chained([b"started", b"fold", b"end"])
    # A whole second branch from HandStarted, before the table's, ending unsealed.
    prev = bytes.fromhex(hand[1].headers[seal.PREV_HEADER])
    b1 = seal.Message(2, b"raise", {seal.PREV_HEADER: prev.hex()})
    b2 = seal.Message(3, b"end forged", {seal.PREV_HEADER: seal.link(prev, SUBJECT, b"raise").hex()})
    stream = [
        hand[0],
        b1,
        b2,
        seal.Message(4, hand[1].payload, hand[1].headers),
        seal.Message(5, hand[2].payload, hand[2].headers),
    ]
    walk = seal.walk_back(SUBJECT, stream, 4)
    assert walk.ok and walk.path == (0, 3, 4)
    # The stranger's branch walks back too, but its end carries no seal.
    assert seal.walk_back(SUBJECT, stream, 2).path == (0, 1, 2)
    verdict = seal.authenticate(SUBJECT, stream, verifier(TABLE), ends_of(stream))
    assert verdict.hand == (0, 3, 4)
    assert dict(verdict.strangers) == {1: seal.NOT_ON_CHAIN, 2: seal.HAND_UNSEALED}


def test_a_tampered_message_breaks_the_chain_before_the_seal() -> None:
    hand = chained([b"started", b"bet 10", b"end"])
    tampered = [hand[0], seal.Message(2, b"bet 99", hand[1].headers), hand[2]]
    verdict = seal.authenticate(SUBJECT, tampered, verifier(TABLE), ends_of(tampered))
    assert verdict.reason == seal.CHAIN_BROKEN and "before stream seq 3" in verdict.detail


def test_a_tampered_hand_ended_no_longer_matches_its_seal() -> None:
    hand = chained([b"started", b"end seed=aa"])
    tampered = [hand[0], seal.Message(2, b"end seed=bb", hand[1].headers)]
    assert seal.authenticate(SUBJECT, tampered, verifier(TABLE), [1]).reason == seal.HAND_SEAL_INVALID


@pytest.mark.parametrize(
    ("signer", "reason"), [(None, seal.HAND_UNSEALED), (STRANGER, seal.HAND_SEAL_INVALID)], ids=["unsealed", "own key"]
)
def test_a_forged_whole_hand_is_not_the_table_s(signer: seal.HandSigner | None, reason: str) -> None:
    forged = chained([b"started", b"end paying the forger"], signer=signer)
    verdict = seal.authenticate(SUBJECT, forged, verifier(TABLE), [1])
    assert not verdict.ok and verdict.reason == reason and verdict.hand == ()


def test_a_seal_copied_under_another_key_id_does_not_verify() -> None:
    hand = chained([b"started", b"end"])
    relabelled = {**hand[1].headers, seal.SEAL_KEY_HEADER: NEXT_TABLE_KEY.key_id}
    stream = [hand[0], seal.Message(2, hand[1].payload, relabelled)]
    assert seal.authenticate(SUBJECT, stream, verifier(TABLE, NEXT_TABLE_KEY), [1]).reason == seal.HAND_SEAL_INVALID


def test_during_a_rotation_hands_sealed_by_either_key_are_accepted() -> None:
    both = verifier(TABLE, NEXT_TABLE_KEY)
    old, new = chained([b"started", b"end"], TABLE), chained([b"started", b"end"], NEXT_TABLE_KEY)
    assert seal.authenticate(SUBJECT, old, both, [1]).ok
    assert seal.authenticate(SUBJECT, new, both, [1]).ok
    # Once the old key is dropped, its hands no longer verify.
    assert seal.authenticate(SUBJECT, old, verifier(NEXT_TABLE_KEY), [1]).reason == seal.HAND_SEAL_INVALID


def test_a_hand_without_prev_headers_or_without_an_end_is_unsealed() -> None:
    legacy = [seal.Message(1, b"started", {}), seal.Message(2, b"end", {})]
    assert seal.authenticate(SUBJECT, legacy, verifier(TABLE), [1]).reason == seal.HAND_UNSEALED
    assert seal.authenticate(SUBJECT, chained([b"started"], None), verifier(TABLE), []).reason == seal.HAND_UNSEALED


def test_a_malformed_prev_header_is_no_chain_value() -> None:
    assert seal.prev_of({seal.PREV_HEADER: "zz" * 32}) is None
    assert seal.prev_of({seal.PREV_HEADER: "ab"}) is None
    assert seal.chain_value(SUBJECT, b"x", {}) is None


def test_public_keys_are_filed_under_their_fingerprint() -> None:
    keys = seal.parse_public_keys([TABLE.public_key.hex(), f" {NEXT_TABLE_KEY.public_key.hex()} ", ""])
    assert keys == {TABLE.key_id: TABLE.public_key, NEXT_TABLE_KEY.key_id: NEXT_TABLE_KEY.public_key}
    assert TABLE.key_id == seal.key_id(TABLE.public_key) and len(TABLE.key_id) == 16
    with pytest.raises(ValueError, match="not 64 hex digits"):
        seal.parse_public_keys(["CHANGE-ME-table-seal-public-key"])
    with pytest.raises(ValueError):
        seal.parse_private_key("ab" * 31)


EXTERNAL = {"SOCAI_NATS_URL": "nats://nats:4222", "SOCAI_DATABASE_URL": "postgresql://u:p@db/socai"}


def test_in_development_mode_settlement_accepts_the_tables_derived_key() -> None:
    s = Settings()
    public = seal.public_key_of(s.hand_seal_private_key())
    assert s.hand_seal_public_keys() == {seal.key_id(public): public}


def test_outside_development_mode_the_keys_must_be_set() -> None:
    s = Settings.from_env(EXTERNAL)
    with pytest.raises(errors.PreconditionFailed) as table:
        s.hand_seal_private_key()
    assert table.value.code == "SEAL_KEY_MISSING"
    with pytest.raises(errors.PreconditionFailed) as readers:
        s.hand_seal_public_keys()
    assert readers.value.code == "SEAL_KEYS_MISSING"
    own = Settings.from_env(
        {
            **EXTERNAL,
            "SOCAI_TABLE_SEAL_KEY": "11" * 32,
            "SOCAI_TABLE_SEAL_PUBLIC_KEYS": f"{TABLE.public_key.hex()},{NEXT_TABLE_KEY.public_key.hex()}",
        }
    )
    assert own.hand_seal_private_key() == bytes.fromhex("11" * 32)
    assert set(own.hand_seal_public_keys()) == {TABLE.key_id, NEXT_TABLE_KEY.key_id}
    assert Settings.from_env(own.as_env()).hand_seal_public_keys() == own.hand_seal_public_keys()
    with pytest.raises(errors.InvalidArgument):
        Settings.from_env({**EXTERNAL, "SOCAI_TABLE_SEAL_PUBLIC_KEYS": "CHANGE-ME"}).hand_seal_public_keys()


def test_the_public_development_seal_keys_are_refused_outside_development_mode() -> None:
    dev = Settings().hand_seal_private_key()
    s = Settings.from_env(
        {
            **EXTERNAL,
            "SOCAI_TABLE_SEAL_KEY": dev.hex(),
            "SOCAI_TABLE_SEAL_PUBLIC_KEYS": seal.public_key_of(dev).hex(),
        }
    )
    assert {"SOCAI_TABLE_SEAL_KEY", "SOCAI_TABLE_SEAL_PUBLIC_KEYS"} <= set(s.public_dev_values())
    with pytest.raises(errors.PreconditionFailed):
        s.check_secrets()


def test_the_journal_seal_has_a_development_key_of_its_own_and_it_is_refused_outside_development_mode() -> None:
    """Derived beside the keys (``socai.infra.keys``) under its own label: the development
    journal key is stable (exports signed with it keep checking) and never the hand seal's."""
    dev = Settings().journal_seal_private_key()
    assert dev is not None and dev != Settings().hand_seal_private_key()
    assert dev == Settings().journal_seal_private_key()
    assert Settings.from_env(EXTERNAL).journal_seal_private_key() is None  # listed unsigned
    s = Settings.from_env({**EXTERNAL, "SOCAI_LEDGER_SEAL_KEY": dev.hex()})
    assert "SOCAI_LEDGER_SEAL_KEY" in s.public_dev_values()


# --- the fast path of walk_back, pinned equal to its definition --------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(min_size=0, max_size=6), min_size=1, max_size=8),
    st.lists(
        st.tuples(st.sampled_from(["copy", "stranger", "drop", "swap", "no_prev"]), st.integers(0, 20)), max_size=3
    ),
    st.integers(0, 20),
)
def test_walk_back_answers_what_its_definition_answers_for_any_subject(
    raw: list[bytes], edits: list[tuple[str, int]], end_pick: int
) -> None:
    """Subjects as the table writes them and as a stranger may leave them (copies, inserted
    and dropped messages, swaps, a missing ``Socai-Prev``): the walk from every end is the
    one the indexed definition gives, whether or not the linear fast path answered it."""
    messages = chained([b"%d:" % i + p for i, p in enumerate(raw)])
    for what, at in edits:
        k = at % len(messages)
        if what == "copy":
            messages.insert(k + 1, messages[k])
        elif what == "stranger":
            messages.insert(k, seal.Message(99, b"stranger", {seal.PREV_HEADER: seal.genesis(SUBJECT).hex()}))
        elif what == "drop" and len(messages) > 1:
            del messages[k]
        elif what == "swap" and k + 1 < len(messages):
            messages[k], messages[k + 1] = messages[k + 1], messages[k]
        elif what == "no_prev":
            messages[k] = seal.Message(messages[k].stream_seq, messages[k].payload, {})
    chains = seal.chain_values(SUBJECT, messages)
    prevs = [seal.prev_of(m.headers) for m in messages]
    end = end_pick % len(messages)
    walked = seal.walk_back(SUBJECT, messages, end)
    assert walked == seal._walk_by_index(messages, end, chains, prevs, seal.genesis(SUBJECT))
    if not edits and end == len(messages) - 1:
        assert walked.path == tuple(range(len(messages)))  # the table's own subject: every message


# --- the chain headers read from a raw NATS header block ---------------------------------

_FRAGMENTS = [
    "NATS/1.0",
    "\r\n",
    "\r",
    "\n",
    ":",
    " ",
    "\t",
    "ab",
    "é",
    "\u00a0",
    *seal.CHAIN_HEADERS,
    "Socai-Prevx",
    "socai-prev",
    "Nats-Msg-Id",
]
# Bytes that are not UTF-8 (a lone continuation, a truncated sequence, an invalid start):
# the full parse decodes the whole block with replacement, header_values only the values.
_BYTE_FRAGMENTS = [f.encode() for f in _FRAGMENTS] + [b"\x80", b"\xc3", b"\xe2\x82", b"\xff"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_BYTE_FRAGMENTS), max_size=24), st.binary(max_size=3))
def test_header_values_is_the_full_parse_restricted_to_the_names(fragments: list[bytes], junk: bytes) -> None:
    block = b"".join(fragments) + junk
    full = parse_header_block(block)
    assert header_values(block, seal.CHAIN_HEADERS) == {k: v for k, v in full.items() if k in seal.CHAIN_HEADERS}


def test_header_values_reads_a_table_message_s_chain_headers() -> None:
    prev, signature = "ab" * 32, "cd" * 64
    block = (
        f"NATS/1.0\r\nSocai-Signature: {'ef' * 32}\r\nSocai-Prev: {prev}\r\n"
        f"Socai-Hand-Seal:  {signature} \r\nSocai-Seal-Key: {TABLE.key_id}\r\nSocai-Prev: {'00' * 32}\r\n\r\n"
    ).encode()
    assert header_values(block, seal.CHAIN_HEADERS) == {
        seal.PREV_HEADER: prev,  # the first of a repeated name
        seal.SEAL_HEADER: signature,
        seal.SEAL_KEY_HEADER: TABLE.key_id,
    }


def test_the_ledgers_journal_seal_key_is_its_own_and_optional_outside_development_mode() -> None:
    # Development: derived, and its public key is what the auditor's development settings hold.
    dev = Settings()
    private = dev.journal_seal_private_key()
    assert private is not None and private != dev.hand_seal_private_key()
    assert list(dev.journal_seal_public_keys().values()) == [seal.public_key_of(private)]
    # Outside development mode without a key the ledger lists its journal unsigned.
    external = Settings.from_env(EXTERNAL)
    assert external.journal_seal_private_key() is None and external.journal_seal_public_keys() == {}
    own = Settings.from_env({**EXTERNAL, "SOCAI_LEDGER_SEAL_KEY": "22" * 32})
    assert own.journal_seal_private_key() == bytes.fromhex("22" * 32)
    assert Settings.from_env(own.as_env()).journal_seal_private_key() == own.journal_seal_private_key()
    # The public development key is refused as a deployment's.
    public_dev = Settings.from_env(
        {
            **EXTERNAL,
            "SOCAI_LEDGER_SEAL_KEY": private.hex(),
            "SOCAI_LEDGER_SEAL_PUBLIC_KEYS": seal.public_key_of(private).hex(),
        }
    )
    assert {"SOCAI_LEDGER_SEAL_KEY", "SOCAI_LEDGER_SEAL_PUBLIC_KEYS"} <= set(public_dev.public_dev_values())
    with pytest.raises(errors.PreconditionFailed):
        public_dev.check_secrets()
