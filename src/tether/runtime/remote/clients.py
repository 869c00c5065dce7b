"""What the remote calls of one process share: its one HTTP client, what it knows of the
remotes' tools, and the followers of remote task streams its poller runs.

Its own module, below both the remote configuration (which holds it) and the transport (which
sends on it), so neither imports the other to reach it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final, Protocol

import httpx

from tether.runtime.remote.tool_lists import ToolLists

CONNECT_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class Waiting:
    """A run parked on a remote task: call `seq` of run `execution_id` waits on `task` of
    `remote`, and last saw it as `seen` (`Snapshot.digest`; None: unknown)."""

    remote: str
    task: str
    execution_id: str
    seq: int
    seen: str | None


class Follows(Protocol):
    """Told of each remote task a run of this process parks on (follow.py's `Follower`)."""

    def follow(self, waiting: Waiting) -> None: ...


class Clients:
    """The process's HTTP client for remote calls (one connection pool), made on first use in
    the running event loop, with the remotes' tool lists it read (`tool_lists`, renewed with
    the client); `aclose` closes it (the runtime does, when it stops). `followers`: told of
    each remote task a run parks on (`parked`), while a poller runs them."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.tool_lists = ToolLists()
        self.followers: list[Follows] = []

    def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._loop is not loop:
            self._client = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=50),
                timeout=httpx.Timeout(30.0, connect=CONNECT_TIMEOUT_S),
                follow_redirects=False,
            )
            if self._loop is not loop:
                self.tool_lists = ToolLists()  # its locks belong to the loop
            self._loop = loop
        return self._client

    def parked(self, waiting: Waiting) -> None:
        """A run parked on a remote task: each follower may watch it."""
        for follower in self.followers:
            follower.follow(waiting)

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None and not client.is_closed:
            await client.aclose()
