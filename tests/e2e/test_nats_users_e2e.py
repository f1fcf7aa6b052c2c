"""Nobody but the table writes a hand, and nobody without a user connects (issue 27, item 4).

The embedded nats-server runs with deploy/'s users and permissions for the test's own
streams (``socai.infra.nats_auth``; tests/support/nats_users.py), and each service connects
as its own user. Before, it had no users: any local process read every live card and could
publish on any hand's subject — a forged message was never posted, but cost the table a
``TABLE_RESYNC`` on its next ``Act``, so a flood stalled it; junk on a table's facts subject
made a dead letter named ``<table>-t``.

Here, during a live hand: a client without a user is refused at connect; every user but the
table's (settlement, ledger, provisioner, auditor) is refused a publish on the hand's subject
and on the table's facts subject, and the stream holds nothing of theirs; the table's next
``Act`` is accepted at once, and the hand settles. The auditor still reads the live hand
(tests/e2e/test_hidden_cards_e2e.py: no face-down card in it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import pytest

from socai.events.log import EventLog
from socai.gen.table.v1 import table_pb2 as pb
from socai.infra.nats import StreamSpec
from socai.infra.nats_auth import ROLES
from tests.support.clients import bet
from tests.support.e2e import GameStack, game_stack
from tests.support.nats_users import users_server

pytestmark = [pytest.mark.e2e]


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    assert users_server(nats_url) is not None, "the tests' own nats-server (with users) is needed here"
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


async def refused_publish(url: str, subject: str) -> str:
    """Publish once as the user of ``url``; the server's refusal ("" when none came)."""
    violations: list[str] = []

    async def on_error(exc: Exception) -> None:
        violations.append(str(exc))

    nc = await nats.connect(url, error_cb=on_error, allow_reconnect=False, connect_timeout=5)
    try:
        await nc.publish(subject, b'{"forged": true}', headers={"Nats-Msg-Id": "forged"})
        await nc.flush()
        for _ in range(80):
            if violations:
                break
            await asyncio.sleep(0.025)
    finally:
        await nc.close()
    return " ".join(violations)


async def test_only_the_table_writes_a_live_hand_and_nobody_connects_without_a_user(stack: GameStack):
    backend = stack.backend
    table_id = await backend.create("holdem", owner_player_id="ana", stake_gold=10, seats_max=2, turn_timeout_s=60)
    for seat, player in enumerate(("ana", "bao")):
        await backend.deposit(player, 2_000)
        await backend.join(table_id, player, 1_000, seat=seat)
    hand_id = (await backend.table.StartHand(pb.StartHandRequest(table_id=table_id))).hand_id
    log: EventLog = stack.log
    hand_subject = log.subject_of(table_id, hand_id)
    facts_subject = log.subject_of(table_id, f"{table_id}-t")
    before = (await log.js.stream_info(stack.settings.events_stream)).state.messages

    # no user, no connection
    server = users_server(stack.settings.nats_url or "")
    assert server is not None
    with pytest.raises(Exception, match=r"(?i)authorization"):
        await nats.connect(server.server.url, allow_reconnect=False, connect_timeout=5, max_reconnect_attempts=0)
    # every user but the table's is refused a message on the hand's and the table's subjects
    for user in [r for r in ROLES if r != "table"]:
        url = stack.running.nats_url_for(user)
        for subject in (hand_subject, facts_subject):
            refusal = await refused_publish(url, subject)
            assert "permissions violation" in refusal.lower() and subject.lower() in refusal.lower(), (user, refusal)
    assert (await log.js.stream_info(stack.settings.events_stream)).state.messages == before

    # the table goes on at once: no TABLE_RESYNC, and the hand settles as played
    view = await backend.state(table_id)
    assert view.hand_id == hand_id and view.to_act
    for _ in range(20):
        view = await backend.state(table_id)
        if any(e.WhichOneof("body") == "hand_ended" for e in view.events) or not view.to_act:
            break
        seat = view.to_act[0]
        player = ("ana", "bao")[seat]
        kinds = {a.kind for a in (await backend.state(table_id, player)).legal_actions}
        await backend.act(table_id, player, seat, bet(seat, "check" if "check" in kinds else "fold"), hand_id=hand_id)
    settled = await stack.settled(hand_id)
    assert settled.hand_id == hand_id
    assert all(s.event.table_id == table_id for s in await log.read_hand(table_id, hand_id))
