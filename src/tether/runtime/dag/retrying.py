"""Retrying a DAG run, as Dagu retries one: the whole run (failed, aborted and blocked
steps and everything downstream of them run again), or from one step, with or without its
downstream. The retry is a new execution under the same dagRunId (business id) that starts
from the kept steps' recorded results; the old execution is sealed, keeping its ending.
A retry of an active run is a conflict.
"""

from __future__ import annotations

from tether.runtime import errors
from tether.runtime.dag.replay import fold
from tether.runtime.dag.state import DagState
from tether.runtime.ids import new_execution_id
from tether.runtime.operations import Operations
from tether.runtime.operations.storage_errors import storage_errors
from tether.specs.dag import HumanTask, downstream_of
from tether.storage import repo
from tether.storage.rows import ExecutionRow

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


async def retry_dag(
    ops: Operations,
    run_id: str,
    step_name: str | None = None,
    *,
    include_downstream: bool = True,
    by: str | None = None,
) -> ExecutionRow:
    """Start the retry of DAG run `run_id` (an execution id); returns the new execution.

    Raises ExecutionNotFound, Conflict (the run is active, was already retried or rerun,
    or the step is a human task), InvalidInput (not a DAG run, or an unknown step)."""
    with storage_errors():
        old = await repo.get_execution(ops.pool, run_id)
        records = await repo.get_steps(ops.pool, run_id) if old is not None else []
    if old is None or not ops.env.sees(old):  # another tenant's run reads as missing
        raise errors.ExecutionNotFound(f"no run {run_id!r}")
    if old.live:
        raise errors.Conflict(f"run {old.id!r} is still {old.status}; stop it first")
    if old.sealed_from or old.successor_id or old.status == "continued_as_new":
        raise errors.Conflict(f"run {old.id!r} was already retried or continued")
    state, _ = fold(records)
    if state is None or old.workflow not in ops.app.dags:
        raise errors.InvalidInput(f"run {old.id!r} is not a run of a registered DAG")
    reset = reset_plan(state, step_name, include_downstream=include_downstream)
    params = old.input.get("params") if isinstance(old.input, dict) else None
    new_input = {"params": params, "retry": {"of": old.id, "reset": reset}}
    wf = ops.app.get(old.workflow)
    new_id = new_execution_id()
    async with storage_errors(), ops.pool.acquire() as conn, conn.transaction():
        if not await repo.seal(conn, old.id):
            raise errors.Conflict(f"run {old.id!r} was retried concurrently")
        row = await repo.insert_execution(
            conn,
            repo.NewExecution.following(
                old,
                id=new_id,
                business_id=old.business_id,
                input=wf.dump_input(wf.parse_input(new_input)),
                deadline_at=wf.deadline(),
                created_data={"retry_of": old.id, "step": step_name, "by": by},
            ),
        )
    assert row is not None  # noqa: S101 — no idempotency key, so no conflict
    return row
