"""No face-down card in the event log while a hand is in play (issue 27, "Trust").

Every game's hands are simulated twice from the same random seed: logged as before (every
card in the clear) and as the table logs them now (``face_down_by_position``: a face-down
card by its deck position, ``socai.events.hidden``). The stored form must name no card a
spectator could not see at that moment, replay to the same settlement as the hand logged
in the clear, and be refused when its cards are not in its hand's form.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from socai import cards, fairness
from socai.audit import handview
from socai.audit.auditor import verify
from socai.audit.export import RawEvent
from socai.errors import InvalidArgument
from socai.events import codec, hidden
from socai.events.model import (
    HIDDEN_CARD,
    Arranged,
    CardsDealt,
    CardsPlayed,
    DealtCard,
    Event,
    HandEnded,
    HandStarted,
)
from socai.rules import registry
from socai.settle.replay import CARD_FORMAT, CARD_IN_CLEAR, REASONS, ReplayError, replay, replay_open
from tests.support.hidden import cards_written, spectator_cards
from tests.support.synthetic import SimHand, simulate

GAMES = registry.GAME_IDS
SEED = 27
FIXTURE = Path(__file__).parent / "audit" / "fixtures" / "hands.jsonl"


@cache
def twins(game: str) -> tuple[tuple[SimHand, SimHand], ...]:
    """The same hands of ``game``, logged in the clear and by position."""
    clear = simulate(4, (game,), seed=SEED, hands_per_table=4)
    by_position = simulate(4, (game,), seed=SEED, hands_per_table=4, face_down_by_position=True)
    return tuple(zip(clear.hands, by_position.hands, strict=True))


def hand_of(game: str, predicate: Any = lambda hand: True) -> SimHand:
    return next(new for _, new in twins(game) if predicate(new))


def with_body(events: list[Event], seq: int, body: Any) -> list[Event]:
    return [dataclasses.replace(e, body=body) if e.seq == seq else e for e in events]


def refused(events: list[Event]) -> ReplayError:
    with pytest.raises(ReplayError) as caught:
        replay(events)
    assert caught.value.code in REASONS
    return caught.value


# --- what the log holds ---------------------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_the_log_of_a_live_hand_names_no_card_a_spectator_cannot_see(game: str) -> None:
    module = registry.get(game)
    for clear, stored in twins(game):
        assert isinstance(stored.events[0].body, HandStarted) and stored.events[0].body.face_down_by_position
        state = module.initial_state(clear.events[0].body)
        seen: set[str] = set()
        for whole, kept in zip(clear.events, stored.events, strict=True):
            if isinstance(whole.body, HandEnded):
                break  # the seed is revealed: every card is public from here
            if whole.seq > 1:
                state = module.apply(state, whole.body)
            seen |= spectator_cards(module, whole, state)
            written = cards_written(codec.to_proto(kept))
            assert written <= seen, f"{kept.event_id} writes {sorted(written - seen)}, which no spectator sees"
            if whole.seq > 1:  # only the events that hide a card are logged otherwise
                assert hidden.hidden_in(kept) == (kept.body != whole.body)


@pytest.mark.parametrize("game", GAMES)
def test_a_hand_logged_by_position_settles_as_the_same_hand_logged_in_the_clear(game: str) -> None:
    for clear, stored in twins(game):
        wire = [codec.decode(codec.encode(e)) for e in stored.events]  # as read back from the stream
        then, now = replay(clear.events), replay(wire)
        assert now.settlement == then.settlement == stored.settlement
        assert now.cards_verified == then.cards_verified
        # The rules engine folded the very events of the hand logged in the clear.
        assert [e.body for e in now.events[1:]] == [e.body for e in clear.events[1:]]


def test_a_hand_logged_in_the_clear_replays_its_own_events_unchanged() -> None:
    lines = [json.loads(x) for x in FIXTURE.read_text().splitlines()]
    events = [codec.from_json(x) for x in lines if x["hand_id"] == "t0001-h1"]
    assert not any(isinstance(e.body, HandStarted) and e.body.face_down_by_position for e in events)
    assert replay(events).events == tuple(events)


# --- a hand in play ----------------------------------------------------------------------


@pytest.mark.parametrize("game", GAMES)
def test_every_moment_of_a_live_hand_audits_open_and_shows_only_what_a_spectator_sees(game: str) -> None:
    module = registry.get(game)
    for clear, stored in twins(game)[:2]:
        state = module.initial_state(clear.events[0].body)
        seen: set[str] = set()
        for n in range(1, len(stored.events)):  # every cut before HandEnded
            whole = clear.events[n - 1]
            if n > 1:
                state = module.apply(state, whole.body)
            seen |= spectator_cards(module, whole, state)
            live = [codec.to_proto(e) for e in stored.events[:n]]
            hand = replay_open(live)
            hides = any(hidden.hidden_in(e) for e in stored.events[:n])
            assert hand.fully_folded == (not hides)
            audit = verify([RawEvent(0, "", m) for m in live], source="test", allow_open=True)
            assert audit.report.open_hands == [stored.hand_id], audit.report.render()
            assert audit.report.open_hands_hidden == ([stored.hand_id] if hides else [])
            (view,) = handview.views(audit)
            shown = {c.card for row in view.timeline for c in row.cards} - {handview.UNKNOWN_CARD}
            assert shown <= seen
            assert view.replayed is False and view.seed == ""


def test_the_hand_view_of_an_open_hand_logged_in_the_clear_hides_the_hole_cards_too() -> None:
    lines = [json.loads(x) for x in FIXTURE.read_text().splitlines()]
    live = [x for x in lines if x["hand_id"] != "t0001-h2" or int(x["seq"]) <= 3]  # t0001's last hand, dealt
    audit = verify(list(_raws(live)), source="test", allow_open=True)
    assert audit.report.open_hands == ["t0001-h2"] and audit.report.open_hands_hidden == []
    view = next(v for v in handview.views(audit) if v.hand_id == "t0001-h2")
    dealt = [c for row in view.timeline for c in row.cards]
    assert dealt and all(c.card == handview.UNKNOWN_CARD for c in dealt if not c.face_up)
    assert "(??)>seat" in handview.render_text(view)
    assert "open_hands_hidden" not in audit.report.as_json()  # a log of old hands: the verdict keeps its bytes


def test_an_arrangement_logged_in_the_clear_reads_as_it_always_did_in_the_hand_view() -> None:
    clear, stored = twins("maubinh")[0]
    for hand in (clear, stored):
        audit = verify([RawEvent(0, "", codec.to_proto(e)) for e in hand.events], source="test")
        (view,) = handview.views(audit)
        rows = [r.text for r in view.timeline if r.kind == "Arranged"]
        wholes = [e.body for e in clear.events if isinstance(e.body, Arranged)]
        assert rows == [
            f"Arranged seat {a.seat}: back {' '.join(map(str, a.back))}, middle {' '.join(map(str, a.middle))}, "
            f"front {' '.join(map(str, a.front))}"
            for a in wholes
        ]


def _raws(lines: list[dict[str, Any]]) -> list[RawEvent]:
    return [RawEvent(0, "", codec.to_proto(codec.from_json(x))) for x in lines]


def test_an_ended_hand_that_does_not_replay_still_shows_its_cards_from_the_seed() -> None:
    stored = hand_of("holdem", lambda h: any(isinstance(e.body, CardsDealt) for e in h.events))
    events = list(stored.events)
    last_bet = max(e.seq for e in events if type(e.body).__name__ == "BetAction")
    events = [e for e in events if e.seq != last_bet]  # a gap: the hand does not replay
    events = [dataclasses.replace(e, seq=i) for i, e in enumerate(events, start=1)]
    shown = handview.readable(events)
    assert all(d.card is not HIDDEN_CARD for e in shown if isinstance(e.body, CardsDealt) for d in e.body.cards)


# --- refused forms -----------------------------------------------------------------------


def _first_deal(events: list[Event] | tuple[Event, ...]) -> Event:
    return next(e for e in events if isinstance(e.body, CardsDealt) and any(not d.face_up for d in e.body.cards))


def test_a_face_down_card_written_in_the_clear_is_refused_as_card_in_clear() -> None:
    clear, stored = twins("holdem")[0]
    deal = _first_deal(stored.events)
    leaked = with_body(list(stored.events), deal.seq, _first_deal(clear.events).body)
    error = refused(leaked)
    assert (error.code, error.event_id) == (CARD_IN_CLEAR, deal.event_id)
    assert "written in the clear" in error.message
    with pytest.raises(ReplayError) as open_error:
        replay_open(leaked[: deal.seq])
    assert open_error.value.code == CARD_IN_CLEAR


def test_a_face_up_card_left_blank_is_refused_as_card_format() -> None:
    stored = hand_of(
        "holdem", lambda h: any(d.face_up for e in h.events if isinstance(e.body, CardsDealt) for d in e.body.cards)
    )
    board = next(e for e in stored.events if isinstance(e.body, CardsDealt) and e.body.cards[0].face_up)
    assert isinstance(board.body, CardsDealt)
    blank = CardsDealt(tuple(DealtCard(d.seat, HIDDEN_CARD, True) for d in board.body.cards))
    error = refused(with_body(list(stored.events), board.seq, blank))
    assert (error.code, error.event_id) == (CARD_FORMAT, board.event_id)


def test_a_blank_card_in_a_hand_logged_in_the_clear_is_refused_as_card_format() -> None:
    lines = [json.loads(x) for x in FIXTURE.read_text().splitlines() if '"t0001-h1"' in x]
    deal = next(x for x in lines if "cards_dealt" in x)
    del deal["cards_dealt"]["cards"][0]["card"]  # what an export writes for an empty card
    error = refused([codec.from_json(x) for x in lines])
    assert (error.code, error.event_id) == (CARD_FORMAT, deal["event_id"])
    assert "no face_down_by_position" in error.message


def test_an_arrangement_in_the_clear_or_by_foreign_positions_is_refused() -> None:
    clear, stored = twins("maubinh")[0]
    arranged = next(e for e in stored.events if isinstance(e.body, Arranged))
    body = arranged.body
    assert isinstance(body, Arranged) and not (body.back or body.middle or body.front)
    assert len(body.back_positions + body.middle_positions + body.front_positions) == 13
    whole = next(e for e in clear.events if e.seq == arranged.seq)
    events = list(stored.events)
    error = refused(with_body(events, arranged.seq, whole.body))
    assert (error.code, error.event_id) == (CARD_IN_CLEAR, arranged.event_id)
    others = [
        p
        for e in stored.events
        if isinstance(e.body, Arranged) and e.body.seat != body.seat
        for p in e.body.back_positions
    ]
    foreign = dataclasses.replace(body, back_positions=(others[0], *body.back_positions[1:]))
    error = refused(with_body(events, arranged.seq, foreign))
    assert error.code == CARD_FORMAT and "not a card dealt face down to that seat" in error.message
    twice = dataclasses.replace(body, back_positions=(body.front_positions[0], *body.back_positions[1:]))
    assert refused(with_body(events, arranged.seq, twice)).code == CARD_FORMAT
    # Positions in a hand logged in the clear.
    old = list(clear.events)
    assert isinstance(whole.body, Arranged)
    assert (
        refused(with_body(old, arranged.seq, dataclasses.replace(whole.body, back_positions=(0,)))).code == CARD_FORMAT
    )


def test_a_blank_card_decodes_only_where_a_card_is_dealt() -> None:
    stored = hand_of("tienlen", lambda h: any(isinstance(e.body, CardsPlayed) for e in h.events))
    deal = _first_deal(stored.events)
    assert {d.card for d in codec.decode(codec.encode(deal)).body.cards} == {HIDDEN_CARD}  # type: ignore[union-attr]
    play = next(e for e in stored.events if isinstance(e.body, CardsPlayed))
    message = codec.to_proto(play)
    message.cards_played.cards[0] = ""
    with pytest.raises(InvalidArgument) as caught:
        codec.from_proto(message)
    assert caught.value.code == "BAD_CARD"
    with pytest.raises(ReplayError) as replayed:
        replay([*stored.events[: play.seq - 1], message])
    assert replayed.value.code == "BAD_EVENT"


def test_conceal_then_reveal_gives_the_hand_back_and_reveal_changes_nothing_without_the_seed() -> None:
    for game in ("holdem", "maubinh", "phom", "bacay_ga"):
        for clear, stored in twins(game):
            end = stored.events[-1].body
            assert isinstance(end, HandEnded)
            seed = fairness.seed_from_hex(end.deck_seed)
            deck = fairness.shuffle(seed, cards.deck(game))
            revealed = hidden.reveal(stored.events, deck)
            assert [e.body for e in revealed[1:]] == [e.body for e in clear.events[1:]]
            assert hidden.reveal(stored.events, None) is stored.events
