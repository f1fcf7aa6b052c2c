"""Pots and side pots from each seat's contributions, and awarding them.

The seed's rule (RULES.md 1.3, 3.3): a winner takes from each other player at most what
the winner put in. That is the standard layering: one pot per distinct contribution level
of the players still in the hand; folded players' chips stay in the pots they reached.
Chips above the highest contribution of any live player were never matched (an uncalled
bet, or a bettor who then left) and go back to whoever put them in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from socai.errors import check
from socai.money import split_evenly
from socai.rules.base import SettlementBuilder, Transfer, match_flows


@dataclass(frozen=True, slots=True, init=False)
class Pot:
    """One layer: ``amount_gold`` from ``shares`` (seat → chips in this layer), winnable by
    ``eligible`` (the live seats that matched the layer). No eligible seat means the layer
    was never matched and returns to its contributors."""

    amount_gold: int
    shares: Mapping[int, int]
    eligible: tuple[int, ...]

    # Written out: compiled, it runs natively (the generated one stays interpreted; socai.cards.Card).
    def __init__(self, amount_gold: int, shares: Mapping[int, int], eligible: tuple[int, ...]) -> None:
        object.__setattr__(self, "amount_gold", amount_gold)
        object.__setattr__(self, "shares", shares)
        object.__setattr__(self, "eligible", eligible)


def build_pots(contributions: Mapping[int, int], live: Sequence[int]) -> list[Pot]:
    """Layer ``contributions`` (seat → total chips put in) into a main pot and side pots.

    ``live`` are the seats still contesting (not folded), in any order; eligibility lists
    keep the order of ``live``.
    """
    puts = contributions.values()
    # min/max with ``default=`` take CPython's slower keyword path; testing ``puts`` for
    # emptiness first gives the same answers.
    check(not puts or min(puts) >= 0, "negative contribution")
    check(len(set(live)) == len(live), "a live seat is listed twice")
    # Every hand of every audit comes through here, so each layer is one comprehension.
    get = contributions.get
    live_puts = [(s, get(s, 0)) for s in live]
    levels = sorted({put for _, put in live_puts if put > 0})
    top = max(puts) if puts else 0
    if not levels or levels[-1] < top:
        levels.append(top)
    items = contributions.items()
    pots: list[Pot] = []
    below = 0
    total = 0
    for level in levels:
        # A seat has chips in this layer when it put in more than the layer below; they
        # are capped at the layer's level (levels rise strictly, so the share is positive).
        shares = {seat: (level if put > level else put) - below for seat, put in items if put > below}
        amount = sum(shares.values())
        if amount > 0:
            eligible = tuple([s for s, put in live_puts if put >= level])
            pots.append(Pot(amount, shares, eligible))
            total += amount
        below = level
    check(total == sum(puts), "pots lose chips")
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
    its own (RULES.md HE-6). Reasons: ``pot`` for the main pot, ``side_pot`` for the others;
    unmatched chips go back to whoever put them in, which moves no gold (no transfer).
    """
    won: dict[int, int] = {}
    main_done = False
    position = {seat: place for place, seat in enumerate(payout_order)}
    after_all = len(position)

    def place(seat: int) -> int:
        # Seats outside ``payout_order`` (a contributor who is not dealt in) come last.
        return position.get(seat, after_all + seat)

    # When every seat is listed once in ``payout_order`` (the usual case), walking that
    # order visits a pot's seats by place without sorting them; a seat the pot does not
    # involve gets and puts nothing there, which records nothing.
    walk = payout_order if after_all == len(payout_order) else None
    account = builder.escrow_of
    for pot in pots:
        shares = pot.shares
        eligible = pot.eligible
        if not eligible:
            recipients = dict(shares)
            reason = "uncalled"
        else:
            amount = pot.amount_gold
            winners = winners_of(eligible) if len(eligible) > 1 else eligible
            if len(winners) == 1:
                # One winner takes the pot: what split_evenly gives, without sorting a
                # single seat (most pots on the replay hot path have one winner).
                winner = winners[0]
                check(winner in eligible and winner in position, "bad pot winners")
                check(type(amount) is int and amount >= 0, "a pot is int gold")
                recipients = {winner: amount}
            else:
                check(len(winners) > 0 and all(w in eligible and w in position for w in winners), "bad pot winners")
                recipients = split_evenly(amount, sorted(winners, key=position.__getitem__))
            reason = "side_pot" if main_done else "pot"
            main_done = True
        payers = []
        receivers = []
        owed_gold = 0
        # Winners are in ``position`` (checked above) and an unmatched layer goes back to its
        # contributors, so the pot's seats are all placed when its contributors are.
        if walk is not None and shares.keys() <= position.keys():
            order: Iterable[int] = walk
        else:
            involved = shares.keys() | recipients.keys()
            order = sorted(involved, key=position.__getitem__ if involved <= position.keys() else place)
        get_got = recipients.get
        get_put = shares.get
        for seat in order:
            got = get_got(seat, 0)
            put = get_put(seat, 0)
            if got:
                won[seat] = won.get(seat, 0) + got
            if got < put:
                payers.append((account[seat], put - got))
                owed_gold += put - got
            elif got > put:
                receivers.append((account[seat], got - put))
        if len(receivers) == 1:
            # One receiver (a pot with one winner): every payer pays it all it owes, which
            # is what ``match_flows`` gives. Every amount here is positive, so of its checks
            # only the balance can fail.
            receiver, due_gold = receivers[0]
            check(owed_gold == due_gold, "flows do not balance")
            flows = [(payer, receiver, owed) for payer, owed in payers if payer != receiver]
        else:
            flows = match_flows(payers, receivers)
        builder.pay_flows(flows, reason)
    return won


def relabel_losses(
    transfers: Sequence[Transfer], first_gold: Mapping[str, int], reason: str, of_reasons: Iterable[str]
) -> list[Transfer]:
    """``transfers`` with the first ``first_gold[account]`` gold each account lost through
    transfers of ``of_reasons`` labelled ``reason`` instead (in transfer order), a transfer
    split in two where that amount ends inside it.

    How a game names part of what went into the pots after ``award_pots`` (which knows pots,
    not why chips went in): a player's ante, or what a player who left had bet. Amounts and
    accounts are untouched, so the ledger entries are the same; only the reasons say more.
    """
    of = frozenset(of_reasons)
    left = dict(first_gold)
    out: list[Transfer] = []
    for t in transfers:
        budget = left.get(t.from_account, 0)
        if budget <= 0 or t.reason not in of:
            out.append(t)
            continue
        part = min(budget, t.amount_gold)
        left[t.from_account] = budget - part
        out.append(Transfer(t.from_account, t.to_account, part, reason, t.detail))
        if part < t.amount_gold:
            out.append(Transfer(t.from_account, t.to_account, t.amount_gold - part, t.reason, t.detail))
    return out
