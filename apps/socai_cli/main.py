"""The ``socai`` command.

    socai up            run NATS, PostgreSQL and the services in the foreground (Ctrl-C stops all)
    socai status        each component's health; exit status 1 if any is down
    socai migrate       run every service's database migrations (the deploy/ migration job)

Each service package adds its own subcommands: a module in ``plugins()`` defines
``add_commands(subparsers, command)``, which adds its parsers and registers their handlers
with ``command(name)``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

import socai
from socai import errors
from socai.infra import logging as slog
from socai.infra.config import Settings
from socai.infra.nats_auth import shown_url

Handler = Callable[[argparse.Namespace, Settings], int]
_COMMANDS: dict[str, Handler] = {}


def plugins() -> tuple[ModuleType, ...]:
    """The modules that add subcommands (``add_commands(subparsers, command)``), in help order."""
    from socai.audit import cli as audit_cli
    from socai_cli import apidocs, backup, demo
    from socai_ledger import cli as ledger_cli
    from socai_settlement import cli as settlement_cli
    from socai_table import cli as table_cli

    return (ledger_cli, table_cli, audit_cli, settlement_cli, backup, demo, apidocs)


def command(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _COMMANDS[name] = fn
        return fn

    return register


@command("up")
def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from socai_cli.stack import Stack, instance_address, instance_name, service_address

    stack = Stack(settings, instances={"table": args.table_instances, "settlement": args.settlement_instances})
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        started = stack.start()
        s = stack.resolved_settings()
        print("socai is up (Ctrl-C stops everything)")
        embedded = "  (embedded, var/nats: each client its own user, var/nats/users.json)"
        print(f"  NATS        {shown_url(stack.nats_url)}{embedded if stack.nats else ''}")
        print(f"  PostgreSQL  {s.database_url}{'  (embedded, var/pg)' if stack.postgres else ''}")
        for name in ("ledger", "table", "settlement"):
            for i in range(stack.instances.get(name, 1)):
                label = instance_name(name, i)
                if label in started:
                    address = instance_address(service_address(settings, name), i)
                    print(f"  {label:<12} grpc://{address}  (log: {s.var_dir / 'log' / label}.log)")
        if stack.instances.get("table", 1) > 1:
            # Clients dial every table instance; one that does not run a table forwards the call.
            print(f"  clients     SOCAI_TABLE_ADDR={s.table_addr}")
        missing = [n for n in ("ledger", "table", "settlement") if n not in started]
        if missing:
            print(f"  not built yet: {', '.join(missing)}")
        sys.stdout.flush()
        while not stop.is_set():
            for name, proc in list(stack.procs.items()):
                if proc.poll() is not None:
                    print(f"{name} exited with {proc.returncode}; stopping", file=sys.stderr)
                    stop.set()
            stop.wait(0.5)
    except errors.SocaiError as exc:
        print(f"socai up: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    finally:
        print("stopping…", flush=True)
        stack.stop()
        print("stopped", flush=True)
    return 0


@command("status")
def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from socai_cli.stack import running_services

    rows: list[tuple[str, bool, str]] = []
    rows.append(("nats", *asyncio.run(_nats_status(settings.nats_url_for("auditor"), settings))))
    db_url = settings.effective_database_url
    rows.append(("postgres", *_pg_status(db_url)))
    for name, status in running_services(settings).items():
        rows.append((name, status == "SERVING", status))
    width = max(len(r[0]) for r in rows)
    for name, ok, detail in rows:
        print(f"{name:<{width}}  {'up  ' if ok else 'DOWN'}  {detail}")
    return 0 if all(ok for _, ok, _ in rows) else 1


async def _nats_status(url: str, settings: Settings) -> tuple[bool, str]:
    from socai.infra.nats import connect

    shown = shown_url(url)
    try:
        nc = await connect(url, name="socai-status", connect_timeout=2, max_reconnect_attempts=0)
    except errors.SocaiError as exc:
        return False, f"{shown}: {errors.truncate(exc.message.replace(url, shown), 300)}"
    try:
        js = nc.jetstream()
        try:
            info = await js.stream_info(settings.events_stream)
            state = info.state
            return (
                True,
                f"{shown} stream {settings.events_stream}: {state.messages} events, last sequence {state.last_seq}",
            )
        except Exception as exc:
            return False, f"{shown}: stream {settings.events_stream}: {exc}"
    finally:
        await nc.close()


def _pg_status(url: str) -> tuple[bool, str]:
    import psycopg

    from socai.infra.db import SERVICE_SCHEMAS, libpq_url

    try:
        with psycopg.connect(libpq_url(url), connect_timeout=2) as conn:
            version = conn.execute("show server_version").fetchone()
            heads = []
            for schema in SERVICE_SCHEMAS.values():
                row = conn.execute(
                    "select 1 from information_schema.tables where table_schema=%s and table_name='alembic_version'",
                    (schema,),
                ).fetchone()
                rev = conn.execute(f'select version_num from "{schema}".alembic_version').fetchone() if row else None
                heads.append(f"{schema}@{rev[0] if rev else 'none'}")
            return True, f"PostgreSQL {version[0] if version else '?'}; {' '.join(heads)}"
    except Exception as exc:
        return False, f"{url}: {exc}"


@command("migrate")
def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from socai_cli import migrations as migrate
    from socai_cli.stack import provision_streams

    migrate.upgrade_all(settings.effective_database_url)
    if settings.nats_url:  # the deploy/ migration job also provisions the streams
        asyncio.run(provision_streams(settings, allow_repartition=args.repartition, lease_env=os.environ))
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 16:
        raise argparse.ArgumentTypeError("must be 1..16")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="socai", description="socai: tables, settlement and the ledger")
    parser.add_argument("--version", action="version", version=socai.version())
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run NATS, PostgreSQL and the services in the foreground")
    up.add_argument(
        "--table-instances",
        type=_positive,
        default=1,
        help="table-service processes sharing the tables through leases; a call reaching one that "
        "does not run its table is forwarded (default 1)",
    )
    up.add_argument(
        "--settlement-instances",
        type=_positive,
        default=1,
        help="settlement processes sharing the event log's partitions through leases (default 1)",
    )
    sub.add_parser("status", help="show each component's health")
    migrate = sub.add_parser("migrate", help="run every service's database migrations (and provision the streams)")
    migrate.add_argument(
        "--repartition",
        action="store_true",
        help="let SOCAI_EVENT_PARTITIONS change an existing event log's P (the migration: deploy/README.md)",
    )
    for module in plugins():
        module.add_commands(sub, command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    slog.configure(fmt="console", level=settings.log_level)
    try:
        return _COMMANDS[args.command](args, settings)
    except errors.SocaiError as exc:
        print(f"socai {args.command}: {exc.code}: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
