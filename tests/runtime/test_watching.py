"""PURE: where a watch stops (runtime/watching.py) and which run changes count for a resource
subscription (runtime/resource_watches.py). Our choice (a watch outlasts sleeps,
retries and chains; it stops at the end or at a wait the caller answers)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import execution_row
from tether.runtime.resource_watches import any_change, settles
from tether.runtime.watching import watch_stop

RUN = "ex_" + "c" * 32


def wait(kind: str, n: int = 3) -> dict[str, Any]:
    return {"key": f"{RUN}:{kind}:x:{n}", "kind": kind, "name": "x"}


@pytest.mark.parametrize(
    ("status", "waits", "stop"),
    [
        ("running", [], None),
        ("pending", [], None),
        ("waiting", [], None),  # a durable sleep or a retry backoff: wake_at, no wait
        ("waiting", [wait("child")], None),
        ("waiting", [wait("update")], None),
        ("waiting", [wait("signal")], "needs_answer"),
        ("waiting", [wait("approval")], "needs_answer"),
        ("waiting", [wait("human_task")], "needs_answer"),
        ("waiting", [wait("agent_step"), wait("child")], "needs_answer"),
        ("completed", [], "ended"),
        ("failed", [], "ended"),
        ("cancelled", [], "ended"),
        ("terminated", [], "ended"),
        ("timed_out", [], "ended"),
    ],
)
def test_a_watch_stops_only_at_the_end_or_at_a_wait_for_the_caller(
    status: str, waits: list[dict[str, Any]], stop: str | None
) -> None:
    assert watch_stop(execution_row(id=RUN, status=status, waits=waits)) == stop


def test_settles_counts_the_end_and_each_new_checkpoint_only() -> None:
    running = execution_row(id=RUN, status="running", version=2)
    parked = execution_row(id=RUN, status="waiting", waits=[wait("approval", 3)], version=3)
    reparked = execution_row(id=RUN, status="waiting", waits=[wait("approval", 5)], version=5)
    sleeping = execution_row(id=RUN, status="waiting", version=6)
    done = execution_row(id=RUN, status="completed", version=7)
    assert not settles(None, running)
    assert settles(running, parked) and not settles(parked, parked)
    assert settles(parked, reparked)
    assert not settles(reparked, sleeping)  # a durable sleep is no checkpoint
    assert settles(sleeping, done)
    assert any_change(running, parked) and not any_change(parked, parked)
