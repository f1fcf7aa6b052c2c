"""Reading a table back from its event log: its facts and a hand, only as this service wrote them.

Only what this service signed, what decodes, what comes in its due order and what the
rules engine accepts is applied: anything else on the table's subjects is recorded in
``socai_table.quarantine`` and skipped, and the table goes on from its last valid state
(one foreign message must not stop a table for good). The table folds what is read here
into its state with ``socai_table.core.evolve`` (``Table.rebuild``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import ModuleType

from socai import errors, fairness
from socai.cards import deck as canonical_deck
from socai.events import codec, hidden
from socai.events.log import EventLog, RawStored
from socai.events.model import CardsDealt, Event, HandEnded, HandStarted
from socai.infra.logging import get_logger
from socai_table import metrics, seeds, signing
from socai_table.hand import IDEMPOTENCY_HEADER, PLAYER_HEADER, ActResult, Hand
from socai_table.model import facts_id_of
from socai_table.store import Quarantined, TableStore

log = get_logger("socai.table")


class LogReader:
    """One table's facts and hands as the log holds them, quarantining what does not belong."""

    def __init__(
        self,
        table_id: str,
        game: str,
        module: ModuleType,
        log: EventLog,
        store: TableStore,
        writer_key: bytes | signing.WriterKeys,
        seed_key: bytes | tuple[bytes, ...],
    ) -> None:
        self.table_id = table_id
        self.game = game
        self.module = module
        self.log = log
        self.store = store
        self.writer_key = writer_key
        self.seed_key = seed_key
        # subject -> the chain value of its last accepted message (socai.events.seal): the
        # ``Socai-Prev`` of the table's next event there.
        self.chains: dict[str, bytes] = {}

    async def facts(self) -> AsyncIterator[tuple[Event | None, int]]:
        """Every message on the table's facts subject, in order: (the fact, or None when it
        was quarantined; its stream sequence). The caller's next append must name the last
        stream sequence, a stranger's message included."""
        facts_id = facts_id_of(self.table_id)
        subject = self.log.subject_of(self.table_id, facts_id)
        reader = signing.SubjectReader(self.writer_key)
        due_seq = 1
        async for raw in self.log.read_raw(subject):
            event = await self._admit(reader, subject, raw, facts_id, due_seq)
            if event is not None:
                due_seq = event.seq + 1
                reader.accepted(subject, raw.data)
                self.chains[subject] = reader.chain or b""
            yield event, raw.stream_seq

    async def hand(self, number: int, hand_id: str, stored_seed: bytes) -> Hand | None:
        """The hand as its own events make it, or None when none of its events stands."""
        subject = self.log.subject_of(self.table_id, hand_id)
        reader = signing.SubjectReader(self.writer_key)
        hand: Hand | None = None
        cards: hidden.HandCards | None = None  # the hand's face-down cards, from its seed
        last_stream_seq = 0
        async for raw in self.log.read_raw(subject):
            last_stream_seq = raw.stream_seq
            event = await self._admit(reader, subject, raw, hand_id, 1 if hand is None else hand.seq + 1)
            if event is None:
                continue
            body = event.body
            if hand is None:
                if not isinstance(body, HandStarted):
                    await self.quarantine(hand_id, raw.stream_seq, "OUT_OF_ORDER", "a hand starts with HandStarted")
                    continue
                seed = seeds.recover(self.seed_key, hand_id, stored_seed, body.deck_commitment)
                if body.closing:
                    # A closing hand has no rules state: only its HandEnded may follow.
                    hand = Hand(hand_id, number, body, seed, [], None)
                    hand.started_stream_seq = raw.stream_seq
                    hand.events.append(event)
                    hand.log_seqs.append(raw.stream_seq)
                    reader.accepted(subject, raw.data)
                    continue
                deck = fairness.shuffle(seed, canonical_deck(self.game)) if self.module.SPEC.deck else []
                cards = hidden.HandCards(body, deck)
                hand = Hand(hand_id, number, body, seed, deck, self.module.initial_state(body))
                hand.started_stream_seq = raw.stream_seq
                hand.events.append(event)
                hand.log_seqs.append(raw.stream_seq)
                reader.accepted(subject, raw.data)
                continue
            if hand.closing:
                if hand.ended or not isinstance(body, HandEnded):
                    await self.quarantine(hand_id, raw.stream_seq, "OUT_OF_ORDER", "a closing hand ends at once")
                    continue
                hand.ended = True
                hand.events.append(event)
                hand.log_seqs.append(raw.stream_seq)
                reader.accepted(subject, raw.data)
                continue
            assert cards is not None
            try:
                # The log holds face-down cards by position: the table's own seed fills them
                # in, so the hand in memory is whole again (its views, its rules state).
                event = cards.read(event)
                body = event.body
                hand.state = self.module.apply(hand.state, body)
            except (errors.InvalidArgument, errors.RuleViolation) as exc:
                await self.quarantine(hand_id, raw.stream_seq, exc.code, exc.message)
                continue
            cards.accept(event)
            if isinstance(body, HandEnded):
                hand.ended = True
            if isinstance(body, CardsDealt):
                hand.next_card += len(body.cards)
            hand.events.append(event)
            hand.log_seqs.append(raw.stream_seq)
            reader.accepted(subject, raw.data)
            key = raw.headers.get(IDEMPOTENCY_HEADER)
            if key:
                player = raw.headers.get(PLAYER_HEADER, "")
                hand.act_keys[(player, key)] = (ActResult(event.seq, event.event_id, raw.stream_seq), body)
        if hand is not None:
            hand.subject_seq = last_stream_seq
            self.chains[subject] = reader.chain or b""
        return hand

    async def _admit(
        self, reader: signing.SubjectReader, subject: str, raw: RawStored, hand_id: str, due_seq: int
    ) -> Event | None:
        """The event of ``raw`` when the table wrote it and it is the one due, else None
        (after quarantining it)."""
        reason = reader.reject_reason(subject, raw.data, raw.headers, raw.stream_seq)
        detail = ""
        event: Event | None = None
        if reason is None:
            try:
                event = codec.decode(raw.data)
            except Exception as exc:  # any bytes at all may arrive on the subject
                reason, detail = "BAD_EVENT", str(exc)[:500]
            else:
                if (event.table_id, event.hand_id, event.seq) != (self.table_id, hand_id, due_seq):
                    reason, detail = "OUT_OF_ORDER", f"{event.event_id} where {hand_id}/{due_seq} was due"
        if reason is None:
            return event
        await self.quarantine(hand_id, raw.stream_seq, reason, detail)
        return None

    async def quarantine(self, hand_id: str, stream_seq: int, reason: str, detail: str) -> None:
        await self.store.quarantine(Quarantined(self.table_id, hand_id, stream_seq, reason, detail))
        metrics.QUARANTINED.labels(reason).inc()
        log.error(
            "message_quarantined",
            table_id=self.table_id,
            hand_id=hand_id,
            stream_seq=stream_seq,
            reason=reason,
            detail=detail[:200],
        )
