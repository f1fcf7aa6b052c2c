"""Fixtures of the settlement suites: see ``tests/support/settlement.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from nats.aio.client import Client as NatsClient

from socai.infra.nats import StreamSpec
from tests.support.settlement import Harness, harness_for


@pytest.fixture
async def harness(
    nats_url: str, migrated_database_url: str, stream_spec: StreamSpec, nats_client: NatsClient
) -> AsyncIterator[Harness]:
    async with harness_for(nats_url, migrated_database_url, stream_spec, nats_client) as h:
        yield h
