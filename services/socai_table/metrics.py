"""Prometheus series of the table service."""

from prometheus_client import Counter, Gauge

from socai.infra.leases import LeaseMetrics

EVENTS_PUBLISHED = Counter("socai_events_published_total", "Events appended to JetStream", ["game", "type"])
HANDS_STARTED = Counter("socai_table_hands_started_total", "Hands started", ["game"])
HANDS_ENDED = Counter("socai_table_hands_ended_total", "Hands ended", ["game"])
ACTIONS = Counter("socai_table_actions_total", "Player actions accepted", ["game"])
TIMEOUTS = Counter("socai_table_timeouts_total", "Timers that ran out", ["game", "timer"])
TABLES = Gauge("socai_table_tables", "Open tables this instance runs (those of the partitions it holds)")
HEAL_FAILURES = Counter("socai_table_heal_failures_total", "Watchdog attempts to heal a table that failed")
QUARANTINED = Counter(
    "socai_table_quarantined_total", "Messages on a table's subjects its rebuild did not apply", ["reason"]
)
TABLES_BROKEN = Gauge("socai_table_tables_broken", "Tables of this instance that could not be loaded at start")
CASHOUTS_PENDING = Gauge("socai_table_cashouts_pending", "Cash-outs waiting for settlement")
ESCROW_MISMATCH = Counter(
    "socai_table_escrow_mismatch_total", "Cash-outs where the ledger escrow differs from the table's stack"
)
FORWARDED = Counter(
    "socai_table_forwarded_total", "Calls forwarded to the instance holding the table, by outcome", ["method", "code"]
)

# The table partitions' leases: held, unheld (the alert), handovers, losses by reason.
LEASES = LeaseMetrics("socai_table")
BETS_REFUSED = Counter(
    "socai_table_bets_refused_total",
    "Bets refused because the house bank cannot cover them (BANKER_CAPACITY from the ledger)",
    ["game", "reason"],
)
