"""The ledger's outbox stream: ``SOCAI_LEDGER``, subjects ``socai.ledger.>``.

Provisioned by ``socai migrate`` / ``socai up`` (``socai.infra.stack.provision_streams``,
the deploy/ migration job, whose NATS user may create it) and, when it is missing, by the
ledger's outbox relay itself (development and tests). Same durability as the event log:
file storage, never aged out, no deletes or purges, a 10-minute duplicate window.
"""

from __future__ import annotations

from socai.infra.config import Settings
from socai.infra.nats import StreamSpec


def ledger_stream_spec(name: str = "SOCAI_LEDGER", prefix: str = "socai.ledger", replicas: int = 1) -> StreamSpec:
    return StreamSpec(
        name=name,
        subjects=(f"{prefix}.>",),
        replicas=replicas,
        description="socai ledger: every committed transaction, in commit order",
    )


def outbox_stream_spec(settings: Settings) -> StreamSpec:
    return ledger_stream_spec(settings.ledger_stream, settings.ledger_prefix, settings.stream_replicas)


def posted_subject(prefix: str, account_kind: str) -> str:
    """``<prefix>.posted.<account kind>``: where a transaction is published."""
    return f"{prefix}.posted.{account_kind}"
