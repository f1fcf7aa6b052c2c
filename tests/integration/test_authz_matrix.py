"""Every RPC of every service x every caller, against the documented allow-list (issue 16).

The methods come from the protobuf descriptors, so a method added to a proto is called
here the day it exists: it must have an allow-list entry in its service and a row in
the method table of that service's page in docs/use, and both must agree. Each method is then called
with no token, a wrong token, a player token in place of a service token, and each
service's token, with an empty request: a caller outside the list is PERMISSION_DENIED by
the interceptor, one inside it gets past it (to whatever the empty request deserves), and
nothing answers INTERNAL or UNKNOWN.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import symbol_database

from socai.gen.ledger.v1 import ledger_pb2
from socai.gen.settlement.v1 import settlement_pb2
from socai.gen.table.v1 import table_pb2
from socai.infra import player_tokens
from socai.infra.config import DEV_TOKENS
from socai.infra.grpc_client import channel
from socai.infra.grpc_errors import error_reason
from socai.infra.grpc_server import ANY_CALLER
from socai.infra.nats import StreamSpec
from socai_ledger.server import access_policy as ledger_policy
from socai_settlement.server import access_policy as settlement_policy
from socai_table.server import policy as table_policy
from tests.support.services import Running, running, service_settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {
    # service -> (proto file descriptor, service name, its page of the docs, allow-list)
    "ledger": (ledger_pb2.DESCRIPTOR, "LedgerService", "docs/use/ledger.md", ledger_policy(DEV_TOKENS).allow),
    "table": (table_pb2.DESCRIPTOR, "TableService", "docs/use/table.md", table_policy(DEV_TOKENS).allow),
    "settlement": (
        settlement_pb2.DESCRIPTOR,
        "SettlementService",
        "docs/use/settlement.md",
        settlement_policy(DEV_TOKENS).allow,
    ),
}
CALLERS = tuple(sorted(DEV_TOKENS))
NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


def methods_of(service: str) -> list[Any]:
    file_descriptor, name, _, _ = SERVICES[service]
    return list(file_descriptor.services_by_name[name].methods)


def documented_allow_list(page: str) -> dict[str, frozenset[str]]:
    """The ``| method | what | callers |`` table of a service's page of the docs, as an
    allow-list."""
    text = (ROOT / page).read_text()
    table: dict[str, frozenset[str]] = {}
    in_table = False
    for line in text.splitlines():
        if line.startswith("| method |") and line.rstrip().endswith("| callers |"):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(cells[0]) <= {"-"}:
            continue
        callers_text = re.sub(r"\([^)]*\)", "", cells[-1]).strip()  # "(within its account rules)" is a note
        callers = (
            frozenset({ANY_CALLER})
            if callers_text == "everyone"
            else frozenset(c.strip() for c in callers_text.split(","))
        )
        for method in re.findall(r"`([A-Za-z]+)`", cells[0]):
            table[method] = callers
    return table


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_every_method_has_an_allow_list_and_a_documented_row_that_agree(service: str):
    _, _, page, allow = SERVICES[service]
    documented = documented_allow_list(page)
    for method in methods_of(service):
        assert method.name in allow, f"{service}.{method.name} has no allow-list entry"
        assert method.name in documented, f"{service}.{method.name} has no row in {page}"
        assert documented[method.name] == allow[method.name], (service, method.name)
    assert set(documented) == {m.name for m in methods_of(service)}, f"{page} documents a method that does not exist"


@pytest.fixture
async def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> AsyncIterator[Running]:
    settings = service_settings(nats_url, migrated_database_url, stream_spec)
    async with running(settings, ("ledger", "settlement", "table")) as r:
        try:
            yield r
        finally:
            await r.delete_streams(stream_spec.name)


def address_of(r: Running, service: str) -> str:
    return {"ledger": r.settings.ledger_addr, "table": r.settings.table_addr, "settlement": r.settings.settlement_addr}[
        service
    ]


async def call(ch: grpc.aio.Channel, service: str, method: Any) -> tuple[grpc.aio.AioRpcError | None, grpc.StatusCode]:
    """Call ``method`` with an empty request; returns the status (OK when it answered)."""
    file_descriptor, name, _, _ = SERVICES[service]
    package = file_descriptor.package
    path = f"/{package}.{name}/{method.name}"
    db = symbol_database.Default()
    request_cls = db.GetSymbol(method.input_type.full_name)
    response_cls = db.GetSymbol(method.output_type.full_name)
    try:
        if method.server_streaming:
            stream = ch.unary_stream(path, request_cls.SerializeToString, response_cls.FromString)(request_cls())
            try:
                await asyncio.wait_for(stream.read(), 5)
            except TimeoutError:
                pass  # an open stream waiting for events: the call was let in
            finally:
                stream.cancel()
        else:
            await ch.unary_unary(path, request_cls.SerializeToString, response_cls.FromString)(
                request_cls(), timeout=10
            )
    except grpc.aio.AioRpcError as exc:
        return exc, exc.code()
    return None, grpc.StatusCode.OK


async def test_every_rpc_of_every_service_for_every_caller(stack: Running):
    tokens: Mapping[str, str | None] = {
        "<none>": None,
        "<wrong>": "not-a-token",
        "<player>": player_tokens.issue(stack.settings.player_token_key, "alice", 600)[0],
        **{caller: DEV_TOKENS[caller] for caller in CALLERS},
    }
    problems = []
    calls = 0
    for service in sorted(SERVICES):
        allow = SERVICES[service][3]
        for who, token in tokens.items():
            ch = channel(address_of(stack, service), token)
            try:
                for method in methods_of(service):
                    error, code = await call(ch, service, method)
                    calls += 1
                    reason = error_reason(error) if error is not None else ""
                    if code in NEVER:
                        problems.append((service, method.name, who, code, reason))
                    elif token is None or who in ("<wrong>", "<player>"):
                        if (code, reason) != (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"):
                            problems.append((service, method.name, who, code, "expected UNAUTHENTICATED"))
                    elif ANY_CALLER in allow[method.name] or who in allow[method.name]:
                        # The interceptor's own refusals carry these reasons; a player-scoped
                        # call without a player token is UNAUTHENTICATED BAD_PLAYER_TOKEN, past it.
                        if reason in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
                            problems.append((service, method.name, who, code, "an allowed caller was refused"))
                    elif (code, reason) != (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"):
                        problems.append((service, method.name, who, code, "expected PERMISSION_DENIED"))
            finally:
                await ch.close()
    assert calls == sum(len(methods_of(s)) for s in SERVICES) * len(tokens)
    assert problems == [], "\n".join(map(str, problems))
