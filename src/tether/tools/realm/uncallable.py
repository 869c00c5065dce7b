"""`execute_step` on a step that cannot be called now, pure: `blocked`, `Step '<s>' cannot be
called now: <why>.`, then what comes next; `next_actions` what can be done instead and
`blocked_reason{eligible_steps, suggestion}` (whose suggestions are fixed sentences)."""

from __future__ import annotations

from collections.abc import Sequence

from tether.runtime.realm.attempts import CAPABILITY
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.tools.realm import replies, runs
from tether.tools.realm.envelope import Reply


def blocked(step: str, plan: Plan, row: ExecutionRow, records: Sequence[StepRecord]) -> Reply:
    actions = replies.open_entries(row, plan)
    eligible = [w["name"] for w in runs.open_agent_steps(row)]
    gate = runs.open_gate(row)
    if gate is not None and not eligible:
        suggestion = "Answer the open question first, as next_actions says."
    elif actions:
        suggestion = "Call one of the steps indicated in next_actions instead."
    else:
        suggestion = "No other step can be called now."
    said = f"Step '{step}' cannot be called now: {reason(step, plan, row, records)}."
    hint = said if gate is not None else replies.join(said, replies.what_next(row))
    return Reply(
        step,
        row.id,
        "blocked",
        hint,
        row.version,
        next_actions=actions,
        extra={
            "run_phase": runs.phase(row),
            "stopped_step": step,
            "agent_action": "resolve_precondition" if actions else "report_to_user",
            "blocked_reason": {"eligible_steps": eligible, "suggestion": suggestion},
        },
    )


def reason(step: str, plan: Plan, row: ExecutionRow, records: Sequence[StepRecord]) -> str:
    """Why `step` cannot be called now, first reason first: settled (completed, failed,
    skipped), the open gate, a step above it that cannot run, its dependencies."""
    completed = set(runs.completed_steps(plan, records))
    failed = set(runs.failed_steps(records))
    skipped = set(runs.skipped_steps(row, records))
    if step in completed:
        return "it is done already"
    if step in failed:
        return "it failed already"
    if step in skipped:
        return "the run skipped it"
    gate = runs.open_gate(row)
    if gate is not None:
        choices = ", ".join(gate.get("choices") or [])
        if gate["name"] == step:
            return f"it waits for its gate's answer ({choices}); send it with submit_human_response"
        return (
            f"the run waits for the answer at the gate of step '{gate['name']}' ({choices}); "
            "send it with submit_human_response"
        )
    settled = completed | failed | skipped

    def unsettled(name: str) -> list[str]:
        s = plan.step(name)
        return [d for d in (s.depends_on if s is not None else ()) if d not in settled]

    above: list[str] = []
    queue = unsettled(step)
    while queue:
        nxt = queue.pop(0)
        if nxt not in above:
            above.append(nxt)
            queue.extend(unsettled(nxt))
    stuck = {str(w["name"]).removeprefix(CAPABILITY) for w in runs.capability_waits(row)}
    cannot = [s for s in above if s in stuck]
    if cannot:
        return f"it depends on {_quoted(cannot)}, which cannot run"
    if direct := unsettled(step):
        return f"it waits for {_quoted(direct)} to finish"
    return "the run has not reached it"


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)
