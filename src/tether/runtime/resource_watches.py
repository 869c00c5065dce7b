"""Which resource URIs follow a run, and which of the run's changes count as an update.

A surface that serves run resources (`tether://runs/{id}`, `dagu://runs/{name}/{dagRunId}`)
registers a resolver `uri -> execution id | None` and a predicate over the run before and after
a change; a `subscriptions/listen` stream that asks for `resourceSubscriptions` then gets one
`notifications/resources/updated` per change that counts. The first resolver that claims a URI
wins. Pure data and pure predicates; the stream itself lives in mcp/subscriptions.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tether.runtime.watching import answerable_waits, watch_stop
from tether.storage.rows import ExecutionRow

#: uri -> the execution id it follows, or None when the URI is not this surface's.
Resolver = Callable[[str], Awaitable[str | None]]
#: (run when last reported or None at the start, run now) -> does this change count?
Counts = Callable[[ExecutionRow | None, ExecutionRow], bool]


def any_change(before: ExecutionRow | None, after: ExecutionRow) -> bool:
    """Every write counts (the resource shows the whole row)."""
    return before is None or (before.id, before.version) != (after.id, after.version)


def _checkpoint(row: ExecutionRow) -> tuple[str, str, tuple[str, ...]]:
    return (row.id, row.status, tuple(str(w.get("key")) for w in answerable_waits(row)))


def settles(before: ExecutionRow | None, after: ExecutionRow) -> bool:
    """Only the run's terminal state and each new waiting checkpoint (a new set of waits the
    caller answers: approval, human task, signal, agent step) count; steps, details, sleeps
    and retries in between do not."""
    if watch_stop(after) is None:
        return False
    return before is None or _checkpoint(before) != _checkpoint(after)


@dataclass(frozen=True)
class ResourceWatch:
    resolve: Resolver
    counts: Counts


class ResourceWatches:
    """The registry: surfaces register at start-up; subscriptions look URIs up."""

    def __init__(self) -> None:
        self._watches: list[ResourceWatch] = []

    def register(self, resolve: Resolver, counts: Counts = any_change) -> None:
        self._watches.append(ResourceWatch(resolve, counts))

    async def match(self, uri: str) -> tuple[str, Counts] | None:
        """(execution id, predicate) for the first resolver that claims `uri`, else None."""
        for watch in self._watches:
            execution_id = await watch.resolve(uri)
            if execution_id is not None:
                return execution_id, watch.counts
        return None
