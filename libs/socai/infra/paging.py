"""What every list call's page tokens share."""

from __future__ import annotations

import hashlib


def filters_of(*filters: object) -> str:
    """The short fingerprint of a list call's filters that its page tokens carry: a token
    used with other filters than the call that issued it is refused (BAD_PAGE_TOKEN)
    instead of paging silently through another list."""
    text = "\x1f".join(str(f) for f in filters)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
