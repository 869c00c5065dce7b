"""Step probes: a hook at the live edges of a step, for a test kit that simulates a worker
dying at a chosen point (tether.testing's `crash_at`).

A probe is awaited when a run reaches a step it has no record of, `before` the step's function
runs and `after` it returned (before its result is recorded); never while a recorded step is
replayed. What a probe raises leaves the step as it came: a probe that cancels the run's task
stops the attempt with nothing more written, as a dead worker would. No probe is installed in
production; the context reads `current()` once per attempt, so a step pays one `is None` check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Literal

#: Where in a step the run is: its function is about to run, or has just returned.
Edge = Literal["before", "after"]


@dataclass(frozen=True)
class StepPoint:
    """A run at the edge of a step: which run, which claim of it, which step."""

    execution_id: str
    workflow: str
    attempt: int  # the claim (lease) the worker holds the run under
    step: str
    edge: Edge


Probe = Callable[[StepPoint], Awaitable[None]]

_current: Probe | None = None


def current() -> Probe | None:
    """The installed probe (None: none, as in production)."""
    return _current


@contextlib.contextmanager
def installed(probe: Probe) -> Iterator[None]:
    """Await `probe` at every step edge of every run this process executes while the block
    runs. One at a time: installing a second raises RuntimeError."""
    global _current
    if _current is not None:
        raise RuntimeError("another step probe is installed in this process")
    _current = probe
    try:
        yield
    finally:
        _current = None
