"""The table core's decisions about the hand in play, as plain values: a player's act, what
the table drives without a player (deals, dice, the end), and the hand's timer.

``Shell`` performs the decisions the way ``Table._perform`` does, with the log a list and
the hand's rules state, deck and act keys in memory (the shell's ``Hand``), so that the
property test can play random hands of legal acts and timeouts through ``decide`` and
``evolve`` alone and check what must always hold: every hand ends, and each seat's stack
moves by its net and nothing else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from socai import accounts, errors, fairness
from socai.cards import deck as canonical_deck
from socai.events.model import (
    ActionKind,
    BetAction,
    CardsDealt,
    Event,
    HandEnded,
    HandStarted,
    PlayerSeated,
    PlayerStoodUp,
    SeatInfo,
    TimerExpired,
)
from socai.rules import base as kit
from socai.rules import registry
from socai_table import core
from socai_table.model import TableConfig, facts_id_of

TABLE = "t1"
AT = datetime(2026, 1, 1, tzinfo=UTC)
SEED = bytes(range(32))


def config_of(game: str, seats_max: int = 4) -> TableConfig:
    return TableConfig(
        game=game, stake_gold=10, fee_bps=None, seats_max=seats_max, buy_in_min_gold=100, buy_in_max_gold=2_000
    ).normalized()


@dataclass
class Shell:
    """The table's shell without I/O: the core's state, the log, the hand in play."""

    state: core.TableState
    stream_seq: int = 0
    log: list[Event] = field(default_factory=list)
    hand: core.HandNow | None = None
    hand_seq: int = 0
    act_keys: dict[tuple[str, str], tuple[core.ActResult, Any]] = field(default_factory=dict)
    timer: str = ""  # the hand the armed timer is for ("" none armed)
    timeouts: int = 0
    holds: list[core.HoldHouse] = field(default_factory=list)
    hands_ended: int = 0
    # Each hand ended: its HandStarted, its settlement, the table just before and just after it.
    settled: list[tuple[HandStarted, kit.Settlement, core.TableState, core.TableState]] = field(default_factory=list)

    started: HandStarted | None = None

    @classmethod
    def seated(cls, game: str, *stacks: int) -> Shell:
        shell = cls(core.initial(TABLE, config_of(game)))
        for seat, stack in enumerate(stacks):
            shell.fact(PlayerSeated(seat, f"p{seat}", stack, "", f"tx-p{seat}"))
        return shell

    # --- the log ---------------------------------------------------------------------------

    def fact(self, body: Any) -> None:
        self.append(Event(TABLE, facts_id_of(TABLE), self.state.facts_seq + 1, self.state.config.game, AT, body))

    def append(self, event: Event) -> None:
        self.stream_seq += 1
        self.log.append(event)
        self.state = core.evolve(self.state, event, self.stream_seq)

    # --- decide, then perform ----------------------------------------------------------------

    def run(self, command: core.Command) -> Any:
        decision = core.decide(self.state, command)
        assert not decision.needs, decision
        return self.perform(decision)

    def perform(self, decision: core.Decision) -> Any:
        acted = None
        for effect in decision.effects:
            if isinstance(effect, core.HoldHouse):
                hand = self.hand
                assert hand is not None and effect.held_gold == hand.held_gold < effect.exposure_gold
                self.hand = dataclasses.replace(hand, held_gold=effect.exposure_gold)
                self.holds.append(effect)
            elif isinstance(effect, core.AppendHand):
                hand = self.hand
                assert hand is not None
                exposure = kit.house_exposure(self.state.module, effect.rules_after) if effect.rules_after else 0
                assert exposure <= hand.held_gold, "an event that raises the house's exposure is held first"
                self.hand_seq += 1
                self.append(Event(TABLE, hand.hand_id, self.hand_seq, self.state.config.game, AT, effect.body))
                dealt = len(effect.body.cards) if isinstance(effect.body, CardsDealt) else 0
                self.hand = dataclasses.replace(hand, rules=effect.rules_after, next_card=hand.next_card + dealt)
            elif isinstance(effect, core.RecordAct):
                event = self.log[-1]
                acted = core.ActResult(event.seq, event.event_id, self.stream_seq)
                self.act_keys[(effect.player_id, effect.key)] = (acted, effect.body)
            elif isinstance(effect, core.Advance):
                self.perform(core.decide(self.state, core.Drive(self.hand)))
            elif isinstance(effect, core.ArmTimer):
                self.timer = effect.hand_id if effect.timeout_s else ""
            elif isinstance(effect, core.HandOver):
                self.hand_over()
            elif isinstance(effect, core.CountTimeout):
                self.timeouts += 1
            elif isinstance(effect, core.PlayHand):
                self.play_hand(effect)
            elif isinstance(effect, core.StandUp):
                seat = self.state.seats[effect.seat]
                self.fact(PlayerStoodUp(seat.seat, seat.player_id, seat.stack_gold))
            elif isinstance(effect, core.Then):
                self.run(effect.command)
            else:
                assert isinstance(effect, core.ScheduleAutostart), effect
        if decision.refusal is not None:
            raise decision.refusal
        if decision.failure is not None:
            raise decision.failure
        answer = decision.answer
        if isinstance(answer, core.ActAnswer) and answer.result is None:
            return core.ActAnswer(acted, answer.replayed)
        return answer

    def play_hand(self, play: core.PlayHand) -> None:
        """``Table._play_hand``: HandStarted at the stacks now, the rules' first state, the
        seed's shuffle, then the hand driven on."""
        s, module = self.state, self.state.module
        stacks = {n: s.seats[n].stack_gold for n in play.seats}
        previous = self.settled[-1][0] if self.settled else None
        dealer = kit.choose_dealer(
            module, None, previous.dealer_seat if previous else None, list(play.seats), s.config.seats_max, -1, stacks
        )
        started = HandStarted(
            table_id=TABLE,
            hand_id=play.hand_id,
            game=s.config.game,
            hand_number=play.number,
            stake_gold=s.config.stake_gold,
            fee_bps=s.config.fee,
            seats_max=s.config.seats_max,
            seats=tuple(SeatInfo(n, s.seats[n].player_id, stacks[n]) for n in play.seats),
            dealer_seat=dealer,
            deck_commitment=fairness.commitment(SEED),
            owner_seat=play.owner_seat,
            pot_gold=s.pot_gold,
            options=kit.full_options(module, s.config.options),
            rules_version=kit.rules_version(module),
        )
        deck = fairness.shuffle(SEED, canonical_deck(s.config.game)) if module.SPEC.deck else []
        self.started = started
        self.hand = core.HandNow(play.hand_id, module.initial_state(started), deck, 0, SEED)
        self.hand_seq = 0
        self.act_keys = {}
        self.perform(core.Decision((core.AppendHand(started, self.hand.rules),)))
        self.perform(core.Decision((core.Advance(),)))

    def hand_over(self) -> None:
        """``Table._after_hand``: the settlement onto the seats, then what follows a hand."""
        hand, started = self.hand, self.started
        assert hand is not None and started is not None
        settlement = self.state.module.settle(hand.rules)
        before = self.state
        self.state = core.evolve(self.state, core.HandSettled(hand.hand_id, settlement.nets, settlement.pot_carry_gold))
        self.settled.append((started, settlement, before, self.state))
        self.hand, self.timer = None, ""
        self.hands_ended += 1
        self.run(core.AfterHand())

    # --- what a client and the clock do ------------------------------------------------------

    def act(self, player_id: str, body: Any, key: str, seat_no: int = 0, hand_id: str = "") -> core.Decision:
        hand = self.hand
        wanted = hand_id or (hand.hand_id if hand is not None else f"{TABLE}-h1")
        return core.decide(
            self.state,
            core.Act(player_id, wanted, seat_no, body, key, hand, self.act_keys.get((player_id, key))),
        )

    def fire(self) -> core.Decision:
        return core.decide(self.state, core.TimerFired(self.timer, True, True, self.hand))


def holdem_hand() -> Shell:
    """Two players at Hold'em, the hole cards dealt: the hand waits for the first to act."""
    shell = Shell.seated("holdem", 500, 700)
    shell.run(core.StartHand())
    assert shell.hand is not None and shell.timer == shell.hand.hand_id
    return shell


def move(shell: Shell, seat: int, kind: ActionKind) -> BetAction:
    """``seat``'s legal move of ``kind`` now (the rules' candidate: a call's exact amount)."""
    assert shell.hand is not None
    return next(m for m in shell.state.module.candidate_actions(shell.hand.rules, seat) if m.kind == kind)


def to_act(shell: Shell) -> int:
    assert shell.hand is not None
    (seat,) = shell.state.module.pending(shell.hand.rules).to_act
    return int(seat)


# --- acts ---------------------------------------------------------------------------------------


def test_an_act_appends_its_event_under_its_key_remembers_it_then_drives_the_hand_on():
    shell = holdem_hand()
    seat = to_act(shell)
    played = move(shell, seat, ActionKind.CALL)
    decision = shell.act(f"p{seat}", dataclasses.replace(played, seat=0), "k1")  # seat 0: "mine"
    assert shell.hand is not None
    after = shell.state.module.apply(shell.hand.rules, played)
    assert decision.effects == (
        core.AppendHand(played, after, "k1", f"p{seat}"),
        core.RecordAct(f"p{seat}", "k1", played),
        core.Advance(),
    )
    answer = shell.perform(decision)
    written = next(e for e in shell.log if e.body == played)
    assert answer == core.ActAnswer(shell.act_keys[(f"p{seat}", "k1")][0], replayed=False)
    assert answer.result is not None and (answer.result.seq, answer.result.event_id) == (written.seq, written.event_id)
    # The same key again, the same decision: the first result, nothing written.
    written = len(shell.log)
    again = shell.act(f"p{seat}", played, "k1")
    assert again == core.Decision(answer=core.ActAnswer(answer.result, replayed=True))
    assert shell.perform(again).result == answer.result and len(shell.log) == written
    # The same key for another decision.
    reused = shell.act(f"p{seat}", BetAction(0, ActionKind.FOLD, 0), "k1")
    assert reused.effects == () and reused.refusal is not None and reused.refusal.code == "IDEMPOTENCY_KEY_REUSED"


def test_an_act_out_of_turn_is_refused_with_the_rules_reason_and_changes_nothing():
    shell = holdem_hand()
    other = 1 - to_act(shell)
    before = shell.state
    call = dataclasses.replace(move(shell, to_act(shell), ActionKind.CALL), seat=0)
    decision = shell.act(f"p{other}", call, "k1")
    assert decision.effects == () and decision.answer is None
    refusal = decision.refusal
    assert isinstance(refusal, errors.RuleViolation) and refusal.code == "NOT_YOUR_TURN"
    assert shell.hand is not None
    rule = kit.refusal_rule(shell.state.module, "NOT_YOUR_TURN")
    assert refusal.details == {"seat": str(other), "hand_id": shell.hand.hand_id, "rule": rule}
    with pytest.raises(errors.RuleViolation):
        shell.perform(decision)
    assert shell.state is before and not shell.act_keys
    # ValidateAction says the same without playing it.
    validated = core.act_refusal(before, shell.hand, f"p{other}", shell.hand.hand_id, 0, call)
    assert isinstance(validated, errors.RuleViolation) and validated.details == refusal.details


def test_an_illegal_amount_is_refused_by_the_rules_with_the_seat_the_hand_and_the_rule():
    shell = holdem_hand()
    seat = to_act(shell)
    decision = shell.act(f"p{seat}", BetAction(seat, ActionKind.RAISE, 10**9), "k1")
    assert decision.effects == () and isinstance(decision.refusal, errors.RuleViolation)
    assert decision.refusal.details["seat"] == str(seat) and decision.refusal.details["rule"]


@pytest.mark.parametrize(
    ("player", "seat_no", "seat_in_action", "code"),
    [("p1", 3, 0, "NOT_YOUR_SEAT"), ("stranger", 0, 0, "NOT_YOUR_SEAT"), ("p1", 0, 0 + 2, "SEAT_MISMATCH")],
)
def test_an_act_for_another_seat_is_refused(player: str, seat_no: int, seat_in_action: int, code: str):
    shell = holdem_hand()
    decision = shell.act(player, BetAction(seat_in_action, ActionKind.FOLD, 0), "k1", seat_no)
    assert decision.effects == () and decision.refusal is not None and decision.refusal.code == code


@pytest.mark.parametrize("key", ["", "k" * (core.ACT_KEY_MAX_CHARS + 1)])
def test_an_act_key_that_is_empty_or_too_long_is_refused(key: str):
    decision = holdem_hand().act("p0", BetAction(0, ActionKind.FOLD, 0), key)
    assert decision.effects == () and decision.refusal is not None
    assert decision.refusal.code == "BAD_IDEMPOTENCY_KEY" and core.act_key_refusal(key) is not None


def test_an_act_naming_no_hand_in_play_reads_its_ended_hand_for_a_retry_else_is_refused():
    shell = Shell.seated("holdem", 500, 700)
    fold = BetAction(0, ActionKind.FOLD, 0)
    decision = shell.act("p0", fold, "k1", hand_id=f"{TABLE}-h1")
    assert decision.needs == core.NEEDS_ENDED_HAND and decision.effects == ()
    assert decision.refusal is not None and decision.refusal.code == "NO_HAND_IN_PLAY"
    refused = core.act_after_ended_hand(decision, None, fold)
    assert refused.refusal is decision.refusal and refused.effects == ()
    first = (core.ActResult(3, "e3", 40), BetAction(0, ActionKind.FOLD, 0))
    assert core.act_after_ended_hand(decision, first, fold) == core.Decision(answer=core.ActAnswer(first[0], True))
    shell = holdem_hand()
    stale = shell.act("p0", fold, "k1", hand_id=f"{TABLE}-h0")
    assert stale.needs == core.NEEDS_ENDED_HAND and stale.refusal is not None and stale.refusal.code == "STALE_HAND"


def test_a_retry_of_the_last_hands_act_answers_its_first_result_from_memory():
    shell = holdem_hand()
    first = (core.ActResult(4, "e4", 41), BetAction(1, ActionKind.FOLD, 0))
    act = core.Act("p1", f"{TABLE}-h0", 0, BetAction(0, ActionKind.FOLD, 0), "k1", shell.hand, first)
    assert core.decide(shell.state, act) == core.Decision(answer=core.ActAnswer(first[0], True))


# --- what the table drives, and its timer -----------------------------------------------------------


def test_a_hand_is_driven_to_its_first_decision_and_its_timer_armed():
    shell = Shell.seated("holdem", 500, 700)
    shell.run(core.StartHand())
    hand = shell.hand
    assert hand is not None
    assert [type(e.body) for e in shell.log if e.hand_id == hand.hand_id] == [HandStarted, CardsDealt]
    assert hand.next_card == 4  # two hole cards each
    pending = shell.state.module.pending(hand.rules)
    timeout_s = core.timeout_s_for(pending, shell.state.config)
    assert timeout_s > 0 and shell.timer == hand.hand_id
    assert core.decide(shell.state, core.Drive(hand)).effects == (core.ArmTimer(hand.hand_id, timeout_s),)
    assert core.decide(shell.state, core.Drive(None)) == core.Decision()


def test_a_closing_hand_ends_at_once_revealing_its_seed_and_is_not_counted():
    state = Shell.seated("holdem", 500).state
    closing = core.HandNow(f"{TABLE}-h1", None, (), 0, SEED, closing=True)
    assert core.decide(state, core.Drive(closing)).effects == (
        core.AppendHand(HandEnded(SEED.hex()), None),
        core.HandOver(counted=False),
    )


def test_a_timer_writes_an_expiry_with_the_rules_move_for_the_seat_that_owes_one_then_drives_on():
    shell = holdem_hand()
    seat = to_act(shell)
    assert shell.hand is not None
    rules = shell.hand.rules
    timer = shell.state.module.pending(rules).timer
    expired = core.timer_expired(shell.state.module, rules, seat, timer)
    assert expired.seat == seat and expired.automatic == "fold"  # facing the big blind
    assert shell.fire().effects == (
        core.AppendHand(expired, shell.state.module.apply(rules, expired)),
        core.CountTimeout("turn"),
        core.Advance(),
    )
    shell.perform(shell.fire())
    assert shell.timeouts == 1 and isinstance(shell.log[-1].body, (TimerExpired, CardsDealt, HandEnded))


def test_a_stale_timer_does_nothing():
    """A timer that another has replaced, a timer of a hand no longer in play, a table
    behind its log: nothing is written, as the table's timer did before the core."""
    shell = holdem_hand()
    hand = shell.hand
    assert hand is not None
    for fired in (
        core.TimerFired(hand.hand_id, False, True, hand),
        core.TimerFired(hand.hand_id, True, False, hand),
        core.TimerFired(f"{TABLE}-h0", True, True, hand),
        core.TimerFired(hand.hand_id, True, True, None),
    ):
        assert core.decide(shell.state, fired) == core.Decision()


def test_a_bug_met_while_driving_is_raised_after_the_events_before_it():
    """Both players all in before the flop: the table deals the flop, the turn and the
    river by itself. With the deck cut short after the flop (a bug: the deck ran out), the
    flop is still written, then the invariant's failure raised, as when each deal was
    applied just before its append."""
    shell = holdem_hand()
    module, hand = shell.state.module, shell.hand
    assert hand is not None
    rules = hand.rules
    for kind in (ActionKind.ALL_IN, ActionKind.CALL):
        (seat,) = module.pending(rules).to_act
        rules = module.apply(rules, next(m for m in module.candidate_actions(rules, seat) if m.kind == kind))
    assert not module.pending(rules).to_act
    whole = core.decide(shell.state, core.Drive(core.HandNow(hand.hand_id, rules, hand.deck, hand.next_card, SEED)))
    dealt = [e.body for e in whole.effects if isinstance(e, core.AppendHand)]
    assert [type(b) for b in dealt] == [CardsDealt, CardsDealt, CardsDealt, HandEnded]
    assert isinstance(whole.effects[-1], core.HandOver) and whole.refusal is whole.failure is None
    short = core.HandNow(hand.hand_id, rules, hand.deck[: hand.next_card + 3], hand.next_card, SEED)
    decision = core.decide(shell.state, core.Drive(short))
    assert [type(e.body) for e in decision.effects if isinstance(e, core.AppendHand)] == [CardsDealt]
    assert isinstance(decision.failure, AssertionError) and decision.refusal is None


def test_a_bet_against_the_house_is_held_in_the_ledger_before_it_is_appended():
    """Tài Xỉu against the system: the house bank holds the round's new worst case before
    each bet that raises it, never again for what it already holds."""
    shell = Shell.seated("taixiu", 1_000, 1_000)
    shell.run(core.StartHand())
    hand = shell.hand
    assert hand is not None and hand.held_gold == 0
    module = shell.state.module
    seat = module.pending(hand.rules).to_act[0]
    wager = module.candidate_actions(hand.rules, seat)[0]
    after = module.apply(hand.rules, wager)
    exposure = kit.house_exposure(module, after)
    assert exposure > 0
    decision = shell.act(shell.state.seats[seat].player_id, wager, "k1")
    assert decision.effects[:2] == (
        core.HoldHouse(hand.hand_id, exposure, 0),
        core.AppendHand(wager, after, "k1", shell.state.seats[seat].player_id),
    )
    shell.perform(decision)
    assert shell.hand is not None and shell.hand.held_gold == exposure
    # The same worst case again (held already): no hold before the event.
    assert core.hold_for(module, hand.hand_id, exposure, after) is None
    assert core.hold_for(module, hand.hand_id, exposure - 1, after) == core.HoldHouse(
        hand.hand_id, exposure, exposure - 1
    )


# --- property: random legal acts and timeouts ----------------------------------------------------

GAMES = registry.available()  # every game, a new one as soon as it is registered
STEPS_MAX = 600  # acts and timeouts in one hand, far above any game's longest


def play(shell: Shell, choices: list[int], hands: int) -> None:
    """Play up to ``hands`` hands: each step a legal candidate move of a seat to act (one
    draw in eight sent by another player instead: refused, or the other's own move in a
    game where all decide at once), or (one draw in four, and always once ``choices`` run
    out) the timer running out."""
    module = shell.state.module
    draws = iter(choices)
    keys = 0
    for _ in range(hands):
        ended = shell.hands_ended  # a hand may end as it starts (every stack all in on its antes)
        try:
            shell.run(core.StartHand())
        except errors.SocaiError as exc:
            assert exc.code == "NOT_ENOUGH_PLAYERS"
            return
        for _ in range(STEPS_MAX):
            hand = shell.hand
            if hand is None:
                break
            assert shell.timer == hand.hand_id, "a hand waiting for a decision has its timer armed"
            pending = module.pending(hand.rules)
            draw = next(draws, None)
            if draw is None or draw % 4 == 0:
                shell.perform(shell.fire())
                continue
            seat = pending.to_act[draw % len(pending.to_act)]
            moves = list(module.candidate_actions(hand.rules, seat))
            if not moves:
                shell.perform(shell.fire())
                continue
            body = moves[(draw // 4) % len(moves)]
            player = shell.state.seats[seat].player_id
            others = [s.player_id for s in shell.state.seats.values() if s.seat != seat]
            if draw % 8 == 1 and others:  # the move sent by another player, for their own seat (0: "mine")
                player = others[draw % len(others)]
                body = dataclasses.replace(body, seat=0) if hasattr(body, "seat") else body
            keys += 1
            decision = shell.act(player, body, f"k{keys}")
            if decision.refusal is not None:
                assert decision.effects == () and decision.answer is None, "a refused act changes nothing"
                continue
            before = len(shell.log)
            answer = shell.perform(decision)
            assert isinstance(answer, core.ActAnswer) and not answer.replayed and len(shell.log) > before
        assert shell.hands_ended == ended + 1, f"hand {shell.state.hands_played} did not end"


def check_conserved(shell: Shell) -> None:
    """Each dealt seat's stack moved by its net and the pot to what the settlement left in
    it; what left the stacks went to the pot or an account of the house."""
    for started, settlement, before, after in shell.settled:
        brought = {info.seat: info.stack_gold for info in started.seats}
        assert set(settlement.nets) == set(brought)
        for seat, stack in brought.items():
            assert after.seats[seat].stack_gold == stack + settlement.nets[seat] >= 0
        entries = settlement.entries()
        seat_accounts = set(settlement.seat_accounts.values())
        assert sum(settlement.nets.values()) + sum(v for a, v in entries.items() if a not in seat_accounts) == 0
        assert after.pot_gold == settlement.pot_carry_gold == before.pot_gold + entries.get(accounts.pot(TABLE), 0)


@pytest.mark.parametrize("game", GAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    stacks=st.lists(st.integers(100, 2_000), min_size=2, max_size=4),
    choices=st.lists(st.integers(0, 10**6), min_size=10, max_size=300),
)
def test_random_acts_and_timeouts_end_every_hand_and_move_each_stack_by_its_net(
    game: str, stacks: list[int], choices: list[int]
):
    shell = Shell.seated(game, *stacks[: config_of(game).seats_max])
    total = sum(s.stack_gold for s in shell.state.seats.values()) + shell.state.pot_gold
    play(shell, choices, hands=3)
    check_conserved(shell)
    gone = sum(
        v
        for _, settlement, _, _ in shell.settled
        for a, v in settlement.entries().items()
        if a not in set(settlement.seat_accounts.values()) and a != accounts.pot(TABLE)
    )
    stood_up = sum(e.body.cash_out_gold for e in shell.log if isinstance(e.body, PlayerStoodUp))
    at_table = sum(s.stack_gold for s in shell.state.seats.values()) + shell.state.pot_gold
    assert at_table + stood_up + gone == total, "gold appeared or vanished at the table"
