"""``socai backup`` and ``socai restore``: lose the database, get every gold back from the log.

``socai backup`` takes a base backup of the whole database (every service's schema, roles'
grants included) with PostgreSQL's own ``pg_dump`` (custom format), the one the embedded
server ships (``EmbeddedPostgres.bin_dir``), and writes beside it what the journal held
(``<file>.json``: head, relay cursor, time).

``socai restore FILE`` rebuilds the database after a loss, in four steps
(docs/run/operations.md; every service stopped):

1. ``pg_restore`` of the backup into an empty database (the embedded server makes a fresh
   data directory when its own was lost; an external one must be empty of socai's schemas:
   ``RESTORE_TARGET_NOT_EMPTY`` otherwise, nothing written);
2. the migrations, so a backup of an older version is brought to this one;
3. the journal brought up to date from the ledger's stream (``socai_ledger.journal_restore``:
   every transaction published after the backup, appended once, as it was);
4. settlement's durables started again right after the newest hand its restored records
   hold (``socai_settlement.rewind``), so that at the next ``socai up`` it settles every hand
   its records lack: the postings that came back are answered ``REPLAYED``, the ones never
   published are posted again.

Then ``socai up``; ``socai ledger verify``, ``socai ledger trial-balance`` and ``socai
audit`` say whether the journal is whole.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import psycopg.conninfo

from socai import errors
from socai.infra.config import Settings
from socai.infra.db import SERVICE_ROLES, SERVICE_SCHEMAS, libpq_url, role_url
from socai.infra.logging import get_logger
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres

log = get_logger("socai.backup")

Handler = Callable[[argparse.Namespace, Settings], int]
PG_DUMP_TIMEOUT_S = 6 * 3600


@dataclass
class Restored:
    """What ``socai restore`` did, step by step, with each step's seconds."""

    dump: str
    journal_head_in_backup: int = 0
    journal_head: int = 0
    applied_from_stream: int = 0
    published_seq: int = 0
    hashes_inferred: int = 0
    settlement_starts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def pg_tool(name: str) -> str:
    """A PostgreSQL client tool of the embedded server's installation."""
    path = EmbeddedPostgres.bin_dir() / name
    if not path.exists():
        raise errors.Unavailable("POSTGRES_BINARY_MISSING", f"{path} not found; run `make` to install")
    return str(path)


def _connection(database_url: str) -> tuple[str, dict[str, str]]:
    """``--dbname``'s value for a PostgreSQL tool, and its environment: the password travels
    in ``PGPASSWORD``, never on a command line that every local user can read."""
    params = psycopg.conninfo.conninfo_to_dict(libpq_url(database_url))
    password = params.pop("password", None)
    env = {**os.environ, **({"PGPASSWORD": str(password)} if password else {})}
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items() if v is not None}), env


def _run(argv: list[str], what: str, env: dict[str, str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=PG_DUMP_TIMEOUT_S, env=env)
    if done.returncode != 0:
        raise errors.Unavailable(f"{what.upper()}_FAILED", f"{what} exited {done.returncode}: {done.stderr[-2000:]}")


def journal_position(database_url: str) -> tuple[int, int]:
    """(the journal's head, the relay's cursor) of the database at ``database_url``. Raises
    Unavailable("DATABASE_UNAVAILABLE") when it cannot be read (not running, not migrated)."""
    try:
        with psycopg.connect(libpq_url(database_url), connect_timeout=10) as conn:
            row = conn.execute(
                "select (select coalesce(max(journal_seq), 0) from socai_ledger.transactions), "
                "(select published_seq from socai_ledger.outbox_progress)"
            ).fetchone()
    except psycopg.Error as exc:
        raise errors.Unavailable("DATABASE_UNAVAILABLE", f"cannot read the journal: {exc}") from exc
    return (int(row[0]), int(row[1] or 0)) if row else (0, 0)


def backup(database_url: str, out: Path) -> dict[str, Any]:
    """``pg_dump --format=custom`` of the database at ``database_url`` into ``out``, and its
    description into ``out`` + ``.json``; returns the description."""
    out.parent.mkdir(parents=True, exist_ok=True)
    head, published = journal_position(database_url)
    started = datetime.now(UTC)
    began = time.monotonic()
    dbname, env = _connection(database_url)
    _run(
        [pg_tool("pg_dump"), "--format=custom", "--no-password", f"--file={out}", f"--dbname={dbname}"], "pg_dump", env
    )
    meta = {
        "file": out.name,
        "started_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "seconds": round(time.monotonic() - began, 3),
        "bytes": out.stat().st_size,
        # Read just before the dump's snapshot: the journal in the file holds at least this.
        "journal_head_at_least": head,
        "published_seq": published,
    }
    out.with_name(out.name + ".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    log.info("backup_written", **meta)
    return meta


def restore_database(database_url: str, dump: Path) -> None:
    """``pg_restore`` of ``dump`` into the database at ``database_url`` (one transaction:
    all or nothing). Raises PreconditionFailed("RESTORE_TARGET_NOT_EMPTY") when it already
    holds one of socai's schemas."""
    if not dump.exists():
        raise errors.NotFound("BACKUP_NOT_FOUND", f"{dump} does not exist")
    with psycopg.connect(libpq_url(database_url), connect_timeout=10) as conn:
        rows = conn.execute(
            "select schema_name from information_schema.schemata where schema_name = any(%s)",
            (list(SERVICE_SCHEMAS.values()),),
        ).fetchall()
    if rows:
        raise errors.PreconditionFailed(
            "RESTORE_TARGET_NOT_EMPTY",
            f"the database already holds {', '.join(sorted(r[0] for r in rows))}: restore into an empty database",
        )
    dbname, env = _connection(database_url)
    _run(
        [
            pg_tool("pg_restore"),
            "--exit-on-error",
            "--single-transaction",
            "--no-password",
            f"--dbname={dbname}",
            str(dump),
        ],
        "pg_restore",
        env,
    )


async def catch_up_journal(ledger_database_url: str, nats_url: str, ledger_stream: str) -> Any:
    """The journal brought up to date from the ledger's stream (``journal_restore.catch_up``),
    as the ledger's role; reads the stream as the NATS user of ``nats_url``."""
    from socai.infra.nats import connect
    from socai_ledger import db, journal_restore

    conn = await db.connect(ledger_database_url)
    try:
        nc = await connect(nats_url, name="socai-restore-journal")
        try:
            return await journal_restore.catch_up(conn, nc, ledger_stream)
        finally:
            await nc.close()
    finally:
        await conn.close()


async def _check_ledger_stream(nats_url: str, stream: str) -> None:
    """Raises PreconditionFailed("LEDGER_STREAM_MISSING") when the ledger's stream is gone."""
    from socai.infra.nats import connect
    from socai_ledger import journal_restore

    nc = await connect(nats_url, name="socai-restore-check")
    try:
        await journal_restore.stream_bounds(nc, stream)
    finally:
        await nc.close()


async def rewind_settlement(database_url: str, nats_url: str, settings: Settings) -> dict[str, int]:
    """Start settlement's durables again right after the newest hand its (restored) records
    hold (``socai_settlement.rewind``); returns each durable's start. Needs the NATS rights
    of the provisioner (settlement's durables are created and deleted as when P changes)."""
    from socai.infra.nats import connect
    from socai.infra.partitions import partitions_of
    from socai_settlement import durables
    from socai_settlement.config import SettlementConfig
    from socai_settlement.rewind import NEWEST_PER_TABLE_SQL, start_seqs

    with psycopg.connect(libpq_url(database_url), connect_timeout=10) as conn:
        newest = [(str(t), int(s)) for t, s in conn.execute(NEWEST_PER_TABLE_SQL).fetchall()]
    nc = await connect(nats_url, name="socai-restore-settlement")
    try:
        js = nc.jetstream()
        stream = settings.events_stream
        info = await js.stream_info(stream)
        partitions = partitions_of(info.config, settings.events_prefix) or 0
        base = SettlementConfig.from_env()
        starts: dict[str, int] = {}
        for k, start in start_seqs(newest, partitions).items():
            durable = durables.durable_of(base.durable, partitions, k)
            subject = durables.filter_of(settings.events_prefix, partitions, k)
            await durables.restart_at(js, stream, replace(base, durable=durable), subject, start)
            starts[durable] = start
            log.info("settlement_durable_rewound", durable=durable, filter=subject, stream_seq=start)
        return starts
    finally:
        await nc.close()


def restore(
    dump: Path | None,
    *,
    admin_url: str,
    owner_url: str,
    nats_url_for: Callable[[str], str],
    settings: Settings,
    migrate: bool = True,
    without_ledger_stream: bool = False,
) -> Restored:
    """The four steps of the module docstring against running servers: ``admin_url`` may
    restore (the embedded server's superuser, or the deployment's), ``owner_url`` runs the
    migrations, ``nats_url_for(user)`` reaches NATS as ``auditor`` (reads the ledger's stream)
    and ``provisioner`` (settlement's durables). ``dump`` None: the database was restored
    already (CloudNativePG's recovery from its base backup and WAL archive): steps 2 to 4.
    ``without_ledger_stream``: the ledger's stream was lost too; step 3 is skipped (what it
    would have given back is lost, but settlement still posts every hand again)."""
    from socai_cli import migrations

    report = Restored(str(dump or "(restored already)"))
    if not without_ledger_stream:  # before anything is written: a lost stream is the operator's call
        asyncio.run(_check_ledger_stream(nats_url_for("auditor"), settings.ledger_stream))
    if dump is not None:
        meta_file = dump.with_name(dump.name + ".json")
        if meta_file.exists():
            report.journal_head_in_backup = int(json.loads(meta_file.read_text()).get("journal_head_at_least", 0))
        began = time.monotonic()
        restore_database(admin_url, dump)
        report.seconds["pg_restore"] = round(time.monotonic() - began, 3)
    if migrate:
        began = time.monotonic()
        migrations.upgrade_all(owner_url)
        report.seconds["migrate"] = round(time.monotonic() - began, 3)
    if without_ledger_stream:
        report.journal_head, report.published_seq = journal_position(owner_url)
    else:
        began = time.monotonic()
        ledger_url = settings.database_url or role_url(owner_url, SERVICE_ROLES["ledger"])
        caught = asyncio.run(catch_up_journal(ledger_url, nats_url_for("auditor"), settings.ledger_stream))
        report.seconds["journal_catch_up"] = round(time.monotonic() - began, 3)
        report.journal_head = caught.head_after
        report.applied_from_stream = caught.applied
        report.published_seq = caught.published_seq
        report.hashes_inferred = caught.hashes_inferred
    began = time.monotonic()
    report.settlement_starts = asyncio.run(rewind_settlement(owner_url, nats_url_for("provisioner"), settings))
    report.seconds["settlement_rewind"] = round(time.monotonic() - began, 3)
    log.info("restored", **asdict(report))
    return report


# --- the commands ------------------------------------------------------------------------------


def _embedded_postgres(settings: Settings) -> EmbeddedPostgres:
    return EmbeddedPostgres(settings.var_dir / "pg", port=settings.pg_port)


def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    url = settings.database_url or _embedded_postgres(settings).url
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else settings.var_dir / "backups" / f"socai-{stamp}.dump"
    meta = backup(url, out)
    print(
        f"wrote {out} ({meta['bytes']} bytes, journal head >= {meta['journal_head_at_least']}) in {meta['seconds']} s"
    )
    return 0


def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    """With no URLs configured: start the embedded servers (a fresh PostgreSQL data directory
    when it was lost), restore, stop them. Else against the configured ones."""
    from socai_cli.stack import nats_layout

    if bool(args.file) == args.catch_up_only:
        raise errors.InvalidArgument("BAD_FLAGS", "give a backup file or --catch-up-only (exactly one)")
    postgres: EmbeddedPostgres | None = None
    nats: EmbeddedNats | None = None
    try:
        if settings.database_url:
            admin_url = owner_url = settings.database_url
        else:
            postgres = _embedded_postgres(settings)
            postgres.start()
            admin_url, owner_url = postgres.url, settings.effective_database_url
        if not settings.nats_url:
            nats = EmbeddedNats(settings.var_dir / "nats", port=settings.nats_port, layouts=(nats_layout(settings),))
            nats.start()
        urls = nats.url_for if nats is not None else _configured_nats(settings, args.reader_nats_url)
        report = restore(
            Path(args.file) if args.file else None,
            admin_url=admin_url,
            owner_url=owner_url,
            nats_url_for=urls,
            settings=settings,
            without_ledger_stream=args.without_ledger_stream,
        )
    finally:
        if nats is not None:
            nats.stop()
        if postgres is not None:
            postgres.stop()
    print(
        f"restored {report.dump}: journal head {report.journal_head} "
        f"({report.applied_from_stream} transactions from the ledger's stream, relay cursor {report.published_seq}); "
        f"settlement starts again at {report.settlement_starts}; steps (s): {report.seconds}"
    )
    print("next: socai up; then socai ledger verify, socai ledger trial-balance and socai audit")
    return 0


def _configured_nats(settings: Settings, reader_url: str) -> Callable[[str], str]:
    """SOCAI_NATS_URL for everything, but ``reader_url`` (when given) to read the ledger's stream."""

    def url_for(user: str) -> str:
        return reader_url if user == "auditor" and reader_url else settings.nats_url_for(user)

    return url_for


def add_commands(subparsers: Any, command: Callable[[str], Callable[[Handler], Handler]]) -> None:
    p = subparsers.add_parser("backup", help="a base backup of the database (pg_dump), for socai restore")
    p.add_argument("--out", default="", help="the backup file (default var/backups/socai-<UTC time>.dump)")
    command("backup")(cmd_backup)
    p = subparsers.add_parser(
        "restore",
        help="after losing PostgreSQL: restore a backup, bring the journal up to date from the ledger's "
        "stream, and let settlement post again what was lost (services stopped)",
    )
    p.add_argument("file", nargs="?", default="", help="a file written by socai backup")
    p.add_argument(
        "--catch-up-only",
        action="store_true",
        help="the database is restored already (CloudNativePG recovery): migrate, bring the journal up to "
        "date from the ledger's stream, rewind settlement",
    )
    p.add_argument(
        "--reader-nats-url",
        default="",
        help="with SOCAI_NATS_URL (the provisioner's, for settlement's durables): the URL that reads the "
        "ledger's stream (the auditor's; default SOCAI_NATS_URL)",
    )
    p.add_argument(
        "--without-ledger-stream",
        action="store_true",
        help="the ledger's stream was lost too: restore and rewind settlement without the catch-up "
        "(every posting after the backup but the hands' settlements is lost; docs/run/operations.md)",
    )
    command("restore")(cmd_restore)
