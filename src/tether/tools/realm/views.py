"""get_workflow_protocol's reply, pure: the briefing (the opening instruction, the five
standard rules and the two always added, each step's part for the agent, `possible_gate`, the
step counts and what to do for each `agent_action`), and list_workflows' reply."""

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
    start = "Read a workflow's brief with get_workflow_protocol before you call start_run on it."
    hint = start
    if app.allow_create_workflow:
        hint += " When none of these fits the task, create_workflow turns your own plan into a run."
    if entries:
        n = len(entries)
        count = f"{n} workflow {'file' if n == 1 else 'files'} could not be loaded"
        warnings = [*warnings, f"{count}; 'unreadable' lists {'it' if n == 1 else 'them'}."]
        hint = (
            f"{count}. 'unreadable' gives each file and why it was refused; mending a file is "
            "for an operator. Do not stand in for one of them with create_workflow: it may be a "
            f"workflow that is still registered and only needs its file fixed. {start}"
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
    """`2 of 4 steps are for the agent; the engine runs 2 itself.`"""
    return (
        f"{agent} of {total} {'step' if total == 1 else 'steps'} "
        f"{'is' if agent == 1 else 'are'} for the agent; the engine runs {auto} itself."
    )


def _start(plan: Plan, agent: int) -> str:
    head = f"Begin with start_run, workflow_id '{plan.id}'."
    if agent:
        return (
            f"{head} The engine does its own steps and hands the run back at the first step "
            "that needs you. From then on, each reply's next_actions says what to call next "
            "(advance_run among them) until the run has ended."
        )
    return (
        f"{head} Every step is the engine's. Keep calling what next_actions names "
        "(advance_run when it is there) until the run has ended."
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
            "none: the engine decides this guard by itself. Never name it in execute_step; "
            "call advance_run when next_actions offers it."
        )
    if s.kind == "finalizer":
        return (
            "none: the engine runs this cleanup step once the run has ended. Never name it in "
            "execute_step."
        )
    if s.kind == "auto":
        return GATED_AUTO if s.gate is not None else PLAIN_AUTO
    if s.gate is not None:
        return (
            f"yours: call execute_step with command '{s.id}'. A person then confirms your answer "
            "before the run goes on."
        )
    text = f"yours: call execute_step with command '{s.id}' and params that fit input_schema."
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
            f" That call's reply is already confirm_required: the engine runs '{gate_next}' "
            "before it replies."
        )
    return text


PLAIN_AUTO: Final = "none: the engine runs this step; call advance_run when next_actions offers it."
GATED_AUTO: Final = (
    "the engine runs this step (call advance_run when next_actions offers it) and then asks a "
    "person: the reply's status is confirm_required. Show `gate.display` to the user unchanged, "
    "as `gate.agent_hint` describes, let them pick from `gate.response_spec.choices`, and send "
    "their pick with `submit_human_response`, starting from "
    "`next_actions[0].instruction.call_with`."
)
#: The rules a protocol without its own gets, one topic each, in this order.
DEFAULT_RULES: Final = (
    "Each reply's next_actions says what to call next; call exactly that.",
    "On status 'confirm_required', show gate.display to the user unchanged (gate.agent_hint "
    "says how), wait for their choice, and send it with submit_human_response, starting from "
    "next_actions[0].instruction.call_with.",
    "A gate's answer belongs to the user: never pick a choice for them.",
    "Go from one step to the next without asking the user, unless a reply tells you to ask.",
    "When next_actions offers advance_run, call it: that call is how the engine's own steps "
    "get run.",
)
#: Added after the rules, whoever wrote them (7 rules in all with the defaults).
ADDED_RULES: Final = (
    "execute_step and append_trace take an optional writer_nonce. Give each attempt at a step "
    "a new UUIDv4 and send that same value with every call of the attempt (on both tools, or "
    "on neither): the trace entries you buffered are then credited to you instead of being "
    "counted as anonymous.",
    "STATE_STEP_ALREADY_SETTLED means another attempt finished the same step first. It is not "
    "a failure: read get_run_state and carry on from where the run now stands.",
)
ERROR_HANDLING: Final = {
    "provide_input": "Your input was refused; error_details says which rule it broke. Correct "
    "it and call the same step again.",
    "report_to_user": "This cannot be put right from here. Show the user the error and wait "
    "for what they decide.",
    "resolve_precondition": "This call has to wait for another one, which next_actions names. "
    "Make that call first.",
    "stop": "The run cannot go on. Tell the user what happened and make no more calls for "
    "this run.",
    "wait_for_human": "A service outside the engine is down or out of reach (the network, or "
    "a server error on its side). Tell the user, and wait until they say it works again: "
    "the run cannot move before then.",
    "wait_and_proceed": "The service asked for a pause. Wait the number of seconds in "
    "retry_after, then go on with next_actions; the user need not be asked.",
}
