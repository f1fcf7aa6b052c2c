"""Record a ``table`` batch of the golden corpus: bots play one game through the real services.

``python -m tests.golden record GAME --hands N`` brings up a private stack (embedded NATS and
PostgreSQL under ``var/golden/<batch>``, the ledger, table and settlement services as their
own processes, a fresh hand-seal key), lets bots play tables of GAME through the table
service's gRPC API (``socai_table.simulate``: every mode and option of the game in turn,
2 to the game's maximum seats, no fee and a fee, turn timers running out, bots going silent
until the table disconnects them, bots leaving mid-hand, several hands a table so carried
state — the Gà, the next dealer or banker — is exercised), waits until every hand is
settled and every player cashed out, and writes the batch (``tests.golden.corpus``).

What a hand must settle to is taken from the live system — settlement's stored record and
the ledger's posted transaction — and the recording is refused unless settlement's own
replay of the stored messages gives exactly that, the journal agrees, and the offline audit
of the batch's files is clean: a batch only ever pins what the whole system agreed on.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from socai.audit import journal as journal_io
from socai.audit.export import RawEvent, read_stream, write_stored_jsonl
from socai.events import seal
from socai.events.log import EventLog
from socai.infra.config import Settings
from socai.rules import base, registry
from socai_settlement import sealed_replay
from tests.golden import corpus
from tests.support.stack import stack_env

HANDS_PER_TABLE: Final = 12
ROUNDS_MAX: Final = 10
TABLES_SLACK: Final = 1.3  # tables end early when their bots go broke
PLAYERS_CAP: Final = 6  # seats per table by default (the 9-seat games' 7 to 9: ``--players 7-9``)
STAKE_GOLD: Final = 100
REPO: Final = Path(__file__).resolve().parents[2]

# Each table of a recording plays one of these, in turn (besides the game's defaults and the
# short windows ``socai_table.simulate.options_for`` sets for bots): every mode and flag.
VARIANTS: Final[Mapping[str, Sequence[Mapping[str, str]]]] = {
    "holdem": (
        {},
        {"heads_up_dealer_is_small_blind": "false"},
        {"min_raise": "bb"},
        {"min_raise": "last_raise", "min_bet": "sb"},
    ),
    "xito": (
        {},
        {"tay_max": "true", "auto_follow_2": "true"},
        {"hidden_5th": "true"},
        {"straight_flush_lower_wins": "false", "deal_order": "exposed"},
        {"round3_4_max_bet_stakes": "3", "round1_bet_bps": "1000", "round2_bet_bps": "2000"},
    ),
    "maubinh": (
        {},
        {"wheel_second_highest": "false"},
        {"home_run_multiplier": "3", "home_run_extra_units": "2"},
        {"accept_fouled": "true"},
    ),
    "lieng": ({}, {"ante_stakes": "2"}, {"raise_max_stakes": "5"}),
    "lieng_sanh": ({}, {"ante_stakes": "2", "sap_bonus_stakes": "3"}, {"raise_max_stakes": "5"}),
    "bacay_ga": ({}, {"hand_bet_stakes": "2", "ga_stakes": "3"}, {"ga_stakes": "0"}),
    "bacay_chuong": ({}, {"ten_point_double": "false"}, {"bet_min_stakes": "2", "bet_max_stakes": "4"}),
    "taixiu": (
        {"mode": "system"},
        {"mode": "p2p"},
        {"mode": "system", "guild_stacks_with_fee": "false", "bet_max_gold": "500"},
        {
            "mode": "p2p",
            "banker_pays_fee": "false",
            "triple_loses_tai_xiu": "false",
            "total_bets_win_on_triple": "false",
        },
    ),
    "tienlen": (
        {},
        {"settlement_mode": "rank"},
        {"cong_double": "true", "dut_3_bich": "true"},
        {"first_lead_must_include_3s": "true", "restore_turn_4dt": "true", "first_hand_3s_instant_win": "true"},
        {"instant_wins": "false"},
    ),
    "samloc": ({}, {"thang_trang": "false"}, {"bao_sam": "false", "bao_1": "false"}),
    "phom": ({}, {"one_taken_per_meld": "true"}, {"u_khan": "true"}, {"disconnect_forfeits": "false"}),
}


def plans_for(game: str, tables: int, offset: int = 0, players: tuple[int, int] | None = None) -> tuple[Any, ...]:
    """``tables`` table plans for ``game``: seat counts from the game's minimum (2 for Tài
    Xỉu, which needs a banker and a bettor in p2p) to its maximum (capped at
    ``PLAYERS_CAP``; ``players`` gives another range, within the game's), each variant, with
    and without a fee, combined so that every pair occurs when there are enough tables."""
    from socai_table.simulate import TablePlan, fee_for, options_for

    module = registry.get(game)
    spec = module.SPEC
    low, high = players or (2, PLAYERS_CAP)
    counts = list(range(max(spec.players_min, 2, low), min(spec.players_max, high) + 1))
    if not counts:
        raise RecordingFailed(f"{game} seats {spec.players_min} to {spec.players_max} players, not {low}-{high}")
    variants = VARIANTS.get(game, ({},))
    plans = []
    for i in range(offset, offset + tables):
        variant = variants[i % len(variants)]
        options = {**options_for(game, i), **variant}
        players = counts[(i // len(variants)) % len(counts)]
        fee = fee_for(game, 0, options) if (i // (len(variants) * len(counts))) % 2 == 0 else 0
        if i % 2:
            fee = 0 if fee else max(fee_for(game, 0, options), 300)
        plans.append(TablePlan(players=players, options=options, fee_bps=fee))
    return tuple(plans)


def new_seal_key() -> tuple[str, str]:
    """A fresh Ed25519 key pair for one recording: (private, public), 64 hex digits each."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()).hex()
    return private, seal.public_key_of(bytes.fromhex(private)).hex()


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


class RecordingFailed(Exception):
    pass


def record(
    game: str,
    hands: int,
    *,
    seed: int,
    out_root: Path = corpus.BATCHES,
    keep_var: bool = False,
    players: tuple[int, int] | None = None,
) -> Path:
    """Record a ``table`` batch of at least ``hands`` hands of ``game``; returns its folder."""
    from socai_cli.stack import Stack

    module = registry.get(game)
    version = base.rules_version(module)
    now = datetime.now(UTC)
    name = f"{now:%Y-%m-%d}-{game}-table-v{version}-s{seed}"
    target = out_root / name
    if target.exists():
        raise RecordingFailed(f"{target} exists: a batch is never rewritten (choose another --seed)")
    var_dir = REPO / "var" / "golden" / name
    shutil.rmtree(var_dir, ignore_errors=True)
    var_dir.mkdir(parents=True)
    private, public = new_seal_key()
    env = stack_env(var_dir)
    env.update(
        {
            "SOCAI_TABLE_SEAL_KEY": private,
            "SOCAI_TABLE_SEAL_PUBLIC_KEYS": public,
            "SOCAI_HEARTBEAT_TIMEOUT_S": "2",
            "SOCAI_DEV_MODE": "1",
        }
    )
    settings = Settings.from_env(env)
    saved = dict(os.environ)
    os.environ.update(env)  # the service processes inherit it (Stack passes os.environ on)
    stack = Stack(settings)
    try:
        started_at = time.monotonic()
        stack.start()
        running = stack.resolved_settings()
        live = asyncio.run(_play(running, game, hands, seed, players))
        print(
            f"{game}: {len(live.ended)} hands played and settled in {time.monotonic() - started_at:.0f} s", flush=True
        )
    finally:
        stack.stop()
        os.environ.clear()
        os.environ.update(saved)
    target.mkdir(parents=True)
    try:
        _write(target, live, game=game, version=version, seed=seed, hands=hands, public=public, at=now, players=players)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    if not keep_var:
        shutil.rmtree(var_dir, ignore_errors=True)
    return target


class Live:
    """What a recording read from the live stack."""

    def __init__(self) -> None:
        self.ended: list[str] = []
        self.raws: list[RawEvent] = []
        self.transactions: list[Any] = []  # ledger_pb2.Transaction, journal order
        self.settlements: dict[str, Any] = {}  # hand → settlement_pb2.Settlement
        self.tables: list[str] = []
        self.sim: dict[str, Any] = {}


async def _play(settings: Settings, game: str, hands: int, seed: int, players: tuple[int, int] | None) -> Live:
    from socai_cli import demo
    from socai_table.simulate import SimConfig, Simulator

    live = Live()
    refused: Counter[str] = Counter()
    rounds = 0
    # Tables end early when their bots go broke: play rounds of tables until enough hands ended.
    while len(live.ended) < hands:
        rounds += 1
        if rounds > ROUNDS_MAX:
            raise RecordingFailed(f"only {len(live.ended)} hands ended after {ROUNDS_MAX} rounds (wanted {hands})")
        wanted = hands - len(live.ended)
        tables = max(2, int(wanted / HANDS_PER_TABLE * TABLES_SLACK + 0.999))
        config = SimConfig(
            tables=tables,
            hands=HANDS_PER_TABLE,
            games=(game,),
            stake_gold=STAKE_GOLD,
            timeout_rate=0.04,
            leave_rate=0.01,
            disconnect_rate=0.02,
            seed=seed * 1000 + rounds,
            plans=plans_for(game, tables, offset=len(live.tables), players=players),
        )
        sim = Simulator(settings, config)
        try:
            result = await sim.run()
        finally:
            await sim.close()
        if result.problems:
            raise RecordingFailed("; ".join(result.problems))
        table_ids = [t.table_id for t in result.tables]
        live.tables += table_ids
        live.ended += await demo._ended_hands(settings, table_ids)
        for t in result.tables:
            refused.update(t.rejected)
        for name, value in (
            ("tables", len(result.tables)),
            ("actions", sum(t.actions for t in result.tables)),
            ("silences", sum(t.silences for t in result.tables)),
            ("reconnects", sum(t.reconnects for t in result.tables)),
        ):
            live.sim[name] = live.sim.get(name, 0) + value
    live.sim["refused"] = dict(sorted(refused.items()))
    unsettled = await demo._wait_settled(settings, live.ended, lambda n: None)
    if unsettled:
        raise RecordingFailed(f"{len(unsettled)} hands not settled: {unsettled[:5]}")
    open_escrows = await demo._wait_cashed_out(settings, live.tables)
    if open_escrows:
        raise RecordingFailed(f"escrows not cashed out: {open_escrows[:5]}")
    live.raws = await _read_log(settings)
    live.transactions = await _journal(settings)
    live.settlements = await _settlements(settings, live.ended)
    return live


async def _read_log(settings: Settings) -> list[RawEvent]:
    from socai.infra.nats import connect

    nc = await connect(settings.nats_url_for("auditor"), name="socai-golden")
    try:
        log = EventLog(nc, settings.events_stream, settings.events_prefix)
        return [r async for r in read_stream(log)]
    finally:
        await nc.close()


async def _journal(settings: Settings) -> list[Any]:
    from socai.gen.ledger.v1 import ledger_pb2 as lpb
    from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
    from socai.infra.grpc_client import channel

    out: list[Any] = []
    async with channel(settings.ledger_addr, settings.token_of("auditor")) as ch:
        stub = lgrpc.LedgerServiceStub(ch)
        token = ""
        while True:
            page = await stub.ListTransactions(lpb.ListTransactionsRequest(page_size=1000, page_token=token))
            out += list(page.transactions)
            token = page.next_page_token
            if not token:
                return out


async def _settlements(settings: Settings, hands: Sequence[str]) -> dict[str, Any]:
    from socai.gen.settlement.v1 import settlement_pb2 as spb
    from socai.gen.settlement.v1 import settlement_pb2_grpc as sgrpc
    from socai.infra.grpc_client import channel

    out: dict[str, Any] = {}
    async with channel(settings.settlement_addr, settings.token_of("operator")) as ch:
        stub = sgrpc.SettlementServiceStub(ch)
        for hand_id in hands:
            reply = await stub.GetSettlement(spb.GetSettlementRequest(hand_id=hand_id))
            out[hand_id] = reply.settlement
    return out


def _write(
    target: Path,
    live: Live,
    *,
    game: str,
    version: int,
    seed: int,
    hands: int,
    public: str,
    at: datetime,
    players: tuple[int, int] | None = None,
) -> None:
    raws = live.raws
    subjects = corpus.by_subject(raws)
    ends = {r.hand_id: r for r in raws if r.message is not None and r.message.WhichOneof("body") == "hand_ended"}
    lines: list[dict[str, Any]] = []
    for hand_id in live.ended:
        end = ends[hand_id]
        lines.append(
            {
                "hand_id": hand_id,
                "table_id": end.table_id,
                "game": game,
                "rules_version": 0,  # filled from the replay below
                "subject": end.subject,
                "end_stream_seq": end.stream_seq,
            }
        )
    policy = sealed_replay.seal_policy({seal.key_id(bytes.fromhex(public)): bytes.fromhex(public)})
    inputs = [corpus.hand_input(line, subjects[line["subject"]]) for line in lines]
    replayed = sealed_replay.replay_payloads(inputs, policy)
    by_key = {tx.idempotency_key: tx for tx in live.transactions}
    expected: list[dict[str, Any]] = []
    for line, got in zip(lines, replayed, strict=True):
        if got.settled is None:
            raise RecordingFailed(
                f"{line['hand_id']}: settlement's replay fails: {got.error_code} {got.error_message} {got.crashed}"
            )
        started = next(
            r.message
            for r in subjects[line["subject"]]
            if r.message is not None and r.message.WhichOneof("body") == "hand_started"
        )
        version_of_hand = started.hand_started.rules_version or base.LEGACY_RULES_VERSION
        row = corpus.expectation(
            got.settled, subject=line["subject"], end_stream_seq=got.end_stream_seq, rules_version=version_of_hand
        )
        _agree_with_live(row, live.settlements[line["hand_id"]], by_key)
        expected.append(row)
    corpus.write_gzip_text(target / "events.jsonl.gz", lambda out: write_stored_jsonl(raws, out))
    corpus.write_gzip_text(target / "journal.jsonl.gz", lambda out: journal_io.write_jsonl(live.transactions, out))
    corpus.write_lines(target / "expected.jsonl.gz", expected)
    reasons = sorted({t[3] for row in expected for t in row["transfers"]})
    manifest = {
        "format": corpus.FORMAT,
        "kind": "table",
        "games": [game],
        "rules_versions": {game: sorted({row["rules_version"] for row in expected})},
        "hands": len(expected),
        "recorded_at": at.isoformat(timespec="seconds"),
        "code": git_commit(),
        "command": f"python -m tests.golden record {game} --hands {hands} --seed {seed}"
        + (f" --players {players[0]}-{players[1]}" if players else ""),
        "seal_public_keys": {seal.key_id(bytes.fromhex(public)): public},
        "reasons": reasons,
        "bots": live.sim,
    }
    (target / "manifest.json").write_text(corpus.dumps(manifest) + "\n", encoding="utf-8")
    batch = corpus.Batch(target)
    verdict = corpus.audit_verdict(batch, batch.raws())
    if '"ok": true' not in verdict:
        raise RecordingFailed(f"the offline audit of the batch is not clean:\n{verdict[:4000]}")
    (target / "verdict.json").write_text(verdict, encoding="utf-8")
    outcome = corpus.check_batch(batch)
    if not outcome.ok:
        raise RecordingFailed(f"the batch does not check: {outcome.differences or outcome.verdict_differs}")


def _agree_with_live(row: Mapping[str, Any], live: Any, journal: Mapping[str, Any]) -> None:
    """Refuse a recording whose replay differs from what settlement stored and the ledger posted."""
    hand = row["hand_id"]
    transfers = [[t.from_account_id, t.to_account_id, t.amount_gold, t.reason, t.detail] for t in live.transfers]
    seats = [[s.seat, s.player_id, s.account_id, s.net_gold] for s in live.seats]
    shortfalls = [[f.seat, f.owed_gold, f.paid_gold, f.reason] for f in live.shortfalls]
    checks = {
        "transfers": (row["transfers"], transfers),
        "seats": (row["seats"], seats),
        "shortfalls": (row["shortfalls"], shortfalls),
        "fees_gold": (row["fees_gold"], live.fees_gold),
        "pot_carry_gold": (row["pot_carry_gold"], live.pot_carry_gold),
        "penalties_gold": (row["penalties_gold"], dict(sorted(live.penalties_gold.items()))),
    }
    ledger = row["ledger"]
    if ledger is None:
        checks["key"] = ("", live.idempotency_key if live.ledger_transaction_id else "")
    else:
        checks["key"] = (ledger["key"], live.idempotency_key)
        tx = journal.get(ledger["key"])
        posted = sorted([e.account_id, e.amount_gold] for e in tx.entries) if tx is not None else None
        checks["entries"] = (sorted(ledger["entries"]), posted)
        from socai.gen.ledger.v1 import ledger_pb2

        sent = ledger_pb2.TransactionInput.FromString(base64.b64decode(ledger["transaction"]))
        checks["metadata"] = (dict(sent.metadata), dict(tx.metadata) if tx is not None else None)
    for what, (replayed, stored) in checks.items():
        if replayed != stored:
            raise RecordingFailed(
                f"{hand}: {what}: settlement's replay gives {replayed}, the live system holds {stored}"
            )


def parse_seed(text: str | None) -> int:
    return int(text) if text else random.SystemRandom().randrange(1, 10**6)
