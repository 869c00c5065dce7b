"""`create_workflow`: an agent's list of steps made into a protocol workflow (all agent steps)
and a run of it.

The plan is read by `tether.specs.realm.plan_workflow` (the id is the plan's name plus a
hash of its content: an identical plan sent again reuses the id and starts another run). It
is written out as workflow text (JSON, which the one YAML loader reads) and registered like a
protocol loaded from `--protocols`, so its runs are ordinary protocol runs that record that
text. What the plan leaves out is named in `warnings` and `diagnostics`; a malformed plan is
refused with `provide_input` and no `error_code`, and nothing is registered or started.

Created workflows live in the serving process (there is no workflow table): a restart
forgets them, as it forgets protocols loaded from a directory that no longer holds them.
"""

from __future__ import annotations

import json
import operator
from typing import Any

from tether.runtime.operations import Operations
from tether.runtime.realm.plan import Plan, PlanError, plan_from_text
from tether.specs.limits import SpecLimits, too_deep
from tether.specs.realm import Diagnostic, RealmSpecError, WorkflowSpec, plan_workflow
from tether.tools import offload
from tether.tools.realm import replies, runs
from tether.tools.realm.envelope import Reply, refusal
from tether.tools.realm.starts import start_one


def workflow_text(spec: WorkflowSpec) -> str:
    """The plan as workflow text the loader reads back into the same spec."""
    steps: dict[str, Any] = {}
    for step_id in spec.order:
        s = spec.steps[step_id]
        doc: dict[str, Any] = {"description": s.description, "execution": "agent"}
        if s.depends_on:
            doc["depends_on"] = list(s.depends_on)
        if s.input_schema is not None:
            doc["input_schema"] = s.input_schema.document
        if s.llm_timeout_seconds is not None:
            doc["llm_timeout_seconds"] = s.llm_timeout_seconds
        if s.structured_output:
            doc["structured_output"] = "strict"
        steps[step_id] = doc
    top: dict[str, Any] = {"id": spec.id, "name": spec.name, "version": spec.version}
    if spec.description:
        top["description"] = spec.description
    if spec.protocol.quick_start:
        top["protocol"] = {"quick_start": spec.protocol.quick_start}
    top["steps"] = steps
    return json.dumps(top, indent=1, sort_keys=False)


#: A plan's parts, which cross from the document worker one by one ahead of it (unpickling
#: the largest plan in one piece holds the event loop about 7 ms).
_STEPS = operator.attrgetter("steps")

#: The refusal of a plan whose reader ended before it answered (nothing was registered).
_LOST = "The process reading the plan ended before it answered; nothing was registered or started."


def _plan_refusal(message: str, diagnostics: list[str]) -> Reply:
    return refusal(
        "create_workflow",
        "",
        None,
        message,
        action="provide_input",
        diagnostics=diagnostics or None,
    )


def read_plan(plan_args: dict[str, Any], limits: SpecLimits) -> tuple[str, list[Diagnostic], str]:
    """The plan's workflow id, what it left out, and its workflow text (what the tool needs,
    and no more: it comes back from the document worker)."""
    spec, report = plan_workflow(plan_args, limits)
    return spec.id, report, workflow_text(spec)


async def create_workflow(
    ops: Operations, args: dict[str, Any], by: str | None, limits: SpecLimits | None = None
) -> Reply | dict[str, Any]:
    """Register the plan in `args` (`steps`, `metadata`; every other key is reported) and
    start a run of it (a created workflow takes no params). The plan is checked against
    `limits` (default: `SpecLimits()`'s) and read by the document worker (`offload`)."""
    limits = limits or SpecLimits()
    try:
        workflow_id, report, text = await offload.run(read_plan, args, limits)
    except RealmSpecError as exc:
        return _plan_refusal(exc.reason, [])
    except offload.TooDeep:
        # Deeper than Python can hand over, so far deeper than the depth limit the worker
        # would have refused it under.
        return _plan_refusal(too_deep(limits), [])
    except offload.WorkerLost:
        return refusal("create_workflow", "", "ENGINE_INTERNAL", _LOST)
    diagnostics = [d.message for d in report]  # also the reply's warnings
    app = ops.app
    entry = app.protocols.get(workflow_id)
    plan: Plan
    try:
        if entry is not None:
            plan = entry.plan
        else:
            read = await offload.run_in_pieces(_STEPS, plan_from_text, text)
            plan = app.create_protocol(text, plan=read)
    except (PlanError, ValueError) as exc:
        return _plan_refusal(str(exc), diagnostics)
    except offload.WorkerLost:
        return refusal("create_workflow", "", "ENGINE_INTERNAL", _LOST)
    out = await start_one(ops, plan.id, {}, key=None, live=None, terminal=None, by=by)
    row = out.row
    assert row is not None  # noqa: S101 — no key, so no key refusal
    row = (await ops.wait_until(row.id, runs.settled, timeout=30.0)).current
    hint = f"Run '{row.id}' created for workflow '{plan.id}'."
    reply = replies.progress(
        "create_workflow",
        plan,
        row,
        runs.Chain([], [], None),
        deduped=False,
        lead=hint,
        warnings=diagnostics,
    )
    wire = reply.to_wire()
    wire["data"] = {"workflow_id": plan.id}
    wire["diagnostics"] = diagnostics
    return wire
