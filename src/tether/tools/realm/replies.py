"""The replies of the protocol tools that report where a run stands (pure: rows in, envelope
out):
`progress` (moved, ended, failed, or stopped at agent steps or a gate), `ended` (an act on a
run that has already ended), `blocked` (a step that cannot be called now)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, Final

from tether.runtime.functions import FunctionNotRegistered
from tether.runtime.realm.plan import Plan
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.tools.realm import envelope, runs
from tether.tools.realm.envelope import Reply, refusal


def progress(
    command: str,
    plan: Plan | None,
    row: ExecutionRow,
    chain: runs.Chain,
    *,
    deduped: bool | None = None,
    lead: str = "",
    done: str = "",
    tool: str | None = None,
    warnings: list[str] | None = None,
) -> Reply:
    """The reply of a call that moved run `row` (or found nothing to do). `command` is the
    reply's word (an answer's: its step), `tool` the tool; `done` (`Step '<s>' is done.`)
    is said in place of `lead` when the run goes on with nothing open."""
    p = runs.phase(row)
    tool = tool or command
    extra: dict[str, Any] = {
        "run_phase": p,
        "deduped": deduped,
        "chained_auto_steps": chain.chained or None,
        "guards": chain.guards or None,
        "ended_by": chain.ended_by,
    }
    warns = list(warnings or [])
    # `stopped_step` (execute_step, start_run, advance_run): the step an error or a gate
    # stopped the call at — not on a deduped start, which ran nothing
    names_stop = tool not in ("submit_human_response", "create_workflow") and not deduped
    cleanup = runs.cleanup_sentence(row.id, chain.cleanup) if runs.ended(row) else ""
    if chain.ended_by is not None:
        hint = join(lead, _guard_ending(tool, row, chain.ended_by), cleanup)
        return Reply(command, row.id, "ok", hint, row.version, warnings=warns, extra=extra)
    if p == "failed":
        return _failed(command, plan, row, lead, extra, names_stop, cleanup)
    if p == "completed":
        hint = join(lead, "Run completed.", cleanup)
        return Reply(command, row.id, "ok", hint, row.version, warnings=warns, extra=extra)
    gate = runs.open_gate(row)
    if gate is not None:
        if names_stop:
            extra["stopped_step"] = gate["name"]
        return _confirm(command, plan, row, gate, lead, warns, extra)
    if runs.ended(row):
        err = row.error if isinstance(row.error, dict) else {}
        hint = join(lead, f"Run ended ({p}): {err.get('message', '')}", cleanup)
        return Reply(command, row.id, "ok", hint, row.version, warnings=warns, extra=extra)
    stuck = runs.gate_message_problem(row)
    if stuck is not None and names_stop:  # the step stops the call; the run stays open
        return _unrendered(command, row, stuck, lead, extra)
    hint = join(done or lead, what_next(row))
    actions = open_entries(row, plan)
    return Reply(
        command, row.id, "ok", hint, row.version, next_actions=actions, warnings=warns, extra=extra
    )


def what_next(row: ExecutionRow) -> str:
    """What comes next on an open run with no open gate: the agent steps ready, each step that
    cannot run, else `No step is ready.`"""
    names = ", ".join(f"'{w['name']}'" for w in runs.open_agent_steps(row))
    said = join(f"{runs.FOR_THE_AGENT}: {names}." if names else "", *runs.cannot_run(row))
    return said or "No step is ready."


def _unrendered(
    command: str,
    row: ExecutionRow,
    stuck: tuple[str, str, str],
    lead: str,
    extra: dict[str, Any],
) -> Reply:
    """A gate whose message could not be rendered stops the call (the run stays open)."""
    step, code, detail = stuck
    return refusal(
        command,
        row.id,
        code,
        detail,
        run_version=row.version,
        action="stop",
        context_hint=join(lead, f"The gate of step '{step}' could not open: {detail}"),
        **{**extra, "stopped_step": step},
    )


def _guard_ending(command: str, row: ExecutionRow, ended_by: dict[str, Any]) -> str:
    g = ended_by["step"]
    if ended_by["arm"] == "guard_abort":
        return f"Guard step '{g}' aborted the run."
    if ended_by["arm"] == "guard_pass_complete":
        return f"Guard step '{g}' passed and completed the run."
    hint = f"Guard step '{g}' failed with a resolution error. Run is terminated."
    if command in ("submit_human_response", "advance_run"):
        hint = join(hint, runs.way_back(row, g))  # the guard is a failed step resume takes
    return hint


def _failed(
    command: str,
    plan: Plan | None,
    row: ExecutionRow,
    lead: str,
    extra: dict[str, Any],
    names_stop: bool,
    cleanup: str,
) -> Reply:
    step, message = runs.failure(row)
    code, error = failure_code(plan, row, step, message)
    if names_stop and step is not None:
        extra = {**extra, "stopped_step": step}
    said = (
        f"Step '{step}' failed, and the run has ended." if step else f"The run failed: {message}."
    )
    hint = join(lead, said, runs.way_back(row, step), cleanup)
    return refusal(
        command,
        row.id,
        code,
        error,
        run_version=row.version,
        action="stop",
        context_hint=hint,
        **extra,
    )


_TOTAL: Final = re.compile(r"\(retries stopped by total_timeout after (\d+) attempts\)$")


def failure_code(
    plan: Plan | None, row: ExecutionRow, step: str | None, message: str
) -> tuple[str, str]:
    """The error code and sentence of a failed run: a handler that is not registered, an
    attempt past `timeout_seconds` (`STEP_TIMEOUT`), retries used up (`STEP_RETRY_EXHAUSTED`),
    or a handler that raised (`ENGINE_HANDLER_FAILED`, `Handler '<h>' raised: <error>`)."""
    err = row.error if isinstance(row.error, dict) else {}
    missing = FunctionNotRegistered.__name__  # the step's function is not registered here
    if missing in message or err.get("type") == missing:
        return "ENGINE_HANDLER_NOT_REGISTERED", message
    if runs.exhausted(row):  # "<code>: <detail>"
        code, _, detail = message.partition(": ")
        return code, detail
    s = plan.step(step) if plan is not None and step is not None else None
    if s is None or s.kind != "auto":
        return "ENGINE_STEP_FAILED", message
    cause = message.split(" failed: ", 1)[-1]
    if cause.startswith("TimeoutError"):
        limit = (s.spec.effective_timeout or 0) * 1000
        return "STEP_TIMEOUT", f"Step '{step}' ran past its limit of {limit}ms"
    if cause.startswith("RetryableFailure") and s.spec.retry is not None:
        tries = s.spec.retry.max_attempts  # every try failed with an error marked retryable
        if cut := _TOTAL.search(cause):  # retry.total_timeout_seconds stopped the retries
            tries = int(cut.group(1))
        return "STEP_RETRY_EXHAUSTED", f"Step '{step}' failed on each of its {tries} attempts"
    if s.handler is None:
        return "ENGINE_STEP_FAILED", message
    return "ENGINE_HANDLER_FAILED", f"Handler '{s.handler}' raised: {cause.split(': ', 1)[-1]}"


def _confirm(
    command: str,
    plan: Plan | None,
    row: ExecutionRow,
    gate: dict[str, Any],
    lead: str,
    warns: list[str],
    extra: dict[str, Any],
) -> Reply:
    view = gate_view(row, gate, plan)
    return Reply(
        command,
        row.id,
        "confirm_required",
        join(lead, envelope.gate_words(view["gate_id"], view["choices"])),
        row.version,
        next_actions=[
            envelope.gate_action(
                row.id,
                gate["key"],
                gate["name"],
                view["choices"],
                claim_token=view.get("claim_token"),
                gate_reply=True,
            )
        ],
        warnings=warns,
        extra={**extra, "gate": view},
    )


def ended_hint(row: ExecutionRow, what: str, records: Sequence[StepRecord]) -> str:
    """`Run '<id>' is already terminal (<phase>); <what>`, then the ways back in."""
    return join(
        f"Run '{row.id}' is already terminal ({runs.phase(row)}); {what}",
        runs.way_back(row, None),
        runs.cleanup_sentence(row.id, runs.left_pending(records)),
    )


def ended(command: str, row: ExecutionRow, what: str, records: Sequence[StepRecord]) -> Reply:
    hint = ended_hint(row, what, records)
    extra = {"run_phase": runs.phase(row), "agent_action": "stop"}
    return Reply(command, row.id, "ok", hint, row.version, extra=extra)


def not_callable(
    plan: Plan | None, row: ExecutionRow, step: str, nonce: str | None
) -> Reply | None:
    """execute_step's refusals once the run is read: a step the workflow does not have, a
    `writer_nonce` on a step that is not an agent step (no other kind takes one)."""
    if plan is None:  # e.g. a created workflow this process no longer holds
        message = f"Workflow '{row.workflow}' of run '{row.id}' cannot be read here."
        return refusal(step, row.id, "STATE_WORKFLOW_UNREADABLE", message, run_version=row.version)
    s = plan.step(step)
    if s is None:
        message = f"Step '{step}' is not in this workflow."
        return refusal(step, row.id, "STEP_NOT_FOUND", message, run_version=row.version)
    if nonce is not None and s.kind != "agent":
        return refusal(
            step,
            row.id,
            "STATE_STEP_NOT_ELIGIBLE",
            f"writer_nonce goes with agent steps, and step '{step}' is a {s.kind} step.",
            run_version=row.version,
            error_details={"step_id": step, "step_type": s.kind, "run_version": row.version},
        )
    return None


def done_names(row: ExecutionRow) -> set[str]:
    out = row.output if isinstance(row.output, dict) else {}
    return set(out.get("outputs", {}))


def waiting_on(
    row: ExecutionRow, gate: dict[str, Any], warnings: list[str], extra: dict[str, Any]
) -> Reply:
    """advance_run at a gate already open: nothing ran; the answer is what comes next."""
    choices = list(gate.get("choices") or [])
    hint = (
        f"Run '{row.id}': nothing ran. The gate of step '{gate['name']}' is still open "
        f"({', '.join(choices)}); submit_human_response answers it."
    )
    return Reply(
        "advance_run",
        row.id,
        "ok",
        hint,
        row.version,
        next_actions=[envelope.gate_action(row.id, gate["key"], gate["name"], choices)],
        warnings=warnings,
        extra={"run_phase": runs.phase(row), **extra},
    )


def completed(step: str, chain: runs.Chain) -> str:
    """`Step '<s>' is done.`: the last auto step the call ran, else `step` (a guard is
    decided in the write of the step before it and is never the one named)."""
    guards = {g["step"] for g in chain.guards}
    ran = [c["step"] for c in chain.chained if c["step"] not in guards]
    return f"Step '{ran[-1] if ran else step}' is done."


def join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def step_entry(
    run_id: str, plan: Plan | None, step: str, *, prompt: str | None = None
) -> dict[str, Any]:
    """An agent step's entry; `prompt` is the open wait's (rendered when the step opened), given
    only when the step declares a prompt."""
    s = plan.step(step) if plan is not None else None
    if s is None or s.prompt is None:
        prompt = None
    elif prompt is None:
        prompt = s.prompt
    return envelope.step_action(
        run_id,
        step,
        description=s.description if s is not None else step,
        input_schema=s.input_schema if s is not None else None,
        prompt=prompt,
    )


def open_entries(row: ExecutionRow, plan: Plan | None) -> list[dict[str, Any]]:
    """What can be called now: the open question's answer first (a gate), then the agent steps
    (no claim token: only the reply that opens the gate carries it)."""
    if runs.ended(row):
        return []
    gate = runs.open_gate(row)
    answer = (
        [envelope.gate_action(row.id, gate["key"], gate["name"], gate.get("choices") or [])]
        if gate is not None
        else []
    )
    return answer + [
        step_entry(row.id, plan, w["name"], prompt=w.get("prompt"))
        for w in runs.open_agent_steps(row)
    ]


def claim_token(gate: dict[str, Any]) -> str:
    """The gate's claim token: a hash of its key and opening time (proof of which reply
    opened it; never required, never decides what is recorded)."""
    basis = f"{gate['key']}|{gate.get('opened_at')}".encode()
    return hashlib.sha256(basis).hexdigest()[:24]


def gate_view(row: ExecutionRow, gate: dict[str, Any], plan: Plan | None) -> dict[str, Any]:
    """The `gate` field of a `confirm_required` reply."""
    choices = list(gate.get("choices") or [])
    view: dict[str, Any] = {
        "gate_id": gate["key"],
        "step_name": gate["name"],
        "preview": gate.get("preview"),
        "choices": choices,
        "response_spec": {"choices": choices},
    }
    if gate.get("prompt"):
        view["display"] = gate["prompt"]
    if gate.get("agent_hint"):
        view["agent_hint"] = gate["agent_hint"]
    if expires := expires_at(gate):
        view["expires_at"] = expires
    view["claim_token"] = claim_token(gate)
    return view


def expires_at(gate: dict[str, Any]) -> str | None:
    """When the gate's time is up: its deadline (`on_expiry` is carried out then), or the time
    a gate with no `on_expiry` only reports."""
    return gate.get("deadline") or gate.get("expires_at")


def pending_gate(row: ExecutionRow, plan: Plan | None) -> dict[str, Any] | None:
    """`get_run_state`'s open question: the gate as it was opened, without its claim token."""
    gate = runs.open_gate(row)
    if gate is None:
        return None
    view = gate_view(row, gate, plan)
    view.pop("claim_token")
    return view
