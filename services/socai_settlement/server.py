"""The SettlementService gRPC API (proto/socai/settlement/v1/settlement.proto).

Reads (GetSettlement, ListSettlements, ReplayHand, ListDeadLetters) are for the auditor,
the operator, the backend and the table; RetryDeadLetter for the operator only: it posts
money (the hand's settlement), and the auditor's role is to read and check, never to write.
Shape is checked first (INVALID_ARGUMENT), then lookups (NOT_FOUND); a hand whose events
cannot be replayed is FAILED_PRECONDITION with the replay's reason (SEQ_GAP, BAD_SEED …).
"""

from __future__ import annotations

import re
from typing import Any, Final

from socai import accounts, errors
from socai.events.log import EventLog, Stored
from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai.gen.settlement.v1 import settlement_pb2_grpc as pb_grpc
from socai.infra.grpc_server import AccessPolicy
from socai.infra.logging import get_logger
from socai.infra.paging import filters_of
from socai.settle.keys import settlement_key
from socai.settle.replay import ReplayResult, replay
from socai_settlement import convert
from socai_settlement.sealed_replay import HandInput, Replayed, event_bytes, sealed_events
from socai_settlement.settler import HandJob, Settler
from socai_settlement.store import SettlementRecord, Store, decode_token, encode_token, page_size

log = get_logger("socai.settlement.server")

SERVICE_NAME: Final = pb.DESCRIPTOR.services_by_name["SettlementService"].full_name
READERS: Final = frozenset({"auditor", "operator", "backend", "table"})
RETRIERS: Final = frozenset({"operator"})
# Table and hand ids are subject tokens and account id parts: no dots, spaces or wildcards.
# Player ids are account id parts only, and those may hold dots (accounts.is_valid_part).
_ID: Final = re.compile(r"[A-Za-z0-9_\-@]{1,64}")


def access_policy(tokens: dict[str, str] | Any) -> AccessPolicy:
    return AccessPolicy(
        tokens=tokens,
        allow={
            "GetSettlement": READERS,
            "ListSettlements": READERS,
            "ReplayHand": READERS,
            "ListDeadLetters": READERS,
            "RetryDeadLetter": RETRIERS,
        },
    )


def _require_id(value: str, name: str) -> str:
    if not _ID.fullmatch(value or ""):
        raise errors.InvalidArgument("BAD_ID", f"{name} must be 1-64 of A-Z a-z 0-9 _ - @, not {errors.shown(value)}")
    return value


def _require_player_id(value: str) -> str:
    if not accounts.is_valid_part(value):
        raise errors.InvalidArgument(
            "BAD_ID", f"player_id must be 1-64 of A-Z a-z 0-9 _ . - @, not {errors.shown(value)}"
        )
    return value


class SettlementServicer(pb_grpc.SettlementServiceServicer):
    def __init__(self, store: Store, event_log: EventLog, settler: Settler) -> None:
        self.store = store
        self.log = event_log
        self.settler = settler

    async def GetSettlement(self, request: pb.GetSettlementRequest, context: Any) -> pb.GetSettlementResponse:
        hand_id = _require_id(request.hand_id, "hand_id")
        record = await self.store.get(hand_id)
        if record is None:
            raise errors.NotFound("SETTLEMENT_NOT_FOUND", f"hand {hand_id} is not settled", hand_id=hand_id)
        return pb.GetSettlementResponse(settlement=convert.settlement_pb(record))

    async def ListSettlements(self, request: pb.ListSettlementsRequest, context: Any) -> pb.ListSettlementsResponse:
        if bool(request.table_id) == bool(request.player_id):
            raise errors.InvalidArgument("BAD_FILTER", "give exactly one of table_id or player_id")
        size = page_size(request.page_size)
        filters = filters_of("settlements", request.table_id, request.player_id)
        after = decode_token(request.page_token, filters)
        if request.table_id:
            records = await self.store.list_by_table(_require_id(request.table_id, "table_id"), size + 1, after)
        else:
            records = await self.store.list_by_player(_require_player_id(request.player_id), size + 1, after)
        more = len(records) > size
        records = records[:size]
        token = encode_token(records[-1].stream_seq, records[-1].hand_id, filters) if more else ""
        return pb.ListSettlementsResponse(
            settlements=[convert.settlement_pb(r) for r in records], next_page_token=token
        )

    async def ReplayHand(self, request: pb.ReplayHandRequest, context: Any) -> pb.ReplayHandResponse:
        """The hand replayed from the stream as the consumer replays it: only the messages
        of the table's sealed hand chain (a stranger's messages on the subject are left out,
        and a hand with no valid seal is FAILED_PRECONDITION with the seal's reason), then
        compared with the stored settlement."""
        hand_id = _require_id(request.hand_id, "hand_id")
        stored = await self.store.get(hand_id)
        result, end_stream_seq = await self._replay_sealed(hand_id, stored)
        if stored is None:
            recomputed = convert.record_of(result, end_stream_seq, "", settlement_key(hand_id))
            return pb.ReplayHandResponse(
                recomputed=convert.settlement_pb(recomputed), differences=["no stored settlement for this hand"]
            )
        recomputed = convert.record_of(result, stored.stream_seq, stored.ledger_transaction_id, stored.idempotency_key)
        return pb.ReplayHandResponse(
            recomputed=convert.settlement_pb(recomputed), differences=convert.differences(stored, recomputed)
        )

    async def ListDeadLetters(self, request: pb.ListDeadLettersRequest, context: Any) -> pb.ListDeadLettersResponse:
        size = page_size(request.page_size)
        after = decode_token(request.page_token)
        rows = await self.store.list_dead_letters(size + 1, after)
        more = len(rows) > size
        rows = rows[:size]
        token = encode_token(rows[-1].stream_seq, rows[-1].hand_id) if more else ""
        return pb.ListDeadLettersResponse(dead_letters=[convert.dead_letter_pb(d) for d in rows], next_page_token=token)

    async def RetryDeadLetter(self, request: pb.RetryDeadLetterRequest, context: Any) -> pb.RetryDeadLetterResponse:
        """Settle a dead-lettered hand again, through the same path as the consumer.

        Idempotent: a hand settled meanwhile answers ``settled`` with its settlement. Raises
        NOT_FOUND when the hand has neither a dead letter nor a settlement, UNAVAILABLE when
        the ledger or the database does not answer within the call's deadline.
        """
        hand_id = _require_id(request.hand_id, "hand_id")
        dead = await self.store.get_dead_letter(hand_id)
        if dead is None:
            record = await self.store.get(hand_id)
            if record is None:
                raise errors.NotFound("DEAD_LETTER_NOT_FOUND", f"hand {hand_id} has no dead letter", hand_id=hand_id)
            return pb.RetryDeadLetterResponse(settled=True, settlement=convert.settlement_pb(record))
        table_id = dead.table_id
        if not table_id:
            table_id = (await self._read_hand(hand_id, None))[0].event.table_id
        stream_seq = dead.stream_seq
        outcome = await self.settler.retry(HandJob(table_id, hand_id, stream_seq))
        log.info("dead_letter_retried", hand_id=hand_id, settled=outcome.settled)
        if outcome.settled:
            record = await self.store.get(hand_id)
            if record is None:
                raise errors.Unavailable("SETTLEMENT_NOT_VISIBLE", f"hand {hand_id} settled but not readable yet")
            return pb.RetryDeadLetterResponse(settled=True, settlement=convert.settlement_pb(record))
        again = await self.store.get_dead_letter(hand_id)
        return pb.RetryDeadLetterResponse(settled=False, dead_letter=convert.dead_letter_pb(again or dead))

    async def _replay_sealed(self, hand_id: str, stored: SettlementRecord | None) -> tuple[ReplayResult, int]:
        """(the replay of the hand's sealed chain, the stream seq of its sealed HandEnded).
        Without a stored settlement the table is read off the hand's messages (each table a
        message names, in stream order, until one holds the sealed hand). Raises
        FAILED_PRECONDITION (a seal reason, or the replay's), NOT_FOUND, UNAVAILABLE."""
        if stored is not None:
            tables = [stored.table_id]
        else:
            tables = list(dict.fromkeys(s.event.table_id for s in await self._read_hand(hand_id, None)))
        policy = self.settler.replayer.policy
        refused: Replayed | None = None
        for table_id in tables:
            subject = self.log.subject_of(table_id, hand_id)
            try:
                raw = [r async for r in self.log.read_raw(subject)]
            except TimeoutError as exc:
                raise errors.Unavailable("NATS_UNAVAILABLE", f"reading {hand_id} timed out") from exc
            if not raw:
                continue
            end = stored.stream_seq if stored is not None else raw[-1].stream_seq
            events, checked = sealed_events(HandInput(hand_id, subject, end, tuple(map(event_bytes, raw))), policy)
            if checked.error_code:
                refused = refused or checked
                continue
            for stream_seq, why in checked.strangers:
                log.info("replay_hand_stranger_left_out", hand_id=hand_id, stream_seq=stream_seq, reason=why)
            end_stream_seq = checked.end_stream_seq or raw[-1].stream_seq
            return replay(events), end_stream_seq  # ReplayError → FAILED_PRECONDITION with its reason
        if refused is None:
            raise errors.NotFound("HAND_NOT_FOUND", f"the stream holds no event of hand {hand_id}", hand_id=hand_id)
        raise errors.PreconditionFailed(refused.error_code, refused.error_message, hand_id=hand_id)

    async def _read_hand(self, hand_id: str, table_id: str | None) -> list[Stored]:
        """The hand's events by subject; any table when ``table_id`` is unknown.

        Raises NOT_FOUND when the stream holds no event of the hand.
        """
        try:
            if table_id:
                stored = await self.log.read_hand(table_id, hand_id)
            else:
                stored = [s async for s in self.log.read(f"{self.log.prefix}.*.{hand_id}")]
        except TimeoutError as exc:
            raise errors.Unavailable("NATS_UNAVAILABLE", f"reading {hand_id} timed out") from exc
        if not stored:
            raise errors.NotFound("HAND_NOT_FOUND", f"the stream holds no event of hand {hand_id}", hand_id=hand_id)
        return stored
