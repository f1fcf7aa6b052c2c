"""Money integrity in PostgreSQL itself, tried as the ledger service's own role.

The database is migrated as the owner role and every attack runs as
``socai_ledger_service``, the role the ledger connects with in a deployment: it may insert
and read the journal and move balances only together with journal entries (ledger_0003), and
it owns nothing, so it cannot switch a guard off. The real posting path (the batcher and
``journal_write.write_batch``, and the whole service over gRPC) works as that role.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import errors as pg_errors

from socai.gen.ledger.v1 import ledger_pb2 as pb
from socai.infra.config import Settings
from socai.infra.db import AUDITOR_ROLE, OWNER_ROLE, SERVICE_ROLES, role_url
from socai_ledger import db, domain, journal_write
from socai_ledger.batcher import WriteBatcher
from socai_ledger.journal_write import ROWS_BY_ARRAY_MAX
from tests.integration.ledger.conftest import Ledger, deposit, journal_snapshot, ledger_settings

pytestmark = pytest.mark.integration

LEDGER_ROLE = SERVICE_ROLES["ledger"]


def prepared(key: str, *legs: tuple[str, int], open_accounts: bool = False) -> domain.PreparedTransaction:
    return domain.prepare_fields(key, "test", "", legs, {}, open_accounts)


async def post(url: str, *items: domain.PreparedTransaction) -> journal_write.BatchResult:
    """One batch through the ledger's own write path, as the role of ``url``."""
    conn = await db.connect(url)
    try:
        return await journal_write.write_batch(conn, items, uuid.uuid4)
    finally:
        await conn.close()


async def fund(url: str) -> None:
    """player:alice 1,000 and player:bob 500, from the cashier, through the batcher."""
    batcher = WriteBatcher(url)
    await batcher.start()
    try:
        outcomes = await batcher.submit(
            [
                prepared("fund-alice", ("external:cashier", -1_000), ("player:alice", 1_000), open_accounts=True),
                prepared("fund-bob", ("external:cashier", -500), ("player:bob", 500), open_accounts=True),
            ]
        )
    finally:
        await batcher.close()
    assert [o.status for o in outcomes] == [domain.PostStatus.APPLIED] * 2


def account(conn: psycopg.Connection, account_id: str) -> tuple[int, int]:
    row = conn.execute(
        "select balance_gold, version from socai_ledger.accounts where account_id = %s", (account_id,)
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def append_by_hand(
    conn: psycopg.Connection,
    legs: list[tuple[str, int]],
    *,
    seq: int | None = None,
    with_transaction: bool = True,
    first_index: int = 0,
) -> int:
    """Write a posting the way the posting path does, by hand: the applied transaction row,
    its entries chained from each account's row, and no account update (the caller decides).
    Returns the journal number used."""
    if seq is None:
        (head,) = conn.execute("select coalesce(max(journal_seq), 0) from socai_ledger.transactions").fetchone() or (0,)
        seq = int(head) + 1
    tx_id = uuid.uuid4()
    if with_transaction:
        conn.execute(
            "insert into socai_ledger.transactions (transaction_id, idempotency_key, request_hash, status, "
            "journal_seq, kind, created_at) values (%s, %s, %s, 'applied', %s, 'test', now())",
            (tx_id, f"by-hand-{tx_id}", b"\x00" * 32, seq),
        )
    for index, (account_id, amount) in enumerate(legs, first_index):
        balance, version = account(conn, account_id)
        conn.execute(
            "insert into socai_ledger.entries (account_id, account_version, journal_seq, entry_index, "
            "transaction_id, amount_gold, balance_after_gold, created_at) values (%s, %s, %s, %s, %s, %s, %s, now())",
            (account_id, version + 1, seq, index, tx_id, amount, balance + amount),
        )
    return seq


def move_rows(conn: psycopg.Connection, legs: list[tuple[str, int]]) -> None:
    """Bring each account's row to its newest entry (what the posting path does last)."""
    for account_id, amount in legs:
        conn.execute(
            "update socai_ledger.accounts set balance_gold = balance_gold + %s, version = version + 1 "
            "where account_id = %s",
            (amount, account_id),
        )


# --- the posting path works as the service role ---------------------------------------------------


async def test_the_batcher_and_a_copied_batch_post_as_the_service_role(owner_migrated: str) -> None:
    url = role_url(owner_migrated, LEDGER_ROLE)
    await fund(url)
    # Enough postings that the journal rows go by binary COPY, opening accounts on the way.
    size = ROWS_BY_ARRAY_MAX // 2 + 5
    items = [
        prepared(f"copy-{i}", ("player:alice", -1), (f"player:p{i % 40}", 1), open_accounts=True) for i in range(size)
    ]
    result = await post(url, *items)
    assert (result.applied, result.rejected) == (size, 0)
    small = await post(url, prepared("small", ("player:bob", -100), ("player:alice", 60), ("house:fees", 40)))
    assert small.applied == 1
    with psycopg.connect(role_url(owner_migrated, AUDITOR_ROLE)) as conn:
        assert account(conn, "player:alice") == (1_000 - size + 60, 1 + size + 1)
        assert account(conn, "player:bob") == (400, 2)
        assert account(conn, "house:fees") == (40, 1)
        (total,) = conn.execute("select sum(balance_gold) from socai_ledger.accounts").fetchone() or (None,)
        assert total == 0
    with psycopg.connect(owner_migrated) as conn:  # every commit cleared its checks
        assert conn.execute("select count(*) from socai_ledger.journal_checks").fetchone() == (0,)


async def test_the_ledger_service_runs_as_its_role(nats_url: str, owner_migrated: str) -> None:
    """The whole service (gRPC, batcher, outbox relay) against its least-privilege role."""
    settings = ledger_settings(nats_url, role_url(owner_migrated, LEDGER_ROLE))
    ledger = Ledger(settings)
    await ledger.start()
    try:
        assert (await deposit(ledger, "alice", 700)).status == pb.POST_STATUS_APPLIED
        assert (await deposit(ledger, "bob", 300)).status == pb.POST_STATUS_APPLIED
        reply = await ledger.stub("backend").Transfer(
            pb.TransferRequest(
                idempotency_key="t1", from_account_id="player:alice", to_account_id="player:bob", amount_gold=200
            )
        )
        assert reply.result.status == pb.POST_STATUS_APPLIED
        report = await ledger.stub("auditor").VerifyJournal(pb.VerifyJournalRequest())
        assert report.ok, report.mismatches
        assert (await ledger.stub("auditor").TrialBalance(pb.TrialBalanceRequest())).total_gold == 0
    finally:
        await ledger.stop()
    await _delete_stream(nats_url, settings.ledger_stream)


async def _delete_stream(nats_url: str, name: str) -> None:
    from socai.infra.nats import connect

    nc = await connect(nats_url, name="socai-test-cleanup")
    try:
        try:
            await nc.jetstream().delete_stream(name)
        except Exception:
            pass  # never created
    finally:
        await nc.close()


# --- what the service role is refused ------------------------------------------------------------


@pytest.fixture
async def funded(owner_migrated: str) -> str:
    """The service role's URL on a migrated database where alice and bob hold gold."""
    url = role_url(owner_migrated, LEDGER_ROLE)
    await fund(url)
    return url


def refused(url: str, attempt, error: type[Exception]) -> pytest.ExceptionInfo[Exception]:  # type: ignore[no-untyped-def]
    """Run ``attempt(conn)`` and commit as the role of ``url``: PostgreSQL must refuse it
    with ``error`` (at the statement or at the commit) and the journal must not change."""
    before = journal_snapshot(url)
    with psycopg.connect(url) as conn:
        with pytest.raises(error) as caught:
            attempt(conn)
            conn.commit()
        conn.rollback()
    assert journal_snapshot(url) == before
    return caught


def test_an_unbalanced_transaction_is_refused_at_commit(funded: str) -> None:
    def attempt(conn: psycopg.Connection) -> None:
        legs = [("player:alice", 1_000_000)]  # gold from nowhere: one leg, chained correctly
        append_by_hand(conn, legs)
        move_rows(conn, legs)

    caught = refused(funded, attempt, pg_errors.IntegrityConstraintViolation)
    assert "does not balance" in str(caught.value)


def write_like_the_posting_path(conn: psycopg.Connection, legs: list[tuple[str, int]]) -> None:
    """A posting written by hand in the posting path's shape: the applied transaction row,
    every leg in one entries statement, then one update of every account to its new entry
    (the statement that takes every pending step at once)."""
    (head,) = conn.execute("select max(journal_seq) from socai_ledger.transactions").fetchone() or (0,)
    seq, tx_id = int(head) + 1, uuid.uuid4()
    conn.execute(
        "insert into socai_ledger.transactions (transaction_id, idempotency_key, request_hash, status, "
        "journal_seq, kind, created_at) values (%s, %s, %s, 'applied', %s, 'test', now())",
        (tx_id, f"by-hand-{tx_id}", b"\x00" * 32, seq),
    )
    rows = []
    for index, (account_id, amount) in enumerate(legs):
        balance, version = account(conn, account_id)
        rows.append((account_id, version + 1, seq, index, tx_id, amount, balance + amount))
    conn.execute(
        "insert into socai_ledger.entries (account_id, account_version, journal_seq, entry_index, transaction_id, "
        "amount_gold, balance_after_gold, created_at) "
        "select a, v, s, i, t, am, b, now() from unnest(%s::text[], %s::int8[], %s::int8[], %s::int2[], %s::uuid[], "
        "%s::int8[], %s::int8[]) as r(a, v, s, i, t, am, b)",
        [list(column) for column in zip(*rows, strict=True)],
    )
    conn.execute(
        "update socai_ledger.accounts a set balance_gold = u.b, version = u.v "
        "from unnest(%s::text[], %s::int8[], %s::int8[]) as u(id, b, v) where a.account_id = u.id",
        ([r[0] for r in rows], [r[6] for r in rows], [r[1] for r in rows]),
    )


def test_the_check_refuses_an_unbalanced_posting_in_the_posting_paths_shape(funded: str) -> None:
    """ledger_0006 empties the pending steps when one statement takes them all (the posting
    path's balance update): an unbalanced transaction written that way by the service's role
    is still refused at commit, and a balanced one is taken."""
    caught = refused(
        funded,
        lambda conn: write_like_the_posting_path(conn, [("player:alice", -100), ("player:bob", 150)]),
        pg_errors.IntegrityConstraintViolation,
    )
    assert "does not balance" in str(caught.value)
    with psycopg.connect(funded) as conn:
        write_like_the_posting_path(conn, [("player:alice", -100), ("player:bob", 60), ("house:fees", 40)])
        conn.commit()
        assert [account(conn, a) for a in ("player:alice", "player:bob", "house:fees")] == [(900, 2), (560, 2), (40, 1)]


def test_an_update_taking_some_steps_leaves_the_others_pending(funded: str) -> None:
    """One statement moves one account of two: the other's step stays pending and refuses
    the commit; moving it in a second statement completes the posting."""

    def half(conn: psycopg.Connection) -> None:
        append_by_hand(conn, [("player:alice", -10), ("player:bob", 10)])
        move_rows(conn, [("player:alice", -10)])

    caught = refused(funded, half, pg_errors.IntegrityConstraintViolation)
    assert "player:bob has entries up to version 2 that its balance does not show" in str(caught.value)
    with psycopg.connect(funded) as conn:
        append_by_hand(conn, [("player:alice", -10), ("player:bob", 10)])
        move_rows(conn, [("player:alice", -10)])
        move_rows(conn, [("player:bob", 10)])
        conn.commit()
        assert (account(conn, "player:alice"), account(conn, "player:bob")) == ((990, 2), (510, 2))


def test_legs_split_over_statements_may_balance_by_the_commit(funded: str) -> None:
    """The check is deferred: a transaction balanced at commit is accepted however its legs came."""
    with psycopg.connect(funded) as conn:
        seq = append_by_hand(conn, [("player:alice", -30)])
        append_by_hand(conn, [("player:bob", 30)], seq=seq, with_transaction=False, first_index=1)
        move_rows(conn, [("player:alice", -30), ("player:bob", 30)])
        conn.commit()
        assert (account(conn, "player:alice"), account(conn, "player:bob")) == ((970, 2), (530, 2))


def test_a_balance_is_not_updated_outside_the_posting_path(funded: str) -> None:
    caught = refused(
        funded,
        lambda conn: conn.execute(
            "update socai_ledger.accounts set balance_gold = balance_gold + 50 where account_id = 'player:bob'"
        ),
        pg_errors.IntegrityConstraintViolation,
    )
    assert "balances change only with journal entries" in str(caught.value)
    # Nor with a version step that no entry backs, nor by inserting an account with gold.
    refused(
        funded,
        lambda conn: conn.execute(
            "update socai_ledger.accounts set balance_gold = 550, version = 2 where account_id = 'player:bob'"
        ),
        pg_errors.IntegrityConstraintViolation,
    )
    refused(
        funded,
        lambda conn: conn.execute(
            "insert into socai_ledger.accounts (account_id, kind, balance_gold, version) values ('player:eve', 'player', 10, 1)"
        ),
        pg_errors.IntegrityConstraintViolation,
    )


def test_no_account_but_the_outside_world_may_go_negative(funded: str) -> None:
    refused(
        funded,
        lambda conn: conn.execute(
            "insert into socai_ledger.accounts (account_id, kind, may_go_negative) values ('player:eve', 'player', true)"
        ),
        pg_errors.CheckViolation,
    )


def test_entries_the_balance_does_not_show_are_refused_at_commit(funded: str) -> None:
    def attempt(conn: psycopg.Connection) -> None:
        append_by_hand(conn, [("player:alice", -10), ("player:bob", 10)])  # balanced, rows left behind

    caught = refused(funded, attempt, pg_errors.IntegrityConstraintViolation)
    assert "that its balance does not show" in str(caught.value)


def test_entries_that_break_the_chain_are_refused(funded: str) -> None:
    def attempt(conn: psycopg.Connection) -> None:
        (head,) = conn.execute("select max(journal_seq) from socai_ledger.transactions").fetchone() or (0,)
        tx_id = uuid.uuid4()
        conn.execute(
            "insert into socai_ledger.transactions (transaction_id, idempotency_key, request_hash, status, "
            "journal_seq, kind, created_at) values (%s, 'chain', %s, 'applied', %s, 'test', now())",
            (tx_id, b"\x00" * 32, head + 1),
        )
        # bob holds 500 at version 1: a second entry claiming 5,010 after +10 does not follow.
        conn.execute(
            "insert into socai_ledger.entries values ('player:bob', 2, %s, 0, %s, 10, 510, now()), "
            "('player:bob', 3, %s, 1, %s, 10, 5010, now()), ('player:alice', 2, %s, 2, %s, -20, 980, now())",
            (head + 1, tx_id) * 3,
        )

    caught = refused(funded, attempt, pg_errors.IntegrityConstraintViolation)
    assert "chain" in str(caught.value)

    # And a step that does not start where the account stands is refused when the row moves.
    def unanchored(conn: psycopg.Connection) -> None:
        seq = append_by_hand(conn, [("player:alice", -10), ("player:bob", 10)])
        conn.execute(
            "update socai_ledger.accounts set balance_gold = 990, version = 2 where account_id = 'player:alice'"
        )
        conn.execute(
            "update socai_ledger.accounts set balance_gold = 5010, version = 2 where account_id = 'player:bob'"
        )
        assert seq

    refused(funded, unanchored, pg_errors.IntegrityConstraintViolation)


# --- holds (ledger_0005) ----------------------------------------------------------------------


def hold_by_hand(conn: psycopg.Connection, account_id: str, hand_id: str, gold: int) -> None:
    """A hold written the way the Hold call writes it (its trigger moves held_gold)."""
    conn.execute(
        "insert into socai_ledger.holds (account_id, hand_id, amount_gold, status, created_at, updated_at) "
        "values (%s, %s, %s, 'open', now(), now())",
        (account_id, hand_id, gold),
    )


def held_gold(conn: psycopg.Connection, account_id: str) -> int:
    row = conn.execute("select held_gold from socai_ledger.accounts where account_id = %s", (account_id,)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def alice_holds_800(funded: str) -> str:
    with psycopg.connect(funded) as conn:
        hold_by_hand(conn, "player:alice", "tx-h1", 800)
        conn.commit()
    return funded


async def test_a_balance_never_falls_below_the_gold_it_holds(alice_holds_800: str) -> None:
    url = alice_holds_800
    # The posting path refuses it (and remembers the refusal) …
    result = await post(url, prepared("spend-held", ("player:alice", -201), ("player:bob", 201)))
    assert result.outcomes[0].error is not None and result.outcomes[0].error.code == "INSUFFICIENT_FUNDS"

    # … and the database refuses it from anyone who writes it by hand.
    def attempt(conn: psycopg.Connection) -> None:
        legs = [("player:alice", -201), ("player:bob", 201)]
        append_by_hand(conn, legs)
        move_rows(conn, legs)

    caught = refused(url, attempt, pg_errors.CheckViolation)
    assert "accounts_holds_covered" in str(caught.value)
    assert (await post(url, prepared("spend-free", ("player:alice", -200), ("player:bob", 200)))).applied == 1


def test_held_gold_moves_only_with_the_holds(alice_holds_800: str, owner_migrated: str) -> None:
    url = alice_holds_800
    for who in (url, owner_migrated):  # the service's role has no privilege; the owner a trigger
        refused(
            who,
            lambda conn: conn.execute(
                "update socai_ledger.accounts set held_gold = 0 where account_id = 'player:alice'"
            ),
            pg_errors.Error,
        )
    refused(
        url,
        lambda conn: conn.execute(
            "insert into socai_ledger.accounts (account_id, kind, held_gold) values ('player:eve', 'player', 5)"
        ),
        pg_errors.Error,
    )
    with psycopg.connect(url) as conn:
        # A hold raised, another opened, one finalized lower, one released: held_gold follows.
        conn.execute("update socai_ledger.holds set amount_gold = 900 where hand_id = 'tx-h1'")
        hold_by_hand(conn, "player:alice", "tx-h2", 50)
        assert held_gold(conn, "player:alice") == 950
        conn.execute("update socai_ledger.holds set status = 'final', amount_gold = 300 where hand_id = 'tx-h1'")
        conn.execute(
            "update socai_ledger.holds set status = 'released', released_at = now(), released_by = 'outcome' "
            "where hand_id = 'tx-h2'"
        )
        assert held_gold(conn, "player:alice") == 300
        conn.commit()
    # A hold the balance cannot cover is refused as it is written.
    caught = refused(url, lambda conn: hold_by_hand(conn, "player:alice", "tx-h3", 701), pg_errors.CheckViolation)
    assert "accounts_holds_covered" in str(caught.value)


@pytest.mark.parametrize(
    "statement",
    [
        "update socai_ledger.holds set amount_gold = 799 where hand_id = 'tx-h1'",  # an open hold only grows
        "update socai_ledger.holds set hand_id = 'tx-h9' where hand_id = 'tx-h1'",
        "delete from socai_ledger.holds",
        "truncate socai_ledger.holds",
    ],
)
def test_a_hold_moves_one_way_and_is_kept(alice_holds_800: str, owner_migrated: str, statement: str) -> None:
    for who in (alice_holds_800, owner_migrated):
        refused(who, lambda conn: conn.execute(statement), pg_errors.Error)
    with psycopg.connect(alice_holds_800) as conn:
        conn.execute("update socai_ledger.holds set status = 'final', amount_gold = 500 where hand_id = 'tx-h1'")
        conn.commit()
    # Final: it only shrinks; released: it never changes again.
    refused(
        owner_migrated,
        lambda conn: conn.execute("update socai_ledger.holds set amount_gold = 501 where hand_id = 'tx-h1'"),
        pg_errors.IntegrityConstraintViolation,
    )
    with psycopg.connect(alice_holds_800) as conn:
        conn.execute(
            "update socai_ledger.holds set status = 'released', released_at = now(), released_by = 'outcome' "
            "where hand_id = 'tx-h1'"
        )
        conn.commit()
        assert held_gold(conn, "player:alice") == 0
    refused(
        owner_migrated,
        lambda conn: conn.execute("update socai_ledger.holds set status = 'open' where hand_id = 'tx-h1'"),
        pg_errors.IntegrityConstraintViolation,
    )


def test_a_committed_transaction_never_gains_a_leg(funded: str) -> None:
    def attempt(conn: psycopg.Connection) -> None:
        (seq,) = conn.execute("select min(journal_seq) from socai_ledger.transactions").fetchone() or (0,)
        legs = [("player:alice", -5), ("player:bob", 5)]
        append_by_hand(conn, legs, seq=int(seq), with_transaction=False, first_index=10)
        move_rows(conn, legs)

    caught = refused(funded, attempt, pg_errors.IntegrityConstraintViolation)
    assert "belong to no transaction applied by this database transaction" in str(caught.value)


@pytest.mark.parametrize(
    "statement",
    [
        "update socai_ledger.entries set amount_gold = amount_gold + 1",
        "update socai_ledger.transactions set reference = 'rewritten'",
        "delete from socai_ledger.entries",
        "delete from socai_ledger.accounts where account_id = 'player:bob'",
        "truncate socai_ledger.entries",
        "update socai_ledger.accounts set may_go_negative = true where account_id = 'player:bob'",
        "alter table socai_ledger.entries disable trigger user",
        "alter table socai_ledger.accounts disable trigger accounts_checked_on_update",
        "alter table socai_ledger.journal_checks disable trigger all",
        "drop trigger entries_checked on socai_ledger.entries",
        "set session_replication_role = replica",
        "delete from socai_ledger.journal_checks",
        "insert into socai_ledger.journal_checks (xact_id) values (pg_current_xact_id())",
        "create function socai_ledger.f() returns int language sql as 'select 1'",
        "set role socai",
    ],
)
def test_the_service_role_cannot_rewrite_or_switch_a_guard_off(funded: str, statement: str) -> None:
    refused(funded, lambda conn: conn.execute(statement), pg_errors.InsufficientPrivilege)


def test_even_the_owner_cannot_write_a_balance_around_the_journal(funded: str, owner_migrated: str) -> None:
    """The guards hold for the owner too; only disabling them (which the service role may
    not) gets around them, and VerifyJournal finds that."""
    refused(
        role_url(owner_migrated, OWNER_ROLE),
        lambda conn: conn.execute(
            "update socai_ledger.accounts set balance_gold = balance_gold + 50 where account_id = 'player:bob'"
        ),
        pg_errors.IntegrityConstraintViolation,
    )


def test_each_service_role_is_kept_out_of_the_others_schemas(owner_migrated: str) -> None:
    attempts = {
        "table": ["select 1 from socai_ledger.accounts", "select 1 from socai_settlement.settlements"],
        "settlement": ["select 1 from socai_ledger.entries", "select seed from socai_table.hand_seeds"],
        "ledger": ["select seed from socai_table.hand_seeds", "select 1 from socai_settlement.dead_letters"],
    }
    for service, statements in attempts.items():
        for statement in statements:
            url = role_url(owner_migrated, SERVICE_ROLES[service])
            with psycopg.connect(url) as conn, pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute(statement)


def test_the_settlement_role_cannot_rewrite_a_settled_hand(owner_migrated: str) -> None:
    url = role_url(owner_migrated, SERVICE_ROLES["settlement"])
    with psycopg.connect(url) as conn:
        for statement in (
            "update socai_settlement.settlements set fees_gold = 0",
            "delete from socai_settlement.settlements",
            "update socai_settlement.settlement_seats set net_gold = 0",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute(statement)
            conn.rollback()


def test_role_url_swaps_only_the_role(owner_migrated: str) -> None:
    params = psycopg.conninfo.conninfo_to_dict(role_url(owner_migrated, LEDGER_ROLE))
    original = psycopg.conninfo.conninfo_to_dict(owner_migrated)
    assert params["user"] == LEDGER_ROLE and "password" not in params
    assert (params["host"], params.get("port"), params["dbname"]) == (
        original["host"],
        original.get("port"),
        original["dbname"],
    )


def test_the_stack_gives_each_embedded_service_its_own_role() -> None:
    embedded = Settings(pg_port=5999)
    assert embedded.effective_database_url == "postgresql://socai@127.0.0.1:5999/socai"  # migrations, tools
    for service, role in SERVICE_ROLES.items():
        assert embedded.service_database_url(service) == f"postgresql://{role}@127.0.0.1:5999/socai"
    configured = Settings(database_url="postgresql://someone:secret@db.internal:5432/socai")
    assert configured.service_database_url("table") == configured.database_url
