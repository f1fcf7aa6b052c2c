"""PostgreSQL: SQLAlchemy 2 async engines on psycopg 3, and URL helpers.

Every service owns one schema (``socai_ledger``, ``socai_table``, ``socai_settlement``)
migrated by Alembic (``socai.infra.migrate``). Services read ``SOCAI_DATABASE_URL`` as a
plain ``postgresql://`` URL; SQLAlchemy gets ``postgresql+psycopg://``.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SERVICE_SCHEMAS: dict[str, str] = {
    "ledger": "socai_ledger",
    "table": "socai_table",
    "settlement": "socai_settlement",
}


def sqlalchemy_url(url: str) -> str:
    """``postgresql://…`` → ``postgresql+psycopg://…`` (psycopg 3, sync and async)."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url!r}")


def libpq_url(url: str) -> str:
    """Any of our URL forms → the plain ``postgresql://`` form psycopg.connect takes."""
    return "postgresql://" + sqlalchemy_url(url)[len("postgresql+psycopg://") :]


def create_engine(url: str, *, pool_size: int = 10, max_overflow: int = 10, app: str = "socai") -> AsyncEngine:
    """An async engine with a bounded pool, pre-ping, and the app name in pg_stat_activity."""
    return create_async_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=True,
        pool_timeout=30,
        connect_args={"application_name": app},
    )
