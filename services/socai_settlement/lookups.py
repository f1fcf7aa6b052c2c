"""Store reads settlement needs beside ``store.Store``'s: the stream sequence a settled
hand was settled from (a HandEnded of that hand at another sequence is a duplicate) and which
hands have a dead letter. Rare paths (a batch with an already-settled hand, a restart after
a crash), so plain SQLAlchemy on the store's engine, not the store's prepared lanes."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from socai import errors
from socai_settlement.store import Store


async def _rows(store: Store, sql: str, ids: Sequence[str]) -> list[tuple[str, int]]:
    try:
        async with store.engine.connect() as conn:
            result = await conn.execute(text(sql.format(schema=store.schema)), {"ids": list(ids)})
            return [(str(r[0]), int(r[1])) for r in result]
    except (OperationalError, InterfaceError) as exc:
        raise errors.Unavailable("DATABASE_UNAVAILABLE", f"PostgreSQL: {exc.orig or exc}") from exc
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise errors.Unavailable("DATABASE_UNAVAILABLE", f"PostgreSQL: {exc.orig or exc}") from exc
        raise


async def settled_seqs(store: Store, hand_ids: Sequence[str]) -> dict[str, int]:
    """The stream sequence of the HandEnded each settled hand of ``hand_ids`` was settled
    from (a HandEnded of the same hand at another sequence is a duplicate)."""
    if not hand_ids:
        return {}
    sql = 'select hand_id, stream_seq from "{schema}".settlements where hand_id = any(:ids)'
    return dict(await _rows(store, sql, hand_ids))


async def dead_lettered_among(store: Store, hand_ids: Sequence[str]) -> set[str]:
    """The hands of ``hand_ids`` that have a dead letter (open or resolved)."""
    if not hand_ids:
        return set()
    sql = 'select hand_id, stream_seq from "{schema}".dead_letters where hand_id = any(:ids)'
    return {hand_id for hand_id, _ in await _rows(store, sql, hand_ids)}
