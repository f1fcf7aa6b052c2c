"""The hand in play at a table: its rules state, its deck and the events written so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from socai.cards import Card
from socai.events.model import Event, HandStarted
from socai_table.core import ActResult, HandNow

__all__ = ["IDEMPOTENCY_HEADER", "PLAYER_HEADER", "ActResult", "Hand"]

# Act keys are kept in the event's headers, so that a restarted table still answers a retry
# with the first result, and so does the table long after the hand ended (``history``). The
# player header scopes a key by player (and hand): one player's key can neither replay nor
# block another player's action. Headers rather than a field of the event: a key is the
# player's own business, which every reader of the hand's events would otherwise see, and
# the events' bytes (what settles and what is sealed) stay as they are.
IDEMPOTENCY_HEADER = "Socai-Idempotency-Key"
PLAYER_HEADER = "Socai-Player-Id"


@dataclass
class Hand:
    """The hand in play: the rules state, the deck, and the events so far."""

    hand_id: str
    number: int
    started: HandStarted
    seed: bytes
    deck: list[Card]
    state: Any
    events: list[Event] = field(default_factory=list)
    subject_seq: int = 0  # stream sequence of the hand's last event
    log_seqs: list[int] = field(default_factory=list)  # each event's stream sequence, in order
    started_stream_seq: int = 0
    next_card: int = 0
    ended: bool = False
    # Gold of house:bank this hand holds in the ledger as far as this table knows (a game
    # against the house: ``kit.house_exposure``); 0 after a rebuild, when the next raise asks
    # the ledger for the whole worst case again (a hold only grows, so asking is harmless).
    held_gold: int = 0
    # False for a hand read back from the log (a restart, a rebuild): an earlier process may have
    # held gold for it that its final state no longer shows (bets that hedge each other), so
    # its end finalizes the hold whatever it shows.
    hold_known: bool = True
    act_keys: dict[tuple[str, str], tuple[ActResult, Any]] = field(default_factory=dict)  # (player, key)
    # (seq, viewer) -> the event's protobuf as that viewer sees it, filled by
    # ``socai_table.views``: every GetTableState shows every event of the hand, so without
    # it a view converted the whole hand again, and each hand cost the square of its length.
    protos: dict[tuple[int, int], Any] = field(default_factory=dict)

    @property
    def closing(self) -> bool:
        """A table's closing hand (``Table._closing_hand``): no rules state, no cards."""
        return self.started.closing

    @property
    def seq(self) -> int:
        return len(self.events)

    @property
    def dealt_seats(self) -> set[int]:
        return {s.seat for s in self.started.seats}

    def for_core(self) -> HandNow:
        """What the table core's decisions about this hand read of it (``core.HandNow``)."""
        return HandNow(self.hand_id, self.state, self.deck, self.next_card, self.seed, self.closing, self.held_gold)
