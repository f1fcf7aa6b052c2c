"""The events of hands in progress, kept as the stream delivered them, so that a finished
hand is replayed without reading it back.

A hand's events other than HandEnded are acked on sight (the stream keeps them); the cache
only saves reading them by subject. It is bounded, and used only when it holds every seq
1..n-1 before the HandEnded (seq n); otherwise the hand is read by subject, which is the
truth (after a restart, or when the cache overflowed). What it hands over may include a
stranger's messages: the replay keeps only the sealed hand chain (``socai.events.seal``),
and when the cached copy does not make one, the settler reads the subject after all.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol


class Enveloped(Protocol):
    """What the hand cache reads of an event: a protobuf ``Event`` or ``EventBytes``."""

    @property
    def seq(self) -> int: ...
    @property
    def hand_id(self) -> str: ...
    @property
    def table_id(self) -> str: ...


class HandCache:
    """The events of hands in progress, as delivered: bounded by ``max_events`` (the oldest
    hands are dropped first; they are read by subject when their HandEnded comes)."""

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.size = 0
        self._hands: OrderedDict[tuple[str, str], dict[int, Any]] = OrderedDict()

    def add(self, table_id: str, hand_id: str, stream_seq: int, event: Enveloped) -> None:
        key = (table_id, hand_id)
        entries = self._hands.get(key)
        if entries is None:
            entries = self._hands[key] = {}
        if stream_seq not in entries:
            entries[stream_seq] = event
            self.size += 1
        while self.size > self.max_events and self._hands:
            _, dropped = self._hands.popitem(last=False)
            self.size -= len(dropped)

    def discard(self, table_id: str, hand_id: str) -> None:
        dropped = self._hands.pop((table_id, hand_id), None)
        if dropped:
            self.size -= len(dropped)

    def take(self, table_id: str, hand_id: str, end_stream_seq: int, end: Enveloped) -> list[Any] | None:
        """The hand's cached messages before ``end`` (at stream seq ``end_stream_seq``) and
        ``end``, in stream order, if among them are events of seq 1..n-1 of this hand (``end``
        being seq n), else None. The hand's entries are removed either way."""
        entries = self._hands.pop((table_id, hand_id), None) or {}
        self.size -= len(entries)
        ordered = [entries[s] for s in sorted(entries) if s < end_stream_seq]
        ordered.append(end)
        seqs = {ev.seq for ev in ordered if ev.hand_id == hand_id and ev.table_id == table_id}
        if end.seq < 1 or not seqs.issuperset(range(1, end.seq + 1)):
            return None
        return ordered
