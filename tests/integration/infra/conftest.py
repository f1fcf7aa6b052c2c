"""Fixtures of the lease tests: a lease bucket of the test's own, removed afterwards."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from socai.infra.leases import LeaseConfig
from socai.infra.nats import connect

LEASE_TTL_S = 2.0  # short, so that expiries happen within a test; renewals every 0.4 s


@pytest.fixture
async def lease_config(nats_url: str) -> AsyncIterator[LeaseConfig]:
    config = LeaseConfig(bucket=f"leases_{uuid.uuid4().hex[:10]}", ttl_s=LEASE_TTL_S)
    yield config
    nc = await connect(nats_url, name="lease-cleanup")
    try:
        await nc.jetstream().delete_key_value(config.bucket)
    except Exception:
        pass
    finally:
        await nc.close()
