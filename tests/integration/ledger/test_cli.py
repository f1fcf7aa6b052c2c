"""``socai ledger …`` against a running ledger: what an operator types and reads."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from tests.integration.ledger.conftest import Ledger

pytestmark = pytest.mark.integration


async def socai(ledger: Ledger, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "SOCAI_LEDGER_ADDR": ledger.address}
    env.pop("SOCAI_SERVICE_TOKEN", None)
    env.pop("SOCAI_TOKENS", None)  # the development tokens, as the test ledger uses
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "socai_cli.main",
        "ledger",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_an_operator_deposits_reads_a_statement_and_audits_the_journal(ledger: Ledger):
    code, out, _ = await socai(ledger, "deposit", "42", "5000", "--key", "ticket-981", "--reference", "bank 981")
    assert code == 0 and out.startswith("applied: 5000 gold to player:42") and "balance after 5000" in out
    code, out, _ = await socai(ledger, "deposit", "42", "5000", "--key", "ticket-981", "--reference", "bank 981")
    assert code == 0 and out.startswith("replayed:")  # a retried command deposits once
    code, out, _ = await socai(ledger, "deposit", "house:bank", "70000", "--key", "fund-bank-1")
    assert code == 0 and "to house:bank" in out

    code, out, _ = await socai(ledger, "balance", "player:42")
    assert (code, out.strip()) == (0, "player:42: 5000 gold (version 1)")
    code, out, _ = await socai(ledger, "--json", "balance", "house:bank")
    assert code == 0 and json.loads(out)["balance_gold"] == "70000"  # int64 is a string in protobuf JSON

    code, out, _ = await socai(ledger, "statement", "player:42")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["journal", "time"] and len(lines) == 2
    assert "+5000" in lines[1] and lines[1].split()[3] == "5000"

    code, out, _ = await socai(ledger, "verify")
    assert code == 0 and out.startswith("journal OK: 4 accounts, 4 entries checked")
    code, out, _ = await socai(ledger, "trial-balance")
    assert code == 0 and "total" in out and "balanced" in out


async def test_a_refused_command_prints_the_reason_and_exits_2(ledger: Ledger):
    code, _, err = await socai(ledger, "deposit", "42", "-5", "--key", "k1")
    assert code == 2 and "NEGATIVE_AMOUNT" in err
    code, _, err = await socai(ledger, "balance", "player:nobody")
    assert code == 2 and "ACCOUNT_NOT_FOUND" in err
