"""Pots and side pots from each seat's contributions, and awarding them.

The seed's rule (RULES.md 1.3, 3.3): a winner takes from each other player at most what
the winner put in. That is the standard layering: one pot per distinct contribution level
of the players still in the hand; folded players' chips stay in the pots they reached.
Chips above the highest contribution of any live player were never matched (an uncalled
bet, or a bettor who then left) and go back to whoever put them in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from socai.errors import check
from socai.money import split_evenly
from socai.rules.base import SettlementBuilder, match_flows


@dataclass(frozen=True, slots=True)
class Pot:
    """One layer: ``amount_gold`` from ``shares`` (seat → chips in this layer), winnable by
    ``eligible`` (the live seats that matched the layer). No eligible seat means the layer
    was never matched and returns to its contributors."""

    amount_gold: int
    shares: Mapping[int, int]
    eligible: tuple[int, ...]


def build_pots(contributions: Mapping[int, int], live: Sequence[int]) -> list[Pot]:
    """Layer ``contributions`` (seat → total chips put in) into a main pot and side pots.

    ``live`` are the seats still contesting (not folded), in any order; eligibility lists
    keep the order of ``live``.
    """
    check(all(v >= 0 for v in contributions.values()), "negative contribution")
    check(len(set(live)) == len(live), "a live seat is listed twice")
    levels = sorted({contributions.get(s, 0) for s in live if contributions.get(s, 0) > 0})
    top = max(contributions.values(), default=0)
    if not levels or levels[-1] < top:
        levels.append(top)
    pots: list[Pot] = []
    below = 0
    for level in levels:
        shares = {}
        for seat, put in contributions.items():
            layer = min(put, level) - min(put, below)
            if layer > 0:
                shares[seat] = layer
        eligible = tuple(s for s in live if contributions.get(s, 0) >= level)
        amount = sum(shares.values())
        if amount > 0:
            pots.append(Pot(amount, shares, eligible))
        below = level
    check(sum(p.amount_gold for p in pots) == sum(contributions.values()), "pots lose chips")
    return pots


def award_pots(
    builder: SettlementBuilder,
    pots: Sequence[Pot],
    winners_of: Callable[[tuple[int, ...]], Sequence[int]],
    payout_order: Sequence[int],
) -> dict[int, int]:
    """Record the transfers that award each pot; returns seat → gold won (gross).

    ``winners_of(eligible)`` returns the seats with the best hand among ``eligible`` (a
    one-seat tuple needs no comparison). Split pots give the odd chips one at a time in
    ``payout_order`` (first seat after the dealer, the dealer last). Each pot is split on
    its own (RULES.md HE-6). Reasons: ``pot`` for the main pot, ``side_pot`` for the others,
    ``uncalled`` for unmatched chips returned.
    """
    won: dict[int, int] = {}
    main_done = False
    position = {s: i for i, s in enumerate(payout_order)}
    account = builder.account
    for pot in pots:
        shares = pot.shares
        if not pot.eligible:
            recipients = dict(shares)
            reason = "uncalled"
        else:
            eligible = pot.eligible
            winners = winners_of(eligible) if len(eligible) > 1 else eligible
            check(len(winners) > 0 and all(w in eligible and w in position for w in winners), "bad pot winners")
            recipients = split_evenly(pot.amount_gold, sorted(winners, key=position.__getitem__))
            reason = "side_pot" if main_done else "pot"
            main_done = True
        payers = []
        receivers = []
        for seat in sorted(shares.keys() | recipients.keys(), key=lambda s: position.get(s, len(position) + s)):
            got = recipients.get(seat, 0)
            if got:
                won[seat] = won.get(seat, 0) + got
            net = got - shares.get(seat, 0)
            if net < 0:
                payers.append((account(seat), -net))
            elif net > 0:
                receivers.append((account(seat), net))
        for src, dst, amount in match_flows(payers, receivers):
            builder.pay(src, dst, amount, reason)
    return won
