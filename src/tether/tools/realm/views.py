"""get_workflow_protocol's reply, pure."""

from __future__ import annotations

from typing import Any, Final

from tether.runtime.realm.plan import Plan


def protocol_view(plan: Plan) -> dict[str, Any]:
    """get_workflow_protocol's reply."""
    rules = list(plan.rules) or list(DEFAULT_RULES)
    steps = []
    for s in plan.steps:
        entry: dict[str, Any] = {
            "id": s.id,
            "description": s.description,
            "execution": s.kind,
            "agent_involvement": "agent_executes" if s.kind == "agent" else "none",
        }
        if s.input_schema:
            entry["input_schema"] = dict(s.input_schema)
        if s.depends_on:
            entry["depends_on"] = list(s.depends_on)
        steps.append(entry)
    agent = [s.id for s in plan.steps if s.kind == "agent"]
    out: dict[str, Any] = {"workflow_id": plan.id, "name": plan.name}
    if plan.description:
        out["description"] = plan.description
    out.update(
        quick_start=plan.quick_start
        or f"Call start_run with workflow_id '{plan.id}', then follow next_actions.",
        rules=[*rules, *CONCURRENCY_RULES],
        steps=steps,
        agent_steps_summary=f"{len(agent)} agent step(s): {', '.join(agent) or 'none'}.",
        error_handling="Follow agent_action in every error or blocked reply.",
    )
    return out


DEFAULT_RULES: Final = (
    "Call steps only as next_actions names them.",
    "Submit each step's output with execute_step, fitting its schema.",
    "Follow agent_action on every error or blocked reply.",
    "Never invent a step name or a run ID.",
    "Read the run with get_run_state when unsure where it stands.",
)
CONCURRENCY_RULES: Final = (
    "Only one caller should act on a run at a time.",
    "A reply's run_version rises with every change; re-read the run when it jumped.",
)
