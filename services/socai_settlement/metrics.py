"""Prometheus metrics of the settlement service (served on ``metrics_port_base + 2``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from socai.infra.leases import LeaseMetrics

HANDS_SETTLED = Counter("socai_settlement_hands_settled_total", "Hands settled (stored for the first time)", ["game"])
DEAD_LETTERS = Counter("socai_settlement_dead_letters_total", "Hands dead-lettered, by reason", ["reason"])
DEAD_LETTERS_OPEN = Gauge("socai_settlement_dead_letters_open", "Dead-lettered hands not resolved yet")
HANDS_READ = Counter(
    "socai_settlement_hands_read_total",
    "Hands whose events came from the consumer cache or a read by subject",
    ["source"],
)
MESSAGES = Counter("socai_settlement_messages_total", "Stream messages handled, by kind", ["kind"])
IGNORED = Counter(
    "socai_settlement_ignored_messages_total",
    "Messages acked with no effect: not an Event on a settled hand, a second HandEnded, an event after settlement",
    ["kind"],
)
RECOVERED = Counter(
    "socai_settlement_recovered_hands_total",
    "HandEnded messages a stopped instance left unacknowledged, settled at start from the stream",
)
GIVEN_BACK = Counter(
    "socai_settlement_given_back_total",
    "HandEnded deliveries given back at a handover or a stop (not counted towards the poison limit)",
)
LAG = Gauge("socai_settlement_lag_messages", "Messages settlement's durables have not acked yet (every partition)")
PARTITION_LAG = Gauge(
    "socai_settlement_partition_lag_messages", "Messages a partition's durable has not acked yet", ["partition"]
)
PARTITIONS = Gauge("socai_settlement_partitions_running", "Partitions this instance runs a pipeline on")
PENDING = Gauge("socai_settlement_pending_messages", "Messages the durable consumer has not delivered yet")
LAST_SETTLED_SEQ = Gauge("socai_settlement_last_settled_stream_seq", "Stream sequence of the last settled HandEnded")
BATCH_SECONDS = Histogram(
    "socai_settlement_batch_seconds",
    "Time to settle one batch of hands",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

# Label children used per message, looked up once (``labels()`` costs a lock and a dict).
MESSAGES_EVENT = MESSAGES.labels("event")
MESSAGES_TABLE = MESSAGES.labels("table")
MESSAGES_HAND_ENDED = MESSAGES.labels("hand_ended")

# The partitions' leases: held, unheld (the alert), handovers, losses by reason.
LEASES = LeaseMetrics("socai_settlement")
