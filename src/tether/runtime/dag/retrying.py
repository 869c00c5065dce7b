"""Retrying a DAG run, as Dagu retries one: the whole run (failed, aborted and blocked
steps and everything downstream of them run again), or from one step, with or without its
downstream. `DagSteps` is the plan the one `again` operation is handed: the new run (under
the same dagRunId, the old one sealed with its ending) starts from the kept steps' recorded
results and runs the `reset_plan` steps again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.runtime import errors
from tether.runtime.dag.replay import fold
from tether.runtime.dag.state import DagState
from tether.specs.dag import HumanTask, downstream_of
from tether.storage.rows import ExecutionRow, StepRecord

if TYPE_CHECKING:
    from tether.runtime.registry import App

# A step still waiting when the run ended was aborted with it (Dagu: waiting -> aborted).
_RERUN = frozenset(
    {"failed", "aborted", "not_started", "retrying", "rejected", "running", "waiting"}
)


def reset_plan(
    state: DagState, step_name: str | None = None, *, include_downstream: bool = True
) -> list[str]:
    """The steps a retry runs again, in the DAG's order (pure).

    Raises Conflict for a human-task step (Dagu: retrying a task is a conflict), and
    InvalidInput for an unknown step."""
    dag = state.dag
    if step_name is None:
        roots = {n for n, node in state.nodes.items() if node.status in _RERUN}
        reset = set(roots)
        for name in roots:
            reset |= downstream_of(dag, name)
    else:
        try:
            step = dag.step(step_name)
        except KeyError:
            raise errors.InvalidInput(f"DAG {dag.name!r} has no step {step_name!r}") from None
        if isinstance(step.work, HumanTask):
            raise errors.Conflict(f"step {step.name!r} is a human task; it cannot be retried")
        reset = {step.name}
        if include_downstream:
            reset |= downstream_of(dag, step.name)
    return [n for n in dag.order if n in reset]


@dataclass(frozen=True)
class DagSteps:
    """A DAG run's plan for `Operations.again`: the steps to run again, from `step` (None:
    the whole run) with or without its downstream; the other steps keep what they ended with.

    Attributes:
        step: The step to retry from (None: the failed, aborted and blocked steps).
        include_downstream: Whether the steps downstream of `step` run again too.
    """

    step: str | None = None
    include_downstream: bool = True

    def input(self, app: App, old: ExecutionRow, records: Sequence[StepRecord], base: Any) -> Any:
        """The new run's input: `base`'s params and the plan (`{of, reset}`), which the
        interpreter checks against the new run's predecessor.

        Raises InvalidInput (not a run of a registered DAG, an unknown step) and Conflict
        (the step is a human task)."""
        state, _ = fold(records)
        if state is None or old.workflow not in app.dags:
            raise errors.InvalidInput(f"run {old.id!r} is not a run of a registered DAG")
        reset = reset_plan(state, self.step, include_downstream=self.include_downstream)
        params = base.get("params") if isinstance(base, dict) else None
        return {"params": params, "retry": {"of": old.id, "reset": reset}}
