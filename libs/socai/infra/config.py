"""Settings from the environment, with embedded defaults.

| variable | default | meaning |
|---|---|---|
| ``SOCAI_NATS_URL`` | (embedded) | NATS server; unset → ``socai up`` starts nats-server under var/ |
| ``SOCAI_DATABASE_URL`` | (embedded) | PostgreSQL (``postgresql://…``) as this process's role: the owner for ``socai migrate``, the service's own role for a service (``socai.infra.db``); unset → embedded PostgreSQL under var/, where ``socai up`` gives each its role |
| ``SOCAI_VAR_DIR`` | ``./var`` | runtime data: NATS store, PostgreSQL data, reports |
| ``SOCAI_NATS_PORT`` / ``SOCAI_PG_PORT`` | 4222 / 5433 | ports of the embedded servers |
| ``SOCAI_LEDGER_ADDR`` | ``127.0.0.1:50051`` | ledger gRPC address (listen and dial) |
| ``SOCAI_TABLE_ADDR`` | ``127.0.0.1:50052`` | table gRPC address |
| ``SOCAI_SETTLEMENT_ADDR`` | ``127.0.0.1:50053`` | settlement gRPC address |
| ``SOCAI_LISTEN_ADDR`` | the service's own address | where this service process listens (``0.0.0.0:50051`` in a container) |
| ``SOCAI_TABLE_INSTANCE`` | ``table-0`` | this table-service instance's name; tables are owned by one instance |
| ``SOCAI_HEARTBEAT_TIMEOUT_S`` | ``10`` | a player who sent heartbeats and then misses them this long is disconnected |
| ``SOCAI_METRICS_PORT_BASE`` | ``9460`` | Prometheus ports: ledger +0, table +1, settlement +2 |
| ``SOCAI_METRICS_HOST`` | the host gRPC listens on | where the Prometheus endpoint listens (it has no authentication: by default exactly as exposed as the service's gRPC port, loopback on a laptop, ``0.0.0.0`` in a container) |
| ``SOCAI_TOKENS`` | dev tokens | ``caller=token,…`` bearer tokens of calling services; ``caller=new|old`` accepts both during a rotation |
| ``SOCAI_SERVICE_TOKEN`` | dev token of the caller | the token this process presents when it calls others |
| ``SOCAI_PLAYER_TOKEN_KEY`` | dev key | HMAC key of player tokens (table service; hand seeds are encrypted at rest with a key derived from it) |
| ``SOCAI_TABLE_SEAL_KEY`` | dev: derived from the player-token key | the table service's Ed25519 hand-seal key, 64 hex digits (``socai.events.seal``; ``python -m socai.events.seal`` makes a pair); required outside development mode |
| ``SOCAI_TABLE_SEAL_PUBLIC_KEYS`` | dev: the public key of the table's seal key | ``hex,hex``: the public keys whose hand seals settlement and the auditor accept (two during a rotation); required outside development mode |
| ``SOCAI_LEDGER_SEAL_KEY`` | dev: derived from the player-token key | the ledger's Ed25519 key that signs each page of the journal it lists (``socai.audit.journal``), 64 hex digits; unset outside development mode: pages are listed unsigned |
| ``SOCAI_LEDGER_SEAL_PUBLIC_KEYS`` | dev: the public key of the ledger's seal key | ``hex,hex``: the public keys the auditor checks a journal export's page seals with |
| ``SOCAI_SEAL_LEGACY_BEFORE_SEQ`` | ``0`` | a hand whose first message is below this stream sequence and carries no ``Socai-Prev`` (written before hand seals) is settled and audited unsealed; 0: none is |
| ``SOCAI_DEV_MODE`` | on with the embedded servers | ``1`` allows the public development tokens and key; off, a service that still has them refuses to start |
| ``SOCAI_EVENTS_STREAM`` | ``SOCAI_EVENTS`` | JetStream stream name |
| ``SOCAI_EVENTS_PREFIX`` | ``socai.events`` | subject prefix of events |
| ``SOCAI_LEDGER_STREAM`` | ``SOCAI_LEDGER`` | JetStream stream the ledger's outbox publishes to |
| ``SOCAI_LEDGER_PREFIX`` | ``socai.ledger`` | its subject prefix (``<prefix>.posted.<account kind>``) |
| ``SOCAI_STREAM_REPLICAS`` | ``1`` | JetStream replicas of the streams socai provisions (3 in a cluster) |
| ``SOCAI_EVENT_PARTITIONS`` | ``0`` | P, the event log's partitions (``socai.infra.partitions``); 0: one settlement consumer for every table. Fixed per deployment: changing it is a migration |
| ``SOCAI_LIMIT_CALLER_CALLS_PER_S`` | ``20000`` | every service: calls per second one calling service (its token) may make to one instance, with a burst of two seconds' worth; over it ``RESOURCE_EXHAUSTED RATE_LIMITED`` |
| ``SOCAI_LIMIT_PLAYER_CALLS_PER_S`` | ``100`` | table: calls per second of one player (their player token) to one instance, burst two seconds' worth (``RATE_LIMITED``) |
| ``SOCAI_LIMIT_PLAYER_STREAMS`` | ``16`` | table: ``WatchTable`` streams one player may have open on one instance (``TOO_MANY_STREAMS``) |
| ``SOCAI_LIMIT_CALLER_STREAMS`` | ``10000`` | table: ``WatchTable`` streams one calling service may have open on one instance, its players' and spectators' together (``TOO_MANY_STREAMS``) |
| ``SOCAI_LIMIT_OWNER_TABLES`` | ``50`` | table: open tables of one owner (``owner_player_id``), every instance's together (``TOO_MANY_TABLES``) |
| ``SOCAI_LIMIT_OWNER_TABLES_PER_MIN`` | ``30`` | table: tables one owner may create per minute, per instance (``TOO_MANY_TABLES``, with ``retry_after_ms``) |
| ``SOCAI_LIMIT_WATCH_QUEUED_EVENTS`` | ``200000`` | table: events waiting in all ``WatchTable`` streams of an instance together (each stream holds at most 2,000); at the bound the stream furthest behind is ended ``RESOURCE_EXHAUSTED WATCH_MEMORY_FULL`` |
| ``SOCAI_LOG_FORMAT`` | ``json`` in services | ``json`` or ``console`` |
| ``SOCAI_LOG_LEVEL`` | ``info`` | |
| ``SOCAI_LOG_FILE`` | (stderr) | write the log to this file, rotated by size (``socai up`` sets it per service: ``var/log/<service>.log``) |
| ``SOCAI_LOG_MAX_BYTES`` / ``SOCAI_LOG_BACKUPS`` | 52428800 / 5 | rotation: the size of one file and how many older files are kept |

Every ``SOCAI_LIMIT_*`` set to 0 turns that limit off. The defaults leave room for every bot
of ``socai simulate``, the demo, the chaos and soak harnesses and the benchmarks (250 tables,
one owner per table, one spectator stream per table): what the limits stop is one caller,
player or owner taking what the others need (``socai.infra.limits``).

The development tokens are public and printed in the README; every deployment sets its own
(deploy/ puts them in Secrets). A service refuses to start with a public development value
outside development mode (``Settings.check_secrets``): development mode is on when the
embedded servers are used (no ``SOCAI_NATS_URL`` / ``SOCAI_DATABASE_URL``: a laptop) or when
``SOCAI_DEV_MODE=1`` says so (docker compose). ``Settings`` is immutable; build it once in ``main`` and pass it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from socai.infra.nats import StreamSpec

# Development tokens: well known on purpose, replaced in every real deployment.
DEV_TOKENS: dict[str, str] = {
    "table": "dev-table-token",
    "settlement": "dev-settlement-token",
    "cashier": "dev-cashier-token",
    "auditor": "dev-auditor-token",
    "backend": "dev-backend-token",
    "operator": "dev-operator-token",
}
DEV_PLAYER_TOKEN_KEY = "dev-player-token-key"


def _parse_accepted_keys(text: str) -> tuple[tuple[str, int], ...]:
    """``KEY[@SEQ],…`` → ((key, last stream sequence or 0), …). A key may not hold a comma;
    a trailing ``@digits`` is the sequence. Raises InvalidArgument("BAD_ACCEPTED_KEY")."""
    from socai import errors

    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, at, seq = part.rpartition("@")
        if not at or not seq.isdigit():
            key, seq = part, "0"
        if not key:
            raise errors.InvalidArgument("BAD_ACCEPTED_KEY", "SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED: an empty key")
        out.append((key, int(seq)))
    return tuple(out)


def _parse_tokens(text: str) -> dict[str, str]:
    tokens = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        caller, sep, token = item.partition("=")
        if not sep or not caller or not token:
            raise ValueError(f"SOCAI_TOKENS item {item!r} is not caller=token")
        tokens[caller.strip()] = token.strip()
    return tokens


def _dev_mode(e: Mapping[str, str]) -> bool:
    explicit = e.get("SOCAI_DEV_MODE", "").strip().lower()
    if explicit:
        return explicit in ("1", "true", "yes", "on")
    return not e.get("SOCAI_NATS_URL") and not e.get("SOCAI_DATABASE_URL")


@dataclass(frozen=True)
class Limits:
    """What one caller, player or owner may take of a service (``SOCAI_LIMIT_*``; 0: no
    limit). Rates are per instance; open tables are counted over every instance."""

    caller_calls_per_s: float = 20_000.0
    player_calls_per_s: float = 100.0
    player_streams: int = 16
    caller_streams: int = 10_000
    owner_tables: int = 50
    owner_tables_per_min: int = 30
    watch_queued_events: int = 200_000

    ENV: ClassVar[dict[str, str]] = {
        "caller_calls_per_s": "SOCAI_LIMIT_CALLER_CALLS_PER_S",
        "player_calls_per_s": "SOCAI_LIMIT_PLAYER_CALLS_PER_S",
        "player_streams": "SOCAI_LIMIT_PLAYER_STREAMS",
        "caller_streams": "SOCAI_LIMIT_CALLER_STREAMS",
        "owner_tables": "SOCAI_LIMIT_OWNER_TABLES",
        "owner_tables_per_min": "SOCAI_LIMIT_OWNER_TABLES_PER_MIN",
        "watch_queued_events": "SOCAI_LIMIT_WATCH_QUEUED_EVENTS",
    }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Limits:
        """Raises ValueError naming the variable when a value is not a number >= 0."""
        values: dict[str, float | int] = {}
        for name, variable in cls.ENV.items():
            text = env.get(variable, "").strip()
            if not text:
                continue
            kind = float if name.endswith("_per_s") else int
            try:
                value = kind(text)
            except ValueError:
                raise ValueError(f"{variable}={text!r} is not a number") from None
            if not value >= 0:
                raise ValueError(f"{variable}={text!r} must be 0 (no limit) or more")
            values[name] = value
        return cls(**values)  # type: ignore[arg-type]

    def as_env(self) -> dict[str, str]:
        return {variable: str(getattr(self, name)) for name, variable in self.ENV.items()}


@dataclass(frozen=True)
class Settings:
    var_dir: Path = Path("var")
    nats_url: str | None = None
    database_url: str | None = None
    nats_port: int = 4222
    pg_port: int = 5433
    ledger_addr: str = "127.0.0.1:50051"
    table_addr: str = "127.0.0.1:50052"
    settlement_addr: str = "127.0.0.1:50053"
    listen_addr: str | None = None
    table_instance: str = "table-0"
    heartbeat_timeout_s: float = 10.0
    metrics_port_base: int = 9460
    metrics_host: str | None = None  # None: the host the service's gRPC listens on
    tokens: Mapping[str, str] = field(default_factory=lambda: dict(DEV_TOKENS))
    service_token: str | None = None
    player_token_key: str = DEV_PLAYER_TOKEN_KEY
    # While the player-token key is rotated: the other keys the table service still accepts,
    # each with the last event-stream sequence it may have signed (0: any). ``KEY[@SEQ],…``.
    player_token_keys_accepted: tuple[tuple[str, int], ...] = ()
    table_seal_key: str = ""  # empty: derived from player_token_key, in development mode only
    table_seal_public_keys: tuple[str, ...] = ()  # empty: the table seal key's, in development mode only
    seal_legacy_before_seq: int = 0
    ledger_seal_key: str = ""  # empty: derived from player_token_key in development mode, else none
    ledger_seal_public_keys: tuple[str, ...] = ()  # empty: the ledger seal key's, in development mode only
    events_stream: str = "SOCAI_EVENTS"
    events_prefix: str = "socai.events"
    ledger_stream: str = "SOCAI_LEDGER"
    ledger_prefix: str = "socai.ledger"
    stream_replicas: int = 1
    event_partitions: int = 0
    log_format: str = "json"
    log_level: str = "info"
    log_file: str | None = None
    log_max_bytes: int = 50 * 1024 * 1024
    log_backups: int = 5
    limits: Limits = field(default_factory=Limits)
    # Settings built in code (tests, the local stack) are development settings; from_env
    # decides from the environment.
    dev_mode: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        s = cls()
        return replace(
            s,
            var_dir=Path(e.get("SOCAI_VAR_DIR", str(s.var_dir))),
            nats_url=e.get("SOCAI_NATS_URL") or None,
            database_url=e.get("SOCAI_DATABASE_URL") or None,
            nats_port=int(e.get("SOCAI_NATS_PORT", s.nats_port)),
            pg_port=int(e.get("SOCAI_PG_PORT", s.pg_port)),
            ledger_addr=e.get("SOCAI_LEDGER_ADDR", s.ledger_addr),
            table_addr=e.get("SOCAI_TABLE_ADDR", s.table_addr),
            settlement_addr=e.get("SOCAI_SETTLEMENT_ADDR", s.settlement_addr),
            listen_addr=e.get("SOCAI_LISTEN_ADDR") or None,
            table_instance=e.get("SOCAI_TABLE_INSTANCE", s.table_instance),
            heartbeat_timeout_s=float(e.get("SOCAI_HEARTBEAT_TIMEOUT_S", s.heartbeat_timeout_s)),
            metrics_port_base=int(e.get("SOCAI_METRICS_PORT_BASE", s.metrics_port_base)),
            metrics_host=e.get("SOCAI_METRICS_HOST") or None,
            tokens=_parse_tokens(e["SOCAI_TOKENS"]) if e.get("SOCAI_TOKENS") else dict(DEV_TOKENS),
            service_token=e.get("SOCAI_SERVICE_TOKEN") or None,
            player_token_key=e.get("SOCAI_PLAYER_TOKEN_KEY", s.player_token_key),
            player_token_keys_accepted=_parse_accepted_keys(e.get("SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED", "")),
            table_seal_key=e.get("SOCAI_TABLE_SEAL_KEY", s.table_seal_key).strip(),
            table_seal_public_keys=tuple(
                k.strip() for k in e.get("SOCAI_TABLE_SEAL_PUBLIC_KEYS", "").split(",") if k.strip()
            ),
            seal_legacy_before_seq=int(e.get("SOCAI_SEAL_LEGACY_BEFORE_SEQ", s.seal_legacy_before_seq)),
            ledger_seal_key=e.get("SOCAI_LEDGER_SEAL_KEY", s.ledger_seal_key).strip(),
            ledger_seal_public_keys=tuple(
                k.strip() for k in e.get("SOCAI_LEDGER_SEAL_PUBLIC_KEYS", "").split(",") if k.strip()
            ),
            events_stream=e.get("SOCAI_EVENTS_STREAM", s.events_stream),
            events_prefix=e.get("SOCAI_EVENTS_PREFIX", s.events_prefix),
            ledger_stream=e.get("SOCAI_LEDGER_STREAM", s.ledger_stream),
            ledger_prefix=e.get("SOCAI_LEDGER_PREFIX", s.ledger_prefix),
            stream_replicas=int(e.get("SOCAI_STREAM_REPLICAS", s.stream_replicas)),
            event_partitions=int(e.get("SOCAI_EVENT_PARTITIONS", s.event_partitions)),
            log_format=e.get("SOCAI_LOG_FORMAT", s.log_format),
            log_level=e.get("SOCAI_LOG_LEVEL", s.log_level),
            log_file=e.get("SOCAI_LOG_FILE") or None,
            log_max_bytes=int(e.get("SOCAI_LOG_MAX_BYTES", s.log_max_bytes)),
            log_backups=int(e.get("SOCAI_LOG_BACKUPS", s.log_backups)),
            limits=Limits.from_env(e),
            dev_mode=_dev_mode(e),
        )

    def public_dev_values(self) -> list[str]:
        """The settings that still hold a public development value (README prints them)."""
        found = []
        dev_tokens = set(DEV_TOKENS.values())
        if any(part in dev_tokens for token in self.tokens.values() for part in token.split("|")):
            found.append("SOCAI_TOKENS")
        if self.service_token in dev_tokens:
            found.append("SOCAI_SERVICE_TOKEN")
        if self.player_token_key == DEV_PLAYER_TOKEN_KEY:
            found.append("SOCAI_PLAYER_TOKEN_KEY")
        if self.table_seal_key or self.table_seal_public_keys:
            from socai.infra import keys  # cryptography: only where a key is read

            dev_private = keys.derive_private_key(DEV_PLAYER_TOKEN_KEY)
            if self.table_seal_key and self.table_seal_key.lower() == dev_private.hex():
                found.append("SOCAI_TABLE_SEAL_KEY")
            if keys.public_key_of(dev_private).hex() in {k.lower() for k in self.table_seal_public_keys}:
                found.append("SOCAI_TABLE_SEAL_PUBLIC_KEYS")
        if self.ledger_seal_key or self.ledger_seal_public_keys:
            from socai.infra import keys  # cryptography: only where a key is read

            dev_journal = keys.derive_journal_key(DEV_PLAYER_TOKEN_KEY)
            if self.ledger_seal_key and self.ledger_seal_key.lower() == dev_journal.hex():
                found.append("SOCAI_LEDGER_SEAL_KEY")
            if keys.public_key_of(dev_journal).hex() in {k.lower() for k in self.ledger_seal_public_keys}:
                found.append("SOCAI_LEDGER_SEAL_PUBLIC_KEYS")
        return found

    def hand_seal_private_key(self) -> bytes:
        """The table service's hand-seal key (``socai.events.seal``): SOCAI_TABLE_SEAL_KEY, else,
        in development mode, one derived from the player-token key.

        Raises PreconditionFailed("SEAL_KEY_MISSING") outside development mode without one, so a
        table service never seals with a key nobody configured the readers for;
        InvalidArgument("BAD_SEAL_KEY") when it is not 64 hex digits.
        """
        from socai import errors
        from socai.infra import keys  # cryptography: only where a key is read

        if self.table_seal_key:
            try:
                return keys.parse_private_key(self.table_seal_key)
            except ValueError as exc:
                raise errors.InvalidArgument("BAD_SEAL_KEY", f"SOCAI_TABLE_SEAL_KEY: {exc}") from exc
        if not self.dev_mode:
            raise errors.PreconditionFailed(
                "SEAL_KEY_MISSING", "set SOCAI_TABLE_SEAL_KEY (python -m socai.events.seal makes a key pair)"
            )
        return keys.derive_private_key(self.player_token_key)

    def hand_seal_public_keys(self) -> dict[str, bytes]:
        """Key id → public key of the hand seals to accept: SOCAI_TABLE_SEAL_PUBLIC_KEYS, else, in
        development mode, the public key of ``hand_seal_private_key``.

        Raises PreconditionFailed("SEAL_KEYS_MISSING") outside development mode without any
        (settlement would otherwise refuse every hand), InvalidArgument("BAD_SEAL_KEY") for a
        key that is not 64 hex digits.
        """
        from socai import errors
        from socai.infra import keys  # cryptography: only where a key is read

        if self.table_seal_public_keys:
            try:
                return keys.parse_public_keys(self.table_seal_public_keys)
            except ValueError as exc:
                raise errors.InvalidArgument("BAD_SEAL_KEY", f"SOCAI_TABLE_SEAL_PUBLIC_KEYS: {exc}") from exc
        if not self.dev_mode:
            raise errors.PreconditionFailed(
                "SEAL_KEYS_MISSING", "set SOCAI_TABLE_SEAL_PUBLIC_KEYS to the table service's hand-seal public key(s)"
            )
        public = keys.public_key_of(self.hand_seal_private_key())
        return {keys.key_id(public): public}

    def journal_seal_private_key(self) -> bytes | None:
        """The ledger's journal seal key (``socai.audit.journal``): SOCAI_LEDGER_SEAL_KEY, else,
        in development mode, one derived from the player-token key; None outside development
        mode without one (the journal is then listed unsigned). Raises
        InvalidArgument("BAD_SEAL_KEY") when it is not 64 hex digits."""
        from socai import errors
        from socai.infra import keys  # cryptography: only where a key is read

        if self.ledger_seal_key:
            try:
                return keys.parse_private_key(self.ledger_seal_key)
            except ValueError as exc:
                raise errors.InvalidArgument("BAD_SEAL_KEY", f"SOCAI_LEDGER_SEAL_KEY: {exc}") from exc
        if not self.dev_mode:
            return None
        return keys.derive_journal_key(self.player_token_key)

    def journal_seal_public_keys(self) -> dict[str, bytes]:
        """Key id → public key of the ledger's journal seals: SOCAI_LEDGER_SEAL_PUBLIC_KEYS, else,
        in development mode, the public key of ``journal_seal_private_key``; else none.
        Raises InvalidArgument("BAD_SEAL_KEY") for a key that is not 64 hex digits."""
        from socai import errors
        from socai.infra import keys  # cryptography: only where a key is read

        if self.ledger_seal_public_keys:
            try:
                return keys.parse_public_keys(self.ledger_seal_public_keys)
            except ValueError as exc:
                raise errors.InvalidArgument("BAD_SEAL_KEY", f"SOCAI_LEDGER_SEAL_PUBLIC_KEYS: {exc}") from exc
        private = self.journal_seal_private_key()
        if private is None:
            return {}
        public = keys.public_key_of(private)
        return {keys.key_id(public): public}

    def check_secrets(self) -> None:
        """Refuse public development secrets outside development mode.

        Raises PreconditionFailed("DEV_SECRETS") naming the settings to set, so a deployment
        that forgot its Secrets stops at start instead of accepting the README's tokens.
        """
        from socai import errors

        found = self.public_dev_values()
        if found and not self.dev_mode:
            raise errors.PreconditionFailed(
                "DEV_SECRETS",
                f"{', '.join(found)} hold the public development values; set your own "
                f"(deploy/k8s/examples/secrets.yaml), or SOCAI_DEV_MODE=1 for a development stack",
            )

    def listen_address(self, own_address: str) -> str:
        """Where a service listens: SOCAI_LISTEN_ADDR, else the address others dial."""
        return self.listen_addr or own_address

    def metrics_bind_host(self, own_address: str) -> str:
        """Where a service's Prometheus endpoint listens: SOCAI_METRICS_HOST, else the host its
        gRPC server listens on (``listen_address``). The endpoint has no authentication, so
        it is never more exposed than the service itself unless asked to be."""
        if self.metrics_host:
            return self.metrics_host
        host = self.listen_address(own_address).rsplit(":", 1)[0]
        return host.removeprefix("[").removesuffix("]")  # an IPv6 address is bracketed in host:port

    def token_of(self, caller: str) -> str:
        """The token this process presents as ``caller`` (SOCAI_SERVICE_TOKEN wins)."""
        if self.service_token:
            return self.service_token
        token = self.tokens.get(caller)
        if token is None:
            raise KeyError(f"no token for caller {caller!r}; set SOCAI_SERVICE_TOKEN or SOCAI_TOKENS")
        return token.split("|", 1)[0]  # during a rotation the first token is the new one

    @property
    def effective_nats_url(self) -> str:
        """SOCAI_NATS_URL, else the embedded nats-server's address (no user: see ``nats_url_for``)."""
        return self.nats_url or f"nats://127.0.0.1:{self.nats_port}"

    def nats_url_for(self, user: str) -> str:
        """The NATS URL to connect with as ``user`` (``socai.infra.nats_auth``: ``table``,
        ``settlement``, ``ledger``, ``provisioner``, ``auditor``).

        SOCAI_NATS_URL when set: a deployment gives each process a URL with its own user in
        it. Else the embedded nats-server of ``var_dir``, which runs with the users of deploy/
        and writes this run's passwords beside its configuration (``var/nats/users.json``,
        readable by its owner only); before it ever ran, its address without a user.
        """
        if self.nats_url:
            return self.nats_url
        from socai.infra.nats_auth import CREDENTIALS_FILE, Credentials

        path = self.var_dir / "nats" / CREDENTIALS_FILE
        if not path.exists():
            return self.effective_nats_url
        credentials = Credentials.load(path)
        if user not in credentials.passwords:
            return self.effective_nats_url
        return f"nats://{user}:{credentials.passwords[user]}@127.0.0.1:{self.nats_port}"

    @property
    def effective_database_url(self) -> str:
        """SOCAI_DATABASE_URL, else the owner role on the embedded server (``socai migrate``,
        ``socai status``, a service started by hand)."""
        from socai.infra.db import OWNER_ROLE

        return self.database_url or f"postgresql://{OWNER_ROLE}@127.0.0.1:{self.pg_port}/socai"

    def service_database_url(self, service: str) -> str:
        """SOCAI_DATABASE_URL, else service ``service``'s own role on the embedded server."""
        from socai.infra.db import SERVICE_ROLES, role_url

        return self.database_url or role_url(self.effective_database_url, SERVICE_ROLES[service])

    def events_stream_spec(self) -> StreamSpec:
        """The event stream as these settings describe it (name, subjects, replicas)."""
        from socai.infra.nats import events_stream_spec

        return events_stream_spec(self.events_stream, self.events_prefix, self.stream_replicas, self.event_partitions)

    def ledger_stream_spec(self) -> StreamSpec:
        """The ledger's outbox stream as these settings describe it."""
        from socai.infra.nats import ledger_stream_spec

        return ledger_stream_spec(self.ledger_stream, self.ledger_prefix, self.stream_replicas)

    def as_env(self) -> dict[str, str]:
        """The environment that reproduces these settings in a child process."""
        env = {
            "SOCAI_VAR_DIR": str(self.var_dir),
            "SOCAI_NATS_PORT": str(self.nats_port),
            "SOCAI_PG_PORT": str(self.pg_port),
            "SOCAI_LEDGER_ADDR": self.ledger_addr,
            "SOCAI_TABLE_ADDR": self.table_addr,
            "SOCAI_SETTLEMENT_ADDR": self.settlement_addr,
            "SOCAI_TABLE_INSTANCE": self.table_instance,
            "SOCAI_HEARTBEAT_TIMEOUT_S": str(self.heartbeat_timeout_s),
            "SOCAI_METRICS_PORT_BASE": str(self.metrics_port_base),
            "SOCAI_TOKENS": ",".join(f"{k}={v}" for k, v in self.tokens.items()),
            "SOCAI_PLAYER_TOKEN_KEY": self.player_token_key,
            "SOCAI_PLAYER_TOKEN_KEYS_ACCEPTED": ",".join(
                f"{key}@{last}" if last else key for key, last in self.player_token_keys_accepted
            ),
            "SOCAI_SEAL_LEGACY_BEFORE_SEQ": str(self.seal_legacy_before_seq),
            "SOCAI_EVENTS_STREAM": self.events_stream,
            "SOCAI_EVENTS_PREFIX": self.events_prefix,
            "SOCAI_LEDGER_STREAM": self.ledger_stream,
            "SOCAI_LEDGER_PREFIX": self.ledger_prefix,
            "SOCAI_STREAM_REPLICAS": str(self.stream_replicas),
            "SOCAI_EVENT_PARTITIONS": str(self.event_partitions),
            "SOCAI_LOG_FORMAT": self.log_format,
            "SOCAI_LOG_LEVEL": self.log_level,
            "SOCAI_LOG_MAX_BYTES": str(self.log_max_bytes),
            "SOCAI_LOG_BACKUPS": str(self.log_backups),
            "SOCAI_DEV_MODE": "1" if self.dev_mode else "0",
            **self.limits.as_env(),
        }
        if self.table_seal_key:
            env["SOCAI_TABLE_SEAL_KEY"] = self.table_seal_key
        if self.table_seal_public_keys:
            env["SOCAI_TABLE_SEAL_PUBLIC_KEYS"] = ",".join(self.table_seal_public_keys)
        if self.ledger_seal_key:
            env["SOCAI_LEDGER_SEAL_KEY"] = self.ledger_seal_key
        if self.ledger_seal_public_keys:
            env["SOCAI_LEDGER_SEAL_PUBLIC_KEYS"] = ",".join(self.ledger_seal_public_keys)
        if self.listen_addr:
            env["SOCAI_LISTEN_ADDR"] = self.listen_addr
        if self.metrics_host:
            env["SOCAI_METRICS_HOST"] = self.metrics_host
        if self.nats_url:
            env["SOCAI_NATS_URL"] = self.nats_url
        if self.database_url:
            env["SOCAI_DATABASE_URL"] = self.database_url
        return env
