"""socai's table service for a game backend: a typed client (``TableClient``, ``Seat``,
``Turn``), the moves (``socai.client.moves``) and its errors (``TableError``).

It depends on the generated protobuf code and grpc only (a contract in pyproject.toml), so
that it is what a client outside this repository would write. The API guide is
docs/api/README.md, one page per game beside it.
"""

from socai.client.client import LEAVE_AFTER_HAND, LEAVE_NOW, Leaving, Seat, TableClient, Turn, Update
from socai.client.errors import RETRYABLE_STATUSES, TableError

__all__ = [
    "LEAVE_AFTER_HAND",
    "LEAVE_NOW",
    "RETRYABLE_STATUSES",
    "Leaving",
    "Seat",
    "TableClient",
    "TableError",
    "Turn",
    "Update",
]
