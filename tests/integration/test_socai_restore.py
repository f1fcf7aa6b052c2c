"""``socai restore``'s refusals and its restore without the ledger's stream (``socai_cli.backup``).

The whole drill (hands, settlement, lost postings, PostgreSQL killed) is
tests/fault/test_restore_drill.py; here the cases around it, on the shared servers: a journal
of two transactions made by the catch-up itself, backed up with ``socai backup``'s function.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from nats.aio.client import Client as NatsClient

from socai import errors
from socai.infra.config import Settings
from socai.infra.nats import StreamSpec, ensure_stream
from socai_cli import backup as ops
from socai_ledger import db, journal_restore
from tests.integration.ledger.test_journal_restore import DEPOSIT, PAYMENT, publish
from tests.support.isolated import fresh_database
from tests.support.services import service_settings

pytestmark = pytest.mark.integration

ACCOUNTS = "select account_id, balance_gold, version from socai_ledger.accounts order by account_id"


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture
async def settings(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[Settings]:
    """The test's event stream, and a ledger stream holding two postings, caught up into the
    migrated database."""
    name = f"RESTORE_{uuid.uuid4().hex[:8].upper()}"
    s = replace(
        service_settings(nats_url, migrated_database_url, stream_spec),
        ledger_stream=name,
        ledger_prefix=f"restore{name.lower()}.ledger",
    )
    js = nats_client.jetstream()
    await ensure_stream(js, s.events_stream_spec())
    await ensure_stream(js, s.ledger_stream_spec())
    await publish(nats_client, name, DEPOSIT)
    await publish(nats_client, name, PAYMENT)
    conn = await db.connect(migrated_database_url)
    try:
        await journal_restore.catch_up(conn, nats_client, name)
    finally:
        await conn.close()
    yield s
    await js.delete_stream(name)
    await js.delete_stream(s.events_stream)


@pytest.fixture
def empty_database(pg_admin_url: str) -> Iterator[str]:
    with fresh_database(pg_admin_url) as url:
        yield url


def restore(dump: Path, target: str, settings: Settings, nats_url: str, **options: bool) -> ops.Restored:
    return ops.restore(
        dump,
        admin_url=target,
        owner_url=target,
        nats_url_for=lambda _user: nats_url,
        settings=replace(settings, database_url=target),
        **options,
    )


def test_a_restore_whose_ledger_stream_is_gone_is_refused_before_anything_is_written_unless_told(
    settings: Settings, empty_database: str, nats_url: str, tmp_path: Path
) -> None:
    dump = tmp_path / "socai.dump"
    ops.backup(settings.database_url or "", dump)
    gone = replace(settings, ledger_stream="NO_SUCH_LEDGER_STREAM")

    with pytest.raises(errors.PreconditionFailed) as refused:
        restore(dump, empty_database, gone, nats_url)
    assert refused.value.code == "LEDGER_STREAM_MISSING"
    assert rows(empty_database, "select count(*) from information_schema.schemata where schema_name like 'socai%'") == [
        (0,)
    ]

    report = restore(dump, empty_database, gone, nats_url, without_ledger_stream=True)
    assert (report.journal_head, report.applied_from_stream) == (2, 0)
    assert report.settlement_starts == {"settlement": 1}
    assert rows(empty_database, ACCOUNTS) == rows(settings.database_url or "", ACCOUNTS)


def test_a_restore_into_a_database_that_holds_socai_already_is_refused_and_changes_nothing(
    settings: Settings, nats_url: str, tmp_path: Path
) -> None:
    url = settings.database_url or ""
    dump = tmp_path / "socai.dump"
    ops.backup(url, dump)
    before = rows(url, ACCOUNTS)

    with pytest.raises(errors.PreconditionFailed) as refused:
        restore(dump, url, settings, nats_url)

    assert refused.value.code == "RESTORE_TARGET_NOT_EMPTY"
    assert rows(url, ACCOUNTS) == before
