"""get_run_state's reply: where a run stands, from its row and its step records.

Always: `workflow_id`, `run_phase`, `terminal_state`, `completed_steps`, `in_progress_steps`,
`failed_steps`, `skipped_steps`, `evidence_count`, `last_step`, `created_at`, `updated_at`,
`params`, `next_actions` and `next_actions_status` (`ok`, `awaiting_human`,
`skipped_terminal`, `blocked_on_capability`, `workflow_unresolved`; Tether's worker runs the
engine's steps itself, so `advance_owed` and the claim values do not arise). When they apply:
`pending_gate` (with `opened_at`), `terminal_reason` (not after a guard's abort),
`sealed_by_arm`, `sealed_by_step`, `defaulted_steps`, `rerun_of`, `resumable`, and for a run
in a chain (Tether's: a resume or retry is a new run) `resume_of` / `retry_of` and, on the run
asked about when it went on as another, `successor{run_id, relation}`; the fields
of health.py (`step_claims`, `engine_runnable`, `capability_blocks`, `run_health`,
`skip_details`, `abort_context`), and with `include_steps` each step that ran with its
attempts and a gated step's `answers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.runtime.operations import Operations
from tether.runtime.realm.plan import Plan, PlanStep
from tether.runtime.rows import ExecutionRow, StepRecord
from tether.tools.realm import exhaustion, gates, health, replies, runs
from tether.tools.realm.envelope import Reply

_ENGINE = ("realm:auto:", "realm:guard:", "realm:final:")


async def run_state(
    ops: Operations, plan: Plan | None, row: ExecutionRow, include_steps: bool
) -> dict[str, Any]:
    records = await ops.steps(row.id)
    gate = replies.pending_gate(row, plan)
    stuck = runs.gate_message_problem(row)  # a gate whose message could not be rendered
    waiting = [gate["step_name"]] if gate else [stuck[0]] if stuck else []
    expired = runs.expired_gate(row, records)  # its step is skipped, not completed
    done = [s for s in runs.completed_steps(plan, records) if s not in (*waiting, expired)]
    failed = runs.failed_steps(records)
    spent = runs.failure(row)[0] if runs.exhausted(row) else None
    if spent is not None and spent not in failed:  # runs ended by the older terminate path
        failed.append(spent)
    skipped = runs.skipped_steps(row, records)
    if expired is not None:  # and so are the steps that could only run after it
        skipped += [expired, *runs.unreachable(plan, done, failed, [*skipped, expired])]
    actions = replies.open_entries(row, plan)
    evidence = _evidence(records)
    p = runs.phase(row)
    out = Reply("get_run_state", row.id, "ok", f"Run '{row.id}' is {p}.", row.version)
    wire = out.to_wire()
    wire["next_actions"] = actions
    params = row.input.get("params") if isinstance(row.input, dict) else None
    wire.update(
        workflow_id=row.workflow,
        run_phase=p,
        terminal_state=runs.ended(row),
        completed_steps=done,
        in_progress_steps=waiting,
        failed_steps=failed,
        skipped_steps=skipped,
        evidence_count=len(evidence),
        last_step=evidence[-1] if evidence else None,
        created_at=_utc(row.created_at),
        updated_at=_utc(row.updated_at),
        params=params or {},
        next_actions_status=status(row, plan, actions),
    )
    if gate is not None:
        wire["pending_gate"] = _stored(plan, row, gate)
    wire.update(_sealed(row, records, expired))
    found = health.fields(row, plan, records, waiting, skipped, expired)
    wire["warnings"] = [*wire.get("warnings", []), *found.pop("warnings", [])]
    wire.update(found)
    wire.update(runs.resumable(row))
    if row.predecessor_id is not None:  # the run it replaced (a rerun) or went on from
        made = await _created(ops, row.id)
        for link in ("rerun_of", "resume_of", "retry_of"):
            if made.get(link):
                wire[link] = made[link]
    if row.successor_id is not None:  # this run went on as another: name it
        wire["successor"] = await _successor(ops, row)
        wire["context_hint"] = replies.join(
            wire["context_hint"],
            f"It went on as run '{row.successor_id}' ({wire['successor']['relation']}); read "
            "that run for where the work stands.",
        )
    if defaulted := await defaulted_steps(ops, plan, row, done):
        wire["defaulted_steps"] = defaulted
    if include_steps:
        wire["steps"] = await steps_ran(ops, plan, row, records, done, failed)
    return wire


async def steps_ran(
    ops: Operations,
    plan: Plan | None,
    row: ExecutionRow,
    records: Sequence[StepRecord],
    done: list[str],
    failed: list[str],
) -> dict[str, Any]:
    """`include_steps`: each step that ran and its attempts (`attempt`, `status`); an agent
    step's refused answers are attempts too. Tether makes no model calls, so no `cost`."""
    out: dict[str, Any] = {}
    for s in plan.steps if plan is not None else ():
        answered = _answers(records, s) if s.gate is not None else []
        if answered and s.id not in done:  # answered at its gate, never attempted
            out[s.id] = {"attempts": [], "answers": answered}
        if s.id not in done and s.id not in failed:
            continue
        errors = _failures(records, s.id)
        if s.kind == "agent":
            errors = await exhaustion.rejections(ops, row.id, s.id)
        statuses = ["error"] * errors + (["success"] if s.id in done else [])
        out[s.id] = {
            "attempts": [
                {"attempt": i, "status": st, "cost_unrecorded": "not_driven_by_realm"}
                for i, st in enumerate(statuses or ["error"], 1)
            ]
        }
        if answered:
            out[s.id]["answers"] = answered
    return out


def _answers(records: Sequence[StepRecord], step: PlanStep) -> list[dict[str, Any]]:
    """`answers`: the answer to the step's gate (`choice`, `answered_by`, and why there is no
    `claim_proof`: Tether does not record it). A gate that expired with `abort` has no answer."""
    got = gates.resolution(list(records), step.id)
    if got is None:
        return []
    if got["resolved_by"] == "timeout":
        gate = step.gate
        if gate is None or gate.on_expiry != "settle_default":
            return []
        who = {"by": None, "absent_cause": "settled_by_expiry"}
        return [
            {
                "choice": gate.default_choice,
                "answered_by": who,
                "claim_proof_absent": "settled_by_expiry",
            }
        ]
    by = got.get("by")
    named = {"by": by, "by_source": "stated"} if by else {"by": None, "absent_cause": "not_stated"}
    return [
        {"choice": got["choice"], "answered_by": named, "claim_proof_absent": "proof_not_recorded"}
    ]


def _failures(records: Sequence[StepRecord], step: str) -> int:
    rec = next((r for r in records if r.name == f"realm:auto:{step}"), None)
    if rec is None or not isinstance(rec.result, dict) or "error" not in rec.result:
        return 0
    return int(rec.result.get("failures", 1))


def _stored(plan: Plan | None, row: ExecutionRow, gate: dict[str, Any]) -> dict[str, Any]:
    """The open gate as `pending_gate` shows it: the gate plus the settings it opened with."""
    wait = runs.open_gate(row) or {}
    out = {**gate, "opened_at": wait.get("opened_at")}
    if "display" in gate:
        out["resolved_message"] = gate["display"]
    step = plan.step(gate["step_name"]) if plan is not None else None
    spec = step.gate if step is not None else None
    if spec is not None:
        settings = {
            "owner": spec.owner,
            "resolution_messages": dict(spec.resolution_messages) or None,
            "on_expiry": wait.get("on_expiry"),
            "default_choice": wait.get("default_choice"),
            "reminder_seconds": spec.reminder_seconds,
            "reminder_max": spec.reminder_max if spec.reminder_seconds else None,
        }
        out.update({k: v for k, v in settings.items() if v is not None})
    return out


def status(row: ExecutionRow, plan: Plan | None, actions: list[dict[str, Any]]) -> str:
    """`next_actions_status`: the reason `next_actions` holds what it holds (or nothing)."""
    if runs.ended(row):
        return "skipped_terminal"
    if plan is None:
        return "workflow_unresolved"
    if runs.open_gate(row) is not None:
        return "awaiting_human"
    if any(str(w.get("prompt")).startswith("here") for w in runs.capability_waits(row)):
        return "blocked_on_capability"  # not an input its schema refuses: that is `ok`
    return "ok"


async def defaulted_steps(
    ops: Operations, plan: Plan | None, row: ExecutionRow, done: list[str]
) -> list[str]:
    """The agent steps completed with their `default_output` (validation_exhaustion)."""
    out: list[str] = []
    for s in plan.steps if plan is not None else ():
        budget = s.spec.exhaustion
        if s.kind != "agent" or budget is None or budget.mode != "default" or s.id not in done:
            continue
        if await exhaustion.rejections(ops, row.id, s.id) >= budget.threshold:
            out.append(s.id)
    return out


def _sealed(
    row: ExecutionRow, records: Sequence[StepRecord], expired: str | None
) -> dict[str, Any]:
    """`terminal_reason` (not after a guard's abort), `sealed_by_arm` and `sealed_by_step`."""
    if not runs.ended(row):
        return {}
    p = runs.phase(row)
    err = row.error if isinstance(row.error, dict) else {}
    step = runs.failure(row)[0]
    if p == "completed":
        return {"terminal_reason": "Workflow completed.", "sealed_by_arm": "complete"}
    if p == "abandoned":
        return {"terminal_reason": err.get("message"), "sealed_by_arm": "abandon_requested"}
    if p == "aborted":
        by_expiry = err.get("type") == "GateExpired"
        guard = next((r for r in reversed(records) if r.name.startswith("realm:guard:")), None)
        at = guard.name.removeprefix("realm:guard:") if guard and not by_expiry else step
        arm = "gate_expiry_abort" if by_expiry else "guard_abort"
        at = expired or at
        sealed = {"sealed_by_arm": arm, **({"sealed_by_step": at} if at else {})}
        return {"terminal_reason": err.get("message"), **sealed} if by_expiry else sealed
    out = {"terminal_reason": err.get("message"), "sealed_by_arm": "step_failure"}
    return {**out, "sealed_by_step": step} if step else out


async def _created(ops: Operations, run_id: str) -> dict[str, Any]:
    """What the run's `created` event says of where it came from."""
    made = next((e for e in await ops.history(run_id) if e.type == "created"), None)
    return made.data if made is not None and isinstance(made.data, dict) else {}


async def _successor(ops: Operations, row: ExecutionRow) -> dict[str, Any]:
    """`successor{run_id, relation}`: the run this one went on as, and how (`resumed` from a
    failed step, or `retried`)."""
    assert row.successor_id is not None  # noqa: S101 — called for a run with a successor
    made = await _created(ops, row.successor_id)
    relation = "resumed" if made.get("resume_of") else "retried"
    return {"run_id": row.successor_id, "relation": relation}


def _evidence(records: Sequence[StepRecord]) -> list[str]:
    """The steps that left evidence, in the order they did: an engine step's record, an agent
    step's answer."""
    out: list[str] = []
    for r in sorted(records, key=_seq):
        if r.done and r.name.startswith(_ENGINE):
            out.append(next(r.name.removeprefix(p) for p in _ENGINE if r.name.startswith(p)))
        out += [step for step, _ in runs.agent_answers(r)]
    return out


def _seq(r: StepRecord) -> int:
    return r.seq


def _utc(when: Any) -> str:
    return when.isoformat().replace("+00:00", "Z") if hasattr(when, "isoformat") else str(when)
