"""``socai settlement …``: the operator's view of the settlement service, over its gRPC API.

    socai settlement get HAND_ID
    socai settlement list (--table T | --player P) [--page-size N] [--page-token TOKEN]
    socai settlement replay HAND_ID          recompute from the events, diff with what is stored
    socai settlement dead-letters [--page-size N] [--page-token TOKEN]
    socai settlement retry HAND_ID           settle a dead-lettered hand again

Replies print as JSON (the protobuf JSON mapping). The service is ``SOCAI_SETTLEMENT_ADDR``
(or ``--addr``); the caller is the operator (``SOCAI_SERVICE_TOKEN`` or the operator token).
Exit status: 0, or 1 when ``replay`` finds differences or ``retry`` does not settle the hand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format

from socai.gen.settlement.v1 import settlement_pb2 as pb
from socai.gen.settlement.v1 import settlement_pb2_grpc as pb_grpc
from socai.infra.config import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def add_commands(subparsers: Any, command: Callable[[str], Callable[[Handler], Handler]]) -> None:
    parser = subparsers.add_parser("settlement", help="settlements and dead letters (the settlement service)")
    parser.add_argument("--addr", help="settlement gRPC address (default: SOCAI_SETTLEMENT_ADDR)")
    sub = parser.add_subparsers(dest="settlement_command", required=True)
    sub.add_parser("get", help="one hand's settlement").add_argument("hand_id")
    listing = sub.add_parser("list", help="settlements of a table or a player, newest first")
    who = listing.add_mutually_exclusive_group(required=True)
    who.add_argument("--table")
    who.add_argument("--player")
    _paging(listing)
    sub.add_parser("replay", help="recompute a hand and diff it with the stored settlement").add_argument("hand_id")
    _paging(sub.add_parser("dead-letters", help="hands that could not be settled"))
    sub.add_parser("retry", help="settle a dead-lettered hand again").add_argument("hand_id")
    command("settlement")(cmd_settlement)


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--page-token", default="")


def cmd_settlement(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_run(args, settings))


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    import grpc

    from socai.infra.grpc_client import channel
    from socai.infra.grpc_errors import from_rpc_error

    async with channel(args.addr or settings.settlement_addr, settings.token_of("operator")) as ch:
        stub = pb_grpc.SettlementServiceStub(ch)
        try:
            reply, status = await _call(stub, args)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from exc
    print(json.dumps(json_format.MessageToDict(reply, preserving_proto_field_name=True), indent=2))
    return status


async def _call(stub: Any, args: argparse.Namespace) -> tuple[Any, int]:
    what = args.settlement_command
    if what == "get":
        return await stub.GetSettlement(pb.GetSettlementRequest(hand_id=args.hand_id)), 0
    if what == "list":
        request = pb.ListSettlementsRequest(
            table_id=args.table or "",
            player_id=args.player or "",
            page_size=args.page_size,
            page_token=args.page_token,
        )
        return await stub.ListSettlements(request), 0
    if what == "replay":
        reply = await stub.ReplayHand(pb.ReplayHandRequest(hand_id=args.hand_id))
        return reply, 1 if reply.differences else 0
    if what == "dead-letters":
        dead = pb.ListDeadLettersRequest(page_size=args.page_size, page_token=args.page_token)
        return await stub.ListDeadLetters(dead), 0
    reply = await stub.RetryDeadLetter(pb.RetryDeadLetterRequest(hand_id=args.hand_id))
    return reply, 0 if reply.settled else 1
