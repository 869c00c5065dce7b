"""Running an ended run again: one operation behind every surface's word for it.

`again` starts a new run after an ended one. Three choices describe it:

- where it starts: from the start; from a step (`from_step`: the calls recorded before that
  step, answers included, are kept, so replay goes on from it); or where a workflow kind's own
  `plan` says (a DAG's steps to run again: `dag.retrying.DagSteps`);
- its business id: `new`, and the old run links to the new one (`successor_id`), so handles
  follow it; or `same`, and the old run is sealed (it keeps its ending, handles stop at it)
  while the new run takes its place under the business id;
- its input: the old run's, or a new one, checked against the workflow's input model.

One set of rules, whatever the surface: the run must have ended, and may not have gone on
already (sealed, continued as new, or with a successor); a completed run goes again only under
its own business id, or from a cleanup step its ending left pending. A refused call writes
nothing. The new run's `created` event says where it came from: `resume_of` and `from_step`
(from a step), `retry_of` and `step` (by a plan), `rerun_of` (from the start under the same
business id) or `retry_of` (from the start under a new one).

Not to be confused with a `RetryPolicy`: that tries a step or a run again inside the same run,
automatically; `again` is asked for from outside, after the run has ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tether.runtime import errors
from tether.runtime.ids import is_execution_id, new_execution_id
from tether.runtime.operations.env import Env
from tether.runtime.operations.storage_errors import storage_errors
from tether.runtime.realm.failures import is_left_pending
from tether.storage import carryover, repo
from tether.storage.rows import ExecutionRow, StepRecord

if TYPE_CHECKING:
    from tether.runtime.registry import App

BusinessId = Literal["new", "same"]


class Plan(Protocol):
    """A workflow kind's own answer to "what runs again" (a DAG's steps to reset), made by the
    surface that knows the kind and handed to `again` in place of `from_step`."""

    @property
    def step(self) -> str | None:
        """The step the plan starts from (None: the whole run), recorded with the new run."""

    def input(self, app: App, old: ExecutionRow, records: Sequence[StepRecord], base: Any) -> Any:
        """The new run's input, made from `base` (the old run's input, or the new one given),
        from the old run's row and its recorded calls. Raises a TetherError (InvalidInput,
        Conflict) when the plan cannot apply: nothing is written then."""


async def again(
    env: Env,
    execution_id: str,
    *,
    from_step: str | None = None,
    plan: Plan | None = None,
    business_id: BusinessId = "new",
    input: Any = None,
    by: str | None = None,
) -> ExecutionRow:
    """Start a new run after the ended run `execution_id` (the run itself: no chain
    following); returns the new run, committed. `input` None keeps the old run's.

    Raises:
        ExecutionNotFound: no such run in the caller's scope.
        Conflict: the run is live, already went on, or completed (under a new business id,
            unless from a cleanup step its ending left pending); or another call made it go
            on first.
        InvalidInput: both `from_step` and `plan`, no recorded call of `from_step`, a new
            input the workflow's model refuses, or the plan's own refusal.
    """
    if from_step is not None and plan is not None:
        raise errors.InvalidInput("name a step or hand a plan, not both")
    old = await _ended_run(env, execution_id)
    if old.live:
        raise errors.Conflict(f"run {old.id!r} is still {old.status}: end it first")
    if old.status == "continued_as_new" or old.successor_id is not None:
        raise errors.Conflict(
            f"run {old.id!r} ({old.sealed_from or old.status}) already went on as another run"
        )
    records: list[StepRecord] = []
    if from_step is not None or plan is not None:
        with storage_errors():
            records = await repo.get_steps(env.pool, old.id)
    kept: list[StepRecord] = []
    drains = False  # from a cleanup step left pending: only the pending cleanup steps run
    found = True
    if from_step is not None:
        kept, drains, found = _kept_calls(records, from_step)
    if old.status == "completed" and business_id == "new" and not drains:
        raise errors.Conflict(
            f"run {old.id!r} ended completed: it runs again only under its own business id, "
            "or from a cleanup step its ending left pending"
        )
    if from_step is not None and not found:
        raise errors.InvalidInput(f"run {old.id!r} has no recorded call of step {from_step!r}")
    wf = env.app.get(old.workflow)
    base = old.input if input is None else input
    if plan is not None:
        value = wf.dump_input(wf.parse_input(plan.input(env.app, old, records, base)))
    elif input is not None:
        value = wf.dump_input(wf.parse_input(input))
    else:
        value = old.input
    created = {**_came_from(old, from_step, plan, business_id), "by": by}
    return await _insert(env, old, value, created, business_id, kept, from_step)


async def _ended_run(env: Env, execution_id: str) -> ExecutionRow:
    """The run itself (no chain following), if in the env's tenant scope. Raises
    ExecutionNotFound."""
    if not is_execution_id(execution_id):
        # as `get` does: an id that has not the shape of one names no run (and one holding a
        # NUL would be refused by the database as invalid input, not as missing)
        raise errors.ExecutionNotFound("no run with that id")
    with storage_errors():
        old = await repo.get_execution(env.pool, execution_id)
    if old is None or not env.sees(old):
        raise errors.ExecutionNotFound(f"no run {execution_id!r}")
    return old


def resume_point(records: Sequence[StepRecord], step: str) -> int | None:
    """The seq of the first recorded call of `step`: named `step`, or `<kind>:step` (a
    protocol step's calls: `realm:when:`, `realm:auto:`, `realm:guard:`, `agent_step:`)."""
    return next(
        (r.seq for r in records if r.name == step or r.name.rsplit(":", 1)[-1] == step), None
    )


def _kept_calls(records: Sequence[StepRecord], step: str) -> tuple[list[StepRecord], bool, bool]:
    """(the calls a run from `step` keeps, whether it only drains cleanup steps left pending,
    whether the run recorded a call of `step` at all). Pure.

    From a cleanup step left pending (its handler was missing where the run ended), every
    call but the pending cleanup steps is kept, so only they run; else the calls before it."""
    seq = resume_point(records, step)
    pending = {r.seq for r in records if r.done and is_left_pending(r.name, r.result)}
    drains = seq is not None and seq in pending
    if seq is None:
        return [], False, False
    kept = [r for r in records if r.done and (r.seq not in pending if drains else r.seq < seq)]
    return kept, drains, True


def _came_from(
    old: ExecutionRow, from_step: str | None, plan: Plan | None, business_id: BusinessId
) -> dict[str, Any]:
    """What the new run's `created` event records of where it came from."""
    if plan is not None:
        return {"retry_of": old.id, "step": plan.step}
    if from_step is not None:
        return {"resume_of": old.id, "from_step": from_step}
    if business_id == "same":
        return {"rerun_of": old.id}
    return {"retry_of": old.id}


async def _insert(
    env: Env,
    old: ExecutionRow,
    value: Any,
    created: dict[str, Any],
    business_id: BusinessId,
    kept: list[StepRecord],
    from_step: str | None,
) -> ExecutionRow:
    """Seal `old` (the same business id) or link it to the new run (a new one), and insert
    the new run with the calls it keeps, in one transaction. Raises Conflict when another
    call made `old` go on first."""
    new_id = new_execution_id()
    following = repo.NewExecution.following(
        old,
        id=new_id,
        business_id=old.business_id if business_id == "same" else new_id,
        input=value,
        deadline_at=env.app.get(old.workflow).deadline(),
        created_data=created,
    )
    went_on = errors.Conflict(f"run {old.id!r} went on as another run concurrently")
    async with storage_errors(), env.pool.acquire() as conn, conn.transaction():
        if business_id == "same" and not await repo.seal(conn, old.id):
            raise went_on
        row = await repo.insert_execution(conn, following)
        if from_step is not None:
            await carryover.insert_steps(conn, new_id, kept)
            # A second event: the first claim then loads the kept calls (the executor skips
            # that read for a run whose only event is `created`).
            await repo.append_event(
                conn, new_id, "resumed", {"from": old.id, "step": from_step, "kept": len(kept)}
            )
        if business_id == "new" and not await repo.link_successor(conn, old.id, new_id):
            raise went_on
    assert row is not None  # noqa: S101 — no idempotency key, so no conflict
    return row
