"""The settlement consumer reads the delivery count and stream sequence from the ack subject
(it builds no nats-py ``Msg`` per message)."""

from __future__ import annotations

import pytest
from nats.errors import NotJSMessageError

from socai_settlement.consumer import ack_fields


def test_ack_fields_reads_the_delivery_count_and_stream_sequence() -> None:
    assert ack_fields("$JS.ACK.SOCAI_EVENTS.settlement.3.42.40.1700000000000000000.0") == (3, 42)
    # the newer form: domain and account hash after $JS.ACK, and a random token at the end
    newer = "$JS.ACK.hub.AHASH.SOCAI_EVENTS.settlement.2.77.70.1700000000000000000.5.tok"
    assert ack_fields(newer) == (2, 77)


def test_a_reply_that_is_not_a_jetstream_ack_subject_is_refused() -> None:
    with pytest.raises(NotJSMessageError):
        ack_fields("_INBOX.abc.def")
