"""Long runs of bot load on a private stack (``make soak``; issue 17)."""
