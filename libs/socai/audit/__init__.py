"""The auditor: replay hands from their events and reconcile them with the ledger.

``replay_hand(events) -> Settlement`` is the public entry point (DESIGN.md "Public Python
API"): settlement and ``socai audit`` both settle hands through it, so there is exactly one
implementation of "what does this hand pay".
"""

from socai.audit.replay import REASONS, ReplayError, ReplayResult, replay_hand

# ``socai.audit.replay`` stays the module; its ``replay(events) -> ReplayResult`` gives the
# settlement with what was verified on the way.
__all__ = ["REASONS", "ReplayError", "ReplayResult", "replay_hand"]
