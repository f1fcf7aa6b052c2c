"""Fault injection against real processes under bot load (``make chaos``; issue 17)."""
