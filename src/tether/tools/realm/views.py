"""get_workflow_protocol's reply, pure: the briefing in Realm's words (the opening
instruction, the five standard rules and the two always added, each step's part for the agent,
`possible_gate`, the step counts and what to do for each `agent_action`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from tether.runtime.realm.plan import Plan, PlanStep


def listing(
    items: list[dict[str, Any]], unreadable: dict[str, str], warnings: list[str], app: Any
) -> dict[str, Any]:
    """list_workflows' reply: the workflows, and each protocol file that could not be read
    (`{file, class: "parse", reason}`), in which case the hint withholds create_workflow."""
    entries = [
        {"file": Path(f).name, "class": "parse", "reason": why} for f, why in unreadable.items()
    ]
    start = "Call get_workflow_protocol with a workflow_id before calling start_run."
    hint = start
    if app.allow_create_workflow:
        hint += (
            " If no workflow matches your task, use create_workflow to define and start your "
            "own plan."
        )
    if entries:
        n = len(entries)
        count = f"{n} registered workflow {'copy' if n == 1 else 'copies'} could not be read"
        warnings = [*warnings, f"{count} — see 'unreadable'."]
        hint = (
            f"{count} — 'unreadable' names each file, the reason and the repair (an operator's "
            "act). Do not create a workflow to replace one listed there until an operator has "
            f"looked: the entry may be a registered workflow that only needs its file repaired. "
            f"{start}"
        )
    return {
        "status": "ok",
        "workflows": items,
        "unreadable": entries,
        "warnings": warnings,
        "hint": hint,
    }


def protocol_view(plan: Plan) -> dict[str, Any]:
    """get_workflow_protocol's reply."""
    every = [*plan.steps, *(PlanStep(plan.spec.steps[f]) for f in plan.spec.finalizers)]
    steps = [_step(s, plan) for s in every]
    agent = sum(1 for s in every if s.kind == "agent")
    auto = sum(1 for s in every if s.kind == "auto")
    out: dict[str, Any] = {"workflow_id": plan.id, "name": plan.name}
    if plan.description:
        out["description"] = plan.description
    if plan.spec.params_schema is not None:
        out["params_schema"] = plan.spec.params_schema.document
    out.update(
        steps=steps,
        agent_steps_summary=summary(len(every), agent, auto),
        rules=[*(plan.rules or DEFAULT_RULES), *ADDED_RULES],
        error_handling=dict(ERROR_HANDLING),
        quick_start=plan.quick_start if (plan.quick_start or "").strip() else _start(plan, agent),
    )
    return out


def summary(total: int, agent: int, auto: int) -> str:
    """`2 of 4 steps require agent action. 2 are run by the engine.`"""
    return (
        f"{agent} of {total} {'step' if total == 1 else 'steps'} "
        f"{'requires' if agent == 1 else 'require'} agent action. "
        f"{auto} {'is' if auto == 1 else 'are'} run by the engine."
    )


def _start(plan: Plan, agent: int) -> str:
    head = f"Call start_run with workflow_id '{plan.id}'."
    if agent:
        return (
            f"{head} The engine runs the steps it owns and returns control at the first step "
            "requiring agent action; when next_actions names advance_run, call it. Follow the "
            "next_action in each response until the workflow completes."
        )
    return (
        f"{head} The engine runs every step; when next_actions names advance_run, call it. "
        "Follow the next_action in each response until the workflow completes."
    )


def _step(s: PlanStep, plan: Plan) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": s.id,
        "description": s.description,
        "execution": s.kind,
        "agent_involvement": _involvement(s, plan),
    }
    if s.spec.input_schema is not None:
        entry["input_schema"] = s.spec.input_schema.document
    if s.instructions is not None:
        entry["instructions"] = s.instructions
    if s.gate is not None:
        entry["possible_gate"] = {"choices": list(s.gate.choices)}
    if s.depends_on:
        entry["depends_on"] = list(s.depends_on)
    return entry


def _involvement(s: PlanStep, plan: Plan) -> str:
    if s.kind == "guard":
        return (
            "none — the engine settles this guard step itself; when next_actions names "
            "advance_run, call it, and do NOT call execute_step for it."
        )
    if s.kind == "finalizer":
        return (
            "none — the engine runs this finalizer step itself when the run ends; do NOT call "
            "execute_step for it."
        )
    if s.kind == "auto":
        return GATED_AUTO if s.gate is not None else PLAIN_AUTO
    if s.gate is not None:
        return (
            f"YOU execute this step. Call execute_step with command '{s.id}'. The engine will "
            "run your dispatcher, then pause for human confirmation of your output."
        )
    text = (
        f"YOU execute this step. Call execute_step with command '{s.id}' and the required params."
    )
    gate_next = next(
        (
            o.id
            for o in plan.steps
            if o.kind == "auto" and o.gate is not None and o.depends_on == (s.id,)
        ),
        None,
    )
    if gate_next is not None:
        text += (
            " After you submit, you will receive status: confirm_required directly in response "
            f"to this call — the engine runs '{gate_next}' automatically before returning."
        )
    return text


PLAIN_AUTO: Final = "none — the engine runs this step; when next_actions names advance_run, call it"
GATED_AUTO: Final = (
    "YOU will receive `status: confirm_required` after this step runs — the engine runs it "
    "(when next_actions names advance_run, call it), then opens a gate. Read `gate.agent_hint` "
    "for presentation instructions, present `gate.display` to the user verbatim, collect their "
    "choice from `gate.response_spec.choices`, and call `submit_human_response` by copying the "
    "call in `next_actions[0].instruction.call_with` and filling in the choice."
)
DEFAULT_RULES: Final = (
    "Follow the next_action instruction in each response exactly.",
    "When you receive status 'confirm_required', read gate.agent_hint for instructions, present "
    "gate.display to the user verbatim, wait for their response, then call "
    "submit_human_response by copying the call in next_actions[0].instruction.call_with and "
    "filling in their choice.",
    "Do NOT auto-confirm any human gate. The user must decide.",
    "Do NOT ask the user for permission between steps unless the system tells you to.",
    "When next_actions names advance_run, call it: the engine owes steps it runs when you call "
    "advance_run.",
)
#: Always added after the rules (the protocol's own or the defaults): 7 by default.
ADDED_RULES: Final = (
    "Optional: mint a fresh UUIDv4 writer_nonce per step-attempt (the same value on every "
    "append_trace call for that attempt, a new one next attempt, on BOTH append_trace and "
    "execute_step or neither) to get your own buffered trace lines faithfully attributed "
    "instead of the honest-but-unattributed floor.",
    "A concurrent completion of the same step by a sibling attempt resolves automatically — on "
    "a STATE_STEP_ALREADY_SETTLED error, call get_run_state and continue from the run's actual "
    "state rather than treating it as a failure.",
)
ERROR_HANDLING: Final = {
    "provide_input": "The engine rejected your input. Read the error details — they tell you "
    "exactly what was wrong. Fix the input and call the step again.",
    "report_to_user": "Something failed that you cannot fix automatically. Show the error "
    "message to the user and wait for their guidance.",
    "resolve_precondition": "A prerequisite step has not completed. The error includes which "
    "precondition failed and what step to call. Follow the suggestion.",
    "stop": "A critical error occurred. Report it to the user and do not attempt any further "
    "steps.",
    "wait_for_human": "An external service is unavailable and cannot be retried automatically "
    "(e.g. network unreachable, upstream server error). Show the error to the user and wait for "
    "them to confirm the issue is resolved — the run cannot continue until the external "
    "dependency is back.",
    "wait_and_proceed": "The upstream service returned a rate-limit response. retry_after in "
    "the envelope gives the number of seconds to wait. After that delay, follow next_actions "
    "without human involvement.",
}
