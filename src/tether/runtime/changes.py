"""One change fan-out per process: live subscribers (`subscriptions/listen` streams, the
console's live pages) hear about the runs they cover without a connection, a poll or a callback
scan of their own; `watch_every` hears every run (the console's inbox).

The runtime's listener already LISTENs on the change channel, on one dedicated connection, and
every write that changes a run notifies its id in the same transaction (any process, any
instance). `ChangeHub` subscribes to that channel once and wakes only the watchers of that id;
an empty payload (the listener reconnected: something may have been missed) wakes everyone, who
then re-read their rows. Watchers never receive data, only "look again": views are always
computed from the row.

A worker's grouped checkpoints announce their changes after their commit (storage/
checkpoints.py), so a worker killed in between loses the announcement. With `sweep_s`, the hub
wakes everyone that often as a safety net, as on a reconnect: a lost change reaches its
subscribers within `sweep_s`, and an idle stream pays one re-read of its rows per sweep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Final

from tether.storage.driver import Notifications
from tether.storage.notify import CHANGE_CHANNEL

Wake = Callable[[str], None]
SWEEP_S: Final = 300.0  # the safety-net sweep of the app's and the console's hubs


class ChangeHub:
    """Routes change notifications by execution id to the watchers of that id."""

    def __init__(self, listener: Notifications | None, *, sweep_s: float | None = None) -> None:
        self._by_id: dict[str, set[Wake]] = {}
        self._all: set[Wake] = set()  # every watcher, for an empty (reconnect) payload
        self._every: set[Wake] = set()  # watchers of every run (the console's inbox)
        self._unsubscribe = (
            listener.subscribe(CHANGE_CHANNEL, self._dispatch) if listener is not None else None
        )
        self._sweep_s = sweep_s
        self._sweep: asyncio.TimerHandle | None = None
        if sweep_s is not None:
            self._sweep = asyncio.get_running_loop().call_later(sweep_s, self._swept)

    def _swept(self) -> None:
        assert self._sweep_s is not None  # noqa: S101 — armed only with sweep_s
        self._sweep = asyncio.get_running_loop().call_later(self._sweep_s, self._swept)
        self._dispatch(CHANGE_CHANNEL, "")  # everyone looks again, as after a reconnect

    def _dispatch(self, _channel: str, payload: str) -> None:
        wakes = self._by_id.get(payload, ()) if payload else self._all
        for wake in list(wakes):
            wake(payload)
        if payload:
            for wake in list(self._every):
                wake(payload)

    def watch_every(self, wake: Wake) -> None:
        """Call `wake(id)` on every change of any run (and on a reconnect), until `leave`."""
        self._all.add(wake)
        self._every.add(wake)

    def watch(self, wake: Wake, ids: Iterable[str]) -> None:
        """Call `wake(id)` when one of `ids` changes (adds to what `wake` already watches)."""
        self._all.add(wake)
        for execution_id in ids:
            self._by_id.setdefault(execution_id, set()).add(wake)

    def unwatch(self, wake: Wake, ids: Iterable[str]) -> None:
        """Stop waking `wake` for `ids` (it still hears a reconnect until `leave`)."""
        for execution_id in ids:
            wakes = self._by_id.get(execution_id)
            if wakes is not None:
                wakes.discard(wake)
                if not wakes:
                    del self._by_id[execution_id]

    def leave(self, wake: Wake, ids: Iterable[str]) -> None:
        """Forget `wake` entirely (`ids`: everything it watches)."""
        self.unwatch(wake, ids)
        self._all.discard(wake)
        self._every.discard(wake)

    @property
    def watched_ids(self) -> int:
        """How many execution ids someone watches (for tests and the benchmark)."""
        return len(self._by_id)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
