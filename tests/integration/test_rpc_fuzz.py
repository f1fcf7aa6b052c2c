"""Fuzzing every RPC with requests generated from the protobuf descriptors (issue 16).

Hypothesis builds request messages field by field from each method's input descriptor
(ints at and beyond their edges, strings with NULs, thousands of digits and real-looking
ids, unknown enum numbers, timestamps outside 0001-9999, nested messages and maps), and
each is sent to the real service as a caller the method allows. No call may answer
INTERNAL or UNKNOWN, and afterwards the ledger's journal verifies and its trial balance is
zero: whatever the calls did, they did it in balance.

The services run in a thread of their own (their own event loop) so that Hypothesis drives
plain synchronous gRPC calls. ``make test`` runs one round of 600 derandomized examples per
method (slow-marked: ``-m "not slow"`` leaves it out of a quick run); a shorter round beside it
would mostly send the same derandomized first examples again, so there is none.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import symbol_database
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from socai.gen.ledger.v1 import ledger_pb2
from socai.gen.ledger.v1 import ledger_pb2_grpc as lgrpc
from socai.infra.config import DEV_TOKENS, Settings
from socai.infra.grpc_errors import error_reason
from socai.infra.grpc_server import ANY_CALLER
from socai.infra.nats import StreamSpec
from tests.integration.test_authz_matrix import SERVICES, methods_of
from tests.support.services import running, service_settings

pytestmark = pytest.mark.integration

INT32 = 2**31
INT64 = 2**63
# Strings the services look at closely: ids of every account kind, keys settlement owns,
# ids at and past their limits, and shapes that once crashed a parser.
INTERESTING_TEXT = [
    "",
    "\x00",
    "a\x00b",
    "x" * 65,
    "x" * 5000,
    "9" * 5000,
    "-1",
    "1e309",
    "alice",
    "bob.smith",
    "player:alice",
    "escrow:t1:alice",
    "pot:t1",
    "guild:g1",
    "house:fees",
    "house:bank",
    "external:cashier",
    "settle:t1-h1",
    "join:t1:alice:abc",
    "t1",
    "t1-h1",
    "holdem",
    "xito",
    "taixiu",
    "ACCOUNT_KIND_PLAYER",
    "MTIzNA",
    "9223372036854775808",
]


def _token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


# Page tokens are base64 of the position they stand for: well-formed base64 of a bad
# position (a NUL, a 5,000-digit sequence) reaches the decoder's checks.
INTERESTING_TEXT += [
    _token(t)
    for t in ("\x00", "a\x00b", "player:alice\x1f" + "9" * 5000, "player:alice\x1f1", "9" * 5000 + ":t1-h1", "1:\x00")
]
INTERESTING_TEXT += [t.rstrip("=") for t in INTERESTING_TEXT[-6:]]
TEXT = st.one_of(st.sampled_from(INTERESTING_TEXT), st.text(max_size=40))
INTS = {
    FieldDescriptor.TYPE_INT32: st.one_of(
        st.sampled_from([0, 1, -1, INT32 - 1, -INT32]), st.integers(-INT32, INT32 - 1)
    ),
    FieldDescriptor.TYPE_INT64: st.one_of(
        st.sampled_from([0, 1, -1, 100, 10**17, INT64 - 1, -INT64]), st.integers(-INT64, INT64 - 1)
    ),
    FieldDescriptor.TYPE_UINT32: st.integers(0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_SINT32: st.integers(-INT32, INT32 - 1),
    FieldDescriptor.TYPE_SINT64: st.integers(-INT64, INT64 - 1),
}
MAX_DEPTH = 4


def field_strategy(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return message_strategy(field.message_type, depth + 1)
    if field.type == FieldDescriptor.TYPE_STRING:
        return TEXT
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=40)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(known), st.integers(-5, 40))
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, width=32)
    return INTS.get(field.type, st.integers(-INT32, INT32 - 1))


def message_strategy(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """A strategy for messages of ``descriptor``: any subset of fields set, recursively."""
    cls = symbol_database.Default().GetSymbol(descriptor.full_name)
    if descriptor.full_name == "google.protobuf.Timestamp":
        return st.builds(
            lambda s, n: cls(seconds=s, nanos=n),
            st.one_of(
                st.sampled_from([-62135596801, 253402300800, 0, 1_800_000_000]), INTS[FieldDescriptor.TYPE_INT64]
            ),
            st.one_of(st.sampled_from([0, 999_999_999, 1_000_000_000, -1]), INTS[FieldDescriptor.TYPE_INT32]),
        )
    if depth > MAX_DEPTH:
        return st.just(cls())
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field, value_field = (
                field.message_type.fields_by_name["key"],
                field.message_type.fields_by_name["value"],
            )
            parts[field.name] = st.dictionaries(
                field_strategy(key_field, depth), field_strategy(value_field, depth), max_size=3
            )
        elif field.is_repeated:
            parts[field.name] = st.lists(field_strategy(field, depth), max_size=3)
        else:
            parts[field.name] = field_strategy(field, depth)
    if not parts:
        return st.just(cls())

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        msg = cls()
        # Each field is set more often than not: a request with its ids set reaches the
        # checks behind them (a time, a page token) instead of stopping at the first.
        # Of a oneof, one member at most (a later one would silently replace the earlier).
        chosen = []
        oneofs_used = set()
        for name in sorted(parts):
            oneof = descriptor.fields_by_name[name].containing_oneof
            if oneof is not None and oneof.name in oneofs_used:
                continue
            if draw(st.integers(0, 9)) < 7:
                chosen.append(name)
                if oneof is not None:
                    oneofs_used.add(oneof.name)
        for name in chosen:
            value = draw(parts[name])
            field = descriptor.fields_by_name[name]
            target = getattr(msg, name)
            try:
                if field.message_type is not None and field.message_type.GetOptions().map_entry:
                    for k, v in value.items():
                        if isinstance(v, Message):
                            target[k].CopyFrom(v)
                        else:
                            target[k] = v
                elif field.is_repeated:
                    if field.type == FieldDescriptor.TYPE_MESSAGE:
                        for item in value:
                            target.add().CopyFrom(item)
                    else:
                        target.extend(value)
                elif field.type == FieldDescriptor.TYPE_MESSAGE:
                    target.CopyFrom(value)
                else:
                    setattr(msg, name, value)
            except (ValueError, TypeError):
                continue  # a value protobuf itself refuses to hold (an unknown closed enum …)
        return msg

    return build()


@dataclass
class Stack:
    settings: Settings
    channels: dict[str, grpc.Channel]


@pytest.fixture
def stack(nats_url: str, migrated_database_url: str, stream_spec: StreamSpec) -> Iterator[Stack]:
    """Ledger, settlement and table in a thread with its own event loop."""
    settings = service_settings(nats_url, migrated_database_url, stream_spec)
    ready = threading.Event()
    stop: list[asyncio.Event] = []
    failure: list[BaseException] = []

    async def serve() -> None:
        async with running(settings, ("ledger", "settlement", "table")) as r:
            stop.append(asyncio.Event())
            ready.set()
            await stop[0].wait()
            await r.delete_streams(stream_spec.name)

    def main() -> None:
        try:
            loop.run_until_complete(serve())
        except BaseException as exc:
            failure.append(exc)
            ready.set()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(120) and not failure, failure
    addresses = {"ledger": settings.ledger_addr, "table": settings.table_addr, "settlement": settings.settlement_addr}
    channels = {name: grpc.insecure_channel(address) for name, address in addresses.items()}
    try:
        yield Stack(settings, channels)
    finally:
        for ch in channels.values():
            ch.close()
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(60)
        loop.close()


def calls() -> list[tuple[str, Any]]:
    return [(service, method) for service in sorted(SERVICES) for method in methods_of(service)]


def caller_for(service: str, method_name: str) -> str:
    allowed = SERVICES[service][3][method_name]
    if ANY_CALLER in allowed:
        return "operator"
    return sorted(allowed)[0]


def send(stack: Stack, service: str, method: Any, request: Message) -> tuple[grpc.StatusCode, str]:
    file_descriptor, name, _, _ = SERVICES[service]
    path = f"/{file_descriptor.package}.{name}/{method.name}"
    response_cls = symbol_database.Default().GetSymbol(method.output_type.full_name)
    metadata = (("authorization", f"Bearer {DEV_TOKENS[caller_for(service, method.name)]}"),)
    ch = stack.channels[service]
    try:
        if method.server_streaming:
            stream = ch.unary_stream(path, type(request).SerializeToString, response_cls.FromString)(
                request, metadata=metadata, timeout=2
            )
            try:
                for _ in stream:
                    break
            finally:
                stream.cancel()
        else:
            ch.unary_unary(path, type(request).SerializeToString, response_cls.FromString)(
                request, metadata=metadata, timeout=10
            )
    except grpc.RpcError as exc:
        code = exc.code()  # type: ignore[attr-defined]
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED) and method.server_streaming:
            return grpc.StatusCode.OK, ""  # an open stream waiting for events
        return code, error_reason(exc)  # type: ignore[arg-type]
    return grpc.StatusCode.OK, ""


def check_journal(stack: Stack) -> None:
    ch = stack.channels["ledger"]
    stub = lgrpc.LedgerServiceStub(ch)
    metadata = (("authorization", f"Bearer {DEV_TOKENS['auditor']}"),)
    verified = stub.VerifyJournal(ledger_pb2.VerifyJournalRequest(), metadata=metadata, timeout=60)
    assert verified.ok and list(verified.mismatches) == []
    trial = stub.TrialBalance(ledger_pb2.TrialBalanceRequest(), metadata=metadata, timeout=60)
    assert trial.total_gold == 0


def fuzz_one(stack: Stack, service: str, method: Any, examples: int) -> int:
    """Send ``examples`` generated requests to one method; returns how many were sent."""
    sent = [0]

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(request=message_strategy(method.input_type))
    def one(request: Message) -> None:
        code, reason = send(stack, service, method, request)
        sent[0] += 1
        assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (
            f"{service}.{method.name} answered {code.name} {reason} to {request!r:.500}"
        )

    one()
    return sent[0]


def run_fuzz(stack: Stack, examples: int) -> None:
    """Fuzz every method (all of them, even after one fails), then check the journal."""
    failures = []
    for service, method in calls():
        try:
            assert fuzz_one(stack, service, method, examples) > 0, (service, method.name)
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0])
    assert failures == [], "\n".join(failures)
    check_journal(stack)


@pytest.mark.slow
@pytest.mark.heavy
def test_fuzz_every_rpc(stack: Stack):
    run_fuzz(stack, examples=600)
