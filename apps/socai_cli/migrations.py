"""Every service's database migrations, by service name (``socai migrate``, the stack, tests).

``upgrade(url, "ledger")`` / ``downgrade(url, "ledger", "base")`` / ``upgrade_all(url)``.
The library's ``socai.infra.migrate`` runs one schema's Alembic scripts; this module is
where the services are known, so the library never imports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable

import socai_ledger
import socai_settlement
import socai_table
from socai.infra import migrate
from socai.infra.db import SERVICE_SCHEMAS

_PACKAGES = {"ledger": socai_ledger, "table": socai_table, "settlement": socai_settlement}


def location(service: str) -> Traversable:
    """The ``migrations/`` folder of ``service`` (its Alembic script location)."""
    return resources.files(_PACKAGES[service]) / "migrations"


def upgrade(url: str, service: str, revision: str = "head") -> None:
    migrate.upgrade(url, SERVICE_SCHEMAS[service], location(service), revision)


def downgrade(url: str, service: str, revision: str = "base") -> None:
    migrate.downgrade(url, SERVICE_SCHEMAS[service], location(service), revision)


def upgrade_all(url: str, services: Iterable[str] = tuple(SERVICE_SCHEMAS)) -> None:
    for service in services:
        upgrade(url, service)
