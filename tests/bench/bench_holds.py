"""What holds on house:bank cost: the Hold call, and the write path of batches that touch a
held bank (docs/use/ledger.md, "Holds").

Setup as ``bench_ledger``: an embedded PostgreSQL and nats-server, a real
``python -m socai_ledger`` process (production logging, the outbox's bound off: the write
path alone), 1,000 funded escrows of one table and a funded ``house:bank``; every case on a
fresh journal.

- ``ledger.hold_32``: ``Hold`` calls per second, 32 concurrent callers, each call a new hand
  holding 100 of ``house:bank``: every call locks the bank's one row, so they serialize (the
  race for the bank's last gold is decided by that lock). ``params.p50_ms`` / ``p99_ms``: a
  call's latency under that load.
- ``ledger.post_batch_1000_releasing_holds``: ``PostTransactions`` of 1,000 settlements, 4
  callers, each settlement paying from ``house:bank`` the hand it settles had held (so each
  batch reads the bank's holds and releases 1,000 of them in its transaction). Peers in the
  same run, on the same postings: ``no_holds`` (the bank holds nothing: the path every
  other game takes) and ``holds_of_other_hands`` (the bank holds gold for 1,000 hands these
  postings do not settle: every item is checked against the holds, none is released).
  ``params.write_path_ms_per_1000``: each ledger's own time in its write batcher per 1,000
  postings over the rounds (``socai_ledger_batch_seconds`` / ``…_batch_items``): the write
  path alone, without gRPC or the client, so less at the mercy of the machine's other work.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import urllib.request
import uuid
from typing import Any

import grpc
import psycopg

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.gen.ledger.v1 import ledger_pb2_grpc as pb_grpc
from socai.infra.config import Settings
from socai.infra.grpc_client import channel
from socai_cli import migrations as migrate
from socai_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port
from tests.bench.bench_ledger import WRITE_PATH_ENV, LedgerProcess, checkpoint, count_applied, post_rate
from tests.bench.harness import BenchContext, Result, percentile

PLAYERS = 1_000
OPENING_GOLD = 10**12
BANK_GOLD = 10**15
TABLE = "bench"
HOLD_GOLD = 100
OTHER_HANDS = 1_000


def escrow(i: int) -> str:
    return f"escrow:{TABLE}:p{i}"


def settlements(rng: random.Random, first_hand: int, count: int) -> list[pb.TransactionInput]:
    """Hands ``first_hand`` … of the table: a player pays another, a fee, and the bank pays
    the winner up to ``HOLD_GOLD`` (four entries, the bank debited in every one)."""
    out = []
    for hand in range(first_hand, first_hand + count):
        a, b = rng.sample(range(PLAYERS), 2)
        amount = rng.randint(200, 5_000)
        fee = amount // 20
        bank = rng.randint(1, HOLD_GOLD)
        out.append(
            pb.TransactionInput(
                idempotency_key=f"settle:{TABLE}-h{hand}",
                kind="settlement",
                reference=f"{TABLE}-h{hand}",
                entries=[
                    pb.EntryInput(account_id=escrow(a), amount_gold=-amount),
                    pb.EntryInput(account_id=escrow(b), amount_gold=amount - fee + bank),
                    pb.EntryInput(account_id="house:fees", amount_gold=fee),
                    pb.EntryInput(account_id="house:bank", amount_gold=-bank),
                ],
            )
        )
    return out


async def fund(settings: Settings) -> None:
    async with channel(settings.ledger_addr, settings.tokens["operator"]) as ch:
        stub = pb_grpc.LedgerServiceStub(ch)
        sem = asyncio.Semaphore(32)

        async def one(account: str, amount: int) -> None:
            async with sem:
                await stub.Transfer(
                    pb.TransferRequest(
                        idempotency_key=f"fund:{account}",
                        from_account_id="external:cashier",
                        to_account_id=account,
                        amount_gold=amount,
                        kind="deposit",
                        open_accounts=True,
                    ),
                    timeout=60,
                )

        await asyncio.gather(one("house:bank", BANK_GOLD), *(one(escrow(i), OPENING_GOLD) for i in range(PLAYERS)))


async def hold_many(settings: Settings, hands: list[str], callers: int) -> tuple[float, list[float]]:
    """Hold ``HOLD_GOLD`` for each of ``hands`` with ``callers`` concurrent callers: (calls per
    second, each call's latency in ms)."""
    async with channel(settings.ledger_addr, settings.tokens["table"]) as ch:
        stub = pb_grpc.LedgerServiceStub(ch)
        queue = iter(hands)
        latencies: list[float] = []

        async def caller() -> None:
            for hand in queue:
                started = time.perf_counter()
                await stub.Hold(
                    pb.HoldRequest(account_id="house:bank", hand_id=hand, amount_gold=HOLD_GOLD), timeout=60
                )
                latencies.append((time.perf_counter() - started) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        elapsed = time.perf_counter() - started
    return len(hands) / elapsed, latencies


def batch_totals(settings: Settings) -> tuple[float, float]:
    """(seconds, items) the ledger's write batcher has spent on batches so far: its own
    ``socai_ledger_batch_seconds`` and ``socai_ledger_batch_items`` sums, from /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{settings.metrics_port_base}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("socai_ledger_batch_seconds_sum", "socai_ledger_batch_items_sum"):
            found[name] = float(value)
    return found["socai_ledger_batch_seconds_sum"], found["socai_ledger_batch_items_sum"]


def batches(txs: list[pb.TransactionInput], size: int) -> list[bytes]:
    return [
        pb.PostTransactionsRequest(transactions=txs[i : i + size]).SerializeToString() for i in range(0, len(txs), size)
    ]


VARIANTS = ("no_holds", "holds_of_other_hands", "releasing_holds")


def run(ctx: BenchContext) -> list[Result]:
    quick = ctx.quick
    rounds = 3 if quick else 5
    per_round = 2_000 if quick else 10_000
    pg = EmbeddedPostgres(ctx.workdir / "pg", port=free_port(), database="postgres")
    nats = EmbeddedNats(ctx.workdir / "nats", port=free_port())
    pg.start()
    nats.start()
    run_id = uuid.uuid4().hex[:8]
    base = pg.admin_url().rsplit("/", 1)[0]
    rates: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    # The ledger's own time per 1,000 postings in its batches (the write path alone: no gRPC,
    # no client), from each ledger's metrics over the rounds.
    batch_ms: dict[str, float] = {}
    hold_rates: list[float] = []
    hold_latencies: list[float] = []
    processes: list[LedgerProcess] = []
    try:
        # The three ledgers run side by side and take turns, round by round in a rotating
        # order: the machine's load (other work shares it) weighs on each variant alike.
        settings_of: dict[str, Settings] = {}
        for variant in VARIANTS:
            with psycopg.connect(pg.admin_url(), autocommit=True) as conn:
                conn.execute(f'create database "{variant}_{run_id}"')
            url = f"{base}/{variant}_{run_id}"
            migrate.upgrade(url, "ledger")
            settings = Settings(
                nats_url=nats.url,
                database_url=url,
                ledger_addr=f"127.0.0.1:{free_port()}",
                metrics_port_base=free_port(),
                ledger_stream=f"HOLDS_{variant.upper()}",
                ledger_prefix=f"bench.holds.{variant}",
                log_format="json",
            )
            process = LedgerProcess(settings, ctx.workdir / f"{variant}.log", WRITE_PATH_ENV)
            processes.append(process.__enter__())
            settings_of[variant] = settings
            asyncio.run(fund(settings))
            if variant == "holds_of_other_hands":
                asyncio.run(hold_many(settings, [f"other-h{n}" for n in range(OTHER_HANDS)], 32))
        before = {variant: batch_totals(settings) for variant, settings in settings_of.items()}
        for r in range(rounds):
            first = 1 + r * (per_round + 1_000)
            for variant in VARIANTS[r % 3 :] + VARIANTS[: r % 3]:
                settings = settings_of[variant]
                txs = settlements(random.Random(13 + r), first, per_round + 1_000)  # the first call warms up
                if variant == "releasing_holds":
                    rate, latencies = asyncio.run(
                        hold_many(settings, [f"{TABLE}-h{n}" for n in range(first, first + len(txs))], 32)
                    )
                    hold_rates.append(rate)
                    hold_latencies += latencies
                checkpoint(pg.admin_url())
                posted = asyncio.run(
                    post_rate(
                        settings.ledger_addr, settings.tokens["settlement"], "PostTransactions", batches(txs, 1000), 4
                    )
                )
                calls_per_s, replies = posted.calls_per_s, posted.replies
                applied, total = count_applied("PostTransactions", replies)
                if applied != total:
                    raise RuntimeError(f"{variant}: only {applied} of {total} settlements applied")
                rates[variant].append(calls_per_s * 1000)
            print(f"   round {r + 1}: " + ", ".join(f"{v} {rates[v][-1]:,.0f}" for v in VARIANTS), flush=True)
        for variant, settings in settings_of.items():
            seconds, items = batch_totals(settings)
            batch_ms[variant] = (seconds - before[variant][0]) / (items - before[variant][1]) * 1_000_000
            with psycopg.connect(settings.database_url or "") as conn:
                row: Any = conn.execute(
                    "select held_gold from socai_ledger.accounts where account_id = 'house:bank'"
                ).fetchone()
            expected = OTHER_HANDS * HOLD_GOLD if variant == "holds_of_other_hands" else 0
            if row is None or row[0] != expected:
                raise RuntimeError(f"{variant}: house:bank holds {row}, not {expected}")
    except grpc.aio.AioRpcError as exc:
        raise RuntimeError(f"holds bench: {exc.code().name}: {exc.details()}") from exc
    finally:
        for process in processes:
            process.__exit__(None, None, None)
        nats.stop()
        pg.stop()
    median = {variant: statistics.median(values) for variant, values in rates.items()}
    return [
        Result(
            name="ledger.hold_32",
            value=statistics.median(hold_rates),
            unit="holds/s",
            params={
                "concurrent_callers": 32,
                "holds_per_round": per_round + 1_000,
                "rounds": rounds,
                "rates": [round(x) for x in hold_rates],
                "p50_ms": round(percentile(hold_latencies, 50), 2),
                "p99_ms": round(percentile(hold_latencies, 99), 2),
                "account": "house:bank (one row: every call locks it)",
            },
        ),
        Result(
            name="ledger.post_batch_1000_releasing_holds",
            value=median["releasing_holds"],
            unit="tx/s",
            peers={"no_holds": median["no_holds"], "holds_of_other_hands": median["holds_of_other_hands"]},
            params={
                "ratio_to_no_holds": round(median["releasing_holds"] / median["no_holds"], 3),
                "ratio_other_hands_to_no_holds": round(median["holds_of_other_hands"] / median["no_holds"], 3),
                "write_path_ms_per_1000": {variant: round(ms, 1) for variant, ms in batch_ms.items()},
                "transactions_per_call": 1000,
                "concurrent_callers": 4,
                "transactions_per_round": per_round,
                "rounds": rounds,
                "rates": {variant: [round(x) for x in values] for variant, values in rates.items()},
                "entries_per_transaction": 4,
                "hot_accounts": "house:fees and house:bank in every transaction",
                "other_hands_held": OTHER_HANDS,
                "accounts": PLAYERS + 2,
                "outbox_bound": "off (SOCAI_LEDGER_OUTBOX_MAX_LAG=0): the write path alone",
            },
        ),
    ]
