"""Messages settlement acks with no effect — garbage on a hand already settled, a second
HandEnded of a settled hand, an event after settlement — leave a record: a count by kind and
a log line with the stream sequence, once per kind (issue 17, defect 7)."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from socai.gen.events.v1 import events_pb2
from tests.support.settlement import Harness, wait_for
from tests.support.synthetic import fund, publish, simulate

pytestmark = pytest.mark.integration

KINDS = ("not_an_event", "duplicate_hand_ended", "event_after_settlement")


def ignored() -> dict[str, float]:
    return {
        kind: REGISTRY.get_sample_value("socai_settlement_ignored_messages_total", {"kind": kind}) or 0.0
        for kind in KINDS
    }


async def test_garbage_duplicates_and_late_events_on_a_settled_hand_are_counted_and_logged_once_per_kind(
    harness: Harness,
) -> None:
    sim = simulate(3, ("holdem",), seed=1707)
    await harness.start_ledger()
    await fund(harness.ledger("cashier"), sim)
    app = await harness.start_settlement()
    await publish(harness.log, sim)

    async def settled() -> bool:
        return (await harness.counts())[0] == len(sim.hands)

    await wait_for(settled, 60, "the hands")
    hand = sim.hands[0]
    js = harness.log.js
    subject = harness.log.subject_of(hand.table_id, hand.hand_id)
    stored = await harness.log.read_hand(hand.table_id, hand.hand_id)
    first_event = (await js.get_msg(harness.settings.events_stream, stored[0].stream_seq)).data
    hand_ended = (await js.get_msg(harness.settings.events_stream, stored[-1].stream_seq)).data
    assert first_event and hand_ended
    end = events_pb2.Event()
    end.ParseFromString(hand_ended)
    assert end.WhichOneof("body") == "hand_ended"
    before = ignored()
    settled_before = await harness.counts()

    with capture_logs() as logs:
        garbage = (await js.publish(subject, b"\xff not an event")).seq
        again = (await js.publish(subject, b"\xff still not an event")).seq
        duplicate = (await js.publish(subject, hand_ended)).seq
        late = (await js.publish(subject, first_event)).seq

        async def drained() -> bool:
            lag, pending = await app.lag.measure()
            return lag == 0 and pending == 0

        await wait_for(drained, 30, "the foreign messages to be handled")

    after = ignored()
    assert {k: after[k] - before[k] for k in KINDS} == {
        "not_an_event": 2,
        "duplicate_hand_ended": 1,
        "event_after_settlement": 1,
    }
    # Nothing else happened: no dead letter, no second settlement, the ledger untouched.
    assert await harness.counts() == settled_before == (len(sim.hands), 0)
    lines = [entry for entry in logs if entry["event"] == "message_ignored"]
    by_kind = {entry["kind"]: entry for entry in lines}
    assert len(lines) == 3, lines  # the second garbage message is counted, not logged again
    assert by_kind["not_an_event"]["stream_seq"] == garbage != again
    assert by_kind["duplicate_hand_ended"]["stream_seq"] == duplicate
    assert by_kind["duplicate_hand_ended"]["settled_from_stream_seq"] == stored[-1].stream_seq
    assert by_kind["event_after_settlement"]["stream_seq"] == late
    for entry in lines:
        assert entry["log_level"] == "warning"
