"""Simulated crashes: the worker running a run dies when the run reaches a chosen step.

A crash point is a step probe (runtime/probes.py). When it fires, the run's task is cancelled
where it stands: nothing more is written for that claim of the run, its lease is neither
renewed nor handed back, exactly as when the worker's process is killed. Once the lease has
expired (at once under time skipping: the expiry is the next wake-up) a worker claims the run
again and replays it from its history: steps recorded before the crash return their records,
the rest run.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from tether.runtime.probes import StepPoint

When = Literal["before", "after"]


@dataclass
class Crash:
    """A crash point armed by `WorkflowEnvironment.crash_at`.

    Attributes:
        step: the step's name (as recorded: `name=`, else the function's qualified name).
        when: `before` the step's function runs, or `after` it returned but before its result
            was recorded (the step then runs again on replay: steps run at least once).
        workflow: only runs of this workflow (None: any).
        times: how many times it fires; then it is spent.
        hits: where it fired, in order: run id, the claim (attempt) that died, the step.
    """

    step: str
    """The step's name (as recorded: `name=`, else the function's qualified name)."""
    when: When = "before"
    """`before` the step's function runs, or `after` it returned but before its result was recorded
    (the step then runs again on replay: steps run at least once)."""
    workflow: str | None = None
    """Only runs of this workflow (None: any)."""
    times: int = 1
    """How many times it fires; then it is spent."""
    hits: list[StepPoint] = field(default_factory=list)
    """Where it fired, in order: run id, the claim (attempt) that died, the step."""

    @property
    def count(self) -> int:
        """How many times it has fired."""
        return len(self.hits)

    def _matches(self, point: StepPoint) -> bool:
        return (
            self.count < self.times
            and point.step == self.step
            and point.edge == self.when
            and (self.workflow is None or point.workflow == self.workflow)
        )


class CrashPoints:
    """One environment's armed crashes, and the claims whose worker they killed."""

    def __init__(self) -> None:
        self.armed: list[Crash] = []
        # `id:attempt` of each claim a crash ended: its lease is held by no live worker.
        self.lost: set[str] = set()

    async def probe(self, point: StepPoint) -> None:
        """The step probe: fire the first armed crash that matches `point`."""
        crash = next((c for c in self.armed if c._matches(point)), None)
        if crash is None:
            return
        crash.hits.append(point)
        self.lost.add(f"{point.execution_id}:{point.attempt}")
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 — a step runs inside its run's task
        task.cancel()  # the worker is gone: the run's task ends here, writing nothing
        await asyncio.Event().wait()  # never set: the cancellation arrives here
