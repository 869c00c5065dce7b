"""An agent step's budget of refused answers (`validation_exhaustion`).

Each refused answer is counted on the run: a note on channel `realm.rejections.<step>`
(`Operations.note`: durable, in the run's tenant, it does not wake the run; `counted`, so the
run's version rises), and the refusal replies `error_details{errors,
rejections, threshold}` with the run's version from before that write. The refusal that
reaches the step's `threshold` (6 by default) ends the step:

- `mode: fail` fails the step (`Step '<s>' refused n answers, its limit of n`):
  a marker answer delivered unchecked to the step's wait (`runtime/realm/failures.py`); the
  run fails with `VALIDATION_EXHAUSTED` and `agent_action: stop`, and its `fail` finalizers
  run, unless a dependent runs on failures: then the reply is that error with
  `report_to_user` and the run goes on;
- `mode: default` answers the step with its `default_output`; the reply is `ok` with a warning,
  `settled_by_default: true` and `defaulted_steps`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from tether.runtime import errors as rt
from tether.runtime.operations import Operations
from tether.runtime.realm import failures
from tether.runtime.realm.plan import Plan, PlanStep
from tether.runtime.rows import ExecutionRow
from tether.specs.realm import validate_payload
from tether.tools.realm import delivery, replies, runs, storable
from tether.tools.realm.envelope import Reply, refusal

EXHAUSTED: Final = "VALIDATION_EXHAUSTED"
#: The error for an answer a schema refused.
REFUSED: Final = {
    "input_schema": "The answer for step '{step}' does not fit its input_schema",
    "output_schema": "The answer for step '{step}' does not fit its output_schema",
}
Settle = Callable[..., Awaitable[tuple[ExecutionRow, Any]]]


def channel(step: str) -> str:
    return f"realm.rejections.{step}"


def exhausted_message(step: str, count: int, threshold: int) -> str:
    return f"Step '{step}' refused {count} answers, its limit of {threshold}"


async def rejections(ops: Operations, run_id: str, step: str) -> int:
    return len(await ops.buffered_signals(run_id, channel(step)))


async def refused(
    ops: Operations,
    plan: Plan,
    row: ExecutionRow,
    wait: dict[str, Any],
    answer: Any,
    settle: Settle,
) -> Reply | dict[str, Any]:
    """The reply to an answer the step's schemas refused, after counting it."""
    step = plan.step(wait["name"])
    assert step is not None  # noqa: S101 — an open agent step of this plan
    budget = step.spec.exhaustion
    threshold = budget.threshold if budget is not None else 6
    schema = refused_schema(step, answer)
    errors = [v.as_ajv() for v in validate_payload(getattr(step.spec, schema), answer)]
    try:
        found = {"schema": schema, "errors": errors[:20]}
        await ops.note(row.id, channel(step.id), found, counted=True)  # run_version rises
    except rt.RunEnded:
        now = (await ops.get(row.id)).current
        return replies.ended(step.id, now, "no steps executed.", await ops.steps(row.id))
    count = await rejections(ops, row.id, step.id)
    if count < threshold:
        return refusal(
            step.id,
            row.id,
            f"VALIDATION_{schema.upper()}",
            REFUSED[schema].format(step=step.id),
            run_version=row.version,
            context_hint=f"Step '{step.id}' refused the answer; the run is still running.",
            next_actions=[replies.step_entry(row.id, plan, step.id, prompt=wait.get("prompt"))],
            error_details={"errors": errors, "rejections": count, "threshold": threshold},
            run_phase="running",
            stopped_step=step.id,
        )
    if budget is not None and budget.mode == "default":
        try:
            return await _settle_by_default(ops, plan, row, wait, step, settle, count)
        except rt.AnswerRejected:  # a default_output that does not fit input_schema too
            pass
    message = exhausted_message(step.id, count, threshold)
    now, chain = await settle(
        ops, await _spend(ops, row, step.id, wait, message), [], answered=step.id
    )
    details = {"rejections": count, "threshold": threshold, "last_ajv_errors": errors}
    wire = replies.progress(step.id, plan, now, chain).to_wire()
    if wire.get("error_code") == EXHAUSTED:  # the step's failure ended the run
        return {**wire, "error_details": details}
    return refusal(  # a dependent ran on the failure: the run went on (or ended otherwise)
        step.id,
        now.id,
        EXHAUSTED,
        message,
        run_version=now.version,
        action="stop" if runs.ended(now) else "report_to_user",  # the reply's override
        next_actions=wire["next_actions"],
        error_details=details,
        run_phase=runs.phase(now),
        stopped_step=step.id,
    )


def unstorable(
    plan: Plan, row: ExecutionRow, wait: dict[str, Any], exc: rt.AnswerUnstorable
) -> Reply:
    """An answer the store cannot hold (storable.py): refused before its content is read, so
    it is not a refused answer and spends none of the step's budget."""
    step = wait["name"]
    return storable.refused(
        step,
        row.id,
        exc,
        f"Step '{step}': the answer",
        then="It does not count against the step's refused answers.",
        run_version=row.version,
        next_actions=[replies.step_entry(row.id, plan, step, prompt=wait.get("prompt"))],
        run_phase=runs.phase(row),
        stopped_step=step,
    )


async def _spend(
    ops: Operations, row: ExecutionRow, step: str, wait: dict[str, Any], message: str
) -> ExecutionRow:
    """End the step: its marker answer, delivered unchecked (following the step to a new wait
    if another answer moved the run first); the run as it was just before."""
    marker = {failures.EXHAUSTED_KEY: message}

    async def spend(to: dict[str, Any]) -> object:
        if not await ops.answer_unchecked(row.id, to["key"], marker, by=failures.EXHAUSTED_BY):
            raise rt.WaitNotOpen(f"wait {to['key']!r} is not open")
        return None

    delivered = await delivery.deliver_to_step(ops, row, step, wait, spend)
    return delivered[0] if delivered is not None else row


async def _settle_by_default(
    ops: Operations,
    plan: Plan,
    row: ExecutionRow,
    wait: dict[str, Any],
    step: PlanStep,
    settle: Settle,
    count: int,
) -> dict[str, Any]:
    budget = step.spec.exhaustion
    assert budget is not None  # noqa: S101 — mode default

    async def settle_default(to: dict[str, Any]) -> object:
        return await ops.answer(row.id, to["key"], budget.default_output)

    delivered = await delivery.deliver_to_step(ops, row, step.id, wait, settle_default)
    row, chain = await settle(ops, delivered[0] if delivered else row, [], answered=step.id)
    note = (
        f"Step '{step.id}' took its default_output after {count} refused answers "
        "(validation_exhaustion.mode: default)."
    )
    wire = replies.progress(step.id, plan, row, chain, warnings=[note]).to_wire()
    return {**wire, "settled_by_default": True, "defaulted_steps": [step.id]}


def refused_schema(step: PlanStep, answer: Any) -> str:
    """Which of an agent step's schemas an answer broke (it must fit both)."""
    if step.input_schema is None:
        return "output_schema"
    if step.output_schema is None or validate_payload(step.spec.input_schema, answer):
        return "input_schema"
    return "output_schema"
