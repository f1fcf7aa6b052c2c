"""How a finished hand is settled: replay its events through the rules engine
(``replay``) and name the ledger transaction that posts it (``keys``).

One implementation, driven by the settlement service (to post) and by the auditor (to
check what was posted): ``socai.settle.replay_hand`` is this package's ``replay_hand``.
"""

from socai.settle.replay import REASONS, ReplayError, ReplayResult, replay_hand

# ``socai.settle.replay`` stays the module; its ``replay(events) -> ReplayResult`` gives the
# settlement with what was verified on the way.
__all__ = ["REASONS", "ReplayError", "ReplayResult", "replay_hand"]
