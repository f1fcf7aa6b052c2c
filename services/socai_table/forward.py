"""Forwarding a call for a table this instance does not hold to the instance that does.

The owner is looked up in the lease bucket (``Ownership.owner``). The call goes there with
the caller's own metadata (``authorization`` and ``x-request-id``; a player's token travels
in the request), so the owner authenticates and authorizes it exactly as if it had been
called directly, and answers with its own status, which is passed back unchanged (code and
ErrorInfo reason). A forwarded call carries ``socai-forwarded-by: <instance>`` and is never
forwarded again: an owner that no longer holds the table answers UNAVAILABLE
``TABLE_NOT_HELD`` and the caller retries, so a partition moving mid-call cannot make two
instances bounce a call between them.

``ListTables`` is answered from the shared directory (PostgreSQL), a page of every
instance's tables; each table held elsewhere gets its live state (seats, hand) from its
holder, one forwarded ListTables per holder (``tables_elsewhere``).

A gateway can skip the hop and route by itself: k = partition_of(table_id, P) (FNV-1a of the
id, ``socai.infra.partitions``), holder = value of ``partition.<k>`` in the bucket
``table_leases_<events stream>``, address = value of ``member.<holder>``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final

import grpc

from socai import errors
from socai.gen.table.v1 import table_pb2 as pb
from socai.gen.table.v1 import table_pb2_grpc as pb_grpc
from socai.infra import tracing
from socai.infra.grpc_errors import error_info, from_rpc_error
from socai.infra.logging import get_logger
from socai_table import metrics
from socai_table.ownership import Owner, Ownership, owner_unknown

log = get_logger("socai.table.forward")

FORWARDED_HEADER: Final = "socai-forwarded-by"
PASSED_HEADERS: Final = ("authorization", "x-request-id")
UNARY_DEADLINE_S: Final = 30.0  # a forwarded unary call never waits longer, whatever the caller allows
CHANNELS_MAX: Final = 64  # one channel per owner address; instances are few
LIST_DEADLINE_S: Final = 5.0  # a holder's part of a ListTables page
SERVICE_NAME: Final = pb.DESCRIPTOR.services_by_name["TableService"].full_name


# What a call to the holder fails with when the holder itself went away mid-call (it stopped
# or restarted: a rolling upgrade's SIGTERM, a crash), as gRPC's transport reports it.
TRANSPORT_FAILURES: Final = frozenset(
    {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
)


def owner_error(exc: grpc.aio.AioRpcError) -> errors.SocaiError:
    """The owner's refusal as a domain error with its code, reason and details (a retry
    hint, ``retry_after_ms``, must reach the caller as the owner gave it).

    An answer without socai's ErrorInfo is not the owner's refusal but the transport's: the
    holder went away mid-call (a stream reset reads INTERNAL, a closed socket UNAVAILABLE).
    The caller gets UNAVAILABLE with ``TABLE_OWNER_UNREACHABLE`` and a retry hint, which
    its retries handle, never an INTERNAL that says the table service failed."""
    info = error_info(exc)
    if info is None and exc.code() in TRANSPORT_FAILURES:
        return errors.Unavailable(
            "TABLE_OWNER_UNREACHABLE",
            f"the instance holding the table did not answer ({exc.code().name}: {exc.details() or ''}); retry",
            retry_after_ms=500,
        )
    error = from_rpc_error(exc)
    if info is not None:
        error.details = {**info.metadata}
    return error


def forwarded_by(context: Any) -> str:
    """The instance that forwarded this call ("" when a client called directly)."""
    for key, value in context.invocation_metadata() or ():
        if key == FORWARDED_HEADER and isinstance(value, str):
            return value
    return ""


class Forwarder:
    def __init__(self, ownership: Ownership) -> None:
        self.ownership = ownership
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    def local(self, table_id: str, context: Any) -> bool:
        """Whether to serve the call here: this instance holds the table, or the call was
        forwarded already (then it is served here or refused, never sent on)."""
        if self.ownership.holds(table_id):
            return True
        return bool(forwarded_by(context))

    async def _stub(self, table_id: str) -> tuple[pb_grpc.TableServiceStub, str]:
        return await self._stub_at(await self._owner(table_id))

    async def _owner(self, table_id: str) -> Owner:
        """The other instance holding ``table_id``. Raises Unavailable when there is none
        to ask (nobody holds it, or the bucket still names this instance)."""
        owner = await self.ownership.owner(table_id)
        if owner is None:
            raise owner_unknown(table_id, self.ownership.partition_of(table_id))
        if owner.instance == self.ownership.instance_id or owner.address == self.ownership.address:
            # The bucket still names this instance (a lease it just lost, or its previous
            # life's key that has not expired yet): nobody else to ask.
            raise errors.Unavailable(
                "TABLE_NOT_HELD",
                f"table {table_id} is moving between instances; retry",
                retry_after_ms=500,
            )
        return owner

    async def _stub_at(self, owner: Owner) -> tuple[pb_grpc.TableServiceStub, str]:
        return pb_grpc.TableServiceStub(await self._channel_at(owner)), owner.instance

    async def _channel_at(self, owner: Owner) -> grpc.aio.Channel:
        channel = self._channels.get(owner.address)
        if channel is None:
            if len(self._channels) >= CHANNELS_MAX:
                await self.close()
            channel = self._channels[owner.address] = grpc.aio.insecure_channel(
                owner.address,
                options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)],
                interceptors=tracing.client_interceptors(),  # the caller's trace goes on at the holder
            )
        return channel

    def _metadata(self, context: Any) -> tuple[tuple[str, str], ...]:
        passed = tuple(
            (key, value)
            for key, value in context.invocation_metadata() or ()
            if key in PASSED_HEADERS and isinstance(value, str)
        )
        return (*passed, (FORWARDED_HEADER, self.ownership.instance_id))

    async def unary(self, method: str, table_id: str, request: Any, context: Any) -> Any:
        """``method``'s answer from the owner of ``table_id``. Raises the owner's error as a
        domain error (same code and reason), Unavailable when there is no owner to ask."""
        stub, owner = await self._stub(table_id)
        remaining = context.time_remaining()
        timeout = UNARY_DEADLINE_S if remaining is None else min(UNARY_DEADLINE_S, remaining)
        try:
            reply = await getattr(stub, method)(request, metadata=self._metadata(context), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            self._failed(method, table_id, owner, exc)
            raise owner_error(exc) from None
        metrics.FORWARDED.labels(method, "OK").inc()
        return reply

    async def stream(self, method: str, table_id: str, request: Any, context: Any) -> AsyncIterator[bytes]:
        """``method``'s stream from the owner of ``table_id``, item by item (WatchTable),
        each item the serialized message as the owner sent it: relayed as it is, never
        parsed and serialized again here."""
        holder = await self._owner(table_id)
        relay = (await self._channel_at(holder)).unary_stream(
            f"/{SERVICE_NAME}/{method}",
            request_serializer=type(request).SerializeToString,
            # No deserializer: the call yields each message's bytes.
        )
        call = relay(request, metadata=self._metadata(context))
        try:
            async for item in call:
                yield item
        except grpc.aio.AioRpcError as exc:
            self._failed(method, table_id, holder.instance, exc)
            raise owner_error(exc) from None
        finally:
            call.cancel()
        metrics.FORWARDED.labels(method, "OK").inc()

    async def tables_elsewhere(self, table_ids: list[str], request: Any, context: Any) -> dict[str, Any]:
        """The live ``pb.Table`` of each of ``table_ids`` held by another instance, asked of
        each holder once (its ListTables over the same page, answered from its own tables).

        ``request`` is the caller's ListTables: a holder's tables within the page are among
        its first ``page_size`` after ``page_token``, so one call per holder covers them. A
        table nobody holds right now, or whose holder does not answer, is left out (the
        caller shows its stored configuration).
        """
        holders: dict[str, Owner] = {}
        for table_id in table_ids:
            owner = await self.ownership.owner(table_id)
            if owner is not None and owner.instance != self.ownership.instance_id:
                holders.setdefault(owner.instance, owner)
        found: dict[str, Any] = {}
        wanted = set(table_ids)

        async def ask(owner: Owner) -> None:
            stub, _ = await self._stub_at(owner)
            try:
                reply = await stub.ListTables(request, metadata=self._metadata(context), timeout=LIST_DEADLINE_S)
            except grpc.aio.AioRpcError as exc:
                metrics.FORWARDED.labels("ListTables", exc.code().name).inc()
                log.info("list_forward_failed", owner=owner.instance, code=exc.code().name)
                return
            metrics.FORWARDED.labels("ListTables", "OK").inc()
            for table in reply.tables:
                if table.table_id in wanted:
                    found[table.table_id] = table

        await asyncio.gather(*(ask(owner) for owner in holders.values()))
        return found

    def _failed(self, method: str, table_id: str, owner: str, exc: grpc.aio.AioRpcError) -> None:
        metrics.FORWARDED.labels(method, exc.code().name).inc()
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            # The owner may be gone or the table moved: look it up afresh next time.
            self.ownership.forget(table_id)
            log.info("forward_failed", method=method, table_id=table_id, owner=owner, code=exc.code().name)
