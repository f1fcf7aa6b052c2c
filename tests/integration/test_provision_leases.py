"""``socai migrate`` creates the lease buckets of the table and settlement partitions (issue 19).

Like the streams, the buckets are provisioned by the migration job, named and with the TTL
the services read from the same environment; a bucket that exists with another TTL fails
the migration (LEASE_BUCKET_INCOMPATIBLE) instead of leaving holders that disagree with the
server about when a lease ends.
"""

from __future__ import annotations

import contextlib

import pytest

from socai import errors
from socai.infra.nats import StreamSpec, connect
from socai_cli.stack import provision_streams
from tests.support.services import service_settings

pytestmark = pytest.mark.integration


async def test_migrate_creates_both_lease_buckets_with_the_services_ttls_and_refuses_another_ttl(
    nats_url: str, database_url: str, stream_spec: StreamSpec
):
    token = stream_spec.name.removeprefix("T_").lower()
    # An outbox stream of this test's own too: provisioning creates both streams.
    settings = service_settings(
        nats_url, database_url, stream_spec, ledger_stream=f"L_{token.upper()}", ledger_prefix=f"l{token}.ledger"
    )
    env = {"SOCAI_TABLE_LEASE_TTL_S": "3", "SOCAI_SETTLEMENT_LEASE_TTL_S": "4"}
    nc = await connect(nats_url, name="provision-check")
    table_bucket = f"table_leases_{stream_spec.name}"
    settlement_bucket = f"settlement_leases_{stream_spec.name}"
    try:
        # Without the environment (``socai up``'s stack) only the streams are provisioned.
        assert await provision_streams(settings) == []
        assert await provision_streams(settings, lease_env=env) == [table_bucket, settlement_bucket]
        js = nc.jetstream()
        assert (await (await js.key_value(table_bucket)).status()).ttl == pytest.approx(3.0)
        assert (await (await js.key_value(settlement_bucket)).status()).ttl == pytest.approx(4.0)
        # Again: nothing changes (the job runs at every deployment).
        assert await provision_streams(settings, lease_env=env) == [table_bucket, settlement_bucket]
        with pytest.raises(errors.PreconditionFailed) as refused:
            await provision_streams(settings, lease_env={**env, "SOCAI_TABLE_LEASE_TTL_S": "5"})
        assert refused.value.code == "LEASE_BUCKET_INCOMPATIBLE"
        # A bucket of another name (how a TTL is changed: deploy/README.md "Scale-out").
        renamed = {**env, "SOCAI_TABLE_LEASE_TTL_S": "5", "SOCAI_TABLE_LEASE_BUCKET": f"{table_bucket}_b"}
        assert (await provision_streams(settings, lease_env=renamed))[0] == f"{table_bucket}_b"
    finally:
        js = nc.jetstream()
        for bucket in (table_bucket, settlement_bucket, f"{table_bucket}_b"):
            with contextlib.suppress(Exception):  # a bucket the test failed before creating
                await js.delete_key_value(bucket)
        for stream in (stream_spec.name, settings.ledger_stream):
            with contextlib.suppress(Exception):
                await js.delete_stream(stream)
        await nc.close()
