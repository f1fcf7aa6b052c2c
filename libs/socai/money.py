"""Integer gold: fees in basis points, deterministic splits, pro-rata shortfalls.

Gold is a Python ``int`` in minor units and an ``int64`` on the wire. No float ever
touches money. Every split here is deterministic: remainders go one unit at a time to the
recipients in the order the caller passes, which is the game's playing order starting with
the first player after the dealer, banker or first-to-act seat (DESIGN.md "Money").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard, TypeVar

from socai.errors import broken, check

INT64_MAX = 2**63 - 1
BPS_DENOMINATOR = 10_000
FEE_BPS_MAX = 10_000  # the most ``fee`` accepts (100 %)
# RULES.md GEN-1: a table's ``fee_bps`` is 0 to 1000 basis points (0 means no fee). The
# one place this range is written: the rules kit, the table's config and the tests use it.
TABLE_FEE_BPS_MAX = 1000

K = TypeVar("K")


def is_gold(amount: object) -> TypeGuard[int]:
    """True for an ``int`` (not ``bool``) that fits a signed 64-bit integer."""
    return type(amount) is int and -INT64_MAX - 1 <= amount <= INT64_MAX


def fee(amount_gold: object, fee_bps: object) -> int:
    """The fee on a positive amount: ``floor(amount * bps / 10000)``; 0 on zero or less.

    Typed ``object`` so that the compiled core (``make native``) sees a ``bool`` as it is:
    a parameter typed ``int`` there holds ``True`` as the int 1 (docs/inside/native.md)."""
    if type(amount_gold) is not int or type(fee_bps) is not int:
        broken("fee takes ints")
    check(0 <= fee_bps <= FEE_BPS_MAX, f"fee_bps {fee_bps} out of range")
    if amount_gold <= 0:
        return 0
    return amount_gold * fee_bps // BPS_DENOMINATOR


def split_evenly(amount_gold: int, recipients: Sequence[K]) -> dict[K, int]:
    """Split ``amount_gold`` equally; the remainder goes one unit at a time in ``recipients`` order."""
    check(type(amount_gold) is int, "split takes int gold")
    check(amount_gold >= 0, "split of a negative amount")
    check(len(recipients) > 0, "split among nobody")
    check(len(set(recipients)) == len(recipients), "duplicate recipient in split")
    share, remainder = divmod(amount_gold, len(recipients))
    result = {r: share for r in recipients}
    for r in recipients[:remainder]:
        result[r] += 1
    check(sum(result.values()) == amount_gold, "split does not add up")
    return result


def pro_rata(amount_gold: int, claims: Sequence[tuple[K, int]]) -> dict[K, int]:
    """Share ``amount_gold`` in proportion to ``claims`` (in playing order), capped at each claim.

    Used when a payer cannot cover all they owe (RULES.md GEN-4): each recipient gets
    ``floor(amount * claim / total)``; the remainder goes one unit at a time in the order of
    ``claims`` to recipients still below their claim. When ``amount_gold`` covers every claim
    each recipient gets exactly its claim.
    """
    check(type(amount_gold) is int and all(type(c) is int for _, c in claims), "pro rata takes int gold")
    check(amount_gold >= 0, "pro rata of a negative amount")
    check(all(c >= 0 for _, c in claims), "negative claim")
    keys = [k for k, _ in claims]
    check(len(set(keys)) == len(keys), "duplicate recipient in pro rata")
    total = sum(c for _, c in claims)
    if total <= amount_gold:
        return {k: c for k, c in claims}
    result = {k: amount_gold * c // total for k, c in claims}
    left = amount_gold - sum(result.values())
    while left > 0:
        progressed = False
        for k, c in claims:
            if left == 0:
                break
            if result[k] < c:
                result[k] += 1
                left -= 1
                progressed = True
        check(progressed, "pro rata cannot place the remainder")
    check(sum(result.values()) == amount_gold, "pro rata does not add up")
    return result
