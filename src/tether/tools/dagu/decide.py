"""Step decisions of `dagu_execute` (approve / reject / push_back) on approval gates and human
tasks, in the run or one of its sub-DAG runs, through the one runtime `answer` path (the same
one `tether runs approve|reject|push-back|complete` uses).

Checks, in order, each refusing with nothing changed: the run (and sub-run) exists; it has the
step; `attemptId` is the attempt the step's open wait was opened under (recorded in the wait
itself, so the check and the answered key come from one row), or the run's current attempt
when it does not wait (else `conflict`, `details.attemptId`); the step waits (else `conflict`
naming its status); a human task is not rejected; an approval's inputs are strings. The answer
itself checks required inputs and the task's forms, and lands only while that very wait is
open: a decision that lost a race to another is a `conflict` naming the attempt now. What the
answer does to the run is the runtime's (`answer_rules.answer_effect`): a rejection ends it in the
answer's own write, a push-back resumes it at once, an approval of one of several waiting
steps leaves it waiting on the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tether.runtime import answers, errors
from tether.runtime.operations import Operations
from tether.runtime.rows import ExecutionRow
from tether.specs.dag import HumanTask, Step
from tether.tools.dagu import resolve
from tether.tools.dagu.detail import RunRead
from tether.tools.dagu.inputs import ExecuteInput
from tether.tools.dagu.results import (
    CONFLICT,
    INVALID_TOOL_INPUT,
    RESOURCE_NOT_FOUND,
    DaguError,
    translate,
)

_MAX_DEPTH = 8  # sub-DAG nesting searched for subDAGRunId
_BUSY_S: Final = 10.0  # how long a decision waits for a run busy with other steps


async def _sub_run(ops: Operations, root: RunRead, sub_id: str) -> RunRead:
    """The sub-DAG run `sub_id` among the run's descendants."""
    frontier, depth = [root], 0
    while frontier and depth < _MAX_DEPTH:
        nxt: list[RunRead] = []
        for read in frontier:
            for step in read.status.steps:
                for child in step.sub_runs:
                    try:
                        row = (await ops.get(child)).current
                    except errors.ExecutionNotFound:
                        continue
                    child_read = await resolve.load(ops, row)
                    if row.business_id == sub_id:
                        return child_read
                    nxt.append(child_read)
        frontier, depth = nxt, depth + 1
    raise DaguError(
        RESOURCE_NOT_FOUND, f"the run has no sub-DAG run {sub_id!r}", field="subDAGRunId"
    )


def _response(inp: ExecuteInput, is_task: bool, wait: Mapping[str, Any]) -> Any:
    inputs = dict(inp.inputs or {})
    if is_task:
        if inp.action == "reject":
            raise DaguError(INVALID_TOOL_INPUT, "a human task cannot be rejected", field="action")
        decision = "complete" if inp.action == "approve" else "push_back"
    else:
        bad = sorted(k for k, v in inputs.items() if not isinstance(v, str))
        if bad:
            raise DaguError(
                INVALID_TOOL_INPUT,
                f"approval inputs must be strings; {bad} are not",
                field="inputs",
            )
        decision = inp.action
    # Every input key is kept, `reason` and `decision` too: only the action's own arguments
    # (the decision, a rejection's reason) are not inputs. The inputs arrived as JSON.
    return answers.read(answers.Form(decision, values=inputs, reason=inp.reason), wait)


async def decide(ops: Operations, inp: ExecuteInput, root: ExecutionRow, by: str | None) -> RunRead:
    """Decide the step; returns the run read the decision was checked against."""
    read = await resolve.load(ops, root)
    if inp.sub_dag_run_id is not None:
        read = await _sub_run(ops, read, inp.sub_dag_run_id)
    assert inp.step_name is not None  # noqa: S101 — decisions require it
    step = read.step(inp.step_name)
    if step is None:
        raise DaguError(
            RESOURCE_NOT_FOUND, f"the run has no step {inp.step_name!r}", field="stepName"
        )
    read = await _parked_again(ops, read, step)
    wait = read.open_wait(step)
    # The attempt the open wait belongs to, from the same row as its key (else the run's).
    current = str(wait.get("attempt") or "") if wait is not None else ""
    _check_attempt(inp, current or read.status.attempt_id)
    if wait is None and read.row.live and _reads_waiting(read, step):
        label = read.status.status_label  # Dagu: the run is not waiting for a decision
        raise DaguError(
            CONFLICT,
            f"step {step.name!r} waits, but its DAG-run is {label}, not waiting for a "
            "decision: decide it once the steps running now have ended",
            field="stepName",
            details={"status": read.status.status, "statusLabel": label},
        )
    if wait is None:
        detail = read.step_detail(step)
        label = detail.status_label if detail is not None else "not_started"
        raise DaguError(
            CONFLICT,
            f"step {step.name!r} is not waiting; its status is {label}",
            field="stepName",
            details={"status": detail.status if detail else 0, "statusLabel": label},
        )
    response = _response(inp, isinstance(step.work, HumanTask), wait)
    try:
        # The key names this one park of the step: the answer lands only while it is open
        # (judged under the run's row lock), so it can never reach a later attempt's wait.
        await ops.answer(read.row.id, str(wait["key"]), response, by=by)
    except (errors.AnswerConflict, errors.WaitNotOpen) as exc:
        raise await _moved_on(ops, read, inp) from exc
    except errors.AnswerRejected as exc:
        err = translate(exc, "inputs")
        if exc.errors:  # the problems, without the internal wait key the runtime prefixes
            err.message = "; ".join(str(e) for e in exc.errors)
        raise err from exc
    except errors.TetherError as exc:
        raise translate(exc) from exc
    return read


async def _parked_again(ops: Operations, read: RunRead, step: Step) -> RunRead:
    """A step that waits while its run runs other steps (the steps a push-back reset, or
    the ones that do not depend on it): its wait is kept, under its key, but the run is not
    parked on it until those steps end. Dagu refuses the decision while its run is running;
    here it waits (a while) for the run to park again, or end."""
    if not _reads_waiting(read, step) or read.row.status == "waiting" or not read.row.live:
        return read
    view = await ops.wait_until(read.row.id, _parked_or_ended, timeout=_BUSY_S)
    return await resolve.load(ops, view.current)


def _reads_waiting(read: RunRead, step: Step) -> bool:
    detail = read.step_detail(step)
    return detail is not None and detail.status_label == "waiting"


def _parked_or_ended(row: ExecutionRow) -> bool:
    return row.status == "waiting" or not row.live


def _check_attempt(inp: ExecuteInput, current: str | None) -> None:
    if inp.attempt_id is not None and inp.attempt_id != current:
        raise DaguError(
            CONFLICT,
            f"attempt {inp.attempt_id!r} is not the current attempt {current!r}",
            field="attemptId",
            details={"attemptId": current},
        )


async def _moved_on(ops: Operations, read: RunRead, inp: ExecuteInput) -> DaguError:
    """The wait was decided (or closed) by someone else between the read and the answer:
    a conflict naming the attempt the run (or sub-run) is at now."""
    try:
        now = (await resolve.load(ops, (await ops.get(read.row.id)).current)).status.attempt_id
    except errors.TetherError:
        now = None
    return DaguError(
        CONFLICT,
        f"step {inp.step_name!r} was decided by another call in the meantime; "
        f"the current attempt is {now!r}",
        field="attemptId" if inp.attempt_id is not None else "stepName",
        details={"attemptId": now},
    )
