"""NATS identities in tests: the harness's own, and each service's on the test's streams.

The tests' embedded nats-server (``tests/conftest.py``, one per pytest process) runs with
the users and permissions of deploy/ (``socai.infra.nats_auth``), plus the test harness's
unrestricted user: the ``nats_url`` fixture is the harness's URL, with which fixtures create
and delete the tests' streams, publish simulated hands and a stranger's forged messages, on
purpose. The services a test starts (``tests.support.services.running``, the settlement
``Harness``) connect as their own users instead, whose permissions name that test's own
streams, prefixes and P: ``identities(settings)`` adds the test's layout to the server's
configuration (a reload: a few milliseconds, connections kept) for as long as it is open.

On a server the tests did not start (``SOCAI_TEST_NATS_URL``, a container) there are no users
to be: every identity is the configured URL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from socai.infra.config import Settings
from socai.infra.nats_auth import TEST_HARNESS, Layout
from socai_cli.embedded import EmbeddedNats


class UsersServer:
    """A tests' nats-server and the layouts its users may touch now (each with how many
    open ``identities`` asked for it)."""

    def __init__(self, server: EmbeddedNats) -> None:
        self.server = server
        self._live: Counter[Layout] = Counter()

    @property
    def harness_url(self) -> str:
        return self.server.url_for(TEST_HARNESS)

    def url_for(self, user: str) -> str:
        return self.server.url_for(user)

    def add(self, layout: Layout) -> None:
        self._live[layout] += 1
        if self._live[layout] == 1:
            self._reload()

    def remove(self, layout: Layout) -> None:
        self._live[layout] -= 1
        if self._live[layout] <= 0:
            del self._live[layout]
            self._reload()

    def _reload(self) -> None:
        self.server.set_layouts(tuple(self._live) or (Layout(),))


_SERVERS: dict[str, UsersServer] = {}


def serve(server: EmbeddedNats) -> str:
    """Make ``server`` (started, with the test harness's user) the one ``identities`` adds
    layouts to; returns the harness's URL, the ``nats_url`` of the tests."""
    users = UsersServer(server)
    _SERVERS[users.harness_url] = users
    return users.harness_url


def forget(url: str) -> None:
    _SERVERS.pop(url, None)


def users_server(nats_url: str) -> UsersServer | None:
    """The tests' server whose harness URL is ``nats_url`` (None: a server without users)."""
    return _SERVERS.get(nats_url)


@dataclass(frozen=True)
class Identities:
    """Each NATS user's URL for one test's streams."""

    url_for: Callable[[str], str]
    with_users: bool  # False: the server has no users, every URL is the configured one


@contextmanager
def identities(settings: Settings, layout: Layout | None = None) -> Iterator[Identities]:
    """The URL of each user (``table``, ``settlement``, ``ledger``, ``provisioner``,
    ``auditor``) whose permissions name the streams of ``settings`` (``layout``: other names
    for the durable or the buckets), for as long as the block runs."""
    server = users_server(settings.nats_url or "")
    if server is None:
        configured = settings.nats_url or settings.effective_nats_url
        yield Identities(lambda _user: configured, with_users=False)
        return
    layout = layout or Layout.of(settings)
    server.add(layout)
    try:
        yield Identities(server.url_for, with_users=True)
    finally:
        server.remove(layout)
