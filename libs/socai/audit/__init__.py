"""The auditor: replay hands from their events and reconcile them with the ledger.

``replay_hand(events) -> Settlement`` is the public entry point (DESIGN.md "Public Python
API"). It lives in ``socai.settle`` (settlement posts hands through it), and is re-exported
here where DESIGN.md lists it, so there is exactly one implementation of "what does this
hand pay".
"""

from socai.settle.replay import REASONS, ReplayError, ReplayResult, replay_hand

__all__ = ["REASONS", "ReplayError", "ReplayResult", "replay_hand"]
